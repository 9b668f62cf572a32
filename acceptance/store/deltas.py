"""How a scrape's cumulative counters become an interval's increase, and the events that says
— Prometheus ``increase`` across restarts and γ changes, without SQLite.

Spec-decode counters (``spec_increase``), against the engine's previous sample:
- first sighting: a baseline only (what happened before it is not observable);
- the previous sample had none (speculation was off): ``spec_on``, a new segment, and the
  increase is the new value;
- ``_created`` moved forward to a time after the previous scrape, or γ changed (vLLM fixes γ
  at engine start, so a new γ is a new engine even when no counter went down), or, without
  ``_created``, counters went down and none went up: ``restart``,
  and the increase is the new value — a γ change also opens a new segment
  (``gamma_change``);
- a counter went down with ``_created`` unchanged (vLLM's restart always gives new counters a
  new ``_created``), or, without ``_created``, some went down while others went up (a restart
  resets every counter): no restart but an inconsistent scrape (a partial reset, a mixed-up
  exporter) — ``inconsistent``, refused: no increase, and the previous sample stays the one
  the next is compared with. Without ``_created`` a restart whose new life outran the old
  one's last sample looks mixed too; its drafts counter (the fastest-growing) going down tells
  it. An engine refused ``REBASE_AFTER`` times running is taken as it is from then on (event
  ``rebaseline``, no increase): its counters stay set back, and what it did meanwhile is lost;
- else new − previous; columns the previous sample lacked are unknown (NaN);
- a ``_created`` that went back, or that moved forward to a time before the previous scrape
  (by more than ``CLOCK_SLACK_S``, the engines' and the collector's clocks apart): another
  life, not a restart — a new life cannot begin before the old one, nor while the old one
  still answered. Refused as ``other_life`` (no increase, the previous sample kept): one way
  it happens is a URL that reaches more than one engine in turn (a load-balanced service),
  whose lives alternate; the engine first seen is counted exactly, the other never, and the
  message says each engine must be listed as a target of its own;
- counters gone (``spec_off_event``): speculation switched off, no increase.
A delta is never negative and never doubled. Other counters (ITL sum and count, the
iteration-token buckets, the plugin's) follow ``counter_increase``: the new value after the
engine's restart or their own drop, else new − previous.
"""

from __future__ import annotations

from ..durations import format_clock
from ..errors import InputError

from dataclasses import dataclass
from typing import overload

import numpy as np

Event = tuple[str, str]  # (kind, detail)


@dataclass(frozen=True)
class SpecSample:
    """One engine's spec-decode counters at one scrape: ``value`` [D, T, A, A_1..A_γ, (drafts
    per position)], None when the engine did not speculate."""

    time: float
    gamma: int
    created: float | None
    value: np.ndarray | None


@dataclass(frozen=True)
class SpecIncrease:
    """The interval's increase of the spec-decode vector (None: a baseline only), whether it
    opens a new engine segment, whether the engine restarted, and the events, in order."""

    delta: np.ndarray | None
    new_segment: bool
    restart: bool
    events: tuple[Event, ...]
    refused: str | None = None  # why the scrape is inconsistent: nothing of it is stored
    other_life: bool = False  # refused as another engine life than the one counted (module docstring)


# The most a new life's _created may precede the previous scrape and still be a restart: the
# engines' clocks and the collector's apart (NTP keeps them within milliseconds; a collector's
# clock that stepped back is held apart, acceptance.store.writes).
CLOCK_SLACK_S = 60.0


def spec_increase(prev: SpecSample | None, new: SpecSample) -> SpecIncrease:
    """The rules of the module docstring, from the engine's previous sample (None: a first
    sighting) to this one, which speculates."""
    assert new.value is not None
    gamma, value = new.gamma, new.value
    if prev is None:
        return SpecIncrease(None, True, False, ())
    if prev.value is None:
        return SpecIncrease(value.copy(), True, False, (("spec_on", f"speculation on, gamma {gamma}"),))
    other = _other_life(prev, new)
    if other:
        return SpecIncrease(None, False, False, (("inconsistent", f"scrape refused: {other}"),), other, True)
    inconsistent = _inconsistent(prev.gamma, prev.created, prev.value, gamma, new.created, value)
    if inconsistent:
        return SpecIncrease(None, False, False, (("inconsistent", f"scrape refused: {inconsistent}"),), inconsistent)
    why = _restart_reason(prev.gamma, prev.created, prev.value, gamma, new.created, value)
    events: tuple[Event, ...] = (("restart", f"restarted: {why}"),) if why else ()
    if gamma != prev.gamma:
        return SpecIncrease(value.copy(), True, True, events + (("gamma_change", f"gamma {prev.gamma} -> {gamma}"),))
    if why:
        return SpecIncrease(value.copy(), False, True, events)
    return SpecIncrease(_difference(prev.value, value, gamma), False, False, ())


