"""Chunk rows: the packed arrays the store keeps per engine and span (module docstring of
acceptance.store), one codec per kind — scrape intervals ("i"), spec rollups ("s"), step
rollups ("t"), plugin deltas ("p") — and the bucket arithmetic they share."""

from __future__ import annotations

import math
import zlib
from array import array
from collections.abc import Sequence
from typing import NamedTuple, TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

from .packing import pack, planes, time_steps, unpack

_F64: TypeAlias = npt.NDArray[np.float64]
# the columns of an interval_chunks row after its key, span and seal: (n, code, flags,
# first_start, data), as _encode_interval_chunk gives them and decode_interval_row reads them
_IntervalColumns: TypeAlias = tuple[int, int, int, float | None, bytes]
_Chunk = TypeVar("_Chunk")


@overload
def _pack(v: None) -> None: ...
@overload
def _pack(v: npt.ArrayLike) -> bytes: ...


def _pack(v: npt.ArrayLike | None) -> bytes | None:
    return None if v is None else np.ascontiguousarray(v, dtype=np.float64).tobytes()


@overload
def unpack_floats(b: None) -> None: ...
@overload
def unpack_floats(b: bytes) -> _F64: ...


def unpack_floats(b: bytes | None) -> _F64 | None:
    return None if b is None else np.frombuffer(b, dtype=np.float64)


def bucket_of(t: float, level: int) -> float:
    """The rollup bucket b holding an interval that ends at t: t ∈ (b, b + level]."""
    return float((math.ceil(t / level) - 1) * level)


ROLLUP_LEVELS = (300, 3600)  # seconds: 5 min and 1 h
ROLLUP_RETENTION_FACTOR = 4  # rollups outlive raw rows by this factor (retention)

# level → seconds one stored chunk row spans: 5-min chunks of scrape intervals (level 0) while
# their hour is open (a closed hour is sealed into one row: SEAL_SPAN), hours of 5-min
# buckets, days of 1-h buckets. A week of a route's engines is then ~8 rows per engine
# instead of ~170, and an hour of scrape intervals one row instead of 240.
CHUNK_SPANS: dict[int, float] = {0: 300.0, 300: 3600.0, 3600: 86400.0}

COUNT_DTYPES: dict[int, type] = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.float64}
_CHUNK_TABLES = {"i": "interval_chunks", "s": "spec_rollups", "t": "step_rollups", "p": "plugin_chunks"}


def chunk_of(bucket: float, level: int) -> float:
    """The chunk row holding rollup bucket ``bucket`` of ``level``: floor(b / span) · span."""
    span = CHUNK_SPANS[level]
    return float(math.floor(bucket / span) * span)


def narrowest_type(m: _F64, narrow: bool = True) -> tuple[int, npt.NDArray[np.generic]]:
    """The smallest exact type of a count matrix, as (code, the matrix in it): unsigned
    integers when every value is whole and fits (scrape-interval deltas are small counts),
    else float64 (NaN, fractions). ``narrow`` False: float64 without looking — a row a cycle
    rewrites (an open hour's, an open rollup chunk's) is narrowed once, when it is closed."""
    if not narrow:
        return 8, np.asarray(m, dtype=np.float64)
    if m.size == 0:
        return 1, m.astype(np.uint8)
    lo, hi = m.min(), m.max()
    if lo >= 0 and hi <= 0xFFFFFFFF and bool((m == np.floor(m)).all()):  # NaN compares False
        code = 1 if hi <= 0xFF else 2 if hi <= 0xFFFF else 4
        return code, m.astype(COUNT_DTYPES[code])
    return 8, np.asarray(m, dtype=np.float64)


# flags of an interval_chunks row: the arrays it stores beside times and counts (the others
# are derived: cycles equal to times, start[i] = time[i - 1], ITL deltas of zero), and whether
# its blob is deflated (a sealed row) or as written (an open hour's: packing.pack)
_CYCLES, _STARTS, _ITL, _DEFLATED = 1, 2, 4, 8
SEAL_SPAN = CHUNK_SPANS[300]  # an engine's 5-min rows of a closed hour become one row per key (acceptance.store.sealing)


