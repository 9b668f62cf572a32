"""A route's window read through a Prometheus server's HTTP API (docs/DESIGN.md, Scale).

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
* Events: restarts from ``resets()`` of the drafts counter per block (time = the block's
  end; its range reaches 1.5 scrape intervals into the previous block so a drop between two
  blocks is seen; a reset seen by consecutive blocks is reported once — two restarts of one
  engine in adjacent blocks read as one), γ changes where ``G`` differs from ``G offset B``.

Errors: ``PrometheusError`` (a ``SourceError``), one line naming the URL — an unreachable
server, a bad HTTP status, an ``"status": "error"`` document, a token variable that is not
set. The bearer token is read from the environment variable the config names and is never
put in a message or a repr.
"""

from __future__ import annotations

import json
import math
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from . import vllm_metrics as vm
from .errors import InputError
from .counts import IntervalCounts
from .fetch import SourceError, UnreachableError, _one_line, mask_userinfo
from .store import EngineRef, Event, TargetStatus
from .windows import GammaSegment, SegmentRules, StepShapeWindow

# A block must hold several samples of every engine: increase() needs two, and with three
# scrape intervals at most about a third of a block is extrapolated at its edges.
MIN_SCRAPES_PER_BLOCK = 3
# The batch-mix subquery samples the gauge at the scrape interval, but at most this many
# times per engine over the window (a week at 15 s would be 40,320 points per engine).
MAX_BATCH_SAMPLES_PER_ENGINE = 2000
# The scrape interval is estimated from the samples of the last this-many seconds.
SCRAPE_INTERVAL_PROBE_S = 600.0
_USER_AGENT = "specdec-prometheus/0.1"
_MAX_RESPONSE_BYTES = 64 << 20


class PrometheusError(SourceError):
    """Prometheus could not be read; the message is one line naming the server URL."""


class PrometheusUnreachable(PrometheusError, UnreachableError):
    """Prometheus gave no answer: not reached, timed out, or an HTTP error (exit status 3)."""


@dataclass(frozen=True)
class PrometheusSettings:
    """The config's [source] for kind = "prometheus" (specdec.config.PrometheusSource has the
    same two attributes and is accepted wherever this is)."""

    url: str
    bearer_token_env: str | None = None



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


# ----------------------------------------------------------------------------- client

