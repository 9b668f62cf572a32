"""First render of the dashboard's overview on a 7-day, 50-target store (target: < 3 s).

Builds the store with ``Store.bulk_load_history`` (50 targets × 2 engines, 15 s scrapes,
7 days, step-shape gauges and ITL), a config with two routes of 25 targets, then renders
the overview page with Streamlit's AppTest on a cold cache — what a first visitor waits
for — for the default 1 h window and the 7 d window. Prints figures.

    .venv/bin/python benchmarks/dashboard_overview.py [--days 7] [--targets 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from acceptance.store import Store

GAMMA = 3
INTERVAL = 15.0
APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")


def build(folder: Path, days: float, n_targets: int, t0: float) -> Path:
    rng = np.random.default_rng(0)
    n = int(days * 86400 / INTERVAL)
    times = t0 + INTERVAL * np.arange(n)
    urls = [f"http://10.0.{j // 250}.{j % 250}:8000/metrics" for j in range(n_targets)]
    with Store.open(folder / "specdec.db") as store:
        for j, url in enumerate(urls):
            surv = np.array([0.8, 0.6, 0.45]) if j % 2 else np.array([0.7, 0.45, 0.3])
            for e in range(2):
                d = rng.poisson(40, n).astype(float)
                a_k = rng.binomial(d[:, None].astype(int), surv).astype(float)
                inc = np.column_stack([d, GAMMA * d, a_k.sum(axis=1), a_k])
                itl_count = np.cumsum(d * 2.5)
                store.bulk_load_history(url, "kimi-k3", str(e), times, np.cumsum(inc, axis=0),
                                        running=rng.integers(1, 9, n).astype(float),
                                        itl_sum=itl_count * 0.012, itl_count=itl_count)
    half = n_targets // 2
    quote = lambda us: "[" + ", ".join(f'"{u}"' for u in us) + "]"  # noqa: E731
    config = folder / "specdec.toml"
    config.write_text(f'[store]\npath = "specdec.db"\n\n[routes.a]\ntargets = {quote(urls[:half])}\n\n'
                      f'[routes.b]\ntargets = {quote(urls[half:])}\n', encoding="utf-8")
    return config


def first_render(config: Path, window: str) -> float:
    """Seconds for a fresh session's overview, the read cache cleared first."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["SPECDEC_CONFIG"] = str(config)
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    if window != "1h":
        at.run()  # the default window first, then switch: time only the switched run, cache cleared
        at.selectbox(key="window").set_value(window)
        st.cache_data.clear()
    t = time.perf_counter()
    at.run()
    secs = time.perf_counter() - t
    if at.exception or not at.dataframe or set(at.dataframe[0].value["route"]) != {"a", "b"}:
        raise RuntimeError(f"overview did not show both routes: {[e.value for e in at.exception]}")
    return secs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="folder to build the store in and reuse (default: a temp dir)")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp())
    config = folder / "specdec.toml"
    if not config.exists():
        folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        config = build(folder, args.days, args.targets, 1_750_000_000.0)
        size = os.path.getsize(folder / "specdec.db")
        print(f"built {args.days:g} d x {args.targets} targets x 2 engines at 15 s in {time.perf_counter() - t:.1f} s "
              f"({size / 2**20:.0f} MiB)")
    from dashboard.data import load_fleet

    for window in ("1h", "7d"):
        t = time.perf_counter()
        fleet = load_fleet(str(config), None, window=window)
        assert all(rv.tuning is not None for rv in fleet.routes.values()), fleet.message
        print(f"read + tune both routes (dashboard.data.load_fleet), window {window}: {time.perf_counter() - t:.2f} s")
    first_render(config, "1h")  # imports and Streamlit's own start-up, not the page's work
    for window in ("1h", "7d"):
        secs = [first_render(config, window) for _ in range(args.repeat)]
        print(f"overview first render, window {window}: median {statistics.median(secs):.2f} s "
              f"(max {max(secs):.2f}; target < 3 s)")


if __name__ == "__main__":
    main()
