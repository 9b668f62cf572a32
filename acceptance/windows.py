"""Route windows: a route's stored deltas over (start, end], split into γ segments.

A window holds the delta rows whose interval END lies in (start, end] (see
``acceptance.store``), summed over the route's engines. Reading plan, so that a week reads
in milliseconds: whole 1-hour rollup buckets inside the window, whole 5-minute buckets in
the hour-edges, raw scrape intervals at the 5-minute edges. A level is used only when the
window holds at least ``MIN_BLOCKS_PER_LEVEL`` of its buckets, so that short windows keep
scrape-interval blocks for the bootstrap. Sums are exact either way: a bucket (b, b + L]
holds exactly the intervals that end in it.

Segments: each engine's history is cut into engine segments of constant γ (a new one at
every γ change or speculation restart). A route segment of γ is a maximal time span
covered by overlapping engine segments of that γ: engines of different γ give parallel
segments, and counts are never summed across γ. Rows of a segment are blocks: the deltas
of all its engines in one scrape cycle (raw) or one rollup bucket, summed; when there are
more than ``max_blocks``, adjacent blocks are merged into ``max_blocks`` equal time slots.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .counts import IntervalCounts, SpecCounts
from .store import ROLLUP_LEVELS, EngineRef, Event, Store, TargetStatus, le_value

MIN_BLOCKS_PER_LEVEL = 60


@dataclass(frozen=True)
class GammaSegment:
    """A maximal span of constant γ for the engines it lists; ``intervals`` are its blocks."""

    gamma: int
    start: float  # start of its first block's interval
    end: float  # end of its last block's interval
    engines: list[EngineRef]
    intervals: IntervalCounts

    @property
    def total(self) -> SpecCounts:
        """Σ over blocks: D, T, A, A_1..A_γ of the segment."""
        return self.intervals.total()


@dataclass(frozen=True)
class StepShapeWindow:
    """Step shape of a route over a window.

    batch_mix: {batch size B: share of ``num_requests_running`` samples with B running},
    over engines and time, B ≥ 1 (idle samples carry no decode steps); iteration_tokens:
    {le: Σ bucket deltas} (cumulative by le, as the histogram is); itl_mean_s =
    Σ ITL-sum deltas / Σ ITL-count deltas; samples: the gauge samples behind batch_mix.
    """

    batch_mix: dict[int, float] = field(default_factory=dict)
    iteration_tokens: dict[float, float] = field(default_factory=dict)
    itl_mean_s: float | None = None
    samples: int = 0


@dataclass(frozen=True)
class RouteWindow:
    targets: list[str]
    start: float
    end: float
    segments: list[GammaSegment]  # oldest first
    events: list[Event]
    step_shape: StepShapeWindow
    target_status: list[TargetStatus]
    not_speculating: list[EngineRef]  # engines whose newest sample by `end` had no spec counters

    @property
    def newest_segment(self) -> GammaSegment | None:
        """The newest segment; among parallel ones (overlapping the last block of the one
        that ends last), the one with the most drafts."""
        if not self.segments:
            return None
        last = max(self.segments, key=lambda s: s.end)
        last_block_start = float(last.intervals.start[-1]) if len(last.intervals) else last.start
        parallel = [s for s in self.segments if s.end > last_block_start]
        return max(parallel, key=lambda s: (s.total.drafts, s.end))


@dataclass
class _Piece:
    """One engine-segment's deltas in one block (a raw scrape or a rollup bucket)."""

    engine_id: int
    seg_id: int
    block: float  # the block's key: the cycle time, or the bucket's end
    start: float
    end: float
    vector: np.ndarray


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


def _plan_part(start: float, end: float, min_blocks: float):
    rollups: list[tuple[int, float, float]] = []
    spans = [(start, end)]
    for level in sorted(ROLLUP_LEVELS, reverse=True):
        if (end - start) / level < min_blocks:
            continue
        new_spans = []
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


