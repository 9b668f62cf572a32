"""A route's window from Prometheus through specdec's recorded series when they cover it,
else through raw ``increase`` queries (acceptance.prometheus) — and the output says which.

The recorded series (acceptance.prometheus_rules) hold, per evaluation R apart, each γ's
exact per-position increase summed over the route's engines. A window (start, end] is the
m evaluations in it, t_e − jR for j < m (t_e the last at or before end), cut into blocks of
k evaluations (k = ⌈m / max_blocks⌉, so at most max_blocks rows), the oldest block holding
the remainder. A block's row is ``sum_over_time`` over its evaluations, queried at block ends
placed R/2 after an evaluation: range selectors include both ends in Prometheus 2.x, and an
evaluation on a boundary would be counted twice. Because the increases telescope, a block's
row is exactly the counters' change over its span, as the store's deltas are. Each γ's ITL
increases and gauge samples (the engines running B at each evaluation) are summed the same
way, over each segment's blocks: a segment's own latency and batch mix.

The rules read their query offset D in the past (acceptance.prometheus_rules; the heartbeat's
label ``query_offset``, none: 0): an evaluation at t counted up to t − D, so the window's
blocks, segments and events are dated D before their evaluations.

An evaluation the rules missed (a gap in the heartbeat: Prometheus down or behind, or
``promtool tsdb create-blocks-from rules``, which never evaluates a group slot in the last
second before a 2-hour block: its range query per block ends at the block's last whole
second, the next starts at the block) would lose its R of counts, and the increases would no
longer telescope. Each is made afterwards instead: the rules' own PromQL with every selector
pinned at the missed instant (``@``), read from the raw samples and added to its block — the
counts the evaluation would have recorded, exactly, while Prometheus keeps the raw samples (a
note says how many were made, and how many found none).

Found by name (the heartbeat ``specdec:route_window_rules:up<R>{route}``) and used only when
it covers the window: evaluated in at least MIN_COVERAGE of the window's evaluations (the
others are made from the raw samples, above) and not in more than it has (a backfill that
overlaps the live rules, at another phase, would count increases twice), evaluated last at most two evaluations before its end (rules that stopped
would leave its end out), and written for the route's current selector (the heartbeat
carries it).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

import numpy as np

from .errors import InputError
from .prometheus import (
    PrometheusClient,
    PrometheusWindow,
    RouteQueries,
    batch_counts,
    block_rows,
    check_window,
    checked_segment,
    engine_ref,
    gamma_segments,
    gammas_in,
    in_time_order,
    normalise_selector,
    not_speculating,
    promql_duration,
    raw_window,
    scrape_interval,
    segment_block_sums,
    segment_latency,
    segment_plugin,
)
from .prometheus_http import Labels
from .prometheus_rules import HEARTBEAT_PREFIX, query_offset_seconds, resolution_seconds, route_rules, series_names
from .store import EngineRef, Event
from . import vllm_metrics as vm
from .windows import GammaSegment, StepShapeWindow

MIN_COVERAGE = 0.99
# Missed evaluations made in one query (each adds its rules' PromQL, up to ~5 kB, to the query).
MISSED_PER_QUERY = 16
_MISSED_LABEL = "specdec_missed"

# series as PrometheusClient answers a matrix: (labels, times, values)
_Matrix: TypeAlias = list[tuple[Labels, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Coverage:
    """Whether the recorded series cover the window: ``last_evaluation`` (t_e) and how many
    evaluations the window holds, or ``why_not`` in one clause."""

    last_evaluation: float | None = None
    evaluations: int = 0
    why_not: str | None = None
    query_offset_s: float = 0.0  # what the rules counted at t, they counted up to t − this
    query_offset: str = "0s"  # the same, as the rules wrote it (the heartbeat's label)
    evaluated: float = 0.0  # how many of the window's evaluations the heartbeat shows


@dataclass(frozen=True)
class _Rules:
    """The route's recording rules at one resolution: evaluated ``r`` seconds apart, writing
    the series ``names`` (by role: acceptance.prometheus_rules.series_names)."""

    r: float
    names: dict[str, str]
    resolution: str  # as the rules name it: 1m


def prometheus_window(source: object, route: str, selector: str, start: float, end: float, *, max_blocks: int = 200,
                      timeout_s: float | None = None) -> PrometheusWindow:
    """The route's window (start, end]: from the recorded series when they cover it, else raw.
    ``timeout_s``: one query's deadline (default: the source's ``timeout_s``, else 10 s)."""
    check_window(start, end, max_blocks)
    sel = normalise_selector(selector)
    client = PrometheusClient(source, timeout_s=timeout_s, selector=sel)
    coverage = Coverage(why_not=f"no recorded series for route {route!r} (no {HEARTBEAT_PREFIX}<R>)")
    for resolution in _resolutions(client, route, end):  # the finest that covers the window
        rules = _Rules(names=series_names(resolution), r=resolution_seconds(resolution), resolution=resolution)
        coverage = recorded_coverage(client, route, sel, start, end, rules.r, rules.names["heartbeat"])
        if coverage.why_not is None:
            return _recorded_window(client, route, sel, start, end, rules, coverage, max_blocks)
    looked = client.queries
    window = raw_window(client, sel, start, end, max_blocks=max_blocks)
    note = (f"Prometheus: {coverage.why_not}, so the window was read from raw samples ({window.queries - looked} "
            f"increase() queries); `specdec rules` writes the recording rules, `promtool tsdb create-blocks-from "
            f"rules` backfills them")
    return replace(window, notes=[note, *window.notes])


def _resolutions(client: PrometheusClient, route: str, end: float) -> list[str]:
    """The resolutions the route's rules are recorded at (by heartbeat name), finest first."""
    found = client.query(f'count by (__name__) ({{__name__=~"{HEARTBEAT_PREFIX}.+",route={json.dumps(route)}}})', end)
    resolutions = []
    for labels, _ in found:
        resolution = labels.get("__name__", "")[len(HEARTBEAT_PREFIX):]
        try:
            resolutions.append((resolution_seconds(resolution), resolution))
        except InputError:
            continue  # not one of ours
    return [res for _, res in sorted(resolutions)]


