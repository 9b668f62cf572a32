"""The embedded store: scrape cycles → snapshots, per-interval deltas, events, rollups.

One SQLite file (WAL, ``synchronous=NORMAL``: a killed process loses at most the cycle it
was writing; the file always reopens). Data flows one way: ``write_cycle`` takes the
``ScrapeResult`` objects of one scrape cycle and, in ONE transaction, stores

* the raw snapshot of every engine (cumulative counters as exposed),
* the DELTA of every engine against its previous snapshot, computed at write time:
    delta = new − previous                      (same γ, counters did not reset)
    delta = new                                 (counter drop or changed ``_created``:
                                                 Prometheus ``increase`` semantics; event
                                                 ``restart``)
  so a delta is never negative and never doubled. A γ change (the position label set
  changed) starts a new engine *segment*; its first delta is the new value when the
  engine restarted, else the straddling interval belongs to neither γ (event
  ``gamma_change_unattributed`` carries the lost D, T, A). Families vanishing → event
  ``spec_off`` (no delta); returning → ``spec_on``, delta = new value. The first
  snapshot ever seen of an engine is a baseline only (what happened before it is not
  observable). A failed scrape is recorded and leaves the previous snapshot as the
  baseline, so the next good scrape's delta covers the gap.
* the step shape: the ``num_requests_running`` sample, ITL sum/count deltas and
  iteration-token bucket deltas (reset on the same signals or on their own drop),
* failures, events, per-target status, and the rollups below.

A delta row covers the interval (previous scrape, this scrape]; windows take the rows
whose END lies in (start, end] — so a window's sums are exact and additive: any window
split at any time t gives two windows whose sums add up to the whole.

Schema choice — packed arrays with a layout table, not one row per series. A row of
``samples`` holds one engine's scrape; its spec-decode counters are one float64 array
whose columns are named by ``layouts`` (e.g. ``drafts, draft_tokens, accepted_tokens,
accepted_per_position:0 .. γ-1`` and optionally ``draft_tokens_per_position:0 .. γ-1``).
The first 3 + γ columns are always the ``SpecCounts.as_vector`` layout [D, T, A, A_1..A_γ],
so readers need no lookup; later series (drafts per position, per-request acceptance
histograms, per-batch-size counts, iteration-token buckets with other bounds) are new
layouts, i.e. new columns, with no schema change. A series table keyed by (engine,
family, labels) would fit too, but costs 4 + γ rows per engine per scrape (≈ 30 M rows a
week for 100 engines at 15 s) where packed arrays cost one, and every window would have to
pivot them back into this layout.

Rollups: per (engine, level ∈ {5 min, 1 h}, bucket, segment, layout) the summed deltas of
the intervals whose end lies in the bucket (b, b + level], plus the step shape per bucket,
maintained at write time by UPSERTs inside the cycle's transaction (so they can never
disagree with the raw rows). A window reads whole buckets inside it and raw rows at its
edges (``acceptance.windows``).

Retention (``retention_s``): raw samples, failures and cycles older than ``retention_s``
are deleted (each engine's newest sample is kept: it is the baseline of the next delta);
rollups and events are kept ``ROLLUP_RETENTION_FACTOR`` times longer, so long windows stay
readable at bucket resolution after the raw rows are gone (their edges are then rounded to
whole buckets). ``write_cycle`` applies retention at most every ``retention_s / 10``
(capped at 1 h), in its own transaction after the cycle's.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, NamedTuple

import numpy as np

from .counts import EngineSnapshot, ScrapeResult, SpecCounts, StepShape

SCHEMA_VERSION = 1
APPLICATION_ID = 0x53504443  # "SPDC": marks the file as a specdec store
ROLLUP_LEVELS = (300, 3600)  # seconds: 5 min and 1 h
ROLLUP_RETENTION_FACTOR = 4
_SQLITE_MAGIC = b"SQLite format 3\x00"
_QUICK_CHECK_MAX_BYTES = 64 << 20  # full quick_check on open only for small files


class StoreError(Exception):
    """The store file cannot be used (message: one line naming the path)."""


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


@dataclass(frozen=True)
class Event:
    """restart | gamma_change | gamma_change_unattributed | spec_off | spec_on |
    target_down | target_up; ``data`` carries numbers (e.g. the lost counts)."""

    time: float
    target: str
    model_name: str | None
    engine: str | None
    kind: str
    detail: str
    data: dict | None = None


# ---------------------------------------------------------------- schema and migrations

_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE targets (
    id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE,
    last_ok_time REAL, last_error TEXT, last_error_time REAL, failing_since REAL);
CREATE TABLE engines (
    id INTEGER PRIMARY KEY, target_id INTEGER NOT NULL REFERENCES targets(id),
    model_name TEXT NOT NULL, engine TEXT NOT NULL, UNIQUE (target_id, model_name, engine));
CREATE TABLE layouts (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, columns TEXT NOT NULL, UNIQUE (kind, columns));
CREATE TABLE segments (
    id INTEGER PRIMARY KEY, engine_id INTEGER NOT NULL, gamma INTEGER NOT NULL,
    first_time REAL NOT NULL);
CREATE TABLE cycles (time REAL PRIMARY KEY, ok INTEGER NOT NULL, failed INTEGER NOT NULL);
CREATE TABLE samples (
    engine_id INTEGER NOT NULL, time REAL NOT NULL, cycle REAL NOT NULL,
    start REAL,              -- the previous scrape: the delta covers (start, time]
    seg_id INTEGER, layout_id INTEGER, created REAL,
    value BLOB,              -- cumulative spec counters (NULL: not speculating)
    delta BLOB,              -- NULL: baseline, spec off, or unattributed
    running REAL, itl_sum REAL, itl_count REAL, itl_sum_delta REAL, itl_count_delta REAL,
    it_layout_id INTEGER, it_value BLOB, it_delta BLOB,
    PRIMARY KEY (engine_id, time)) WITHOUT ROWID;
CREATE TABLE failures (
    target_id INTEGER NOT NULL, time REAL NOT NULL, error TEXT NOT NULL,
    PRIMARY KEY (target_id, time)) WITHOUT ROWID;
CREATE TABLE events (
    id INTEGER PRIMARY KEY, time REAL NOT NULL, target_id INTEGER NOT NULL,
    engine_id INTEGER, kind TEXT NOT NULL, detail TEXT NOT NULL, data TEXT);
CREATE INDEX events_by_target_time ON events (target_id, time);
CREATE TABLE spec_rollups (
    engine_id INTEGER NOT NULL, level INTEGER NOT NULL, bucket REAL NOT NULL,
    seg_id INTEGER NOT NULL, layout_id INTEGER NOT NULL, delta BLOB NOT NULL,
    intervals INTEGER NOT NULL, first_start REAL NOT NULL, last_end REAL NOT NULL,
    PRIMARY KEY (engine_id, level, bucket, seg_id, layout_id)) WITHOUT ROWID;
CREATE TABLE step_rollups (
    engine_id INTEGER NOT NULL, level INTEGER NOT NULL, bucket REAL NOT NULL,
    it_layout_id INTEGER NOT NULL,          -- 0: no iteration-token histogram
    it_delta BLOB, itl_sum REAL NOT NULL, itl_count REAL NOT NULL,
    running TEXT NOT NULL,                  -- JSON {batch size: samples}
    PRIMARY KEY (engine_id, level, bucket, it_layout_id)) WITHOUT ROWID;
"""

