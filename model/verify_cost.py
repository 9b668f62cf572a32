"""The cost of verifying at another γ, learned from the engines (docs/MODEL.md, The cost of
verifying, measured): the shape of a step's time against the tokens it verifies per request,
at the route's batch mix, fitted to the points the route's window measured
(acceptance.step_times) — the deployed segment's undrafted (1 token) and drafted (1 + T/D)
steps, and the mean step of every other segment at its own γ (an earlier one, a running
probe's) at 1 + T/S — with its uncertainty, beside the shape the profile assumes.

The fitted shape is a line, t(q) = t_1 + b·(q − 1): b, the seconds a step grows by per extra
token each request verifies, by weighted least squares over the points (each weighted by
its resamples' inverse variance), resample by resample (resample i of every point). The
profile's own increment over the same widths at the same mix, b_assumed = Σ_B w_B (T(B, q_d)
− T(B, 1)) / (q_d − 1), is set beside it: where b_assumed lies outside the fit's interval the
fit is preferred (``preferred``) and priced instead of the profile's increments
(model.profiles.MeasuredShapeProfile), the slope's resamples carried into the ensemble. Only
for free drafters (ngram, suffix), whose proposer costs the same at every γ, so that a step's
time at another γ moves with the tokens verified alone; a measured table is the user's own
measurement and is never replaced (a disagreement is said). A configured plain decode is a
point too (γ 0, one token, no proposer), named beside the line, not on it.

Where the engines run specdec's plugin, each segment adds a pair of points timed per step
(acceptance.step_times.PluginStepPair): its pure-decode steps at one token per request and
its uniform-verify steps at γ + 1, at the batch sizes both shapes timed (B ≤ 64 / (γ + 1)).
A pair is at its own batch mix, not the route's: it shares the line's slope but has an
intercept of its own (a group of its own in the fit: the slope is the weighted least
squares' within groups, the line's t_1 is the window's own points' where they are any).
It is on the line only where its batch sizes ran at least MIN_PLUGIN_DECODE_SHARE of the
segment's decode steps — a slope measured at small batches does not stand for a route
that decodes mostly at larger ones — and named beside it otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from .drafters import FREE, drafter_for

if TYPE_CHECKING:
    from acceptance.step_times import PluginStepPair, StepTimeEvidence

    from .deployment import Deployment

DRAFTED, UNDRAFTED, PLAIN, SEGMENT = "drafted_steps", "undrafted_steps", "plain_decode", "segment"
PLUGIN_ONE_TOKEN, PLUGIN_VERIFY = "plugin_pure_decode", "plugin_uniform_verify"  # a segment's plugin pair
# the share of a segment's decode steps its plugin pair's batch sizes must run for the pair to be fitted
MIN_PLUGIN_DECODE_SHARE = 0.5
# Why no fit (codes; the views word them)
NOT_FREE = "drafter_cost_moves_with_gamma"  # a parallel or sequential drafter: its cost is in every point
NO_POINTS = "too_few_points"  # fewer than two points at distinct widths with an interval
# two points closer than this in tokens per request leave the slope unmeasured
MIN_WIDTH_SPREAD = 0.5
# the slope's quantile bins the ensemble's resamples are spread over (as a specialized range's)
SLOPE_BINS = 8


@dataclass(frozen=True)
class CostPoint:
    """One measured point: a step's mean time per request at the tokens it verified."""

    name: str  # DRAFTED | UNDRAFTED | PLAIN | SEGMENT | PLUGIN_ONE_TOKEN | PLUGIN_VERIFY
    gamma: int
    tokens_per_request: float
    step_s: float
    low: float | None
    high: float | None
    source: str  # where it was read
    on_line: bool  # whether the fit uses it (the plain decode runs no proposer: it is beside the line)
    batch_sizes: tuple[int, ...] | None = None  # a plugin point's batch sizes (None: the segment's own mix)
    timed_steps: float | None = None  # a plugin point's timed steps
    decode_share: float | None = None  # a plugin pair's: its segment's decode steps that may run at its batch sizes

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "gamma": self.gamma, "tokens_per_request": self.tokens_per_request,
                "step_s": self.step_s, "low": self.low, "high": self.high, "source": self.source,
                "fitted": self.on_line, "batch_sizes": None if self.batch_sizes is None else list(self.batch_sizes),
                "timed_steps": self.timed_steps, "decode_share": self.decode_share}


