"""The shape of the two JSON documents users' scripts read, written once as TypedDicts.

``TuneGamma`` is ``tune-gamma --json`` (one route: specdec.report.tuning_to_dict) and
``DeploymentDocument`` is ``tune-gamma --deployment NAME --json`` (specdec.report.
deployment_to_dict), each as returned, before ``json_document`` puts ``schema_version`` first.
Their keys are an interface (docs/REFERENCE.md, The tune-gamma JSON): extend, never rename.
The producers return these types: mypy holds the keys specdec.report writes itself (``observed`` and its
parts, the deployment's two keys); tests/test_json_schema.py holds those the model's ``to_dict`` methods
write, validating real outputs. specdec.json_schema turns them into the committed JSON Schemas (docs/schema/).
Conventions the schema generator reads:
- ``NotRequired``: a key present only sometimes (``observed``'s window-only keys, the
  roofline's ``profile_figures``); every other key is always written, null where ``| None``;
- ``float``: a number, or null where it is not finite (NaN and ±inf are written as null:
  acceptance.json_safe); an ``int`` is never null unless ``| None`` says so;
- ``Annotated[list[...], Length(n)]``: a list of exactly n items (an interval, a range).
"""

from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from model.deployment import EngineCostScale
from model.speculative_keys import KEYS


@dataclass(frozen=True)
class Length:
    """Annotated metadata: the list always holds exactly ``n`` items."""

    n: int


Interval = Annotated[list[float], Length(2)]
"""[low, high]; each null where not finite (or where there is no interval)."""

DecisionKind = Literal["change", "keep", "off", "probe", "undecided"]


# ------------------------------------------------------------------------------ observed


class Window(TypedDict):
    """The window's epoch seconds."""

    start: float
    end: float


class Segment(TypedDict):
    """One γ segment of the window; engines as [target, model_name, engine]."""

    gamma: int
    start: float
    end: float
    drafts: float
    engines: list[list[str]]
    newest: bool
    current: bool
    engines_at_end: list[list[str]]


class Drift(TypedDict):
    """Whether the newest part of the window differs from the rest (acceptance.estimates.Drift)."""

    detected: bool
    tested: bool
    recent_mean_acceptance_length: float
    earlier_mean_acceptance_length: float
    difference: float
    difference_interval: Interval
    recent_start: float
    message: str


class BatchSurvival(TypedDict):
    """The specdec plugin's survival of one batch bucket."""

    drafts: float
    survival: list[float]
    survival_reached: list[float]
    used_in_model: bool


class ProbeSegment(TypedDict):
    """A probe joined to the deployed segment, running or ended (model.probe.running)."""

    gamma: int
    drafts: float
    engines: int | None
    survival: list[float]
    shared_difference: float
    shared_difference_interval: Interval
    agrees: bool
    joined_survival: list[float]
    sources: list[Literal["main", "probe"]]
    running: bool


class Event(TypedDict):
    """An event of the window (acceptance.store.records.Event, without its data)."""

    time: float
    target: str
    model_name: str | None
    engine: str | None
    kind: str
    detail: str


class TargetStatus(TypedDict):
    """A scraped target's health (acceptance.store.records.TargetStatus)."""

    target: str
    last_ok_time: float | None
    last_error: str | None
    failing_since: float | None


class Observed(TypedDict):
    """What the window (or the typed-in curve) measured."""

    gamma: int
    drafts: float
    survival: list[float]
    survival_low: list[float] | None
    survival_high: list[float] | None
    conditional: list[float]
    mean_acceptance_length: float
    mean_acceptance_length_interval: Interval
    draft_acceptance_rate: float
    equivalent_p: float
    equivalent_p_interval: Interval
    interval_method: str
    segments: list[Segment]
    drift: Drift | None
    drafts_more_needed: int | None
    batch_mix: dict[str, float] | None
    notes: list[str]
    survival_reached: list[float] | None
    mean_draft_length: float
    reached: list[float] | None
    undrafted_token_share: float | None
    undrafted_token_share_source: str | None
    survival_by_batch: dict[str, BatchSurvival] | None
    probe_segment: ProbeSegment | None
    # with a window only (not a typed-in curve)
    events: NotRequired[list[Event]]
    batch_time_shares: NotRequired[dict[str, float]]
    observed_tokens_per_second: NotRequired[float | None]
    targets: NotRequired[list[TargetStatus]]


