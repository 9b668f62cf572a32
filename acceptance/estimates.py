"""Acceptance quantities from counts (docs/MODEL.md, Definitions).

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

With intervals (``estimate_acceptance``): the same ratios over a window's rows
(IntervalCounts), with percentile intervals from a circular block bootstrap over the rows,
widened for the few independent blocks a window holds (acceptance/bootstrap.py). Intervals
are 90% unless asked otherwise and every result names its level. ``drafts_needed`` projects
how many more drafts would narrow them; ``detect_drift`` compares the newest part of a
window with the rest.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from .errors import InputError
from .bootstrap import (
    choose_block_length,
    circular_block_sums,
    long_run_variance,
    ratio_contributions,
    spread_factor,
)
from .counts import IntervalCounts, SpecCounts, survival
from .definitions import (check_survival_curve, conditional_from_survival, draft_acceptance_rate, equivalent_p,
                          mean_acceptance_length, monotone_survival)
from .durations import approximate_duration


# ---------------------------------------------------------------------------------------
# Estimates with intervals: a circular block bootstrap over the rows of a window
# (acceptance/bootstrap.py says why blocks and how long).
# ---------------------------------------------------------------------------------------

DEFAULT_LEVEL = 0.9
# Fewer rows than this and there is nothing to resample: values, but no interval.
MIN_ROWS_FOR_INTERVAL = 3
# Drift smaller than this share of the earlier AL is not reported even when the interval
# excludes 0: it moves the speedup by about as much, below the cost model's default
# min_gain of 3%, and with millions of drafts every tiny wobble is "significant".
DRIFT_MIN_RELATIVE_CHANGE = 0.02

# Column layout of IntervalCounts.counts (SpecCounts.as_vector).
_D, _T, _A, _FIRST_POSITION = 0, 1, 2, 3


@dataclass(frozen=True)
class ScalarEstimate:
    """A value with its confidence interval (low, high) at ``level`` (NaN bounds: none)."""

    value: float
    confidence_interval: tuple[float, float]
    level: float

    @property
    def low(self) -> float:
        return self.confidence_interval[0]

    @property
    def high(self) -> float:
        return self.confidence_interval[1]

    @property
    def halfwidth(self) -> float:
        """(high − low) / 2 (NaN without an interval)."""
        return 0.5 * (self.confidence_interval[1] - self.confidence_interval[0])


@dataclass(frozen=True, eq=False)
class CurveEstimate:
    """A curve over positions k = 1..γ with pointwise intervals [low_k, high_k] at ``level``."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float


@dataclass(frozen=True, eq=False)
class AcceptanceEstimate:
    """Acceptance of one γ segment over a window, with intervals.

    survival a_k = Σ A_k / Σ D; conditional α_k = a_k / a_{k−1}; AL = 1 + Σ A / Σ D;
    draft acceptance rate Σ A / Σ T; equivalent_p solves (1 − p^(γ+1)) / (1 − p) = AL.
    Intervals at ``level``: percentile intervals of the same ratios over circular-block
    resamples of the rows, widened about the point value by bootstrap.spread_factor
    (``method`` says so in words; ``block_length`` rows per block, ``n_blocks`` blocks
    per resample). ``survival_resamples`` (n, γ), n ≤ n_resamples: the resampled curves
    Σ A_k / Σ D over resampled blocks, widened the same way, non-increasing in k and in
    [0, 1] — the cost model turns them into speedup intervals and probability_best;
    (0, γ) when there is no interval. ``note`` says why values or intervals are missing
    ("" when nothing is).
    """

    gamma: int
    drafts: float
    counts: SpecCounts
    survival: CurveEstimate
    conditional: CurveEstimate
    mean_acceptance_length: ScalarEstimate
    draft_acceptance_rate: ScalarEstimate
    equivalent_p: ScalarEstimate
    level: float
    n_intervals: int
    n_blocks: int
    block_length: int | None
    method: str
    survival_resamples: np.ndarray = field(repr=False)
    note: str = ""
    # where the window's counts broke the curve's order within a scrape race (point_survival)
    survival_restored: str = ""

    @property
    def has_interval(self) -> bool:
        return bool(self.survival_resamples.shape[0] > 0)


