"""One route's estimate from its window: everything the cost model reads of the window.

``estimate_route(window, intervals)`` → ``RouteEstimate``: the acceptance estimate of the
segment's rows (the window's newest part alone when acceptance drifted inside it), the
drift test, and beside the survival curve what the recommendation takes from the window —
the batch time shares u_B and their effective sample count, the specdec plugin's totals of
the segment's γ (per-batch survival, a_k among the drafts that reached k, R_k / D), the
observed per-user tokens/s and where its latency came from, the undrafted share ν, the
requests' drafted steps for the step replay, and the route's draft flow (``RouteTraffic``:
drafts, seconds, engines) from which a probe's duration follows. What the window's other
segments hold for a probe is model.probe.evidence's.

``band_estimate(route, band)``: the same estimate over one context band's requests
(acceptance.request_context), for model.context_bands.

A window is any of ``acceptance.windows.Window`` (scraped, Prometheus, ingested); ``None``
(a bare curve) gives an estimate with none of the window's extras.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from . import vllm_metrics as vm
from .counts import (IntervalCounts, SpecCounts, draft_reach, steps_undrafted_share, survival_among_reached,
                     tokens_per_step, undrafted_token_share)
from .definitions import monotone_survival
from .estimates import AcceptanceEstimate, Drift, detect_drift, estimate_acceptance
from .plugin_series import PluginTotals, batch_bucket
from .engine_cost import step_cost
from .observed_rate import RateSpread, SegmentRate, block_rate_spread, request_rate_spread, segment_rates
from .request_context import RequestContext, histogram_context, route_context
from .step_times import StepTimeEvidence, window_step_times
from .segment_measures import RouteTraffic, SegmentMix, route_traffic, segment_itl_mean_s, segment_mix

if TYPE_CHECKING:
    from .inspect_types import StepCost
    from .step_replay import StepSequence
    from .windows import GammaSegment, Window

# Drafts a plugin batch bucket needs before its own survival curve replaces the pooled one
# for the batch sizes it holds: at 2,000 drafts a survival value's binomial standard error
# is at most 0.011 (more with the correlation within requests; the pooled curve's
# resamples carry the interval).
MIN_BUCKET_DRAFTS = 2000
# Jeffreys prior on the batch mix's shares (time_share_resamples).
JEFFREYS_PRIOR = 0.5
# Where an observed tokens/s came from (observed_latency_source).
LATENCY_HISTOGRAM = vm.INTER_TOKEN_LATENCY
PER_REQUEST_LATENCY = "per-request mean_itl_ms"
# Little's law over logged intervals (acceptance.ingested_window): a latency that moves with
# the batch mix's resamples (model.probe.measured_speedup.SegmentLatency.from_running)
LOGGED_LOAD = "logged Running and generation throughput"
# Drift is tested only on windows of at least this many rows (blocks need a few each side).
MIN_ROWS_FOR_DRIFT = 8


@dataclass(frozen=True)
class RequestRows:
    """The estimated rows when each is one request (a per-request window): each request's
    counts and what vLLM reported of its timing — what the percentile objectives read
    (model.percentile_objective)."""

    counts: np.ndarray  # (n, 3 + γ): D, T, A, A_1..A_γ of each request
    itl_s: np.ndarray  # (n,) vLLM's mean_itl_ms / 1000: seconds per output token; NaN where not reported
    decode_tokens: np.ndarray  # (n,) output tokens − 1; NaN where not known
    prompt_tokens: np.ndarray | None = None  # (n,) usage.prompt_tokens; NaN where not known (None: all)
    temperature: np.ndarray | None = None  # (n,) the gateway line's temperature; NaN where not given (None: all)

    def __post_init__(self) -> None:
        for name in ("prompt_tokens", "temperature"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(len(self.counts), np.nan))

    def subset(self, keep: np.ndarray) -> "RequestRows":
        assert self.prompt_tokens is not None and self.temperature is not None  # __post_init__ fills them in
        return RequestRows(self.counts[keep], self.itl_s[keep], self.decode_tokens[keep], self.prompt_tokens[keep],
                           self.temperature[keep])


@dataclass(frozen=True)
class RouteEstimate:
    """A route's acceptance and what its window says beside it (estimate_route); frozen: a change
    is a copy (dataclasses.replace)."""

    estimate: AcceptanceEstimate
    drift: Drift | None = None
    recent_start: float | None = None  # the estimate covers rows ending after this (drift), else all
    plugin: PluginTotals | None = None  # the segment's plugin totals of its γ, when exported
    survival_reached: list[float] | None = None  # a_k among drafts that reached k: ΣA_k / ΣR_k
    draft_reach: list[float] | None = None  # R_k / D per position, None where R_k is unknown
    step_sequences: list[StepSequence] | None = None  # the requests' drafted steps (acceptance.step_replay)
    batch_time_shares: dict[int, float] | None = None  # u_B: share of engine time at batch B
    effective_samples: float = 0.0  # independent gauge samples behind u_B
    iteration_tokens: dict[float, float] | None = None  # vllm:iteration_tokens_total buckets of the window
    observed_tokens_per_second: float | None = None
    # its resamples as factors on it, from the window's own rows (acceptance.observed_rate);
    # None where the source keeps no latency per row
    observed_rate_spread: RateSpread | None = None
    itl_mean_s: float | None = None  # the estimated segment's own mean ITL, apart from other γ's
    segment_mix: SegmentMix | None = None  # the estimated segment's own batch mix, apart from other γ's
    observed_latency_source: str | None = None  # LATENCY_HISTOGRAM | PER_REQUEST_LATENCY | LOGGED_LOAD | None
    undrafted_token_share: float | None = None  # ν
    undrafted_source: str | None = None  # what ν was counted from (window_undrafted_share)
    traffic: RouteTraffic | None = None  # the estimated rows' draft flow (route_traffic)
    requests: RequestRows | None = None  # the rows, one per request, when the window is per-request
    window_span: tuple[float, float] | None = None  # (start, end) of the window estimated
    # the context its decode steps read, from the requests' own lengths (per-request windows
    # whose lines carry usage.prompt_tokens; acceptance.request_context)
    context: RequestContext | None = None
    # the step cost the route's engines report over the window (vLLM's MFU counters:
    # acceptance.engine_cost.step_cost of acceptance.store.totals), None where none does
    engine_cost: StepCost | None = None
    # what the window measures of the step cost: the deployed segment's drafted steps against
    # its undrafted ones, and every segment's mean step time (acceptance.step_times)
    step_times: StepTimeEvidence | None = None
    # every γ's own rate where its segment keeps its latency block by block (the deployed γ's,
    # an earlier γ's, a probe's: acceptance.observed_rate.segment_rates)
    segment_rates: tuple[SegmentRate, ...] = ()

    @property
    def gamma(self) -> int:
        return self.estimate.gamma


def estimate_route(window: Window | None, intervals: IntervalCounts, *, level: float = 0.9, n_resamples: int = 1000,
                   seed: int = 0, block_length: int | None = None, unit: str = "scrape intervals",
                   engines: int | None = None) -> RouteEstimate:
    """The acceptance of one γ segment's rows and what the window says beside it.

    Rows are resampled in blocks of ``block_length`` (chosen from the data when None; 1 for
    independent requests). When the drift test finds acceptance moved inside the window,
    what comes next looks like its newest part, so the estimate is of that part alone (when
    it holds enough rows to resample). ``engines``: the route's configured engine count, for
    windows whose rows name none (the probe's traffic share).
    """
    drift = detect_drift(intervals, level=level, seed=seed) if len(intervals) >= MIN_ROWS_FOR_DRIFT else None
    sequences = window_step_sequences(window, intervals)
    requests = window_request_rows(window, intervals)
    estimate, recent_start, rows = None, None, intervals
    if drift is not None and drift.detected:
        recent = intervals.end > drift.recent_start
        recent_rows = IntervalCounts(intervals.gamma, intervals.start[recent], intervals.end[recent],
                                     intervals.counts[recent])
        recent_estimate = estimate_acceptance(recent_rows, level=level, n_resamples=n_resamples, seed=seed,
                                              block_length=block_length, unit=unit)
        if recent_estimate.has_interval:
            estimate, recent_start, rows = recent_estimate, drift.recent_start, recent_rows
            sequences = None if sequences is None else [s for s, keep in zip(sequences, recent) if keep]
            requests = None if requests is None else requests.subset(recent)
    if estimate is None:
        estimate = estimate_acceptance(intervals, level=level, n_resamples=n_resamples, seed=seed,
                                       block_length=block_length, unit=unit)
    route = RouteEstimate(estimate, drift, recent_start, step_sequences=sequences, requests=requests,
                          context=route_context(requests))
    if window is None:
        return route
    route = _with_window(route, window, rows, engines)
    route = replace(route, step_times=window_step_times(window, _own_segment(window, route.gamma), level=level,
                                                       n_resamples=n_resamples, seed=seed))
    if not window.step_shape.itl_from_running:
        route = replace(route, segment_rates=segment_rates(window.segments, window.current_segments, level=level,
                                                           n_resamples=n_resamples, seed=seed))
    if route.observed_tokens_per_second is None:
        return route
    return replace(route, observed_rate_spread=_observed_rate_spread(window, route, level, n_resamples, seed))


def _observed_rate_spread(window: Window, route: RouteEstimate, level: float, n_resamples: int, seed: int
                          ) -> RateSpread | None:
    """The observed rate's resamples from the rows it was read from: the requests' own
    (per-request rows), else the deployed segment's blocks (acceptance.observed_rate)."""
    requests = route.requests
    if window.step_shape.itl_per_token_s and requests is not None:
        return request_rate_spread(requests.itl_s, requests.decode_tokens, level=level, n_resamples=n_resamples,
                                   seed=seed)
    own = _own_segment(window, route.gamma)
    if own is None or window.step_shape.itl_from_running:
        return None
    return block_rate_spread(own.intervals.counts, own.block_latency, level=level, n_resamples=n_resamples, seed=seed)


def _with_window(route: RouteEstimate, window: Window, rows: IntervalCounts, engines: int | None = None
                 ) -> RouteEstimate:
    """``route`` with what ``window`` says beside the acceptance of ``rows``."""
    gamma, shape = route.gamma, window.step_shape
    plugin = window_plugin(window, gamma)
    counts = counts_with_reach(window, plugin, gamma)
    reached = None if counts is None else survival_among_reached(counts)  # None: never (counts carry R_k)
    reach = None if counts is None else draft_reach(counts)
    own = _own_segment(window, gamma)
    itl_mean_s = None if own is None else segment_itl_mean_s(own)
    undrafted, undrafted_source = window_undrafted_share(window, own)
    return replace(
        route, plugin=plugin,
        survival_reached=None if reached is None else reached.tolist(),
        draft_reach=None if reach is None else reach.tolist(),
        batch_time_shares=shape.batch_time_shares or None, effective_samples=shape.effective_samples,
        iteration_tokens=shape.iteration_tokens or None,
        itl_mean_s=itl_mean_s, segment_mix=None if own is None else segment_mix(own, shape),
        undrafted_token_share=undrafted, undrafted_source=undrafted_source,
        observed_tokens_per_second=observed_tokens_per_second(window, route.estimate.mean_acceptance_length.value,
                                                              itl_mean_s, undrafted),
        observed_latency_source=observed_latency_source(window),
        traffic=route_traffic(window.newest_segment, rows, engines),
        context=route.context or histogram_context(window.totals),
        engine_cost=step_cost(window.totals or {}),
        window_span=(float(window.start), float(window.end)))


def window_step_sequences(window: Window | None, intervals: IntervalCounts) -> list[StepSequence] | None:
    """The window's per-request step sequences when they are the rows of ``intervals`` (one
    per request, same γ, same order); None otherwise."""
    sequences = window.step_sequences if window is not None else None
    if not sequences or len(sequences) != len(intervals) or sequences[0].gamma != intervals.gamma:
        return None
    return sequences


def window_request_rows(window: Window | None, intervals: IntervalCounts) -> RequestRows | None:
    """The rows of ``intervals`` as requests with their timing, when the window is per-request
    and its timing columns are those rows' (same count); None otherwise."""
    itl = window.request_itl_s if window is not None else None
    decode = window.request_decode_tokens if window is not None else None
    if window is None or itl is None or decode is None or len(itl) != len(intervals) or len(decode) != len(intervals):
        return None
    prompt, temperature = window.request_prompt_tokens, window.request_temperatures
    return RequestRows(np.asarray(intervals.counts, dtype=float), np.asarray(itl, dtype=float),
                       np.asarray(decode, dtype=float),
                       None if prompt is None or len(prompt) != len(intervals) else np.asarray(prompt, dtype=float),
                       None if temperature is None or len(temperature) != len(intervals)
                       else np.asarray(temperature, dtype=float))


def window_plugin(window: Window, gamma: int) -> PluginTotals | None:
    """The plugin totals of the window's newest segment when they are of this γ (or carry
    steps only); None without plugin series."""
    plugin = window.plugin
    if plugin is None or plugin.gamma not in (0, gamma):
        return None
    return plugin


def counts_with_reach(window: Window, plugin: PluginTotals | None, gamma: int) -> SpecCounts | None:
    """The counts at γ that carry R_k (drafts that reached position k): the plugin's totals,
    else the newest segment's when every interval reported them (None: neither)."""
    counts = plugin.total() if plugin is not None else None
    if counts is None or counts.gamma != gamma or counts.draft_tokens_per_position is None:
        segment = window.newest_segment
        if segment is None or segment.gamma != gamma or segment.draft_tokens_per_position is None:
            return None
        counts = segment.total
    return counts


def _own_segment(window: Window, gamma: int) -> GammaSegment | None:
    """The window's current segment of ``gamma`` with the most drafts (None: none), whose own
    latency and batch mix are the estimated segment's where its source keeps them (else the
    window's route-wide figures are all there is)."""
    mine = [s for s in window.current_segments if s.gamma == gamma]
    return max(mine, key=lambda s: s.total.drafts) if mine else None


# N = S + A counts the accepted drafts a length limit cut from a request's last step as output
# (counts.steps_undrafted_share), so ν reads a little low against the page's own (`inspect`).
UNDRAFTED_FROM_STEPS = (f"{vm.INTER_TOKEN_LATENCY}_count (decode steps) less the drafts, of steps + accepted "
                        f"tokens; `specdec inspect` gives the page's share of {vm.GENERATION_TOKENS}")


def window_undrafted_share(window: Window, segment: GammaSegment | None) -> tuple[float | None, str | None]:
    """(ν of the estimated segment, what it was counted from): the window's own where its rows
    count their tokens (per-request rows, logged intervals), else from the segment's decode
    steps — the inter-token latency histogram's count S, once per request per decode step —
    against its drafts: U = S − D steps proposed nothing (counts.steps_undrafted_share).
    (None, None) where neither is known (no histogram on the page)."""
    shape = window.step_shape
    if shape.undrafted_token_share is not None:
        rows = "per-request output tokens" if shape.itl_per_token_s else "logged generation throughput"
        return shape.undrafted_token_share, f"{rows} less the drafted steps' tokens"
    steps = segment.itl_count if segment is not None else 0.0
    if not steps or shape.itl_from_running or segment is None:  # (no segment: no steps)
        return None, None
    total = segment.total
    return steps_undrafted_share(float(steps), float(total.drafts), float(total.accepted_tokens)), UNDRAFTED_FROM_STEPS


def observed_tokens_per_second(window: Window, mean_acceptance_length: float, segment_itl_s: float | None = None,
                               undrafted_share: float | None = None) -> float | None:
    """Per-user decode tokens/s at the deployed γ.

    vLLM 0.33 observes vllm:inter_token_latency_seconds once per request per decode step
    (the time since that request's previous tokens), however many tokens the step emitted:
    its mean is the mean step time a request sees. A drafted step emits AL tokens on
    average and a step without a draft one (an ngram drafter without a match), so with ν of
    the tokens from those the rate is (tokens per step) / mean ITL
    (counts.tokens_per_step; AL / mean ITL when every step drafted). The requests' own
    ``mean_itl_ms`` is already per token (decode time / (tokens − 1)): the rate is its
    reciprocal. ``segment_itl_s``: the deployed segment's own mean ITL, used before the
    route-wide one (which a probe at another γ in the window would mix in).
    """
    shape = window.step_shape
    per_token = shape.itl_per_token_s
    if per_token and per_token > 0:
        return 1.0 / per_token
    itl = segment_itl_s or shape.itl_mean_s
    if not itl or itl <= 0 or not math.isfinite(mean_acceptance_length):
        return None
    return tokens_per_step(mean_acceptance_length, undrafted_share) / itl


def observed_latency_source(window: Window) -> str | None:
    """Where the window's latency came from: the requests' mean_itl_ms (ingested per-request
    rows), the logged load (ingested log intervals) or vLLM's inter-token latency histogram
    (scraped or through Prometheus)."""
    shape = window.step_shape
    if shape.itl_per_token_s:
        return PER_REQUEST_LATENCY
    if not shape.itl_mean_s:
        return None
    return LOGGED_LOAD if shape.itl_from_running else LATENCY_HISTOGRAM


def survival_by_batch_size(plugin: PluginTotals | None, batch_sizes: Sequence[int]) -> dict[int, list[float]] | None:
    """{batch size: its plugin bucket's survival a_k = A_k / D} for the ``batch_sizes`` whose
    bucket holds at least MIN_BUCKET_DRAFTS drafts (None: no such batch size)."""
    if plugin is None or not batch_sizes or not plugin.by_batch:
        return None
    buckets = plugin.survival_by_batch()
    out = {}
    for b in batch_sizes:
        bs = buckets.get(batch_bucket(b).label)
        if bs is None or bs.drafts < MIN_BUCKET_DRAFTS:
            continue
        out[int(b)] = monotone_survival(bs.survival).tolist()
    return out or None


def time_share_resamples(time_shares: dict[int, float], effective_samples: float, n_resamples: int,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(batch sizes sorted, (n_resamples, nB) resampled time shares u_B).

    The window's time shares come from num_requests_running samples (one per engine per
    scrape). Dirichlet(n · u + ½) is the posterior of the shares under the Jeffreys prior
    given n samples; the caller passes n = the gauge samples' effective number
    (StepShapeWindow.effective_samples: fewer when a batch size persists across scrapes),
    at least the acceptance estimate's bootstrap blocks.
    The ½ matters on short windows only: with ~40 samples over 4 batch sizes, Dirichlet(n·u)
    alone covered 0.86 for a nominal 0.9 (the mix's part of the decision benchmark's 5-minute
    chat class), with the prior 0.89; at 2 hours both give 0.88. Counting one sample per
    bootstrap block instead was measured to be far too wide (100%).
    """
    sizes = np.array(sorted(time_shares), dtype=int)
    shares = np.array([time_shares[b] for b in sizes], dtype=float)
    shares = shares / shares.sum()
    rng = np.random.default_rng(seed + 1)
    drawn = np.zeros((n_resamples, sizes.size))
    live = shares > 0
    drawn[:, live] = rng.dirichlet(max(effective_samples, 1.0) * shares[live] + JEFFREYS_PRIOR, size=n_resamples)
    return sizes, drawn


class RowsOf(Protocol):
    """A part of a per-request route's rows: a context band (acceptance.request_context.BandRows)
    or a sampling population (acceptance.request_sampling.Population)."""

    @property
    def rows(self) -> np.ndarray: ...


def band_estimate(route: "RouteEstimate", band: RowsOf, *, level: float, n_resamples: int,
                  seed: int, rate_over_plain_decode: bool = False) -> RouteEstimate:
    """The route's estimate (acceptance.route_estimate.RouteEstimate) over one part of its
    requests (a context band, a sampling population): acceptance from their counts alone (one
    request a block), their observed rate and undrafted share; the batch mix and draft reach
    stay the route's (the part's requests ran in the route's batches); no drift of its own, and
    no probe (model.context_bands and model.sampling_split price none).
    ``rate_over_plain_decode``: the part's observed rate keeps its resamples, so that the user's
    plain decode measures it (model.deployed_speedup) — true of a sampling population (a plain
    decode step costs the same at any temperature), not of a context band (the plain decode was
    measured at the route's context, not the band's)."""
    assert route.requests is not None  # parts are of a per-request route's requests
    rows = route.requests.subset(band.rows)
    n = len(band.rows)
    counts = IntervalCounts(route.gamma, np.arange(n, dtype=float), np.arange(1, n + 1, dtype=float), rows.counts)
    estimate = estimate_acceptance(counts, level=level, n_resamples=n_resamples, seed=seed, block_length=1,
                                   unit="requests")
    rate = _observed_rate(rows)
    decode = rows.decode_tokens
    nu = (undrafted_token_share(float(decode.sum()), float(rows.counts[:, 0].sum()), float(rows.counts[:, 2].sum()))
          if np.isfinite(decode).all() else None)
    sequences = None if route.step_sequences is None else [route.step_sequences[i] for i in band.rows]
    spread = (request_rate_spread(rows.itl_s, rows.decode_tokens, level=level, n_resamples=n_resamples, seed=seed)
              if rate_over_plain_decode and rate else None)
    return replace(route, estimate=estimate, drift=None, recent_start=None, traffic=None, requests=rows, step_sequences=sequences,
                   observed_tokens_per_second=rate, observed_rate_spread=spread,
                   observed_latency_source=PER_REQUEST_LATENCY if rate else None,
                   undrafted_token_share=nu, plugin=None, segment_mix=None, context=None,
                   engine_cost=None, segment_rates=())  # the route's segments are not the part's


def _observed_rate(rows: RequestRows) -> float | None:
    """Per-user tokens/s of the rows: 1 / (Σ ITL·n / Σ n) over those that report both (vLLM's
    mean_itl_ms is a time per decode token, so the rows weigh by their decode tokens)."""
    itl, n = rows.itl_s, rows.decode_tokens
    ok = np.isfinite(itl) & np.isfinite(n) & (n > 0) & (itl > 0)
    if not ok.any():
        return None
    return float(n[ok].sum() / (itl[ok] * n[ok]).sum())
