"""The one projection every survival curve goes through before it is priced or exported.

A survival curve a_k = A_k / D (k = 1..γ) counts drafts accepted through position k, so it
is non-increasing and within [0, 1]; estimates can break that (a bootstrap row, a widened
interval, a shifted per-batch curve, rounding), and vLLM's synthetic acceptance rates
require it. ``monotone_survival`` restores it: clip to [0, 1], then the running minimum
along positions (clipping commutes with the running minimum, so the order is immaterial).
"""

from __future__ import annotations

import numpy as np


def monotone_survival(curve, axis: int = -1) -> np.ndarray:
    """``curve`` made a probability per position and non-increasing along ``axis``."""
    return np.minimum.accumulate(np.clip(np.asarray(curve, dtype=float), 0.0, 1.0), axis=axis)