# ------------------------------------------------------------------------------ the recommendation


class Candidate(TypedDict):
    """One γ priced (model.recommendation.Candidate)."""

    gamma: int
    speedup: float
    speedup_low: float | None
    speedup_high: float | None
    tokens_per_second: float | None
    probability_best: float | None
    extrapolated: bool
    allowed: bool
    reason: str | None
    expected_tokens: float | None


class _DraftConfig(TypedDict):
    method: str
    num_speculative_tokens: int
    parallel_drafting: NotRequired[bool]
    model: NotRequired[str]


_JSON_HINTS: dict[str, Any] = {"boolean": bool, "integer": int, "number": float, "string": str,
                               "object": dict[str, Any]}


def _engine_keys(name: str, leave_out: tuple[str, ...] = ()) -> Any:
    """The engine's other --speculative-config keys ([deployment] speculative_keys), each
    optional, typed from their one list (model.speculative_keys.KEYS)."""
    hints = {}
    for key, spec in KEYS.items():
        if key in leave_out:
            continue
        hint: Any = Literal[spec.choices] if spec.choices else _JSON_HINTS[spec.json_type]
        hints[key] = NotRequired[hint | None if spec.nullable else hint]
    return TypedDict(name, hints)  # type: ignore[operator]


_EngineKeys = _engine_keys("_EngineKeys")
_ReplayEngineKeys = _engine_keys("_ReplayEngineKeys", leave_out=("rejection_sample_method",))


class SpeculativeConfig(_DraftConfig, _EngineKeys):  # type: ignore[misc]
    """vLLM's --speculative-config (model.vllm_config.speculative_config): the method, γ and
    draft model, the engine's other keys as [deployment] speculative_keys gives them."""

    num_speculative_tokens_per_batch_size: NotRequired[list[Annotated[list[int], Length(3)]]]


class SpeculativeKeysUnknown(TypedDict):
    """A deploy line written without the method's own keys (model.speculative_keys)."""

    method: str
    keys: list[str]
    vllm_defaults: dict[str, Any]


class Vllm(TypedDict):
    """What deploys the decision; both null when no deploy line may rest on a default."""

    speculative_config: SpeculativeConfig | None
    command_line: str | None
    speculative_keys_unknown: SpeculativeKeysUnknown | None


class ReplaySpeculativeConfig(_DraftConfig, _ReplayEngineKeys):  # type: ignore[misc]
    """A --speculative-config that replays the observed curve (benchmarks only, never deployable)."""

    rejection_sample_method: str
    synthetic_acceptance_rates: list[float]


class ReplayConfig(TypedDict):
    """model.vllm_config.replay_config."""

    speculative_config: ReplaySpeculativeConfig
    warning: str


class Eligibility(TypedDict):
    """The share of decode steps the specialized path takes, and its source."""

    share: float
    source: str


class BatchPoint(TypedDict):
    """One batch size of the route's mix (model.load.BatchPoint)."""

    batch_size: int
    request_share: float
    best_gamma: int
    speedup_at_best: float
    speedup_at_gamma: float


class Load(TypedDict):
    """The best γ by batch size (model.load.LoadView)."""

    gamma: int
    batch_sizes: list[BatchPoint]
    stops_paying_at: int | None
    schedule: list[Annotated[list[int], Length(3)]] | None
    schedule_dropped_for: str | None


class Anchor(TypedDict):
    """The plain-decode rate the cost profile is anchored on, and its source (model.anchor)."""

    baseline_tokens_per_second: float | None
    source: str
    detail: str
    observed_gamma: int | None  # source "observed": the deployed γ whose rate was observed, else null
    rests_on_defaults: list[str]  # source "observed": the default figures carrying that rate to γ 0


