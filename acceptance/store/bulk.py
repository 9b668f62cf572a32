"""A vectorised loader of one engine's history (benchmarks and tests build week-long stores
with it): the rows and chunks write_cycle would store, without the per-cycle path."""

from __future__ import annotations

from ..errors import InputError

import math

import numpy as np
import numpy.typing as npt

from .codecs import (
    CHUNK_SPANS,
    ROLLUP_LEVELS,
    _encode_interval_chunk,
    _pack,
    _runs,
    bucket_of,
    chunk_of,
    encode_spec_rollup,
    encode_step_rollup,
)
from .deltas import history_increase
from .disk import rollback
from .writes import _spec_columns
from .state import _EngineState, _StoreState


class _BulkLoad(_StoreState):
    """Store.bulk_load_history."""

    def bulk_load_history(self, target: str, model_name: str, engine: str, times: npt.ArrayLike,
                          cumulative: npt.ArrayLike, *, running: npt.ArrayLike | None = None,
                          itl_sum: npt.ArrayLike | None = None, itl_count: npt.ArrayLike | None = None) -> None:
        """Load a new engine's whole history at one γ without restarts, fast (one transaction).

        ``times`` (n,) increasing; ``cumulative`` (n, 3 + γ) non-decreasing counters in the
        [D, T, A, A_1..A_γ] layout; optional step-shape arrays (n,). Each scrape is its own
        cycle time. Deltas and rollups are what ``write_cycle`` would have stored.
        """
        times = np.asarray(times, dtype=np.float64)
        cum = np.asarray(cumulative, dtype=np.float64)
        n = len(times)
        if cum.ndim != 2 or cum.shape[0] != n or cum.shape[1] < 4 or n < 1:
            raise InputError(f"bulk history of {target}: cumulative must be (n, 3 + gamma), got {cum.shape}")
        if np.any(np.diff(times) <= 0):
            raise InputError(f"bulk history of {target}: times must increase")
        try:
            delta = history_increase(cum)
        except ValueError as exc:
            raise InputError(f"bulk history of {target}: {exc}") from None
        gamma = cum.shape[1] - 3
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            tid = self._target_id(target)
            eid = self._engine_id(tid, model_name, engine)
            if eid in self._engines:
                raise InputError(f"bulk history of {target}: engine {model_name}/{engine} already has samples")
            seg = self._new_segment(eid, gamma, float(times[0]))
            lay = self._layout_id("spec", _spec_columns(gamma, False))
            run = np.asarray(running, dtype=np.float64) if running is not None else None
            isum = np.asarray(itl_sum, dtype=np.float64) if itl_sum is not None else None
            icnt = np.asarray(itl_count, dtype=np.float64) if itl_count is not None else None
            batch = np.round(run).astype(np.int64) if run is not None else np.zeros(n, dtype=np.int64)
            isum_d = np.concatenate([[0.0], np.diff(isum)]) if isum is not None else np.zeros(n)
            icnt_d = np.concatenate([[0.0], np.diff(icnt)]) if icnt is not None else np.zeros(n)
            starts = np.concatenate([[math.nan], times[:-1]])
            c.execute("INSERT INTO engine_last VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (
                eid, times[-1].item(), seg, lay, None, _pack(cum[-1]), None if isum is None else isum[-1].item(),
                None if icnt is None else icnt[-1].item(), None, None, None, None))
            c.executemany("INSERT INTO cycles VALUES (?, 1, 0) ON CONFLICT (time) DO UPDATE SET ok = ok + 1",
                          [(t,) for t in times.tolist()])
            intervals = _IntervalRows(eid, times, starts, np.column_stack([isum_d, icnt_d]))
            if run is not None:  # the baseline carries a batch-size sample
                intervals.add(0, 1, (0, 0, 0), np.array([[batch[0]]], dtype=np.float64))
            counts = np.column_stack([batch, np.vstack([np.zeros(cum.shape[1]), delta])]).astype(np.float64)
            intervals.add(1, n, (seg, lay, 0), counts[1:])
            c.executemany("INSERT INTO interval_chunks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", intervals.rows)
            for level in ROLLUP_LEVELS:
                spec_rows, step_rows = [], []
                buckets = (np.ceil(times / level) - 1) * level
                for lo, hi in _runs(buckets[1:] // CHUNK_SPANS[level], 0):  # intervals 1..n-1 by chunk
                    lo, hi = lo + 1, hi + 1
                    bounds = _runs(buckets[lo:hi], 0)
                    first = np.array([b0 for b0, _ in bounds]) + lo
                    last = np.array([b1 for _, b1 in bounds]) + lo - 1
                    ch = chunk_of(float(buckets[lo]), level)
                    counts = np.column_stack([[b1 - b0 for b0, b1 in bounds],
                                              np.add.reduceat(delta[lo - 1:hi - 1], first - lo, axis=0)])
                    spec_rows.append((eid, level, ch, seg, lay, *encode_spec_rollup(
                        ch, level, buckets[first], np.column_stack([starts[first], times[last]]), counts)))
                for lo, hi in _runs(buckets // CHUNK_SPANS[level], 0):  # every sample: step shape
                    first = np.array([b0 for b0, _ in _runs(buckets[lo:hi], 0)]) + lo
                    itl = np.column_stack([np.add.reduceat(isum_d[lo:hi], first - lo),
                                           np.add.reduceat(icnt_d[lo:hi], first - lo)])
                    mix = np.zeros((0, 3))
                    ch = chunk_of(float(buckets[lo]), level)
                    if run is not None:
                        keep = batch[lo:hi] >= 1
                        pairs, k = np.unique(np.column_stack([(buckets[lo:hi][keep] - ch) / level,
                                                              batch[lo:hi][keep]]), axis=0, return_counts=True)
                        mix = np.column_stack([pairs, k]).astype(np.float64)
                    step_rows.append((eid, level, ch, 0, *encode_step_rollup(ch, level, buckets[first], itl, None, mix)))
                c.executemany("INSERT INTO spec_rollups VALUES (?,?,?,?,?,?,?,?,?,?)", spec_rows)
                c.executemany("INSERT INTO step_rollups VALUES (?,?,?,?,?,?,?,?,?,?,?)", step_rows)
            ts = self._targets[tid]
            ts.last_ok_time = max(ts.last_ok_time or -math.inf, float(times[-1]))
            c.execute("UPDATE targets SET last_ok_time = ? WHERE id = ?", (ts.last_ok_time, tid))
            c.execute("COMMIT")
        except BaseException:
            rollback(c)  # SQLITE_FULL may have rolled back already: its error is the one to raise
            self._load_state()
            raise
        self._engines[eid] = _EngineState(eid, float(times[-1]), seg, gamma, lay, None, cum[-1].copy(),
                                          float(isum[-1]) if isum is not None else None,
                                          float(icnt[-1]) if icnt is not None else None, None, None)


class _IntervalRows:
    """The interval_chunks rows of a bulk-loaded history, as write_cycle and sealing leave
    them: one sealed (packed) row per key and closed hour, 5-min rows as written in the last
    sample's hour."""

    def __init__(self, engine_id: int, times: npt.NDArray[np.float64], starts: npt.NDArray[np.float64],
                 itl: npt.NDArray[np.float64]):
        self.engine_id, self.times, self.starts, self.itl = engine_id, times, starts, itl
        self.open_hour = bucket_of(float(times[-1]), 3600)
        self.rows: list[tuple[object, ...]] = []

    def add(self, lo: int, hi: int, key: tuple[int, int, int], counts: npt.NDArray[np.float64]) -> None:
        """Samples lo..hi-1 under ``key`` (segment, layout, it layout), ``counts`` their rows."""
        t = self.times[lo:hi]
        slot = (np.ceil(t / 300) - 1) * 300  # each interval end's 5-min chunk
        hour = np.floor(slot / 3600) * 3600
        sealed = hour < self.open_hour
        span = np.where(sealed, hour, slot)  # rows: a closed hour's, or an open hour's 5 min
        for a, b in _runs(span, 0):
            first, last = float(slot[a]), float(slot[b - 1])
            self.rows.append((self.engine_id, first, *key, last + 300.0 - first, int(sealed[a]),
                              *_encode_interval_chunk(t[a:b], t[a:b], self.starts[lo + a:lo + b],
                                                      self.itl[lo + a:lo + b], counts[a:b], bool(sealed[a]))))
