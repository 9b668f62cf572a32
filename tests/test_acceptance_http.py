"""The HTTP/1.1 exchange of acceptance.fetch (on aiohttp), against loopback servers that answer with
canned bytes (what real servers send, and what broken ones do), and over TLS."""
from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading

import pytest

from acceptance.fetch import PageFetcher, SourceError, UnreachableError

PAGE = b'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'


class _CannedServer:
    """Accepts connections on a loopback port; each answers every request with the next
    canned response (bytes, sent as they are), then closes when ``close_after`` says so."""

    def __init__(self, responses: list[bytes], *, close_after: bool = False, tls: ssl.SSLContext | None = None):
        self.responses = list(responses)
        self.close_after = close_after
        self.tls = tls
        self.requests: list[bytes] = []
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            while self.responses:
                request = b""
                while b"\r\n\r\n" not in request:
                    data = conn.recv(4096)
                    if not data:
                        return
                    request += data
                self.requests.append(request)
                conn.sendall(self.responses.pop(0))
                if self.close_after:
                    break
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        self._sock.close()


@pytest.fixture()
def canned():
    servers = []

    def start(responses, **kwargs) -> _CannedServer:
        servers.append(_CannedServer(responses, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _ok(body: bytes = PAGE, *, extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:
    return version + b" 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def test_request_names_the_host_asks_for_text_and_no_compression(canned):
    server = canned([_ok()])
    with PageFetcher() as fetcher:
        assert fetcher.fetch(server.url()) == PAGE.decode()
    request = server.requests[0]
    assert request.startswith(b"GET /metrics HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in request
    assert b"Accept: text/plain\r\n" in request
    assert b"accept-encoding" not in request.lower()


def test_reconnect_mode_asks_the_server_to_close(canned):
    server = canned([_ok()], close_after=True)
    with PageFetcher(keep_alive=False) as fetcher:
        fetcher.fetch(server.url())
    assert b"Connection: close\r\n" in server.requests[0]


def test_one_connection_serves_consecutive_scrapes(canned):
    server = canned([_ok(), _ok(), _ok()])
    with PageFetcher() as fetcher:
        for _ in range(3):
            assert fetcher.fetch(server.url()) == PAGE.decode()
    assert server.connections == 1


def test_interim_response_is_skipped(canned):
    server = canned([b"HTTP/1.1 100 Continue\r\n\r\n" + _ok()])
    with PageFetcher() as fetcher:
        assert fetcher.fetch(server.url()) == PAGE.decode()


def test_lf_only_line_ends_and_folded_headers_are_read(canned):
    head = b"HTTP/1.1 200 OK\nContent-Type: text/plain\nX-Folded: a\n  b\nContent-Length: %d\n\n" % len(PAGE)
    server = canned([head + PAGE])
    with PageFetcher() as fetcher:
        assert fetcher.fetch(server.url()) == PAGE.decode()


def test_body_until_close_without_length(canned):
    server = canned([b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + PAGE], close_after=True)
    with PageFetcher() as fetcher:
        assert fetcher.fetch(server.url()) == PAGE.decode()


def test_http10_and_connection_close_are_not_reused(canned):
    server = canned([_ok(version=b"HTTP/1.0"), _ok(extra=b"Connection: close\r\n"), _ok()], close_after=True)
    with PageFetcher() as fetcher:
        for _ in range(3):
            assert fetcher.fetch(server.url()) == PAGE.decode()
    assert server.connections == 3


@pytest.mark.parametrize(
    "response, words",
    [
        (b"ICY 200 OK\r\n\r\n", "bad HTTP response (Bad status line: Expected HTTP/"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "bad HTTP response (Bad status line: Invalid response status"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad HTTP response (Invalid header token: b'no colon here')"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"x" * 70_000 + b"\r\n\r\n", "bad HTTP response (Got more than 65536 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "bad HTTP response (Invalid character in Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad HTTP response (Invalid character in chunk size: b'zz')"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n0\r\n\r\n", "bad HTTP response (Expected LF after chunk data"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nvllm:", "response cut short (Not enough data to satisfy content length header (received 5 of 100 bytes)"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "response cut short in the headers"),
        (b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/metrics\r\nContent-Length: 0\r\n\r\n", "HTTP 302 Found"),
    ],
)
def test_broken_responses_are_one_line_naming_the_url(canned, response, words):
    # twice: a GET whose connection dropped is retried once, and a broken server breaks alike again
    server = canned([response] * 2, close_after=True)
    with PageFetcher(timeout_s=5) as fetcher, pytest.raises(SourceError) as info:
        fetcher.fetch(server.url())
    message = str(info.value)
    assert server.url() in message
    assert words in message
    assert "\n" not in message


def test_closed_before_any_answer_is_unreachable(canned):
    server = canned([b""], close_after=True)
    with PageFetcher() as fetcher, pytest.raises(UnreachableError, match="connection closed by the server"):
        fetcher.fetch(server.url())


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/met rics", "http://127.0.0.1:1/metrics\r\nX: y",
                                 "http://127.0.0.1:1/m\u00e9trics"])
def test_urls_that_would_break_the_request_line_are_refused(url):
    with PageFetcher() as fetcher, pytest.raises(SourceError, match="not a valid URL"):
        fetcher.fetch(url)


def _self_signed(tmp_path) -> tuple[str, str]:
    openssl = shutil.which("openssl")
    assert openssl, "openssl (Debian's openssl package) is needed to make the test's certificate"
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def test_https_page_and_an_untrusted_certificate(canned, tmp_path):
    cert, key = _self_signed(tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    server = canned([_ok(), _ok()], tls=server_tls)
    trusting = ssl.create_default_context(cafile=cert)
    with PageFetcher(ssl_context=trusting) as fetcher:
        assert fetcher.fetch(server.url("https")) == PAGE.decode()
        assert fetcher.fetch(server.url("https")) == PAGE.decode()
    assert server.connections == 1
    with PageFetcher(timeout_s=5) as fetcher, pytest.raises(SourceError, match="TLS error"):
        fetcher.fetch(server.url("https"))  # the default context does not trust a self-signed certificate
