"""Store and window speed: a week of a 50-target route, and a 1,000-target scrape cycle.

Builds a store of DAYS × TARGETS (2 engines each) × 15 s with ``Store.bulk_load_history``
(the same rows and rollups ``write_cycle`` would have stored), then times ``route_window``
over 7 days and over 1 hour, and ``write_cycle`` for a cycle of 1,000 targets. Prints figures.

    .venv/bin/python benchmarks/store_window.py [--days 7] [--targets 50] [--keep PATH] [--rebuild]

The built store is cached in the temp dir under a name keyed by the store's schema text, days
and targets (building a week takes about a minute); ``--rebuild`` ignores the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts, StepShape
from acceptance import store as store_module
from acceptance.store import Store
from acceptance.store import schema as store_schema
from acceptance.windows import route_window
from timing import timed

GAMMA = 3
INTERVAL = 15.0


def build(path: Path, days: float, n_targets: int, t0: float) -> float:
    rng = np.random.default_rng(0)
    n = int(days * 86400 / INTERVAL)
    times = t0 + INTERVAL * np.arange(n)
    with Store.open(path) as store:
        for j in range(n_targets):
            for e in range(2):
                d = rng.poisson(40, n).astype(float)
                surv = np.array([0.8, 0.6, 0.45])
                a_k = rng.binomial(d[:, None].astype(int), surv).astype(float)
                inc = np.column_stack([d, GAMMA * d, a_k.sum(axis=1), a_k])
                running = rng.integers(1, 9, n).astype(float)
                itl_count = np.cumsum(d * 2.5)
                store.bulk_load_history(f"http://10.0.{j // 250}.{j % 250}:8000/metrics", "kimi-k3", str(e),
                                        times, np.cumsum(inc, axis=0), running=running,
                                        itl_sum=itl_count * 0.012, itl_count=itl_count)
    return float(times[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--keep", type=Path, default=None, help="store path to build (default: a cached temp file)")
    ap.add_argument("--rebuild", action="store_true", help="build even when a cached store exists")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    # the cached store is reused only under the schema it was built with (every migration's text)
    schema_text = "".join(store_schema._MIGRATIONS.values())
    schema = hashlib.sha256(f"{store_module.SCHEMA_VERSION}{schema_text}".encode()).hexdigest()[:12]
    path = args.keep or Path(tempfile.gettempdir()) / f"specdec-bench-{schema}-{args.days:g}d-{args.targets}t.db"
    t0 = 1_750_000_000.0
    n = int(args.days * 86400 / INTERVAL)
    t_end = t0 + INTERVAL * (n - 1)
    n_rows = n * args.targets * 2
    if args.rebuild or args.keep or not path.exists():
        for p in (str(path), f"{path}-wal", f"{path}-shm"):
            if os.path.exists(p):
                os.remove(p)
        t = time.perf_counter()
        build(path, args.days, args.targets, t0)
        print(f"built {n_rows:,} engine intervals ({args.targets} targets x 2 engines, {args.days:g} d at 15 s) "
              f"in {time.perf_counter() - t:.1f} s")
    else:
        print(f"reusing {path} ({n_rows:,} engine intervals)")
    with Store.open(path) as store:
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(path)
    print(f"DB size {size / 2**20:.0f} MiB ({size / n_rows:.0f} B per interval)")

    with Store.open(path) as store:
        targets = sorted({ref.target for _, ref in store.engines_of(
            [r[0] for r in store.conn.execute("SELECT url FROM targets")])})
        for label, span in (("7 d", 7 * 86400.0), ("1 h", 3600.0), ("1 d", 86400.0)):
            start = max(t_end - span, t0 - 1) + 7.3  # mid-bucket edges
            w, secs = timed(lambda: route_window(store, targets, start, t_end), 5)  # noqa: B023 (called within this iteration)
            seg = w.newest_segment
            print(f"route_window {label}: median {statistics.median(secs) * 1e3:.1f} ms "
                  f"(min {min(secs) * 1e3:.1f}); {len(seg.intervals)} blocks, drafts {seg.total.drafts:,.0f}, "
                  f"batch samples {w.step_shape.samples:,}")

    # one cycle of 1,000 targets x 2 engines into a store that already has a baseline for them
    with Store.open(Path(tmp) / "cycle.db") as store:
        def cycle(i):
            return [ScrapeResult(f"http://10.1.{j // 250}.{j % 250}:8000/metrics", t0 + INTERVAL * i, True, tuple(
                EngineSnapshot("kimi-k3", str(e), SpecCounts(40.0 * i, 120.0 * i, 75.0 * i,
                                                             (32.0 * i, 24.0 * i, 19.0 * i)), t0,
                               StepShape({1.0: 0.0, 8.0: 10.0 * i, 64.0: 20.0 * i, float("inf"): 20.0 * i},
                                         4.0, 0.012 * i, 1.0 * i)) for e in range(2)))
                    for j in range(1000)]
        cycles = [cycle(i) for i in range(1, 12)]
        store.write_cycle(cycles[0])
        secs = []
        for c in cycles[1:]:
            t = time.perf_counter()
            store.write_cycle(c)
            secs.append(time.perf_counter() - t)
        print(f"write_cycle, 1,000 targets x 2 engines: median {statistics.median(secs) * 1e3:.0f} ms "
              f"(max {max(secs) * 1e3:.0f})")


if __name__ == "__main__":
    main()
