"""γ by context length: a per-request route priced band by band (acceptance.request_context).

vLLM runs one γ for every request of an engine, whatever its length, while speculation's gain
shrinks as the context grows and can turn into a loss (vllm#47602: MTP K=6 on Qwen3.6-27B; a
per-length schedule is proposed in vllm#54801, not merged): acceptance falls on long contexts
and a step reads more KV. Each band is priced as the route is (model.route), from what its own
requests measured: acceptance from their counts, the anchor from their own mean ITL (the step
time at their context, as the engines ran it), the roofline at their context for what grows
with the batch, and the route's batch mix (they ran in the route's batches). From the bands:

- per band: the best γ (highest expected speedup over plain decode, S(K) = AL(K)·t(0)/t(K)),
  the speedup at the fleet's γ with its interval and at the best γ;
Bands are by prompt length, what a gateway knows when it routes a request; each is priced at
its requests' mean context per decode step (prompt + half the output).

- ``stops_paying_from``: the shortest prompt of the first band where S(γ) ≤ 1 at the fleet's γ;
- ``routing``: the longest bands whose best γ is below the fleet's, priced together: the γ k
  of highest request-weighted speedup over them and its gain over the fleet's γ; ``sure``
  when each of those bands gains more than min_gain with probability ≥ DECISION_CERTAINTY in
  its resampled speedups and neither γ is past the deployed one (``extrapolated``: the
  comparison rests on positions no draft reached, which only a probe measures). vLLM has no per-length γ, so the advice is to route those requests
  to engines running k. It is a what-if (``what_if`` true) when the route's pricing rests on
  default figures (model.figures_needed).

A roofline scaled to the engines' reported step cost (Deployment.engine_cost_scale) keeps the
route's scale in every band: it was measured at the route's context, and one ratio scales the
weights and the KV alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from acceptance.request_context import BandRows, RequestContext, band_rows
from acceptance.route_estimate import RouteEstimate, band_estimate

from .deployment import DECISION_CERTAINTY, Deployment

if TYPE_CHECKING:
    from acceptance.estimates import AcceptanceEstimate


class PricedCandidate(Protocol):
    """What a band reads of a priced candidate (model.recommendation.Candidate)."""

    @property
    def gamma(self) -> int: ...
    @property
    def speedup(self) -> float: ...
    @property
    def speedup_low(self) -> float | None: ...
    @property
    def speedup_high(self) -> float | None: ...
    @property
    def extrapolated(self) -> bool: ...
    @property
    def allowed(self) -> bool: ...


class _Priced(Protocol):
    """What a band reads of its Recommendation (model.recommendation, which imports this module)."""

    @property
    def candidates(self) -> Sequence[PricedCandidate]: ...
    @property
    def ensemble(self) -> np.ndarray | None: ...

@dataclass(frozen=True)
class ContextBand:
    prompt_tokens_from: float  # the shortest prompt of its requests
    prompt_tokens_to: float  # the longest
    context_tokens: float  # their mean context per decode step: the context it was priced at
    requests: int
    mean_acceptance_length: float  # at the deployed γ, from its requests' counts alone
    mean_acceptance_length_interval: tuple[float, float]
    observed_tokens_per_second: float | None  # per user, its requests' mean ITL (None: not reported)
    best_gamma: int
    best_extrapolated: bool  # the best γ is past the deployed one: its acceptance extrapolated
    speedup_at_best: float
    speedup_at_gamma: float  # at the fleet's γ
    speedup_at_gamma_interval: tuple[float | None, float | None]
    probability_gain: float | None = None  # P(S(routing γ)/S(fleet γ) − 1 > min_gain), bands routed only


@dataclass(frozen=True)
class Routing:
    prompt_tokens_from: float  # requests whose prompt is at least this (the first routed band's shortest)
    gamma: int
    gain: float  # request-weighted speedup over the routed bands, at gamma over the fleet's γ, − 1
    sure: bool
    bands: int
    extrapolated: bool = False  # gamma or the fleet's γ is past the deployed one


@dataclass(frozen=True)
class ContextView:
    gamma: int  # the fleet's γ, the one the view is about
    route_context: RequestContext | None
    bands: tuple[ContextBand, ...]
    stops_paying_from: float | None  # prompt tokens
    routing: Routing | None
    what_if: bool  # the route's pricing rests on default figures: no advice, a what-if
    why_no_bands: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"gamma": self.gamma, "route_context": None if self.route_context is None else self.route_context.to_dict(),
                "bands": [asdict(b) for b in self.bands], "stops_paying_from_prompt_tokens": self.stops_paying_from,
                "routing": None if self.routing is None else asdict(self.routing), "what_if": self.what_if,
                "why_no_bands": self.why_no_bands}


def with_context(deployment: Deployment, tokens: float, *, over_configured: bool = False) -> Deployment:
    """The deployment priced at its requests' measured context, unless the config set
    context_tokens (a band's own context, ``over_configured``, replaces it: the configured
    figure is the whole route's): the KV a step reads per request is theirs
    (model.profiles.deployment_model names the source)."""
    measured_before = "context_tokens" in deployment.from_page
    if deployment.context_tokens is not None and not measured_before and not over_configured:
        return deployment
    return replace(deployment, context_tokens=max(1, int(round(tokens))),
                   configured=None if deployment.configured is None else deployment.configured | {"context_tokens"},
                   from_page=deployment.from_page | {"context_tokens"})


def context_view(route: RouteEstimate, deployment: Deployment, fleet_gamma: int,
                 price: Callable[[RouteEstimate, Deployment], _Priced], *, what_if: bool, level: float,
                 n_resamples: int, seed: int) -> ContextView | None:
    """The route's bands priced (module docstring); None when the route has neither per-request
    rows nor a context from its engines' histograms (which give no bands: lengths not paired
    per request). ``price(band_route, band_deployment)``: the band's Recommendation, as the
    route's is made."""
    if route.requests is None:
        return None if route.context is None else ContextView(
            fleet_gamma, route.context, (), None, None, what_if,
            "bands by prompt length need per-request rows (specdec ingest --per-request): the engines' "
            "histograms give the route's mean context only")
    rows, why = band_rows(route.requests)
    if not rows:
        return ContextView(fleet_gamma, route.context, (), None, None, what_if, why)
    bands: list[ContextBand] = []
    recs: list[_Priced] = []
    for band in rows:
        estimate = band_estimate(route, band, level=level, n_resamples=n_resamples, seed=seed)
        recs.append(price(estimate, with_context(deployment, band.tokens, over_configured=True)))
        bands.append(_band(band, estimate.estimate, estimate.observed_tokens_per_second, recs[-1], fleet_gamma))
    losing = [b.prompt_tokens_from for b in bands if fleet_gamma > 0 and b.speedup_at_gamma <= 1.0]
    routing, bands = band_routing(bands, recs, fleet_gamma, deployment.min_gain, route.gamma)
    return ContextView(fleet_gamma, route.context, tuple(bands), min(losing) if losing else None, routing, what_if)


