"""How numbers read on the pages: a value with its interval, always naming the level, and
"no interval" where none was computed (a value alone would read as if it were exact)."""

from __future__ import annotations

import math

from acceptance.estimates import ScalarEstimate
from specdec.report import approximate_duration, format_clock, format_duration


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def number(x, digits: int = 2) -> str:
    return f"{x:.{digits}f}" if _finite(x) else "—"


def interval(low, high, digits: int = 2) -> str:
    """'[5.41, 5.45]', or '' when either end is missing."""
    return f"[{low:.{digits}f}, {high:.{digits}f}]" if _finite(low) and _finite(high) else ""


NO_INTERVAL = "no interval"


def with_interval(value_text: str, low, high, digits: int) -> str:
    """'5.433 [5.430, 5.435]', or '5.433 (no interval)' when the bounds are missing ('—'
    alone for a missing value)."""
    if value_text == "—":
        return value_text
    bounds = interval(low, high, digits)
    return f"{value_text} {bounds}" if bounds else f"{value_text} ({NO_INTERVAL})"


def estimate(e: ScalarEstimate, digits: int = 3) -> str:
    """'5.433 [5.430, 5.435]' (the value and its interval at e.level), '5.433 (no interval)'."""
    return with_interval(number(e.value, digits), e.low, e.high, digits)


def speedup(value, *bounds, digits: int = 3) -> str:
    """'3.061×' for the value alone; given its bounds (low, high), '3.061× [2.985, 3.112]',
    or '3.061× (no interval)' when they are missing."""
    if not _finite(value):
        return "—"
    point = f"{value:.{digits}f}×"
    if not bounds:
        return point
    low, high = bounds
    return with_interval(point, low, high, digits)


def gain(value, low=None, high=None) -> str:
    """'+9.6% [+8.1%, +11.0%]' (model.decision.Gain's wording, the CLI's); '+9.6% (no
    interval)' without bounds."""
    from model.decision import Gain

    if not _finite(value):
        return "—"
    if not (_finite(low) and _finite(high)):
        return f"{Gain(value, None, None)} ({NO_INTERVAL})"
    return str(Gain(value, low, high))


def percent(x, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%" if _finite(x) else "—"


def sentence(clause: str) -> str:
    """A clause of the model's (lower case, no full stop) as a sentence."""
    return clause[0].upper() + clause[1:] + "."


def level(x: float) -> str:
    """'90%' — the interval level every output names."""
    return f"{100 * x:g}%"


def intervals_said(level_: float, without: list[str], of: int, *, what: str = "interval") -> str:
    """How a chart title or caption names the intervals of ``of`` things (routes, slices)
    ``without`` of which have none: '90% interval'; 'no interval' when none has one; '90%
    interval; none for open' when some lack it."""
    if not without:
        return f"{level(level_)} {what}"
    if len(without) >= of:
        return f"no {what}"
    return f"{level(level_)} {what}; none for {', '.join(without)}"


def clock(t: float | None) -> str:
    """UTC wall time of an epoch second: '2026-07-29 08:15:00 UTC' ('—' for none)."""
    return format_clock(t) if _finite(t) else "—"


duration = format_duration  # "15m", "7d": the CLI's wording
approximate = approximate_duration  # "1.5d", "90s": a computed duration, rounded
