"""Chaos: the bad-target zoo beside healthy targets, SIGKILLs of the collector (alone, and
with a reader), readers in loops during collection with retention on and a γ that flips
every scrape. Loopback only; every process it starts, it stops.

    python benchmarks/chaos.py [--kills 20] [--joint-kills 5] [--interval 2]

The zoo: malformed, HTML, 50 MB, refused, HTTP 500, reset without an answer, a status line,
headers or chunk-size lines trickled a byte at a time, impossible counts. Healthy targets:
four plain pages and one always gzip-encoded, whose drafts counter grows by 100 per page
served (so the counts a store must hold are known exactly), and one whose γ flips 3 ↔ 5 on
every page (its counters restart each time, as a restarted engine's do).

With `[store] retention` 60 s the raw rows of the run's first minute are rolled up and
deleted while it runs (the rollups, kept 4× longer, outlive it). A baseline `collect --once`
opens the run and another closes it, neither killed; between
them `collect` runs in lives ended by SIGKILL at random moments, while two readers loop
`tune-gamma --json` on the healthy and the flipping route. Reported (and written to
benchmarks/results/chaos.json):
- healthy samples stored / expected: every stored cycle should hold every healthy target;
- cycles lost per kill: scrape cycles due in a life but not stored (the one in flight);
- counts lost: per healthy engine, (its counter at the closing scrape − at the opening one)
  − the drafts the store holds over the run (retention rolls the raw rows up meanwhile);
- false "corrupt" reports and internal errors (exit 1) of every command run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from acceptance.counts import SpecCounts  # noqa: E402
from acceptance.sim import EngineExposure, render_page  # noqa: E402

BIN = Path(sys.executable).parent
RESULTS = REPO / "benchmarks" / "results" / "chaos.json"
HEALTHY = [f"/healthy/{i}" for i in range(4)] + ["/gzip"]
ZOO = ["/malformed", "/html", "/big", "/500", "/reset", "/trickle-status", "/trickle-headers", "/trickle-chunks",
       "/impossible"]
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


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(folder: Path, base: str, interval: float, retention: str | None) -> Path:
    healthy = ", ".join(f'"{base}{p}"' for p in HEALTHY)
    zoo = ", ".join(f'"{base}{p}"' for p in ZOO) + f', "http://127.0.0.1:{closed_port()}/metrics"'
    cfg = folder / "specdec.toml"
    kept = f'retention = "{retention}"\n' if retention else ""
    cfg.write_text(f'[store]\npath = "chaos.db"\n{kept}\n[collect]\ninterval = {interval}\ntimeout = 1\n\n'
                   f'[deployment]\nmethod = "eagle3"\ncost_profile = "flat"\n\n'
                   f'[routes.healthy]\ntargets = [{healthy}]\n\n[routes.flip]\ntargets = ["{base}/flip"]\n\n'
                   f'[routes.zoo]\ntargets = [{zoo}]\n')
    return cfg


class Readers:
    """tune-gamma in loops on two routes; counts runs, exit codes and 'corrupt' reports."""

    def __init__(self, cfg: Path):
        self.cfg, self.stop, self.runs, self.internal, self.corrupt, self.procs = cfg, threading.Event(), 0, [], [], set()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._loop, args=(route,), daemon=True) for route in ("healthy", "flip")]

    def _loop(self, route: str):
        while not self.stop.is_set():
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
                self.runs += 1
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


def collect(cfg: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "specdec"), "collect", "--config", str(cfg), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stored_cycles(db: Path) -> list[float]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return [t for (t,) in conn.execute("SELECT time FROM cycles ORDER BY time")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of the collector alone")
    parser.add_argument("--joint-kills", type=int, default=5, help="SIGKILLs of the collector and a reader together")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    # raw rows go after 60 s, in the run; rollups (4× longer) outlive it, so every count stays readable
    parser.add_argument("--retention", default="60s", help="[store] retention ('' for none)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    zoo = Zoo()
    threading.Thread(target=zoo.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    base = f"http://127.0.0.1:{zoo.server_address[1]}"
    folder = Path(tempfile.mkdtemp(prefix="specdec-chaos-"))
    cfg = write_config(folder, base, args.interval, args.retention or None)
    db = folder / "chaos.db"
    errors: list[str] = []

    def finish(proc: subprocess.Popen, what: str) -> None:
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 1 or "corrupt" in (err or ""):
            errors.append(f"{what}: exit {proc.returncode}: {(err or '').strip()[-300:]}")

    started = time.time()
    finish(collect(cfg, "--once"), "opening collect --once")
    opening = {p: zoo.served.get(p, 0) for p in HEALTHY}
    lives, lost = [], []
    with Readers(cfg) as readers:
        for k in range(args.kills + args.joint_kills):
            proc = collect(cfg)
            life_start = time.time()
            time.sleep(rng.uniform(1.5, 3.0 * args.interval))
            if k >= args.kills:
                readers.kill_one()
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=60)
            killed = time.time()
            if "corrupt" in err or "internal error" in err:
                errors.append(f"collect life {k}: {err.strip()[-300:]}")
            in_life = [t for t in stored_cycles(db) if life_start <= t <= killed]
            # cycles due after the last stored one and before the kill: the one in flight
            last = in_life[-1] if in_life else life_start
            lost.append(max(0, int((killed - last) // args.interval)))
            lives.append(len(in_life))
        time.sleep(1.0)
    finish(collect(cfg, "--once"), "closing collect --once")
    closing = {p: zoo.served.get(p, 0) for p in HEALTHY}
    zoo.shutdown()
    zoo.server_close()

    from acceptance.store import Store
    from acceptance.windows import route_window

    with Store.open(db) as store:
        cycles = stored_cycles(db)
        drafts_by_target = {}
        for p in HEALTHY:
            w = route_window(store, [f"{base}{p}"], 0.0, time.time() + 3600)  # whole rollup buckets
            drafts_by_target[p] = sum(s.total.drafts for s in w.segments)
        samples = dict(store.conn.execute(
            "SELECT t.url, COUNT(*) FROM samples s JOIN engines e ON s.engine_id = e.id JOIN targets t "
            "ON e.target_id = t.id GROUP BY t.url").fetchall())
        raw_from = store.raw_from()
    expected_counts = {p: PER_PAGE * (closing[p] - opening[p]) for p in HEALTHY}
    counts_lost = {p: expected_counts[p] - drafts_by_target[p] for p in HEALTHY}
    kept_cycles = [t for t in cycles if raw_from is None or t >= raw_from]
    healthy_kept = sum(samples.get(f"{base}{p}", 0) for p in HEALTHY)
    result = {
        "kills": args.kills, "joint_kills": args.joint_kills, "interval_s": args.interval,
        "seconds": time.time() - started, "cycles_stored": len(cycles),
        "healthy_samples_stored": healthy_kept, "healthy_samples_expected": len(kept_cycles) * len(HEALTHY),
        "cycles_lost_per_kill_max": max(lost), "cycles_lost_per_kill_mean": sum(lost) / len(lost),
        "counts_lost": counts_lost, "counts_expected": expected_counts,
        "reader_runs": readers.runs, "false_corrupt": len(readers.corrupt) + sum("corrupt" in e for e in errors),
        "internal_errors": len(readers.internal) + sum("exit 1" in e or "internal" in e for e in errors),
        "examples": (readers.internal + readers.corrupt + errors)[:5],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'healthy samples stored':<34}{healthy_kept:>8} of {result['healthy_samples_expected']}")
    print(f"{'cycles lost per kill (max, mean)':<34}{max(lost):>8} {result['cycles_lost_per_kill_mean']:.2f}")
    print(f"{'counts lost (per healthy target)':<34}{max(abs(v) for v in counts_lost.values()):>8g} "
          f"of {min(expected_counts.values()):g}+")
    print(f"{'reader runs':<34}{readers.runs:>8}")
    print(f"{'false corrupt reports':<34}{result['false_corrupt']:>8}")
    print(f"{'internal errors':<34}{result['internal_errors']:>8}")
    for e in result["examples"]:
        print("  e.g.", e)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)", file=sys.stderr)
    return 0 if not result["false_corrupt"] and not result["internal_errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
