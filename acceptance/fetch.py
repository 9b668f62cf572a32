"""Read a vLLM /metrics page: over HTTP(S), from a file, or from stdin.

Every failure is a ``SourceError`` whose message is one line naming the URL or path:
timeout, connection refused, host not found or unreachable, a status other than 200, a
body over ``max_bytes``, an HTML body instead of the Prometheus text format, bytes that
are not UTF-8.

``PageFetcher`` runs its exchanges on one asyncio event loop of its own, so a fleet's
scrapes proceed together on one thread (``acceptance.collector``): no thread per target
and no lock handed between threads, which at 1,000 targets cost more CPU than the HTTP
itself (benchmarks/collector_fleet.py). It keeps idle HTTP/1.1 connections per (scheme,
host, port) and reuses them (keep-alive), so a collector that scrapes a fleet every 15 s
does not pay a TCP handshake per target per cycle where the server keeps connections
open. vLLM's server (uvicorn) closes idle connections after 5 s by default, so against it
most scrapes reconnect: a reused connection that the server has closed is detected before
the request (the socket reads as closed) or by the request failing before any response
byte, and the scrape is retried once on a fresh connection.

The time limit ``timeout_s`` is the whole scrape's, from the name lookup and connect to
the last byte: a server that trickles its status line, its headers, its chunk-size lines
or its body one byte at a time is cut off at the deadline. The body is read as it comes
and reading stops at ``max_bytes`` (a 50 MB page is never buffered whole).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import re
import select
import socket
import ssl
import sys
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, TypeVar, cast
from urllib.parse import urlsplit

from .errors import InputError
from .http1 import BodyTooLarge, ClosedBeforeAnswer, CutShort, Head, ResponseError, ResponseReader, get_request

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_USER_AGENT = "specdec-collector/0.1"
_T = TypeVar("_T")


class SourceError(InputError):
    """A source that could not be read; the message is one line naming the URL or path."""


class UnreachableError(SourceError):
    """A source that gave no page at all: refused, timed out, unresolvable, unreachable, reset,
    or an HTTP status other than 200 (the commands' exit status 3, "nothing answered")."""


def _one_line(text: object) -> str:
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


class _Link(asyncio.Protocol):
    """One connection: sends a request and feeds the response's bytes to its reader."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._reader: ResponseReader | None = None
        self._answer: asyncio.Future[ResponseReader] | None = None

    def exchange(self, request: bytes, reader: ResponseReader) -> asyncio.Future[ResponseReader]:
        """Send ``request``; the future is done when ``reader`` has the whole response (or failed)."""
        self._reader, self._answer = reader, asyncio.get_running_loop().create_future()
        if self.closed:
            self._answer.set_exception(ClosedBeforeAnswer())
        else:
            assert self.transport is not None  # connected (connection_made) until closed
            self.transport.write(request)
        return self._answer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # create_connection's: a stream's Transport

    def data_received(self, data: bytes) -> None:
        if self._answer is None or self._answer.done():
            self._reader = None  # bytes while idle or past the response: never reused
            self.close()
            return
        assert self._reader is not None  # set with _answer (exchange)
        self._step(self._reader.feed, data)

    def eof_received(self) -> bool:
        self._ended(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        if self._answer is None or self._answer.done():
            return
        assert self._reader is not None  # set with _answer (exchange)
        if exc is not None and self._reader.answered:
            self._answer.set_exception(exc)  # reset in the middle of the response
            return
        self._step(self._reader.feed_eof)

    def _step(self, feed: Callable[..., None], *data: bytes) -> None:
        assert self._answer is not None and self._reader is not None  # an exchange is under way
        try:
            feed(*data)
        except Exception as exc:
            self._answer.set_exception(exc)
            return
        if self._reader.complete:
            self._answer.set_result(self._reader)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class PageFetcher:
    """Fetches /metrics pages, keeping idle connections for reuse; one thread at a time.

    ``fetch(url)`` blocks until one page is read (on the fetcher's loop); ``run(coroutine)``
    runs a coroutine there that awaits ``page(url)`` for many URLs at once (the collector's
    cycle). One connection serves one request at a time: a scrape takes an idle connection
    for the target's (scheme, host, port) or opens one, and gives it back only after reading
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
        self._idle: dict[tuple[str, str, int], list[_Link]] = {}
        self._loop = asyncio.new_event_loop()

    # -- the loop ------------------------------------------------------------------------

    def run(self, work: Awaitable[_T]) -> _T:
        """``work`` run to its end on the fetcher's loop; connections it closed are closed
        before this returns (their sockets do not wait for the next run)."""
        try:
            return self._loop.run_until_complete(work)
        finally:
            self._loop.run_until_complete(asyncio.sleep(0))  # transports' close callbacks

    def fetch(self, url: str) -> str:
        """The body of ``url`` as text; ``SourceError`` (one line naming the URL, its password
        masked) on any failure."""
        return self.run(self.page(url))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        idle, self._idle = self._idle, {}
        for links in idle.values():
            for link in links:
                link.close()
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()

    def __enter__(self) -> "PageFetcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections ---------------------------------------------------------------------

    def _take(self, key: tuple[str, str, int]) -> _Link | None:
        idle = self._idle.get(key)
        while idle:
            link = idle.pop()
            if not link.closed and _still_open(link):
                return link
            link.close()
        return None

    def _give_back(self, key: tuple[str, str, int], link: _Link) -> None:
        self._idle.setdefault(key, []).append(link)

    async def _connect(self, scheme: str, host: str, port: int) -> _Link:
        """A new connection to the first of ``host``'s addresses that accepts; the last
        failure when none does."""
        loop = asyncio.get_running_loop()
        tls = (self._ssl_context or ssl.create_default_context()) if scheme == "https" else None
        failure: OSError | None = None
        for address in await _addresses(host, port):
            try:
                _, link = await loop.create_connection(_Link, address, port, ssl=tls,
                                                       server_hostname=host if tls else None)
                return link
            except ssl.SSLError:
                raise  # the server answered: another address would not change its certificate
            except OSError as exc:
                failure = exc
        assert failure is not None  # _addresses gives one address at least
        raise failure

    # -- fetching ------------------------------------------------------------------------

    async def page(self, url: str) -> str:
        """``fetch`` as a coroutine, on the fetcher's loop."""
        shown = mask_userinfo(url)
        try:
            return await self._page(url)
        except SourceError as exc:
            if shown == url:
                raise
            raise type(exc)(str(exc).replace(url, shown)) from None

    async def _page(self, url: str) -> str:
        key, path, headers = self._request_for(url)
        request = get_request(path, headers)
        try:
            async with asyncio.timeout(self.timeout_s):
                reader = await self._exchange(url, key, request)
        except Exception as exc:
            raise _source_error(url, key[1], exc, self.timeout_s, self.max_bytes) from None
        return self._page_of(url, reader)

    async def _exchange(self, url: str, key: tuple[str, str, int], request: bytes) -> ResponseReader:
        link = self._take(key) if self.keep_alive else None
        if link is not None:
            try:
                return await self._on(link, url, key, request)
            except ClosedBeforeAnswer:
                pass  # the server closed it while idle: one retry on a fresh connection
        link = await self._connect(*key)
        return await self._on(link, url, key, request)

    async def _on(self, link: _Link, url: str, key: tuple[str, str, int], request: bytes) -> ResponseReader:
        reader = ResponseReader(self.max_bytes, lambda head: self._check_head(url, head))
        try:
            await link.exchange(request, reader)
        finally:
            if self.keep_alive and reader.reusable and not link.closed:
                self._give_back(key, link)
            else:
                link.close()
        return reader

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

    def _check_head(self, url: str, head: Head) -> None:
        """Give up before the body on a status, a type or a length that will not be read."""
        if head.status != 200:
            raise UnreachableError(f"{url}: HTTP {head.status} {_one_line(head.reason)}")
        content_type = head.headers.get("content-type", "").lower()
        if content_type.startswith(("text/html", "application/xhtml")):
            raise SourceError(f"{url}: HTML page (Content-Type {content_type}), not the Prometheus text format")
        length = head.headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > self.max_bytes:
            raise SourceError(f"{url}: page of {int(length)} bytes is over the {self.max_bytes}-byte limit")

    def _page_of(self, url: str, reader: ResponseReader) -> str:
        data = reader.body
        assert reader.head is not None and data is not None  # a complete response has both
        encoding = reader.head.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            data = gunzip_page(data, url, self.max_bytes)
        elif encoding != "identity":
            raise SourceError(f"{url}: page in Content-Encoding {encoding!r}, which specdec does not decode")
        return decode_page(data, url, self.max_bytes)


async def _addresses(host: str, port: int) -> list[str]:
    """``host``'s addresses; an IP literal is its own (no lookup, which asyncio would hand to
    a thread)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))  # an IP address's text (AF_INET, AF_INET6)


def _source_error(url: str, host: str, exc: BaseException, timeout_s: float, max_bytes: int) -> SourceError:
    """The one-line ``SourceError`` naming ``url`` for a failed exchange."""
    if isinstance(exc, SourceError):
        return exc
    if isinstance(exc, TimeoutError):
        return UnreachableError(f"{url}: timed out after {timeout_s:g} s")
    if isinstance(exc, ConnectionRefusedError):
        return UnreachableError(f"{url}: connection refused")
    if isinstance(exc, socket.gaierror):
        return UnreachableError(f"{url}: cannot resolve host {host!r} ({_one_line(exc.strerror or exc)})")
    if isinstance(exc, ssl.SSLError):
        return SourceError(f"{url}: TLS error ({_one_line(exc)})")
    if isinstance(exc, (ClosedBeforeAnswer, ConnectionResetError, BrokenPipeError)):
        return UnreachableError(f"{url}: connection closed by the server")
    if isinstance(exc, BodyTooLarge):
        return SourceError(f"{url}: page over the {max_bytes}-byte limit")
    if isinstance(exc, CutShort):
        return SourceError(f"{url}: response cut short in the {exc.where} after {exc.received} bytes")
    if isinstance(exc, ResponseError):
        return SourceError(f"{url}: bad HTTP response ({_one_line(exc)})")
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return UnreachableError(f"{url}: host unreachable")
        return SourceError(f"{url}: {_one_line(exc.strerror or exc)}")
    raise exc


# What http.client also refused in a request line or Host header: it would split the
# request (CR, LF), end the target (space) or not be ASCII.
_NOT_IN_A_REQUEST = re.compile(r"[^\x21-\x7e]")


def _still_open(link: _Link) -> bool:
    """An idle connection is usable when its socket has nothing to read (no EOF, no stray
    bytes): the loop may not have run since the server closed it.

    poll, not select: a fleet's sockets go past select's 1,024-descriptor limit.
    """
    try:
        poller = select.poll()
        assert link.transport is not None  # an idle link was connected
        poller.register(link.transport.get_extra_info("socket"), select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError, TypeError):
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
    stdin: IO[str] | IO[bytes] | None = None,
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
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source):  # a URL, but not one inspect can read
        raise SourceError(f"{source}: unsupported scheme {source.split(':', 1)[0]!r} (http://, https://, a file or -)")
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
