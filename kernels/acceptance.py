"""One entry for the per-row acceptance of draft logits against target logits.

``acceptance_per_row(target_logits, draft_logits, temperature) -> RowAcceptance`` picks
  1. the CuTe DSL kernel (kernels/acceptance_kernel.py) when torch sees a CUDA GPU and
     ``cutlass`` imports,
  2. else the torch reference when torch is installed,
  3. else the NumPy reference.
Definitions and error rules: kernels/rows.py.
"""

from __future__ import annotations

import functools

import numpy as np

from .reference import acceptance_numpy, acceptance_torch
from .rows import DEFAULT_NAMES, LogitsError, RowAcceptance, check_shapes, check_temperature, row_error

BACKENDS = ("auto", "cute", "torch", "numpy")


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    return True


def cuda_gpu_present() -> bool:
    """A safe probe: True only when torch imports and sees a CUDA device (never raises;
    loading libcuda directly raises OSError on machines without a driver)."""
    try:
        import torch

        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:
        return False


def cutlass_available() -> bool:
    try:
        import cutlass  # noqa: F401
        import cutlass.cute  # noqa: F401
    except Exception:
        return False
    return True


def select_backend(requested: str = "auto") -> str:
    if requested not in BACKENDS:
        raise LogitsError(f"unknown backend {requested!r}: expected one of {', '.join(BACKENDS)}")
    if requested != "auto":
        return requested
    if cuda_gpu_present() and cutlass_available():
        return "cute"
    if torch_available():
        return "torch"
    return "numpy"


def acceptance_per_row(
    target_logits, draft_logits, temperature, *, backend: str = "auto", names=DEFAULT_NAMES
) -> RowAcceptance:
    """expected[n] = Σ_v min(softmax(t_n/T)_v, softmax(d_n/T)_v); greedy[n] = argmax agreement.

    target_logits, draft_logits: [N, V] NumPy arrays or torch tensors (fp32, bf16, fp16,
    fp64). ``names`` label the two inputs in error messages (the CLI passes file names).
    """
    chosen = select_backend(backend)
    if chosen == "numpy":
        return acceptance_numpy(target_logits, draft_logits, temperature, names=names)
    if chosen == "torch":
        return acceptance_torch(target_logits, draft_logits, temperature, names=names)
    return acceptance_cute(target_logits, draft_logits, temperature, names=names)


# ---------------------------------------------------------------------------------------
# CuTe DSL path (needs a CUDA GPU)


def cuda_arch(capability: tuple[int, int]) -> str:
    """sm_XY for a compute capability; Hopper and later get the arch-specific 'a' target."""
    major, minor = capability
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


@functools.lru_cache(maxsize=None)
def _compiled(arch: str, dtype: str, vec: int):
    import tempfile

    from .acceptance_kernel import compile_kernel

    return compile_kernel(arch, dtype, tempfile.mkdtemp(prefix="specdec-kernel-"), vec=vec).compiled


_TORCH_DTYPE_NAMES = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}


def acceptance_cute(target_logits, draft_logits, temperature, *, names=DEFAULT_NAMES) -> RowAcceptance:
    """Run ``acceptance_rows_kernel`` on the current CUDA device (inputs copied there)."""
    import torch
    from cutlass import Float32
    from cutlass.cute.runtime import from_dlpack

    from .acceptance_kernel import (
        STATUS_DRAFT_ALL_MASKED,
        STATUS_DRAFT_NONFINITE,
        STATUS_TARGET_ALL_MASKED,
        STATUS_TARGET_NONFINITE,
        vector_width,
    )

    temperature = check_temperature(temperature)
    device = torch.device("cuda", torch.cuda.current_device())
    def on_device(x):
        if isinstance(x, torch.Tensor):
            return x.to(device)
        return torch.from_numpy(np.array(x)).to(device)  # a copy: mapped arrays are read-only

    target, draft = on_device(target_logits), on_device(draft_logits)
    n, vocab = check_shapes(target.shape, draft.shape, names)
    if target.dtype != draft.dtype:
        raise LogitsError(f"{names[0]} dtype {target.dtype} differs from {names[1]} dtype {draft.dtype}")
    if target.dtype == torch.float64:  # the kernel reads 16/32-bit logits
        target, draft = target.float(), draft.float()
    dtype = _TORCH_DTYPE_NAMES.get(str(target.dtype).removeprefix("torch."))
    if dtype is None:
        raise LogitsError(f"{names[0]}: unsupported dtype {target.dtype} for the CuTe kernel")
    target, draft = target.contiguous(), draft.contiguous()
    vec = vector_width(dtype)
    aligned = all(x.data_ptr() % 16 == 0 for x in (target, draft))
    if vocab % vec or not aligned:
        vec = 1  # scalar loads: rows of odd length or unaligned storage
    compiled = _compiled(cuda_arch(torch.cuda.get_device_capability(device)), dtype, vec)

    expected = torch.empty(n, dtype=torch.float32, device=device)
    target_argmax = torch.empty(n, dtype=torch.int32, device=device)
    draft_argmax = torch.empty(n, dtype=torch.int32, device=device)
    status = torch.empty(n, dtype=torch.int32, device=device)
    align = 16 if vec > 1 else target.element_size()
    torch.cuda.synchronize(device)  # the launch uses the default stream
    compiled(
        from_dlpack(target, assumed_align=align),
        from_dlpack(draft, assumed_align=align),
        from_dlpack(expected),
        from_dlpack(target_argmax),
        from_dlpack(draft_argmax),
        from_dlpack(status),
        Float32(1.0 / temperature),
    )
    torch.cuda.synchronize(device)

    status_np = status.cpu().numpy()
    for bit, name, nonfinite in (
        (STATUS_TARGET_NONFINITE, names[0], True),
        (STATUS_DRAFT_NONFINITE, names[1], True),
        (STATUS_TARGET_ALL_MASKED, names[0], False),
        (STATUS_DRAFT_ALL_MASKED, names[1], False),
    ):
        rows = np.flatnonzero(status_np & bit)
        if rows.size:
            raise row_error(name, int(rows[0]), nonfinite)
    ta = target_argmax.cpu().numpy().astype(np.int64)
    da = draft_argmax.cpu().numpy().astype(np.int64)
    return RowAcceptance(
        expected=expected.cpu().numpy().astype(np.float64),
        greedy=ta == da,
        target_argmax=ta,
        draft_argmax=da,
        backend="cute",
    )
