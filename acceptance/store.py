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
  changed) starts a new engine *segment*; vLLM fixes γ at engine start, so it is a
  restart too and its first delta is the new value (events ``restart`` and
  ``gamma_change``), even when no counter went down. Families vanishing → event
  ``spec_off`` (no delta); returning → ``spec_on``, delta = new value. The first
  snapshot ever seen of an engine is a baseline only (what happened before it is not
  observable). A failed scrape is recorded and leaves the previous snapshot as the
  baseline, so the next good scrape's delta covers the gap.
* the step shape: the ``num_requests_running`` sample, ITL sum/count deltas and
  iteration-token bucket deltas (reset on the same signals or on their own drop),
* failures, events, per-target status, and the rollups below;
* the specdec vLLM plugin's counters when the engine exports them (schema 3,
  ``acceptance.plugin_series``): the cumulative vector per scrape in ``plugin_samples``
  (columns named by a ``plugin`` layout: drafts / accepted / reached per batch bucket and
  position, steps per shape, tokens and fit), and its delta in ``plugin_chunks``. The
  delta follows the spec counters' rules — the new value itself after a restart (a spec
  counter or a plugin counter went down, or ``_created`` changed) or when the previous
  sample had no plugin series; a series new since the previous sample counts whole — and
  is stored only for intervals that have a spec delta, under the same engine segment, so
  plugin counts are never attributed across γ either.

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

Reading layout — chunks, so that a week reads in milliseconds. ``samples`` is the record
of what was scraped (and each engine's baseline); windows never read it. They read chunk
rows, each holding packed arrays for one engine over one span (``CHUNK_SPANS``):

* ``interval_chunks`` (level 0): every sample of an engine in a 5-min chunk (time ∈
  (c, c + 300]) with one (segment, layout, it layout) key: times, cycles, starts, ITL
  deltas, and a count matrix [batch size, delta (W), iteration-token delta] stored in the
  narrowest exact type (uint8/16/32, float64 for fractions or NaN). Derivable arrays
  (cycles = times, start[i] = time[i − 1], zero ITL) are NULL. An hour of a route's
  engines is ~13 rows per engine instead of 240.
* ``spec_rollups`` / ``step_rollups``: per (engine, level ∈ {5 min, 1 h}, chunk of 1 h /
  1 day, segment, layout) the buckets (b, b + level] of the chunk with their summed
  deltas, interval counts, first start and last end; the step shape per bucket (ITL sums,
  iteration-token deltas, batch mix as (bucket, batch size, samples) triples).

Chunks are maintained at write time inside the cycle's transaction (so they can never
disagree with ``samples``): the open chunks of each engine are kept in memory and written
back by rowid (rowid tables: chunk rows of a few KiB would spill into overflow pages in a
WITHOUT ROWID b-tree). A window reads whole buckets inside it and scrape intervals at its
edges (``acceptance.windows``), one query per level for all the route's engines.

``plugin_chunks`` holds the plugin deltas in the same plan, one table for every level:
level 0 rows hold a 5-min chunk of an engine's scrape intervals (keyed by interval end),
levels 300 / 3600 the summed buckets of an hour / a day; per (engine segment, plugin
layout), the (n, W) deltas in the narrowest exact type, zlib-compressed (most of a
plugin vector is zero in any one interval: ~150 columns per engine at γ = 3). Windows
only need their sums, so rows carry no interval starts.

Retention (``retention_s``): raw samples, failures and cycles older than ``retention_s``
and chunk entries are deleted (each engine's newest sample is kept: it is the baseline of
the next delta); rollups and events are kept ``ROLLUP_RETENTION_FACTOR`` times longer, so
long windows stay readable at bucket resolution after the raw rows are gone (their edges are then rounded to
whole buckets). ``write_cycle`` applies retention at most every ``retention_s / 10``
(capped at 1 h), in its own transaction after the cycle's.
"""

from __future__ import annotations

from contextlib import contextmanager

import json
import math
import sqlite3
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, NamedTuple

import numpy as np

from . import plugin_series
from .counts import EngineSnapshot, IntervalCounts, ScrapeResult, SpecCounts, StepShape

SCHEMA_VERSION = 5
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
    """restart | gamma_change | spec_off | spec_on |
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
    engine_id INTEGER NOT NULL, time REAL NOT NULL,
    seg_id INTEGER, layout_id INTEGER, created REAL,
    value BLOB,              -- cumulative spec counters (NULL: not speculating)
    delta BLOB,              -- NULL: baseline or spec off
    running REAL, itl_sum REAL, itl_count REAL, it_layout_id INTEGER, it_value BLOB,
    PRIMARY KEY (engine_id, time)) WITHOUT ROWID;
-- Chunk tables are rowid tables: their rows (up to a few KiB) would spill into overflow
-- pages in a WITHOUT ROWID b-tree.
CREATE TABLE interval_chunks (           -- what windows read at scrape resolution
    engine_id INTEGER NOT NULL, chunk REAL NOT NULL,   -- samples with time in (chunk, chunk + 300]
    seg_id INTEGER NOT NULL, layout_id INTEGER NOT NULL,  -- 0, 0: samples without a spec delta
    it_layout_id INTEGER NOT NULL,       -- 0: no iteration-token histogram
    n INTEGER NOT NULL, code INTEGER NOT NULL,  -- entries, dtype of `counts` (1, 2, 4: uint, 8: float64)
    times BLOB NOT NULL,                 -- float64 (n): sample times = interval ends
    cycles BLOB,                         -- float64 (n), NULL: equal to times
    first_start REAL,                    -- start of the first interval
    starts BLOB,                         -- float64 (n), NULL: start[i] = times[i - 1]
    counts BLOB NOT NULL,                -- (n, 1 + W + W_it): batch size, delta, it delta
    itl BLOB,                            -- float64 (n, 2) ITL sum and count deltas, NULL: all zero
    UNIQUE (engine_id, chunk, seg_id, layout_id, it_layout_id));
CREATE TABLE failures (
    target_id INTEGER NOT NULL, time REAL NOT NULL, error TEXT NOT NULL,
    PRIMARY KEY (target_id, time)) WITHOUT ROWID;
CREATE TABLE events (
    id INTEGER PRIMARY KEY, time REAL NOT NULL, target_id INTEGER NOT NULL,
    engine_id INTEGER, kind TEXT NOT NULL, detail TEXT NOT NULL, data TEXT);
CREATE INDEX events_by_target_time ON events (target_id, time);
CREATE TABLE spec_rollups (              -- float64 arrays over the n buckets of one chunk
    engine_id INTEGER NOT NULL, level INTEGER NOT NULL, chunk REAL NOT NULL,
    seg_id INTEGER NOT NULL, layout_id INTEGER NOT NULL, n INTEGER NOT NULL,
    buckets BLOB NOT NULL, intervals BLOB NOT NULL, first_start BLOB NOT NULL, last_end BLOB NOT NULL,
    delta BLOB NOT NULL,                 -- (n, W)
    UNIQUE (engine_id, level, chunk, seg_id, layout_id));
CREATE TABLE step_rollups (
    engine_id INTEGER NOT NULL, level INTEGER NOT NULL, chunk REAL NOT NULL,
    it_layout_id INTEGER NOT NULL,       -- 0: no iteration-token histogram
    n INTEGER NOT NULL, buckets BLOB NOT NULL,
    itl BLOB NOT NULL,                   -- (n, 2): ITL sum, ITL count
    it_delta BLOB,                       -- (n, W_it)
    mix_code INTEGER NOT NULL,           -- dtype of batch_mix
    batch_mix BLOB NOT NULL,             -- (k, 3): bucket index in the chunk, batch size >= 1, samples
    UNIQUE (engine_id, level, chunk, it_layout_id));
