"""What a probe needs of a window (docs/MODEL.md, Decisions past the deployed γ): the route's
draft flow (``RouteTraffic``), a running probe's segment joined to the deployed one, and a
probe's own latency and batch mix (``ProbeLatency``, ``SegmentMix``: what measures the
specialized decode speedup).

A probe engine at γ_p above the deployed γ_d measures the positions the deployed segment
never checks. Its conditional rates α_k = a_k / a_{k−1} continue the deployed curve:

    a_k = a_k^main                                   k ≤ γ_d
    a_k = a_{γ_d}^main · Π_{j = γ_d+1..k} α_j^probe   γ_d < k ≤ γ_p

— conditionals, never levels, so the curve cannot rise at the join. Resample i of the
joined curve joins resample i of each (independent bootstraps: any pairing is a draw of
both). First the positions both have are compared: the probe's AL over positions 1..γ_d
less the main segment's, with its interval from the paired resamples. Position 0 moves with
γ (where drafts start) and a probe's traffic can differ; when the interval excludes 0,
γ_p's candidates are priced from the probe's own curve alone (``agrees`` False), and the
positions ≤ γ_d from the main segment's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Unpack

import numpy as np

from .counts import IntervalCounts
from .definitions import conditional_from_survival
from .estimates import AcceptanceEstimate, ScalarEstimate, percentile_bounds, estimate_acceptance

if TYPE_CHECKING:
    from .estimates import EstimateOptions
    from .windows import GammaSegment, StepShapeWindow, Window


@dataclass(frozen=True)
class RouteTraffic:
    """The drafts the estimated rows hold, the seconds they span and the engines at the
    segment's γ at the window's end (None: the source does not name engines, as ingested
    rows): a probe on one engine draws drafts/seconds/engines of them per second."""

    drafts: float
    seconds: float
    engines: int | None
    rows: int = 1  # the scrape intervals (or buckets) the rows are

    @property
    def row_seconds(self) -> float:
        """The mean span of a row: a probe shorter than a few of them leaves too few to resample."""
        return self.seconds / max(self.rows, 1)

    @property
    def drafts_per_engine_second(self) -> float | None:
        if self.engines is None or self.engines < 1 or not self.seconds > 0:
            return None
        return self.drafts / self.seconds / self.engines


def route_traffic(segment: GammaSegment | None, rows: IntervalCounts, engines: int | None = None
                  ) -> RouteTraffic | None:
    """The estimated rows' drafts over the seconds they span, and the engines still at their γ
    at the window's end (``segment``'s, a GammaSegment at the rows' γ; where it names none,
    ``engines``, the route's configured count); None when the rows span no time."""
    if not len(rows):
        return None
    seconds = float(rows.end[-1] - rows.start[0])
    if not seconds > 0:
        return None
    if segment is not None and segment.gamma == rows.gamma:
        engines = len(segment.engines_at_end or segment.engines) or engines
    return RouteTraffic(float(rows.total().drafts), seconds, engines, len(rows))


@dataclass(frozen=True, eq=False)
class ProbeSegment:
    """The probe's own estimate, the comparison on the shared positions, and the joined curve."""

    estimate: AcceptanceEstimate  # the probe segment's own acceptance at γ_p
    deployed_gamma: int  # γ_d, the main segment's
    shared_difference: ScalarEstimate  # AL over positions 1..γ_d: probe − main
    survival: np.ndarray  # the joined a_1..a_γp
    survival_resamples: np.ndarray  # (n, γ_p)
    traffic: RouteTraffic | None = None  # the probe segment's drafts, span and engines

    @property
    def gamma(self) -> int:
        return self.estimate.gamma

    @property
    def agrees(self) -> bool:
        """The shared positions agree within their interval: the joined curve prices every γ."""
        d = self.shared_difference
        return bool(d.low <= 0.0 <= d.high)

    @property
    def sources(self) -> list[str]:
        """Per position 1..γ_p, the segment its acceptance comes from: "main" or "probe"."""
        return ["main"] * self.deployed_gamma + ["probe"] * (self.gamma - self.deployed_gamma)


