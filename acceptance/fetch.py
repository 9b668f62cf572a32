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
lines or its body one byte at a time is cut off at the deadline: every recv of
``acceptance.http1`` is given only the time left. The body is read in chunks and reading
stops at ``max_bytes`` (a 50 MB page is never buffered whole).
"""

from __future__ import annotations

import errno
import re
import select
import socket
import ssl
import sys
import threading
import zlib
from pathlib import Path
from urllib.parse import urlsplit

from .errors import InputError
from .http1 import BodyTooLarge, ClosedBeforeAnswer, Connection, CutShort, Deadline, Head, ResponseError

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_USER_AGENT = "specdec-collector/0.1"


class SourceError(InputError):
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
            raise InputError(f"timeout_s must be positive, got {timeout_s!r}")
        if not max_bytes > 0:
            raise InputError(f"max_bytes must be positive, got {max_bytes!r}")
        self.timeout_s = float(timeout_s)
        self.max_bytes = int(max_bytes)
        self.keep_alive = keep_alive
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._lock = threading.Lock()

    # -- connections ---------------------------------------------------------------------

    def _take(self, key) -> Connection | None:
        with self._lock:
            idle = self._idle.get(key)
            while idle:
                conn = idle.pop()
                if _still_open(conn):
                    return conn
                conn.close()
        return None

    def _give_back(self, key, conn: Connection) -> None:
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

    def _new_connection(self, scheme: str, host: str, port: int, deadline: Deadline) -> Connection:
        sock = socket.create_connection((host, port), timeout=deadline.remaining())
        try:
            # Small requests, answered at once: no Nagle delay on the request.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                context = self._ssl_context or ssl.create_default_context()
                sock.settimeout(deadline.remaining())  # each handshake read gets at most the time left
                sock = context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        return Connection(sock)

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
        key, path, headers = self._request_for(url)
        deadline = Deadline(self.timeout_s)
        try:
            conn = self._take(key) if self.keep_alive else None
            if conn is not None:
                try:
                    return self._exchange(url, key, conn, path, headers, deadline)
                except ClosedBeforeAnswer:
                    pass  # the server closed it while idle: one retry on a fresh connection
            conn = self._new_connection(*key, deadline)
            return self._exchange(url, key, conn, path, headers, deadline)
        except SourceError:
            raise
        except (socket.timeout, TimeoutError):
            raise UnreachableError(f"{url}: timed out after {self.timeout_s:g} s") from None
        except ConnectionRefusedError:
            raise UnreachableError(f"{url}: connection refused") from None
        except socket.gaierror as exc:
            raise UnreachableError(f"{url}: cannot resolve host {key[1]!r} ({_one_line(exc.strerror or exc)})") from None
        except ssl.SSLError as exc:
            raise SourceError(f"{url}: TLS error ({_one_line(exc)})") from None
        except (ClosedBeforeAnswer, ConnectionResetError, BrokenPipeError):
            raise UnreachableError(f"{url}: connection closed by the server") from None
        except BodyTooLarge:
            raise SourceError(f"{url}: page over the {self.max_bytes}-byte limit") from None
        except CutShort as exc:
            raise SourceError(f"{url}: response cut short in the {exc.where} after {exc.received} bytes") from None
        except ResponseError as exc:
            raise SourceError(f"{url}: bad HTTP response ({_one_line(exc)})") from None
        except OSError as exc:
            if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
                raise UnreachableError(f"{url}: host unreachable") from None
            raise SourceError(f"{url}: {_one_line(exc.strerror or exc)}") from None

    def _request_for(self, url: str) -> tuple[tuple[str, str, int], str, dict[str, str]]:
        """(scheme, host, port), the request target and the request headers of ``url``."""
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
        if _NOT_IN_A_REQUEST.search(path) or _NOT_IN_A_REQUEST.search(host_header):
            raise SourceError(f"{url}: not a valid URL (spaces, control or non-ASCII characters; percent-encode them)")
        headers = {"Host": host_header, "Accept": "text/plain", "User-Agent": _USER_AGENT}
        if not self.keep_alive:
            headers["Connection"] = "close"
        return (scheme, host, port), path, headers

    def _exchange(self, url, key, conn: Connection, path, headers, deadline: Deadline) -> str:
        try:
            conn.get(path, headers, deadline)
            head = conn.read_head(deadline)
            body = self._read_body(url, conn, head, deadline)
        finally:
            if self.keep_alive and conn.reusable:
                self._give_back(key, conn)
            else:
                conn.close()
        return body

    def _read_body(self, url, conn: Connection, head: Head, deadline: Deadline) -> str:
        if head.status != 200:
            raise UnreachableError(f"{url}: HTTP {head.status} {_one_line(head.reason)}")
        content_type = head.headers.get("content-type", "").lower()
        if content_type.startswith(("text/html", "application/xhtml")):
            raise SourceError(f"{url}: HTML page (Content-Type {content_type}), not the Prometheus text format")
        length = head.headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > self.max_bytes:
            raise SourceError(f"{url}: page of {int(length)} bytes is over the {self.max_bytes}-byte limit")
        data = conn.read_body(head, deadline, self.max_bytes)
        encoding = head.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            data = gunzip_page(data, url, self.max_bytes)
        elif encoding != "identity":
            raise SourceError(f"{url}: page in Content-Encoding {encoding!r}, which specdec does not decode")
        return decode_page(data, url, self.max_bytes)


# What http.client also refused in a request line or Host header: it would split the
# request (CR, LF), end the target (space) or not be ASCII.
_NOT_IN_A_REQUEST = re.compile(r"[^\x21-\x7e]")


def _still_open(conn: Connection) -> bool:
    """An idle connection is usable when its socket has nothing to read (no EOF, no stray bytes).

    poll, not select: a fleet's sockets go past select's 1,024-descriptor limit.
    """
    try:
        poller = select.poll()
        poller.register(conn.sock, select.POLLIN | select.POLLPRI)
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
