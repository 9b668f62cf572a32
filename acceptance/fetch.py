"""Read a vLLM /metrics page: over HTTP(S), from a file, or from stdin.

Every failure is a ``SourceError`` whose message is one line naming the URL or path:
timeout, connection refused, host not found or unreachable, a status other than 200, a
body over ``max_bytes``, an HTML body instead of the Prometheus text format, bytes that
are not UTF-8.

``PageFetcher`` keeps idle HTTP/1.1 connections per (scheme, host, port) and reuses them
(keep-alive), so a collector that scrapes a fleet every 15 s does not pay a TCP handshake
per target per cycle where the server keeps connections open. vLLM's server (uvicorn)
closes idle connections after 5 s by default, so against it most scrapes reconnect: a
reused connection that the server has closed is detected before the request (the socket
reads as closed) or by the request failing before any response byte, and the scrape is
retried once on a fresh connection.

The time limit ``timeout_s`` is the whole scrape's, from connect to the last byte, not per
socket operation: a server that trickles its status line, its headers, its chunk-size
lines or its body one byte at a time is cut off at the deadline. Socket timeouts alone
cannot do that (each recv returns its byte in time), so a watchdog thread shuts the
socket down when a scrape passes its deadline, and the scrape reads as timed out. The body
is read in chunks and reading stops at ``max_bytes`` (a 50 MB page is never buffered whole).
"""

from __future__ import annotations

import errno
import heapq
import http.client
import itertools
import select
import socket
import ssl
import sys
import threading
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_CHUNK = 256 * 1024
_USER_AGENT = "specdec-collector/0.1"


class SourceError(ValueError):
    """A source that could not be read; the message is one line naming the URL or path."""