class IntervalArrays(NamedTuple):
    """One interval_chunks row's entries: times (interval ends), cycles, starts, ITL deltas
    (n, 2) and the count matrix (n, 1 + W + W_it) in its stored type."""

    times: _F64
    cycles: _F64
    starts: _F64
    itl: _F64
    counts: npt.NDArray[np.generic]


def _encode_interval_chunk(times: _F64, cycles: _F64, starts: _F64, itl: _F64, counts: _F64,
                           packed: bool = True) -> _IntervalColumns:
    """(n, code, flags, first_start, data) column values of an interval chunk row, from
    float64 arrays (n,), (n,), (n,), (n, 2), (n, 1 + W + W_it): times as bit-pattern second
    differences, cycles and starts only where they differ from what times give, the counts
    in their narrowest exact type, all in one blob deflated (acceptance.store.packing) — but
    for a row the write path rewrites every cycle (``packed`` False: an open hour's), kept as
    written, its counts float64. The write path's open chunks, sealing and the bulk loader all encode
    through it."""
    bits = times.view(np.int64)
    parts = [planes(time_steps(times))]
    flags = 0
    if not np.array_equal(cycles, times):
        flags |= _CYCLES
        parts.append(planes(cycles.view(np.int64) - bits))
    contiguous = np.array_equal(starts[1:], times[:-1])
    if not contiguous:
        flags |= _STARTS
        parts.append(planes(bits - starts.view(np.int64)))
    code, narrow = narrowest_type(counts, packed)
    parts.append(planes(np.ascontiguousarray(narrow.T)))
    if itl.any():
        flags |= _ITL
        parts.append(planes(np.asarray(itl, dtype=np.float64).T))  # column by column
    first = float(starts[0])
    if packed:
        flags |= _DEFLATED
    return (len(times), code, flags, None if (not contiguous or math.isnan(first)) else first, pack(parts, packed))


def decode_interval_row(columns: _IntervalColumns, width: int) -> IntervalArrays:
    """The entries of a stored row: ``columns`` as _encode_interval_chunk gives them,
    ``width`` = 1 + W + W_it of its layouts."""
    return decode_interval_rows([columns], width)[0][1]


def decode_interval_rows(rows: Sequence[_IntervalColumns], width: int
                         ) -> list[tuple[list[int], IntervalArrays]]:
    """The entries of many rows of one width, decoded in one numpy pass per shape (n, code,
    flags): [(the rows' positions in ``rows``, their entries concatenated in that order)]. A
    window's edges read hundreds of rows, and a row at a time costs more than its inflate."""
    shapes: dict[tuple[int, int, int], list[int]] = {}
    for i, (n, code, flags, _, _) in enumerate(rows):
        shapes.setdefault((n, code, flags), []).append(i)
    return [(at, _decode_shape(n, code, flags, width, [rows[i] for i in at])) for (n, code, flags), at in shapes.items()]


def _decode_shape(n: int, code: int, flags: int, width: int, rows: Sequence[_IntervalColumns]) -> IntervalArrays:
    k = len(rows)
    raw = np.frombuffer(b"".join(unpack(r[4], bool(flags & _DEFLATED)) for r in rows), dtype=np.uint8).reshape(k, -1)
    at = 0

    def take(dtype: npt.DTypeLike, count: int) -> npt.NDArray[np.generic]:
        """(k, count) values of each row's next ``planes`` run."""
        nonlocal at
        dt = np.dtype(dtype)
        part = raw[:, at:at + count * dt.itemsize].reshape(k, dt.itemsize, count)
        at += count * dt.itemsize
        return np.ascontiguousarray(part.transpose(0, 2, 1)).view(dt).reshape(k, count)

    bits = np.cumsum(np.cumsum(take(np.int64, n), axis=1), axis=1)
    times = bits.view(np.float64)
    cycles = (take(np.int64, n) + bits).view(np.float64) if flags & _CYCLES else times
    if flags & _STARTS:
        starts = (bits - take(np.int64, n)).view(np.float64)
    else:
        starts = np.empty((k, n))
        starts[:, 1:] = times[:, :-1]
        starts[:, 0] = [math.nan if r[3] is None else r[3] for r in rows]
    counts = take(COUNT_DTYPES[code], n * width).reshape(k, width, n).transpose(0, 2, 1).reshape(k * n, width)
    itl = take(np.float64, 2 * n).reshape(k, 2, n).transpose(0, 2, 1).reshape(k * n, 2) if flags & _ITL \
        else np.zeros((k * n, 2))
    return IntervalArrays(times.reshape(-1), cycles.reshape(-1), starts.reshape(-1), itl.astype(np.float64), counts)