class _Redirected(urllib.error.URLError):
    def __init__(self, location: str):
        super().__init__(f"redirect to {location}")
        self.location = location


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """No redirect is followed: urllib would send the Authorization header to wherever a
    3xx points, another origin included."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise _Redirected(newurl)


_NO_REDIRECTS = urllib.request.build_opener(_RefuseRedirects)


class PrometheusClient:
    """query / query_range against ``settings.url`` + /api/v1 with urllib (POST forms)."""

    def __init__(self, settings, *, timeout_s: float = 10.0):
        url = getattr(settings, "url", None)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise PrometheusError(f"prometheus url must be an http(s) URL, got {url!r}")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise InputError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        self.url = url.rstrip("/")
        self.shown_url = mask_userinfo(self.url)  # what messages print
        self.timeout_s = float(timeout_s)
        env = getattr(settings, "bearer_token_env", None)
        self._token: str | None = None
        if env:
            token = os.environ.get(env)
            if not token:
                raise PrometheusError(
                    f"prometheus {self.url}: bearer_token_env names {env!r}, which is not set in the environment")
            self._token = token.strip()
        self.queries = 0  # how many requests this client made (benchmarks report it)

    def __repr__(self) -> str:  # never shows the token
        return f"PrometheusClient({self.shown_url!r}, token={'set' if self._token else 'none'})"

    def _scrub(self, text: str) -> str:
        """The text with the token (in any case) and the URL's password masked."""
        text = text.replace(self.url, self.shown_url)
        if self._token:
            text = re.sub(re.escape(self._token), "***", text, flags=re.IGNORECASE)
        return text

    def _fail(self, what: str, kind: type[PrometheusError] = PrometheusError) -> PrometheusError:
        return kind(self._scrub(_one_line(f"prometheus {self.url}: {what}")))

    def _request(self, endpoint: str, params: dict) -> object:
        self.queries += 1
        body = urllib.parse.urlencode(params).encode()
        req = urllib.request.Request(f"{self.url}/api/v1/{endpoint}", data=body, method="POST")
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", _USER_AGENT)
        if self._token:
            req.add_header("Authorization", f"Bearer {self._token}")
        try:
            with _NO_REDIRECTS.open(req, timeout=self.timeout_s) as resp:
                raw = resp.read(_MAX_RESPONSE_BYTES + 1)
        except _Redirected as e:
            raise self._fail(f"/api/v1/{endpoint} redirects to {mask_userinfo(e.location)}: redirects are not "
                             f"followed (the token must not go elsewhere); set [prometheus] url to the final address"
                             ) from None
        except urllib.error.HTTPError as e:
            detail, etype = "", None
            try:  # Prometheus answers errors with {"status": "error", "errorType", "error"}
                doc = json.loads(e.read(65536) or b"{}")
                if isinstance(doc, dict) and doc.get("error"):
                    etype = doc.get("errorType", "error")
                    detail = f": {etype}: {doc['error']}"
            except (ValueError, OSError):
                pass
            if e.code == 400 and etype == "bad_data":  # the server answered: the query is wrong, and
                # every query is built on the route's selector, the one part the user writes
                raise self._fail(f"HTTP 400 from /api/v1/{endpoint}{detail}; check the route's selector "
                                 f"(PromQL label matchers such as {{job=\"vllm\"}})") from None
            raise self._fail(f"HTTP {e.code} {e.reason} from /api/v1/{endpoint}{detail}", PrometheusUnreachable) from None
        except urllib.error.URLError as e:
            raise self._fail(f"cannot reach the server ({e.reason})", PrometheusUnreachable) from None
        except (TimeoutError, OSError) as e:
            raise self._fail(f"request failed ({type(e).__name__}: {e})", PrometheusUnreachable) from None
        if len(raw) > _MAX_RESPONSE_BYTES:
            raise self._fail(f"/api/v1/{endpoint} answered more than {_MAX_RESPONSE_BYTES >> 20} MiB")
        try:
            doc = json.loads(raw)
        except ValueError:
            raise self._fail(f"/api/v1/{endpoint} did not answer JSON (is this a Prometheus server?)") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            err = doc.get("error", "no error text") if isinstance(doc, dict) else "not an object"
            etype = doc.get("errorType", "error") if isinstance(doc, dict) else "error"
            raise self._fail(f"/api/v1/{endpoint} failed: {etype}: {err}")
        data = doc.get("data")
        if not isinstance(data, dict) or "result" not in data:
            raise self._fail(f"/api/v1/{endpoint} answered without data.result")
        return data

    def query(self, expr: str, at: float) -> list[tuple[dict, float]]:
        """An instant vector at ``at``: [(labels, value)]."""
        data = self._request("query", {"query": expr, "time": f"{at:.3f}"})
        if data.get("resultType") != "vector":
            raise self._fail(f"query answered a {data.get('resultType')!r}, expected a vector")
        return [(r.get("metric", {}), float(r["value"][1])) for r in data["result"]]

    def query_range(self, expr: str, start: float, end: float, step: float
                    ) -> list[tuple[dict, np.ndarray, np.ndarray]]:
        """A range vector: [(labels, times (n,), values (n,))] for steps start, start+step, ... ≤ end."""
        # nocache=1: VictoriaMetrics would otherwise align start and end to multiples of the
        # step (for its cache) and the blocks would not end where asked; Prometheus ignores it.
        data = self._request("query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                             "step": f"{step:.3f}", "nocache": "1"})
        return self._matrix(data, "query_range")

    def samples(self, selector_with_range: str, at: float) -> list[tuple[dict, np.ndarray, np.ndarray]]:
        """The raw samples of ``series[range]`` at ``at``: [(labels, times, values)]."""
        return self._matrix(self._request("query", {"query": selector_with_range, "time": f"{at:.3f}"}), "query")

    def _matrix(self, data: dict, endpoint: str) -> list[tuple[dict, np.ndarray, np.ndarray]]:
        if data.get("resultType") != "matrix":
            raise self._fail(f"{endpoint} answered a {data.get('resultType')!r}, expected a matrix")
        out = []
        for r in data["result"]:
            vals = r.get("values", [])
            out.append((r.get("metric", {}), np.array([float(v[0]) for v in vals]),
                        np.array([float(v[1]) for v in vals])))
        return out


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
    engine_labels: list[list[dict]] = field(default_factory=list)
    not_speculating: list[EngineRef] = field(default_factory=list)
    target_status: list[TargetStatus] = field(default_factory=list)  # Prometheus scrapes, not us
    targets: list[str] = field(default_factory=list)
    queries: int = 0
    recorded: str | None = None  # the recorded series read (acceptance.prometheus_rules), None: raw samples
    notes: list[str] = field(default_factory=list)  # how the window was read, for the output

    @property
    def plugin(self) -> None:
        """specdec's plugin series are not queried through Prometheus (yet): none."""
        return None

    @property
    def step_sequences(self) -> None:
        """Blocks of increase() are not requests: no drafted steps to replay."""
        return None


def _counter(name: str) -> str:
    return f"{name}_total"


def engine_ref(labels: dict) -> EngineRef:
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

    def segment_batch(self, g: int, span_s: float, sample_s: float) -> str:
        """Gauge samples by batch size (label batch, B ≥ 1) of the engines at γ g over the span
        ending at the evaluation: a segment's own batch mix, apart from the other γ's (a
        canary's traffic can differ from the fleet's)."""
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
    gaps = [np.diff(times) for _, times, _ in series if times.size >= 2]
    if not gaps:
        return None
    return float(np.median(np.concatenate(gaps)))


def _plan_blocks(start: float, end: float, scrape_s: float | None, max_blocks: int,
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


def prometheus_route_window(source, selector: str, start: float, end: float, *, max_blocks: int = 200,
                            timeout_s: float = 10, block_s: float | None = None) -> PrometheusWindow:
    """The route's window (start, end] from Prometheus as γ segments of block rows.

    ``source``: PrometheusSettings (or the config's PrometheusSource); ``selector``: the
    route's PromQL label matchers; ``max_blocks``: at most this many blocks (rows);
    ``block_s``: force the block length (default: window / max_blocks, but at least
    MIN_SCRAPES_PER_BLOCK scrape intervals).
    """
    check_window(start, end, max_blocks)
    if block_s is not None and not (isinstance(block_s, (int, float)) and 0.001 <= block_s <= end - start):
        raise InputError(f"block_s {block_s!r} must be between 1 ms and the window length")
    return raw_window(PrometheusClient(source, timeout_s=timeout_s), normalise_selector(selector), start, end,
                      max_blocks=max_blocks, block_s=block_s)


def raw_window(client: PrometheusClient, sel: str, start: float, end: float, *, max_blocks: int = 200,
               block_s: float | None = None) -> PrometheusWindow:
    """prometheus_route_window's reading, by raw increase() queries through ``client``
    (``sel`` normalised, the arguments checked)."""
    window_s = end - start
    scrape_s = scrape_interval(client, sel, end, window_s)
    n, block = _plan_blocks(start, end, scrape_s, max_blocks, block_s)
    q = RouteQueries(sel, block)
    first_end = end - (n - 1) * block

    def rng(expr):
        return client.query_range(expr, first_end, end + 1e-6, block)

    gamma_series = rng(q.gammas())
    found = []
    for labels, _, _ in sorted(gamma_series, key=lambda r: int(float(r[0].get("gamma", "0")))):
        g = int(float(labels["gamma"]))
        if g >= 1:
            found += _gamma_segments(client, q, g, rng(q.block_counts(g)), block, rng(q.block_latency(g)), scrape_s)
    segments, engine_labels = in_time_order(found)
    reach = block + 1.5 * (scrape_s or 0.0)
    events = _events(rng(q.restarts(reach)), rng(q.gamma_changes()), block)
    shape = _step_shape(client, sel, end, window_s, scrape_s)
    return PrometheusWindow(
        url=client.url, selector=sel, start=float(start), end=float(end), block_s=block,
        scrape_interval_s=scrape_s, segments=segments, events=events, step_shape=shape,
        engine_labels=engine_labels, not_speculating=not_speculating(client, q, end), queries=client.queries,
    )


def in_time_order(found: list[tuple[GammaSegment, list[dict]]]) -> tuple[list[GammaSegment], list[list[dict]]]:
    """(segments, their engines' label sets) from gamma_segments' pairs, oldest first."""
    found = sorted(found, key=lambda pair: (pair[0].start, pair[0].end, pair[0].gamma))
    return [seg for seg, _ in found], [labs for _, labs in found]


def not_speculating(client: PrometheusClient, q: RouteQueries, at: float) -> list[EngineRef]:
    """Engines of the route that run (num_requests_running) without spec-decode series at ``at``."""
    return sorted(engine_ref(lab) for lab, _ in client.query(
        f"{vm.NUM_REQUESTS_RUNNING}{q.sel} unless {q.gamma_of_engines()}", at))


def _gamma_segments(client: PrometheusClient, q: RouteQueries, g: int, series, block: float, latency=(),
                    scrape_s: float | None = None):
    """Rows of one γ from the block_counts matrix, cut into segments at gaps, each with its
    own latency from the block_latency matrix and its own gauge samples (segment_batch)."""
    rows = block_rows(series, g)

    def engines_of(g: int, start: float, end: float) -> list[dict]:  # at γ g at some block end
        return [lab for lab, _ in client.query(q.segment_engines(g, end - start), end)]

    def batch_samples(segment: GammaSegment) -> dict[int, float]:
        span = segment.end - segment.start
        return batch_counts(client.query(q.segment_batch(g, span, _sample_step(scrape_s, span)), segment.end))

    for segment, labs in gamma_segments(engines_of, g, rows, {t: t - block for t in rows}, block):
        yield replace(segment, batch_samples=batch_samples(segment), **segment_latency(latency, segment)), labs


def segment_latency(latency, segment: GammaSegment) -> dict:
    """{itl_sum_s, itl_count}: Σ of the block_latency series over the segment's blocks."""
    sums = segment_block_sums(latency, segment, "part")
    return {"itl_sum_s": sums.get("sum", 0.0), "itl_count": sums["count"]} if sums.get("count", 0) > 0 else {}


def batch_counts(histogram) -> dict[int, float]:
    """{B: samples}, by B, of a gauge histogram's (labels, samples) pairs (label batch, from
    ``count_values``); batch sizes without samples left out."""
    counts = {int(float(labels["batch"])): v for labels, v in histogram if "batch" in labels and v > 0}
    return dict(sorted(counts.items()))


def segment_block_sums(series, segment: GammaSegment, label: str) -> dict[str, float]:
    """{value of ``label``: Σ of the (labels, block ends, values) ``series`` over the segment's
    blocks}, positive finite values only."""
    ends = set(np.round(segment.intervals.end, 3).tolist())
    sums: dict[str, float] = defaultdict(float)
    for labels, times, values in series:
        if label in labels:
            sums[labels[label]] += sum(v for t, v in zip(np.round(times, 3).tolist(), values.tolist())
                                       if t in ends and math.isfinite(v) and v > 0)
    return dict(sums)


def block_rows(series, g: int) -> dict[float, np.ndarray]:
    """{block end: [D, T, A, A_1..A_γ]} from series labelled position = drafts | draft_tokens |
    accepted_tokens | k − 1; blocks with nothing in them are left out."""
    column = {"drafts": 0, "draft_tokens": 1, "accepted_tokens": 2}
    column.update({str(k): 3 + k for k in range(g)})
    rows: dict[float, np.ndarray] = defaultdict(lambda: np.zeros(3 + g))
    for labels, times, values in series:
        col = column.get(labels.get(vm.POSITION_LABEL))
        if col is None:
            continue  # a position ≥ γ cannot be γ's; ignore anything unexpected
        for t, v in zip(times.tolist(), values.tolist()):
            if math.isfinite(v):
                rows[round(t, 3)][col] = max(v, 0.0)
    return {t: r for t, r in sorted(rows.items()) if r.any()}


def gamma_segments(engines_of, g: int, rows: dict[float, np.ndarray], starts: dict[float, float], block: float):
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


def _events(restarts, gamma_changes, block: float) -> list[Event]:
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
                       f"sum(rate({vm.INTER_TOKEN_LATENCY}_count{sel}[{w}]))", end)
    itl_mean = itl[0][1] if itl and math.isfinite(itl[0][1]) and itl[0][1] > 0 else None
    return StepShapeWindow(
        batch_time_shares={b: c / samples for b, c in running.items()} if samples else {},
        iteration_tokens=dict(sorted(iteration_tokens.items())),
        itl_mean_s=itl_mean,
        samples=int(round(samples)),
        sample_pairs=max(pairs, 0),
        repeated_pairs=min(max(repeated, 0), max(pairs, 0)),
    )


__all__ = ["PrometheusError", "PrometheusSettings", "PrometheusClient", "PrometheusWindow", "RouteQueries",
           "prometheus_route_window", "raw_window", "check_window", "normalise_selector", "MIN_SCRAPES_PER_BLOCK"]
