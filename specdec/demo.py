"""`specdec demo`: the whole path on the embedded default — no GPU, no vLLM.

A simulated fleet (acceptance.sim, scenario "demo": routes `structured` and `open`,
three engines each on two targets, an engine restart at 20m and a γ change at 40m) serves
vLLM-format /metrics on loopback; the real collector scrapes it over HTTP every 15 s of
simulated time into a fresh store; tune-gamma's pipeline recommends γ per route; and the
result is printed beside the simulator's known best γ.

The cost profile is a measured table (``step_costs.csv``) written from the simulated
engines' own step-time function — as `specdec calibrate` would measure it on real
engines — so the truth and the tool price steps alike and the comparison tests what the
tool has to infer: acceptance, from counters, at the deployed γ only.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from acceptance.collector import Collector
from acceptance.sim import Fleet, LatencyBoundStepTime, build_scenario
from acceptance.store import Store
from model.deployment import Deployment
from model.recommend import RouteInputs, recommend
from model.speedup import batch_mix_from_time_shares

from .config import load_config
from .pipeline import RouteTuning, tune_route

DEMO_DIR = Path(".demo")
MAX_GAMMA_TABLE = 12
MAX_BATCH_TABLE = 64


@dataclass
class RouteResult:
    route: str
    tuning: RouteTuning
    true_best_gamma: int
    true_speedup: dict[int, float]          # γ → speedup under the true acceptance and mix

    @property
    def speedup_ratio(self) -> float:
        """True speedup of the tool's γ over the true best's (1.0 = the best)."""
        rec = self.tuning.recommendation.recommended_gamma
        return self.true_speedup.get(rec, float("nan")) / self.true_speedup[self.true_best_gamma]


def write_cost_table(path: Path, step_time: LatencyBoundStepTime) -> None:
    """The measured-table profile (model/profiles.py load_table) of a simulated engine's
    target step (its verify pass, without the drafter), as `specdec calibrate` would measure it."""
    lines = ["# step times of the simulated engines, as calibrate would measure them",
             "batch_size,tokens_per_request,path,seconds"]
    for b in (1, 2, 4, 8, 16, 32, MAX_BATCH_TABLE):
        for q in range(1, MAX_GAMMA_TABLE + 2):
            lines.append(f"{b},{q},stock,{step_time.target(b, q):.9f}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def engine_deployment(step_time: LatencyBoundStepTime, cost_table: Path) -> Deployment:
    """What a config says of the simulated engines when it says the truth: a dspark drafter at
    their own draft cost and their measured step table (whose T(1, 1) is their plain decode)."""
    return Deployment(method="dspark", draft_cost=step_time.draft_cost, cost_profile=str(cost_table))


def _write_config(path: Path, routes: dict[str, list[str]], step_time: LatencyBoundStepTime) -> None:
    out = [
        "# written by `specdec demo`: the simulated fleet's routes (their ports are gone once",
        "# the demo ends; the store keeps what was scraped)",
        "[store]", 'path = "specdec.db"', 'retention = "30d"', "",
        "[deployment]", 'method = "dspark"', f"draft_cost = {step_time.draft_cost}", 'decode_backend = "auto"',
        'cost_profile = "step_costs.csv"',
        "speculative_keys = {}  # the simulated engines set no other --speculative-config keys",
        'objective = "interactivity"', "min_gain = 0.03", "",
    ]
    for route, urls in routes.items():
        out += [f"[routes.{route}]", "targets = [" + ", ".join(f'"{u}"' for u in urls) + "]", ""]
    path.write_text("\n".join(out), encoding="utf-8")


def true_best(fleet: Fleet, route: str, deployment: Deployment, deployed_gamma: int) -> tuple[int, dict[int, float]]:
    """The best γ under the simulator's true acceptance and batch mix (no sampling noise)."""
    from model.drafters import drafter_for

    max_gamma = drafter_for(deployment.method).max_gamma or MAX_GAMMA_TABLE
    truth = fleet.route_true_survival(route, max_gamma)
    mix = batch_mix_from_time_shares(fleet.route_batch_mix(route, weighting="time"), deployment, deployed_gamma)
    # deployed at max_gamma: no candidate is extrapolated; ties go to the smaller γ
    rec = recommend(RouteInputs(np.asarray(truth), deployed_gamma=max_gamma, gamma_max=max_gamma, batch_mix=mix), deployment)
    return rec.recommended_gamma, {c.gamma: c.speedup for c in rec.candidates if c.allowed}


def run_demo(out_dir: Path = DEMO_DIR, *, seed: int = 0, duration_s: float = 3600.0, interval_s: float = 15.0,
             progress=print) -> list[RouteResult]:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    # The simulator's own "demo" scenario (`specdec simulate --scenario demo` is the same fleet).
    # The simulated hour ends at the wall clock's now, so `tune-gamma --route R` (a window
    # ending now) finds it right after the demo. Counts do not depend on the start time.
    scenario = replace(build_scenario("demo", seed=seed),
                       start_time=float(int(time.time() // interval_s) * interval_s - duration_s))
    step_time = scenario.targets[0].engines[0].step_time_s
    wall0 = time.monotonic()
    with Fleet(scenario) as fleet:
        urls = fleet.serve()
        routes = {r: [urls[t] for t in ts] for r, ts in fleet.routes.items()}
        write_cost_table(out_dir / "step_costs.csv", step_time)
        _write_config(out_dir / "specdec.toml", routes, step_time)
        config = load_config(out_dir / "specdec.toml")
        targets = config.all_targets()
        progress(f"simulated fleet: {len(fleet.engines())} engines on {len(targets)} targets, routes "
                 + ", ".join(f"{r} ({len(ts)} targets)" for r, ts in routes.items()))
        collector = Collector(timeout_s=5.0, max_bytes=config.max_page_bytes, now=lambda: fleet.now)
        n_cycles = int(duration_s // interval_s)
        with Store.open(config.store_path, retention_s=config.retention_s) as store:
            try:
                for cycle in range(n_cycles + 1):
                    if cycle:
                        fleet.advance(interval_s)
                    results = collector.collect(targets)
                    failed = [r for r in results if not r.ok]
                    if failed:
                        raise RuntimeError(f"demo: scrape failed: {failed[0].error}")
                    store.write_cycle(results)
                    if cycle % 40 == 0 or cycle == n_cycles:
                        progress(f"  collected {fleet.elapsed_s / 60:4.0f} min of simulated traffic "
                                 f"({cycle}/{n_cycles} scrape cycles, {time.monotonic() - wall0:.1f}s)")
            finally:
                collector.close()
            results_out = []
            for route in routes:
                tuning = tune_route(config, route, store=store, window_s=duration_s, now=fleet.now)
                best, speedups = true_best(fleet, route, tuning.deployment, tuning.observed_gamma)
                results_out.append(RouteResult(route, tuning, best, speedups))
    return results_out
