"""Read a vLLM /metrics page: over HTTP(S), from a file, or from stdin.

Every failure is a ``SourceError`` whose message is one line naming the URL or path:
timeout, connection refused, host not found or unreachable, a status other than 200, a
body over ``max_bytes``, an HTML body instead of the Prometheus text format, bytes that
are not UTF-8.

``PageFetcher`` runs its exchanges on aiohttp (a maintained client: HTTP/1.1 framing,
chunked bodies, TLS and connection pooling are its), on one asyncio event loop of its own,
so a fleet's scrapes proceed together on one thread (``acceptance.collector``): no thread
per target and no lock handed between threads, which at 1,000 targets cost more CPU than
the HTTP itself (benchmarks/collector_fleet.py). Idle connections are kept per host and
reused (keep-alive), so a collector that scrapes a fleet every 15 s does not pay a TCP
handshake per target per cycle where the server keeps connections open; vLLM's server
(uvicorn) closes idle connections after 5 s by default, so against it most scrapes
reconnect (a kept connection the server closed is dropped, or the GET retried once).

What this module adds to aiohttp, as the hostile-target tests pin it:

* one deadline, ``timeout_s``, from the name lookup and connect to the last byte (the
  exchange runs under ``asyncio.timeout``; aiohttp's per-phase timeouts are off): a server
  that trickles its status line, headers, chunk-size lines or body is cut off at it;
* at most ``max_bytes`` of body: a Content-Length over it is refused before the body, an
  unsized or chunked body is read as it comes and reading stops past the limit; a gzip page
  is decompressed here (aiohttp's ``auto_decompress`` is off) with the same bound on its
  decompressed size: no gzip bomb;
* no redirect followed (a 3xx is a status like any other), so a target's credential
  (acceptance.target_access) reaches its own URL only; no proxy; the URL's userinfo never
  sent, and no secret of the target (its password, a credential-named query value, its
  token) in a message.
"""

from __future__ import annotations

import asyncio
import errno
import re
import ssl
import sys
import time
import zlib
from email.utils import parsedate_to_datetime
from collections.abc import Awaitable
from pathlib import Path
from typing import IO, TypeVar
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from .errors import InputError
from .target_access import TargetAccess

from .limits import DEFAULT_MAX_BYTES
from .limits import SCRAPE_TIMEOUT_S as DEFAULT_TIMEOUT_S
_USER_AGENT = "specdec-collector/0.1"
_T = TypeVar("_T")


class SourceError(InputError):
    """A source that could not be read; the message is one line naming the URL or path."""


class UnreachableError(SourceError):
    """A source that gave no page at all: refused, timed out, unresolvable, unreachable, reset,
    or an HTTP status other than 200 (the commands' exit status 3, "nothing answered")."""


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


class BodyTooLarge(Exception):
    """A body went past its bound while it was read (read_bounded)."""


def client_session(connector: aiohttp.BaseConnector, headers: dict[str, str]) -> aiohttp.ClientSession:
    """An aiohttp session as specdec's clients use one: no per-phase timeouts (one deadline for
    the whole exchange is the caller's ``asyncio.timeout``), nothing decompressed or asked
    compressed by aiohttp (gzip is decompressed here, bounded: gunzip_page), no proxy (the
    servers are reached directly), headers bounded to 64 KiB a field."""
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None),
        auto_decompress=False, skip_auto_headers=("Accept-Encoding",), headers=headers, trust_env=False,
        max_field_size=64 * 1024)