def _kept(old: _Chunk, new: _Chunk, fields: tuple[str, ...], keep: list[int]) -> _Chunk | None:
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

    def __init__(self) -> None:
        self.rowid: int | None = None  # the stored row, updated in place
        self.times: list[float] = []
        self.cycles: list[float] = []
        self.starts: list[float] = []
        self.itl: list[Sequence[float]] = []  # (sum, count) pairs: tuples written, lists decoded
        self.rows: list[Sequence[float] | _F64] = []  # lists written, arrays decoded

    def encode(self, packed: bool = False) -> _IntervalColumns:
        """The row's columns, by the one encoder of interval chunks (bulk loads use it too);
        not packed by default: the write path rewrites an open hour's rows every cycle."""
        return _encode_interval_chunk(np.array(self.times), np.array(self.cycles), np.array(self.starts),
                                      np.array(self.itl, dtype=np.float64).reshape(-1, 2),
                                      np.array(self.rows, dtype=np.float64), packed)

    @classmethod
    def decode(cls, columns: _IntervalColumns, width: int) -> "_IntervalChunk":
        """The chunk of a stored row: ``columns`` as encode() gives them, ``width`` = 1 + W + W_it
        of its layouts."""
        a = decode_interval_row(columns, width)
        c = cls()
        c.times, c.cycles, c.starts = a.times.tolist(), a.cycles.tolist(), a.starts.tolist()
        c.itl = a.itl.tolist()
        c.rows = list(a.counts.astype(np.float64))
        return c


class _SpecRollupChunk:
    """Open spec rollup chunk: per bucket, Σ deltas, intervals, first start, last end."""

    __slots__ = ("buckets", "intervals", "first_start", "last_end", "deltas", "packed", "rowid")

    def __init__(self) -> None:
        self.rowid: int | None = None
        self.buckets: list[float] = []
        self.intervals: list[float] = []
        self.first_start: list[float] = []
        self.last_end: list[float] = []
        self.deltas: list[_F64] = []
        self.packed: list[bytes | None] = []  # each bucket's open counts row, float64 (None: stale)

    def add(self, bucket: float, start: float, end: float, delta: _F64) -> None:
        if self.buckets and self.buckets[-1] == bucket:  # an engine's times only go forward
            self.deltas[-1] = self.deltas[-1] + delta
            self.intervals[-1] += 1
            self.first_start[-1] = min(self.first_start[-1], start)
            self.last_end[-1] = max(self.last_end[-1], end)
            self.packed[-1] = None
        else:
            self.buckets.append(bucket)
            self.intervals.append(1.0)
            self.first_start.append(start)
            self.last_end.append(end)
            self.deltas.append(delta)
            self.packed.append(None)

    def encode(self, chunk: float, level: int, closed: bool = True) -> _SpecRollupColumns:
        """The row's columns (encode_spec_rollup); an open chunk's (``closed`` False) with its
        counts float64, packed from the lists as they are: the write path rewrites it every
        cycle (the same bytes encode_spec_rollup gives with ``narrow`` False)."""
        if closed:
            return encode_spec_rollup(chunk, level, self.buckets, np.column_stack([self.first_start, self.last_end]),
                                      np.column_stack([self.intervals, np.vstack(self.deltas)]))
        ends = array("d", [x for pair in zip(self.first_start, self.last_end) for x in pair]).tobytes()
        for i, row in enumerate(self.packed):  # only the newest bucket changes between cycles
            if row is None:
                self.packed[i] = array("d", [self.intervals[i], *self.deltas[i].tolist()]).tobytes()
        return len(self.buckets), 8, bucket_indexes(self.buckets, chunk, level), ends, b"".join(
            row for row in self.packed if row is not None)

    @classmethod
    def decode(cls, chunk: float, level: int, columns: _SpecRollupColumns) -> "_SpecRollupChunk":
        c = cls()
        buckets, ends, counts = decode_spec_rollup(chunk, level, columns)
        c.buckets, c.first_start, c.last_end = buckets.tolist(), ends[:, 0].tolist(), ends[:, 1].tolist()
        c.intervals, c.deltas = counts[:, 0].tolist(), list(counts[:, 1:])
        c.packed = [None] * len(c.buckets)
        return c


