"""A simulated vLLM fleet on loopback: the embedded default of ``make demo`` and the
ground truth of tests and benchmarks.

A ``Fleet`` runs ``SimEngine``s (one vLLM engine each: labels model_name, engine) grouped
in targets (one /metrics URL each, data-parallel engines share a page as engine="0",
"1", ...) and routes. Each engine has a γ, an acceptance process (processes), a
batch-size process and a step-time function, and serves vLLM 0.33.0's families under
their exact names, HELP texts and labels: the four spec-decode counters (+ ``_created``),
``vllm:num_requests_running``, ``vllm:iteration_tokens_total`` and
``vllm:inter_token_latency_seconds`` with vLLM's buckets.

Time is SIMULATED: ``fleet.now`` starts at ``start_time`` (1_800_000_000 by default, so
stores from different runs line up) and moves only through ``advance(dt_s)`` (tests, the
demo) or ``start_realtime(speed)`` (``specdec simulate --speed X``). What an engine does is
fixed by the seed alone: steps are generated per chunk of ``chunk_s`` simulated seconds
from a random stream keyed by (seed, engine, engine life, chunk), and a counter at time T
shows exactly the steps that ended by T — so pages depend neither on wall time, nor on
when or how often anyone scrapes, nor on how ``advance`` is sliced.

Events (restart, set_gamma, spec_off, spec_on) are scheduled in the scenario at seconds
since the start, or called on a ``SimEngine`` (they act at ``fleet.now``). An event at t
is applied once the clock moves past t, before any step after t: ``advance`` that ends
exactly at t leaves it pending, so a scrape taken right after ``advance`` still sees the
counts accrued up to t. Counts accrued between a scraper's last scrape and a restart are
invisible to it; ``truth_counts`` still has them. So a harness that alternates
``advance(dt)`` / scrape, with events at multiples of dt, sees reset-aware deltas that
add up exactly to ``truth_counts``.

Step metrics. ``step_metrics="design"`` follows a literal reading of the design's step-shape
series made before vLLM's code was read (what vLLM records: docs/MODEL.md, Where the numbers
come from): a verify step observes B·(γ+1) scheduled tokens in ``iteration_tokens_total``
(1 per request without speculation, the prompt tokens for a prefill step), and the inter-token latency is per
output token: a request that emits L+1 tokens in a step observes (time since its last
token)/(L+1), L+1 times. ``step_metrics="vllm"`` (the default: the simulator is ground truth for a real
vLLM, so it records what vLLM records) follows vLLM 0.33.0's
``IterationStats`` does: iteration tokens = prompt + generated tokens (Σ(L_i+1) for a
verify step) and ONE inter-token-latency observation per request per decode step (the
time since its last token, whatever the number of tokens emitted).

The modules: ``scenario`` (what a fleet is made of, and the reader of its description),
``scenarios`` (the built-in ones, as data), ``processes`` (acceptance), ``engine`` (one
engine's steps, counters and events), ``exposition`` (its /metrics page) and ``fleet`` (the
clock, the HTTP servers, the truth). The names below are the package's whole interface.
"""

from .engine import SimEngine
from .exposition import INTER_TOKEN_LATENCY_BUCKETS, ITERATION_TOKENS_BUCKETS, EngineExposure, render_page
from .fleet import Fleet
from .processes import (
    AcceptanceProcess,
    DriftingProcess,
    FrontLoadedProcess,
    HeterogeneousProcess,
    IndependentProcess,
    ProcessError,
    process_from_dict,
)
from .scenario import (
    DEFAULT_START_TIME,
    BatchMix,
    EngineSpec,
    LatencyBoundStepTime,
    PrefillMix,
    Scenario,
    ScenarioError,
    ScheduledEvent,
    TargetSpec,
    scenario_from_dict,
    scenario_to_dict,
)
from .scenarios import SCENARIO_NAMES, build_scenario

__all__ = [
    "ITERATION_TOKENS_BUCKETS", "INTER_TOKEN_LATENCY_BUCKETS", "DEFAULT_START_TIME",
    "ScenarioError", "LatencyBoundStepTime", "BatchMix", "PrefillMix", "EngineSpec", "TargetSpec",
    "ScheduledEvent", "Scenario", "EngineExposure", "SimEngine", "Fleet", "render_page",
    "build_scenario", "scenario_from_dict", "scenario_to_dict", "SCENARIO_NAMES",
    "AcceptanceProcess", "IndependentProcess", "FrontLoadedProcess", "HeterogeneousProcess",
    "DriftingProcess", "ProcessError", "process_from_dict",
]