async def read_bounded(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body as it comes, BodyTooLarge past ``max_bytes`` (the connection is then dropped,
    not read to its end: a 50 MB page is never buffered whole)."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_any():
        total += len(chunk)
        if total > max_bytes:
            resp.close()
            raise BodyTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


class PageFetcher:
    """Fetches /metrics pages on an aiohttp session, keeping idle connections for reuse; one
    thread at a time.

    ``fetch(url)`` blocks until one page is read (on the fetcher's loop); ``run(coroutine)``
    runs a coroutine there that awaits ``page(url)`` for many URLs at once (the collector's
    cycle). ``keep_alive=False`` opens a connection per fetch (``Connection: close``).
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
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None

    # -- the loop ------------------------------------------------------------------------

    def run(self, work: Awaitable[_T]) -> _T:
        """``work`` run to its end on the fetcher's loop; connections it closed are closed
        before this returns (their sockets do not wait for the next run)."""
        try:
            return self._loop.run_until_complete(work)
        finally:
            self._loop.run_until_complete(asyncio.sleep(0))  # transports' close callbacks

    def fetch(self, target: str | TargetAccess) -> str:
        """The body of ``target`` (a URL, or a URL and its credential) as text; ``SourceError``
        (one line naming the URL, its secrets masked) on any failure."""
        return self.run(self.page(target))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._session is not None:
            self._loop.run_until_complete(self._session.close())
            self._session = None
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()

    def __enter__(self) -> "PageFetcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _session_now(self) -> aiohttp.ClientSession:
        """The session, made on the fetcher's loop the first time (aiohttp wants a running loop)."""
        if self._session is None:
            # limit=0: the collector's semaphore bounds the scrapes in flight; an idle connection
            # never expires by idling alone (aiohttp's default drops it at 15 s, the scrape
            # interval); force_close: Connection: close, a connection per scrape
            connector = (aiohttp.TCPConnector(limit=0, keepalive_timeout=None, ssl=self._ssl) if self.keep_alive
                         else aiohttp.TCPConnector(limit=0, force_close=True, ssl=self._ssl))
            self._session = client_session(connector, {"Accept": "text/plain", "User-Agent": _USER_AGENT})
        return self._session

    # -- fetching ------------------------------------------------------------------------

    async def page(self, target: str | TargetAccess) -> str:
        """``fetch`` as a coroutine, on the fetcher's loop."""
        access = target if isinstance(target, TargetAccess) else TargetAccess(target)
        try:
            return await self._page(access)
        except SourceError as exc:
            message = access.scrub(str(exc))  # the URL as shown, and wherever a library's message put a secret
            if message == str(exc):
                raise
            raise type(exc)(message) from None

    async def _page(self, access: TargetAccess) -> str:
        url = access.url
        target = _target(url)
        try:
            async with asyncio.timeout(self.timeout_s):
                data, encoding = await self._exchange(url, target, access.headers())
        except Exception as exc:
            raise _source_error(url, exc, self.timeout_s, self.max_bytes) from None
        if encoding in ("gzip", "x-gzip"):
            data = gunzip_page(data, url, self.max_bytes)
        elif encoding != "identity":
            raise SourceError(f"{url}: page in Content-Encoding {encoding!r}, which specdec does not decode")
        return decode_page(data, url, self.max_bytes)

    async def _exchange(self, url: str, target: URL, headers: dict[str, str]) -> tuple[bytes, str]:
        """The body (read as it comes, at most max_bytes) and its Content-Encoding; a redirect
        is a status like any other (the credential in ``headers`` goes nowhere else). A kept
        connection the server closed while idle is retried once on a fresh one by aiohttp; a
        429 or 503 whose Retry-After ends within the deadline is asked once more after it."""
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        for attempt in (1, 2):
            async with self._session_now().get(target, allow_redirects=False, headers=headers) as resp:
                wait = retry_after_s(resp.status, resp.headers.get("Retry-After"))
                if attempt == 1 and wait is not None and asyncio.get_running_loop().time() + wait < deadline:
                    resp.release()
                else:
                    self._check_head(url, resp)
                    body = await read_bounded(resp, self.max_bytes)
                    return body, resp.headers.get("Content-Encoding", "identity").strip().lower()
            await asyncio.sleep(wait or 0.0)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _check_head(self, url: str, resp: aiohttp.ClientResponse) -> None:
        """Give up before the body on a status, a type or a length that will not be read."""
        if resp.status != 200:
            raise UnreachableError(f"{url}: HTTP {resp.status} {_one_line(resp.reason or '')}".rstrip())
        content_type = resp.headers.get("Content-Type", "").lower()
        if content_type.startswith(("text/html", "application/xhtml")):
            raise SourceError(f"{url}: HTML page (Content-Type {content_type}), not the Prometheus text format")
        length = resp.headers.get("Content-Length", "").strip()
        if length.isdigit() and int(length) > self.max_bytes:
            raise SourceError(f"{url}: page of {int(length)} bytes is over the {self.max_bytes}-byte limit")


def _target(url: str) -> URL:
    """``url`` without its userinfo (never sent: aiohttp would make it a Basic Authorization
    header), refused when it is not an http(s) URL a request line can carry."""
    try:
        parts = urlsplit(url)
        scheme, host = parts.scheme.lower(), parts.hostname
        parts.port  # noqa: B018 (raises ValueError on a port that is not a number)
    except ValueError as exc:
        raise SourceError(f"{url}: not a valid URL ({_one_line(exc)})") from None
    if scheme not in ("http", "https") or not host:
        raise SourceError(f"{url}: not an http(s) URL")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    netloc = parts.netloc.rpartition("@")[2]
    if _NOT_IN_A_REQUEST.search(path) or _NOT_IN_A_REQUEST.search(netloc):
        raise SourceError(f"{url}: not a valid URL (spaces, control or non-ASCII characters; percent-encode them)")
    return URL(f"{scheme}://{netloc}{path}", encoded=True)


def _source_error(url: str, exc: BaseException, timeout_s: float, max_bytes: int) -> SourceError:
    """The one-line ``SourceError`` naming ``url`` for a failed exchange."""
    if isinstance(exc, SourceError):
        return exc
    if isinstance(exc, TimeoutError):  # asyncio.timeout's
        return UnreachableError(f"{url}: timed out after {timeout_s:g} s")
    if isinstance(exc, BodyTooLarge):
        return SourceError(f"{url}: page over the {max_bytes}-byte limit")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return UnreachableError(f"{url}: cannot resolve host {exc.host!r} ({_one_line(exc.os_error.strerror or exc)})")
    if isinstance(exc, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError, ssl.SSLError)):
        return SourceError(f"{url}: TLS error ({_one_line(_inner(exc))})")
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return UnreachableError(f"{url}: connection refused")
        if exc.os_error.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return UnreachableError(f"{url}: host unreachable")
        return UnreachableError(f"{url}: {_one_line(exc.os_error.strerror or exc.os_error)}")
    if isinstance(exc, aiohttp.ServerDisconnectedError) and not isinstance(exc.message, str):
        return SourceError(f"{url}: response cut short in the headers")  # the message: the head parsed so far
    if isinstance(exc, (aiohttp.ServerDisconnectedError, ConnectionResetError, BrokenPipeError)) or (
            isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)):
        return UnreachableError(f"{url}: connection closed by the server")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return SourceError(f"{url}: response cut short ({parser_said(exc)})")
    if isinstance(exc, aiohttp.ClientResponseError):  # the parser's refusals (a bad status line, header)
        return SourceError(f"{url}: bad HTTP response ({parser_said(exc)})")
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return SourceError(f"{url}: {type(exc).__name__}: {_one_line(exc)}")
    raise exc


