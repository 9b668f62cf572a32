"""How far a decision on the specialized decode path rests on the configured speedup.

vLLM's Kimi K3 specialized kernels make a step that fits them (model.specialized) faster by
``specialized_speedup``, a configured figure (1.5–2× published for the decode micro-benchmark)
that no window checks: at the deployed γ every clean step that fits runs the one path, and
the engine's latency sets the cost model's level, not the ratio of the two paths. A
candidate whose batches fit the path gains with the speedup s, one whose batches run stock
does not, so which γ is best can turn on s. ``decision_break_even`` finds the speedups over
which the decision's γ stays within min_gain of the best at the point, and says so when
another γ wins within BREAK_EVEN_MARGIN of the configured range; ``speedup_probe`` prices a
probe at that other γ, whose latency beside the fleet's measures s
(model.probe.measured_speedup); the decision's rule ``specialized`` (model.decision.rules) puts
both into the decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import numpy.typing as npt

from acceptance.segment_measures import RouteTraffic

from ..deployment import DECISION_CERTAINTY, PERCENTILE_OBJECTIVES, Deployment
from .plan import PROBE_ENGINES, PROBE_MIN_DRAFTS, ProbeRun, Probe, probe_duration, priced_probe
from ..speedup import projected_speedup


# How far outside the configured specialized_speedup a flip of the best γ still makes the
# decision rest on that figure: the published figures of these kernels differ by about this
# much between the decode micro-benchmark (1.5–2×) and end to end (1.68× at P90), and the
# window cannot check it (every step at the deployed γ that fits runs the one path).
BREAK_EVEN_MARGIN = 0.25
BREAK_EVEN_BOUNDS = (1.0, 4.0)  # searched: from no speedup at all to twice the published best
_BREAK_EVEN_STEP = 0.1  # grid of the search, then bisected to _BREAK_EVEN_TOLERANCE
_BREAK_EVEN_TOLERANCE = 0.005
_VALUE_GRID = 25  # speedups the probe's value is averaged over
_HALFWIDTH_POINTS = 5  # ... and those the measurement's predicted half-width is priced at
# Scrape intervals a speedup probe runs at least (an hour at 15 s): a probe's latency is that
# of the batches it happened to run, and its share of the gauge samples says how far those
# may stray from the route's mix (model.probe.measured_speedup draws them apart). Measured on
# the decision benchmark's slow-edge class (40 seeds): after 30 minutes the round-2 gain was
# unsure in about a third of its windows (mean regret of the second recommendation 4.0%),
# after an hour in fewer (2.7%).
SPEEDUP_PROBE_ROWS = 240


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
    configured: tuple[float, float]  # the speedup range priced: configured, or measured
    source: str = "configured"  # "measured": from a probe's latency (model.probe.measured_speedup)

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
        if self.source == "measured":
            return (f"gamma {self.gamma} rests on the specialized decode speedup measured from the probe's latency "
                    f"({told}; {' and '.join(self._flips())} would gain more than min_gain): the measurement "
                    f"prices both paths with the cost model's shape; measure both paths' step times "
                    f"(`specdec calibrate plan`, then cost_profile = the table) to be sure")
        return (f"gamma {self.gamma} rests on the specialized decode speedup, which the window cannot check "
                f"(configured {told}; {' and '.join(self._flips())} would gain more than min_gain): measure "
                f"both paths' step times (`specdec calibrate plan`, then cost_profile = the table), or run "
                f"the other gamma on one engine (a probe) and the tool measures it from the latency")

    def _flips(self) -> list[str]:
        flips = []
        if self.holds_from is not None:
            flips.append(f"below {self.holds_from:.2f}× gamma {self.gamma_below}")
        if self.holds_to is not None:
            flips.append(f"above {self.holds_to:.2f}× gamma {self.gamma_above}")
        return flips

    def to_dict(self) -> dict[str, object]:
        return {"gamma": self.gamma, "holds_from": self.holds_from, "holds_to": self.holds_to,
                "gamma_below": self.gamma_below, "gamma_above": self.gamma_above,
                "configured": list(self.configured), "source": self.source, "rests_on_configuration": self.rests_on_configuration,
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


def speedups_at(step_time_terms: tuple[np.ndarray, np.ndarray], al_point: npt.NDArray[np.float64]
                ) -> Callable[[float], np.ndarray]:
    """The point speedups (G,) at any specialized speedup s (``al_point``: (M, G) AL of the tail
    models; ``step_time_terms``: (fixed, scaled), each (G,), the step time over the mix at s
    being fixed + scaled / s, as the cost model says: model.speedup.CostModel.speedup_terms; no
    undrafted steps on this path)."""
    fixed, scaled = step_time_terms

    def speedups(speedup: float) -> np.ndarray:
        tau = fixed + scaled / speedup
        point: np.ndarray = projected_speedup(al_point, tau[0] / tau, tau[0] / tau, None).mean(axis=0)
        return point

    return speedups


def decision_break_even(speeds_at: Callable[[float], np.ndarray], deployment: Deployment, allowed: npt.ArrayLike,
                        final: int) -> SpecializedBreakEven | None:
    """specialized_break_even of the decision's γ ``final`` at the point (``speeds_at``: the
    point speedups at a specialized speedup, speedups_at); None off the specialized path and on
    a percentile objective (its speedups are the requests')."""
    if deployment.decode_backend != "latency_specialized" or deployment.objective in PERCENTILE_OBJECTIVES:
        return None

    def winner_at(speedup: float) -> int | None:
        speed = np.where(allowed, speeds_at(speedup), -np.inf)
        best = int(np.argmax(speed))
        return best if speed[best] > (1.0 + deployment.min_gain) * speed[final] else None

    return specialized_break_even(winner_at, final, deployment.specialized_speedup_range)


def speedup_probe(break_even: SpecializedBreakEven | None, speeds_at: Callable[[float], np.ndarray],
                  deployment: Deployment, traffic: RouteTraffic | None, step_time: np.ndarray,
                  ensemble: np.ndarray | None = None,
                  halfwidth_for: Callable[..., Callable[[float], float]] | None = None
                  ) -> Probe | None:
    """A probe at the γ that wins past the flip nearer the configured range, when the decision
    rests on the configured speedup and measuring it pays: the probe's latency against the
    fleet's measures s (model.probe.measured_speedup), which no window at one γ can.

    The figure is doubted downward by BREAK_EVEN_MARGIN (why the break-even warns; a serving
    path gains what the kernels' micro-benchmark promises or less: the one end-to-end figure
    published, 1.68×, lies below its 2× top), so s is taken uniform from the configured
    range's low end divided by 1 + BREAK_EVEN_MARGIN to its high end; with G(s) the probe's
    gain over the fleet's γ at the point curve, m = min_gain, and A(s) whether a change to it
    would then be sure — P(G(s) + ε > m) ≥ DECISION_CERTAINTY, ε the ensemble's gains
    (``ensemble``, the decision's resamples × tail models × speed bins) about their mean:
    measuring s leaves the acceptance's doubt, and a gain it cannot settle is not acted on;
    and R(s) whether the
    measurement would tell s from the flip — |s − flip| above the half-width h(s) of the
    interval it is predicted to give (``halfwidth_for(base, gamma, samples)``,
    model.probe.measured_speedup.predicted_halfwidth; gauge samples persist across scrapes,
    about half of them count):
      value = E[G·1{G > m}·A·R] · (horizon − duration)
      cost  = (duration · E[max(0, −G)] + 2 · engine_restart_s) / engines
    in seconds of the route's whole output (as model.probe's). Its drafts: PROBE_MIN_DRAFTS (the
    probe's positions past the fleet's γ are measured too), over at least SPEEDUP_PROBE_ROWS
    rows: its latency is that of the batches it happened to run, which its few gauge samples
    must tell."""
    if break_even is None or not break_even.rests_on_configuration or break_even.source != "configured":
        return None
    rate = None if traffic is None else traffic.drafts_per_engine_second
    engines = None if traffic is None else traffic.engines
    if traffic is None or rate is None or not engines or engines < 2:
        return None  # a probe needs an engine of its own and the fleet's others
    lo, hi = break_even.configured
    below = break_even.holds_from is not None and break_even.holds_from > lo / (1.0 + BREAK_EVEN_MARGIN)
    gamma, base = (break_even.gamma_below if below else break_even.gamma_above), break_even.gamma
    flip = break_even.holds_from if below else break_even.holds_to
    # it rests on the configuration: a flip within the margin, and the γ past it (_first_change gives both)
    assert gamma is not None and flip is not None
    grid = np.linspace(lo / (1.0 + BREAK_EVEN_MARGIN), hi, _VALUE_GRID)
    gains = np.array([(lambda s: s[gamma] / s[base] - 1.0)(speeds_at(float(x))) for x in grid])
    duration = probe_duration(PROBE_MIN_DRAFTS, rate, step_time, gamma=gamma, rate_at=base,
                               min_seconds=SPEEDUP_PROBE_ROWS * traffic.row_seconds)
    spread = np.zeros(1) if ensemble is None else ensemble[:, gamma] / ensemble[:, base] - 1.0
    spread = spread - spread.mean()
    sure = np.mean(gains[:, None] + spread[None, :] > deployment.min_gain, axis=1) >= DECISION_CERTAINTY
    resolved = np.ones(grid.size, dtype=bool)
    if halfwidth_for is not None:
        rows = duration / traffic.row_seconds if traffic.row_seconds > 0 else SPEEDUP_PROBE_ROWS
        h = halfwidth_for(base, gamma, samples=(0.5 * traffic.rows * (engines - 1), 0.5 * rows))
        useful = (gains > deployment.min_gain) & sure
        if useful.any():  # h is smooth in s: priced at a few speedups, interpolated between them
            at = np.linspace(grid[useful].min(), grid[useful].max(), _HALFWIDTH_POINTS)
            widths = np.array([h(float(x)) for x in at])
            resolved[useful] = np.abs(grid[useful] - flip) > np.interp(grid[useful], at, widths)
    value = float(np.mean(np.where((gains > deployment.min_gain) & sure & resolved, gains, 0.0)))
    loss = float(np.mean(np.maximum(0.0, -gains)))
    run = ProbeRun(gamma, PROBE_ENGINES, PROBE_MIN_DRAFTS, duration, PROBE_ENGINES / engines, restarts=2)
    return priced_probe(deployment, run, loss_rate=loss, value_rate=value)
