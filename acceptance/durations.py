"""The duration syntax of configs, options and scenarios: seconds, or a number with s, m, h or d;
read (duration_seconds) and written (format_duration exactly, approximate_duration rounded);
and the one way an instant is written (format_clock).
"""

from __future__ import annotations

import re
import time

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_seconds(value: object) -> float | None:
    """Seconds from a number of seconds or a duration like "90s", "15m", "7d"; None when
    ``value`` is neither (a bool is not a number here). Range checks are the caller's."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    m = _DURATION.match(str(value))
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)] if m else None


def format_duration(seconds: float) -> str:
    """``seconds`` in the syntax, exactly: the largest unit that divides it ("15m", "2h",
    "7d"), else seconds ("3601s")."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def approximate_duration(seconds: float) -> str:
    """``seconds`` in the syntax, rounded: one decimal in the largest unit it holds twice (or
    once exactly): "15m", "2h", "1.5d", "90s"."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= 2 * size or (seconds >= size and seconds % size == 0):
            value = seconds / size
            return f"{value:.0f}{unit}" if abs(value - round(value)) < 0.05 else f"{value:.1f}{unit}"
    return f"{seconds:.0f}s"


def format_clock(t: float) -> str:
    """UTC wall time of an epoch second: '2026-07-29 08:15:00 UTC' (every view's wording)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
