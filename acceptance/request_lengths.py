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

from typing import TYPE_CHECKING

from .inspect_types import ContextEntry, InspectReport
from .page_totals import page_totals
from .request_context import histogram_context

if TYPE_CHECKING:
    from .counts import StepShape


def request_context(shape: StepShape | None) -> ContextEntry | None:
    """{"requests", "mean_prompt_tokens", "mean_output_tokens", "decode_context_tokens"} of a
    page's StepShape (acceptance.request_context.histogram_context of its totals since the
    engine started), or None when it shows no finished request's lengths."""
    ctx = histogram_context(page_totals(shape))
    if ctx is None:
        return None
    return {"requests": ctx.requests, "mean_prompt_tokens": ctx.mean_prompt_tokens,
            "mean_output_tokens": ctx.mean_output_tokens, "decode_context_tokens": ctx.tokens}


def format_context_lines(report: InspectReport) -> list[str]:
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