@dataclass(frozen=True, eq=False)
class VerifyCost:
    """The fitted cost shape and what the profile assumes beside it (module docstring)."""

    points: tuple[CostPoint, ...]
    slope_s: float  # b: seconds per extra token verified per request, at the route's mix
    slope_resampled: np.ndarray = field(repr=False)  # (n,)
    one_token_step_s: float  # t_1: the line at one token (a speculating engine's one-token step)
    level: float
    reference_width: float  # the widest point's tokens per request: where the two shapes are compared
    assumed_profile: str  # flat | roofline | table:<path>
    assumed_slope_s: float | None  # the profile's b over the same widths at the same mix
    configured_profile: bool  # cost_profile was the user's, not the default

    @property
    def interval(self) -> tuple[float, float]:
        low, high = np.quantile(self.slope_resampled, [(1 - self.level) / 2, (1 + self.level) / 2])
        return float(low), float(high)

    @property
    def disagrees(self) -> bool:
        """The profile's slope lies outside the fit's interval."""
        low, high = self.interval
        return self.assumed_slope_s is not None and not low <= self.assumed_slope_s <= high

    @property
    def preferred(self) -> bool:
        """The fit is priced instead of the profile's increments: they disagree, and the profile
        is an assumed shape (flat, roofline), not a measured table."""
        return self.disagrees and self.assumed_profile in ("flat", "roofline")

    @property
    def largest_gamma(self) -> int:
        """The largest γ a point on the line measured: past it the shape is extrapolated."""
        return max(p.gamma for p in self.points if p.on_line)

    def ratio_at(self, slope_s: float) -> float:
        """A step verifying ``reference_width`` tokens against a one-token step, at slope ``slope_s``."""
        return 1.0 + slope_s * (self.reference_width - 1.0) / self.one_token_step_s

    def slope_bins(self, bins: int = SLOPE_BINS) -> list[float]:
        """The slope at the midpoints of ``bins`` equal quantile bins of its resamples."""
        return [float(x) for x in np.quantile(self.slope_resampled, (np.arange(bins) + 0.5) / bins)]

    def to_dict(self) -> dict[str, object]:
        low, high = self.interval
        return {"points": [p.to_dict() for p in self.points], "slope_s_per_token": self.slope_s,
                "slope_low": low, "slope_high": high, "level": self.level,
                "one_token_step_s": self.one_token_step_s, "reference_tokens_per_request": self.reference_width,
                "measured_ratio": self.ratio_at(self.slope_s),
                "measured_ratio_low": self.ratio_at(low), "measured_ratio_high": self.ratio_at(high),
                "assumed_profile": self.assumed_profile, "assumed_slope_s_per_token": self.assumed_slope_s,
                "assumed_ratio": None if self.assumed_slope_s is None else self.ratio_at(self.assumed_slope_s),
                "disagrees": self.disagrees, "preferred": self.preferred,
                "contradicts_configured": self.disagrees and self.configured_profile,
                "largest_gamma": self.largest_gamma}


@dataclass(frozen=True)
class _Line:
    """Points on the line: widths (P,), values (P,), their resamples (n, P) and groups (P,):
    0 the window's own points, i ≥ 1 the i-th fitted plugin pair (an intercept of its own)."""

    widths: np.ndarray
    values: np.ndarray
    resampled: np.ndarray
    groups: np.ndarray


def _fitted_pairs(evidence: StepTimeEvidence) -> list[PluginStepPair]:
    return [p for p in evidence.plugin if p.decode_share >= MIN_PLUGIN_DECODE_SHARE]


