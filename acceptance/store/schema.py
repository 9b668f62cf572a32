"""The store's file: its schema (one string per version) and migrations, and the check a
file passes before SQLite opens it (corrupt only on SQLite's own verdict)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from .disk import rollback
from .records import StoreError
from .credentials import scrub_credentials
from .upgrade import SCHEMA_V9, convert_to_v9

SCHEMA_VERSION = 11
APPLICATION_ID = 0x53504443  # "SPDC": marks the file as a specdec store
_SQLITE_MAGIC = b"SQLite format 3\x00"
_QUICK_CHECK_MAX_BYTES = 64 << 20  # full quick_check on open only for small files


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

# Version 6: a logged interval's load, from vLLM's stats line just before it (acceptance.log_lines):
# the requests running at its end, its length and output tokens — Little's law makes them the
# segment's mean ITL and its gauge samples (acceptance.ingested_window) — and the engine stream
# it belongs to ("<process>|<engine>"), whose consecutive intervals show how long a batch persists.
_SCHEMA_V6 = """
ALTER TABLE ingested ADD COLUMN running INTEGER;
ALTER TABLE ingested ADD COLUMN interval_s REAL;
ALTER TABLE ingested ADD COLUMN generation_tokens REAL;
ALTER TABLE ingested ADD COLUMN stream TEXT;
"""

# Version 7: a request's prompt tokens (usage.prompt_tokens): with its decode tokens, the context
# its decode steps read, which prices its KV cache and splits a route by context length
# (acceptance.request_context).
_SCHEMA_V7 = """
ALTER TABLE ingested ADD COLUMN prompt_tokens INTEGER;
"""

# Version 8: each engine's cumulative request lengths and vLLM's step-cost counters, at most every
# 5 minutes (acceptance.store.totals): a scraped route's context and its engines' own step cost.
_SCHEMA_V8 = """
CREATE TABLE engine_totals (
    engine_id INTEGER NOT NULL, time REAL NOT NULL, created REAL,
    totals TEXT NOT NULL,                -- JSON {name: cumulative value} (acceptance.store.totals)
    PRIMARY KEY (engine_id, time)) WITHOUT ROWID;
"""

# Version 9: a store no bigger than Prometheus' on the same data (acceptance.store.upgrade):
# no sample history (each engine's newest sample in engine_last), chunk rows compressed, an
# engine's closed hours sealed into one row per key (acceptance.store.sealing).

# Version 10: no credential in what the store holds (acceptance.store.credentials): target URLs
# and the messages naming them as shown (acceptance.target_access).

# Version 11: a request's sampling temperature (the gateway line's optional "temperature"): greedy
# and sampled requests are two populations of acceptance, priced apart (acceptance.request_sampling).
_SCHEMA_V11 = """
ALTER TABLE ingested ADD COLUMN temperature REAL;
"""

# version → statements that bring a store from version − 1 to it, then the conversion in
# Python that some need (after their statements, in the same transaction); a conversion that
# returns a true value rewrote secrets, which a VACUUM then removes from the file's free pages.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_V4, 5: _SCHEMA_V5,
                               6: _SCHEMA_V6, 7: _SCHEMA_V7, 8: _SCHEMA_V8, 9: SCHEMA_V9, 10: "",
                               11: _SCHEMA_V11}
_CONVERSIONS: dict[int, Callable[[sqlite3.Connection], object]] = {9: convert_to_v9, 10: scrub_credentials}
# After a migration that frees this share of the file's pages, VACUUM gives them back.
_VACUUM_FREED_SHARE = 0.25


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
    secrets_rewritten = False
    if version < SCHEMA_VERSION:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in re.sub(r"--[^\n]*", "", _MIGRATIONS[v]).split(";"):  # comments may hold a ';'
                    if stmt.strip():
                        conn.execute(stmt)
                if v in _CONVERSIONS and _CONVERSIONS[v](conn):
                    secrets_rewritten = True
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(v),))
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)  # a failed ROLLBACK must not hide why the migration failed
            raise
        if version:
            _give_back_space(conn, secrets_rewritten)
    # touch every table so that damage shows now, not in the middle of a collect loop
    # "corrupt" is SQLite's verdict only: quick_check when the file is small or its header
    # disagrees with its size (it may be sound: _check_file)
    if path.exists() and (full_check or path.stat().st_size <= _QUICK_CHECK_MAX_BYTES):
        found = [line for (row,) in conn.execute("PRAGMA quick_check(20)") for line in str(row).splitlines()]
        if found != ["ok"]:
            raise StoreError(f"store {path} is corrupt: {_first_finding(found)}")
    else:
        for t in ("targets", "engines", "layouts", "segments", "engine_last", "interval_chunks", "spec_rollups",
                  "step_rollups", "events"):
            conn.execute(f"SELECT * FROM {t} LIMIT 1").fetchall()


def _first_finding(found: list[str]) -> str:
    """quick_check's first finding, not its header (``*** in database main ***`` says where,
    not what), with how many more there are."""
    what = [line.strip() for line in found if line.strip() and not line.startswith("***")]
    if not what:
        return "quick_check failed"
    return what[0] + (f" (and {len(what) - 1} more finding(s))" if len(what) > 1 else "")


def _give_back_space(conn: sqlite3.Connection, secrets_rewritten: bool = False) -> None:
    """VACUUM after a migration that freed much of the file (version 9 drops the sample
    history): the file shrinks to what it holds. Without room for the copy VACUUM writes, the
    store stays as migrated, its free pages reused by the next writes. After rewriting
    secrets (version 10) always, and the WAL checkpointed and emptied: the old text must leave
    the free pages and the WAL's frames."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    if secrets_rewritten or (pages and free >= _VACUUM_FREED_SHARE * pages):
        try:
            conn.execute("VACUUM")
        except sqlite3.OperationalError:
            pass  # a full disk: nothing is lost, the free pages stay in the file
    if secrets_rewritten:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
