"""Result and input checks shared by every implementation of the per-row acceptance.

For row n of target logits t and draft logits d at temperature T > 0:
    p = softmax(t / T), q = softmax(d / T)
    expected[n] = Σ_v min(p_v, q_v) = 1 − TV(p, q)
        the probability that speculative (rejection) sampling accepts the draft token
    greedy[n]   = argmax t == argmax d   (ties → lowest index, as torch.argmax)
        whether greedy decoding accepts it
A −inf logit is a token of probability 0; a row of all −inf, a NaN or a +inf is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from acceptance.errors import InputError


class LogitsError(InputError):
    """Bad logits or temperature; the message is one line naming the input."""


@dataclass(frozen=True)
class RowAcceptance:
    """Per-row acceptance of a draft against a target.

    expected: (N,) float64, Σ_v min(p_v, q_v) at the temperature;
    greedy: (N,) bool, argmax agreement;
    target_argmax, draft_argmax: (N,) int64;
    backend: which implementation computed it ("cute", "torch" or "numpy").
    """

    expected: np.ndarray
    greedy: np.ndarray
    target_argmax: np.ndarray
    draft_argmax: np.ndarray
    backend: str


DEFAULT_NAMES = ("target logits", "draft logits")


def check_temperature(temperature) -> float:
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        raise LogitsError(f"temperature {temperature!r} is not a number") from None
    if not math.isfinite(t) or t <= 0:
        raise LogitsError(f"temperature must be a finite number > 0, got {temperature!r}")
    return t


def check_shapes(target_shape, draft_shape, names=DEFAULT_NAMES) -> tuple[int, int]:
    """(N, V) of two 2-D logit arrays of equal shape with N ≥ 1, V ≥ 1."""
    target_shape, draft_shape = tuple(target_shape), tuple(draft_shape)
    for shape, name in zip((target_shape, draft_shape), names):
        if len(shape) != 2:
            raise LogitsError(f"{name}: expected a 2-D [rows, vocab] array, got shape {shape}")
        if shape[0] == 0 or shape[1] == 0:
            raise LogitsError(f"{name}: empty array of shape {shape}")
    if target_shape != draft_shape:
        raise LogitsError(
            f"{names[0]} shape {target_shape} does not match {names[1]} shape {draft_shape}"
        )
    return target_shape


def row_error(name: str, row: int, nonfinite: bool) -> LogitsError:
    if nonfinite:
        return LogitsError(f"{name}: row {row} has a NaN or +inf logit")
    return LogitsError(f"{name}: row {row} is all -inf (no token has probability)")
