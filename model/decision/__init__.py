"""The decision on one priced route: one object (``Decision``), built by ordered rules.

docs/MODEL.md (Cost model; Decisions past the deployed γ) says what each rule decides. A
route's candidates priced (``Priced``: their point speedups, the ensemble of resampled
speedups, what may run, the traffic and any running probe) go through ``RULES`` in order,
each ``rule(priced, decision) -> decision`` (model.decision.rules):

  verdict          change / off / keep on the best expected γ, and what would settle a keep
  sure_step        a plausible but unsure gain: the best step whose gain is sure now
  probe            measure a γ past the observed one on a probe when that pays, or carry
                   a running probe on or stop it
  specialized      on latency_specialized: how far the γ rests on the configured speedup,
                   and the probe that measures it
  given_figures    a decision resting on default figures, or on a cost model that misses the
                   engine's rate, is withheld (``undecided``)
  measured         where the engines measure the deployed γ against the user's plain decode and
                   the difference is sure, that measurement decides between the two

``decide(priced)`` runs them; a shared deployment runs the first two on its joint ensemble.
"""

from ..decision_kind import DecisionKind
from .outcome import DEPLOYING_DECISIONS, UNDECIDED, Decision, Gain, gain_of, gamma_to_deploy
from .priced import Priced, SpecializedPricing
from .rules import RULES, decide, decide_on_ensemble

__all__ = ["DEPLOYING_DECISIONS", "UNDECIDED", "Decision", "DecisionKind", "Gain", "Priced", "RULES", "SpecializedPricing", "decide",
           "decide_on_ensemble", "gain_of", "gamma_to_deploy"]
