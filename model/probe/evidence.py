"""What a route's window holds for the probe (``ProbeEvidence``, built by ``probe_evidence``):
a running probe at a larger γ joined to the fleet's curve (model.probe.running); a segment at
another γ with its own latency (``ProbeLatency``), whose steps beside the deployed γ's
measure the specialized decode speedup (model.probe.measured_speedup); and, where the window
holds no such segment, the earlier window in which one last ran (``ProbedRoute``, found by
model.probe.lookback), whose measurement later windows keep.

The route's estimate (acceptance.route_estimate) knows nothing of probes: this reads the
window's segments beside it, each with its draft flow, latency and batch mix
(acceptance.segment_measures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Unpack

from acceptance.segment_measures import RouteTraffic, SegmentMix, route_traffic, segment_itl_mean_s, segment_mix

from .running import ProbeSegment, window_probe

if TYPE_CHECKING:
    from acceptance.estimates import EstimateOptions
    from acceptance.route_estimate import RouteEstimate
    from acceptance.windows import Window


@dataclass(frozen=True)
class ProbeLatency:
    """A segment at another γ than the deployed one, running at the window's end, with its own
    latency: beside the deployed segment's, it measures the specialized decode speedup
    (model.probe.measured_speedup) whether its γ is above the deployed one or below."""

    gamma: int
    itl_mean_s: float
    traffic: RouteTraffic | None
    segment_mix: SegmentMix | None = None  # its engines' own batch mix (None: the source keeps none per segment)


@dataclass(frozen=True)
class ProbedRoute:
    """The route's estimate over an earlier window and the probe's latency in it: where the
    tuned window holds no probe, the measurement a tune of that window made is priced."""

    route: RouteEstimate
    latency: ProbeLatency


@dataclass(frozen=True)
class ProbeEvidence:
    """What a route's window holds for a probe: a running probe at a larger γ joined to the
    fleet's rows (``running``); a segment at another γ with its own latency (``latency``);
    and, where this window has no such segment, the earlier window in which one last ran
    (``earlier``)."""

    running: ProbeSegment | None = None
    latency: ProbeLatency | None = None
    earlier: ProbedRoute | None = None


NO_PROBE = ProbeEvidence()


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


def route_probe_latency(window: Window | None, route: RouteEstimate) -> ProbeLatency | None:
    """The window's segment at another γ with its own latency, where the route's estimated
    segment keeps its own too (a latency has nothing to be set beside otherwise)."""
    return window_probe_latency(window, route.gamma) if route.itl_mean_s is not None else None


def probed_route(window: Window, route: RouteEstimate) -> ProbedRoute | None:
    """``route`` (estimated over ``window``) with the probe's latency in it (None: none there)."""
    latency = route_probe_latency(window, route)
    return None if latency is None else ProbedRoute(route, latency)


def probe_evidence(window: Window | None, route: RouteEstimate, *, earlier: ProbedRoute | None = None,
                   **estimate_options: Unpack[EstimateOptions]) -> ProbeEvidence:
    """What ``window`` holds for a probe beside ``route``, its estimate (``estimate_options``:
    how a running probe's own rows are estimated, as the route's were); ``earlier``: the
    window in which a probe last ran (model.probe.lookback), kept where ``window`` has none."""
    return ProbeEvidence(running=window_probe(window, route.estimate, **estimate_options),
                         latency=route_probe_latency(window, route), earlier=earlier)
