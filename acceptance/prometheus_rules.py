"""The recorded series specdec's Prometheus source reads instead of raw samples: their names
and PromQL, one group per route evaluated every RESOLUTION (docs/REFERENCE.md, Reading through Prometheus).

A week of raw counters is 40,320 samples per series at 15 s, times (γ + 3) series per
engine; a tune through raw ``increase`` queries scans them all (29.8 s for 200 engines,
README). These rules keep, per route and per evaluation, what the windows need and no
more — per γ and position, the interval's exact increase summed over the route's engines
— so a week is 10,080 points per series at 1 m, summed into blocks by ``sum_over_time``.

Exact, not extrapolated: each evaluation records, per engine, ``x − x offset R`` (R = the
group's interval), so the evaluations of a window telescope to the counter's change over
it, as the store's deltas do (acceptance/store/deltas.py), instead of ``increase``'s
extrapolated edges. Per engine, before summing:

* restarted = γ differs from R ago (vLLM fixes γ at engine start) or the drafts counter
  went down: the increase is the new value (Prometheus' reset rule, the store's too);
* first sighting (no sample R ago): a baseline only, nothing counted;
* the engine's γ at the evaluation labels its counts (``count_values without ()``): counts
  are never summed across γ.

Read QUERY_OFFSET (D, default 10 s) in the past: an evaluation at t records the change over
(t − R − D, t − D], ``x offset D − x offset (R + D)``. Prometheus stamps a sample at its
scrape's start but stores it at the scrape's end; read at t itself, a scrape in flight is
not there yet, the next evaluation's ``offset R`` finds it, and its counts fall between two
evaluations, lost — a different share for each rule, as each is evaluated at its own
moment, so an ITL sum and count lost unequally bias the mean (seen: 10% on a loaded
2-core machine; a target whose scrapes always straddle the group's phase would lose a
scrape's worth every evaluation). D at least the scrape timeout makes every sample stored
before it is read (Prometheus 2.53+'s group ``query_offset`` does the same, but 2.42, what
Debian ships, refuses that key). The heartbeat's label ``query_offset`` tells the source D.

Series per route (what the rules add to Prometheus): (γ + 3) per γ in use
(``specdec:route_spec_decode:delta<R>``), one per batch size seen, two batch-pair counts, two
ITL sums over the route and two per γ in use (each segment's own latency), one per
iteration-token bucket, the heartbeat, and per-engine restart, γ-change and
first-sighting series that exist only in the evaluations where that happened (with the
engines at γ at a segment's ends, they name its engines without a scan of raw samples).
"""

from __future__ import annotations

import json
import re

from . import vllm_metrics as vm
from .errors import InputError

RESOLUTION = "1m"
# Prometheus' default scrape_timeout: a sample stamped at a scrape's start is stored by then.
QUERY_OFFSET = "10s"
_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h)$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


# At most Prometheus' default lookback (5 m): the source finds the newest evaluation with an
# instant selector, which sees only that far back.
MAX_RESOLUTION_S = 300.0
HEARTBEAT_PREFIX = "specdec:route_window_rules:up"


def _seconds(text: str, lowest_s: float, what: str, example: str) -> float:
    """``text``, one Prometheus duration unit (ms, s, m or h), in seconds, from ``lowest_s`` to 5 m."""
    m = _DURATION.match(text) if isinstance(text, str) else None
    seconds = int(m.group(1)) * _SECONDS[m.group(2)] if m else -1.0
    if not lowest_s <= seconds <= MAX_RESOLUTION_S:
        raise InputError(f"rules {what} {text!r}: expected a Prometheus duration from {lowest_s:g}s to 5m, "
                         f"like {example}")
    return seconds


def resolution_seconds(resolution: str) -> float:
    """``1m`` → 60.0; a resolution is 1 s to 5 m."""
    return _seconds(resolution, 1.0, "resolution", "1m")


def query_offset_seconds(query_offset: str) -> float:
    """``10s`` → 10.0; a query offset is 0 s to 5 m (0 s: none)."""
    return _seconds(query_offset, 0.0, "query offset", QUERY_OFFSET)


def _duration(seconds: float) -> str:
    """A PromQL duration: whole seconds as ``70s``, else milliseconds."""
    return f"{seconds:.0f}s" if seconds == int(seconds) else f"{seconds * 1000:.0f}ms"


