"""GPU check and benchmark of the CuTe DSL acceptance kernel (kernels/acceptance_kernel.py).

    python benchmarks/kernel_gpu.py [--rows 4096] [--vocab 163840] [--dtype bf16] [--iters 10]
    python benchmarks/kernel_gpu.py --cubin DIR       # no nvidia-cutlass-dsl on the GPU box
    python benchmarks/kernel_gpu.py --emit-cubin DIR  # anywhere with the DSL, no GPU needed

Prints one JSON document: the kernel's max abs error on the expected acceptance against the
float64 torch reference (must be ≤ 1e-3; argmaxes must match exactly), its time, the
bytes it moves per second (two passes over both logit arrays) against the device's
measured copy bandwidth (a torch device-to-device copy of the same bytes), and the time of
a plain float32 torch implementation. Exit status 1 with a one-line reason on stderr when
no GPU is present, the check fails, or the kernel cannot be loaded.

Kernel source: with nvidia-cutlass-dsl installed, the kernel is compiled here for this GPU.
Without it, `--cubin DIR` loads `acceptance_<arch>_<dtype>.cubin` written earlier by
`--emit-cubin DIR` (CI can keep those files as artifacts) through the CUDA driver API
(libcuda via ctypes, torch for memory). The fallback needs V to be a multiple of 8 (bf16)
or 4 (fp32) and relies on the CuTe ABI observed in 4.8.1's PTX: each logits tensor is a
32-byte parameter {pointer, N, V, row stride}, each output a 16-byte {pointer, N}, then the
f32 1/T; the script checks the parameter sizes in the PTX beside the cubin and refuses
anything else.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ERROR_TOLERANCE = 1e-3


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


def cuda_events_time(fn, iters: int) -> float:
    """Median seconds per call, by CUDA events, after one warm-up call."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


