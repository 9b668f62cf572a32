"""The context a per-request route's decode steps read, and the route split into context bands.

A decode step of request i reads its KV cache: its prompt p_i and the tokens it has generated
so far. Over its n_i decode tokens (output tokens − 1), emitted in s_i = n_i − A_i steps (each
step emits one token plus its accepted drafts), the context at its steps averages

    c_i = p_i + n_i / 2           (the generated part grows evenly over the decode)

and the route's context is the mean over decode steps, L = Σ s_i c_i / Σ s_i: a request is in
the batch for its s_i steps, and each of them reads its c. Requests whose line names no prompt
tokens (``usage.prompt_tokens``) or decode tokens have no c and are left out. What this leaves
out: a request's steps are taken as evenly spread over its output (a long run of accepted
drafts moves faster through its context, which the mean cannot say).

``band_rows`` splits the requests with a known c into 2–4 bands by prompt length — what a
gateway knows of a request when it routes it — each of at least MIN_BAND_REQUESTS requests:
where the lengths fall apart (a gap where the prompt grows NATURAL_BREAK-fold or more: a
traffic of short and long prompts), at the widest such gaps; else at the route's rank quantiles,
an edge moved to the next gap between distinct lengths so that equal requests stay together.
A band is priced at its requests' own c.
acceptance.route_estimate.band_estimate gives each band the route's estimate over its own requests: acceptance from
their counts alone, resampled one request at a time, their own observed rate (Σ ITL·n / Σ n
of vLLM's per-request mean_itl_ms) and their own undrafted share. model.context_bands prices them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np


# The fewest requests a band is priced from: at 20 requests a band's AL interval is already
# some ±0.1–0.3 wide on real traffic, and fewer would rank γ by noise.
MIN_BAND_REQUESTS = 20
MAX_BANDS = 4
NATURAL_BREAK = 2.0  # a prompt this many times the one before it starts a band of its own
# Where a measured context comes from, as the cost model names it (model.profiles.deployment_model).
CONTEXT_SOURCE = "measured: the route's requests, prompt + half the output tokens"
# How (RequestContext.source): per request and decode step, or the engines' length histograms.
FROM_REQUESTS = "the requests' usage.prompt_tokens + half their output tokens, averaged over their decode steps"
FROM_HISTOGRAMS = ("the engines' vllm:request_prompt_tokens and vllm:request_generation_tokens over the window: mean "
                   "prompt + half the mean output, every request alike")


@dataclass(frozen=True)
class RequestContext:
    """The route's context from its requests (module docstring)."""

    tokens: float  # L: the mean context per decode step
    requests: int  # requests with a known context
    of_requests: int  # requests in the rows
    mean_prompt_tokens: float
    mean_output_tokens: float  # n + 1
    source: str = FROM_REQUESTS

    def to_dict(self) -> dict[str, float | int | str]:
        return {"tokens": self.tokens, "source": self.source, "requests": self.requests,
                "of_requests": self.of_requests, "mean_prompt_tokens": self.mean_prompt_tokens,
                "mean_output_tokens": self.mean_output_tokens}


class RequestCounts(Protocol):
    """What every reader of a per-request window's rows reads (acceptance.route_estimate.RequestRows)."""

    @property
    def counts(self) -> np.ndarray: ...
    @property
    def decode_tokens(self) -> np.ndarray: ...


class Requests(RequestCounts, Protocol):
    """The rows of a per-request window, with the prompt length each line carried."""

    @property
    def prompt_tokens(self) -> np.ndarray | None: ...


def request_contexts(requests: Requests) -> tuple[np.ndarray, np.ndarray]:
    """(c_i, s_i) of each row of ``requests`` (acceptance.route_estimate.RequestRows): its mean
    context per decode step and its decode steps; NaN where not known."""
    decode = np.asarray(requests.decode_tokens, dtype=float)
    context = np.asarray(requests.prompt_tokens, dtype=float) + decode / 2.0
    steps = decode - np.asarray(requests.counts, dtype=float)[:, 2]
    return context, np.where(steps > 0, steps, np.nan)


def route_context(requests: Requests | None) -> RequestContext | None:
    """The route's mean context per decode step (None: no request knows its context)."""
    if requests is None:
        return None
    context, steps = request_contexts(requests)
    known = np.isfinite(context) & np.isfinite(steps)
    if not known.any():
        return None
    prompt = np.asarray(requests.prompt_tokens, dtype=float)[known]
    output = np.asarray(requests.decode_tokens, dtype=float)[known] + 1.0
    return RequestContext(float(np.average(context[known], weights=steps[known])), int(known.sum()),
                          len(context), float(prompt.mean()), float(output.mean()))


