"""How a route's curve moved over its window: each γ segment cut into equal time slices, each estimated alone.

For the dashboard's curve-over-time chart. Counts are never summed across γ (one slice
list per segment); a slice holds the segment's rows whose END lies in (start, end] — the
store's window convention, so a segment's slices add up to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError
from .counts import IntervalCounts
from .estimates import AcceptanceEstimate, estimate_acceptance

if TYPE_CHECKING:
    from .windows import Window


@dataclass(frozen=True)
class CurveSlice:
    """The acceptance of one γ segment over one time slice of a window.

    ``estimate`` is estimate_acceptance over the segment's blocks whose END lies in
    (start, end] — the store's window convention, so the slices of a segment add up to it.
    """

    gamma: int
    start: float
    end: float
    newest_segment: bool  # the slice belongs to the segment the route's estimate describes
    estimate: AcceptanceEstimate
    current_segment: bool = True  # its segment still runs at the window's end (else it is older)


def curve_history(window: Window | None, *, n_slices: int = 6, level: float = 0.9, n_resamples: int = 200,
                  seed: int = 0) -> list[CurveSlice]:
    """How a route's curve moved: each γ segment of ``window`` (an acceptance.windows.RouteWindow)
    cut into ``n_slices`` equal time slices of the WINDOW, each estimated on its own.

    Counts are never summed across γ (one slice list per segment); slices without drafts
    are left out. Oldest first, then by γ.
    """
    if isinstance(n_slices, bool) or not isinstance(n_slices, int) or n_slices < 1:
        raise InputError(f"n_slices must be a positive integer, got {n_slices!r}")
    if window is None:
        return []
    edges = np.linspace(window.start, window.end, n_slices + 1)
    newest = window.newest_segment
    current = window.current_segments
    out: list[CurveSlice] = []
    for segment in window.segments:
        iv = segment.intervals
        for lo, hi in zip(edges[:-1], edges[1:]):
            keep = (iv.end > lo) & (iv.end <= hi)
            if not keep.any():
                continue
            part = IntervalCounts(iv.gamma, iv.start[keep], iv.end[keep], iv.counts[keep])
            if part.total().drafts <= 0:
                continue
            est = estimate_acceptance(part, level=level, n_resamples=n_resamples, seed=seed)
            out.append(CurveSlice(iv.gamma, float(lo), float(hi), segment is newest, est,
                                  any(segment is c for c in current)))
    out.sort(key=lambda s: (s.start, s.gamma))
    return out
