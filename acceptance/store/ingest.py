"""Ingested sources: per-request rows and log-line intervals of a route (specdec ingest),
keyed so that reading a file twice adds nothing, and their readers."""

from __future__ import annotations

from ..errors import InputError

from typing import Any, Iterable

import numpy as np

from ..counts import IntervalCounts
from .codecs import _pack, unpack_floats
from .disk import full_error, rollback
from .records import INGESTED_SOURCES, IngestResult, IngestedRow, LoggedLoad
from .state import _StoreState


def _load_columns(load: LoggedLoad | None) -> tuple[int | None, float | None, float | None, str | None]:
    """(running, interval_s, generation_tokens, stream) of a LoggedLoad, or four NULLs."""
    if load is None:
        return (None, None, None, None)
    return (int(load.running), float(load.interval_s), float(load.generation_tokens), load.stream)


class _Ingested(_StoreState):
    """Store methods of ingested per-request and log rows."""

    def ingest(self, route: str, source: str, rows: Iterable[IngestedRow]) -> IngestResult:
        """Store per-request or log-line counts for ``route`` in one transaction; rows whose
        key is already stored for the route and source are counted as duplicates (a logged
        interval stored before its load was kept gains it: reading the log again fills it in)."""
        if source not in INGESTED_SOURCES:
            raise InputError(f"ingest source must be one of {', '.join(INGESTED_SOURCES)}, got {source!r}")
        if not route:
            raise InputError("ingest: the route name is empty")
        c = self.conn
        added = dupes = 0
        c.execute("BEGIN IMMEDIATE")
        try:
            for row in rows:
                counts = row.counts
                per_pos = counts.draft_tokens_per_position
                load = row.load
                cur = c.execute(
                    "INSERT OR IGNORE INTO ingested (route, source, time, gamma, counts, draft_per_pos, estimated, key,"
                    " mean_itl_s, decode_tokens, steps, running, interval_s, generation_tokens, stream, prompt_tokens,"
                    " temperature) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (route, source, float(row.time), counts.gamma, _pack(np.asarray(counts.as_vector(), float)),
                     None if per_pos is None else _pack(np.asarray(per_pos, float)), int(row.estimated), row.key,
                     row.mean_itl_s, row.decode_tokens,
                     None if row.steps is None else np.asarray(row.steps, dtype="<i4").tobytes(),
                     *_load_columns(load), row.prompt_tokens, row.temperature))
                if cur.rowcount:
                    added += 1
                    continue
                dupes += 1
                if row.prompt_tokens is not None:  # stored by a specdec that kept no prompt tokens
                    c.execute("UPDATE ingested SET prompt_tokens = ? WHERE route = ? AND source = ? AND key = ?"
                              " AND prompt_tokens IS NULL", (row.prompt_tokens, route, source, row.key))
                if row.temperature is not None:  # stored by a specdec that kept no temperature, or a line without
                    c.execute("UPDATE ingested SET temperature = ? WHERE route = ? AND source = ? AND key = ?"
                              " AND temperature IS NULL", (row.temperature, route, source, row.key))
                if load is not None:  # stored by a specdec that kept no load: this reading fills it in
                    c.execute("UPDATE ingested SET running = ?, interval_s = ?, generation_tokens = ?, stream = ?"
                              " WHERE route = ? AND source = ? AND key = ? AND running IS NULL",
                              (*_load_columns(load), route, source, row.key))
            c.execute("COMMIT")
        except BaseException as e:
            rollback(c)  # SQLITE_FULL may have rolled back already: its error is the one to raise
            full = full_error(e, self.path, f"none of route {route}'s {source} rows were stored; what "
                              f"was stored before is kept, and ingesting again adds only what is missing")
            if full is not None:
                raise full from e
            raise
        return IngestResult(added, dupes)

    def ingested_routes(self) -> dict[str, list[str]]:
        """Routes with ingested data → their sources."""
        out: dict[str, list[str]] = {}
        for route, source in self.conn.execute("SELECT DISTINCT route, source FROM ingested ORDER BY route, source"):
            out.setdefault(route, []).append(source)
        return out

    def ingested_span(self, route: str, source: str) -> tuple[int, float, float] | None:
        """(rows, oldest time, newest time) of the route's rows from ``source``, or None: what a
        window that found none can point at."""
        n, lo, hi = self.conn.execute("SELECT COUNT(*), MIN(time), MAX(time) FROM ingested WHERE route = ? AND "
                                      "source = ?", (route, source)).fetchone()
        return (int(n), float(lo), float(hi)) if n else None

    def ingested_intervals(self, route: str, source: str, start: float, end: float) -> dict[int, IntervalCounts]:
        """γ → one row per ingested request (or logged interval) with time in (start, end],
        in time order; start = end = the row's time."""
        rows = self.conn.execute(
            "SELECT time, gamma, counts FROM ingested WHERE route = ? AND source = ? AND time > ? AND time <= ?"
            " ORDER BY time, id", (route, source, float(start), float(end))).fetchall()
        if not rows:
            return {}
        time_col, gamma_col, blobs = zip(*rows)
        all_times = np.array(time_col, dtype=float)
        gammas = np.array(gamma_col, dtype=np.int64)
        out = {}
        for gamma in np.unique(gammas).tolist():
            at = np.flatnonzero(gammas == gamma)
            times = all_times[at]
            out[gamma] = IntervalCounts(gamma, times, times.copy(), _count_rows([blobs[i] for i in at.tolist()]))
        return out

    def ingested_draft_tokens_per_position(self, route: str, source: str, gamma: int, start: float, end: float
                                           ) -> tuple[float, ...] | None:
        """Σ R_k (drafts that reached position k) over the ingested rows of γ with time in
        (start, end], when every one of them carries R_k (per-request ``detailed``); else None."""
        blobs = [blob for (blob,) in self.conn.execute(
            "SELECT draft_per_pos FROM ingested WHERE route = ? AND source = ? AND gamma = ? AND time > ?"
            " AND time <= ?", (route, source, int(gamma), float(start), float(end)))]
        if not blobs or None in blobs:
            return None
        total = np.zeros(gamma) + _running_sum(_count_rows(blobs))
        return tuple(float(x) for x in total)

    def ingested_itl(self, route: str, source: str, gamma: int, start: float, end: float) -> tuple[float, float]:
        """(Σ mean ITL × tokens, Σ tokens) over the rows of one γ that report a mean
        inter-token latency. vLLM's per-request ``mean_itl_ms`` is decode time / (tokens − 1)
        (vllm/entrypoints/generate/base/serving.py, 0.32 and 0.33): a time per output token,
        so the requests' means are weighted by their decode tokens (tokens − 1) — where a row
        does not know them, by the D + A tokens its drafted steps emitted."""
        rows = self.conn.execute(
            "SELECT mean_itl_s, counts, decode_tokens FROM ingested WHERE route = ? AND source = ? AND gamma = ?"
            " AND time > ? AND time <= ? AND mean_itl_s IS NOT NULL",
            (route, source, int(gamma), float(start), float(end))).fetchall()
        if not rows:
            return 0.0, 0.0
        itl = np.array([row[0] for row in rows], dtype=float)
        decode = np.array([_decode_tokens(blob, tokens) for _, blob, tokens in rows], dtype=float)
        return float(_running_sum(itl * decode)), float(_running_sum(decode))

    def ingested_request_spans(self, routes: Iterable[str], source: str, start: float, end: float
                               ) -> dict[str, np.ndarray]:
        """Every row of ``routes`` with time in (start, end] that reports its mean ITL, in time
        order, as arrays: ``time``, ``gamma``, ``decode_s`` = mean ITL × decode tokens (vLLM's
        generation_time_ms) and ``steps`` = decode tokens − A (each step emits 1 + its
        accepted), the tokens being the D + A its drafted steps emitted where a row does not
        know them (as ``ingested_itl``) — what acceptance.request_load counts."""
        names = list(routes)
        rows = self.conn.execute(
            f"SELECT time, gamma, mean_itl_s, decode_tokens, counts FROM ingested WHERE route IN "
            f"({', '.join('?' * len(names))}) AND source = ? AND time > ? AND time <= ? AND mean_itl_s IS NOT NULL"
            " ORDER BY time, id", (*names, source, float(start), float(end))).fetchall()
        # the rows' γ differ, and so their counts' widths: D and A read row by row
        drafted = np.array([_vector(row[4])[[0, 2]] for row in rows], dtype=float).reshape(-1, 2)
        seconds, steps = _request_latency(_column(rows, 2), _column(rows, 3), drafted[:, 0], drafted[:, 1])
        return {"time": _column(rows, 0), "gamma": np.array([row[1] for row in rows], dtype=int),
                "decode_s": seconds, "steps": steps}

    def ingested_request_latency(self, route: str, source: str, start: float, end: float) -> dict[int, np.ndarray]:
        """γ → (n, 2) per row of ``ingested_intervals`` (same rows, same order): its decode
        seconds and decode steps, as ``ingested_request_spans`` counts them (``_request_latency``)
        — (0, 0) for a row without its mean ITL — a request's own latency, as a scraped block's
        ITL sum and count. Each γ's rows are decoded at once."""
        rows = self.conn.execute(
            "SELECT gamma, mean_itl_s, decode_tokens, counts FROM ingested WHERE route = ? AND source = ? AND "
            "time > ? AND time <= ? ORDER BY time, id", (route, source, float(start), float(end))).fetchall()
        gammas = np.array([row[0] for row in rows], dtype=np.int64)
        itl, decode = _column(rows, 1), _column(rows, 2)
        out = {}
        for gamma in np.unique(gammas).tolist():
            at = np.flatnonzero(gammas == gamma)
            counts = _count_rows([rows[k][3] for k in at.tolist()])
            seconds, steps = _request_latency(itl[at], decode[at], counts[:, 0], counts[:, 2])
            out[gamma] = np.where(np.isnan(itl[at])[:, None], 0.0, np.stack([seconds, steps], axis=1))
        return out

    def ingested_load(self, route: str, source: str, gamma: int, start: float, end: float) -> dict[str, np.ndarray]:
        """The logged intervals of γ with time in (start, end] that carry their load, in time
        order: arrays ``time``, ``interval_s``, ``running``, ``generation_tokens``, ``drafts`` (D,
        counts' first column), ``accepted_tokens`` (A, its third) and ``stream``."""
        rows = self.conn.execute(
            "SELECT time, interval_s, running, generation_tokens, counts, stream FROM ingested WHERE route = ?"
            " AND source = ? AND gamma = ? AND time > ? AND time <= ? AND running IS NOT NULL ORDER BY time, id",
            (route, source, int(gamma), float(start), float(end))).fetchall()
        return {"time": np.array([r[0] for r in rows], dtype=float),
                "interval_s": np.array([r[1] for r in rows], dtype=float),
                "running": np.array([r[2] for r in rows], dtype=float),
                "generation_tokens": np.array([r[3] for r in rows], dtype=float),
                "drafts": np.array([_vector(r[4])[0] for r in rows], dtype=float),
                "accepted_tokens": np.array([_vector(r[4])[2] for r in rows], dtype=float),
                "stream": np.array([r[5] for r in rows], dtype=object)}

    def ingested_step_sequences(self, route: str, source: str, gamma: int, start: float, end: float
                                ) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
        """Each row's (drafted, accepted) per step, in time order, when every row of γ with time
        in (start, end] carries them (per-request ``detailed``); else None."""
        blobs = [blob for (blob,) in self.conn.execute(
            "SELECT steps FROM ingested WHERE route = ? AND source = ? AND gamma = ? AND time > ? AND time <= ?"
            " ORDER BY time, id", (route, source, int(gamma), float(start), float(end)))]
        if not blobs or None in blobs:
            return None
        return _step_pairs(blobs)

    def ingested_request_timing(self, route: str, source: str, gamma: int, start: float, end: float
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean ITL in seconds, decode tokens, prompt tokens) of each row of γ with time in
        (start, end], in the rows' order (ingested_intervals); NaN where a row does not report it."""
        rows = self.conn.execute(
            "SELECT mean_itl_s, decode_tokens, prompt_tokens FROM ingested WHERE route = ? AND source = ?"
            " AND gamma = ? AND time > ? AND time <= ? ORDER BY time, id",
            (route, source, int(gamma), float(start), float(end))).fetchall()
        columns = np.array(rows, dtype=float).reshape(len(rows), 3)  # NULL → NaN
        return columns[:, 0].copy(), columns[:, 1].copy(), columns[:, 2].copy()

    def ingested_request_temperatures(self, route: str, source: str, gamma: int, start: float, end: float
                                      ) -> np.ndarray:
        """Each row's sampling temperature, of γ with time in (start, end], in the rows' order
        (ingested_intervals); NaN where its line gave none."""
        rows = self.conn.execute(
            "SELECT temperature FROM ingested WHERE route = ? AND source = ? AND gamma = ? AND time > ? AND time <= ?"
            " ORDER BY time, id", (route, source, int(gamma), float(start), float(end))).fetchall()
        return np.array([r[0] for r in rows], dtype=float).reshape(len(rows))  # NULL → NaN

    def ingested_decode_tokens(self, route: str, source: str, gamma: int, start: float, end: float
                               ) -> tuple[float, float, float] | None:
        """(Σ decode tokens N, Σ drafts D, Σ accepted A) over the rows of one γ with time in
        (start, end], when every one of them knows its decode tokens; else None."""
        rows = self.conn.execute(
            "SELECT counts, decode_tokens FROM ingested WHERE route = ? AND source = ? AND gamma = ? AND time > ?"
            " AND time <= ?", (route, source, int(gamma), float(start), float(end))).fetchall()
        if not rows:
            return None
        blobs, decode = zip(*rows)
        if None in decode:
            return None
        counts = _count_rows(list(blobs))
        n, d, a = _running_sum(np.column_stack([np.array(decode, dtype=float), counts[:, 0], counts[:, 2]]))
        return float(n), float(d), float(a)


