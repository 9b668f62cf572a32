"""One γ for routes that share one deployment, and what splitting them would gain.

vLLM runs one ``--speculative-config`` per server, so routes served by the same engines
(``deployment = "NAME"`` in their [routes.*] tables) run one γ whatever each would prefer.
Each route is priced on its own (model.recommend: its point speedups S_r(γ) and their
ensemble over resamples × tail models); the deployment's speedup at γ is their token-weighted
harmonic mean,

    S_dep(γ) = 1 / Σ_r w_r / S_r(γ),   w_r = route r's share of the deployment's decode tokens,

the tokens over the time the deployment spends on them (each route's time per token is
τ(0)/S_r(γ) in plain-decode units): the same "tokens over time" rule as a route's batch mix.
The decision on the joint γ is the first rules of every route (model.decision: verdict and
sure step) on the joint ensemble, row i joining row i of every route (the routes' windows are
resampled apart).
Beside it, per route, the γ it would get on a deployment of its own (its own recommendation)
and the gain of splitting it off, S_r(γ_r) / S_r(γ_dep) − 1 with its interval over the
route's ensemble, γ_dep the γ the deployment runs after this decision (the deployed γ on a
keep: "should I split?" is asked of what the shared engines will run), and beside it the same
over the joint best γ; and the deployment's whole gain of splitting, every route at its own γ.
A joint change or off rests on the routes' figures as a route's does (model.figures_needed).
A shared deployment is not probed here (a probe would serve every route's traffic), and a
percentile objective is refused (its percentile would be over every route's requests together).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .decision import UNDECIDED, Gain, Priced, decide_on_ensemble, gain_of, gamma_to_deploy
from .decision.rules import withheld
from .figures_needed import FigureNeeded, names_default_drafter, on_defaults
from .deployment import PERCENTILE_OBJECTIVES, Deployment, ModelInputError
from .decision_kind import DecisionKind
from .recommend import Recommendation
from .speculative_keys import UnknownMethodKeys, unknown_method_keys
from .vllm_config import command_line, speculative_config


@dataclass(frozen=True)
class RouteShare:
    """One route of the deployment: its own recommendation and its decode tokens in the window."""

    route: str
    recommendation: Recommendation
    decode_tokens: float


@dataclass(frozen=True)
class SplitGain:
    """A route on a deployment of its own: its γ, its speedup there, and the gain of splitting
    it off — over the γ the shared deployment runs after this decision (``against_gamma``: the
    deployed γ unless the decision changes it), and beside it over the joint best γ."""

    route: str
    gamma: int
    speedup: float
    gain_of_splitting: float
    gain_low: float | None
    gain_high: float | None
    against_gamma: int = 0
    gain_over_joint_best: float = 0.0
    gain_over_joint_best_low: float | None = None
    gain_over_joint_best_high: float | None = None


@dataclass(frozen=True)
class JointCandidate:
    gamma: int
    speedup: float
    speedup_low: float | None
    speedup_high: float | None
    allowed: bool


@dataclass(frozen=True)
class DeploymentRecommendation:
    name: str
    routes: tuple[str, ...]
    token_shares: dict[str, float]
    deployed_gamma: int
    recommended_gamma: int
    decision: DecisionKind  # change | keep | off | undecided (model.figures_needed)
    decision_reason: str
    gain: Gain | None
    candidates: tuple[JointCandidate, ...]
    split: tuple[SplitGain, ...]
    # every route at its own γ against all at the γ the deployment runs after this decision
    gain_of_splitting: Gain
    vllm_speculative_config: dict[str, object] | None  # for the γ the deployment is to run (None: speculation off)
    vllm_command_line: str | None  # None: no deploy line rests on default figures (figures_needed)
    gain_of_splitting_over_joint_best: Gain | None = None  # the same against all at the joint best γ
    figures_needed: list[FigureNeeded] = field(default_factory=list)
    # the deploy line written without the method's own keys (speculative_keys not given)
    speculative_keys_unknown: UnknownMethodKeys | None = None

    @property
    def gamma_to_deploy(self) -> int:
        return gamma_to_deploy(self.decision, self.recommended_gamma, self.deployed_gamma)

    def to_dict(self) -> dict[str, object]:
        def gain(g: Gain | None) -> dict[str, float | None] | None:
            return None if g is None else {"value": g.value, "low": g.low, "high": g.high}

        return {
            "name": self.name,
            "routes": list(self.routes),
            "token_shares": dict(self.token_shares),
            "deployed_gamma": self.deployed_gamma,
            "recommended_gamma": self.recommended_gamma,
            "gamma_to_deploy": self.gamma_to_deploy,
            "decision": self.decision,
            "decision_reason": self.decision_reason,
            "gain": gain(self.gain),
            "candidates": [vars(c).copy() for c in self.candidates],
            "split": [vars(s).copy() for s in self.split],
            "gain_of_splitting": gain(self.gain_of_splitting),
            "gain_of_splitting_over_joint_best": gain(self.gain_of_splitting_over_joint_best),
            "vllm": {"speculative_config": self.vllm_speculative_config, "command_line": self.vllm_command_line,
                     "speculative_keys_unknown": (None if self.speculative_keys_unknown is None
                                                  else self.speculative_keys_unknown.to_dict())},
            "figures_needed": [f.to_dict() for f in self.figures_needed],
        }


def token_shares(shares: list[RouteShare]) -> npt.NDArray[np.float64]:
    """w_r: each route's share of the deployment's decode tokens in the window."""
    tokens = np.array([s.decode_tokens for s in shares], dtype=float)
    if not np.all(np.isfinite(tokens)) or np.any(tokens < 0) or not tokens.sum() > 0:
        raise ModelInputError("deployment: the routes' decode tokens must be finite, ≥ 0 and not all 0")
    share: npt.NDArray[np.float64] = tokens / tokens.sum()
    return share


def joint_speedup(speedups: np.ndarray, weights: np.ndarray) -> npt.NDArray[np.float64]:
    """S_dep = 1 / Σ_r w_r / S_r over the routes' axis 0 (the token-weighted harmonic mean)."""
    joint: npt.NDArray[np.float64] = 1.0 / np.tensordot(weights, 1.0 / speedups, axes=1)
    return joint