def _route_matcher(route: str) -> str:
    return f"{{route={json.dumps(route)}}}"


def recorded_coverage(client: PrometheusClient, route: str, sel: str, start: float, end: float, r: float,
              heartbeat: str) -> Coverage:
    """Coverage of (start, end] by the route's heartbeat (module docstring)."""
    beat = f"{heartbeat}{_route_matcher(route)}"
    last = client.query(f"timestamp({beat})", end)
    if not last:
        return Coverage(why_not=f"no recorded {heartbeat} for route {route!r} at the window's end")
    t_e = max(v for _, v in last)
    if t_e <= start or end - t_e > 2 * r:  # rules that stopped, or lag, leave the window's end uncovered
        return Coverage(why_not=f"the recorded series of route {route!r} were last evaluated at {t_e:.3f}, "
                                f"{end - t_e:.0f} s before the window's end")
    evaluations = max(1, math.ceil((t_e - start) / r - 1e-9))
    counted = client.query(f"count_over_time({beat}[{promql_duration(evaluations * r)}])", t_e + r / 2)
    selectors = {lab.get("selector"): v for lab, v in counted}
    if sel not in selectors:
        return Coverage(why_not=f"the recorded series of route {route!r} were written for selector "
                                f"{next(iter(selectors), '?')}, not {sel}")
    offsets = {lab.get("query_offset", "0s") for lab, _ in counted if lab.get("selector") == sel}
    offset = next(iter(offsets), "0s")
    if len(offsets) > 1:  # the rules changed it inside the window: a span counted twice or never
        return Coverage(why_not=f"the recorded series of route {route!r} were written with query offsets "
                                f"{' and '.join(sorted(offsets))} inside the window")
    try:
        offset_s = query_offset_seconds(offsets.pop())
    except InputError as e:
        return Coverage(why_not=f"the recorded series of route {route!r}: {e}")
    if selectors[sel] < MIN_COVERAGE * evaluations:
        return Coverage(why_not=f"the recorded series of route {route!r} cover {selectors[sel]:.0f} of the window's "
                                f"{evaluations} evaluations (less than {MIN_COVERAGE:.0%})")
    if selectors[sel] > (2 - MIN_COVERAGE) * evaluations + 1:  # their increases would count twice
        return Coverage(why_not=f"the recorded series of route {route!r} hold {selectors[sel]:.0f} evaluations in the "
                                f"window's {evaluations} (a backfill overlapping the rules' live evaluations?)")
    return Coverage(t_e, evaluations, query_offset_s=offset_s, query_offset=offset, evaluated=selectors[sel])


