"""Route windows: a route's stored deltas over (start, end], split into γ segments.

A window holds the delta rows whose interval END lies in (start, end] (see
``acceptance.store``), summed over the route's engines. Reading plan, so that a week reads
in milliseconds: whole 1-hour rollup buckets inside the window, whole 5-minute buckets in
the hour-edges, raw scrape intervals at the 5-minute edges, each read from the store's chunk
rows with one query for all the route's engines and summed with NumPy (no Python object per
interval or bucket). A level is used only when the
window holds at least ``MIN_BLOCKS_PER_LEVEL`` of its buckets, so that short windows keep
scrape-interval blocks for the bootstrap — counted over the part of the window that holds
data (Store.data_span), so that a window's nominal length past its data changes nothing. Sums are exact either way: a bucket (b, b + L]
holds exactly the intervals that end in it.

Segments: each engine's history is cut into engine segments of constant γ (a new one at
every γ change or speculation restart). A route segment of γ is a maximal time span
covered by overlapping engine segments of that γ: engines of different γ give parallel
segments, and counts are never summed across γ. Rows of a segment are blocks: the deltas
of all its engines in one scrape cycle (raw) or one rollup bucket, summed; when there are
more than ``max_blocks``, adjacent blocks are merged into ``max_blocks`` equal time slots.

Plugin series (specdec's vLLM stat-logger plugin): a segment's ``plugin`` is the sum of
the plugin deltas of its engine segments over the same plan (same buckets and intervals,
so the same (start, end] as its counts), as ``plugin_series.PluginTotals``: per batch
bucket SpecCounts, per (shape, tokens, fits_specialized) steps, and per (shape, tokens,
fits_specialized, timer) step seconds and timed steps; None when none of its engines
exported them. They are summed within a segment only: never across γ. A segment's
``plugin_step_blocks`` keeps the clean decode shapes' (pure decode, uniform verify) step
seconds and timed steps by the inter-token-latency clock block by block (its engines'
deltas summed per block key, oldest first), for the resamples of their mean step times
(acceptance.step_times).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .errors import InputError
from .counts import IntervalCounts, SpecCounts, impossible_counts, race_step_requests
from .plugin_series import (CLEAN_SHAPES, ITL_TIMER, PluginTotals, parse_step_time_column,
                            plugin_totals_from_columns)
from .store import (ROLLUP_LEVELS, EngineRef, Event, PluginEntries, SpecEntries, StepTotals, Store, TargetStatus,
                    le_value)

if TYPE_CHECKING:
    from .step_replay import StepSequence

MIN_BLOCKS_PER_LEVEL = 60



# what a segment's rows are (GammaSegment.block_unit; RateSpread.unit starts with it):
# scrape intervals, resampled in circular blocks; or requests, independent, one a block
SCRAPE_INTERVALS = "scrape intervals"
REQUESTS = "requests"

def is_step_block_column(name: str) -> bool:
    """Whether a plugin column is one ``StepTimeBlocks`` keeps: a clean decode shape's step
    seconds or timed steps by the inter-token-latency clock, at an exact token count."""
    parsed = parse_step_time_column(name)
    return parsed is not None and parsed[1] == ITL_TIMER and parsed[2] in CLEAN_SHAPES and parsed[3] is not None


@dataclass(frozen=True, eq=False)
class StepTimeBlocks:
    """A segment's plugin step times block by block (module docstring): ``columns`` the
    plugin's step-time columns (plugin_series.step_time_columns: seconds and timed steps
    per key), ``table`` (n blocks, columns) their sums over the segment's engines."""

    columns: tuple[str, ...]
    table: np.ndarray


