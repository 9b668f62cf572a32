"""Where a probe last ran beside the deployed γ: the window a stopped probe measured in.

A probe's segment and the fleet's each keep their own latency (acceptance.windows), and
side by side they measure the specialized decode speedup (model.probe.measured_speedup).
Once the probe stops — the fleet moved to its γ, or it went back — the tuned window holds
one γ again and would price the configured figure, and the speedup probe would ask for
the same probe again. So a window without a probe looks back LOOKBACK_S for the last
span in which two segments of different γ, each with its own latency, ran side by side,
and reads the route's window ending there: the window a tune at that moment would have
read, in which the two are current (acceptance.windows.current_segments). The speedup is a
property of the kernels and the machine, not of the traffic of the hour, so it is priced
in later windows — as measured, saying when (docs/MODEL.md, The specialized decode path).

A long lookback is read at coarse blocks, so a segment's end is known to a block; the
window ending there is read again at the window's own resolution and, where the end moved,
once more (at most three reads, each the source's ordinary window read).
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Callable

from acceptance.errors import InputError
from acceptance.segment_measures import segment_itl_mean_s

from .evidence import window_probe_latency

if TYPE_CHECKING:
    from acceptance.windows import Window

LOOKBACK_S = 7 * 86400.0  # a week: a probe's hour, and the change it led to, are in it
_REREADS = 2  # after the lookback: the window at its own resolution, then once more if the end moved


def last_side_by_side(window: Window) -> float | None:
    """The end of the latest span in which two segments of different γ, each keeping its own
    latency, ran side by side in ``window`` (None: never)."""
    timed = [s for s in window.segments if s.total.drafts > 0 and segment_itl_mean_s(s) is not None]
    ends = [min(a.end, b.end) for a, b in combinations(timed, 2)
            if a.gamma != b.gamma and min(a.end, b.end) > max(a.start, b.start)]
    return max(ends) if ends else None


def has_probe(window: Window | None) -> bool:
    """Whether a segment at another γ with its own latency runs beside the newest one at the
    window's end (model.probe.evidence.window_probe_latency)."""
    newest = window.newest_segment if window is not None else None
    return newest is not None and window_probe_latency(window, newest.gamma) is not None


def earlier_probe_window(read_window: Callable[[float, float], Window], window: Window, window_s: float,
                          lookback_s: float = LOOKBACK_S) -> tuple[Window | None, list[str]]:
    """(the route's window of ``window_s`` ending where a probe last ran beside another γ in
    the ``lookback_s`` before ``window``'s end, both current at its end; the notes to show).
    None where ``window`` holds a probe itself or none ran; None with a note where the
    lookback could not be read — the tune goes on with the window it has.
    ``read_window(start, end)``: the route's source's window read."""
    if has_probe(window):
        return None, []
    try:
        return _last_probe_window(read_window, float(window.end), window_s, lookback_s), []
    except InputError as e:
        return None, [f"the look back for a probe's measured specialized speedup could not be read: {e}"]


def _last_probe_window(read_window: Callable[[float, float], Window], end: float, window_s: float,
                        lookback_s: float) -> Window | None:
    window = read_window(end - lookback_s, end)
    for _ in range(_REREADS):
        until = last_side_by_side(window)
        if until is None:
            return None
        window = read_window(until - window_s, until)
        if has_probe(window):
            return window
    return None


__all__ = ["LOOKBACK_S", "last_side_by_side", "has_probe", "earlier_probe_window"]
