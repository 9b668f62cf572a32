"""Decision quality: how good is the γ the tool picks when it cannot see the truth?

For every scenario class (benchmarks/decision_scenarios.py) and every seed, a window of
scrape intervals is generated from a known acceptance process at the DEPLOYED γ only — the
counts vLLM would expose (D, T, A, A_1..A_γ per 15 s scrape, summed over the route's
engines) and the step shape (num_requests_running samples; iteration_tokens on the
specialized path) — and fed to the tool's pipeline (specdec.pipeline.tune_intervals, 1,000
bootstrap resamples). The truth is the process's own survival at EVERY γ
(process.true_survival(γ, t at the window's end)) priced by the TRUE cost (the tool's
figures, or figures off by a known factor; a told specialized_speedup range is the truth's
law, one uniform draw per seed), through the tool's own speedup formula:

  S(γ) = AL(γ)·τ(0) / τ(γ),  AL(γ) = 1 + Σ_{k≤γ} a_k(γ),  τ(γ) = Σ_B v_B·t_B(γ)  (model.speedup)

over the stationary batch mix (time shares → request weights at the deployed γ, as the
tool converts them). Per seed:
  regret           = 1 − S(recommended γ) / S(best allowed γ)
  speedup error    = projected speedup at the recommended γ / S(recommended γ) − 1
  covered          = S(recommended γ) inside the 90% speedup interval
and the same for two baselines: the seeds' method (equivalent independent p from the
window's AL, flat cost 1 + r or 1 + γ·c, over every γ the drafter allows) and keeping the
deployed γ (the tool's projection there). Regret is measured on recommended_gamma (the best
expected); the change/keep/off decision is reported beside it, with the regret of the γ it
would actually deploy.

Counts in-process, vectorised (benchmarks/decision_truth.py), with the law of the simulator's processes: a batch size per
5 s chunk (the simulator's lazy chain), verify steps per chunk from the true step time;
stateless processes (independent, front-loaded, drift between them) draw per-interval
multinomial counts of accepted lengths (a sum of i.i.d. per-draft draws is exactly that);
the heterogeneous process runs its renewal of requests per batch slot (p ~ Beta, lifetime
geometric with the process's end_probability h(p)) and draws each request's share of an
interval as conditional binomials N_k ~ Bin(N_{k−1}, p) — P(L ≥ k | p) = p^k, as its
draw_lengths. Once per class the HTTP path runs too: the simulated fleet (acceptance.sim)
serves /metrics, the real collector scrapes it into a store, acceptance.windows reads the
route window, and that one seed is scored the same way (``http_check``).

Run:  .venv/bin/python benchmarks/decision.py [--seeds 200] [--classes a,b] [--workers N]
      [--no-http] [--json | --markdown]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decision_scenarios import CLASS_BY_NAME, CLASSES, DecisionClass  # noqa: E402  (the benchmark's own data)

from decision_truth import CHUNK_S, SCRAPE_S, Truth, generate_segment, tool_deployment  # noqa: E402
from decision_rounds import RoundTwo, round_two, route_window  # noqa: E402

from acceptance.definitions import acceptance_length_independent  # noqa: E402
from acceptance.json_safe import json_safe  # noqa: E402
from acceptance.sim.processes import IndependentProcess  # noqa: E402
from model.deployment import Deployment  # noqa: E402
from model.tail_evidence import holding_out  # noqa: E402
from model.speedup import flat_step_cost  # noqa: E402
from specdec.pipeline import TuningOptions, tune_intervals  # noqa: E402

LEVEL = 0.9
N_RESAMPLES = 1000         # the pipeline's default
TARGETS = {"median_regret": 0.005, "p95_regret": 0.02, "median_speedup_error": 0.02, "coverage_band": 0.05}
SCHEMA_VERSION = 1


# -------------------------------------------------------------------------- scoring


@dataclass
class MethodScore:
    """One method's pick on one seed, scored against the truth."""

    gamma: int
    regret: float                      # 1 − S(γ)/S(best)
    speedup_error: float               # projected / true − 1 at γ
    covered: bool | None               # the truth inside the method's 90% interval (None: no interval)


@dataclass
class SeedScore:
    tool: MethodScore
    seeds_method: MethodScore
    keep_deployed: MethodScore
    decision: str
    decided_regret: float              # regret of the γ the decision deploys (rec on change/off, else deployed)
    reach_regret: float                # regret against the best γ the tool may consider (its candidates)
    extrapolated: bool                 # the recommended γ lies past the deployed one (a tail-model spread)
    drafts: float
    covered_by_gamma: dict[int, bool] = field(default_factory=dict)  # every candidate with an interval
    model_error: float | None = None
    second_regret: float = math.nan    # after deploying what the decision deploys and tuning the next window
    round2: RoundTwo | None = None     # the same protocol scored on round 2's own decision (decision_rounds)
    # on the specialized path: the tool warned that its γ rests on the configured speedup
    specialized_warning: bool | None = None