@dataclass(frozen=True)
class GammaSegment:
    """A maximal span of constant γ for the engines it lists; ``intervals`` are its blocks."""

    gamma: int
    start: float  # start of its first block's interval
    end: float  # end of its last block's interval
    engines: list[EngineRef]
    intervals: IntervalCounts
    # Σ drafts that reached position k, k = 1..γ, when every interval of the segment reported
    # them (SpecCounts.draft_tokens_per_position); None otherwise.
    draft_tokens_per_position: tuple[float, ...] | None = None
    # Σ specdec plugin deltas of its engines over the segment's blocks; None: none exported.
    plugin: PluginTotals | None = None
    # the engines still at this γ in the segment's last block (a rolling change leaves some)
    engines_at_end: list[EngineRef] = field(default_factory=list)
    # Σ vllm:inter_token_latency_seconds sum and count deltas of its engines over its blocks
    # (0, 0: none known) — a segment's own latency, apart from the other γ's in the window
    itl_sum_s: float = 0.0
    itl_count: float = 0.0
    # {B ≥ 1: vllm:num_requests_running samples of its engines over its blocks} — a segment's
    # own batch mix (a probe's traffic can differ from the fleet's); None: its source keeps none
    batch_samples: dict[int, float] | None = None
    # (n, 2) per block of ``intervals``, its engines' ITL sum and count deltas (0, 0: none known):
    # the decode rate block by block, for its interval (acceptance.observed_rate); None: its
    # source keeps the latency by segment only
    block_latency: np.ndarray | None = None
    # what a row of ``block_latency`` (and of ``intervals``) is: a scrape interval, or a request
    # (per-request rows, each one request's decode seconds and steps)
    block_unit: str = SCRAPE_INTERVALS
    # the plugin's clean decode step times by the inter-token-latency clock, block by block
    # (module docstring); None: none exported
    plugin_step_blocks: StepTimeBlocks | None = None

    @property
    def itl_mean_s(self) -> float | None:
        """The mean step time the segment's requests saw (None: no latency known)."""
        return self.itl_sum_s / self.itl_count if self.itl_count > 0 else None

    @property
    def total(self) -> SpecCounts:
        """Σ over blocks: D, T, A, A_1..A_γ of the segment (and drafts per position, if known)."""
        total = self.intervals.total()
        if self.draft_tokens_per_position is None:
            return total
        return SpecCounts(total.drafts, total.draft_tokens, total.accepted_tokens, total.accepted_per_position,
                          self.draft_tokens_per_position)


@dataclass(frozen=True)
class StepShapeWindow:
    """Step shape of a route over a window.

    batch_time_shares: {batch size B: share of ``num_requests_running`` samples with B running},
    over engines and time, B ≥ 1 (idle samples carry no decode steps); iteration_tokens:
    {le: Σ bucket deltas} (cumulative by le, as the histogram is); itl_mean_s =
    Σ ITL-sum deltas / Σ ITL-count deltas, the mean STEP time a request sees (vLLM observes
    vllm:inter_token_latency_seconds once per request per step, however many tokens the
    step emits); itl_per_token_s: the mean time per output TOKEN, which per-request
    ``mean_itl_ms`` is (decode time / (tokens − 1)); undrafted_token_share: ν, the share of
    decode tokens from steps that carried no draft (counts.undrafted_token_share; per-request
    rows that know their tokens only, else None); samples: the gauge samples behind batch_time_shares;
    sample_pairs / repeated_pairs: consecutive samples of one engine (both B ≥ 1) and how
    many of them kept B (raw rows only; 0 when unknown); itl_from_running: itl_mean_s is
    Little's law's over logged intervals (acceptance.ingested_window), not the histogram's.
    """

    batch_time_shares: dict[int, float] = field(default_factory=dict)
    iteration_tokens: dict[float, float] = field(default_factory=dict)
    itl_mean_s: float | None = None
    samples: int = 0
    itl_per_token_s: float | None = None
    sample_pairs: int = 0
    repeated_pairs: int = 0
    undrafted_token_share: float | None = None
    itl_from_running: bool = False

    @property
    def batch_persistence(self) -> float:
        """ρ, the lag-1 correlation of an engine's batch size between scrapes:

            P(B_{i+1} = B_i) = ρ + (1 − ρ)·Σ_B u_B²   ⇒   ρ = (P_same − Σ u²) / (1 − Σ u²)

        (a batch that persists with probability ρ, else is redrawn from the mix u; Σ u² by its
        unbiased estimate (n·Σ û² − 1)/(n − 1), as û comes from the same n samples). 0 when no
        pairs are known or the mix has one size; clipped to [0, 0.99]."""
        if self.sample_pairs <= 0 or len(self.batch_time_shares) < 2 or self.samples < 2:
            return 0.0
        n = self.samples
        collision = (n * sum(u * u for u in self.batch_time_shares.values()) - 1.0) / (n - 1.0)
        same = self.repeated_pairs / self.sample_pairs
        return float(min(max((same - collision) / (1.0 - collision), 0.0), 0.99))

    @property
    def effective_samples(self) -> float:
        """n_eff = n·(1 − ρ)/(1 + ρ): the independent samples the mix is worth. A persisting
        batch has correlation ρ^k at lag k, so a share's variance is u(1 − u)/n·(1 + ρ)/(1 − ρ);
        treating scrapes as independent made the decision benchmark's mixed-batch intervals
        too narrow (76–86% for a nominal 90%)."""
        return self.worth(self.samples)

    def worth(self, samples: float) -> float:
        """What ``samples`` of the route's gauge samples are worth as independent ones,
        n·(1 − ρ)/(1 + ρ) at the route's persistence ρ (effective_samples): also a single
        segment's, whose own consecutive pairs are too few to measure ρ."""
        rho = self.batch_persistence
        return samples * (1.0 - rho) / (1.0 + rho)