def _check_level(level: float) -> float:
    if not (isinstance(level, (int, float)) and 0.0 < float(level) < 1.0):
        raise InputError(f"level must be between 0 and 1 (exclusive), got {level!r}")
    return float(level)


def _check_rows(intervals: IntervalCounts) -> np.ndarray:
    if not isinstance(intervals, IntervalCounts):
        raise InputError(f"intervals must be IntervalCounts, got {type(intervals).__name__}")
    rows = np.asarray(intervals.counts, dtype=float)
    if rows.size and not np.isfinite(rows).all():
        bad = int(np.argwhere(~np.isfinite(rows))[0][0])
        raise InputError(f"interval counts: non-finite value in row {bad}")
    if rows.size and (rows < 0).any():
        bad_row, bad_col = (int(i) for i in np.argwhere(rows < 0)[0])
        raise InputError(f"interval counts: negative value in row {bad_row}, column {bad_col}")
    return rows


def percentile_bounds(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval along axis 0, ignoring NaN resamples (0-d bounds, numpy scalars,
    for 1-D samples)."""
    tail = 0.5 * (1.0 - level)
    if samples.shape[0] == 0:  # every resample dropped: no interval
        nan = np.full(samples.shape[1:], np.nan)
        return nan, nan.copy()
    # All-NaN columns (e.g. α_k where every resample has a_{k-1} = 0) give NaN bounds.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low: np.ndarray
        high: np.ndarray
        low, high = np.nanquantile(samples, [tail, 1.0 - tail], axis=0)
    return low, high


def _nan_curve(gamma: int, level: float, value: np.ndarray | None = None) -> CurveEstimate:
    nan = np.full(gamma, np.nan)
    return CurveEstimate(nan.copy() if value is None else value, nan.copy(), nan.copy(), level)


def _scalar(value: float, level: float,
            bounds: tuple[float | np.ndarray, float | np.ndarray] = (math.nan, math.nan)) -> ScalarEstimate:
    return ScalarEstimate(float(value), (float(bounds[0]), float(bounds[1])), level)


def _method_text(block_length: int, n_blocks: int, n_resamples: int, unit: str) -> str:
    # the level is said once, by whoever prints the method beside it
    return (
        f"circular block bootstrap over {unit}, block {block_length} {unit.split()[-1]}, "
        f"{n_blocks} blocks, {n_resamples} resamples; percentile widened for the block count "
        f"and the long-run variance"
    )


class EstimateOptions(TypedDict, total=False):
    """estimate_acceptance's options, passed on whole (estimate_route, model.probe.running.window_probe)."""

    level: float
    n_resamples: int
    seed: int
    block_length: int | None
    unit: str


def estimate_acceptance(
    intervals: IntervalCounts,
    *,
    level: float = DEFAULT_LEVEL,
    n_resamples: int = 1000,
    seed: int = 0,
    block_length: int | None = None,
    unit: str = "scrape intervals",
) -> AcceptanceEstimate:
    """Survival, conditional, AL, draft acceptance rate and equivalent p, with intervals.

    Point values are the ratios of the window's totals (the module's point formulas).
    Intervals: percentile intervals over ``n_resamples`` circular-block resamples of the
    rows, widened for the few independent blocks and the correlation a block loses at its
    edges (bootstrap.spread_factor); ``block_length`` None chooses it from the data
    (bootstrap.choose_block_length: twice the Politis–White length, in [n^(1/3), n/3]).
    ``unit`` names what a row is in ``method`` ("scrape intervals"; "requests" for
    per-request data, resampled one request at a time with block_length 1).
    The equivalent p's interval is the AL interval mapped through equivalent_p, which is
    increasing in AL (percentile intervals commute with increasing maps).
    Degenerate windows: no rows or no drafts → NaN values, note "no drafts in the
    window"; fewer than 3 rows with drafts → values but NaN bounds and a note saying why.
    """
    level = _check_level(level)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    rows = _check_rows(intervals)
    gamma = intervals.gamma
    n = rows.shape[0]
    total = intervals.total()
    if n == 0 or total.drafts <= 0:
        return _without_drafts(gamma, total, level, n)
    # Rows without drafts carry no acceptance: with fewer than 3 rows that do, the
    # resamples would only reshuffle one or two numbers and the interval would be a lie.
    n_with_drafts = int((rows[:, _D] > 0).sum())
    if n_with_drafts < MIN_ROWS_FOR_INTERVAL:
        why = (f"only {n_with_drafts} {unit if n_with_drafts != 1 else unit.rstrip('s')} with drafts in the window: "
               "too few to resample, no interval")
        return _without_interval(gamma, total, level, n, why)

    block_length, widen = _blocks_and_widening(rows, gamma, block_length, level)
    rng = np.random.default_rng(seed)
    sums = circular_block_sums(rows, block_length, int(n_resamples), rng)
    # A resample that drew only draft-free rows has no ratio: drop it (said in the note).
    sums = sums[sums[:, _D] > 0]
    dropped = int(n_resamples - sums.shape[0])
    (surv_point, race), al_point, dar_point = point_survival(total), mean_acceptance_length(total), \
        draft_acceptance_rate(total)
    surv_resamples, al_resamples, dar_resamples = _widened_resamples(sums, gamma, widen, surv_point, al_point,
                                                                     dar_point)
    surv_low, surv_high = percentile_bounds(surv_resamples, level)
    cond_low, cond_high = percentile_bounds(conditional_from_survival(surv_resamples), level)
    al_low, al_high = percentile_bounds(al_resamples, level)
    dar_low, dar_high = percentile_bounds(dar_resamples, level)
    n_blocks = -(-n // block_length)
    return AcceptanceEstimate(
        gamma=gamma, drafts=float(total.drafts), counts=total,
        survival=CurveEstimate(surv_point, surv_low, surv_high, level),
        conditional=CurveEstimate(conditional_from_survival(surv_point), cond_low, cond_high, level),
        mean_acceptance_length=_scalar(al_point, level, (al_low, al_high)),
        draft_acceptance_rate=_scalar(dar_point, level, (dar_low, dar_high)),
        equivalent_p=_scalar(equivalent_p(al_point, gamma), level,
                             (equivalent_p(float(al_low), gamma), equivalent_p(float(al_high), gamma))),
        level=level, n_intervals=n, n_blocks=n_blocks, block_length=block_length,
        method=_method_text(block_length, n_blocks, int(n_resamples), unit),
        survival_resamples=surv_resamples,
        note=f"{dropped} of {n_resamples} resamples had no drafts and were dropped" if dropped else "",
        survival_restored=race,
    )


def _without_drafts(gamma: int, total: SpecCounts, level: float, n: int) -> AcceptanceEstimate:
    """A window without drafts: NaN values, no interval."""
    return AcceptanceEstimate(
        gamma=gamma, drafts=float(total.drafts), counts=total,
        survival=_nan_curve(gamma, level), conditional=_nan_curve(gamma, level),
        mean_acceptance_length=_scalar(math.nan, level),
        draft_acceptance_rate=_scalar(math.nan, level),
        equivalent_p=_scalar(math.nan, level),
        level=level, n_intervals=n, n_blocks=0, block_length=None,
        method="none: no drafts in the window",
        survival_resamples=np.empty((0, gamma)),
        note="no drafts in the window",
    )


def point_survival(total: SpecCounts) -> tuple[np.ndarray, str]:
    """a_k = A_k / D of a window's totals, and a note. Counts read from engines can break the
    curve's order by a scrape race at the window's ends (one step: a window's engines are
    checked against impossible counts when it is read, acceptance.windows): the point curve
    is then restored by ``monotone_survival`` and the note says where and by how much."""
    raw = survival(total)
    fixed = monotone_survival(raw)
    broken = np.flatnonzero(np.abs(np.nan_to_num(raw - fixed)) > 0)
    if not broken.size:
        return raw, ""
    k = int(broken[0])  # named by vLLM's position label (0 for the first draft token), as pages are
    above = "the drafts" if k == 0 else f"position {k - 1}"
    return fixed, (f"accepted at position {k} ran {raw[k] - (1.0 if k == 0 else raw[k - 1]):.2g} of the drafts "
                   f"above {above} in the window's counts, as a scrape race can put them: survival made "
                   f"non-increasing")


def _without_interval(gamma: int, total: SpecCounts, level: float, n: int, why: str) -> AcceptanceEstimate:
    """Values without an interval (too few rows with drafts to resample), saying why."""
    surv_point, race = point_survival(total)
    al_point = mean_acceptance_length(total)
    return AcceptanceEstimate(
        gamma=gamma, drafts=float(total.drafts), counts=total,
        survival=_nan_curve(gamma, level, surv_point),
        conditional=_nan_curve(gamma, level, conditional_from_survival(surv_point)),
        mean_acceptance_length=_scalar(al_point, level),
        draft_acceptance_rate=_scalar(draft_acceptance_rate(total), level),
        equivalent_p=_scalar(equivalent_p(al_point, gamma), level),
        level=level, n_intervals=n, n_blocks=0, block_length=None,
        method=f"none: {why}", survival_resamples=np.empty((0, gamma)), note=why, survival_restored=race,
    )


def _blocks_and_widening(rows: np.ndarray, gamma: int, block_length: int | None,
                         level: float) -> tuple[int, np.ndarray]:
    """The block length (chosen from the data when None) and the spread factors of a_1..a_γ,
    AL and the draft acceptance rate. The linearised per-row contributions of each ratio:
    their autocorrelation sets the block length and their long-run variance the spread
    correction (acceptance/bootstrap.py)."""
    n = rows.shape[0]
    position_cols = list(range(_FIRST_POSITION, 3 + gamma))
    contributions = np.concatenate(
        [ratio_contributions(rows, [*position_cols, _A], _D), ratio_contributions(rows, [_A], _T)], axis=1
    )
    lrv = long_run_variance(contributions)
    if block_length is None:
        block_length = choose_block_length(lrv)
    elif isinstance(block_length, bool) or not isinstance(block_length, (int, np.integer)) or not 1 <= block_length <= n:
        raise InputError(f"block_length must be an integer from 1 to the number of intervals ({n}), got {block_length!r}")
    block_length = int(block_length)
    return block_length, spread_factor(lrv, block_length, level)


def _widened_resamples(sums: np.ndarray, gamma: int, widen: np.ndarray, surv_point: np.ndarray, al_point: float,
                       dar_point: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Survival, AL and draft acceptance rate of each resample, their spread about the point
    widened by ``widen`` (survival's, AL's, the rate's)."""
    widen_survival, widen_al, widen_dar = widen[:gamma], widen[gamma], widen[gamma + 1]
    resampled_drafts = sums[:, _D]
    with np.errstate(divide="ignore", invalid="ignore"):
        surv = surv_point + widen_survival * (sums[:, _FIRST_POSITION:] / resampled_drafts[:, None] - surv_point)
        # Per row A_k is non-increasing in k, so are the ratios; widening column by column
        # (and inconsistent rows, e.g. scrape skew) can break that: restore it, and keep
        # each a_k a probability.
        surv = monotone_survival(surv, axis=1)
        al = np.clip(al_point + widen_al * (sums[:, _A] / resampled_drafts - (al_point - 1.0)), 1.0, gamma + 1.0)
        has_tokens = sums[:, _T] > 0
        dar = np.where(has_tokens, sums[:, _A] / np.where(has_tokens, sums[:, _T], 1.0), np.nan)
        dar = np.clip(dar_point + widen_dar * (dar - dar_point), 0.0, 1.0)
    return surv, al, dar


def estimate_from_survival(
    survival_curve: npt.ArrayLike,
    *,
    drafts: int | None = None,
    level: float = DEFAULT_LEVEL,
    n_resamples: int = 1000,
    seed: int = 0,
) -> AcceptanceEstimate:
    """An estimate from a curve given as numbers (``tune-gamma --survival``).

    Without ``drafts`` there is no interval. With D drafts, the intervals come from a
    parametric resample: D drafts' accepted lengths drawn as multinomial with
    P(length = j) = a_j − a_{j+1} (a_0 = 1, a_{γ+1} = 0). A bare curve carries no time
    structure, so drafts are assumed independent — narrower than a block bootstrap over
    real scrape intervals would give; ``method`` says so. Drafts are taken as full length
    (T = γ·D), so the draft acceptance rate is (AL − 1) / γ.
    """
    level = _check_level(level)
    a = np.asarray(survival_curve, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise InputError("survival: give at least one value a_1")
    check_survival_curve(a, "survival")
    gamma = a.size
    d = float(drafts) if drafts is not None else math.nan
    counts = SpecCounts(d, d * gamma, d * a.sum(), tuple(d * a))
    al_point = 1.0 + float(a.sum())
    p_point = equivalent_p(al_point, gamma)
    cond_point = conditional_from_survival(a)
    if drafts is None:
        why = "a curve without --drafts: no interval"
        return AcceptanceEstimate(
            gamma=gamma, drafts=d, counts=counts,
            survival=_nan_curve(gamma, level, a), conditional=_nan_curve(gamma, level, cond_point),
            mean_acceptance_length=_scalar(al_point, level),
            draft_acceptance_rate=_scalar((al_point - 1.0) / gamma, level),
            equivalent_p=_scalar(p_point, level), level=level, n_intervals=0, n_blocks=0,
            block_length=None, method=f"none: {why}", survival_resamples=np.empty((0, gamma)), note=why,
        )
    if isinstance(drafts, bool) or int(drafts) != drafts or drafts <= 0:
        raise InputError(f"--drafts: must be a positive integer, got {drafts!r}")
    probs = np.clip(np.concatenate([[1.0], a]) - np.concatenate([a, [0.0]]), 0.0, None)
    lengths = np.random.default_rng(seed).multinomial(int(drafts), probs / probs.sum(), size=int(n_resamples))
    at_least = np.cumsum(lengths[:, ::-1], axis=1)[:, ::-1][:, 1:]  # drafts with length ≥ k, k = 1..γ
    surv_resamples = at_least / float(drafts)
    al_resamples = 1.0 + surv_resamples.sum(axis=1)
    surv_low, surv_high = percentile_bounds(surv_resamples, level)
    cond_low, cond_high = percentile_bounds(conditional_from_survival(surv_resamples), level)
    al_low, al_high = percentile_bounds(al_resamples, level)
    return AcceptanceEstimate(
        gamma=gamma, drafts=d, counts=counts,
        survival=CurveEstimate(a, surv_low, surv_high, level),
        conditional=CurveEstimate(cond_point, cond_low, cond_high, level),
        mean_acceptance_length=_scalar(al_point, level, (al_low, al_high)),
        draft_acceptance_rate=_scalar((al_point - 1.0) / gamma, level, ((al_low - 1.0) / gamma, (al_high - 1.0) / gamma)),
        equivalent_p=_scalar(p_point, level, (equivalent_p(float(al_low), gamma), equivalent_p(float(al_high), gamma))),
        level=level, n_intervals=0, n_blocks=0, block_length=None,
        method=f"multinomial resample of {int(drafts):,} independent drafts, {int(n_resamples)} resamples; percentile",
        survival_resamples=surv_resamples,
        note="intervals assume independent drafts: a curve given inline carries no time structure",
    )


def drafts_needed(
    estimate: AcceptanceEstimate, target_halfwidth: float, *, quantity: str = "mean_acceptance_length"
) -> int:
    """How many more drafts would shrink the interval's half-width to ``target_halfwidth``.

    quantity: "mean_acceptance_length" (the AL interval, in tokens) or "survival" (the
    widest a_k interval, in probability). CLT scaling: with the traffic unchanged, the
    half-width h falls as 1/√D, so D_needed = D · (h / target)²; returns
    max(0, ⌈D_needed − D⌉). Without an interval (fewer than 3 intervals) it falls back to
    independent drafts, h = z·sd/√D with the per-draft sd from the survival curve
    (Var L = Σ_k (2k − 1)·a_k − (Σ_k a_k)² for AL, a_k(1 − a_k) for a_k): a lower bound,
    since correlated drafts carry less information. Raises ValueError without drafts.
    """
    if quantity not in ("mean_acceptance_length", "survival"):
        raise InputError(f"quantity must be 'mean_acceptance_length' or 'survival', got {quantity!r}")
    if not (isinstance(target_halfwidth, (int, float)) and math.isfinite(target_halfwidth) and target_halfwidth > 0):
        raise InputError(f"target_halfwidth must be a positive number, got {target_halfwidth!r}")
    drafts = float(estimate.drafts)
    if not drafts > 0 or not np.isfinite(estimate.survival.value).all():
        raise InputError("the estimate has no drafts: cannot project how many more are needed")
    if estimate.has_interval:
        if quantity == "mean_acceptance_length":
            halfwidth = estimate.mean_acceptance_length.halfwidth
        else:
            halfwidth = float(np.nanmax(0.5 * (estimate.survival.high - estimate.survival.low)))
    else:
        a = np.asarray(estimate.survival.value, dtype=float)
        if quantity == "mean_acceptance_length":
            k = np.arange(1, a.size + 1)
            per_draft_variance = float(np.sum((2 * k - 1) * a) - np.sum(a) ** 2)
        else:
            per_draft_variance = float(np.max(a * (1.0 - a)))
        z = float(ndtri(0.5 * (1.0 + estimate.level)))
        halfwidth = z * math.sqrt(max(per_draft_variance, 0.0) / drafts)
    if not math.isfinite(halfwidth) or halfwidth <= target_halfwidth:
        return 0
    return int(math.ceil(drafts * (halfwidth / target_halfwidth) ** 2 - drafts))


# ---------------------------------------------------------------------------------------
# Drift: the newest part of a window against the rest.
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drift:
    """Whether the newest part of a window differs from the rest, and by how much.

    difference = AL(recent) − AL(earlier), AL = 1 + Σ A / Σ D of each part, with a
    block-bootstrap interval at ``level`` (each part resampled on its own). detected: the
    interval excludes 0 and |difference| ≥ min_relative_change · AL(earlier).
    recent_start: epoch seconds where the recent part begins (NaN when not tested).
    """

    detected: bool
    recent_mean_acceptance_length: float
    earlier_mean_acceptance_length: float
    difference: ScalarEstimate
    recent_start: float
    message: str
    level: float
    min_relative_change: float

    @property
    def tested(self) -> bool:
        """Whether the test ran: its difference has an interval (detect_drift leaves it out
        when a part has too few rows with drafts)."""
        return math.isfinite(self.difference.low) and math.isfinite(self.difference.high)


def _signed(x: float | np.ndarray) -> str:
    return f"{x:+.2f}".replace("-", "−")


def _widened_al_resamples(rows: np.ndarray, level: float, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """AL resamples of one part of a window, widened like estimate_acceptance's."""
    lrv = long_run_variance(ratio_contributions(rows, [_A], _D))
    length = choose_block_length(lrv)
    widen = float(spread_factor(lrv, length, level)[0])
    sums = circular_block_sums(rows, length, n_resamples, rng)
    sums = sums[sums[:, _D] > 0]
    point = rows[:, _A].sum() / rows[:, _D].sum()
    resamples: np.ndarray = 1.0 + point + widen * (sums[:, _A] / sums[:, _D] - point)
    return resamples


def detect_drift(
    intervals: IntervalCounts,
    *,
    level: float = DEFAULT_LEVEL,
    recent_fraction: float = 0.25,
    seed: int = 0,
    n_resamples: int = 1000,
    min_relative_change: float = DRIFT_MIN_RELATIVE_CHANGE,
) -> Drift:
    """Compare the mean acceptance length of the newest ``recent_fraction`` of the window
    (by time: rows whose midpoint lies in the last recent_fraction of [first start, last
    end]) with the rest.

    The interval of the difference comes from independent circular-block bootstraps of the
    two parts (same block length rule and widening as estimate_acceptance). Drift is
    reported when that interval excludes 0 and the change is at least
    ``min_relative_change`` of the earlier AL (default 2%: smaller changes move the
    speedup less than the cost model's default min_gain of 3%, and a long window makes
    every wobble "significant"). Each part needs ≥ 3 intervals with drafts, else
    detected is False and the message says why.
    """
    level = _check_level(level)
    if not (isinstance(recent_fraction, (int, float)) and 0.0 < recent_fraction < 1.0):
        raise InputError(f"recent_fraction must be between 0 and 1 (exclusive), got {recent_fraction!r}")
    if not (isinstance(min_relative_change, (int, float)) and min_relative_change >= 0):
        raise InputError(f"min_relative_change must be a non-negative number, got {min_relative_change!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    rows = _check_rows(intervals)
    start = np.asarray(intervals.start, dtype=float)
    end = np.asarray(intervals.end, dtype=float)
    n = rows.shape[0]
    if start.shape != (n,) or end.shape != (n,):
        raise InputError(f"intervals: start and end must have one entry per row ({n})")
    # Rows are ordered by their end (a block's start can reach back past the previous
    # block's: an engine that was unreachable for a few scrapes counts from its last good one).
    if n > 1 and (np.diff(end) < 0).any():
        raise InputError("intervals: rows are not in time order")

    nan_difference = _scalar(math.nan, level)
    if n == 0:
        return Drift(False, math.nan, math.nan, nan_difference, math.nan,
                     "no drift test: no intervals in the window", level, min_relative_change)

    split_time = end[-1] - recent_fraction * (end[-1] - start.min())
    recent = 0.5 * (start + end) >= split_time
    recent_rows, earlier_rows = rows[recent], rows[~recent]
    recent_start = float(start[recent][0]) if recent.any() else math.nan
    recent_al = mean_acceptance_length(SpecCounts.from_vector(recent_rows.sum(axis=0)))
    earlier_al = mean_acceptance_length(SpecCounts.from_vector(earlier_rows.sum(axis=0)))

    usable = [int((part[:, _D] > 0).sum()) for part in (recent_rows, earlier_rows)]
    if min(usable) < MIN_ROWS_FOR_INTERVAL:
        message = (
            f"no drift test: too few intervals with drafts ({usable[0]} recent, {usable[1]} earlier; "
            f"need {MIN_ROWS_FOR_INTERVAL} each)"
        )
        return Drift(False, recent_al, earlier_al, _scalar(recent_al - earlier_al, level), recent_start,
                     message, level, min_relative_change)

    rng = np.random.default_rng(seed)
    recent_resamples = _widened_al_resamples(recent_rows, level, int(n_resamples), rng)
    earlier_resamples = _widened_al_resamples(earlier_rows, level, int(n_resamples), rng)
    m = min(recent_resamples.size, earlier_resamples.size)
    low, high = percentile_bounds(recent_resamples[:m] - earlier_resamples[:m], level)
    difference = _scalar(recent_al - earlier_al, level, (low, high))

    excludes_zero = low > 0 or high < 0
    large_enough = abs(difference.value) >= min_relative_change * earlier_al
    detected = bool(excludes_zero and large_enough)
    span = approximate_duration(float(end[-1] - recent_start))
    interval_text = f"{level:.0%} interval {_signed(low)} … {_signed(high)}"
    if detected:
        verb = "fell" if difference.value < 0 else "rose"
        message = (
            f"mean acceptance length {verb} from {earlier_al:.2f} to {recent_al:.2f} in the last {span} "
            f"({_signed(difference.value)}, {interval_text})"
        )
    elif excludes_zero:
        message = (
            f"no drift: mean acceptance length {recent_al:.2f} in the last {span} against {earlier_al:.2f} before "
            f"({_signed(difference.value)}, {interval_text}), a change below {min_relative_change:.0%}"
        )
    else:
        message = (
            f"no drift: mean acceptance length {recent_al:.2f} in the last {span} against {earlier_al:.2f} before "
            f"({_signed(difference.value)}, {interval_text})"
        )
    return Drift(detected, float(recent_al), float(earlier_al), difference, recent_start, message, level,
                 min_relative_change)
