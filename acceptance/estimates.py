"""Acceptance quantities from counts (DESIGN.md, Definitions).

For a window with D drafts, accepted counts A_k per position k = 1..γ, A accepted and
T drafted:
  survival      a_k = A_k / D          P(at least k draft tokens accepted)
  conditional   α_k = a_k / a_{k-1}    a_0 = 1
  mean acceptance length  AL = 1 + A / D = 1 + Σ_k a_k   (includes the bonus token)
  draft acceptance rate   A / T
  equivalent independent p: the p with (1 − p^(γ+1)) / (1 − p) = AL

PromQL for the survival of a route over a window (never across γ):
  sum by (position) (increase(vllm:spec_decode_num_accepted_tokens_per_pos_total{SEL}[W]))
  / ignoring(position) group_left sum(increase(vllm:spec_decode_num_drafts_total{SEL}[W]))
"""

from __future__ import annotations

import math

import numpy as np

from .counts import SpecCounts


def survival(counts: SpecCounts) -> np.ndarray:
    """a_k = A_k / D, k = 1..γ (NaN when there are no drafts)."""
    a = np.asarray(counts.accepted_per_position, dtype=float)
    if counts.drafts <= 0:
        return np.full(counts.gamma, np.nan)
    return a / counts.drafts


def conditional_from_survival(surv: np.ndarray) -> np.ndarray:
    """α_k = a_k / a_{k-1}, a_0 = 1 (NaN where a_{k-1} = 0)."""
    surv = np.asarray(surv, dtype=float)
    prev = np.concatenate([np.ones(surv.shape[:-1] + (1,)), surv[..., :-1]], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prev > 0, surv / np.where(prev > 0, prev, 1.0), np.nan)


def mean_acceptance_length(counts: SpecCounts) -> float:
    """AL = 1 + A / D (includes the bonus token)."""
    return 1.0 + counts.accepted_tokens / counts.drafts if counts.drafts > 0 else math.nan


def draft_acceptance_rate(counts: SpecCounts) -> float:
    """A / T."""
    return counts.accepted_tokens / counts.draft_tokens if counts.draft_tokens > 0 else math.nan


def expected_tokens_independent(p, gamma: int):
    """(1 − p^(γ+1)) / (1 − p) = Σ_{k=0..γ} p^k: tokens per verify step for independent p."""
    p = np.asarray(p, dtype=float)
    return np.sum(p[..., None] ** np.arange(gamma + 1), axis=-1)


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
        if float(expected_tokens_independent(mid, gamma)) < mean_length:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