def series_names(resolution: str = RESOLUTION) -> dict[str, str]:
    """The recorded series' names at ``resolution``, by role."""
    r = resolution
    return {
        "heartbeat": f"{HEARTBEAT_PREFIX}{r}",
        "spec_decode": f"specdec:route_spec_decode:delta{r}",
        "engines_by_batch": f"specdec:route_engines_by_batch:count{r}",
        "engines_by_batch_by_gamma": f"specdec:route_engines_by_batch_by_gamma:count{r}",
        "batch_pairs": f"specdec:route_batch_pairs:count{r}",
        "itl_sum": f"specdec:route_inter_token_latency_seconds_sum:delta{r}",
        "itl_count": f"specdec:route_inter_token_latency_seconds_count:delta{r}",
        "itl_sum_by_gamma": f"specdec:route_inter_token_latency_seconds_sum_by_gamma:delta{r}",
        "itl_count_by_gamma": f"specdec:route_inter_token_latency_seconds_count_by_gamma:delta{r}",
        "iteration_tokens": f"specdec:route_iteration_tokens_bucket:delta{r}",
        "restarts": f"specdec:engine_restarts:delta{r}",
        "gamma_changes": f"specdec:engine_gamma_changes:delta{r}",
        "first_seen": f"specdec:engine_first_seen_gamma:delta{r}",
    }


class _Rules:
    """The PromQL of one route's window rules (selector SEL, resolution R); with ``at``, every
    selector pinned there (``@``): what the evaluation at ``at`` records, whenever it is queried."""

    def __init__(self, selector: str, resolution: str, query_offset: str = "0s", at: float | None = None):
        self.sel, self.r = selector, resolution
        self.per_pos = f"{vm.ACCEPTED_PER_POSITION}_total{selector}"
        # "now" is query_offset before the evaluation, "before" R earlier still (module docstring)
        offset_s = query_offset_seconds(query_offset)
        pinned = f" @ {at:.3f}" if at is not None else ""
        self.now = pinned + (f" offset {query_offset}" if offset_s else "")
        self.before = pinned + (f" offset {_duration(resolution_seconds(resolution) + offset_s)}" if offset_s
                                else f" offset {resolution}")

    def gamma(self, offset: bool = False) -> str:
        """γ of each engine: the number of its position series (labels: the engine's)."""
        return f"count without ({vm.POSITION_LABEL}) ({self.per_pos}{self.before if offset else self.now})"

    def restarted(self) -> str:
        drafts = f"{vm.DRAFTS}_total{self.sel}"
        return (f"(({self.gamma()} != {self.gamma(True)}) or "
                f"sum without () ({drafts}{self.now} < {drafts}{self.before}))")

    def delta(self, series: str, restarts: str) -> str:
        """Per series: x − x R ago; after a restart (``restarts``, per engine) the new value."""
        now, before = f"{series}{self.now}", f"{series}{self.before}"
        return (f"((({now} - {before}) >= 0 unless ignoring({vm.POSITION_LABEL}, le) {restarts})"
                f" or (sum without () ({now}) and ignoring({vm.POSITION_LABEL}, le) {restarts}))")

    def own_drop(self, series: str) -> str:
        """A counter that is not spec decode's: it restarted where it went down."""
        return f"sum without () ({series}{self.now} < {series}{self.before})"

    def spec_decode(self) -> str:
        restarts = self.restarted()
        tagged = [self.delta(self.per_pos, restarts)] + [
            f'label_replace({self.delta(f"{name}_total{self.sel}", restarts)}, "{vm.POSITION_LABEL}", "{tag}", "", "")'
            for name, tag in ((vm.DRAFTS, "drafts"), (vm.DRAFT_TOKENS, "draft_tokens"),
                              (vm.ACCEPTED_TOKENS, "accepted_tokens"))]
        return (f"sum by (gamma, {vm.POSITION_LABEL}) (({' or '.join(tagged)}) * ignoring({vm.POSITION_LABEL}, gamma) "
                f'group_left(gamma) count_values without () ("gamma", {self.gamma()}))')

    def counter_sum(self, series: str, by: str = "") -> str:
        return f"sum{f' by ({by})' if by else ''} ({self.delta(series, self.own_drop(series))})"

    def by_gamma(self, series: str) -> str:
        """A counter's exact increase summed over the engines at each γ (label gamma), as
        spec_decode's counts are: each γ segment's own share, a probe's apart from the fleet's."""
        return (f"sum by (gamma) ({self.delta(series, self.own_drop(series))} * ignoring(gamma) "
                f'group_left(gamma) count_values without () ("gamma", {self.gamma()}))')

    def batch_by_gamma(self) -> str:
        """The engines running B requests (label batch, B ≥ 1) at each γ (label gamma): each γ
        segment's own gauge samples, a probe's batch mix apart from the fleet's."""
        return (f'sum by (gamma, batch) (count_values without () ("batch", {self.running()} > 0) '
                f'* ignoring(batch, gamma) group_left(gamma) count_values without () ("gamma", {self.gamma()}))')

    def running(self, offset: bool = False) -> str:
        return f"round({vm.NUM_REQUESTS_RUNNING}{self.sel}{self.before if offset else self.now})"

    def batch_pairs(self) -> str:
        """Engines running now and R ago (pairs="both_running") and those whose batch size also
        held (pairs="batch_kept"): StepShapeWindow.sample_pairs and repeated_pairs."""
        now, before = self.running(), self.running(True)
        return (f'label_replace(count(({now} > 0) and ({before} > 0)), "pairs", "both_running", "", "") or '
                f'label_replace(count(({now} > 0) and ({now} == {before})), "pairs", "batch_kept", "", "")')


