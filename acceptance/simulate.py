"""A simulated vLLM fleet on loopback: the embedded default of ``make demo`` and the
ground truth of tests and benchmarks.

A ``Fleet`` runs ``SimEngine``s (one vLLM engine each: labels model_name, engine) grouped
in targets (one /metrics URL each, data-parallel engines share a page as engine="0",
"1", ...) and routes. Each engine has a γ, an acceptance process (sim_processes), a
batch-size process and a step-time function, and serves vLLM 0.33.0's families under
their exact names, HELP texts and labels: the four spec-decode counters (+ ``_created``),
``vllm:num_requests_running``, ``vllm:iteration_tokens_total`` and
``vllm:inter_token_latency_seconds`` with vLLM's buckets.

Time is SIMULATED: ``fleet.now`` starts at ``start_time`` (1_800_000_000 by default, so
stores from different runs line up) and moves only through ``advance(dt_s)`` (tests, the
demo) or ``start_realtime(speed)`` (``specdec simulate --speed X``). What an engine does is
fixed by the seed alone: steps are generated per chunk of ``chunk_s`` simulated seconds
from a random stream keyed by (seed, engine, engine life, chunk), and a counter at time T
shows exactly the steps that ended by T — so pages depend neither on wall time, nor on
when or how often anyone scrapes, nor on how ``advance`` is sliced.

Events (restart, set_gamma, spec_off, spec_on) are scheduled in the scenario at seconds
since the start, or called on a ``SimEngine`` (they act at ``fleet.now``). An event at t
is applied once the clock moves past t, before any step after t: ``advance`` that ends
exactly at t leaves it pending, so a scrape taken right after ``advance`` still sees the
counts accrued up to t. Counts accrued between a scraper's last scrape and a restart are
invisible to it; ``truth_counts`` still has them. So a harness that alternates
``advance(dt)`` / scrape, with events at multiples of dt, sees reset-aware deltas that
add up exactly to ``truth_counts``.

Step metrics. ``step_metrics="design"`` follows a literal reading of DESIGN.md: a verify step
observes B·(γ+1) scheduled tokens in ``iteration_tokens_total`` (1 per request without
speculation, the prompt tokens for a prefill step), and the inter-token latency is per
output token: a request that emits L+1 tokens in a step observes (time since its last
token)/(L+1), L+1 times. ``step_metrics="vllm"`` (the default: the simulator is ground truth for a real
vLLM, so it records what vLLM records) follows vLLM 0.33.0's
``IterationStats`` does: iteration tokens = prompt + generated tokens (Σ(L_i+1) for a
verify step) and ONE inter-token-latency observation per request per decode step (the
time since its last token, whatever the number of tokens emitted).
"""

from __future__ import annotations

import json
import math
import threading
import time as _wall
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from . import vllm_metrics as vm
from .counts import SpecCounts
from .durations import duration_seconds
from .sim_processes import (
    AcceptanceProcess,
    DriftingProcess,
    FrontLoadedProcess,
    HeterogeneousProcess,
    IndependentProcess,
    ProcessError,
    process_from_dict,
)

__all__ = [
    "ITERATION_TOKENS_BUCKETS", "INTER_TOKEN_LATENCY_BUCKETS", "DEFAULT_START_TIME",
    "ScenarioError", "LatencyBoundStepTime", "BatchMix", "PrefillMix", "EngineSpec", "TargetSpec",
    "ScheduledEvent", "Scenario", "EngineExposure", "SimEngine", "Fleet", "render_page",
    "build_scenario", "scenario_from_dict", "scenario_to_dict", "SCENARIO_NAMES",
    "AcceptanceProcess", "IndependentProcess", "FrontLoadedProcess", "HeterogeneousProcess",
    "DriftingProcess", "process_from_dict",
]

# vLLM 0.33.0 vllm/v1/metrics/buckets.py defaults.
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
INTER_TOKEN_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
                               1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
# HELP texts of the step-shape families, as vLLM 0.33.0's PrometheusStatLogger registers them.
_STEP_SHAPE_HELP = {
    vm.NUM_REQUESTS_RUNNING: "Number of requests in model execution batches.",
    vm.ITERATION_TOKENS: "Histogram of number of tokens per engine_step.",
    vm.INTER_TOKEN_LATENCY: "Histogram of inter-token latency in seconds.",
}
DEFAULT_START_TIME = 1_800_000_000.0
_LABELS = [vm.MODEL_NAME_LABEL, vm.ENGINE_LABEL]  # vLLM's labelnames order
_MAX_GAMMA = 16
_EVENT_KINDS = ("restart", "set_gamma", "spec_off", "spec_on")
_STEP_METRICS = ("design", "vllm")
_EPS = 1e-9


class ScenarioError(ValueError):
    """A scenario or an event was described wrongly (one-line message naming the input)."""


# ----------------------------------------------------------------------------- specs


# The most tokens a speculative step verifies per request (γ ≤ 16, + the bonus); a step of
# more is a prefill, which drafts nothing.
MAX_VERIFY_TOKENS = 17


@dataclass(frozen=True)
class LatencyBoundStepTime:
    """Step time of a latency-bound decode: base_s · (1 + growth_per_token · B · q), plus on a
    speculative step a parallel drafter's pass costing ``draft_cost`` × the stock pass at the
    same batch (DESIGN.md, Cost model) — what a config's draft_cost tells the tool.

    B requests verifying q tokens each (q = γ+1; 1 without speculation; a prefill step is
    B = 1, q = its prompt tokens). 8.5 ms is the seeds' 118 tok/s on 16 GPUs.
    """

    base_s: float = 0.0085
    growth_per_token: float = 0.002
    draft_cost: float = 0.0

    def target(self, batch_size: int, tokens_per_request: int) -> float:
        """The target's verify pass alone (what `specdec calibrate` measures)."""
        return self.base_s * (1.0 + self.growth_per_token * batch_size * tokens_per_request)

    def __call__(self, batch_size: int, tokens_per_request: int) -> float:
        t = self.target(batch_size, tokens_per_request)
        if 1 < tokens_per_request <= MAX_VERIFY_TOKENS:
            t += self.draft_cost * self.target(batch_size, 1)
        return t

    def to_dict(self) -> dict:
        d = {"base_ms": self.base_s * 1e3, "growth_per_token": self.growth_per_token}
        return {**d, "draft_cost": self.draft_cost} if self.draft_cost else d


