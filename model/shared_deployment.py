"""One γ for routes that share one deployment, and what splitting them would gain.

vLLM runs one ``--speculative-config`` per server, so routes served by the same engines
(``deployment = "NAME"`` in their [routes.*] tables) run one γ whatever each would prefer.
Each route is priced on its own (model.recommend: its point speedups S_r(γ) and their
ensemble over resamples × tail models); the deployment's speedup at γ is their token-weighted
harmonic mean,

    S_dep(γ) = 1 / Σ_r w_r / S_r(γ),   w_r = route r's share of the deployment's decode tokens,

the tokens over the time the deployment spends on them (each route's time per token is
τ(0)/S_r(γ) in plain-decode units): the same "tokens over time" rule as a route's batch mix.
The decision on the joint γ is the one rule of every route (model.decision) on the joint
ensemble, row i joining row i of every route (the routes' windows are resampled apart).
Beside it, per route, the γ it would get on a deployment of its own (its own recommendation)
and the gain of splitting it off, S_r(γ_r) / S_r(γ_dep) − 1 with its interval over the
route's ensemble; and the deployment's whole gain of splitting, every route at its own γ.
A shared deployment is not probed here (a canary would serve every route's traffic), and a
percentile objective is refused (its percentile would be over every route's requests together).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .decision import Gain, decide, gain_of
from .deployment import PERCENTILE_OBJECTIVES, Deployment, ModelInputError
from .recommend import Recommendation
from .vllm_config import command_line, speculative_config


@dataclass(frozen=True)
class RouteShare:
    """One route of the deployment: its own recommendation and its decode tokens in the window."""

    route: str
    recommendation: Recommendation
    decode_tokens: float


@dataclass(frozen=True)
class SplitGain:
    """A route on a deployment of its own: its γ, its speedup there, and the gain over the joint γ."""

    route: str
    gamma: int
    speedup: float
    gain_of_splitting: float
    gain_low: float | None
    gain_high: float | None


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
    decision: str  # change | keep | off
    decision_reason: str
    gain: Gain | None
    candidates: tuple[JointCandidate, ...]
    split: tuple[SplitGain, ...]
    gain_of_splitting: Gain  # every route at its own γ against all at the joint γ
    vllm_speculative_config: dict | None  # for the γ the deployment is to run (None: speculation off)
    vllm_command_line: str

    def to_dict(self) -> dict:
        def gain(g: Gain | None) -> dict | None:
            return None if g is None else {"value": g.value, "low": g.low, "high": g.high}

        return {
            "name": self.name,
            "routes": list(self.routes),
            "token_shares": dict(self.token_shares),
            "deployed_gamma": self.deployed_gamma,
            "recommended_gamma": self.recommended_gamma,
            "decision": self.decision,
            "decision_reason": self.decision_reason,
            "gain": gain(self.gain),
            "candidates": [vars(c).copy() for c in self.candidates],
            "split": [vars(s).copy() for s in self.split],
            "gain_of_splitting": gain(self.gain_of_splitting),
            "vllm": {"speculative_config": self.vllm_speculative_config, "command_line": self.vllm_command_line},
        }


def token_shares(shares: list[RouteShare]) -> np.ndarray:
    """w_r: each route's share of the deployment's decode tokens in the window."""
    tokens = np.array([s.decode_tokens for s in shares], dtype=float)
    if not np.all(np.isfinite(tokens)) or np.any(tokens < 0) or not tokens.sum() > 0:
        raise ModelInputError("deployment: the routes' decode tokens must be finite, ≥ 0 and not all 0")
    return tokens / tokens.sum()


def joint_speedup(speedups: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """S_dep = 1 / Σ_r w_r / S_r over the routes' axis 0 (the token-weighted harmonic mean)."""
    return 1.0 / np.tensordot(weights, 1.0 / speedups, axes=1)


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
    best = int(np.argmax(np.where(allowed, joint_point, -np.inf)))  # ties → the smaller γ
    observed = min(max(c.gamma for c in r.candidates if not c.extrapolated) for r in recs)
    rec, _, verdict = decide(best, deployed, allowed, joint_point, ensemble, deployment.min_gain, reasons, observed,
                             None)
    q = ((1 - level) / 2, (1 + level) / 2)
    bounds = None if ensemble is None else np.quantile(ensemble, q, axis=0)
    candidates = tuple(JointCandidate(
        gamma=i, speedup=float(joint_point[i]),
        speedup_low=None if bounds is None else float(bounds[0, i]),
        speedup_high=None if bounds is None else float(bounds[1, i]),
        allowed=bool(allowed[i])) for i in range(len(joint_point)))
    split = tuple(_split(s, rec, level) for s in shares)
    final = rec if verdict.decision in ("change", "off") else deployed
    spec_cfg = speculative_config(deployment, final)
    return DeploymentRecommendation(
        name=name, routes=tuple(s.route for s in shares),
        token_shares={s.route: float(w) for s, w in zip(shares, weights)},
        deployed_gamma=deployed, recommended_gamma=rec, decision=verdict.decision, decision_reason=verdict.reason,
        gain=gain_of(rec, deployed, joint_point, ensemble, level), candidates=candidates, split=split,
        gain_of_splitting=_whole_split_gain(points, stacked, weights, [r.recommended_gamma for r in recs], rec, level),
        vllm_speculative_config=spec_cfg, vllm_command_line=command_line(deployment, spec_cfg))


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
    if any(r.ensemble is None for r in recs):
        return None
    rows = max(r.ensemble.shape[0] for r in recs)
    return np.stack([r.ensemble[np.arange(rows) % r.ensemble.shape[0]] for r in recs])


def _split(share: RouteShare, joint_gamma: int, level: float) -> SplitGain:
    """The route on its own deployment (its own recommended γ) against the joint γ."""
    r = share.recommendation
    own = r.recommended_gamma
    gain = gain_of(own, joint_gamma, np.array([c.speedup for c in r.candidates]), r.ensemble, level)
    value, low, high = (0.0, 0.0, 0.0) if gain is None else (gain.value, gain.low, gain.high)
    return SplitGain(route=share.route, gamma=own, speedup=float(r.candidates[own].speedup),
                     gain_of_splitting=value, gain_low=low, gain_high=high)


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