def seeds_method_speedup(p: float, gamma: int, deployment: Deployment) -> float:
    """The seeds' model: (1 − p^(γ+1)) / (1 − p) over the flat step cost (1 + r, 1 + γ·c + c0, 1)."""
    if gamma == 0:
        return 1.0
    return float(acceptance_length_independent(p, gamma)) / flat_step_cost(
        gamma, deployment.draft_cost, deployment.method, deployment.draft_overhead)


def seeds_choice(p, allowed, deployment: Deployment) -> tuple[int, float, float | None, float | None]:
    """The seeds' method's pick from an equivalent p (a ScalarEstimate): (γ, its projected
    speedup, and that speedup at the ends of p's interval, None without one)."""
    speedups = np.array([seeds_method_speedup(p.value, int(g), deployment) if allowed[g] else -np.inf
                         for g in range(len(allowed))])
    gamma = int(np.argmax(speedups))
    if not (math.isfinite(p.low) and math.isfinite(p.high)):
        return gamma, float(speedups[gamma]), None, None
    low, high = sorted(seeds_method_speedup(x, gamma, deployment) for x in (p.low, p.high))
    return gamma, float(speedups[gamma]), low, high


def score(tuning, truth: Truth, true_speedup: np.ndarray, deployment: Deployment) -> SeedScore:
    rec = tuning.recommendation
    allowed = truth.allowed
    best = float(np.max(np.where(allowed, true_speedup, -np.inf)))
    cand = {c.gamma: c for c in rec.candidates}
    reach = np.array([g in cand for g in truth.gammas]) & allowed
    best_in_reach = float(np.max(np.where(reach, true_speedup, -np.inf)))

    def scored(gamma: int, projected: float, low, high) -> MethodScore:
        s = float(true_speedup[gamma])
        covered = None if low is None or high is None else bool(low <= s <= high)
        return MethodScore(int(gamma), 1.0 - s / best, projected / s - 1.0, covered)

    def tool_pick(gamma: int) -> MethodScore:
        c = cand[gamma]
        return scored(gamma, c.speedup, c.speedup_low, c.speedup_high)

    # The seeds' method: the window's equivalent p, flat cost, every γ the drafter allows.
    g_seeds, seeds_projected, *lo_hi = seeds_choice(tuning.estimate.equivalent_p, allowed, deployment)
    deployed = rec.deployed_gamma
    final = rec.recommended_gamma if rec.decision in ("change", "off", "probe") else deployed
    covered_by_gamma = {
        c.gamma: bool(c.speedup_low <= true_speedup[c.gamma] <= c.speedup_high)
        for c in rec.candidates if c.gamma > 0 and c.allowed and c.speedup_low is not None
    }
    return SeedScore(
        tool=tool_pick(rec.recommended_gamma),
        seeds_method=scored(g_seeds, seeds_projected, *lo_hi),
        keep_deployed=tool_pick(deployed),
        decision=rec.decision,
        decided_regret=1.0 - float(true_speedup[final]) / best,
        reach_regret=1.0 - float(true_speedup[rec.recommended_gamma]) / best_in_reach,
        extrapolated=bool(cand[rec.recommended_gamma].extrapolated),
        drafts=float(tuning.estimate.drafts),
        covered_by_gamma=covered_by_gamma,
        model_error=rec.model_error,
        specialized_warning=(None if deployment.decode_backend != "latency_specialized"
                             else rec.specialized_break_even is not None
                             and rec.specialized_break_even.rests_on_configuration),
    )


def drawn_specialized_speedup(cls: DecisionClass) -> bool:
    """Whether each seed draws its true specialized speedup uniformly from the told range
    (the specialized classes at the cost they are told); else the class's one value."""
    lo, hi = tool_deployment(cls).specialized_speedup_range
    return (cls.deployment.decode_backend == "latency_specialized" and cls.true_specialized_speedup is None
            and hi > lo)


