"""An HTTP/1.1 response read from bytes as they arrive; no I/O here (acceptance.fetch does it).

``ResponseReader`` is fed a connection's bytes (``feed``) and its end (``feed_eof``); once
``complete``, ``head`` holds the status line and headers and ``body`` the body, framed by
Content-Length, the chunked transfer coding or the server's close, at most ``max_bytes``.
Interim (1xx) responses are skipped. The reading is straight-line code over a buffer — a
generator that pauses (``yield``) whenever it needs more bytes — so the framing rules read
top to bottom whatever pieces the bytes come in, one byte at a time included.

Why not http.client: its reads loop inside readline/read, out of reach of a deadline, it
needs a thread per connection, and its buffered reader and header parsing (email.parser)
cost about 0.25 ms a scrape, a fifth of the collector's CPU at 1,000 targets
(benchmarks/collector_fleet.py). What this does not do: follow redirects (a 3xx is an
answer like any other status), pipeline, or send a request body.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

_MAX_HEAD_BYTES = 64 * 1024  # status line and headers together
_MAX_LINE_BYTES = 4096  # a chunk-size line (with its extensions) or a trailer line

# A reading step: pauses for more bytes; sent True when some came, False at the end.
_Steps = Generator[None, bool, bytes]


class ResponseError(Exception):
    """A response that is not HTTP/1.x as the standard writes it (the message says where)."""


class CutShort(Exception):
    """The server closed the connection inside a response, after ``received`` body bytes."""

    def __init__(self, received: int, where: str = "body"):
        super().__init__(f"closed in the {where} after {received} bytes")
        self.received = received
        self.where = where


class ClosedBeforeAnswer(Exception):
    """The server closed (or reset) the connection before the first byte of a response."""


class BodyTooLarge(Exception):
    """The body passed ``max_bytes``; reading stopped there."""


@dataclass
class Head:
    """A response's status line and headers (names lowercased; a repeated header's values
    joined by ", ", as RFC 9110 allows)."""

    version: str
    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def keeps_connection(self) -> bool:
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


def get_request(path: str, headers: dict[str, str]) -> bytes:
    """The bytes of ``GET path`` with ``headers`` (the caller has checked they are ASCII
    without spaces or line breaks where those would split the request)."""
    lines = [f"GET {path} HTTP/1.1"] + [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


class ResponseReader:
    """One response, read from the bytes fed to it.

    ``check_head(head)`` runs once the headers are in, before any body byte is awaited, and
    may raise to give up on the response (a status or a type the caller will not read).
    ``feed``/``feed_eof`` raise ``ResponseError``, ``CutShort``, ``ClosedBeforeAnswer``,
    ``BodyTooLarge`` or what ``check_head`` raised; after that the reader is spent.
    ``reusable`` says whether the connection may carry another request: the response was
    framed, the server keeps the connection, and no byte came past the response.
    """

    def __init__(self, max_bytes: int, check_head: Callable[[Head], None] | None = None):
        self.max_bytes = max_bytes
        self.check_head = check_head
        self.head: Head | None = None
        self.body: bytes | None = None
        self.answered = False  # any byte of the response received
        self.complete = False
        self.reusable = False
        self._framed = False
        self._spent = False  # complete, or given up with an exception
        self._buffer = bytearray()
        self._steps = self._response()
        next(self._steps)  # runs to the first pause: nothing is in the buffer yet

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.answered = True
        self._buffer += data
        self._resume(True)

    def feed_eof(self) -> None:
        self._resume(False)

    def _resume(self, more: bool) -> None:
        if self._spent:
            self.reusable = False  # bytes or the end past the response (none was pipelined)
            return
        try:
            self._steps.send(more)
        except StopIteration as done:
            self._spent = self.complete = True
            self.body = done.value
            self.reusable = (self._framed and self.head is not None and self.head.keeps_connection
                             and not self._buffer)
        except BaseException:
            self._spent = True
            raise

    # -- the reading, as straight-line steps ---------------------------------------------

    def _response(self) -> _Steps:
        while True:
            raw = yield from self._until_blank_line()
            head = _parse_head(raw)
            if not 100 <= head.status < 200:
                break
        self.head = head
        if self.check_head is not None:
            self.check_head(head)
        return (yield from self._body(head))

    def _more(self) -> Generator[None, bool, bool]:
        """Pause for more bytes: True when some came, False at the connection's end."""
        more = yield
        if not more and not self.answered:
            raise ClosedBeforeAnswer()
        return more

    def _body(self, head: Head) -> _Steps:
        if "chunked" in head.headers.get("transfer-encoding", "").lower():
            self._framed = True
            return (yield from self._chunked())
        if "content-length" in head.headers:
            length = head.headers["content-length"].strip()
            if not length.isdigit():
                raise ResponseError(f"Content-Length {length[:40]!r} is not a byte count")
            if int(length) > self.max_bytes:
                raise BodyTooLarge()
            self._framed = True
            return (yield from self._exactly(int(length)))
        return (yield from self._until_close())

    def _until_blank_line(self) -> _Steps:
        start = 0
        while True:
            end = self._buffer.find(b"\n\r\n", start)
            # LF-only line ends, as http.client allows; searched only up to a CRLF end (a page
            # has no blank line, and the first bytes usually hold the whole body)
            bare = self._buffer.find(b"\n\n", start, end + 2 if end >= 0 else len(self._buffer))
            found = [(e, n) for e, n in ((end, 3), (bare, 2)) if e >= 0]
            cut, skip = min(found) if found else (len(self._buffer), 0)
            if cut > _MAX_HEAD_BYTES:
                raise ResponseError(f"status line and headers over {_MAX_HEAD_BYTES // 1024} KiB")
            if found:
                raw = bytes(self._buffer[:cut])
                del self._buffer[:cut + skip]
                return raw
            start = max(0, len(self._buffer) - 2)
            if not (yield from self._more()):
                raise CutShort(len(self._buffer), "headers")

    def _line(self, what: str) -> _Steps:
        while (end := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > _MAX_LINE_BYTES:
                raise ResponseError(f"{what} over {_MAX_LINE_BYTES} bytes")
            if not (yield from self._more()):
                raise CutShort(len(self._buffer), what)
        line = bytes(self._buffer[:end]).rstrip(b"\r")
        del self._buffer[:end + 1]
        return line

    def _exactly(self, n: int) -> _Steps:
        while len(self._buffer) < n:
            if not (yield from self._more()):
                raise CutShort(len(self._buffer))
        body = bytes(memoryview(self._buffer)[:n])  # one copy (a bytearray slice would be two)
        del self._buffer[:n]
        return body

    def _until_close(self) -> _Steps:
        while True:
            if len(self._buffer) > self.max_bytes:  # the bytes that came with the head count too
                raise BodyTooLarge()
            if not (yield from self._more()):
                break
        body = bytes(self._buffer)
        self._buffer.clear()
        return body

    def _chunked(self) -> _Steps:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = yield from self._line("chunk-size line")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ResponseError(f"chunk-size line {line[:40]!r} is not a hexadecimal size") from None
            if size < 0:
                raise ResponseError(f"chunk-size line {line[:40]!r} is not a hexadecimal size")
            if size == 0:
                while (yield from self._line("trailer line")):
                    pass  # trailers carry nothing specdec reads
                return b"".join(chunks)
            total += size
            if total > self.max_bytes:
                raise BodyTooLarge()
            chunks.append((yield from self._exactly(size)))
            if (yield from self._line("chunk end")):
                raise ResponseError("chunk data longer than its size line says")


def _parse_head(raw: bytes) -> Head:
    lines = raw.decode("latin-1").split("\n")
    status_line = lines[0].rstrip("\r")
    version, _, rest = status_line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise ResponseError(f"status line {status_line[:80]!r}")
    headers: dict[str, str] = {}
    name = None
    for line in lines[1:]:
        line = line.rstrip("\r")
        if line[:1] in (" ", "\t") and name is not None:  # obsolete line folding
            headers[name] += " " + line.strip()
            continue
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise ResponseError(f"header line {line[:80]!r}")
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return Head(version, int(code), reason.strip(), headers)
