"""PROTOTYPE, not wired in: ``acceptance.fetch.PageFetcher``'s job done on aiohttp.

Written to answer one question by measurement (benchmarks/http_client_compare.py): could
the collector's hand-written HTTP/1.1 client (acceptance/http1.py + acceptance/fetch.py)
be replaced by a maintained async library, keeping its guarantees and the collector's CPU
target? aiohttp is not a dependency of specdec; this module needs it installed by hand
(``.venv/bin/pip install -e '.[http-bench]'``) and nothing of specdec imports it.

``AiohttpPageFetcher`` has ``PageFetcher``'s interface (``run``, ``fetch``, ``page``,
``close``, a context manager), so ``acceptance.collector.Collector`` can use it in place
of its own fetcher (``collector_on_aiohttp``). The guarantees, as today's client keeps them:

* one deadline, ``timeout_s``, from the connect to the last byte: the whole exchange runs
  under ``asyncio.timeout`` (aiohttp's own per-phase timeouts are off), so a server that
  trickles its status line, headers, chunk-size lines or body is cut off at the deadline;
* at most ``max_bytes`` of body: a Content-Length over it is refused before the body, an
  unsized or chunked body is read as it comes and reading stops past the limit; a gzip
  page is decompressed here (aiohttp's ``auto_decompress`` is off) with the same bound on
  its decompressed size (``acceptance.fetch.gunzip_page``): no gzip bomb;
* no redirect is followed (``allow_redirects=False``): a 3xx is a status like any other;
* the password of a URL's userinfo is never in a message (``mask_userinfo``, then a last
  check that the password does not appear at all); the userinfo is not sent (today's
  client does not send it either: aiohttp would turn it into a Basic Authorization header);
* keep-alive (idle connections kept per host, never expired by idling alone; a connection
  the server closed while idle is dropped, or the GET is retried once by aiohttp) or a new
  connection per scrape (``keep_alive=False``: ``Connection: close``).

The messages are today's, word for word where the failure is the same (the tests match
on "timed out", "refused", "HTTP 404", "limit", "HTML", "not UTF-8", "TLS error",
"connection closed by the server").
"""

from __future__ import annotations

import asyncio
import errno
import ssl
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from .errors import InputError
from .fetch import (
    _NOT_IN_A_REQUEST,
    _USER_AGENT,
    DEFAULT_MAX_BYTES,
    DEFAULT_TIMEOUT_S,
    SourceError,
    UnreachableError,
    _one_line,
    decode_page,
    gunzip_page,
    mask_userinfo,
)

_T = TypeVar("_T")


class _TooLarge(Exception):
    pass