@dataclass(frozen=True)
class BatchMix:
    """Requests running per engine: piecewise constant over chunks of simulated time.

    At each chunk the batch size stays the same with probability ``persistence``, else is
    drawn from ``weights`` (batch size → share). That lazy chain's stationary law is
    ``weights`` itself: the true share of TIME spent at each batch size.
    """

    weights: tuple[tuple[int, float], ...]
    persistence: float = 0.0

    def __post_init__(self):
        if not self.weights:
            raise ScenarioError("batch.weights: needs at least one batch size")
        for b, w in self.weights:
            if not isinstance(b, int) or b < 1:
                raise ScenarioError(f"batch.weights: batch sizes must be integers >= 1, got {b!r}")
            if not (w >= 0 and math.isfinite(w)):
                raise ScenarioError(f"batch.weights[{b}]: must be a non-negative number, got {w!r}")
        if sum(w for _, w in self.weights) <= 0:
            raise ScenarioError("batch.weights: the weights sum to zero")
        if not 0.0 <= self.persistence < 1.0:
            raise ScenarioError(f"batch.persistence: must be in [0, 1), got {self.persistence!r}")

    @property
    def sizes(self) -> np.ndarray:
        return np.array([b for b, _ in self.weights])

    @property
    def shares(self) -> np.ndarray:
        w = np.array([w for _, w in self.weights], dtype=float)
        return w / w.sum()

    def to_dict(self) -> dict:
        return {"weights": {str(b): w for b, w in self.weights}, "persistence": self.persistence}


@dataclass(frozen=True)
class PrefillMix:
    """Prefill steps: each step is one with probability ``prob`` and carries a prompt of
    one of ``tokens`` (uniform). Prefill steps draft nothing."""

    prob: float = 0.005
    tokens: tuple[int, ...] = (512, 1024, 2048, 4096)

    def __post_init__(self):
        if not 0.0 <= self.prob < 1.0:
            raise ScenarioError(f"prefill.prob: must be in [0, 1), got {self.prob!r}")
        if not self.tokens or any(not isinstance(t, int) or t < 1 for t in self.tokens):
            raise ScenarioError(f"prefill.tokens: must be positive integers, got {self.tokens!r}")

    def to_dict(self) -> dict:
        return {"prob": self.prob, "tokens": list(self.tokens)}


@dataclass(frozen=True)
class EngineSpec:
    engine: str
    gamma: int
    process: AcceptanceProcess
    batch: BatchMix
    step_time_s: Callable[[int, int], float] = field(default_factory=LatencyBoundStepTime)
    prefill: PrefillMix = field(default_factory=PrefillMix)


@dataclass(frozen=True)
class TargetSpec:
    name: str
    route: str
    model_name: str
    engines: tuple[EngineSpec, ...]
    port: int = 0  # 0: an ephemeral port


@dataclass(frozen=True)
class ScheduledEvent:
    """An event at ``at_s`` seconds since the fleet started; engine None: every engine of
    the target. kinds: restart, set_gamma (gamma), spec_off, spec_on (gamma optional)."""

    at_s: float
    kind: str
    target: str
    engine: str | None = None
    gamma: int | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    targets: tuple[TargetSpec, ...]
    events: tuple[ScheduledEvent, ...] = ()
    start_time: float = DEFAULT_START_TIME
    chunk_s: float = 5.0
    step_metrics: str = "vllm"
    description: str = ""

    @property
    def routes(self) -> dict[str, list[TargetSpec]]:
        out: dict[str, list[TargetSpec]] = {}
        for t in self.targets:
            out.setdefault(t.route, []).append(t)
        return out


# ------------------------------------------------------------------------ exposition


@dataclass(frozen=True)
class EngineExposure:
    """What one engine's page shows at one instant (counters since the engine started).

    iteration_tokens / itl: NON-cumulative counts per bucket, +Inf last; counts of
    a histogram are the sum of its buckets. Any of the step-shape fields None: not shown.
    """

    model_name: str
    engine: str
    spec: SpecCounts | None
    created: float
    num_requests_running: float | None = None
    iteration_tokens: np.ndarray | None = None
    iteration_tokens_sum: float = 0.0
    itl: np.ndarray | None = None
    itl_sum: float = 0.0


def _histogram_buckets(bounds: Sequence[float], counts: np.ndarray) -> list[tuple[str, float]]:
    cumulative = np.cumsum(counts)
    les = [floatToGoString(float(b)) for b in bounds] + ["+Inf"]
    return [(le, float(c)) for le, c in zip(les, cumulative)]


class _PageCollector:
    """Families in vLLM's page order: spec decode first, then the step-shape ones."""

    def __init__(self, exposures: Sequence[EngineExposure]):
        self.exposures = exposures

    def collect(self):
        spec = [e for e in self.exposures if e.spec is not None]
        if spec:
            for name, pick in ((vm.DRAFTS, lambda c: c.drafts), (vm.DRAFT_TOKENS, lambda c: c.draft_tokens),
                               (vm.ACCEPTED_TOKENS, lambda c: c.accepted_tokens)):
                fam = CounterMetricFamily(name, vm.HELP[name], labels=_LABELS)
                for e in spec:
                    fam.add_metric([e.model_name, e.engine], float(pick(e.spec)), created=e.created)
                yield fam
            fam = CounterMetricFamily(vm.ACCEPTED_PER_POSITION, vm.HELP[vm.ACCEPTED_PER_POSITION],
                                      labels=_LABELS + [vm.POSITION_LABEL])
            for e in spec:
                for pos, a_k in enumerate(e.spec.accepted_per_position):
                    fam.add_metric([e.model_name, e.engine, str(pos)], float(a_k), created=e.created)
            yield fam
        running = [e for e in self.exposures if e.num_requests_running is not None]
        if running:
            fam = GaugeMetricFamily(vm.NUM_REQUESTS_RUNNING, _STEP_SHAPE_HELP[vm.NUM_REQUESTS_RUNNING], labels=_LABELS)
            for e in running:
                fam.add_metric([e.model_name, e.engine], float(e.num_requests_running))
            yield fam
        for name, bounds, get in (
            (vm.ITERATION_TOKENS, ITERATION_TOKENS_BUCKETS, lambda e: (e.iteration_tokens, e.iteration_tokens_sum)),
            (vm.INTER_TOKEN_LATENCY, INTER_TOKEN_LATENCY_BUCKETS, lambda e: (e.itl, e.itl_sum)),
        ):
            shown = [e for e in self.exposures if get(e)[0] is not None]
            if not shown:
                continue
            fam = HistogramMetricFamily(name, _STEP_SHAPE_HELP[name], labels=_LABELS)
            for e in shown:
                counts, total = get(e)
                fam.add_metric([e.model_name, e.engine], _histogram_buckets(bounds, counts), float(total))
                # A histogram's _created, as prometheus-client's own Histogram exposes it.
                fam.samples.append(Sample(name + "_created", {vm.MODEL_NAME_LABEL: e.model_name,
                                                              vm.ENGINE_LABEL: e.engine}, e.created))
            yield fam


def render_page(exposures: Sequence[EngineExposure]) -> bytes:
    """The /metrics page (classic text format) for engines sharing one target."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_PageCollector(exposures))
    return generate_latest(registry)


# ---------------------------------------------------------------------------- engine


@dataclass
class _Chunk:
    """Steps that start within one chunk, generated at once; cumulative per step."""

    end: np.ndarray               # (n,) relative end time of each step
    spec: np.ndarray              # (n, 3+γ) cumulative [D, T, A, A_1..A_γ]
    iter_tokens: np.ndarray       # (n, nb) cumulative non-cumulative-bucket counts
    iter_sum: np.ndarray          # (n,)
    itl: np.ndarray               # (n, nb)
    itl_sum: np.ndarray           # (n,)
    verify_steps: np.ndarray      # (n,) cumulative verify (non-prefill) steps
    batch: int
    gamma: int                    # 0: no speculation
    last_verify_end: float | None

    def upto(self, t: float) -> int:
        """Number of this chunk's steps that ended by t."""
        return int(np.searchsorted(self.end, t + _EPS, side="right"))


