"""How a chunk row's arrays become one compressed blob and back, losslessly: each array's
bytes regrouped by byte position (the shuffle filter of HDF5 and Blosc), times as second
differences of their float64 bit patterns, and the whole deflated (zlib, raw stream).

Why these three: a count's high bytes are zero and a float's sign, exponent and leading
mantissa bits repeat across a chunk, so grouped by byte position they become runs deflate
packs to almost nothing; scrape times 15 s apart have a constant bit-pattern step, so their
second difference is zero but for the scrape's jitter (Prometheus' delta-of-delta, done on
the bit patterns so that it is exact for any float). What stays is the entropy of the
counts themselves and of the ITL sums' low mantissa bits. benchmarks/prometheus_vs_store.py
measures the result against Prometheus on the same data.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_LEVEL = 6  # zlib's default: level 9 gains under 1% on chunk rows at twice the time


def planes(a: npt.NDArray[np.generic]) -> bytes:
    """The bytes of ``a`` (C order) grouped by byte position: every value's first byte, then
    every value's second, and so on."""
    a = np.ascontiguousarray(a)
    k = a.dtype.itemsize
    return a.tobytes() if k == 1 else a.view(np.uint8).reshape(-1, k).T.tobytes()


def time_steps(t: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Second differences of the float64 bit patterns of ``t`` (int64, wrapping: exact; a
    cumulative sum taken twice gives the bit patterns back: codecs._decode_shape)."""
    bits = np.ascontiguousarray(t, dtype=np.float64).view(np.int64)
    return np.diff(bits, n=2, prepend=np.zeros(2, dtype=np.int64))


def pack(parts: Sequence[bytes], deflated: bool) -> bytes:
    """The parts, concatenated, deflated or not (a raw stream: no header, no checksum; SQLite's
    pages are what the store checks). An open hour's rows, which a cycle rewrites, are kept as
    they are, so that a cycle deflates nothing; an hour's row is deflated once, when it is
    sealed (acceptance.store.sealing)."""
    joined = b"".join(parts)
    return zlib.compress(joined, _LEVEL, wbits=-15) if deflated else joined


def unpack(blob: bytes, deflated: bool) -> bytes:
    return zlib.decompress(blob, wbits=-15) if deflated else blob
