"""Per-request acceptance: vLLM's ``metrics.speculative_decoding`` in response bodies.

This is the only source that splits one shared deployment's acceptance by route: the
engine's counters mix every route it serves, while the gateway knows each request's route.

Turning it on (vLLM 0.33.0, flags checked in vllm/engine/arg_utils.py and
vllm/entrypoints/common/cli_args.py)::

    vllm serve ... --per-request-spec-decode-metrics summary      # or detailed
                   --enable-per-request-metrics                     # optional: timing fields

``--per-request-spec-decode-metrics summary|detailed`` alone fills
``metrics.speculative_decoding``; ``--enable-per-request-metrics`` adds the timing fields
(``mean_itl_ms``, ``tokens_per_second``, ...) and needs stats logging on (no
``--disable-log-stats``). Only single-sequence requests (n == 1) carry them: for n > 1
``metrics`` is null. A streamed response carries them on its final usage chunk only
(``stream_options.include_usage``).

How a gateway should write the lines (one JSON object per response, one per line)::

    {"route": "structured", "time": 1764480097.25,
     "mean_itl_ms": 9.8, "tokens_per_second": 101.2,
     "speculative_decoding": {"acceptance_histogram": [3, 6, 6, 40], "num_spec_tokens": 3,
                              "num_spec_steps": 55, "num_accepted_draft_tokens": 138,
                              "num_draft_tokens": 164, ...}}

i.e. the response's ``metrics`` object plus ``"route"`` (overrides the default route),
``"time"`` (epoch seconds the response finished; else the response's ``created``, else the
caller's default time) and, optionally, ``"temperature"`` (the request's sampling temperature,
which the response does not echo: the gateway knows it; a number ≥ 0, null or absent when not
known: acceptance.request_sampling splits greedy from sampled requests by it). Whole responses (``{"id": ..., "metrics": {...}}``), SSE lines
(``data: {...}``) and the bare ``speculative_decoding`` object are read too.

Semantics (vllm/v1/metrics/stats.py ``RequestSpecDecodeMetrics``, fed by the scheduler once
per verify step of the request): ``acceptance_histogram[j]`` = verify steps that accepted
exactly j draft tokens (length γ + 1, γ = ``num_spec_tokens``, the configured maximum);
``num_draft_tokens`` = proposed draft tokens less grammar-invalidated ones, so under a
dynamic γ schedule, structured output or the end of a sequence it is below steps × γ;
``per_step_accepted`` / ``per_step_drafted`` (``detailed`` only) list every step in order.
One request at its γ becomes ``SpecCounts``:

    drafts D = Σ_j h_j,   accepted A = Σ_j j·h_j,   draft tokens T = num_draft_tokens,
    A_k = Σ_{j≥k} h_j  (steps that accepted at least k: vLLM's per-position counter),
    draft_tokens_per_position_k = #{steps with per_step_drafted ≥ k}  (detailed only).

Requests, not steps, are the independent units (steps of one request share its prompt and
its difficulty), so intervals come from resampling requests: one row per request, block
length 1 in ``estimates.estimate_acceptance``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final, TypeGuard, cast

import numpy as np

from .errors import InputError
from .names import has_control_characters
from .counts import SpecCounts, impossible_counts


class PerRequestError(InputError):
    """A per-request file that cannot be read or holds no usable line (one-line message)."""


@dataclass(frozen=True)
class RequestRecord:
    """One finished request's acceptance at its γ (``counts.gamma == gamma``).

    time: epoch seconds (the line's ``time``, else the response's ``created``, else the
    parse's default); mean_itl_ms / tokens_per_second: vLLM's per-request timing fields,
    None when the server does not report them; decode_tokens: output tokens − 1, the tokens
    its decode steps emitted (``_decode_tokens``), None when the line does not say;
    prompt_tokens: the response's ``usage.prompt_tokens`` (the context its first decode step
    reads), None when the line does not say; temperature: the request's sampling temperature as
    the gateway's line gives it, None when it does not.
    """

    route: str
    time: float
    gamma: int
    counts: SpecCounts
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    request_id: str | None = None
    decode_tokens: int | None = None
    prompt_tokens: int | None = None
    temperature: float | None = None
    # (per_step_drafted, per_step_accepted) in step order (``detailed`` only): acceptance.step_replay
    steps: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    # "<hash of the line's text>#<how many identical lines came before it>": the key of a
    # line without a request id — never its position or the time it was read, so re-reading,
    # reordering or prepending other lines adds nothing, and identical lines stay distinct.
    line_key: str | None = None
    # where ``time`` came from: TIME_FROM_LINE, TIME_FROM_CREATED or TIME_FROM_CLOCK (ingest says)
    time_source: str = "the lines' \"time\""


TIME_FROM_LINE, TIME_FROM_CREATED, TIME_FROM_CLOCK = "the lines' \"time\"", "the responses' \"created\"", \
    "the ingest's clock (the lines name no time)"


@dataclass(frozen=True)
class PerRequestParse:
    """What a file of per-request lines gave: records, and why the other lines were skipped.

    ``lines`` counts every line read; ``lines == len(records) + sum(skipped.values())``.
    """

    records: list[RequestRecord]
    skipped: dict[str, int] = field(default_factory=dict)
    lines: int = 0


# Skip reasons (keys of PerRequestParse.skipped).
SKIP_BLANK = "blank line"
SKIP_NOT_JSON = "not json"
SKIP_TRUNCATED = "truncated json"
SKIP_NOT_RESPONSE = "not a response"
SKIP_NULL_METRICS = "null metrics (n > 1)"
SKIP_STREAM_CHUNK = "stream chunk without metrics"
SKIP_NO_SPEC = "no speculative_decoding"
SKIP_NO_ROUTE = "no route"
SKIP_BAD_ROUTE = "bad route"
SKIP_BAD_TIME = "bad time"
SKIP_BAD_TEMPERATURE = "bad temperature"
SKIP_INCONSISTENT = "inconsistent counts"
SKIP_TOO_LONG = "line over 16 MiB"

# A response line is a few KiB (a detailed one with thousands of steps, some 100 KiB): a
# longer one is not a response, and is skipped without being held in memory.
MAX_LINE_CHARS = 16 * 1024 * 1024

# Keys that make an object a speculative_decoding payload.
_SPEC_KEYS = ("acceptance_histogram", "num_spec_tokens")
# Tolerance for vLLM's float fields against the counts they were computed from.
_FLOAT_TOLERANCE = 1e-9


class _Skip(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# No engine produces more: a request's counts stay far below 10^12 tokens, and its time is
# after 2000-01-01 and not more than a day ahead of this machine's clock.
_MAX_COUNT = 10**12
_EARLIEST_TIME = 946_684_800.0
_FUTURE_SLACK_S = 86_400.0


def _is_count(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= _MAX_COUNT


def _plausible_time(x: object) -> float | None:
    t = _optional_float(x)
    return t if t is not None and _EARLIEST_TIME <= t <= time.time() + _FUTURE_SLACK_S else None


def _count_list(x: object) -> list[int]:
    if not isinstance(x, list) or not all(_is_count(v) for v in x):
        raise _Skip(SKIP_INCONSISTENT)
    return x


def _optional_float(x: object) -> float | None:
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def spec_counts_from_payload(spec: dict[str, object]) -> SpecCounts:
    """SpecCounts of one ``speculative_decoding`` object at its γ (module docstring).

    Raises ValueError (one line) when the object's fields contradict each other: histogram
    length ≠ γ + 1, num_spec_steps ≠ Σ h_j, num_accepted_draft_tokens ≠ Σ j·h_j,
    T > γ·D, A > T, per-step arrays that disagree with the histogram, or
    mean_acceptance_length / draft_acceptance_rate not those of the counts.
    """
    try:
        return _spec_counts(spec)
    except _Skip as e:
        raise InputError(f"speculative_decoding object: {e.reason}") from None


def _spec_counts(spec: dict[str, object]) -> SpecCounts:
    gamma = spec.get("num_spec_tokens")
    if not _is_count(gamma) or gamma < 1:
        raise _Skip(SKIP_INCONSISTENT)
    histogram = _count_list(spec.get("acceptance_histogram"))
    if len(histogram) != gamma + 1:
        raise _Skip(SKIP_INCONSISTENT)
    drafts = sum(histogram)
    accepted = sum(j * h for j, h in enumerate(histogram))
    draft_tokens = spec.get("num_draft_tokens")
    if not _is_count(draft_tokens):
        raise _Skip(SKIP_INCONSISTENT)
    # The redundant fields must agree with the histogram: a line that disagrees with itself
    # was edited or mangled, and its counts cannot be trusted.
    for key, expected in (("num_spec_steps", drafts), ("num_accepted_draft_tokens", accepted)):
        if key in spec and spec[key] != expected:
            raise _Skip(SKIP_INCONSISTENT)
    # Each step drafts at most γ tokens and accepts at most what it drafted.
    if draft_tokens > gamma * drafts or accepted > draft_tokens:
        raise _Skip(SKIP_INCONSISTENT)
    al = _optional_float(spec.get("mean_acceptance_length"))
    if al is not None and abs(al - (1.0 + accepted / drafts if drafts else 1.0)) > _FLOAT_TOLERANCE:
        raise _Skip(SKIP_INCONSISTENT)
    dar = _optional_float(spec.get("draft_acceptance_rate"))
    if dar is not None and abs(dar - (accepted / draft_tokens if draft_tokens else 0.0)) > _FLOAT_TOLERANCE:
        raise _Skip(SKIP_INCONSISTENT)

    # A_k = steps that accepted at least k draft tokens: a suffix sum of the histogram.
    at_least = np.cumsum(histogram[::-1])[::-1]
    accepted_per_position = tuple(int(x) for x in at_least[1:])

    draft_tokens_per_position = None
    per_step_accepted = spec.get("per_step_accepted")
    per_step_drafted = spec.get("per_step_drafted")
    if per_step_accepted is not None or per_step_drafted is not None:
        step_accepted = _count_list(per_step_accepted)
        step_drafted = _count_list(per_step_drafted)
        if (
            len(step_accepted) != drafts
            or len(step_drafted) != drafts
            or sum(step_drafted) != draft_tokens
            or any(a > d or d > gamma for a, d in zip(step_accepted, step_drafted))
            or np.bincount(step_accepted, minlength=gamma + 1).tolist() != histogram
        ):
            raise _Skip(SKIP_INCONSISTENT)
        # Drafts that reached position k: with dynamic γ (or grammar-invalidated tokens)
        # they are fewer than D, and a_k normalised by them reads the drafter, not the
        # schedule.
        reached = np.bincount(step_drafted, minlength=gamma + 1)
        draft_tokens_per_position = tuple(int(x) for x in np.cumsum(reached[::-1])[::-1][1:])

    if drafts == 0 and draft_tokens_per_position is None:
        # no drafted step: nothing reached any position (vLLM lists no steps, null, here)
        draft_tokens_per_position = (0,) * gamma
    counts = SpecCounts(drafts, draft_tokens, accepted, accepted_per_position, draft_tokens_per_position)
    # the one rule every entry point applies; a response's counts are exact (no race slack)
    if impossible_counts(counts, every_draft_proposes=False):
        raise _Skip(SKIP_INCONSISTENT)
    return counts


def _locate(obj: dict[str, object]) -> tuple[dict[str, object], dict[str, object] | None]:
    """(speculative_decoding object, metrics object or None) of one line, or _Skip."""
    if all(k in obj for k in _SPEC_KEYS):  # the bare speculative_decoding object
        return obj, None
    if "speculative_decoding" in obj and "metrics" not in obj:  # a metrics object
        spec = obj["speculative_decoding"]
        if spec is None:
            raise _Skip(SKIP_NO_SPEC)
        if not isinstance(spec, dict):
            raise _Skip(SKIP_NOT_RESPONSE)
        return spec, obj
    if "metrics" in obj:  # a whole response (or stream chunk)
        metrics = obj["metrics"]
        if metrics is None:
            # vLLM nulls the whole metrics object for n > 1; intermediate stream chunks
            # carry none either.
            if str(obj.get("object", "")).endswith(".chunk"):
                raise _Skip(SKIP_STREAM_CHUNK)
            raise _Skip(SKIP_NULL_METRICS)
        if not isinstance(metrics, dict):
            raise _Skip(SKIP_NOT_RESPONSE)
        spec = metrics.get("speculative_decoding")
        if spec is None:
            raise _Skip(SKIP_NO_SPEC)
        if not isinstance(spec, dict):
            raise _Skip(SKIP_NOT_RESPONSE)
        return spec, metrics
    if str(obj.get("object", "")).endswith(".chunk"):
        raise _Skip(SKIP_STREAM_CHUNK)
    raise _Skip(SKIP_NOT_RESPONSE)


def _step_lists(spec: dict[str, object]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(per_step_drafted, per_step_accepted) of a payload _spec_counts has checked, or None."""
    # lists of counts where present: _spec_counts checked them (_count_list)
    drafted = cast("list[int] | None", spec.get("per_step_drafted"))
    accepted = cast("list[int] | None", spec.get("per_step_accepted"))
    if drafted is None or accepted is None:
        # a request without a drafted step has nothing to list (vLLM may leave them out)
        return ((), ()) if not any(cast("list[int] | None", spec.get("acceptance_histogram")) or ()) else None
    return tuple(drafted), tuple(accepted)


