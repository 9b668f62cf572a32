"""The readers windows use: statuses, events, engines and segments, and the chunk rows of a
span (scrape intervals, rollup buckets, plugin deltas), each in one query for many engines."""

from __future__ import annotations

import json
import math
from typing import Iterable, Sequence

import numpy as np

from .codecs import (
    CHUNK_SPANS,
    ROLLUP_LEVELS,
    SEAL_SPAN,
    _decode_plugin_delta,
    bucket_of,
    chunk_of,
    COUNT_DTYPES,
    decode_interval_rows,
)
from .records import EngineRef, Event, PluginEntries, SpecEntries, StepTotals, TargetStatus
from .state import _Row, _StoreState


# interval_chunks rows that may hold an interval ending in (lo, hi] (bounds: _interval_bounds):
# a 5-min row's chunk is the interval end's 5-min bucket; a sealed row spans up to an hour
# from its chunk, so its chunk may lie up to an hour before lo's bucket
_INTERVAL_ROWS = "chunk > ? AND chunk <= ? AND chunk + span > ?"


class _Reads(_StoreState):
    """Store methods that read scraped data."""

    def raw_from(self) -> float | None:
        """Raw rows before this time were deleted by retention (None: none were)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'raw_from'").fetchone()
        return None if row is None else float(row[0])

    def latest_time(self) -> float | None:
        """The time of the newest stored scrape cycle (None for an empty store)."""
        latest: float | None = self.conn.execute("SELECT MAX(time) FROM cycles").fetchone()[0]
        return latest

    def targets_status(self, targets: Iterable[str]) -> list[TargetStatus]:
        """Status of each target, in the order given (never-seen targets: all None)."""
        out = []
        for url in targets:
            tid = self._target_ids.get(url)
            ts = self._targets.get(tid) if tid is not None else None
            if ts is None:
                out.append(TargetStatus(url, None, None, None))
            else:
                out.append(TargetStatus(url, ts.last_ok_time, ts.last_error, ts.failing_since))
        return out

    def events(self, targets: Iterable[str], start: float, end: float) -> list[Event]:
        """Events of these targets with time in (start, end], oldest first."""
        out = []
        for url in targets:
            tid = self._target_ids.get(url)
            if tid is None:
                continue
            for t, eid, kind, detail, data in self.conn.execute(
                    "SELECT time, engine_id, kind, detail, data FROM events WHERE target_id = ? "
                    "AND time > ? AND time <= ? ORDER BY time, id", (tid, start, end)):
                ref = self._engine_refs.get(eid) if eid is not None else None
                out.append(Event(t, url, ref.model_name if ref else None, ref.engine if ref else None, kind,
                                 detail, json.loads(data) if data else None))
        out.sort(key=lambda e: e.time)
        return out

    def failures(self, target: str, start: float, end: float) -> list[tuple[float, str]]:
        """(time, error) of the failed scrapes of a target in (start, end]."""
        tid = self._target_ids.get(target)
        if tid is None:
            return []
        return self.conn.execute("SELECT time, error FROM failures WHERE target_id = ? AND time > ? AND time <= ? "
                                 "ORDER BY time", (tid, start, end)).fetchall()

    # Low-level reads used by acceptance.windows.

    def engines_of(self, targets: Iterable[str]) -> list[tuple[int, EngineRef]]:
        """(engine id, ref) of every engine ever seen on these targets."""
        wanted = set(targets)
        return sorted((eid, ref) for eid, ref in self._engine_refs.items() if ref.target in wanted)

    def segment_gamma(self, seg_id: int) -> int:
        return self._segment_gamma[seg_id]

    def layout_columns(self, layout_id: int) -> list[str]:
        return self._layouts[layout_id][1]

    def segment_engine(self, seg_id: int) -> int:
        return self._segment_engine[seg_id]

    def _engine_filter(self, engine_ids: list[int]) -> str:
        return f"engine_id IN ({','.join(str(int(e)) for e in engine_ids)})"

    @staticmethod
    def _interval_bounds(lo: float, hi: float) -> tuple[float, float, float]:
        first = bucket_of(lo, 300)
        return first - SEAL_SPAN, bucket_of(hi, 300), first

    def data_span(self, engine_ids: list[int], lo: float, hi: float) -> tuple[float, float] | None:
        """(first, last]: chunk bounds around every stored interval of these engines that ends in
        (lo, hi] — scrape chunks to 5 minutes, rollups (where retention removed the raw rows)
        to their chunk's span — or None when there is none. Windows that contain all of it read
        the same rows, so acceptance.windows plans them alike whatever their nominal length."""
        if not engine_ids:
            return None
        first, last = math.inf, -math.inf
        raw = self.conn.execute(
            f"SELECT MIN(chunk), MAX(chunk + span) FROM interval_chunks WHERE {self._engine_filter(engine_ids)} "
            f"AND {_INTERVAL_ROWS}", self._interval_bounds(lo, hi)).fetchone()
        if raw[0] is not None:
            first, last = raw[0], raw[1]
        level = min(ROLLUP_LEVELS)
        span = CHUNK_SPANS[level]
        rolled = self.conn.execute(
            f"SELECT MIN(chunk), MAX(chunk) FROM spec_rollups WHERE {self._engine_filter(engine_ids)} "
            "AND level = ? AND chunk >= ? AND chunk <= ?",
            (level, chunk_of(bucket_of(lo, level), level), chunk_of(bucket_of(hi, level), level))).fetchone()
        if rolled[0] is not None:
            first, last = min(first, rolled[0]), max(last, rolled[1] + span)
        return None if first == math.inf else (max(lo, first), min(hi, last))

    def read_intervals(self, engine_ids: list[int], lo: float, hi: float) -> tuple[list["SpecEntries"], "StepTotals"]:
        """Scrape intervals of these engines with time (interval end) in (lo, hi]: the spec
        deltas as one ``SpecEntries`` per layout (block key: the cycle), and step-shape totals."""
        step = StepTotals()
        if not engine_ids:
            return [], step
        rows = self.conn.execute(
            "SELECT layout_id, it_layout_id, seg_id, engine_id, n, code, flags, first_start, data "
            f"FROM interval_chunks WHERE {self._engine_filter(engine_ids)} AND {_INTERVAL_ROWS}",
            self._interval_bounds(lo, hi)).fetchall()
        groups: dict[tuple[int, int], list[_Row]] = {}
        for r in rows:
            groups.setdefault(r[:2], []).append(r[2:])
        spec = []
        gauge = []  # (engine, time, running) of every row, for the pairs of consecutive samples
        for (lay, it_lay), rs in groups.items():
            w, w_it = self._width(lay), self._width(it_lay)
            decoded = decode_interval_rows([tuple(r[2:]) for r in rs], 1 + w + w_it)
            row_order = [i for at, _ in decoded for i in at]  # rows in the order their entries come
            ns = np.array([rs[i][2] for i in row_order])
            times, cycles, starts, itl, counts = (np.concatenate(x) for x in zip(*(a for _, a in decoded)))
            segs, engine_of = [rs[i][0] for i in row_order], [rs[i][1] for i in row_order]
            m = (times > lo) & (times <= hi)
            seg, engine = np.repeat(np.array(segs), ns), np.repeat(np.array(engine_of), ns)
            if not m.all():
                times, cycles, starts, counts, itl = times[m], cycles[m], starts[m], counts[m], itl[m]
                seg, engine = seg[m], engine[m]
            if not len(times):
                continue
            step.add(float(itl[:, 0].sum()), float(itl[:, 1].sum()), it_lay, counts[:, 1 + w:] if w_it else None)
            step.add_segment_itl(seg, itl)
            step.add_batch(seg, counts[:, 0], np.ones(len(times)))
            gauge.append((engine, times, counts[:, 0].astype(np.float64)))
            if lay:
                spec.append(SpecEntries(lay, seg, cycles, starts, times, counts[:, 1:1 + w].astype(np.float64),
                                        np.nan_to_num(itl)))
        if gauge:
            engine, times, running = (np.concatenate(x) for x in zip(*gauge))
            order = np.lexsort((times, engine))
            step.add_pairs(engine[order], times[order], running[order])
        return spec, step

    def read_rollups(self, engine_ids: list[int], level: int, b_lo: float, b_hi: float
                     ) -> tuple[list["SpecEntries"], "StepTotals"]:
        """Rollup buckets b_lo ≤ b < b_hi of ``level`` of these engines: spec deltas as one
        ``SpecEntries`` per layout (block key: the bucket's end), and step-shape totals."""
        step = StepTotals()
        if not engine_ids or b_hi <= b_lo:
            return [], step
        where = f"{self._engine_filter(engine_ids)} AND level = ? AND chunk >= ? AND chunk < ?"
        args = (level, chunk_of(b_lo, level), b_hi)
        groups: dict[tuple[int, int], list[_Row]] = {}
        owners: dict[tuple[int, float], dict[int, bytes]] = {}  # (engine, chunk) → {segment: its bucket indexes}
        for r in self.conn.execute("SELECT layout_id, code, seg_id, n, buckets, ends, counts, engine_id, chunk "
                                   f"FROM spec_rollups WHERE {where}", args):
            groups.setdefault(r[:2], []).append(r[2:7] + (r[8],))
            owners.setdefault((r[7], r[8]), {})[r[2]] = r[4]
        segment_of = _BucketSegments(owners, level)
        spec = []
        for (lay, code), rs in groups.items():
            segs, ns, index_b, ends_b, counts_b, chunks = zip(*rs)
            buckets = _buckets(chunks, ns, index_b, level)
            keep = (buckets >= b_lo) & (buckets < b_hi)
            if keep.any():
                ends = np.frombuffer(b"".join(ends_b)).reshape(-1, 2)[keep]
                counts: np.ndarray = np.frombuffer(b"".join(counts_b), dtype=COUNT_DTYPES[code]).reshape(len(buckets), -1)
                spec.append(SpecEntries(lay, np.repeat(np.array(segs), np.array(ns))[keep], buckets[keep] + level,
                                        ends[:, 0], ends[:, 1], counts[keep, 1:].astype(np.float64)))
        bucket_itl = _BucketLatency(level)
        by_it: dict[tuple[int, int], list[_Row]] = {}
        by_code: dict[int, list[_Row]] = {}
        for r in self.conn.execute("SELECT it_layout_id, it_code, n, buckets, itl, it_delta, chunk, mix_code, batch_mix, "
                                   f"engine_id FROM step_rollups WHERE {where}", args):
            by_it.setdefault(r[:2], []).append(r[2:7] + (r[9],))
            by_code.setdefault(r[7], []).append((r[6], r[8], r[9]))
        for code, mixes in by_code.items():  # batch mix: (bucket index, batch size, samples) triples
            chunks, blobs, engines = zip(*mixes)
            size = 3 * np.dtype(COUNT_DTYPES[code]).itemsize
            triples = [len(b) // size for b in blobs]
            mix = np.frombuffer(b"".join(blobs), dtype=COUNT_DTYPES[code]).reshape(-1, 3).astype(np.float64)
            bucket = np.repeat(np.array(chunks), triples) + mix[:, 0] * level
            m = (bucket >= b_lo) & (bucket < b_hi)
            step.add_batch(segment_of(engines, chunks, triples, bucket)[m], mix[m, 1], mix[m, 2])
        for (it_lay, it_code), rs in by_it.items():
            ns, index_b, itl_b, it_b, chunks, engines = zip(*rs)
            buckets = _buckets(chunks, ns, index_b, level)
            m = (buckets >= b_lo) & (buckets < b_hi)
            itl = np.frombuffer(b"".join(itl_b)).reshape(-1, 2)[m]
            # a bucket's ITL goes to its engine segment when the bucket lies in one only
            seg = segment_of(engines, chunks, ns, buckets)[m]
            step.add_segment_itl(seg[seg >= 0], itl[seg >= 0])
            bucket_itl.add(seg[seg >= 0], buckets[m][seg >= 0], itl[seg >= 0])
            it: np.ndarray | None = None
            if it_lay:
                it = np.frombuffer(b"".join(it_b), dtype=COUNT_DTYPES[it_code]).reshape(len(buckets), -1)[m]
                it = it.astype(np.float64)
            step.add(float(itl[:, 0].sum()), float(itl[:, 1].sum()), it_lay, it)
        return [bucket_itl.attach(e) for e in spec], step

    def read_plugin(self, engine_ids: list[int], level: int, lo: float, hi: float) -> list["PluginEntries"]:
        """Plugin deltas of these engines, one ``PluginEntries`` per plugin layout: scrape
        intervals with end in (lo, hi] (level 0), or rollup buckets lo ≤ b < hi of ``level``."""
        if not engine_ids or hi <= lo:
            return []
        if level == 0:
            args = (0, bucket_of(lo, 300), bucket_of(hi, 300))
            where = "chunk >= ? AND chunk <= ?"
        else:
            args = (level, chunk_of(lo, level), hi)
            where = "chunk >= ? AND chunk < ?"
        groups: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        for lay, seg, n, keys, code, blob in self.conn.execute(
                "SELECT layout_id, seg_id, n, keys, code, delta FROM plugin_chunks "
                f"WHERE {self._engine_filter(engine_ids)} AND level = ? AND {where}", args):
            k = np.frombuffer(keys)
            m = (k > lo) & (k <= hi) if level == 0 else (k >= lo) & (k < hi)
            if m.any():
                groups.setdefault(lay, []).append(
                    (np.full(int(m.sum()), seg), _decode_plugin_delta(n, code, blob)[m], k[m]))
        return [PluginEntries(lay, np.concatenate([x for x, _, _ in rs]), np.vstack([d for _, d, _ in rs]),
                              np.concatenate([k for _, _, k in rs]))
                for lay, rs in groups.items()]

    def is_speculating(self, engine_id: int, at: float) -> bool | None:
        """Whether the engine's newest sample at or before ``at`` had spec-decode counters."""
        state = self._engines.get(engine_id)
        if state is not None and state.time <= at:  # the common case: a window ending now
            return state.value is not None
        # earlier: the engine's newest switch at or before ``at`` — a segment opened (first
        # sighting, restart, γ change: speculating) or speculation switched on or off (events)
        row = self.conn.execute(
            "SELECT kind FROM (SELECT first_time AS time, 'spec_on' AS kind FROM segments "
            "WHERE engine_id = ? AND first_time <= ? UNION ALL SELECT time, kind FROM events "
            "WHERE engine_id = ? AND kind IN ('spec_on', 'spec_off') AND time <= ?) ORDER BY time DESC LIMIT 1",
            (engine_id, at, engine_id, at)).fetchone()
        if row is not None:
            return bool(row[0] == "spec_on")
        seen = self.conn.execute("SELECT 1 FROM interval_chunks WHERE engine_id = ? AND chunk < ? LIMIT 1",
                                 (engine_id, at)).fetchone()
        return False if seen else None  # seen without spec-decode counters, or not seen yet


def _buckets(chunks: Sequence[float], ns: Sequence[int], indexes: Sequence[bytes], level: int) -> np.ndarray:
    """The buckets of rollup rows, concatenated: b = chunk + index · level."""
    index: np.ndarray = np.frombuffer(b"".join(indexes), dtype=np.uint8)
    out: np.ndarray = np.repeat(np.array(chunks), np.array(ns)) + index * float(level)
    return out


class _BucketSegments:
    """The engine segment of each step rollup bucket, -1 where the bucket holds two (a γ change
    inside it) or none: step rollups name no segment, the spec rollup rows of the same engine
    and chunk do. A chunk of one segment (nearly all) is looked up whole; the buckets of a
    chunk that holds two are looked up one by one."""

    def __init__(self, owners: dict[tuple[int, float], dict[int, bytes]], level: int):
        self.whole = {key: next(iter(segs)) for key, segs in owners.items() if len(segs) == 1}
        self.split = {key: [(seg, set((key[1] + np.frombuffer(b, dtype=np.uint8) * float(level)).tolist()))
                            for seg, b in segs.items()]
                      for key, segs in owners.items() if len(segs) > 1}

    def __call__(self, engines: Sequence[int], chunks: Sequence[float], ns: Sequence[int],
                 buckets: np.ndarray) -> np.ndarray:
        """Per bucket of the step rollup rows (their engines, chunks and bucket counts, the
        buckets concatenated), its segment."""
        keys = list(zip(engines, chunks))
        seg = np.repeat(np.array([self.whole.get(k, -1) for k in keys], dtype=np.int64), np.array(ns))
        offsets = np.concatenate([[0], np.cumsum(ns)[:-1]]).tolist()
        for key, start, n in zip(keys, offsets, ns):
            parts = self.split.get(key)
            if not parts:
                continue
            for j in range(start, start + n):
                holders = [s for s, held in parts if buckets[j] in held]
                seg[j] = holders[0] if len(holders) == 1 else -1
        return seg


class _BucketLatency:
    """The ITL sum and count of each (engine segment, rollup bucket) the step rollups hold, to
    attach to the spec rollups' entries of the same segment and bucket (SpecEntries.itl); a
    bucket whose ITL lies in two segments has none of its own (_BucketSegments)."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.codes: list[np.ndarray] = []
        self.itl: list[np.ndarray] = []

    def _code(self, seg: np.ndarray, bucket: np.ndarray) -> np.ndarray:
        return np.asarray(seg, dtype=np.int64) * 10**10 + np.round(np.asarray(bucket) / self.level).astype(np.int64)

    def add(self, seg: np.ndarray, bucket: np.ndarray, itl: np.ndarray) -> None:
        self.codes.append(self._code(seg, bucket))
        self.itl.append(np.asarray(itl, dtype=np.float64))

    def attach(self, entries: SpecEntries) -> SpecEntries:
        """``entries`` with the latency of their segment and bucket (0, 0 where none is held)."""
        out = np.zeros((len(entries.seg), 2))
        codes = np.concatenate(self.codes) if self.codes else np.zeros(0, dtype=np.int64)
        if len(codes):
            order = np.argsort(codes, kind="stable")
            codes, itl = codes[order], np.concatenate(self.itl)[order]
            wanted = self._code(entries.seg, entries.key - self.level)  # the key is the bucket's end
            at = np.minimum(np.searchsorted(codes, wanted), len(codes) - 1)
            hit = codes[at] == wanted
            out[hit] = np.nan_to_num(itl[at[hit]])
        entries.itl = out
        return entries
