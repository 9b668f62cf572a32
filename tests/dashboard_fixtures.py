"""Stores for the dashboard tests, built fast and in-process.

* ``build_demo_store``: the real path — the simulated fleet served over loopback, scraped
  by the collector into a store (specdec.demo.run_demo), 50 simulated minutes: route
  `structured` changes γ 7 → 5 on one engine at 40 min (two γ segments in the window),
  both routes restart an engine at 20 min.
* ``build_drift_store``: Store.bulk_load_history — route `steady` and route `drifting`
  (whose acceptance drops in the newest quarter of the hour), plus one target whose
  scrapes now fail.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts
from acceptance.store import Store

DEMO_DURATION_S = 3000.0
DRIFT_T0 = 1_750_000_000.0
DRIFT_SPAN_S = 2 * 3600.0
INTERVAL_S = 15.0
DRIFT_GAMMA = 3
STEADY_SURVIVAL = (0.8, 0.6, 0.45)
DRIFTED_SURVIVAL = (0.6, 0.35, 0.2)  # the `drifting` route's last 15 minutes
FAILING_ERROR = "http://10.9.0.3:8000/metrics: connection refused"


def build_demo_store(out_dir: Path) -> Path:
    """The demo's config and store in ``out_dir``; returns the config path."""
    from specdec.demo import run_demo

    run_demo(out_dir, duration_s=DEMO_DURATION_S, progress=lambda *_: None)
    return out_dir / "specdec.toml"


_SHARED: dict[str, Path] = {}


def shared_demo_config(tmp_path_factory) -> Path:
    """One demo store per test session (the AppTest and the browser tests read the same one)."""
    if "demo" not in _SHARED:
        _SHARED["demo"] = build_demo_store(tmp_path_factory.mktemp("demo") / "demo")
    return _SHARED["demo"]


def drafts_history(rng, n: int, survival_before, survival_after, switch: int | None) -> np.ndarray:
    d = rng.poisson(40, n).astype(float)
    surv = np.tile(np.asarray(survival_before, dtype=float), (n, 1))
    if switch is not None:
        surv[switch:] = survival_after
    # nested acceptance: A_k ≤ A_(k−1), from conditional rates
    cond = surv / np.concatenate([np.ones((n, 1)), surv[:, :-1]], axis=1)
    a = np.zeros((n, surv.shape[1]))
    prev = d.astype(int)
    for k in range(surv.shape[1]):
        prev = rng.binomial(prev, cond[:, k])
        a[:, k] = prev
    inc = np.column_stack([d, surv.shape[1] * d, a.sum(axis=1), a])
    return np.cumsum(inc, axis=0)


def build_drift_store(out_dir: Path) -> Path:
    """Config + store: `steady` (targets .1, .2), `drifting` (.3 failing now, .4); returns the config."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    n = int(DRIFT_SPAN_S / INTERVAL_S)
    times = DRIFT_T0 + INTERVAL_S * np.arange(n)
    switch = n - int(900 / INTERVAL_S)
    targets = {f"http://10.9.0.{j}:8000/metrics": j for j in (1, 2, 3, 4)}
    with Store.open(out_dir / "specdec.db") as store:
        for url, j in targets.items():
            drifting = j >= 3
            for engine in ("0", "1"):
                cum = drafts_history(rng, n, STEADY_SURVIVAL, DRIFTED_SURVIVAL, switch if drifting else None)
                running = rng.integers(1, 9, n).astype(float)
                store.bulk_load_history(url, "kimi-k3", engine, times, cum, running=running)
        # target .3 stops answering: two failed scrapes after its history
        for k in (1, 2):
            store.write_cycle([ScrapeResult("http://10.9.0.3:8000/metrics", float(times[-1]) + k * INTERVAL_S, False,
                                            (), FAILING_ERROR, 0.1)])
    config = out_dir / "specdec.toml"
    config.write_text(
        '[store]\npath = "specdec.db"\n\n'
        '[deployment]\nmethod = "dspark"\ndraft_cost = 0.10\ncost_profile = "flat"\nbaseline_tokens_per_second = 118\n\n'
        '[routes.steady]\ntargets = ["http://10.9.0.1:8000/metrics", "http://10.9.0.2:8000/metrics"]\n\n'
        '[routes.drifting]\ntargets = ["http://10.9.0.3:8000/metrics", "http://10.9.0.4:8000/metrics"]\n',
        encoding="utf-8")
    return config


def live_cycle(target: str, t: float, step: int, gamma: int) -> ScrapeResult:
    """One synthetic scrape of one engine for the concurrent-writer test (counters grow
    with ``step``; a new ``gamma`` is a new position label set, i.e. a γ change)."""
    d = 40.0 * step
    per_pos = tuple(d * 0.8 ** (k + 1) for k in range(gamma))
    counts = SpecCounts(d, gamma * d, sum(per_pos), per_pos)
    return ScrapeResult(target, t, True, (EngineSnapshot("kimi-k3", "0", counts, None, None),), None, 0.01)
