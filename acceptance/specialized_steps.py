"""Which steps run vLLM 0.33's Kimi K3 specialized decode kernels: the step rule alone.

A clean step (pure decode, q = 1, or a uniform verify, q = γ + 1, with no prompt rows) of
B requests runs the specialized kernels when its padded token count — the smallest CUDA-
graph capture size rounded up to a multiple of q that holds B·q — is at most 64
(model/specialized.py has the rest of the path: who may start it, what it is worth).

Here in acceptance/ because specdec's vLLM stat-logger plugin classifies every step with
it inside the engine's process, where nothing of model/ may be imported. Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

SPECIALIZED_TOKEN_LIMIT = 64


def default_capture_sizes(max_capture_size: int = 512) -> tuple[int, ...]:
    """vLLM 0.33.0's default ``cudagraph_capture_sizes`` (vllm/config/compilation.py)."""
    return tuple([1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_capture_size + 1, 16)))


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def rounded_capture_sizes(capture_sizes: Sequence[int] | None, q: int) -> tuple[int, ...]:
    """vLLM's ``adjust_cudagraph_sizes_for_spec_decode``: sizes rounded up to multiples of q,
    kept when ≤ the largest capture size."""
    return _rounded(tuple(capture_sizes) if capture_sizes else None, q)


@lru_cache(maxsize=256)
def _rounded(capture_sizes: tuple[int, ...] | None, q: int) -> tuple[int, ...]:
    sizes = capture_sizes if capture_sizes else default_capture_sizes()
    if q <= 1:
        return tuple(sorted(set(sizes)))
    top = max(sizes)
    rounded = sorted({_round_up(s, q) for s in sizes if _round_up(s, q) <= top})
    return tuple(rounded) if rounded else ((q,) if q <= top else ())


def padded_step_tokens(batch_size: int, q: int, capture_sizes: Sequence[int] | None = None) -> int | None:
    """Tokens of the FULL graph a clean step of B requests × q runs: the smallest rounded
    capture size ≥ B·q (None: no graph, the step runs eager/stock)."""
    need = batch_size * q
    for size in rounded_capture_sizes(capture_sizes, q):
        if size >= need:
            return size
    return None


def runs_specialized(batch_size: int, q: int, capture_sizes: Sequence[int] | None = None) -> bool:
    """Whether a clean step of B requests verifying q tokens each takes the specialized path."""
    padded = padded_step_tokens(batch_size, q, capture_sizes)
    # The step runs at its padded graph size, a capture size rounded up to a multiple of q:
    # within the limit it is one of the counts with specialized providers ({1..8, 16, 32,
    # 64} ∪ rounded capture sizes ≤ 64: docs/MODEL.md, The specialized decode path), so the limit is the whole test.
    return padded is not None and padded <= SPECIALIZED_TOKEN_LIMIT
