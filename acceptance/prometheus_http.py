"""One query to a Prometheus server's HTTP API, under one deadline and within bounds.

A query is one POST to ``/api/v1/query`` or ``/api/v1/query_range`` on a connection of its
own, made with aiohttp on an event loop of the query's own (on a thread of its own where
the caller's thread already runs one, as a notebook's does). What a hostile or broken
server cannot do:

* hold a query past its deadline: ``timeout_s`` ([source] timeout) runs from the connect to
  the last byte, the exchange under ``asyncio.timeout`` (a server that answers a byte a
  second under a huge Content-Length is cut off at the deadline, not at the end of its body);
* make specdec buffer more than ``MAX_RESPONSE_BYTES`` of body (a Content-Length over it is
  refused before a body byte is read, a body without one stops being read past it);
* make specdec do per-series work on more than ``max_series`` series ([source] max_series):
  the series of an answer are counted in its bytes (every series of a vector or matrix has
  one ``"metric": {`` key, which no string in JSON can hold unescaped) before it is parsed;
* hand specdec two values for one series at one time: a sample repeated with the same value
  is merged (``merged`` counts them, for a note), a conflicting one is refused.

Every failure is a ``PrometheusError`` whose message is one line naming the server's URL
(its password masked) and the route's selector. The bearer token is never put in a message
or a repr; credentials in the URL are refused (they would be sent to no one: use
``bearer_token_env``). No redirect is followed (a token must not go to another origin). No
proxy is used: the server is reached directly, as the /metrics scrapes reach the engines.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import ssl
import urllib.parse
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NotRequired, TypeAlias, TypedDict, TypeVar, cast, overload

import aiohttp
import numpy as np
from yarl import URL

from .errors import InputError
from .fetch import (BodyTooLarge, SourceError, UnreachableError, _one_line, client_session, parser_said,
                    read_bounded, retry_after_s)
from .target_access import Credential, TargetAccess, shown_url

from .limits import DEFAULT_MAX_SERIES
from .limits import PROMETHEUS_TIMEOUT_S as DEFAULT_TIMEOUT_S

MAX_RESPONSE_BYTES = 64 << 20
_USER_AGENT = "specdec-prometheus/0.1"
_SERIES_KEY = re.compile(rb'"metric"\s*:\s*\{')


class PrometheusError(SourceError):
    """Prometheus could not be read; the message is one line naming the server URL."""


class PrometheusUnreachable(PrometheusError, UnreachableError):
    """Prometheus gave no answer: not reached, timed out, or an HTTP error (exit status 3)."""


@dataclass(frozen=True)
class _Response:
    """A complete answer: status, reason, where a redirect points, the body."""

    status: int
    reason: str
    location: str | None
    body: bytes


def count_series(body: bytes, limit: int) -> int:
    """The series of a vector or matrix answer, counted up to ``limit`` + 1 (then it stops)."""
    n = 0
    for _ in _SERIES_KEY.finditer(body):
        n += 1
        if n > limit:
            break
    return n


_T = TypeVar("_T")
Labels: TypeAlias = dict[str, str]  # a series' label set, as Prometheus answers it


class _Series(TypedDict, total=False):
    """One series of an answer's data.result, as Prometheus' HTTP API writes it."""

    metric: Labels
    value: list[float | str]  # [time, "value"] of a vector
    values: list[list[float | str]]  # [[time, "value"], ...] of a matrix


class _Answer(TypedDict):
    """An answer's data: ``result`` a list of series (_request checks that much)."""

    resultType: NotRequired[object]
    result: list[_Series]


@overload
def _positive(value: object, what: str) -> float: ...
@overload
def _positive(value: object, what: str, kind: type[int]) -> int: ...


def _positive(value: object, what: str, kind: tuple[type[int], type[float]] | type[int] = (int, float)) -> float:
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        raise InputError(f"{what} must be a positive number, got {value!r}")
    return value


