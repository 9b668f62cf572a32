"""The decision object (``Decision``) and the gain it claims (``Gain``, ``gain_of``).

A decision says which γ the fleet runs (``fleet_gamma``) and which γ it names beside it
(``best_gamma``): on a change or an off the best expected γ (the fleet's own, or farther when
the fleet takes a nearer sure step); on a keep the best expected γ, which the fleet does not
run yet (or already runs); on a probe the best expected γ it probes toward (the probe's own γ,
``probe.gamma``, is nearer where no trial of that one pays or is safe; the specialized-speedup
probe: the fleet's γ, whose hold on the speedup it tests); on an undecided the γ the withheld
decision would have run or probed. Its reasons are a list in
the order the rules gave them; the JSON's ``decision_reason`` joins them with "; ".
The JSON's ``recommended_gamma`` and ``expected_best_gamma`` are read from these two γ
(``recommended_gamma``, ``expected_best_gamma`` below), as users' scripts know them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..decision_kind import DecisionKind
from ..deployed_speedup import MeasuredVerdict
from ..figures_needed import FigureNeeded
from ..measured_segments import SegmentComparison
from ..probe import Probe
from ..probe.specialized_speedup import SpecializedBreakEven

# the decisions that deploy a config: a change or an off the fleet's new γ; a probe its probe's
# (the fleet staying at the deployed γ or taking the sure step)
DEPLOYING_DECISIONS = (DecisionKind.CHANGE, DecisionKind.OFF, DecisionKind.PROBE)
# the decision when the pricing rests on defaults: the fleet runs what it runs, nothing to deploy
UNDECIDED = DecisionKind.UNDECIDED


@dataclass(frozen=True)
class Gain:
    """speedup(recommended) / speedup(deployed) − 1: the point and its interval over the same
    resamples × tail models as the decision (None without resamples)."""

    value: float
    low: float | None
    high: float | None

    def __str__(self) -> str:
        """+9.6% [+8.1%, +11.0%] (the point alone without resamples)."""
        if self.low is None or self.high is None:
            return f"{self.value:+.1%}"
        return f"{self.value:+.1%} [{self.low:+.1%}, {self.high:+.1%}]"


def gamma_to_deploy(decision: DecisionKind, recommended: int, deployed: int) -> int:
    """The γ a decision has the fleet run: the recommended one on a change, an off (0) or a
    probe, else the deployed γ — a keep (or an undecided) runs it even when another looks
    better, and that other γ is then the recommendation's ``recommended_gamma``."""
    return recommended if decision in DEPLOYING_DECISIONS else deployed


def gain_of(rec: int, deployed: int, speed_point: np.ndarray, ens: np.ndarray | None, level: float) -> Gain | None:
    """Gain of the recommended γ over the deployed one (None when they are the same γ)."""
    if rec == deployed or not speed_point[deployed] > 0:
        return None
    value = float(speed_point[rec] / speed_point[deployed] - 1.0)
    if ens is None:
        return Gain(value, None, None)
    gains = ens[:, rec] / ens[:, deployed] - 1.0
    low, high = np.quantile(gains, [(1 - level) / 2, (1 + level) / 2])
    return Gain(value, float(low), float(high))


@dataclass(frozen=True)
class Decision:
    """One route's decision as the rules left it (model.decision.rules)."""

    kind: DecisionKind
    fleet_gamma: int  # the γ the fleet runs after it
    best_gamma: int  # the γ named beside the fleet's, per kind as the module docstring says
    reasons: tuple[str, ...] = ()
    probe: Probe | None = None  # a probe to start or carry on (model.probe)
    # a probe priced and not run (its value below its cost, or a whole-route trial less sure
    # than a change): what decision_horizon_s and engine_restart_s decided
    declined: Probe | None = None
    # a keep whose gain is plausible but not sure: the factor on the window's drafts that settles
    # it (1/√drafts), or None when no window at the observed γ can (the gain rests past it)
    settle: float | None = None
    plausible: bool = False  # the best expected γ's gain is plausible but not yet sure
    claim: str = ""  # the probability the verdict's reason starts from
    # on latency_specialized: the speedups over which the fleet's γ holds (model.probe.specialized_speedup)
    break_even: SpecializedBreakEven | None = None
    # the default figures it rests on (model.figures_needed): then it is undecided or a keep that says so
    figures_needed: tuple[FigureNeeded, ...] = ()
    withheld: Decision | None = None  # undecided: the decision the default figures would have made
    # the engines' measurement that decided between the deployed γ and plain decode (model.deployed_speedup)
    measured: MeasuredVerdict | None = None
    # the engines' rates at two measured γ that decided between them (model.measured_segments)
    measured_between: SegmentComparison | None = None

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @property
    def recommended_gamma(self) -> int:
        """The JSON's recommended_gamma: on a keep the best expected γ (which the fleet does
        not run), else the γ the fleet runs."""
        return self.best_gamma if self.kind == DecisionKind.KEEP else self.fleet_gamma

    @property
    def expected_best_gamma(self) -> int | None:
        """The JSON's expected_best_gamma: the best expected γ where the decision runs another
        (a nearer sure step, a probe, or an undecided's what-if), else None."""
        return None if self.best_gamma == self.recommended_gamma else self.best_gamma

    @property
    def prices_probe(self) -> bool:
        """Whether a probe was priced for it (run, carried on or declined; a withheld one's
        too): only then do decision_horizon_s and engine_restart_s bear on it."""
        return (self.probe is not None or self.declined is not None
                or (self.withheld is not None and self.withheld.prices_probe))

    def because(self, why: str) -> Decision:
        """The same decision with one more reason."""
        return replace(self, reasons=self.reasons + (why,))

    def anew(self, kind: DecisionKind, fleet_gamma: int, best_gamma: int, reasons: tuple[str, ...], **changes: Any
             ) -> Decision:
        """Another decision in this one's place, for its own ``reasons``: none of this one's
        probe, declined probe, withheld answer or settling carries over (``changes`` set the
        fields that do differ, those included)."""
        cleared: dict[str, Any] = {"probe": None, "declined": None, "withheld": None, "settle": None,
                                   "plausible": False}
        return replace(self, kind=kind, fleet_gamma=fleet_gamma, best_gamma=best_gamma, reasons=reasons,
                       **{**cleared, **changes})

    def to(self, kind: DecisionKind, why: str, **changes: Any) -> Decision:
        """Another kind of decision, for one more reason (``changes``: the other fields it sets)."""
        return replace(self, kind=kind, reasons=self.reasons + (why,), **changes)


def start(deployed: int, best: int) -> Decision:
    """Before any rule: the fleet keeps the deployed γ, ``best`` the best expected one."""
    return Decision(DecisionKind.KEEP, fleet_gamma=deployed, best_gamma=best)

