"""The dashboard's overview: its first render, and a cold start in a real browser.

1. First render on a 7-day, 50-target store (target: < 3 s). Builds the store with
   ``Store.bulk_load_history`` (50 targets × 2 engines, 15 s scrapes, 7 days, step-shape
   gauges and ITL), a config with two routes of 25 targets, then renders the overview page
   with Streamlit's AppTest on a cold cache — what a first visitor waits for — for the
   default 1 h window and the 7 d window.

2. Cold start to the first complete page, demo store (target ≤ 3 s): the
   wall clock from launching ``specdec dashboard --config demo/specdec.toml --port P`` to
   the moment a headless Chromium (started before, on about:blank, with a fresh profile:
   an empty browser cache) holds the overview's route table and a Plotly chart in its DOM.
   The page is loaded as soon as the server answers /_stcore/health and its DOM is polled
   in real time over the DevTools protocol (``--virtual-time-budget`` skips timers and
   cannot time a render). Median of ``--runs`` runs, each on a fresh server; a table and
   one JSON line. ``--dashboard-tree DIR`` times another copy of the dashboard package
   (DIR/dashboard, e.g. a snapshot before a change) with this checkout's package;
   ``--compare DIR`` times it in turn with this checkout's dashboard (one run of each per
   round: a shared machine's load weighs on both alike). ``--browser-cache warm``: the
   frontend's files already in Chromium's cache, as for anyone who opened it before.
   ``--bare`` times, in the same turns, a plain ``streamlit run`` of a page with the
   overview's elements and constant contents: the floor Streamlit and this browser set on
   this machine, whatever the dashboard computes.

    .venv/bin/python benchmarks/dashboard_overview.py [--days 7] [--targets 50]   # 1. and 2.
    .venv/bin/python benchmarks/dashboard_overview.py --no-cold-start              # 1. only
    .venv/bin/python benchmarks/dashboard_overview.py --cold-start-only [--runs 5] [--demo DIR] \
        [--browser-cache empty|warm] [--compare DIR] [--bare] [--json FILE]        # 2. only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from acceptance.store import Store
from specdec.dashboard_launch import streamlit_command
from devtools import DevToolsTab  # benchmarks/devtools.py: run as a script, this folder is on the path

GAMMA = 3
INTERVAL = 15.0
APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")


def route_names(n_routes: int) -> list[str]:
    """The benchmark store's routes: a and b for two (the first render's), else r01, r02, ..."""
    return ["a", "b"] if n_routes == 2 else [f"r{i + 1:02d}" for i in range(n_routes)]


def build(folder: Path, days: float, n_targets: int, t0: float, n_routes: int = 2) -> Path:
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
    quote = lambda us: "[" + ", ".join(f'"{u}"' for u in us) + "]"  # noqa: E731
    config = folder / "specdec.toml"
    routes = route_names(n_routes)  # the targets dealt out in turn: each route at least one
    tables = "".join(f'\n[routes.{r}]\ntargets = {quote(urls[i::n_routes])}\n' for i, r in enumerate(routes))
    config.write_text(f'[store]\npath = "specdec.db"\n{tables}', encoding="utf-8")
    return config


def first_render(config: Path, window: str, routes: set[str] = frozenset({"a", "b"})) -> float:
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
    if at.exception or not at.dataframe or set(at.dataframe[0].value["route"]) != set(routes):
        raise RuntimeError(f"overview did not show every route: {[e.value for e in at.exception]}")
    return secs


# ----------------------------------------------------------------------------- 2. cold start in Chromium

COLD_TIMEOUT_S = 120.0
POLL_S = 0.05
SETTLE_S = 2.0
# What the page holds: the title, the route table (a glide grid drawn, its accessible
# header naming the route column), Plotly charts drawn (their SVG), the script still running.
PAGE_JS = """JSON.stringify({
  title: [...document.querySelectorAll('h2')].some(h => h.textContent.includes('Routes overview')),
  table: [...document.querySelectorAll('[data-testid="stDataFrame"]')].some(d =>
      d.querySelector('canvas') && [...d.querySelectorAll('th')].some(t => t.textContent === 'route')),
  charts: document.querySelectorAll('.js-plotly-plot .main-svg').length,
  running: !!document.querySelector('[data-testid="stStatusWidget"]'),
  error: [...document.querySelectorAll('[data-testid="stException"]')].map(e => e.innerText.slice(0, 500)).join(' | '),
})"""
MARKS = ("health", "opened", "title", "table", "chart", "complete", "settled")
MARK_WORDS = {
    "health": "server answers /_stcore/health",
    "opened": "page opened in the browser",
    "title": "page title drawn",
    "table": "route table drawn",
    "chart": "first Plotly chart drawn",
    "complete": "table and a chart: first complete page",
    "settled": "both charts drawn, script finished",
}


# The floor: the overview's elements (sidebar widgets, title, the decisions' badges, three
# tables, a caption, a status line, two Plotly bar charts in columns) with constant contents, in plain
# `streamlit run`: Streamlit's own start and its frontend in this browser, nothing computed.
BARE_APP = """
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

