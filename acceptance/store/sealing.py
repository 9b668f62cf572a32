"""Sealing: once an engine's samples have moved past an hour, that hour's 5-min interval rows
become one deflated row per (segment, layout, it layout) key — Prometheus' head chunks cut
into a block. An open hour's rows are kept as written, so a cycle rewrites a few entries and
deflates nothing; a closed hour deflates as one (about 17 bytes an interval in
benchmarks/prometheus_vs_store.py) and a window reads one row per engine-hour.

What is left to seal is read from the file (the ``open_interval_chunks`` index over the rows
not yet sealed), not kept in memory, so a collector killed mid-way or a store migrated from
an older schema is sealed by the next cycles all the same."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping

import numpy as np

from .codecs import SEAL_SPAN, IntervalArrays, _encode_interval_chunk, bucket_of, chunk_of, decode_interval_row
from .state import _EngineState, _StoreState

# Engine-hours sealed per write cycle at most: a fleet's hour boundary is spread over a few
# cycles (2,000 engines: 4) instead of costing one cycle a second.
SEAL_PER_CYCLE = 500

_Width = Callable[[int, int], int]  # (layout id, it layout id) → 1 + W + W_it


def hour_of(chunk: float) -> float:
    """The hour holding a 5-min row's entries (its entries lie in (chunk, chunk + 300]): the
    1-h chunk of that 5-min bucket, as the 5-min rollups group them."""
    return chunk_of(chunk, 300)


def seal_hour(conn: sqlite3.Connection, engine_id: int, hour: float, width: _Width) -> None:
    """Rewrite every interval row of the engine in [hour, hour + 1 h) — 5-min rows, and a sealed
    row when the hour was sealed before — as one sealed row per key, its chunk the first row's
    and its span up to the last row's end."""
    rows = conn.execute(
        "SELECT rowid, chunk, span, seg_id, layout_id, it_layout_id, n, code, flags, first_start, data "
        "FROM interval_chunks WHERE engine_id = ? AND chunk >= ? AND chunk < ? ORDER BY chunk",
        (engine_id, hour, hour + SEAL_SPAN)).fetchall()
    groups: dict[tuple[int, int, int], list[tuple[float, float, IntervalArrays]]] = {}
    for _, chunk, span, seg, lay, it_lay, *cols in rows:
        groups.setdefault((seg, lay, it_lay), []).append((chunk, span, decode_interval_row(tuple(cols), width(lay, it_lay))))
    conn.executemany("DELETE FROM interval_chunks WHERE rowid = ?", [(r[0],) for r in rows])
    for (seg, lay, it_lay), parts in groups.items():
        first = parts[0][0]
        end = max(chunk + span for chunk, span, _ in parts)
        a = [np.concatenate(x) for x in zip(*(arrays for _, _, arrays in parts))]
        times, cycles, starts, itl, counts = a
        order = np.argsort(times, kind="stable")  # rows are in chunk order already; a safeguard
        conn.execute("INSERT INTO interval_chunks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (
            engine_id, first, seg, lay, it_lay, end - first, 1, *_encode_interval_chunk(
                times[order], cycles[order], starts[order], itl[order], counts[order].astype(np.float64))))


def closed_hours(conn: sqlite3.Connection, before: float, newest: Mapping[int, float],
                 limit: int | None = None) -> list[tuple[int, float]]:
    """(engine, hour) pairs with unsealed rows in an hour before ``before`` that the engine's
    newest sample (``newest``: engine → time) has left, oldest first, at most ``limit``."""
    out: list[tuple[int, float]] = []
    seen: set[tuple[int, float]] = set()
    for eid, chunk in conn.execute("SELECT engine_id, chunk FROM interval_chunks WHERE sealed = 0 AND chunk < ? "
                                   "ORDER BY chunk", (before,)):
        key = (eid, hour_of(chunk))
        t = newest.get(eid)
        if key in seen or t is None or key[1] >= bucket_of(t, 3600):
            continue
        seen.add(key)
        out.append(key)
        if limit is not None and len(out) >= limit:
            break
    return out


class _Sealing(_StoreState):
    """Store methods of sealing (write_cycle calls it inside the cycle's transaction)."""

    def _seal_closed_hours(self, cycle: float, staged: Mapping[int, _EngineState]) -> None:
        """Seal up to SEAL_PER_CYCLE closed engine-hours, the oldest first. Looked for only when
        an engine's sample of this cycle left an hour, or when hours were left over (the first
        cycle after open or a rollback, a cycle that sealed its limit): an engine gone for good
        leaves its last hour open, and a scan every cycle would read those rows again and again."""
        crossed = any(eid in self._engines and bucket_of(self._engines[eid].time, 3600) < bucket_of(s.time, 3600)
                      for eid, s in staged.items())
        if not (crossed or self._seal_pending):
            return
        newest = {eid: s.time for eid, s in self._engines.items()}
        newest.update((eid, s.time) for eid, s in staged.items())
        hours = closed_hours(self.conn, hour_of(cycle), newest, SEAL_PER_CYCLE)
        self._seal_pending = len(hours) >= SEAL_PER_CYCLE
        for eid, hour in hours:
            seal_hour(self.conn, eid, hour, self._row_width)
            cached = self._chunk_cache.get(("i", eid, 0), {})
            for key in [k for k in cached if k[0] < hour + SEAL_SPAN]:
                del cached[key]  # its row is gone: never written to again (times go forward)

    def _row_width(self, layout_id: int, it_layout_id: int) -> int:
        return 1 + self._width(layout_id) + self._width(it_layout_id)