class UnreachableError(SourceError):
    """A source that gave no page at all: refused, timed out, unresolvable, unreachable, reset,
    or an HTTP status other than 200 (the commands' exit status 3, "nothing answered")."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def mask_userinfo(url: str) -> str:
    """``url`` with the password of its userinfo (``http://user:secret@host``) as ***, for
    messages: credentials in a URL are never printed."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()


class _Deadline:
    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.end = time.monotonic() + timeout_s

    def remaining(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline")
        return left


class _Watch:
    """One scrape's socket under the watchdog: ``fire`` shuts it down (a blocked recv then
    returns at once), ``disarm`` ends the watch and says whether it fired."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.done = self.fired = False
        self._lock = threading.Lock()

    def fire(self) -> None:
        with self._lock:
            if self.done:
                return
            self.fired = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def disarm(self) -> bool:
        with self._lock:
            self.done = True
            return self.fired


class _Watchdog:
    """One thread for every scrape in the process: it sleeps until the earliest deadline
    and fires the watches still running past theirs."""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, end: float, sock: socket.socket) -> _Watch:
        watch = _Watch(sock)
        with self._cond:
            heapq.heappush(self._heap, (end, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="specdec-scrape-deadline", daemon=True)
                self._thread.start()
            self._cond.notify()
        return watch

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                left = self._heap[0][0] - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)[2].fire()


_WATCHDOG = _Watchdog()


class _StaleConnection(Exception):
    """A reused keep-alive connection was closed by the server before it answered."""


class PageFetcher:
    """Fetches /metrics pages, keeping idle connections for reuse (thread-safe).

    One connection serves one request at a time: a thread takes an idle connection for
    the target's (scheme, host, port) or opens one, and gives it back only after reading
    a complete response. ``keep_alive=False`` opens a connection per fetch.
    """

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep_alive: bool = True,
        ssl_context: ssl.SSLContext | None = None,
    ):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        if not max_bytes > 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes!r}")
        self.timeout_s = float(timeout_s)
        self.max_bytes = int(max_bytes)
        self.keep_alive = keep_alive
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    # -- connections ---------------------------------------------------------------------

    def _take(self, key) -> http.client.HTTPConnection | None:
        with self._lock:
            idle = self._idle.get(key)
            while idle:
                conn = idle.pop()
                if _still_open(conn):
                    return conn
                conn.close()
        return None

    def _give_back(self, key, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def __enter__(self) -> "PageFetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _new_connection(self, scheme: str, host: str, port: int, deadline: _Deadline):
        timeout = deadline.remaining()
        if scheme == "https":
            context = self._ssl_context or ssl.create_default_context()
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.connect()
        # Small requests, answered at once: no Nagle delay on the request.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    # -- fetching ------------------------------------------------------------------------

    def fetch(self, url: str) -> str:
        """The body of ``url`` as text; ``SourceError`` (one line naming the URL, its password
        masked) on any failure."""
        shown = mask_userinfo(url)
        try:
            return self._fetch(url)
        except SourceError as exc:
            if shown == url:
                raise
            raise type(exc)(str(exc).replace(url, shown)) from None

    def _fetch(self, url: str) -> str:
        try:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            host = parts.hostname
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as exc:
            raise SourceError(f"{url}: not a valid URL ({_one_line(exc)})") from None
        if scheme not in ("http", "https") or not host:
            raise SourceError(f"{url}: not an http(s) URL")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rpartition("@")[2]
        key = (scheme, host, port)
        deadline = _Deadline(self.timeout_s)
        try:
            conn = self._take(key) if self.keep_alive else None
            if conn is not None:
                try:
                    return self._watched_exchange(url, key, conn, path, host_header, deadline, reused=True)
                except _StaleConnection:
                    pass  # the server closed it while idle: one retry on a fresh connection
            conn = self._new_connection(scheme, host, port, deadline)
            return self._watched_exchange(url, key, conn, path, host_header, deadline, reused=False)
        except SourceError:
            raise
        except (socket.timeout, TimeoutError):
            raise UnreachableError(f"{url}: timed out after {self.timeout_s:g} s") from None
        except ConnectionRefusedError:
            raise UnreachableError(f"{url}: connection refused") from None
        except socket.gaierror as exc:
            raise UnreachableError(f"{url}: cannot resolve host {host!r} ({_one_line(exc.strerror or exc)})") from None
        except ssl.SSLError as exc:
            raise SourceError(f"{url}: TLS error ({_one_line(exc)})") from None
        except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
            raise UnreachableError(f"{url}: connection closed by the server") from None
        except http.client.IncompleteRead as exc:
            raise SourceError(f"{url}: response cut short after {len(exc.partial)} bytes") from None
        except http.client.HTTPException as exc:
            raise SourceError(f"{url}: bad HTTP response ({type(exc).__name__}: {_one_line(exc)})") from None
        except OSError as exc:
            if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
                raise UnreachableError(f"{url}: host unreachable") from None
            raise SourceError(f"{url}: {_one_line(exc.strerror or exc)}") from None

    def _watched_exchange(self, url, key, conn, path, host_header, deadline, *, reused: bool) -> str:
        """_exchange under the watchdog: past the deadline its socket is shut down, and
        whatever the exchange then made of it (an error, or a page cut short that reads as
        complete), the scrape timed out."""
        watch = _WATCHDOG.arm(deadline.end, conn.sock)
        try:
            body = self._exchange(url, key, conn, path, host_header, deadline, reused=reused)
        except BaseException:
            if watch.disarm():
                conn.close()
                raise socket.timeout("deadline") from None
            raise
        if watch.disarm():
            conn.close()
            raise socket.timeout("deadline")
        return body

    def _exchange(self, url, key, conn, path, host_header, deadline, *, reused: bool) -> str:
        keep = False
        # Held here: http.client drops conn.sock once a response says it will close the
        # connection, and the body is still read through this socket.
        sock = conn.sock
        try:
            sock.settimeout(deadline.remaining())
            try:
                conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", host_header)
                conn.putheader("Accept", "text/plain")  # identity encoding: no gzip to undo
                conn.putheader("User-Agent", _USER_AGENT)
                conn.endheaders()
                response = conn.getresponse()
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                if reused:
                    raise _StaleConnection() from None
                raise
            body = self._read_body(url, sock, response, deadline)
            keep = self.keep_alive and not response.will_close
        finally:
            if keep:
                self._give_back(key, conn)
            else:
                conn.close()
        return body

    def _read_body(self, url, sock, response, deadline) -> str:
        if response.status != 200:
            raise UnreachableError(f"{url}: HTTP {response.status} {_one_line(response.reason)}")
        content_type = (response.getheader("Content-Type") or "").lower()
        if content_type.startswith(("text/html", "application/xhtml")):
            raise SourceError(f"{url}: HTML page (Content-Type {content_type}), not the Prometheus text format")
        length = response.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_bytes:
            raise SourceError(f"{url}: page of {int(length)} bytes is over the {self.max_bytes}-byte limit")
        chunks = []
        size = 0
        while True:
            sock.settimeout(deadline.remaining())
            # read1: at most one recv, so the deadline is checked between recvs (read(n) would
            # wait for all n bytes, and a trickling server could hold it far past the deadline).
            chunk = response.read1(min(_CHUNK, self.max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_bytes:
                raise SourceError(f"{url}: page over the {self.max_bytes}-byte limit")
        # read1 does not mark a fully read response done; closing it frees the connection
        # for the next request (the socket itself stays open for keep-alive).
        response.close()
        data = b"".join(chunks)
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            data = gunzip_page(data, url, self.max_bytes)
        elif encoding != "identity":
            raise SourceError(f"{url}: page in Content-Encoding {encoding!r}, which specdec does not decode")
        return decode_page(data, url, self.max_bytes)


def _still_open(conn: http.client.HTTPConnection) -> bool:
    """An idle connection is usable when its socket has nothing to read (no EOF, no stray bytes).

    poll, not select: a fleet's sockets go past select's 1,024-descriptor limit.
    """
    sock = conn.sock
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


_GZIP_MAGIC = b"\x1f\x8b"


def gunzip_page(data: bytes, name: str, max_bytes: int) -> bytes:
    """A gzip-compressed page (a server that always compresses, or a saved .gz), at most
    ``max_bytes`` once decompressed; ``SourceError`` naming the source otherwise."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise SourceError(f"{name}: gzip-compressed page that does not decompress ({_one_line(exc)})") from None
    if len(out) > max_bytes:
        raise SourceError(f"{name}: page over the {max_bytes}-byte limit once decompressed")
    if not inflater.eof:
        raise SourceError(f"{name}: gzip-compressed page cut short")
    return out


def decode_page(data: bytes, name: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """UTF-8 text of a page (gunzipped first when it is gzip); ``SourceError`` naming the
    source for undecodable bytes or HTML."""
    if data.startswith(_GZIP_MAGIC):
        data = gunzip_page(data, name, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    if text.lstrip()[:1] == "<":
        raise SourceError(f"{name}: HTML page, not the Prometheus text format")
    return text


def fetch_page(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """One GET of ``url`` on a fresh connection; ``SourceError`` naming the URL on any failure."""
    with PageFetcher(timeout_s=timeout_s, max_bytes=max_bytes, keep_alive=False) as fetcher:
        return fetcher.fetch(url)


def read_source(
    source: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stdin=None,
) -> str:
    """The text of a /metrics page from an http(s) URL, ``-`` (stdin) or a file path.

    Missing, unreadable, empty or over-size files (and an empty stdin) are ``SourceError``
    naming the path.
    """
    if source.lower().startswith(("http://", "https://")):
        return fetch_page(source, timeout_s=timeout_s, max_bytes=max_bytes)
    if source == "-":
        stream = stdin if stdin is not None else sys.stdin
        stream = getattr(stream, "buffer", stream)
        data = stream.read(max_bytes + 1)
        if isinstance(data, str):
            data = data.encode("utf-8")
        name = "<stdin>"
    else:
        name = source
        path = Path(source)
        try:
            with path.open("rb") as fh:
                data = fh.read(max_bytes + 1)
        except FileNotFoundError:
            raise SourceError(f"{source}: no such file") from None
        except IsADirectoryError:
            raise SourceError(f"{source}: is a directory, not a file") from None
        except OSError as exc:
            raise SourceError(f"{source}: cannot read ({_one_line(exc.strerror or exc)})") from None
    if len(data) > max_bytes:
        raise SourceError(f"{name}: over the {max_bytes}-byte limit")
    if not data.strip():
        raise SourceError(f"{name}: empty")
    return decode_page(data, name, max_bytes)
