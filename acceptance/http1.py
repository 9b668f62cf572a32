"""One HTTP/1.1 exchange on a socket, every read bounded by one deadline.

``Connection.get`` sends a GET; ``read_head`` reads the status line and headers, and
``read_body`` the body, framed by Content-Length, the chunked transfer coding or the
server's close, at most ``max_bytes``. Every recv is given only the time left before the
deadline, so a server that trickles its status line, headers, chunk-size lines or body one
byte at a time is cut off there: the deadline holds by construction, from the request's
first byte to the response's last.

Why not http.client: its reads loop inside readline/read, out of reach of a deadline (a
watchdog thread had to shut trickled sockets down), and its buffered reader and header
parsing (email.parser) cost about 0.25 ms a scrape, a fifth of the collector's CPU at
1,000 targets (benchmarks/collector_fleet.py). What this does not do: follow redirects (a
3xx is an answer like any other status), pipeline, or send a request body.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

_RECV_BYTES = 256 * 1024
_MAX_HEAD_BYTES = 64 * 1024  # status line and headers together
_MAX_LINE_BYTES = 4096  # a chunk-size line (with its extensions) or a trailer line


class Deadline:
    """A point on the monotonic clock; ``remaining`` raises ``socket.timeout`` once it passed."""

    def __init__(self, timeout_s: float):
        self.end = time.monotonic() + timeout_s

    def remaining(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline")
        return left


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


class Connection:
    """A socket and the bytes read from it past the last response."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()
        self._answered = False  # any byte of the current response received
        self.reusable = False  # set once a response was read whole and the server keeps the connection

    def close(self) -> None:
        self.reusable = False
        try:
            self.sock.close()
        except OSError:
            pass

    def get(self, path: str, headers: dict[str, str], deadline: Deadline) -> None:
        """Send ``GET path`` with ``headers``; ``ClosedBeforeAnswer`` if the server has gone."""
        lines = [f"GET {path} HTTP/1.1"] + [f"{name}: {value}" for name, value in headers.items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
        self.reusable = False
        self._answered = False  # a connection is reused only with nothing left in its buffer
        self.sock.settimeout(deadline.remaining())
        try:
            self.sock.sendall(request)
        except (ConnectionResetError, BrokenPipeError):
            raise ClosedBeforeAnswer() from None

    def read_head(self, deadline: Deadline) -> Head:
        """The response's status line and headers; interim (1xx) responses are skipped."""
        while True:
            raw = self._read_until_blank_line(deadline)
            head = _parse_head(raw)
            if not 100 <= head.status < 200:
                return head

    def read_body(self, head: Head, deadline: Deadline, max_bytes: int) -> bytes:
        """The body of the response ``head`` began, at most ``max_bytes`` (``BodyTooLarge``)."""
        if "chunked" in head.headers.get("transfer-encoding", "").lower():
            body = self._read_chunked(deadline, max_bytes)
            framed = True
        elif "content-length" in head.headers:
            length = head.headers["content-length"].strip()
            if not length.isdigit():
                raise ResponseError(f"Content-Length {length[:40]!r} is not a byte count")
            if int(length) > max_bytes:
                raise BodyTooLarge()
            body = self._read_exactly(int(length), deadline)
            framed = True
        else:
            body = self._read_until_close(deadline, max_bytes)
            framed = False
        # Bytes past the response (no request was pipelined) mean a confused server.
        self.reusable = framed and head.keeps_connection and not self._buffer
        return body

    # -- reading ---------------------------------------------------------------------------

    def _fill(self, deadline: Deadline) -> bool:
        """One recv into the buffer, given the time left; False at the server's close."""
        self.sock.settimeout(deadline.remaining())
        try:
            data = self.sock.recv(_RECV_BYTES)
        except ConnectionResetError:
            if not self._answered:
                raise ClosedBeforeAnswer() from None
            raise
        if not data:
            if not self._answered:
                raise ClosedBeforeAnswer()
            return False
        self._answered = True
        self._buffer += data
        return True

    def _read_until_blank_line(self, deadline: Deadline) -> bytes:
        start = 0
        while True:
            end = self._buffer.find(b"\n\r\n", start)
            # LF-only line ends, as http.client allows; searched only up to a CRLF end (a page
            # has no blank line, and the first recv usually holds the whole body)
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
            if not self._fill(deadline):
                raise CutShort(len(self._buffer), "headers")

    def _read_line(self, deadline: Deadline, what: str) -> bytes:
        while (end := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > _MAX_LINE_BYTES:
                raise ResponseError(f"{what} over {_MAX_LINE_BYTES} bytes")
            if not self._fill(deadline):
                raise CutShort(len(self._buffer), what)
        line = bytes(self._buffer[:end]).rstrip(b"\r")
        del self._buffer[:end + 1]
        return line

    def _read_exactly(self, n: int, deadline: Deadline) -> bytes:
        while len(self._buffer) < n:
            if not self._fill(deadline):
                raise CutShort(len(self._buffer))
        body = bytes(memoryview(self._buffer)[:n])  # one copy (a bytearray slice would be two)
        del self._buffer[:n]
        return body

    def _read_until_close(self, deadline: Deadline, max_bytes: int) -> bytes:
        while self._fill(deadline):
            if len(self._buffer) > max_bytes:
                raise BodyTooLarge()
        body = bytes(self._buffer)
        self._buffer.clear()
        return body

    def _read_chunked(self, deadline: Deadline, max_bytes: int) -> bytes:
        chunks, total = [], 0
        while True:
            line = self._read_line(deadline, "chunk-size line")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ResponseError(f"chunk-size line {line[:40]!r} is not a hexadecimal size") from None
            if size < 0:
                raise ResponseError(f"chunk-size line {line[:40]!r} is not a hexadecimal size")
            if size == 0:
                while self._read_line(deadline, "trailer line"):
                    pass  # trailers carry nothing specdec reads
                return b"".join(chunks)
            total += size
            if total > max_bytes:
                raise BodyTooLarge()
            chunks.append(self._read_exactly(size, deadline))
            if self._read_line(deadline, "chunk end"):
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
