"""A route's window read through a Prometheus server's HTTP API (docs/REFERENCE.md, Reading through Prometheus).

A route is a PromQL label selector (``{job="vllm-structured"}``); the aggregation is done
in PromQL, so only per-γ, per-position sums cross the wire, never per-engine counters:

* γ of an engine at time t = the number of its ``position`` series,
  ``G = count without (position) (vllm:spec_decode_num_accepted_tokens_per_pos_total{SEL})``
  (``without (position)`` keeps every engine-identifying label: job, instance,
  model_name, engine, ...). The γ values present over the window come from
  ``count_values("gamma", G)`` over the blocks.
* Blocks: the window (start, end] is cut into n equal blocks of B seconds (n ≤
  ``max_blocks``, B ≥ 3 scrape intervals so that every block holds several samples per
  engine); one ``query_range`` per γ with step B evaluates, at each block end t,
      sum by (position) (increase(PER_POS{SEL}[B]) and ignoring(position) G_g)
  with D, T, A in the same sum (tagged position="drafts" etc. with label_replace), where
      G_g = (G == g) and (G offset B == g)
  — the engines whose γ is g at both ends of the block: counts are never summed across
  γ, and a block in which an engine changed γ belongs to neither (the store drops the
  straddling interval the same way unless the engine restarted). Each block is one row of
  ``IntervalCounts`` (the bootstrap's unit); consecutive block rows of one γ form a
  segment, a gap of more than one block starts a new one.
* ``increase`` handles counter resets (an engine restart) and EXTRAPOLATES to the block's
  edges: windowed counts are fractional and their sum over blocks is close to, not exactly,
  the true count. All series of an engine come from the same scrapes and share their
  timestamps, so within a block each engine's D, T, A, A_k are scaled by about the same
  factor and the ratios (survival, AL) are unaffected up to the weighting between engines.
* Step shape over the whole window, at ``end``:
  batch_mix — the ``vllm:num_requests_running`` gauge, sampled by a subquery at the scrape
  interval (coarser over long windows, at most ``MAX_BATCH_SAMPLES_PER_ENGINE`` points per
  engine), histogrammed with ``count_values`` over engines and summed over the samples:
  {B: share of (engine, sample) pairs with B running}, B ≥ 1 — the store's definition
  (idle samples carry no decode steps); iteration_tokens — ``sum by (le) (increase(..._bucket[W]))``;
  itl_mean_s — ``sum(rate(_sum[W])) / sum(rate(_count[W]))``. Each segment keeps its own
  gauge samples too (``RouteQueries.segment_batch``: the same histogram of the engines at
  its γ over its span, one instant query per segment) and its own ITL increases.
* specdec's plugin series (acceptance.plugin_series), one query per γ (RouteQueries.block_plugin):
  each series' increase per block over the engines of that γ, summed by its own labels and
  tagged with its name; a series born in a block counts its first value where increase()
  has no two samples of it. Each segment's sums and clean decode step times block by block
  (``segment_plugin``) are what the store's segments hold.
* Events: restarts from ``resets()`` of the drafts counter per block (time = the block's
  end; its range reaches 1.5 scrape intervals into the previous block so a drop between two
  blocks is seen; a reset seen by consecutive blocks is reported once — two restarts of one
  engine in adjacent blocks read as one), γ changes where ``G`` differs from ``G offset B``.

Errors: ``PrometheusError`` (a ``SourceError``), one line naming the URL and the route's
selector — an unreachable server, a query past its deadline, a bad HTTP status, an
``"status": "error"`` document, an answer of more than ``max_series`` series or with two
values for one series and time, counts no engine produces (acceptance.counts.impossible_counts,
checked per block and per segment: ``checked_segment``), a token variable that is not set.
The HTTP exchange and its bounds are acceptance.prometheus_http's. The bearer token is read
from the environment variable the config names and is never put in a message or a repr.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias, TypedDict

import numpy as np

from . import plugin_series
from . import vllm_metrics as vm
from .errors import InputError
from .counts import RACE_UNKNOWN_BATCH, IntervalCounts, SpecCounts, impossible_counts
from .limits import DEFAULT_MAX_SERIES
from .limits import PROMETHEUS_TIMEOUT_S as DEFAULT_TIMEOUT_S
from .prometheus_http import PrometheusClient, PrometheusError, PrometheusUnreachable
from .prometheus_http import Labels
from .store import EngineRef, Event, TargetStatus
from .plugin_series import PluginTotals
from .windows import GammaSegment, SegmentRules, StepShapeWindow, StepTimeBlocks, is_step_block_column

# series as PrometheusClient answers a matrix: (labels, times, values)
_Matrix: TypeAlias = list[tuple[Labels, np.ndarray, np.ndarray]]
_Series: TypeAlias = Sequence[tuple[Labels, np.ndarray, np.ndarray]]

# A block must hold several samples of every engine: increase() needs two, and with three
# scrape intervals at most about a third of a block is extrapolated at its edges.
MIN_SCRAPES_PER_BLOCK = 3
# The batch-mix subquery samples the gauge at the scrape interval, but at most this many
# times per engine over the window (a week at 15 s would be 40,320 points per engine).
MAX_BATCH_SAMPLES_PER_ENGINE = 2000
# The scrape interval is estimated from the samples of the last this-many seconds.
SCRAPE_INTERVAL_PROBE_S = 600.0
# A route runs one γ, two while a probe tries another; each γ costs several queries, so an
# answer with more γ values than this is refused rather than walked.
MAX_GAMMA_VALUES = 64
# increase() drops a series' name: the plugin's series are tagged with it in this label
PLUGIN_FAMILY_LABEL = "specdec_family"


@dataclass(frozen=True)
class PrometheusSettings:
    """The config's [source] for kind = "prometheus" (specdec.config.PrometheusSource has the
    same attributes and is accepted wherever this is): ``timeout_s`` one query's deadline,
    connect to last byte; ``max_series`` the most series one query's answer may hold."""

    url: str
    bearer_token_env: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_series: int = DEFAULT_MAX_SERIES


