"""Acceptance counts from vLLM's ``SpecDecoding metrics:`` log lines.

vLLM 0.33.0 (vllm/v1/spec_decode/metrics.py, ``SpecDecodingLogging.log``) logs, once per
stats interval (``VLLM_LOG_STATS_INTERVAL``, 10 s by default, only while not idle) and
right after the engine's ``Engine 000: Avg prompt throughput: ...`` line::

    SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s,
    Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens,
    Per-position acceptance rate: %.3f, %.3f, ..., Avg Draft acceptance rate: %.1f%%

with AL = 1 + A/D, rate_k = A_k/D (float64 quotients, printed with correct rounding of the
binary value: ties go to even), throughputs A/elapsed and T/elapsed, and the draft
acceptance rate A/T·100. Accepted A and drafted T are exact; the drafts D and the A_k are
not printed. vLLM's logger prefixes ``(APIServer pid=7) INFO 11-30 05:21:37 [metrics.py:123]``
(vllm/logger.py: ``%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d]`` with date format
``%m-%d %H:%M:%S``: no year, local time of the server, no sub-seconds), possibly in ANSI
colours and behind ``VLLM_LOGGING_PREFIX``; a JSON formatter writes ``asctime`` with a year.

Recovering D. The candidates are every integer D for which integers A_1 ≥ A_2 ≥ ... ≥ A_γ
exist with 0 ≤ A_k ≤ D, Σ A_k = A, each A_k/D printing as the logged rate, 1 + A/D printing
as the logged AL, and γ·D ≥ T (a draft proposes at most γ tokens; fewer under a dynamic γ
schedule, grammar-invalidated tokens or the end of a sequence, so T = γ·D is not assumed).
Whether A_k exist for a given D is exact: per position the admissible A_k form an integer
range [lo_k, hi_k]; the non-increasing vectors inside those ranges form a lattice whose
smallest member is the suffix maximum of lo and largest the prefix minimum of hi, and every
sum in between is reachable one unit at a time. Below about 1000 drafts the 3-digit rates
usually pin D down; above it several D remain (a spread of up to about 1%/(AL − 1) of D).

The pick among several candidates is the one nearest A/(AL − 1), AL as printed. Every
candidate fits every field, and with a handful of them the data cannot tell them apart
(the golden sample's second line fits D = 1813 and 1814 alike). AL is the one field that
is a function of D alone (A is exact), so A/(AL − 1) is the direct reading of D, and its
rounding error is symmetric: with many candidates (large D) the pick errs either way,
where always taking the smallest or the largest would be biased by up to the whole range.
``T/γ`` is no guide: it is a lower bound, reached only when every draft is γ long, which
dynamic γ, grammar-invalidated tokens and the ends of sequences break (the golden's first
line has T = 1995 for D = 666 at γ = 3). ``drafts_candidates`` and ``drafts_range`` expose
the ambiguity, and ``drafts_estimated`` is always True for these counts. The A_k are, among
those consistent with that D, the ones nearest rate_k·D. When AL prints 1.00 (A/D below
0.005: the 3-digit rates bound D only loosely) or the rounded fields bound D from neither
side, drafts are unknown: counts None (A and T are still reported, exactly).
"""

from __future__ import annotations

import datetime as _dt
import gzip
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

import numpy as np

from .errors import InputError
from .counts import SpecCounts


class LogLinesError(InputError):
    """A log file that cannot be read or holds no SpecDecoding line (one-line message)."""


@dataclass(frozen=True)
class SpecDecodingMessage:
    """The fields of one ``SpecDecoding metrics:`` message, as printed.

    Text fields keep vLLM's rounding (AL to 2 digits, rates to 3, DAR to 1, as a percentage).
    """

    mean_acceptance_length: str
    accepted_throughput: float
    drafted_throughput: float
    accepted_tokens: int
    draft_tokens: int
    per_position_rates: tuple[str, ...]
    draft_acceptance_rate_percent: str

    @property
    def gamma(self) -> int:
        return len(self.per_position_rates)