st.set_page_config(page_title="bare", layout="wide")
st.sidebar.radio("Page", ["overview", "curves", "whatif", "recommendation"])
st.sidebar.selectbox("Window", ["15m", "1h", "6h", "1d", "7d"], index=1)
st.header("Routes overview")
routes = ["open", "structured"]
st.markdown(":orange-badge[open · change γ 7 → 3 · +9.2%] :green-badge[structured · keep γ=7]")
st.dataframe(pd.DataFrame({"route": routes, "drafts": ["230,116", "397,560"], "mean acceptance length": ["2.76", "4.62"]}),
             hide_index=True)
st.dataframe(pd.DataFrame({"route": routes, "recommended": [3, 7], "speedup": ["1.45x", "3.73x"]}), hide_index=True)
st.caption("Brackets: 90% intervals.")
left, right = st.columns(2)
for col, key in ((left, "al"), (right, "speedup")):
    with col:
        st.plotly_chart(go.Figure(go.Bar(x=routes, y=[2.76, 4.62], error_y=dict(type="data", array=[0.1, 0.1]))), key=key)
st.subheader("Targets")
st.success("All 4 targets answered their last scrape.")
st.dataframe(pd.DataFrame({"target": [f"http://127.0.0.1:{8000 + i}/metrics" for i in range(4)], "route": routes * 2}),
             hide_index=True)
"""
BARE = "bare Streamlit, same elements"


def bare_command(folder: Path):
    """``command(port)`` for cold_start: BARE_APP under plain ``streamlit run``, as the dashboard is started."""
    app = folder / "bare_app.py"
    app.write_text(BARE_APP, encoding="utf-8")
    streamlit = str(Path(sys.executable).with_name("streamlit"))

    def command(port: int) -> list[str]:
        # The dashboard's own Streamlit options (after `python -m dashboard.server run APP`).
        options = streamlit_command(argparse.Namespace(host="127.0.0.1", port=port, config=None, db=None))[5:]
        return [streamlit, "run", str(app), *options]
    return command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found is None:
        raise SystemExit("chromium is not installed (sh scripts/ensure_chromium.sh installs it)")
    return found


class _Tab(DevToolsTab):
    """The benchmark's tab: PAGE_JS's view of the page."""

    def page(self) -> dict:
        return self.evaluate_json(PAGE_JS)


def _dashboard_command(config: Path, port: int) -> list[str]:
    """`specdec dashboard` as a user runs it (this venv's script, else python -m specdec.cli)."""
    script = Path(sys.executable).with_name("specdec")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "specdec.cli"]
    return cmd + ["dashboard", "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]


def cold_start(config: Path, *, chromium: str, dashboard_tree: Path | None = None,
               timeout_s: float = COLD_TIMEOUT_S, profile: str | None = None, port: int | None = None,
               command=None, open_after_s: float = 0.0) -> dict[str, float]:
    """One cold start of the server: seconds from launching it to each of MARKS, and
    "opened" (when the page was opened: ``open_after_s`` after the server first answered;
    0, the default, opens it at once — a browser faster than any user). ``profile``: a
    Chromium profile to reuse (its cache; default a fresh one), with ``port`` the same each
    time (the cache is per origin); ``command(port)``: another server command."""
    keep_profile = profile is not None
    profile = profile or tempfile.mkdtemp(prefix="specdec-chromium-")
    tab = server = None
    env, cwd = dict(os.environ), None
    if dashboard_tree is not None:  # its `dashboard` package first on the path; not run from this checkout
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(dashboard_tree.resolve()), env.get("PYTHONPATH")]))
        cwd = tempfile.gettempdir()
    try:
        tab = _Tab(chromium, profile)
        port = port or _free_port()
        cmd = command(port) if command is not None else _dashboard_command(config.resolve(), port)
        t0 = time.monotonic()
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=cwd)
        marks: dict[str, float] = {}
        while "health" not in marks:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        marks["health"] = time.monotonic() - t0
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() - t0 > timeout_s:
                raise RuntimeError(f"the dashboard did not serve (exit status {server.poll()})")
            time.sleep(POLL_S)
        time.sleep(open_after_s)
        marks["opened"] = time.monotonic() - t0
        tab.call("Page.navigate", session=True, url=f"http://127.0.0.1:{port}/?page=overview")
        while "settled" not in marks:
            state = tab.page()
            now = time.monotonic() - t0
            if state["error"]:
                raise RuntimeError(f"the overview shows an exception: {state['error']}")
            if state["title"]:
                marks.setdefault("title", now)
            if state["table"]:
                marks.setdefault("table", now)
            if state["charts"]:
                marks.setdefault("chart", now)
            if state["table"] and state["charts"]:
                marks.setdefault("complete", now)
            if state["table"] and state["charts"] >= 2 and not state["running"]:
                marks["settled"] = now
            if now > timeout_s:
                raise RuntimeError(f"no complete overview after {timeout_s:g} s: {state}")
            time.sleep(POLL_S)
        return marks
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(10)
        if tab is not None:
            tab.close()
        if not keep_profile:
            shutil.rmtree(profile, ignore_errors=True)