def promql_duration(seconds: float) -> str:
    """A PromQL duration in whole milliseconds (PromQL durations take no fractions)."""
    return f"{max(1, int(round(seconds * 1000)))}ms"


def normalise_selector(selector: str) -> str:
    """``{matchers}`` from ``{...}`` or bare ``a="b",c=~"d"``; one line, braces balanced."""
    if not isinstance(selector, str):
        raise InputError(f"route selector must be a string of PromQL label matchers, got {selector!r}")
    s = selector.strip()
    if "\n" in s or "\r" in s:
        raise InputError(f"route selector {selector!r}: must be one line")
    if not s.startswith("{"):
        s = "{" + s + "}"
    if not s.endswith("}") or s.count("{") != 1 or s.count("}") != 1:
        raise InputError(f"route selector {selector!r}: expected PromQL label matchers like {{job=\"vllm\"}}")
    return s


# ----------------------------------------------------------------------------- window

@dataclass(frozen=True)
class PrometheusWindow(SegmentRules):
    """A route's window from Prometheus, with acceptance.windows.RouteWindow's attributes.

    segments: GammaSegment per γ run of blocks (oldest first); their ``engines`` are
    EngineRef(target = the ``instance`` label, model_name, engine) and ``engine_labels``
    (same order as the segments, then engines) the full label sets. Counts are increase()
    sums: fractional (see the module docstring).
    """

    url: str
    selector: str
    start: float
    end: float
    block_s: float
    scrape_interval_s: float | None
    segments: list[GammaSegment]
    events: list[Event]
    step_shape: StepShapeWindow
    engine_labels: list[list[Labels]] = field(default_factory=list)
    not_speculating: list[EngineRef] = field(default_factory=list)
    target_status: list[TargetStatus] = field(default_factory=list)  # Prometheus scrapes, not us
    targets: list[str] = field(default_factory=list)
    queries: int = 0
    recorded: str | None = None  # the recorded series read (acceptance.prometheus_rules), None: raw samples
    notes: list[str] = field(default_factory=list)  # how the window was read, for the output

    @property
    def step_sequences(self) -> None:
        """Blocks of increase() are not requests: no drafted steps to replay."""
        return None

    @property
    def request_itl_s(self) -> None:
        """Blocks of increase() are not requests: no per-request timing."""
        return None

    request_decode_tokens = request_prompt_tokens = request_temperatures = request_itl_s

    @property
    def totals(self) -> None:
        """The engines' slow totals are the store's (acceptance.store.totals): none through Prometheus."""
        return None