# version → statements that bring a store from version − 1 to it.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}


# ---------------------------------------------------------------- SQL helper functions

def _blob_add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return (np.frombuffer(a) + np.frombuffer(b)).tobytes()


def _hist_merge(a, b):
    ha, hb = json.loads(a), json.loads(b)
    for k, v in hb.items():
        ha[k] = ha.get(k, 0) + v
    return json.dumps(ha, separators=(",", ":"))


def _pack(v: np.ndarray | None) -> bytes | None:
    return None if v is None else np.ascontiguousarray(v, dtype=np.float64).tobytes()


def _unpack(b: bytes | None) -> np.ndarray | None:
    return None if b is None else np.frombuffer(b, dtype=np.float64)


def bucket_of(t: float, level: int) -> float:
    """The rollup bucket b holding an interval that ends at t: t ∈ (b, b + level]."""
    return float((math.ceil(t / level) - 1) * level)


# ---------------------------------------------------------------- in-memory engine state

@dataclass
class _EngineState:
    """What the next delta of an engine is computed against: its newest sample."""

    engine_id: int
    time: float
    seg_id: int | None
    gamma: int
    layout_id: int | None
    created: float | None
    value: np.ndarray | None
    itl_sum: float | None
    itl_count: float | None
    it_layout_id: int | None
    it_value: np.ndarray | None


