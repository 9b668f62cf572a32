"""The extra series of specdec's vLLM stat-logger plugin (acceptance/vllm_plugin.py): names,
label encodings, and the parser that turns them back into per-engine counts.

vLLM's own /metrics leaves out three things the tuner needs; the plugin exports them as
Prometheus counters (``_total`` suffix; labels ``model_name``, ``engine`` as vLLM's):

- ``specdec:spec_decode_drafts_by_batch{batch}`` — drafts D_B of steps whose batch size
  falls in bucket B;
- ``specdec:spec_decode_accepted_tokens_per_pos_by_batch{batch, position}`` — A_{B,k}:
  drafts of those steps whose first k = position+1 tokens were all accepted;
- ``specdec:spec_decode_draft_tokens_per_pos_by_batch{batch, position}`` — R_{B,k}:
  drafts of those steps that proposed at least k tokens (vLLM's
  ``num_draft_tokens_per_pos``). With dynamic γ drafts are shorter than γ, and
  A_k / R_k (not A_k / D) is the acceptance of the drafts that reached position k;
- ``specdec:engine_steps{shape, tokens, fits_specialized}`` — engine steps by shape
  (``pure_decode``: one token per request; ``uniform_verify``: every request verifies
  γ + 1; ``partial_verify``: decode only, drafts of mixed length; ``with_prefill``: some
  request is in its prompt), by token count (exact up to the specialized path's limit of
  64, ``gt64`` above), and whether a step of that shape and count fits the Kimi K3
  specialized decode path (model/specialized.py: clean shape, prepared token count);
- ``specdec:engine_step_seconds{shape, tokens, fits_specialized, timer}`` — Σ the time of
  the steps of that key that carried ``timer``, and ``specdec:engine_timed_steps{…, timer}``
  the steps it summed: seconds / timed steps is the mean step time at that shape and token
  count. ``timer`` says which clock (acceptance/vllm_plugin.py says why each, and its limits):
  ``inter_token_latency`` — the median of the step's per-request inter-token latencies (vLLM's
  ``IterationStats.inter_token_latencies_iter``: the engine's output timestamps, the period
  from the previous step's output to this one's, the clock of ``vllm:inter_token_latency_seconds``);
  ``iteration_elapsed`` — ``SchedulerIterationDetails.elapsed_ms`` (only with
  ``--enable-logging-iteration-details``): the wait for the model's output, a lower bound.
  A step with no latency of a timer (no request had a token before it) is in neither of
  that timer's series, so the mean is over timed steps only.

Summed over ``batch``, the by-batch families give the engine's SpecCounts with
``draft_tokens_per_position`` filled; T = Σ_k R_k and A = Σ_k A_k.

Batch buckets are powers of two, labelled by their integer range: "1", "2", "3-4",
"5-8", …, "257-512", "513+".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol, Sequence

from . import vllm_metrics as vm
from .errors import InputError
from .counts import SpecCounts, survival

DRAFTS_BY_BATCH = "specdec:spec_decode_drafts_by_batch"
ACCEPTED_PER_POSITION_BY_BATCH = "specdec:spec_decode_accepted_tokens_per_pos_by_batch"
DRAFT_TOKENS_PER_POSITION_BY_BATCH = "specdec:spec_decode_draft_tokens_per_pos_by_batch"
ENGINE_STEPS = "specdec:engine_steps"
ENGINE_STEP_SECONDS = "specdec:engine_step_seconds"
ENGINE_TIMED_STEPS = "specdec:engine_timed_steps"

PLUGIN_FAMILIES = (DRAFTS_BY_BATCH, ACCEPTED_PER_POSITION_BY_BATCH, DRAFT_TOKENS_PER_POSITION_BY_BATCH, ENGINE_STEPS,
                   ENGINE_STEP_SECONDS, ENGINE_TIMED_STEPS)
STEP_FAMILIES = (ENGINE_STEPS, ENGINE_STEP_SECONDS, ENGINE_TIMED_STEPS)  # keyed by (shape, tokens, fits_specialized)

HELP = {
    DRAFTS_BY_BATCH: "Spec decoding drafts, by the batch size of the step that verified them.",
    ACCEPTED_PER_POSITION_BY_BATCH: "Drafts whose first position+1 draft tokens were all accepted, by batch size.",
    DRAFT_TOKENS_PER_POSITION_BY_BATCH: "Drafts that proposed at least position+1 tokens, by batch size.",
    ENGINE_STEPS: "Engine steps by shape, token count (exact up to 64) and fit to the specialized decode path.",
    ENGINE_STEP_SECONDS: "Seconds of the engine steps that carried a timer (label timer), keyed as engine_steps.",
    ENGINE_TIMED_STEPS: "Engine steps that carried a timer (label timer), keyed as engine_steps: their seconds' count.",
}

BATCH_LABEL = "batch"
SHAPE_LABEL = "shape"
TOKENS_LABEL = "tokens"
FITS_LABEL = "fits_specialized"
TIMER_LABEL = "timer"
# every label of the plugin's series beyond the engine's (model_name, engine and the target's)
SERIES_LABELS = (BATCH_LABEL, vm.POSITION_LABEL, SHAPE_LABEL, TOKENS_LABEL, FITS_LABEL, TIMER_LABEL)

# A step's time, by clock (module docstring): the median of its requests' inter-token
# latencies, and vLLM's iteration details' elapsed time (a lower bound).
ITL_TIMER, ELAPSED_TIMER = "inter_token_latency", "iteration_elapsed"
TIMERS = (ITL_TIMER, ELAPSED_TIMER)

PURE_DECODE, UNIFORM_VERIFY, PARTIAL_VERIFY, WITH_PREFILL = "pure_decode", "uniform_verify", "partial_verify", "with_prefill"
SHAPES = (PURE_DECODE, UNIFORM_VERIFY, PARTIAL_VERIFY, WITH_PREFILL)
# The shapes the specialized path accepts at all (docs/MODEL.md, The specialized decode path: pure decode or uniform verify).
CLEAN_SHAPES = (PURE_DECODE, UNIFORM_VERIFY)

# Token counts are exact up to the specialized path's limit; above it they all run stock.
TOKENS_EXACT_LIMIT = 64
TOKENS_OVER_LIMIT = f"gt{TOKENS_EXACT_LIMIT}"

BATCH_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class PluginSeriesError(InputError):
    """The plugin's series cannot be read; the message is one line naming the series."""


