"""The chaos benchmark's loopback target zoo (benchmarks/chaos.py): the paths it serves — healthy
engines, the bad targets (malformed, HTML, 50 MB, 500, reset, trickled status, headers and
chunks, impossible pages), a partial reset, a _created going back, load-balanced URLs reaching
two engines, the clock-stepped collector's and the real Prometheus' engines — and the pages
each serves, counted so that the run knows what every healthy target served.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from acceptance.counts import SpecCounts
from acceptance.sim import EngineExposure, render_page

HEALTHY = [f"/healthy/{i}" for i in range(4)] + ["/gzip"]
ZOO = ["/malformed", "/html", "/big", "/500", "/reset", "/trickle-status", "/trickle-headers", "/trickle-chunks",
       "/impossible", "/impossible-1e300", "/impossible-rising"]
PARTIAL = "/partial-reset"  # counted like the healthy ones: a glitch is refused, never added
# another engine life behind one URL: every 4th page's _created an hour earlier while the
# counters keep rising; a load-balanced URL reaching two engines in turn (each counted by the
# life first seen: its pages under the path, the other's under path#B)
CREATED_BACK, LB = "/created-back", "/lb"
LB_GONE = "/lb-gone"  # the same, until the first engine leaves for good (a scale-down) in the steady life
COUNTED = HEALTHY + [PARTIAL, CREATED_BACK, LB]
CLOCK = [f"/clock/{i}" for i in range(4)] + ["/clock/gzip"]  # read by the clock-stepped collector only
PER_PAGE = 100  # drafts a healthy engine adds per page served


def counts_after(pages: int, gamma: int = 3) -> SpecCounts:
    d = PER_PAGE * pages
    per_pos = tuple(int(d * a) for a in (0.8, 0.6, 0.45, 0.3, 0.2)[:gamma])
    return SpecCounts(d, gamma * d, sum(per_pos), per_pos)


class Zoo(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # a collector opens a connection per target at once: 5 (the default) drops some

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.served: dict[str, int] = {}
        self.started = time.time()
        self.glitching = True  # the partial-reset and created-back glitches (off for the closing scrape)
        # which engine a load-balanced URL reaches: "alternate", or only "A" (the life first seen) or "B"
        self.lb_mode = {LB: "A", LB_GONE: "A"}

    def handle_error(self, request, client_address):
        pass  # clients cut off by their deadline leave broken pipes: expected

    def serve_count(self, path: str) -> int:
        with self.lock:
            self.served[path] = self.served.get(path, 0) + 1
            return self.served[path]

    def lb_page(self, path: str) -> bytes:
        """A load-balanced URL's page: engine A's (created when the zoo started, its pages counted
        under ``path``) or engine B's (an older replica: created 30 min before, its counters
        higher; counted under path#B), in turn or as ``lb_mode`` says."""
        with self.lock:
            mode = self.lb_mode[path]
            turn = self.served.get(path + "#turn", 0)
            self.served[path + "#turn"] = turn + 1
        if mode == "A" or (mode == "alternate" and turn % 2 == 0):
            return render_page([EngineExposure("m", "0", counts_after(self.serve_count(path)), self.started,
                                               num_requests_running=4.0)])
        return render_page([EngineExposure("m", "0", counts_after(200 + self.serve_count(path + "#B")),
                                           self.started - 1800, num_requests_running=4.0)])


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
            if path in HEALTHY or path in CLOCK:
                page = render_page([EngineExposure("m", "0", counts_after(zoo.serve_count(path)), zoo.started,
                                                   num_requests_running=4.0)])
                if path.endswith("gzip"):
                    self._send(200, gzip.compress(page), extra=[("Content-Encoding", "gzip")])
                else:
                    self._send(200, page)
            elif path == CREATED_BACK:
                n = zoo.serve_count(path)
                created = zoo.started - 3600 if zoo.glitching and n >= 4 and n % 4 == 0 else zoo.started
                self._send(200, render_page([EngineExposure("m", "0", counts_after(n), created,
                                                            num_requests_running=4.0)]))
            elif path in (LB, LB_GONE):
                self._send(200, zoo.lb_page(path))
            elif path.startswith("/prom/"):  # the real Prometheus' engines (chaos_prometheus): two a page
                n = zoo.serve_count(path)
                self._send(200, render_page([EngineExposure("m", str(e), counts_after(n + 40 * e), zoo.started,
                                                            num_requests_running=4.0) for e in (0, 1)]))
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
