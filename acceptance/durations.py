"""The duration syntax of configs and scenarios: seconds, or a number with s, m, h or d."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_seconds(value) -> float | None:
    """Seconds from a number of seconds or a duration like "90s", "15m", "7d"; None when
    ``value`` is neither (a bool is not a number here). Range checks are the caller's."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    m = _DURATION.match(str(value))
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)] if m else None
