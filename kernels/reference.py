"""Reference implementations of the per-row acceptance (see kernels/rows.py for the
definitions): NumPy (always available) and torch (optional import).

Numerically stable: max subtraction before exp, float64 arithmetic. Rows are processed in
blocks so that a [4096, 163840] input never needs a float64 copy of the whole array.
"""

from __future__ import annotations

import numpy as np

from .rows import DEFAULT_NAMES, RowAcceptance, check_shapes, check_temperature, row_error, LogitsError

BLOCK_ELEMENTS = 1 << 22  # float64 working set per block: 32 MiB per array


def _rows_per_block(vocab: int) -> int:
    return max(1, BLOCK_ELEMENTS // vocab)


def _softmax64(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(x / T) per row in float64; −inf logits get probability 0."""
    x = logits.astype(np.float64, copy=False)
    top = x.max(axis=1, keepdims=True)
    e = np.exp((x - top) / temperature)  # max subtraction: exp never overflows
    return e / e.sum(axis=1, keepdims=True)


def _check_rows_numpy(block: np.ndarray, first_row: int, name: str) -> None:
    nonfinite = np.isnan(block) | np.isposinf(block)
    bad = np.flatnonzero(nonfinite.any(axis=1))
    if bad.size:
        raise row_error(name, first_row + int(bad[0]), True)
    masked = np.flatnonzero(np.isneginf(block).all(axis=1))
    if masked.size:
        raise row_error(name, first_row + int(masked[0]), False)


def _as_float_array(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if not np.issubdtype(a.dtype, np.floating):
        raise LogitsError(f"{name}: expected floating-point logits, got dtype {a.dtype}")
    return a


def acceptance_numpy(target_logits, draft_logits, temperature, *, names=DEFAULT_NAMES) -> RowAcceptance:
    """Σ_v min(softmax(t/T)_v, softmax(d/T)_v) and argmax agreement per row, in NumPy float64."""
    temperature = check_temperature(temperature)
    target = _as_float_array(target_logits, names[0])
    draft = _as_float_array(draft_logits, names[1])
    n, vocab = check_shapes(target.shape, draft.shape, names)
    expected = np.empty(n, dtype=np.float64)
    target_argmax = np.empty(n, dtype=np.int64)
    draft_argmax = np.empty(n, dtype=np.int64)
    step = _rows_per_block(vocab)
    for start in range(0, n, step):
        t = target[start:start + step]
        d = draft[start:start + step]
        _check_rows_numpy(t, start, names[0])
        _check_rows_numpy(d, start, names[1])
        p = _softmax64(t, temperature)
        q = _softmax64(d, temperature)
        expected[start:start + step] = np.minimum(p, q).sum(axis=1)
        target_argmax[start:start + step] = np.argmax(t, axis=1)  # first maximum on ties
        draft_argmax[start:start + step] = np.argmax(d, axis=1)
    return RowAcceptance(
        expected=expected,
        greedy=target_argmax == draft_argmax,
        target_argmax=target_argmax,
        draft_argmax=draft_argmax,
        backend="numpy",
    )


def acceptance_torch(target_logits, draft_logits, temperature, *, names=DEFAULT_NAMES) -> RowAcceptance:
    """The same in torch (any float dtype incl. bfloat16, on the tensors' device), computed
    in float64: the reference."""
    import torch

    temperature = check_temperature(temperature)
    target, draft = target_logits, draft_logits
    for x, name in ((target, names[0]), (draft, names[1])):
        floating = x.is_floating_point() if isinstance(x, torch.Tensor) else np.issubdtype(np.asarray(x).dtype, np.floating)
        if not floating:
            raise LogitsError(f"{name}: expected floating-point logits, got dtype {x.dtype}")
    n, vocab = check_shapes(target.shape, draft.shape, names)
    device = target.device if isinstance(target, torch.Tensor) else torch.device("cpu")

    def block_tensor(x, start, stop):
        if isinstance(x, torch.Tensor):
            return x[start:stop].to(device)
        # a copy per block: memory-mapped arrays are read-only, which torch warns about
        return torch.from_numpy(np.array(x[start:stop])).to(device)

    expected = torch.empty(n, dtype=torch.float64, device=device)
    target_argmax = torch.empty(n, dtype=torch.int64, device=device)
    draft_argmax = torch.empty(n, dtype=torch.int64, device=device)
    step = _rows_per_block(vocab)
    for start in range(0, n, step):
        t = block_tensor(target, start, start + step)
        d = block_tensor(draft, start, start + step)
        for x, name in ((t, names[0]), (d, names[1])):
            bad = (torch.isnan(x) | torch.isposinf(x)).any(dim=1)
            if bool(bad.any()):
                raise row_error(name, start + int(torch.nonzero(bad)[0, 0]), True)
            masked = torch.isneginf(x).all(dim=1)
            if bool(masked.any()):
                raise row_error(name, start + int(torch.nonzero(masked)[0, 0]), False)
        # softmax subtracts the row max itself; −inf → probability 0
        p = torch.softmax(t.to(torch.float64) / temperature, dim=1)
        q = torch.softmax(d.to(torch.float64) / temperature, dim=1)
        expected[start:start + step] = torch.minimum(p, q).sum(dim=1).to(torch.float64)
        target_argmax[start:start + step] = torch.argmax(t, dim=1)  # first maximum on ties
        draft_argmax[start:start + step] = torch.argmax(d, dim=1)
    target_argmax_np = target_argmax.cpu().numpy()
    draft_argmax_np = draft_argmax.cpu().numpy()
    return RowAcceptance(
        expected=expected.cpu().numpy(),
        greedy=target_argmax_np == draft_argmax_np,
        target_argmax=target_argmax_np,
        draft_argmax=draft_argmax_np,
        backend="torch",
    )

