"""Chaos: the bad-target zoo beside healthy targets, SIGKILLs of the collector (alone, and
with a reader), readers in loops during collection with retention on and a γ that flips
every scrape. Loopback only; every process it starts, it stops.

    python benchmarks/chaos.py [--kills 20] [--joint-kills 5] [--interval 2]

The zoo: malformed, HTML, 50 MB, refused, HTTP 500, reset without an answer, a status line,
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
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from acceptance.counts import SpecCounts  # noqa: E402
from acceptance.sim import EngineExposure, render_page  # noqa: E402

BIN = Path(sys.executable).parent
RESULTS = REPO / "benchmarks" / "results" / "chaos.json"
HEALTHY = [f"/healthy/{i}" for i in range(4)] + ["/gzip"]
ZOO = ["/malformed", "/html", "/big", "/500", "/reset", "/trickle-status", "/trickle-headers", "/trickle-chunks",
       "/impossible", "/impossible-1e300", "/impossible-rising"]
PARTIAL = "/partial-reset"  # counted like the healthy ones: a glitch is refused, never added
COUNTED = HEALTHY + [PARTIAL]
PER_PAGE = 100  # drafts a healthy engine adds per page served


def counts_after(pages: int, gamma: int = 3) -> SpecCounts:
    d = PER_PAGE * pages
    per_pos = tuple(int(d * a) for a in (0.8, 0.6, 0.45, 0.3, 0.2)[:gamma])
    return SpecCounts(d, gamma * d, sum(per_pos), per_pos)


class Zoo(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.served: dict[str, int] = {}
        self.started = time.time()
        self.glitching = True  # the partial-reset target's glitches (off for the closing scrape)

    def handle_error(self, request, client_address):
        pass  # clients cut off by their deadline leave broken pipes: expected

    def serve_count(self, path: str) -> int:
        with self.lock:
            self.served[path] = self.served.get(path, 0) + 1
            return self.served[path]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes, content_type="text/plain; version=0.0.4", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        path, zoo = self.path, self.server
        try:
            if path in HEALTHY:
                page = render_page([EngineExposure("m", "0", counts_after(zoo.serve_count(path)), zoo.started,
                                                   num_requests_running=4.0)])
                if path == "/gzip":
                    self._send(200, gzip.compress(page), extra=[("Content-Encoding", "gzip")])
                else:
                    self._send(200, page)
            elif path == "/flip":
                n = zoo.serve_count(path)
                gamma = 3 if n % 2 else 5
                self._send(200, render_page([EngineExposure("m", "0", counts_after(1 + n % 7, gamma), time.time(),
                                                            num_requests_running=2.0)]))
            elif path == "/malformed":
                self._send(200, b'vllm:spec_decode_num_drafts_total{engine="0" 12\n')
            elif path == "/html":
                self._send(200, b"<html><body>login</body></html>", content_type="text/html")
            elif path == "/big":
                self._big()
            elif path == "/500":
                self._send(500, b"internal error")
            elif path == "/reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.close_connection = True
            elif path.startswith("/trickle"):
                self._trickle(path)
            elif path == "/impossible":
                c = SpecCounts(10, 30, 9000, (9000, 10, 5))
                self._send(200, render_page([EngineExposure("m", "0", c, zoo.started)]))
            elif path == "/impossible-1e300":  # more drafts than draft tokens
                c = SpecCounts(1e300, 2481, 1790, (496, 418, 340, 308, 228))
                self._send(200, render_page([EngineExposure("m", "0", c, zoo.started, num_requests_running=0.0)]))
            elif path == "/impossible-rising":  # A_1 below A_2 on an idle engine: no race explains it
                c = SpecCounts(590, 2481, 1790 - 481, (15, 418, 340, 308, 228))
                self._send(200, render_page([EngineExposure("m", "0", c, zoo.started, num_requests_running=0.0)]))
            elif path == PARTIAL:
                n = zoo.serve_count(path)
                c = counts_after(n)
                if zoo.glitching and n >= 6 and n % 2 == 0:  # accepted set back by 100, drafts on
                    per_pos = (c.accepted_per_position[0] - 100,) + c.accepted_per_position[1:]
                    c = SpecCounts(c.drafts, c.draft_tokens, c.accepted_tokens - 100, per_pos)
                self._send(200, render_page([EngineExposure("m", "0", c, zoo.started, num_requests_running=4.0)]))
            else:
                self._send(404, b"no such page")
        except OSError:
            self.close_connection = True

    def _big(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(50 << 20))
        self.end_headers()
        block = (b"# " + b"x" * 1021 + b"\n") * 1024
        for _ in range(50):
            self.wfile.write(block)

    def _trickle(self, path: str):
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
        slow = {"/trickle-status": head[:17], "/trickle-headers": head}.get(path, b"")
        for i in range(len(slow)):
            self.wfile.write(slow[i:i + 1])
            self.wfile.flush()
            time.sleep(0.2)
        self.wfile.write(head[len(slow):])
        for ch in b"ff;" + b"x" * 60:
            self.wfile.write(bytes([ch]))
            self.wfile.flush()
            time.sleep(0.2)
        self.close_connection = True


PROM_MODES = ["hang-body", "hang-headers", "series", "truncated", "500"]
PROM_DEADLINE_S = 2.0  # [source] timeout of the run's config


class HostileProm(ThreadingHTTPServer):
    """A Prometheus that misbehaves by the route's selector job="MODE": an answer that never
    ends (status and a Content-Length of a megabyte, then a byte every 0.2 s; or the headers a byte at
    a time), 200,000 series, JSON cut short, HTTP 500."""

    daemon_threads = True
    block_on_close = False

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _PromHandler)
        self.stop = threading.Event()
        series = [{"metric": {"gamma": str(i)}, "values": [[1.7e9, "1"]]} for i in range(200_000)]
        self.huge = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}}).encode()

    def handle_error(self, request, client_address):
        pass  # clients cut off at their deadline leave broken pipes: expected


class _PromHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
        query = form.get("query", [""])[0]
        mode = next((m for m in PROM_MODES if f'job="{m}"' in query), None)
        try:
            if mode is None:  # a question of no route's selector (are specdec's rules loaded?): none
                self._send(200, b'{"status": "success", "data": {"resultType": "vector", "result": []}}')
            elif mode.startswith("hang"):
                self._trickle(headers_too=mode == "hang-headers")
            elif mode == "series":
                self._send(200, self.server.huge)
            elif mode == "truncated":
                self._send(200, b'{"status": "success", "data": {"resultType": "matrix", "result": [{"metr')
            else:
                self._send(500, b'{"status": "error", "error": "internal"}')
        except OSError:
            self.close_connection = True

    def _send(self, status: int, body: bytes):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self, headers_too: bool):
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        if not headers_too:
            self.wfile.write(head)
            head = b""
        for byte in head + b"[" * 10**6:
            if self.server.stop.wait(0.2):
                break
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
        self.close_connection = True


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(folder: Path, base: str, prom: str, interval: float, retention: str | None) -> Path:
    healthy = ", ".join(f'"{base}{p}"' for p in HEALTHY + [PARTIAL])
    zoo = ", ".join(f'"{base}{p}"' for p in ZOO) + f', "http://127.0.0.1:{closed_port()}/metrics"'
    cfg = folder / "specdec.toml"
    kept = f'retention = "{retention}"\n' if retention else ""
    prom_routes = "".join(f"[routes.prom-{m}]\nselector = '{{job=\"{m}\"}}'\n\n" for m in PROM_MODES)
    cfg.write_text(f'[store]\npath = "chaos.db"\n{kept}\n[collect]\ninterval = {interval}\ntimeout = 1\n\n'
                   f'[source]\nkind = "prometheus"\nurl = "{prom}"\ntimeout = "{PROM_DEADLINE_S:g}s"\n\n'
                   f'[deployment]\nmethod = "eagle3"\ncost_profile = "flat"\n\n'
                   f'[routes.healthy]\ntargets = [{healthy}]\n\n[routes.flip]\ntargets = ["{base}/flip"]\n\n'
                   f'[routes.zoo]\ntargets = [{zoo}]\n\n{prom_routes}')
    return cfg


class Readers:
    """tune-gamma in loops on the healthy and the flipping route and, in a third loop, on the
    hostile Prometheus' routes in turn; counts runs, exit codes, 'corrupt' reports and the
    longest run of each kind (a Prometheus route's is bounded by its deadline)."""

    def __init__(self, cfg: Path):
        self.cfg, self.stop, self.runs, self.internal, self.corrupt, self.procs = cfg, threading.Event(), 0, [], [], set()
        self.longest_s = 0.0
        self.prom_runs, self.prom_longest_s, self.prom_lines = 0, 0.0, set()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._loop, args=([route],), daemon=True) for route in ("healthy", "flip")]
        self.threads.append(threading.Thread(target=self._loop, args=([f"prom-{m}" for m in PROM_MODES],),
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

    def finish(self, proc: subprocess.Popen, what: str) -> None:
        _, err = proc.communicate(timeout=120)
        self._said(err or "", what, proc.returncode)

    def _said(self, err: str, what: str, code: int | None) -> None:
        self.full_lines += err.count("disk full (")
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


class Stored(NamedTuple):
    """What the store holds after the run: drafts over the run per counted target, scrapes stored
    per healthy target URL since raw rows start, the stored cycles and where raw rows start
    (retention)."""

    drafts: dict[str, float]
    samples: dict[str, int]
    cycles: list[float]
    raw_from: float | None


def stored_drafts(db: Path, base: str) -> Stored:
    from acceptance.store import Store
    from acceptance.windows import route_window

    with Store.open(db) as store:
        drafts = {}
        for p in COUNTED:
            w = route_window(store, [f"{base}{p}"], 0.0, time.time() + 3600)  # whole rollup buckets
            drafts[p] = sum(s.total.drafts for s in w.segments)
        since = store.raw_from() or 0.0
        samples = {}  # scrapes stored as intervals since raw rows start (the first sighting is a baseline only)
        for url in {ref.target for _, ref in store.engines_of(f"{base}{p}" for p in HEALTHY)}:
            spec, _ = store.read_intervals([eid for eid, _ in store.engines_of([url])], since - 1e-6, time.time() + 3600)
            samples[url] = sum(len(e.end) for e in spec)
        return Stored(drafts, samples, stored_cycles(db), store.raw_from())


def main(argv=None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    zoo = Zoo()
    threading.Thread(target=zoo.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    base = f"http://127.0.0.1:{zoo.server_address[1]}"
    prom = HostileProm()
    threading.Thread(target=prom.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    folder = Path(tempfile.mkdtemp(prefix="specdec-chaos-"))
    started = time.time()
    with own_tmpfs(folder, not args.no_disk_fill) as on_tmpfs:
        cfg = write_config(folder, base, f"http://127.0.0.1:{prom.server_address[1]}", args.interval,
                           args.retention or None)
        run = Run(cfg, folder / "chaos.db", args.interval, rng)
        run.finish(collect(cfg, "--once"), "opening collect --once")
        opening = {p: zoo.served.get(p, 0) for p in COUNTED}
        filler = DiskFiller(folder, rng) if on_tmpfs else contextlib.nullcontext()
        with Readers(cfg) as readers, filler:
            for k in range(args.kills + args.joint_kills):
                run.life(k, readers, joint=k >= args.kills)
            time.sleep(1.0)
        zoo.glitching = False  # the closing scrape sees the partial-reset engine as it is
        run.finish(collect(cfg, "--once"), "closing collect --once")
        closing = {p: zoo.served.get(p, 0) for p in COUNTED}
        for server in (zoo, prom):
            server.stop = getattr(server, "stop", None) or threading.Event()
            server.stop.set()
            server.shutdown()
            server.server_close()
        stored = stored_drafts(run.db, base)
    result = tally(args, run, readers, (opening, closing), stored, base)
    result["disk_fills"] = filler.fills if on_tmpfs else "not run (needs root to mount a tmpfs of its own)"
    result["seconds"] = time.time() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    report(result)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)", file=sys.stderr)
    ok = not result["false_corrupt"] and not result["internal_errors"] and not result["second_collectors"]["ran"]
    return 0 if ok and not any(result["counts_added"].values()) and not any(result["counts_lost"].values()) else 1


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
    print(f"{'false corrupt reports':<36}{result['false_corrupt']:>8}")
    print(f"{'internal errors':<36}{result['internal_errors']:>8}")
    for e in result["examples"]:
        print("  e.g.", e)


if __name__ == "__main__":
    sys.exit(main())
