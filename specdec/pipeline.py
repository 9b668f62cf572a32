"""The tuning pipeline shared by every view (CLI, dashboard, notebook, demo):

  store → route window → acceptance estimate (+ drift) → recommendation

Nothing here is a new quantity: it wires acceptance/ into model/ and gathers the
results into one ``RouteTuning`` that views print, chart or serialise.

When the route's engines run specdec's vLLM plugin (the window's segment has ``plugin``
totals of its γ), two inputs of the cost model come from its counts instead:
- the specialized path's clean share: counted steps (model.specialized.
  eligibility_from_step_counts) instead of the iteration-token histogram's upper bound;
- the survival per batch size: each batch size of the mix takes its bucket's curve
  a_k = A_k / D when the bucket holds at least ``MIN_BUCKET_DRAFTS`` drafts, else the
  pooled curve (model.recommend, survival_by_batch).
"""


from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from acceptance.step_replay import StepSequence
from acceptance.counts import (IntervalCounts, SpecCounts, draft_reach, mean_draft_length, survival_among_reached,
                               undrafted_token_share)
from acceptance.plugin_series import PluginTotals, batch_bucket
from acceptance.estimates import (
    AcceptanceEstimate,
    Drift,
    detect_drift,
    drafts_needed,
    estimate_acceptance,
    estimate_from_survival,
)
from model.anchor import LATENCY_HISTOGRAM, PER_REQUEST_LATENCY
from model.deployment import INLINE_DEFAULTS, Deployment
from model.recommend import Recommendation, recommend
from model.speedup import batch_mix_from_time_shares, request_weights_from_time_shares
from model.specialized import eligibility_from_step_counts, specialized_eligibility

from .config import Config, ConfigError

DEFAULT_WINDOW_S = 3600.0
JSON_SCHEMA_VERSION = 1  # of every JSON document the views print (tune-gamma, inspect, ...)
# Half-width of the 90% interval of the mean acceptance length below which a window is
# precise enough to rank γ; used to say how many more drafts a thin window needs.
DECIDABLE_AL_HALFWIDTH = 0.05
# Drafts a plugin batch bucket needs before its own survival curve replaces the pooled one
# for the batch sizes it holds: at 2,000 drafts a survival value's binomial standard error
# is at most 0.011 (more with the correlation within requests; the pooled curve's
# resamples carry the interval).
MIN_BUCKET_DRAFTS = 2000
# Jeffreys prior on the batch mix's shares (batch_mix_resamples).
JEFFREYS_PRIOR = 0.5


class NoDataError(ValueError):
    """A route's window holds no drafts (nothing to estimate)."""


@dataclass
class RouteTuning:
    route: str
    deployment: Deployment
    estimate: AcceptanceEstimate
    recommendation: Recommendation
    drift: Drift | None = None
    window: object | None = None          # acceptance.windows.RouteWindow, when from a store
    window_start: float | None = None
    window_end: float | None = None
    drafts_more_needed: int | None = None  # None: enough drafts to decide
    batch_mix: dict[int, float] | None = None  # request-weighted w_B the model used (None: batch 1)
    notes: list[str] = field(default_factory=list)
    plugin: PluginTotals | None = None  # the segment's specdec plugin totals, when exported
    survival_by_batch: dict[int, list[float]] | None = None  # per-batch curves the model used
    survival_reached: list[float] | None = None  # a_k among drafts that reached k: ΣA_k / ΣR_k
    draft_reach: list[float] | None = None  # R_k / D per position, None where R_k is unknown
    step_sequences: list | None = None  # the requests' drafted steps the replay read (acceptance.step_replay)

    @property
    def observed_gamma(self) -> int:
        return self.estimate.gamma


