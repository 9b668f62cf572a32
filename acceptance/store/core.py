"""The Store: opening and closing the file, its cached identities and engine states, and the
read snapshot every reader uses; the write path, retention, readers and ingested rows are
its mixins (writes, retention, reads, ingest, bulk)."""

from __future__ import annotations

from ..errors import InputError

import json
import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .bulk import _BulkLoad
from .codecs import unpack_floats
from .disk import full_error
from .ingest import _Ingested
from .reads import _Reads
from .disk import hard_linked, read_only_place
from .records import EngineRef, StoreError, StoreFullError
from .retention import _Retention
from .schema import _check_file, _migrate
from .totals import _Totals
from .state import _EngineState, _TargetState
from .writes import _Writes


class Store(_Writes, _BulkLoad, _Retention, _Reads, _Ingested, _Totals):
    """The SQLite store. Open with ``Store.open(path)``; a context manager."""

    def __init__(self, conn: sqlite3.Connection, path: Path, retention_s: float | None):
        self._conn = conn
        self.path = path
        self.retention_s = retention_s
        self._last_retention: float | None = None
        self._state_unread = False  # True: the cached state may differ from the file (_reload_after_rollback)
        self._refusals_running: dict[int, int] = {}  # engine id → its scrapes refused in a row (store.deltas)
        self._other_lives: dict[int, set[float | None]] = {}  # engine id → other lives told of (store.deltas)
        self._held_targets: dict[int, int] = {}  # target id → its scrapes held by a clock that stepped back
        self.clock_lines: list[str] = []  # the last cycle's words on held targets (writes._say_clock)
        self._clock_held: list[tuple[str, float]] = []
        self._clock_resumed: list[tuple[str, int]] = []
        self._load_state()

    # -------------------------------------------------------------- open / close

    @classmethod
    def open(cls, path: str | Path, *, retention_s: float | None = None, reading: bool = False) -> "Store":
        """Create or open the store at ``path`` (StoreError when it cannot be used; StoreFullError
        when its disk is full). ``reading``: the caller only reads, so a store on a full disk is
        opened read-only rather than refused."""
        path = Path(path)
        if retention_s is not None and not (math.isfinite(retention_s) and retention_s > 0):
            raise InputError(f"retention {retention_s!r} must be a positive number of seconds")
        header_short = _check_file(path)
        if not reading and (linked := hard_linked(path)) is not None:
            raise StoreError(linked)
        read_only = read_only_place(path)
        if read_only is not None:
            if not reading:
                raise StoreError(f"store {path} is read-only ({read_only}): this command writes to it; point --db "
                                 f"(or [store] path) at a writable place")
            return cls._open_immutable(path, header_short, read_only)
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
            full = full_error(e, path, "it cannot be opened for writing; what it holds is kept")
            if full is None:
                raise _unusable(e, path) from None
            if not reading:
                raise full from None
        return cls._open_read_only(path, header_short, full.reason)

    @classmethod
    def _open_read_only(cls, path: Path, header_short: bool, why_full: str) -> "Store":
        """The store on a full disk, for reading: SQLite could not grow the WAL index (-shm),
        so it reads the WAL into memory itself (``readonly_shm``: exact, WAL frames included).
        A store that needs a migration cannot be read so: it is told as the full disk it is."""
        unreadable = StoreFullError(path, why_full, "it cannot be read until space is freed; what it holds is kept")
        return cls._open_reading_as(path, header_short, "readonly_shm=1", unreadable, unreadable)

    @classmethod
    def _open_immutable(cls, path: Path, header_short: bool, read_only: str) -> "Store":
        """A store on a read-only file system (or a file this process may not write), for
        reading: SQLite reads it as immutable (no WAL index, no lock to take), which is exact
        only when no WAL holds writes not yet checkpointed into the file; a store that holds
        them, or needs a migration, is refused in one line saying what to do."""
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"store {path} is read-only ({read_only}) and its WAL holds writes not yet checkpointed "
                             f"into it, which a read-only open cannot read: read it where it is writable, or run "
                             f"sqlite3 {path} 'PRAGMA wal_checkpoint(TRUNCATE)' there first")
        return cls._open_reading_as(
            path, header_short, "immutable=1", StoreError(f"store {path} is read-only ({read_only}) and cannot be read"),
            StoreError(f"store {path} is read-only ({read_only}) and of an older schema, which opening it where it is "
                       f"writable upgrades"))

    @classmethod
    def _open_reading_as(cls, path: Path, header_short: bool, mode: str, unopened: StoreError,
                         unmigrated: StoreError) -> "Store":
        """The store opened read-only with SQLite's URI ``mode`` (and ``mode=ro``): ``unopened``
        when SQLite cannot open it, ``unmigrated`` when it needs what only a writer can do."""
        try:
            conn = sqlite3.connect(path.resolve().as_uri() + f"?mode=ro&{mode}", uri=True, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error:
            raise unopened from None
        try:
            _migrate(conn, path, full_check=header_short)  # at the current version it only reads
            return cls(conn, path, None)
        except StoreError:
            conn.close()
            raise
        except sqlite3.Error:
            conn.close()
            raise unmigrated from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
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
        self._chunk_cache = {}
        self._dirty = {}
        self._closing = {}  # rollup chunks left this cycle, written once more closed (writes._open_chunk)
        self._open_rowids = {}  # table → the lowest rowid given an open row (writes._open_rowid)
        self._seal_pending = True  # hours may be left to seal (acceptance.store.sealing)
        self._column_lists = {}  # table → its columns for an INSERT that sets the rowid (writes._columns)
        self._engines: dict[int, _EngineState] = {}
        for eid, t, seg, lay, created, value, itl_s, itl_c, it_lay, it_val, p_lay, p_val in c.execute(
                "SELECT engine_id, time, seg_id, layout_id, created, value, itl_sum, itl_count, it_layout_id, "
                "it_value, plugin_layout_id, plugin_value FROM engine_last"):
            self._engines[eid] = _EngineState(
                eid, t, seg, self._segment_gamma.get(seg, 0) if seg is not None else 0, lay, created,
                unpack_floats(value), itl_s, itl_c, it_lay, unpack_floats(it_val), p_lay, unpack_floats(p_val))

    def _reload_after_rollback(self) -> None:
        """The ids and baselines as stored, after a rolled-back write. When they cannot be read
        now, the next write reads them first: a baseline of the rolled-back cycle would lose its counts."""
        try:
            self._load_state()
        except sqlite3.Error:
            self._state_unread = True

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
        self._layouts: dict[int, tuple[str, list[str]]] = {}
        for lid, kind, cols in c.execute("SELECT id, kind, columns FROM layouts"):
            self._layout_ids[(kind, cols)] = lid
            self._layouts[lid] = (kind, json.loads(cols))
        self._layout_by_columns: dict[tuple[str, tuple[str, ...]], int] = {
            (kind, tuple(cols)): lid for lid, (kind, cols) in self._layouts.items()}
        self._iteration_layouts: dict[tuple[float, ...], int] = {}  # bucket bounds → layout id
        self._segment_gamma: dict[int, int] = {}
        self._segment_engine: dict[int, int] = {}
        for sid, eid, gamma in c.execute("SELECT id, engine_id, gamma FROM segments"):
            self._segment_gamma[sid] = gamma
            self._segment_engine[sid] = eid

    @contextmanager
    def read_snapshot(self) -> Iterator[Store]:
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


def _unusable(e: sqlite3.Error, path: Path) -> StoreError:
    """SQLite's refusal in words that do not call a sound file corrupt: "corrupt" is its own
    verdict only (SQLITE_CORRUPT, SQLITE_NOTADB); a lock, a permission or an I/O error is not damage."""
    code = (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return StoreError(f"store {path} is corrupt: {e}")
    return StoreError(f"store {path} cannot be used: {e}")


_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
