"""Fetching pages and collecting a fleet: loopback HTTP servers in-test (port 0)."""

from __future__ import annotations

import http.server
import io
import socket
import threading
import time
from pathlib import Path

import pytest

from acceptance.collector import Collector, ScrapeOptions, collect_cycle, run_collector
from acceptance.fetch import PageFetcher, SourceError, fetch_page, read_source

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden"  # a copy of the shared reference data
FULL_PAGE = (GOLDEN / "exposition_gamma3_full_metrics_page.txt").read_bytes()
SPEC_PAGE = (GOLDEN / "exposition_gamma3.txt").read_bytes()
PROM_TYPE = "text/plain; version=1.0.0; charset=utf-8"  # what vLLM answers with
BIG_BYTES = 50 * 1024 * 1024
MiB = 1024 * 1024


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like uvicorn

    def log_message(self, *args):  # keep the test output clean
        pass

    def setup(self):
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def _send(self, status, body: bytes, content_type=PROM_TYPE, length=True):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path
        if path == "/metrics":
            self._send(200, FULL_PAGE)
        elif path == "/spec":
            self._send(200, SPEC_PAGE)
        elif path == "/slow":
            time.sleep(self.server.slow_s)
            self._send(200, FULL_PAGE)
        elif path == "/trickle":  # headers at once, then a byte at a time: only a total deadline stops it
            self.send_response(200)
            self.send_header("Content-Type", PROM_TYPE)
            self.send_header("Content-Length", str(len(FULL_PAGE)))
            self.end_headers()
            try:
                for i in range(40):
                    self.wfile.write(FULL_PAGE[i : i + 1])
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass
        elif path in ("/trickle-status", "/trickle-headers", "/trickle-chunks"):
            self._trickle(path)
        elif path == "/chunked":  # no Content-Length: the body comes in chunks
            self.send_response(200)
            self.send_header("Content-Type", PROM_TYPE)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(FULL_PAGE), 10_000):
                piece = FULL_PAGE[i : i + 10_000]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/html":
            self._send(200, b"<html><body>login</body></html>", content_type="text/html; charset=utf-8")
        elif path == "/html-as-text":
            self._send(200, b"\n<!DOCTYPE html><html></html>")
        elif path == "/unavailable":
            self._send(503, b"overloaded", content_type="text/plain")
        elif path == "/gzip":  # compressed whatever the request asked for
            import gzip

            body = gzip.compress(SPEC_PAGE)
            self.send_response(200)
            self.send_header("Content-Type", PROM_TYPE)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif path == "/impossible":  # 825,900 accepted at position 0 of 9,134 drafts
            self._send(200, SPEC_PAGE.replace(b'position="0"} 8259.0', b'position="0"} 825900.0'))
        elif path == "/garbage":
            self._send(200, SPEC_PAGE + b'vllm:spec_decode_num_drafts_total{engine="9" 12\n')
        elif path == "/latin1":
            self._send(200, SPEC_PAGE + "# caf\u00e9\n".encode("latin-1"))
        elif path == "/nospec":
            body = b"".join(line + b"\n" for line in FULL_PAGE.splitlines() if b"spec_decode" not in line)
            self._send(200, body)
        elif path in ("/big", "/big-unsized"):
            self._send_big(sized=path == "/big")
        elif path == "/close-after":  # answers, then drops the connection without saying so
            self._send(200, SPEC_PAGE)
            self.close_connection = True
        else:
            self._send(404, b"not found", content_type="text/plain")

    def _trickle(self, path: str):
        """A byte every 0.1 s of the status line, of the headers, or of the chunk-size
        lines: each recv returns in time, only a deadline from connect to the last byte stops it."""
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: {PROM_TYPE}\r\nTransfer-Encoding: chunked\r\n"
                f"X-Padding: {'p' * 200}\r\n\r\n").encode()
        status_end = head.index(b"\r\n") + 2
        slow = {"/trickle-status": head[:status_end], "/trickle-headers": head}.get(path, b"")
        try:
            for i in range(len(slow)):
                self.wfile.write(slow[i:i + 1])
                self.wfile.flush()
                time.sleep(0.1)
            self.wfile.write(head[len(slow):])
            chunk_line = b"%x" % len(SPEC_PAGE) + b";" + b"x" * 200 + b"\r\n"  # a chunk extension, slowly
            for i in range(len(chunk_line)):
                self.wfile.write(chunk_line[i:i + 1])
                self.wfile.flush()
                time.sleep(0.1)
            self.wfile.write(SPEC_PAGE + b"\r\n0\r\n\r\n")
        except OSError:
            pass
        self.close_connection = True

    def _send_big(self, *, sized: bool):
        """50 MB, with or without Content-Length; counts what was actually sent."""
        self.send_response(200)
        self.send_header("Content-Type", PROM_TYPE)
        if sized:
            self.send_header("Content-Length", str(BIG_BYTES))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        block = (b"# " + b"x" * 1021 + b"\n") * 1024  # 1 MiB of comment lines
        try:
            for _ in range(BIG_BYTES // len(block)):
                self.wfile.write(block)
                with self.server.lock:
                    self.server.big_sent += len(block)
        except OSError:
            self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):
        pass  # clients that time out or stop reading leave broken pipes here: expected


