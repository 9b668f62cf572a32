"""The engine's own step cost and KV cache beside the roofline's figures for the same step.

Where a page carries vLLM's MFU counters (acceptance.engine_cost), each engine's bytes read
and FLOPs per step and GPU are set beside what the roofline's model figures (a built-in's, or
read from a config.json: model.hf_config) give for that step over the TP group
(model.profiles.step_bytes, step_flops): B = the decode requests a step carries, n = its tokens,
q = n / B, at the context of the page's request lengths (acceptance.request_lengths), else
the configured ``context_tokens``, else the figures' own default, announced. Where the two
differ by more than DISAGREE the summary says so: the figures the roofline prices are then not
the engine's, and its step costs are as far off. Known reasons, said with it: vLLM does not
count the embedding table as read (a gather) where the roofline reads all non-expert weights;
steps that prefill are in the engine's mean; the roofline leaves attention FLOPs out; a
quantisation the config.json does not state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .figures import Figure, ModelFigures
from .profiles import step_bytes, step_flops

if TYPE_CHECKING:
    from acceptance.inspect_types import ContextEntry, KvCache, RooflineCheck, StepCost

    from .deployment import Deployment

DISAGREE = 0.15  # |engine / roofline − 1| past which the two are said to disagree


def check_engine_cost(cost: StepCost, context: ContextEntry | None, model: ModelFigures, model_name: str, source: str,
                      tensor_parallel_size: int) -> RooflineCheck | None:
    """The roofline's bytes read and FLOPs per step and GPU for the step the engine reports
    (``cost``: acceptance.engine_cost's entry; ``context``: acceptance.request_lengths'), their
    ratios and a one-line summary; None when the engine reports no cost or no decode requests."""
    b, n = cost.get("decode_requests_per_step"), cost.get("tokens_per_step")
    if not cost.get("reported") or not b or not n:
        return None
    if context:
        model = replace(model, context_tokens=Figure(context["decode_context_tokens"],
                                                     "the page's request lengths (prompt + half the output)"))
    q = max(1.0, n / b)
    tp = tensor_parallel_size
    read = float(step_bytes(model, b, q)) / tp
    flops = float(step_flops(model, b, q)) / tp
    reported_read, reported_flops = cost["read_bytes_per_step"], cost["flops_per_step"]
    assert reported_read is not None and reported_flops is not None  # a reported cost has both (StepCostReported)
    ratios = {"read_bytes": reported_read / read, "flops": reported_flops / flops}
    disagree = [k for k, r in ratios.items() if abs(r - 1.0) > DISAGREE]
    return {"model": model_name, "source": source, "tensor_parallel_size": tp,
            "context_tokens": vars(model.context_tokens), "decode_requests_per_step": b, "tokens_per_request": q,
            "read_bytes_per_step": read, "flops_per_step": flops,
            "read_bytes_ratio": ratios["read_bytes"], "flops_ratio": ratios["flops"], "disagree": disagree,
            "summary": _summary(model_name, source, ratios, disagree, b, q, model.context_tokens)}


def _summary(model_name: str, source: str, ratios: dict[str, float], disagree: list[str], b: float, q: float,
             context: Figure) -> str:
    head = (f"roofline of {model_name} ({source}) at {b:,.1f} decode requests x {q:.2f} tokens a step, context "
            f"{context.value:,.0f} ({context.source}): the engine's bytes read are {ratios['read_bytes']:.2f}x, its "
            f"FLOPs {ratios['flops']:.2f}x the roofline's")
    if not disagree:
        return head + f" (within {DISAGREE:.0%})"
    return (head + f"; they disagree by more than {DISAGREE:.0%} ({', '.join(disagree)}): the roofline's step costs "
            f"are as far off — vLLM counts no embedding read, its mean holds prefill steps, the roofline leaves "
            f"attention FLOPs out; a measured table (specdec calibrate) replaces it")


def check_kv_cache(kv: KvCache, model: ModelFigures, tensor_parallel_size: int) -> dict[str, object] | None:
    """The model figures' KV bytes per token (a built-in's or a config.json's; per GPU: over the
    TP group) against the cache an engine describes (acceptance.engine_cost.kv_cache_config).
    vLLM cuts the cache it was given, M bytes, into whole blocks of b tokens, so N = ⌊M / (b·kv)⌋
    blocks means a KV of bytes per token in (M / ((N + 1)·b), M / (N·b)]: the figures agree when
    theirs falls there (the summary names where theirs came from: its dtype is an assumption).
    An fp8 cache is said apart (1 byte a value where the figures assume the model's dtype). None
    when the page says neither its size nor a cache dtype of its own."""
    ours = model.kv_bytes_per_token.value / tensor_parallel_size
    memory, blocks, size, dtype = kv.get("memory_bytes"), kv.get("num_gpu_blocks"), kv.get("block_size"), kv.get("cache_dtype")
    parts: list[str] = []
    implied: tuple[float, float] | None = None
    agrees: bool | None = None
    if memory and blocks and size:
        implied = (memory / ((blocks + 1) * size), memory / (blocks * size))
        agrees = implied[0] < ours <= implied[1]
        verdict = ("agrees" if agrees else "disagrees: the roofline's KV term is not the engine's — a cache dtype "
                   "other than the one assumed, or another model than the one named")
        parts.append(f"the engine's KV cache holds {blocks:,} blocks of {size} tokens in {memory:,} bytes: "
                     f"{implied[0]:,.0f}-{implied[1]:,.0f} bytes per token; the model figures give {ours:,.0f} per GPU "
                     f"({verdict}; theirs: {model.kv_bytes_per_token.source})")
    if dtype and dtype != "auto":
        parts.append(f"the engine stores its KV cache as {dtype} (vllm:cache_config_info cache_dtype); the figures' "
                     f"KV bytes: {model.kv_bytes_per_token.source}")
    if not parts:
        return None
    return {"model_bytes_per_token": ours, "implied_bytes_per_token": None if implied is None else list(implied),
            "agrees": agrees, "cache_dtype": dtype, "summary": "; ".join(parts)}


def model_source(deployment: Deployment) -> str:
    """Where the deployment's model came from, in the check's words."""
    if "model" in deployment.from_page:
        return "the engines' model_name folder"
    return "configured" if deployment.is_configured("model") else "default"


def with_engine_cost(deployment: Deployment, cost: StepCost | None) -> Deployment:
    """The deployment whose roofline prefers the step cost its engines report (``cost``:
    acceptance.engine_cost.step_cost over the window) to the figures' own: its memory and
    compute terms scaled by the engines' bytes read and FLOPs over the roofline's for the same
    step (check_engine_cost, at the deployment's context), the scales named with their source
    and the check's summary (Deployment.engine_cost_scale). As it was when nothing is reported
    or the profile is not the roofline."""
    from .profiles import deployment_model

    if not cost or not cost.get("reported") or deployment.cost_profile != "roofline":
        return deployment
    check = check_engine_cost(cost, None, deployment_model(deployment), deployment.model, model_source(deployment),
                              deployment.tensor_parallel_size)
    if check is None:
        return deployment
    return replace(deployment, engine_cost_scale={
        "read_bytes": check["read_bytes_ratio"], "flops": check["flops_ratio"], "steps": cost["steps"],
        "source": "the engines' vllm:estimated_read_bytes_per_gpu_total and vllm:estimated_flops_per_gpu_total over "
                  "the window's steps (--enable-mfu-metrics)",
        "disagree": check["disagree"], "summary": check["summary"]})