def deployment_for_route(config: Config, route: str) -> Deployment:
    """[deployment] merged with the route's overrides, validated (ModelInputError names the key)."""
    where = f"{config.path or 'config'} [routes.{route}]"
    if route in config.routes:
        return Deployment.from_mapping(config.routes[route].deployment, where=where)
    # A route known only from `specdec ingest`: the config's [deployment], or without a
    # config file the inline defaults (dspark, 0.10, flat — docs/DESIGN.md, Sources and routes).
    base = INLINE_DEFAULTS if config.path is None else None
    return Deployment.from_mapping(config.deployment, where=where, base=base)


def observed_tokens_per_second(window, mean_acceptance_length: float) -> float | None:
    """Per-user decode tokens/s at the deployed γ.

    vLLM 0.33 observes vllm:inter_token_latency_seconds once per request per decode step
    (the time since that request's previous tokens), however many tokens the step emitted:
    its mean is the mean step time a request sees, and a step emits AL tokens on average,
    so the rate is AL / mean ITL. The requests' own ``mean_itl_ms`` is already per token
    (decode time / (tokens − 1)): the rate is its reciprocal.
    """
    per_token = getattr(window.step_shape, "itl_per_token_s", None) if window is not None else None
    if per_token and per_token > 0:
        return 1.0 / per_token
    itl = getattr(window.step_shape, "itl_mean_s", None) if window is not None else None
    if not itl or itl <= 0 or not math.isfinite(mean_acceptance_length):
        return None
    return mean_acceptance_length / itl


def observed_latency_source(window) -> str | None:
    """Where the window's latency came from: the requests' mean_itl_ms (ingested per-request
    rows) or vLLM's inter-token latency histogram (scraped or through Prometheus)."""
    shape = window.step_shape if window is not None else None
    if shape is not None and getattr(shape, "itl_per_token_s", None):
        return PER_REQUEST_LATENCY
    return LATENCY_HISTOGRAM if shape is not None and getattr(shape, "itl_mean_s", None) else None


def tune_intervals(
    route: str,
    intervals: IntervalCounts,
    deployment: Deployment,
    *,
    window=None,
    level: float = 0.9,
    n_resamples: int = 1000,
    seed: int = 0,
    block_length: int | None = None,
    unit: str = "scrape intervals",
) -> RouteTuning:
    """Estimate one γ segment and recommend from it (rows resampled in blocks of
    ``block_length``, chosen from the data when None; 1 for independent requests)."""
    if intervals.total().drafts <= 0:
        raise NoDataError(f"route {route!r}: the window holds no drafts at gamma {intervals.gamma}")
    drift = detect_drift(intervals, level=level, seed=seed) if len(intervals) >= 8 else None
    notes: list[str] = []
    estimate = None
    sequences = window_step_sequences(window, intervals)
    if drift is not None and drift.detected:
        # Acceptance moved inside the window: what comes next looks like its newest part,
        # so estimate and recommend from that part alone (when it holds enough to resample).
        recent = intervals.end > drift.recent_start
        recent_rows = IntervalCounts(intervals.gamma, intervals.start[recent], intervals.end[recent],
                                     intervals.counts[recent])
        recent_estimate = estimate_acceptance(recent_rows, level=level, n_resamples=n_resamples, seed=seed,
                                              block_length=block_length, unit=unit)
        if recent_estimate.has_interval:
            estimate = recent_estimate
            sequences = None if sequences is None else [s for s, keep in zip(sequences, recent) if keep]
            notes.append(f"drift: estimates and the recommendation use the window's newest part only, "
                         f"from {format_clock(drift.recent_start)}")
    if estimate is None:
        estimate = estimate_acceptance(intervals, level=level, n_resamples=n_resamples, seed=seed,
                                       block_length=block_length, unit=unit)
    plugin = window_plugin(window, intervals.gamma)
    reach = reach_shares(window, plugin, intervals.gamma)
    batch_mix, by_batch, rec = _recommend_for_window(
        estimate, deployment, window, plugin, window.step_shape.batch_mix if window is not None else None,
        level=level, seed=seed, draft_reach=reach, step_sequences=sequences)
    return RouteTuning(
        route=route, deployment=deployment, estimate=estimate, recommendation=rec, drift=drift,
        window=window, drafts_more_needed=drafts_more_needed(estimate, rec), notes=notes, batch_mix=batch_mix,
        plugin=plugin, survival_by_batch=by_batch, survival_reached=reached_survival(window, plugin, intervals.gamma),
        draft_reach=reach, step_sequences=sequences,
    )