@dataclass(frozen=True)
class BatchBucket:
    """Batch sizes low..high (high None: no upper bound)."""

    low: int
    high: int | None

    @property
    def label(self) -> str:
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def _buckets() -> tuple[BatchBucket, ...]:
    out, low = [], 1
    for high in BATCH_BOUNDS:
        out.append(BatchBucket(low, high))
        low = high + 1
    out.append(BatchBucket(low, None))
    return tuple(out)


BATCH_BUCKETS = _buckets()
_BUCKET_BY_LABEL = {b.label: b for b in BATCH_BUCKETS}


def batch_bucket(batch_size: int) -> BatchBucket:
    """The bucket of a step of ``batch_size`` requests (sizes below 1 count as 1)."""
    for b in BATCH_BUCKETS:
        if b.high is None or batch_size <= b.high:
            return b
    raise AssertionError("unreachable: the last bucket is open")


def parse_batch_label(label: str) -> BatchBucket:
    try:
        return _BUCKET_BY_LABEL[label]
    except KeyError:
        raise PluginSeriesError(f"{BATCH_LABEL}={label!r} is not one of the plugin's batch buckets") from None


def tokens_label(tokens: int) -> str:
    return str(tokens) if tokens <= TOKENS_EXACT_LIMIT else TOKENS_OVER_LIMIT


# --------------------------------------------------------------------------------------
# Parsed results
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepCount:
    """Steps of one shape and token count (tokens None: more than 64)."""

    shape: str
    tokens: int | None
    fits_specialized: bool
    steps: float


@dataclass(frozen=True)
class StepTime:
    """Timed steps of one shape and token count (tokens None: more than 64) by one clock:
    ``seconds`` / ``steps`` is their mean step time."""

    shape: str
    tokens: int | None
    fits_specialized: bool
    timer: str  # ITL_TIMER | ELAPSED_TIMER
    seconds: float
    steps: float

    @property
    def mean_s(self) -> float:
        return self.seconds / self.steps if self.steps > 0 else math.nan


