"""CuTe DSL (nvidia-cutlass-dsl) kernels for offline acceptance evaluation (optional `gpu` extra).

acceptance_per_row(target_logits, draft_logits, temperature) -> RowAcceptance
    per-row Σ min(p, q) and greedy agreement (CuTe kernel on a GPU, else torch, else NumPy)
compile_kernel_ptx(arch, dtype, dump_dir) -> CompiledKernel(ptx, cubin)  (needs cutlass, no GPU)
replay_logits / replay_from_acceptance: survival of drafts along recorded sequences.
Importing this package does not import torch or cutlass.
"""

from .acceptance import acceptance_per_row, cuda_gpu_present, cutlass_available
from .rows import LogitsError, RowAcceptance


def compile_kernel_ptx(arch: str, dtype: str, dump_dir=None):
    """See kernels.acceptance_kernel.compile_kernel_ptx (imports cutlass on first use)."""
    from .acceptance_kernel import compile_kernel_ptx as _compile

    return _compile(arch, dtype, dump_dir)


__all__ = [
    "acceptance_per_row",
    "compile_kernel_ptx",
    "cuda_gpu_present",
    "cutlass_available",
    "LogitsError",
    "RowAcceptance",
]