def _recommend_for_window(estimate: AcceptanceEstimate, deployment: Deployment, window, plugin,
                          batch_time_shares: dict[int, float] | None, *, level: float, seed: int = 0,
                          draft_reach: list[float] | None, step_sequences: list | None = None):
    """What recommend() needs from a window, one way for tune-gamma and the what-if: the
    request-weighted batch mix (and its resamples), the specialized path's clean share,
    per-batch survival and the observed tok/s; ``draft_reach``: R_k / D from the tuning (reach_shares).
    Returns (batch_mix, survival_by_batch, rec)."""
    gamma = estimate.gamma
    batch_mix = eligibility = observed_tps = mix_resamples = None
    if batch_time_shares:
        batch_mix = batch_mix_from_time_shares(batch_time_shares, deployment, gamma)
        if estimate.has_interval and len(batch_mix) > 1:
            samples = window.step_shape.effective_samples if window is not None else 0
            mix_resamples = batch_mix_resamples(batch_time_shares, deployment, gamma,
                                                max(estimate.n_blocks, samples), len(estimate.survival_resamples), seed)
    by_batch = survival_by_batch_size(plugin, batch_mix)
    if window is not None:
        eligibility = route_eligibility(window, plugin, deployment, batch_mix, gamma)
        observed_tps = observed_tokens_per_second(window, estimate.mean_acceptance_length.value)
    rec = recommend(
        estimate.survival.value,
        deployment,
        survival_resamples=estimate.survival_resamples if estimate.has_interval else None,
        deployed_gamma=gamma,
        batch_mix=batch_mix,
        eligibility=eligibility,
        level=level,
        observed_tokens_per_second=observed_tps,
        batch_mix_resamples=mix_resamples,
        survival_by_batch=by_batch,
        mix_in_time=batch_mix is not None,
        mean_draft_length=mean_draft_length(estimate.counts),
        draft_reach=draft_reach,
        observed_latency_source=observed_latency_source(window),
        undrafted_token_share=window_undrafted_share(window),
        step_sequences=step_sequences,
    )
    return batch_mix, by_batch, rec


def window_step_sequences(window, intervals: IntervalCounts) -> list | None:
    """The window's per-request step sequences when they are the rows of ``intervals`` (one
    per request, same γ, same order); None otherwise."""
    sequences = getattr(window, "step_sequences", None)
    if not sequences or len(sequences) != len(intervals) or sequences[0].gamma != intervals.gamma:
        return None
    return sequences


def window_undrafted_share(window) -> float | None:
    """ν of the window (StepShapeWindow.undrafted_token_share), None when not known."""
    shape = window.step_shape if window is not None else None
    return getattr(shape, "undrafted_token_share", None) if shape is not None else None


def window_plugin(window, gamma: int) -> PluginTotals | None:
    """The plugin totals of the window's newest segment when they are of this γ (or carry
    steps only); None without plugin series."""
    plugin = getattr(window, "plugin", None) if window is not None else None
    if plugin is None or plugin.gamma not in (0, gamma):
        return None
    return plugin


def route_eligibility(window, plugin: PluginTotals | None, deployment: Deployment, batch_mix, gamma: int):
    """The specialized path's clean share on latency_specialized: counted by the plugin's
    steps when present, else bounded from the iteration-token histogram (None: neither)."""
    if deployment.decode_backend != "latency_specialized":
        return None
    share = plugin.specialized_share() if plugin is not None else None
    if share is not None:
        return eligibility_from_step_counts(share.clean_steps, share.steps)
    return histogram_eligibility(window, batch_mix, gamma) if batch_mix else None