# the columns of a spec_rollups row after its key: (n, code, bucket indexes, ends, counts)
_SpecRollupColumns: TypeAlias = tuple[int, int, bytes, bytes, bytes]
# the columns of a step_rollups row after its key: (n, bucket indexes, itl, it code, it delta,
# mix code, batch mix)
_StepRollupColumns: TypeAlias = tuple[int, bytes, bytes, int, bytes | None, int, bytes]


def bucket_indexes(buckets: Sequence[float], chunk: float, level: int) -> bytes:
    """A rollup row's buckets as their uint8 index in its chunk (at most 24: CHUNK_SPANS)."""
    return bytes(round((float(b) - chunk) / level) for b in buckets)


def _bucket_values(chunk: float, level: int, index: bytes) -> _F64:
    """A rollup row's buckets from their uint8 indexes (bucket_indexes)."""
    return chunk + np.frombuffer(index, dtype=np.uint8).astype(np.float64) * level


def encode_spec_rollup(chunk: float, level: int, buckets: Sequence[float], ends: _F64,
                       counts: _F64) -> _SpecRollupColumns:
    """(n, code, bucket indexes, ends, counts) of a spec_rollups row: its buckets (n,), the first
    start and last end of each (n, 2) float64, and [intervals, delta (W)] (n, 1 + W) in their
    narrowest exact type. Rollup rows are not deflated: a window reads thousands of them, each
    array joined across rows and read in one numpy call, and they are an eighth of the bytes."""
    code, m = narrowest_type(np.asarray(counts, dtype=np.float64))
    return (len(buckets), code, bucket_indexes(buckets, chunk, level),
            np.ascontiguousarray(ends, dtype=np.float64).tobytes(), m.tobytes())


def decode_spec_rollup(chunk: float, level: int, columns: _SpecRollupColumns) -> tuple[_F64, _F64, _F64]:
    """(buckets (n,), ends (n, 2), counts (n, 1 + W) float64) of one spec_rollups row."""
    n, code, index, ends, counts = columns
    return (_bucket_values(chunk, level, index), np.frombuffer(ends).reshape(n, 2),
            np.frombuffer(counts, dtype=COUNT_DTYPES[code]).astype(np.float64).reshape(n, -1))


class _StepRollupChunk:
    """Open step rollup chunk: per bucket ITL sums and iteration-token deltas, and the
    batch mix as (bucket, batch size, samples) triples."""

    __slots__ = ("buckets", "itl", "it", "batch_mix", "rowid")

    def __init__(self) -> None:
        self.rowid: int | None = None
        self.buckets: list[float] = []
        self.itl: list[list[float]] = []
        self.it: list[_F64 | None] = []
        self.batch_mix: dict[tuple[float, int], int] = {}

    def add(self, bucket: float, itl_sum: float, itl_count: float, it_delta: _F64 | None, batch: int) -> None:
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

    def encode(self, width: int, chunk: float, level: int, closed: bool = True) -> _StepRollupColumns:
        """The row's columns (encode_step_rollup); iteration-token deltas NaN where a bucket's
        samples had none; an open chunk's (``closed`` False) in float64."""
        mix = [x for (b, k), n in self.batch_mix.items() for x in (round((b - chunk) / level), k, n)]
        if not closed:  # the bytes encode_step_rollup gives with narrow False, from the lists as they are
            none = [math.nan] * width
            it_b = b"".join(array("d", none if x is None else x.tolist()).tobytes() for x in self.it) if width else None
            return (len(self.buckets), bucket_indexes(self.buckets, chunk, level),
                    array("d", [x for pair in self.itl for x in pair]).tobytes(), 8 if width else 0, it_b, 8,
                    array("d", mix).tobytes())
        it = None
        if width:
            it = np.vstack([np.full(width, math.nan) if x is None else x for x in self.it])
        return encode_step_rollup(chunk, level, self.buckets, np.array(self.itl, dtype=np.float64),
                                  it, np.array(mix, dtype=np.float64).reshape(-1, 3))

    @classmethod
    def decode(cls, chunk: float, level: int, columns: _StepRollupColumns) -> "_StepRollupChunk":
        c = cls()
        buckets, itl, it, mix = decode_step_rollup(chunk, level, columns)
        c.buckets, c.itl = buckets.tolist(), itl.tolist()
        c.it = [None if np.isnan(x).all() else x for x in it] if it is not None else [None] * len(buckets)
        c.batch_mix = {(chunk + i * level, int(b)): int(s) for i, b, s in mix.tolist()}
        return c


