"""Speed and coverage of the acceptance intervals (acceptance/estimates.py).

Prints figures, asserts nothing:
  1. time of estimate_acceptance for n = 2,000 intervals, γ = 7, 1,000 resamples (target:
     well under 50 ms), for independent rows (short blocks, the slowest case) and for
     requests spanning many intervals; and of detect_drift on the same window;
  2. empirical coverage of the 90% intervals of a_1, a_γ and AL against the known process
     of tests/test_coverage.py, over many windows and several scenarios (from 5-minute
     windows of 20 scrape intervals, independent or with requests over ~3 of them, to
     4 hours), beside the coverage of a binomial interval on D.

Run: .venv/bin/python benchmarks/estimates.py [--windows 1000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import numpy as np

from acceptance.estimates import detect_drift, estimate_acceptance

ROOT = Path(__file__).resolve().parents[1]


def load_process():
    """The known process and its truth live with the coverage test; reuse them as they are."""
    spec = importlib.util.spec_from_file_location("coverage_process", ROOT / "tests" / "test_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_call(fn, repeats: int = 20) -> tuple[float, float]:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, max(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=1000, help="windows per coverage scenario")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples in the coverage run")
    args = parser.parse_args()
    process = load_process()

    print("== speed: n = 2000 intervals, gamma = 7, 1000 resamples ==")
    for lifetime in (1.0, 4.0, 16.0):
        window = process.simulate_window(np.random.default_rng(1), 2000, 7, lifetime=lifetime)
        est = estimate_acceptance(window)
        median, worst = time_call(lambda: estimate_acceptance(window, seed=3))  # noqa: B023 (called within this iteration)
        drift_median, _ = time_call(lambda: detect_drift(window, seed=3))  # noqa: B023 (called within this iteration)
        print(
            f"requests over ~{lifetime:>4.0f} intervals: block {est.block_length:>3} x {est.n_blocks:>4} blocks  "
            f"estimate_acceptance median {median:6.2f} ms (max {worst:6.2f})  detect_drift median {drift_median:6.2f} ms"
        )

    print(f"\n== coverage of {process.LEVEL:.0%} intervals, {args.windows} windows per scenario, "
          f"{args.resamples} resamples ==")
    print("(standard error of a coverage near 0.90 over these windows: "
          f"{np.sqrt(0.09 / args.windows):.3f})")
    scenarios = [
        ("gamma 3, 20 intervals (5 min), requests ~1", 3, 20, {"lifetime": 1.0}),
        ("gamma 7, 20 intervals (5 min), requests ~1", 7, 20, {"lifetime": 1.0}),
        ("gamma 3, 20 intervals (5 min), requests ~3", 3, 20, {"lifetime": 3.0}),
        ("gamma 3, 60 intervals, requests ~1", 3, 60, {"lifetime": 1.0}),
        ("gamma 3, 60 intervals, requests ~4", 3, 60, {"lifetime": 4.0}),
        ("gamma 4, 120 intervals, requests ~3", 4, 120, {"lifetime": 3.0}),
        ("gamma 4, 240 intervals, requests ~3", 4, 240, {"lifetime": 3.0}),
        ("gamma 7, 240 intervals, requests ~8, front-loaded", 7, 240, {"lifetime": 8.0, "front_loading": 0.95}),
        ("gamma 7, 960 intervals, requests ~8", 7, 960, {"lifetime": 8.0}),
        ("gamma 5, 240 intervals, 64 slots, low acceptance", 5, 240, {"slots": 64, "a": 2.0, "b": 2.0, "lifetime": 4.0}),
    ]
    print(f"{'scenario':<52} {'bootstrap a_1  a_g   AL':>24} {'binomial a_1  a_g   AL':>24}  seconds")
    for name, gamma, n_intervals, options in scenarios:
        t0 = time.perf_counter()
        bootstrap, binomial = process.measure_coverage(
            args.windows, n_intervals, gamma, seed=100 + gamma, n_resamples=args.resamples, **options
        )
        elapsed = time.perf_counter() - t0
        fmt = lambda c: "  ".join(f"{x:.3f}" for x in c)  # noqa: E731
        print(f"{name:<52} {fmt(bootstrap):>24} {fmt(binomial):>24}  {elapsed:6.1f}")


if __name__ == "__main__":
    main()
