"""The chaos run's hostile Prometheus: one server, picked by a route's selector job="MODE".

Its own failures (``OWN_MODES``): an answer that never ends (status and a Content-Length of a
megabyte, then a byte every 0.2 s; or the headers a byte at a time), 200,000 series, JSON cut
short, HTTP 500. In front of a real Prometheus (Debian's, scraping engines of its own every
second) it bends the real answers as a querier in front of Prometheus can (``BENT_MODES``):
``nan`` and ``inf`` put NaN or +Inf where a draft count belongs (in every answer about the
drafts counter), ``busy`` is a rate limit (a token bucket: a query finding it empty gets 429
with Retry-After: 1), ``partial`` adds the `warnings` a Thanos querier sends when a store did
not answer, and ``clean`` passes the answers as they are (the control). Questions of no route's
selector (are specdec's rules loaded?) go to the real Prometheus as they are.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OWN_MODES = ["hang-body", "hang-headers", "series", "truncated", "500"]
BENT_MODES = ["clean", "nan", "inf", "busy", "partial"]
PARTIAL_WARNING = 'partial response: store "127.0.0.9:10901" (a Thanos sidecar) did not answer within 2s'
BUCKET = (4.0, 2.0)  # the rate limit: tokens held at most, tokens added a second


class HostileProm(ThreadingHTTPServer):
    """The server; ``upstream`` the real Prometheus the bent modes forward to (None: none runs,
    and they answer HTTP 502)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, upstream: str | None):
        super().__init__(("127.0.0.1", 0), _PromHandler)
        self.upstream, self.stop, self.lock = upstream, threading.Event(), threading.Lock()
        series = [{"metric": {"gamma": str(i)}, "values": [[1.7e9, "1"]]} for i in range(200_000)]
        self.huge = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}}).encode()
        self.tokens, self.refilled = BUCKET[0], time.monotonic()
        # what the bent modes did: 429s served, queries asked again after one, and refused again
        self.busy = {"answered_429": 0, "asked_again": 0, "refused_again": 0}
        self.bent = {"nan": 0, "inf": 0, "partial": 0}  # answers bent, by mode
        self._refused: set[str] = set()  # the bodies of queries refused once (a retry repeats the body)

    def handle_error(self, request, client_address):
        pass  # clients cut off at their deadline leave broken pipes: expected

    def take_token(self, body: str) -> bool:
        """The rate limit: whether a query may pass now; counts the 429s and what followed them."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(BUCKET[0], self.tokens + (now - self.refilled) * BUCKET[1])
            self.refilled = now
            again = body in self._refused
            if again:
                self.busy["asked_again"] += 1
                self._refused.discard(body)
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return True
            self.busy["answered_429"] += 1
            self.busy["refused_again"] += again
            self._refused.add(body)
            return False


class _PromHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HostileProm

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        self._forward(None, None)

    def do_POST(self):  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        query = urllib.parse.parse_qs(raw.decode()).get("query", [""])[0]
        mode = next((m for m in OWN_MODES + BENT_MODES if f'job="{m}"' in query), None)
        try:
            if mode is None or mode in BENT_MODES:
                self._forward(raw, mode, query)
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

    def _forward(self, raw: bytes | None, mode: str | None, query: str = "") -> None:
        """The real Prometheus' answer, bent by ``mode``."""
        server = self.server
        if server.upstream is None:
            self._send(502, b'{"status": "error", "error": "no upstream"}')
            return
        if mode == "busy" and not server.take_token(raw.decode() if raw else ""):
            self._send(429, b'{"status": "error", "errorType": "too_many_requests", "error": "rate limit: '
                            b'2 queries a second"}', extra=[("Retry-After", "1")])
            return
        request = urllib.request.Request(server.upstream + self.path, data=raw, method=self.command, headers={
            "Content-Type": self.headers.get("Content-Type", "application/x-www-form-urlencoded")})
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                status, body = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        if status == 200 and mode in ("nan", "inf", "partial"):
            body = self._bent(body, mode, query)
        self._send(status, body)

    def _bent(self, body: bytes, mode: str, query: str) -> bytes:
        doc = json.loads(body)
        if mode == "partial":
            doc.setdefault("warnings", []).append(PARTIAL_WARNING)
        elif "spec_decode_num_drafts" in query and doc.get("data", {}).get("result"):
            series = doc["data"]["result"][0]
            said = "NaN" if mode == "nan" else "+Inf"
            if series.get("values"):
                series["values"][-1][1] = said
            elif series.get("value"):
                series["value"][1] = said
        else:
            return body
        with self.server.lock:
            self.server.bent[mode] += 1
        return json.dumps(doc).encode()

    def _send(self, status: int, body: bytes, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in extra:
            self.send_header(k, v)
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


@contextlib.contextmanager
def real_prometheus(folder: Path, zoo_base: str, port: int):
    """Debian's Prometheus scraping the zoo's engines of each bent mode every second (job MODE,
    path /prom/MODE); yields its URL, or None with why where it is not installed. Stopped on exit."""
    binary = shutil.which("prometheus")
    if binary is None:
        yield None, "prometheus not installed (scripts/ensure_prometheus.sh installs Debian's)"
        return
    hostport = zoo_base.split("//", 1)[1]
    jobs = "".join(f"  - job_name: {m}\n    metrics_path: /prom/{m}\n    static_configs:\n"
                   f"      - targets: [\"{hostport}\"]\n" for m in BENT_MODES)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                                           f"scrape_configs:\n{jobs}")
    log = (folder / "prometheus.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                             f"--storage.tsdb.path={folder / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            time.sleep(0.2)
        else:
            yield None, f"prometheus did not start: {(folder / 'prometheus.log').read_text()[-300:]}"
            return
        yield url, None
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class BentRoutes:
    """tune-gamma --json in rounds over the bent modes' routes (prom-MODE), from when the clean
    route answers (the real Prometheus holds enough of its engines) until stopped: each mode's
    runs, exit statuses, longest run, its last stderr line and, for ``partial``, whether the
    notes hold the warning."""

    def __init__(self, tune_gamma: Path, cfg: Path, url: str | None):
        self.tune_gamma, self.cfg, self.url = tune_gamma, cfg, url
        self.stop, self.ready_after_s = threading.Event(), None
        self.runs: dict[str, list[dict]] = {m: [] for m in BENT_MODES}
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _run(self, mode: str) -> dict:
        began = time.monotonic()
        done = subprocess.run([str(self.tune_gamma), "--route", f"prom-{mode}", "--config", str(self.cfg),
                               "--window", "1h", "--json"], capture_output=True, text=True, timeout=300)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        notes = _strings(json.loads(done.stdout)) if done.returncode == 0 else []
        return {"exit": done.returncode, "seconds": round(time.monotonic() - began, 2), "stderr_lines": len(lines),
                "said": lines[-1][:300] if lines else "",
                "partial_note": next((n for n in notes if PARTIAL_WARNING in n and "may be partial" in n), None)}

    def _loop(self) -> None:
        started = time.monotonic()
        while not self.stop.wait(5.0):  # the clean route answers once Prometheus holds a few blocks
            if self._run("clean")["exit"] == 0:
                self.ready_after_s = round(time.monotonic() - started, 1)
                break
        while not self.stop.is_set():
            for mode in BENT_MODES:
                self.runs[mode].append(self._run(mode))
            self.stop.wait(5.0)  # the machine is shared: a pause between rounds

    def __enter__(self):
        if self.url is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=300)

    def result(self, server: HostileProm) -> dict:
        """Per mode: runs, exit statuses, the longest run, what it said; with whether each mode did
        what it must (module docstring of chaos.py)."""
        out: dict = {"ready_after_s": self.ready_after_s, "rate_limit": dict(server.busy), "bent_answers": dict(server.bent)}
        for mode, runs in self.runs.items():
            exits: dict[str, int] = {}
            for r in runs:
                exits[str(r["exit"])] = exits.get(str(r["exit"]), 0) + 1
            out[mode] = {"runs": len(runs), "exits": exits, "longest_s": max((r["seconds"] for r in runs), default=0),
                         "said": sorted({r["said"] or r["partial_note"] or "" for r in runs})[:3],
                         "held": _held(mode, runs, server)}
        return out


def _strings(doc: object) -> list[str]:
    """Every string a JSON document holds (a note may sit anywhere in tune-gamma's answer)."""
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in _strings(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in _strings(v)]
    return [doc] if isinstance(doc, str) else []


def _held(mode: str, runs: list[dict], server: HostileProm) -> bool:
    """Whether every run of ``mode`` did what it must: the clean, busy and partial routes succeed
    (busy after at least one 429, each asked once more and never refused twice; partial with
    the warning in its notes), NaN and +Inf end in one line naming the server, the drafts
    series and the value (exit 2)."""
    if not runs:
        return False
    if mode in ("nan", "inf"):
        value = "NaN" if mode == "nan" else "+Inf"
        url = f"http://127.0.0.1:{server.server_address[1]}"  # the server the config names
        return all(r["exit"] == 2 and r["stderr_lines"] == 1 and url in r["said"] and value in r["said"]
                   and "spec_decode_num_drafts" in r["said"] for r in runs)
    ok = all(r["exit"] == 0 for r in runs)
    if mode == "busy":
        return ok and server.busy["answered_429"] > 0 and server.busy["refused_again"] == 0
    if mode == "partial":
        return ok and all(r["partial_note"] for r in runs)
    return ok