def histogram_eligibility(window, batch_mix, gamma: int):
    """The clean share bounded from the window's vllm:iteration_tokens_total histogram at γ
    (model.specialized.specialized_eligibility), whatever decode_backend; None without it."""
    shape = getattr(window, "step_shape", None)
    if shape is not None and shape.iteration_tokens:
        return specialized_eligibility(shape.iteration_tokens, batch_mix, gamma)
    return None


def survival_by_batch_size(plugin: PluginTotals | None, batch_mix: dict[int, float] | None
                           ) -> dict[int, list[float]] | None:
    """{batch size of the mix: its plugin bucket's survival a_k = A_k / D} for buckets with
    at least MIN_BUCKET_DRAFTS drafts (None: no such batch size)."""
    if plugin is None or not batch_mix or not plugin.by_batch:
        return None
    buckets = plugin.survival_by_batch()
    out = {}
    for b in batch_mix:
        bs = buckets.get(batch_bucket(b).label)
        if bs is None or bs.drafts < MIN_BUCKET_DRAFTS:
            continue
        # counts make a_k non-increasing in [0, 1]; rounding must not make it otherwise
        out[int(b)] = np.minimum.accumulate(np.clip(np.asarray(bs.survival, dtype=float), 0.0, 1.0)).tolist()
    return out or None


def counts_with_reach(window, plugin: PluginTotals | None, gamma: int) -> SpecCounts | None:
    """The counts at γ that carry R_k (drafts that reached position k): the plugin's totals,
    else the newest segment's when every interval reported them (None: neither)."""
    counts = plugin.total() if plugin is not None else None
    if counts is None or counts.gamma != gamma or counts.draft_tokens_per_position is None:
        segment = getattr(window, "newest_segment", None) if window is not None else None
        if segment is None or segment.gamma != gamma or segment.draft_tokens_per_position is None:
            return None
        counts = segment.total
    return counts


def reached_survival(window, plugin: PluginTotals | None, gamma: int) -> list[float] | None:
    """a_k among the drafts that reached position k, ΣA_k / ΣR_k (docs/DESIGN.md, Definitions)."""
    counts = counts_with_reach(window, plugin, gamma)
    return None if counts is None else survival_among_reached(counts).tolist()


def reach_shares(window, plugin: PluginTotals | None, gamma: int) -> list[float] | None:
    """R_k / D per position (acceptance.counts.draft_reach), None where R_k is unknown."""
    counts = counts_with_reach(window, plugin, gamma)
    reach = None if counts is None else draft_reach(counts)
    return None if reach is None else reach.tolist()


