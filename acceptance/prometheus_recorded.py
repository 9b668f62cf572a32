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

Found by name (the heartbeat ``specdec:route_window_rules:up<R>{route}``) and used only when
it covers the window: evaluated in at least MIN_COVERAGE of the window's evaluations
(rule evaluations Prometheus missed lose their minutes' counts, not the ratios) and not in
more than it has (a backfill that overlaps the live rules, at another phase, would count
increases twice), evaluated last at most two evaluations before its end (rules that stopped
would leave its end out), and written for the route's current selector (the heartbeat
carries it).
"""

from __future__ import annotations

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
)
from .prometheus_http import Labels
from .prometheus_rules import HEARTBEAT_PREFIX, query_offset_seconds, resolution_seconds, series_names
from .store import EngineRef, Event
from . import vllm_metrics as vm
from .windows import GammaSegment, StepShapeWindow

MIN_COVERAGE = 0.99

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


@dataclass(frozen=True)
class _Rules:
    """The route's recording rules at one resolution: evaluated ``r`` seconds apart, writing
    the series ``names`` (by role: acceptance.prometheus_rules.series_names)."""

    r: float
    names: dict[str, str]


def prometheus_window(source: object, route: str, selector: str, start: float, end: float, *, max_blocks: int = 200,
                      timeout_s: float | None = None) -> PrometheusWindow:
    """The route's window (start, end]: from the recorded series when they cover it, else raw.
    ``timeout_s``: one query's deadline (default: the source's ``timeout_s``, else 10 s)."""
    check_window(start, end, max_blocks)
    sel = normalise_selector(selector)
    client = PrometheusClient(source, timeout_s=timeout_s, selector=sel)
    coverage = Coverage(why_not=f"no recorded series for route {route!r} (no {HEARTBEAT_PREFIX}<R>)")
    for resolution in _resolutions(client, route, end):  # the finest that covers the window
        rules = _Rules(names=series_names(resolution), r=resolution_seconds(resolution))
        coverage = _coverage(client, route, sel, start, end, rules.r, rules.names["heartbeat"])
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


def _coverage(client: PrometheusClient, route: str, sel: str, start: float, end: float, r: float,
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
    return Coverage(t_e, evaluations, query_offset_s=offset_s)


def _block_plan(evaluations: int, max_blocks: int) -> tuple[int, int, int]:
    """(k evaluations per block, n whole blocks, remainder in the oldest block)."""
    k = max(1, math.ceil(evaluations / max_blocks))
    n = evaluations // k
    return k, n, evaluations - n * k


def _recorded_window(client: PrometheusClient, route: str, sel: str, start: float, end: float, rules: _Rules,
                     coverage: Coverage, max_blocks: int) -> PrometheusWindow:
    r, names = rules.r, rules.names
    k, n, remainder = _block_plan(coverage.evaluations, max_blocks)
    block = k * r
    assert coverage.last_evaluation is not None  # a Coverage without why_not has one (_coverage)
    last_end, shift = coverage.last_evaluation + r / 2, coverage.query_offset_s
    blocks = _Blocks(client, _route_matcher(route), last_end, n, block, remainder * r, shift)
    series = blocks.summed(names["spec_decode"], f"gamma, {vm.POSITION_LABEL}")
    latency = blocks.latency(names)
    batches = blocks.summed(names["engines_by_batch_by_gamma"], "gamma, batch")
    q = RouteQueries(sel, block)
    window_s = coverage.evaluations * r
    recorded = _Recorded(client, route, names, last_end, window_s, shift)
    engines_of = recorded.engines_of(q, r)
    found = []
    for g in gammas_in(client, [s for s in series if "gamma" in s[0]]):
        rows = block_rows([s for s in series if s[0].get("gamma") == str(g)], g, client=client)
        own = [s for s in latency if s[0].get("gamma") == str(g)]
        own_batches = [s for s in batches if s[0].get("gamma") == str(g)]
        for segment, labs in gamma_segments(engines_of, g, rows, blocks.starts(rows), block):
            segment = checked_segment(client, segment, len(labs))
            found.append((replace(segment, batch_samples=_batch_samples(own_batches, segment) if batches else None,
                                  **segment_latency(own, segment)), labs))
    segments, engine_labels = in_time_order(found)
    notes = [f"Prometheus: read from the recorded series {names['spec_decode']} (specdec rules, "
             f"{coverage.evaluations} evaluations {r:g} s apart, {n + bool(remainder)} blocks)"]
    shape = recorded.step_shape()
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
        segments=segments, events=recorded.events(), step_shape=shape,
        engine_labels=engine_labels, not_speculating=not_speculating(client, q, end),
        queries=client.queries, recorded=names["spec_decode"], notes=notes + client.notes())


def _batch_samples(series: Sequence[tuple[Labels, np.ndarray, np.ndarray]], segment: GammaSegment) -> dict[int, float]:
    """{B: the recorded gauge samples of the segment's γ over its blocks} (label batch)."""
    return batch_counts(({"batch": b}, n) for b, n in segment_block_sums(series, segment, "batch").items())


@dataclass(frozen=True)
class _Blocks:
    """The window's blocks of recorded series: n whole blocks ending at last_end, ``block`` s
    apart (one range query), and the oldest holding the remainder (one instant query). Their
    times are what the evaluations counted up to: ``shift`` (the rules' query offset) before."""

    client: PrometheusClient
    matcher: str
    last_end: float
    n: int
    block: float
    remainder_s: float
    shift: float = 0.0

    def summed(self, record: str, by: str) -> _Matrix:
        """(labels, block ends, values) of ``sum by (by) (sum_over_time(record[block]))``."""
        return self._per_block(lambda span: self._sum(record, by, span))

    def latency(self, names: dict[str, str]) -> _Matrix:
        """Each γ's ITL sum and count per block, in one query (label part = sum | count, as
        RouteQueries.block_latency)."""
        return self._per_block(lambda span: " or ".join(
            f'label_replace({self._sum(names[f"itl_{part}_by_gamma"], "gamma", span)}, "part", "{part}", "", "")'
            for part in ("sum", "count")))

    def _sum(self, record: str, by: str, span: str) -> str:
        return f"sum by ({by}) (sum_over_time({record}{self.matcher}[{span}]))"

    def _per_block(self, expr: Callable[[str], str]) -> _Matrix:
        """``expr(span)`` at every whole block's end (one range query) and over the remainder
        at the oldest block's end (one instant query)."""
        series = (self.client.query_range(expr(promql_duration(self.block)), self.last_end - (self.n - 1) * self.block,
                                          self.last_end + 1e-6, self.block) if self.n else [])
        if self.remainder_s:
            oldest_end = self.last_end - self.n * self.block
            series = series + [(lab, np.array([oldest_end]), np.array([v]))
                               for lab, v in self.client.query(expr(promql_duration(self.remainder_s)), oldest_end)]
        return [(lab, times - self.shift, values) for lab, times, values in series]

    def starts(self, rows: Iterable[float]) -> dict[float, float]:
        """Block end → its start, for the block ends in ``rows``."""
        oldest_end = self.last_end - self.n * self.block - self.shift
        return {t: oldest_end - self.remainder_s if self.remainder_s and t == round(oldest_end, 3) else t - self.block
                for t in rows}


def _key(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


class _Recorded:
    """Whole-window reads of one route's recorded series, at the window's last block end."""

    def __init__(self, client: PrometheusClient, route: str, names: dict[str, str], at: float, window_s: float,
                 shift: float) -> None:
        self.client, self.names, self.at, self.shift = client, names, at, shift
        self.matcher, self.range = _route_matcher(route), f"[{promql_duration(window_s)}]"
        self._sparse: dict[str, _Matrix] = {}

    def total(self, role: str, by: str = "") -> list[tuple[Labels, float]]:
        grouping = f" by ({by})" if by else ""
        return self.client.query(f"sum{grouping} (sum_over_time({self.names[role]}{self.matcher}{self.range}))",
                                 self.at)

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
            self._sparse[role] = [(labels, times[np.isfinite(values)] - self.shift, values[np.isfinite(values)])
                                  for labels, times, values in found]
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