@runtime_checkable
class Window(Protocol):
    """What every route window offers, whatever its source: RouteWindow (the store's scraped
    deltas), acceptance.prometheus.PrometheusWindow (computed in Prometheus) and
    acceptance.ingested_window.IngestedWindow (per-request rows, log intervals). Their
    current and newest segments follow one rule (current_segments, newest_segment)."""

    # read-only (properties): the windows are frozen dataclasses
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def segments(self) -> list[GammaSegment]:  # oldest first
        ...
    @property
    def events(self) -> list[Event]: ...
    @property
    def step_shape(self) -> StepShapeWindow: ...
    @property
    def target_status(self) -> list[TargetStatus]: ...
    @property
    def not_speculating(self) -> list[EngineRef]: ...

    @property
    def newest_segment(self) -> GammaSegment | None: ...

    @property
    def current_segments(self) -> list[GammaSegment]: ...

    @property
    def plugin(self) -> PluginTotals | None:
        """The newest segment's specdec plugin totals (None: not exported, or no such source)."""

    @property
    def step_sequences(self) -> list[StepSequence] | None:
        """The newest segment's requests' drafted steps, in order (per-request rows only)."""

    @property
    def totals(self) -> dict[str, float] | None:
        """The route's engines' slow totals over the window (acceptance.store.totals; scraped rows only)."""

    @property
    def request_itl_s(self) -> np.ndarray | None:
        """Per row of the newest segment, the request's mean ITL (per-request rows only)."""

    @property
    def request_decode_tokens(self) -> np.ndarray | None:
        """Per row of the newest segment, the request's decode tokens (per-request rows only)."""

    @property
    def request_prompt_tokens(self) -> np.ndarray | None:
        """Per row of the newest segment, the request's prompt tokens (per-request rows only)."""

    @property
    def request_temperatures(self) -> np.ndarray | None:
        """Per row of the newest segment, the request's sampling temperature (per-request rows only)."""


# Rows without a duration: a segment whose rows stopped this many of its own mean gaps between
# rows before the window's last row has ended (a trial, then back; the old γ of a change) —
# a segment still running beside the others goes that long without a row with probability
# about e^-5 (0.7%) where its rows arrive as a Poisson stream.
SILENT_ROW_GAPS = 5


def current_segments(segments: list[GammaSegment], *, whole_last_span: bool = False) -> list[GammaSegment]:
    """The segments still running at the window's end: those overlapping the last block of
    the one that ends last (several during a rolling γ change or a probe). The others are
    older: they ended inside the window. ``whole_last_span``: the last segment's whole span
    is its last block — for rows without a duration of their own (ingested requests are
    stored at one instant), where two γ interleave request by request; there a segment that
    fell silent (SILENT_ROW_GAPS) has ended all the same."""
    if not segments:
        return []
    last = max(segments, key=lambda s: s.end)
    if whole_last_span or not len(last.intervals):
        since = last.start
    else:
        since = float(last.intervals.start[-1])
    return [s for s in segments
            if s is last or (s.end > since and not (whole_last_span and _fell_silent(s, last.end)))]


def _fell_silent(segment: GammaSegment, end: float) -> bool:
    """Whether ``segment``'s rows stopped more than SILENT_ROW_GAPS of its own mean gaps
    between rows before ``end`` (one row: no gap to judge by)."""
    n = len(segment.intervals)
    if n < 2:
        return False
    gap = (segment.end - segment.start) / (n - 1)
    return gap > 0 and end - segment.end > SILENT_ROW_GAPS * gap