def _counter(name: str) -> str:
    return f"{name}_total"


def engine_ref(labels: Mapping[str, str]) -> EngineRef:
    return EngineRef(labels.get("instance", labels.get("job", "")), labels.get(vm.MODEL_NAME_LABEL, ""),
                     labels.get(vm.ENGINE_LABEL, ""))


class RouteQueries:
    """The PromQL of one route (selector SEL, block B)."""

    def __init__(self, selector: str, block_s: float):
        self.sel = selector
        self.b = promql_duration(block_s)
        self.per_pos = f"{_counter(vm.ACCEPTED_PER_POSITION)}{selector}"

    def gamma_of_engines(self, offset: bool = False) -> str:
        off = f" offset {self.b}" if offset else ""
        return f"count without ({vm.POSITION_LABEL}) ({self.per_pos}{off})"

    def gammas(self) -> str:
        return f'count_values("gamma", {self.gamma_of_engines()})'

    def engines_of_gamma(self, g: int) -> str:
        """Engines whose γ is g at both ends of the block, or at the one end they were there:
        an engine that started (or left) inside the block ran no other γ in it, and dropping
        its block would lose every draft of a series younger than a block — on a wide window
        (a block is window / max_blocks) a new route's whole history."""
        now, before = self.gamma_of_engines(), self.gamma_of_engines(True)
        return (f"((({now} == {g}) and (({before} == {g}) or ({now} unless {before})))"
                f" or (({before} == {g}) unless {now}))")

    def block_counts(self, g: int) -> str:
        """Per block: D, T, A (label position = drafts | draft_tokens | accepted_tokens) and A_k
        (position = k − 1) summed over the engines of γ g. The per-engine increases are put
        in one vector first so that G_g is evaluated once per step, not once per counter."""
        tagged = [f"increase({self.per_pos}[{self.b}])"] + [
            f'label_replace(increase({_counter(name)}{self.sel}[{self.b}]), "{vm.POSITION_LABEL}", "{tag}", "", "")'
            for name, tag in ((vm.DRAFTS, "drafts"), (vm.DRAFT_TOKENS, "draft_tokens"),
                              (vm.ACCEPTED_TOKENS, "accepted_tokens"))
        ]
        return (f"sum by ({vm.POSITION_LABEL}) (({' or '.join(tagged)}) "
                f"and ignoring({vm.POSITION_LABEL}) {self.engines_of_gamma(g)})")

    def block_latency(self, g: int) -> str:
        """Per block: the ITL histogram's sum and count increases (label part = sum | count)
        of the engines of γ g — each segment's own latency, apart from the other γ's."""
        tagged = [f'label_replace(increase({vm.INTER_TOKEN_LATENCY}_{part}{self.sel}[{self.b}]), "part", "{part}", "", "")'
                  for part in ("sum", "count")]
        return f"sum by (part) (({' or '.join(tagged)}) and ignoring(part) {self.engines_of_gamma(g)})"

    def block_plugin(self, g: int) -> str:
        """Per block: each of specdec's plugin series (acceptance.plugin_series) summed over the
        engines of γ g by its own labels, tagged PLUGIN_FAMILY_LABEL = its name (increase()
        drops the name) — one query for the six families. The plugin writes a series at the
        first step of its key, so an engine's series are born while it runs: a series born in
        the block of an engine that was there at its start counts its first value whole where
        increase() has no two samples of it (as the store counts a new column from 0); with
        two or more, increase()'s extrapolation toward zero recovers part of it."""
        keep = ", ".join((PLUGIN_FAMILY_LABEL, *plugin_series.SERIES_LABELS))

        def counted(name: str) -> str:
            now = f"{_counter(name)}{self.sel}"
            born = f"(({now} unless {now} offset {self.b}) and ignoring({keep}) {self.gamma_of_engines(True)})"
            return (f'label_replace(increase({now}[{self.b}]) or {born}, "{PLUGIN_FAMILY_LABEL}", "{name}", "", "")')

        tagged = " or ".join(counted(name) for name in plugin_series.PLUGIN_FAMILIES)
        return f"sum by ({keep}) (({tagged}) and ignoring({keep}) {self.engines_of_gamma(g)})"

    def segment_batch(self, g: int, span_s: float, sample_s: float) -> str:
        """Gauge samples by batch size (label batch, B ≥ 1) of the engines at γ g over the span
        ending at the evaluation: a segment's own batch mix, apart from the other γ's (a
        probe's traffic can differ from the fleet's)."""
        running = f'count_values without () ("batch", round({vm.NUM_REQUESTS_RUNNING}{self.sel}) > 0)'
        return (f"sum by (batch) (sum_over_time(({running} and ignoring(batch) ({self.gamma_of_engines()} == {g}))"
                f"[{promql_duration(span_s)}:{promql_duration(sample_s)}]))")

    def segment_engines(self, g: int, span_s: float) -> str:
        """Engines at γ g over the span ending at the evaluation: at a subquery step (those fall
        on multiples of B, not on the block ends) or at its end — a span of one block can hold
        no subquery step at which its engines were already there."""
        now = f"({self.gamma_of_engines()} == {g})"
        return f"max_over_time({now}[{promql_duration(span_s)}:{self.b}]) or {now}"

    def restarts(self, reach_s: float) -> str:
        """Engines whose drafts counter dropped within ``reach_s`` before the block end: a
        block's range must reach one scrape into the previous block, or a drop between two
        blocks' samples would be seen by neither."""
        return f"resets({_counter(vm.DRAFTS)}{self.sel}[{promql_duration(reach_s)}]) > 0"

    def gamma_changes(self) -> str:
        return f"{self.gamma_of_engines()} != {self.gamma_of_engines(True)}"