class Figure(TypedDict):
    """A figure the pricing used, and where it came from (configured, flag, page, default)."""

    value: str | float
    source: str


class NumberFigure(TypedDict):
    """A roofline figure (model.figures.Figure)."""

    value: float
    source: str


class GpuFigures(TypedDict):
    """The GPU's roofline figures; dense_flops by precision."""

    hbm_bytes_per_s: NumberFigure
    dense_flops: dict[str, NumberFigure]


class ModelFigures(TypedDict):
    """The model's roofline figures (model.anchor.MODEL_FIGURES)."""

    total_params: NumberFigure
    active_params: NumberFigure
    experts: NumberFigure
    experts_per_token: NumberFigure
    bytes_per_weight: NumberFigure
    hidden_size: NumberFigure
    kv_bytes_per_token: NumberFigure
    state_bytes_per_request: NumberFigure
    context_tokens: NumberFigure
    input_embedding_params: NumberFigure


class CostPoint(TypedDict):
    """One measured point of the cost shape (model.verify_cost.CostPoint)."""

    name: str  # drafted_steps | undrafted_steps | plain_decode | segment | plugin_pure_decode | plugin_uniform_verify
    gamma: int
    tokens_per_request: float
    step_s: float
    low: float | None
    high: float | None
    source: str
    fitted: bool
    batch_sizes: list[int] | None  # a plugin point's batch sizes (null: the segment's own mix)
    timed_steps: float | None  # a plugin point's timed steps
    decode_share: float | None  # a plugin pair's: its segment's decode steps that may run at its batch sizes


class VerifyCost(TypedDict):
    """The cost shape the engines measure beside the profile's (model.verify_cost.VerifyCost.to_dict)."""

    points: list[CostPoint]
    slope_s_per_token: float
    slope_low: float
    slope_high: float
    level: float
    one_token_step_s: float
    reference_tokens_per_request: float
    measured_ratio: float
    measured_ratio_low: float
    measured_ratio_high: float
    assumed_profile: str
    assumed_slope_s_per_token: float | None
    assumed_ratio: float | None
    disagrees: bool
    preferred: bool
    contradicts_configured: bool
    largest_gamma: int


class ProfileFigures(TypedDict):
    """The figures the cost profile used, each with its source (model.anchor.profile_figures)."""

    profile: str
    baseline_tokens_per_second: Anchor
    method: Figure
    draft_cost: Figure
    draft_overhead: Figure
    cost_profile: Figure
    unused: dict[str, str]  # the keys this pricing does not read, and why (a flag setting one is refused)
    verify_cost: VerifyCost | None  # the cost shape the engines measure (model.verify_cost); null: none fitted
    # the roofline profile only
    model: NotRequired[Figure]
    gpu: NotRequired[Figure]
    tensor_parallel_size: NotRequired[Figure]
    gpu_figures: NotRequired[GpuFigures]
    model_figures: NotRequired[ModelFigures]
    engine_cost_scale: NotRequired[EngineCostScale | None]
    # a measured table only
    table: NotRequired[str]


class Gain(TypedDict):
    """A gain (speedup ratio − 1) and its interval (null ends without resamples)."""

    value: float
    low: float | None
    high: float | None


class Probe(TypedDict):
    """The probe to run on decision probe (model.probe.plan.Probe)."""

    gamma: int
    engines: int
    drafts_needed: int
    duration_s: float
    expected_cost: float
    expected_value: float
    speculative_config: SpeculativeConfig | None
    whole_route: bool
    loss_probability: float | None


class BreakEven(TypedDict):
    """The specialized decode speedups over which the decision's γ holds."""

    gamma: int
    holds_from: float | None
    holds_to: float | None
    gamma_below: int | None
    gamma_above: int | None
    configured: Interval
    source: str
    rests_on_configuration: bool
    warning: str | None


class SegmentLatency(TypedDict):
    """One segment's mean inter-token latency and the batch mix it was priced at."""

    gamma: int
    itl_mean_s: float
    batch_time_shares: dict[str, float] | None