def newest_segment(segments: list[GammaSegment], *, whole_last_span: bool = False) -> GammaSegment | None:
    """The deployed γ's segment, what `observed` describes: among the current segments, the
    one with the most drafts (a one-engine probe at another γ never becomes it)."""
    current = current_segments(segments, whole_last_span=whole_last_span)
    return max(current, key=lambda s: (s.total.drafts, s.end)) if current else None


class SegmentRules:
    """A window's ``newest_segment`` and ``current_segments``, by the one rule of every window
    (current_segments, newest_segment); for the window classes to inherit."""

    segments: list[GammaSegment]
    ROWS_HAVE_NO_DURATION = False  # current_segments(whole_last_span=...)

    @property
    def newest_segment(self) -> GammaSegment | None:
        return newest_segment(self.segments, whole_last_span=self.ROWS_HAVE_NO_DURATION)

    @property
    def current_segments(self) -> list[GammaSegment]:
        return current_segments(self.segments, whole_last_span=self.ROWS_HAVE_NO_DURATION)

    @property
    def plugin(self) -> PluginTotals | None:
        """The newest segment's plugin totals (None: no engine of it exported them)."""
        newest = self.newest_segment
        return None if newest is None else newest.plugin


@dataclass(frozen=True)
class RouteWindow(SegmentRules):
    targets: list[str]
    start: float
    end: float
    segments: list[GammaSegment]  # oldest first
    events: list[Event]
    step_shape: StepShapeWindow
    target_status: list[TargetStatus]
    not_speculating: list[EngineRef]  # engines whose newest sample by `end` had no spec counters
    notes: list[str] = field(default_factory=list)  # engine segments left out, and why
    # the route's engines' slow totals over the window: request lengths, vLLM's step-cost
    # counters (acceptance.store.totals); None where no engine's held two rows in it
    totals: dict[str, float] | None = None

    @property
    def step_sequences(self) -> None:
        """Scrape intervals are not requests: no drafted steps to replay."""
        return None

    @property
    def request_itl_s(self) -> None:
        """Scrape intervals are not requests: no per-request timing."""
        return None

    request_decode_tokens = request_prompt_tokens = request_temperatures = request_itl_s


def _plan(start: float, end: float, raw_from: float | None = None
          ) -> tuple[list[tuple[int, float, float]], list[tuple[float, float]]]:
    """Split (start, end] into rollup bucket ranges [(level, b_lo, b_hi)] (buckets b_lo ≤ b <
    b_hi) and raw spans [(lo, hi)], coarsest levels in the middle. Before ``raw_from`` (raw
    rows deleted by retention) rollups are used whatever the block count."""
    if raw_from is not None and start < raw_from:
        horizon = math.ceil(raw_from / min(ROLLUP_LEVELS)) * min(ROLLUP_LEVELS)
        old = _plan_part(start, min(end, horizon), 0)
        new = _plan_part(horizon, end, MIN_BLOCKS_PER_LEVEL) if end > horizon else ([], [])
        return old[0] + new[0], old[1] + new[1]
    return _plan_part(start, end, MIN_BLOCKS_PER_LEVEL)


def _plan_part(start: float, end: float, min_blocks: float
               ) -> tuple[list[tuple[int, float, float]], list[tuple[float, float]]]:
    rollups: list[tuple[int, float, float]] = []
    spans = [(start, end)]
    for level in sorted(ROLLUP_LEVELS, reverse=True):
        if (end - start) / level < min_blocks:
            continue
        new_spans: list[tuple[float, float]] = []
        for lo, hi in spans:
            b_lo = math.ceil(lo / level) * level
            b_hi = math.floor(hi / level) * level  # buckets b with lo ≤ b and b + L ≤ hi
            if b_hi > b_lo:
                rollups.append((level, float(b_lo), float(b_hi)))
                new_spans += [(lo, float(b_lo)), (float(b_hi), hi)]
            else:
                new_spans.append((lo, hi))
        spans = [(lo, hi) for lo, hi in new_spans if hi > lo]
    return rollups, spans