class PrometheusClient:
    """query / query_range against ``settings.url`` + /api/v1 (POST forms), each under one
    deadline. ``settings``: anything with ``url`` and ``bearer_token_env`` (and optionally
    ``timeout_s`` and ``max_series``: [source] timeout and max_series); ``timeout_s`` and
    ``max_series`` given here win. ``selector``: the route's, named in every error."""

    def __init__(self, settings: object, *, timeout_s: float | None = None, max_series: int | None = None,
                 selector: str | None = None):
        url = getattr(settings, "url", None)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise PrometheusError(f"prometheus url must be an http(s) URL, got {url!r}")
        self.url = url.rstrip("/")
        self.shown_url = shown_url(self.url)  # what messages print
        self.timeout_s = float(_positive(timeout_s if timeout_s is not None else
                                         getattr(settings, "timeout_s", DEFAULT_TIMEOUT_S), "timeout_s"))
        self.max_series = _positive(max_series if max_series is not None else
                                    getattr(settings, "max_series", DEFAULT_MAX_SERIES), "max_series", int)
        self.selector = selector
        env = getattr(settings, "bearer_token_env", None)
        self._token: str | None = None
        if env:
            token = os.environ.get(env)
            if not token:
                raise PrometheusError(
                    f"prometheus {self.shown_url}: bearer_token_env names {env!r}, which is not set in the environment")
            self._token = token.strip()
        self.queries = 0  # how many requests this client made (benchmarks report it)
        self.merged = 0  # samples repeated with the same value (one series, one time), counted once
        self.warnings: dict[str, int] = {}  # the server's warnings (a partial answer), each with how often

    def __repr__(self) -> str:  # never shows the token
        return f"PrometheusClient({self.shown_url!r}, token={'set' if self._token else 'none'})"

    def _scrub(self, text: str) -> str:
        """The text with the URL as shown (its password and credential-named query values
        masked) and the token masked, in any case."""
        credential = Credential.bearer(self._token) if self._token else None
        return TargetAccess(self.url, credential).scrub(text)

    def fail(self, what: str, kind: type[PrometheusError] = PrometheusError) -> PrometheusError:
        """A one-line error naming the server and the route's selector."""
        about = f", selector {self.selector}" if self.selector else ""
        return kind(self._scrub(_one_line(f"prometheus {self.url}{about}: {what}")))

    # -- one exchange ----------------------------------------------------------------------

    def _request(self, endpoint: str, params: dict[str, str]) -> _Answer:
        """data of the answer to ``params`` POSTed to /api/v1/``endpoint``."""
        self.queries += 1
        path = f"/api/v1/{endpoint}"
        answer = self._exchange(path, urllib.parse.urlencode(params).encode())
        raw = answer.body
        if 300 <= answer.status < 400:
            where = shown_url(answer.location or "?")
            raise self.fail(f"{path} redirects to {where}: redirects are not followed (the token must not go "
                            f"elsewhere); set [source] url to the final address")
        if answer.status != 200:
            raise self._status_error(path, answer.status, answer.reason, raw)
        found = count_series(raw, self.max_series)
        if found > self.max_series:
            raise self.fail(f"{path} answered more than {self.max_series} series ([source] max_series), refused "
                            f"unread; narrow the selector or raise max_series")
        try:
            doc = json.loads(raw)
        except ValueError:
            raise self.fail(f"{path} did not answer JSON (is this a Prometheus server?)") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            err = doc.get("error", "no error text") if isinstance(doc, dict) else "not an object"
            etype = doc.get("errorType", "error") if isinstance(doc, dict) else "error"
            raise self.fail(f"{path} failed: {etype}: {err}")
        self._keep_warnings(doc.get("warnings"), doc.get("infos"))
        data = doc.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise self.fail(f"{path} answered without data.result")
        if len(data["result"]) > self.max_series:  # counted again: a key can be written with escapes
            raise self.fail(f"{path} answered {len(data['result'])} series, more than {self.max_series} "
                            f"([source] max_series); narrow the selector or raise max_series")
        if not all(isinstance(r, dict) and isinstance(r.get("metric", {}), dict) for r in data["result"]):
            raise self.fail(f"{path} answered a result that is not a list of series objects")
        return cast(_Answer, data)  # as checked just above; the series' insides as the API writes them

    def _status_error(self, path: str, status: int, reason: str, raw: bytes) -> PrometheusError:
        detail, etype = "", None
        try:  # Prometheus answers errors with {"status": "error", "errorType", "error"}
            doc = json.loads(raw[:65536] or b"{}")
            if isinstance(doc, dict) and doc.get("error"):
                etype = doc.get("errorType", "error")
                detail = f": {etype}: {doc['error']}"
        except ValueError:
            pass
        if status == 400 and etype == "bad_data":  # the server answered: the query is wrong, and
            # every query is built on the route's selector, the one part the user writes
            return self.fail(f"HTTP 400 from {path}{detail}; check the route's selector "
                             f"(PromQL label matchers such as {{job=\"vllm\"}})")
        return self.fail(f"HTTP {status} {reason} from {path}{detail}", PrometheusUnreachable)

    def _exchange(self, path: str, body: bytes) -> _Response:
        """The complete response to one POST, read before the deadline."""
        parts = urllib.parse.urlsplit(self.url)
        if parts.username is not None or parts.password is not None:
            raise self.fail("credentials in the URL are not sent; put the token in the variable "
                            "[source] bearer_token_env names")
        try:
            return _run_blocking(self._post(path, body))
        except TimeoutError:
            raise self.fail(f"no complete answer to {path} within the {self.timeout_s:g} s deadline "
                            f"([source] timeout), connect to last byte", PrometheusUnreachable) from None
        except BodyTooLarge:
            raise self.fail(f"{path} answered more than {MAX_RESPONSE_BYTES >> 20} MiB") from None
        except aiohttp.ServerDisconnectedError as e:
            where = "before answering" if isinstance(e.message, str) else "inside the head of its answer to"
            raise self.fail(f"the server closed the connection {where} {path}", PrometheusUnreachable) from None
        except aiohttp.ClientPayloadError as e:
            raise self.fail(f"the server closed the connection inside its answer to {path} ({parser_said(e)})",
                            PrometheusUnreachable) from None
        except aiohttp.ClientResponseError as e:  # the parser's refusals (a bad status line, header)
            raise self.fail(f"bad HTTP response to {path} ({parser_said(e)})") from None
        except (aiohttp.ClientSSLError, ssl.SSLError) as e:
            raise self.fail(f"TLS error ({e.__cause__ or e})", PrometheusUnreachable) from None
        except aiohttp.ClientConnectorDNSError as e:
            raise self.fail(f"cannot reach the server (cannot resolve {parts.hostname!r}: "
                            f"{e.os_error.strerror or e.os_error})", PrometheusUnreachable) from None
        except aiohttp.ClientConnectorError as e:
            raise self.fail(f"cannot reach the server ({e.os_error.strerror or type(e.os_error).__name__})",
                            PrometheusUnreachable) from None
        except (aiohttp.ClientError, OSError) as e:
            raise self.fail(f"cannot reach the server ({_one_line(getattr(e, 'strerror', None) or e)})",
                            PrometheusUnreachable) from None

    async def _post(self, path: str, body: bytes) -> _Response:
        """One POST on a connection of its own, the whole exchange under the deadline."""
        headers = {"User-Agent": _USER_AGENT, "Accept": "application/json",
                   "Content-Type": "application/x-www-form-urlencoded"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        async with client_session(aiohttp.TCPConnector(force_close=True), headers) as session:
            async with asyncio.timeout(self.timeout_s):
                deadline = asyncio.get_running_loop().time() + self.timeout_s
                for attempt in (1, 2):  # a 429 or 503 whose Retry-After ends within the deadline: once more after it
                    async with session.post(URL(f"{self.url}{path}"), data=body, allow_redirects=False) as resp:
                        wait = retry_after_s(resp.status, resp.headers.get("Retry-After"))
                        if not (attempt == 1 and wait is not None
                                and asyncio.get_running_loop().time() + wait < deadline):
                            length = resp.headers.get("Content-Length", "").strip()
                            if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
                                raise BodyTooLarge()
                            raw = await read_bounded(resp, MAX_RESPONSE_BYTES)
                            return _Response(resp.status, resp.reason or "", resp.headers.get("Location"), raw)
                    await asyncio.sleep(wait or 0.0)
                raise AssertionError("unreachable: the second attempt returns or raises")

    # -- answers ---------------------------------------------------------------------------

    def query(self, expr: str, at: float, *, finite: bool = True) -> list[tuple[Labels, float]]:
        """An instant vector at ``at``: [(labels, value)], one per label set. ``finite``: a NaN
        or infinite value is refused (a count, a sum, a gauge of running requests is finite;
        only a ratio the caller handles may be NaN)."""
        data = self._request("query", {"query": expr, "time": f"{at:.3f}"})
        if data.get("resultType") != "vector":
            raise self.fail(f"query answered a {data.get('resultType')!r}, expected a vector")
        out: dict[tuple[tuple[str, str], ...], tuple[Labels, float]] = {}
        for r in data["result"]:
            labels, value = r.get("metric", {}), self._number(r.get("value"), 1)
            if finite:
                self._check_finite(labels, np.array([value]), np.array([self._number(r.get("value"), 0)]))
            key = _key(labels)
            if key in out:
                self.same_sample(f"series {labels}", self._number(r["value"], 0), out[key][1], value)
                continue
            out[key] = (labels, value)
        return list(out.values())

    def query_range(self, expr: str, start: float, end: float, step: float
                    ) -> list[tuple[Labels, np.ndarray, np.ndarray]]:
        """A range vector: [(labels, times (n,), values (n,))] for steps start, start+step, ... ≤ end."""
        # nocache=1: VictoriaMetrics would otherwise align start and end to multiples of the
        # step (for its cache) and the blocks would not end where asked; Prometheus ignores it.
        data = self._request("query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                             "step": f"{step:.3f}", "nocache": "1"})
        return self._matrix(data, "query_range")

    def samples(self, selector_with_range: str, at: float) -> list[tuple[Labels, np.ndarray, np.ndarray]]:
        """The raw samples of ``series[range]`` at ``at``: [(labels, times, values)]. A NaN may be
        a staleness marker (VictoriaMetrics returns vmalert's): the caller drops it; ±Inf is refused."""
        return self._matrix(self._request("query", {"query": selector_with_range, "time": f"{at:.3f}"}), "query",
                            stale_markers=True)

    def _matrix(self, data: _Answer, endpoint: str, *, stale_markers: bool = False
                ) -> list[tuple[Labels, np.ndarray, np.ndarray]]:
        """The series of a matrix, one per label set, each with strictly increasing times; a value
        that is not a finite number is refused (but a NaN, with ``stale_markers``)."""
        if data.get("resultType") != "matrix":
            raise self.fail(f"{endpoint} answered a {data.get('resultType')!r}, expected a matrix")
        grouped: dict[tuple[tuple[str, str], ...], tuple[Labels, list[list[float | str]]]] = {}
        for r in data["result"]:
            labels = r.get("metric", {})
            grouped.setdefault(_key(labels), (labels, []))[1].extend(r.get("values", []))
        out = []
        for labels, values in grouped.values():
            times = np.array([self._number(v, 0) for v in values])
            vals = np.array([self._number(v, 1) for v in values])
            self._check_finite(labels, vals[~np.isnan(vals)] if stale_markers else vals, times[~np.isnan(vals)]
                               if stale_markers else times)
            out.append((labels, *self._one_per_time(labels, times, vals)))
        return out

    def _check_finite(self, labels: Labels, values: np.ndarray, times: np.ndarray) -> None:
        """A series whose value is NaN or ±Inf where a count belongs: a one-line error naming the
        server, the series, the value and its time (exit 2), not a count taken as it is."""
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            name = labels.get("__name__", "")
            series = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__") + "}"
            said = "NaN" if np.isnan(values[i]) else ("+Inf" if values[i] > 0 else "-Inf")
            raise self.fail(f"series {series} answered {said} at {times[i]:.3f} where a count belongs "
                            f"(a finite number); check the series on the server")

    def _number(self, pair: list[float | str] | None, index: int) -> float:
        """Element ``index`` of a [time, "value"] pair as a number, or a one-line error naming the server."""
        try:
            if pair is not None:  # None: a series without it, refused below
                return float(pair[index])
        except (TypeError, ValueError, IndexError, KeyError):
            pass
        raise self.fail(f"answered {str(pair)[:60]!r} where a [time, value] pair belongs") from None

    def _one_per_time(self, labels: Labels, times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """times and values in time order with each time once (module docstring: merged when
        the values agree, refused when they do not)."""
        if times.size < 2 or bool(np.all(np.diff(times) > 0)):
            return times, values
        order = np.argsort(times, kind="stable")
        times, values = times[order], values[order]
        keep = np.ones(times.size, dtype=bool)
        for i in np.flatnonzero(np.diff(times) == 0) + 1:
            self.same_sample(f"series {labels}", float(times[i]), float(values[i - 1]), float(values[i]))
            keep[i] = False
        return times[keep], values[keep]

    def same_sample(self, what: str, t: float, old: float, new: float) -> None:
        """A second value for one series at one time: merged when equal, else refused."""
        if old == new or (math.isnan(old) and math.isnan(new)):
            self.merged += 1
            return
        raise self.fail(f"two different values ({old:g} and {new:g}) for {what} at {t:.3f}; an answer holds one "
                        f"sample per series and time, so which one counts is unknown")

    def _keep_warnings(self, *lists: object) -> None:
        """A successful answer's ``warnings`` (a partial response: a store or shard that did not
        answer, a limit hit) and ``infos``, kept for the output's notes, each once with its count."""
        for said in lists:
            if isinstance(said, list):
                for text in said[:100]:
                    line = self._scrub(_one_line(str(text)))[:300]
                    self.warnings[line] = self.warnings.get(line, 0) + 1

    def notes(self) -> list[str]:
        """The output's notes on what the server's answers held besides their data: repeated
        samples merged, and its warnings (an answer that may be partial)."""
        warned = [self._scrub(f"Prometheus {self.url} warned, so its answer may be partial: {text}"
                              + (f" ({n} answers)" if n > 1 else "")) for text, n in self.warnings.items()]
        return self.merged_note() + warned

    def merged_note(self) -> list[str]:
        """The output's note on merged repeated samples (none when there were none)."""
        if not self.merged:
            return []
        return [self._scrub(f"Prometheus {self.url} answered {self.merged} repeated sample(s) for selector "
                            f"{self.selector} (one series, one time, the same value): each was counted once")]


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _run_blocking(work: Coroutine[object, object, _T]) -> _T:
    """``work`` to its end from synchronous code: on a fresh event loop here, or on a thread
    of its own where this thread already runs a loop (a notebook's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


__all__ = ["PrometheusClient", "PrometheusError", "PrometheusUnreachable", "count_series",
           "DEFAULT_TIMEOUT_S", "DEFAULT_MAX_SERIES", "MAX_RESPONSE_BYTES"]