def batch_mix_resamples(time_shares: dict[int, float], deployment: Deployment, gamma: int,
                        effective_samples: float, n_resamples: int, seed: int = 0) -> np.ndarray:
    """Resampled request-weighted batch mixes (n_resamples, nB over sorted batch sizes).

    The window's time shares u_B come from num_requests_running samples (one per engine
    per scrape). Dirichlet(n · u + ½) is the posterior of the mix under the Jeffreys prior
    given n samples; the pipeline passes n = the gauge samples' effective number
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
    return request_weights_from_time_shares(sizes, drawn, deployment, gamma)


def drafts_more_needed(estimate: AcceptanceEstimate, rec: Recommendation) -> int | None:
    """The one "more data" figure of a tuning (None: enough to decide). A keep whose gain is not
    yet sure says which factor on the window's drafts would settle it, and that is the figure;
    otherwise a window whose mean acceptance length is wider than ±DECIDABLE_AL_HALFWIDTH
    wants the drafts that would narrow it to that."""
    if rec.drafts_factor_to_settle is not None and rec.drafts_factor_to_settle > 1.0:
        return math.ceil((rec.drafts_factor_to_settle - 1.0) * estimate.drafts)
    half = _al_halfwidth(estimate)
    if not math.isfinite(half) or half > DECIDABLE_AL_HALFWIDTH:
        return drafts_needed(estimate, DECIDABLE_AL_HALFWIDTH)
    return None


def more_drafts_sentence(drafts_more: int | None, factor: float | None) -> str | None:
    """What drafts_more_needed means, in the words every view prints."""
    if not drafts_more:
        return None
    if factor is not None and factor > 1.0:
        return (f"too few drafts to decide: about {drafts_more:,} more drafts ({factor:.1f}× the window's) "
                f"would settle the decision")
    return (f"too few drafts to decide: about {drafts_more:,} more drafts would narrow the mean acceptance "
            f"length to ±{DECIDABLE_AL_HALFWIDTH}")


def _al_halfwidth(estimate: AcceptanceEstimate) -> float:
    lo, hi = estimate.mean_acceptance_length.confidence_interval
    return (hi - lo) / 2 if lo is not None and hi is not None else math.nan


def route_source(config: Config, route: str, store=None) -> str:
    """Where a route's window comes from: its config entry, or — for a route known only
    from `specdec ingest` — what the store holds for it (per-request before log)."""
    if route in config.routes:
        return config.routes[route].source
    if store is not None:
        sources = store.ingested_routes().get(route)
        if sources:
            return "per-request" if "per-request" in sources else sources[0]
    config.route(route)  # raises the one-line unknown-route error
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class IngestedWindow:
    """A window of ingested per-request or log-line rows, shaped like a RouteWindow."""

    source: str
    start: float
    end: float
    segments: list
    events: list = field(default_factory=list)
    target_status: list = field(default_factory=list)
    not_speculating: list = field(default_factory=list)
    step_shape: object = None
    # the newest segment's requests' drafted steps in order (acceptance.step_replay), when every
    # one of them carries them (per-request ``detailed``); None otherwise
    step_sequences: list | None = None

    @property
    def current_segments(self) -> list:
        """The γ whose rows end last, and the γ whose rows overlap its span (requests of two γ
        interleaved)."""
        if not self.segments:
            return []
        last = max(self.segments, key=lambda s: s.end)
        return [s for s in self.segments if s.end >= last.start]

    @property
    def newest_segment(self):
        """Among the current segments, the one with the most drafts."""
        current = self.current_segments
        return max(current, key=lambda s: (s.total.drafts, s.end)) if current else None


def ingested_window(store, route: str, source: str, start: float, end: float) -> IngestedWindow:
    """Per-request rows (or logged intervals) of a route, one γ segment per γ. Two sources
    of the same traffic are never added together: the route's source picks one."""
    with store.read_snapshot():  # one committed state, whatever an ingest writes meanwhile
        return _read_ingested_window(store, route, source, start, end)


def _read_ingested_window(store, route: str, source: str, start: float, end: float) -> IngestedWindow:
    from acceptance.windows import GammaSegment, StepShapeWindow

    segments = [
        GammaSegment(gamma=g, start=float(iv.start[0]), end=float(iv.end[-1]), engines=[], intervals=iv,
                     draft_tokens_per_position=store.ingested_draft_tokens_per_position(route, source, g, start, end))
        for g, iv in store.ingested_intervals(route, source, start, end).items()
    ]
    segments.sort(key=lambda s: s.end)
    window = IngestedWindow(source=source, start=start, end=end, segments=segments)
    itl_mean = undrafted = sequences = None
    newest = window.newest_segment
    if newest is not None:
        itl_sum, tokens = store.ingested_itl(route, source, newest.gamma, start, end)
        itl_mean = itl_sum / tokens if tokens > 0 else None
        decode = store.ingested_decode_tokens(route, source, newest.gamma, start, end)
        undrafted = None if decode is None else undrafted_token_share(*decode)
        steps = store.ingested_step_sequences(route, source, newest.gamma, start, end)
        sequences = None if steps is None else [StepSequence(newest.gamma, d, a) for d, a in steps]
    return replace(window, step_sequences=sequences,
                   step_shape=StepShapeWindow(batch_mix={}, iteration_tokens={}, itl_per_token_s=itl_mean,
                                              samples=0, undrafted_token_share=undrafted))


