"""The Kimi K3 specialized decode path (vLLM 0.33.0, decode_backend = latency_specialized).

From vLLM 0.33.0 ``vllm/models/kimi_k3/nvidia/specialized_decode/runtime/``:
- the deployment starts only with speculative method ``dspark`` or none, and γ ≤ 7
  (the verify kernels take at most 8 tokens per request);
- a step runs the specialized kernels only if it is pure decode or a uniform verify step
  (every request verifies exactly q = γ + 1 tokens) with no prompt rows, and its token
  count is one the runtime prepared: {1..8, 16, 32, 64} or a CUDA-graph capture size
  rounded up to a multiple of q, ≤ 64. A FULL decode graph pads a batch to the next
  capture size (whole requests), so B requests run at the smallest rounded capture size
  ≥ B·q; past 64 tokens, or without such a size, the step runs stock.
- with decode_backend "auto" (vLLM's default) no step takes the specialized path.

Capture sizes are not in /metrics: the deployment's ``cudagraph_capture_sizes`` or vLLM's
default list ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` (max 512), which
vLLM rounds up to multiples of q for speculative decoding.

The share of steps that are clean (no prompt rows) is counted by specdec's vLLM plugin
when the engines run it (``eligibility_from_step_counts``), else bounded from the
``vllm:iteration_tokens_total`` histogram deltas; ``le="64"`` is exactly the limit.

The path's decode speedup is a configured figure no window checks: how far a decision rests
on it is model.probe.specialized_speedup's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from acceptance.plugin_series import PluginTotals
from acceptance.specialized_steps import (  # re-exported: one definition, in acceptance/
    SPECIALIZED_TOKEN_LIMIT as SPECIALIZED_TOKEN_LIMIT, default_capture_sizes as default_capture_sizes,
    padded_step_tokens as padded_step_tokens, rounded_capture_sizes as rounded_capture_sizes,
    runs_specialized as runs_specialized)

from .deployment import Deployment, ModelInputError

SPECIALIZED_MAX_GAMMA = 7
SPECIALIZED_METHOD = "dspark"


def specialized_refusal(method: str, gamma: int) -> str | None:
    """Why decode_backend latency_specialized cannot start with this γ, or None."""
    reasons = []
    if gamma > 0 and method != SPECIALIZED_METHOD:
        reasons.append("latency_specialized runs only dspark or no speculation")
    if gamma > SPECIALIZED_MAX_GAMMA:
        reasons.append(f"latency_specialized verifies at most {SPECIALIZED_MAX_GAMMA + 1} tokens per request (γ ≤ 7)")
    return "; ".join(reasons) or None


@dataclass(frozen=True)
class Eligibility:
    """Share of decode steps that are clean (no prompt rows), and where that figure came from."""

    share: float
    source: str


def step_shares(batch_mix: Mapping[int, float]) -> dict[int, float]:
    """Steps at each batch size from the request-weighted mix w_B: s_B ∝ w_B / B."""
    raw = {b: w / b for b, w in batch_mix.items()}
    z = sum(raw.values())
    return {b: v / z for b, v in raw.items()}


def specialized_eligibility(
    iteration_tokens: Mapping[float, float],
    batch_mix: Mapping[int, float] | None,
    gamma: int,
    *,
    capture_sizes: Sequence[int] | None = None,
) -> Eligibility:
    """The share of clean steps, from ``vllm:iteration_tokens_total`` bucket deltas.

    iteration_tokens: cumulative bucket counts over the window keyed by ``le`` (+inf
    included), recorded at γ. small = count(le=64) / count(+inf) is the share of steps of
    at most 64 tokens (le="64" is exactly the specialized limit). Of the pure-decode
    steps, fit = Σ_{B: B·(γ+1) runs specialized} s_B would be that small; so
    clean share = min(1, small / fit). An upper bound: a step of ≤ 64 tokens may still
    carry a prompt chunk. Without a batch mix, fit = 1 (every decode step assumed to fit).
    """
    if gamma < 0:
        raise ModelInputError(f"gamma must be ≥ 0, got {gamma}")
    try:
        counts = {float(k): float(v) for k, v in iteration_tokens.items()}
    except (TypeError, ValueError):
        raise ModelInputError("iteration_tokens: bucket bounds and counts must be numbers") from None
    if math.inf not in counts or float(SPECIALIZED_TOKEN_LIMIT) not in counts:
        raise ModelInputError('iteration_tokens: needs the le="64" and le="+Inf" buckets of vllm:iteration_tokens_total')
    total, small = counts[math.inf], counts[float(SPECIALIZED_TOKEN_LIMIT)]
    if not (total > 0) or small < 0 or small > total:
        raise ModelInputError(f"iteration_tokens: need 0 ≤ le=64 ({small:g}) ≤ +Inf ({total:g}) and +Inf > 0")
    small_share = small / total
    q = gamma + 1
    if batch_mix:
        shares = step_shares(batch_mix)
        fit = sum(s for b, s in shares.items() if runs_specialized(b, q, capture_sizes))
    else:
        fit = 1.0
    share = 0.0 if fit <= 0 else min(1.0, small_share / fit)
    source = (
        f'vllm:iteration_tokens_total: {small_share:.1%} of steps ≤ 64 tokens (le="64"); '
        f"{fit:.1%} of decode steps fit at γ={gamma} → clean share {share:.1%} (upper bound)"
    )
    return Eligibility(share, source)


def eligibility_from_step_counts(clean_steps: float, steps: float) -> Eligibility:
    """The share of clean steps counted by specdec's vLLM plugin (``specdec:engine_steps``):
    clean share = (pure decode + uniform verify steps) / all steps — counted, not bounded
    as from the iteration-token histogram. Whether a clean step's batch fits the path is
    the cost model's part (CostModel.speedup_terms), as with the histogram's share."""
    if not (math.isfinite(steps) and steps > 0) or not (math.isfinite(clean_steps) and 0 <= clean_steps <= steps):
        raise ModelInputError(f"plugin step counts: need 0 ≤ clean ({clean_steps!r}) ≤ steps ({steps!r}) and steps > 0")
    share = clean_steps / steps
    return Eligibility(share, f"specdec plugin: {clean_steps:.0f} of {steps:.0f} steps clean "
                              f"(pure decode or uniform verify) → clean share {share:.1%}")


def histogram_eligibility(iteration_tokens: Mapping[float, float] | None, batch_mix: Mapping[int, float] | None,
                          gamma: int) -> Eligibility | None:
    """The clean share bounded from a window's vllm:iteration_tokens_total buckets at γ
    (specialized_eligibility), whatever decode_backend; None without them."""
    if iteration_tokens:
        return specialized_eligibility(iteration_tokens, batch_mix, gamma)
    return None


def route_eligibility(deployment: Deployment, plugin: PluginTotals | None,
                      iteration_tokens: Mapping[float, float] | None, batch_mix: Mapping[int, float] | None,
                      gamma: int) -> Eligibility | None:
    """The specialized path's clean share on latency_specialized: counted by the specdec
    plugin's steps when present (``plugin``: acceptance.plugin_series.PluginTotals), else
    bounded from the iteration-token histogram; None on another backend or without either."""
    if deployment.decode_backend != "latency_specialized":
        return None
    share = plugin.specialized_share() if plugin is not None else None
    if share is not None:
        return eligibility_from_step_counts(share.clean_steps, share.steps)
    return histogram_eligibility(iteration_tokens, batch_mix, gamma) if batch_mix else None