def _other_life(prev: SpecSample, new: SpecSample) -> str | None:
    """Why ``new``'s ``_created`` is another life than a restart of ``prev``'s, or None."""
    if new.created is None or prev.created is None or new.created == prev.created:
        return None
    if new.created < prev.created:
        what = "its _created went back: a new life cannot begin before the old one"
    elif new.created < prev.time - CLOCK_SLACK_S:
        what = ("its _created is before the previous scrape: that life was already running while the other "
                "answered")
    else:
        return None
    return (f"{what} (lives created {format_clock(prev.created)} and {format_clock(new.created)}); the URL "
            f"reaches more than one engine (a load-balanced service?): list each engine's own URL as a target")


def spec_off_event() -> Event:
    return ("spec_off", "speculation off: the spec-decode families vanished")


_SPEC_NAMES = ("drafts", "draft tokens", "accepted tokens")
# An engine whose scrapes are refused as inconsistent this many times running keeps its
# counters set back: it is taken as it is (a new baseline) rather than refused forever.
REBASE_AFTER = 3


def _inconsistent(prev_gamma: int, prev_created: float | None, prev_value: np.ndarray, gamma: int,
                  created: float | None, value: np.ndarray) -> str | None:
    """Why a scrape of one engine (same ``_created``, same γ) is neither an increase nor a
    restart, or None: some counters went down while others went up (module docstring)."""
    if gamma != prev_gamma or (created is not None and prev_created is not None and created != prev_created):
        return None
    n = 3 + gamma
    down = np.flatnonzero(value[:n] < prev_value[:n])
    if not down.size:
        return None
    went_down = int(down[0])
    fell = f"{_counter_name(went_down)} went down ({prev_value[went_down]:g} -> {value[went_down]:g})"
    if created is not None and prev_created is not None:  # vLLM's restart always changes _created
        return f"{fell} with the same _created: a restart starts new counters with a new _created"
    up = np.flatnonzero(value[:n] > prev_value[:n])
    if not up.size or value[0] < prev_value[0]:
        return None  # no _created: all down, or drafts down, is a restart (its new life may outrun the old)
    return (f"{fell} while {_counter_name(int(up[0]))} went up, with no _created to tell a restart by: a restart "
            f"resets every counter")


def _counter_name(column: int) -> str:
    return _SPEC_NAMES[column] if column < 3 else f"accepted at position {column - 3}"


def _restart_reason(prev_gamma: int, prev_created: float | None, prev_value: np.ndarray, gamma: int,
                    created: float | None, value: np.ndarray) -> str | None:
    """Why the engine restarted, or None: ``_created`` changed, a counter went down, γ changed."""
    if created is not None and prev_created is not None and created != prev_created:
        return "its _created time changed"
    common = 3 + min(gamma, prev_gamma)
    if bool(np.any(value[:common] < prev_value[:common])):
        return "a counter went down"
    if gamma != prev_gamma:
        return "its gamma changed"
    return None


def _difference(prev_value: np.ndarray, value: np.ndarray, gamma: int) -> np.ndarray:
    """new − previous over [D, T, A, A_1..A_γ]; the extra columns (drafts per position) only
    when the previous sample had them too, else NaN: unknown for this interval."""
    n = 3 + gamma
    delta = np.full(len(value), np.nan)
    delta[:n] = value[:n] - prev_value[:n]
    if len(value) > n and len(prev_value) == len(value):
        delta[n:] = value[n:] - prev_value[n:]
    return delta


@overload
def counter_increase(prev: np.ndarray, value: np.ndarray, restart: bool) -> np.ndarray: ...
@overload
def counter_increase(prev: None, value: np.ndarray, restart: bool) -> np.ndarray | None: ...


def counter_increase(prev: np.ndarray | None, value: np.ndarray, restart: bool) -> np.ndarray | None:
    """A counter vector's increase: the new value after the engine's restart or when one of
    them went down, else new − previous; None without a previous value unless the engine
    restarted (then the new value counts whole)."""
    if prev is None:
        return value.copy() if restart else None
    if restart or bool(np.any(value < prev)):
        return value.copy()
    increase: np.ndarray = value - prev
    return increase


def itl_increase(prev_sum: float | None, prev_count: float | None, itl_sum: float | None, itl_count: float | None,
                 restart: bool, *, seen_before: bool) -> tuple[float | None, float | None]:
    """The ITL sum and count's increase (``counter_increase`` on the pair); (None, None) when
    the page has no ITL or there is nothing to compare with."""
    if itl_sum is None or itl_count is None or not seen_before:
        return None, None
    prev = None if prev_sum is None or prev_count is None else np.array([prev_sum, prev_count])
    d = counter_increase(prev, np.array([itl_sum, itl_count]), restart)
    return (None, None) if d is None else (float(d[0]), float(d[1]))


def history_increase(cumulative: np.ndarray) -> np.ndarray:
    """(n − 1, W): the increases of one engine's history at one γ, sample by sample — the
    ordinary rule of ``spec_increase``, new − previous, vectorised for the bulk loader. A
    history with a restart (a counter going down) is refused: its increases are not this."""
    delta = np.diff(cumulative, axis=0)
    if np.any(delta < 0):
        raise InputError("a counter goes down: a restart, which a bulk history cannot hold")
    return delta