def _decode_tokens(obj: dict[str, object], timing: dict[str, object], counts: SpecCounts) -> int | None:
    """Output tokens − 1: from the response's ``usage.completion_tokens`` or the line's own
    ``completion_tokens``; else from vLLM's timing fields, which give it exactly:
    mean_itl_ms = generation_time_ms / (tokens − 1) (vllm/entrypoints/generate/base/serving.py).
    None when neither is there, or when it is fewer than the drafted steps emitted (D + A) by
    more than a length limit can cut: the accepted run of the last step, at most γ."""
    usage = obj.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else obj.get("completion_tokens")
    if _is_count(tokens) and tokens >= 1:
        decode = tokens - 1
    else:
        itl, generation = _optional_float(timing.get("mean_itl_ms")), _optional_float(timing.get("generation_time_ms"))
        if not itl or itl <= 0 or generation is None:
            return None
        steps = generation / itl
        decode = round(steps)
        if abs(steps - decode) > 1e-6 * max(1.0, steps):
            return None
    return decode if decode >= counts.drafts + counts.accepted_tokens - counts.gamma else None


def _prompt_tokens(obj: dict[str, object]) -> int | None:
    """The request's prompt tokens: the response's ``usage.prompt_tokens`` or the line's own
    ``prompt_tokens``; None when neither is a count."""
    usage = obj.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else obj.get("prompt_tokens")
    return tokens if _is_count(tokens) else None


