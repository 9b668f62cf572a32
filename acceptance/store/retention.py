"""Retention: raw rows past ``retention_s`` and rollups past ROLLUP_RETENTION_FACTOR times it
are deleted, chunks astride a cut rewritten (module docstring of acceptance.store)."""

from __future__ import annotations

from .disk import full_error, rollback
from .codecs import (
    CHUNK_SPANS,
    ROLLUP_LEVELS,
    ROLLUP_RETENTION_FACTOR,
    _IntervalChunk,
    _SpecRollupChunk,
    _StepRollupChunk,
    _kept,
)
from .state import _StoreState


class _Retention(_StoreState):
    """Store methods of retention."""

    def apply_retention(self, now: float) -> None:
        """Delete scrape intervals, engine totals, failures and cycles older than ``now −
        retention_s`` (each engine's newest sample, in engine_last, is the next delta's
        baseline and stays); rollups and events older than ``now − ROLLUP_RETENTION_FACTOR ·
        retention_s``. No-op without a retention."""
        before, self._last_retention = self._last_retention, now
        if self.retention_s is None:
            return
        raw_cut = now - self.retention_s
        roll_cut = now - ROLLUP_RETENTION_FACTOR * self.retention_s
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            for eid in self._engine_refs:
                c.execute("DELETE FROM engine_totals WHERE engine_id = ? AND time < ?", (eid, raw_cut))
            self._trim_chunks(raw_cut, roll_cut)
            for tid in self._targets:  # (target, time) is the key: a range per target, not a scan
                c.execute("DELETE FROM failures WHERE target_id = ? AND time < ?", (tid, raw_cut))
            c.execute("DELETE FROM cycles WHERE time < ?", (raw_cut,))
            c.execute("DELETE FROM events WHERE time < ?", (roll_cut,))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('raw_from', ?)", (repr(raw_cut),))
            c.execute("COMMIT")
        except BaseException as e:
            rollback(c)  # SQLITE_FULL may have rolled back already: its error is the one to raise
            full = full_error(e, self.path, "this scrape cycle was stored, but no old row was deleted "
                              "(retention runs again at the next cycle)", stored=True)
            if full is not None:
                self._last_retention = before
                raise full from e
            raise
        finally:
            self._chunk_cache = {}  # rewritten chunks are reloaded on the next write

    def _trim_chunks(self, raw_cut: float, roll_cut: float) -> None:
        """Delete chunk entries older than the cuts: level-0 entries with time < raw_cut,
        rollup buckets with b + level < roll_cut; chunks astride a cut are rewritten."""
        c = self.conn
        span0 = CHUNK_SPANS[0]
        c.execute("DELETE FROM interval_chunks WHERE chunk + span < ?", (raw_cut,))
        # Plugin chunks go whole once all of them is past a cut; windows select their rows by
        # key, and read level 0 only where raw rows are kept (acceptance.windows._plan).
        c.execute("DELETE FROM plugin_chunks WHERE level = 0 AND chunk + ? < ?", (span0, raw_cut))
        for level in ROLLUP_LEVELS:
            c.execute("DELETE FROM plugin_chunks WHERE level = ? AND chunk + ? <= ?",
                      (level, CHUNK_SPANS[level], roll_cut - level))
        for eid, ch, seg, lay, it_lay, span, sealed, *cols in c.execute(
                "SELECT engine_id, chunk, seg_id, layout_id, it_layout_id, span, sealed, n, code, flags, first_start, "
                "data FROM interval_chunks WHERE chunk < ?", (raw_cut,)).fetchall():
            old = _IntervalChunk.decode(tuple(cols), width=self._row_width(lay, it_lay))
            keep = [i for i, t in enumerate(old.times) if t >= raw_cut]
            new = _kept(old, _IntervalChunk(), ("times", "cycles", "starts", "itl", "rows"), keep)
            self._rewrite_chunk("interval_chunks", ("engine_id", "chunk", "seg_id", "layout_id", "it_layout_id"),
                                (eid, ch, seg, lay, it_lay),
                                None if new is None else (span, sealed, *new.encode(packed=bool(sealed))))
        for level in ROLLUP_LEVELS:
            span = CHUNK_SPANS[level]
            lowest = roll_cut - level  # a bucket goes once all of it is older than the cut
            for table in ("spec_rollups", "step_rollups"):
                c.execute(f"DELETE FROM {table} WHERE level = ? AND chunk + ? <= ?", (level, span, lowest))
            for eid, ch, seg, lay, *cols in c.execute(
                    "SELECT engine_id, chunk, seg_id, layout_id, n, code, buckets, ends, counts "
                    "FROM spec_rollups WHERE level = ? AND chunk < ?", (level, lowest)).fetchall():
                old_spec = _SpecRollupChunk.decode(ch, level, tuple(cols))
                keep = [i for i, b in enumerate(old_spec.buckets) if b >= lowest]
                new_spec = _kept(old_spec, _SpecRollupChunk(), ("buckets", "intervals", "first_start", "last_end",
                                                                "deltas", "packed"), keep)
                self._rewrite_chunk("spec_rollups", ("engine_id", "level", "chunk", "seg_id", "layout_id"),
                                    (eid, level, ch, seg, lay), None if new_spec is None else new_spec.encode(ch, level))
            for eid, ch, it_lay, *cols in c.execute(
                    "SELECT engine_id, chunk, it_layout_id, n, buckets, itl, it_code, it_delta, mix_code, batch_mix "
                    "FROM step_rollups WHERE level = ? AND chunk < ?", (level, lowest)).fetchall():
                old_step = _StepRollupChunk.decode(ch, level, tuple(cols))
                keep = [i for i, b in enumerate(old_step.buckets) if b >= lowest]
                new_step = _kept(old_step, _StepRollupChunk(), ("buckets", "itl", "it"), keep)
                if new_step is not None:
                    new_step.batch_mix = {k: v for k, v in old_step.batch_mix.items() if k[0] >= lowest}
                self._rewrite_chunk("step_rollups", ("engine_id", "level", "chunk", "it_layout_id"),
                                    (eid, level, ch, it_lay),
                                    None if new_step is None else new_step.encode(self._width(it_lay), ch, level))

    def _rewrite_chunk(self, table: str, key_columns: tuple[str, ...], key: tuple[object, ...],
                       rest: tuple[object, ...] | None) -> None:
        """Replace the chunk row of ``key`` by key + ``rest`` (its other columns, in table
        order); None: delete it (nothing in it was kept)."""
        self.conn.execute(f"DELETE FROM {table} WHERE " + " AND ".join(f"{k} = ?" for k in key_columns), key)
        if rest is not None:
            self.conn.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(key) + len(rest)))})", key + rest)
