"""Parse a vLLM /metrics page into per-engine snapshots (``inspect``'s report of them is
acceptance.inspect_report's).

A real vLLM page is large (about 1,000 lines, 84 KB: every latency histogram, process and
GC metrics) and the tool needs about 60 of its lines. Parsing the whole page with
prometheus-client costs about 20 ms, which a fleet of a thousand engines scraped every
15 s cannot afford, so the page is first cut down to the lines of the families the tool
uses — found by one regex pass over the page (C speed), never by iterating its lines in
Python — and only those lines go to ``prometheus_client.parser``:

- spec decode (``acceptance.vllm_metrics.SPEC_DECODE_FAMILIES``): ``<family>_total`` and
  ``<family>_created`` samples;
- step shape (``STEP_SHAPE_FAMILIES``): ``vllm:iteration_tokens_total`` _bucket/_sum/_count
  (a histogram whose own name ends in ``_total``), ``vllm:num_requests_running``, and
  ``vllm:inter_token_latency_seconds`` _sum/_count (its buckets are not needed),
  ``vllm:generation_tokens_total`` and ``vllm:time_to_first_token_seconds_count`` (decode
  tokens, beside the decode steps the ITL count gives);
- specdec's vLLM plugin (``acceptance.plugin_series.PLUGIN_FAMILIES``), when the engine
  runs it: ``<family>_total`` samples, read by ``plugin_series.plugin_counts_from_families``
  into ``EngineSnapshot.plugin`` (None for an engine without them). A page without them
  costs what it did: the filter's alternation only grows by four names.

Samples are dispatched on their sample name, so a page with or without ``# TYPE`` lines
parses the same way (HELP/TYPE lines are not kept).

What is an error (``MetricsPageError``, one line naming the source) and what is not:

errors
  - an empty body, an HTML page (the body starts with ``<``), a page with no ``vllm:``
    samples at all: not a vLLM /metrics page;
  - a page cut short: its last line without the newline the text format ends every line
    with (an OpenMetrics page may end at ``# EOF``), or its last family a histogram or
    summary without its ``_count`` and ``_sum`` (or a histogram without its ``+Inf``
    bucket) — a cut at a line boundary between two families cannot be told from a page
    that ends there;
  - a kept line that prometheus-client cannot parse (garbage inside the families used);
  - a counter or a step-shape value (running requests, ITL sum/count, iteration-token
    buckets) that is negative, NaN or infinite; a position label that is not an integer;
    positions that are not exactly 0..γ-1 (e.g. 0 and 2 without 1); the same series twice;
  - an engine that exposes some spec-decode counters but not all four families (a
    per-position series without drafts cannot be normalised).

not errors
  - an engine with vLLM families but no spec-decode families: it does not speculate
    (``counts`` None);
  - no ``_created`` samples (vLLM's multiprocess mode): ``created`` None;
  - missing step-shape families: ``step_shape`` None, or a partial ``StepShape``;
  - garbage lines outside the kept families: they are never read;
  - unknown ``vllm:spec_decode_*`` families (a newer vLLM): ignored.

Bad plugin series (``plugin_series.PluginSeriesError``) are errors too, reported as
``MetricsPageError`` naming the source.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from . import plugin_series
from . import vllm_metrics as vm
from .errors import InputError
from .limits import DEFAULT_MAX_ENGINES
from .counts import RACE_FLOOR_REQUESTS, EngineSnapshot, SpecCounts, StepShape, impossible_counts, race_step_requests


class MetricsPageError(InputError):
    """A /metrics page that cannot be read as vLLM's; the message is one line naming the source."""


# --- which lines are kept -------------------------------------------------------------

