"""A vectorised loader of one engine's history (benchmarks and tests build week-long stores
with it): the rows and chunks write_cycle would store, without the per-cycle path."""

from __future__ import annotations

from ..errors import InputError

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from .codecs import CHUNK_SPANS, ROLLUP_LEVELS, _encode_interval_chunk, _narrow, _pack, _runs, bucket_of, chunk_of
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
            vb = cum.tobytes()
            db = delta.tobytes()
            w = cum.shape[1] * 8
            col: Callable[[np.ndarray | None, int], float | None] = lambda a, i: a[i].item() if a is not None else None  # noqa: E731
            c.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", [
                (eid, times[i].item(), seg, lay, None, vb[i * w:(i + 1) * w], db[(i - 1) * w:i * w] if i else None,
                 col(run, i), col(isum, i), col(icnt, i), None, None) for i in range(n)])
            c.executemany("INSERT INTO cycles VALUES (?, 1, 0) ON CONFLICT (time) DO UPDATE SET ok = ok + 1",
                          [(t,) for t in times.tolist()])
            # per interval i ≥ 1 (sample 0 is the baseline: step shape only)
            batch = np.round(run).astype(np.int64) if run is not None else np.zeros(n, dtype=np.int64)
            isum_d = np.concatenate([[0.0], np.diff(isum)]) if isum is not None else np.zeros(n)
            icnt_d = np.concatenate([[0.0], np.diff(icnt)]) if icnt is not None else np.zeros(n)
            itl_d = np.column_stack([isum_d, icnt_d])
            starts = np.concatenate([[math.nan], times[:-1]])
            rows = []
            if run is not None:  # the baseline carries a batch-size sample
                rows.append((eid, bucket_of(float(times[0]), 300), 0, 0, 0) + _encode_interval_chunk(
                    times[:1], times[:1], starts[:1], np.zeros((1, 2)), np.array([[batch[0]]], dtype=np.float64)))
            counts = np.column_stack([batch, np.vstack([np.zeros(cum.shape[1]), delta])]).astype(np.float64)
            chunk0 = (np.ceil(times / 300) - 1) * 300
            for lo, hi in _runs(chunk0[1:], 1):
                rows.append((eid, float(chunk0[lo]), seg, lay, 0) + _encode_interval_chunk(
                    times[lo:hi], times[lo:hi], starts[lo:hi], itl_d[lo:hi], counts[lo:hi]))
            c.executemany("INSERT INTO interval_chunks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            for level in ROLLUP_LEVELS:
                spec_rows, step_rows = [], []
                buckets = (np.ceil(times / level) - 1) * level
                for lo, hi in _runs(buckets[1:] // CHUNK_SPANS[level], 0):  # intervals 1..n-1 by chunk
                    lo, hi = lo + 1, hi + 1
                    bounds = _runs(buckets[lo:hi], 0)
                    first = np.array([b0 for b0, _ in bounds]) + lo
                    spec_rows.append((eid, level, chunk_of(float(buckets[lo]), level), seg, lay, len(bounds),
                                      _pack(buckets[first]), _pack(np.array([b1 - b0 for b0, b1 in bounds], float)),
                                      _pack(starts[first]), _pack(times[np.array([b1 for _, b1 in bounds]) + lo - 1]),
                                      _pack(np.add.reduceat(delta[lo - 1:hi - 1], first - lo, axis=0))))
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
                    step_rows.append((eid, level, ch, 0, len(first), _pack(buckets[first]), _pack(itl), None,
                                      *_narrow(mix)))
                c.executemany("INSERT INTO spec_rollups VALUES (?,?,?,?,?,?,?,?,?,?,?)", spec_rows)
                c.executemany("INSERT INTO step_rollups VALUES (?,?,?,?,?,?,?,?,?,?)", step_rows)
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