def _merge_blocks(starts, ends, counts, max_blocks: int):
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
        raise ValueError(f"window ({start}, {end}] is empty or not finite")
    if max_blocks < 1:
        raise ValueError(f"max_blocks {max_blocks} must be at least 1")
    targets = list(targets)
    rollups, spans = _plan(start, end, store.raw_from())
    engines = store.engines_of(targets)

    pieces: list[_Piece] = []
    running_hist: dict[int, int] = defaultdict(int)
    it_sums: dict[float, float] = defaultdict(float)
    itl_sum = itl_count = 0.0
    not_speculating: list[EngineRef] = []

    def add_it(layout_id, blob):
        if layout_id and blob is not None:
            for name, x in zip(store.layout_columns(layout_id), np.frombuffer(blob)):
                it_sums[le_value(name)] += float(x)

    for eid, ref in engines:
        for lo, hi in spans:
            for (t, cycle, s, seg, delta, running, isd, icd, it_lay, it_delta) in store.raw_rows(eid, lo, hi):
                if delta is not None:
                    g = store.segment_gamma(seg)
                    pieces.append(_Piece(eid, seg, cycle, s, t, np.frombuffer(delta)[:3 + g]))
                if running is not None and running >= 0.5:
                    running_hist[int(round(running))] += 1
                if isd is not None and icd is not None:
                    itl_sum += isd
                    itl_count += icd
                add_it(it_lay, it_delta)
        for level, b_lo, b_hi in rollups:
            for (b, seg, delta, _n, s, t) in store.spec_rollup_rows(eid, level, b_lo, b_hi):
                g = store.segment_gamma(seg)
                pieces.append(_Piece(eid, seg, b + level, s, t, np.frombuffer(delta)[:3 + g]))
            for (it_lay, it_delta, isd, icd, hist) in store.step_rollup_rows(eid, level, b_lo, b_hi):
                itl_sum += isd
                itl_count += icd
                add_it(it_lay, it_delta)
                for k, v in json.loads(hist).items():
                    if int(k) >= 1:
                        running_hist[int(k)] += v
        if store.is_speculating(eid, end) is False:
            not_speculating.append(ref)

    segments = _build_segments(store, dict(engines), pieces, max_blocks)
    samples = sum(running_hist.values())
    step = StepShapeWindow(
        batch_mix={b: n / samples for b, n in sorted(running_hist.items())} if samples else {},
        iteration_tokens=dict(sorted(it_sums.items())),
        itl_mean_s=itl_sum / itl_count if itl_count > 0 else None,
        samples=samples,
    )
    return RouteWindow(targets, start, end, segments, store.events(targets, start, end), step,
                       store.targets_status(targets), not_speculating)


def _build_segments(store: Store, refs: dict[int, EngineRef], pieces: list[_Piece],
                    max_blocks: int) -> list[GammaSegment]:
    by_seg: dict[int, list[_Piece]] = defaultdict(list)
    for p in pieces:
        by_seg[p.seg_id].append(p)
    by_gamma: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for seg, ps in by_seg.items():
        by_gamma[store.segment_gamma(seg)].append((min(p.start for p in ps), max(p.end for p in ps), seg))
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
            blocks: dict[float, list] = {}
            engine_ids: set[int] = set()
            for _, _, seg in group:
                for p in by_seg[seg]:
                    engine_ids.add(p.engine_id)
                    b = blocks.get(p.block)
                    if b is None:
                        blocks[p.block] = [p.start, p.end, p.vector.copy()]
                    else:
                        b[0] = min(b[0], p.start)
                        b[1] = max(b[1], p.end)
                        b[2] += p.vector
            keys = sorted(blocks, key=lambda k: (blocks[k][1], k))  # by block end: slots stay monotone
            starts = np.array([blocks[k][0] for k in keys])
            ends = np.array([blocks[k][1] for k in keys])
            counts = np.array([blocks[k][2] for k in keys]).reshape(len(keys), 3 + gamma)
            starts, ends, counts = _merge_blocks(starts, ends, counts, max_blocks)
            out.append(GammaSegment(gamma, float(starts.min()), float(ends.max()),
                                    sorted(refs[e] for e in engine_ids),
                                    IntervalCounts(gamma, starts, ends, counts)))
    out.sort(key=lambda s: (s.start, s.end, s.gamma))
    return out
