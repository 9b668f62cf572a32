"""The shapes of an ``inspect`` report (``specdec inspect --json``), as TypedDicts: the report
(acceptance.inspect_report.inspect_report), each engine's entry and the parts other modules fill in —
its step cost (acceptance.engine_cost), its KV cache (engine_cost.kv_cache_config, set by
``specdec inspect``), its finished requests' context (acceptance.request_lengths). Types only:
a report is a plain dict at run time."""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict


class StepCostNotReported(TypedDict):
    """step_cost where the counters read 0 or no step was counted: ``why_not`` says which."""

    reported: Literal[False]
    why_not: str
    steps: float
    tokens_per_step: None
    decode_requests_per_step: None
    flops_per_step: None
    read_bytes_per_step: None
    write_bytes_per_step: None
    step_time_s: None
    bytes_per_s: None
    flops_per_s: None


class StepCostReported(TypedDict):
    """An engine's step cost per step and GPU (step_cost); the rates need the mean ITL
    (step_time_s: all three or none)."""

    reported: Literal[True]
    why_not: None
    steps: float
    tokens_per_step: float | None
    decode_requests_per_step: float | None
    flops_per_step: float
    read_bytes_per_step: float
    write_bytes_per_step: float
    step_time_s: float | None
    bytes_per_s: float | None
    flops_per_s: float | None


StepCost: TypeAlias = "StepCostReported | StepCostNotReported"


class KvCache(TypedDict):
    """The KV cache one engine's ``vllm:cache_config_info`` describes (kv_cache_config)."""

    cache_dtype: str | None
    block_size: int | None
    num_gpu_blocks: int | None
    tokens: int | None
    memory_bytes: int | None
    bytes_per_token_at_most: float | None
    check: NotRequired[dict[str, object] | None]  # set by `specdec inspect` (model.engine_cost_check)


class RooflineCheck(TypedDict):
    """The roofline's step beside the one an engine reports, and their ratios (set by ``specdec
    inspect``: model.engine_cost_check.check_engine_cost)."""

    model: str
    source: str
    tensor_parallel_size: int
    context_tokens: dict[str, object]  # the figure priced at: {"value", "source"}
    decode_requests_per_step: float
    tokens_per_request: float
    read_bytes_per_step: float
    flops_per_step: float
    read_bytes_ratio: float
    flops_ratio: float
    disagree: list[str]
    summary: str


class ContextEntry(TypedDict):
    """What a page says of its finished requests' lengths (request_context)."""

    requests: int
    mean_prompt_tokens: float
    mean_output_tokens: float
    decode_context_tokens: float


class CountsEntry(TypedDict):
    """One engine's counts (or a total's) in an ``inspect`` report, JSON-safe."""

    gamma: int
    drafts: float
    draft_tokens: float
    accepted_tokens: float
    accepted_per_position: list[float]
    survival: list[float | None]
    conditional: list[float | None]
    mean_acceptance_length: float | None
    draft_acceptance_rate: float | None
    equivalent_p: float | None
    scrape_race: NotRequired[str | None]  # speculating engines only


class DecodeEntry(TypedDict):
    """One engine's decode steps and tokens since it started (decode_steps_entry)."""

    decode_steps: float
    decode_tokens: float | None
    tokens_source: str
    undrafted_token_share: float | None
    undrafted_token_share_steps: float | None  # ν of N = S + A, as tune-gamma counts a window
    accepted_not_output: float | None
    accepted_not_output_max: float | None
    consistent: bool | None


class EngineEntry(CountsEntry):
    """One engine of an ``inspect`` report (inspect_report)."""

    model_name: str
    engine: str
    mean_itl_ms: float | None
    decode: DecodeEntry | None
    context: ContextEntry | None
    engine_cost: StepCost | None
    kv_cache: NotRequired[KvCache | None]  # set by `specdec inspect` (engine_cost.kv_cache_config)
    roofline_check: NotRequired[RooflineCheck | None]  # set by `specdec inspect` (model.engine_cost_check)


class InspectReport(TypedDict):
    """``specdec inspect --json`` without ``schema_version`` (inspect_report)."""

    engines: list[EngineEntry]
    total: CountsEntry | None
    totals_by_gamma: NotRequired[list[CountsEntry]]
    roofline_check_needs: NotRequired[str]  # set by `specdec inspect`
