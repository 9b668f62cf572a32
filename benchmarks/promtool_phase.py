"""Where ``promtool tsdb create-blocks-from rules`` puts a rule group's evaluations: at the
group's slot, as a running Prometheus does (rules.Group.EvalTimestamp), offset into each
interval by the xxhash64 of the group's labels {file, name} modulo the interval — so a
rules file's path alone decides how its evaluations fall between the raw samples.

benchmarks/prometheus_vs_store.py picks the rules file's name to pin that offset: a run
whose evaluations fall on the raw samples' instants, or between them, on purpose.
"""

from __future__ import annotations

import itertools
from pathlib import Path

_M = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                           9650029242287828579, 2870177450012600261)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 (the hash Prometheus' labels.Hash uses), in plain Python: a few µs a short key."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j:i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, int.from_bytes(data[i:i + 8], "little")), 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ (int.from_bytes(data[i:i + 4], "little") * _P1 & _M), 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * _P5 & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = h * _P2 & _M
    h ^= h >> 29
    h = h * _P3 & _M
    return h ^ (h >> 32)


def evaluation_offset_ns(rules_file: str, group: str, interval_s: int) -> int:
    """The group's evaluations' offset into each interval (ns past a multiple of it, Unix
    time): labels {file, name} sorted, each ``name 0xff value 0xff``, hashed, mod the interval."""
    key = b"file\xff" + rules_file.encode() + b"\xffname\xff" + group.encode() + b"\xff"
    return xxh64(key) % (interval_s * 1_000_000_000)


def rules_path_at(folder: Path, group: str, interval_s: int, offset_s: float) -> Path:
    """A rules file's path in ``folder`` whose group evaluates from ``offset_s`` to 0.4 ms after
    it past each interval: the first of rules-0.yml, rules-1.yml, ... that lands there (about
    150,000 names tried, a few seconds). promtool keeps the offset in nanoseconds, Prometheus
    stamps the evaluations to the millisecond: 59.9996 evaluates at a whole minute's instant
    as stamped, but promtool places it just before."""
    period = interval_s * 1_000_000_000
    target_ns = round(offset_s * 1e9) % period
    for i in itertools.count():
        path = folder / f"rules-{i}.yml"
        if (evaluation_offset_ns(str(path), group, interval_s) - target_ns) % period < 400_000:
            return path
    raise AssertionError("unreachable")