@pytest.fixture(scope="module")
def server():
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.lock = threading.Lock()
    srv.connections = 0
    srv.big_sent = 0
    srv.slow_s = 2.0
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture()
def base(server):
    return server[0]


@pytest.fixture()
def closed_port_url():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connecting is refused
    return f"http://127.0.0.1:{port}/metrics"


def _assert_one_line_naming(message: str, target: str):
    assert target in message
    assert "\n" not in message
    assert "\r" not in message


# --- fetch ----------------------------------------------------------------------------


def test_fetch_page_returns_the_page_text(base):
    assert fetch_page(f"{base}/metrics") == FULL_PAGE.decode()


@pytest.mark.parametrize(
    "path, reason",
    [
        ("/html", "HTML"),
        ("/html-as-text", "HTML"),
        ("/unavailable", "HTTP 503"),
        ("/nowhere", "HTTP 404"),
        ("/latin1", "not UTF-8"),
        ("/big", "limit"),
        ("/big-unsized", "limit"),
    ],
)
def test_fetch_errors_are_one_line_naming_the_url(base, path, reason):
    url = f"{base}{path}"
    with pytest.raises(SourceError) as info:
        fetch_page(url)
    _assert_one_line_naming(str(info.value), url)
    assert reason in str(info.value)


def test_chunked_page_on_a_reused_connection(server):
    base, srv = server
    with PageFetcher() as fetcher:
        assert fetcher.fetch(f"{base}/chunked") == FULL_PAGE.decode()
        with srv.lock:
            before = srv.connections
        assert fetcher.fetch(f"{base}/chunked") == FULL_PAGE.decode()
        with srv.lock:
            assert srv.connections == before


def test_refused_connection(closed_port_url):
    with pytest.raises(SourceError, match="refused") as info:
        fetch_page(closed_port_url)
    _assert_one_line_naming(str(info.value), closed_port_url)


def test_timeout_is_a_total_deadline(base):
    for path in ("/slow", "/trickle"):
        url = f"{base}{path}"
        with pytest.raises(SourceError, match="timed out") as info:
            fetch_page(url, timeout_s=0.3)
        _assert_one_line_naming(str(info.value), url)


@pytest.mark.parametrize("path", ["/trickle-status", "/trickle-headers", "/trickle-chunks"])
def test_a_trickled_status_line_headers_or_chunk_size_meet_the_deadline(base, path):
    url = f"{base}{path}"
    started = time.monotonic()
    with pytest.raises(SourceError, match="timed out after 0.5 s") as info:
        fetch_page(url, timeout_s=0.5)
    assert time.monotonic() - started < 1.5  # the server would go on for 20 s and more
    _assert_one_line_naming(str(info.value), url)


def test_a_slow_target_does_not_hold_the_cycle_and_the_healthy_ones_are_kept(base):
    targets = [f"{base}/metrics", f"{base}/trickle-headers", f"{base}/spec"]
    started = time.monotonic()
    results = collect_cycle(targets, timeout_s=0.5, concurrency=4)
    assert time.monotonic() - started < 1.5
    assert [r.ok for r in results] == [True, False, True]
    assert "timed out" in results[1].error


def test_a_page_always_served_gzip_is_decoded(base):
    assert fetch_page(f"{base}/gzip") == SPEC_PAGE.decode()


def test_a_target_with_impossible_counts_fails_alone(base):
    results = collect_cycle([f"{base}/spec", f"{base}/impossible"], timeout_s=2.0)
    assert results[0].ok
    assert not results[1].ok
    assert "impossible counts" in results[1].error
    assert f"{base}/impossible" in results[1].error


def test_unresolvable_host_and_bad_urls():
    with pytest.raises(SourceError) as info:
        fetch_page("http://no-such-host.invalid/metrics", timeout_s=2)
    _assert_one_line_naming(str(info.value), "http://no-such-host.invalid/metrics")
    for url in ("ftp://x/metrics", "http:///metrics", "http://h:notaport/metrics"):
        with pytest.raises(SourceError) as info:
            fetch_page(url)
        _assert_one_line_naming(str(info.value), url)