@dataclass(frozen=True)
class SpecializedShare:
    """Share of steps that fit the specialized path, counted (not bounded) by the plugin.

    share = fitting / steps; clean_share = (pure_decode + uniform_verify) / steps.
    """

    share: float
    fitting_steps: float
    clean_steps: float
    steps: float
    source: str

    @property
    def clean_share(self) -> float:
        return self.clean_steps / self.steps if self.steps > 0 else math.nan


@dataclass(frozen=True)
class BatchSurvival:
    """Survival of one batch bucket: a_k = A_k / D, and reached_k = A_k / R_k (the
    acceptance of drafts that proposed at least k tokens; equals a_k when every draft
    was γ long)."""

    bucket: BatchBucket
    drafts: float
    survival: tuple[float, ...]
    reached_survival: tuple[float, ...]


def _gamma(by_batch: Mapping[str, SpecCounts]) -> int:
    return next(iter(by_batch.values())).gamma if by_batch else 0


def _total(by_batch: Mapping[str, SpecCounts]) -> SpecCounts | None:
    if not by_batch:
        return None
    it = iter(by_batch.values())
    acc = next(it)
    for c in it:
        acc = acc + c
    return acc


def _survival_by_batch(by_batch: Mapping[str, SpecCounts]) -> dict[str, BatchSurvival]:
    out = {}
    for label in sorted(by_batch, key=lambda lab: _BUCKET_BY_LABEL[lab].low):
        c = by_batch[label]
        reached = tuple(
            a / r if r > 0 else math.nan for a, r in zip(c.accepted_per_position, c.draft_tokens_per_position or ())
        )
        out[label] = BatchSurvival(_BUCKET_BY_LABEL[label], c.drafts, tuple(float(x) for x in survival(c)), reached)
    return out


def _steps_by_shape(steps: Iterable[StepCount]) -> dict[str, float]:
    out = {s: 0.0 for s in SHAPES}
    for s in steps:
        out[s.shape] += s.steps
    return out


def _specialized_share(steps: tuple[StepCount, ...]) -> SpecializedShare | None:
    total = sum(s.steps for s in steps)
    if total <= 0:
        return None
    fitting = sum((s.steps for s in steps if s.fits_specialized), 0.0)
    clean = sum((s.steps for s in steps if s.shape in CLEAN_SHAPES), 0.0)
    share = fitting / total
    source = (
        f"{ENGINE_STEPS}: {fitting:g} of {total:g} steps fit the specialized path ({share:.1%}); "
        f"{clean / total:.1%} are pure decode or uniform verify"
    )
    return SpecializedShare(share, fitting, clean, total, source)


class _PluginReadings:
    """What a set of plugin counts says (``by_batch`` and ``steps``), for one engine or a
    window's sum over engines."""

    by_batch: Mapping[str, SpecCounts]
    steps: tuple[StepCount, ...]
    step_times: tuple[StepTime, ...]

    @property
    def gamma(self) -> int:
        return _gamma(self.by_batch)

    def total(self) -> SpecCounts | None:
        """Σ over batch buckets (None: no spec-decode series)."""
        return _total(self.by_batch)

    def survival_by_batch(self) -> dict[str, BatchSurvival]:
        """Per bucket (ascending batch size): a_k = A_k / D and reached_k = A_k / R_k."""
        return _survival_by_batch(self.by_batch)

    def steps_by_shape(self) -> dict[str, float]:
        return _steps_by_shape(self.steps)

    def specialized_share(self) -> SpecializedShare | None:
        """Steps that fit the specialized path over all steps (None: no steps counted)."""
        return _specialized_share(self.steps)


@dataclass(frozen=True)
class PluginEngineCounts(_PluginReadings):
    """One engine's plugin series (cumulative as exposed, or a window's deltas)."""

    model_name: str
    engine: str
    by_batch: Mapping[str, SpecCounts] = field(default_factory=dict)  # batch label → counts
    steps: tuple[StepCount, ...] = ()
    step_times: tuple[StepTime, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_name, self.engine)


