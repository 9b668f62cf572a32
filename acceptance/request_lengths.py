"""The context a decode step reads per request, from the lengths a /metrics page shows.

vLLM observes each finished request's prompt length in ``vllm:request_prompt_tokens`` and its
output length in ``vllm:request_generation_tokens`` (histograms). A request's decode steps
read its prompt's KV and the output so far, so over its steps the context averages prompt +
half the output; over requests, mean prompt P̄ + mean output Ḡ / 2. This weights every
request alike and takes prompt and output lengths as independent (a long output's steps
outnumber a short one's, which the means cannot say): an estimate for the roofline's
``context_tokens``, announced as such, not a measured per-step context.
"""

from __future__ import annotations

from . import vllm_metrics as vm


def request_context(shape) -> dict | None:
    """{"requests", "mean_prompt_tokens", "mean_output_tokens", "decode_context_tokens"} of a
    page's StepShape, or None when it shows no finished request's lengths."""
    lengths = getattr(shape, "request_lengths", None) or {}
    prompt_sum = lengths.get(f"{vm.REQUEST_PROMPT_TOKENS}_sum")
    prompt_n = lengths.get(f"{vm.REQUEST_PROMPT_TOKENS}_count")
    output_sum = lengths.get(f"{vm.REQUEST_GENERATION_TOKENS}_sum")
    output_n = lengths.get(f"{vm.REQUEST_GENERATION_TOKENS}_count")
    if not prompt_n or not output_n or prompt_sum is None or output_sum is None:
        return None
    prompt, output = prompt_sum / prompt_n, output_sum / output_n
    return {"requests": min(prompt_n, output_n), "mean_prompt_tokens": prompt, "mean_output_tokens": output,
            "decode_context_tokens": prompt + output / 2.0}


def format_context_lines(report: dict) -> list[str]:
    """One console line per engine whose page shows its finished requests' lengths."""
    lines = []
    for e in report["engines"]:
        c = e.get("context")
        if c:
            lines.append(f"engine {e['engine']}: {c['requests']:,.0f} finished requests, mean prompt "
                         f"{c['mean_prompt_tokens']:,.0f} and output {c['mean_output_tokens']:,.0f} tokens: a decode "
                         f"step reads about {c['decode_context_tokens']:,.0f} tokens of context per request (prompt "
                         f"+ half the output; context_tokens for the roofline)")
    return lines