def _merge_blocks(starts: np.ndarray, ends: np.ndarray, counts: np.ndarray, max_blocks: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge adjacent blocks into at most ``max_blocks`` equal time slots (by block end)."""
    n = len(ends)
    if n <= max_blocks:
        return starts, ends, counts
    t0, t1 = ends[0], ends[-1]
    slot = np.minimum(((ends - t0) / max(t1 - t0, 1e-9) * max_blocks).astype(np.int64), max_blocks - 1)
    first = np.concatenate([[0], np.flatnonzero(np.diff(slot)) + 1])
    return (np.minimum.reduceat(starts, first), np.maximum.reduceat(ends, first),
            np.add.reduceat(counts, first, axis=0))


def route_window(store: Store, targets: list[str], start: float, end: float, *,
                 max_blocks: int = 2000) -> RouteWindow:
    """The route's deltas with interval end in (start, end], as γ segments of blocks."""
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise InputError(f"window ({start}, {end}] is empty or not finite")
    if max_blocks < 1:
        raise InputError(f"max_blocks {max_blocks} must be at least 1")
    with store.read_snapshot():  # one committed state, whatever a collector writes meanwhile
        return _read_route_window(store, list(targets), start, end, max_blocks)


def _read_route_window(store: Store, targets: list[str], start: float, end: float, max_blocks: int) -> RouteWindow:
    engines = store.engines_of(targets)
    engine_ids = [eid for eid, _ in engines]
    # planned over the span that holds data, not the nominal one: the same hour of data reads at
    # the same resolution (and so bootstraps alike) in a 2 h window and in a 7 d one
    held = store.data_span(engine_ids, start, end)
    rollups, spans = _plan(*(held or (start, end)), store.raw_from())

    # one query per raw span and per rollup level range, for all the route's engines at once
    entries: list[SpecEntries] = []
    plugin: list[PluginEntries] = []
    step = StepTotals()
    for lo, hi in spans:
        spec, st = store.read_intervals(engine_ids, lo, hi)
        entries += spec
        step.merge(st)
        plugin += store.read_plugin(engine_ids, 0, lo, hi)
    for level, b_lo, b_hi in rollups:
        spec, st = store.read_rollups(engine_ids, level, b_lo, b_hi)
        entries += spec
        step.merge(st)
        plugin += store.read_plugin(engine_ids, level, b_lo, b_hi)
    not_speculating = [ref for eid, ref in engines if store.is_speculating(eid, end) is False]

    events = store.events(targets, start, end)
    restarts = Counter((e.target, e.model_name, e.engine) for e in events if e.kind == "restart")
    entries, notes = _without_impossible_segments(store, dict(engines), entries, step, restarts)
    segments = _build_segments(store, dict(engines), entries, max_blocks, plugin, step)
    return RouteWindow(targets, start, end, segments, events, _step_shape(store, step),
                       store.targets_status(targets), not_speculating, notes,
                       store.engine_totals_increase(engine_ids, start, end))


def _without_impossible_segments(store: Store, refs: dict[int, EngineRef], entries: list[SpecEntries],
                                 step: StepTotals, restarts: Counter[tuple[str, str | None, str | None]]
                                 ) -> tuple[list[SpecEntries], list[str]]:
    """The entries less the engine segments whose counts over the window no engine produces
    (acceptance.counts.impossible_counts, with the slack of a race at each end of each engine
    life in the window: its two ends, two more per restart, ``restarts`` by (target, model,
    engine)), and a note per segment left out naming its target. Pages are refused at the
    door; this keeps a route tunable over counts stored before they were, or a broken
    exporter's."""
    totals: dict[int, np.ndarray] = {}
    for e in entries:
        n = 3 + sum(1 for c in store.layout_columns(e.layout_id) if c.startswith("accepted_per_position:"))
        ids, inverse = np.unique(e.seg, return_inverse=True)
        delta = np.nan_to_num(e.delta[:, :n])
        sums = np.stack([np.bincount(inverse, weights=delta[:, c], minlength=len(ids)) for c in range(n)], axis=1)
        for seg, row in zip(ids.tolist(), sums):
            totals[seg] = totals[seg] + row if seg in totals else row
    bad, notes = [], []
    for seg, row in totals.items():
        batches, ref = step.batch_by_seg.get(seg), refs[store.segment_engine(seg)]
        lives = 1 + restarts[(ref.target, ref.model_name, ref.engine)]
        why = impossible_counts(SpecCounts.from_vector(row.tolist()),
                                2 * lives * race_step_requests(max(batches) if batches else None))
        if why:
            bad.append(seg)
            notes.append(f"{ref.target} (engine {ref.engine} of {ref.model_name}): its counts in the window are "
                         f"impossible ({why}), left out of the route: stored before such pages were refused, "
                         f"or a broken exporter")
    if not bad:
        return entries, []
    kept = []
    for e in entries:
        m = ~np.isin(e.seg, bad)
        if m.any():
            kept.append(replace(e, seg=e.seg[m], key=e.key[m], start=e.start[m], end=e.end[m], delta=e.delta[m],
                                itl=None if e.itl is None else e.itl[m]))
    return kept, notes


def _step_shape(store: Store, step: StepTotals) -> StepShapeWindow:
    per_size = step.batch_histogram()  # B ≥ 1: idle samples carry no decode steps
    samples = int(sum(per_size.values()))
    batch_time_shares = {b: n / samples for b, n in per_size.items() if n > 0}
    it_sums: dict[float, float] = defaultdict(float)
    for layout_id, sums in step.iteration_tokens.items():
        for name, x in zip(store.layout_columns(layout_id), sums.tolist()):
            it_sums[le_value(name)] += x
    return StepShapeWindow(
        batch_time_shares=batch_time_shares,
        iteration_tokens=dict(sorted(it_sums.items())),
        itl_mean_s=step.itl_sum / step.itl_count if step.itl_count > 0 else None,
        samples=samples,
        sample_pairs=step.batch_pairs,
        repeated_pairs=step.batch_repeats,
    )


def _build_segments(store: Store, refs: dict[int, EngineRef], entries: list[SpecEntries],
                    max_blocks: int, plugin: list[PluginEntries], step: StepTotals) -> list[GammaSegment]:
    if not entries:
        return []
    # engine segments: their γ and the span of their entries in the window
    seg_all = np.concatenate([e.seg for e in entries])
    start_all = np.concatenate([e.start for e in entries])
    end_all = np.concatenate([e.end for e in entries])
    order = np.argsort(seg_all, kind="stable")
    seg_sorted = seg_all[order]
    first = np.concatenate([[0], np.flatnonzero(np.diff(seg_sorted)) + 1])
    seg_ids = seg_sorted[first].tolist()
    seg_lo = np.minimum.reduceat(start_all[order], first).tolist()
    seg_hi = np.maximum.reduceat(end_all[order], first).tolist()
    by_gamma: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for seg, lo, hi in zip(seg_ids, seg_lo, seg_hi):
        by_gamma[store.segment_gamma(seg)].append((lo, hi, seg))
    out: list[GammaSegment] = []
    for gamma, spans in by_gamma.items():
        spans.sort()
        groups: list[list[tuple[float, float, int]]] = []
        group_end = -math.inf
        for span in spans:  # overlapping engine segments of one γ form one route segment
            if groups and span[0] < group_end:
                groups[-1].append(span)
                group_end = max(group_end, span[1])
            else:
                groups.append([span])
                group_end = span[1]
        for group in groups:
            segs = [seg for _, _, seg in group]
            segment = _route_segment(store, refs, gamma, segs, entries, max_blocks, _plugin_totals(store, segs, plugin))
            last_block_start = float(segment.intervals.start[-1])
            at_end = {store.segment_engine(seg) for _, hi, seg in group if hi > last_block_start}
            itl = [step.itl_by_seg.get(seg, (0.0, 0.0)) for seg in segs]
            out.append(replace(segment, engines_at_end=sorted(refs[e] for e in at_end),
                               itl_sum_s=float(sum(x for x, _ in itl)), itl_count=float(sum(n for _, n in itl)),
                               batch_samples=_segment_batch_samples(step, segs),
                               plugin_step_blocks=_plugin_step_blocks(store, segs, plugin)))
    out.sort(key=lambda s: (s.start, s.end, s.gamma))
    return out


def _segment_batch_samples(step: StepTotals, segs: list[int]) -> dict[int, float]:
    """Σ gauge samples by batch size of these engine segments ({}: none ran a batch)."""
    mix: dict[int, float] = defaultdict(float)
    for seg in segs:
        for b, n in step.batch_by_seg.get(seg, {}).items():
            mix[b] += n
    return dict(sorted(mix.items()))


def _plugin_totals(store: Store, segs: list[int], plugin: list[PluginEntries]) -> PluginTotals | None:
    """Σ plugin deltas of these engine segments (all of one γ), by column name."""
    wanted = np.array(segs)
    sums: dict[str, float] = defaultdict(float)
    seen_segs: set[int] = set()
    for e in plugin:
        m = np.isin(e.seg, wanted)
        if not m.any():
            continue
        seen_segs.update(np.unique(e.seg[m]).tolist())
        for name, x in zip(store.layout_columns(e.layout_id), e.delta[m].sum(axis=0).tolist()):
            sums[name] += x
    if not seen_segs:
        return None
    return plugin_totals_from_columns(sums, engines=len({store.segment_engine(s) for s in seen_segs}))


def _plugin_step_blocks(store: Store, segs: list[int], plugin: list[PluginEntries]) -> StepTimeBlocks | None:
    """These engine segments' clean decode step times (inter-token-latency clock, exact token
    counts) per block key, summed over engines (None: none exported)."""
    wanted = np.array(segs)
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    for e in plugin:
        if e.key is None:
            continue
        m = np.isin(e.seg, wanted)
        if not m.any():
            continue
        for j, name in enumerate(store.layout_columns(e.layout_id)):
            if is_step_block_column(name):
                parts[name].append((e.key[m], e.delta[m, j]))
    if not parts:
        return None
    columns = tuple(sorted(parts))
    keys = np.unique(np.concatenate([k for name in columns for k, _ in parts[name]]))
    table = np.zeros((len(keys), len(columns)))
    for c, name in enumerate(columns):
        for k, v in parts[name]:
            np.add.at(table[:, c], np.searchsorted(keys, k), np.nan_to_num(v))
    return StepTimeBlocks(columns, table)


def _route_segment(store: Store, refs: dict[int, EngineRef], gamma: int, segs: list[int],
                   entries: list[SpecEntries], max_blocks: int, plugin: PluginTotals | None = None) -> GammaSegment:
    """Sum the entries of these engine segments (all of one γ) into blocks by block key."""
    n = 3 + gamma
    keys, starts, ends, counts, per_position, latency = [], [], [], [], [], []
    dtpp_known = True
    wanted = np.array(segs)
    for e in entries:
        columns = store.layout_columns(e.layout_id)
        if len(columns) < n or columns[n - 1] != f"accepted_per_position:{gamma - 1}" or (
                len(columns) > n and columns[n] != "draft_tokens_per_position:0"):
            continue  # another γ's layout
        m = np.isin(e.seg, wanted)
        if not m.any():
            continue
        keys.append(e.key[m])
        starts.append(e.start[m])
        ends.append(e.end[m])
        counts.append(e.delta[m, :n])
        latency.append(np.zeros((int(m.sum()), 2)) if e.itl is None else e.itl[m])
        if len(columns) == 2 * gamma + 3:
            per_position.append(e.delta[m, n:])
        else:
            dtpp_known = False
    key = np.concatenate(keys)
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.concatenate([[0], np.flatnonzero(np.diff(key)) + 1])
    block_key = key[first]
    block_start = np.minimum.reduceat(np.concatenate(starts)[order], first)
    block_end = np.maximum.reduceat(np.concatenate(ends)[order], first)
    # the latency rides beside the counts as two more columns, summed and merged alike
    block_counts = np.add.reduceat(np.concatenate([np.concatenate(counts), np.concatenate(latency)], axis=1)[order],
                                   first, axis=0)
    by_end = np.lexsort((block_key, block_end))  # by block end: slots stay monotone
    starts_, ends_, merged = _merge_blocks(block_start[by_end], block_end[by_end], block_counts[by_end], max_blocks)
    counts_, block_latency = merged[:, :n], merged[:, n:]
    dtpp = None
    if dtpp_known and per_position:
        total = np.concatenate(per_position).sum(axis=0)
        if np.isfinite(total).all():  # NaN: some interval did not report drafts per position
            dtpp = tuple(total.tolist())
    engine_ids = {store.segment_engine(s) for s in segs}
    return GammaSegment(gamma, float(starts_.min()), float(ends_.max()), sorted(refs[e] for e in engine_ids),
                        IntervalCounts(gamma, starts_, ends_, counts_), dtpp, plugin,
                        block_latency=block_latency if block_latency[:, 1].any() else None)