def block_plan(evaluations: int, max_blocks: int) -> tuple[int, int, int]:
    """(k evaluations per block, n whole blocks, remainder in the oldest block)."""
    k = max(1, math.ceil(evaluations / max_blocks))
    n = evaluations // k
    return k, n, evaluations - n * k


def _recorded_window(client: PrometheusClient, route: str, sel: str, start: float, end: float, rules: _Rules,
                     coverage: Coverage, max_blocks: int) -> PrometheusWindow:
    r, names = rules.r, rules.names
    k, n, remainder = block_plan(coverage.evaluations, max_blocks)
    block = k * r
    assert coverage.last_evaluation is not None  # a Coverage without why_not has one (recorded_coverage)
    last_end, shift = coverage.last_evaluation + r / 2, coverage.query_offset_s
    missed = _Missed.find(client, route, sel, rules, coverage)
    made = missed if missed.instants else None
    blocks = _Blocks(client, _route_matcher(route), last_end, n, block, remainder * r, shift, made)
    series = blocks.summed(names["spec_decode"], f"gamma, {vm.POSITION_LABEL}")
    latency = blocks.latency(names)
    batches = blocks.summed(names["engines_by_batch_by_gamma"], "gamma, batch")
    q = RouteQueries(sel, block)
    window_s = coverage.evaluations * r
    recorded = _Recorded(client, route, names, last_end, window_s, shift, made)
    engines_of = recorded.engines_of(q, r)
    found = []
    for g in gammas_in(client, [s for s in series if "gamma" in s[0]]):
        rows = block_rows([s for s in series if s[0].get("gamma") == str(g)], g, client=client)
        own = [s for s in latency if s[0].get("gamma") == str(g)]
        own_batches = [s for s in batches if s[0].get("gamma") == str(g)]
        plugin = blocks.raw(functools.partial(_plugin_query, sel, g), r / 2)
        for segment, labs in gamma_segments(engines_of, g, rows, blocks.starts(rows), block):
            segment = checked_segment(client, segment, len(labs))
            found.append((replace(segment, batch_samples=_batch_samples(own_batches, segment) if batches else None,
                                  **segment_latency(own, segment), **segment_plugin(client, plugin, segment, len(labs))),
                          labs))
    segments, engine_labels = in_time_order(found)
    notes = [f"Prometheus: read from the recorded series {names['spec_decode']} (specdec rules, "
             f"{coverage.evaluations} evaluations {r:g} s apart, {n + bool(remainder)} blocks)"]
    shape = recorded.step_shape()
    events = recorded.events()
    if missed.instants:
        notes.append(missed.note(coverage.evaluations))
    if not latency and shape.itl_mean_s is not None:
        notes.append(f"Prometheus: the recorded series hold no {names['itl_sum_by_gamma']} (rules written "
                     f"before it): each γ segment's own latency is unknown, so a probe cannot measure the "
                     f"specialized speedup; `specdec rules` writes the rules anew")
    elif not batches and shape.samples:
        notes.append(f"Prometheus: the recorded series hold no {names['engines_by_batch_by_gamma']} (rules "
                     f"written before it): a probe's latency is priced at the route's batch mix, not its own; "
                     f"`specdec rules` writes the rules anew")
    return PrometheusWindow(
        url=client.url, selector=sel, start=last_end - window_s - shift, end=min(end, last_end - shift), block_s=block,
        scrape_interval_s=scrape_interval(client, sel, end, end - start),
        segments=segments, events=events, step_shape=shape,
        engine_labels=engine_labels, not_speculating=not_speculating(client, q, end),
        queries=client.queries, recorded=names["spec_decode"], notes=notes + client.notes())


def _plugin_query(sel: str, g: int, span_s: float) -> str:
    """The plugin's series of γ g's engines over ``span_s``, from raw samples (RouteQueries.block_plugin)."""
    return RouteQueries(sel, span_s).block_plugin(g)


def _batch_samples(series: Sequence[tuple[Labels, np.ndarray, np.ndarray]], segment: GammaSegment) -> dict[int, float]:
    """{B: the recorded gauge samples of the segment's γ over its blocks} (label batch)."""
    return batch_counts(({"batch": b}, n) for b, n in segment_block_sums(series, segment, "batch").items())


