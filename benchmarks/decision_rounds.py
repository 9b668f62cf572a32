"""The decision benchmark's rounds (benchmarks/decision.py): the tool judged as it is run.

Round 1 tunes the window at the deployed γ (one segment, the class's engines). Its decision
is applied —
  change / off  every engine restarts at the recommended γ;
  probe         one engine restarts at γ_probe and runs it for the stated duration (and
                back: two restarts), the others run the recommended γ (the deployed one, or
                the sure step; a restart each when it is new);
  keep          nothing —
and round 2 tunes the next window: the fleet's rows at its γ and, after a probe, the
probe's rows at γ_probe over the probe's duration (at most the window) ending with it —
two current segments of one window, as a collector would store them; a one-engine route's
probe is the route. Round 2's regret is that of the γ it finds best (its recommended γ, or
the farther best expected γ of a sure step or a probe: the benchmark's regret, as round 1's),
and beside it that of the γ its decision has the fleet run (the recommended γ on change /
off / probe, else the deployed one: a keep within min_gain counts its gap), both under the
truth of the deployment the fleet then runs (its batch mix's request weights follow the new γ).

Cost over both windows, in seconds of the route's output and as a share of the two
windows' time (``cost``): Σ traffic share × regret × time over the fleet and the probe,
plus engine_restart_s × 1/engines per engine restart.
The seeds' method through the same protocol: it deploys its pick (no gate; a restart when it
moves) and picks again from the next window's equivalent p. Keeping the deployed γ keeps
its regret and costs nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from decision_scenarios import DecisionClass
from decision_truth import SCRAPE_S, Truth, generate_segment, generate_window

from acceptance.counts import IntervalCounts
from acceptance.estimates import estimate_acceptance
from acceptance.store import EngineRef
from acceptance.windows import GammaSegment, RouteWindow
from model.deployment import Deployment
from specdec.pipeline import TuningOptions, tune_intervals


@dataclass
class RoundTwo:
    """Round 2 of one seed, for the tool and the seeds' method."""

    regret: float  # of round 2's best expected γ (what it finds: recommended_gamma, or the farther expected_best_gamma)
    decided_regret: float  # of the γ round 2's decision has the fleet run
    recommended_regret: float  # of round 2's recommended_gamma
    speedup_error: float  # round 2's projection at the fleet's γ / its truth − 1
    covered: bool | None  # that truth inside round 2's 90% interval (None: none)
    decision: str  # round 2's
    probed: bool  # round 1 decided probe
    reverted: bool  # round 1 moved the fleet and round 2 moves it back to the deployed γ (a flap)
    cost: float  # both windows' lost output, restarts and the probe included, / their time
    seeds_regret: float  # the seeds' method's round-2 pick
    seeds_speedup_error: float
    seeds_covered: bool | None
    seeds_cost: float


def route_window(parts: list[tuple[IntervalCounts, int, object, object]], shape, name: str
                 ) -> RouteWindow:
    """One window of γ segments ``parts`` (rows, engines, their ITL per row or (sum, count), their own
    step shape), each running to the window's end, each with its own gauge samples as the
    store keeps them (None for the shape: a source that keeps none per segment); the shape's
    latency is the route's, over every part."""
    segments, first = [], 0
    for rows, engines, itl, own in parts:
        refs = [EngineRef(f"http://127.0.0.1:1/{name}", "m", str(first + e)) for e in range(engines)]
        first += engines
        # per scrape interval (n, 2), as the store keeps it, or the segment's (sum, count) alone
        per_row = np.asarray(itl, dtype=float) if np.ndim(itl) == 2 else None
        itl_sum, itl_count = per_row.sum(axis=0) if per_row is not None else itl
        segments.append(GammaSegment(rows.gamma, float(rows.start[0]), float(rows.end[-1]), refs, rows,
                                     engines_at_end=refs, itl_sum_s=float(itl_sum), itl_count=float(itl_count),
                                     batch_samples=None if own is None else
                                     {b: u * own.samples for b, u in own.batch_time_shares.items()},
                                     block_latency=per_row))
    start = min(s.start for s in segments)
    end = max(s.end for s in segments)
    count = sum(s.itl_count for s in segments)
    shape = replace(shape, itl_mean_s=sum(s.itl_sum_s for s in segments) / count if count else None)
    return RouteWindow([], start, end, segments, [], shape, [], [])