@dataclass
class _TargetState:
    target_id: int
    last_ok_time: float | None
    last_error: str | None
    last_error_time: float | None
    failing_since: float | None


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
            raise ValueError(f"{where}: spec-decode counters without any position series")
        vals = list(c.as_vector()) + list(c.draft_tokens_per_position or ())
        if c.draft_tokens_per_position is not None and len(c.draft_tokens_per_position) != c.gamma:
            raise ValueError(f"{where}: draft_tokens_per_position has {len(c.draft_tokens_per_position)} entries for gamma {c.gamma}")
        for x in vals:
            if not (isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(x) and x >= 0):
                raise ValueError(f"{where}: counter value {x!r} is not a finite non-negative number")
    s = snap.step_shape
    if s is not None:
        for name, x in (("num_requests_running", s.num_requests_running), ("itl_sum", s.itl_sum), ("itl_count", s.itl_count)):
            if x is not None and not (math.isfinite(x) and x >= 0):
                raise ValueError(f"{where}: {name} {x!r} is not a finite non-negative number")
        for le, x in s.iteration_tokens.items():
            if not (math.isfinite(x) and x >= 0) or math.isnan(le):
                raise ValueError(f"{where}: iteration_tokens bucket le={le!r} value {x!r} is invalid")


# ---------------------------------------------------------------- the store