@dataclass(frozen=True)
class _Blocks:
    """The window's blocks of recorded series: n whole blocks ending at last_end, ``block`` s
    apart (one range query), and the oldest holding the remainder (one instant query). Their
    times are what the evaluations counted up to: ``shift`` (the rules' query offset) before.
    An evaluation the rules missed is made from the raw samples and added to its block."""

    client: PrometheusClient
    matcher: str
    last_end: float
    n: int
    block: float
    remainder_s: float
    shift: float = 0.0
    missed: _Missed | None = None

    def summed(self, record: str, by: str) -> _Matrix:
        """(labels, block ends, values) of ``sum by (by) (sum_over_time(record[block]))``."""
        return self._per_block(lambda span: self._sum(record, by, span), lambda rules: f"sum by ({by}) ({rules[record]})")

    def latency(self, names: dict[str, str]) -> _Matrix:
        """Each γ's ITL sum and count per block, in one query (label part = sum | count, as
        RouteQueries.block_latency)."""
        def parts(summed: Callable[[str], str]) -> str:
            return " or ".join(f'label_replace({summed(names[f"itl_{part}_by_gamma"])}, "part", "{part}", "", "")'
                               for part in ("sum", "count"))
        return self._per_block(lambda span: parts(lambda record: self._sum(record, "gamma", span)),
                               lambda rules: parts(lambda record: f"sum by (gamma) ({rules[record]})"))

    def _sum(self, record: str, by: str, span: str) -> str:
        return f"sum by ({by}) (sum_over_time({record}{self.matcher}[{span}]))"

    def _per_block(self, expr: Callable[[str], str], missed_expr: Callable[[dict[str, str]], str]) -> _Matrix:
        """``expr(span)`` at every whole block's end (one range query) and over the remainder
        at the oldest block's end (one instant query); plus ``missed_expr`` (of the rules at a
        missed evaluation) at each missed evaluation, in its block, where the rules wrote the series."""
        series = self._over_blocks(lambda span_s: expr(promql_duration(span_s)), 0.0)
        if self.missed is not None and series:  # a series the rules did not write stays absent
            series = _added(series, [(lab, self._block_end(at), v) for lab, at, v in self.missed.rows(missed_expr)])
        return [(lab, times - self.shift, values) for lab, times, values in series]

    def raw(self, expr: Callable[[float], str], half: float) -> _Matrix:
        """``expr(span)`` — raw samples' increase() over a span (the plugin's series, which no
        rule records) — over each block's span, dated as the recorded blocks are: what a
        block's evaluations counted ends ``half`` (R/2) before its query time and the shift."""
        return [(lab, times + half, values) for lab, times, values in self._over_blocks(expr, self.shift + half)]

    def _over_blocks(self, expr: Callable[[float], str], before: float) -> _Matrix:
        """``expr(span seconds)`` at every whole block's end (one range query) and over the
        remainder at the oldest block's end (one instant query), each end ``before`` earlier."""
        series = (self.client.query_range(expr(self.block), self.last_end - (self.n - 1) * self.block - before,
                                          self.last_end - before + 1e-6, self.block) if self.n else [])
        if self.remainder_s:
            oldest_end = self.last_end - self.n * self.block - before
            series = series + [(lab, np.array([oldest_end]), np.array([v]))
                               for lab, v in self.client.query(expr(self.remainder_s), oldest_end)]
        return series

    def _block_end(self, at: float) -> float:
        """The end of the block an evaluation at ``at`` falls in (as the queries date it)."""
        j = min(self.n, math.floor((self.last_end - at) / self.block))
        return round(self.last_end - j * self.block, 3)

    def starts(self, rows: Iterable[float]) -> dict[float, float]:
        """Block end → its start, for the block ends in ``rows``."""
        oldest_end = self.last_end - self.n * self.block - self.shift
        return {t: oldest_end - self.remainder_s if self.remainder_s and t == round(oldest_end, 3) else t - self.block
                for t in rows}