def test_oversize_unsized_body_is_not_read_to_the_end(server):
    base, srv = server
    with srv.lock:
        srv.big_sent = 0
    with pytest.raises(SourceError, match="16777216-byte limit"):
        fetch_page(f"{base}/big-unsized", max_bytes=16 * MiB)
    time.sleep(0.2)  # let the server thread notice the closed connection
    with srv.lock:
        sent = srv.big_sent
    # Reading stopped at the limit: the server got no further than the limit plus socket buffers.
    assert 16 * MiB <= sent < 40 * MiB


def test_max_bytes_is_a_setting(base):
    url = f"{base}/metrics"
    assert len(fetch_page(url, max_bytes=len(FULL_PAGE))) == len(FULL_PAGE)
    with pytest.raises(SourceError, match=f"{len(FULL_PAGE) - 1}-byte limit"):
        fetch_page(url, max_bytes=len(FULL_PAGE) - 1)


def test_keep_alive_reuses_one_connection(server):
    base, srv = server
    with PageFetcher() as fetcher:
        with srv.lock:
            before = srv.connections
        for _ in range(5):
            assert fetcher.fetch(f"{base}/spec") == SPEC_PAGE.decode()
        with srv.lock:
            assert srv.connections - before == 1


def test_connection_closed_by_server_while_idle_is_replaced(server):
    """A server that closes each connection after its answer (as uvicorn does after 5 s
    idle): every scrape reads its page, each on one new connection."""
    base, srv = server
    with PageFetcher() as fetcher:
        for _ in range(3):
            with srv.lock:
                before = srv.connections
            assert fetcher.fetch(f"{base}/close-after") == SPEC_PAGE.decode()
            with srv.lock:
                assert srv.connections - before == 1
            time.sleep(0.05)


# --- read_source ----------------------------------------------------------------------


def test_read_source_file_stdin_and_url(tmp_path, base):
    page = tmp_path / "metrics.txt"
    page.write_bytes(SPEC_PAGE)
    assert read_source(str(page)) == SPEC_PAGE.decode()
    assert read_source("-", stdin=io.BytesIO(SPEC_PAGE)) == SPEC_PAGE.decode()
    assert read_source(f"{base}/spec") == SPEC_PAGE.decode()