_COUNTER_SAMPLE = {f + "_total": f for f in vm.SPEC_DECODE_FAMILIES}
_CREATED_SAMPLE = {f + "_created": f for f in vm.SPEC_DECODE_FAMILIES}
_ITER_BUCKET = vm.ITERATION_TOKENS + "_bucket"
_ITER_SUM = vm.ITERATION_TOKENS + "_sum"
_ITER_COUNT = vm.ITERATION_TOKENS + "_count"
_ITL_SUM = vm.INTER_TOKEN_LATENCY + "_sum"
_ITL_COUNT = vm.INTER_TOKEN_LATENCY + "_count"
_GENERATION = vm.GENERATION_TOKENS + "_total"
_FIRST_TOKENS = vm.TIME_TO_FIRST_TOKEN + "_count"
_REQUEST_LENGTHS = {f"{family}_{part}" for family in (vm.REQUEST_PROMPT_TOKENS, vm.REQUEST_GENERATION_TOKENS)
                    for part in ("sum", "count")}  # StepShape.request_lengths
_ENGINE_COST = {f"{family}_total": family for family in vm.ENGINE_COST_FAMILIES}  # StepShape.engine_cost
# _sum/_count of the iteration histogram mark the engine as exposing the step shape (the +Inf
# bucket is the count); the _sum is kept with vLLM's MFU counters (StepShape.engine_cost).
_STEP_SAMPLES = frozenset({_ITER_BUCKET, _ITER_SUM, _ITER_COUNT, vm.NUM_REQUESTS_RUNNING, _ITL_SUM, _ITL_COUNT,
                           _GENERATION, _FIRST_TOKENS, *_REQUEST_LENGTHS, *_ENGINE_COST})
_PLUGIN_SAMPLES = frozenset(f + "_total" for f in plugin_series.PLUGIN_FAMILIES)
_KEPT_SAMPLES = frozenset(_COUNTER_SAMPLE) | frozenset(_CREATED_SAMPLE) | _STEP_SAMPLES


# One regex pass over the page finds the kept lines: a newline, then a kept sample name
# exactly, then ``{`` or a blank. Its literal head "\nvllm:" lets the regex engine skip
# through the page at C speed (about 60 µs for the 84 KB page, against ~400 µs for a
# Python loop over its 1,000 lines).
_KEPT_NAMES_ALTERNATION = "|".join(re.escape(n) for n in sorted(_KEPT_SAMPLES, key=len, reverse=True))
_KEPT_LINE = re.compile(r"\n((?:" + _KEPT_NAMES_ALTERNATION + r")[{ \t][^\n]*)")
_KEPT_FIRST_LINE = re.compile(r"(?:" + _KEPT_NAMES_ALTERNATION + r")[{ \t][^\n]*")
_LEADING_SPACE_THEN_TAG = re.compile(r"\s*<")
# The plugin's lines have their own pass, run only when the page has a "specdec:" line:
# in one alternation with the vllm: names the regex would lose its literal head and scan
# the page three times slower.
_PLUGIN_NAMES_ALTERNATION = "|".join(
    re.escape(n[len("specdec:"):]) for n in sorted(_PLUGIN_SAMPLES, key=len, reverse=True))
_PLUGIN_LINE = re.compile(r"\n(specdec:(?:" + _PLUGIN_NAMES_ALTERNATION + r")[{ \t][^\n]*)")


def filter_metrics_lines(text: str) -> list[str]:
    """The sample lines of the families the tool uses, in page order.

    A line is kept when its sample name (the text up to ``{`` or a blank) is one of the
    kept sample names exactly; HELP/TYPE lines and every other family are dropped. The
    plugin's lines (if any) follow the vllm: lines.
    """
    vllm_lines, plugin_lines = _filter(text)
    return vllm_lines + plugin_lines


def _filter(text: str) -> tuple[list[str], list[str]]:
    kept = _KEPT_LINE.findall(text)
    first = _KEPT_FIRST_LINE.match(text)  # the page's first line has no newline before it
    if first is not None:
        kept.insert(0, first.group(0))
    # ~30 µs on the 84 KB page, the price of looking for the plugin on a page without it
    plugin = _PLUGIN_LINE.findall("\n" + text) if ("\nspecdec:" in text or text.startswith("specdec:")) else []
    return kept, plugin


