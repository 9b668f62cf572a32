"""What a γ segment of a window measures beside its acceptance: the draft flow of its rows
(``RouteTraffic``: drafts, seconds, engines), its own mean ITL (``segment_itl_mean_s``) and
its engines' own batch mix (``SegmentMix``). The probe (model.probe) reads these of the
segments a window holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .counts import IntervalCounts

if TYPE_CHECKING:
    from .windows import GammaSegment, StepShapeWindow


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


def segment_itl_mean_s(segment: GammaSegment) -> float | None:
    """A segment's own mean ITL (GammaSegment.itl_mean_s; None where its source keeps none)."""
    itl = segment.itl_mean_s
    return float(itl) if itl is not None and itl > 0 else None