@dataclass(frozen=True)
class LogInterval:
    """One stats interval of one engine, from one log line.

    time: epoch seconds the line was logged (the interval's end; None when the line has
    no timestamp and no default was given); interval_s: its length, T / drafted throughput
    (None when both throughputs print 0.00); counts: [D, T, A, A_k] with D and A_k
    recovered from the rounded fields (module docstring), None when D is unbounded;
    drafts_candidates: how many D were consistent (1: determined; 0: unknown);
    drafts_range: the smallest and largest of them; accepted_tokens / draft_tokens: A and
    T, exact even when counts is None; engine: "000"... from the ``Engine NNN:`` stats line
    logged just before by the same process ("aggregated" for vLLM's aggregated logger).
    running and generation_tokens, from that stats line when one engine's (the aggregated
    logger sums Running over its engines: not a batch size): the requests running at the
    interval's end (``Running: %d reqs``, the scheduler's count at its last step) and the
    interval's output tokens (``Avg generation throughput`` × interval_s; the first token of
    each request its prefill made included). Little's law makes them a latency
    (acceptance.ingested_window); None where the line before was not this process's stats line.
    """

    time: float | None
    interval_s: float | None
    gamma: int
    counts: SpecCounts | None
    drafts_estimated: bool
    drafts_candidates: int
    accepted_tokens: int = 0
    draft_tokens: int = 0
    drafts_range: tuple[int, int] | None = None
    engine: str | None = None
    line_number: int = 0
    running: int | None = None
    generation_tokens: float | None = None
    process: str | None = None  # vLLM's prefix's "(EngineCore_DP0 pid=123)", or the JSON record's process


@dataclass(frozen=True)
class LogParse:
    """Intervals of a log, and the other lines counted by reason.

    ``lines == len(intervals) + sum(skipped.values())``.
    """

    intervals: list[LogInterval]
    skipped: dict[str, int] = field(default_factory=dict)
    lines: int = 0

    def ambiguous_drafts(self) -> tuple[int, int, float]:
        """(intervals with drafts, those whose rounded fields fit more than one D, the widest
        of their spreads as a share of D): how far the reconstructed drafts may be off."""
        known = [iv for iv in self.intervals if iv.counts is not None]
        spreads = [(hi - lo) / lo for iv in known if iv.drafts_candidates > 1 and iv.drafts_range is not None
                   for lo, hi in (iv.drafts_range,)]
        return len(known), len(spreads), max(spreads, default=0.0)


SKIP_BLANK = "blank line"
SKIP_OTHER = "other line"
SKIP_MALFORMED = "malformed SpecDecoding line"
SKIP_INCONSISTENT = "inconsistent SpecDecoding line"
SKIP_BAD_TIMESTAMP = "bad timestamp"

MARKER = "SpecDecoding metrics:"
# Most drafts scanned for one line: beyond it (AL 1.00 with a tiny rate) drafts are unknown.
MAX_DRAFTS_SCANNED = 10_000_000
_CHUNK = 1 << 16