@dataclass(frozen=True)
class PluginTotals(_PluginReadings):
    """The plugin's counts summed over a window and over engines of ONE γ (a route
    segment's: acceptance.windows), with PluginEngineCounts' readings.

    by_batch: batch label → Σ SpecCounts (D, A_k, R_k = ``draft_tokens_per_position``);
    steps: Σ steps per (shape, tokens, fits_specialized); engines: how many engines
    exported plugin series in the window; step_times: Σ seconds and timed steps per
    (shape, tokens, fits_specialized, timer).
    """

    by_batch: Mapping[str, SpecCounts] = field(default_factory=dict)
    steps: tuple[StepCount, ...] = ()
    engines: int = 0
    step_times: tuple[StepTime, ...] = ()


# --------------------------------------------------------------------------------------
# Flat column form (the store's packed arrays: acceptance.store keeps one float64 vector
# per engine per scrape, its columns named by a layout)
# --------------------------------------------------------------------------------------

# Column names: "drafts:<batch>", "accepted:<batch>:<position>", "reached:<batch>:<position>",
# "steps:<shape>:<tokens or gt64>:<true|false>", and per timer "seconds:<timer>:<shape>:<tokens
# or gt64>:<true|false>" and "timed:<timer>:…" (a step time's Σ seconds and timed steps).
SECONDS_COLUMN, TIMED_COLUMN = "seconds", "timed"


def _step_key_text(shape: str, tokens: int | None, fits: bool) -> str:
    return f"{shape}:{TOKENS_OVER_LIMIT if tokens is None else tokens}:{'true' if fits else 'false'}"


def step_time_columns(timer: str, shape: str, tokens: int | None, fits: bool) -> tuple[str, str]:
    """The (seconds, timed steps) column names of one step-time key."""
    key = _step_key_text(shape, tokens, fits)
    return f"{SECONDS_COLUMN}:{timer}:{key}", f"{TIMED_COLUMN}:{timer}:{key}"


def parse_step_time_column(name: str) -> tuple[str, str, str, int | None, bool] | None:
    """(kind: seconds|timed, timer, shape, tokens, fits) of a step-time column; None for another column."""
    kind, _, rest = name.partition(":")
    if kind not in (SECONDS_COLUMN, TIMED_COLUMN):
        return None
    timer, shape, tok, fits = rest.split(":")
    return kind, timer, shape, None if tok == TOKENS_OVER_LIMIT else int(tok), fits == "true"


def plugin_columns(counts: PluginEngineCounts) -> tuple[tuple[str, ...], list[float]]:
    """(column names, values) of one engine's plugin counts, in a fixed order."""
    names: list[str] = []
    values: list[float] = []
    for label in sorted(counts.by_batch, key=lambda lab: _BUCKET_BY_LABEL[lab].low):
        c = counts.by_batch[label]
        names.append(_drafts_column(label))
        values.append(float(c.drafts))
        for k, a in enumerate(c.accepted_per_position):
            names.append(_position_column(ACCEPTED_PER_POSITION_BY_BATCH, label, k))
            values.append(float(a))
        for k, r in enumerate(c.draft_tokens_per_position or ()):
            names.append(_position_column(DRAFT_TOKENS_PER_POSITION_BY_BATCH, label, k))
            values.append(float(r))
    for st in counts.steps:
        names.append(_steps_column(st.shape, st.tokens, st.fits_specialized))
        values.append(float(st.steps))
    for tt in counts.step_times:
        names += step_time_columns(tt.timer, tt.shape, tt.tokens, tt.fits_specialized)
        values += [float(tt.seconds), float(tt.steps)]
    return tuple(names), values


def _drafts_column(batch: str) -> str:
    return f"drafts:{batch}"


def _position_column(family: str, batch: str, position: int) -> str:
    return f"{'accepted' if family == ACCEPTED_PER_POSITION_BY_BATCH else 'reached'}:{batch}:{position}"


def _steps_column(shape: str, tokens: int | None, fits: bool) -> str:
    return f"steps:{_step_key_text(shape, tokens, fits)}"