def _temperature(obj: dict[str, object]) -> float | None:
    """The line's ``temperature``: None when absent or null (not known); a finite number ≥ 0
    (vLLM refuses a negative one) else _Skip: a gateway that writes anything else wrote
    something other than the request's temperature."""
    if obj.get("temperature") is None:
        return None
    value = _optional_float(obj["temperature"])
    if value is None or value < 0.0:
        raise _Skip(SKIP_BAD_TEMPERATURE)
    return value


def _record(obj: dict[str, object], default_route: str | None, default_time: float) -> RequestRecord:
    spec, metrics = _locate(obj)
    counts = _spec_counts(spec)

    if "route" in obj:
        route = obj["route"]
        if not isinstance(route, str) or not route.strip() or has_control_characters(route.strip()):
            raise _Skip(SKIP_BAD_ROUTE)
    elif default_route is not None:
        route = default_route
    else:
        raise _Skip(SKIP_NO_ROUTE)

    if "time" in obj:
        when, source = _plausible_time(obj["time"]), TIME_FROM_LINE
        if when is None:
            raise _Skip(SKIP_BAD_TIME)
    elif "created" in obj and _optional_float(obj.get("created")) is not None:
        # An OpenAI response's `created`: when the request arrived, close enough for
        # windows of minutes.
        when, source = _plausible_time(obj["created"]), TIME_FROM_CREATED
        if when is None:
            raise _Skip(SKIP_BAD_TIME)
    else:
        when, source = float(default_time), TIME_FROM_CLOCK

    timing = metrics if metrics is not None else obj
    request_id = obj.get("request_id", obj.get("id"))
    return RequestRecord(
        route=route.strip(),
        time=when,
        gamma=counts.gamma,
        counts=counts,
        mean_itl_ms=_optional_float(timing.get("mean_itl_ms")),
        tokens_per_second=_optional_float(timing.get("tokens_per_second")),
        request_id=request_id if isinstance(request_id, str) else None,
        decode_tokens=_decode_tokens(obj, timing, counts),
        prompt_tokens=_prompt_tokens(obj),
        temperature=_temperature(obj),
        steps=_step_lists(spec),
        time_source=source,
    )


