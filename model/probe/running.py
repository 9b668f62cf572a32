"""A running probe's segment joined to the deployed one (docs/MODEL.md, Decisions past the
deployed γ).

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

from acceptance.definitions import conditional_from_survival
from acceptance.estimates import AcceptanceEstimate, ScalarEstimate, estimate_acceptance, percentile_bounds
from acceptance.segment_measures import RouteTraffic, route_traffic

if TYPE_CHECKING:
    from acceptance.estimates import EstimateOptions
    from acceptance.windows import Window


@dataclass(frozen=True, eq=False)
class ProbeSegment:
    """The probe's own estimate, the comparison on the shared positions, and the joined curve."""

    estimate: AcceptanceEstimate  # the probe segment's own acceptance at γ_p
    deployed_gamma: int  # γ_d, the main segment's
    shared_difference: ScalarEstimate  # AL over positions 1..γ_d: probe − main
    survival: np.ndarray  # the joined a_1..a_γp
    survival_resamples: np.ndarray  # (n, γ_p)
    traffic: RouteTraffic | None = None  # the probe segment's drafts, span and engines
    # still running at the window's end; False: it ended there (a one-engine route's trial,
    # then back; or an earlier γ above the deployed one), its positions measured all the same
    running: bool = True

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
    """The window's probe joined to ``main``: among the segments still running at the window's
    end, the one at a γ above main's with the most drafts; where none runs, the latest segment
    of the window at a γ above main's that ended (``running`` False: a one-engine route's
    trial, then back, measured positions past main's γ as a running probe does). None: no
    such segment, or one too thin to use yet. ``estimate_options``: estimate_acceptance's."""
    if window is None:
        return None
    above = [s for s in window.current_segments if s.gamma > main.gamma and s.total.drafts > 0]
    running = bool(above)
    if running:
        segment = max(above, key=lambda s: s.total.drafts)
    else:
        current = window.current_segments
        ended = [s for s in window.segments if s.gamma > main.gamma and s.total.drafts > 0
                 and not any(s is c for c in current)]
        if not ended:
            return None
        segment = max(ended, key=lambda s: s.end)
    joined = join_probe(main, estimate_acceptance(segment.intervals, **estimate_options))
    return None if joined is None else replace(joined, traffic=route_traffic(segment, segment.intervals),
                                               running=running)