class Store:
    """The SQLite store. Open with ``Store.open(path)``; a context manager."""

    def __init__(self, conn: sqlite3.Connection, path: Path, retention_s: float | None):
        self._conn = conn
        self.path = path
        self.retention_s = retention_s
        self._last_retention: float | None = None
        self._load_state()

    # -------------------------------------------------------------- open / close

    @classmethod
    def open(cls, path: str | Path, *, retention_s: float | None = None) -> "Store":
        """Create or open the store at ``path`` (StoreError when it cannot be used)."""
        path = Path(path)
        if retention_s is not None and not (math.isfinite(retention_s) and retention_s > 0):
            raise ValueError(f"retention {retention_s!r} must be a positive number of seconds")
        _check_file(path)
        try:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open store {path}: {e}") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.create_function("specdec_blob_add", 2, _blob_add, deterministic=True)
            conn.create_function("specdec_hist_merge", 2, _hist_merge, deterministic=True)
            _migrate(conn, path)
            return cls(conn, path, retention_s)
        except StoreError:
            conn.close()
            raise
        except sqlite3.Error as e:
            conn.close()
            raise StoreError(f"store {path} is corrupt: {e}") from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"store {self.path} is closed")
        return self._conn

    # -------------------------------------------------------------- cached identities

    def _load_state(self) -> None:
        """(Re)load ids and each engine's newest sample: after open and after a rollback."""
        c = self.conn
        self._target_ids: dict[str, int] = {}
        self._targets: dict[int, _TargetState] = {}
        self._target_urls: dict[int, str] = {}
        for tid, url, ok_t, err, err_t, since in c.execute(
            "SELECT id, url, last_ok_time, last_error, last_error_time, failing_since FROM targets"
        ):
            self._target_ids[url] = tid
            self._target_urls[tid] = url
            self._targets[tid] = _TargetState(tid, ok_t, err, err_t, since)
        self._engine_ids: dict[tuple[int, str, str], int] = {}
        self._engine_refs: dict[int, EngineRef] = {}
        for eid, tid, model, eng in c.execute("SELECT id, target_id, model_name, engine FROM engines"):
            self._engine_ids[(tid, model, eng)] = eid
            self._engine_refs[eid] = EngineRef(self._target_urls[tid], model, eng)
        self._layout_ids: dict[tuple[str, str], int] = {}
        self._layouts: dict[int, tuple[str, list]] = {}
        for lid, kind, cols in c.execute("SELECT id, kind, columns FROM layouts"):
            self._layout_ids[(kind, cols)] = lid
            self._layouts[lid] = (kind, json.loads(cols))
        self._segment_gamma: dict[int, int] = dict(c.execute("SELECT id, gamma FROM segments"))
        self._engines: dict[int, _EngineState] = {}
        for eid in self._engine_refs:
            row = c.execute(
                "SELECT time, seg_id, layout_id, created, value, itl_sum, itl_count, it_layout_id, it_value "
                "FROM samples WHERE engine_id = ? ORDER BY time DESC LIMIT 1", (eid,)).fetchone()
            if row is None:
                continue
            t, seg, lay, created, value, itl_s, itl_c, it_lay, it_val = row
            self._engines[eid] = _EngineState(
                eid, t, seg, self._segment_gamma.get(seg, 0) if seg is not None else 0, lay, created,
                _unpack(value), itl_s, itl_c, it_lay, _unpack(it_val))

    def _target_id(self, url: str) -> int:
        tid = self._target_ids.get(url)
        if tid is None:
            tid = self.conn.execute("INSERT INTO targets (url) VALUES (?)", (url,)).lastrowid
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
            self._engine_ids[key] = eid
            self._engine_refs[eid] = EngineRef(self._target_urls[tid], model, eng)
        return eid

    def _layout_id(self, kind: str, columns: list) -> int:
        text = json.dumps(columns, separators=(",", ":"))
        lid = self._layout_ids.get((kind, text))
        if lid is None:
            lid = self.conn.execute("INSERT INTO layouts (kind, columns) VALUES (?, ?)", (kind, text)).lastrowid
            self._layout_ids[(kind, text)] = lid
            self._layouts[lid] = (kind, list(columns))
        return lid

    def _new_segment(self, eid: int, gamma: int, t: float) -> int:
        sid = self.conn.execute(
            "INSERT INTO segments (engine_id, gamma, first_time) VALUES (?, ?, ?)", (eid, gamma, t)).lastrowid
        self._segment_gamma[sid] = gamma
        return sid

    # -------------------------------------------------------------- writing

    def write_cycle(self, results: list[ScrapeResult]) -> None:
        """Store one scrape cycle (snapshots, deltas, failures, events, rollups) atomically.

        Bad input raises ValueError (one line naming the target) and nothing of the cycle
        is stored; what was stored before is untouched.
        """
        results = list(results)
        if not results:
            return
        seen: set[str] = set()
        for r in results:
            if not isinstance(r, ScrapeResult):
                raise ValueError(f"write_cycle expects ScrapeResult objects, got {type(r).__name__}")
            if not math.isfinite(r.time):
                raise ValueError(f"scrape of {r.target} has time {r.time!r}")
            if r.target in seen:
                raise ValueError(f"target {r.target} appears twice in one cycle")
            seen.add(r.target)
            keys = [e.key for e in r.engines]
            if len(set(keys)) != len(keys):
                raise ValueError(f"scrape of {r.target} lists an engine twice")
            for e in r.engines:
                _validate_snapshot(r.target, e)
        cycle = max(r.time for r in results)
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            staged = self._write_cycle_rows(results, cycle)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            self._load_state()  # ids, segments and baselines created in the cycle are gone
            raise
        self._engines.update(staged)
        if self.retention_s is not None:
            every = min(self.retention_s / 10.0, 3600.0)
            if self._last_retention is None or cycle - self._last_retention >= every:
                self.apply_retention(cycle)

    def _write_cycle_rows(self, results: list[ScrapeResult], cycle: float) -> dict[int, _EngineState]:
        c = self.conn
        samples, spec_roll, step_roll, events, failures, target_rows = [], [], [], [], [], []
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
                for snap in r.engines:
                    eid = self._engine_id(tid, snap.model_name, snap.engine)
                    prev = self._engines.get(eid)
                    if prev is not None and r.time <= prev.time:
                        raise ValueError(
                            f"scrape of {r.target} at {r.time} is not after its previous scrape at {prev.time}")
                    state = self._engine_sample(eid, prev, snap, r.time, cycle, samples, spec_roll, step_roll, events)
                    staged[eid] = state
            self._targets[tid] = new_ts
            target_rows.append((new_ts.last_ok_time, new_ts.last_error, new_ts.last_error_time,
                                new_ts.failing_since, tid))
        c.execute("INSERT INTO cycles (time, ok, failed) VALUES (?, ?, ?) "
                  "ON CONFLICT (time) DO UPDATE SET ok = ok + excluded.ok, failed = failed + excluded.failed",
                  (cycle, len(results) - n_failed, n_failed))
        c.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", samples)
        c.executemany(
            "INSERT INTO spec_rollups VALUES (?,?,?,?,?,?,1,?,?) ON CONFLICT DO UPDATE SET "
            "delta = specdec_blob_add(delta, excluded.delta), intervals = intervals + 1, "
            "first_start = min(first_start, excluded.first_start), last_end = max(last_end, excluded.last_end)",
            spec_roll)
        c.executemany(
            "INSERT INTO step_rollups VALUES (?,?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET "
            "it_delta = specdec_blob_add(it_delta, excluded.it_delta), itl_sum = itl_sum + excluded.itl_sum, "
            "itl_count = itl_count + excluded.itl_count, running = specdec_hist_merge(running, excluded.running)",
            step_roll)
        c.executemany("INSERT INTO failures VALUES (?, ?, ?)", failures)
        c.executemany(
            "INSERT INTO events (time, target_id, engine_id, kind, detail, data) VALUES (?,?,?,?,?,?)", events)
        c.executemany(
            "UPDATE targets SET last_ok_time = ?, last_error = ?, last_error_time = ?, failing_since = ? "
            "WHERE id = ?", target_rows)
        return staged

    def _engine_sample(self, eid, prev: _EngineState | None, snap: EngineSnapshot, t: float, cycle: float,
                       samples, spec_roll, step_roll, events) -> _EngineState:
        """Compute one engine's delta and events against its previous sample (see module doc)."""
        tid = self._target_ids[self._engine_refs[eid].target]
        counts = snap.counts
        restart = False
        value = delta = None
        seg_id = layout_id = None
        gamma = 0

        def event(kind, detail, data=None):
            events.append((t, tid, eid, kind, detail, None if data is None else json.dumps(data)))

        if counts is not None:
            gamma = counts.gamma
            dtpp = counts.draft_tokens_per_position
            value = np.array(counts.as_vector() + (list(dtpp) if dtpp is not None else []), dtype=np.float64)
            layout_id = self._layout_id("spec", _spec_columns(gamma, dtpp is not None))
            if prev is None:
                seg_id = self._new_segment(eid, gamma, t)  # first sighting: a baseline only
            elif prev.value is None:
                seg_id = self._new_segment(eid, gamma, t)
                delta = value.copy()
                event("spec_on", f"speculation on, gamma {gamma}")
            else:
                created_changed = (snap.created is not None and prev.created is not None
                                   and snap.created != prev.created)
                k = 3 + min(gamma, prev.gamma)
                common_prev = np.concatenate([prev.value[:3], prev.value[3:3 + min(gamma, prev.gamma)]])
                common_new = np.concatenate([value[:3], value[3:3 + min(gamma, prev.gamma)]])
                dropped = bool(np.any(common_new < common_prev))
                restart = created_changed or dropped
                if restart:
                    why = "_created changed" if created_changed else "a counter went down"
                    event("restart", f"engine restarted ({why})")
                if gamma != prev.gamma:
                    seg_id = self._new_segment(eid, gamma, t)
                    if restart:
                        delta = value.copy()
                        event("gamma_change", f"gamma {prev.gamma} -> {gamma}")
                    else:
                        lost = (common_new - common_prev)[:3]
                        event("gamma_change_unattributed",
                              f"gamma {prev.gamma} -> {gamma} without a restart: the interval is attributed to "
                              f"neither gamma", {"from_gamma": prev.gamma, "to_gamma": gamma,
                                                 "drafts": float(lost[0]), "draft_tokens": float(lost[1]),
                                                 "accepted_tokens": float(lost[2])})
                else:
                    seg_id = prev.seg_id
                    if restart:
                        delta = value.copy()
                    else:
                        n = 3 + gamma
                        delta = np.full(len(value), np.nan)
                        delta[:n] = value[:n] - prev.value[:n]
                        if len(value) > n and len(prev.value) == len(value):
                            delta[n:] = value[n:] - prev.value[n:]
                        # extra columns the previous sample lacked stay NaN: unknown for this interval
                del k
        elif prev is not None and prev.value is not None:
            event("spec_off", "speculation off: the spec-decode families vanished")

        # step shape: reset on the engine's restart or on its own counters going down
        shape = snap.step_shape or StepShape()
        itl_sum, itl_count = shape.itl_sum, shape.itl_count
        itl_sum_d = itl_count_d = None
        if itl_sum is not None and itl_count is not None:
            if prev is not None and prev.itl_sum is not None and prev.itl_count is not None:
                if restart or itl_sum < prev.itl_sum or itl_count < prev.itl_count:
                    itl_sum_d, itl_count_d = itl_sum, itl_count
                else:
                    itl_sum_d, itl_count_d = itl_sum - prev.itl_sum, itl_count - prev.itl_count
            elif prev is not None and restart:
                itl_sum_d, itl_count_d = itl_sum, itl_count
        it_layout = it_value = it_delta = None
        if shape.iteration_tokens:
            bounds = sorted(shape.iteration_tokens)
            it_layout = self._layout_id("iteration_tokens", [_le_name(b) for b in bounds])
            it_value = np.array([shape.iteration_tokens[b] for b in bounds], dtype=np.float64)
            if prev is not None and prev.it_value is not None and prev.it_layout_id == it_layout:
                if restart or bool(np.any(it_value < prev.it_value)):
                    it_delta = it_value.copy()
                else:
                    it_delta = it_value - prev.it_value
            elif prev is not None and restart:
                it_delta = it_value.copy()
        running = shape.num_requests_running

        start = prev.time if prev is not None else None
        samples.append((eid, t, cycle, start, seg_id, layout_id, snap.created, _pack(value), _pack(delta),
                        running, itl_sum, itl_count, itl_sum_d, itl_count_d, it_layout, _pack(it_value),
                        _pack(it_delta)))
        if delta is not None or running is not None or itl_sum_d is not None or it_delta is not None:
            hist = json.dumps({str(int(round(running))): 1}) if running is not None else "{}"
            for level in ROLLUP_LEVELS:
                b = bucket_of(t, level)
                if delta is not None:
                    spec_roll.append((eid, level, b, seg_id, layout_id, _pack(delta), start, t))
                step_roll.append((eid, level, b, it_layout or 0, _pack(it_delta), itl_sum_d or 0.0,
                                  itl_count_d or 0.0, hist))
        return _EngineState(eid, t, seg_id, gamma, layout_id, snap.created, value, itl_sum, itl_count,
                            it_layout, it_value)

    # -------------------------------------------------------------- bulk load (benchmarks, tests)

    def bulk_load_history(self, target: str, model_name: str, engine: str, times, cumulative, *,
                          running=None, itl_sum=None, itl_count=None) -> None:
        """Load a new engine's whole history at one γ without restarts, fast (one transaction).

        ``times`` (n,) increasing; ``cumulative`` (n, 3 + γ) non-decreasing counters in the
        [D, T, A, A_1..A_γ] layout; optional step-shape arrays (n,). Each scrape is its own
        cycle time. Deltas and rollups are what ``write_cycle`` would have stored.
        """
        times = np.asarray(times, dtype=np.float64)
        cum = np.asarray(cumulative, dtype=np.float64)
        n = len(times)
        if cum.ndim != 2 or cum.shape[0] != n or cum.shape[1] < 4 or n < 1:
            raise ValueError(f"bulk history of {target}: cumulative must be (n, 3 + gamma), got {cum.shape}")
        if np.any(np.diff(times) <= 0) or np.any(np.diff(cum, axis=0) < 0):
            raise ValueError(f"bulk history of {target}: times must increase and counters never go down")
        gamma = cum.shape[1] - 3
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            tid = self._target_id(target)
            eid = self._engine_id(tid, model_name, engine)
            if eid in self._engines:
                raise ValueError(f"bulk history of {target}: engine {model_name}/{engine} already has samples")
            seg = self._new_segment(eid, gamma, float(times[0]))
            lay = self._layout_id("spec", _spec_columns(gamma, False))
            delta = np.diff(cum, axis=0)
            run = np.asarray(running, dtype=np.float64) if running is not None else None
            isum = np.asarray(itl_sum, dtype=np.float64) if itl_sum is not None else None
            icnt = np.asarray(itl_count, dtype=np.float64) if itl_count is not None else None
            isum_d = np.diff(isum) if isum is not None else None
            icnt_d = np.diff(icnt) if icnt is not None else None
            vb = cum.tobytes()
            db = delta.tobytes()
            w = cum.shape[1] * 8
            rows = []
            for i in range(n):
                rows.append((
                    eid, times[i].item(), times[i].item(), times[i - 1].item() if i else None, seg, lay, None,
                    vb[i * w:(i + 1) * w], db[(i - 1) * w:i * w] if i else None,
                    run[i].item() if run is not None else None,
                    isum[i].item() if isum is not None else None, icnt[i].item() if icnt is not None else None,
                    isum_d[i - 1].item() if (isum_d is not None and i) else None,
                    icnt_d[i - 1].item() if (icnt_d is not None and i) else None, None, None, None))
            c.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            c.executemany("INSERT INTO cycles VALUES (?, 1, 0) ON CONFLICT (time) DO UPDATE SET ok = ok + 1",
                          [(t,) for t in times.tolist()])
            end = times[1:]
            for level in ROLLUP_LEVELS:
                buckets = (np.ceil(end / level) - 1) * level
                cut = np.flatnonzero(np.diff(buckets)) + 1
                starts = np.concatenate([[0], cut])
                sums = np.add.reduceat(delta, starts, axis=0) if len(end) else np.zeros((0, cum.shape[1]))
                counts = np.diff(np.concatenate([starts, [len(end)]]))
                c.executemany("INSERT INTO spec_rollups VALUES (?,?,?,?,?,?,?,?,?)", [
                    (eid, level, buckets[s].item(), seg, lay, sums[j].tobytes(), int(counts[j]),
                     times[s].item(), end[s + counts[j] - 1].item()) for j, s in enumerate(starts[:len(sums)])])
                srows = []
                all_b = (np.ceil(times / level) - 1) * level  # gauge samples: every scrape
                for b in np.unique(all_b):
                    m = all_b == b
                    hist: dict[str, int] = {}
                    if run is not None:
                        vals, cnt = np.unique(np.round(run[m]).astype(int), return_counts=True)
                        hist = {str(v): int(k) for v, k in zip(vals, cnt)}
                    md = m[1:]
                    srows.append((eid, level, b.item(), 0, None,
                                  float(isum_d[md].sum()) if isum_d is not None else 0.0,
                                  float(icnt_d[md].sum()) if icnt_d is not None else 0.0,
                                  json.dumps(hist, separators=(",", ":"))))
                c.executemany("INSERT INTO step_rollups VALUES (?,?,?,?,?,?,?,?)", srows)
            ts = self._targets[tid]
            ts.last_ok_time = max(ts.last_ok_time or -math.inf, float(times[-1]))
            c.execute("UPDATE targets SET last_ok_time = ? WHERE id = ?", (ts.last_ok_time, tid))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            self._load_state()
            raise
        self._engines[eid] = _EngineState(eid, float(times[-1]), seg, gamma, lay, None, cum[-1].copy(),
                                          float(isum[-1]) if isum is not None else None,
                                          float(icnt[-1]) if icnt is not None else None, None, None)

    # -------------------------------------------------------------- retention

    def apply_retention(self, now: float) -> None:
        """Delete raw samples, failures and cycles older than ``now − retention_s`` (each
        engine's newest sample stays: the next delta's baseline); rollups and events older
        than ``now − ROLLUP_RETENTION_FACTOR · retention_s``. No-op without a retention."""
        self._last_retention = now
        if self.retention_s is None:
            return
        raw_cut = now - self.retention_s
        roll_cut = now - ROLLUP_RETENTION_FACTOR * self.retention_s
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            for eid in self._engine_refs:
                newest = self._engines[eid].time if eid in self._engines else math.inf
                c.execute("DELETE FROM samples WHERE engine_id = ? AND time < ? AND time < ?",
                          (eid, raw_cut, newest))
                for table in ("spec_rollups", "step_rollups"):
                    for level in ROLLUP_LEVELS:
                        # a bucket goes once all of it is older than the cut
                        c.execute(f"DELETE FROM {table} WHERE engine_id = ? AND level = ? AND bucket + ? < ?",
                                  (eid, level, level, roll_cut))
            for tid in self._targets:
                c.execute("DELETE FROM failures WHERE target_id = ? AND time < ?", (tid, raw_cut))
            c.execute("DELETE FROM cycles WHERE time < ?", (raw_cut,))
            c.execute("DELETE FROM events WHERE time < ?", (roll_cut,))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('raw_from', ?)", (repr(raw_cut),))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    # -------------------------------------------------------------- reading

    def raw_from(self) -> float | None:
        """Raw rows before this time were deleted by retention (None: none were)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'raw_from'").fetchone()
        return None if row is None else float(row[0])

    def latest_time(self) -> float | None:
        """The time of the newest stored scrape cycle (None for an empty store)."""
        return self.conn.execute("SELECT MAX(time) FROM cycles").fetchone()[0]

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

    def layout_columns(self, layout_id: int) -> list:
        return self._layouts[layout_id][1]

    def raw_rows(self, engine_id: int, lo: float, hi: float) -> list[tuple]:
        """Samples of an engine with time in (lo, hi]: (time, cycle, start, seg_id, delta,
        running, itl_sum_delta, itl_count_delta, it_layout_id, it_delta), oldest first."""
        return self.conn.execute(
            "SELECT time, cycle, start, seg_id, delta, running, itl_sum_delta, itl_count_delta, it_layout_id, "
            "it_delta FROM samples WHERE engine_id = ? AND time > ? AND time <= ? ORDER BY time",
            (engine_id, lo, hi)).fetchall()

    def spec_rollup_rows(self, engine_id: int, level: int, b_lo: float, b_hi: float) -> list[tuple]:
        """(bucket, seg_id, delta, intervals, first_start, last_end) for buckets b_lo ≤ b < b_hi."""
        return self.conn.execute(
            "SELECT bucket, seg_id, delta, intervals, first_start, last_end FROM spec_rollups "
            "WHERE engine_id = ? AND level = ? AND bucket >= ? AND bucket < ?",
            (engine_id, level, b_lo, b_hi)).fetchall()

    def step_rollup_rows(self, engine_id: int, level: int, b_lo: float, b_hi: float) -> list[tuple]:
        """(it_layout_id, it_delta, itl_sum, itl_count, running JSON) for buckets b_lo ≤ b < b_hi."""
        return self.conn.execute(
            "SELECT it_layout_id, it_delta, itl_sum, itl_count, running FROM step_rollups "
            "WHERE engine_id = ? AND level = ? AND bucket >= ? AND bucket < ?",
            (engine_id, level, b_lo, b_hi)).fetchall()

    def is_speculating(self, engine_id: int, at: float) -> bool | None:
        """Whether the engine's newest sample at or before ``at`` had spec-decode counters."""
        row = self.conn.execute("SELECT value IS NOT NULL FROM samples WHERE engine_id = ? AND time <= ? "
                                "ORDER BY time DESC LIMIT 1", (engine_id, at)).fetchone()
        return None if row is None else bool(row[0])