def test_read_source_errors_name_the_path(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    big = tmp_path / "big.txt"
    big.write_bytes(SPEC_PAGE)
    cases = [
        (str(tmp_path / "missing.txt"), {}, "no such file"),
        (str(empty), {}, "empty"),
        (str(tmp_path), {}, "directory"),
        (str(big), {"max_bytes": 100}, "100-byte limit"),
    ]
    for source, kwargs, reason in cases:
        with pytest.raises(SourceError, match=reason) as info:
            read_source(source, **kwargs)
        _assert_one_line_naming(str(info.value), source)
    with pytest.raises(SourceError, match="<stdin>: empty"):
        read_source("-", stdin=io.BytesIO(b""))


# --- collector ------------------------------------------------------------------------


def test_cycle_collects_good_targets_around_failing_ones(base, closed_port_url):
    targets = [
        f"{base}/metrics",
        f"{base}/slow",
        closed_port_url,
        f"{base}/html",
        f"{base}/garbage",
        f"{base}/big",
        f"{base}/unavailable",
        f"{base}/nospec",
        f"{base}/spec",
    ]
    results = collect_cycle(targets, timeout_s=0.5, max_bytes=16 * MiB, concurrency=4, now=lambda: 1234.5)
    assert [r.target for r in results] == targets  # target order, whatever finished first
    ok = {r.target: r for r in results if r.ok}
    assert set(ok) == {f"{base}/metrics", f"{base}/nospec", f"{base}/spec"}
    full = {e.engine: e for e in ok[f"{base}/metrics"].engines}
    assert full["0"].counts.drafts == 9134
    assert full["1"].counts.accepted_per_position == (7849, 6579, 5100)
    assert all(e.counts is None for e in ok[f"{base}/nospec"].engines)
    assert len(ok[f"{base}/nospec"].engines) == 2
    expected_reason = {
        f"{base}/slow": "timed out",
        closed_port_url: "refused",
        f"{base}/html": "HTML",
        f"{base}/garbage": "malformed",
        f"{base}/big": "limit",
        f"{base}/unavailable": "HTTP 503",
    }
    for r in results:
        assert r.time == 1234.5
        assert r.duration_s >= 0
        if not r.ok:
            assert r.engines == ()
            _assert_one_line_naming(r.error, r.target)
            assert expected_reason[r.target] in r.error


def test_unexpected_exception_in_one_target_is_contained(base, monkeypatch):
    import acceptance.collector as collector_module

    real_parse = collector_module.parse_metrics_page

    def flaky_parse(text, *, source, **kwargs):
        if source.endswith("/spec"):
            raise RuntimeError("boom\nsecond line")
        return real_parse(text, source=source, **kwargs)

    monkeypatch.setattr(collector_module, "parse_metrics_page", flaky_parse)
    results = collect_cycle([f"{base}/spec", f"{base}/metrics"])
    assert not results[0].ok
    assert results[1].ok
    _assert_one_line_naming(results[0].error, f"{base}/spec")
    assert "RuntimeError" in results[0].error


def test_run_collector_once_writes_one_cycle(base):
    written, progress = [], []
    n = run_collector(
        written.append,
        [f"{base}/spec", f"{base}/metrics"],
        interval_s=60,
        once=True,
        on_cycle=lambda k, results, seconds: progress.append((k, len(results), seconds)),
    )
    assert n == 1
    assert len(written) == 1
    assert [r.ok for r in written[0]] == [True, True]
    assert progress[0][:2] == (1, 2)
    assert progress[0][2] >= 0


def test_run_collector_scrapes_as_its_options_say(base):
    written = []
    run_collector(written.append, [f"{base}/metrics"], interval_s=60, once=True,
                  scrape=ScrapeOptions(now=lambda: 1234.5, max_engines=1))
    (result,), = written
    assert result.time == 1234.5
    assert not result.ok and "over the limit of 1" in result.error  # the page's two engines are too many


def test_run_collector_stops_on_event(base):
    stop = threading.Event()
    written = []

    def on_cycle(k, results, seconds):
        if k == 2:
            stop.set()

    # No duration, not once: only the event ends the run, right after the cycle that set it.
    n = run_collector(written.append, [f"{base}/spec"], interval_s=0.01, on_cycle=on_cycle, stop=stop)
    assert n == 2
    assert len(written) == 2


def test_slow_cycles_do_not_pile_up(base):
    starts = []

    def slow_write(results):
        starts.append(time.monotonic())
        time.sleep(0.25)  # each cycle overruns a 0.1 s interval

    n = run_collector(slow_write, [f"{base}/spec"], interval_s=0.1, duration_s=0.65)
    # Ticks every 0.1 s would be 7 cycles; overruns skip the ticks they cover.
    assert n == len(starts) <= 3
    assert all(b - a >= 0.1 for a, b in zip(starts, starts[1:]))


def test_cycles_follow_the_interval_grid(base):
    starts = []
    t0 = time.monotonic()
    n = run_collector(lambda r: starts.append(time.monotonic() - t0), [f"{base}/spec"], interval_s=0.1, duration_s=0.35)
    assert 1 <= n <= 4
    # Each cycle starts on or after its tick k·interval (never early, never drifting back).
    assert all(s >= k * 0.1 - 0.005 for k, s in enumerate(starts))


def test_store_failure_propagates(base):
    def broken_store(results):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_collector(broken_store, [f"{base}/spec"], interval_s=1, once=True)


@pytest.mark.parametrize(
    "kwargs",
    [{"interval_s": 0}, {"interval_s": -1}, {"interval_s": float("nan")}, {"interval_s": 1, "duration_s": -5}],
)
def test_run_collector_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        run_collector(lambda r: None, ["http://127.0.0.1:1/metrics"], **kwargs)


@pytest.mark.parametrize("concurrency", [0, -3, 2.5])
def test_bad_concurrency_is_rejected(concurrency):
    with pytest.raises(ValueError, match="concurrency"):
        collect_cycle(["http://127.0.0.1:1/metrics"], concurrency=concurrency)


def test_collector_reuses_connections_across_cycles(server):
    base, srv = server
    targets = [f"{base}/spec"] * 4
    with Collector(concurrency=2) as collector:
        collector.collect(targets)
        with srv.lock:
            before = srv.connections
        for _ in range(3):
            assert all(r.ok for r in collector.collect(targets))
        with srv.lock:
            assert srv.connections == before  # every later scrape rode an open connection


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_target_is_asked_once_more_after_its_retry_after_within_the_deadline(status):
    """A target answering 429 or 503 with Retry-After: 1 is scraped again after it, within the
    scrape's deadline; one asking for longer than the deadline allows is a failure naming the
    status, and is not waited for."""
    import http.server
    import threading

    asked = []

    class Busy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            if self.path.startswith("/long") or len([p for p in asked if p == self.path]) == 1:
                self.send_response(status)
                self.send_header("Retry-After", "30" if self.path.startswith("/long") else "1")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(SPEC_PAGE)))
            self.end_headers()
            self.wfile.write(SPEC_PAGE)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        started = time.monotonic()
        ok, long = collect_cycle([f"{base}/metrics", f"{base}/long"], timeout_s=5.0)
        took = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert ok.ok and ok.engines, ok.error
    assert not long.ok and f"HTTP {status}" in long.error and asked.count("/long") == 1
    assert 1.0 <= took < 5.0
