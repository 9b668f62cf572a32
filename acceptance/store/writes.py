"""The write path: one scrape cycle in one transaction — each engine's delta against its
previous sample (acceptance.store.deltas), its events and segments, and the chunk rows."""

from __future__ import annotations

from ..durations import approximate_duration
from ..errors import InputError

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np

from .. import plugin_series
from ..counts import EngineSnapshot, ScrapeResult, StepShape
from .disk import full_error, rollback
from .codecs import (
    CHUNK_SPANS,
    ROLLUP_LEVELS,
    _CHUNK_TABLES,
    _IntervalChunk,
    _PluginChunk,
    _SpecRollupChunk,
    _StepRollupChunk,
    _le_name,
    _pack,
    bucket_of,
    chunk_of,
)
from .records import EngineRef
from .state import _Chunk, _ChunkKey, _EngineState, _TargetState, _TotalsRows
from .sealing import _Sealing
from .deltas import REBASE_AFTER, SpecSample, counter_increase, itl_increase, spec_increase, spec_off_event


@dataclass(frozen=True)
class _SpecSample:
    """One sample's spec-decode part: γ, vector, layout, segment, increase, restart."""

    gamma: int
    value: np.ndarray | None
    layout_id: int | None
    seg_id: int | None
    delta: np.ndarray | None
    restart: bool
    refused: str | None = None  # an inconsistent scrape (acceptance.store.deltas): not stored
    quiet: bool = False  # refused as a life already told of: no event, no line


@dataclass(frozen=True)
class _StepSample:
    """One sample's step shape, as exposed and as increases."""

    running: float | None
    itl_sum: float | None
    itl_count: float | None
    itl_sum_d: float | None
    itl_count_d: float | None
    it_layout: int | None
    it_value: np.ndarray | None
    it_delta: np.ndarray | None


def _spec_columns(gamma: int, per_position_drafts: bool) -> list[str]:
    cols = ["drafts", "draft_tokens", "accepted_tokens"] + [f"accepted_per_position:{k}" for k in range(gamma)]
    if per_position_drafts:
        cols += [f"draft_tokens_per_position:{k}" for k in range(gamma)]
    return cols


def _validate_snapshot(target: str, snap: EngineSnapshot) -> None:
    where = f"engine {snap.model_name}/{snap.engine} of {target}"
    if snap.counts is not None:
        c = snap.counts
        if c.gamma < 1:
            raise InputError(f"{where}: spec-decode counters without any position series")
        vals = list(c.as_vector()) + list(c.draft_tokens_per_position or ())
        if c.draft_tokens_per_position is not None and len(c.draft_tokens_per_position) != c.gamma:
            raise InputError(f"{where}: draft_tokens_per_position has {len(c.draft_tokens_per_position)} entries for gamma {c.gamma}")
        for x in vals:
            if not (isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(x) and x >= 0):
                raise InputError(f"{where}: counter value {x!r} is not a finite non-negative number")
    s = snap.step_shape
    if s is not None:
        for name, v in (("num_requests_running", s.num_requests_running), ("itl_sum", s.itl_sum), ("itl_count", s.itl_count)):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise InputError(f"{where}: {name} {v!r} is not a finite non-negative number")
        for le, x in s.iteration_tokens.items():
            if not (math.isfinite(x) and x >= 0) or math.isnan(le):
                raise InputError(f"{where}: iteration_tokens bucket le={le!r} value {x!r} is invalid")