def recommend_deployment(name: str, shares: list[RouteShare], deployment: Deployment, *, level: float = 0.9
                         ) -> DeploymentRecommendation:
    """The joint γ of the routes in ``shares``, served by ``deployment`` (module docstring)."""
    if len(shares) < 1:
        raise ModelInputError(f"deployment {name!r}: no route")
    if deployment.objective in PERCENTILE_OBJECTIVES:
        raise ModelInputError(f"deployment {name!r}: objective {deployment.objective} is a percentile over one "
                              f"route's requests; a deployment's is over all its routes' requests together, not "
                              f"priced yet: use objective interactivity for the deployment, a percentile per route")
    recs = [s.recommendation for s in shares]
    _check_same_deployment(name, shares)
    weights = token_shares(shares)
    deployed = recs[0].deployed_gamma
    allowed = np.array([all(r.candidates[i].allowed for r in recs) for i in range(len(recs[0].candidates))])
    reasons = [next((r.candidates[i].reason for r in recs if r.candidates[i].reason), None)
               for i in range(len(allowed))]
    points = np.array([[c.speedup for c in r.candidates] for r in recs])  # (R, G)
    joint_point = joint_speedup(points, weights)
    stacked = _aligned_ensembles(recs)  # (R, rows, G) or None
    ensemble = None if stacked is None else joint_speedup(stacked, weights)
    observed = min(max(c.gamma for c in r.candidates if not c.extrapolated) for r in recs)
    decision = decide_on_ensemble(Priced(deployment, deployed, observed, joint_point, allowed, reasons, ensemble,
                                         level))
    rec = decision.recommended_gamma
    q = ((1 - level) / 2, (1 + level) / 2)
    bounds = None if ensemble is None else np.quantile(ensemble, q, axis=0)
    candidates = tuple(JointCandidate(
        gamma=i, speedup=float(joint_point[i]),
        speedup_low=None if bounds is None else float(bounds[0, i]),
        speedup_high=None if bounds is None else float(bounds[1, i]),
        allowed=bool(allowed[i])) for i in range(len(joint_point)))
    needed = recs[0].figures_needed
    if needed and decision.kind in (DecisionKind.CHANGE, DecisionKind.OFF):
        decision = withheld(deployed, decision, tuple(needed), on_defaults(needed, f"the joint best is gamma {rec}"))
    final = decision.fleet_gamma
    split = tuple(_split(s, final, rec, level) for s in shares)
    own = [own_gamma(r) for r in recs]
    spec_cfg = speculative_config(deployment, final)
    deployable = not names_default_drafter(needed) and decision.kind != UNDECIDED
    return DeploymentRecommendation(
        name=name, routes=tuple(s.route for s in shares),
        token_shares={s.route: float(w) for s, w in zip(shares, weights)},
        deployed_gamma=deployed, recommended_gamma=rec, decision=decision.kind, decision_reason=decision.reason,
        gain=gain_of(rec, deployed, joint_point, ensemble, level), candidates=candidates, split=split,
        gain_of_splitting=_whole_split_gain(points, stacked, weights, own, final, level),
        gain_of_splitting_over_joint_best=_whole_split_gain(points, stacked, weights, own, rec, level),
        vllm_speculative_config=spec_cfg if deployable else None,
        vllm_command_line=command_line(deployment, spec_cfg) if deployable else None, figures_needed=list(needed),
        speculative_keys_unknown=(unknown_method_keys(deployment.method, deployment.speculative_keys is not None)
                                  if deployable and spec_cfg is not None else None))


