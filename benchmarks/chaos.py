"""Chaos: the bad-target zoo beside healthy targets, SIGKILLs of the collector (alone, and
with a reader), readers in loops during collection with retention on and a γ that flips
every scrape. Loopback only; every process it starts, it stops.

    python benchmarks/chaos.py [--kills 20] [--joint-kills 5] [--interval 2] [--no-clock]

The zoo (benchmarks/chaos_zoo.py): malformed, HTML, 50 MB, refused, HTTP 500, reset without an answer, a status line,
headers or chunk-size lines trickled a byte at a time, impossible counts (A_1 far above the
drafts; 1e300 drafts; A_1 below A_2 on an idle engine: each refused per target). A counted
target whose every second page sets its accepted counters back while its drafts go on (a
partial reset: each such scrape refused for its engine, never added whole). Healthy targets:
four plain pages and one always gzip-encoded, whose drafts counter grows by 100 per page
served (so the counts a store must hold are known exactly), and one whose γ flips 3 ↔ 5 on
every page (its counters restart each time, as a restarted engine's do).

With `[store] retention` 60 s the raw rows of the run's first minute are rolled up and
deleted while it runs (the rollups, kept 4× longer, outlive it). A baseline `collect --once`
opens the run and another closes it, neither killed; between
them `collect` runs in lives ended by SIGKILL at random moments, while two readers loop
`tune-gamma --json` on the healthy and the flipping route. In some lives a second collector
is started on the same store at a random moment (it must refuse, exit 2) and killed at
another. As root, the store lives on a tmpfs of its own that a filler fills to the last
byte and frees again at random moments (`--no-disk-fill`: not); elsewhere that kind is not
run and the JSON says so. A third reader loops `tune-gamma` over routes read from a hostile
Prometheus ([source] timeout 2 s): an answer that never ends (its body, or its headers, a
byte at a time), 200,000 series, JSON cut short, HTTP 500 — each must end in one line
naming the server and the selector, within its deadline. Reported (and written to
benchmarks/results/chaos.json):
- healthy samples stored / expected: every stored cycle should hold every healthy target;
- cycles lost per kill: scrape cycles due in a life but not stored (the one in flight), over
  the lives that did not meet a full disk; those that did (it keeps cycles from the store,
  and says so) are counted apart;
- counts lost and counts added: per counted engine (the healthy ones and the partial
  reset), (its counter at the closing scrape − at the opening one) against the drafts the
  store holds over the run (retention rolls the raw rows up meanwhile), short or over;
- second collectors started, refused (exit 2) and those that ran beside the first (0);
- disk fills, the cycles a full disk kept from the store, and the full-disk lines said;
- false "corrupt" reports and internal errors (exit 1) of every command run, and the
  longest reader run of each kind (a hang would show here), with what the hostile
  Prometheus' routes said.

Beside them, each counted and reported on its own:
- clock steps (benchmarks/chaos_clock.py): a collector of its own store, under libfaketime
  (installed with apt where missing, as root), whose wall clock steps back 30 s, forward 30 s,
  forward 5 min and back 5 min while it collects five healthy targets for about 6.5 minutes:
  it must run to its --duration (exit 0), its counts be the engines' own increase, and each
  back step be said in words when the targets are held and when storing resumes;
- other engine lives behind one URL (counted with the healthy ones): a target whose
  `_created` goes an hour back on every 4th page while its counters rise, and a load-balanced
  URL reaching two engines in turn (the other an older replica with higher counters): the life
  first seen counted exactly, never a restart stored, said at most once per URL and collector
  life. A second such URL loses its first engine for good in a steady (never killed) collector
  life after the kills: the first engine's drafts must be stored exactly, and what is stored of
  the engine left answering is reported;
- a read-only store (benchmarks/chaos_read_only.py): the closed store on a read-only bind
  mount in a mount namespace of its own; tune-gamma --json must read it exactly, collect and
  ingest exit 2 in one line, no file change;
- a real Prometheus' answers bent (benchmarks/chaos_prometheus.py): Debian's Prometheus
  scraping engines of its own, behind the hostile one, whose answers about the drafts counter
  hold NaN or +Inf (exit 2, one line naming the server, the series and the value), which rate
  limits with 429 and Retry-After: 1 (each query asked once more: the route must succeed), and
  which adds a Thanos-like partial-response warning (the route succeeds, its notes say so).
What the product did wrong that the run found is listed under product_bugs (the run exits 1).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from chaos_clock import ClockRun, libfaketime, offset_seen  # noqa: E402
from chaos_prometheus import BENT_MODES, OWN_MODES, BentRoutes, HostileProm, real_prometheus  # noqa: E402
from chaos_read_only import read_only_store  # noqa: E402
from chaos_zoo import CLOCK, COUNTED, CREATED_BACK, HEALTHY, LB, LB_GONE, PARTIAL, PER_PAGE, ZOO, Zoo  # noqa: E402

BIN = Path(sys.executable).parent
RESULTS = REPO / "benchmarks" / "results" / "chaos.json"
PER_REQUEST = REPO / "tests" / "data" / "vllm-golden" / "per_request_sample.jsonl"  # what ingest is given
PROM_DEADLINE_S = 2.0  # [source] timeout of the run's config


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(folder: Path, base: str, prom: str, interval: float, retention: str | None) -> Path:
    healthy = ", ".join(f'"{base}{p}"' for p in HEALTHY + [PARTIAL])
    zoo = ", ".join(f'"{base}{p}"' for p in ZOO) + f', "http://127.0.0.1:{closed_port()}/metrics"'
    cfg = folder / "specdec.toml"
    kept = f'retention = "{retention}"\n' if retention else ""
    prom_routes = "".join(f"[routes.prom-{m}]\nselector = '{{job=\"{m}\"}}'\n\n" for m in OWN_MODES + BENT_MODES)
    cfg.write_text(f'[store]\npath = "chaos.db"\n{kept}\n[collect]\ninterval = {interval}\ntimeout = 1\n\n'
                   f'[source]\nkind = "prometheus"\nurl = "{prom}"\ntimeout = "{PROM_DEADLINE_S:g}s"\n\n'
                   f'[deployment]\nmethod = "eagle3"\ncost_profile = "flat"\n\n'
                   f'[routes.healthy]\ntargets = [{healthy}]\n\n[routes.flip]\ntargets = ["{base}/flip"]\n\n'
                   f'[routes.zoo]\ntargets = [{zoo}]\n\n[routes.lives]\ntargets = ["{base}{CREATED_BACK}", "{base}{LB}"]\n\n'
                   f'[routes.lb-gone]\ntargets = ["{base}{LB_GONE}"]\n\n{prom_routes}')
    return cfg


class Readers:
    """tune-gamma in loops on the healthy route, the flipping and the lives route in turn and, in a third loop, on the
    hostile Prometheus' routes in turn; counts runs, exit codes, 'corrupt' reports and the
    longest run of each kind (a Prometheus route's is bounded by its deadline)."""

    def __init__(self, cfg: Path):
        self.cfg, self.stop, self.runs, self.internal, self.corrupt, self.procs = cfg, threading.Event(), 0, [], [], set()
        self.longest_s = 0.0
        self.prom_runs, self.prom_longest_s, self.prom_lines = 0, 0.0, set()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._loop, args=(routes,), daemon=True)
                        for routes in (["healthy"], ["flip", "lives"])]
        self.threads.append(threading.Thread(target=self._loop, args=([f"prom-{m}" for m in OWN_MODES],),
                                             daemon=True))

    def _loop(self, routes: list[str]):
        for turn in itertools.count():
            if self.stop.is_set():
                return
            route = routes[turn % len(routes)]
            began = time.monotonic()
            proc = subprocess.Popen([str(BIN / "tune-gamma"), "--route", route, "--config", str(self.cfg),
                                     "--window", "1h", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True)
            with self.lock:
                self.procs.add(proc)
            _, err = proc.communicate()
            with self.lock:
                self.procs.discard(proc)
                if proc.returncode == -signal.SIGKILL:
                    continue  # killed with the collector on purpose
                if route.startswith("prom-"):
                    self.prom_runs += 1
                    self.prom_longest_s = max(self.prom_longest_s, time.monotonic() - began)
                    self.prom_lines.add(f"{route}: exit {proc.returncode}: {err.strip().splitlines()[-1][:160]}"
                                        if err.strip() else f"{route}: exit {proc.returncode}")
                else:
                    self.runs += 1
                    self.longest_s = max(self.longest_s, time.monotonic() - began)
                if proc.returncode == 1:
                    self.internal.append(err.strip()[-300:])
                if "corrupt" in err:
                    self.corrupt.append(err.strip()[-300:])

    def kill_one(self) -> bool:
        with self.lock:
            proc = next(iter(self.procs), None)
        if proc is None:
            return False
        proc.kill()
        return True

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)