def run_seed(cls: DecisionClass, truth: Truth, true_speedup: np.ndarray, deployment: Deployment,
             class_index: int, seed: int) -> SeedScore:
    """Round 1 on a window at the deployed γ (the class's engines: one segment), then round 2
    after applying its decision (decision_rounds)."""
    rng = np.random.default_rng([9, class_index, seed])
    intervals, shape, itl = generate_segment(cls, truth, rng)
    tuning = tune_intervals(cls.name, intervals, deployment, window=route_window([(intervals, cls.engines, itl, shape)],
                                                                                 shape, cls.name),
                            options=TuningOptions(level=LEVEL, n_resamples=N_RESAMPLES, seed=seed))
    first = score(tuning, truth, true_speedup, deployment)

    def seeds_pick(estimate):
        return seeds_choice(estimate.equivalent_p, truth.allowed, deployment)

    first.round2 = round_two(cls, truth, tuning.recommendation, deployment, first.seeds_method.gamma, seeds_pick,
                             rng, seed, level=LEVEL, n_resamples=N_RESAMPLES)
    first.second_regret = first.round2.recommended_regret
    return first


# ------------------------------------------------------------------------ HTTP path


def run_http_check(cls: DecisionClass, truth: Truth, true_speedup: np.ndarray, deployment: Deployment,
                   seed: int = 0) -> dict:
    """One seed through the real path: simulated fleet → HTTP → collector → store → route window → pipeline."""
    from acceptance.collector import Collector
    from acceptance.sim import BatchMix, EngineSpec, Fleet, PrefillMix, Scenario, TargetSpec
    from acceptance.store import Store
    from acceptance.windows import route_window

    engines = tuple(
        EngineSpec(str(e), cls.deployed_gamma, cls.process,
                   BatchMix(tuple((int(b), float(w)) for b, w in sorted(cls.batch.items())), cls.persistence),
                   step_time_s=truth.engine_step_time, prefill=PrefillMix(prob=cls.prefill_prob))
        for e in range(cls.engines))
    target_name = f"{cls.name}-0"
    scenario = Scenario(name=cls.name, seed=seed, targets=(TargetSpec(target_name, cls.name, "kimi-k3", engines),),
                        chunk_s=CHUNK_S)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, Fleet(scenario) as fleet:
        url = fleet.serve()[target_name]
        with Collector(timeout_s=10.0, now=lambda: fleet.now) as collector, Store.open(Path(tmp) / "decision.db") as store:
            for cycle in range(int(round(cls.window_s / SCRAPE_S)) + 1):
                if cycle:
                    fleet.advance(SCRAPE_S)
                results = collector.collect([url])
                if not results[0].ok:
                    raise RuntimeError(f"class {cls.name}: scrape failed: {results[0].error}")
                store.write_cycle(results)
            window = route_window(store, [url], scenario.start_time, fleet.now)
        segment = window.newest_segment
        tuning = tune_intervals(cls.name, segment.intervals, deployment, window=window,
                                options=TuningOptions(level=LEVEL, n_resamples=N_RESAMPLES, seed=seed))
        truth_drafts = sum(c.drafts for c in fleet.route_truth_counts(cls.name).values())
    s = score(tuning, truth, true_speedup, deployment)
    return {
        "recommended_gamma": s.tool.gamma, "decision": s.decision, "regret": s.tool.regret,
        "speedup_error": s.tool.speedup_error, "covered": s.tool.covered,
        "drafts": float(segment.total.drafts), "simulator_drafts": float(truth_drafts),
        "model_error": s.model_error, "wall_s": round(time.monotonic() - started, 2),
    }


# ---------------------------------------------------------------------- aggregation


def _quantile(xs, q) -> float:
    return float(np.quantile(np.asarray(xs, dtype=float), q)) if len(xs) else math.nan


def _coverage(flags) -> float | None:
    """The share of True among the flags that are not None (None when every one is)."""
    flags = [f for f in flags if f is not None]
    return float(np.mean(flags)) if flags else None


def method_summary(picks: list[MethodScore]) -> dict:
    regrets = [m.regret for m in picks]
    errors = [abs(m.speedup_error) for m in picks]
    return {
        "median_regret": _quantile(regrets, 0.5),
        "p95_regret": _quantile(regrets, 0.95),
        "mean_regret": float(np.mean(regrets)) if regrets else math.nan,
        "median_speedup_error": _quantile(errors, 0.5),
        "interval_coverage": _coverage([m.covered for m in picks]),
        "nominal_coverage": LEVEL,
    }


def run_class(name: str, n_seeds: int, http: bool) -> dict:
    """Every seed of one class, plus the HTTP check; a JSON-ready per-class report."""
    cls = CLASS_BY_NAME[name]
    class_index = [c.name for c in CLASSES].index(name)
    started = time.monotonic()
    truth = Truth(cls)
    deployment = tool_deployment(cls)
    true_speedup = truth.speedups(cls.window_s)
    scores = []
    # a class built from a reference curve is priced on evidence without that curve
    with holding_out(cls.held_out) if cls.held_out else nullcontext():
        scores = _class_seeds(cls, class_index, truth, deployment, true_speedup, n_seeds)
    replicate_s = time.monotonic() - started
    report = _class_report(cls, truth, true_speedup, scores, n_seeds, replicate_s)
    report["http_check"] = run_http_check(cls, truth, true_speedup, deployment) if http else None
    return report