def histogram_context(totals: Mapping[str, float] | None) -> RequestContext | None:
    """The context from the engines' request-length histograms over a window (their _sum and
    _count increases: acceptance.store.totals): mean prompt + half the mean output, each
    request alike — the lengths are not paired per request, so not per decode step (None: no
    request finished in the window)."""
    totals = totals or {}
    prompts, outputs = totals.get("prompt_count"), totals.get("output_count")
    if not prompts or not outputs or prompts < 0 or outputs < 0:
        return None
    prompt, output = totals["prompt_sum"] / prompts, totals["output_sum"] / outputs
    return RequestContext(prompt + output / 2.0, int(min(prompts, outputs)), int(min(prompts, outputs)), prompt, output,
                          FROM_HISTOGRAMS)


@dataclass(frozen=True)
class BandRows:
    """One context band: its requests' rows (indices into the route's), their prompt lengths
    and their mean context per decode step."""

    prompt_from: float  # the shortest prompt in the band, tokens
    prompt_to: float  # the longest
    tokens: float  # Σ s c / Σ s over the band: the context it is priced at
    rows: np.ndarray  # indices of its requests


def band_rows(requests: Requests, min_requests: int = MIN_BAND_REQUESTS, max_bands: int = MAX_BANDS
              ) -> tuple[list[BandRows], str | None]:
    """(bands in ascending prompt length, why there are none): up to ``max_bands`` bands of at
    least ``min_requests`` requests each, edges at rank quantiles moved to the next gap between
    distinct prompt lengths."""
    context, steps = request_contexts(requests)
    known = np.flatnonzero(np.isfinite(context) & np.isfinite(steps))
    n = len(known)
    if n == 0 and np.isfinite(np.asarray(requests.prompt_tokens, dtype=float)).any():
        return [], ("no request's output length is usable (usage.completion_tokens is missing, or fewer than its "
                    "drafted steps emitted: a length limit cut an accepted run), so none has a known context")
    if n == 0:
        return [], ("no line carries usage.prompt_tokens with its output tokens: add the response's usage to the "
                    "gateway's lines for the context and γ by prompt length")
    if n < 2 * min_requests:
        return [], (f"{n} request(s) with a known context (usage.prompt_tokens and output tokens); context bands "
                    f"need at least {2 * min_requests}")
    prompt = np.asarray(requests.prompt_tokens, dtype=float)
    order = known[np.argsort(prompt[known], kind="stable")]
    sorted_p = prompt[order]
    cuts = _cuts(sorted_p, min(max_bands, n // min_requests), min_requests)
    if not cuts:
        return [], f"the route's {n} requests do not split into bands of {min_requests} by prompt length"
    bands = []
    for lo, hi in zip([0, *cuts], [*cuts, n]):
        idx = order[lo:hi]
        bands.append(BandRows(float(sorted_p[lo]), float(sorted_p[hi - 1]),
                              float(np.average(context[idx], weights=steps[idx])), np.sort(idx)))
    return bands, None


def _cuts(sorted_values: np.ndarray, k: int, min_requests: int) -> list[int]:
    """Row positions where bands start (besides 0), every band at least ``min_requests`` rows:
    the natural breaks where there are (module docstring), else the quantile cuts."""
    return _natural_breaks(sorted_values, k, min_requests) or _quantile_cuts(sorted_values, k, min_requests)


def _natural_breaks(sorted_values: np.ndarray, k: int, min_requests: int) -> list[int]:
    """Up to k − 1 positions where the value grows NATURAL_BREAK-fold or more, the widest first."""
    v = np.maximum(np.asarray(sorted_values, dtype=float), 1.0)
    ratios = v[1:] / v[:-1]
    cuts: list[int] = []
    for at in (int(i) + 1 for i in np.argsort(-ratios, kind="stable")):
        if ratios[at - 1] < NATURAL_BREAK or len(cuts) == k - 1:
            break
        edges = [0, *sorted([*cuts, at]), len(v)]
        if all(b - a >= min_requests for a, b in zip(edges, edges[1:])):
            cuts.append(at)
    return sorted(cuts)


def _quantile_cuts(sorted_values: np.ndarray, k: int, min_requests: int) -> list[int]:
    """Positions near i·n/k, each at a change of value and leaving every band at least
    ``min_requests`` rows."""
    n = len(sorted_values)
    cuts: list[int] = []
    for j in range(1, k):
        at = int(round(j * n / k))
        while 0 < at < n and sorted_values[at] == sorted_values[at - 1]:
            at += 1
        if at - (cuts[-1] if cuts else 0) >= min_requests and n - at >= min_requests:
            cuts.append(at)
    return cuts