def retry_after_s(status: int, value: str | None) -> float | None:
    """Seconds a 429 (too many requests) or 503 (unavailable) answer asks to wait before asking
    again (Retry-After: delay-seconds, or an HTTP date), None for any other answer or a value
    that says neither."""
    if status not in (429, 503) or not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def parser_said(exc: BaseException) -> str:
    """aiohttp's words for a broken response, on one short line (its parser's message, not the
    "400, message:" wrapping or the caret under the offending bytes)."""
    inner = exc.__cause__ or exc
    said = getattr(inner, "message", None)
    text = _one_line(said if isinstance(said, str) else inner).rstrip(" ^")
    return text if len(text) <= 160 else text[:157] + "..."


def _inner(exc: BaseException) -> object:
    """What aiohttp wrapped (its messages name host:port, not the URL)."""
    return exc.__cause__ or getattr(exc, "os_error", None) or exc


# What http.client also refuses in a request line or Host header: it would split the
# request (CR, LF), end the target (space) or not be ASCII.
_NOT_IN_A_REQUEST = re.compile(r"[^\x21-\x7e]")


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


def fetch_page(url: str | TargetAccess, *, timeout_s: float = DEFAULT_TIMEOUT_S,
               max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """One GET of ``url`` (with its credential, when given one) on a fresh connection;
    ``SourceError`` naming the URL as shown on any failure."""
    with PageFetcher(timeout_s=timeout_s, max_bytes=max_bytes, keep_alive=False) as fetcher:
        return fetcher.fetch(url)


def read_source(
    source: str | TargetAccess,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stdin: IO[str] | IO[bytes] | None = None,
) -> str:
    """The text of a /metrics page from an http(s) URL (or a URL and its credential), ``-``
    (stdin) or a file path.

    Missing, unreadable, empty or over-size files (and an empty stdin) are ``SourceError``
    naming the path.
    """
    if isinstance(source, TargetAccess) or source.lower().startswith(("http://", "https://")):
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