def tune_route(
    config: Config,
    route: str,
    *,
    store=None,
    window_s: float = DEFAULT_WINDOW_S,
    now: float | None = None,
    level: float = 0.9,
    n_resamples: int = 1000,
) -> RouteTuning:
    """The route's window (ending ``now``), estimated and recommended. Its source is the
    route's: scraped targets from the store, a Prometheus selector, or what `specdec
    ingest` stored (per-request rows, resampled one request at a time; log intervals)."""
    from acceptance.windows import route_window

    source = route_source(config, route, store)
    deployment = deployment_for_route(config, route)
    end = time.time() if now is None else now
    start = end - window_s
    block_length, unit = None, "scrape intervals"
    if source == "scrape":
        window = route_window(store, list(config.routes[route].targets), start, end)
    elif source == "prometheus":
        from acceptance.prometheus import prometheus_route_window

        # Windows computed in Prometheus: increase() per block, summed by position over the
        # engines of each γ — the per-engine data stays there.
        window = prometheus_route_window(config.prometheus, config.routes[route].selector, start, end)
    else:
        if store is None:
            raise ConfigError(f"route {route!r}: source {source!r} reads the store; pass --db or run `specdec ingest` first")
        window = ingested_window(store, route, source, start, end)
        if source == "per-request":
            block_length, unit = 1, "requests"  # requests are the independent units
        else:
            unit = "logged intervals"
    segment = window.newest_segment
    if segment is None or segment.total.drafts <= 0:
        status = _target_summary(window)
        hint = ("run `specdec collect` (two scrapes at least)" if source == "scrape"
                else f"ingest {source} data with `specdec ingest --route {route}`" if source != "prometheus"
                else "check the selector in Prometheus")
        raise NoDataError(f"route {route!r}: no drafts in the last {format_duration(window_s)}{status}; {hint} or widen --window")
    tuning = tune_intervals(route, segment.intervals, deployment, window=window, level=level,
                            n_resamples=n_resamples, block_length=block_length, unit=unit)
    tuning.window_start, tuning.window_end = start, end
    return tuning


def _target_summary(window) -> str:
    failing = [s for s in getattr(window, "target_status", []) if getattr(s, "last_error", None)]
    if failing:
        return f" ({len(failing)} target(s) failing, e.g. {failing[0].last_error})"
    return ""


def json_document(doc: dict) -> str:
    """The text of one JSON document as the views print it: schema_version first, NaN and
    inf as null (json_safe), indented."""
    return json.dumps(json_safe({"schema_version": JSON_SCHEMA_VERSION, **doc}), indent=2, allow_nan=False)