def series_column(family: str, labels: Mapping[str, str]) -> str:
    """The ``plugin_columns`` name of one plugin series: its family (a PLUGIN_FAMILIES name,
    without ``_total``) and its labels, checked as a page's are (PluginSeriesError, one line
    naming the series) — for a source that sums the series itself (acceptance.prometheus)."""
    if family not in PLUGIN_FAMILIES:
        raise PluginSeriesError(f"{family}: not one of the plugin's series")
    if family in STEP_FAMILIES:
        shape, tokens, fits = _step_key(family, labels)
        if family == ENGINE_STEPS:
            return _steps_column(shape, tokens, fits)
        timer = labels.get(TIMER_LABEL)
        if timer not in TIMERS:
            raise PluginSeriesError(f"{family}{dict(labels)}: {TIMER_LABEL} {timer!r} is not one of {', '.join(TIMERS)}")
        return step_time_columns(timer, shape, tokens, fits)[family == ENGINE_TIMED_STEPS]
    batch = labels.get(BATCH_LABEL, "")
    parse_batch_label(batch)  # refuses a missing label ("")
    if family == DRAFTS_BY_BATCH:
        return _drafts_column(batch)
    return _position_column(family, batch, _position(family, labels))


def plugin_columns_gamma(columns: Iterable[str]) -> int:
    """γ of a plugin layout: the number of positions of its accepted columns (0: none)."""
    positions = {int(c.rsplit(":", 1)[1]) for c in columns if c.startswith("accepted:")}
    return max(positions) + 1 if positions else 0


def plugin_totals_from_columns(values: Mapping[str, float], engines: int = 0) -> PluginTotals:
    """PluginTotals from summed column values (``plugin_columns`` names)."""
    drafts: dict[str, float] = {}
    per_pos: dict[str, dict[str, dict[int, float]]] = {"accepted": {}, "reached": {}}
    steps = []
    times: dict[tuple[str, str, int | None, bool], list[float]] = {}
    for name, v in values.items():
        kind, _, rest = name.partition(":")
        if kind in (SECONDS_COLUMN, TIMED_COLUMN):
            parsed = parse_step_time_column(name)
            assert parsed is not None  # kind is a step-time column's
            times.setdefault(parsed[1:], [0.0, 0.0])[kind == TIMED_COLUMN] += float(v)
        elif kind == "drafts":
            drafts[rest] = float(v)
        elif kind in per_pos:
            label, _, pos = rest.rpartition(":")
            per_pos[kind].setdefault(label, {})[int(pos)] = float(v)
        elif kind == "steps":
            shape, tok, fits = rest.split(":")
            steps.append(StepCount(shape, None if tok == TOKENS_OVER_LIMIT else int(tok), fits == "true", float(v)))
    by_batch = {}
    for label in sorted(drafts, key=lambda lab: _BUCKET_BY_LABEL[lab].low):
        acc, reached = per_pos["accepted"].get(label, {}), per_pos["reached"].get(label, {})
        g = len(acc)
        by_batch[label] = _counts(drafts[label], [acc.get(k, 0.0) for k in range(g)],
                                  [reached.get(k, 0.0) for k in range(g)])
    steps.sort(key=lambda s: (SHAPES.index(s.shape), s.tokens or 10**9, s.fits_specialized))
    return PluginTotals(by_batch, tuple(steps), engines, _step_times(times))


def _step_times(times: Mapping[tuple[str, str, int | None, bool], Sequence[float]]) -> tuple[StepTime, ...]:
    """StepTime per (timer, shape, tokens, fits) from [seconds, timed steps], in a fixed order."""
    order = sorted(times, key=lambda k: (TIMERS.index(k[0]), SHAPES.index(k[1]), k[2] or 10**9, k[3]))
    return tuple(StepTime(shape, tokens, fits, timer, float(times[k][0]), float(times[k][1]))
                 for k in order for timer, shape, tokens, fits in [k])


def _counts(drafts: float, accepted: list[float], reached: list[float]) -> SpecCounts:
    return SpecCounts(drafts, float(sum(reached)), float(sum(accepted)), tuple(accepted), tuple(reached))


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


