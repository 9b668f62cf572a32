"""How numbers read on the pages: a value with its interval, always naming the level."""

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


def estimate(e: ScalarEstimate, digits: int = 3) -> str:
    """'5.433 [5.430, 5.435]' (the value and its interval at e.level)."""
    text = number(e.value, digits)
    bounds = interval(e.low, e.high, digits)
    return f"{text} {bounds}" if bounds else text


def speedup(value, low=None, high=None, digits: int = 3) -> str:
    """'3.061× [2.985, 3.112]'."""
    if not _finite(value):
        return "—"
    bounds = interval(low, high, digits)
    return f"{value:.{digits}f}×" + (f" {bounds}" if bounds else "")


def gain(value, low=None, high=None) -> str:
    """'+9.6% [+8.1%, +11.0%]' (model.decision.Gain's wording, the CLI's)."""
    from model.decision import Gain

    return str(Gain(value, low, high)) if _finite(value) else "—"


def percent(x, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%" if _finite(x) else "—"


def sentence(clause: str) -> str:
    """A clause of the model's (lower case, no full stop) as a sentence."""
    return clause[0].upper() + clause[1:] + "."


def level(x: float) -> str:
    """'90%' — the interval level every output names."""
    return f"{100 * x:g}%"


def clock(t: float | None) -> str:
    """UTC wall time of an epoch second: '2026-07-29 08:15:00 UTC' ('—' for none)."""
    return format_clock(t) if _finite(t) else "—"


duration = format_duration  # "15m", "7d": the CLI's wording
approximate = approximate_duration  # "1.5d", "90s": a computed duration, rounded