def _class_seeds(cls, class_index: int, truth: Truth, deployment: Deployment, true_speedup, n_seeds: int):
    scores = []
    for seed in range(n_seeds):
        if drawn_specialized_speedup(cls):
            # The told range is the truth's law: each seed's true speedup is drawn from it.
            lo, hi = deployment.specialized_speedup_range
            seed_truth = Truth(cls, float(np.random.default_rng([10, class_index, seed]).uniform(lo, hi)))
            scores.append(run_seed(cls, seed_truth, seed_truth.speedups(cls.window_s), deployment, class_index, seed))
        else:
            scores.append(run_seed(cls, truth, true_speedup, deployment, class_index, seed))
    return scores


def departs_from_seeds_model(cls: DecisionClass) -> bool:
    """The truth is not the seeds' model: acceptance other than independent p, or a cost other
    than the flat one the tool is told."""
    return not (isinstance(cls.process, IndependentProcess) and cls.deployment.cost_profile == "flat"
                and cls.true_draft_cost_factor == 1.0 and cls.true_verify_factor == 1.0
                and cls.true_draft_overhead is None)


def round2_summary(regrets, errors, covered, decided=None) -> dict:
    extra = {} if decided is None else {"decided_median_regret": _quantile(decided, 0.5),
                                        "decided_p95_regret": _quantile(decided, 0.95)}
    return {**extra, "median_regret": _quantile(regrets, 0.5), "p95_regret": _quantile(regrets, 0.95),
            "mean_regret": float(np.mean(regrets)) if len(regrets) else math.nan,
            "median_speedup_error": _quantile([abs(e) for e in errors if math.isfinite(e)], 0.5),
            "interval_coverage": _coverage(covered), "nominal_coverage": LEVEL}


def _cost_summary(costs) -> dict | None:
    return {"mean": float(np.mean(costs)), "p95": _quantile(costs, 0.95)} if len(costs) else None


def _round2_report(scores: list[SeedScore]) -> dict:
    """Round 2 of a class: the tool's, the seeds' method's, their paired difference, the costs."""
    r2 = [s.round2 for s in scores]
    diff = np.array([r.regret - r.seeds_regret for r in r2])
    half = 1.96 * float(diff.std(ddof=1)) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
    return {
        "round2": {**round2_summary([r.regret for r in r2], [r.speedup_error for r in r2], [r.covered for r in r2],
                                    [r.decided_regret for r in r2]),
                   "decision_shares": {d: float(np.mean([r.decision == d for r in r2]))
                                       for d in ("change", "keep", "off", "probe")}},
        "round2_regret": float(np.mean([r.regret for r in r2])),
        "seeds_round2_regret": float(np.mean([r.seeds_regret for r in r2])),
        # paired over seeds: specdec − seeds, mean and its 95% interval
        "round2_regret_difference": {"mean": float(diff.mean()), "low": float(diff.mean() - half),
                                     "high": float(diff.mean() + half)},
        "probe_share": float(np.mean([r.probed for r in r2])),
        "reverted_share": float(np.mean([r.reverted for r in r2])),  # round 2 undoing round 1's move: a flap
        "total_cost": _cost_summary([r.cost for r in r2 if r.probed]),
        "mean_cost": float(np.mean([r.cost for r in r2])),
        "seeds_mean_cost": float(np.mean([r.seeds_cost for r in r2])),
    }


