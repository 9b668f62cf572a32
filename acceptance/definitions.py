"""The one check and the one projection of a survival curve.

A survival curve a_k = A_k / D (k = 1..γ) counts drafts accepted through position k, so it
is non-increasing and within [0, 1]; estimates can break that (a bootstrap row, a widened
interval, a shifted per-batch curve, rounding), and vLLM's synthetic acceptance rates
require it. ``check_survival_curve`` refuses a curve given as input that breaks it (beyond
rounding); ``monotone_survival`` restores it in a computed one: clip to [0, 1], then the
running minimum along positions (clipping commutes with the running minimum).
"""

from __future__ import annotations

import numpy as np

from .errors import InputError

# Rounding a curve's values (a JSON round trip, a printed curve) may raise one by this much.
CURVE_TOLERANCE = 1e-9


def monotone_survival(curve, axis: int = -1) -> np.ndarray:
    """``curve`` made a probability per position and non-increasing along ``axis``."""
    return np.minimum.accumulate(np.clip(np.asarray(curve, dtype=float), 0.0, 1.0), axis=axis)


def check_survival_curve(curve, what: str = "survival", error: type[InputError] = InputError) -> None:
    """``curve`` (or rows of curves): finite, in [0, 1], never increasing along positions;
    else ``error`` with a one-line message naming ``what``."""
    a = np.asarray(curve, dtype=float)
    if not np.all(np.isfinite(a)):
        raise error(f"{what}: values must be finite numbers")
    if np.any(a < 0) or np.any(a > 1):
        raise error(f"{what}: values must be in [0, 1], got {a[(a < 0) | (a > 1)].ravel()[0]:g}")
    if a.shape[-1] > 1 and np.any(np.diff(a, axis=-1) > CURVE_TOLERANCE):
        raise error(f"{what}: a survival curve cannot increase (a_k ≤ a_(k-1)), got {a.ravel().tolist()[:8]}")
