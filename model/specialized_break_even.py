"""How far a decision on the specialized decode path rests on the configured speedup.

vLLM's Kimi K3 specialized kernels make a step that fits them (model.specialized) faster by
``specialized_speedup``, a configured figure (1.5–2× published for the decode micro-benchmark)
that no window checks: at the deployed γ every clean step that fits runs the one path, and
the engine's latency sets the cost model's level, not the ratio of the two paths. A
candidate whose batches fit the path gains with the speedup s, one whose batches run stock
does not, so which γ is best can turn on s. ``decision_break_even`` finds the speedups over
which the decision's γ stays within min_gain of the best at the point, and says so when
another γ wins within BREAK_EVEN_MARGIN of the configured range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .deployment import PERCENTILE_OBJECTIVES, Deployment
from .speedup import speedup_with_undrafted


# How far outside the configured specialized_speedup a flip of the best γ still makes the
# decision rest on that figure: the published figures of these kernels differ by about this
# much between the decode micro-benchmark (1.5–2×) and end to end (1.68× at P90), and the
# window cannot check it (every step at the deployed γ that fits runs the one path).
BREAK_EVEN_MARGIN = 0.25
BREAK_EVEN_BOUNDS = (1.0, 4.0)  # searched: from no speedup at all to twice the published best
_BREAK_EVEN_STEP = 0.1  # grid of the search, then bisected to _BREAK_EVEN_TOLERANCE
_BREAK_EVEN_TOLERANCE = 0.005


@dataclass(frozen=True)
class SpecializedBreakEven:
    """Over which specialized decode speedups s the decision's γ stays within min_gain of
    the best at the point: from ``holds_from`` to ``holds_to`` (None: to the searched bound,
    1× or 4×); past them ``gamma_below`` / ``gamma_above`` gains more than min_gain over it.
    A candidate whose batches fit the specialized path gains with s, one whose batches run
    stock does not, so which γ is best can turn on s."""

    gamma: int
    holds_from: float | None
    holds_to: float | None
    gamma_below: int | None
    gamma_above: int | None
    configured: tuple[float, float]

    @property
    def rests_on_configuration(self) -> bool:
        """Another γ wins within BREAK_EVEN_MARGIN of the configured range."""
        lo, hi = self.configured
        return ((self.holds_from is not None and self.holds_from > lo / (1.0 + BREAK_EVEN_MARGIN))
                or (self.holds_to is not None and self.holds_to < hi * (1.0 + BREAK_EVEN_MARGIN)))

    def warning(self) -> str | None:
        """One line when the decision's γ rests on the configured figure, else None."""
        if not self.rests_on_configuration:
            return None
        lo, hi = self.configured
        told = f"{lo:.2f}×" if lo == hi else f"{lo:.2f}–{hi:.2f}×"
        flips = []
        if self.holds_from is not None:
            flips.append(f"below {self.holds_from:.2f}× gamma {self.gamma_below}")
        if self.holds_to is not None:
            flips.append(f"above {self.holds_to:.2f}× gamma {self.gamma_above}")
        return (f"gamma {self.gamma} rests on the specialized decode speedup, which the window cannot check "
                f"(configured {told}; {' and '.join(flips)} would gain more than min_gain): measure "
                f"both paths' step times (`specdec calibrate plan`, then cost_profile = the table)")

    def to_dict(self) -> dict:
        return {"gamma": self.gamma, "holds_from": self.holds_from, "holds_to": self.holds_to,
                "gamma_below": self.gamma_below, "gamma_above": self.gamma_above,
                "configured": list(self.configured), "rests_on_configuration": self.rests_on_configuration,
                "warning": self.warning()}


def specialized_break_even(winner_at: Callable[[float], int | None], gamma: int, configured: tuple[float, float]
                           ) -> SpecializedBreakEven | None:
    """Where another γ starts to beat ``gamma`` by more than min_gain (``winner_at(s)``: that
    γ priced at specialized speedup s, None while ``gamma`` holds), searched from the
    configured range's midpoint down to 1× and up to 4× on a 0.1 grid, each change bisected
    to 0.005. None when ``gamma`` does not hold at the midpoint (the decision then rests on
    its doubt, not on this figure)."""
    point = 0.5 * (configured[0] + configured[1])
    if winner_at(point) is not None:
        return None
    holds_from, below = _first_change(winner_at, point, BREAK_EVEN_BOUNDS[0])
    holds_to, above = _first_change(winner_at, point, BREAK_EVEN_BOUNDS[1])
    return SpecializedBreakEven(gamma, holds_from, holds_to, below, above, configured)


def _first_change(winner_at: Callable[[float], int | None], start: float, bound: float
                  ) -> tuple[float | None, int | None]:
    """(the last s from ``start`` toward ``bound`` at which the γ still holds, the γ that
    wins past it); (None, None) when it holds all the way."""
    steps = max(1, int(math.ceil(abs(bound - start) / _BREAK_EVEN_STEP)))
    inside = start
    for s in np.linspace(start, bound, steps + 1)[1:]:
        winner = winner_at(float(s))
        if winner is not None:
            outside = float(s)
            while abs(outside - inside) > _BREAK_EVEN_TOLERANCE:
                middle = 0.5 * (inside + outside)
                there = winner_at(middle)
                if there is None:
                    inside = middle
                else:
                    outside, winner = middle, there
            return round(inside, 3), winner
        inside = float(s)
    return None, None


def decision_break_even(tau_at: Callable[[list[float]], np.ndarray], deployment: Deployment, al_point, allowed,
                        final: int) -> SpecializedBreakEven | None:
    """specialized_break_even of the decision's γ ``final`` at the point (``al_point``: (M, G)
    AL of the tail models; ``tau_at(speeds)``: (len(speeds), G) step time over the mix at
    each specialized speedup, as the candidates are priced); None off the specialized path
    and on a percentile objective (its speedups are the requests')."""
    if deployment.decode_backend != "latency_specialized" or deployment.objective in PERCENTILE_OBJECTIVES:
        return None
    # A step costs fixed + per_inverse / s: the fast path's part scales with 1/s, the stock
    # part and the drafter do not; two pricings give every s exactly (no undrafted steps here).
    at_1, at_2 = tau_at([1.0, 2.0])
    per_inverse = 2.0 * (at_1 - at_2)

    def winner_at(speedup: float) -> int | None:
        tau = at_1 - per_inverse + per_inverse / speedup
        speed = np.where(allowed, speedup_with_undrafted(al_point, tau[0] / tau, tau[0] / tau, None).mean(axis=0),
                         -np.inf)
        best = int(np.argmax(speed))
        return best if speed[best] > (1.0 + deployment.min_gain) * speed[final] else None

    return specialized_break_even(winner_at, final, deployment.specialized_speedup_range)
