"""A page's slow totals by short names: its finished requests' prompt and output lengths and
vLLM's own estimate of its steps' cost, with the steps, their tokens and the inter-token
latency those are divided by. One mapping for every reader: ``inspect`` (a page since its
engine started: acceptance.request_lengths, acceptance.engine_cost) and the store (a window's
increase: acceptance.store.totals)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from . import vllm_metrics as vm

if TYPE_CHECKING:
    from .counts import StepShape

# total name → where a page's StepShape holds it (acceptance.counts.StepShape)
_FROM_LENGTHS = {"prompt_sum": f"{vm.REQUEST_PROMPT_TOKENS}_sum", "prompt_count": f"{vm.REQUEST_PROMPT_TOKENS}_count",
                 "output_sum": f"{vm.REQUEST_GENERATION_TOKENS}_sum",
                 "output_count": f"{vm.REQUEST_GENERATION_TOKENS}_count"}
_FROM_COST = {"flops": vm.ESTIMATED_FLOPS, "read_bytes": vm.ESTIMATED_READ_BYTES, "write_bytes": vm.ESTIMATED_WRITE_BYTES,
              "tokens": f"{vm.ITERATION_TOKENS}_sum"}


def page_totals(shape: StepShape | None) -> dict[str, float] | None:
    """The totals one page's step shape holds (None: neither request lengths nor MFU counters)."""
    if shape is None or not (shape.request_lengths or set(shape.engine_cost) & set(vm.ENGINE_COST_FAMILIES)):
        return None  # the iteration histogram's sum alone (every page's) is nothing to keep
    out = {k: shape.request_lengths[v] for k, v in _FROM_LENGTHS.items() if v in shape.request_lengths}
    out.update({k: shape.engine_cost[v] for k, v in _FROM_COST.items() if v in shape.engine_cost})
    steps = shape.iteration_tokens.get(math.inf)
    for key, value in (("steps", steps), ("itl_sum", shape.itl_sum), ("itl_count", shape.itl_count)):
        if value is not None:
            out[key] = float(value)
    return out
