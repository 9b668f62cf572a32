"""tune-gamma over a 7-day window of 50 targets scraped every 15 s (target: under 1 s).

Builds the store like benchmarks/dashboard_overview.py (50 targets × 2 engines, 15 s
scrapes, 7 days ending now, step-shape gauges and ITL; two routes of 25 targets), then
times `tune-gamma --route a --window 7d --json` end to end as a user runs it (a fresh
process: interpreter start, imports, store read, estimate, recommendation) and the
pipeline call alone in-process. Prints figures and the store's size.

    .venv/bin/python benchmarks/tune_gamma_week.py [--days 7] [--targets 50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_overview import build  # noqa: E402  (the same store, one builder)

TUNE_GAMMA = str(Path(sys.executable).with_name("tune-gamma"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--keep", help="build into (or reuse) this folder")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="specdec-week-"))
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "specdec.toml"
    if not config.exists():
        t0 = time.time() - args.days * 86400
        started = time.perf_counter()
        build(folder, args.days, args.targets, t0)
        print(f"built {args.days:g} days × {args.targets} targets × 2 engines in {time.perf_counter() - started:.0f}s")
    db = folder / "specdec.db"
    size = sum(p.stat().st_size for p in folder.glob("specdec.db*"))
    window = f"{int(args.days)}d"

    cli = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        out = subprocess.run([TUNE_GAMMA, "--route", "a", "--config", str(config), "--window", window, "--json"],
                             capture_output=True, text=True)
        cli.append(time.perf_counter() - started)
        if out.returncode != 0:
            raise SystemExit(f"tune-gamma failed: {out.stderr.strip()}")
    doc = json.loads(out.stdout)

    from acceptance.store import Store
    from specdec.config import load_config
    from specdec.pipeline import tune_route

    cfg = load_config(config)
    inproc = []
    with Store.open(db) as store:
        for _ in range(args.repeat):
            started = time.perf_counter()
            tune_route(cfg, "a", store=store, window_s=args.days * 86400)
            inproc.append(time.perf_counter() - started)
    print(json.dumps({
        "days": args.days, "targets": args.targets, "engines": 2 * args.targets,
        "store_bytes": size, "route_drafts": doc["observed"]["drafts"],
        "tune_gamma_cli_s": {"median": statistics.median(cli), "min": min(cli)},
        "pipeline_in_process_s": {"median": statistics.median(inproc), "min": min(inproc)},
        "recommended_gamma": doc["recommended_gamma"], "decision": doc["decision"],
    }, indent=2))
    if not args.keep:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