def demo_store(folder: Path) -> Path:
    """`specdec demo --dir FOLDER/demo` (about 10 s): its config."""
    script = Path(sys.executable).with_name("specdec")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "specdec.cli"]
    subprocess.run(cmd + ["demo", "--dir", "demo"], cwd=folder, check=True, stdout=subprocess.DEVNULL, timeout=600)
    return folder / "demo" / "specdec.toml"


CACHE_WORDS = {"empty": "empty (fresh profile per run)", "warm": "warm (frontend cached by one earlier load)"}


def cold_start_figures(config: Path, runs: int, *, dashboard_tree: Path | None = None,
                       compare: Path | None = None, bare: bool = False, browser_cache: str = "empty",
                       open_after_s: float = 0.0, store: str = "demo") -> dict:
    """Median of ``runs`` cold starts of this checkout's dashboard (or ``dashboard_tree``'s),
    and of ``compare``'s when given: one run of each in turn (in alternating order), so
    that a machine's load weighs on both alike. ``browser_cache``: "empty" (a fresh Chromium profile per run:
    nothing of Streamlit's frontend cached, the worst case) or "warm" (one profile per tree
    that loaded the page once before, on the same port: the frontend's files cached, as for
    anyone who opened the dashboard before; the server is as cold as ever). ``open_after_s``:
    the page is opened that long after the server first answers (0: at once). ``bare``: also
    time BARE_APP (Streamlit's floor on this machine and browser) in the same turns. ``store``:
    what the config's store is, as the table and the JSON name it."""
    chromium = _chromium()
    trees = {"this checkout" if dashboard_tree is None else str(dashboard_tree): dashboard_tree}
    if compare is not None:
        trees[str(compare)] = compare
    commands = {}
    if bare:
        trees[BARE] = None
        commands[BARE] = bare_command(Path(tempfile.mkdtemp(prefix="specdec-bare-")))
    results: dict[str, list] = {name: [] for name in trees}
    cache = {name: (None, None) for name in trees}
    if browser_cache == "warm":
        for name, tree in trees.items():
            cache[name] = tempfile.mkdtemp(prefix="specdec-chromium-"), _free_port()
            cold_start(config, chromium=chromium, dashboard_tree=tree, profile=cache[name][0], port=cache[name][1],
                       command=commands.get(name))
    try:
        for i in range(runs):
            order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]  # neither always goes first
            for name, tree in order:
                time.sleep(SETTLE_S)  # the previous run's server and browser wind down
                marks = cold_start(config, chromium=chromium, dashboard_tree=tree, profile=cache[name][0],
                                   port=cache[name][1], open_after_s=open_after_s, command=commands.get(name))
                results[name].append(marks)
                print(f"  run {i + 1}/{runs} ({name}): " + ", ".join(f"{k} {v:.2f} s" for k, v in marks.items()),
                      flush=True)
    finally:
        for profile, _ in cache.values():
            if profile:
                shutil.rmtree(profile, ignore_errors=True)
    docs = []
    for name, runs_of in results.items():
        summary = {k: {"median_s": round(statistics.median(r[k] for r in runs_of), 2),
                       "min_s": round(min(r[k] for r in runs_of), 2), "max_s": round(max(r[k] for r in runs_of), 2)}
                   for k in MARKS}
        opened = {k: round(statistics.median(r[k] - r["opened"] for r in runs_of), 2)
                  for k in MARKS if k not in ("health", "opened")}
        print(f"\ncold start, {store} store, browser cache {CACHE_WORDS[browser_cache]}, page opened "
              f"{open_after_s:g} s after the server answers, median of {runs} ({name}):")
        print(f"  {'from launching the server to':<42} {'median':>7} {'min':>6} {'max':>6}  {'after opening':>13}")
        for k in MARKS:
            f = summary[k]
            tail = f"  {opened[k]:>12.2f}s" if k in opened else ""
            print(f"  {MARK_WORDS[k]:<42} {f['median_s']:>6.2f}s {f['min_s']:>5.2f}s {f['max_s']:>5.2f}s{tail}")
        docs.append({"dashboard": name, "first_complete_page_median_s": summary["complete"]["median_s"],
                     "first_complete_page_after_opening_median_s": opened["complete"],
                     "marks": summary, "after_opening_median_s": opened, "per_run": runs_of})
    doc = {"benchmark": "dashboard cold start to first complete page", "store": store, "runs": runs,
           "browser_cache": CACHE_WORDS[browser_cache], "opened_after_health_s": open_after_s, "target_s": 3.0,
           "load_average_1min_at_end": float(open("/proc/loadavg").read().split()[0])
           if os.path.exists("/proc/loadavg") else None, "results": docs}
    print(json.dumps(doc))
    return doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--routes", type=int, default=2,
                    help="routes the targets are dealt into (default 2); with --cold-start-only and more than 2, the "
                         "cold start is timed on that store (--days of it) instead of the demo's")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="folder to build the store in and reuse (default: a temp dir)")
    ap.add_argument("--cold-start-only", action="store_true", help="only the cold start in Chromium (2.)")
    ap.add_argument("--no-cold-start", action="store_true", help="only the first render on the 7-day store (1.)")
    ap.add_argument("--runs", type=int, default=5, help="cold starts to take the median of (default 5)")
    ap.add_argument("--demo", type=Path, help="a demo folder (its specdec.toml) to reuse; default: specdec demo anew")
    ap.add_argument("--dashboard-tree", type=Path, help="time DIR/dashboard instead of this checkout's")
    ap.add_argument("--compare", type=Path, metavar="DIR", help="also time DIR/dashboard, in turn with this checkout's")
    ap.add_argument("--bare", action="store_true",
                    help="also time a bare Streamlit app with the overview's elements (the floor), in turn")
    ap.add_argument("--browser-cache", choices=("empty", "warm"), default="empty",
                    help="empty: a fresh Chromium profile per run (default); warm: the frontend cached")
    ap.add_argument("--open-after", type=float, default=0.0, metavar="S",
                    help="open the page S seconds after the server answers (default 0: at once)")
    ap.add_argument("--json", type=Path, help="also write the cold start's JSON here")
    args = ap.parse_args()
    if args.routes < 1 or args.routes > args.targets:
        ap.error(f"--routes: 1 to --targets ({args.targets}), got {args.routes}")
    if not args.no_cold_start:
        store = "demo"
        if args.routes > 2:  # tens of routes: the benchmark's store, dealt into them
            config = build(Path(tempfile.mkdtemp()), args.days, args.targets, time.time() - args.days * 86400,
                           args.routes)
            store = f"{args.routes} routes of {args.targets} targets × 2 engines, {args.days:g} d"
        else:
            config = args.demo / "specdec.toml" if args.demo else demo_store(Path(tempfile.mkdtemp()))
        doc = cold_start_figures(config, args.runs, dashboard_tree=args.dashboard_tree, compare=args.compare,
                                 bare=args.bare, browser_cache=args.browser_cache, open_after_s=args.open_after,
                                 store=store)
        if args.json:
            recorded = {"command": "python benchmarks/dashboard_overview.py " + " ".join(sys.argv[1:]),
                        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                    "python": platform.python_version()},
                        "date": time.strftime("%Y-%m-%d", time.gmtime()), **doc}
            args.json.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
        if args.cold_start_only:
            return
    folder = args.keep or Path(tempfile.mkdtemp())
    config = folder / "specdec.toml"
    if not config.exists():
        folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        config = build(folder, args.days, args.targets, 1_750_000_000.0, args.routes)
        size = os.path.getsize(folder / "specdec.db")
        print(f"built {args.days:g} d x {args.targets} targets x 2 engines at 15 s in {time.perf_counter() - t:.1f} s "
              f"({size / 2**20:.0f} MiB)")
    from dashboard.data import load_fleet
    import acceptance.store  # noqa: F401  (dashboard.data imports these on first use: not the read's time)
    import specdec.pipeline  # noqa: F401

    for window in ("1h", "7d"):
        t = time.perf_counter()
        fleet = load_fleet(str(config), None, window=window, history_slices=0)  # what the overview reads
        assert all(rv.tuning is not None for rv in fleet.routes.values()), fleet.message
        print(f"read + tune both routes (dashboard.data.load_fleet), window {window}: {time.perf_counter() - t:.2f} s")
    first_render(config, "1h", set(route_names(args.routes)))  # imports and Streamlit's own start-up, not the page's work
    for window in ("1h", "7d"):
        secs = [first_render(config, window, set(route_names(args.routes))) for _ in range(args.repeat)]
        print(f"overview first render, window {window}: median {statistics.median(secs):.2f} s "
              f"(max {max(secs):.2f}; target < 3 s)")


if __name__ == "__main__":
    main()