"""

# Version 2: counts that `specdec ingest` brings from per-request metrics and log lines —
# one row per request (or per logged interval) at its own γ, deduplicated by a key (the
# request id, or engine + time for a log line) so ingesting a file twice adds nothing.
_SCHEMA_V2 = """
CREATE TABLE ingested (
    id INTEGER PRIMARY KEY,
    route TEXT NOT NULL, source TEXT NOT NULL,     -- 'per-request' | 'log'
    time REAL NOT NULL, gamma INTEGER NOT NULL,
    counts BLOB NOT NULL,                          -- float64 [D, T, A, A_1..A_γ]
    draft_per_pos BLOB,                            -- float64 (γ): drafts that reached position k
    estimated INTEGER NOT NULL DEFAULT 0,          -- log: drafts recovered from rounded fields
    key TEXT NOT NULL,
    UNIQUE (route, source, key));
CREATE INDEX ingested_by_route_time ON ingested (route, source, time);
"""

# Version 3: the specdec vLLM plugin's series (acceptance.plugin_series), see the module doc.
_SCHEMA_V3 = """
CREATE TABLE plugin_samples (            -- plugin counters as exposed (cumulative)
    engine_id INTEGER NOT NULL, time REAL NOT NULL, layout_id INTEGER NOT NULL,
    value BLOB NOT NULL,                 -- float64 (W) in the layout's columns
    PRIMARY KEY (engine_id, time)) WITHOUT ROWID;
CREATE TABLE plugin_chunks (             -- plugin deltas: scrape intervals (level 0) and rollup buckets
    engine_id INTEGER NOT NULL, level INTEGER NOT NULL, chunk REAL NOT NULL,
    seg_id INTEGER NOT NULL, layout_id INTEGER NOT NULL, n INTEGER NOT NULL,
    keys BLOB NOT NULL,                  -- float64 (n): interval ends (level 0) or bucket starts
    code INTEGER NOT NULL,               -- dtype of `delta` (1, 2, 4: uint, 8: float64)
    delta BLOB NOT NULL,                 -- zlib of (n, W)
    UNIQUE (engine_id, level, chunk, seg_id, layout_id));
"""

# Version 4: a request's mean inter-token latency (vLLM's per-request `mean_itl_ms`), so a
# per-request route can compare the model's tok/s at the deployed γ with the observed.
_SCHEMA_V4 = """
ALTER TABLE ingested ADD COLUMN mean_itl_s REAL;
"""

# Version 5: a request's decode tokens (output tokens − 1), so the steps that carried no
# draft (an ngram drafter without a match) are counted: U = N − D − A (counts.undrafted_token_share);
# its drafted steps in order (int32 [d_1..d_n, j_1..j_n], ``detailed`` only) for acceptance.step_replay.
# A line without a request id is keyed "<hash of its text>#<identical lines before it>", no
# longer "<line number>:<hash>" (a line put in front of a file re-keyed every line after it).
_SCHEMA_V5 = """
ALTER TABLE ingested ADD COLUMN decode_tokens INTEGER;
ALTER TABLE ingested ADD COLUMN steps BLOB;
CREATE TEMP TABLE rekey AS SELECT id, substr(key, instr(key, ':') + 1) || '#' || (ROW_NUMBER() OVER (
        PARTITION BY route, source, substr(key, instr(key, ':') + 1)
        ORDER BY CAST(substr(key, 1, instr(key, ':') - 1) AS INTEGER)) - 1) AS new_key
    FROM ingested WHERE source = 'per-request' AND key GLOB '[0-9]*:[0-9a-f]*' AND length(key) - instr(key, ':') = 16;
UPDATE OR IGNORE ingested SET key = (SELECT new_key FROM rekey WHERE rekey.id = ingested.id)
    WHERE id IN (SELECT id FROM rekey);