def _parse_line(line: str, default_route: str | None, default_time: float) -> RequestRecord:
    text = line.strip()
    if not text:
        raise _Skip(SKIP_BLANK)
    if text.startswith("data:"):  # a server-sent-events line of a streamed response
        text = text[5:].strip()
    if not text.startswith("{"):
        raise _Skip(SKIP_NOT_JSON)
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise _Skip(SKIP_TRUNCATED) from None
    if not isinstance(obj, dict):
        raise _Skip(SKIP_NOT_RESPONSE)
    return _record(obj, default_route, default_time)


def parse_per_request_lines(
    lines: Iterable[str | _Marker],
    *,
    default_route: str | None,
    default_time: float,
    source: str,
) -> PerRequestParse:
    """Records of the usable lines; every other line is counted under its skip reason.

    Truncated JSON, lines of other loggers, n > 1 responses (null metrics), responses
    without speculative_decoding, lines without a route (and no default) and lines whose
    counts contradict themselves are skipped, never fatal. Raises PerRequestError naming
    ``source`` when no line is usable (the message lists the skip reasons).
    """
    if default_route is not None and (not isinstance(default_route, str) or not default_route.strip()):
        raise PerRequestError(f"{source}: default route must be a non-empty string, got {default_route!r}")
    if not isinstance(default_time, (int, float)) or isinstance(default_time, bool) or not math.isfinite(default_time):
        raise PerRequestError(f"{source}: default time must be finite epoch seconds, got {default_time!r}")
    default_route = default_route.strip() if default_route is not None else None
    records: list[RequestRecord] = []
    skipped: Counter[str] = Counter()
    seen: Counter[str] = Counter()  # lines of the same text so far: identical lines are distinct requests
    n_lines = 0
    for line in lines:
        n_lines += 1
        if line is _TOO_LONG:
            skipped[SKIP_TOO_LONG] += 1
            continue
        try:
            record = _parse_line(line, default_route, float(default_time))
            digest = hashlib.sha1(line.strip().encode("utf-8", "replace")).hexdigest()[:16]
            records.append(dataclasses.replace(record, line_key=f"{digest}#{seen[digest]}"))
            seen[digest] += 1
        except _Skip as skip:
            skipped[skip.reason] += 1
    if not records:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items())) or "empty"
        raise PerRequestError(f"{source}: no usable per-request line in {n_lines} lines ({why}){_json_lines_hint(skipped, n_lines, source)}")
    return PerRequestParse(records=records, skipped=dict(sorted(skipped.items())), lines=n_lines)