def format_clock(t: float) -> str:
    """UTC wall time of an epoch second: '2026-07-29 08:15:00 UTC' (every view's wording)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def tune_inline(
    survival: list[float],
    *,
    drafts: int | None = None,
    method: str | None = None,
    draft_cost: float | None = None,
    cost_profile: str | None = None,
    deployed_gamma: int | None = None,
    level: float = 0.9,
    n_resamples: int = 1000,
) -> RouteTuning:
    """tune-gamma --survival A1,A2,...: the seeds' model by default; intervals only with
    --drafts (acceptance.estimates.estimate_from_survival says how)."""
    overrides = {k: v for k, v in (("method", method), ("draft_cost", draft_cost), ("cost_profile", cost_profile))
                 if v is not None}
    deployment = Deployment.from_mapping(overrides, where="tune-gamma", base=INLINE_DEFAULTS)
    estimate = estimate_from_survival(survival, drafts=drafts, level=level, n_resamples=n_resamples)
    rec = recommend(
        estimate.survival.value, deployment,
        survival_resamples=estimate.survival_resamples if estimate.has_interval else None,
        deployed_gamma=deployed_gamma if deployed_gamma is not None else estimate.gamma, level=level,
    )
    notes = [estimate.note] if estimate.note else []
    return RouteTuning(route="inline", deployment=deployment, estimate=estimate, recommendation=rec, notes=notes)


def tuning_to_dict(t: RouteTuning) -> dict:
    """The tune-gamma JSON document (docs/DESIGN.md, The tune-gamma JSON), minus schema_version."""
    e = t.estimate
    rec = t.recommendation.to_dict()
    observed = {
        "gamma": e.gamma,
        "drafts": e.drafts,
        "survival": e.survival.value,
        "survival_low": e.survival.low,
        "survival_high": e.survival.high,
        "conditional": e.conditional.value,
        "mean_acceptance_length": e.mean_acceptance_length.value,
        "mean_acceptance_length_interval": list(e.mean_acceptance_length.confidence_interval),
        "draft_acceptance_rate": e.draft_acceptance_rate.value,
        "equivalent_p": e.equivalent_p.value,
        "equivalent_p_interval": list(e.equivalent_p.confidence_interval),
        "interval_method": e.method,
        "segments": [],
        "drift": None,
        "drafts_more_needed": t.drafts_more_needed,
        "batch_mix": None if t.batch_mix is None else {str(k): v for k, v in sorted(t.batch_mix.items())},
        "notes": list(t.notes),
        "survival_reached": t.survival_reached,
        "mean_draft_length": mean_draft_length(e.counts),
        "reached": t.draft_reach,
        "undrafted_token_share": window_undrafted_share(t.window),
        "survival_by_batch": None,
    }
    if t.plugin is not None and t.plugin.by_batch:
        used = {batch_bucket(b).label for b in (t.survival_by_batch or {})}
        observed["survival_by_batch"] = {
            label: {"drafts": bs.drafts, "survival": list(bs.survival), "survival_reached": list(bs.reached_survival),
                    "used_in_model": label in used}
            for label, bs in t.plugin.survival_by_batch().items()
        }
    if t.drift is not None:
        d = t.drift
        observed["drift"] = {
            "detected": d.detected,
            "recent_mean_acceptance_length": d.recent_mean_acceptance_length,
            "earlier_mean_acceptance_length": d.earlier_mean_acceptance_length,
            "difference": d.difference.value,
            "difference_interval": list(d.difference.confidence_interval),
            "recent_start": d.recent_start,
            "message": d.message,
        }
    w = t.window
    if w is not None:
        current = w.current_segments
        observed["segments"] = [
            {
                "gamma": s.gamma, "start": s.start, "end": s.end, "drafts": s.total.drafts,
                "engines": [list(x) for x in s.engines], "newest": s is w.newest_segment,
                # still running at the window's end (a rolling change or a canary), else older
                "current": any(s is c for c in current),
                "engines_at_end": [list(x) for x in getattr(s, "engines_at_end", None) or s.engines],
            }
            for s in w.segments
        ]
        observed["events"] = [_event_dict(ev) for ev in w.events]
        observed["batch_time_shares"] = {str(k): v for k, v in sorted(w.step_shape.batch_mix.items())}
        observed["observed_tokens_per_second"] = observed_tokens_per_second(w, e.mean_acceptance_length.value)
        observed["targets"] = [_status_dict(s) for s in w.target_status]
    doc = {
        "route": t.route,
        "window": {"start": t.window_start, "end": t.window_end} if t.window_start is not None else None,
        "objective": rec.pop("objective"),
        "cost_profile": rec.pop("cost_profile"),
        "interval_level": rec.pop("interval_level"),
        "observed": observed,
    }
    doc.update(rec)
    return json_safe(doc)


def json_safe(x):
    """The JSON conventions of every document the views print: numpy → Python numbers and
    lists, NaN/inf → null, keys → strings."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist"):
        return json_safe(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _event_dict(ev) -> dict:
    return {k: getattr(ev, k) for k in ("time", "target", "model_name", "engine", "kind", "detail") if hasattr(ev, k)}


def _status_dict(s) -> dict:
    return {k: getattr(s, k) for k in ("target", "last_ok_time", "last_error", "failing_since") if hasattr(s, k)}


# ---------------------------------------------------------------------------------------
# For the dashboard: the curve over time, and the recommendation under other figures.


@dataclass(frozen=True)
class CurveSlice:
    """The acceptance of one γ segment over one time slice of a window.

    ``estimate`` is estimate_acceptance over the segment's blocks whose END lies in
    (start, end] — the store's window convention, so the slices of a segment add up to it.
    """

    gamma: int
    start: float
    end: float
    newest_segment: bool  # the slice belongs to the segment the route's estimate describes
    estimate: AcceptanceEstimate
    current_segment: bool = True  # its segment still runs at the window's end (else it is older)


def curve_history(window, *, n_slices: int = 6, level: float = 0.9, n_resamples: int = 200,
                  seed: int = 0) -> list[CurveSlice]:
    """How a route's curve moved: each γ segment of ``window`` (an acceptance.windows.RouteWindow)
    cut into ``n_slices`` equal time slices of the WINDOW, each estimated on its own.

    Counts are never summed across γ (one slice list per segment); slices without drafts
    are left out. Oldest first, then by γ.
    """
    if isinstance(n_slices, bool) or not isinstance(n_slices, int) or n_slices < 1:
        raise ValueError(f"n_slices must be a positive integer, got {n_slices!r}")
    if window is None:
        return []
    edges = np.linspace(window.start, window.end, n_slices + 1)
    newest = window.newest_segment
    current = window.current_segments
    out: list[CurveSlice] = []
    for segment in window.segments:
        iv = segment.intervals
        for lo, hi in zip(edges[:-1], edges[1:]):
            keep = (iv.end > lo) & (iv.end <= hi)
            if not keep.any():
                continue
            part = IntervalCounts(iv.gamma, iv.start[keep], iv.end[keep], iv.counts[keep])
            if part.total().drafts <= 0:
                continue
            est = estimate_acceptance(part, level=level, n_resamples=n_resamples, seed=seed)
            out.append(CurveSlice(iv.gamma, float(lo), float(hi), segment is newest, est,
                                  any(segment is c for c in current)))
    out.sort(key=lambda s: (s.start, s.gamma))
    return out


def what_if(tuning: RouteTuning, overrides: dict, *, batch_time_shares: dict[int, float] | None = None,
            level: float = 0.9) -> tuple[Deployment, Recommendation]:
    """The route's recommendation with some deployment keys changed (the dashboard's what-if).

    ``overrides``: [deployment] keys over the route's deployment (validated: ModelInputError
    names the key). ``batch_time_shares``: the share of engine time at each batch size u_B
    (default: the window's observed shares; None and no window = batch 1); it becomes the
    request-weighted mix under the NEW deployment (model.speedup.batch_mix_from_time_shares);
    the clean share on latency_specialized and the per-batch survival come from the window
    as in tune_intervals (a mix moved to large batches takes their own curves).
    """
    deployment = Deployment.from_mapping(overrides, where="what-if", base=tuning.deployment)
    window = tuning.window
    shares = batch_time_shares
    if shares is None and window is not None and window.step_shape.batch_mix:
        shares = window.step_shape.batch_mix
    plugin = window_plugin(window, tuning.estimate.gamma)
    _, _, rec = _recommend_for_window(tuning.estimate, deployment, window, plugin, shares, level=level,
                                      draft_reach=tuning.draft_reach, step_sequences=tuning.step_sequences)
    return deployment, rec