def own_gamma(r: Recommendation) -> int:
    """The γ a route would get on engines of its own: its recommendation's, or — where that
    was withheld for default figures — the γ those defaults price best (a what-if as the
    deployment's is)."""
    if r.decision != UNDECIDED:
        return r.recommended_gamma
    best = r.expected_best_gamma
    assert best is not None  # a withheld decision would have run (or probed) another γ than the deployed one
    return best


def _check_same_deployment(name: str, shares: list[RouteShare]) -> None:
    """The routes of one deployment run one γ and price the same candidates."""
    first = shares[0].recommendation
    for s in shares[1:]:
        r = s.recommendation
        if r.deployed_gamma != first.deployed_gamma:
            raise ModelInputError(
                f"deployment {name!r}: route {s.route!r} ran γ {r.deployed_gamma} in the window and "
                f"{shares[0].route!r} γ {first.deployed_gamma}: routes of one deployment run one γ "
                f"(tune a window after the change, or check the routes' deployment keys)")
        if len(r.candidates) != len(first.candidates):
            raise ModelInputError(f"deployment {name!r}: routes {shares[0].route!r} and {s.route!r} price different "
                                  f"candidates (γ 0..{len(first.candidates) - 1} and 0..{len(r.candidates) - 1}): "
                                  f"one deployment has one method")


def _aligned_ensembles(recs: list[Recommendation]) -> np.ndarray | None:
    """(R, rows, G): row i of every route's ensemble side by side (a route with fewer rows
    repeats its own); None when any route has none."""
    ensembles = [r.ensemble for r in recs if r.ensemble is not None]
    if len(ensembles) < len(recs):
        return None
    rows = max(e.shape[0] for e in ensembles)
    return np.stack([e[np.arange(rows) % e.shape[0]] for e in ensembles])


def _split(share: RouteShare, runs: int, joint_best: int, level: float) -> SplitGain:
    """The route on its own deployment (own_gamma) against the γ the shared deployment ``runs``
    after the decision, and against its ``joint_best``."""
    r = share.recommendation
    own = own_gamma(r)
    speeds = np.array([c.speedup for c in r.candidates])

    def over(gamma: int) -> tuple[float, float | None, float | None]:
        gain = gain_of(own, gamma, speeds, r.ensemble, level)
        return (0.0, 0.0, 0.0) if gain is None else (gain.value, gain.low, gain.high)

    (value, low, high), (best, best_low, best_high) = over(runs), over(joint_best)
    return SplitGain(route=share.route, gamma=own, speedup=float(r.candidates[own].speedup),
                     gain_of_splitting=value, gain_low=low, gain_high=high, against_gamma=runs,
                     gain_over_joint_best=best, gain_over_joint_best_low=best_low, gain_over_joint_best_high=best_high)


def _whole_split_gain(points: np.ndarray, stacked: np.ndarray | None, weights: np.ndarray, own: list[int],
                      joint_gamma: int, level: float) -> Gain:
    """Every route at its own γ against every route at the joint γ, over the deployment's
    tokens: ``points`` (R, G) and ``stacked`` (R, rows, G) the routes' speedups."""
    routes = np.arange(len(own))

    def split_over_joint(at_own: np.ndarray, at_joint: np.ndarray) -> np.ndarray:
        return joint_speedup(at_own, weights) / joint_speedup(at_joint, weights) - 1.0

    value = float(split_over_joint(points[routes, own], points[:, joint_gamma]))
    if stacked is None:
        return Gain(value, None, None)
    low, high = np.quantile(split_over_joint(stacked[routes, :, own], stacked[:, :, joint_gamma]),
                            [(1 - level) / 2, (1 + level) / 2])
    return Gain(value, float(low), float(high))