def _class_report(cls: DecisionClass, truth: Truth, true_speedup, scores: list[SeedScore], n_seeds: int,
                  replicate_s: float) -> dict:
    allowed_s = np.where(truth.allowed, true_speedup, -np.inf)
    best = int(np.argmax(allowed_s))
    tool = method_summary([s.tool for s in scores])
    seeds = method_summary([s.seeds_method for s in scores])
    keep = method_summary([s.keep_deployed for s in scores])
    differ = any(s.tool.gamma != s.seeds_method.gamma for s in scores)
    per_gamma: dict[int, list[bool]] = {}
    for s in scores:
        for g, c in s.covered_by_gamma.items():
            per_gamma.setdefault(g, []).append(c)
    decisions = {d: sum(s.decision == d for s in scores) / len(scores) for d in ("change", "keep", "off", "probe")}
    rec_hist: dict[int, int] = {}
    for s in scores:
        rec_hist[s.tool.gamma] = rec_hist.get(s.tool.gamma, 0) + 1
    report = {
        "name": cls.name,
        "what": cls.what,
        "assumed": cls.assumed,
        "not_assumed_why": cls.not_assumed_why or None,
        "seeds": n_seeds,
        "deployed_gamma": cls.deployed_gamma,
        "window_s": cls.window_s,
        "true_best_gamma": best,
        "true_speedup": {int(g): round(float(true_speedup[g]), 4) for g in truth.gammas if truth.allowed[g]},
        "tool": {**tool, "recommended_gamma": {str(g): n for g, n in sorted(rec_hist.items())},
                 "decision_shares": decisions,
                 "decided_median_regret": _quantile([s.decided_regret for s in scores], 0.5),
                 "reach_median_regret": _quantile([s.reach_regret for s in scores], 0.5),
                 "reach_mean_regret": float(np.mean([s.reach_regret for s in scores])),
                 "second_round_mean_regret": float(np.mean([s.second_regret for s in scores])),
                 "interval_coverage_observed": _coverage([s.tool.covered for s in scores if not s.extrapolated]),
                 "interval_coverage_extrapolated": _coverage([s.tool.covered for s in scores if s.extrapolated]),
                 "extrapolated_share": float(np.mean([s.extrapolated for s in scores])),
                 "decided_mean_regret": float(np.mean([s.decided_regret for s in scores])),
                 "coverage_by_gamma": {str(g): float(np.mean(v)) for g, v in sorted(per_gamma.items())},
                 "median_signed_speedup_error": _quantile([s.tool.speedup_error for s in scores], 0.5),
                 "specialized_warning_share": _coverage([s.specialized_warning for s in scores])},
        "seeds_method": {**seeds, "recommended_gamma": int(np.bincount([s.seeds_method.gamma for s in scores]).argmax())},
        "keep_deployed": keep,
        "tool_differs_from_seeds": differ,
        "tool_beats_seeds": (tool["mean_regret"] < seeds["mean_regret"]) if differ else None,
        "replicate_mean_drafts": float(np.mean([s.drafts for s in scores])),
        "replicates_wall_s": round(replicate_s, 2),
        "_regrets": {k: [getattr(s, k).regret for s in scores] for k in ("tool", "seeds_method", "keep_deployed")},
        "_errors": {k: [abs(getattr(s, k).speedup_error) for s in scores] for k in ("tool", "seeds_method", "keep_deployed")},
        "_covered": {k: [getattr(s, k).covered for s in scores] for k in ("tool", "seeds_method", "keep_deployed")},
        "_reach_regrets": [s.reach_regret for s in scores],
        "_decided_regrets": [s.decided_regret for s in scores],
        "_second_regrets": [s.second_regret for s in scores],
        "_extrapolated": [s.extrapolated for s in scores],
        "_round2": [s.round2 for s in scores],
        "departs_from_seeds_model": departs_from_seeds_model(cls),
        "held_out_curve": cls.held_out or None,
        **_round2_report(scores),
    }
    report["seeds_method"]["round2"] = round2_summary(
        [s.round2.seeds_regret for s in scores], [s.round2.seeds_speedup_error for s in scores],
        [s.round2.seeds_covered for s in scores])
    report["keep_deployed"]["round2"] = dict(keep)  # the deployed γ again: its round 1
    return report


