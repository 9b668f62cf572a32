"""GPU check and benchmark of the CuTe DSL acceptance kernel (kernels/acceptance_kernel.py).

    python benchmarks/kernel_gpu.py [--rows 4096] [--vocab 163840] [--dtype bf16] [--iters 10]
    python benchmarks/kernel_gpu.py --cubin DIR       # no nvidia-cutlass-dsl on the GPU box
    python benchmarks/kernel_gpu.py --emit-cubin DIR  # anywhere with the DSL, no GPU needed

Prints one JSON document (``kernel_check``): the kernel's max abs error on the expected
acceptance against the float64 torch reference (≤ 1e-3; argmaxes must match exactly), its
time, the bytes it moves per second (two passes over both logit arrays) against the
device's copy bandwidth measured in the same run (a torch device-to-device copy of the
same bytes; ≥ 80%), and its time against a plain float32 torch implementation (≥ 3×
faster). Exit status 1 with a one-line reason on stderr when no GPU is present, a check
fails, or the kernel cannot be loaded. benchmarks/gpu_checks.py runs it with the other GPU
checks.

Kernel source: with nvidia-cutlass-dsl installed, the kernel is compiled here for this GPU.
Without it, `--cubin DIR` loads `acceptance_<arch>_<dtype>.cubin` written earlier by
`--emit-cubin DIR` through the CUDA driver API (libcuda via ctypes, torch for memory). The
fallback needs V to be a multiple of 8 (bf16) or 4 (fp32) and relies on the CuTe ABI seen
in 4.8.1's PTX: each logits tensor is a 32-byte parameter {pointer, N, V, row stride}, each
output a 16-byte {pointer, N}, then the f32 1/T. ``check_cubin_layout`` compares the PTX
beside the cubin (entry name, parameter sizes, the offsets the kernel reads, its required
block size) with what ``launch_arguments`` packs, and refuses any difference — on the CPU,
before any device time is spent.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ERROR_TOLERANCE = 1e-3
MIN_FRACTION_OF_COPY_BANDWIDTH = 0.80
MIN_SPEEDUP_VS_PLAIN_TORCH = 3.0
VECTOR_WIDTH = {"bf16": 8, "fp32": 4}  # logits per 16-byte load (kernels.acceptance_kernel)


class KernelCheckError(Exception):
    """A check that cannot go on; one line naming what failed."""


def fail(message: str) -> None:
    print(f"kernel_gpu: {message}", file=sys.stderr)
    sys.exit(1)


def emit_cubins(folder: Path, dtypes=("bf16", "fp32"), archs=("sm_90a", "sm_100a")) -> dict:
    from kernels.acceptance_kernel import compile_kernel_ptx

    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for arch in archs:
        for dtype in dtypes:
            kernel = compile_kernel_ptx(arch, dtype, folder / f"dump_{arch}_{dtype}")
            stem = folder / f"acceptance_{arch}_{dtype}"
            stem.with_suffix(".cubin").write_bytes(kernel.cubin)
            stem.with_suffix(".ptx").write_text(kernel.ptx)
            written[f"{arch}/{dtype}"] = str(stem.with_suffix(".cubin"))
    return written


# ---------------------------------------------------------------------------------------
# the loader's side of the ABI, checkable without a GPU


def launch_arguments(target, draft, outputs, inv_temperature: float) -> list:
    """The kernel's parameters as the loader passes them: logits {ptr, N, V, row stride}
    (int64 ×4), outputs {ptr, N} (int64 ×2), then f32 1/T. ``target``/``draft`` need
    ``data_ptr()``, ``shape`` and ``stride(0)``; ``outputs`` the four output tensors."""
    n, v = target.shape
    logits = [(ctypes.c_int64 * 4)(x.data_ptr(), n, v, x.stride(0)) for x in (target, draft)]
    outs = [(ctypes.c_int64 * 2)(x.data_ptr(), n) for x in outputs]
    return [*logits, *outs, ctypes.c_float(inv_temperature)]


@dataclass(frozen=True)
class PtxLayout:
    """What the PTX says the kernel takes: its entry, each parameter's size in bytes, the
    byte offsets it reads in each parameter, and the block size it requires."""

    entry: str
    param_sizes: tuple[int, ...]
    read_offsets: tuple[tuple[int, ...], ...]
    block_threads: int


def ptx_layout(ptx: str, where: str = "PTX") -> PtxLayout:
    entry = re.search(r"\.entry (\w+)\(", ptx)
    if not entry:
        raise KernelCheckError(f"{where}: no .entry")
    name = entry.group(1)
    sizes: dict[int, int] = {}
    for index, size in re.findall(rf"\.param \.align \d+ \.b8 {name}_param_(\d+)\[(\d+)\]", ptx):
        sizes[int(index)] = int(size)
    for kind, index in re.findall(rf"\.param \.(f32|b32|u32|s32|f64|b64|u64|s64) {name}_param_(\d+)\b", ptx):
        sizes[int(index)] = int(kind[1:]) // 8
    if sorted(sizes) != list(range(len(sizes))):
        raise KernelCheckError(f"{where}: parameters of {name} are not numbered 0..{len(sizes) - 1}")
    offsets: dict[int, set[int]] = {i: set() for i in sizes}
    for index, offset in re.findall(rf"ld\.param\.\w+\s+%\w+,\s*\[{name}_param_(\d+)(?:\+(\d+))?\]", ptx):
        offsets[int(index)].add(int(offset or 0))
    threads = re.search(r"\.reqntid (\d+)(?:, (\d+))?(?:, (\d+))?", ptx)
    if not threads:
        raise KernelCheckError(f"{where}: no .reqntid (the launch's block size is not fixed by the kernel)")
    block = 1
    for dim in threads.groups():
        block *= int(dim or 1)
    return PtxLayout(
        entry=name,
        param_sizes=tuple(sizes[i] for i in range(len(sizes))),
        read_offsets=tuple(tuple(sorted(offsets[i])) for i in range(len(sizes))),
        block_threads=block,
    )


class _FakeTensor:
    """Shape and strides only: enough for ``launch_arguments`` on a machine with no GPU."""

    def __init__(self, shape):
        self.shape = shape

    def data_ptr(self) -> int:
        return 0

    def stride(self, dim: int) -> int:
        return self.shape[1] if dim == 0 and len(self.shape) == 2 else 1


def check_cubin_layout(cubin_path: Path) -> PtxLayout:
    """The cubin and its PTX agree with what ``launch_arguments`` passes: same entry in both
    files, one packed argument per parameter of the same size, every offset the kernel
    reads inside the fields packed there, and a block size the kernel fixes. Raises
    KernelCheckError with one line otherwise. Needs no GPU."""
    ptx_path = cubin_path.with_suffix(".ptx")
    for p in (cubin_path, ptx_path):
        if not p.exists():
            raise KernelCheckError(f"{p}: missing (make one with --emit-cubin)")
    layout = ptx_layout(ptx_path.read_text(), str(ptx_path))
    cubin = cubin_path.read_bytes()
    if cubin[:4] != b"\x7fELF":
        raise KernelCheckError(f"{cubin_path}: not an ELF cubin")
    if layout.entry.encode() not in cubin:
        raise KernelCheckError(f"{cubin_path}: entry {layout.entry[:40]}… of the PTX beside it is not in the cubin")
    shape = (4, 64)
    packed = launch_arguments(_FakeTensor(shape), _FakeTensor(shape), [_FakeTensor(shape[:1])] * 4, 1.0)
    packed_sizes = tuple(ctypes.sizeof(p) for p in packed)
    if packed_sizes != layout.param_sizes:
        raise KernelCheckError(
            f"{ptx_path}: kernel parameters {list(layout.param_sizes)} differ from the loader's {list(packed_sizes)}"
        )
    for index, (offsets, size) in enumerate(zip(layout.read_offsets, layout.param_sizes)):
        if any(offset >= size for offset in offsets):
            raise KernelCheckError(f"{ptx_path}: parameter {index} is read at {list(offsets)}, past its {size} bytes")
    return layout


class CubinKernel:
    """The kernel loaded from a cubin with the driver API (no DSL needed)."""

    def __init__(self, cubin_path: Path):
        self.layout = check_cubin_layout(cubin_path)
        try:
            self.cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise KernelCheckError(f"cannot load libcuda.so.1 ({exc})") from None
        self.module = ctypes.c_void_p()
        data = cubin_path.read_bytes()
        self._check(self.cuda.cuModuleLoadData(ctypes.byref(self.module), ctypes.c_char_p(data)), "cuModuleLoadData")
        self.function = ctypes.c_void_p()
        self._check(
            self.cuda.cuModuleGetFunction(ctypes.byref(self.function), self.module, self.layout.entry.encode()),
            "cuModuleGetFunction",
        )

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise KernelCheckError(f"{what} failed with CUDA driver error {status}")

    def __call__(self, target, draft, expected, target_argmax, draft_argmax, status, inv_temperature: float):
        import torch

        params = launch_arguments(target, draft, (expected, target_argmax, draft_argmax, status), inv_temperature)
        pointers = (ctypes.c_void_p * len(params))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in params])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rows = target.shape[0]
        self._check(
            self.cuda.cuLaunchKernel(self.function, rows, 1, 1, self.layout.block_threads, 1, 1, 0, stream, pointers, None),
            "cuLaunchKernel",
        )


# ---------------------------------------------------------------------------------------
# timing and the check itself


def median_seconds(fn, iters: int, device) -> float:
    """Median seconds per call after one warm-up call: CUDA events on a GPU, the wall clock
    on a CPU (the dry run)."""
    import time

    import torch

    fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize()
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def _random_logits(n: int, v: int, torch_dtype, device):
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    target = (torch.randn(n, v, device=device, generator=generator) * 3).to(torch_dtype)
    draft = (target.float() + torch.randn(n, v, device=device, generator=generator)).to(torch_dtype)
    draft[: max(1, n // 8), : v // 4] = -torch.inf  # some masked vocabulary, as with grammar masks
    return target, draft


def _kernel_launcher(cubin_dir: Path | None, arch: str, dtype: str, tensors, inv_t: float):
    """(launch, source): the compiled DSL kernel, or the cubin through the driver API."""
    if cubin_dir is None:
        from kernels.acceptance import _compiled, cutlass_available

        if not cutlass_available():
            raise KernelCheckError("nvidia-cutlass-dsl is not importable: install nvidia-cutlass-dsl==4.8.1 or pass --cubin DIR")
        from cutlass import Float32
        from cutlass.cute.runtime import from_dlpack

        compiled = _compiled(arch, dtype, VECTOR_WIDTH[dtype])
        target, draft, *outputs = tensors
        bound = [from_dlpack(target, assumed_align=16), from_dlpack(draft, assumed_align=16),
                 *(from_dlpack(x) for x in outputs)]
        return (lambda: compiled(*bound, Float32(inv_t))), f"cute-dsl compiled for {arch}"
    cubin = cubin_dir / f"acceptance_{arch}_{dtype}.cubin"
    if not cubin.exists():
        raise KernelCheckError(f"{cubin}: no cubin for this GPU ({arch}); make one with --emit-cubin")
    kernel = CubinKernel(cubin)
    return (lambda: kernel(*tensors, inv_t)), f"cubin {cubin}"


def _reference_launcher(tensors, temperature: float):
    """The dry run's stand-in for the kernel: the NumPy reference writing the same outputs,
    so the comparison code runs end to end on a CPU."""
    import torch

    from kernels.reference import acceptance_numpy

    target, draft, expected, target_argmax, draft_argmax, status = tensors

    def launch():
        r = acceptance_numpy(target.float().numpy(), draft.float().numpy(), temperature)
        expected.copy_(torch.from_numpy(r.expected))
        target_argmax.copy_(torch.from_numpy(r.target_argmax))
        draft_argmax.copy_(torch.from_numpy(r.draft_argmax))
        status.zero_()

    return launch, "dry run: NumPy reference standing in for the kernel"


def run_kernel_check(*, rows: int, vocab: int, dtype: str = "bf16", temperature: float = 1.0,
                     iters: int = 10, cubin_dir: Path | None = None, dry_run: bool = False) -> dict:
    """The kernel against the torch reference, the copy bandwidth and plain torch. On a CPU
    (``dry_run``) the NumPy reference stands in for the kernel and the bandwidth and
    speed thresholds are not judged (``passed`` covers agreement only)."""
    import torch

    from kernels.acceptance import cuda_arch
    from kernels.reference import acceptance_torch

    if dtype not in VECTOR_WIDTH:
        raise KernelCheckError(f"dtype {dtype!r}: expected one of {sorted(VECTOR_WIDTH)}")
    if vocab % VECTOR_WIDTH[dtype]:
        raise KernelCheckError(f"vocab {vocab} must be a multiple of {VECTOR_WIDTH[dtype]} for the vectorized kernel")
    if dry_run:
        device, arch = torch.device("cpu"), "cpu"
    else:
        if not torch.cuda.is_available():
            raise KernelCheckError("no CUDA GPU present (torch.cuda.is_available() is False)")
        device = torch.device("cuda")
        arch = cuda_arch(torch.cuda.get_device_capability(device))
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    target, draft = _random_logits(rows, vocab, torch_dtype, device)
    expected = torch.empty(rows, dtype=torch.float32, device=device)
    target_argmax = torch.empty(rows, dtype=torch.int32, device=device)
    draft_argmax = torch.empty(rows, dtype=torch.int32, device=device)
    status = torch.empty(rows, dtype=torch.int32, device=device)
    tensors = (target, draft, expected, target_argmax, draft_argmax, status)
    inv_t = 1.0 / temperature
    if dry_run:
        launch, source = _reference_launcher(tensors, temperature)
    else:
        launch, source = _kernel_launcher(cubin_dir, arch, dtype, tensors, inv_t)

    try:
        launch()
        if device.type == "cuda":
            torch.cuda.synchronize()
    except KernelCheckError:
        raise
    except Exception as exc:  # the DSL and the driver raise many kinds
        raise KernelCheckError(f"kernel launch failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    if int(status.abs().sum()):
        raise KernelCheckError(f"kernel flagged {int((status != 0).sum())} rows as bad on finite input")

    reference = acceptance_torch(target, draft, temperature)
    max_abs_error = float((expected.double().cpu() - torch.from_numpy(reference.expected)).abs().max())
    argmax_mismatches = int((target_argmax.cpu().long() != torch.from_numpy(reference.target_argmax)).sum()
                            + (draft_argmax.cpu().long() != torch.from_numpy(reference.draft_argmax)).sum())

    kernel_s = median_seconds(launch, iters, device)
    input_bytes = 2 * target.numel() * target.element_size()
    bytes_moved = 2 * input_bytes  # two passes over both arrays
    flat = torch.cat([target.reshape(-1), draft.reshape(-1)])
    copy_dst = torch.empty_like(flat)
    copy_s = median_seconds(functools.partial(copy_dst.copy_, flat), iters, device)
    copy_bandwidth = 2 * input_bytes / copy_s  # a copy reads and writes every byte
    del flat, copy_dst

    def plain_torch():
        p = torch.softmax(target.float() * inv_t, dim=-1)
        q = torch.softmax(draft.float() * inv_t, dim=-1)
        return torch.minimum(p, q).sum(-1), target.argmax(-1) == draft.argmax(-1)

    torch_s = median_seconds(plain_torch, max(3, iters // 3), device)
    fraction = (bytes_moved / kernel_s) / copy_bandwidth
    speedup = torch_s / kernel_s
    checks = {
        "agreement": max_abs_error <= ERROR_TOLERANCE and argmax_mismatches == 0,
        "bandwidth": None if dry_run else fraction >= MIN_FRACTION_OF_COPY_BANDWIDTH,
        "speed": None if dry_run else speedup >= MIN_SPEEDUP_VS_PLAIN_TORCH,
    }
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (dry run)",
        "arch": arch,
        "kernel_source": source,
        "rows": rows,
        "vocab": vocab,
        "dtype": dtype,
        "temperature": temperature,
        "max_abs_error": max_abs_error,
        "error_tolerance": ERROR_TOLERANCE,
        "argmax_mismatches": argmax_mismatches,
        "kernel_ms": kernel_s * 1e3,
        "kernel_bytes_moved": bytes_moved,
        "kernel_bandwidth_gb_s": bytes_moved / kernel_s / 1e9,
        "copy_bandwidth_gb_s": copy_bandwidth / 1e9,
        "fraction_of_copy_bandwidth": fraction,
        "min_fraction_of_copy_bandwidth": MIN_FRACTION_OF_COPY_BANDWIDTH,
        "plain_torch_fp32_ms": torch_s * 1e3,
        "speedup_vs_plain_torch": speedup,
        "min_speedup_vs_plain_torch": MIN_SPEEDUP_VS_PLAIN_TORCH,
        "checks": checks,
        "passed": all(v is not False for v in checks.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=163_840)
    parser.add_argument("--dtype", choices=sorted(VECTOR_WIDTH), default="bf16")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--cubin", type=Path, help="folder of cubins from --emit-cubin (no DSL needed)")
    parser.add_argument("--emit-cubin", type=Path, help="compile cubins + PTX into this folder and exit")
    args = parser.parse_args()

    if args.emit_cubin:
        print(json.dumps({"cubins": emit_cubins(args.emit_cubin)}))
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        fail("torch is not installed")
    try:
        report = run_kernel_check(rows=args.rows, vocab=args.vocab, dtype=args.dtype, temperature=args.temperature,
                                  iters=args.iters, cubin_dir=args.cubin)
    except KernelCheckError as exc:
        fail(str(exc))
    print(json.dumps(report))
    if not report["passed"]:
        failed = ", ".join(k for k, v in report["checks"].items() if v is False)
        fail(f"check failed ({failed}): max abs error {report['max_abs_error']:.3g} (tolerance {ERROR_TOLERANCE}), "
             f"{report['argmax_mismatches']} argmax mismatches, {report['fraction_of_copy_bandwidth']:.0%} of copy "
             f"bandwidth, {report['speedup_vs_plain_torch']:.1f}× plain torch")


if __name__ == "__main__":
    main()