_MESSAGE = re.compile(
    r"SpecDecoding metrics: "
    r"Mean acceptance length: (?P<al>nan|\d+\.\d{2}), "
    r"Accepted throughput: (?P<atp>\d+\.\d{2}) tokens/s, "
    r"Drafted throughput: (?P<dtp>\d+\.\d{2}) tokens/s, "
    r"Accepted: (?P<a>\d+) tokens, "
    r"Drafted: (?P<t>\d+) tokens, "
    r"Per-position acceptance rate: (?P<rates>(?:nan|\d\.\d{3})(?:, (?:nan|\d\.\d{3}))*), "
    r"Avg Draft acceptance rate: (?P<dar>nan|\d+\.\d)%"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# kubectl --timestamps / docker logs -t put an RFC 3339 time (with a year) first.
_ISO_PREFIX = re.compile(
    r"^(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s"
)
# vLLM's own prefix: "(APIServer pid=7) INFO 11-30 05:21:37 [metrics.py:123] ".
_VLLM_PREFIX = re.compile(
    r"(?:\((?P<process>[^()]*pid=\d+)\)\s+)?"
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
    r"(?P<month>\d{2})-(?P<day>\d{2}) (?P<hms>\d{2}:\d{2}:\d{2})\s+\[[^\]]*\]\s"
)
_STATS_LINE = re.compile(r"(?:Engine (?P<index>\d+)|(?P<n>\d+) Engines Aggregated): Avg prompt throughput")
# vLLM 0.32/0.33 LoggingStatLogger.log: the interval's generation throughput (%.1f) and the
# requests running at the log's time (%d).
_STATS_FIELDS = re.compile(
    r"Avg generation throughput: (?P<gen>\d+\.\d) tokens/s, Running: (?P<running>\d+) reqs")
# A timestamp this far before the previous one means the year turned (logs have no year).
_ROLLOVER = _dt.timedelta(days=180)


def parse_spec_decoding_message(text: str) -> SpecDecodingMessage | None:
    """The fields of the ``SpecDecoding metrics:`` message in ``text``; None if it has none.

    Raises ValueError (one line) when the marker is there but the fields do not match
    vLLM 0.33's format.
    """
    start = text.find(MARKER)
    if start < 0:
        return None
    m = _MESSAGE.match(text, start)
    if m is None:
        raise InputError(f"not vLLM's SpecDecoding format: {text[start:start + 80]!r}")
    return SpecDecodingMessage(
        mean_acceptance_length=m["al"],
        accepted_throughput=float(m["atp"]),
        drafted_throughput=float(m["dtp"]),
        accepted_tokens=int(m["a"]),
        draft_tokens=int(m["t"]),
        per_position_rates=tuple(m["rates"].split(", ")),
        draft_acceptance_rate_percent=m["dar"],
    )


def _rounds_to(values: np.ndarray, text: str, digits: int) -> np.ndarray:
    """values (float64) that print as ``text`` with ``digits`` decimals, like "%.{digits}f".

    Clear cases by comparison with the decimal boundaries; the few within rounding noise of
    a boundary (ties included) by formatting them exactly as vLLM does.
    """
    center = float(text)
    half = 0.5 * 10.0**-digits
    low, high = center - half, center + half
    tolerance = 1e-12 * max(1.0, abs(center))
    inside = (values > low + tolerance) & (values < high - tolerance)
    near = np.flatnonzero((np.abs(values - low) <= tolerance) | (np.abs(values - high) <= tolerance))
    for i in near:
        inside[i] = f"{values[i]:.{digits}f}" == text
    return inside


def _integer_bounds(rate: str, drafts: np.ndarray, lower: bool) -> np.ndarray:
    """Per D, the smallest (lower) or largest integer c in [0, D] with c/D printing as ``rate``.

    The admissible c are contiguous (printing is monotone); the bound is found from the
    decimal boundary and checked exactly where it falls within noise of an integer.
    """
    boundary = (float(rate) + (-0.0005 if lower else 0.0005)) * drafts
    nearest = np.rint(boundary)
    bound = np.ceil(boundary) if lower else np.floor(boundary)
    for i in np.flatnonzero(np.abs(boundary - nearest) < 1e-6):
        c, d = int(nearest[i]), int(drafts[i])
        # The boundary sits on the integer c (up to noise): c is admissible or its
        # neighbour inward is the bound.
        ok = 0 <= c <= d and f"{c / d:.3f}" == rate
        bound[i] = c if ok else (c + 1 if lower else c - 1)
    return np.clip(bound, 0, drafts).astype(np.int64)


def _consistent_chunk(msg: SpecDecodingMessage, drafts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mask of consistent D in ``drafts``, and the per-position bounds lo, hi (n, γ)."""
    a, t, gamma = msg.accepted_tokens, msg.draft_tokens, msg.gamma
    ok = drafts * gamma >= t
    if msg.mean_acceptance_length != "nan":
        ok &= _rounds_to(1.0 + a / drafts.astype(np.float64), msg.mean_acceptance_length, 2)
    lo = np.stack([_integer_bounds(r, drafts, True) for r in msg.per_position_rates], axis=1)
    hi = np.stack([_integer_bounds(r, drafts, False) for r in msg.per_position_rates], axis=1)
    # Non-increasing vectors within [lo, hi]: smallest = suffix max of lo, largest = prefix
    # min of hi; feasible when smallest ≤ largest, and every sum between theirs is reachable.
    smallest = np.maximum.accumulate(lo[:, ::-1], axis=1)[:, ::-1]
    largest = np.minimum.accumulate(hi, axis=1)
    ok &= (smallest <= largest).all(axis=1)
    ok &= (smallest.sum(axis=1) <= a) & (largest.sum(axis=1) >= a)
    return ok, smallest, largest


def _drafts_bounds(msg: SpecDecodingMessage) -> tuple[int, int] | None:
    """A range of D that holds every consistent D (a superset), or None when unbounded."""
    a, t, gamma = msg.accepted_tokens, msg.draft_tokens, msg.gamma
    rates = [float(r) for r in msg.per_position_rates]
    low = max(1, -(-t // gamma), -(-a // gamma))
    highs = []
    if msg.mean_acceptance_length != "nan":
        excess = float(msg.mean_acceptance_length) - 1.0  # ≈ A/D, to ±0.005
        if excess + 0.005 > 0:
            low = max(low, math.floor(a / (excess + 0.005)) - 2)
        if excess - 0.005 > 0:
            highs.append(math.ceil(a / (excess - 0.005)) + 2)
    # Σ_k A_k = A with each A_k/D within 0.0005 of its rate bounds A/D from both sides too.
    total = sum(rates)
    slack = 0.0005 * gamma
    low = max(low, math.floor(a / (total + slack)) - 2)
    if total - slack > 0:
        highs.append(math.ceil(a / (total - slack)) + 2)
    if not highs:
        return None
    return max(1, low), min(highs)


def consistent_drafts(msg: SpecDecodingMessage) -> np.ndarray | None:
    """Every D consistent with the message's rounded fields (sorted int64), None if unbounded.

    Unbounded: the fields bound D from neither side (AL 1.00 and every rate 0.000), or the
    range to scan exceeds MAX_DRAFTS_SCANNED.
    """
    bounds = _drafts_bounds(msg)
    if bounds is None or bounds[1] - bounds[0] + 1 > MAX_DRAFTS_SCANNED:
        return None
    low, high = bounds
    found = []
    for start in range(low, high + 1, _CHUNK):
        drafts = np.arange(start, min(start + _CHUNK, high + 1), dtype=np.int64)
        ok, _, _ = _consistent_chunk(msg, drafts)
        found.append(drafts[ok])
    return np.concatenate(found) if found else np.empty(0, dtype=np.int64)


def _accepted_per_position(msg: SpecDecodingMessage, drafts: int) -> tuple[int, ...]:
    """The A_k nearest rate_k·D, non-increasing, each printing as its rate, summing to A."""
    ok, smallest, largest = _consistent_chunk(msg, np.array([drafts], dtype=np.int64))
    if not ok[0]:
        raise AssertionError(f"D={drafts} is not consistent")  # callers pass a candidate
    smallest, largest = smallest[0], largest[0]
    target = np.rint(np.array([float(r) for r in msg.per_position_rates]) * drafts).astype(np.int64)
    # Clipping a non-increasing vector between two non-increasing bounds keeps it so.
    x = np.clip(target, smallest, largest)
    remaining = msg.accepted_tokens - int(x.sum())
    # Fill toward `largest` from the front (or drain toward `smallest` from the back): each
    # step keeps the vector non-increasing, and the end vectors bracket A, so it succeeds.
    for k in range(msg.gamma) if remaining > 0 else reversed(range(msg.gamma)):
        if remaining > 0:
            room = int(largest[k] - x[k])
            if k > 0:
                room = min(room, int(x[k - 1] - x[k]))
            step = min(room, remaining)
            x[k] += step
            remaining -= step
        elif remaining < 0:
            room = int(x[k] - smallest[k])
            if k < msg.gamma - 1:
                room = min(room, int(x[k] - x[k + 1]))
            step = min(room, -remaining)
            x[k] -= step
            remaining += step
    if remaining:
        raise AssertionError("no A_k sum to A")  # excluded by the feasibility test
    return tuple(int(v) for v in x)


def _direct_drafts_estimate(msg: SpecDecodingMessage) -> float:
    """A/(AL − 1) with AL as printed (module docstring); AL prints above 1.00 here."""
    return msg.accepted_tokens / (float(msg.mean_acceptance_length) - 1.0)


@dataclass(frozen=True)
class RecoveredCounts:
    """Counts recovered from one message: ``counts`` None when D is unbounded."""

    counts: SpecCounts | None
    drafts_candidates: int
    drafts_range: tuple[int, int] | None


def recover_counts(msg: SpecDecodingMessage) -> RecoveredCounts:
    """D (the consistent one nearest A/(AL − 1), module docstring) and the A_k nearest the rates.

    Raises ValueError when no D is consistent (the line contradicts itself) or the draft
    acceptance rate is not A/T.
    """
    a, t = msg.accepted_tokens, msg.draft_tokens
    dar_expected = f"{a / t * 100:.1f}" if t > 0 else "nan"
    if a > t or msg.draft_acceptance_rate_percent != dar_expected:
        raise InputError(f"accepted {a} and drafted {t} do not give the logged draft acceptance rate")
    if msg.mean_acceptance_length == "1.00":
        # docs/REFERENCE.md (Sources and routes): an AL of 1.00 leaves drafts unknown — A/D rounds
        # below 0.005, and the 3-digit rates bound D only loosely at such acceptance.
        return RecoveredCounts(None, 0, None)
    candidates = consistent_drafts(msg)
    if candidates is None:
        return RecoveredCounts(None, 0, None)
    if candidates.size == 0:
        raise InputError("no number of drafts is consistent with the logged fields")
    drafts = int(candidates[np.argmin(np.abs(candidates - _direct_drafts_estimate(msg)))])
    counts = SpecCounts(drafts, t, a, _accepted_per_position(msg, drafts))
    return RecoveredCounts(counts, int(candidates.size), (int(candidates[0]), int(candidates[-1])))


class _Clock:
    """Epoch seconds of the timestamps of one log, carrying the year across New Year."""

    def __init__(self, year: int, tz: _dt.tzinfo):
        self.year = year
        self.tz = tz
        self.last: _dt.datetime | None = None

    def from_month_day(self, month: int, day: int, hms: str) -> float:
        hour, minute, second = (int(x) for x in hms.split(":"))
        when = _dt.datetime(self.year, month, day, hour, minute, second)
        if self.last is not None and when < self.last - _ROLLOVER:
            self.year += 1
            when = when.replace(year=self.year)
        self.last = when
        return when.replace(tzinfo=self.tz).timestamp()

    def from_full(self, when: _dt.datetime) -> float:
        # A timestamp with its year resets the year used for later year-less ones.
        self.year = when.year
        self.last = when.replace(tzinfo=None)
        return (when if when.tzinfo else when.replace(tzinfo=self.tz)).timestamp()


def _iso_time(text: str) -> _dt.datetime:
    text = text.replace(",", ".").replace("Z", "+00:00")
    # fromisoformat takes at most 6 fractional digits (Kubernetes writes 9).
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    return _dt.datetime.fromisoformat(text)


def parse_log_lines(
    lines: Iterable[str],
    *,
    year: int | None = None,
    source: str,
    tz: _dt.tzinfo = _dt.timezone.utc,
    default_time: float | None = None,
) -> LogParse:
    """LogIntervals of the ``SpecDecoding metrics:`` lines; other lines counted by reason.

    year: the year of the first year-less timestamp; a timestamp more than 180 days before
    the previous one moves to the next year. Default: the current year, or the one before
    when the current year would put the log's last line more than a day in the future
    (last December's log read in January). tz: the server's time zone (vLLM logs local
    time; containers usually run UTC). Lines with no timestamp get ``default_time``.
    Raises LogLinesError naming ``source`` when no line is a SpecDecoding line.
    """
    if year is not None:
        if isinstance(year, bool) or not isinstance(year, int) or not 1970 <= year <= 9999:
            raise LogLinesError(f"{source}: year must be an integer from 1970 to 9999, got {year!r}")
        return _parse_log(lines, year, source, tz, default_time)
    lines = list(lines)
    now = _dt.datetime.now(_dt.timezone.utc)
    parsed = _parse_log(lines, now.year, source, tz, default_time)
    times = [i.time for i in parsed.intervals if i.time is not None]
    if times and max(times) > now.timestamp() + 86400:
        parsed = _parse_log(lines, now.year - 1, source, tz, default_time)
    return parsed


# a line's stamp: ("full", its time) or ("month_day", vLLM's prefix match)
_Stamp: TypeAlias = "tuple[Literal['full'], _dt.datetime] | tuple[Literal['month_day'], re.Match[str]]"


def _split_line(line: str) -> tuple[str, str | None, _Stamp | None]:
    """(message, process key, stamp) of one log line; stamp ("full", datetime) or
    ("month_day", vLLM's prefix match) or None. Raises on a malformed JSON record."""
    if line.startswith("{") and (MARKER in line or "Avg prompt throughput" in line):
        # vLLM's JSON formatter: {"asctime": "2025-11-30 05:21:37,123", "message": ...}
        obj = json.loads(line)
        process: str | None = str(obj["process"]) if obj.get("process") is not None else None
        stamp: _Stamp | None = ("full", _iso_time(str(obj["asctime"]))) if "asctime" in obj else None
        return str(obj.get("message", "")), process, stamp
    process, stamp = None, None
    iso = _ISO_PREFIX.match(line)
    if iso:
        try:
            stamp = ("full", _iso_time(iso["iso"]))
        except ValueError:
            stamp = None
    prefix = _VLLM_PREFIX.search(line)
    marker_at = line.find(MARKER)
    # The logger's prefix comes before the message, never inside it.
    if prefix and (marker_at < 0 or prefix.start() < marker_at):
        process = prefix["process"]
        if stamp is None:
            stamp = ("month_day", prefix)
    return line, process, stamp


def _parse_log(
    lines: Iterable[str], year: int, source: str, tz: _dt.tzinfo, default_time: float | None
) -> LogParse:
    clock = _Clock(year, tz)
    intervals: list[LogInterval] = []
    skipped: Counter[str] = Counter()
    # Process key → engine named by its latest "Engine NNN: Avg prompt throughput" line, and
    # that line's (generation throughput, running) until the SpecDecoding line after it.
    engine_of_process: dict[str | None, str] = {}
    load_of_process: dict[str | None, tuple[float, int]] = {}
    n_lines = 0
    for n_lines, raw in enumerate(lines, start=1):
        line = _ANSI.sub("", raw).strip()
        if not line:
            skipped[SKIP_BLANK] += 1
            continue
        try:
            message, process, stamp = _split_line(line)
        except (ValueError, KeyError, TypeError, AttributeError):
            skipped[SKIP_MALFORMED] += 1
            continue
        stats = _STATS_LINE.search(message)
        if stats and MARKER not in message:
            engine_of_process[process] = stats["index"] or "aggregated"
            load = _STATS_FIELDS.search(message, stats.end())
            if load and stats["index"] is not None:
                load_of_process[process] = (float(load["gen"]), int(load["running"]))
            else:
                load_of_process.pop(process, None)
            skipped[SKIP_OTHER] += 1
            continue
        try:
            msg = parse_spec_decoding_message(message)
        except ValueError:
            skipped[SKIP_MALFORMED] += 1
            continue
        if msg is None:
            skipped[SKIP_OTHER] += 1
            continue

        try:
            if stamp is None:
                when = default_time
            elif stamp[0] == "full":
                when = clock.from_full(stamp[1])
            else:
                m = stamp[1]
                when = clock.from_month_day(int(m["month"]), int(m["day"]), m["hms"])
        except (ValueError, OverflowError):  # e.g. 02-29 in a year that has none
            skipped[SKIP_BAD_TIMESTAMP] += 1
            continue
        try:
            recovered = recover_counts(msg)
        except ValueError:
            skipped[SKIP_INCONSISTENT] += 1
            continue

        if msg.drafted_throughput > 0:
            interval_s = msg.draft_tokens / msg.drafted_throughput
        elif msg.accepted_throughput > 0:
            interval_s = msg.accepted_tokens / msg.accepted_throughput
        else:
            interval_s = None
        generation, running = load_of_process.pop(process, (None, None))
        intervals.append(
            LogInterval(
                time=when,
                interval_s=interval_s,
                gamma=msg.gamma,
                counts=recovered.counts,
                drafts_estimated=True,
                drafts_candidates=recovered.drafts_candidates,
                accepted_tokens=msg.accepted_tokens,
                draft_tokens=msg.draft_tokens,
                drafts_range=recovered.drafts_range,
                engine=engine_of_process.get(process),
                line_number=n_lines,
                running=running,
                generation_tokens=None if generation is None or interval_s is None else generation * interval_s,
                process=process,
            )
        )
    if not intervals:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items())) or "empty"
        raise LogLinesError(f"{source}: no SpecDecoding metrics line in {n_lines} lines ({why})")
    return LogParse(intervals=intervals, skipped=dict(sorted(skipped.items())), lines=n_lines)


def read_log_file(
    path: str | Path,
    *,
    year: int | None = None,
    tz: _dt.tzinfo = _dt.timezone.utc,
    default_time: float | None = None,
) -> LogParse:
    """parse_log_lines over a file (``.gz`` read transparently, ``-`` stdin).

    Unreadable → LogLinesError naming the file.
    """
    if str(path) == "-":
        return parse_log_lines(sys.stdin, year=year, source="<stdin>", tz=tz, default_time=default_time)
    try:
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8-sig", errors="replace") as f:  # -sig: a byte order mark is no line
            return parse_log_lines(f, year=year, source=str(path), tz=tz, default_time=default_time)
    except (OSError, EOFError) as e:
        raise LogLinesError(f"{path}: cannot read log file: {getattr(e, 'strerror', None) or e}") from None