def route_rules(route: str, selector: str, resolution: str = RESOLUTION,
                query_offset: str = QUERY_OFFSET, at: float | None = None) -> list[tuple[str, str]]:
    """(record name, PromQL) of one route's window rules; every one carries label route.
    ``at``: each rule's evaluation at that instant, its selectors pinned there (``@``), so an
    evaluation the rules missed can be made afterwards from the raw samples
    (acceptance.prometheus_recorded)."""
    resolution_seconds(resolution)
    q = _Rules(selector, resolution, query_offset, at)
    names = series_names(resolution)
    itl = vm.INTER_TOKEN_LATENCY
    return [
        (names["heartbeat"], "vector(1)"),
        (names["spec_decode"], q.spec_decode()),
        (names["engines_by_batch"], f'count_values("batch", {q.running()} > 0)'),
        (names["engines_by_batch_by_gamma"], q.batch_by_gamma()),
        (names["batch_pairs"], q.batch_pairs()),
        (names["itl_sum"], q.counter_sum(f"{itl}_sum{selector}")),
        (names["itl_count"], q.counter_sum(f"{itl}_count{selector}")),
        (names["itl_sum_by_gamma"], q.by_gamma(f"{itl}_sum{selector}")),
        (names["itl_count_by_gamma"], q.by_gamma(f"{itl}_count{selector}")),
        (names["iteration_tokens"], q.counter_sum(f"{vm.ITERATION_TOKENS}_bucket{selector}", by="le")),
        (names["restarts"], f"{q.restarted()} * 0 + 1"),
        (names["gamma_changes"], f"{q.gamma()} != {q.gamma(True)}"),
        (names["first_seen"], f"{q.gamma()} unless {q.gamma(True)}"),
    ]


def window_rule_groups(routes: dict[str, str], resolution: str = RESOLUTION,
                       query_offset: str = QUERY_OFFSET) -> list[str]:
    """YAML lines of one rule group per route, evaluated every ``resolution`` (the group's own
    interval, whatever the server's evaluation_interval). The heartbeat carries the selector
    the rules were written for (the source checks it against the route's current one) and
    their query offset (the source dates what they counted by it)."""
    heartbeat = series_names(resolution)["heartbeat"]
    lines = []
    for route in sorted(routes):
        selector = routes[route]
        lines += [f"  - name: {json.dumps(f'specdec-window-{route}', ensure_ascii=False)}",
                  f"    interval: {resolution}", "    rules:"]
        for record, expr in route_rules(route, selector, resolution, query_offset):
            lines += [f"      - record: {json.dumps(record)}",
                      f"        expr: {json.dumps(expr, ensure_ascii=False)}",
                      "        labels:",
                      f"          route: {json.dumps(route, ensure_ascii=False)}"]
            if record == heartbeat:
                lines.append(f"          selector: {json.dumps(selector, ensure_ascii=False)}")
                if query_offset_seconds(query_offset):
                    lines.append(f"          query_offset: {json.dumps(query_offset)}")
    return lines


__all__ = ["RESOLUTION", "QUERY_OFFSET", "HEARTBEAT_PREFIX", "resolution_seconds", "query_offset_seconds", "series_names", "route_rules", "window_rule_groups"]