# The plugin's lines are plain ``name{labels} value`` counters, ~150 per engine: read by
# a regex (~10x faster than prometheus-client's parser, which is used only to word the
# error for a line the regex does not take).
_PLUGIN_SAMPLE = re.compile(r'([^{ \t]+)\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\}[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*')
_LABEL = r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*'
_LABEL_PAIR = re.compile(_LABEL)
_LABEL_SET = re.compile(f"(?:{_LABEL},)*(?:{_LABEL})?")
_ESCAPE = re.compile(r"\\(.)")


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda e: "\n" if e.group(1) == "n" else e.group(1), value) if "\\" in value else value


class _Sample(NamedTuple):
    """A sample as prometheus-client gives it (name, labels, value); a tuple: the fast path
    makes one per line, and a frozen dataclass costs several times as much to build."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class _Family:
    name: str
    samples: list[_Sample | Sample]


def _plugin_sample(line: str) -> _Sample | None:
    """One plugin sample line, or None when the simple form does not fit."""
    m = _PLUGIN_SAMPLE.fullmatch(line)
    if m is None or not _LABEL_SET.fullmatch(m.group(2)):
        return None
    try:
        value = float(m.group(3))
    except ValueError:
        return None
    return _Sample(m.group(1), {k: _unescape(v) for k, v in _LABEL_PAIR.findall(m.group(2))}, value)


def _plugin_families(lines: list[str], source: str) -> list[_Family]:
    samples: list[_Sample | Sample] = []
    for line in lines:
        sample: _Sample | Sample | None = _plugin_sample(line)
        if sample is None:  # prometheus-client's reading, or the one-line error
            try:
                sample = list(text_string_to_metric_families(line))[0].samples[0]
            except Exception:
                raise MetricsPageError(f"{source}: malformed metrics line {line[:120]!r}") from None
        samples.append(sample)
    return [_Family("specdec:", samples)]


# A sample line of the text format, labels optional: read by regex (about 10x faster than
# prometheus-client); a page with any line this does not take is read by prometheus-client,
# whose reading (and error) then stands.
_SAMPLE = re.compile(r'([^{ \t]+)(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*')


def _plain_sample(line: str) -> _Sample | None:
    """``name{k="v",...} value`` as vLLM writes it (no escapes, no timestamp), by string
    splits; None for anything else (then the regex reads it)."""
    head, _, value = line.rpartition(" ")
    if not head:
        return None
    brace = head.find("{")
    labels: dict[str, str] | None
    if brace < 0:
        name, labels = head.rstrip(), {}
    else:
        if not head.endswith("}"):
            return None
        name = head[:brace]
        labels = _plain_labels(head[brace + 1:-1])
        if labels is None:
            return None
    if not name or " " in name or "\t" in name or "\\" in name:
        return None
    try:
        return _Sample(name, labels, float(value))
    except ValueError:
        return None


@functools.lru_cache(maxsize=16384)
def _plain_labels(body: str) -> dict[str, str] | None:
    """The labels of one label body (``k="v",...`` without the braces), None when it is not
    the plain form. Cached: a fleet's pages repeat the same few hundred label bodies (one
    model name, a few engines, the positions and bucket bounds) on every target and every
    cycle, and reading them was half the parse. The dict is shared: callers only read it."""
    if "\\" in body:
        return None
    if body.endswith(","):
        body = body[:-1]
    labels: dict[str, str] = {}
    if body:
        if not body.endswith('"'):
            return None
        for part in body[:-1].split('",'):
            key, eq, val = part.partition('="')
            key = key.strip(" \t,")
            if not eq or '"' in val or not _LABEL_NAME.fullmatch(key):
                return None
            labels[key] = val
    return labels


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def fast_samples(lines: list[str]) -> list[_Sample] | None:
    """The sample lines of ``lines`` (comments skipped), or None when one does not fit."""
    out = []
    for line in lines:
        if not line or line[0] == "#":
            continue
        plain = _plain_sample(line)
        if plain is not None:
            out.append(plain)
            continue
        m = _SAMPLE.fullmatch(line)
        if m is None:
            return None
        labels = m.group(2)
        if labels and not _LABEL_SET.fullmatch(labels):
            return None
        try:
            value = float(m.group(3))
        except ValueError:
            return None
        out.append(_Sample(m.group(1), {k: _unescape(v) for k, v in _LABEL_PAIR.findall(labels)} if labels else {},
                           value))
    return out


def _has_vllm_samples(text: str) -> bool:
    return text.startswith("vllm:") or "\nvllm:" in text


# --- building snapshots ---------------------------------------------------------------


def _integral(value: float) -> float | int:
    """vLLM's counters are integers; prometheus-client hands back floats like 9134.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@dataclass
