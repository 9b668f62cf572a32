"""What the store hands out and takes in: errors, identities, statuses, events, ingested rows,
and the entries a window reads (acceptance.windows sums them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..counts import SpecCounts


class StoreError(Exception):
    """The store file cannot be used (message: one line naming the path)."""


class StoreFullError(StoreError):
    """The store's disk is full (acceptance.store.disk): nothing is damaged and what it holds is
    kept. ``reason``: SQLite's words (and the free space); ``consequence``: what was not stored;
    ``stored``: the scrape cycle was stored all the same (only retention could not run)."""

    def __init__(self, path: str | Path, reason: str, consequence: str, *, stored: bool = False) -> None:
        self.path, self.reason, self.consequence, self.stored = path, reason, consequence, stored
        super().__init__(f"store {path}: disk full ({reason}): {consequence}; free space and run again")


class EngineRef(NamedTuple):
    target: str
    model_name: str
    engine: str


@dataclass(frozen=True)
class TargetStatus:
    target: str
    last_ok_time: float | None
    last_error: str | None  # the last failure's message (also after recovery)
    failing_since: float | None  # first failure of the current failing run; None when ok


EVENT_KINDS = ("restart", "gamma_change", "spec_off", "spec_on", "target_down", "target_up", "inconsistent",
               "rebaseline")


@dataclass(frozen=True)
class Event:
    """One of EVENT_KINDS; ``data`` carries numbers (e.g. the lost counts)."""

    time: float
    target: str
    model_name: str | None
    engine: str | None
    kind: str
    detail: str
    data: dict[str, object] | None = None


INGESTED_SOURCES = ("per-request", "log")


@dataclass(frozen=True)
class IngestedRow:
    """One request's (or one logged interval's) counts for ``specdec ingest``."""

    time: float
    counts: SpecCounts
    key: str
    estimated: bool = False
    mean_itl_s: float | None = None  # per request: vLLM's mean inter-token latency
    decode_tokens: int | None = None  # per request: output tokens − 1
    prompt_tokens: int | None = None  # per request: usage.prompt_tokens
    temperature: float | None = None  # per request: its sampling temperature, as the gateway's line gives it
    steps: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # per request: (drafted, accepted) per step
    load: "LoggedLoad | None" = None  # per logged interval: vLLM's stats line before it


@dataclass(frozen=True)
class LoggedLoad:
    """One logged interval's load (acceptance.log_lines.LogInterval): the requests running at
    its end, its length and output tokens, and the engine stream it is of."""

    running: int
    interval_s: float
    generation_tokens: float
    stream: str


@dataclass(frozen=True)
class IngestResult:
    added: int
    duplicates: int


@dataclass
class SpecEntries:
    """Spec deltas of one layout read for a window: entry i is one engine segment's deltas
    in one block (a scrape interval or a rollup bucket), block key ``key`` (the cycle time or
    the bucket's end), covering (start, end]; ``delta`` (n, W) in the layout's columns, ``itl``
    the latency deltas of the same engine segment and block."""

    layout_id: int
    seg: np.ndarray
    key: np.ndarray
    start: np.ndarray
    end: np.ndarray
    delta: np.ndarray
    # (n, 2) the entry's vllm:inter_token_latency_seconds sum and count deltas (0, 0: none
    # known): the rate the engines decoded at, block by block (acceptance.observed_rate)
    itl: np.ndarray | None = None


@dataclass
class PluginEntries:
    """Plugin deltas of one plugin layout read for a window: row i is one engine
    segment's deltas in one block; ``delta`` (n, W) in the layout's columns; ``key`` (n,)
    its block key (the interval's end at level 0, the bucket's start above; None: not read)."""

    layout_id: int
    seg: np.ndarray
    delta: np.ndarray
    key: np.ndarray | None = None


UNKNOWN_SEGMENT = -1  # StepTotals.batch_by_seg: samples of a bucket that holds two segments


@dataclass
class StepTotals:
    """Step-shape sums read for a window: the gauge's samples by engine segment and batch size
    (``batch_by_seg``: seg → {B ≥ 1: samples}; seg UNKNOWN_SEGMENT for a rollup bucket that
    holds two segments — the route's histogram is the sum over all), Σ ITL-sum and ITL-count
    deltas, also per engine segment (``itl_by_seg``: seg → [sum, count]), and Σ
    iteration-token deltas per layout (NaN rows: none)."""

    batch_pairs: int = 0          # consecutive raw samples of one engine, both with B ≥ 1
    batch_repeats: int = 0        # ... of which B did not change
    itl_sum: float = 0.0
    itl_count: float = 0.0
    iteration_tokens: dict[int, np.ndarray] = field(default_factory=dict)
    itl_by_seg: dict[int, list[float]] = field(default_factory=dict)
    batch_by_seg: dict[int, dict[int, float]] = field(default_factory=dict)

    def add_segment_itl(self, seg: np.ndarray, itl: np.ndarray) -> None:
        """Σ ITL sum and count deltas (rows of ``itl``, (n, 2)) by engine segment ``seg`` (n,)."""
        seg = np.asarray(seg, dtype=np.int64)
        if not len(seg):
            return
        ids, inverse = np.unique(seg, return_inverse=True)
        sums = np.zeros((len(ids), 2))
        np.add.at(sums, inverse, itl)
        for sid, (total, count) in zip(ids.tolist(), sums.tolist()):
            if count > 0:
                prev = self.itl_by_seg.setdefault(sid, [0.0, 0.0])
                prev[0] += total
                prev[1] += count

    def add_batch(self, seg: np.ndarray, batch: np.ndarray, samples: np.ndarray) -> None:
        """Σ gauge samples by engine segment ``seg`` (< 0: not known, UNKNOWN_SEGMENT) and batch
        size ``batch`` (B ≥ 1: idle samples carry no decode steps)."""
        seg = np.maximum(np.asarray(seg, dtype=np.int64), UNKNOWN_SEGMENT)
        batch = np.asarray(batch, dtype=np.float64)
        keep = batch >= 1  # NaN: no gauge in that scrape
        if not keep.any():
            return
        segs, index = _runs_compacted(seg[keep])
        sizes = batch[keep].astype(np.int64)
        width = int(sizes.max()) + 1
        sums = np.bincount(index * width + sizes, weights=np.asarray(samples, dtype=np.float64)[keep])
        for k in np.flatnonzero(sums).tolist():
            mix = self.batch_by_seg.setdefault(segs[k // width], {})
            mix[k % width] = mix.get(k % width, 0.0) + float(sums[k])

    def batch_histogram(self) -> dict[int, float]:
        """The route's gauge samples by batch size: every segment's, and those of none."""
        total: dict[int, float] = {}
        for mix in self.batch_by_seg.values():
            for b, n in mix.items():
                total[b] = total.get(b, 0.0) + n
        return dict(sorted(total.items()))

    def add(self, itl_sum: float, itl_count: float, it_layout: int | None, it: np.ndarray | None) -> None:
        self.itl_sum += itl_sum
        self.itl_count += itl_count
        if it_layout and it is not None:
            rows = it[~np.isnan(it).any(axis=1)] if it.dtype.kind == "f" else it
            if len(rows):
                total = rows.sum(axis=0, dtype=np.float64)
                prev = self.iteration_tokens.get(it_layout)
                self.iteration_tokens[it_layout] = total if prev is None else prev + total

    def add_pairs(self, engine: np.ndarray, times: np.ndarray, batch: np.ndarray) -> None:
        """Count consecutive gauge samples of one engine (rows sorted by engine and time;
        same engine, next scrape: a gap over twice the median interval is a target that was
        down) and how many kept B — what StepShapeWindow.batch_persistence needs. Rollups
        keep no order: raw rows only."""
        if len(times) < 2:
            return
        dt = np.diff(times)
        positive = dt[dt > 0]
        if not positive.size:
            return
        pair = (engine[1:] == engine[:-1]) & (dt > 0) & (dt <= 2.0 * float(np.median(positive))) \
            & (batch[1:] >= 1) & (batch[:-1] >= 1)
        self.batch_pairs += int(pair.sum())
        self.batch_repeats += int((pair & (batch[1:] == batch[:-1])).sum())

    def merge(self, other: "StepTotals") -> None:
        self.batch_pairs += other.batch_pairs
        self.batch_repeats += other.batch_repeats
        self.itl_sum += other.itl_sum
        self.itl_count += other.itl_count
        for sid, (total, count) in other.itl_by_seg.items():
            prev = self.itl_by_seg.setdefault(sid, [0.0, 0.0])
            prev[0] += total
            prev[1] += count
        for sid, mix in other.batch_by_seg.items():
            mine = self.batch_by_seg.setdefault(sid, {})
            for b, n in mix.items():
                mine[b] = mine.get(b, 0.0) + n
        for lay, v in other.iteration_tokens.items():
            prev_it = self.iteration_tokens.get(lay)
            self.iteration_tokens[lay] = v if prev_it is None else prev_it + v


def _runs_compacted(values: np.ndarray) -> tuple[list[int], np.ndarray]:
    """(distinct values, each element's index among them) of an int array made of runs (the
    rows of a chunk share its segment): one pass and a sort of the runs only, not of every
    element (a day's raw rows of 100 engines are 576,000 samples in 29,000 runs)."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(values)) + 1])
    distinct, inverse = np.unique(values[starts], return_inverse=True)
    return distinct.tolist(), np.repeat(inverse.ravel(), np.diff(np.append(starts, len(values))))