def _json_lines_hint(skipped: Counter[str], n_lines: int, source: str) -> str:
    """When most lines are not JSON the file is likely pretty-printed: say what is read."""
    if skipped[SKIP_NOT_JSON] + skipped[SKIP_TRUNCATED] <= n_lines // 2:
        return ""
    return (": the file must hold one JSON object per line (JSON Lines); a pretty-printed one becomes that "
            f"with `jq -c . {source}`")


class _Marker(enum.Enum):
    """What bounded_lines yields in place of a line over MAX_LINE_CHARS (a sentinel, not a str)."""

    TOO_LONG = "too long"


_TOO_LONG: Final = _Marker.TOO_LONG  # what bounded_lines yields for a line over MAX_LINE_CHARS


def bounded_lines(stream: IO[str], max_chars: int = MAX_LINE_CHARS) -> Iterator[str | _Marker]:
    """The stream's lines, each read at most ``max_chars`` at a time: a longer line is
    consumed to its end in pieces and yielded as one marker, never held whole. A UTF-8 byte
    order mark before the first line (an editor's, PowerShell's) is not part of it."""
    first = True
    while True:
        line = stream.readline(max_chars + 1)
        if first and line.startswith("\ufeff"):
            line = line[1:]
        first = False
        if not line:
            return
        if len(line) <= max_chars or line.endswith("\n"):
            yield line
            continue
        while line and not line.endswith("\n"):  # the rest of the long line
            line = stream.readline(max_chars + 1)
        yield _TOO_LONG


def read_per_request_file(
    path: str | Path,
    *,
    default_route: str | None,
    default_time: float,
) -> PerRequestParse:
    """parse_per_request_lines over a file (``-`` reads stdin); unreadable → PerRequestError."""
    if str(path) == "-":
        return parse_per_request_lines(bounded_lines(sys.stdin), default_route=default_route, default_time=default_time,
                                       source="<stdin>")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse_per_request_lines(bounded_lines(f), default_route=default_route, default_time=default_time,
                                           source=str(path))
    except OSError as e:
        raise PerRequestError(f"{path}: cannot read per-request file: {e.strerror or e}") from None