def summarise(reports: list[dict]) -> dict:
    """Pooled over every seed of every class; coverage over the classes the models assume
    (``interval_coverage``) and, reported beside it, over the others."""
    def pooled(method: str) -> dict:
        regrets = [x for r in reports for x in r["_regrets"][method]]
        errors = [x for r in reports for x in r["_errors"][method]]
        cov_in = _coverage([x for r in reports if r["assumed"] for x in r["_covered"][method]])
        cov_out = _coverage([x for r in reports if not r["assumed"] for x in r["_covered"][method]])
        return {
            "median_regret": _quantile(regrets, 0.5),
            "p95_regret": _quantile(regrets, 0.95),
            "median_speedup_error": _quantile(errors, 0.5),
            "interval_coverage": cov_in,
            "nominal_coverage": LEVEL,
            "mean_regret": float(np.mean(regrets)) if regrets else math.nan,
            "interval_coverage_not_assumed": cov_out,
            "scenarios": len(regrets),
        }

    summary = pooled("tool")
    reach = [x for r in reports for x in r["_reach_regrets"]]
    decided = [x for r in reports for x in r["_decided_regrets"]]
    summary["reach_median_regret"] = _quantile(reach, 0.5)
    summary["reach_p95_regret"] = _quantile(reach, 0.95)
    summary["decided_median_regret"] = _quantile(decided, 0.5)
    summary["decided_p95_regret"] = _quantile(decided, 0.95)
    second = [x for r in reports for x in r["_second_regrets"]]
    summary["second_round_median_regret"] = _quantile(second, 0.5)
    summary["second_round_p95_regret"] = _quantile(second, 0.95)
    for part, extrapolated in (("observed", False), ("extrapolated", True)):
        summary[f"interval_coverage_{part}"] = _coverage(
            [c for r in reports if r["assumed"] for c, e in zip(r["_covered"]["tool"], r["_extrapolated"])
             if e == extrapolated])
    summary["decision_shares"] = {
        d: float(np.mean([r["tool"]["decision_shares"][d] for r in reports])) for d in ("change", "keep", "off", "probe")}
    assumed = [r for r in reports if r["assumed"]]
    summary["classes"] = len(reports)
    summary["classes_assumed"] = len(assumed)
    summary["classes_coverage_within_5_points"] = sum(
        r["tool"]["interval_coverage"] is not None and abs(r["tool"]["interval_coverage"] - LEVEL) <= TARGETS["coverage_band"]
        for r in assumed)
    summary["classes_coverage_within_5_points_deployed"] = sum(
        r["keep_deployed"]["interval_coverage"] is not None
        and abs(r["keep_deployed"]["interval_coverage"] - LEVEL) <= TARGETS["coverage_band"] for r in assumed)
    summary["classes_coverage_within_5_points_observed"] = sum(
        r["tool"]["interval_coverage_observed"] is not None
        and abs(r["tool"]["interval_coverage_observed"] - LEVEL) <= TARGETS["coverage_band"] for r in assumed)
    summary["classes_recommending_observed"] = sum(r["tool"]["interval_coverage_observed"] is not None for r in assumed)
    differ = [r for r in reports if r["tool_differs_from_seeds"]]
    summary["classes_differing_from_seeds"] = len(differ)
    summary["classes_beating_seeds"] = sum(bool(r["tool_beats_seeds"]) for r in differ)
    summary["targets"] = TARGETS
    baselines = {"seeds_method": pooled("seeds_method"), "keep_deployed": pooled("keep_deployed")}
    rounds = _pooled_round2(reports)
    summary["round2"] = rounds["specdec"]
    baselines["seeds_method"]["round2"] = rounds["seeds_method"]
    baselines["keep_deployed"]["round2"] = baselines["keep_deployed"].copy()
    summary.update(_round2_comparison(reports))
    return {"summary": summary, "baselines": baselines, "round2": rounds["specdec"],
            "total_cost": _cost_summary([r.cost for rep in reports for r in rep["_round2"] if r.probed])}


def _pooled_round2(reports: list[dict]) -> dict:
    """Round 2 pooled over every seed of every class; coverage over the assumed classes."""
    r2 = [(rep["assumed"], r) for rep in reports for r in rep["_round2"]]
    return {
        "specdec": round2_summary([r.regret for _, r in r2], [r.speedup_error for _, r in r2],
                                  [r.covered for a, r in r2 if a], [r.decided_regret for _, r in r2]),
        "seeds_method": round2_summary([r.seeds_regret for _, r in r2], [r.seeds_speedup_error for _, r in r2],
                                       [r.seeds_covered for a, r in r2 if a]),
    }


def _round2_comparison(reports: list[dict]) -> dict:
    """Against the seeds' method in round 2: the classes where specdec is worse by a paired
    95% interval above 0.5%, and the mean regrets over the classes whose truth departs from
    the seeds' model."""
    departing = [r for r in reports if r["departs_from_seeds_model"]]
    return {
        "classes_round2_worse_than_seeds": [r["name"] for r in reports
                                            if r["round2_regret_difference"]["low"] > 0.005],
        "departing_classes_round2_mean_regret": {
            "classes": len(departing),
            "specdec": float(np.mean([r["round2_regret"] for r in departing])) if departing else None,
            "seeds_method": float(np.mean([r["seeds_round2_regret"] for r in departing])) if departing else None,
        },
        "round2_mean_cost": float(np.mean([r["mean_cost"] for r in reports])),
        "seeds_round2_mean_cost": float(np.mean([r["seeds_mean_cost"] for r in reports])),
        "probe_share": float(np.mean([r["probe_share"] for r in reports])),
        "reverted_share": float(np.mean([r["reverted_share"] for r in reports])),
    }


