"""What an engine reports of its own step cost: vLLM's MFU counters (``--enable-mfu-metrics``).

vLLM 0.33 (vllm/v1/metrics/perf.py: ModelMetrics.get_step_perf_stats_per_gpu, PerfMetricsProm)
adds, once per scheduler step, its analytic estimate of that step's work on one GPU — FLOPs,
bytes read (weights, the KV cache at each request's context, activations) and bytes written —
to the per-engine counters vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu_total. The
iteration-token histogram is observed once per step as well, so since the engine started, per
step and per GPU, with S = vllm:iteration_tokens_total_count (its +Inf bucket):

    flops = F / S,   read = R / S,   write = W / S,   tokens = Σ tokens / S,

and the decode requests a step carries are B = ITL count / S (vLLM observes the inter-token
latency once per request per decode step). With the mean inter-token latency t — a decode
step's time as a request sees it — the GPU moved (read + write) / t bytes/s and computed
flops / t FLOP/s: what a step of this engine achieves at its own batch, context and γ.

Limits (said where the figures are shown): the counters are vLLM's estimate from the model's
config, not a hardware count; they read 0 on the CPU backend and without the flag; steps that
prefill are counted with the decode ones (their tokens are in ``tokens``); t times decode steps
only. model.engine_cost_check sets them beside the roofline's figures from a config.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import vllm_metrics as vm
from .inspect_types import EngineEntry, InspectReport, KvCache, StepCost, StepCostNotReported, StepCostReported
from .page_totals import page_totals

if TYPE_CHECKING:
    from .counts import StepShape

NOT_REPORTED = ("vLLM's MFU counters read 0: it exports them with --enable-mfu-metrics, and they read 0 on the "
                "CPU backend")


def engine_cost(shape: StepShape | None) -> StepCost | None:
    """The per-step cost an engine's page reports since it started (module docstring), or None
    when the page has none of the three counters."""
    return step_cost(page_totals(shape) or {})


def step_cost(totals: Mapping[str, float]) -> StepCost | None:
    """The per-step cost of counter totals — a page's since start, or a window's increases
    (acceptance.store.totals: the same names) — or None without any FLOPs or bytes counted.
    ``reported`` False, with ``why_not``, when they read 0 or no step was counted."""
    if not any(k in totals for k in ("flops", "read_bytes", "write_bytes")):
        return None
    flops, read, write = (totals.get(k) or 0.0 for k in ("flops", "read_bytes", "write_bytes"))
    steps, tokens = totals.get("steps") or 0.0, totals.get("tokens")
    itl_sum, itl_count = totals.get("itl_sum"), totals.get("itl_count")
    out: StepCostNotReported = {
        "reported": False, "why_not": "", "steps": steps, "tokens_per_step": None,  # why_not: each return's own
        "decode_requests_per_step": None, "flops_per_step": None, "read_bytes_per_step": None,
        "write_bytes_per_step": None, "step_time_s": None, "bytes_per_s": None, "flops_per_s": None}
    if not (flops or read or write):
        return {**out, "why_not": NOT_REPORTED if steps else (
            f"{vm.ITERATION_TOKENS} counts no step (none ran, or the engine does not fill it: a page can count "
            f"drafts beside it): nothing to divide; "
            f"{NOT_REPORTED.split(': ', 1)[1]}")}
    if not steps:
        return {**out, "why_not": f"no step counted in {vm.ITERATION_TOKENS} (its histogram is needed to divide by)"}
    reported: StepCostReported = {
        **out, "reported": True, "why_not": None, "flops_per_step": flops / steps, "read_bytes_per_step": read / steps,
        "write_bytes_per_step": write / steps, "tokens_per_step": None if tokens is None else tokens / steps,
        "decode_requests_per_step": itl_count / steps if itl_count else None}
    if itl_count and itl_sum:
        t = itl_sum / itl_count
        reported.update({"step_time_s": t, "bytes_per_s": (read + write) / steps / t, "flops_per_s": flops / steps / t})
    return reported


def format_engine_cost_lines(report: InspectReport) -> list[str]:
    """Per engine whose page carries the counters or describes its KV cache (an inspect
    report's): its step cost, its cache, and the checks of the roofline's figures beside them."""
    lines = []
    for e in report["engines"]:
        lines += _kv_cache_lines(e)
        c = e.get("engine_cost")
        if not c:
            continue
        if not c["reported"]:
            lines.append(f"engine {e['engine']}: {c['why_not']}")
            continue
        head = (f"engine {e['engine']}: {c['steps']:,.0f} steps; per step and GPU {c['read_bytes_per_step'] / 1e9:,.3f} GB "
                f"read, {c['write_bytes_per_step'] / 1e9:,.3f} GB written, {c['flops_per_step'] / 1e12:,.3f} TFLOP")
        step_time_s, bytes_per_s, flops_per_s = c["step_time_s"], c["bytes_per_s"], c["flops_per_s"]
        if step_time_s and bytes_per_s is not None and flops_per_s is not None:  # all three or none (step_cost)
            head += (f"; at {step_time_s * 1e3:.2f} ms a step (mean ITL) {bytes_per_s / 1e9:,.0f} GB/s and "
                     f"{flops_per_s / 1e12:,.1f} TFLOP/s achieved")
        lines.append(head)
        check = e.get("roofline_check")
        if check:
            lines.append(f"  {check['summary']}")
    return lines


def _kv_cache_lines(e: EngineEntry) -> list[str]:
    kv = e.get("kv_cache")
    if not kv or not kv["tokens"]:
        return []
    size = f" in {kv['memory_bytes']:,} bytes" if kv["memory_bytes"] else ""
    lines = [f"engine {e['engine']}: KV cache of {kv['tokens']:,} tokens ({kv['num_gpu_blocks']:,} blocks of "
             f"{kv['block_size']}){size}, cache dtype {kv['cache_dtype']}"]
    check = kv.get("check")
    return lines + ([f"  {check['summary']}"] if check else [])


KV_CACHE_INFO = "vllm:cache_config_info"  # an info gauge: vLLM's CacheConfig as labels, one series per engine


def kv_cache_config(text: str) -> dict[str, KvCache]:
    """{engine label: the KV cache ``vllm:cache_config_info`` describes}: ``cache_dtype``
    (``auto``: the model's dtype), ``block_size`` and ``num_gpu_blocks`` — their product the
    tokens the cache holds — and, where vLLM was given its size (``kv_cache_memory_bytes``: the
    CPU backend's VLLM_CPU_KVCACHE_SPACE, or --kv-cache-memory-bytes), the bytes it may use per
    token held, an upper bound on the KV bytes per token (blocks are whole). Lines that do not
    parse are left out: the info is a hint, never a count."""
    from prometheus_client.parser import text_string_to_metric_families

    lines = [line for line in text.splitlines() if line.startswith(KV_CACHE_INFO + "{")]
    out: dict[str, KvCache] = {}
    for line in lines:
        try:
            (family,) = text_string_to_metric_families(line)
            labels = family.samples[0].labels
        except (ValueError, IndexError):
            continue
        blocks, size = _whole(labels.get("num_gpu_blocks")), _whole(labels.get("block_size"))
        memory = _whole(labels.get("kv_cache_memory_bytes"))
        tokens = blocks * size if blocks and size else None
        out[labels.get("engine", "")] = {
            "cache_dtype": labels.get("cache_dtype"), "block_size": size, "num_gpu_blocks": blocks,
            "tokens": tokens, "memory_bytes": memory,
            "bytes_per_token_at_most": memory / tokens if memory and tokens else None}
    return out


def _whole(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None