DROP TABLE rekey;
"""

# version → statements that bring a store from version − 1 to it.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_V4, 5: _SCHEMA_V5}

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
    steps: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # per request: (drafted, accepted) per step


@dataclass(frozen=True)
class IngestResult:
    added: int
    duplicates: int


# ---------------------------------------------------------------- packing and chunks

def _pack(v: np.ndarray | None) -> bytes | None:
    return None if v is None else np.ascontiguousarray(v, dtype=np.float64).tobytes()


def _pack_floats(v: list[float]) -> bytes:
    """float64 bytes of a list of floats (cheaper than numpy for the short lists of a chunk)."""
    return array("d", v).tobytes()


def _unpack(b: bytes | None) -> np.ndarray | None:
    return None if b is None else np.frombuffer(b, dtype=np.float64)


def bucket_of(t: float, level: int) -> float:
    """The rollup bucket b holding an interval that ends at t: t ∈ (b, b + level]."""
    return float((math.ceil(t / level) - 1) * level)


# level → seconds one stored chunk row spans: 5-min chunks of scrape intervals (level 0),
# hours of 5-min buckets, days of 1-h buckets. A week of a route's engines is then ~8 rows
# per engine instead of ~170, and an hour of scrape intervals 13 rows instead of 240.
CHUNK_SPANS: dict[int, float] = {0: 300.0, 300: 3600.0, 3600: 86400.0}

COUNT_DTYPES: dict[int, type] = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.float64}
_ARRAY_TYPECODES = {1: "B", 2: "H", 4: "I", 8: "d"}  # the same, as array-module type codes
_CHUNK_TABLES = {"i": "interval_chunks", "s": "spec_rollups", "t": "step_rollups", "p": "plugin_chunks"}


def chunk_of(bucket: float, level: int) -> float:
    """The chunk row holding rollup bucket ``bucket`` of ``level``: floor(b / span) · span."""
    span = CHUNK_SPANS[level]
    return float(math.floor(bucket / span) * span)


def _narrow(m: np.ndarray) -> tuple[int, bytes]:
    """The smallest exact encoding of a count matrix: unsigned integers when every value is
    whole and fits (scrape-interval deltas are small counts), else float64 (NaN, fractions)."""
    if m.size == 0:
        return 1, b""
    lo, hi = m.min(), m.max()
    if lo >= 0 and hi <= 0xFFFFFFFF and bool((m == np.floor(m)).all()):  # NaN compares False
        code = 1 if hi <= 0xFF else 2 if hi <= 0xFFFF else 4
        return code, m.astype(COUNT_DTYPES[code]).tobytes()
    return 8, np.ascontiguousarray(m, dtype=np.float64).tobytes()


def _encode_interval_chunk(times, cycles, starts, itl, counts) -> tuple:
    """(n, code, times, cycles, first_start, starts, counts, itl) column values; what
    can be derived is stored as NULL (cycles equal to times, starts that are the previous
    time, ITL sums of zero) so a chunk costs little more than its counts."""
    same_cycles = np.array_equal(cycles, times)
    contiguous = np.array_equal(starts[1:], times[:-1])
    code, packed = _narrow(counts)
    first = float(starts[0])
    return (len(times), code, times.tobytes(), None if same_cycles else cycles.tobytes(),
            None if (not contiguous or math.isnan(first)) else first, None if contiguous else starts.tobytes(),
            packed, itl.tobytes() if itl.any() else None)


def _kept(old, new, fields: tuple[str, ...], keep: list[int]):
    """``new`` holding the entries ``keep`` of ``old``'s per-entry lists ``fields``; None
    when nothing is kept (retention rewriting a chunk astride a cut)."""
    if not keep:
        return None
    for name in fields:
        setattr(new, name, [getattr(old, name)[i] for i in keep])
    return new


class _IntervalChunk:
    """Open level-0 chunk: one engine's samples in one 5-min chunk with one (segment,
    layout, it layout) key. ``rows``: [batch size (0: none or idle), delta (W),
    iteration-token delta (W_it)]; ``itl``: [ITL-sum delta, ITL-count delta]."""

    __slots__ = ("times", "cycles", "starts", "itl", "rows", "rowid")

    def __init__(self):
        self.rowid: int | None = None  # the stored row, updated in place
        self.times: list[float] = []
        self.cycles: list[float] = []
        self.starts: list[float] = []
        self.itl: list[tuple[float, float]] = []
        self.rows: list = []

    def encode(self) -> tuple:
        times = self.times
        contiguous = self.starts[1:] == times[:-1]
        first = self.starts[0]
        code, packed = _narrow(np.array(self.rows, dtype=np.float64))
        itl = [x for pair in self.itl for x in pair]
        return (len(times), code, _pack_floats(times), None if self.cycles == times else _pack_floats(self.cycles),
                None if (not contiguous or math.isnan(first)) else first,
                None if contiguous else _pack_floats(self.starts), packed, _pack_floats(itl) if any(itl) else None)

    @classmethod
    def decode(cls, n, code, times, cycles, first_start, starts, counts, itl, width) -> "_IntervalChunk":
        c = cls()
        c.times = np.frombuffer(times).tolist()
        c.cycles = np.frombuffer(cycles).tolist() if cycles is not None else list(c.times)
        c.starts = (np.frombuffer(starts).tolist() if starts is not None
                    else [first_start if first_start is not None else math.nan] + c.times[:-1])
        c.itl = np.frombuffer(itl).reshape(n, 2).tolist() if itl is not None else [(0.0, 0.0)] * n
        c.rows = list(np.frombuffer(counts, dtype=COUNT_DTYPES[code]).astype(np.float64).reshape(n, width))
        return c


class _SpecRollupChunk:
    """Open spec rollup chunk: per bucket, Σ deltas, intervals, first start, last end."""

    __slots__ = ("buckets", "intervals", "first_start", "last_end", "deltas", "packed", "rowid")

    def __init__(self):
        self.rowid: int | None = None
        self.packed: list[bytes | None] = []  # float64 bytes of each delta (None: stale)
        self.buckets: list[float] = []
        self.intervals: list[float] = []
        self.first_start: list[float] = []
        self.last_end: list[float] = []
        self.deltas: list[np.ndarray] = []

    def add(self, bucket: float, start: float, end: float, delta: np.ndarray) -> None:
        if self.buckets and self.buckets[-1] == bucket:  # an engine's times only go forward
            self.deltas[-1] = self.deltas[-1] + delta
            self.packed[-1] = None
            self.intervals[-1] += 1
            self.first_start[-1] = min(self.first_start[-1], start)
            self.last_end[-1] = max(self.last_end[-1], end)
        else:
            self.buckets.append(bucket)
            self.intervals.append(1.0)
            self.first_start.append(start)
            self.last_end.append(end)
            self.deltas.append(delta)
            self.packed.append(None)

    def encode(self) -> tuple:
        if self.packed[-1] is None:  # only the newest bucket changes between cycles
            self.packed[-1] = _pack(self.deltas[-1])
        return (len(self.buckets), _pack_floats(self.buckets), _pack_floats(self.intervals),
                _pack_floats(self.first_start), _pack_floats(self.last_end),
                b"".join(b if b is not None else _pack(d) for b, d in zip(self.packed, self.deltas)))

    @classmethod
    def decode(cls, n, buckets, intervals, first_start, last_end, delta) -> "_SpecRollupChunk":
        c = cls()
        c.buckets, c.intervals = _unpack(buckets).tolist(), _unpack(intervals).tolist()
        c.first_start, c.last_end = _unpack(first_start).tolist(), _unpack(last_end).tolist()
        c.deltas = list(_unpack(delta).reshape(n, -1))
        c.packed = [None] * n
        return c


class _StepRollupChunk:
    """Open step rollup chunk: per bucket ITL sums and iteration-token deltas, and the
    batch mix as (bucket, batch size, samples) triples."""

    __slots__ = ("buckets", "itl", "it", "batch_mix", "rowid")

    def __init__(self):
        self.rowid: int | None = None
        self.buckets: list[float] = []
        self.itl: list[list[float]] = []
        self.it: list = []
        self.batch_mix: dict[tuple[float, int], int] = {}

    def add(self, bucket: float, itl_sum: float, itl_count: float, it_delta, batch: int) -> None:
        if not (self.buckets and self.buckets[-1] == bucket):
            self.buckets.append(bucket)
            self.itl.append([0.0, 0.0])
            self.it.append(None)
        itl = self.itl[-1]
        itl[0] += itl_sum
        itl[1] += itl_count
        if it_delta is not None:
            self.it[-1] = it_delta if self.it[-1] is None else self.it[-1] + it_delta
        if batch >= 1:
            key = (bucket, batch)
            self.batch_mix[key] = self.batch_mix.get(key, 0) + 1

    def encode(self, width: int, chunk: float, level: int) -> tuple:
        it = None
        if width:
            none = np.full(width, math.nan)  # buckets whose samples had no iteration-token delta
            it = b"".join(_pack(none if x is None else x) for x in self.it)
        # whole numbers: (bucket index, batch size, samples), in the narrowest unsigned type
        mix = [x for (b, k), n in self.batch_mix.items() for x in (round((b - chunk) / level), k, n)]
        top = max(mix, default=0)
        code = 1 if top <= 0xFF else 2 if top <= 0xFFFF else 4 if top <= 0xFFFFFFFF else 8
        packed = array(_ARRAY_TYPECODES[code], mix if code != 8 else [float(x) for x in mix]).tobytes()
        return (len(self.buckets), _pack_floats(self.buckets), _pack_floats([x for pair in self.itl for x in pair]),
                it, code, packed)

    @classmethod
    def decode(cls, n, buckets, itl, it_delta, mix_code, batch_mix, chunk, level) -> "_StepRollupChunk":
        c = cls()
        c.buckets = _unpack(buckets).tolist()
        c.itl = _unpack(itl).reshape(n, 2).tolist()
        c.it = ([None if np.isnan(x).all() else x for x in _unpack(it_delta).reshape(n, -1)]
                if it_delta is not None else [None] * n)
        mix = np.frombuffer(batch_mix, dtype=COUNT_DTYPES[mix_code]).reshape(-1, 3).tolist()
        c.batch_mix = {(chunk + i * level, int(k)): int(m) for i, k, m in mix}
        return c


class _PluginChunk:
    """Open plugin chunk: per key (interval end at level 0, bucket start above) the
    summed plugin deltas of one engine segment in one plugin layout."""

    __slots__ = ("keys", "deltas", "rowid")

    def __init__(self):
        self.rowid: int | None = None
        self.keys: list[float] = []
        self.deltas: list[np.ndarray] = []

    def add(self, key: float, delta: np.ndarray) -> None:
        if self.keys and self.keys[-1] == key:  # an engine's times only go forward
            self.deltas[-1] = self.deltas[-1] + delta
        else:
            self.keys.append(key)
            self.deltas.append(delta)

    def encode(self) -> tuple:
        code, packed = _narrow(np.vstack(self.deltas))
        return (len(self.keys), _pack_floats(self.keys), code, zlib.compress(packed, 1))

    @classmethod
    def decode(cls, n, keys, code, delta) -> "_PluginChunk":
        c = cls()
        c.keys = _unpack(keys).tolist()
        c.deltas = list(_decode_plugin_delta(n, code, delta))
        return c


def _decode_plugin_delta(n: int, code: int, blob: bytes) -> np.ndarray:
    """(n, W) float64 deltas of a plugin_chunks row."""
    return np.frombuffer(zlib.decompress(blob), dtype=COUNT_DTYPES[code]).astype(np.float64).reshape(n, -1)


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
    plugin_layout_id: int | None = None  # the specdec plugin's counters, when exported
    plugin_value: np.ndarray | None = None


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
        header_short = _check_file(path)
        try:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open store {path}: {e}") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            _migrate(conn, path, full_check=header_short)
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
        self._load_identities()
        # open chunks, loaded on first write: (kind, engine, level) → {(chunk, *key): chunk object}
        self._chunk_cache: dict[tuple, dict[tuple, object]] = {}
        self._dirty: dict[tuple, object] = {}
        self._engines: dict[int, _EngineState] = {}
        for eid in self._engine_refs:
            row = c.execute(
                "SELECT time, seg_id, layout_id, created, value, itl_sum, itl_count, it_layout_id, it_value "
                "FROM samples WHERE engine_id = ? ORDER BY time DESC LIMIT 1", (eid,)).fetchone()
            if row is None:
                continue
            t, seg, lay, created, value, itl_s, itl_c, it_lay, it_val = row
            plugin = c.execute("SELECT layout_id, value FROM plugin_samples WHERE engine_id = ? AND time = ?",
                               (eid, t)).fetchone()
            self._engines[eid] = _EngineState(
                eid, t, seg, self._segment_gamma.get(seg, 0) if seg is not None else 0, lay, created,
                _unpack(value), itl_s, itl_c, it_lay, _unpack(it_val),
                plugin[0] if plugin else None, _unpack(plugin[1]) if plugin else None)

    def _load_identities(self) -> None:
        """(Re)load the id maps: targets, engines, layouts, γ segments."""
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
        self._layout_by_columns: dict[tuple[str, tuple], int] = {
            (kind, tuple(cols)): lid for lid, (kind, cols) in self._layouts.items()}
        self._segment_gamma: dict[int, int] = {}
        self._segment_engine: dict[int, int] = {}
        for sid, eid, gamma in c.execute("SELECT id, engine_id, gamma FROM segments"):
            self._segment_gamma[sid] = gamma
            self._segment_engine[sid] = eid

    @contextmanager
    def read_snapshot(self):
        """One read transaction: every read inside sees the same committed state (WAL) —
        a writer that commits meanwhile is not seen — and the targets, engines, layouts and
        γ segments of that state are the ones looked up (a reader opened before a writer
        added a segment would otherwise meet ids it does not know). Nested: the outer one holds."""
        if self.conn.in_transaction:
            self._load_identities()
            yield self
            return
        self.conn.execute("BEGIN")
        try:
            self._load_identities()
            yield self
        finally:
            self.conn.execute("ROLLBACK")

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
        lid = self._layout_by_columns.get((kind, tuple(columns)))
        if lid is not None:
            return lid
        text = json.dumps(columns, separators=(",", ":"))
        lid = self._layout_ids.get((kind, text))
        if lid is None:
            lid = self.conn.execute("INSERT INTO layouts (kind, columns) VALUES (?, ?)", (kind, text)).lastrowid
            self._layout_ids[(kind, text)] = lid
            self._layouts[lid] = (kind, list(columns))
        self._layout_by_columns[(kind, tuple(columns))] = lid
        return lid

    def _new_segment(self, eid: int, gamma: int, t: float) -> int:
        sid = self.conn.execute(
            "INSERT INTO segments (engine_id, gamma, first_time) VALUES (?, ?, ?)", (eid, gamma, t)).lastrowid
        self._segment_gamma[sid] = gamma
        self._segment_engine[sid] = eid
        return sid

    def _width(self, layout_id: int) -> int:
        return len(self._layouts[layout_id][1]) if layout_id else 0

    def _open_chunk(self, kind: str, eid: int, level: int, chunk: float, key: tuple):
        """The open chunk object of (kind ∈ i | s | t, engine, level, chunk, key), marked dirty.

        The cache holds, per (kind, engine, level), every stored chunk from the first one
        written since open: an engine's times only go forward, so a chunk newer than those
        cached is new, and older ones are complete and leave the cache."""
        group = (kind, eid, level)
        cached = self._chunk_cache.get(group)
        if cached is None:
            cached = self._chunk_cache[group] = self._load_chunks(kind, eid, level, chunk)
        full = (chunk,) + key
        obj = cached.get(full)
        if obj is None:
            for k in [k for k in cached if k[0] < chunk]:
                del cached[k]
            obj = cached[full] = (_IntervalChunk if kind == "i" else _SpecRollupChunk if kind == "s"
                                  else _PluginChunk if kind == "p" else _StepRollupChunk)()
        self._dirty[(kind, eid, level) + full] = obj
        return obj

    def _load_chunks(self, kind: str, eid: int, level: int, chunk: float) -> dict[tuple, object]:
        c = self.conn
        out: dict[tuple, object] = {}
        if kind == "i":
            for rowid, ch, seg, lay, it_lay, *cols in c.execute(
                    "SELECT rowid, chunk, seg_id, layout_id, it_layout_id, n, code, times, cycles, first_start, "
                    "starts, counts, itl FROM interval_chunks WHERE engine_id = ? AND chunk >= ?", (eid, chunk)):
                obj = out[(ch, seg, lay, it_lay)] = _IntervalChunk.decode(
                    *cols, width=1 + self._width(lay) + self._width(it_lay))
                obj.rowid = rowid
        elif kind == "s":
            for rowid, ch, seg, lay, *cols in c.execute(
                    "SELECT rowid, chunk, seg_id, layout_id, n, buckets, intervals, first_start, last_end, delta "
                    "FROM spec_rollups WHERE engine_id = ? AND level = ? AND chunk >= ?", (eid, level, chunk)):
                obj = out[(ch, seg, lay)] = _SpecRollupChunk.decode(*cols)
                obj.rowid = rowid
        elif kind == "p":
            for rowid, ch, seg, lay, *cols in c.execute(
                    "SELECT rowid, chunk, seg_id, layout_id, n, keys, code, delta FROM plugin_chunks "
                    "WHERE engine_id = ? AND level = ? AND chunk >= ?", (eid, level, chunk)):
                obj = out[(ch, seg, lay)] = _PluginChunk.decode(*cols)
                obj.rowid = rowid
        else:
            for rowid, ch, it_lay, *cols in c.execute(
                    "SELECT rowid, chunk, it_layout_id, n, buckets, itl, it_delta, mix_code, batch_mix "
                    "FROM step_rollups WHERE engine_id = ? AND level = ? AND chunk >= ?", (eid, level, chunk)):
                obj = out[(ch, it_lay)] = _StepRollupChunk.decode(*cols, ch, level)
                obj.rowid = rowid
        return out

    def _flush_chunks(self) -> None:
        """Write every chunk changed in this cycle (inside the cycle's transaction): stored
        ones are updated in place by rowid (no index change), new ones inserted."""
        c = self.conn
        updates: dict[str, list] = {"i": [], "s": [], "t": [], "p": []}
        for (kind, eid, level, chunk, *key), obj in self._dirty.items():
            if kind == "t":
                values = obj.encode(self._width(key[0]), chunk, level)
            else:
                values = obj.encode()
            if obj.rowid is not None:
                updates[kind].append((*values, obj.rowid))
                continue
            row = (eid, chunk, *key, *values) if kind == "i" else (eid, level, chunk, *key, *values)
            obj.rowid = c.execute(f"INSERT INTO {_CHUNK_TABLES[kind]} VALUES ({','.join('?' * len(row))})",
                                  row).lastrowid
        self._dirty = {}
        c.executemany("UPDATE interval_chunks SET n = ?, code = ?, times = ?, cycles = ?, first_start = ?, "
                      "starts = ?, counts = ?, itl = ? WHERE rowid = ?", updates["i"])
        c.executemany("UPDATE spec_rollups SET n = ?, buckets = ?, intervals = ?, first_start = ?, last_end = ?, "
                      "delta = ? WHERE rowid = ?", updates["s"])
        c.executemany("UPDATE step_rollups SET n = ?, buckets = ?, itl = ?, it_delta = ?, mix_code = ?, "
                      "batch_mix = ? WHERE rowid = ?", updates["t"])
        c.executemany("UPDATE plugin_chunks SET n = ?, keys = ?, code = ?, delta = ? WHERE rowid = ?", updates["p"])

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
        samples, events, failures, target_rows, plugin_samples = [], [], [], [], []
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
                    state = self._engine_sample(eid, prev, snap, r.time, cycle, samples, events, plugin_samples)
                    staged[eid] = state
            self._targets[tid] = new_ts
            target_rows.append((new_ts.last_ok_time, new_ts.last_error, new_ts.last_error_time,
                                new_ts.failing_since, tid))
        c.execute("INSERT INTO cycles (time, ok, failed) VALUES (?, ?, ?) "
                  "ON CONFLICT (time) DO UPDATE SET ok = ok + excluded.ok, failed = failed + excluded.failed",
                  (cycle, len(results) - n_failed, n_failed))
        c.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", samples)
        c.executemany("INSERT INTO plugin_samples VALUES (?,?,?,?)", plugin_samples)
        self._flush_chunks()
        c.executemany("INSERT INTO failures VALUES (?, ?, ?)", failures)
        c.executemany(
            "INSERT INTO events (time, target_id, engine_id, kind, detail, data) VALUES (?,?,?,?,?,?)", events)
        c.executemany(
            "UPDATE targets SET last_ok_time = ?, last_error = ?, last_error_time = ?, failing_since = ? "
            "WHERE id = ?", target_rows)
        return staged

    def _engine_sample(self, eid, prev: _EngineState | None, snap: EngineSnapshot, t: float, cycle: float,
                       samples, events, plugin_samples) -> _EngineState:
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
                common_prev = np.concatenate([prev.value[:3], prev.value[3:3 + min(gamma, prev.gamma)]])
                common_new = np.concatenate([value[:3], value[3:3 + min(gamma, prev.gamma)]])
                dropped = bool(np.any(common_new < common_prev))
                # vLLM fixes γ (the position label set) at engine start: a new γ is a new
                # engine, whether or not its counters have already passed the old ones (in
                # multiprocess mode there is no _created to tell).
                gamma_changed = gamma != prev.gamma
                restart = created_changed or dropped or gamma_changed
                if restart:
                    why = ("its _created time changed" if created_changed else "a counter went down" if dropped
                           else "its gamma changed")
                    event("restart", f"restarted: {why}")
                if gamma_changed:
                    seg_id = self._new_segment(eid, gamma, t)
                    delta = value.copy()
                    event("gamma_change", f"gamma {prev.gamma} -> {gamma}")
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

        start = prev.time if prev is not None else math.nan
        samples.append((eid, t, seg_id, layout_id, snap.created, _pack(value), _pack(delta),
                        running, itl_sum, itl_count, it_layout, _pack(it_value)))
        if delta is not None or running is not None or itl_sum_d is not None or it_delta is not None:
            batch = int(round(running)) if running is not None else 0  # 0: not a batch size
            it_width = self._width(it_layout) if it_layout else 0
            it_row = (it_delta if it_delta is not None else np.full(it_width, math.nan)) if it_width else ()
            spec_key = (seg_id, layout_id) if delta is not None else (0, 0)
            chunk = self._open_chunk("i", eid, 0, bucket_of(t, 300), spec_key + (it_layout or 0,))
            chunk.times.append(t)
            chunk.cycles.append(cycle)
            chunk.starts.append(start)
            chunk.itl.append((itl_sum_d or 0.0, itl_count_d or 0.0))
            row = [batch]
            if delta is not None:
                row += delta.tolist()
            if it_width:
                row += it_row.tolist()
            chunk.rows.append(row)
            for level in ROLLUP_LEVELS:
                b = bucket_of(t, level)
                ch = chunk_of(b, level)
                if delta is not None:
                    self._open_chunk("s", eid, level, ch, (seg_id, layout_id)).add(b, start, t, delta)
                self._open_chunk("t", eid, level, ch, (it_layout or 0,)).add(
                    b, itl_sum_d or 0.0, itl_count_d or 0.0, it_delta, batch)

        plugin_layout = plugin_value = None
        if snap.plugin is not None:
            columns, values = plugin_series.plugin_columns(snap.plugin)
            if columns:
                plugin_layout = self._layout_id("plugin", columns)
                plugin_value = np.array(values, dtype=np.float64)
                plugin_samples.append((eid, t, plugin_layout, plugin_value.tobytes()))
                # only beside a spec delta (same engine segment, so never across γ)
                if delta is not None and snap.plugin.gamma in (0, gamma):
                    p_delta = self._plugin_delta(prev, restart, plugin_layout, plugin_value)
                    self._open_chunk("p", eid, 0, bucket_of(t, 300), (seg_id, plugin_layout)).add(t, p_delta)
                    for level in ROLLUP_LEVELS:
                        b = bucket_of(t, level)
                        self._open_chunk("p", eid, level, chunk_of(b, level), (seg_id, plugin_layout)).add(b, p_delta)
        return _EngineState(eid, t, seg_id, gamma, layout_id, snap.created, value, itl_sum, itl_count,
                            it_layout, it_value, plugin_layout, plugin_value)

    def _plugin_delta(self, prev: _EngineState, restart: bool, layout: int, value: np.ndarray) -> np.ndarray:
        """The plugin counters' increase since the previous sample (Prometheus ``increase``):
        the new value after a restart, when the previous sample had none, or when one of
        them went down; else new − previous, a column new since then counting whole."""
        if restart or prev.plugin_value is None:
            return value.copy()
        if prev.plugin_layout_id == layout:
            before = prev.plugin_value
        else:  # the layout grew (a batch bucket or step kind seen for the first time)
            old = dict(zip(self._layouts[prev.plugin_layout_id][1], prev.plugin_value.tolist()))
            columns = self._layouts[layout][1]
            if not set(old) <= set(columns):  # a series vanished: only a restart does that
                return value.copy()
            before = np.array([old.get(col, 0.0) for col in columns])
        d = value - before
        return value.copy() if bool(np.any(d < 0)) else d

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
            vb = cum.tobytes()
            db = delta.tobytes()
            w = cum.shape[1] * 8
            col = lambda a, i: a[i].item() if a is not None else None  # noqa: E731
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
                c.execute("DELETE FROM plugin_samples WHERE engine_id = ? AND time < ? AND time < ?",
                          (eid, raw_cut, newest))
            self._trim_chunks(raw_cut, roll_cut)
            for tid in self._targets:  # (target, time) is the key: a range per target, not a scan
                c.execute("DELETE FROM failures WHERE target_id = ? AND time < ?", (tid, raw_cut))
            c.execute("DELETE FROM cycles WHERE time < ?", (raw_cut,))
            c.execute("DELETE FROM events WHERE time < ?", (roll_cut,))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('raw_from', ?)", (repr(raw_cut),))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        finally:
            self._chunk_cache = {}  # rewritten chunks are reloaded on the next write

    def _trim_chunks(self, raw_cut: float, roll_cut: float) -> None:
        """Delete chunk entries older than the cuts: level-0 entries with time < raw_cut,
        rollup buckets with b + level < roll_cut; chunks astride a cut are rewritten."""
        c = self.conn
        span0 = CHUNK_SPANS[0]
        c.execute("DELETE FROM interval_chunks WHERE chunk + ? < ?", (span0, raw_cut))
        # Plugin chunks go whole once all of them is past a cut; windows select their rows by
        # key, and read level 0 only where raw rows are kept (acceptance.windows._plan).
        c.execute("DELETE FROM plugin_chunks WHERE level = 0 AND chunk + ? < ?", (span0, raw_cut))
        for level in ROLLUP_LEVELS:
            c.execute("DELETE FROM plugin_chunks WHERE level = ? AND chunk + ? <= ?",
                      (level, CHUNK_SPANS[level], roll_cut - level))
        for eid, ch, seg, lay, it_lay, *cols in c.execute(
                "SELECT engine_id, chunk, seg_id, layout_id, it_layout_id, n, code, times, cycles, first_start, "
                "starts, counts, itl FROM interval_chunks WHERE chunk < ?", (raw_cut,)).fetchall():
            old = _IntervalChunk.decode(*cols, width=1 + self._width(lay) + self._width(it_lay))
            keep = [i for i, t in enumerate(old.times) if t >= raw_cut]
            new = _kept(old, _IntervalChunk(), ("times", "cycles", "starts", "itl", "rows"), keep)
            self._rewrite_chunk("interval_chunks", ("engine_id", "chunk", "seg_id", "layout_id", "it_layout_id"),
                                (eid, ch, seg, lay, it_lay), None if new is None else new.encode())
        for level in ROLLUP_LEVELS:
            span = CHUNK_SPANS[level]
            lowest = roll_cut - level  # a bucket goes once all of it is older than the cut
            for table in ("spec_rollups", "step_rollups"):
                c.execute(f"DELETE FROM {table} WHERE level = ? AND chunk + ? <= ?", (level, span, lowest))
            for eid, ch, seg, lay, *cols in c.execute(
                    "SELECT engine_id, chunk, seg_id, layout_id, n, buckets, intervals, first_start, last_end, delta "
                    "FROM spec_rollups WHERE level = ? AND chunk < ?", (level, lowest)).fetchall():
                old = _SpecRollupChunk.decode(*cols)
                keep = [i for i, b in enumerate(old.buckets) if b >= lowest]
                new = _kept(old, _SpecRollupChunk(), ("buckets", "intervals", "first_start", "last_end", "deltas"), keep)
                if new is not None:
                    new.packed = [None] * len(keep)
                self._rewrite_chunk("spec_rollups", ("engine_id", "level", "chunk", "seg_id", "layout_id"),
                                    (eid, level, ch, seg, lay), None if new is None else new.encode())
            for eid, ch, it_lay, *cols in c.execute(
                    "SELECT engine_id, chunk, it_layout_id, n, buckets, itl, it_delta, mix_code, batch_mix "
                    "FROM step_rollups WHERE level = ? AND chunk < ?", (level, lowest)).fetchall():
                old = _StepRollupChunk.decode(*cols, ch, level)
                keep = [i for i, b in enumerate(old.buckets) if b >= lowest]
                new = _kept(old, _StepRollupChunk(), ("buckets", "itl", "it"), keep)
                if new is not None:
                    new.batch_mix = {k: v for k, v in old.batch_mix.items() if k[0] >= lowest}
                self._rewrite_chunk("step_rollups", ("engine_id", "level", "chunk", "it_layout_id"),
                                    (eid, level, ch, it_lay),
                                    None if new is None else new.encode(self._width(it_lay), ch, level))

    def _rewrite_chunk(self, table: str, key_columns: tuple[str, ...], key: tuple, rest: tuple | None) -> None:
        """Replace the chunk row of ``key`` by key + ``rest`` (its other columns, in table
        order); None: delete it (nothing in it was kept)."""
        self.conn.execute(f"DELETE FROM {table} WHERE " + " AND ".join(f"{k} = ?" for k in key_columns), key)
        if rest is not None:
            self.conn.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(key) + len(rest)))})", key + rest)

    # -------------------------------------------------------------- reading

    def raw_from(self) -> float | None:
        """Raw rows before this time were deleted by retention (None: none were)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'raw_from'").fetchone()
        return None if row is None else float(row[0])

    # -------------------------------------------------------------- ingested sources

    def ingest(self, route: str, source: str, rows: Iterable[IngestedRow]) -> IngestResult:
        """Store per-request or log-line counts for ``route`` in one transaction; rows whose
        key is already stored for the route and source are counted as duplicates."""
        if source not in INGESTED_SOURCES:
            raise ValueError(f"ingest source must be one of {', '.join(INGESTED_SOURCES)}, got {source!r}")
        if not route:
            raise ValueError("ingest: the route name is empty")
        c = self.conn
        added = dupes = 0
        c.execute("BEGIN IMMEDIATE")
        try:
            for row in rows:
                counts = row.counts
                per_pos = counts.draft_tokens_per_position
                cur = c.execute(
                    "INSERT OR IGNORE INTO ingested (route, source, time, gamma, counts, draft_per_pos, estimated, key,"
                    " mean_itl_s, decode_tokens, steps) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (route, source, float(row.time), counts.gamma, _pack(np.asarray(counts.as_vector(), float)),
                     None if per_pos is None else _pack(np.asarray(per_pos, float)), int(row.estimated), row.key,
                     row.mean_itl_s, row.decode_tokens,
                     None if row.steps is None else np.asarray(row.steps, dtype="<i4").tobytes()))
                if cur.rowcount:
                    added += 1
                else:
                    dupes += 1
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        return IngestResult(added, dupes)

    def ingested_routes(self) -> dict[str, list[str]]:
        """Routes with ingested data → their sources."""
        out: dict[str, list[str]] = {}
        for route, source in self.conn.execute("SELECT DISTINCT route, source FROM ingested ORDER BY route, source"):
            out.setdefault(route, []).append(source)
        return out

    def ingested_intervals(self, route: str, source: str, start: float, end: float) -> dict[int, IntervalCounts]:
        """γ → one row per ingested request (or logged interval) with time in (start, end],
        in time order; start = end = the row's time."""
        rows: dict[int, list[tuple[float, np.ndarray]]] = {}
        for t, gamma, blob in self.conn.execute(
                "SELECT time, gamma, counts FROM ingested WHERE route = ? AND source = ? AND time > ? AND time <= ?"
                " ORDER BY time, id", (route, source, float(start), float(end))):
            rows.setdefault(int(gamma), []).append((float(t), _unpack(blob)))
        out = {}
        for gamma, items in sorted(rows.items()):
            times = np.array([t for t, _ in items])
            out[gamma] = IntervalCounts(gamma, times, times.copy(), np.vstack([v for _, v in items]))
        return out

    def ingested_draft_tokens_per_position(self, route: str, source: str, gamma: int, start: float, end: float
                                           ) -> tuple[float, ...] | None:
        """Σ R_k (drafts that reached position k) over the ingested rows of γ with time in
        (start, end], when every one of them carries R_k (per-request ``detailed``); else None."""
        total, rows = np.zeros(gamma), 0
        for (blob,) in self.conn.execute(
                "SELECT draft_per_pos FROM ingested WHERE route = ? AND source = ? AND gamma = ? AND time > ?"
                " AND time <= ?", (route, source, int(gamma), float(start), float(end))):
            if blob is None:
                return None
            total += _unpack(blob)
            rows += 1
        return tuple(float(x) for x in total) if rows else None

    def ingested_itl(self, route: str, source: str, gamma: int, start: float, end: float) -> tuple[float, float]:
        """(Σ mean ITL × tokens, Σ tokens) over the rows of one γ that report a mean
        inter-token latency. vLLM's per-request ``mean_itl_ms`` is decode time / (tokens − 1)
        (vllm/entrypoints/generate/base/serving.py, 0.32 and 0.33): a time per output token,
        so the requests' means are weighted by their decode tokens (tokens − 1) — where a row
        does not know them, by the D + A tokens its drafted steps emitted."""
        total = tokens = 0.0
        for itl, blob, decode in self.conn.execute(
                "SELECT mean_itl_s, counts, decode_tokens FROM ingested WHERE route = ? AND source = ? AND gamma = ?"
                " AND time > ? AND time <= ? AND mean_itl_s IS NOT NULL",
                (route, source, int(gamma), float(start), float(end))):
            if decode is None:
                counts = _unpack(blob)
                decode = float(counts[0] + counts[2])  # D + A: each drafted step emits 1 + its accepted
            total += float(itl) * decode
            tokens += decode
        return total, tokens

    def ingested_step_sequences(self, route: str, source: str, gamma: int, start: float, end: float
                                ) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
        """Each row's (drafted, accepted) per step, in time order, when every row of γ with time
        in (start, end] carries them (per-request ``detailed``); else None."""
        out = []
        for (blob,) in self.conn.execute(
                "SELECT steps FROM ingested WHERE route = ? AND source = ? AND gamma = ? AND time > ? AND time <= ?"
                " ORDER BY time, id", (route, source, int(gamma), float(start), float(end))):
            if blob is None:
                return None
            pairs = np.frombuffer(blob, dtype="<i4").reshape(2, -1)
            out.append((tuple(int(v) for v in pairs[0]), tuple(int(v) for v in pairs[1])))
        return out or None

    def ingested_decode_tokens(self, route: str, source: str, gamma: int, start: float, end: float
                               ) -> tuple[float, float, float] | None:
        """(Σ decode tokens N, Σ drafts D, Σ accepted A) over the rows of one γ with time in
        (start, end], when every one of them knows its decode tokens; else None."""
        n = d = a = 0.0
        rows = 0
        for blob, decode in self.conn.execute(
                "SELECT counts, decode_tokens FROM ingested WHERE route = ? AND source = ? AND gamma = ? AND time > ?"
                " AND time <= ?", (route, source, int(gamma), float(start), float(end))):
            if decode is None:
                return None
            counts = _unpack(blob)
            n, d, a, rows = n + float(decode), d + float(counts[0]), a + float(counts[2]), rows + 1
        return (n, d, a) if rows else None

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

    def segment_engine(self, seg_id: int) -> int:
        return self._segment_engine[seg_id]

    def _engine_filter(self, engine_ids: list[int]) -> str:
        return f"engine_id IN ({','.join(str(int(e)) for e in engine_ids)})"

    def data_span(self, engine_ids: list[int], lo: float, hi: float) -> tuple[float, float] | None:
        """(first, last]: chunk bounds around every stored interval of these engines that ends in
        (lo, hi] — scrape chunks to 5 minutes, rollups (where retention removed the raw rows)
        to their chunk's span — or None when there is none. Windows that contain all of it read
        the same rows, so acceptance.windows plans them alike whatever their nominal length."""
        if not engine_ids:
            return None
        first, last = math.inf, -math.inf
        raw = self.conn.execute(
            f"SELECT MIN(chunk), MAX(chunk) FROM interval_chunks WHERE {self._engine_filter(engine_ids)} "
            "AND chunk >= ? AND chunk <= ?", (bucket_of(lo, 300), bucket_of(hi, 300))).fetchone()
        if raw[0] is not None:
            first, last = raw[0], raw[1] + 300.0
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
            "SELECT layout_id, it_layout_id, code, seg_id, n, times, cycles, first_start, starts, counts, itl, engine_id "
            f"FROM interval_chunks WHERE {self._engine_filter(engine_ids)} AND chunk >= ? AND chunk <= ?",
            (bucket_of(lo, 300), bucket_of(hi, 300))).fetchall()
        groups: dict[tuple, list] = {}
        for r in rows:
            groups.setdefault(r[:3], []).append(r[3:])
        spec = []
        gauge = []  # (engine, time, running) of every row, for the pairs of consecutive samples
        for (lay, it_lay, code), rs in groups.items():
            w, w_it = self._width(lay), self._width(it_lay)
            segs, ns, times_b, cycles_b, first, starts_b, counts_b, itl_b, engine_of = zip(*rs)
            ns = np.array(ns)
            offsets = np.concatenate([[0], np.cumsum(ns)[:-1]])
            times = np.frombuffer(b"".join(times_b))
            cycles = np.frombuffer(b"".join(c if c is not None else t for c, t in zip(cycles_b, times_b)))
            starts = np.empty_like(times)
            starts[1:] = times[:-1]  # start[i] = time[i - 1] within a chunk unless stored
            starts[offsets] = np.array([math.nan if f is None else f for f in first], dtype=np.float64)
            for o, k, sb in zip(offsets.tolist(), ns.tolist(), starts_b):
                if sb is not None:
                    starts[o:o + k] = np.frombuffer(sb)
            counts = np.frombuffer(b"".join(counts_b), dtype=COUNT_DTYPES[code]).reshape(len(times), 1 + w + w_it)
            itl = np.frombuffer(b"".join(x if x is not None else bytes(16 * k)
                                         for x, k in zip(itl_b, ns.tolist()))).reshape(-1, 2)
            m = (times > lo) & (times <= hi)
            seg, engine = np.repeat(np.array(segs), ns), np.repeat(np.array(engine_of), ns)
            if not m.all():
                times, cycles, starts, counts, itl = times[m], cycles[m], starts[m], counts[m], itl[m]
                seg, engine = seg[m], engine[m]
            if not len(times):
                continue
            step.add(counts[:, 0], np.ones(len(times)), float(itl[:, 0].sum()), float(itl[:, 1].sum()),
                     it_lay, counts[:, 1 + w:] if w_it else None)
            gauge.append((engine, times, counts[:, 0].astype(np.float64)))
            if lay:
                spec.append(SpecEntries(lay, seg, cycles, starts, times, counts[:, 1:1 + w].astype(np.float64)))
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
        groups: dict[int, list] = {}
        for r in self.conn.execute("SELECT layout_id, seg_id, n, buckets, first_start, last_end, delta "
                                   f"FROM spec_rollups WHERE {where}", args):
            groups.setdefault(r[0], []).append(r[1:])
        spec = []
        for lay, rs in groups.items():
            segs, ns, buckets_b, first_b, last_b, delta_b = zip(*rs)
            buckets = np.frombuffer(b"".join(buckets_b))
            m = (buckets >= b_lo) & (buckets < b_hi)
            seg = np.repeat(np.array(segs), np.array(ns))
            delta = np.frombuffer(b"".join(delta_b)).reshape(len(buckets), -1)
            if m.any():
                spec.append(SpecEntries(lay, seg[m], buckets[m] + level, np.frombuffer(b"".join(first_b))[m],
                                        np.frombuffer(b"".join(last_b))[m], delta[m]))
        by_it: dict[int, list] = {}
        by_code: dict[int, list] = {}
        for r in self.conn.execute("SELECT it_layout_id, n, buckets, itl, it_delta, chunk, mix_code, batch_mix "
                                   f"FROM step_rollups WHERE {where}", args):
            by_it.setdefault(r[0], []).append(r[1:5])
            by_code.setdefault(r[6], []).append((r[5], r[7]))
        for code, rs in by_code.items():  # batch mix: (bucket index, batch size, samples) triples
            chunks, blobs = zip(*rs)
            size = 3 * np.dtype(COUNT_DTYPES[code]).itemsize
            mix = np.frombuffer(b"".join(blobs), dtype=COUNT_DTYPES[code]).reshape(-1, 3).astype(np.float64)
            bucket = np.repeat(np.array(chunks), [len(b) // size for b in blobs]) + mix[:, 0] * level
            mix = mix[(bucket >= b_lo) & (bucket < b_hi)]
            step.add(mix[:, 1], mix[:, 2], 0.0, 0.0, 0, None)
        for it_lay, rs in by_it.items():
            ns, buckets_b, itl_b, it_b = zip(*rs)
            buckets = np.frombuffer(b"".join(buckets_b))
            m = (buckets >= b_lo) & (buckets < b_hi)
            itl = np.frombuffer(b"".join(itl_b)).reshape(-1, 2)[m]
            it = None
            if it_lay:
                it = np.frombuffer(b"".join(x if x is not None else np.full(k * self._width(it_lay), np.nan).tobytes()
                                            for x, k in zip(it_b, ns))).reshape(len(buckets), -1)[m]
            step.add((), (), float(itl[:, 0].sum()), float(itl[:, 1].sum()), it_lay, it)
        return spec, step

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
        groups: dict[int, list] = {}
        for lay, seg, n, keys, code, blob in self.conn.execute(
                "SELECT layout_id, seg_id, n, keys, code, delta FROM plugin_chunks "
                f"WHERE {self._engine_filter(engine_ids)} AND level = ? AND {where}", args):
            k = np.frombuffer(keys)
            m = (k > lo) & (k <= hi) if level == 0 else (k >= lo) & (k < hi)
            if m.any():
                groups.setdefault(lay, []).append((np.full(int(m.sum()), seg), _decode_plugin_delta(n, code, blob)[m]))
        return [PluginEntries(lay, np.concatenate([x for x, _ in rs]), np.vstack([d for _, d in rs]))
                for lay, rs in groups.items()]

    def is_speculating(self, engine_id: int, at: float) -> bool | None:
        """Whether the engine's newest sample at or before ``at`` had spec-decode counters."""
        state = self._engines.get(engine_id)
        if state is not None and state.time <= at:  # the common case: a window ending now
            return state.value is not None
        row = self.conn.execute("SELECT value IS NOT NULL FROM samples WHERE engine_id = ? AND time <= ? "
                                "ORDER BY time DESC LIMIT 1", (engine_id, at)).fetchone()
        return None if row is None else bool(row[0])


@dataclass
class SpecEntries:
    """Spec deltas of one layout read for a window: entry i is one engine segment's deltas
    in one block (a scrape interval or a rollup bucket), block key ``key`` (the cycle time or
    the bucket's end), covering (start, end]; ``delta`` (n, W) in the layout's columns."""

    layout_id: int
    seg: np.ndarray
    key: np.ndarray
    start: np.ndarray
    end: np.ndarray
    delta: np.ndarray


@dataclass
class PluginEntries:
    """Plugin deltas of one plugin layout read for a window: row i is one engine
    segment's deltas in one block; ``delta`` (n, W) in the layout's columns."""

    layout_id: int
    seg: np.ndarray
    delta: np.ndarray


@dataclass
class StepTotals:
    """Step-shape sums read for a window: batch sizes with their sample counts (B ≥ 1),
    Σ ITL-sum and ITL-count deltas, Σ iteration-token deltas per layout (NaN rows: none)."""

    batch: list = field(default_factory=list)
    batch_samples: list = field(default_factory=list)
    batch_pairs: int = 0          # consecutive raw samples of one engine, both with B ≥ 1
    batch_repeats: int = 0        # ... of which B did not change
    itl_sum: float = 0.0
    itl_count: float = 0.0
    iteration_tokens: dict[int, np.ndarray] = field(default_factory=dict)

    def add(self, batch, samples, itl_sum: float, itl_count: float, it_layout: int, it) -> None:
        self.batch.append(np.asarray(batch, dtype=np.float64))
        self.batch_samples.append(np.asarray(samples, dtype=np.float64))
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
        self.batch += other.batch
        self.batch_samples += other.batch_samples
        self.batch_pairs += other.batch_pairs
        self.batch_repeats += other.batch_repeats
        self.itl_sum += other.itl_sum
        self.itl_count += other.itl_count
        for lay, v in other.iteration_tokens.items():
            prev = self.iteration_tokens.get(lay)
            self.iteration_tokens[lay] = v if prev is None else prev + v


def _runs(keys: np.ndarray, offset: int) -> list[tuple[int, int]]:
    """[(lo, hi)] index ranges of equal consecutive keys, shifted by ``offset``."""
    if len(keys) == 0:
        return []
    cut = np.flatnonzero(np.diff(keys)) + 1
    bounds = np.concatenate([[0], cut, [len(keys)]]) + offset
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def _le_name(le: float) -> str:
    return "+Inf" if math.isinf(le) else repr(float(le))


def le_value(name: str) -> float:
    return math.inf if name == "+Inf" else float(name)


def _check_file(path: Path) -> bool:
    """Reject, before SQLite touches it, a file that is not an SQLite store. True when its
    header counts more pages than the file holds: truncated, or legitimately so in WAL mode
    (a checkpoint writes page 1 before the pages past the end; a writer killed mid-way
    leaves the rest in the WAL) — only SQLite can tell which (_migrate checks it in full)."""
    if not path.exists():
        if not path.parent.exists():
            raise StoreError(f"cannot create store {path}: directory {path.parent} does not exist")
        return False
    if path.is_dir():
        raise StoreError(f"store {path} is a directory")
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = path.stat().st_size
    except OSError as e:
        raise StoreError(f"store {path} is unreadable: {e.strerror}") from None
    if size == 0:
        return False
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path} is not a specdec store (not an SQLite database)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    change_counter = int.from_bytes(header[24:28], "big")
    pages = int.from_bytes(header[28:32], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    return bool(pages and valid_for == change_counter and size < pages * page_size)


def _migrate(conn: sqlite3.Connection, path: Path, *, full_check: bool = False) -> None:
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
    # "corrupt" is SQLite's verdict only: quick_check when the file is small or its header
    # disagrees with its size (it may be sound: _check_file)
    if path.exists() and (full_check or path.stat().st_size <= _QUICK_CHECK_MAX_BYTES):
        res = conn.execute("PRAGMA quick_check").fetchone()[0]
        if res != "ok":
            raise StoreError(f"store {path} is corrupt: {res.splitlines()[0]}")
    else:
        for t in ("targets", "engines", "layouts", "segments", "samples", "spec_rollups", "step_rollups", "events"):
            conn.execute(f"SELECT * FROM {t} LIMIT 1").fetchall()