def public(report: dict) -> dict:
    return {k: v for k, v in report.items() if not k.startswith("_")}


def run(names: list[str], n_seeds: int, http: bool, workers: int) -> dict:
    started = time.monotonic()
    if workers > 1 and len(names) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            reports = list(pool.map(run_class, names, [n_seeds] * len(names), [http] * len(names)))
    else:
        reports = [run_class(n, n_seeds, http) for n in names]
    doc = {"schema_version": SCHEMA_VERSION, **summarise(reports), "scenarios": [public(r) for r in reports]}
    doc["wall_s"] = round(time.monotonic() - started, 1)
    doc["seeds_per_class"] = n_seeds
    return doc


# --------------------------------------------------------------------------- output


def _pct(x) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"


def _cov(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def markdown_table(doc: dict) -> str:
    """The README's summary table (and the lines that qualify it)."""
    s = doc["summary"]
    rows = [("specdec (recommended γ)", s), ("seeds' method (equivalent p, flat cost)", doc["baselines"]["seeds_method"]),
            ("keep the deployed γ", doc["baselines"]["keep_deployed"])]
    out = [f"{s['classes']} scenario classes × {doc['seeds_per_class']} seeds ({s['scenarios']} windows); "
           f"{s['classes_assumed']} classes use processes and costs the models assume.", "",
           "| method | median regret | 95th pct regret | median speedup error | 90% interval coverage (assumed classes) "
           "| coverage (other classes) |",
           "|---|---|---|---|---|---|"]
    for name, m in rows:
        out.append(f"| {name} | {_pct(m['median_regret'])} | {_pct(m['p95_regret'])} | "
                   f"{_pct(m['median_speedup_error'])} | {_cov(m['interval_coverage'])} | "
                   f"{_cov(m['interval_coverage_not_assumed'])} |")
    out += ["",
            f"- specdec against the best γ it may consider (its candidates: the drafter's block, gamma_max): median regret "
            f"{_pct(s['reach_median_regret'])}, 95th percentile {_pct(s['reach_p95_regret'])}.",
            f"- the γ its decision deploys (the recommendation on change/off, else the deployed γ): median regret "
            f"{_pct(s['decided_median_regret'])}, 95th percentile {_pct(s['decided_p95_regret'])}; decisions "
            f"change {s['decision_shares']['change']:.0%}, keep {s['decision_shares']['keep']:.0%}, "
            f"off {s['decision_shares']['off']:.0%}, probe {s['decision_shares']['probe']:.0%}.",
            f"- coverage in the assumed classes, split: {_cov(s['interval_coverage_observed'])} where the "
            f"recommended γ was observed (γ ≤ deployed: a sampling interval), "
            f"{_cov(s['interval_coverage_extrapolated'])} where it was extrapolated (the tail models' spread, "
            f"docs/MODEL.md: not a sampling interval).",
            f"- per class within 5 points of 90%: {s['classes_coverage_within_5_points']} of "
            f"{s['classes_assumed']} assumed classes at the recommended γ; "
            f"{s['classes_coverage_within_5_points_deployed']} of {s['classes_assumed']} at the deployed γ "
            f"(every class's observed interval); {s['classes_coverage_within_5_points_observed']} of "
            f"{s['classes_recommending_observed']} at the recommended γ on the seeds where it was observed.",
            f"- lower mean regret than the seeds' method in {s['classes_beating_seeds']} of "
            f"{s['classes_differing_from_seeds']} classes where their picks differ.",
            _round2_line(doc), _specialized_line(doc)]
    return "\n".join(out)


def _specialized_line(doc: dict) -> str:
    """How often round 1 warned that its γ rests on the configured specialized speedup
    (model.specialized.SpecializedBreakEven), per class on the specialized path."""
    shares = [f"{r['name']}{'' if r['assumed'] else ' (not assumed)'} {r['tool']['specialized_warning_share']:.0%}"
              for r in doc["scenarios"] if r["tool"].get("specialized_warning_share") is not None]
    return ("- specialized path, round 1 warned that the decision's γ rests on the configured speedup "
            "(`specialized_break_even`): " + ("; ".join(shares) if shares else "no class") + ".")


def _round2_line(doc: dict) -> str:
    """Round 2 (decision_rounds): the regret of what it finds and of what it deploys, against
    the seeds' method in the same protocol, and what probing cost."""
    s, r2, seeds = doc["summary"], doc["round2"], doc["baselines"]["seeds_method"]["round2"]
    dep = s["departing_classes_round2_mean_regret"]
    worse = s["classes_round2_worse_than_seeds"]
    cost = doc["total_cost"]
    return (f"- round 2 (the decision applied: change redeploys, a probe runs for its duration, keep "
            f"nothing; the next window tuned): median regret {_pct(r2['median_regret'])}, 95th percentile "
            f"{_pct(r2['p95_regret'])} (of the γ the fleet then runs: {_pct(r2['decided_median_regret'])} / "
            f"{_pct(r2['decided_p95_regret'])}); the seeds' method {_pct(seeds['median_regret'])} / "
            f"{_pct(seeds['p95_regret'])}; over the {dep['classes']} classes whose truth departs from independent p "
            f"or flat cost, mean {_pct(dep['specdec'])} against the seeds' {_pct(dep['seeds_method'])}; worse than "
            f"the seeds' by a paired 95% interval above 0.5% in {len(worse)} class(es)"
            + (f" ({', '.join(worse)})" if worse else "") + f"; round 2 moved the fleet back to the deployed γ "
            f"after round 1 moved it in {s['reverted_share']:.2%} of windows; probes in {s['probe_share']:.0%} of "
            f"round-1 windows, "
            + ("none" if cost is None else f"their two windows' cost mean {_pct(cost['mean'])}, 95th percentile "
                                           f"{_pct(cost['p95'])} of the route's output (restarts included)") + ".")


def text_report(doc: dict) -> str:
    lines = [f"{'class':36s} {'dep':>3s} {'best':>4s} {'rec':>4s} {'regret med/p95':>15s} {'reach':>7s} {'2nd':>7s} {'|err|':>7s} "
             f"{'cover':>6s} {'c.dep':>6s} {'seeds γ/regret':>15s} {'keep':>7s} {'chg/keep/off':>14s} {'http γ/regret':>14s}"]
    for r in doc["scenarios"]:
        t = r["tool"]
        top = max(t["recommended_gamma"].items(), key=lambda kv: kv[1])[0]
        h = r["http_check"]
        ds = t["decision_shares"]
        lines.append(
            f"{r['name']:36s} {r['deployed_gamma']:>3d} {r['true_best_gamma']:>4d} {top:>4s} "
            f"{_pct(t['median_regret']):>7s}/{_pct(t['p95_regret']):>7s} {_pct(t['reach_mean_regret']):>7s} {_pct(t['second_round_mean_regret']):>7s} "
            f"{_pct(t['median_speedup_error']):>7s} {_cov(t['interval_coverage']):>6s} "
            f"{_cov(r['keep_deployed']['interval_coverage']):>6s} "
            f"{r['seeds_method']['recommended_gamma']:>3d}/{_pct(r['seeds_method']['mean_regret']):>11s} "
            f"{_pct(r['keep_deployed']['mean_regret']):>7s} {ds['change']:.2f}/{ds['keep']:.2f}/{ds['off']:.2f} "
            + (f"{h['recommended_gamma']:>4d}/{_pct(h['regret']):>9s}" if h else "             —")
            + ("" if r["assumed"] else "  (not assumed)"))
    lines += ["", "regret med/p95: over the class's seeds; reach: mean regret against the best γ among its candidates; "
              "2nd: mean regret of the second recommendation, after deploying the first decision; "
              "cover: 90% interval at the recommended γ against the truth; c.dep: the same at the deployed γ",
              "", markdown_table(doc), "", f"wall time {doc['wall_s']:.0f} s"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds per class (default 200)")
    parser.add_argument("--classes", default="", help="comma-separated class names (default: all)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: the CPU count)")
    parser.add_argument("--no-http", action="store_true", help="skip the once-per-class HTTP collector path")
    parser.add_argument("--json", action="store_true", help="print the JSON document only")
    parser.add_argument("--markdown", action="store_true", help="print the summary table only")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the JSON document, with the command, machine and date, to this file "
                             "(docs/BENCHMARKS.md reads benchmarks/results/decision.json)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.classes.split(",") if n.strip()] or [c.name for c in CLASSES]
    unknown = [n for n in names if n not in CLASS_BY_NAME]
    if unknown:
        print(f"decision: unknown class {unknown[0]!r} (see benchmarks/decision_scenarios.py)", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print(f"decision: --seeds must be ≥ 1, got {args.seeds}", file=sys.stderr)
        return 2
    doc = run(names, args.seeds, not args.no_http, max(1, args.workers))
    if args.out is not None:
        recorded = {"command": "python benchmarks/decision.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                    "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                "python": platform.python_version()},
                    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), **doc}
        args.out.write_text(json.dumps(json_safe(recorded), allow_nan=False, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(json_safe(doc), allow_nan=False))
    elif args.markdown:
        print(markdown_table(doc))
    else:
        print(text_report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
