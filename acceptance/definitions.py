"""The point formulas of acceptance, and the one check and the one projection of a survival curve.

Point formulas (docs/MODEL.md, Definitions), from counts D (drafts), T (draft tokens),
A (accepted), a_k = A_k / D: AL = 1 + A / D (``acceptance_length``, the one definition of AL); A / T; α_k = a_k / a_{k-1}; the equivalent
independent p whose Σ_{k=0..γ} p^k equals AL. Counts-only definitions (survival a_k, reach
R_k / D, T / D, ν) sit beside SpecCounts in acceptance.counts.

A survival curve a_k = A_k / D (k = 1..γ) counts drafts accepted through position k, so it
is non-increasing and within [0, 1]; estimates can break that (a bootstrap row, a widened
interval, a shifted per-batch curve, rounding), and vLLM's synthetic acceptance rates
require it. ``check_survival_curve`` refuses a curve given as input that breaks it (beyond
rounding); ``monotone_survival`` restores it in a computed one: clip to [0, 1], then the
running minimum along positions (clipping commutes with the running minimum).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .errors import InputError

if TYPE_CHECKING:
    from .counts import SpecCounts

# Rounding a curve's values (a JSON round trip, a printed curve) may raise one by this much.
CURVE_TOLERANCE = 1e-9


def monotone_survival(curve: npt.ArrayLike, axis: int = -1) -> npt.NDArray[np.float64]:
    """``curve`` made a probability per position and non-increasing along ``axis``."""
    return np.minimum.accumulate(np.clip(np.asarray(curve, dtype=float), 0.0, 1.0), axis=axis)


def check_survival_curve(curve: npt.ArrayLike, what: str = "survival", error: type[InputError] = InputError) -> None:
    """``curve`` (or rows of curves): finite, in [0, 1], never increasing along positions;
    else ``error`` with a one-line message naming ``what``."""
    a = np.asarray(curve, dtype=float)
    if not np.all(np.isfinite(a)):
        raise error(f"{what}: values must be finite numbers")
    if np.any(a < 0) or np.any(a > 1):
        raise error(f"{what}: values must be in [0, 1], got {a[(a < 0) | (a > 1)].ravel()[0]:g}")
    if a.shape[-1] > 1 and np.any(np.diff(a, axis=-1) > CURVE_TOLERANCE):
        raise error(f"{what}: a survival curve cannot increase (a_k ≤ a_(k-1)), got {a.ravel().tolist()[:8]}")


def conditional_from_survival(surv: np.ndarray) -> np.ndarray:
    """α_k = a_k / a_{k-1}, a_0 = 1 (NaN where a_{k-1} = 0)."""
    surv = np.asarray(surv, dtype=float)
    prev = np.concatenate([np.ones(surv.shape[:-1] + (1,)), surv[..., :-1]], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prev > 0, surv / np.where(prev > 0, prev, 1.0), np.nan)


def acceptance_length(accepted_tokens: npt.ArrayLike, drafts: npt.ArrayLike, *, no_drafts: float = math.nan
                      ) -> float | npt.NDArray[np.float64]:
    """AL = 1 + A / D: the tokens a drafted step emits, its bonus token included — the one
    definition every AL in the tool is (a window's, a survival curve's at each γ, a replay's).
    ``no_drafts``: its value where D = 0 — NaN for a measured window (no drafted step: no AL
    measured), 1 for a γ at which no step drafts (AL(0) = 1: a step emits its one token)."""
    a, d = np.asarray(accepted_tokens, dtype=float), np.asarray(drafts, dtype=float)
    al = np.where(d > 0, 1.0 + a / np.where(d > 0, d, 1.0), no_drafts)
    return float(al) if al.ndim == 0 else al


def acceptance_length_by_gamma(survival: npt.ArrayLike, top: int | None = None) -> npt.NDArray[np.float64]:
    """AL(γ) = 1 + Σ_{k≤γ} a_k for γ = 0..top (default: the curve's length) over the last axis of
    ``survival`` a_1..a_g: acceptance_length per draft (D = 1) of the accepted tokens cut at γ,
    E[min(X, γ)] = Σ_{k≤γ} P(X ≥ k)."""
    a = np.asarray(survival, dtype=float)
    top = a.shape[-1] if top is None else top
    if not 0 <= top <= a.shape[-1]:
        raise InputError(f"gamma {top} is outside 0..{a.shape[-1]} (the survival curve's length)")
    accepted = np.concatenate([np.zeros(a.shape[:-1] + (1,)), np.cumsum(a, -1)], -1)[..., : top + 1]
    return np.asarray(acceptance_length(accepted, 1.0), dtype=float)


def mean_acceptance_length(counts: SpecCounts) -> float:
    """A window's AL (acceptance_length of its counts; NaN without drafts)."""
    return float(acceptance_length(counts.accepted_tokens, counts.drafts))


def draft_acceptance_rate(counts: SpecCounts) -> float:
    """A / T."""
    return counts.accepted_tokens / counts.draft_tokens if counts.draft_tokens > 0 else math.nan


def acceptance_length_independent(p: npt.ArrayLike, gamma: int) -> np.float64 | npt.NDArray[np.float64]:
    """(1 − p^(γ+1)) / (1 − p) = Σ_{k=0..γ} p^k: tokens per verify step for independent p."""
    p = np.asarray(p, dtype=float)
    tokens: np.float64 | npt.NDArray[np.float64] = np.sum(p[..., None] ** np.arange(gamma + 1), axis=-1)
    return tokens


def equivalent_p(mean_length: float, gamma: int) -> float:
    """The independent per-token p whose expected tokens per step at γ equal ``mean_length``.

    Solves (1 − p^(γ+1)) / (1 − p) = AL on [0, 1]; AL ≤ 1 → 0, AL ≥ γ+1 → 1.
    """
    if not math.isfinite(mean_length) or gamma <= 0:
        return math.nan
    if mean_length <= 1.0:
        return 0.0
    if mean_length >= gamma + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(80):  # bisection: the left side is increasing in p
        mid = 0.5 * (lo + hi)
        if float(acceptance_length_independent(mid, gamma)) < mean_length:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