def shifted(rows: IntervalCounts, offset: float) -> IntervalCounts:
    return IntervalCounts(rows.gamma, rows.start + offset, rows.end + offset, rows.counts)


def tune_window(cls: DecisionClass, parts, shape, deployment: Deployment, *, level: float, n_resamples: int,
                seed: int):
    """tune-gamma on a window of ``parts``; the fleet's (first) part is the deployed segment."""
    window = route_window(parts, shape, cls.name)
    return tune_intervals(cls.name, parts[0][0], deployment, window=window,
                          options=TuningOptions(level=level, n_resamples=n_resamples, seed=seed))


def moved_truth(cls: DecisionClass, truth: Truth, gamma: int) -> Truth:
    """The truth once the fleet runs ``gamma`` (the time shares hold other requests at another γ)."""
    if gamma in (0, cls.deployed_gamma):
        return truth
    return Truth(replace(cls, deployed_gamma=int(gamma)), truth.specialized_speedup)


def fleet_gamma(rec) -> int:
    """The γ a decision has the fleet run."""
    return rec.recommended_gamma if rec.decision in ("change", "off", "probe") else rec.deployed_gamma


def _regret(speedups: np.ndarray, allowed: np.ndarray, gamma: int) -> float:
    return 1.0 - float(speedups[gamma]) / float(np.max(np.where(allowed, speedups, -np.inf)))


@dataclass(frozen=True)
class _Applied:
    """What round 1's decision deploys for round 2."""

    fleet: int
    probe: int | None
    probe_s: float
    restarts: float  # engine restarts
    fleet_engines: int


def _applied(cls: DecisionClass, rec) -> _Applied:
    fleet = fleet_gamma(rec)
    moved = cls.engines if fleet != cls.deployed_gamma else 0
    if rec.decision != "probe" or rec.probe is None:
        return _Applied(fleet, None, 0.0, moved, cls.engines)
    probe_engines = min(rec.probe.engines, cls.engines)
    rest = cls.engines - probe_engines
    return _Applied(fleet, rec.probe.gamma, float(rec.probe.duration_s),
                    2 * probe_engines + (rest if fleet != cls.deployed_gamma else 0), rest)


def round_two(cls: DecisionClass, truth: Truth, rec1, deployment: Deployment, seeds_gamma: int,
              seeds_pick, rng: np.random.Generator, seed: int, *, level: float, n_resamples: int) -> RoundTwo:
    """Apply round 1's decision, generate the next window, tune it, score it (module docstring).
    ``seeds_pick(estimate) -> γ``: the seeds' method's pick from a window's estimate."""
    w, e = cls.window_s, cls.engines
    restart = deployment.engine_restart_s
    first = _regret(truth.speedups(w), truth.allowed, cls.deployed_gamma) * w
    plan = _applied(cls, rec1)
    # the truth of what the fleet runs; a one-engine route's probe is the route
    truth2 = moved_truth(cls, truth, plan.fleet if plan.fleet_engines else plan.probe)
    true2 = truth2.speedups(2 * w)
    rec2 = None
    if plan.fleet != 0 or plan.probe is not None:
        rec2 = _tune_round_two(cls, truth, truth2, plan, deployment, rng, seed, level=level, n_resamples=n_resamples)
    gamma2 = plan.fleet if rec2 is None else fleet_gamma(rec2)
    found = gamma2 if rec2 is None else (rec2.expected_best_gamma if rec2.expected_best_gamma is not None
                                         else rec2.recommended_gamma)
    cand = {} if rec2 is None else {c.gamma: c for c in rec2.candidates}
    c2 = cand.get(found)
    s2 = float(true2[found])
    second = (plan.fleet_engines / e) * _regret(true2, truth2.allowed, plan.fleet) * w
    if plan.probe is not None:
        probe_s = min(plan.probe_s, w) if plan.fleet_engines else w
        second += ((e - plan.fleet_engines) / e) * _regret(true2, truth2.allowed, plan.probe) * probe_s
        if plan.fleet_engines:  # the probe back at the fleet's γ for the rest of the window
            second += ((e - plan.fleet_engines) / e) * _regret(true2, truth2.allowed, plan.fleet) * (w - probe_s)
    cost = (first + second + plan.restarts * restart / e) / (2 * w)
    seeds = _seeds_round_two(cls, truth, seeds_gamma, seeds_pick, rng, restart)
    return RoundTwo(
        regret=_regret(true2, truth2.allowed, found),
        decided_regret=_regret(true2, truth2.allowed, gamma2),
        recommended_regret=_regret(true2, truth2.allowed, gamma2 if rec2 is None else rec2.recommended_gamma),
        speedup_error=math.nan if c2 is None else c2.speedup / s2 - 1.0,
        covered=None if c2 is None or c2.speedup_low is None else bool(c2.speedup_low <= s2 <= c2.speedup_high),
        decision="off" if rec2 is None else rec2.decision,
        probed=plan.probe is not None,
        reverted=plan.fleet != cls.deployed_gamma and gamma2 == cls.deployed_gamma,
        cost=cost,
        **seeds,
    )