def _bucket_index(bounds: Sequence[float], values: np.ndarray) -> np.ndarray:
    """Index of the first bucket with value ≤ le (len(bounds) = +Inf)."""
    return np.searchsorted(np.asarray(bounds, dtype=float), values, side="left")


class SimEngine:
    """One simulated vLLM engine. Call the event methods with the fleet's lock free; they
    act at the fleet's current time."""

    def __init__(self, fleet: "Fleet", target: TargetSpec, spec: EngineSpec, uid: int):
        self._fleet = fleet
        self.target = target.name
        self.route = target.route
        self.model_name = target.model_name
        self.engine = spec.engine
        self.process = spec.process
        self.batch_mix = spec.batch
        self.step_time_s = spec.step_time_s
        self.prefill = spec.prefill
        self._uid = uid
        self._seed = fleet.scenario.seed
        self._chunk_s = fleet.scenario.chunk_s
        self._vllm_step_metrics = fleet.scenario.step_metrics == "vllm"
        self.gamma = spec.gamma
        self._last_spec_gamma = spec.gamma if spec.gamma > 0 else None
        self._life = -1
        self._batch_now: int | None = None
        self._truth: dict[int, np.ndarray] = {}
        self._truth_steps: dict[tuple[int, int], int] = {}
        self._start_life(0.0)

    # -- lifecycle

    @property
    def created(self) -> float:
        """Epoch time this engine (re)started: the counters' ``_created``."""
        return self._fleet.scenario.start_time + self._life_start

    def _start_life(self, t: float) -> None:
        self._life += 1
        self._life_start = t
        self._clock = t           # when the next step may start
        self._chunk: _Chunk | None = None
        nb_iter, nb_itl = len(ITERATION_TOKENS_BUCKETS) + 1, len(INTER_TOKEN_LATENCY_BUCKETS) + 1
        self._spec = np.zeros(3 + self.gamma)
        self._iter = np.zeros(nb_iter)
        self._iter_sum = 0.0
        self._itl = np.zeros(nb_itl)
        self._itl_sum = 0.0
        self._last_verify_end: float | None = None  # a restart drops the running requests
        state_rng = np.random.default_rng([self._seed, self._uid, self._life, 0, 1])
        self._state = self.process.new_state(self.gamma, state_rng) if self.gamma > 0 else None

    def _rng(self, chunk: int) -> np.random.Generator:
        return np.random.default_rng([self._seed, self._uid, self._life, chunk + 1, 0])

    # -- simulation

    def _next_batch(self, rng: np.random.Generator) -> int:
        mix = self.batch_mix
        if self._batch_now is not None and rng.random() < mix.persistence:
            return self._batch_now
        return int(rng.choice(mix.sizes, p=mix.shares))

    def _generate_chunk(self) -> _Chunk:
        chunk_index = int(math.floor(self._clock / self._chunk_s + _EPS))
        chunk_end = (chunk_index + 1) * self._chunk_s
        rng = self._rng(chunk_index)
        batch = self._next_batch(rng)
        self._batch_now = batch
        gamma = self.gamma
        q = gamma + 1
        verify_s = float(self.step_time_s(batch, q))
        prefill_tokens = np.asarray(self.prefill.tokens)
        prefill_s = np.array([float(self.step_time_s(1, int(t))) for t in prefill_tokens])
        if not (verify_s > 0 and np.all(prefill_s > 0)):
            raise ScenarioError(f"step_time_s: must be positive, got {verify_s!r} for engine {self.target}/{self.engine}")
        shortest = min(verify_s, float(prefill_s.min()))
        n_max = int((chunk_end - self._clock) / shortest) + 2
        is_prefill = rng.random(n_max) < self.prefill.prob
        which_prompt = rng.integers(0, len(prefill_tokens), n_max)
        durations = np.where(is_prefill, prefill_s[which_prompt], verify_s)
        ends = self._clock + np.cumsum(durations)
        n = int(np.searchsorted(ends - durations, chunk_end - _EPS, side="left"))  # steps starting before the chunk ends
        n = max(n, 1)
        ends, durations, is_prefill, which_prompt = ends[:n], durations[:n], is_prefill[:n], which_prompt[:n]
        verify = ~is_prefill
        nv = int(verify.sum())

        spec_rows = np.zeros((n, 3 + gamma))
        tokens_per_request = np.ones((nv, batch))  # tokens emitted per request per verify step
        if gamma > 0 and nv > 0:
            lengths = self.process.draw_lengths(self._state, rng, gamma, ends[verify] - durations[verify], batch)
            cell = np.repeat(np.arange(nv) * (gamma + 1), batch) + lengths.ravel()
            per_len = np.bincount(cell, minlength=nv * (gamma + 1)).reshape(nv, gamma + 1)
            reached = per_len[:, ::-1].cumsum(axis=1)[:, ::-1]  # drafts with L ≥ k, k = 0..γ
            accepted = lengths.sum(axis=1, dtype=np.int64)
            spec_rows[verify, 0] = batch
            spec_rows[verify, 1] = batch * gamma
            spec_rows[verify, 2] = accepted
            spec_rows[verify, 3:] = reached[:, 1:]
            tokens_per_request = lengths + 1.0

        # Iteration tokens per step.
        if self._vllm_step_metrics:
            verify_tokens = tokens_per_request.sum(axis=1)  # generated tokens
        else:
            verify_tokens = np.full(nv, float(batch * q))  # scheduled tokens
        step_tokens = prefill_tokens[which_prompt].astype(float)
        step_tokens[verify] = verify_tokens
        iter_rows = np.zeros((n, len(ITERATION_TOKENS_BUCKETS) + 1))
        iter_rows[np.arange(n), _bucket_index(ITERATION_TOKENS_BUCKETS, step_tokens)] = 1.0

        # Inter-token latency: a running request's token gap spans any prefill step between.
        itl_rows = np.zeros((n, len(INTER_TOKEN_LATENCY_BUCKETS) + 1))
        itl_sum_rows = np.zeros(n)
        last_verify_end = self._last_verify_end
        if nv > 0:
            v_ends = ends[verify]
            prev = np.concatenate([[last_verify_end if last_verify_end is not None else v_ends[0] - verify_s], v_ends[:-1]])
            gap = v_ends - prev
            if self._vllm_step_metrics:
                values = np.broadcast_to(gap[:, None], (nv, batch))
                weights = np.ones((nv, batch))
            else:
                values = gap[:, None] / tokens_per_request
                weights = tokens_per_request
            idx = _bucket_index(INTER_TOKEN_LATENCY_BUCKETS, values)
            nb = itl_rows.shape[1]
            cell = np.repeat(np.arange(nv) * nb, batch) + idx.ravel()
            itl_rows[verify] = np.bincount(cell, weights=weights.ravel(), minlength=nv * nb).reshape(nv, nb)
            itl_sum_rows[verify] = gap * batch
            last_verify_end = float(v_ends[-1])

        self._clock = float(ends[-1])
        return _Chunk(
            end=ends, spec=np.cumsum(spec_rows, axis=0), iter_tokens=np.cumsum(iter_rows, axis=0),
            iter_sum=np.cumsum(step_tokens), itl=np.cumsum(itl_rows, axis=0), itl_sum=np.cumsum(itl_sum_rows),
            verify_steps=np.cumsum(verify), batch=batch, gamma=gamma, last_verify_end=last_verify_end)

    def _commit(self, c: _Chunk, k: int) -> None:
        """Add the first k steps of chunk c to the engine's counters and the truth."""
        if k <= 0:
            return
        row = c.spec[k - 1]
        self._spec += row
        self._iter += c.iter_tokens[k - 1]
        self._iter_sum += c.iter_sum[k - 1]
        self._itl += c.itl[k - 1]
        self._itl_sum += c.itl_sum[k - 1]
        if c.gamma > 0:
            self._truth[c.gamma] = self._truth.get(c.gamma, np.zeros(3 + c.gamma)) + row
        key = (c.gamma, c.batch)
        self._truth_steps[key] = self._truth_steps.get(key, 0) + int(c.verify_steps[k - 1])

    def _advance_to(self, t: float) -> None:
        """Generate and commit every chunk whose steps all ended by t (relative seconds)."""
        while True:
            if self._chunk is None:
                self._chunk = self._generate_chunk()
            if self._chunk.end[-1] <= t + _EPS:
                self._commit(self._chunk, len(self._chunk.end))
                self._last_verify_end = self._chunk.last_verify_end
                self._chunk = None
            else:
                return

    def _partial(self, t: float) -> tuple[_Chunk | None, int]:
        c = self._chunk
        return (c, c.upto(t)) if c is not None else (None, 0)

    def _apply(self, kind: str, t: float, gamma: int | None = None) -> None:
        """Apply an event at relative time t (the engine is already advanced to t)."""
        if kind == "restart":
            new_gamma = self.gamma
        elif kind == "set_gamma":
            new_gamma = _check_gamma(gamma, f"set_gamma on {self.target}/{self.engine}")
        elif kind == "spec_off":
            new_gamma = 0
        elif kind == "spec_on":
            new_gamma = gamma if gamma is not None else self._last_spec_gamma
            if new_gamma is None:
                raise ScenarioError(f"spec_on on {self.target}/{self.engine}: no gamma given and none deployed before")
            new_gamma = _check_gamma(new_gamma, f"spec_on on {self.target}/{self.engine}")
        else:
            raise ScenarioError(f"event kind: must be one of {list(_EVENT_KINDS)}, got {kind!r}")
        # Steps that ended by t happened; the one in flight and later ones did not.
        c, k = self._partial(t)
        if c is not None:
            self._commit(c, k)
        self.gamma = new_gamma
        if new_gamma > 0:
            self._last_spec_gamma = new_gamma
        self._start_life(t)

    # -- public events (act at the fleet's now)

    def restart(self) -> None:
        """Counters back to zero with a new ``_created``; running requests are dropped."""
        self._fleet._engine_event(self, "restart")

    def set_gamma(self, gamma: int) -> None:
        """Restart with γ = gamma (a new position label set; 0 = no speculation)."""
        self._fleet._engine_event(self, "set_gamma", gamma)

    def spec_off(self) -> None:
        """Restart without speculation: the spec-decode families vanish."""
        self._fleet._engine_event(self, "spec_off")

    def spec_on(self, gamma: int | None = None) -> None:
        """Restart with speculation back on (the last γ unless given)."""
        self._fleet._engine_event(self, "spec_on", gamma)

    # -- views

    def exposure(self, t: float) -> EngineExposure:
        c, k = self._partial(t)
        spec, it, it_sum, itl, itl_sum = self._spec, self._iter, self._iter_sum, self._itl, self._itl_sum
        if c is not None and k > 0:
            spec = spec + c.spec[k - 1]
            it = it + c.iter_tokens[k - 1]
            it_sum = it_sum + c.iter_sum[k - 1]
            itl = itl + c.itl[k - 1]
            itl_sum = itl_sum + c.itl_sum[k - 1]
        running = c.batch if c is not None else (self._batch_now or 0)
        return EngineExposure(
            model_name=self.model_name, engine=self.engine,
            spec=SpecCounts.from_vector([float(x) for x in spec]) if self.gamma > 0 else None,
            created=self.created, num_requests_running=float(running),
            iteration_tokens=it, iteration_tokens_sum=float(it_sum), itl=itl, itl_sum=float(itl_sum))

    def truth(self, t: float) -> dict[int, SpecCounts]:
        """Exact counts generated since the fleet started, per γ, up to relative time t."""
        out = {g: v.copy() for g, v in self._truth.items()}
        c, k = self._partial(t)
        if c is not None and k > 0 and c.gamma > 0:
            out[c.gamma] = out.get(c.gamma, np.zeros(3 + c.gamma)) + c.spec[k - 1]
        return {g: SpecCounts.from_vector([float(x) for x in v]) for g, v in sorted(out.items())}

    def truth_steps(self, t: float) -> dict[tuple[int, int], int]:
        """Verify steps generated since the fleet started, keyed by (γ, batch size)."""
        out = dict(self._truth_steps)
        c, k = self._partial(t)
        if c is not None and k > 0:
            key = (c.gamma, c.batch)
            out[key] = out.get(key, 0) + int(c.verify_steps[k - 1])
        return {key: v for key, v in sorted(out.items()) if v > 0}

    def verify_steps_per_second(self, batch: int, gamma: int) -> float:
        """Expected verify steps per second at a batch size (prefill steps take their share)."""
        verify_s = self.step_time_s(batch, gamma + 1)
        prefill_s = float(np.mean([self.step_time_s(1, t) for t in self.prefill.tokens]))
        pi = self.prefill.prob
        return (1.0 - pi) / ((1.0 - pi) * verify_s + pi * prefill_s)