def _plugin_points(pair: PluginStepPair, level: float) -> list[CostPoint]:
    q = ((1 - level) / 2, (1 + level) / 2)
    lo, hi = np.quantile(pair.resampled, q, axis=0)
    on_line = pair.decode_share >= MIN_PLUGIN_DECODE_SHARE
    sizes = ", ".join(str(b) for b in pair.batch_sizes)
    where = (f"specdec:engine_step_seconds at gamma {pair.gamma}: {{}} steps at batch sizes {sizes} over "
             f"{pair.rows} scrape intervals (median inter-token latency per step; {pair.decode_share:.0%} of the "
             f"segment's decode steps may run at these batch sizes)")
    return [CostPoint(PLUGIN_ONE_TOKEN, pair.gamma, 1.0, pair.one_token_s, float(lo[0]), float(hi[0]),
                      where.format(f"{pair.timed_steps[0]:,.0f} pure-decode"), on_line, pair.batch_sizes,
                      pair.timed_steps[0], pair.decode_share),
            CostPoint(PLUGIN_VERIFY, pair.gamma, float(pair.verify_width), pair.verify_s, float(lo[1]), float(hi[1]),
                      where.format(f"{pair.timed_steps[1]:,.0f} uniform-verify"), on_line, pair.batch_sizes,
                      pair.timed_steps[1], pair.decode_share)]


def measured_points(evidence: StepTimeEvidence, deployed: int, level: float) -> list[CostPoint]:
    """The points of the window: the deployed segment's undrafted and drafted steps where its
    drafted share moved, and every segment's mean step (the deployed γ's only where it did not)."""
    q = ((1 - level) / 2, (1 + level) / 2)
    points = []
    drafted = evidence.drafted
    if drafted is not None:
        lo_u, hi_u = np.quantile(drafted.resampled[:, 0], q)
        lo_d, hi_d = np.quantile(drafted.resampled[:, 1], q)
        where = f"the deployed gamma {drafted.gamma}'s {drafted.rows} scrape intervals, drafted against undrafted steps"
        points += [CostPoint(UNDRAFTED, drafted.gamma, 1.0, drafted.undrafted_step_s, float(lo_u), float(hi_u), where,
                             True),
                   CostPoint(DRAFTED, drafted.gamma, drafted.drafted_width, drafted.drafted_step_s, float(lo_d),
                             float(hi_d), where, True)]
    for s in evidence.segments:
        if s.resampled is None or (drafted is not None and s.gamma == deployed):
            continue
        lo, hi = np.quantile(s.resampled, q)
        role = "the deployed gamma's segment" if s.gamma == deployed else f"a segment at gamma {s.gamma}"
        points.append(CostPoint(SEGMENT, s.gamma, s.tokens_per_request, s.step_s, float(lo), float(hi),
                                f"{role}'s mean step over {s.rows} {s.unit}", True))
    for pair in evidence.plugin:
        points += _plugin_points(pair, level)
    return points


def _line(evidence: StepTimeEvidence, deployed: int) -> _Line | None:
    """The fitted points' widths, values and resamples (resample i of each), or None."""
    widths, values, columns = [], [], []
    drafted = evidence.drafted
    if drafted is not None:
        widths += [1.0, drafted.drafted_width]
        values += [drafted.undrafted_step_s, drafted.drafted_step_s]
        columns += [drafted.resampled[:, 0], drafted.resampled[:, 1]]
    for s in evidence.segments:
        if s.resampled is not None and not (drafted is not None and s.gamma == deployed):
            widths.append(s.tokens_per_request)
            values.append(s.step_s)
            columns.append(s.resampled)
    groups = [0] * len(widths)
    for i, pair in enumerate(_fitted_pairs(evidence), start=1):
        widths += [1.0, float(pair.verify_width)]
        values += [pair.one_token_s, pair.verify_s]
        columns += [pair.resampled[:, 0], pair.resampled[:, 1]]
        groups += [i, i]
    x, g = np.array(widths), np.array(groups, dtype=int)
    if not any(np.ptp(x[g == k]) >= MIN_WIDTH_SPREAD for k in set(groups)):
        return None
    n = min(len(c) for c in columns)
    return _Line(x, np.array(values), np.stack([c[:n] for c in columns], axis=1), g)


