"""The window of a route whose data came through `specdec ingest`: per-request rows or logged intervals.

Shaped like the scraped ``acceptance.windows.RouteWindow`` (one ``GammaSegment`` per γ, a
``StepShapeWindow``): its rows are requests (resampled one at a time) or the intervals
vLLM logged. Two sources of the same traffic are never added together: the route's
source picks one. Current and newest segments follow the one rule of every window
(acceptance.windows.current_segments), with the last segment's whole span as its last block
(a request row has no duration: two γ interleave request by request); the estimate
describes the current one with the most drafts.

Logged intervals carry the load of vLLM's stats line before them (acceptance.log_lines:
``Running`` at the interval's end, the interval's output tokens), and Little's law makes it
each γ segment's own latency and batch mix (``logged_latency``). vLLM observes
vllm:inter_token_latency_seconds once per request per decode step, the time since that
request's last token; over a request's steps they sum to its decode time, so over every
request

    mean ITL = ∫ N(t) dt / request-steps ≈ Σ_i Running_i · interval_i / Σ_i (tokens_i − A_i)

(each decode step of a request emits 1 + its accepted tokens). Running, sampled once per
interval, is also the segment's gauge samples: the sampling error of ∫ N dt is the batch
mix's, and a measurement that resamples the mix moves this latency with it
(model.probe.measured_speedup). The same tokens give ν, the share of them from steps without
a draft: the decode steps less the drafts. On the real engine (benchmarks/logged_latency.py)
the latency came within −5.4% to +3.4% of vLLM's histogram over 90–180 s, the error that of
the Running samples; the decode steps within 0.2–0.5% and ν within 0.0001 of the engine's
counters (the output tokens count each request's first and not the accepted drafts a length
limit cut off; Running counts a request in its prompt step).

Per-request rows of a route that names its ``engines`` give the same counted rather than
sampled (``_with_request_load``): the route's batch mix from every request's decode span
(acceptance.request_load, the routes of its deployment counted too), and each γ segment its
own latency — Σ decode time / Σ decode steps — and its own mix over the engines that γ ran
on (γ is an engine's; beside a probe, each γ's share of the requests says how many).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from .counts import undrafted_token_share
from .request_load import request_load
from .step_replay import StepSequence
from .windows import REQUESTS, GammaSegment, SegmentRules, StepShapeWindow

if TYPE_CHECKING:
    from .store import EngineRef, Event, Store, TargetStatus


@dataclass(frozen=True)
class IngestedWindow(SegmentRules):
    """A window of ingested per-request or log-line rows, shaped like a RouteWindow."""

    ROWS_HAVE_NO_DURATION = True  # a request row is stored at one instant: γ interleave request by request

    source: str
    start: float
    end: float
    segments: list[GammaSegment]
    events: list[Event] = field(default_factory=list)
    target_status: list[TargetStatus] = field(default_factory=list)
    not_speculating: list[EngineRef] = field(default_factory=list)
    # set by ingested_window (None on a window built without one, which acceptance.route_estimate cannot read)
    step_shape: StepShapeWindow | None = None
    # the newest segment's requests' drafted steps in order (acceptance.step_replay), when every
    # one of them carries them (per-request ``detailed``); None otherwise
    step_sequences: list[StepSequence] | None = None
    # per row of the newest segment (per-request windows): vLLM's mean ITL (s) and decode
    # tokens, NaN where a request does not report them; None for logged intervals
    request_itl_s: np.ndarray | None = None
    request_decode_tokens: np.ndarray | None = None
    request_prompt_tokens: np.ndarray | None = None  # usage.prompt_tokens per row, NaN where not reported
    request_temperatures: np.ndarray | None = None  # the gateway line's temperature per row, NaN where not given
    notes: list[str] = field(default_factory=list)  # how the window was read (a per-request batch mix)
    # (rows, oldest, newest time) of the route's stored rows when the window holds none of them
    stored_span: tuple[int, float, float] | None = None

    @property
    def plugin(self) -> None:
        """Ingested rows carry no plugin series."""
        return None

    @property
    def totals(self) -> None:
        """Ingested rows carry no engine totals (the requests' own lengths are their context)."""
        return None


@dataclass(frozen=True)
class LoggedLatency:
    """Little's law over one segment's logged intervals (module docstring)."""

    request_seconds: float  # Σ Running × interval length ≈ ∫ N dt
    request_steps: float  # Σ (output tokens − accepted): the requests' decode steps
    batch_samples: dict[int, float]  # {B ≥ 1: intervals that ended with B running}
    sample_pairs: int = 0  # consecutive intervals of one engine stream, both B ≥ 1
    repeated_pairs: int = 0  # ... that kept B
    # ν over the same intervals (counts.undrafted_token_share of Σ output tokens, D, A): the
    # steps without a draft are the decode steps less the drafts
    undrafted_token_share: float | None = None


# consecutive intervals of a stream: the later starts where the earlier ended, to this share of its length
_CONTIGUOUS = 0.5


def logged_latency(load: Mapping[str, np.ndarray]) -> LoggedLatency | None:
    """From ``Store.ingested_load``'s arrays; None when no interval made a decode step."""
    steps = load["generation_tokens"] - load["accepted_tokens"]
    use = steps > 0
    if not use.any():
        return None
    running = load["running"].astype(int)
    sizes, counts = np.unique(running[use & (running >= 1)], return_counts=True)
    pairs = repeats = 0
    for stream in set(load["stream"][use]):
        at = np.flatnonzero(use & (load["stream"] == stream))
        gap = np.diff(load["time"][at])
        follows = (np.abs(gap - load["interval_s"][at[1:]]) <= _CONTIGUOUS * load["interval_s"][at[1:]])
        both = follows & (running[at[:-1]] >= 1) & (running[at[1:]] >= 1)
        pairs += int(both.sum())
        repeats += int((both & (running[at[:-1]] == running[at[1:]])).sum())
    undrafted = undrafted_token_share(float(load["generation_tokens"][use].sum()), float(load["drafts"][use].sum()),
                                      float(load["accepted_tokens"][use].sum()))
    return LoggedLatency(float((load["running"] * load["interval_s"])[use].sum()), float(steps[use].sum()),
                         {int(b): float(n) for b, n in zip(sizes, counts)}, pairs, repeats, undrafted)


def ingested_window(store: Store, route: str, source: str, start: float, end: float, *, engines: int | None = None,
                    deployment_routes: tuple[str, ...] = ()) -> IngestedWindow:
    """Per-request rows (or logged intervals) of a route, one γ segment per γ. Two sources
    of the same traffic are never added together: the route's source picks one.
    ``engines``: how many engines serve the route (config); with it, per-request rows give
    the batch mix, counting the requests of ``deployment_routes`` too (the routes that share
    its engines)."""
    with store.read_snapshot():  # one committed state, whatever an ingest writes meanwhile
        window = _read_ingested_window(store, route, source, start, end)
        if not window.segments:
            return replace(window, stored_span=store.ingested_span(route, source))
        if source != "per-request":
            return window
        return _with_request_load(store, window, route, engines, deployment_routes)


def _read_ingested_window(store: Store, route: str, source: str, start: float, end: float) -> IngestedWindow:
    segments = [
        GammaSegment(gamma=g, start=float(iv.start[0]), end=float(iv.end[-1]), engines=[], intervals=iv,
                     draft_tokens_per_position=store.ingested_draft_tokens_per_position(route, source, g, start, end))
        for g, iv in store.ingested_intervals(route, source, start, end).items()
    ]
    read = _logged_window if source == "log" else _request_window
    return read(store, route, source, start, end, segments)


def _with_request_load(store: Store, window: IngestedWindow, route: str, engines: int | None,
                       deployment_routes: tuple[str, ...]) -> IngestedWindow:
    """The per-request window with the batch mix its requests' decode spans give
    (acceptance.request_load), and a note of what it rests on or why there is none."""
    if engines is None:
        return replace(window, notes=[f"batch mix: none — per-request rows name no engine, so the model prices "
                                      f"batch 1; set engines = N under [routes.{route}] (the engines serving it) "
                                      f"and the requests' decode times give the mix"])
    routes = tuple(dict.fromkeys((route, *deployment_routes)))
    spans = store.ingested_request_spans(routes, window.source, window.start, window.end)
    load = request_load(spans["time"], spans["decode_s"], engines)
    if load is None:
        return replace(window, notes=["batch mix: none — the rows' times do not say when their requests ran "
                                      "(fewer than two with mean_itl_ms, or one time for all): the model prices batch 1"])
    counted = "its requests" if len(routes) == 1 else f"the requests of routes {', '.join(routes)}"
    note = (f"batch mix: {load.mean_running:.1f} requests per engine on average over {engines} engine(s), from the "
            f"decode times of {counted} ({load.requests:,}); requests without metrics on these engines would raise it")
    assert window.step_shape is not None  # _request_window set it
    shape = replace(window.step_shape, batch_time_shares=load.time_shares, samples=load.samples)
    running = _segment_engines(window, engines)
    segments = [_with_request_latency(s, {k: v[spans["gamma"] == s.gamma] for k, v in spans.items()}, running[s.gamma])
                for s in window.segments]
    return replace(window, step_shape=shape, notes=[note], segments=segments)


def _segment_engines(window: IngestedWindow, engines: int) -> dict[int, int]:
    """{γ: the engines its requests ran on}. The rows name none, but γ is an engine's, so beside
    another current γ (a probe) a segment ran on its share of the engines, as many as its
    share of the requests, at least one; a segment alone, or an older one, on all of them."""
    current = window.current_segments  # one segment per γ here
    running = {s.gamma: engines for s in window.segments}
    if len(current) > 1:
        total = sum(len(s.intervals) for s in current)
        running.update({s.gamma: min(engines, max(1, round(engines * len(s.intervals) / total))) for s in current})
    return running


def _with_request_latency(segment: GammaSegment, spans: Mapping[str, np.ndarray], engines: int) -> GammaSegment:
    """The segment with its requests' own latency — Σ decode time / Σ decode steps, the mean
    step time a request saw, as vLLM's histogram counts it — and the batch mix their decode
    spans give over its ``engines`` (as gauge samples: each size's share × the mix's samples)."""
    load = request_load(spans["time"], spans["decode_s"], engines)
    if load is None or not spans["steps"].sum() > 0:
        return segment
    # its own rows' latency where it keeps them (the routes sharing its engines load the
    # batch mix, but the mean step and its interval are this route's requests')
    own = segment.block_latency
    seconds, steps = (own[:, 0].sum(), own[:, 1].sum()) if own is not None else (spans["decode_s"].sum(),
                                                                                   spans["steps"].sum())
    return replace(segment, itl_sum_s=float(seconds), itl_count=float(steps),
                   batch_samples={b: u * load.samples for b, u in load.time_shares.items()})


def _logged_window(store: Store, route: str, source: str, start: float, end: float,
                   segments: list[GammaSegment]) -> IngestedWindow:
    """Logged intervals: each segment with its latency and gauge samples from its logged load,
    the step shape from all of them and ν from the newest segment's."""
    latency = {seg.gamma: logged_latency(store.ingested_load(route, source, seg.gamma, start, end))
               for seg in segments}
    segments = sorted((_with_logged_latency(seg, latency[seg.gamma]) for seg in segments), key=lambda s: s.end)
    window = IngestedWindow(source=source, start=start, end=end, segments=segments)
    newest = latency.get(window.newest_segment.gamma) if window.newest_segment is not None else None
    shape = _logged_step_shape([x for x in latency.values() if x is not None])
    return replace(window, notes=[LOGGED_DRAFTS_NOTE], step_shape=replace(
        shape, undrafted_token_share=None if newest is None else newest.undrafted_token_share))


# A logged route's drafts are a reconstruction (acceptance.log_lines): said beside every estimate.
LOGGED_DRAFTS_NOTE = ("drafts reconstructed from vLLM's log lines: they print accepted and drafted tokens exactly "
                      "but not the drafts, so each interval's drafts are those its rounded fields (AL to 2 digits, "
                      "rates to 3) fit, and may be off by up to about 1%/(AL − 1) where several fit; `specdec "
                      "ingest` says how many did")


def _request_window(store: Store, route: str, source: str, start: float, end: float,
                    segments: list[GammaSegment]) -> IngestedWindow:
    """Per-request rows: each segment's requests' own latency row by row (a request's decode
    seconds and steps, as a scraped block's ITL sum and count: its rate and that rate's
    interval), and the newest segment's decode tokens (ν) and drafted steps."""
    latency = store.ingested_request_latency(route, source, start, end)
    segments = [_with_row_latency(s, latency.get(s.gamma)) for s in segments]
    segments.sort(key=lambda s: s.end)
    window = IngestedWindow(source=source, start=start, end=end, segments=segments)
    itl_mean = undrafted = sequences = request_itl = request_decode = request_prompt = temperatures = None
    newest = window.newest_segment
    if newest is not None:
        request_itl, request_decode, request_prompt = store.ingested_request_timing(route, source, newest.gamma, start, end)
        temperatures = store.ingested_request_temperatures(route, source, newest.gamma, start, end)
        itl_sum, tokens = store.ingested_itl(route, source, newest.gamma, start, end)
        itl_mean = itl_sum / tokens if tokens > 0 else None
        decode = store.ingested_decode_tokens(route, source, newest.gamma, start, end)
        undrafted = None if decode is None else undrafted_token_share(*decode)
        steps = store.ingested_step_sequences(route, source, newest.gamma, start, end)
        sequences = None if steps is None else [StepSequence(newest.gamma, d, a) for d, a in steps]
    return replace(window, step_sequences=sequences, request_itl_s=request_itl, request_decode_tokens=request_decode,
                   request_prompt_tokens=request_prompt, request_temperatures=temperatures,
                   step_shape=StepShapeWindow(batch_time_shares={}, iteration_tokens={}, itl_per_token_s=itl_mean,
                                              samples=0, undrafted_token_share=undrafted))


def _with_row_latency(segment: GammaSegment, latency: np.ndarray | None) -> GammaSegment:
    """The segment with its rows' own latency (None where no row of it reports its mean ITL)."""
    if latency is None or len(latency) != len(segment.intervals) or not latency[:, 1].any():
        return segment
    return replace(segment, block_latency=latency, block_unit=REQUESTS)


def _with_logged_latency(segment: GammaSegment, latency: LoggedLatency | None) -> GammaSegment:
    """The segment with its own latency and gauge samples from its logged load (None: none kept)."""
    if latency is None:
        return segment
    return replace(segment, itl_sum_s=latency.request_seconds, itl_count=latency.request_steps,
                   batch_samples=latency.batch_samples)


def _logged_step_shape(latencies: list[LoggedLatency]) -> StepShapeWindow:
    """The route's step shape from its segments' logged load: the batch mix of every interval's
    Running and the mean ITL over them (an empty shape where none was logged)."""
    samples: dict[int, float] = {}
    for x in latencies:
        for b, n in x.batch_samples.items():
            samples[b] = samples.get(b, 0.0) + n
    total = sum(samples.values())
    steps = sum(x.request_steps for x in latencies)
    return StepShapeWindow(batch_time_shares={b: n / total for b, n in sorted(samples.items())} if total else {},
                           iteration_tokens={}, samples=int(total),
                           itl_mean_s=sum(x.request_seconds for x in latencies) / steps if steps > 0 else None,
                           sample_pairs=sum(x.sample_pairs for x in latencies),
                           repeated_pairs=sum(x.repeated_pairs for x in latencies), itl_from_running=True)
