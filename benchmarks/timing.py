"""Wall time of a benchmark's repeated call: the one timer the benchmark scripts share."""

from __future__ import annotations

import time


def timed(fn, repeat: int, *, warm_up: bool = False):
    """(the last result of ``fn()``, the seconds of each of ``repeat`` calls), after one call
    left out of the figures when ``warm_up`` (imports and caches)."""
    if warm_up:
        fn()
    seconds, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - t0)
    return result, seconds
