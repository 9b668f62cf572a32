"""tune-gamma for one route over 7 days through Prometheus vs through the embedded store.

A fleet of ENGINES engines (γ 5, one target each, job="bench") at 15 s for DAYS days is
generated from a simple seeded process (drafts ~ Poisson(40) per interval, A_k binomial
on a fixed survival curve, requests running 1..8, ITL ~12 ms) and loaded twice:

* into Prometheus with ``promtool tsdb create-blocks-from openmetrics`` — one OpenMetrics
  file per aligned 2-hour block (Prometheus 2.42's promtool re-reads its whole input once
  per 2-hour block, so one big file would be parsed 84 times), then a Prometheus server is
  started on those blocks;
* into the store with ``Store.bulk_load_history`` (the rows and rollups write_cycle stores).

Then it times the route window + estimate + recommendation (specdec.pipeline.tune_intervals)
through each, and reports the disk each used, as one JSON document on stdout (progress on
stderr). Block by block, it also holds each rule evaluation's recorded drafts against the
store's over the span it counts, and names the rule slots the recorded series lack
(``evaluations_against_store``): promtool evaluates a group at a phase its rules file's path
hashes to (benchmarks/promtool_phase.py), and ``--rule-phase S`` pins it S seconds past each
minute, on a raw sample's instant (0) or between samples (7.5) — or in the last second before
each 2-hour block, the slot promtool never evaluates: 59.5, or 59.9996, which Prometheus
stamps at the whole minute, a raw sample's instant. Memory stays modest: the fleet is generated per 2-hour chunk, from a random
stream keyed by (engine, chunk), so the store side regenerates exactly the same counts.

    .venv/bin/python benchmarks/prometheus_vs_store.py [--engines 200] [--days 7] [--keep DIR] [--rule-phase S]

Needs /usr/bin/prometheus and promtool (scripts/ensure_prometheus.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from acceptance import vllm_metrics as vm
from acceptance.prometheus import PrometheusClient, PrometheusSettings, prometheus_route_window, promql_duration
from acceptance.prometheus_recorded import prometheus_window
from acceptance.prometheus_rules import QUERY_OFFSET, RESOLUTION, query_offset_seconds, resolution_seconds
from acceptance.prometheus_rules import series_names as recorded_names
from acceptance.store import Store
from acceptance.windows import route_window
from model.deployment import INLINE_DEFAULTS, Deployment
from specdec.exporter import recording_rules
from promtool_phase import rules_path_at
from timing import timed
from specdec.pipeline import TuningOptions, tune_intervals

GAMMA = 5
INTERVAL = 15.0
CHUNK_S = 7200.0  # promtool's block length
SURVIVAL = np.array([0.85, 0.7, 0.56, 0.44, 0.33])
MODEL = "kimi-k3"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def chunk_increments(engine: int, chunk: int, n: int) -> np.ndarray:
    """(n, 3 + γ + 3) per-interval increments [D, T, A, A_1..A_γ, running, itl_sum, itl_count]
    of one engine in one chunk (running is a gauge sample, not an increment)."""
    rng = np.random.default_rng([engine, chunk])
    d = rng.poisson(40, n)
    a_k = np.empty((n, GAMMA), dtype=np.int64)
    reached = d
    cond = np.concatenate([[SURVIVAL[0]], SURVIVAL[1:] / SURVIVAL[:-1]])
    for k in range(GAMMA):  # A_k: drafts whose first k tokens were all accepted
        reached = rng.binomial(reached, cond[k])
        a_k[:, k] = reached
    itl_count = d * 3
    return np.column_stack([d, GAMMA * d, a_k.sum(axis=1), a_k, rng.integers(1, 9, n), itl_count * 0.012,
                            itl_count]).astype(float)


def series_names() -> list[tuple[str, str, str]]:
    """(family, type, sample name) in column order, positions separate."""
    return [(vm.DRAFTS, "counter", f"{vm.DRAFTS}_total"), (vm.DRAFT_TOKENS, "counter", f"{vm.DRAFT_TOKENS}_total"),
            (vm.ACCEPTED_TOKENS, "counter", f"{vm.ACCEPTED_TOKENS}_total")]


def labels(engine: int, position: int | None = None) -> str:
    pos = f',position="{position}"' if position is not None else ""
    return (f'{{engine="0",instance="10.0.{engine // 250}.{engine % 250}:8000",job="bench",'
            f'model_name="{MODEL}"{pos}}}')


def write_chunk(path: Path, engines: int, chunk: int, times: np.ndarray, state: np.ndarray, *,
                ts_scale: float = 1.0) -> None:
    """One OpenMetrics file: every family's samples of every engine in this chunk (timestamps
    in seconds × ``ts_scale``: 1000 gives the text format's milliseconds, for VictoriaMetrics)."""
    n = len(times)
    ts = [f"{t * ts_scale:.0f}" for t in times.tolist()]
    inc = np.stack([chunk_increments(e, chunk, n) for e in range(engines)])  # (E, n, cols)
    cum = state[:, None, :3 + GAMMA] + np.cumsum(inc[:, :, :3 + GAMMA], axis=1)
    itl = state[:, None, 3 + GAMMA:] + np.cumsum(inc[:, :, 4 + GAMMA:], axis=1)
    state[:, :3 + GAMMA] = cum[:, -1]
    state[:, 3 + GAMMA:] = itl[:, -1]
    out: list[str] = []

    def family(name: str, kind: str, sample: str, values, label_fn):
        out.append(f"# TYPE {name} {kind}\n")
        for e in range(engines):
            lab = label_fn(e)  # whole counts: %g would round a counter past 10^6
            out.append("".join(f"{sample}{lab} {v:.0f} {t}\n" for v, t in zip(values(e).tolist(), ts)))

    for col, (name, kind, sample) in enumerate(series_names()):
        family(name, kind, sample, lambda e, c=col: cum[e, :, c], labels)
    out.append(f"# TYPE {vm.ACCEPTED_PER_POSITION} counter\n")
    for e in range(engines):
        for k in range(GAMMA):
            lab = labels(e, k)
            out.append("".join(f"{vm.ACCEPTED_PER_POSITION}_total{lab} {v:.0f} {t}\n"
                               for v, t in zip(cum[e, :, 3 + k].tolist(), ts)))
    family(vm.NUM_REQUESTS_RUNNING, "gauge", vm.NUM_REQUESTS_RUNNING, lambda e: inc[e, :, 3 + GAMMA], labels)
    out.append(f"# TYPE {vm.INTER_TOKEN_LATENCY} histogram\n")
    for e in range(engines):
        lab = labels(e)
        for col, suffix in ((0, "sum"), (1, "count")):
            out.append("".join(f"{vm.INTER_TOKEN_LATENCY}_{suffix}{lab} {v:.6f} {t}\n"
                               for v, t in zip(itl[e, :, col].tolist(), ts)))
    out.append("# EOF\n")
    path.write_text("".join(out))


