"""The version-9 upgrade of a store file, in place: the sample history goes (windows never read
it; each engine's newest sample stays in ``engine_last`` as the next delta's baseline), the
scrape-interval rows of version 8 — raw float64 and narrow-integer arrays — are re-encoded
compressed (acceptance.store.packing), each closed hour of an engine sealed into one row,
and the rollups' float64 arrays narrowed to their exact types. Every count is kept exactly: a test reads the same windows before
and after (tests/test_acceptance_store_upgrade.py).

It runs inside the migration's transaction (acceptance.store.schema); the space it frees is
given back to the file system by a VACUUM after it (schema._give_back_space)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable

import numpy as np

from .codecs import COUNT_DTYPES, _encode_interval_chunk, encode_spec_rollup, encode_step_rollup
from .sealing import closed_hours, seal_hour

SCHEMA_V9 = """
CREATE TABLE engine_last (                -- each engine's newest sample: the next delta's baseline
    engine_id INTEGER PRIMARY KEY, time REAL NOT NULL,
    seg_id INTEGER, layout_id INTEGER, created REAL,
    value BLOB,                          -- float64 cumulative spec counters (NULL: not speculating)
    itl_sum REAL, itl_count REAL, it_layout_id INTEGER, it_value BLOB,
    plugin_layout_id INTEGER, plugin_value BLOB);
INSERT INTO engine_last
    SELECT s.engine_id, s.time, s.seg_id, s.layout_id, s.created, s.value, s.itl_sum, s.itl_count, s.it_layout_id,
           s.it_value, p.layout_id, p.value
    FROM samples s JOIN (SELECT engine_id, MAX(time) AS time FROM samples GROUP BY engine_id) m
        ON s.engine_id = m.engine_id AND s.time = m.time
    LEFT JOIN plugin_samples p ON p.engine_id = s.engine_id AND p.time = s.time;
DROP TABLE samples;
DROP TABLE plugin_samples;
CREATE TABLE interval_chunks_v9 (        -- what windows read at scrape resolution
    engine_id INTEGER NOT NULL, chunk REAL NOT NULL,
    seg_id INTEGER NOT NULL, layout_id INTEGER NOT NULL,  -- 0, 0: samples without a spec delta
    it_layout_id INTEGER NOT NULL,       -- 0: no iteration-token histogram
    span REAL NOT NULL,                  -- the entries' times lie in (chunk, chunk + span]
    sealed INTEGER NOT NULL,             -- 0: a 5-min row of an open hour, 1: a closed hour's row
    n INTEGER NOT NULL, code INTEGER NOT NULL,  -- entries, dtype of the counts (1, 2, 4: uint, 8: float64)
    flags INTEGER NOT NULL,              -- arrays stored beside times and counts (codecs._CYCLES ...)
    first_start REAL,                    -- start of the first interval when starts are not stored
    data BLOB NOT NULL,                  -- the arrays (acceptance.store.packing), deflated if flags say so
    UNIQUE (engine_id, chunk, seg_id, layout_id, it_layout_id));
CREATE TABLE spec_rollups_v9 (         -- arrays over the n buckets of one chunk (codecs.encode_spec_rollup)
    engine_id INTEGER NOT NULL, level INTEGER NOT NULL, chunk REAL NOT NULL,
    seg_id INTEGER NOT NULL, layout_id INTEGER NOT NULL, n INTEGER NOT NULL,
    code INTEGER NOT NULL,               -- dtype of counts (1, 2, 4: uint, 8: float64)
    buckets BLOB NOT NULL,               -- uint8 (n): bucket b = chunk + index * level
    ends BLOB NOT NULL,                  -- float64 (n, 2): first start, last end
    counts BLOB NOT NULL,                -- (n, 1 + W): intervals, summed delta
    UNIQUE (engine_id, level, chunk, seg_id, layout_id));
CREATE TABLE step_rollups_v9 (
    engine_id INTEGER NOT NULL, level INTEGER NOT NULL, chunk REAL NOT NULL,
    it_layout_id INTEGER NOT NULL,       -- 0: no iteration-token histogram
    n INTEGER NOT NULL, buckets BLOB NOT NULL,  -- uint8 (n) bucket indexes
    itl BLOB NOT NULL,                   -- float64 (n, 2): ITL sum, ITL count
    it_code INTEGER NOT NULL, it_delta BLOB,  -- (n, W_it), NaN rows: none in the bucket
    mix_code INTEGER NOT NULL,           -- dtype of batch_mix
    batch_mix BLOB NOT NULL,             -- (k, 3): bucket index in the chunk, batch size >= 1, samples
    UNIQUE (engine_id, level, chunk, it_layout_id));
