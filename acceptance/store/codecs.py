"""Chunk rows: the packed arrays the store keeps per engine and span (module docstring of
acceptance.store), one codec per kind — scrape intervals ("i"), spec rollups ("s"), step
rollups ("t"), plugin deltas ("p") — and the bucket arithmetic they share."""

from __future__ import annotations

import math
import zlib
from array import array
from collections.abc import Sequence
from typing import TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

_F64: TypeAlias = npt.NDArray[np.float64]
# the columns of an interval_chunks row after its key: (n, code, times, cycles, first_start,
# starts, counts, itl), as _encode_interval_chunk gives them and _IntervalChunk.decode reads them
_IntervalColumns: TypeAlias = tuple[int, int, bytes, bytes | None, float | None, bytes | None, bytes, bytes | None]
_Chunk = TypeVar("_Chunk")


@overload
def _pack(v: None) -> None: ...
@overload
def _pack(v: npt.ArrayLike) -> bytes: ...


def _pack(v: npt.ArrayLike | None) -> bytes | None:
    return None if v is None else np.ascontiguousarray(v, dtype=np.float64).tobytes()


def _pack_floats(v: list[float]) -> bytes:
    """float64 bytes of a list of floats (cheaper than numpy for the short lists of a chunk)."""
    return array("d", v).tobytes()


@overload
def _unpack(b: None) -> None: ...
@overload
def _unpack(b: bytes) -> _F64: ...


def _unpack(b: bytes | None) -> _F64 | None:
    return None if b is None else np.frombuffer(b, dtype=np.float64)


def bucket_of(t: float, level: int) -> float:
    """The rollup bucket b holding an interval that ends at t: t ∈ (b, b + level]."""
    return float((math.ceil(t / level) - 1) * level)


ROLLUP_LEVELS = (300, 3600)  # seconds: 5 min and 1 h
ROLLUP_RETENTION_FACTOR = 4  # rollups outlive raw rows by this factor (retention)

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


def _narrow(m: _F64) -> tuple[int, bytes]:
    """The smallest exact encoding of a count matrix: unsigned integers when every value is
    whole and fits (scrape-interval deltas are small counts), else float64 (NaN, fractions)."""
    if m.size == 0:
        return 1, b""
    lo, hi = m.min(), m.max()
    if lo >= 0 and hi <= 0xFFFFFFFF and bool((m == np.floor(m)).all()):  # NaN compares False
        code = 1 if hi <= 0xFF else 2 if hi <= 0xFFFF else 4
        return code, m.astype(COUNT_DTYPES[code]).tobytes()
    return 8, np.ascontiguousarray(m, dtype=np.float64).tobytes()


def _encode_interval_chunk(times: _F64, cycles: _F64, starts: _F64, itl: _F64, counts: _F64) -> _IntervalColumns:
    """(n, code, times, cycles, first_start, starts, counts, itl) column values of an
    interval chunk row, from float64 arrays (n,), (n,), (n,), (n, 2), (n, 1 + W + W_it); what
    can be derived is stored as NULL (cycles equal to times, starts that are the previous
    time, ITL sums of zero) so a chunk costs little more than its counts. The write path's
    open chunks and the bulk loader both encode through it."""
    same_cycles = np.array_equal(cycles, times)
    contiguous = np.array_equal(starts[1:], times[:-1])
    code, packed = _narrow(counts)
    first = float(starts[0])
    return (len(times), code, times.tobytes(), None if same_cycles else cycles.tobytes(),
            None if (not contiguous or math.isnan(first)) else first, None if contiguous else starts.tobytes(),
            packed, itl.tobytes() if itl.any() else None)


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

    def encode(self) -> _IntervalColumns:
        """The row's columns, by the one encoder of interval chunks (bulk loads use it too)."""
        return _encode_interval_chunk(np.array(self.times), np.array(self.cycles), np.array(self.starts),
                                      np.array(self.itl, dtype=np.float64).reshape(-1, 2),
                                      np.array(self.rows, dtype=np.float64))

    @classmethod
    def decode(cls, columns: _IntervalColumns, width: int) -> "_IntervalChunk":
        """The chunk of a stored row: ``columns`` as encode() gives them (n, code, times, cycles,
        first_start, starts, counts, itl), ``width`` = 1 + W + W_it of its layouts."""
        n, code, times, cycles, first_start, starts, counts, itl = columns
        c = cls()
        c.times = np.frombuffer(times).tolist()
        c.cycles = np.frombuffer(cycles).tolist() if cycles is not None else list(c.times)
        c.starts = (np.frombuffer(starts).tolist() if starts is not None
                    else [first_start if first_start is not None else math.nan] + c.times[:-1])
        c.itl = list(np.frombuffer(itl).reshape(n, 2).tolist()) if itl is not None else [(0.0, 0.0)] * n
        c.rows = list(np.frombuffer(counts, dtype=COUNT_DTYPES[code]).astype(np.float64).reshape(n, width))
        return c


class _SpecRollupChunk:
    """Open spec rollup chunk: per bucket, Σ deltas, intervals, first start, last end."""

    __slots__ = ("buckets", "intervals", "first_start", "last_end", "deltas", "packed", "rowid")

    def __init__(self) -> None:
        self.rowid: int | None = None
        self.packed: list[bytes | None] = []  # float64 bytes of each delta (None: stale)
        self.buckets: list[float] = []
        self.intervals: list[float] = []
        self.first_start: list[float] = []
        self.last_end: list[float] = []
        self.deltas: list[_F64] = []

    def add(self, bucket: float, start: float, end: float, delta: _F64) -> None:
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

    def encode(self) -> tuple[int, bytes, bytes, bytes, bytes, bytes]:
        if self.packed[-1] is None:  # only the newest bucket changes between cycles
            self.packed[-1] = _pack(self.deltas[-1])
        return (len(self.buckets), _pack_floats(self.buckets), _pack_floats(self.intervals),
                _pack_floats(self.first_start), _pack_floats(self.last_end),
                b"".join(b if b is not None else _pack(d) for b, d in zip(self.packed, self.deltas)))

    @classmethod
    def decode(cls, n: int, buckets: bytes, intervals: bytes, first_start: bytes, last_end: bytes,
               delta: bytes) -> "_SpecRollupChunk":
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

    def encode(self, width: int, chunk: float, level: int) -> tuple[int, bytes, bytes, bytes | None, int, bytes]:
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
    def decode(cls, n: int, buckets: bytes, itl: bytes, it_delta: bytes | None, mix_code: int, batch_mix: bytes,
               chunk: float, level: int) -> "_StepRollupChunk":
        c = cls()
        c.buckets = _unpack(buckets).tolist()
        c.itl = _unpack(itl).reshape(n, 2).tolist()
        c.it = ([None if np.isnan(x).all() else x for x in _unpack(it_delta).reshape(n, -1)]
                if it_delta is not None else [None] * n)
        mix: Sequence[Sequence[float]] = np.frombuffer(batch_mix, dtype=COUNT_DTYPES[mix_code]).reshape(-1, 3).tolist()
        c.batch_mix = {(chunk + i * level, int(k)): int(m) for i, k, m in mix}
        return c


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
        code, packed = _narrow(np.vstack(self.deltas))
        return (len(self.keys), _pack_floats(self.keys), code, zlib.compress(packed, 1))

    @classmethod
    def decode(cls, n: int, keys: bytes, code: int, delta: bytes) -> "_PluginChunk":
        c = cls()
        c.keys = _unpack(keys).tolist()
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
