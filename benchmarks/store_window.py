"""Store size and window speed: a week of a 50-target route, a 1,000-target scrape cycle, and
the bytes a collector's write path leaves.

Builds a store of DAYS × TARGETS (2 engines each) × 15 s with ``Store.bulk_load_history``
(the same rows and rollups ``write_cycle`` and sealing would have stored), then times
``route_window`` over 7 days, 1 hour and 1 day, and ``write_cycle`` for a cycle of 1,000
targets. ``--collected-hours H`` also writes H hours of ``--collected-engines`` engines cycle
by cycle, scrape times jittered, and reports their bytes per engine-interval by table.
``--compare DIR`` runs DIR's copy of this script (another checkout, e.g. the previous schema)
in the same call, and records its figures beside these. Prints figures; ``--json FILE``.

    .venv/bin/python benchmarks/store_window.py [--days 7] [--targets 50] [--keep PATH] [--rebuild]
        [--collected-hours 6] [--compare DIR] [--json benchmarks/results/store-window.json]

The built store is cached in the temp dir under a name keyed by the store package's code,
days and targets (building a week takes about a minute); ``--rebuild`` ignores the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
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


def window_reads(path: Path, t0: float, t_end: float) -> dict[str, dict[str, float]]:
    """Median and min ms of route_window over 7 d, 1 h and 1 d of the built store (15 runs each)."""
    out = {}
    with Store.open(path) as store:
        targets = sorted({ref.target for _, ref in store.engines_of(
            [r[0] for r in store.conn.execute("SELECT url FROM targets")])})
        for label, span in (("7 d", 7 * 86400.0), ("1 h", 3600.0), ("1 d", 86400.0)):
            start = max(t_end - span, t0 - 1) + 7.3  # mid-bucket edges
            w, secs = timed(lambda: route_window(store, targets, start, t_end), 15)  # noqa: B023 (called within this iteration)
            seg = w.newest_segment
            print(f"route_window {label}: median {statistics.median(secs) * 1e3:.1f} ms "
                  f"(min {min(secs) * 1e3:.1f}); {len(seg.intervals)} blocks, drafts {seg.total.drafts:,.0f}, "
                  f"batch samples {w.step_shape.samples:,}")
            out[label] = {"median_ms": statistics.median(secs) * 1e3, "min_ms": min(secs) * 1e3,
                          "blocks": len(seg.intervals), "drafts": seg.total.drafts}
    return out


def cycle_write(tmp: str, t0: float) -> list[float]:
    """Seconds of each of 10 cycles of 1,000 targets x 2 engines into a store that already has
    a baseline for them."""
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
    return secs


def collected_bytes(tmp: str, engines: int, hours: float) -> dict[str, object]:
    """Bytes per engine-interval of a store written cycle by cycle as a collector writes it:
    ``engines`` engines (γ 3, ITL, batch size) at 15 s for ``hours``, each scrape's time
    jittered by up to 0.3 s as concurrent scrapes' are — the write path's size, sealing
    included, where the week above is built by the bulk loader."""
    rng = np.random.default_rng(1)
    path = Path(tmp) / "collected.db"
    n = int(hours * 3600 / INTERVAL)
    cum, itl = np.zeros((engines, 3 + GAMMA)), np.zeros((engines, 2))
    t0 = 1_750_000_000.0
    secs = []
    with Store.open(path) as store:
        for i in range(n):
            d = rng.poisson(40, engines).astype(float)
            a_k = rng.binomial(d[:, None].astype(int), [0.8, 0.6, 0.45]).astype(float)
            cum += np.column_stack([d, GAMMA * d, a_k.sum(axis=1), a_k])
            itl += np.column_stack([d * 2.5 * 0.012 + rng.uniform(0, 1e-3, engines), d * 2.5])
            running = rng.integers(1, 9, engines)
            results = [ScrapeResult(f"http://10.2.{e // 250}.{e % 250}:8000/metrics",
                                    t0 + INTERVAL * i + float(rng.uniform(0, 0.3)), True,
                                    (EngineSnapshot("kimi-k3", "0", SpecCounts(*cum[e, :3], tuple(cum[e, 3:])), t0,
                                                    StepShape({}, float(running[e]), *itl[e])),))
                       for e in range(engines)]
            t = time.perf_counter()
            store.write_cycle(results)
            secs.append(time.perf_counter() - t)
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = dict(store.conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
    size = path.stat().st_size
    per = engines * n
    print(f"collected: {engines} engines x {hours:g} h through write_cycle: {size / per:.1f} B per engine-interval "
          f"(write_cycle median {statistics.median(secs) * 1e3:.1f} ms, max {max(secs) * 1e3:.1f})")
    return {"engines": engines, "hours": hours, "engine_intervals": per, "disk_bytes": size,
            "bytes_per_engine_interval": size / per,
            "bytes_per_engine_interval_by_table": {k: v / per for k, v in sorted(tables.items(), key=lambda x: -x[1])
                                                   if v / per >= 0.05},
            "write_cycle_median_ms": statistics.median(secs) * 1e3, "write_cycle_max_ms": max(secs) * 1e3}


def figures_of(argv: list[str], tree: Path) -> dict:
    """The figures of ``tree``'s copy of this script, run with that checkout's code."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.json"
        script = tree / "benchmarks" / "store_window.py"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        if "--json" not in script.read_text():  # older copies print only
            return _printed(subprocess.run([sys.executable, str(script), *argv], cwd=tree, check=True, text=True,
                                           capture_output=True, env=env).stdout)
        subprocess.run([sys.executable, str(script), *argv, "--json", str(out)], cwd=tree, check=True, env=env)
        return json.loads(out.read_text())