def encode_step_rollup(chunk: float, level: int, buckets: Sequence[float], itl: _F64, it: _F64 | None,
                       mix: _F64) -> _StepRollupColumns:
    """(n, bucket indexes, itl, it code, it delta, mix code, batch mix) of a step_rollups row:
    ITL sum and count per bucket (n, 2) float64, iteration-token deltas (n, W_it) and the batch
    mix's (bucket index, batch size ≥ 1, samples) triples (k, 3) in their narrowest exact types."""
    it_code, it_narrow = narrowest_type(it) if it is not None else (0, None)
    mix_code, triples = narrowest_type(np.asarray(mix, dtype=np.float64).reshape(-1, 3))
    return (len(buckets), bucket_indexes(buckets, chunk, level), np.ascontiguousarray(itl, dtype=np.float64).tobytes(),
            it_code, None if it_narrow is None else it_narrow.tobytes(), mix_code, triples.tobytes())


def decode_step_rollup(chunk: float, level: int, columns: _StepRollupColumns
                       ) -> tuple[_F64, _F64, _F64 | None, _F64]:
    """(buckets, itl (n, 2), iteration-token deltas (n, W_it) or None, triples (k, 3)), float64."""
    n, index, itl, it_code, it, mix_code, mix = columns
    return (_bucket_values(chunk, level, index), np.frombuffer(itl).reshape(n, 2),
            None if it is None else np.frombuffer(it, dtype=COUNT_DTYPES[it_code]).astype(np.float64).reshape(n, -1),
            np.frombuffer(mix, dtype=COUNT_DTYPES[mix_code]).astype(np.float64).reshape(-1, 3))


class _PluginChunk:
    """Open plugin chunk: per key (interval end at level 0, bucket start above) the
    summed plugin deltas of one engine segment in one plugin layout."""

    __slots__ = ("keys", "deltas", "rowid")

    def __init__(self) -> None:
        self.rowid: int | None = None
        self.keys: list[float] = []
        self.deltas: list[_F64] = []

    def add(self, key: float, delta: _F64) -> None:
        if self.keys and self.keys[-1] == key:  # an engine's times only go forward
            self.deltas[-1] = self.deltas[-1] + delta
        else:
            self.keys.append(key)
            self.deltas.append(delta)

    def encode(self) -> tuple[int, bytes, int, bytes]:
        code, narrow = narrowest_type(np.vstack(self.deltas))
        return (len(self.keys), _pack(self.keys), code, zlib.compress(narrow.tobytes(), 1))

    @classmethod
    def decode(cls, n: int, keys: bytes, code: int, delta: bytes) -> "_PluginChunk":
        c = cls()
        c.keys = unpack_floats(keys).tolist()
        c.deltas = list(_decode_plugin_delta(n, code, delta))
        return c


def _decode_plugin_delta(n: int, code: int, blob: bytes) -> _F64:
    """(n, W) float64 deltas of a plugin_chunks row."""
    return np.frombuffer(zlib.decompress(blob), dtype=COUNT_DTYPES[code]).astype(np.float64).reshape(n, -1)


def _runs(keys: _F64, offset: int) -> list[tuple[int, int]]:
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