"""

_RENAMES = """
DROP TABLE interval_chunks;
ALTER TABLE interval_chunks_v9 RENAME TO interval_chunks;
CREATE INDEX open_interval_chunks ON interval_chunks (chunk) WHERE sealed = 0;
CREATE INDEX interval_chunk_spans ON interval_chunks (engine_id, chunk, span);
DROP TABLE spec_rollups;
ALTER TABLE spec_rollups_v9 RENAME TO spec_rollups;
DROP TABLE step_rollups;
ALTER TABLE step_rollups_v9 RENAME TO step_rollups;
"""


def convert_to_v9(conn: sqlite3.Connection) -> None:
    """Fill the version-9 tables SCHEMA_V9 created from the version-8 ones, drop those, and
    seal every closed hour."""
    widths = {lid: len(json.loads(text)) for lid, text in conn.execute("SELECT id, columns FROM layouts")}

    def width(lay: int, it_lay: int) -> int:
        return 1 + widths.get(lay, 0) + widths.get(it_lay, 0)

    _convert_intervals(conn, width)
    _convert_rollups(conn, widths)
    for stmt in _RENAMES.split(";"):
        if stmt.strip():
            conn.execute(stmt)
    newest = dict(conn.execute("SELECT engine_id, time FROM engine_last").fetchall())
    for eid, hour in closed_hours(conn, math.inf, newest):
        seal_hour(conn, eid, hour, width)


def _convert_intervals(conn: sqlite3.Connection, width: Callable[[int, int], int]) -> None:
    """Version-8 rows (raw arrays: times, cycles, starts and ITL as float64, NULL when
    derivable) as version-9 5-min rows."""
    insert = "INSERT INTO interval_chunks_v9 VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
    batch = []
    for eid, ch, seg, lay, it_lay, n, code, times_b, cycles_b, first, starts_b, counts_b, itl_b in conn.execute(
            "SELECT engine_id, chunk, seg_id, layout_id, it_layout_id, n, code, times, cycles, first_start, starts, "
            "counts, itl FROM interval_chunks"):
        times = np.frombuffer(times_b)
        cycles = np.frombuffer(cycles_b) if cycles_b is not None else times
        if starts_b is not None:
            starts = np.frombuffer(starts_b)
        else:
            starts = np.concatenate([[math.nan if first is None else first], times[:-1]])
        itl = np.frombuffer(itl_b).reshape(n, 2) if itl_b is not None else np.zeros((n, 2))
        counts = np.frombuffer(counts_b, dtype=COUNT_DTYPES[code]).reshape(n, width(lay, it_lay)).astype(np.float64)
        batch.append((eid, ch, seg, lay, it_lay, 300.0, 0,
                      *_encode_interval_chunk(times, cycles, starts, itl, counts)))
        if len(batch) >= 10_000:
            conn.executemany(insert, batch)
            batch = []
    conn.executemany(insert, batch)


def _convert_rollups(conn: sqlite3.Connection, widths: dict[int, int]) -> None:
    """Version-8 rollup rows (float64 arrays, one column each) as version-9 rows (narrow types)."""
    rows: list[tuple[object, ...]] = []
    for eid, level, ch, seg, lay, n, buckets, intervals, first, last, delta in conn.execute(
            "SELECT engine_id, level, chunk, seg_id, layout_id, n, buckets, intervals, first_start, last_end, delta "
            "FROM spec_rollups"):
        ends = np.column_stack([np.frombuffer(first), np.frombuffer(last)])
        counts = np.column_stack([np.frombuffer(intervals), np.frombuffer(delta).reshape(n, -1)])
        rows.append((eid, level, ch, seg, lay, *encode_spec_rollup(ch, level, np.frombuffer(buckets).tolist(), ends, counts)))
    conn.executemany("INSERT INTO spec_rollups_v9 VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    rows = []
    for eid, level, ch, it_lay, n, buckets, itl, it_delta, mix_code, batch_mix in conn.execute(
            "SELECT engine_id, level, chunk, it_layout_id, n, buckets, itl, it_delta, mix_code, batch_mix "
            "FROM step_rollups"):
        width = widths.get(it_lay, 0)
        it = None  # no iteration-token layout; NaN: buckets whose samples had none
        if width:
            it = np.frombuffer(it_delta).reshape(n, -1) if it_delta is not None else np.full((n, width), math.nan)
        mix = np.frombuffer(batch_mix, dtype=COUNT_DTYPES[mix_code]).reshape(-1, 3).astype(np.float64)
        rows.append((eid, level, ch, it_lay, *encode_step_rollup(ch, level, np.frombuffer(buckets).tolist(),
                                                                 np.frombuffer(itl).reshape(n, 2), it, mix)))
    conn.executemany("INSERT INTO step_rollups_v9 VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