class DiskFiller:
    """Fills the store's own filesystem to the last byte, holds it full a few seconds and frees
    it, at random moments, until stopped (the collector must say so, keep what it stored and
    resume: acceptance.store.disk)."""

    def __init__(self, folder: Path, rng: random.Random):
        self.filler, self.rng, self.stop, self.fills = folder / "filler", rng, threading.Event(), 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as f:
            for block in (1 << 20, 4096, 1):  # to the last byte the filesystem gives
                try:
                    while True:
                        f.write(b"\0" * block)
                except OSError:
                    continue

    def _loop(self) -> None:
        while not self.stop.wait(self.rng.uniform(3.0, 8.0)):
            self._fill()
            self.fills += 1
            self.stop.wait(self.rng.uniform(2.0, 6.0))
            self.filler.unlink(missing_ok=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=60)
        self.filler.unlink(missing_ok=True)


@contextlib.contextmanager
def own_tmpfs(folder: Path, wanted: bool):
    """Mount a 256 MiB tmpfs on ``folder`` (root only); yields whether it did. Unmounted on exit."""
    mounted = wanted and hasattr(os, "geteuid") and os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(folder)], capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def second_collector(cfg: Path, rng: random.Random, seconds: float) -> str:
    """Start a second collector on the same store, kill it after a random part of ``seconds``:
    'refused' (it exited 2 naming the running writer), 'ran' (it began collecting beside the
    first) or 'killed' (killed before it got that far)."""
    proc = collect(cfg)
    try:
        proc.wait(timeout=rng.uniform(0.0, seconds))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    if any(line.startswith("collecting ") for line in err.splitlines()):  # its own start line
        return "ran"
    return "refused" if proc.returncode == 2 and "another writer" in err else "killed"