def build_prometheus(dirpath: Path, engines: int, t0: float, n_chunks: int, per_chunk: int) -> float:
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    tsdb = dirpath / "tsdb"
    tsdb.mkdir(parents=True)
    state = np.zeros((engines, 3 + GAMMA + 2))
    started = time.perf_counter()

    def backfill(path: Path) -> None:
        r = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(path), str(tsdb)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"promtool failed on {path}: {r.stderr.strip()[-500:]}")
        path.unlink()

    # Generation (Python) and promtool (Go) overlap: one chunk is backfilled while the next is written.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for c in range(n_chunks):
            times = t0 + INTERVAL * (np.arange(per_chunk) + c * per_chunk)
            path = dirpath / f"chunk{c:04d}.om"
            write_chunk(path, engines, c, times, state)
            if pending is not None:
                pending.result()
            pending = pool.submit(backfill, path)
            if c % 12 == 0:
                log(f"  prometheus: chunk {c + 1}/{n_chunks} ({time.perf_counter() - started:.0f} s)")
        pending.result()
    return time.perf_counter() - started


class LocalServer:
    """A metrics server on a free loopback port, its data under ``work`` (started, stopped,
    restarted); subclasses give its argv, readiness path and log name."""

    ready_path, log_name = "/", "server.log"

    def __init__(self, work: Path):
        self.work, self.proc = work, None
        self.url = f"http://127.0.0.1:{free_port()}"

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        log_path = self.work / self.log_name
        self.proc = subprocess.Popen(self.argv(), stdout=log_path.open("a"), stderr=subprocess.STDOUT)
        for _ in range(1200):
            try:
                urllib.request.urlopen(f"{self.url}{self.ready_path}", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.argv()[0]} not ready: {log_path.read_text()[-1000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
            self.proc = None


class VictoriaMetricsServer(LocalServer):
    """Debian's victoria-metrics over ``work``/vm."""

    ready_path, log_name = "/health", "vm.log"

    def argv(self) -> list[str]:
        return [shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics", f"-storageDataPath={self.work / 'vm'}",
                f"-httpListenAddr={self.url.split('//')[1]}", "-retentionPeriod=100y", "-selfScrapeInterval=0",
                "-search.maxPointsPerTimeseries=100000", "-search.maxSamplesPerQuery=2000000000"]


def build_victoria_metrics(server: VictoriaMetricsServer, engines: int, t0: float, n_chunks: int,
                           per_chunk: int) -> float:
    """The same fleet imported into VictoriaMetrics (/api/v1/import/prometheus), then flushed."""
    state = np.zeros((engines, 3 + GAMMA + 2))
    started = time.perf_counter()
    path = server.work / "vm-chunk.prom"
    for c in range(n_chunks):
        times = t0 + INTERVAL * (np.arange(per_chunk) + c * per_chunk)
        write_chunk(path, engines, c, times, state, ts_scale=1000.0)
        req = urllib.request.Request(f"{server.url}/api/v1/import/prometheus", data=path.read_bytes(), method="POST")
        urllib.request.urlopen(req, timeout=600).read()
        if c % 12 == 0:
            log(f"  victoria-metrics: chunk {c + 1}/{n_chunks} ({time.perf_counter() - started:.0f} s)")
    path.unlink()
    urllib.request.urlopen(f"{server.url}/internal/force_flush", timeout=600).read()
    return time.perf_counter() - started


def build_store(path: Path, engines: int, t0: float, n_chunks: int, per_chunk: int) -> float:
    started = time.perf_counter()
    times = t0 + INTERVAL * np.arange(n_chunks * per_chunk)
    with Store.open(path) as store:
        for e in range(engines):
            inc = np.concatenate([chunk_increments(e, c, per_chunk) for c in range(n_chunks)])
            cum = np.cumsum(inc[:, :3 + GAMMA], axis=0)
            store.bulk_load_history(f"http://10.0.{e // 250}.{e % 250}:8000/metrics", MODEL, "0", times, cum,
                                    running=inc[:, 3 + GAMMA], itl_sum=np.cumsum(inc[:, 4 + GAMMA]),
                                    itl_count=np.cumsum(inc[:, 5 + GAMMA]))
    return time.perf_counter() - started


def disk_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrometheusServer(LocalServer):
    """Debian's prometheus over ``work``/tsdb, scraping nothing."""

    ready_path, log_name = "/-/ready", "prometheus.log"

    def __init__(self, work: Path):
        super().__init__(work)
        (work / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")

    def argv(self) -> list[str]:
        return [shutil.which("prometheus") or "/usr/bin/prometheus", f"--config.file={self.work / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.work / 'tsdb'}", "--storage.tsdb.retention.time=60d",
                f"--web.listen-address={self.url.split('//')[1]}", "--query.max-samples=200000000"]


def backfill_rules(server: PrometheusServer, start: float, end: float, phase: float | None) -> tuple[float, int]:
    """specdec's rules evaluated over the week from the raw data (promtool), the blocks moved
    into the TSDB and Prometheus restarted on them: (seconds, bytes of the new blocks).
    ``phase``: the evaluations pinned that many seconds past each minute (the rules file
    named for it, benchmarks/promtool_phase.py); None: where the file's path puts them."""
    out = server.work / "rules-blocks"
    rules = (server.work / "rules.yml" if phase is None else
             rules_path_at(server.work, "specdec-window-bench", int(resolution_seconds(RESOLUTION)), phase))
    rules.write_text(recording_rules({"bench": '{job="bench"}'}))
    started = time.perf_counter()
    r = subprocess.run([shutil.which("promtool") or "/usr/bin/promtool", "tsdb", "create-blocks-from", "rules",
                        "-q", f"--start={start:.0f}", f"--end={end:.0f}", f"--url={server.url}",
                        f"--output-dir={out}", str(rules)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"promtool rules backfill failed: {r.stderr.strip()[-800:]}")
    server.stop()
    added = disk_bytes(out)
    for block in out.iterdir():
        shutil.move(str(block), str(server.work / "tsdb" / block.name))
    server.start()
    return time.perf_counter() - started, added


def recorded_drafts(settings: PrometheusSettings, evaluated: tuple[float, float]) -> dict[float, float]:
    """{evaluation time: the drafts it recorded} for the evaluations in (start, end] (the
    recorded series as the rules wrote them, before the source reads them)."""
    start, end = evaluated
    found = PrometheusClient(settings, timeout_s=60).samples(
        f'{recorded_names()["spec_decode"]}{{route="bench",position="drafts"}}[{promql_duration(end - start - 0.001)}]',
        end)  # less a millisecond: a range selector holds both its ends
    out: dict[float, float] = {}
    for _, times, values in found:  # one series a γ
        for t, v in zip(times.tolist(), values.tolist()):
            out[round(t, 3)] = out.get(round(t, 3), 0.0) + v
    return out


def evaluations_against_store(store: Store, targets: list[str], evaluated: tuple[float, float],
                              recorded: dict[float, float]) -> dict:
    """Block by block: each rule slot in (start, end] (R apart, ending at the last evaluation)
    against the store's drafts over the span it counts, (t − R − D, t − D]: the slots the
    recorded series hold no evaluation at, and those whose evaluation differs from the store."""
    r, offset = resolution_seconds(RESOLUTION), query_offset_seconds(QUERY_OFFSET)
    start, end = evaluated
    slots = np.round(end - r * np.arange(int(round((end - start) / r)))[::-1], 3)
    ids = [engine_id for engine_id, _ in store.engines_of(targets)]
    store_drafts = np.zeros(len(slots) + 1)
    for lo in np.arange(slots[0] - r - offset, end - offset, CHUNK_S):  # a week of 200 engines is 8M intervals
        for entries in store.read_intervals(ids, lo, min(lo + CHUNK_S, end - offset))[0]:
            # the slot each stored interval falls in: the first slot t with its end ≤ t − D
            slot_of = np.searchsorted(slots - offset, entries.end, side="left")
            drafts = entries.delta[:, store.layout_columns(entries.layout_id).index("drafts")]
            store_drafts += np.bincount(slot_of, weights=drafts, minlength=len(slots) + 1)
    missing = [{"at": float(t), "store_drafts": float(d)} for t, d in zip(slots.tolist(), store_drafts.tolist())
               if t not in recorded]
    unlike = [{"at": float(t), "recorded_drafts": recorded[t], "store_drafts": float(d)}
              for t, d in zip(slots.tolist(), store_drafts.tolist()) if t in recorded and recorded[t] != d]
    assert store_drafts[-1] == 0, "stored intervals past the last slot's span"
    return {"slots": len(slots), "without_an_evaluation": missing, "unlike_the_store": unlike,
            "store_drafts_without_an_evaluation": sum(m["store_drafts"] for m in missing)}


def recorded_series_per_route(settings: PrometheusSettings, at: float) -> dict[str, int]:
    """How many series each recorded name holds for the route (what the rules add)."""
    client = PrometheusClient(settings, timeout_s=60)
    out = {}
    for name in recorded_names().values():
        found = client.query(f'count(last_over_time({name}{{route="bench"}}[8d]))', at)
        out[name] = int(found[0][1]) if found else 0
    return out


def figures(w, tuning, secs, build_s, disk, n_intervals):
    e = tuning.estimate
    return {
        "tune_seconds_median": statistics.median(secs), "tune_seconds_all": secs,
        "build_seconds": build_s, "disk_bytes": disk, "disk_bytes_per_engine_interval": disk / n_intervals,
        "blocks": len(w.newest_segment.intervals), "drafts": e.drafts,
        "survival": [round(x, 7) for x in e.survival.value.tolist()],
        "survival_halfwidth": [round(x, 5) for x in ((e.survival.high - e.survival.low) / 2).tolist()],
        "recommended_gamma": tuning.recommendation.recommended_gamma,
        "decision": tuning.recommendation.decision,
        "batch_mix_samples": w.step_shape.samples,
    }


def tuned(read_window, deployment):
    """A timed call's body: the window read_window() gives, estimated and recommended."""
    def tune():
        w = read_window()
        return w, tune_intervals("bench", w.newest_segment.intervals, deployment, window=w,
                                 options=TuningOptions(n_resamples=1000))
    return tune


def time_prometheus(work: Path, built: Path, args, t0: float, last_sample: float, deployment) -> dict:
    """The rules backfilled (once), then tune-gamma through the recorded series and raw."""
    server = PrometheusServer(work)
    server.start()
    try:
        settings = PrometheusSettings(server.url)
        if len(json.loads(built.read_text())) < 6:
            log("backfilling specdec's recording rules over the fleet's history (promtool create-blocks-from rules)")
            rules_s, rules_disk = backfill_rules(server, t0, last_sample + 60, args.rule_phase)
            built.write_text(json.dumps(json.loads(built.read_text())[:4] + [rules_s, rules_disk]))
        beats = PrometheusClient(settings, timeout_s=60).samples(
            f'{recorded_names()["heartbeat"]}{{route="bench"}}[{int(args.days * 86400 + 7200)}s]', last_sample + 60)
        phase = float(beats[0][1][-1]) % 60
        if args.rule_phase is not None and abs((phase - args.rule_phase + 30) % 60 - 30) > 0.001:
            log(f"--rule-phase {args.rule_phase:g}: the rules kept in {work} evaluate {phase:.3f} s past each "
                f"minute (give a new --keep folder)")
            sys.exit(2)
        # The recorded window: the evaluations after the second to the last (the first two may hold
        # only the engines' first samples, baselines). Each counted up to the rules' query offset
        # before it, so the other sources read that span: the store's deltas of (first, last] and
        # the evaluations' increases cover the same samples.
        r, offset = resolution_seconds(RESOLUTION), query_offset_seconds(QUERY_OFFSET)
        evaluated = (float(beats[0][1][0]) + r, float(beats[0][1][-1]))
        first, last = evaluated[0] - offset, evaluated[1] - offset
        log(f"window ({first:.0f}, {last:.0f}]: {(last - first) / 86400:.3f} d")
        recorded = timed(tuned(lambda: prometheus_window(settings, "bench", '{job="bench"}', *evaluated,
                                                         timeout_s=300), deployment), args.repeat)
        assert recorded[0][0].recorded is not None, recorded[0][0].notes
        raw = timed(tuned(lambda: prometheus_route_window(settings, '{job="bench"}', first, last, timeout_s=300),
                          deployment), max(1, min(args.repeat, 2)))
        return {"window": (first, last), "evaluated": evaluated, "recorded": recorded, "raw": raw,
                "series": recorded_series_per_route(settings, last_sample + 60),
                "evaluations": recorded_drafts(settings, evaluated)}
    finally:
        server.stop()


def time_victoria_metrics(work: Path, built: Path, args, t0: float, window, deployment):
    """The fleet imported into VictoriaMetrics (once), then tune-gamma through its API (raw)."""
    server = VictoriaMetricsServer(work)
    server.start()
    try:
        state = json.loads(built.read_text())
        if len(state) < 7:
            per_chunk = int(CHUNK_S / INTERVAL)
            n_chunks = max(1, int(round(args.days * 86400 / CHUNK_S)))
            state.append(build_victoria_metrics(server, args.engines, t0, n_chunks, per_chunk))
            built.write_text(json.dumps(state))
        settings = PrometheusSettings(server.url)
        result = timed(tuned(lambda: prometheus_route_window(settings, '{job="bench"}', *window, timeout_s=300),
                             deployment), max(1, min(args.repeat, 2)))
        return result, state[6], disk_bytes(work / "vm")
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", type=int, default=200)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--previous", type=Path, default=None,
                    help="an earlier result of this benchmark: its store figures are kept beside the new ones")
    ap.add_argument("--rule-phase", type=float, default=None, metavar="S",
                    help="pin the rule evaluations S to S + 0.4 ms past each minute (the fleet's samples fall "
                         "at 0, 15, 30 and 45 s past): 0 evaluates at a sample's instant, 7.5 between samples, "
                         "59.9996 at a sample's instant as Prometheus stamps it (the ms) but just before it for "
                         "promtool, which then skips the slot before each 2-hour block (default: where the rules "
                         "file's path puts them, as in a user's backfill)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="folder to keep (default: a temp dir, removed); given again, its fleet is re-timed")
    args = ap.parse_args()
    if args.rule_phase is not None and not 0 <= args.rule_phase < 60:
        ap.error(f"--rule-phase {args.rule_phase:g}: seconds past the minute, from 0 to below 60")
    work = args.keep or Path(tempfile.mkdtemp(prefix="specdec-prom-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    per_chunk = int(CHUNK_S / INTERVAL)
    n_chunks = max(1, int(round(args.days * 86400 / CHUNK_S)))
    # Aligned to 2 h and ending an hour ago: inside Prometheus' retention, one promtool pass per file.
    t_end = (time.time() - 3600) // CHUNK_S * CHUNK_S
    t0 = t_end - n_chunks * CHUNK_S + INTERVAL
    last_sample = t0 + INTERVAL * (n_chunks * per_chunk - 1)
    n_intervals = n_chunks * per_chunk * args.engines
    log(f"fleet: {args.engines} engines x {args.days:g} d at {INTERVAL:g} s = {n_intervals:,} engine intervals")

    built = work / "built.json"  # --keep DIR a second time re-times the same data
    if built.exists():
        t0, last_sample = json.loads(built.read_text())[:2]
        log(f"reusing the fleet built in {work}")
    else:
        prom_build_s = build_prometheus(work, args.engines, t0, n_chunks, per_chunk)
        store_build_s = build_store(work / "store.db", args.engines, t0, n_chunks, per_chunk)
        built.write_text(json.dumps([t0, last_sample, prom_build_s, store_build_s]))
    prom_build_s, store_build_s = json.loads(built.read_text())[2:4]
    prom_disk = disk_bytes(work / "tsdb")  # with the rules' blocks when reused
    store_disk = sum(disk_bytes(p) for p in (work / "store.db", work / "store.db-wal") if p.exists())
    deployment = Deployment.from_mapping({}, where="benchmark", base=INLINE_DEFAULTS)
    prom = time_prometheus(work, built, args, t0, last_sample, deployment)
    rules_s, rules_disk = json.loads(built.read_text())[4:6]
    ((vw, vm_tuning), vm_secs), vm_build_s, vm_disk = time_victoria_metrics(work, built, args, t0, prom["window"],
                                                                          deployment)
    with Store.open(work / "store.db") as store:
        targets = [f"http://10.0.{e // 250}.{e % 250}:8000/metrics" for e in range(args.engines)]
        (sw, store_tuning), store_secs = timed(tuned(lambda: route_window(store, targets, *prom["window"]),
                                                     deployment), args.repeat)
        evaluations = evaluations_against_store(store, targets, prom["evaluated"], prom["evaluations"])
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)

    (rw, rec_tuning), rec_secs = prom["recorded"]
    (pw, prom_tuning), prom_secs = prom["raw"]
    store_s = statistics.median(store_secs)

    def off_store(tuning) -> float:
        return float(np.max(np.abs(tuning.estimate.survival.value - store_tuning.estimate.survival.value)))

    summary = {
        "benchmark": "prometheus_vs_store",
        "command": "python benchmarks/prometheus_vs_store.py " + " ".join(sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "engines": args.engines, "days": args.days, "interval_s": INTERVAL,
        "gamma": GAMMA, "true_survival": SURVIVAL.tolist(), "engine_intervals": n_intervals,
        "window": list(prom["window"]),
        "prometheus_recorded": {**figures(rw, rec_tuning, rec_secs, rules_s, rules_disk, n_intervals),
                                "queries": rw.queries, "block_s": rw.block_s, "notes": rw.notes,
                                "times_store": statistics.median(rec_secs) / store_s,
                                "series_added_per_route": prom["series"],
                                "series_added_total": sum(prom["series"].values()),
                                "rule_phase_s": round(prom["evaluated"][1] % 60, 3) % 60,
                                "evaluations_against_store": evaluations},
        "prometheus_raw": {**figures(pw, prom_tuning, prom_secs, prom_build_s, prom_disk, n_intervals),
                           "queries": pw.queries, "block_s": pw.block_s},
        "victoria_metrics_raw": {**figures(vw, vm_tuning, vm_secs, vm_build_s, vm_disk, n_intervals),
                                 "queries": vw.queries, "block_s": vw.block_s},
        "store": figures(sw, store_tuning, store_secs, store_build_s, store_disk, n_intervals),
        "max_abs_survival_difference_recorded_vs_store": off_store(rec_tuning),
        "max_abs_survival_difference_raw_vs_store": off_store(prom_tuning),
        "max_abs_survival_difference_victoria_metrics_vs_store": off_store(vm_tuning),
        "drafts_recorded_minus_store": rec_tuning.estimate.drafts - store_tuning.estimate.drafts,
        "drafts_victoria_metrics_minus_store": vm_tuning.estimate.drafts - store_tuning.estimate.drafts,
    }
    if args.previous:  # the store as an earlier run measured it (an earlier schema), for comparison
        earlier = json.loads(args.previous.read_text())
        summary["store_before"] = earlier.get("store_before") or {**earlier["store"], "from": str(args.previous)}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