def scrape_interval(client: PrometheusClient, selector: str, end: float, window_s: float) -> float | None:
    """The median scrape interval of the route's engines over the probe span before ``end``,
    from the raw sample timestamps (None: fewer than two samples). Counting samples over the
    probe span instead would overstate the interval for series younger than the span."""
    probe = min(window_s, SCRAPE_INTERVAL_PROBE_S)
    data = client._request("query", {"query": f"{_counter(vm.DRAFTS)}{selector}[{promql_duration(probe)}]", "time": f"{end:.3f}"})
    series = client._matrix(data, "query") if data.get("resultType") == "matrix" else []  # else: no samples
    # the client gives each series each time once (a repeated sample merged), so no gap is 0
    per_series = [np.diff(times) for _, times, _ in series if times.size >= 2]
    gaps = np.concatenate(per_series) if per_series else np.zeros(0)
    gaps = gaps[gaps > 0]
    return float(np.median(gaps)) if gaps.size else None


def plan_blocks(start: float, end: float, scrape_s: float | None, max_blocks: int,
                 block_s: float | None) -> tuple[int, float]:
    """(n blocks, B seconds): n·B ≤ end − start, B a whole number of milliseconds."""
    window = end - start
    if block_s is None:
        floor_s = MIN_SCRAPES_PER_BLOCK * (scrape_s if scrape_s else window)
        n = int(max(1, min(max_blocks, math.floor(window / max(floor_s, 1e-3)))))
        block_s = window / n
    # PromQL durations are whole milliseconds; a window under a few ms (float rounding of
    # end − start included) would otherwise round its block to 0.
    block_s = max(math.floor(block_s * 1000 + 1e-6) / 1000, 0.001)
    n = int(min(max_blocks, math.floor(window / block_s + 1e-9)))
    return max(n, 1), block_s