def collect(cfg: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "specdec"), "collect", "--config", str(cfg), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stored_cycles(db: Path) -> list[float]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return [t for (t,) in conn.execute("SELECT time FROM cycles ORDER BY time")]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of the collector alone")
    parser.add_argument("--joint-kills", type=int, default=5, help="SIGKILLs of the collector and a reader together")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    # raw rows go after 60 s, in the run; rollups (4× longer) outlive it, so every count stays readable
    parser.add_argument("--retention", default="60s", help="[store] retention ('' for none)")
    parser.add_argument("--no-disk-fill", action="store_true", help="do not mount a tmpfs and fill it")
    parser.add_argument("--no-clock", action="store_true", help="do not run the clock-stepped collector")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


class Run:
    """One chaos run's collectors, their lives and what they said."""

    def __init__(self, cfg: Path, db: Path, interval: float, rng: random.Random):
        self.cfg, self.db, self.interval, self.rng = cfg, db, interval, rng
        self.errors: list[str] = []
        self.lives: list[int] = []
        self.lost: list[int] = []
        self.lost_with_full_disk: list[int] = []  # lives that met a full disk: it kept cycles out too
        self.second = {"refused": 0, "ran": 0, "killed": 0}
        self.full_lines = 0
        self.other_life_lines: list[dict[str, int]] = []  # per collector process: URL → lines saying another life

    def finish(self, proc: subprocess.Popen, what: str) -> None:
        _, err = proc.communicate(timeout=120)
        self._said(err or "", what, proc.returncode)

    def _said(self, err: str, what: str, code: int | None) -> None:
        self.full_lines += err.count("disk full (")
        lives: dict[str, int] = {}
        for line in err.splitlines():
            if "more than one engine" in line:
                url = line.split(": engine ", 1)[0]
                lives[url] = lives.get(url, 0) + 1
        self.other_life_lines.append(lives)
        if code == 1 or "corrupt" in err or "internal error" in err:
            self.errors.append(f"{what}: exit {code}: {err.strip()[-300:]}")

    def life(self, k: int, readers: "Readers", joint: bool) -> None:
        """One collector life, SIGKILLed at a random moment; half of them meet a second collector."""
        proc = collect(self.cfg)
        life_start = time.time()
        length = self.rng.uniform(1.5, 3.0 * self.interval)
        if self.rng.random() < 0.5:
            time.sleep(self.rng.uniform(0.2, length / 2))
            self.second[second_collector(self.cfg, self.rng, length / 2)] += 1
        time.sleep(max(0.0, life_start + length - time.time()))
        if joint:
            readers.kill_one()
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        killed = time.time()
        self._said(err, f"collect life {k}", None)
        in_life = [t for t in stored_cycles(self.db) if life_start <= t <= killed]
        # cycles due after the last stored one and before the kill: the one in flight, and in a
        # life that said "disk full", those the full disk kept from the store (counted apart)
        last = in_life[-1] if in_life else life_start
        lost = self.lost_with_full_disk if "disk full (" in (err or "") else self.lost
        lost.append(max(0, int((killed - last) // self.interval)))
        self.lives.append(len(in_life))


    def steady_life(self, zoo: "Zoo", base: str, opening: dict[str, int]) -> dict:
        """A collector life of 16 intervals, never killed, in which the load-balanced URL LB_GONE
        loses its first engine for good (a scale-down: only the older replica, never counted,
        answers from then on). Returns the first engine's pages at the switch, the drafts the
        store held for the URL once its last page was stored, and the other engine's pages then."""
        proc = collect(self.cfg, "--duration", f"{16 * self.interval:g}")
        time.sleep(4 * self.interval)
        with zoo.lock:
            zoo.lb_mode[LB_GONE] = "B"
            a_last, b_from = zoo.served.get(LB_GONE, 0), zoo.served.get(LB_GONE + "#B", 0)
        want = PER_PAGE * (a_last - opening[LB_GONE])
        deadline = time.monotonic() + 5 * self.interval  # its last page is stored by the next cycle or two
        while (held := drafts_of(self.db, f"{base}{LB_GONE}")) < want and time.monotonic() < deadline:
            time.sleep(0.2)
        self.finish(proc, "steady collect life")
        return {"first_engine_expected": want, "first_engine_stored": held, "other_from": b_from,
                "exit": proc.returncode}


def drafts_of(db: Path, url: str) -> float:
    from acceptance.store import Store
    from acceptance.windows import route_window

    with Store.open(db, reading=True) as store:
        return sum(s.total.drafts for s in route_window(store, [url], 0.0, time.time() + 3600).segments)


class Stored(NamedTuple):
    """What the store holds after the run: drafts over the run per counted target (and the
    load-balanced URL whose first engine left), scrapes stored per healthy target URL since raw
    rows start, the stored cycles, where raw rows start (retention), and the events stored for
    the URLs of more than one life."""

    drafts: dict[str, float]
    samples: dict[str, int]
    cycles: list[float]
    raw_from: float | None
    events: dict[str, list[str]]


def stored_drafts(db: Path, base: str) -> Stored:
    from acceptance.store import Store
    from acceptance.windows import route_window

    with Store.open(db) as store:
        drafts, events = {}, {}
        for p in COUNTED + [LB_GONE]:
            w = route_window(store, [f"{base}{p}"], 0.0, time.time() + 3600)  # whole rollup buckets
            drafts[p] = sum(s.total.drafts for s in w.segments)
            if p in (CREATED_BACK, LB, LB_GONE):
                events[p] = [e.kind for e in w.events]
        since = store.raw_from() or 0.0
        samples = {}  # scrapes stored as intervals since raw rows start (the first sighting is a baseline only)
        for url in {ref.target for _, ref in store.engines_of(f"{base}{p}" for p in HEALTHY)}:
            spec, _ = store.read_intervals([eid for eid, _ in store.engines_of([url])], since - 1e-6, time.time() + 3600)
            samples[url] = sum(len(e.end) for e in spec)
        return Stored(drafts, samples, stored_cycles(db), store.raw_from(), events)


def main(argv=None) -> int:
    args = parse_args(argv)
    recorded = {"command": " ".join(["python benchmarks/chaos.py", *(argv if argv is not None else sys.argv[1:])]),
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                            "python": platform.python_version(), "load_average_at_start": list(os.getloadavg())},
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    rng = random.Random(args.seed)
    zoo = Zoo()
    threading.Thread(target=zoo.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    base = f"http://127.0.0.1:{zoo.server_address[1]}"
    folder = Path(tempfile.mkdtemp(prefix="specdec-chaos-"))
    side = Path(tempfile.mkdtemp(prefix="specdec-chaos-side-"))  # off the filled tmpfs: Prometheus, the clock's store
    started = time.time()
    library, clock_why = libfaketime() if not args.no_clock else (None, "not run (--no-clock)")
    with real_prometheus(side / "prometheus", base, closed_port()) as (upstream, prom_why):
        prom = HostileProm(upstream)
        threading.Thread(target=prom.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        clock = None
        if library is not None:
            clock_seen = offset_seen(Path(sys.executable), library, side)
            clock = ClockRun(BIN / "specdec", side / "clock", [f"{base}{p}" for p in CLOCK], args.interval, library)
            clock.thread.start()
        with own_tmpfs(folder, not args.no_disk_fill) as on_tmpfs:
            cfg = write_config(folder, base, f"http://127.0.0.1:{prom.server_address[1]}", args.interval,
                               args.retention or None)
            run = Run(cfg, folder / "chaos.db", args.interval, rng)
            run.finish(collect(cfg, "--once"), "opening collect --once")
            opening = {p: zoo.served.get(p, 0) for p in COUNTED + [LB_GONE]}
            with zoo.lock:
                zoo.lb_mode = {LB: "alternate", LB_GONE: "alternate"}
            filler = DiskFiller(folder, rng) if on_tmpfs else contextlib.nullcontext()
            with BentRoutes(BIN / "tune-gamma", cfg, upstream) as bent:
                with Readers(cfg) as readers:
                    with filler:
                        for k in range(args.kills + args.joint_kills):
                            run.life(k, readers, joint=k >= args.kills)
                        time.sleep(1.0)
                    gone = run.steady_life(zoo, base, opening)
                zoo.glitching = False  # the closing scrape sees the partial-reset and created-back engines as they are
                with zoo.lock:
                    zoo.lb_mode[LB] = "A"  # and the load-balanced URL's counted engine (LB_GONE's is gone)
                run.finish(collect(cfg, "--once"), "closing collect --once")
                closing = {p: zoo.served.get(p, 0) for p in COUNTED + [LB_GONE]}
                gone["other_to"] = zoo.served.get(LB_GONE + "#B", 0)
                stored = stored_drafts(run.db, base)
                read_only = read_only_store(folder, cfg, ["healthy", "lives"], PER_REQUEST)
                if clock is not None:
                    clock.thread.join()
        bent_result = bent.result(prom) if upstream else {"run": False, "why": prom_why}
        for server in (zoo, prom):
            server.stop = getattr(server, "stop", None) or threading.Event()
            server.stop.set()
            server.shutdown()
            server.server_close()
    result = recorded | tally(args, run, readers, (opening, closing), stored, base)
    result["disk_fills"] = filler.fills if on_tmpfs else "not run (needs root to mount a tmpfs of its own)"
    result["other_lives"] = lives_result(run, stored, gone, base)
    result["other_lives"]["pages_served"] = {p: n for p, n in zoo.served.items() if p.startswith((LB, CREATED_BACK))}
    result["clock_steps"] = (clock_result(clock, dict(zoo.served), base, clock_seen) if clock is not None
                             else {"run": False, "why": clock_why})
    result["read_only_store"] = read_only
    result["bent_prometheus"] = bent_result
    result["internal_errors"] += internal_errors_of_new_faults(result)
    result["product_bugs"] = product_bugs(result)
    result["seconds"] = time.time() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    report(result)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)", file=sys.stderr)
    ok = not result["false_corrupt"] and not result["internal_errors"] and not result["second_collectors"]["ran"]
    ok = ok and not any(result["counts_added"].values()) and not any(result["counts_lost"].values())
    return 0 if ok and all_held(result) and not result["product_bugs"] else 1


def tally(args, run: Run, readers: Readers, served: tuple[dict, dict], stored: Stored, base: str) -> dict:
    """The result: ``served`` the pages each counted target had served at the opening and the
    closing scrape, whose difference × PER_PAGE is the engines' own increase."""
    opening, closing = served
    drafts, samples, cycles = stored.drafts, stored.samples, stored.cycles
    expected = {p: PER_PAGE * (closing[p] - opening[p]) for p in COUNTED}
    kept_cycles = [t for t in cycles if stored.raw_from is None or t >= stored.raw_from]
    return {
        "kills": args.kills, "joint_kills": args.joint_kills, "interval_s": args.interval,
        "cycles_stored": len(cycles),
        "healthy_samples_stored": sum(samples.get(f"{base}{p}", 0) for p in HEALTHY),
        "healthy_samples_expected": len(kept_cycles) * len(HEALTHY),
        "cycles_lost_per_kill_max": max(run.lost), "cycles_lost_per_kill_mean": sum(run.lost) / len(run.lost),
        "lives_with_a_full_disk": len(run.lost_with_full_disk),
        "cycles_lost_in_lives_with_a_full_disk_max": max(run.lost_with_full_disk, default=0),
        "counts_lost": {p: max(0.0, expected[p] - drafts[p]) for p in COUNTED},
        "counts_added": {p: max(0.0, drafts[p] - expected[p]) for p in COUNTED},
        "counts_expected": expected,
        "second_collectors": run.second,
        "full_disk_lines": run.full_lines,
        "reader_runs": readers.runs, "reader_longest_s": round(readers.longest_s, 2),
        "prometheus_deadline_s": PROM_DEADLINE_S, "prometheus_runs": readers.prom_runs,
        "prometheus_longest_s": round(readers.prom_longest_s, 2), "prometheus_said": sorted(readers.prom_lines),
        "false_corrupt": len(readers.corrupt) + sum("corrupt" in e for e in run.errors),
        "internal_errors": len(readers.internal) + sum("exit 1" in e or "internal" in e for e in run.errors),
        "examples": (readers.internal + readers.corrupt + run.errors)[:5],
    }


def lives_result(run: Run, stored: Stored, gone: dict, base: str) -> dict:
    """Another engine life behind one URL: the lines the collectors said of it (at most one per
    URL and collector life), the events stored (never a restart), and the URL whose first engine
    left: its first engine's drafts stored exactly, and what of the engine left answering was
    stored (the store cannot tell the two apart: its part is the URL's drafts after the switch)."""
    per_life = [n for lives in run.other_life_lines for n in lives.values()]
    other_part = stored.drafts[LB_GONE] - gone["first_engine_stored"]
    return {
        "collector_lives": len(run.other_life_lines),
        "lines_per_url_and_life_max": max(per_life, default=0),
        "lives_that_said_it": sum(1 for lives in run.other_life_lines if lives),
        "restarts_stored": {p: kinds.count("restart") for p, kinds in stored.events.items()},
        "events_stored": {p: sorted(set(kinds)) for p, kinds in stored.events.items()},
        "first_engine_left": {
            "first_engine_expected": gone["first_engine_expected"], "first_engine_stored": gone["first_engine_stored"],
            "remaining_engine_increase": PER_PAGE * (gone["other_to"] - gone["other_from"]),
            "remaining_engine_stored": other_part, "steady_life_exit": gone["exit"]},
    }


def clock_result(clock: ClockRun, served: dict[str, int], base: str, seen: float) -> dict:
    out = clock.result(served, PER_PAGE, base)
    targets = out["targets"].values()
    out["faketime_offset_seen_s"] = seen  # a child Python's time.time() with the offset file at -1000 s
    out["counts_lost"] = sum(max(0.0, t["drafts_expected"] - t["drafts_stored"]) for t in targets)
    out["counts_added"] = sum(max(0.0, t["drafts_stored"] - t["drafts_expected"]) for t in targets)
    out["counts_expected"] = sum(t["drafts_expected"] for t in targets)
    out["samples_stored"] = sum(t["samples_stored"] for t in targets)
    # every page served is a stored sample, a held one, or the first sighting (a baseline)
    out["samples_not_stored_nor_held"] = sum(t["served"] - 1 - t["samples_stored"] for t in targets) - out["held_total"]
    # each step said once: the collector's own line (its wall clock against its monotonic one),
    # and for a step back the held targets in one line (one a target for three or fewer), and
    # storing resumed (a line per cycle in which targets resumed)
    back = [s for s in out["steps"] if s["step_s"] < 0]
    forward = [s for s in out["steps"] if s["step_s"] > 0]
    out["back_steps_said_once_per_target"] = all(
        s["held_lines"] == (1 if len(CLOCK) > 3 else len(CLOCK)) and s["resumed_lines"] >= 1
        and len(s["step_lines"]) == 1 for s in back)
    out["forward_steps_said_once"] = all(len(s["step_lines"]) == 1 and not s["held_lines"] for s in forward)
    out["forward_steps_said"] = sum(len(s["step_lines"]) for s in forward)
    return out


def internal_errors_of_new_faults(result: dict) -> int:
    """Exit 1 (or the words "internal error") of the clock-stepped collector, the read-only
    store's commands and the bent Prometheus' routes."""
    n = 0
    clock, ro, bent = result["clock_steps"], result["read_only_store"], result["bent_prometheus"]
    if clock.get("exit") == 1 or clock.get("closing_exit") == 1:
        n += 1
    for said in list(ro.get("readers", {}).values()) + list(ro.get("writers", {}).values()):
        n += said["exit"] == 1 or "internal error" in said["said"]
    for mode in BENT_MODES:
        n += bent.get(mode, {}).get("exits", {}).get("1", 0)
    return n


def product_bugs(result: dict) -> list[str]:
    """What the run found the product doing wrong, each with what it did and what was expected."""
    bugs = []
    gone = result["other_lives"]["first_engine_left"]
    if gone["remaining_engine_increase"] > 0 and gone["remaining_engine_stored"] == 0:
        bugs.append(
            f"a load-balanced URL whose first engine left for good (scale-down: only the older replica answers "
            f"{LB_GONE} from then on, counters rising, _created 30 min before the first's): nothing of the "
            f"remaining engine is stored ({_n(gone['remaining_engine_increase'])} drafts over the steady life), every "
            f"scrape refused as 'another life', said once per collector life; a partial reset is taken as it is "
            f"after 3 refusals (rebaseline), another life never is")
    clock = result["clock_steps"]
    if clock.get("run", True) and clock["forward_steps_said"] == 0:
        forward = ", ".join(f"{s['step_s']:+d} s" for s in clock["steps"] if s["step_s"] > 0)
        bugs.append(
            f"a forward step of the collector's wall clock ({forward}, libfaketime; its monotonic clock steady) is "
            f"said in no line: collect says a back step once per target, but a forward one passes without a word, "
            f"and the interval across it is stored as that much longer than it was (counts stay exact)")
    return bugs


def all_held(result: dict) -> bool:
    """Every new fault did what it must (the module docstring)."""
    clock, lives, ro, bent = (result["clock_steps"], result["other_lives"], result["read_only_store"],
                              result["bent_prometheus"])
    clock_ok = not clock.get("run", True) or (clock["exit"] == 0 and clock["counts_lost"] == 0
                                              and clock["counts_added"] == 0 and clock["back_steps_said_once_per_target"]
                                              and clock["forward_steps_said_once"])
    gone = lives["first_engine_left"]
    lives_ok = (lives["lines_per_url_and_life_max"] <= 1 and not any(lives["restarts_stored"].values())
                and gone["first_engine_stored"] == gone["first_engine_expected"]
                # the engine that stays is counted from its rebaseline on: never more than it did
                and 0 < gone["remaining_engine_stored"] <= gone["remaining_engine_increase"])
    ro_ok = not ro.get("run", True) or ro["held"]
    bent_ok = not bent.get("run", True) or all(bent[m]["held"] for m in BENT_MODES)
    return clock_ok and lives_ok and ro_ok and bent_ok


def _n(x: float) -> str:
    return f"{x:,.0f}"


def report(result: dict) -> None:
    lost, added = result["counts_lost"], result["counts_added"]
    print(f"{'healthy samples stored':<36}{result['healthy_samples_stored']:>8} of {result['healthy_samples_expected']}")
    print(f"{'cycles lost per kill (max, mean)':<36}{result['cycles_lost_per_kill_max']:>8} "
          f"{result['cycles_lost_per_kill_mean']:.2f}")
    print(f"{'  lives that met a full disk (max lost)':<36}{result['lives_with_a_full_disk']:>8} "
          f"({result['cycles_lost_in_lives_with_a_full_disk_max']})")
    print(f"{'counts lost (per counted target)':<36}{max(lost.values()):>8g} of {min(result['counts_expected'].values()):g}+")
    print(f"{'counts added (per counted target)':<36}{max(added.values()):>8g}")
    second = result["second_collectors"]
    print(f"{'second collectors refused / ran':<36}{second['refused']:>8} / {second['ran']} "
          f"({second['killed']} killed before deciding)")
    print(f"{'disk fills (full-disk lines said)':<36}{result['disk_fills']!s:>8} ({result['full_disk_lines']})")
    print(f"{'reader runs (longest s)':<36}{result['reader_runs']:>8} ({result['reader_longest_s']})")
    print(f"{'hostile Prometheus runs (longest s)':<36}{result['prometheus_runs']:>8} "
          f"({result['prometheus_longest_s']}; deadline {result['prometheus_deadline_s']:g} s a query)")
    for line in result["prometheus_said"]:
        print("   ", line)
    lives = result["other_lives"]
    gone = lives["first_engine_left"]
    print(f"{'other lives: lines per URL and life':<36}{lives['lines_per_url_and_life_max']:>8} "
          f"(restarts stored {sum(lives['restarts_stored'].values())}); first engine left: stored "
          f"{_n(gone['first_engine_stored'])} of {_n(gone['first_engine_expected'])}, the remaining one's "
          f"{_n(gone['remaining_engine_stored'])} of {_n(gone['remaining_engine_increase'])}")
    clock = result["clock_steps"]
    if clock.get("run", True):
        print(f"{'clock steps: exit, lost, added':<36}{clock['exit']!s:>8} {_n(clock['counts_lost'])} "
              f"{_n(clock['counts_added'])} of {_n(clock['counts_expected'])} (samples {clock['samples_stored']})")
        for step in clock["steps"]:
            print(f"    {step['step_s']:+d} s: {step['held_lines']} held, {step['resumed_lines']} resumed lines;",
                  step.get("step_lines") or "no step line", step["example"] or "", step["other_lines"] or "")
    else:
        print(f"{'clock steps':<36}{clock['why']}")
    ro = result["read_only_store"]
    if ro.get("run", True):
        print(f"{'read-only store':<36}{'held' if ro['held'] else 'FAILED':>8} (unchanged {ro['unchanged']})")
        for name, said in {**ro["readers"], **ro["writers"]}.items():
            print(f"    {name}: exit {said['exit']}: {said['said']}", said.get("fields_differing") or "")
    else:
        print(f"{'read-only store':<36}{ro['why']}")
    bent = result["bent_prometheus"]
    if bent.get("run", True):
        print(f"{'bent Prometheus (ready after s)':<36}{bent['ready_after_s']!s:>8} rate limit {bent['rate_limit']}")
        for mode in BENT_MODES:
            print(f"    {mode}: {bent[mode]['runs']} runs, exits {bent[mode]['exits']}, held {bent[mode]['held']}; "
                  f"{bent[mode]['said']}")
    else:
        print(f"{'bent Prometheus':<36}{bent['why']}")
    for bug in result["product_bugs"]:
        print("  product bug:", bug)
    print(f"{'false corrupt reports':<36}{result['false_corrupt']:>8}")
    print(f"{'internal errors':<36}{result['internal_errors']:>8}")
    for e in result["examples"]:
        print("  e.g.", e)


if __name__ == "__main__":
    sys.exit(main())
