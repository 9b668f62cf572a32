"""What the decision rules read: a route's candidates priced (``Priced``), and on the
specialized path how the pricing moves with the configured speedup (``SpecializedPricing``).
model.recommend builds them; model.shared_deployment builds a ``Priced`` for a joint γ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from acceptance.observed_rate import SegmentRate
from acceptance.segment_measures import RouteTraffic

from ..deployed_speedup import DeployedSpeedup
from ..deployment import Deployment
from ..figures_needed import FigureNeeded
from ..probe import ProbeInputs, RunningProbe


@dataclass(frozen=True, eq=False)
class SpecializedPricing:
    """The latency_specialized path's pricing at any specialized speedup s, for the break-even
    and the probe that measures s (model.probe.specialized_speedup, model.probe.measured_speedup)."""

    # ((G,), (G,)) the step time over the mix at speedup s is fixed + scaled / s (CostModel.speedup_terms)
    step_time_terms: tuple[np.ndarray, np.ndarray]
    expected_tokens: np.ndarray  # (M, G) AL of every tail model at the point
    step_time: np.ndarray  # (G,) τ(γ) at the point, the objective's step time over the mix
    time_shares: np.ndarray  # (nB,) u_B up to a factor: request weights × step time / B at the deployed γ
    batch_sizes: np.ndarray  # (nB,)
    clean_share: float  # the share of steps the specialized kernels can take
    measured: bool  # the speedup range priced is a probe's measurement, not the configured figure
    latency_from_running: bool  # the route's latency is Little's law's over logged intervals


@dataclass(frozen=True, eq=False)
class Priced:
    """One route's candidates γ = 0..top priced, and what the decision may act on."""

    deployment: Deployment
    deployed: int  # the γ the window ran
    observed: int  # the positions the window measured (its curve's length)
    speedup: np.ndarray  # (G,) the point speedups
    allowed: np.ndarray  # (G,) which candidates can run here
    refusals: Sequence[str | None]  # (G,) why a candidate cannot run
    ensemble: np.ndarray | None = None  # (N, G) resampled speedups: resamples × tail models (× speed bins)
    level: float = 0.9
    # the ensemble without its sampling part (the point curve under the tail models): whether more
    # drafts at the observed γ can settle a gain past it; None when not separable
    tail_only: Callable[[], np.ndarray] | None = None
    traffic: RouteTraffic | None = None  # engines, draft rate, rows
    # the probe joined to the curve (model.probe.running): still running, or ended in the window
    joined_probe: RunningProbe | None = None
    probe_inputs: ProbeInputs | None = None  # None: no ensemble to price a probe on
    specialized: SpecializedPricing | None = None  # None off the path and on a percentile objective
    figures_needed: tuple[FigureNeeded, ...] = ()  # the default figures the pricing rests on
    model_error_warning: str | None = None  # the cost model misses the engine's observed rate
    # the model's rate at the deployed γ over the engines' − 1, which widens every unmeasured
    # candidate of the ensemble (model.model_error_spread); None where not comparable
    model_error: float | None = None
    deployed_measured: DeployedSpeedup | None = None  # the engines' own rate at the deployed γ over the plain decode
    # the largest γ a segment of the window measured (the deployed one, another with its own
    # latency, a running probe's): past it no point bears on a γ's acceptance or step cost
    measured_upto: int = 0
    # every γ's own rate the engines measured, with its resamples (acceptance.observed_rate.segment_rates)
    segment_rates: tuple[SegmentRate, ...] = ()

    @property
    def running_probe(self) -> RunningProbe | None:
        """The joined probe where it still runs: one to carry on or stop."""
        probe = self.joined_probe
        return probe if probe is not None and probe.running else None

    @property
    def ended_trial(self) -> RunningProbe | None:
        """The joined probe where it ended in the window (a trial, then back): its positions past
        the deployed γ are its drafts alone (no window at the deployed γ adds to them)."""
        probe = self.joined_probe
        return probe if probe is not None and not probe.running else None

    @property
    def largest_measured(self) -> int:
        """The largest γ a point bears on: the segments that measured their own step time, the
        deployed γ, and the positions the window's curve measured (a running probe's joined)."""
        return max(self.measured_upto, self.deployed, self.observed)

    @property
    def best_expected(self) -> int:
        """The allowed γ of best point speedup (ties → the smaller γ; γ = 0 scores exactly 1)."""
        return int(np.argmax(np.where(self.allowed, self.speedup, -np.inf)))