def _vector(blob: bytes) -> np.ndarray:
    """A stored counts vector: ``ingested.counts`` is NOT NULL, so it unpacks to an array."""
    return unpack_floats(blob)


def _column(rows: list[Any], k: int) -> np.ndarray:
    """Column ``k`` of the query's rows as floats, NaN where NULL."""
    return np.array([np.nan if row[k] is None else row[k] for row in rows], dtype=float)


def _request_latency(mean_itl_s: np.ndarray, decode_tokens: np.ndarray, drafts: np.ndarray, accepted: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Requests' decode seconds (mean ITL × decode tokens: vLLM's generation_time_ms) and decode
    steps (decode tokens − A: each step emits 1 + its accepted), their decode tokens the D + A
    their drafted steps emitted where a row does not know them (NaN; as ``_decode_tokens``)."""
    tokens = np.where(np.isnan(decode_tokens), drafts + accepted, decode_tokens)
    return mean_itl_s * tokens, tokens - accepted


def _decode_tokens(counts_blob: bytes, decode_tokens: float | None) -> float:
    """A row's decode tokens (output tokens − 1), or where it does not know them the D + A
    tokens its drafted steps emitted (each drafted step emits 1 + its accepted)."""
    if decode_tokens is not None:
        return float(decode_tokens)
    counts = _vector(counts_blob)
    return float(counts[0] + counts[2])


def _step_pairs(blobs: list[bytes]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(drafted, accepted) tuples of each row's steps blob (the drafted counts, then as many
    accepted, int32). All rows' counts are decoded at once, as bytes where they fit (each
    count at most its γ): tuples of a bytes slice are the fastest way to Python ints."""
    if any(len(blob) % 8 for blob in blobs):
        raise ValueError("a steps blob does not hold pairs of int32 counts")
    values = np.frombuffer(b"".join(blobs), dtype="<i4")
    flat = values.astype(np.uint8).tobytes() if values.size and 0 <= values.min() and values.max() <= 255 else values.tolist()
    out, at = [], 0
    for blob in blobs:
        mid = at + (len(blob) >> 3)
        end = mid + (len(blob) >> 3)
        out.append((tuple(flat[at:mid]), tuple(flat[mid:end])))
        at = end
    return out


def _count_rows(blobs: list[bytes]) -> np.ndarray:
    """The rows' packed float64 vectors as one (rows, width) array: decoded at once where they
    are all as wide (a route's rows of one γ), else stacked one by one."""
    width = len(blobs[0]) if blobs else 0
    if blobs and width and all(len(blob) == width for blob in blobs):
        return np.frombuffer(b"".join(blobs), dtype=np.float64).reshape(len(blobs), width // 8).copy()
    return np.vstack([_vector(blob) for blob in blobs])


def _running_sum(values: np.ndarray) -> np.ndarray:
    """Σ over the first axis, added in row order as a running total (np.add.accumulate, not
    numpy's pairwise sum): the same floats as adding the rows one by one in a loop."""
    total: np.ndarray = np.add.accumulate(values, axis=0)[-1]
    return total