def _check_gamma(gamma, where: str) -> int:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or not 0 <= gamma <= _MAX_GAMMA:
        raise ScenarioError(f"{where}: gamma must be an integer 0..{_MAX_GAMMA}, got {gamma!r}")
    return int(gamma)


# ----------------------------------------------------------------------------- fleet


class _Handler(BaseHTTPRequestHandler):
    fleet: "Fleet"
    target: str

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path.split("?")[0] != "/metrics":
            self.send_error(404, "only /metrics")
            return
        body = self.fleet.page(self.target)
        self.send_response(200)
        # vLLM always answers in the classic text format, whatever the Accept header.
        self.send_header("Content-Type", "text/plain; version=1.0.0; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # quiet: a scraper hits this every few seconds
        pass


class Fleet:
    """The simulated fleet of a ``Scenario``. Use as a context manager, or call close()."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self._lock = threading.RLock()
        self._t = 0.0
        self._engines: dict[str, list[SimEngine]] = {}
        uid = 0
        for target in scenario.targets:
            engines = []
            for spec in target.engines:
                engines.append(SimEngine(self, target, spec, uid))
                uid += 1
            self._engines[target.name] = engines
        self._pending = sorted(scenario.events, key=lambda e: e.at_s)
        for ev in self._pending:
            self._resolve(ev.target, ev.engine)
        self._servers: dict[str, ThreadingHTTPServer] = {}
        self._threads: list[threading.Thread] = []
        self._realtime: threading.Thread | None = None
        self._stop = threading.Event()

    # -- time

    @property
    def now(self) -> float:
        """Simulated epoch seconds."""
        return self.scenario.start_time + self._t

    @property
    def elapsed_s(self) -> float:
        """Simulated seconds since the start."""
        return self._t

    def advance(self, dt_s: float) -> None:
        """Run dt_s seconds of simulated time, applying scheduled events in time order.

        An event at t is applied when the clock moves past t, before the steps after t;
        one at exactly the new time stays pending until the next advance.
        """
        if not (isinstance(dt_s, (int, float)) and math.isfinite(dt_s) and dt_s >= 0):
            raise ValueError(f"advance: dt_s must be a finite number of seconds >= 0, got {dt_s!r}")
        with self._lock:
            end = self._t + float(dt_s)
            while self._pending and self._pending[0].at_s < end - _EPS:
                ev = self._pending.pop(0)
                t = max(ev.at_s, self._t)
                for eng in self._resolve(ev.target, ev.engine):
                    eng._advance_to(t)
                    eng._apply(ev.kind, t, ev.gamma)
            for engines in self._engines.values():
                for eng in engines:
                    eng._advance_to(end)
            self._t = end

    def schedule(self, at_s: float, kind: str, target: str, engine: str | None = None,
                 gamma: int | None = None) -> None:
        """Schedule an event at ``at_s`` seconds since the start (not in the past)."""
        ev = _event_from_dict({"at": at_s, "kind": kind, "target": target, "engine": engine, "gamma": gamma}, "event")
        with self._lock:
            if ev.at_s < self._t - _EPS:
                raise ScenarioError(f"event at {at_s!r}s: already past (now {self._t}s since start)")
            self._resolve(ev.target, ev.engine)
            self._pending.append(ev)
            self._pending.sort(key=lambda e: e.at_s)

    def _engine_event(self, eng: SimEngine, kind: str, gamma: int | None = None) -> None:
        with self._lock:
            eng._advance_to(self._t)
            eng._apply(kind, self._t, gamma)

    def start_realtime(self, speed: float = 1.0, tick_s: float = 0.05) -> None:
        """Advance the clock from a background thread at ``speed``× wall time."""
        if not (speed > 0 and math.isfinite(speed)):
            raise ValueError(f"speed: must be a positive number, got {speed!r}")
        if self._realtime is not None:
            return

        def run():
            last = _wall.monotonic()
            while not self._stop.wait(tick_s):
                t = _wall.monotonic()
                self.advance((t - last) * speed)
                last = t

        self._realtime = threading.Thread(target=run, name="specdec-sim-clock", daemon=True)
        self._realtime.start()

    # -- serving

    def serve(self, host: str = "127.0.0.1") -> dict[str, str]:
        """Start one HTTP server per target (port 0 → ephemeral); returns target → URL."""
        with self._lock:
            for target in self.scenario.targets:
                if target.name in self._servers:
                    continue
                handler = type("Handler", (_Handler,), {"fleet": self, "target": target.name})
                server = ThreadingHTTPServer((host, target.port), handler)
                server.daemon_threads = True
                self._servers[target.name] = server
                # A short poll keeps close() quick (shutdown waits for the loop to notice).
                th = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                      name=f"specdec-sim-{target.name}", daemon=True)
                th.start()
                self._threads.append(th)
        return self.urls

    @property
    def urls(self) -> dict[str, str]:
        """target → its /metrics URL (only once serving)."""
        return {name: f"http://{s.server_address[0]}:{s.server_address[1]}/metrics" for name, s in self._servers.items()}

    def close(self) -> None:
        self._stop.set()
        if self._realtime is not None:
            self._realtime.join(timeout=2)
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        for th in self._threads:
            th.join(timeout=2)
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- structure

    @property
    def targets(self) -> list[str]:
        return list(self._engines)

    @property
    def routes(self) -> dict[str, list[str]]:
        """route → its target names."""
        return {r: [t.name for t in ts] for r, ts in self.scenario.routes.items()}

    def engines(self, target: str | None = None) -> list[SimEngine]:
        if target is None:
            return [e for es in self._engines.values() for e in es]
        return list(self._resolve(target, None))

    def engine(self, target: str, engine: str = "0") -> SimEngine:
        return self._resolve(target, engine)[0]

    def _resolve(self, target: str, engine: str | None) -> list[SimEngine]:
        if target not in self._engines:
            raise ScenarioError(f"target: unknown target {target!r} (known: {', '.join(self._engines)})")
        engines = self._engines[target]
        if engine is None:
            return engines
        found = [e for e in engines if e.engine == str(engine)]
        if not found:
            raise ScenarioError(f"engine: target {target!r} has no engine {engine!r}")
        return found

    def _route_engines(self, route: str) -> list[SimEngine]:
        if route not in self.routes:
            raise ScenarioError(f"route: unknown route {route!r} (known: {', '.join(self.routes)})")
        return [e for t in self.routes[route] for e in self._engines[t]]

    # -- pages

    def exposures(self, target: str) -> list[EngineExposure]:
        with self._lock:
            return [e.exposure(self._t) for e in self._resolve(target, None)]

    def page(self, target: str) -> bytes:
        """The target's /metrics page at the current simulated time."""
        return render_page(self.exposures(target))

    # -- ground truth

    def truth_counts(self, target: str | None = None, engine: str | None = None) -> dict[int, SpecCounts]:
        """Exact counts generated since the fleet started, per γ (whole fleet, one target,
        or one engine of it) — including what restarts hid from any scraper."""
        with self._lock:
            engines = self.engines() if target is None else self._resolve(target, engine)
            return _sum_by_gamma(e.truth(self._t) for e in engines)

    def route_truth_counts(self, route: str) -> dict[int, SpecCounts]:
        """``truth_counts`` over a route's engines."""
        with self._lock:
            return _sum_by_gamma(e.truth(self._t) for e in self._route_engines(route))

    def truth_step_counts(self, target: str | None = None, engine: str | None = None) -> dict[tuple[int, int], int]:
        """Verify steps generated since the start, keyed by (γ, batch size); γ 0: plain decode."""
        with self._lock:
            engines = self.engines() if target is None else self._resolve(target, engine)
            out: dict[tuple[int, int], int] = {}
            for e in engines:
                for key, v in e.truth_steps(self._t).items():
                    out[key] = out.get(key, 0) + v
            return dict(sorted(out.items()))

    def route_true_survival(self, route: str, gamma: int, t: float | None = None) -> np.ndarray:
        """Expected a_1..a_γ of the route at γ and epoch time t (default now), draft-weighted
        over its engines: engine e weighs Σ_B w_B · B · (verify steps/s at B, γ), its
        expected drafts per second at γ over its batch mix."""
        gamma = _check_gamma(gamma, "route_true_survival")
        if gamma == 0:
            return np.zeros(0)
        t_rel = (self.now if t is None else float(t)) - self.scenario.start_time
        engines = self._route_engines(route)
        weights = np.array([sum(w * b * e.verify_steps_per_second(b, gamma)
                                for b, w in zip(e.batch_mix.sizes, e.batch_mix.shares)) for e in engines])
        curves = np.array([e.process.true_survival(gamma, t_rel) for e in engines])
        return weights @ curves / weights.sum()

    def route_batch_mix(self, route: str, weighting: str = "steps") -> dict[int, float]:
        """The route's true batch-size distribution over its engines at their current γ.

        weighting "steps" (default): the share of verify steps run at each batch size
        (what ``iteration_tokens_total`` counts); "time": the share of time.
        """
        if weighting not in ("steps", "time"):
            raise ValueError(f"weighting: must be 'steps' or 'time', got {weighting!r}")
        mix: dict[int, float] = {}
        for e in self._route_engines(route):
            for b, w in zip(e.batch_mix.sizes, e.batch_mix.shares):
                rate = e.verify_steps_per_second(int(b), e.gamma) if weighting == "steps" else 1.0
                mix[int(b)] = mix.get(int(b), 0.0) + w * rate
        total = sum(mix.values())
        return {b: float(v / total) for b, v in sorted(mix.items())}

    def describe(self) -> dict:
        """Routes → targets (URL when serving), engines' γ, true survival: for printing."""
        urls = self.urls
        out = {}
        for route, targets in self.routes.items():
            engines = self._route_engines(route)
            gammas = sorted({e.gamma for e in engines})
            out[route] = {
                "targets": [urls.get(t, t) for t in targets],
                "engines": [{"target": e.target, "engine": e.engine, "gamma": e.gamma,
                             "process": e.process.to_dict()} for e in engines],
                "true_survival": {g: [round(float(x), 6) for x in self.route_true_survival(route, g)]
                                  for g in gammas if g > 0},
                "batch_mix": self.route_batch_mix(route),
            }
        return out


def _sum_by_gamma(per_engine: Iterable[dict[int, SpecCounts]]) -> dict[int, SpecCounts]:
    out: dict[int, SpecCounts] = {}
    for d in per_engine:
        for g, c in d.items():
            out[g] = out[g] + c if g in out else c
    return dict(sorted(out.items()))


# ------------------------------------------------------------------------- scenarios

def _seconds(value, where: str) -> float:
    v = duration_seconds(value)
    if v is None:
        raise ScenarioError(f"{where}: must be seconds or a duration like 90s, 15m, 1h; got {value!r}")
    if not (math.isfinite(v) and v >= 0):
        raise ScenarioError(f"{where}: must be a non-negative duration, got {value!r}")
    return v


def _event_from_dict(d, where: str) -> ScheduledEvent:
    if not isinstance(d, dict):
        raise ScenarioError(f"{where}: must be a table, got {d!r}")
    extra = set(d) - {"at", "at_s", "kind", "target", "engine", "gamma"}
    if extra:
        raise ScenarioError(f"{where}: unknown keys {sorted(extra)}")
    kind = d.get("kind")
    if kind not in _EVENT_KINDS:
        raise ScenarioError(f"{where}.kind: must be one of {list(_EVENT_KINDS)}, got {kind!r}")
    if "target" not in d:
        raise ScenarioError(f"{where}: needs a 'target'")
    at = d.get("at", d.get("at_s"))
    if at is None:
        raise ScenarioError(f"{where}: needs 'at' (seconds since the start, or 15m, 1h ...)")
    gamma = d.get("gamma")
    if kind == "set_gamma" and gamma is None:
        raise ScenarioError(f"{where}: set_gamma needs 'gamma'")
    if gamma is not None:
        gamma = _check_gamma(gamma, where)
    engine = d.get("engine")
    return ScheduledEvent(at_s=_seconds(at, f"{where}.at"), kind=kind, target=str(d["target"]),
                          engine=None if engine is None else str(engine), gamma=gamma)


def _batch_from_dict(d, where: str) -> BatchMix:
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        d = {"weights": {str(int(d)): 1.0}}
    if not isinstance(d, dict) or not isinstance(d.get("weights"), dict):
        raise ScenarioError(f"{where}: must be a table with 'weights' = {{batch size: share}}, got {d!r}")
    extra = set(d) - {"weights", "persistence"}
    if extra:
        raise ScenarioError(f"{where}: unknown keys {sorted(extra)}")
    weights = []
    for b, w in d["weights"].items():
        try:
            size = int(b)
            if str(size) != str(b).strip():
                raise ValueError
        except ValueError:
            raise ScenarioError(f"{where}.weights: batch sizes must be integers, got {b!r}") from None
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise ScenarioError(f"{where}.weights[{b}]: must be a number, got {w!r}")
        weights.append((size, float(w)))
    try:
        return BatchMix(tuple(sorted(weights)), float(d.get("persistence", 0.0)))
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _step_time_from_dict(d, where: str) -> LatencyBoundStepTime:
    if not isinstance(d, dict) or set(d) - {"base_ms", "growth_per_token", "draft_cost"}:
        raise ScenarioError(f"{where}: must be a table with base_ms, growth_per_token, draft_cost; got {d!r}")
    base = d.get("base_ms", 8.5)
    growth = d.get("growth_per_token", 0.002)
    draft_cost = d.get("draft_cost", 0.0)
    for name, v in (("base_ms", base), ("growth_per_token", growth), ("draft_cost", draft_cost)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ScenarioError(f"{where}.{name}: must be a non-negative number, got {v!r}")
    if base <= 0:
        raise ScenarioError(f"{where}.base_ms: must be positive, got {base!r}")
    return LatencyBoundStepTime(base / 1e3, float(growth), float(draft_cost))


def _prefill_from_dict(d, where: str) -> PrefillMix:
    if not isinstance(d, dict) or set(d) - {"prob", "tokens"}:
        raise ScenarioError(f"{where}: must be a table with prob, tokens; got {d!r}")
    try:
        return PrefillMix(float(d.get("prob", 0.005)), tuple(d.get("tokens", (512, 1024, 2048, 4096))))
    except (TypeError, ValueError) as e:
        raise ScenarioError(f"{where}: {e}") from None


_ENGINE_KEYS = {"gamma", "process", "batch", "step_time", "prefill"}


def scenario_from_dict(d: dict, seed: int | None = None) -> Scenario:
    """A scenario from a TOML/JSON description (``specdec simulate --config FILE``).

    {"name", "seed", "start_time", "chunk_s", "step_metrics" ("design" | "vllm"),
     "model_name",
     "routes": {ROUTE: {"gamma", "process", "batch", "step_time", "prefill",   # defaults
                        "targets": [{"name", "port", "model_name", "engines": N or
                                     [{"engine", <engine keys>}], <engine keys>}] or N}},
     "events": [{"at": 900 or "15m", "kind", "target", "engine"?, "gamma"?}]}
    Engine keys (gamma, process, batch, step_time, prefill) cascade route → target →
    engine. process: see ``process_from_dict``; batch: {"weights": {"1": 0.3, "4": 0.7},
    "persistence": 0.5} or one integer; step_time: {"base_ms", "growth_per_token"};
    prefill: {"prob", "tokens"}. ``seed`` overrides the file's seed.
    """
    if not isinstance(d, dict):
        raise ScenarioError(f"scenario: must be a table, got {type(d).__name__}")
    extra = set(d) - {"name", "seed", "start_time", "chunk_s", "step_metrics", "model_name", "routes",
                      "events", "description"}
    if extra:
        raise ScenarioError(f"scenario: unknown keys {sorted(extra)}")
    name = str(d.get("name", "custom"))
    seed = d.get("seed", 0) if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(f"scenario.seed: must be a non-negative integer, got {seed!r}")
    start_time = d.get("start_time", DEFAULT_START_TIME)
    if isinstance(start_time, bool) or not isinstance(start_time, (int, float)) or not math.isfinite(start_time):
        raise ScenarioError(f"scenario.start_time: must be epoch seconds, got {start_time!r}")
    chunk_s = _seconds(d.get("chunk_s", 5.0), "scenario.chunk_s")
    if chunk_s <= 0:
        raise ScenarioError(f"scenario.chunk_s: must be positive, got {d.get('chunk_s')!r}")
    step_metrics = d.get("step_metrics", "vllm")
    if step_metrics not in _STEP_METRICS:
        raise ScenarioError(f"scenario.step_metrics: must be one of {list(_STEP_METRICS)}, got {step_metrics!r}")
    model_name = str(d.get("model_name", "kimi-k3"))
    routes = d.get("routes")
    if not isinstance(routes, dict) or not routes:
        raise ScenarioError("scenario.routes: needs at least one route table")

    targets: list[TargetSpec] = []
    names: set[str] = set()
    for route, rd in routes.items():
        where_r = f"routes.{route}"
        if not isinstance(rd, dict):
            raise ScenarioError(f"{where_r}: must be a table, got {rd!r}")
        extra = set(rd) - _ENGINE_KEYS - {"targets", "model_name"}
        if extra:
            raise ScenarioError(f"{where_r}: unknown keys {sorted(extra)}")
        route_defaults = {k: rd[k] for k in _ENGINE_KEYS if k in rd}
        tds = rd.get("targets", 1)
        if isinstance(tds, int) and not isinstance(tds, bool):
            if tds < 1:
                raise ScenarioError(f"{where_r}.targets: must be >= 1, got {tds!r}")
            tds = [{} for _ in range(tds)]
        if not isinstance(tds, list) or not tds:
            raise ScenarioError(f"{where_r}.targets: must be a list of target tables or a count, got {tds!r}")
        for i, td in enumerate(tds):
            where_t = f"{where_r}.targets[{i}]"
            if not isinstance(td, dict):
                raise ScenarioError(f"{where_t}: must be a table, got {td!r}")
            extra = set(td) - _ENGINE_KEYS - {"name", "port", "engines", "model_name"}
            if extra:
                raise ScenarioError(f"{where_t}: unknown keys {sorted(extra)}")
            tname = str(td.get("name", f"{route}-{i}"))
            if tname in names:
                raise ScenarioError(f"{where_t}.name: target {tname!r} appears twice")
            names.add(tname)
            port = td.get("port", 0)
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
                raise ScenarioError(f"{where_t}.port: must be an integer 0..65535, got {port!r}")
            target_defaults = {**route_defaults, **{k: td[k] for k in _ENGINE_KEYS if k in td}}
            eds = td.get("engines", 1)
            if isinstance(eds, int) and not isinstance(eds, bool):
                if eds < 1:
                    raise ScenarioError(f"{where_t}.engines: must be >= 1, got {eds!r}")
                eds = [{"engine": str(j)} for j in range(eds)]
            if not isinstance(eds, list) or not eds:
                raise ScenarioError(f"{where_t}.engines: must be a count or a list of engine tables, got {eds!r}")
            engines = []
            for j, ed in enumerate(eds):
                where_e = f"{where_t}.engines[{j}]"
                if not isinstance(ed, dict) or set(ed) - _ENGINE_KEYS - {"engine"}:
                    raise ScenarioError(f"{where_e}: must be a table with engine and {sorted(_ENGINE_KEYS)}, got {ed!r}")
                engines.append(_engine_spec({**target_defaults, **ed}, str(ed.get("engine", j)), where_e))
            if len({e.engine for e in engines}) != len(engines):
                raise ScenarioError(f"{where_t}.engines: engine labels repeat")
            targets.append(TargetSpec(tname, str(route), str(td.get("model_name", rd.get("model_name", model_name))),
                                      tuple(engines), port))

    events_d = d.get("events", [])
    if not isinstance(events_d, list):
        raise ScenarioError(f"scenario.events: must be a list, got {events_d!r}")
    events = tuple(_event_from_dict(e, f"events[{i}]") for i, e in enumerate(events_d))
    by_name = {t.name: t for t in targets}
    for i, ev in enumerate(events):
        if ev.target not in by_name:
            raise ScenarioError(f"events[{i}].target: unknown target {ev.target!r}")
        if ev.engine is not None and ev.engine not in {e.engine for e in by_name[ev.target].engines}:
            raise ScenarioError(f"events[{i}].engine: target {ev.target!r} has no engine {ev.engine!r}")
    return Scenario(name=name, seed=int(seed), targets=tuple(targets), events=events, start_time=float(start_time),
                    chunk_s=chunk_s, step_metrics=step_metrics, description=str(d.get("description", "")))


def _engine_spec(d: dict, engine: str, where: str) -> EngineSpec:
    if "gamma" not in d:
        raise ScenarioError(f"{where}: needs 'gamma' (here, on its target or on its route)")
    if "process" not in d and d["gamma"] != 0:
        raise ScenarioError(f"{where}: needs 'process' (here, on its target or on its route)")
    gamma = _check_gamma(d["gamma"], f"{where}.gamma")
    try:
        process = process_from_dict(d.get("process", {"kind": "independent", "p": 0.0}), f"{where}.process")
    except ProcessError as e:
        raise ScenarioError(str(e)) from None
    return EngineSpec(
        engine=engine, gamma=gamma, process=process,
        batch=_batch_from_dict(d.get("batch", {"weights": {"4": 1.0}}), f"{where}.batch"),
        step_time_s=_step_time_from_dict(d.get("step_time", {}), f"{where}.step_time"),
        prefill=_prefill_from_dict(d.get("prefill", {}), f"{where}.prefill"))


def scenario_to_dict(s: Scenario) -> dict:
    """The description ``scenario_from_dict`` reads back (step_time must be LatencyBoundStepTime)."""
    routes: dict[str, dict] = {}
    for t in s.targets:
        engines = []
        for e in t.engines:
            ed = {"engine": e.engine, "gamma": e.gamma, "process": e.process.to_dict(), "batch": e.batch.to_dict(),
                  "prefill": e.prefill.to_dict()}
            if hasattr(e.step_time_s, "to_dict"):
                ed["step_time"] = e.step_time_s.to_dict()
            engines.append(ed)
        routes.setdefault(t.route, {"targets": []})["targets"].append(
            {"name": t.name, "port": t.port, "model_name": t.model_name, "engines": engines})
    events = [{"at": e.at_s, "kind": e.kind, "target": e.target,
               **({"engine": e.engine} if e.engine is not None else {}),
               **({"gamma": e.gamma} if e.gamma is not None else {})} for e in s.events]
    return {"name": s.name, "seed": s.seed, "start_time": s.start_time, "chunk_s": s.chunk_s,
            "step_metrics": s.step_metrics, "description": s.description, "routes": routes, "events": events}


# Agentic, low-entropy traffic: a drafter that is sure early and less so deeper (DSpark-like,
# proposes up to 7 tokens). Open-ended chat: requests differ a lot (Beta(3.2, 1.6): mean p 0.67).
_STRUCTURED_ALPHAS = [0.95, 0.92, 0.88, 0.84, 0.80, 0.76, 0.72]
_AGENTIC_BATCH = {"weights": {"1": 0.15, "2": 0.25, "4": 0.35, "8": 0.25}, "persistence": 0.6}
_CHAT_BATCH = {"weights": {"4": 0.2, "8": 0.35, "16": 0.3, "32": 0.15}, "persistence": 0.6}
_SMALL_BATCH = {"weights": {"2": 0.3, "4": 0.4, "8": 0.3}, "persistence": 0.5}
# Verify cost grows with the tokens a step verifies (8.5 ms at batch 1 = the seeds' 118 tok/s;
# +1% per verified token): large batches × long drafts get dear, so the best γ is not simply
# the drafter's maximum (the demo's `open` route's is 3, below its deployed 7).
_DEMO_STEP_TIME = {"base_ms": 8.5, "growth_per_token": 0.01, "draft_cost": 0.10}

_BUILTIN: dict[str, dict] = {
    # `specdec demo` runs this very scenario: one truth for both (open deployed above its best γ)
    "demo": {
        "description": "structured (agentic, front-loaded, γ 7) and open (chat, heterogeneous, γ 7): "
                       "6 engines on 4 targets, a dspark drafter costing 0.10 of the stock pass, verify "
                       "+1% per token; a restart at 20m, a γ change 7→5 at 40m",
        "routes": {
            "structured": {"gamma": 7, "process": {"kind": "front_loaded", "alphas": _STRUCTURED_ALPHAS},
                           "batch": _AGENTIC_BATCH, "step_time": _DEMO_STEP_TIME,
                           "targets": [{"name": "structured-a", "engines": 2}, {"name": "structured-b", "engines": 1}]},
            "open": {"gamma": 7, "process": {"kind": "heterogeneous", "a": 3.2, "b": 1.6, "mean_output_tokens": 400},
                     "batch": _CHAT_BATCH, "step_time": _DEMO_STEP_TIME,
                     "targets": [{"name": "open-a", "engines": 2}, {"name": "open-b", "engines": 1}]},
        },
        "events": [{"at": "20m", "kind": "restart", "target": "open-b", "engine": "0"},
                   {"at": "40m", "kind": "set_gamma", "target": "structured-b", "engine": "0", "gamma": 5}],
    },
    "independent": {
        "description": "independent acceptance p = 0.8 at γ 4, 2 engines",
        "routes": {"independent": {"gamma": 4, "process": {"kind": "independent", "p": 0.8}, "batch": _SMALL_BATCH,
                                   "targets": [{"name": "independent-0", "engines": 2}]}},
    },
    "front-loaded": {
        "description": "front-loaded α 0.9, 0.85, 0.8, 0.75, 0.7 at γ 5",
        "routes": {"front-loaded": {"gamma": 5, "process": {"kind": "front_loaded",
                                                            "alphas": [0.9, 0.85, 0.8, 0.75, 0.7]},
                                    "batch": _SMALL_BATCH, "targets": [{"name": "front-loaded-0", "engines": 1}]}},
    },
    "heterogeneous": {
        "description": "per-request p ~ Beta(2, 1), 200-token outputs, γ 5",
        "routes": {"heterogeneous": {"gamma": 5, "process": {"kind": "heterogeneous", "a": 2.0, "b": 1.0,
                                                             "mean_output_tokens": 200},
                                     "batch": _SMALL_BATCH, "targets": [{"name": "heterogeneous-0", "engines": 2}]}},
    },
    "drift": {
        "description": "independent p 0.85 drifting to 0.6 between 20m and 30m, γ 4",
        "routes": {"drift": {"gamma": 4, "process": {"kind": "drifting", "base": {"kind": "independent", "p": 0.85},
                                                     "other": {"kind": "independent", "p": 0.6},
                                                     "start_s": 1200, "duration_s": 600},
                             "batch": _SMALL_BATCH, "targets": [{"name": "drift-0", "engines": 1}]}},
    },
    "restart": {
        "description": "independent p 0.8 at γ 4; engine 0 restarts at 10m",
        "routes": {"restart": {"gamma": 4, "process": {"kind": "independent", "p": 0.8}, "batch": _SMALL_BATCH,
                               "targets": [{"name": "restart-0", "engines": 2}]}},
        "events": [{"at": "10m", "kind": "restart", "target": "restart-0", "engine": "0"}],
    },
    "gamma-change": {
        "description": "front-loaded, γ 5 → 3 at 15m",
        "routes": {"gamma-change": {"gamma": 5, "process": {"kind": "front_loaded",
                                                            "alphas": [0.9, 0.85, 0.8, 0.75, 0.7]},
                                    "batch": _SMALL_BATCH, "targets": [{"name": "gamma-change-0", "engines": 1}]}},
        "events": [{"at": "15m", "kind": "set_gamma", "target": "gamma-change-0", "gamma": 3}],
    },
    "spec-off": {
        "description": "independent p 0.7 at γ 3; speculation off at 10m, back on at 20m",
        "routes": {"spec-off": {"gamma": 3, "process": {"kind": "independent", "p": 0.7}, "batch": _SMALL_BATCH,
                                "targets": [{"name": "spec-off-0", "engines": 1}]}},
        "events": [{"at": "10m", "kind": "spec_off", "target": "spec-off-0"},
                   {"at": "20m", "kind": "spec_on", "target": "spec-off-0"}],
    },
}
SCENARIO_NAMES = tuple(_BUILTIN)


def build_scenario(name: str, seed: int = 0) -> Scenario:
    """A built-in scenario by name (``SCENARIO_NAMES``)."""
    if name not in _BUILTIN:
        raise ScenarioError(f"scenario: unknown name {name!r} (known: {', '.join(SCENARIO_NAMES)})")
    # Through the same reader as a user's file, from a deep copy (the tables are shared).
    return scenario_from_dict({"name": name, **json.loads(json.dumps(_BUILTIN[name]))}, seed=seed)