def check_window(start: float, end: float, max_blocks: int) -> None:
    """A window (start, end] and its most blocks, as the callers give them."""
    if not (isinstance(start, (int, float)) and isinstance(end, (int, float))
            and math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise InputError(f"window ({start}, {end}] is empty or not finite")
    if isinstance(max_blocks, bool) or not isinstance(max_blocks, int) or max_blocks < 1:
        raise InputError(f"max_blocks {max_blocks!r} must be a positive integer")


def prometheus_route_window(source: object, selector: str, start: float, end: float, *, max_blocks: int = 200,
                            timeout_s: float | None = None, block_s: float | None = None) -> PrometheusWindow:
    """The route's window (start, end] from Prometheus as γ segments of block rows.

    ``source``: PrometheusSettings (or the config's PrometheusSource); ``selector``: the
    route's PromQL label matchers; ``max_blocks``: at most this many blocks (rows);
    ``block_s``: force the block length (default: window / max_blocks, but at least
    MIN_SCRAPES_PER_BLOCK scrape intervals); ``timeout_s``: one query's deadline (default:
    the source's ``timeout_s``, else 10 s).
    """
    check_window(start, end, max_blocks)
    if block_s is not None and not (isinstance(block_s, (int, float)) and 0.001 <= block_s <= end - start):
        raise InputError(f"block_s {block_s!r} must be between 1 ms and the window length")
    sel = normalise_selector(selector)
    return raw_window(PrometheusClient(source, timeout_s=timeout_s, selector=sel), sel, start, end,
                      max_blocks=max_blocks, block_s=block_s)


def raw_window(client: PrometheusClient, sel: str, start: float, end: float, *, max_blocks: int = 200,
               block_s: float | None = None) -> PrometheusWindow:
    """prometheus_route_window's reading, by raw increase() queries through ``client``
    (``sel`` normalised, the arguments checked)."""
    window_s = end - start
    scrape_s = scrape_interval(client, sel, end, window_s)
    n, block = plan_blocks(start, end, scrape_s, max_blocks, block_s)
    q = RouteQueries(sel, block)
    first_end = end - (n - 1) * block

    def rng(expr: str) -> _Matrix:
        return client.query_range(expr, first_end, end + 1e-6, block)

    found: list[tuple[GammaSegment, list[Labels]]] = []
    for g in gammas_in(client, rng(q.gammas())):
        blocks = _GammaBlocks(rng(q.block_counts(g)), rng(q.block_latency(g)), rng(q.block_plugin(g)))
        found += _gamma_segments(client, q, g, blocks, block, scrape_s)
    segments, engine_labels = in_time_order(found)
    reach = block + 1.5 * (scrape_s or 0.0)
    events = _events(rng(q.restarts(reach)), rng(q.gamma_changes()), block)
    shape = _step_shape(client, sel, end, window_s, scrape_s)
    return PrometheusWindow(
        url=client.url, selector=sel, start=float(start), end=float(end), block_s=block,
        scrape_interval_s=scrape_s, segments=segments, events=events, step_shape=shape,
        engine_labels=engine_labels, not_speculating=not_speculating(client, q, end), queries=client.queries,
        notes=client.notes(),
    )


def in_time_order(found: list[tuple[GammaSegment, list[Labels]]]) -> tuple[list[GammaSegment], list[list[Labels]]]:
    """(segments, their engines' label sets) from gamma_segments' pairs, oldest first."""
    found = sorted(found, key=lambda pair: (pair[0].start, pair[0].end, pair[0].gamma))
    return [seg for seg, _ in found], [labs for _, labs in found]


def not_speculating(client: PrometheusClient, q: RouteQueries, at: float) -> list[EngineRef]:
    """Engines of the route that run (num_requests_running) without spec-decode series at ``at``."""
    return sorted(engine_ref(lab) for lab, _ in client.query(
        f"{vm.NUM_REQUESTS_RUNNING}{q.sel} unless {q.gamma_of_engines()}", at))


@dataclass(frozen=True)
class _GammaBlocks:
    """One γ's block matrices (RouteQueries): its counts, latency and plugin series."""

    counts: _Series
    latency: _Series = ()
    plugin: _Series = ()


def _gamma_segments(client: PrometheusClient, q: RouteQueries, g: int, blocks: _GammaBlocks, block: float,
                    scrape_s: float | None = None) -> Iterator[tuple[GammaSegment, list[Labels]]]:
    """Rows of one γ from the block_counts matrix, cut into segments at gaps, each with its
    own latency (block_latency), plugin series (block_plugin) and gauge samples (segment_batch)."""
    rows = block_rows(blocks.counts, g, client=client)

    def engines_of(g: int, start: float, end: float) -> list[Labels]:  # at γ g at some block end
        return [lab for lab, _ in client.query(q.segment_engines(g, end - start), end)]

    def batch_samples(segment: GammaSegment) -> dict[int, float]:
        span = segment.end - segment.start
        return batch_counts(client.query(q.segment_batch(g, span, _sample_step(scrape_s, span)), segment.end))

    for segment, labs in gamma_segments(engines_of, g, rows, {t: t - block for t in rows}, block):
        segment = checked_segment(client, segment, len(labs))
        yield replace(segment, batch_samples=batch_samples(segment), **segment_latency(blocks.latency, segment),
                      **segment_plugin(client, blocks.plugin, segment, len(labs))), labs


class _SegmentLatency(TypedDict, total=False):
    """A segment's own latency (GammaSegment's fields), when its blocks hold one."""

    itl_sum_s: float
    itl_count: float


def segment_latency(latency: _Series, segment: GammaSegment) -> _SegmentLatency:
    """{itl_sum_s, itl_count}: Σ of the block_latency series over the segment's blocks."""
    sums = segment_block_sums(latency, segment, "part")
    return {"itl_sum_s": sums.get("sum", 0.0), "itl_count": sums["count"]} if sums.get("count", 0) > 0 else {}


class _SegmentPlugin(TypedDict, total=False):
    """A segment's plugin readings (GammaSegment's fields), when its engines export the series."""

    plugin: PluginTotals
    plugin_step_blocks: StepTimeBlocks


def segment_plugin(client: PrometheusClient, series: _Series, segment: GammaSegment, engines: int) -> _SegmentPlugin:
    """{plugin, plugin_step_blocks}: the block_plugin series over the segment's blocks, as the
    store's segments hold them (acceptance.windows) — their sums, and the clean decode step
    times block by block (a row per block, zeros where a block timed none); {} where its
    engines export none in its blocks. Limits: only the blocks the segment holds (those where
    vLLM's counters drafted), so a block where only the plugin's lagging counters moved is left
    out, which the store keeps; ``engines`` is the segment's engines, not only those exporting
    (the sum is taken over all of them in PromQL). A series whose labels the plugin does not
    write is refused (one line naming the server, the route and the series)."""
    index = {t: i for i, t in enumerate(np.round(segment.intervals.end, 3).tolist())}
    table: dict[str, np.ndarray] = {}
    for labels, times, values in series:
        try:
            column = plugin_series.series_column(labels.get(PLUGIN_FAMILY_LABEL, ""), labels)
        except plugin_series.PluginSeriesError as e:
            raise client.fail(str(e)) from None
        for t, v in zip(np.round(times, 3).tolist(), values.tolist()):
            if t in index and math.isfinite(v) and v > 0:
                table.setdefault(column, np.zeros(len(index)))[index[t]] += v
    if not table:
        return {}
    out: _SegmentPlugin = {"plugin": plugin_series.plugin_totals_from_columns(
        {column: float(row.sum()) for column, row in table.items()}, engines=engines)}
    timed = sorted(column for column in table if is_step_block_column(column))
    if timed:
        out["plugin_step_blocks"] = StepTimeBlocks(tuple(timed), np.stack([table[c] for c in timed], axis=1))
    return out


def batch_counts(histogram: Iterable[tuple[Labels, float]]) -> dict[int, float]:
    """{B: samples}, by B, of a gauge histogram's (labels, samples) pairs (label batch, from
    ``count_values``); batch sizes without samples left out."""
    counts = {int(float(labels["batch"])): v for labels, v in histogram if "batch" in labels and v > 0}
    return dict(sorted(counts.items()))


def segment_block_sums(series: _Series, segment: GammaSegment, label: str) -> dict[str, float]:
    """{value of ``label``: Σ of the (labels, block ends, values) ``series`` over the segment's
    blocks}, positive finite values only."""
    ends = set(np.round(segment.intervals.end, 3).tolist())
    sums: dict[str, float] = defaultdict(float)
    for labels, times, values in series:
        if label in labels:
            sums[labels[label]] += sum(v for t, v in zip(np.round(times, 3).tolist(), values.tolist())
                                       if t in ends and math.isfinite(v) and v > 0)
    return dict(sums)


def block_rows(series: _Series, g: int, *, client: PrometheusClient) -> dict[float, np.ndarray]:
    """{block end: [D, T, A, A_1..A_γ]} from series labelled position = drafts | draft_tokens |
    accepted_tokens | k − 1; blocks with nothing in them are left out. Two series giving one
    position a value at one block end (an answer summed by position holds one): the same
    value merged, different values refused (``client.same_sample``)."""
    column: dict[str | None, int] = {"drafts": 0, "draft_tokens": 1, "accepted_tokens": 2}  # None: no position label
    column.update({str(k): 3 + k for k in range(g)})
    rows: dict[float, np.ndarray] = defaultdict(lambda: np.zeros(3 + g))
    seen: dict[tuple[float, int], float] = {}
    for labels, times, values in series:
        col = column.get(labels.get(vm.POSITION_LABEL))
        if col is None:
            continue  # a position ≥ γ cannot be γ's; ignore anything unexpected
        for t, v in zip(times.tolist(), values.tolist()):
            if math.isfinite(v):
                key = (round(t, 3), col)
                if key in seen:
                    client.same_sample(f"position {labels[vm.POSITION_LABEL]} of gamma {g}", t, seen[key], v)
                    continue
                seen[key] = v
                rows[key[0]][col] = max(v, 0.0)
    return {t: r for t, r in sorted(rows.items()) if r.any()}


def gammas_in(client: PrometheusClient, series: _Series) -> list[int]:
    """The γ values of ``count_values("gamma", G)``'s answer, smallest first (0 left out):
    whole numbers of position series, at most ``client.max_series`` (a γ of 10^8 would size
    every block row at 10^8 columns), at most MAX_GAMMA_VALUES of them, else refused."""
    found = set()
    for labels, _, _ in series:
        text = labels.get("gamma", "")
        try:
            g = float(text)
        except ValueError:
            g = math.nan
        if not (g.is_integer() and 0 <= g <= client.max_series):
            raise client.fail(f"count_values answered gamma {text!r}: not a whole number of position series "
                              f"0..{client.max_series} ([source] max_series)")
        if g >= 1:
            found.add(int(g))
    if len(found) > MAX_GAMMA_VALUES:
        raise client.fail(f"count_values answered {len(found)} gamma values, more than {MAX_GAMMA_VALUES} "
                          f"(a route runs one, two while a probe tries another)")
    return sorted(found)


def checked_segment(client: PrometheusClient, segment: GammaSegment, engines: int) -> GammaSegment:
    """The segment, refused when its counts are ones no engine produces
    (acceptance.counts.impossible_counts, RACE_UNKNOWN_BATCH of slack per engine), block
    by block and over the whole segment with the same slack: a block's increases telescope
    into the next, so a scrape race at a block end does not add up over blocks. Within the
    slack, draft tokens over γ·D (a race or increase()'s extrapolation) are cut to γ·D: the
    model takes T / D ≤ γ as given."""
    # a page's race slack without the gauge, per engine summed into a block: each engine's
    # families are scraped apart; increase()'s extrapolation scales an engine's series alike
    # (the same scrapes) and is left to the relative share impossible_counts allows
    step_requests = RACE_UNKNOWN_BATCH * max(1, engines)
    iv = segment.intervals
    spans = [*zip(iv.start.tolist(), iv.end.tolist(), iv.counts.tolist()),
             (segment.start, segment.end, iv.counts.sum(axis=0).tolist())]
    for start, end, row in spans:
        why = impossible_counts(SpecCounts.from_vector(row), step_requests)
        if why:
            raise client.fail(f"counts no engine produces at gamma {segment.gamma} in ({start:.3f}, {end:.3f}]: "
                              f"{why} (increase() summed over {max(1, engines)} engine(s), {step_requests} "
                              f"drafts of slack)")
    counts = iv.counts.copy()
    counts[:, 1] = np.minimum(counts[:, 1], segment.gamma * counts[:, 0])
    return replace(segment, intervals=replace(iv, counts=counts))


def gamma_segments(engines_of: Callable[[int, float, float], list[Labels]], g: int, rows: dict[float, np.ndarray],
                   starts: dict[float, float], block: float) -> Iterator[tuple[GammaSegment, list[Labels]]]:
    """(GammaSegment, engine label sets) per run of ``rows`` (block end → counts; ``starts``:
    block end → its start) without a gap of more than a block; ``engines_of(g, start, end)``:
    the label sets of the engines at γ g in the span, from Prometheus."""
    runs: list[list[float]] = []
    for t in rows:
        if runs and t - runs[-1][-1] <= 1.5 * block:
            runs[-1].append(t)
        else:
            runs.append([t])
    for run in runs:
        ends = np.array(run)
        counts = np.array([rows[t] for t in run]).reshape(len(run), 3 + g)
        # A_k ≤ D within a block can be broken slightly by extrapolation; a_k is still a ratio of sums.
        iv = IntervalCounts(g, np.array([starts[t] for t in run]), ends, counts)
        labs = engines_of(g, float(iv.start[0]), float(ends[-1]))
        labs.sort(key=lambda d: sorted(d.items()))
        segments_engines = [engine_ref(lab) for lab in labs]
        yield (GammaSegment(g, float(iv.start[0]), float(ends[-1]), segments_engines, iv), labs)


def _events(restarts: _Series, gamma_changes: _Series, block: float) -> list[Event]:
    out: list[Event] = []
    for labels, times, values in restarts:
        ref = engine_ref(labels)
        previous = -math.inf
        for t, v in zip(times.tolist(), values.tolist()):
            seen_before = t - previous <= 1.5 * block  # the overlapping reach saw it already
            previous = t
            if seen_before:
                continue
            out.append(Event(float(t), ref.target, ref.model_name, ref.engine, "restart",
                             f"counter reset in the {block:g} s block ending at {t:.3f} (Prometheus resets())",
                             {"resets": v, "labels": labels}))
    for labels, times, values in gamma_changes:
        ref = engine_ref(labels)
        for t, v in zip(times.tolist(), values.tolist()):
            out.append(Event(float(t), ref.target, ref.model_name, ref.engine, "gamma_change",
                             f"gamma changed to {v:g} in the {block:g} s block ending at {t:.3f}",
                             {"gamma": int(v), "labels": labels}))
    out.sort(key=lambda e: (e.time, e.target, e.engine or "", e.kind))
    return out


def _sample_step(scrape_s: float | None, span_s: float) -> float:
    """The gauge's sampling step over a span: the scrape interval, coarser over long spans (at
    most MAX_BATCH_SAMPLES_PER_ENGINE points per engine)."""
    return max(scrape_s or span_s / MAX_BATCH_SAMPLES_PER_ENGINE, span_s / MAX_BATCH_SAMPLES_PER_ENGINE)


def _step_shape(client: PrometheusClient, sel: str, end: float, window_s: float,
                scrape_s: float | None) -> StepShapeWindow:
    w = promql_duration(window_s)
    sample_s = _sample_step(scrape_s, window_s)
    hist = client.query(
        f'sum by (batch) (sum_over_time((count_values("batch", round({vm.NUM_REQUESTS_RUNNING}{sel}) > 0))'
        f"[{w}:{promql_duration(sample_s)}]))", end)
    running = batch_counts(hist)
    samples = sum(running.values())
    # Pairs of consecutive samples of one engine, both running, and how many kept B (as the
    # store counts them: a sample and the one a sampling step before it, in one series):
    # StepShapeWindow.batch_persistence.
    now, before = f"round({vm.NUM_REQUESTS_RUNNING}{sel})", f"round({vm.NUM_REQUESTS_RUNNING}{sel} offset {promql_duration(sample_s)})"
    sub = f"[{w}:{promql_duration(sample_s)}]"
    paired = client.query(f"sum(count_over_time(({now} > 0 and {before} > 0){sub}))", end)
    kept = client.query(f"sum(count_over_time(({now} > 0 and {now} == {before}){sub}))", end)
    pairs = int(round(paired[0][1])) if paired else 0
    repeated = int(round(kept[0][1])) if kept else 0
    buckets = client.query(f"sum by (le) (increase({vm.ITERATION_TOKENS}_bucket{sel}[{w}]))", end)
    iteration_tokens = {float(lab["le"]): v for lab, v in buckets if "le" in lab and math.isfinite(v)}
    itl = client.query(f"sum(rate({vm.INTER_TOKEN_LATENCY}_sum{sel}[{w}])) / "
                       f"sum(rate({vm.INTER_TOKEN_LATENCY}_count{sel}[{w}]))", end, finite=False)  # 0/0 without steps
    itl_mean = itl[0][1] if itl and math.isfinite(itl[0][1]) and itl[0][1] > 0 else None
    return StepShapeWindow(
        batch_time_shares={b: c / samples for b, c in running.items()} if samples else {},
        iteration_tokens=dict(sorted(iteration_tokens.items())),
        itl_mean_s=itl_mean,
        samples=int(round(samples)),
        sample_pairs=max(pairs, 0),
        repeated_pairs=min(max(repeated, 0), max(pairs, 0)),
    )


__all__ = ["PrometheusError", "PrometheusUnreachable", "PrometheusSettings", "PrometheusClient", "PrometheusWindow", "RouteQueries",
           "prometheus_route_window", "raw_window", "check_window", "normalise_selector", "MIN_SCRAPES_PER_BLOCK"]