def _slopes(x: np.ndarray, y: np.ndarray, weights: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Weighted least-squares slopes of y (..., P) on x (P,), each group (P,) with its own
    intercept (the within-groups slope; one group: the plain line's)."""
    g = np.zeros(len(x), dtype=int) if groups is None else np.asarray(groups)
    w = weights / weights.sum()
    x_c = np.array(x, dtype=float)
    y_c = np.array(y, dtype=float)
    for k in np.unique(g):
        m = g == k
        wk = w[m] / w[m].sum()
        x_c[m] -= float(wk @ x[m])
        y_c[..., m] -= (y_c[..., m] @ wk)[..., None]
    slope: np.ndarray = (y_c @ (w * x_c)) / float(w @ x_c**2)
    return slope


def fit_verify_cost(evidence: StepTimeEvidence, deployed: int, *, level: float, assumed_profile: str,
                    assumed_slope: float | None, configured_profile: bool,
                    plain: CostPoint | None = None) -> VerifyCost | None:
    """The line through the window's points, or None where they do not span two widths."""
    line = _line(evidence, deployed)
    if line is None:
        return None
    spread = np.var(line.resampled, axis=0)
    weights = 1.0 / np.maximum(spread, 1e-6 * float(np.mean(spread)) + 1e-30)
    slope = float(_slopes(line.widths, line.values, weights, line.groups))
    resampled = _slopes(line.widths, line.resampled, weights, line.groups)
    # t_1 at the window's own mix where it has points on the line, else over the plugin pairs
    own = line.groups == 0 if bool(np.any(line.groups == 0)) else np.ones(len(line.groups), dtype=bool)
    w = weights[own] / weights[own].sum()
    one_token = float(w @ line.values[own] - slope * (w @ line.widths[own] - 1.0))
    points = measured_points(evidence, deployed, level) + ([] if plain is None else [plain])
    return VerifyCost(tuple(points), slope, resampled, max(one_token, 1e-9), level, float(line.widths.max()),
                      assumed_profile, assumed_slope, configured_profile)


class _StepTimes(Protocol):
    def step_time_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike, path: str = ...
                    ) -> np.ndarray: ...


def assumed_slope_s(profile: _StepTimes, batch_sizes: np.ndarray, weights: np.ndarray, width: float) -> float | None:
    """The profile's increment per extra verified token between one token and ``width``, over
    the route's request weights (anchor-free: the flat and roofline increments do not depend
    on the anchor; a table is in its own seconds)."""
    if not width > 1.0:
        return None
    grow = np.asarray(profile.step_time_s(batch_sizes, width), dtype=float) - np.asarray(
        profile.step_time_s(batch_sizes, 1.0), dtype=float)
    return float(np.asarray(weights, dtype=float) @ grow / (width - 1.0))


def with_verify_cost(deployment: Deployment, evidence: StepTimeEvidence | None, deployed: int,
                     mix: tuple[np.ndarray, np.ndarray], level: float, assumed: _StepTimes) -> Deployment:
    """``deployment`` with the cost shape its engines measure (Deployment.verify_cost; None: no
    fit), beside ``assumed``, its own profile; ``mix``: the route's batch sizes and request weights."""
    if evidence is None or drafter_for(deployment.method).kind != FREE or deployment.decode_backend == "latency_specialized":
        return replace(deployment, verify_cost=None)
    line = _line(evidence, deployed)
    if line is None:
        return replace(deployment, verify_cost=None)
    slope = assumed_slope_s(assumed, mix[0], mix[1], float(line.widths.max()))
    fit = fit_verify_cost(evidence, deployed, level=level, assumed_profile=deployment.cost_profile,
                          assumed_slope=slope, configured_profile=deployment.is_configured("cost_profile"),
                          plain=_plain_point(deployment))
    return replace(deployment, verify_cost=fit)


def _plain_point(deployment: Deployment) -> CostPoint | None:
    """The user's plain decode at batch 1 as a point (γ 0, one token, no proposer); None where not given."""
    rate = deployment.baseline_tokens_per_second
    if not rate or not deployment.is_configured("baseline_tokens_per_second"):
        return None
    source = ("--baseline-tokens-per-second" if "baseline_tokens_per_second" in deployment.flagged
              else "the configured baseline_tokens_per_second")
    return CostPoint(PLAIN, 0, 1.0, 1.0 / rate, None, None, f"{source} (batch 1)", False)