def _key(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _added(series: _Matrix, rows: Iterable[tuple[Labels, float, float]]) -> _Matrix:
    """``series`` (a label set may come twice: the whole blocks' and the remainder's) as one
    series per label set, each row's value added at its time (a label set or time not there: new)."""
    table: dict[tuple[tuple[str, str], ...], tuple[Labels, dict[float, float]]] = {}
    points_of = ((lab, t, v) for lab, times, values in series for t, v in zip(times.tolist(), values.tolist()))
    for lab, at, value in itertools.chain(points_of, rows):
        points = table.setdefault(_key(lab), (lab, {}))[1]
        points[round(at, 3)] = points.get(round(at, 3), 0.0) + value
    return [(lab, np.array(sorted(points)), np.array([points[t] for t in sorted(points)]))
            for lab, points in table.values()]


class _Missed:
    """The window's evaluations the rules missed (module docstring), each made from the raw
    samples by the rules' own PromQL pinned at its instant; ``answered`` the instants where
    any of it found samples."""

    def __init__(self, client: PrometheusClient, instants: Sequence[float], rules_at: Callable[[float], dict[str, str]]):
        self.client, self.instants, self.rules_at = client, tuple(instants), rules_at
        self.answered: set[float] = set()

    @classmethod
    def find(cls, client: PrometheusClient, route: str, sel: str, rules: _Rules, coverage: Coverage) -> _Missed:
        """The slots t_e − jR (j < m) without a heartbeat, from the gaps between heartbeats (a
        gap of k·R misses k − 1); read only when the heartbeat is short of the window's count."""
        assert coverage.last_evaluation is not None
        t_e, m, r = coverage.last_evaluation, coverage.evaluations, rules.r

        def rules_at(at: float) -> dict[str, str]:
            return dict(route_rules(route, sel, rules.resolution, coverage.query_offset, at))

        if coverage.evaluated >= m:
            return cls(client, (), rules_at)
        found = client.samples(f"{rules.names['heartbeat']}{_route_matcher(route)}[{promql_duration(m * r)}]",
                               t_e + r / 2)
        beats = sorted(t for labels, times, values in found if labels.get("selector") == sel
                       for t in times[np.isfinite(values)].tolist())
        missed, before = [], t_e - m * r  # the slot before the window's first
        for beat in beats:
            missed += [round(before + i * r, 3) for i in range(1, round((beat - before) / r))]
            before = beat
        return cls(client, missed, rules_at)

    def rows(self, expr: Callable[[dict[str, str]], str]) -> list[tuple[Labels, float, float]]:
        """(labels, instant, value) of ``expr(the rules at the instant)`` at each missed instant."""
        out: list[tuple[Labels, float, float]] = []
        for i in range(0, len(self.instants), MISSED_PER_QUERY):
            batch = self.instants[i:i + MISSED_PER_QUERY]
            query = " or ".join(f'label_replace({expr(self.rules_at(at))}, "{_MISSED_LABEL}", "{j}", "", "")'
                                for j, at in enumerate(batch))
            for labels, value in self.client.query(query, batch[-1]):
                labels = dict(labels)
                at = batch[int(labels.pop(_MISSED_LABEL))]
                self.answered.add(at)
                out.append((labels, at, value))
        return out

    def note(self, evaluations: int) -> str:
        """What was made, for the window's notes (after every read)."""
        none = len(self.instants) - len(self.answered)
        lost = (f"; {none} found no raw samples (past Prometheus' retention?), their counts are missing"
                if none else "")
        return (f"Prometheus: {len(self.instants)} of the window's {evaluations} rule evaluations are missing from "
                f"the recorded series (first at {self.instants[0]:.3f}; promtool's backfill skips a slot in the "
                f"last second before each 2-hour block, a stopped Prometheus its downtime): each was made from the "
                f"raw samples, the rules' own PromQL at its instant{lost}")


class _Recorded:
    """Whole-window reads of one route's recorded series, at the window's last block end."""

    def __init__(self, client: PrometheusClient, route: str, names: dict[str, str], at: float, window_s: float,
                 shift: float, missed: _Missed | None = None) -> None:
        self.client, self.names, self.at, self.shift, self.route = client, names, at, shift, route
        self.matcher, self.range = _route_matcher(route), f"[{promql_duration(window_s)}]"
        self.missed = missed
        self._sparse: dict[str, _Matrix] = {}

    def total(self, role: str, by: str = "") -> list[tuple[Labels, float]]:
        """``sum by (by)`` of the role's series over the window, with its missed evaluations."""
        grouping = f" by ({by})" if by else ""
        found = self.client.query(f"sum{grouping} (sum_over_time({self.names[role]}{self.matcher}{self.range}))",
                                  self.at)
        if self.missed is None or not found:  # a series the rules did not write stays absent
            return found
        made = self.missed.rows(lambda rules: f"sum{grouping} ({rules[self.names[role]]})")
        summed = _added([(lab, np.array([0.0]), np.array([v])) for lab, v in found],
                        [(lab, 0.0, v) for lab, _, v in made])
        return [(lab, float(values[0])) for lab, _, values in summed]

    def step_shape(self) -> StepShapeWindow:
        running = batch_counts(self.total("engines_by_batch", "batch"))
        samples = sum(running.values())
        pairs = {lab.get("pairs"): int(round(v)) for lab, v in self.total("batch_pairs", "pairs")}
        buckets = {float(lab["le"]): v for lab, v in self.total("iteration_tokens", "le")
                   if "le" in lab and math.isfinite(v)}
        itl_sum, itl_count = self.total("itl_sum"), self.total("itl_count")
        itl_mean = itl_sum[0][1] / itl_count[0][1] if itl_sum and itl_count and itl_count[0][1] > 0 else None
        both = max(pairs.get("both_running", 0), 0)
        return StepShapeWindow(
            batch_time_shares={b: c / samples for b, c in running.items()} if samples else {},
            iteration_tokens=dict(sorted(buckets.items())),
            itl_mean_s=itl_mean if itl_mean is not None and math.isfinite(itl_mean) and itl_mean > 0 else None,
            samples=int(round(samples)), sample_pairs=both,
            repeated_pairs=min(max(pairs.get("batch_kept", 0), 0), both))

    def sparse(self, role: str) -> _Matrix:
        """The samples of a per-engine series that exists only where something happened. A
        staleness marker (NaN: written when the series left the rule's result) is no sample:
        VictoriaMetrics returns vmalert's markers, Prometheus hides its own."""
        if role not in self._sparse:
            found = self.client.samples(f"{self.names[role]}{self.matcher}{self.range}", self.at)
            found = [(labels, times[np.isfinite(values)], values[np.isfinite(values)])
                     for labels, times, values in found]
            if self.missed is not None:  # labelled as the rules label what they record
                record = self.names[role]
                found = _added(found, [({**labels, "__name__": record, "route": self.route}, at, v)
                                       for labels, at, v in self.missed.rows(lambda rules: rules[record])])
            self._sparse[role] = [(labels, times - self.shift, values) for labels, times, values in found]
        return self._sparse[role]

    def engines_of(self, q: RouteQueries, r: float) -> Callable[[int, float, float], list[Labels]]:
        """engines_of(g, start, end) for gamma_segments: the engines at γ g at the span's first
        and last evaluation (raw instants), and those that took γ g inside it (a γ change or a
        first sighting) — every engine that was at g in the span, without scanning it."""
        def of(g: int, start: float, end: float) -> list[Labels]:
            found: dict[tuple[tuple[str, str], ...], Labels] = {}
            for at in (start + r / 2, end - r / 2):
                for labels, _ in self.client.query(f"{q.gamma_of_engines()} == {g}", at):
                    found[_key(labels)] = labels
            for role in ("gamma_changes", "first_seen"):
                for labels, times, values in self.sparse(role):
                    if np.any((values == g) & (times > start) & (times <= end)):
                        engine = {k: v for k, v in labels.items() if k not in ("__name__", "route")}
                        found.setdefault(_key(engine), engine)
            return list(found.values())
        return of

    def events(self) -> list[Event]:
        """Restarts and γ changes at the evaluations that saw them (one each per engine)."""
        out: list[Event] = []
        for role, kind in (("restarts", "restart"), ("gamma_changes", "gamma_change")):
            for labels, times, values in self.sparse(role):
                ref: EngineRef = engine_ref(labels)
                for t, v in zip(times.tolist(), values.tolist()):
                    detail = ("counter reset or new gamma since the previous rule evaluation" if kind == "restart"
                              else f"gamma changed to {v:g} since the previous rule evaluation")
                    extra = {"gamma": int(v)} if kind == "gamma_change" else {}
                    out.append(Event(float(t), ref.target, ref.model_name, ref.engine, kind, detail,
                                     {**extra, "labels": labels}))
        out.sort(key=lambda e: (e.time, e.target, e.engine or "", e.kind))
        return out


__all__ = ["prometheus_window", "Coverage", "MIN_COVERAGE"]