def _printed(text: str) -> dict:
    """The figures an older copy printed: DB size, window reads, the 1,000-target cycle."""
    size = re.search(r"DB size .* \((\d+) B per interval\)", text)
    reads = {m[1]: {"median_ms": float(m[2]), "min_ms": float(m[3])} for m in re.finditer(
        r"route_window (\d+ [dh]): median ([\d.]+) ms \(min ([\d.]+)\)", text)}
    write = re.search(r"write_cycle, 1,000 targets x 2 engines: median (\d+) ms \(max (\d+)\)", text)
    return {"bytes_per_engine_interval": float(size[1]) if size else None, "route_window": reads,
            "write_cycle_1000_targets_ms": {"median": float(write[1]), "max": float(write[2])} if write else None,
            "printed": text}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--keep", type=Path, default=None, help="store path to build (default: a cached temp file)")
    ap.add_argument("--rebuild", action="store_true", help="build even when a cached store exists")
    ap.add_argument("--collected-engines", type=int, default=200)
    ap.add_argument("--collected-hours", type=float, default=0.0,
                    help="also write this many hours of --collected-engines engines cycle by cycle; their bytes")
    ap.add_argument("--compare", type=Path, metavar="DIR", help="also run DIR's copy (another checkout) and record it")
    ap.add_argument("--collected-only", type=Path, metavar="FILE",
                    help="only write the --collected-hours figures to FILE (how --compare measures an older checkout)")
    ap.add_argument("--json", type=Path, help="write the figures here (benchmarks/results/store-window.json)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    if args.collected_only:
        args.collected_only.write_text(json.dumps(collected_bytes(tmp, args.collected_engines, args.collected_hours)))
        return
    # the cached store is reused only when built by the same store code and schema
    schema_text = "".join(store_schema._MIGRATIONS.values()) + "".join(
        p.read_text() for p in sorted(Path(store_module.__file__).parent.glob("*.py")))
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
    result: dict[str, object] = {
        "days": args.days, "targets": args.targets, "engine_intervals": n_rows, "disk_bytes": size,
        "bytes_per_engine_interval": size / n_rows, "route_window": window_reads(path, t0, t_end)}
    secs = cycle_write(tmp, t0)
    result["write_cycle_1000_targets_ms"] = {"median": statistics.median(secs) * 1e3, "max": max(secs) * 1e3}
    if args.collected_hours:
        result["collected"] = collected_bytes(tmp, args.collected_engines, args.collected_hours)
    if args.compare:
        result["compared"] = {"tree": str(args.compare), "commit": subprocess.run(
            ["git", "-C", str(args.compare), "rev-parse", "--short", "HEAD"], text=True, capture_output=True).stdout.strip(),
            **figures_of(["--days", f"{args.days:g}", "--targets", str(args.targets)], args.compare)}
        if args.collected_hours:  # this script's write-path run, on that checkout's store code
            out = Path(tmp) / "collected.json"
            subprocess.run([sys.executable, __file__, "--collected-only", str(out), "--collected-hours",
                            f"{args.collected_hours:g}", "--collected-engines", str(args.collected_engines)],
                           cwd=args.compare, check=True, env={**os.environ, "PYTHONPATH": str(args.compare)})
            result["compared"]["collected"] = json.loads(out.read_text())
    if args.json:
        args.json.write_text(json.dumps({
            "benchmark": "store_window", "command": "python benchmarks/store_window.py " + " ".join(sys.argv[1:]),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "date": time.strftime("%Y-%m-%d", time.gmtime()), **result}, indent=1) + "\n")


if __name__ == "__main__":
    main()