class _Writes(_Sealing):
    """Store methods of the write path (write_cycle and what it stages)."""

    def _target_id(self, url: str) -> int:
        tid = self._target_ids.get(url)
        if tid is None:
            tid = self.conn.execute("INSERT INTO targets (url) VALUES (?)", (url,)).lastrowid
            assert tid is not None  # an INSERT's row
            self._target_ids[url] = tid
            self._target_urls[tid] = url
            self._targets[tid] = _TargetState(tid, None, None, None, None)
        return tid

    def _engine_id(self, tid: int, model: str, eng: str) -> int:
        key = (tid, model, eng)
        eid = self._engine_ids.get(key)
        if eid is None:
            eid = self.conn.execute(
                "INSERT INTO engines (target_id, model_name, engine) VALUES (?, ?, ?)", key).lastrowid
            assert eid is not None  # an INSERT's row
            self._engine_ids[key] = eid
            self._engine_refs[eid] = EngineRef(self._target_urls[tid], model, eng)
        return eid

    def _layout_id(self, kind: str, columns: Sequence[str]) -> int:
        lid = self._layout_by_columns.get((kind, tuple(columns)))
        if lid is not None:
            return lid
        text = json.dumps(columns, separators=(",", ":"))
        lid = self._layout_ids.get((kind, text))
        if lid is None:
            lid = self.conn.execute("INSERT INTO layouts (kind, columns) VALUES (?, ?)", (kind, text)).lastrowid
            assert lid is not None  # an INSERT's row
            self._layout_ids[(kind, text)] = lid
            self._layouts[lid] = (kind, list(columns))
        self._layout_by_columns[(kind, tuple(columns))] = lid
        return lid

    def _iteration_layout(self, bounds: tuple[float, ...]) -> int:
        """The iteration-token layout of these bucket bounds (cached: every sample asks)."""
        lid = self._iteration_layouts.get(bounds)
        if lid is None:
            lid = self._iteration_layouts[bounds] = self._layout_id("iteration_tokens", [_le_name(b) for b in bounds])
        return lid

    def _new_segment(self, eid: int, gamma: int, t: float) -> int:
        sid = self.conn.execute(
            "INSERT INTO segments (engine_id, gamma, first_time) VALUES (?, ?, ?)", (eid, gamma, t)).lastrowid
        assert sid is not None  # an INSERT's row
        self._segment_gamma[sid] = gamma
        self._segment_engine[sid] = eid
        return sid

    def _width(self, layout_id: int | None) -> int:
        return len(self._layouts[layout_id][1]) if layout_id else 0

    @overload
    def _open_chunk(self, kind: Literal["i"], eid: int, level: int, chunk: float,
                    key: tuple[int | None, ...]) -> _IntervalChunk: ...
    @overload
    def _open_chunk(self, kind: Literal["s"], eid: int, level: int, chunk: float,
                    key: tuple[int | None, ...]) -> _SpecRollupChunk: ...
    @overload
    def _open_chunk(self, kind: Literal["p"], eid: int, level: int, chunk: float,
                    key: tuple[int | None, ...]) -> _PluginChunk: ...
    @overload
    def _open_chunk(self, kind: Literal["t"], eid: int, level: int, chunk: float,
                    key: tuple[int | None, ...]) -> _StepRollupChunk: ...

    def _open_chunk(self, kind: str, eid: int, level: int, chunk: float, key: tuple[int | None, ...]) -> _Chunk:
        """The open chunk object of (kind ∈ i | s | t, engine, level, chunk, key), marked dirty.

        The cache holds, per (kind, engine, level), every stored chunk from the first one
        written since open: an engine's times only go forward, so a chunk newer than those
        cached is new, and older ones are complete and leave the cache — a rollup chunk to be
        written once more, closed (its counts in their narrowest type: _flush_chunks)."""
        group = (kind, eid, level)
        cached = self._chunk_cache.get(group)
        if cached is None:
            cached = self._chunk_cache[group] = self._load_chunks(kind, eid, level, chunk)
        full: _ChunkKey = (chunk, *key)
        obj = cached.get(full)
        if obj is None:
            for k in [k for k in cached if k[0] < chunk]:
                closed = cached.pop(k)
                if kind in "st" and closed.rowid is not None:
                    self._closing[(kind, eid, level) + k] = closed
            obj = cached[full] = (_IntervalChunk if kind == "i" else _SpecRollupChunk if kind == "s"
                                  else _PluginChunk if kind == "p" else _StepRollupChunk)()
        self._dirty[(kind, eid, level) + full] = obj
        return obj

    def _load_chunks(self, kind: str, eid: int, level: int, chunk: float) -> dict[_ChunkKey, _Chunk]:
        c = self.conn
        out: dict[_ChunkKey, _Chunk] = {}
        obj: _Chunk
        if kind == "i":  # an open hour's 5-min rows (a closed hour's are sealed: acceptance.store.sealing)
            for rowid, ch, seg, lay, it_lay, *cols in c.execute(
                    "SELECT rowid, chunk, seg_id, layout_id, it_layout_id, n, code, flags, first_start, data "
                    "FROM interval_chunks WHERE engine_id = ? AND chunk >= ? AND sealed = 0", (eid, chunk)):
                obj = out[(ch, seg, lay, it_lay)] = _IntervalChunk.decode(
                    tuple(cols), width=self._row_width(lay, it_lay))
                obj.rowid = rowid
        elif kind == "s":
            for rowid, ch, seg, lay, *cols in c.execute(
                    "SELECT rowid, chunk, seg_id, layout_id, n, code, buckets, ends, counts "
                    "FROM spec_rollups WHERE engine_id = ? AND level = ? AND chunk >= ?", (eid, level, chunk)):
                obj = out[(ch, seg, lay)] = _SpecRollupChunk.decode(ch, level, tuple(cols))
                obj.rowid = rowid
        elif kind == "p":
            for rowid, ch, seg, lay, *cols in c.execute(
                    "SELECT rowid, chunk, seg_id, layout_id, n, keys, code, delta FROM plugin_chunks "
                    "WHERE engine_id = ? AND level = ? AND chunk >= ?", (eid, level, chunk)):
                obj = out[(ch, seg, lay)] = _PluginChunk.decode(*cols)
                obj.rowid = rowid
        else:
            for rowid, ch, it_lay, *cols in c.execute(
                    "SELECT rowid, chunk, it_layout_id, n, buckets, itl, it_code, it_delta, mix_code, batch_mix "
                    "FROM step_rollups WHERE engine_id = ? AND level = ? AND chunk >= ?", (eid, level, chunk)):
                obj = out[(ch, it_lay)] = _StepRollupChunk.decode(ch, level, tuple(cols))
                obj.rowid = rowid
        return out

    def _encoded(self, obj: _Chunk, key: list[Any], chunk: float, level: int, closed: bool
                 ) -> tuple[object, ...]:
        """A cached chunk's row columns after its key; ``closed``: a rollup chunk in its narrow form."""
        if isinstance(obj, _StepRollupChunk):  # kind "t": its key starts with its layout
            return obj.encode(self._width(key[0]), chunk, level, closed=closed)
        if isinstance(obj, _SpecRollupChunk):
            return obj.encode(chunk, level, closed=closed)
        return obj.encode()

    def _flush_chunks(self) -> None:
        """Write every chunk changed in this cycle (inside the cycle's transaction): stored
        ones are updated in place by rowid (no index change), new ones inserted.

        Rows a cycle rewrites — an open hour's, an open rollup chunk's — grow and are
        replaced, and a closed rollup chunk shrinks to its narrowest types. Were they among the
        closed rows, each would leave a hole in a page nothing fills again (a rowid table only
        appends at its right edge): so an open row is inserted at the left edge (a rowid below
        every other: _open_rowid), where the next open rows reuse its pages, and a rollup chunk,
        once closed, is moved to the right edge (``_closing``); a closed hour's rows are sealed
        there too (acceptance.store.sealing). The closed rows stay packed as they were written."""
        c = self.conn
        updates: dict[str, list[tuple[object, ...]]] = {"i": [], "s": [], "t": [], "p": []}
        for (kind, eid, level, chunk, *key), obj in self._closing.items():  # moved right, closed
            values = self._encoded(obj, key, chunk, level, closed=True)  # only rollup chunks close here
            table = _CHUNK_TABLES[kind]
            c.execute(f"DELETE FROM {table} WHERE rowid = ?", (obj.rowid,))
            row = (eid, level, chunk, *key, *values)
            c.execute(f"INSERT INTO {table} VALUES ({','.join('?' * len(row))})", row)
        self._closing = {}
        for (kind, eid, level, chunk, *key), obj in self._dirty.items():
            values = self._encoded(obj, key, chunk, level, closed=False)
            if obj.rowid is not None:
                updates[kind].append((*values, obj.rowid))
                continue
            # a level-0 row is an open hour's 5-min row: span 300, not sealed
            row = (eid, chunk, *key, CHUNK_SPANS[0], 0, *values) if kind == "i" else (eid, level, chunk, *key, *values)
            table = _CHUNK_TABLES[kind]
            if kind == "p":
                obj.rowid = c.execute(f"INSERT INTO {table} VALUES ({','.join('?' * len(row))})", row).lastrowid
            else:  # an open row, at the left edge
                obj.rowid = self._open_rowid(table)
                c.execute(f"INSERT INTO {table} ({self._columns(table)}) VALUES ({','.join('?' * (len(row) + 1))})",
                          (obj.rowid, *row))
        self._dirty = {}
        c.executemany("UPDATE interval_chunks SET n = ?, code = ?, flags = ?, first_start = ?, data = ? "
                      "WHERE rowid = ?", updates["i"])
        c.executemany("UPDATE spec_rollups SET n = ?, code = ?, buckets = ?, ends = ?, counts = ? WHERE rowid = ?",
                      updates["s"])
        c.executemany("UPDATE step_rollups SET n = ?, buckets = ?, itl = ?, it_code = ?, it_delta = ?, mix_code = ?, "
                      "batch_mix = ? WHERE rowid = ?", updates["t"])
        c.executemany("UPDATE plugin_chunks SET n = ?, keys = ?, code = ?, delta = ? WHERE rowid = ?", updates["p"])

    def _open_rowid(self, table: str) -> int:
        """A rowid below every row of ``table`` (negative): an open row's (_flush_chunks)."""
        below = self._open_rowids.get(table)
        if below is None:
            below = min(0, self.conn.execute(f"SELECT MIN(rowid) FROM {table}").fetchone()[0] or 0)
        self._open_rowids[table] = below - 1
        return below - 1

    def _columns(self, table: str) -> str:
        """"rowid, " and the columns of ``table``, for an INSERT that sets the rowid (read once)."""
        text = self._column_lists.get(table)
        if text is None:
            text = self._column_lists[table] = "rowid, " + ", ".join(
                r[1] for r in self.conn.execute(f"PRAGMA table_info({table})"))
        return text

    def write_cycle(self, results: list[ScrapeResult]) -> list[str]:
        """Store one scrape cycle (snapshots, deltas, failures, events, rollups) atomically;
        returns one line per engine whose scrape was refused as inconsistent (stored as an
        event only: acceptance.store.deltas), for the collector to say.

        Bad input raises ValueError (one line naming the target) and nothing of the cycle
        is stored; what was stored before is untouched.
        """
        results = list(results)
        self._refused: list[str] = []
        self.clock_lines: list[str] = []  # targets held by a clock that stepped back, or resumed (_say_clock)
        self._clock_held: list[tuple[str, float]] = []
        self._clock_resumed: list[tuple[str, int]] = []
        if not results:
            return []
        seen: set[str] = set()
        for r in results:
            if not isinstance(r, ScrapeResult):
                raise InputError(f"write_cycle expects ScrapeResult objects, got {type(r).__name__}")
            if not math.isfinite(r.time):
                raise InputError(f"scrape of {r.target} has time {r.time!r}")
            if r.target in seen:
                raise InputError(f"target {r.target} appears twice in one cycle")
            seen.add(r.target)
            keys = [e.key for e in r.engines]
            if len(set(keys)) != len(keys):
                raise InputError(f"scrape of {r.target} lists an engine twice")
            for e in r.engines:
                _validate_snapshot(r.target, e)
        cycle = max(r.time for r in results)
        c = self.conn
        if self._state_unread:  # a failed cycle could not reread the baselines: they are read first
            self._load_state()
            self._state_unread = False
        try:
            c.execute("BEGIN IMMEDIATE")
            staged = self._write_cycle_rows(results, cycle)
            c.execute("COMMIT")
        except BaseException as e:
            rollback(c)  # SQLITE_FULL may have rolled back already: its error is the one to raise
            self._reload_after_rollback()  # ids, segments and baselines created in the cycle are gone
            full = full_error(e, self.path, "nothing of this scrape cycle was stored; what was stored before is kept")
            if full is not None:
                raise full from e
            raise
        self._engines.update(staged)
        self.clock_lines = self._clock_words()
        if self.retention_s is not None:
            every = min(self.retention_s / 10.0, 3600.0)
            if self._last_retention is None or cycle - self._last_retention >= every:
                self.apply_retention(cycle)
        return self._refused

    def _write_cycle_rows(self, results: list[ScrapeResult], cycle: float) -> dict[int, _EngineState]:
        c = self.conn
        newest: list[tuple[object, ...]] = []  # each engine's newest sample: engine_last rows
        events: list[tuple[object, ...]] = []
        failures: list[tuple[int, float, str]] = []
        target_rows: list[tuple[object, ...]] = []
        totals: _TotalsRows = {"insert": [], "update": []}
        staged: dict[int, _EngineState] = {}
        n_failed = 0
        for r in results:
            tid = self._target_id(r.target)
            ts = self._targets[tid]
            new_ts = _TargetState(tid, ts.last_ok_time, ts.last_error, ts.last_error_time, ts.failing_since)
            if not r.ok:
                n_failed += 1
                err = (r.error or "scrape failed").splitlines()[0] if (r.error or "").strip() else "scrape failed"
                failures.append((tid, r.time, err))
                if ts.failing_since is None:
                    new_ts.failing_since = r.time
                    events.append((r.time, tid, None, "target_down", err, None))
                new_ts.last_error, new_ts.last_error_time = err, r.time
            else:
                if ts.failing_since is not None:
                    events.append((r.time, tid, None, "target_up",
                                   f"scrapes succeed again after failing since {ts.failing_since:.3f}", None))
                new_ts.failing_since = None
                new_ts.last_ok_time = r.time
                held_behind: float | None = None  # how far the clock is behind, when a scrape is held
                for snap in r.engines:
                    eid = self._engine_id(tid, snap.model_name, snap.engine)
                    prev = self._engines.get(eid)
                    if prev is not None and r.time <= prev.time:  # the clock stepped back: held, not stored
                        held_behind = max(held_behind or 0.0, prev.time - r.time)
                        continue
                    state = self._engine_sample(eid, prev, snap, r.time, cycle, newest, events)
                    if isinstance(state, str):  # an inconsistent scrape: refused, the previous sample kept
                        if state:  # "": a refusal already said
                            self._refused.append(f"{r.target}: engine {snap.engine} of {snap.model_name}: {state}")
                    else:
                        staged[eid] = self._with_totals(state, prev, snap, totals)
                self._say_clock(r.target, tid, held_behind)
            self._targets[tid] = new_ts
            target_rows.append((new_ts.last_ok_time, new_ts.last_error, new_ts.last_error_time,
                                new_ts.failing_since, tid))
        c.execute("INSERT INTO cycles (time, ok, failed) VALUES (?, ?, ?) "
                  "ON CONFLICT (time) DO UPDATE SET ok = ok + excluded.ok, failed = failed + excluded.failed",
                  (cycle, len(results) - n_failed, n_failed))
        c.executemany("INSERT OR REPLACE INTO engine_last VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", newest)
        c.executemany("UPDATE engine_totals SET time = ?, created = ?, totals = ? WHERE engine_id = ? AND time = ?",
                      totals["update"])
        c.executemany("INSERT OR REPLACE INTO engine_totals VALUES (?,?,?,?)", totals["insert"])
        self._flush_chunks()
        self._seal_closed_hours(cycle, staged)
        c.executemany("INSERT OR REPLACE INTO failures VALUES (?, ?, ?)", failures)  # a clock step may repeat a time
        c.executemany(
            "INSERT INTO events (time, target_id, engine_id, kind, detail, data) VALUES (?,?,?,?,?,?)", events)
        c.executemany(
            "UPDATE targets SET last_ok_time = ?, last_error = ?, last_error_time = ?, failing_since = ? "
            "WHERE id = ?", target_rows)
        return staged

    def _say_clock(self, target: str, tid: int, behind_s: float | None) -> None:
        """A target whose scrape came at or before its engines' last stored one (the clock
        stepped back: NTP, a VM resumed) is held — nothing of it stored, the next stored
        increase carries the interval, so no count is lost or added — and said once when it
        starts and once when it ends (``clock_lines``, in words: _clock_words)."""
        if behind_s is not None:
            if tid not in self._held_targets:
                self._held_targets[tid] = 0
                self._clock_held.append((target, behind_s))
            self._held_targets[tid] += 1
        elif tid in self._held_targets:
            self._clock_resumed.append((target, self._held_targets.pop(tid)))

    def _clock_words(self) -> list[str]:
        """This cycle's held and resumed targets in words: a line each for a few, one line for
        many (a clock step holds a whole fleet at once: a thousand targets, one line)."""
        lines = []
        if self._clock_held:
            behind = max(b for _, b in self._clock_held)
            where = f"{approximate_duration(behind)} behind" if behind >= 1 else "not past"
            who = (self._clock_held[0][0] + ":" if len(self._clock_held) == 1
                   else f"{len(self._clock_held)} targets (first {self._clock_held[0][0]}):")
            its = "its" if len(self._clock_held) == 1 else "their"
            lines.append(f"{who} this machine's clock is {where} {its} last stored scrape (it stepped back): {its} "
                         f"scrapes are held, not stored, until the clock passes it again; the next stored scrape's "
                         f"increase carries the interval, so no count is lost")
        if self._clock_resumed:
            who = (self._clock_resumed[0][0] + ":" if len(self._clock_resumed) == 1
                   else f"{len(self._clock_resumed)} targets (first {self._clock_resumed[0][0]}):")
            held = sum(n for _, n in self._clock_resumed)
            lines.append(f"{who} the clock passed the last stored scrape again: storing resumed ({held} scrape(s) "
                         f"held)")
        return lines

    def _engine_sample(self, eid: int, prev: _EngineState | None, snap: EngineSnapshot, t: float, cycle: float,
                       newest: list[tuple[object, ...]], events: list[tuple[object, ...]]) -> _EngineState | str:
        """One engine's sample: its increases against the previous one (acceptance.store.deltas),
        events and segments, its chunk entries and its engine_last row (the next delta's
        baseline); or, for an inconsistent scrape, its event only and why (a str)."""
        tid = self._target_ids[self._engine_refs[eid].target]

        def event(kind: str, detail: str, data: dict[str, object] | None = None) -> None:
            events.append((t, tid, eid, kind, detail, None if data is None else json.dumps(data)))

        spec = self._spec_sample(eid, prev, snap, t, event)
        if spec.refused:
            return "" if spec.quiet else f"scrape refused: {spec.refused}"
        steps = self._step_sample(prev, snap.step_shape or StepShape(), spec.restart)
        if spec.delta is not None or steps.running is not None or steps.itl_sum_d is not None \
                or steps.it_delta is not None:
            self._stage_interval(eid, t, cycle, prev.time if prev is not None else math.nan, spec, steps)
        plugin_layout, plugin_value = self._plugin_sample(eid, prev, snap, t, spec)
        newest.append((eid, t, spec.seg_id, spec.layout_id, snap.created, _pack(spec.value), steps.itl_sum,
                       steps.itl_count, steps.it_layout, _pack(steps.it_value), plugin_layout, _pack(plugin_value)))
        return _EngineState(eid, t, spec.seg_id, spec.gamma, spec.layout_id, snap.created, spec.value, steps.itl_sum,
                            steps.itl_count, steps.it_layout, steps.it_value, plugin_layout, plugin_value)

    def _spec_sample(self, eid: int, prev: _EngineState | None, snap: EngineSnapshot, t: float,
                     event: Callable[[str, str], None]) -> "_SpecSample":
        """The spec-decode vector, its layout, segment and increase; events raised on the way."""
        counts = snap.counts
        if counts is None:
            if prev is not None and prev.value is not None:
                event(*spec_off_event())
            return _SpecSample(0, None, None, None, None, False)
        gamma, dtpp = counts.gamma, counts.draft_tokens_per_position
        value = np.array(counts.as_vector() + (list(dtpp) if dtpp is not None else []), dtype=np.float64)
        layout_id = self._layout_id("spec", _spec_columns(gamma, dtpp is not None))
        inc = spec_increase(None if prev is None else SpecSample(prev.time, prev.gamma, prev.created, prev.value),
                            SpecSample(t, gamma, snap.created, value))
        in_a_row = self._refusals_running.pop(eid, 0)  # the engine's scrapes refused running
        refusals = in_a_row + 1 if inc.refused else 0
        if inc.refused and refusals >= REBASE_AFTER:
            # still set back, or another life alone answers (the one counted gone for good): a new
            # baseline, no increase; lives that alternate never get here (the counted one resets it)
            event("rebaseline", f"taken as it is after {refusals} scrapes refused in a row ({inc.refused}); "
                                f"what it did meanwhile is not counted")
            assert prev is not None  # only a sample seen before is refused (spec_increase)
            seg_id: int | None = prev.seg_id if gamma == prev.gamma else self._new_segment(eid, gamma, t)
            return _SpecSample(gamma, value, layout_id, seg_id, None, False)
        quiet = inc.other_life and snap.created in self._other_lives.setdefault(eid, set())
        if inc.other_life:  # another engine behind the same URL: said once per life, never counted
            self._other_lives[eid].add(snap.created)
        for kind, detail in () if quiet else inc.events:
            event(kind, detail)
        if inc.refused:
            self._refusals_running[eid] = refusals
            return _SpecSample(gamma, value, layout_id, None, None, False, inc.refused, quiet=quiet)
        if inc.new_segment:
            seg_id = self._new_segment(eid, gamma, t)
        else:
            assert prev is not None  # a first sighting opens a segment (spec_increase)
            seg_id = prev.seg_id
        return _SpecSample(gamma, value, layout_id, seg_id, inc.delta, inc.restart)

    def _step_sample(self, prev: _EngineState | None, shape: StepShape, restart: bool) -> "_StepSample":
        """The step shape: running requests, ITL and iteration-token increases (reset on the
        engine's restart or on their own counters going down)."""
        itl_sum_d, itl_count_d = itl_increase(None if prev is None else prev.itl_sum,
                                              None if prev is None else prev.itl_count,
                                              shape.itl_sum, shape.itl_count, restart, seen_before=prev is not None)
        it_layout = it_value = it_delta = None
        if shape.iteration_tokens:
            bounds = sorted(shape.iteration_tokens)
            it_layout = self._iteration_layout(tuple(bounds))
            it_value = np.array([shape.iteration_tokens[b] for b in bounds], dtype=np.float64)
            same = prev is not None and prev.it_value is not None and prev.it_layout_id == it_layout
            it_delta = counter_increase(prev.it_value if same and prev is not None else None, it_value, restart)
        return _StepSample(shape.num_requests_running, shape.itl_sum, shape.itl_count, itl_sum_d, itl_count_d,
                           it_layout, it_value, it_delta)

    def _stage_interval(self, eid: int, t: float, cycle: float, start: float, spec: "_SpecSample",
                        steps: "_StepSample") -> None:
        """The interval's entry in its 5-min chunk and its rollup buckets."""
        batch = int(round(steps.running)) if steps.running is not None else 0  # 0: not a batch size
        it_width = self._width(steps.it_layout) if steps.it_layout else 0
        spec_key = (spec.seg_id, spec.layout_id) if spec.delta is not None else (0, 0)
        chunk = self._open_chunk("i", eid, 0, bucket_of(t, 300), spec_key + (steps.it_layout or 0,))
        chunk.times.append(t)
        chunk.cycles.append(cycle)
        chunk.starts.append(start)
        chunk.itl.append((steps.itl_sum_d or 0.0, steps.itl_count_d or 0.0))
        row = [batch]
        if spec.delta is not None:
            row += spec.delta.tolist()
        if it_width:
            it_row = steps.it_delta if steps.it_delta is not None else np.full(it_width, math.nan)
            row += it_row.tolist()
        chunk.rows.append(row)
        for level in ROLLUP_LEVELS:
            b = bucket_of(t, level)
            ch = chunk_of(b, level)
            if spec.delta is not None:
                self._open_chunk("s", eid, level, ch, (spec.seg_id, spec.layout_id)).add(b, start, t, spec.delta)
            self._open_chunk("t", eid, level, ch, (steps.it_layout or 0,)).add(
                b, steps.itl_sum_d or 0.0, steps.itl_count_d or 0.0, steps.it_delta, batch)

    def _plugin_sample(self, eid: int, prev: _EngineState | None, snap: EngineSnapshot, t: float,
                       spec: "_SpecSample") -> tuple[int | None, np.ndarray | None]:
        """The plugin's counters (layout, value), and their increase beside a spec delta (same
        engine segment, so never across γ)."""
        if snap.plugin is None:
            return None, None
        # EngineSnapshot.plugin is typed object: acceptance.counts cannot import plugin_series, which imports it
        assert isinstance(snap.plugin, plugin_series.PluginEngineCounts)
        columns, values = plugin_series.plugin_columns(snap.plugin)
        if not columns:
            return None, None
        layout = self._layout_id("plugin", columns)
        value = np.array(values, dtype=np.float64)
        if spec.delta is not None and snap.plugin.gamma in (0, spec.gamma):
            assert prev is not None  # an increase is against a previous sample (spec_increase)
            p_delta = self._plugin_delta(prev, spec.restart, layout, value)
            self._open_chunk("p", eid, 0, bucket_of(t, 300), (spec.seg_id, layout)).add(t, p_delta)
            for level in ROLLUP_LEVELS:
                b = bucket_of(t, level)
                self._open_chunk("p", eid, level, chunk_of(b, level), (spec.seg_id, layout)).add(b, p_delta)
        return layout, value

    def _plugin_delta(self, prev: _EngineState, restart: bool, layout: int, value: np.ndarray) -> np.ndarray:
        """The plugin counters' increase since the previous sample (Prometheus ``increase``):
        the new value after a restart, when the previous sample had none, or when one of
        them went down; else new − previous, a column new since then counting whole."""
        if restart or prev.plugin_value is None:
            return value.copy()
        before: np.ndarray
        if prev.plugin_layout_id == layout:
            before = prev.plugin_value
        else:  # the layout grew (a batch bucket or step kind seen for the first time)
            assert prev.plugin_layout_id is not None  # set with plugin_value (_plugin_sample)
            old = dict(zip(self._layouts[prev.plugin_layout_id][1], prev.plugin_value.tolist()))
            columns = self._layouts[layout][1]
            if not set(old) <= set(columns):  # a series vanished: only a restart does that
                return value.copy()
            before = np.array([old.get(col, 0.0) for col in columns])
        return counter_increase(before, value, False)