class CubinKernel:
    """The kernel loaded from a cubin with the driver API (no DSL needed)."""

    PARAM_SIZES = [32, 32, 16, 16, 16, 16, 4]

    def __init__(self, cubin_path: Path):
        ptx_path = cubin_path.with_suffix(".ptx")
        if not ptx_path.exists():
            fail(f"{ptx_path}: the PTX beside the cubin is needed to check the parameter layout")
        ptx = ptx_path.read_text()
        entry = re.search(r"\.entry (\w+)\(", ptx)
        if not entry:
            fail(f"{ptx_path}: no .entry")
        self.name = entry.group(1)
        sizes = [int(s) for s in re.findall(rf"\.param \.align \d+ \.b8 {self.name}_param_\d+\[(\d+)\]", ptx)]
        sizes += [4 for _ in re.findall(rf"\.param \.(?:f32|b32) {self.name}_param_\d+", ptx)]
        if sizes != self.PARAM_SIZES:
            fail(f"{ptx_path}: kernel parameters {sizes} differ from the expected {self.PARAM_SIZES}")
        try:
            self.cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            fail(f"cannot load libcuda.so.1 ({exc})")
        self.module = ctypes.c_void_p()
        data = cubin_path.read_bytes()
        self._check(self.cuda.cuModuleLoadData(ctypes.byref(self.module), ctypes.c_char_p(data)), "cuModuleLoadData")
        self.function = ctypes.c_void_p()
        self._check(self.cuda.cuModuleGetFunction(ctypes.byref(self.function), self.module, self.name.encode()),
                    "cuModuleGetFunction")

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            fail(f"{what} failed with CUDA driver error {status}")

    def __call__(self, target, draft, expected, target_argmax, draft_argmax, status, inv_temperature: float):
        import torch

        n, v = target.shape
        logits = lambda x: (ctypes.c_int64 * 4)(x.data_ptr(), n, v, x.stride(0))  # noqa: E731
        output = lambda x: (ctypes.c_int64 * 2)(x.data_ptr(), n)  # noqa: E731
        params = [logits(target), logits(draft), output(expected), output(target_argmax),
                  output(draft_argmax), output(status), ctypes.c_float(inv_temperature)]
        pointers = (ctypes.c_void_p * len(params))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in params])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(self.cuda.cuLaunchKernel(self.function, n, 1, 1, 256, 1, 1, 0, stream, pointers, None),
                    "cuLaunchKernel")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=163_840)
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--cubin", type=Path, help="folder of cubins from --emit-cubin (no DSL needed)")
    parser.add_argument("--emit-cubin", type=Path, help="compile cubins + PTX into this folder and exit")
    args = parser.parse_args()

    if args.emit_cubin:
        print(json.dumps({"cubins": emit_cubins(args.emit_cubin)}))
        return

    try:
        import torch
    except ImportError:
        fail("torch is not installed")
    if not torch.cuda.is_available():
        fail("no CUDA GPU present (torch.cuda.is_available() is False)")

    from kernels.acceptance import cuda_arch, cutlass_available
    from kernels.reference import acceptance_torch

    device = torch.device("cuda")
    arch = cuda_arch(torch.cuda.get_device_capability(device))
    n, v = args.rows, args.vocab
    torch_dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    vec = 8 if args.dtype == "bf16" else 4
    if v % vec:
        fail(f"--vocab {v} must be a multiple of {vec} for the vectorized kernel")
    generator = torch.Generator(device=device).manual_seed(0)
    target = (torch.randn(n, v, device=device, generator=generator) * 3).to(torch_dtype)
    draft = (target.float() + torch.randn(n, v, device=device, generator=generator)).to(torch_dtype)
    draft[: n // 8, : v // 4] = -torch.inf  # some masked vocabulary, as with grammar masks
    expected = torch.empty(n, dtype=torch.float32, device=device)
    target_argmax = torch.empty(n, dtype=torch.int32, device=device)
    draft_argmax = torch.empty(n, dtype=torch.int32, device=device)
    status = torch.empty(n, dtype=torch.int32, device=device)
    inv_t = 1.0 / args.temperature

    if args.cubin is None:
        if not cutlass_available():
            fail("nvidia-cutlass-dsl is not importable: install nvidia-cutlass-dsl==4.8.1 or pass --cubin DIR")
        from cutlass import Float32
        from cutlass.cute.runtime import from_dlpack

        from kernels.acceptance import _compiled

        compiled = _compiled(arch, args.dtype, vec)
        bound = [from_dlpack(target, assumed_align=16), from_dlpack(draft, assumed_align=16),
                 from_dlpack(expected), from_dlpack(target_argmax), from_dlpack(draft_argmax),
                 from_dlpack(status)]
        launch = lambda: compiled(*bound, Float32(inv_t))  # noqa: E731
        source = f"cute-dsl compiled for {arch}"
    else:
        cubin = args.cubin / f"acceptance_{arch}_{args.dtype}.cubin"
        if not cubin.exists():
            fail(f"{cubin}: no cubin for this GPU ({arch}); make one with --emit-cubin")
        kernel = CubinKernel(cubin)
        launch = lambda: kernel(target, draft, expected, target_argmax, draft_argmax, status, inv_t)  # noqa: E731
        source = f"cubin {cubin}"

    try:
        launch()
        torch.cuda.synchronize()
    except Exception as exc:  # the DSL and the driver raise many kinds
        fail(f"kernel launch failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    if int(status.abs().sum()):
        fail(f"kernel flagged {int((status != 0).sum())} rows as bad on finite input")

    reference = acceptance_torch(target, draft, args.temperature)
    max_abs_error = float((expected.double().cpu() - torch.from_numpy(reference.expected)).abs().max())
    argmax_mismatches = int((target_argmax.cpu().long() != torch.from_numpy(reference.target_argmax)).sum()
                            + (draft_argmax.cpu().long() != torch.from_numpy(reference.draft_argmax)).sum())

    kernel_s = cuda_events_time(launch, args.iters)
    input_bytes = 2 * target.numel() * target.element_size()
    bytes_moved = 2 * input_bytes  # two passes over both arrays
    flat = torch.cat([target.reshape(-1), draft.reshape(-1)])
    copy_dst = torch.empty_like(flat)
    copy_s = cuda_events_time(lambda: copy_dst.copy_(flat), args.iters)
    copy_bandwidth = 2 * input_bytes / copy_s  # a copy reads and writes every byte
    del flat, copy_dst

    def plain_torch():
        p = torch.softmax(target.float() * inv_t, dim=-1)
        q = torch.softmax(draft.float() * inv_t, dim=-1)
        return torch.minimum(p, q).sum(-1), target.argmax(-1) == draft.argmax(-1)

    torch_s = cuda_events_time(plain_torch, max(3, args.iters // 3))

    report = {
        "device": torch.cuda.get_device_name(device),
        "arch": arch,
        "kernel_source": source,
        "rows": n,
        "vocab": v,
        "dtype": args.dtype,
        "temperature": args.temperature,
        "max_abs_error": max_abs_error,
        "error_tolerance": ERROR_TOLERANCE,
        "argmax_mismatches": argmax_mismatches,
        "kernel_ms": kernel_s * 1e3,
        "kernel_bytes_moved": bytes_moved,
        "kernel_bandwidth_gb_s": bytes_moved / kernel_s / 1e9,
        "copy_bandwidth_gb_s": copy_bandwidth / 1e9,
        "fraction_of_copy_bandwidth": (bytes_moved / kernel_s) / copy_bandwidth,
        "plain_torch_fp32_ms": torch_s * 1e3,
        "speedup_vs_plain_torch": torch_s / kernel_s,
        "passed": max_abs_error <= ERROR_TOLERANCE and argmax_mismatches == 0,
    }
    print(json.dumps(report))
    if not report["passed"]:
        fail(f"check failed: max abs error {max_abs_error:.3g} (tolerance {ERROR_TOLERANCE}), "
             f"{argmax_mismatches} argmax mismatches")


if __name__ == "__main__":
    main()