class MeasuredSpeedup(TypedDict):
    """The specialized decode speedup measured from a probe's latency (model.probe.measured_speedup)."""

    value: float | None
    confidence_interval: Interval | None
    level: float
    baseline_tokens_per_second: float | None
    path_contrast: float | None
    segments: Annotated[list[SegmentLatency], Length(2)]
    reason: str | None
    window: Interval | None
    summary: str


class DeployedSpeedup(TypedDict):
    """The engines' own rate at the deployed γ over the user's plain decode (model.deployed_speedup)."""

    value: float
    gamma: int
    observed_tokens_per_second: float
    plain_tokens_per_second: float
    plain_source: Literal["configured", "flag", "measured table"]
    carried_by: Literal["flat", "roofline"] | None
    rests_on_defaults: list[str]
    slower_than_plain_decode: bool
    summary: str
    low: float | None
    high: float | None
    interval_rows: int | None
    interval_unit: Literal["scrape intervals", "requests"] | None
    probability_plain_decode_gains: float | None
    probability_deployed_gains: float | None
    decides: Literal["off", "keep"] | None


class MeasuredBetween(TypedDict):
    """Two γ the engines measured, the faster against the other, that decided (model.measured_segments)."""

    faster_gamma: int
    slower_gamma: int
    faster_tokens_per_second: float  # at the route's batch mix
    slower_tokens_per_second: float
    gain: float
    low: float
    high: float
    probability_gain_over_min_gain: float
    min_gain: float
    side_by_side: bool
    rows: Annotated[list[int], Length(2)]
    mix_factors: Annotated[list[float], Length(2)]
    measured_tokens_per_second: Annotated[list[float], Length(2)]
    rows_unit: Literal["scrape intervals", "requests"]


class FigureNeeded(TypedDict):
    """A default figure the decision would rest on, and what setting it changes."""

    key: str
    default: str | float | None
    changes: str


class RequestContext(TypedDict):
    """The route's context from its requests (acceptance.request_context)."""

    tokens: float
    source: str
    requests: int
    of_requests: int
    mean_prompt_tokens: float
    mean_output_tokens: float


class ContextBand(TypedDict):
    """One band of prompt lengths priced from its own requests (model.context_bands)."""

    prompt_tokens_from: float
    prompt_tokens_to: float
    context_tokens: float
    requests: int
    mean_acceptance_length: float
    mean_acceptance_length_interval: Interval
    observed_tokens_per_second: float | None
    best_gamma: int
    best_extrapolated: bool
    speedup_at_best: float
    speedup_at_gamma: float
    speedup_at_gamma_interval: Interval
    probability_gain: float | None


class Routing(TypedDict):
    """Long prompts sent to engines of another γ."""

    prompt_tokens_from: float
    gamma: int
    gain: float
    sure: bool
    bands: int
    extrapolated: bool


class Context(TypedDict):
    """γ by prompt length (model.context_bands.ContextView)."""

    gamma: int
    route_context: RequestContext | None
    bands: list[ContextBand]
    stops_paying_from_prompt_tokens: float | None
    routing: Routing | None
    what_if: bool
    why_no_bands: str | None


class SamplingPopulation(TypedDict):
    """One population of a route's requests priced and decided apart (model.sampling_split)."""

    kind: Literal["greedy", "sampled", "high_acceptance", "low_acceptance"]
    requests: int
    temperature_from: float | None
    temperature_to: float | None
    context_tokens: float | None
    mean_acceptance_length: float
    mean_acceptance_length_interval: Interval
    undrafted_token_share: float | None
    tokens_per_step: float
    observed_tokens_per_second: float | None
    decision: DecisionKind
    decision_basis: Literal["measured", "model"]
    recommended_gamma: int
    gamma_to_deploy: int
    gain: Gain | None
    speedup_at_gamma: float
    speedup_at_gamma_interval: Interval
    speedup_measured: bool
    rests_on_defaults: bool


class SamplingSplitAdvice(TypedDict):
    """The populations run apart, or why not."""

    advised: bool
    gammas: dict[str, int]
    why_not: Literal["same_gamma", "undecided", "inferred"] | None