class _EngineSeries:
    counters: dict[str, float] = field(default_factory=dict)  # family -> value
    positions: dict[int, float] = field(default_factory=dict)  # position label -> value
    created: float | None = None
    iteration_tokens: dict[float, float] = field(default_factory=dict)
    num_requests_running: float | None = None
    itl_sum: float | None = None
    itl_count: float | None = None
    generation_tokens: float | None = None
    first_tokens: float | None = None
    request_lengths: dict[str, float] = field(default_factory=dict)
    engine_cost: dict[str, float] = field(default_factory=dict)
    has_step_shape: bool = False


def _engine_sort_key(key: tuple[str, str]) -> tuple[str, tuple[int, int, str]]:
    model_name, engine = key
    return (model_name, (0, int(engine), "") if engine.isdigit() else (1, 0, engine))


def parse_metrics_page(text: str, *, source: str = "<page>", max_engines: int = DEFAULT_MAX_ENGINES
                       ) -> list[EngineSnapshot]:
    """Per-engine snapshots (labels ``model_name``, ``engine``) of a vLLM /metrics page.

    For each engine: ``SpecCounts`` with D = ``spec_decode_num_drafts``, T =
    ``…num_draft_tokens``, A = ``…num_accepted_tokens`` and A_k = ``…per_pos{position=k-1}``,
    k = 1..γ, γ = the number of position series; ``counts`` None when the engine exposes no
    spec-decode family. ``created`` = the drafts counter's ``_created`` (None when absent).
    Engines are sorted by (model_name, engine number). A page listing more than
    ``max_engines`` engines is refused before it is parsed (one line naming the source).
    """
    if not text or not text.strip():
        raise MetricsPageError(f"{source}: empty page, not a vLLM /metrics page")
    if _LEADING_SPACE_THEN_TAG.match(text):
        raise MetricsPageError(f"{source}: HTML page, not a Prometheus /metrics page")
    if not _has_vllm_samples(text):
        raise MetricsPageError(f"{source}: no vllm: metrics on the page (is this a vLLM /metrics endpoint?)")
    _check_whole(text, source)

    lines, plugin_lines = _filter(text)
    _check_engine_count(lines, source, max_engines)
    engines: dict[tuple[str, str], _EngineSeries] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    samples: Sequence[_Sample | Sample] | None = fast_samples(lines)
    if samples is None:
        try:
            families = list(text_string_to_metric_families("\n".join(lines)))
        except Exception as exc:  # prometheus-client raises ValueError, and IndexError/TypeError on odd input
            bad = _first_bad_line(lines)
            raise MetricsPageError(f"{source}: malformed metrics line {bad!r}") from exc
        samples = [sample for family in families for sample in family.samples]

    plugin = {}
    if plugin_lines:
        try:
            plugin = plugin_series.plugin_counts_from_families(_plugin_families(plugin_lines, source))
        except plugin_series.PluginSeriesError as exc:
            raise MetricsPageError(f"{source}: {exc}") from None

    for sample in samples:
        name, labels, value = sample.name, sample.labels, sample.value
        identity = (name, tuple(sorted(labels.items())))
        if identity in seen:
            raise MetricsPageError(f"{source}: series {name}{_fmt_labels(labels)} appears twice")
        seen.add(identity)
        key = (labels.get(vm.MODEL_NAME_LABEL, ""), labels.get(vm.ENGINE_LABEL, ""))
        series = engines.get(key)
        if series is None:
            series = engines[key] = _EngineSeries()
        _add_sample(series, name, labels, value, source)

    for key in plugin:  # an engine seen only through the plugin's series
        if key not in engines:
            engines[key] = _EngineSeries()
    if not engines:
        # vLLM families but none of the ones used: list the engines as not speculating.
        for key in _engines_from_any_vllm_line(text):
            engines[key] = _EngineSeries()

    snapshots = [_snapshot(key, engines[key], source) for key in sorted(engines, key=_engine_sort_key)]
    if plugin:
        snapshots = [replace(s, plugin=plugin.get(s.key)) for s in snapshots]
    return snapshots