def join_probe(main: AcceptanceEstimate, probe: AcceptanceEstimate) -> ProbeSegment | None:
    """The probe joined to the main segment (module docstring); None unless γ_p > γ_d ≥ 1 and
    both have resamples (a probe with fewer than 3 rows of drafts is not used yet)."""
    d = main.gamma
    if not (probe.gamma > d >= 1) or not main.has_interval or not probe.has_interval:
        return None
    n = min(main.survival_resamples.shape[0], probe.survival_resamples.shape[0])
    main_res, probe_res = main.survival_resamples[:n], probe.survival_resamples[:n]
    shared = probe_res[:, :d].sum(axis=1) - main_res[:, :d].sum(axis=1)
    low, high = percentile_bounds(shared, main.level)
    point = float(probe.survival.value[:d].sum() - main.survival.value[:d].sum())
    return ProbeSegment(
        estimate=probe, deployed_gamma=d,
        shared_difference=ScalarEstimate(point, (float(low), float(high)), main.level),
        survival=_joined(main.survival.value, probe.survival.value, d),
        survival_resamples=_joined(main_res, probe_res, d),
    )


def _joined(main: np.ndarray, probe: np.ndarray, d: int) -> np.ndarray:
    """a_k^main for k ≤ d, then a_d^main times the probe's conditionals (module docstring)."""
    alpha = np.nan_to_num(conditional_from_survival(probe), nan=0.0)[..., d:]
    return np.concatenate([main[..., :d], main[..., d - 1:d] * np.cumprod(alpha, axis=-1)], axis=-1)


def window_probe(window: Window | None, main: AcceptanceEstimate,
                 **estimate_options: Unpack[EstimateOptions]) -> ProbeSegment | None:
    """The window's running probe joined to ``main``: among the segments still running at the
    window's end, the one at a γ above main's with the most drafts (None: no such segment,
    or one too thin to use yet). ``estimate_options``: estimate_acceptance's."""
    if window is None:
        return None
    above = [s for s in window.current_segments if s.gamma > main.gamma and s.total.drafts > 0]
    if not above:
        return None
    segment = max(above, key=lambda s: s.total.drafts)
    joined = join_probe(main, estimate_acceptance(segment.intervals, **estimate_options))
    return None if joined is None else replace(joined, traffic=route_traffic(segment, segment.intervals))


@dataclass(frozen=True)
class ProbeLatency:
    """A segment at another γ than the deployed one, running at the window's end, with its own
    latency: beside the deployed segment's, it measures the specialized decode speedup
    (model.probe.measured_speedup) whether its γ is above the deployed one or below."""

    gamma: int
    itl_mean_s: float
    traffic: RouteTraffic | None
    segment_mix: "SegmentMix | None" = None  # its engines' own batch mix (None: the source keeps none per segment)


@dataclass(frozen=True)
class SegmentMix:
    """One segment's own batch mix: u_B, the share of its engines' vllm:num_requests_running
    samples (B ≥ 1) with B running, and the independent samples they are worth. A probe's
    traffic can differ from the fleet's — a slower γ keeps its requests longer, and so runs
    larger batches at the same arrival rate — and its latency is of its own batches."""

    time_shares: dict[int, float]
    effective_samples: float


def segment_mix(segment: GammaSegment, step_shape: StepShapeWindow) -> SegmentMix | None:
    """``segment``'s own batch mix (GammaSegment.batch_samples), its samples worth what the
    route's persistence makes them (StepShapeWindow.worth); None where its source keeps no
    gauge samples per segment or none ran a batch."""
    counts = segment.batch_samples or {}
    total = float(sum(counts.values()))
    if not total > 0:
        return None
    return SegmentMix({int(b): n / total for b, n in sorted(counts.items()) if n > 0}, float(step_shape.worth(total)))


def window_probe_latency(window: Window | None, gamma: int) -> ProbeLatency | None:
    """Among the window's current segments of a γ other than ``gamma`` that keep their own
    latency, the one with the most drafts (None: no such segment)."""
    if window is None:
        return None
    others = [s for s in window.current_segments
              if s.gamma != gamma and s.total.drafts > 0 and segment_itl_mean_s(s) is not None]
    if not others:
        return None
    segment = max(others, key=lambda s: s.total.drafts)
    itl_mean_s = segment_itl_mean_s(segment)
    assert itl_mean_s is not None  # others keep the segments with a latency of their own
    return ProbeLatency(segment.gamma, itl_mean_s, route_traffic(segment, segment.intervals),
                         segment_mix(segment, window.step_shape))


def segment_itl_mean_s(segment: GammaSegment) -> float | None:
    """A segment's own mean ITL (GammaSegment.itl_mean_s; None where its source keeps none)."""
    itl = segment.itl_mean_s
    return float(itl) if itl is not None and itl > 0 else None