class AiohttpPageFetcher:
    """``acceptance.fetch.PageFetcher`` on an aiohttp ``ClientSession`` (module docstring)."""

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

    # -- the loop, as PageFetcher's ---------------------------------------------------------

    def run(self, work: Awaitable[_T]) -> _T:
        try:
            return self._loop.run_until_complete(work)
        finally:
            self._loop.run_until_complete(asyncio.sleep(0))

    def fetch(self, url: str) -> str:
        return self.run(self.page(url))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._session is not None:
            self._loop.run_until_complete(self._session.close())
            self._session = None
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()

    def __enter__(self) -> "AiohttpPageFetcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _session_now(self) -> aiohttp.ClientSession:
        """The session, made on the fetcher's loop the first time (aiohttp wants a running loop)."""
        if self._session is None:
            # limit=0: the collector's semaphore bounds the scrapes in flight; an idle
            # connection never expires by idling alone (aiohttp's default drops it at 15 s,
            # the scrape interval); force_close: Connection: close, a connection per scrape
            connector = (aiohttp.TCPConnector(limit=0, keepalive_timeout=None, ssl=self._ssl) if self.keep_alive
                         else aiohttp.TCPConnector(limit=0, force_close=True, ssl=self._ssl))
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None),
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),  # as today: no compression asked for
                headers={"Accept": "text/plain", "User-Agent": _USER_AGENT},
                trust_env=False,  # no proxy: the engines are reached directly
                max_field_size=64 * 1024,  # today's bound is on the whole head (64 KiB)
            )
        return self._session

    # -- fetching ------------------------------------------------------------------------

    async def page(self, url: str) -> str:
        shown = mask_userinfo(url)
        try:
            return await self._page(url)
        except SourceError as exc:
            message = str(exc).replace(url, shown)
            password = _password(url)
            if password:
                message = message.replace(password, "***")
            if message == str(exc):
                raise
            raise type(exc)(message) from None

    async def _page(self, url: str) -> str:
        target = _target(url)
        try:
            async with asyncio.timeout(self.timeout_s):
                data, encoding = await self._exchange(url, target)
        except Exception as exc:
            raise _source_error(url, exc, self.timeout_s, self.max_bytes) from None
        if encoding in ("gzip", "x-gzip"):
            data = gunzip_page(data, url, self.max_bytes)
        elif encoding != "identity":
            raise SourceError(f"{url}: page in Content-Encoding {encoding!r}, which specdec does not decode")
        return decode_page(data, url, self.max_bytes)

    async def _exchange(self, url: str, target: URL) -> tuple[bytes, str]:
        async with self._session_now().get(target, allow_redirects=False) as resp:
            self._check_head(url, resp)
            chunks: list[bytes] = []
            total = 0
            async for chunk in resp.content.iter_any():
                total += len(chunk)
                if total > self.max_bytes:
                    resp.close()  # the connection is dropped, not read to its end
                    raise _TooLarge()
                chunks.append(chunk)
            encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
            return b"".join(chunks), encoding

    def _check_head(self, url: str, resp: aiohttp.ClientResponse) -> None:
        if resp.status != 200:
            raise UnreachableError(f"{url}: HTTP {resp.status} {_one_line(resp.reason or '')}".rstrip())
        content_type = resp.headers.get("Content-Type", "").lower()
        if content_type.startswith(("text/html", "application/xhtml")):
            raise SourceError(f"{url}: HTML page (Content-Type {content_type}), not the Prometheus text format")
        length = resp.headers.get("Content-Length", "").strip()
        if length.isdigit() and int(length) > self.max_bytes:
            raise SourceError(f"{url}: page of {int(length)} bytes is over the {self.max_bytes}-byte limit")


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _target(url: str) -> URL:
    """``url`` without its userinfo, checked as today's client checks it."""
    try:
        parts = urlsplit(url)
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError as exc:
        raise SourceError(f"{url}: not a valid URL ({_one_line(exc)})") from None
    if scheme not in ("http", "https") or not host:
        raise SourceError(f"{url}: not an http(s) URL")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    netloc = parts.netloc.rpartition("@")[2]
    if _NOT_IN_A_REQUEST.search(path) or _NOT_IN_A_REQUEST.search(netloc):
        raise SourceError(f"{url}: not a valid URL (spaces, control or non-ASCII characters; percent-encode them)")
    del port  # checked by parts.port above (a port that is not a number raises there)
    return URL(f"{scheme}://{netloc}{path}", encoded=True)


def _source_error(url: str, exc: BaseException, timeout_s: float, max_bytes: int) -> SourceError:
    """The one-line ``SourceError`` naming ``url`` for a failed exchange (today's wording)."""
    if isinstance(exc, SourceError):
        return exc
    if isinstance(exc, TimeoutError):  # asyncio.timeout's, and aiohttp's ServerTimeoutError
        return UnreachableError(f"{url}: timed out after {timeout_s:g} s")
    if isinstance(exc, _TooLarge):
        return SourceError(f"{url}: page over the {max_bytes}-byte limit")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return UnreachableError(f"{url}: cannot resolve host ({_one_line(exc.os_error.strerror or exc)})")
    if isinstance(exc, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError, ssl.SSLError)):
        return SourceError(f"{url}: TLS error ({_one_line(_inner(exc))})")
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return UnreachableError(f"{url}: connection refused")
        return UnreachableError(f"{url}: {_one_line(exc.os_error.strerror or exc.os_error)}")
    if isinstance(exc, (aiohttp.ServerDisconnectedError, ConnectionResetError, BrokenPipeError)) or (
            isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)):
        return UnreachableError(f"{url}: connection closed by the server")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return SourceError(f"{url}: response cut short ({_one_line(_inner(exc))})")
    if isinstance(exc, aiohttp.ClientResponseError):  # the parser's refusals (bad status line, header)
        return SourceError(f"{url}: bad HTTP response ({_one_line(exc.message)})")
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return SourceError(f"{url}: {type(exc).__name__}: {_one_line(exc)}")
    raise exc


def _inner(exc: BaseException) -> Any:
    """What aiohttp wrapped (its messages name host:port, not the URL)."""
    return exc.__cause__ or getattr(exc, "os_error", None) or exc


def collector_on_aiohttp(**kwargs: Any) -> Any:
    """An ``acceptance.collector.Collector`` whose fetcher is an ``AiohttpPageFetcher``
    (same keyword arguments as ``Collector``)."""
    from .collector import Collector

    collector = Collector(**kwargs)
    collector.fetcher.close()
    collector.fetcher = AiohttpPageFetcher(  # type: ignore[assignment]
        timeout_s=kwargs.get("timeout_s", DEFAULT_TIMEOUT_S),
        max_bytes=kwargs.get("max_bytes", DEFAULT_MAX_BYTES),
        keep_alive=kwargs.get("keep_alive", True),
    )
    return collector
