"""One route's recommendation (``Recommendation``): its priced candidates (``Candidate``) and its
decision (model.decision.Decision), with the tune-gamma JSON keys they own. model.recommend
makes it; every view reads it and computes nothing of its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from acceptance.json_safe import JsonValue, json_safe

from .anchor import Anchor
from .context_bands import ContextView
from .sampling_split import SamplingView
from .decision import Decision, Gain
from .decision_kind import DecisionKind
from .deployed_speedup import DeployedSpeedup
from .extrapolate import TAIL_MODELS
from .figures_needed import FigureNeeded
from .load import LoadView
from .probe import Probe
from .specialized import Eligibility
from .speculative_keys import UnknownMethodKeys
from .probe.specialized_speedup import SpecializedBreakEven
from .probe.measured_speedup import MeasuredSpeedup


@dataclass(frozen=True)
class Candidate:
    gamma: int
    speedup: float
    speedup_low: float | None
    speedup_high: float | None
    tokens_per_second: float | None  # objective's unit: per-user tok/s, or tokens per GPU-second
    probability_best: float | None
    extrapolated: bool
    allowed: bool
    reason: str | None
    expected_tokens: float | None = None  # AL(γ) priced: the survival curve's (its tail models' mean), or the replay's


@dataclass(frozen=True)
class Recommendation:
    """One route priced and decided: the candidates, the decision (``decided``, model.decision)
    and the config that deploys it. The decision's fields are read through it under the
    tune-gamma JSON's names (decision, decision_reason, recommended_gamma, ...)."""

    objective: str
    cost_profile: str
    interval_level: float
    deployed_gamma: int
    decided: Decision
    candidates: list[Candidate]
    model_error: float | None
    vllm_speculative_config: dict[str, object] | None
    vllm_command_line: str | None
    replay_config: dict[str, object] | None  # None: the drafter is not known (model.figures_needed)
    specialized_eligibility: Eligibility | None = None
    schedule: list[tuple[int, int, int]] | None = None
    load: LoadView | None = None  # the best γ at each batch size of the mix (model.load)
    tail_models: tuple[str, ...] = field(default=TAIL_MODELS)
    verify_widths: tuple[float, ...] | None = None  # tokens per request a step verifies, per candidate γ
    anchor: Anchor | None = None  # the plain-decode rate priced at, and its source (model.anchor)
    # how AL at other γ was priced: "survival" (the curve, cut or extended by tail models) or
    # "replay" (the requests' own steps replayed at each γ: acceptance.step_replay)
    acceptance_model: str = "survival"
    replayed_requests: int | None = None  # "replay": the requests whose steps were replayed
    profile_figures: dict[str, object] | None = None
    gain: Gain | None = None  # of the recommended γ over the deployed one; None when they are the same
    model_error_warning: str | None = None  # model_error beyond ±MODEL_ERROR_TOLERANCE, and what to do
    # the specialized speedup measured from a probe's latency, priced instead of the configured
    # one when measured (model.probe.measured_speedup; set by model.route)
    specialized_speedup_measured: MeasuredSpeedup | None = None
    # the engines' own rate at the deployed γ over the user's plain decode (model.deployed_speedup)
    deployed_speedup_measured: DeployedSpeedup | None = None
    # (rows, G) the resampled speedups the decision read (resamples × tail models × speed
    # bins); not in the JSON: for pricing routes together (model.shared_deployment)
    ensemble: np.ndarray | None = field(default=None, repr=False, compare=False)
    objective_axis: str = ""  # what the objective optimises, in words (model.percentile_objective.axis_text)
    # a per-request route's γ by context length (model.context_bands; set by model.route)
    context: ContextView | None = None
    # a per-request route's greedy and sampled requests priced apart, or a mix a route's curve
    # suggests (model.sampling_split; set by model.route)
    sampling: SamplingView | None = None
    # a deploy or probe line written without the method's own keys (speculative_keys not given)
    speculative_keys_unknown: UnknownMethodKeys | None = None

    @property
    def decision(self) -> DecisionKind:
        """What the fleet is to do (model.decision_kind)."""
        return self.decided.kind

    @property
    def decision_reason(self) -> str:
        return self.decided.reason

    @property
    def decision_basis(self) -> str:
        """"measured": the engines' own rates decided — at the deployed γ against plain decode
        (model.deployed_speedup), or at two measured γ (model.measured_segments); "model": the
        table's projection did."""
        return "measured" if self.decided.measured is not None or self.decided.measured_between is not None else "model"

    @property
    def recommended_gamma(self) -> int:
        return self.decided.recommended_gamma

    @property
    def expected_best_gamma(self) -> int | None:
        """The best expected γ when the decision runs another: a nearer sure step, a probe, or
        an undecided's what-if."""
        return self.decided.expected_best_gamma

    @property
    def gamma_to_deploy(self) -> int:
        return self.decided.fleet_gamma

    @property
    def probe(self) -> Probe | None:
        """decision "probe": the probe to run (model.probe)."""
        return self.decided.probe

    @property
    def drafts_factor_to_settle(self) -> float | None:
        """A gain not yet sure: the window's drafts × this would settle it (1/√drafts)."""
        return self.decided.settle

    @property
    def specialized_break_even(self) -> SpecializedBreakEven | None:
        """On latency_specialized: the speedups over which the decision's γ holds."""
        return self.decided.break_even

    @property
    def figures_needed(self) -> list[FigureNeeded]:
        """The default figures the decision would rest on: then no change, off, probe or deploy line."""
        return list(self.decided.figures_needed)

    @property
    def probability_best(self) -> float | None:
        """P(best) of the recommended γ: its share of the ensemble in which it is the best allowed."""
        return next(c.probability_best for c in self.candidates if c.gamma == self.recommended_gamma)

    def to_dict(self) -> dict[str, JsonValue]:
        """The tune-gamma JSON keys this module owns (acceptance.json_safe: NaN → None)."""
        return json_safe({
            "objective": self.objective,
            "objective_axis": self.objective_axis,
            "cost_profile": self.cost_profile,
            "interval_level": self.interval_level,
            "deployed_gamma": self.deployed_gamma,
            "recommended_gamma": self.recommended_gamma,
            "gamma_to_deploy": self.gamma_to_deploy,
            "decision": self.decision,
            "decision_reason": self.decision_reason,
            "decision_basis": self.decision_basis,
            "measured_between": (None if self.decided.measured_between is None
                                 else self.decided.measured_between.to_dict()),
            "probability_best": self.probability_best,
            "candidates": [asdict(c) for c in self.candidates],
            "model_error": self.model_error,
            "vllm": {"speculative_config": self.vllm_speculative_config, "command_line": self.vllm_command_line,
                     "speculative_keys_unknown": (None if self.speculative_keys_unknown is None
                                                  else self.speculative_keys_unknown.to_dict())},
            "replay_config": self.replay_config,
            "specialized_eligibility": None if self.specialized_eligibility is None else asdict(self.specialized_eligibility),
            # (first batch size, last batch size, γ) ranges; part of vllm.speculative_config
            # only on a change of γ (a schedule restarts engines too), else a suggestion
            "schedule": None if self.schedule is None else [list(r) for r in self.schedule],
            "load": None if self.load is None else self.load.to_dict(),
            "verify_widths": None if self.verify_widths is None else list(self.verify_widths),
            "acceptance_model": self.acceptance_model,
            "replayed_requests": self.replayed_requests,
            "anchor": None if self.anchor is None else self.anchor.to_dict(),
            "profile_figures": self.profile_figures,
            "gain": None if self.gain is None else asdict(self.gain),
            "drafts_factor_to_settle": self.drafts_factor_to_settle,
            "expected_best_gamma": self.expected_best_gamma,
            "probe": None if self.probe is None else asdict(self.probe),
            "model_error_warning": self.model_error_warning,
            "specialized_break_even": None if self.specialized_break_even is None else self.specialized_break_even.to_dict(),
            "specialized_speedup_measured": (None if self.specialized_speedup_measured is None
                                             else self.specialized_speedup_measured.to_dict()),
            "deployed_speedup_measured": (None if self.deployed_speedup_measured is None
                                          else self.deployed_speedup_measured.to_dict()),
            "figures_needed": [f.to_dict() for f in self.figures_needed],
            "context": None if self.context is None else self.context.to_dict(),
            "sampling": None if self.sampling is None else self.sampling.to_dict(),
        })