def _band(band: BandRows, estimate: AcceptanceEstimate, observed: float | None, rec: _Priced, gamma: int) -> ContextBand:
    allowed = [c for c in rec.candidates if c.allowed]
    best = max(allowed, key=lambda c: c.speedup)
    at = _candidate(rec, gamma)
    al = estimate.mean_acceptance_length
    return ContextBand(band.prompt_from, band.prompt_to, band.tokens, len(band.rows), float(al.value),
                       (float(al.low), float(al.high)), observed, best.gamma, bool(best.extrapolated), float(best.speedup),
                       float(at.speedup),
                       (at.speedup_low, at.speedup_high))


def band_routing(bands: list[ContextBand], recs: list[_Priced], gamma: int, min_gain: float, deployed: int
             ) -> tuple[Routing | None, list[ContextBand]]:
    """The longest bands whose best γ is below the fleet's, priced together (module docstring)."""
    tail = 0
    while tail < len(bands) - 1 and bands[-1 - tail].best_gamma < gamma:
        tail += 1
    if tail == 0:
        return None, bands
    routed, routed_recs = bands[-tail:], recs[-tail:]
    weights = np.array([b.requests for b in routed], dtype=float)
    options = [k for k in range(gamma) if all(_candidate(r, k).allowed for r in routed_recs)]
    if not options:
        return None, bands
    scores = {k: float(weights @ [_candidate(r, k).speedup for r in routed_recs]) for k in options}
    k = max(options, key=lambda x: (scores[x], -x))
    fleet = float(weights @ [_candidate(r, gamma).speedup for r in routed_recs])
    probabilities = [_probability_gain(r, k, gamma, min_gain) for r in routed_recs]
    extrapolated = max(k, gamma) > deployed
    sure = not extrapolated and all(p is not None and p >= DECISION_CERTAINTY for p in probabilities)
    bands = bands[:-tail] + [replace(b, probability_gain=p) for b, p in zip(routed, probabilities)]
    return Routing(routed[0].prompt_tokens_from, k, scores[k] / fleet - 1.0, sure, tail, extrapolated), bands


def _candidate(rec: _Priced, gamma: int) -> PricedCandidate:
    return next(c for c in rec.candidates if c.gamma == gamma)


def _probability_gain(rec: _Priced, k: int, gamma: int, min_gain: float) -> float | None:
    """P(S(k)/S(γ) − 1 > min_gain) over the band's resampled speedups (None: no interval)."""
    ens = rec.ensemble
    if ens is None or ens.shape[1] <= max(k, gamma):
        return None
    return float(np.mean(ens[:, k] / ens[:, gamma] - 1.0 > min_gain))