def _tune_round_two(cls, truth: Truth, truth2: Truth, plan: _Applied, deployment, rng, seed, *, level, n_resamples):
    """Round 2's window (the fleet's rows, and a probe's) tuned."""
    w = cls.window_s
    parts, shape = [], None
    if plan.fleet_engines and plan.fleet:
        fleet_cls = replace(truth2.cls, engines=plan.fleet_engines)
        rows, shape, itl = generate_segment(fleet_cls, truth2, rng, t0=w)
        parts.append((shifted(rows, w), plan.fleet_engines, itl, shape))
    if plan.probe is not None:
        probe_truth = moved_truth(cls, truth, plan.probe)
        probe_s = w if not plan.fleet_engines else max(SCRAPE_S, min(w, SCRAPE_S * round(plan.probe_s / SCRAPE_S)))
        probe_cls = replace(probe_truth.cls, engines=cls.engines - plan.fleet_engines, window_s=probe_s)
        rows, probe_shape, itl = generate_segment(probe_cls, probe_truth, rng, t0=2 * w - probe_s)
        parts.append((shifted(rows, 2 * w - probe_s), cls.engines - plan.fleet_engines, itl, probe_shape))
        shape = shape or probe_shape
    if not parts:
        return None
    return tune_window(cls, parts, shape, deployment, level=level, n_resamples=n_resamples,
                       seed=seed + 1).recommendation


def _seeds_round_two(cls: DecisionClass, truth: Truth, gamma: int, pick, rng, restart: float) -> dict:
    """The seeds' method deployed at its round-1 pick, picking again from the next window:
    its regret, projection error and coverage there, and its cost over both windows."""
    w = cls.window_s
    truth2 = moved_truth(cls, truth, gamma)
    true2 = truth2.speedups(2 * w)
    first = _regret(truth.speedups(w), truth.allowed, cls.deployed_gamma) * w
    restarts = cls.engines if gamma != cls.deployed_gamma else 0
    second = _regret(true2, truth2.allowed, gamma) * w
    cost = (first + second + restarts * restart / cls.engines) / (2 * w)
    if gamma == 0:  # speculation off: nothing to measure, the pick stays
        return {"seeds_regret": _regret(true2, truth2.allowed, 0), "seeds_speedup_error": 0.0,
                "seeds_covered": None, "seeds_cost": cost}
    rows, _ = generate_window(truth2.cls, truth2, rng, t0=w)
    g2, projected, low, high = pick(estimate_acceptance(rows, n_resamples=200))
    s2 = float(true2[g2])
    return {"seeds_regret": _regret(true2, truth2.allowed, g2), "seeds_speedup_error": projected / s2 - 1.0,
            "seeds_covered": None if low is None else bool(low <= s2 <= high), "seeds_cost": cost}
