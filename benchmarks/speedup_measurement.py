"""How well a probe's latency measures the specialized decode speedup, priced at each
segment's own batch mix against the route's (model.probe.measured_speedup).

    python benchmarks/speedup_measurement.py [--seeds 60] [--json]

The decision benchmark's `cost-specialized-slow-edge-g3` class (told 1.5–2.0×, truly 1.25×):
per seed, one window of the fleet at one γ and a one-engine probe at the other, each
segment's rows, latency and gauge samples generated from the truth (decision_truth), both
ways round (fleet 3 / probe 7 and fleet 7 / probe 3). The window is tuned twice: with each
segment's own gauge samples, as the store and Prometheus keep them, and without them (both
segments priced at the route's — the fleet's — batch mix, as before). Prints per side and
way: how often s was measured, the spread of the point over seeds, its median error, the
median 90% interval width and how often the interval holds the truth.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

import decision_rounds
import decision_truth
from decision_scenarios import CLASSES

CLASS = "cost-specialized-slow-edge-g3"
LEVEL = 0.9


def measured(cls, truth, fleet: int, probe: int, seed: int, own: bool):
    """The measurement of one seed's window (None: not measured)."""
    rng = np.random.default_rng([17, fleet, seed])
    parts, fleet_shape = [], None
    for gamma, engines in ((fleet, cls.engines - 1), (probe, 1)):
        moved = decision_rounds.moved_truth(cls, truth, gamma)
        rows, shape, itl = decision_truth.generate_segment(dataclasses.replace(moved.cls, engines=engines), moved, rng)
        parts.append((rows, engines, itl, shape if own else None))
        fleet_shape = fleet_shape or shape
    tuning = decision_rounds.tune_window(cls, parts, fleet_shape, decision_truth.tool_deployment(cls), level=LEVEL,
                                         n_resamples=200, seed=seed)
    m = tuning.recommendation.specialized_speedup_measured
    return m if m is not None and m.measured else None


def summary(found: list, n: int, truth: float) -> dict:
    points = np.array([m.value for m in found])
    lows, highs = (np.array([m.confidence_interval[i] for m in found]) for i in (0, 1))
    return {"measured_share": len(found) / n, "point_sd": float(points.std()),
            "median_point_error": float(np.median(points) / truth - 1.0),
            "median_interval_width": float(np.median(highs - lows)),
            "coverage": float(np.mean((lows <= truth) & (truth <= highs)))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--json", action="store_true", help="print the JSON document only")
    args = ap.parse_args()
    cls = next(c for c in CLASSES if c.name == CLASS)
    truth = decision_truth.Truth(cls)
    s = float(truth.specialized_speedup)
    doc = {"benchmark": "speedup_measurement", "class": CLASS, "true_speedup": s, "seeds": args.seeds,
           "level": LEVEL, "ways": []}
    for fleet, probe in ((3, 7), (7, 3)):
        way = {"fleet_gamma": fleet, "probe_gamma": probe}
        for own in (True, False):
            found = [m for m in (measured(cls, truth, fleet, probe, seed, own) for seed in range(args.seeds)) if m]
            way["own_batch_mix" if own else "route_batch_mix"] = summary(found, args.seeds, s)
        doc["ways"].append(way)
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"{CLASS}: true specialized speedup {s:g}×, {args.seeds} seeds, {LEVEL:.0%} intervals")
    print(f"{'fleet/probe':<13} {'priced at':<16} {'measured':>8} {'point sd':>9} {'median err':>11} "
          f"{'width':>6} {'coverage':>9}")
    for way in doc["ways"]:
        for key, label in (("own_batch_mix", "own batch mix"), ("route_batch_mix", "route's mix")):
            r = way[key]
            print(f"{way['fleet_gamma']:>5}/{way['probe_gamma']:<7} {label:<16} {r['measured_share']:>8.0%} "
                  f"{r['point_sd']:>9.3f} {r['median_point_error']:>+11.1%} {r['median_interval_width']:>6.2f} "
                  f"{r['coverage']:>9.0%}")


if __name__ == "__main__":
    main()