def _check_value(name: str, labels: Mapping[str, str], value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise PluginSeriesError(f"{name}{dict(labels)}: counter value {value!r} is not a finite number ≥ 0")
    return float(value)


def _position(name: str, labels: Mapping[str, str]) -> int:
    raw = labels.get(vm.POSITION_LABEL)
    if raw is None:
        raise PluginSeriesError(f"{name}{dict(labels)}: position {raw!r} is not an integer")
    try:
        pos = int(raw)
    except (TypeError, ValueError):
        raise PluginSeriesError(f"{name}{dict(labels)}: position {raw!r} is not an integer") from None
    if pos < 0:
        raise PluginSeriesError(f"{name}{dict(labels)}: position {pos} is negative")
    return pos


class _Sample(Protocol):
    """A sample as prometheus-client's parser or a registry's ``collect()`` gives it."""

    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def value(self) -> float: ...


class _Family(Protocol):
    @property
    def samples(self) -> Sequence[_Sample]: ...


def plugin_counts_from_families(families: Iterable[_Family]) -> dict[tuple[str, str], PluginEngineCounts]:
    """Per-engine plugin counts from parsed metric families (``prometheus_client.parser``
    or ``Metric`` objects from a registry's ``collect()``); other families are ignored.
    An engine with none of the plugin's series is absent from the result."""
    drafts: dict[tuple[str, str], dict[str, float]] = {}
    per_pos: dict[str, dict[tuple[str, str], dict[str, dict[int, float]]]] = {
        ACCEPTED_PER_POSITION_BY_BATCH: {},
        DRAFT_TOKENS_PER_POSITION_BY_BATCH: {},
    }
    steps: dict[tuple[str, str], dict[tuple[str, int | None, bool], float]] = {}
    # family → engine → timer → step key → value
    timed: dict[str, dict[tuple[str, str], dict[str, dict[tuple[str, int | None, bool], float]]]] = {
        ENGINE_STEP_SECONDS: {}, ENGINE_TIMED_STEPS: {}}
    engines: set[tuple[str, str]] = set()
    for fam in families:
        for sample in fam.samples:
            sname = sample.name
            if not sname.startswith("specdec:") or not sname.endswith("_total"):
                continue  # _created samples and other families
            name = sname[: -len("_total")]
            if name not in PLUGIN_FAMILIES:
                continue
            labels = sample.labels
            key = (labels.get(vm.MODEL_NAME_LABEL, ""), labels.get(vm.ENGINE_LABEL, ""))
            value = _check_value(name, labels, sample.value)
            engines.add(key)
            if name in STEP_FAMILIES:
                skey = _step_key(name, labels)
                if name == ENGINE_STEPS:
                    bucket = steps.setdefault(key, {})
                else:
                    timer = labels.get(TIMER_LABEL)
                    if timer not in TIMERS:
                        raise PluginSeriesError(f"{name}{dict(labels)}: {TIMER_LABEL} {timer!r} is not one of {', '.join(TIMERS)}")
                    bucket = timed[name].setdefault(key, {}).setdefault(timer, {})
                if skey in bucket:
                    raise PluginSeriesError(f"{name}{dict(labels)}: the same series twice")
                bucket[skey] = value
                continue
            label = labels.get(BATCH_LABEL, "")
            parse_batch_label(label)  # refuses a missing label ("")
            if name == DRAFTS_BY_BATCH:
                d = drafts.setdefault(key, {})
                if label in d:
                    raise PluginSeriesError(f"{name}{dict(labels)}: the same series twice")
                d[label] = value
            else:
                pos = _position(name, labels)
                by_pos = per_pos[name].setdefault(key, {}).setdefault(label, {})
                if pos in by_pos:
                    raise PluginSeriesError(f"{name}{dict(labels)}: the same series twice")
                by_pos[pos] = value
    result = {}
    for key in sorted(engines):
        by_batch = {}
        labels_seen = set(drafts.get(key, {})) | {
            lab for fam in per_pos.values() for lab in fam.get(key, {})
        }
        gamma = None
        for label in labels_seen:
            where = f"engine {key[1]!r} ({key[0]}) batch {label!r}"
            if label not in drafts.get(key, {}):
                raise PluginSeriesError(f"{DRAFTS_BY_BATCH}: {where} has per-position series but no drafts")
            acc = per_pos[ACCEPTED_PER_POSITION_BY_BATCH].get(key, {}).get(label, {})
            reached = per_pos[DRAFT_TOKENS_PER_POSITION_BY_BATCH].get(key, {}).get(label, {})
            if set(acc) != set(reached):
                raise PluginSeriesError(
                    f"{ACCEPTED_PER_POSITION_BY_BATCH}: {where} positions {sorted(acc)} differ from "
                    f"{DRAFT_TOKENS_PER_POSITION_BY_BATCH} positions {sorted(reached)}"
                )
            if set(acc) != set(range(len(acc))):
                raise PluginSeriesError(f"{ACCEPTED_PER_POSITION_BY_BATCH}: {where} positions {sorted(acc)} are not 0..γ-1")
            if gamma is None:
                gamma = len(acc)
            elif gamma != len(acc):
                raise PluginSeriesError(f"{ACCEPTED_PER_POSITION_BY_BATCH}: {where} has γ {len(acc)}, other batches {gamma}")
            by_batch[label] = _counts(
                drafts[key][label], [acc[k] for k in range(len(acc))], [reached[k] for k in range(len(reached))]
            )
        step_counts = tuple(
            StepCount(shape, tokens, fits, v)
            for (shape, tokens, fits), v in sorted(
                steps.get(key, {}).items(), key=lambda kv: (SHAPES.index(kv[0][0]), kv[0][1] or 10**9, kv[0][2])
            )
        )
        result[key] = PluginEngineCounts(key[0], key[1], by_batch, step_counts, _engine_step_times(key, timed))
    return result


def _step_key(name: str, labels: Mapping[str, str]) -> tuple[str, int | None, bool]:
    """(shape, tokens (None: gt64), fits_specialized) of a step family's sample."""
    shape, tok, fits = labels.get(SHAPE_LABEL), labels.get(TOKENS_LABEL), labels.get(FITS_LABEL)
    if shape not in SHAPES:
        raise PluginSeriesError(f"{name}{dict(labels)}: shape {shape!r} is not one of {', '.join(SHAPES)}")
    if fits not in ("true", "false"):
        raise PluginSeriesError(f"{name}{dict(labels)}: {FITS_LABEL} {fits!r} is not true or false")
    if tok == TOKENS_OVER_LIMIT:
        return shape, None, fits == "true"
    bad = f"{name}{dict(labels)}: tokens {tok!r} is not an integer or {TOKENS_OVER_LIMIT}"
    if tok is None:
        raise PluginSeriesError(bad)
    try:
        tokens = int(tok)
    except (TypeError, ValueError):
        raise PluginSeriesError(bad) from None
    if not 1 <= tokens <= TOKENS_EXACT_LIMIT:
        raise PluginSeriesError(f"{name}{dict(labels)}: tokens {tokens} outside 1..{TOKENS_EXACT_LIMIT}")
    return shape, tokens, fits == "true"


def _engine_step_times(key: tuple[str, str], timed: Mapping[str, Mapping[tuple[str, str], Mapping[
        str, Mapping[tuple[str, int | None, bool], float]]]]) -> tuple[StepTime, ...]:
    """One engine's StepTimes: its seconds and timed-steps series must name the same keys
    (the plugin writes both of a key at once)."""
    seconds = timed[ENGINE_STEP_SECONDS].get(key, {})
    counts = timed[ENGINE_TIMED_STEPS].get(key, {})
    times: dict[tuple[str, str, int | None, bool], list[float]] = {}
    for timer in set(seconds) | set(counts):
        s_keys, n_keys = seconds.get(timer, {}), counts.get(timer, {})
        if set(s_keys) != set(n_keys):
            odd = sorted(set(s_keys) ^ set(n_keys), key=str)[0]
            raise PluginSeriesError(f"{ENGINE_STEP_SECONDS}: engine {key[1]!r} ({key[0]}) timer {timer!r} step "
                                    f"{_step_key_text(*odd)!r} has seconds or timed steps but not both")
        for skey in s_keys:
            times[(timer, *skey)] = [s_keys[skey], n_keys[skey]]
    return _step_times(times)


def parse_plugin_page(text: str, source: str = "page") -> dict[tuple[str, str], PluginEngineCounts]:
    """The plugin's series from a /metrics page (only its lines are parsed)."""
    from prometheus_client.parser import text_string_to_metric_families

    lines = [ln for ln in text.splitlines() if ln.startswith("specdec:")]
    try:
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except ValueError as e:
        raise PluginSeriesError(f"{source}: cannot parse the plugin's series ({str(e).splitlines()[0] if str(e) else e!r})") from None
    try:
        return plugin_counts_from_families(families)
    except PluginSeriesError as e:
        raise PluginSeriesError(f"{source}: {e}") from None