_LAST_TYPE = re.compile(r"^# TYPE (\S+) (\w+)[ \t]*\r?$", re.MULTILINE)


def _check_whole(text: str, source: str) -> None:
    """A page cut short is refused (module docstring): read as whole, a last line cut in the
    middle of a number (``…_sum{…} 21`` for 21.996) gives a figure that is wrong with no word."""
    if not text.endswith("\n") and text.rstrip("\r").rpartition("\n")[2].strip() != "# EOF":
        tail = text.rpartition("\n")[2]
        raise MetricsPageError(f"{source}: page cut short: its last line ({tail[:60]!r}) has no newline, which the "
                               f"text format ends every line with")
    at = text.rfind("# TYPE ")  # the last family's TYPE line (found from the end: the page may be large)
    last = _LAST_TYPE.match(text, at) if at >= 0 and (at == 0 or text[at - 1] == "\n") else None
    if last is None or last.group(2) not in ("histogram", "summary"):
        return
    name, body = last.group(1), text[last.end():]
    names = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", body, re.MULTILINE))
    needed = {f"{name}_count", f"{name}_sum"}
    if not names or (needed - names) or (last.group(2) == "histogram" and 'le="+Inf"' not in body):
        missing = sorted(needed - names) or ['the le="+Inf" bucket']
        raise MetricsPageError(f"{source}: page cut short: its last family, {last.group(2)} {name}, ends without "
                               f"{' and '.join(missing)}")


def _add_sample(series: _EngineSeries, name: str, labels: Mapping[str, str], value: float, source: str) -> None:
    family = _COUNTER_SAMPLE.get(name)
    if family is not None:
        if not math.isfinite(value) or value < 0:
            raise MetricsPageError(f"{source}: counter {name}{_fmt_labels(labels)} is {value}, not a count")
        if family == vm.ACCEPTED_PER_POSITION:
            raw = labels.get(vm.POSITION_LABEL)
            if raw is None or not raw.isdigit():
                raise MetricsPageError(f"{source}: {name} has position label {raw!r}, not an integer")
            series.positions[int(raw)] = _integral(value)
        else:
            series.counters[family] = _integral(value)
        return
    if name in _CREATED_SAMPLE:
        if _CREATED_SAMPLE[name] == vm.DRAFTS and math.isfinite(value):
            series.created = float(value)
        return
    series.has_step_shape = True
    # Step-shape values feed the store like counters do: a NaN or negative one is a broken
    # page (this target's failure), not something to store.
    if not math.isfinite(value) or value < 0:
        raise MetricsPageError(f"{source}: {name} is {value!r}, not a finite non-negative number")
    if name == _ITER_BUCKET:
        le = labels.get("le")
        try:
            bound = float(le) if le is not None else math.nan  # no bound: refused as NaN is, just below
        except (TypeError, ValueError):
            raise MetricsPageError(f"{source}: {name} has bucket bound le={le!r}, not a number") from None
        if math.isnan(bound):
            raise MetricsPageError(f"{source}: {name} has bucket bound le={le!r}, not a number")
        series.iteration_tokens[bound] = _integral(value)
    elif name == vm.NUM_REQUESTS_RUNNING:
        series.num_requests_running = value
    elif name == _ITL_SUM:
        series.itl_sum = value
    elif name == _ITL_COUNT:
        series.itl_count = _integral(value)
    elif name == _GENERATION:
        series.generation_tokens = _integral(value)
    elif name == _FIRST_TOKENS:
        series.first_tokens = _integral(value)
    elif name in _REQUEST_LENGTHS:
        series.request_lengths[name] = value
    elif name in _ENGINE_COST or name == _ITER_SUM:
        series.engine_cost[_ENGINE_COST.get(name, name)] = value


# A scrape reads the families one after another while the engine may record a step in
# between, so one page's counts can disagree by one step of its batch
# (acceptance.counts.race_step_requests). A page refused for more loses no counts: the next
# scrape's increase carries them.