def _le_name(le: float) -> str:
    return "+Inf" if math.isinf(le) else repr(float(le))


def le_value(name: str) -> float:
    return math.inf if name == "+Inf" else float(name)


def _check_file(path: Path) -> None:
    """Reject, before SQLite touches it, a file that is not (or no longer) an SQLite store."""
    if not path.exists():
        if not path.parent.exists():
            raise StoreError(f"cannot create store {path}: directory {path.parent} does not exist")
        return
    if path.is_dir():
        raise StoreError(f"store {path} is a directory")
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = path.stat().st_size
    except OSError as e:
        raise StoreError(f"store {path} is unreadable: {e.strerror}") from None
    if size == 0:
        return
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path} is not a specdec store (not an SQLite database)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    change_counter = int.from_bytes(header[24:28], "big")
    pages = int.from_bytes(header[28:32], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    if pages and valid_for == change_counter and size < pages * page_size:
        raise StoreError(f"store {path} is corrupt: truncated ({size} bytes, header says {pages * page_size})")


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if not tables:
        version = 0
    elif "meta" not in tables or app_id != APPLICATION_ID:
        raise StoreError(f"{path} is not a specdec store (an SQLite database of something else)")
    else:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            raise StoreError(f"{path} is not a specdec store (no schema_version)")
        try:
            version = int(row[0])
        except ValueError:
            raise StoreError(f"store {path} is corrupt: schema_version {row[0]!r}") from None
    if version > SCHEMA_VERSION:
        raise StoreError(f"store {path} has schema version {version}, newer than this specdec "
                         f"({SCHEMA_VERSION}): upgrade specdec")
    if version < SCHEMA_VERSION:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in _MIGRATIONS[v].split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(v),))
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    # touch every table so that damage shows now, not in the middle of a collect loop
    if path.exists() and path.stat().st_size <= _QUICK_CHECK_MAX_BYTES:
        res = conn.execute("PRAGMA quick_check").fetchone()[0]
        if res != "ok":
            raise StoreError(f"store {path} is corrupt: {res.splitlines()[0]}")
    else:
        for t in ("targets", "engines", "layouts", "segments", "samples", "spec_rollups", "step_rollups", "events"):
            conn.execute(f"SELECT * FROM {t} LIMIT 1").fetchall()