class SamplingInference(TypedDict):
    """The bimodality test of populations inferred from the requests' own acceptance."""

    statistic: Literal["tokens_per_step", "acceptance_length"]
    requests: int
    separation: float | None
    threshold: float
    cut: float | None
    low_mean: float | None
    high_mean: float | None
    bimodal: bool


class SamplingMix(TypedDict):
    """What a route's survival curve suggests of a mix (acceptance.acceptance_mix)."""

    first_position: float
    deeper_conditional: float
    share_accepting_nothing: float
    threshold: float
    mean_acceptance_length: float
    undrafted_token_share: float | None


class Sampling(TypedDict):
    """Greedy and sampled requests priced apart (model.sampling_split.SamplingView)."""

    gamma: int
    basis: Literal["temperature", "inferred"] | None
    requests: int
    requests_with_temperature: int
    greedy_requests: int
    sampled_requests: int
    populations: list[SamplingPopulation]
    split: SamplingSplitAdvice | None
    inference: SamplingInference | None
    why_no_split: Literal["one_kind", "too_few", "not_bimodal"] | None
    mix_suggested: SamplingMix | None


class SharedDeploymentName(TypedDict):
    """The deployment a route shares, and its routes."""

    name: str
    routes: list[str]


class TuneGamma(TypedDict):
    """tune-gamma --json: one route's window, its candidates and the decision."""

    route: str
    window: Window | None
    objective: str
    cost_profile: str
    interval_level: float
    observed: Observed
    objective_axis: str
    deployed_gamma: int
    recommended_gamma: int
    gamma_to_deploy: int
    decision: DecisionKind
    decision_reason: str
    decision_basis: Literal["measured", "model"]
    measured_between: MeasuredBetween | None
    probability_best: float | None
    candidates: list[Candidate]
    model_error: float | None
    vllm: Vllm
    replay_config: ReplayConfig | None
    specialized_eligibility: Eligibility | None
    schedule: list[Annotated[list[int], Length(3)]] | None
    load: Load | None
    verify_widths: list[float] | None
    acceptance_model: Literal["survival", "replay"]
    replayed_requests: int | None
    anchor: Anchor | None
    profile_figures: ProfileFigures | None
    gain: Gain | None
    drafts_factor_to_settle: float | None
    expected_best_gamma: int | None
    probe: Probe | None
    model_error_warning: str | None
    specialized_break_even: BreakEven | None
    specialized_speedup_measured: MeasuredSpeedup | None
    deployed_speedup_measured: DeployedSpeedup | None
    figures_needed: list[FigureNeeded]
    context: Context | None
    sampling: Sampling | None
    shared_deployment: SharedDeploymentName | None


# ------------------------------------------------------------------------------ the deployment


class JointCandidate(TypedDict):
    """One γ for the whole deployment: the routes' token-weighted harmonic mean speedup."""

    gamma: int
    speedup: float
    speedup_low: float | None
    speedup_high: float | None
    allowed: bool


class SplitGain(TypedDict):
    """A route on engines of its own: its γ, its speedup there and the gain of splitting it off."""

    route: str
    gamma: int
    speedup: float
    gain_of_splitting: float
    gain_low: float | None
    gain_high: float | None
    against_gamma: int
    gain_over_joint_best: float
    gain_over_joint_best_low: float | None
    gain_over_joint_best_high: float | None


class SharedDeployment(TypedDict):
    """The deployment's one γ (model.shared_deployment.DeploymentRecommendation)."""

    name: str
    routes: list[str]
    token_shares: dict[str, float]
    deployed_gamma: int
    recommended_gamma: int
    gamma_to_deploy: int
    decision: DecisionKind
    decision_reason: str
    gain: Gain | None
    candidates: list[JointCandidate]
    split: list[SplitGain]
    gain_of_splitting: Gain
    gain_of_splitting_over_joint_best: Gain | None
    vllm: Vllm
    figures_needed: list[FigureNeeded]


class DeploymentDocument(TypedDict):
    """tune-gamma --deployment NAME --json: the deployment's one γ and each route's own document."""

    deployment: SharedDeployment
    routes: list[TuneGamma]