def _check_engine_count(lines: list[str], source: str, max_engines: int) -> None:
    """Every engine has one drafts counter and one running-requests gauge: count their lines."""
    drafts = f"{vm.DRAFTS}_total{{"
    running = f"{vm.NUM_REQUESTS_RUNNING}{{"
    n = max(sum(1 for line in lines if line.startswith(drafts)), sum(1 for line in lines if line.startswith(running)))
    if n > max_engines:
        raise MetricsPageError(f"{source}: page lists {n:,} engines, over the limit of {max_engines:,} "
                               f"([collect] max_engines)")


def _snapshot(key: tuple[str, str], series: _EngineSeries, source: str) -> EngineSnapshot:
    model_name, engine = key
    counts = None
    if series.counters or series.positions:
        missing = [f for f in vm.SPEC_DECODE_FAMILIES if f != vm.ACCEPTED_PER_POSITION and f not in series.counters]
        if not series.positions:
            missing.append(vm.ACCEPTED_PER_POSITION)
        if missing:
            raise MetricsPageError(
                f"{source}: engine {engine!r} of model {model_name!r} exposes some spec-decode counters "
                f"but lacks {', '.join(missing)}"
            )
        gamma = len(series.positions)
        if sorted(series.positions) != list(range(gamma)):
            raise MetricsPageError(
                f"{source}: engine {engine!r} of model {model_name!r} has positions "
                f"{sorted(series.positions)}, expected 0..{gamma - 1}"
            )
        counts = SpecCounts(
            drafts=series.counters[vm.DRAFTS],
            draft_tokens=series.counters[vm.DRAFT_TOKENS],
            accepted_tokens=series.counters[vm.ACCEPTED_TOKENS],
            accepted_per_position=tuple(series.positions[k] for k in range(gamma)),
        )
        step = race_step_requests(series.num_requests_running)
        impossible = impossible_counts(counts, step)
        if impossible:
            why = ("the page shows no running requests: vLLM's largest default batch" if series.num_requests_running
                   is None else f"twice the {series.num_requests_running:g} running requests it shows, at least "
                   f"{RACE_FLOOR_REQUESTS:g}")
            raise MetricsPageError(f"{source}: engine {engine!r} of model {model_name!r} reports impossible counts "
                                   f"({impossible}; a scrape racing one engine step accounts for {step:g} requests' "
                                   f"worth at most: {why})")
    step_shape = None
    if series.has_step_shape:
        step_shape = StepShape(
            iteration_tokens=dict(sorted(series.iteration_tokens.items())),
            num_requests_running=series.num_requests_running,
            itl_sum=series.itl_sum,
            itl_count=series.itl_count,
            generation_tokens=series.generation_tokens,
            first_tokens=series.first_tokens,
            request_lengths=dict(series.request_lengths),
            engine_cost=dict(series.engine_cost),
        )
    return EngineSnapshot(
        model_name=model_name,
        engine=engine,
        counts=counts,
        created=series.created if counts is not None else None,
        step_shape=step_shape,
    )


_LABEL_VALUE = {
    label: re.compile(label + r'="((?:[^"\\]|\\.)*)"') for label in (vm.MODEL_NAME_LABEL, vm.ENGINE_LABEL)
}


def _engines_from_any_vllm_line(text: str) -> list[tuple[str, str]]:
    """Engines named on any vllm: sample line: the rare page whose kept families are all absent."""
    found: dict[tuple[str, str], None] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        m_model = _LABEL_VALUE[vm.MODEL_NAME_LABEL].search(line)
        m_engine = _LABEL_VALUE[vm.ENGINE_LABEL].search(line)
        if m_model or m_engine:
            found[(m_model.group(1) if m_model else "", m_engine.group(1) if m_engine else "")] = None
    return list(found)


def _first_bad_line(lines: list[str]) -> str:
    for line in lines:
        try:
            list(text_string_to_metric_families(line))
        except Exception:
            return line[:120]
    return "?"


def _fmt_labels(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


# --- inspect --------------------------------------------------------------------------
