"""Offline replay of a drafter along recorded sequences.

Input: for each sequence, the target's and the drafter's logits at every position t of the
target's own continuation (teacher forcing), from which kernels.acceptance gives
  e_t = P(accept the draft token at t): Σ_v min(p_v, q_v) under sampling at temperature T,
        or 1[argmax p = argmax q] under greedy decoding.
A draft of γ tokens started at position t proposes positions t .. t+γ−1; its k-th token
is accepted with e_{t+k−1} given the first k−1 were. Over the D drafts started at every
position t with t + γ ≤ L (drafts never run past a sequence end):
  A_k = Σ_t Π_{j<k} e_{t+j}          (expected) drafts whose first k tokens are all accepted
  survival a_k = A_k / D,  drafts = D, draft_tokens = γ·D, accepted_tokens = Σ_k A_k
Greedy: e_t ∈ {0, 1}, so the counts are integers and the survival is exact (the target's
continuation is the greedy one, so every accepted prefix stays on it). Sampling: the
product of marginals is an approximation — after an accepted token the real sequence can
leave the recorded continuation, and acceptances along one sequence are correlated — so
sampling results are expected counts and the summary says so.

Multiple sequences: a list of per-sequence arrays (ragged allowed), or logits shaped
[S, L, V] (S sequences of equal length L); a [L, V] array is one sequence.
Derived quantities use acceptance/estimates.py (never redefined here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from acceptance.counts import SpecCounts
from acceptance.counts import survival
from acceptance.definitions import conditional_from_survival, draft_acceptance_rate, equivalent_p, mean_acceptance_length

from .acceptance import acceptance_per_row
from .rows import DEFAULT_NAMES, LogitsError

SAMPLING_NOTE = (
    "approximate: product of per-position acceptance along the target's continuation "
    "(teacher forcing); expected counts"
)
GREEDY_NOTE = "exact for greedy decoding: 0/1 argmax agreement; integer counts"


class ReplayError(LogitsError):
    """Bad replay input; one line naming it."""


@dataclass(frozen=True)
class ReplaySummary:
    """Counts and acceptance quantities of one replay (one decoding mode).

    mode: "greedy" or "sampling"; temperature: None for greedy; exact: True for greedy;
    counts: SpecCounts with D, T = γ·D, A, A_1..A_γ; survival a_k, conditional α_k;
    mean_acceptance_length AL = 1 + A/D; draft_acceptance_rate A/T; equivalent_p.
    """

    mode: str
    temperature: float | None
    gamma: int
    sequences: int
    positions: int
    counts: SpecCounts
    survival: np.ndarray
    conditional: np.ndarray
    mean_acceptance_length: float
    draft_acceptance_rate: float
    equivalent_p: float
    exact: bool
    note: str

    def as_dict(self) -> dict:
        """JSON-ready, with the keys of `specdec inspect` (NaN → None)."""

        def clean(x):
            x = float(x)
            return x if math.isfinite(x) else None

        c = self.counts
        integer = self.exact
        num = (lambda x: int(round(x))) if integer else float
        return {
            "mode": self.mode,
            "temperature": self.temperature,
            "exact": self.exact,
            "note": self.note,
            "gamma": self.gamma,
            "sequences": self.sequences,
            "positions": self.positions,
            "drafts": num(c.drafts),
            "draft_tokens": num(c.draft_tokens),
            "accepted_tokens": num(c.accepted_tokens),
            "accepted_per_position": [num(a) for a in c.accepted_per_position],
            "survival": [clean(a) for a in self.survival],
            "conditional": [clean(a) for a in self.conditional],
            "mean_acceptance_length": clean(self.mean_acceptance_length),
            "draft_acceptance_rate": clean(self.draft_acceptance_rate),
            "equivalent_p": clean(self.equivalent_p),
        }


def accepted_prefix_counts(per_position: np.ndarray, gamma: int) -> np.ndarray:
    """A_k, k = 1..γ, for one sequence: Σ_{t=0}^{L−γ} Π_{j<k} e_{t+j} (zeros when L < γ)."""
    e = np.asarray(per_position, dtype=np.float64)
    starts = e.shape[0] - gamma + 1
    if starts <= 0:
        return np.zeros(gamma)
    prefix = np.ones(starts)
    out = np.empty(gamma)
    for k in range(gamma):  # prefix[t] = Π_{j≤k} e_{t+j}
        prefix = prefix * e[k:k + starts]
        out[k] = prefix.sum()
    return out


def replay_from_acceptance(
    per_position, gamma: int, *, mode: str, temperature: float | None = None
) -> ReplaySummary:
    """Replay from per-position acceptance: a list of 1-D arrays (one per sequence) or a
    2-D [S, L] array. mode "greedy" (values 0/1) or "sampling" (values in [0, 1])."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or gamma < 1:
        raise ReplayError(f"gamma must be an integer >= 1, got {gamma!r}")
    if mode not in ("greedy", "sampling"):
        raise ReplayError(f"mode must be 'greedy' or 'sampling', got {mode!r}")
    if isinstance(per_position, np.ndarray) and per_position.ndim != 2:
        per_position = [per_position]  # one sequence (a 2-D array is S sequences)
    sequences = [np.asarray(s, dtype=np.float64) for s in per_position]
    if not sequences:
        raise ReplayError("replay needs at least one sequence")
    for i, s in enumerate(sequences):
        if s.ndim != 1:
            raise ReplayError(f"sequence {i}: per-position acceptance must be 1-D, got shape {s.shape}")
        if s.size and (not np.all(np.isfinite(s)) or s.min() < 0 or s.max() > 1):
            raise ReplayError(f"sequence {i}: per-position acceptance must lie in [0, 1]")
    drafts = sum(max(0, s.shape[0] - gamma + 1) for s in sequences)
    if drafts == 0:
        longest = max(s.shape[0] for s in sequences)
        raise ReplayError(f"no sequence is long enough for a draft of gamma {gamma} (longest has {longest} positions)")
    accepted = sum(accepted_prefix_counts(s, gamma) for s in sequences)
    counts = SpecCounts(
        drafts=float(drafts),
        draft_tokens=float(gamma * drafts),
        accepted_tokens=float(accepted.sum()),
        accepted_per_position=tuple(float(a) for a in accepted),
    )
    surv = survival(counts)
    al = mean_acceptance_length(counts)
    return ReplaySummary(
        mode=mode,
        temperature=None if mode == "greedy" else temperature,
        gamma=int(gamma),
        sequences=len(sequences),
        positions=int(sum(s.shape[0] for s in sequences)),
        counts=counts,
        survival=surv,
        conditional=conditional_from_survival(surv),
        mean_acceptance_length=al,
        draft_acceptance_rate=draft_acceptance_rate(counts),
        equivalent_p=equivalent_p(al, int(gamma)),
        exact=mode == "greedy",
        note=GREEDY_NOTE if mode == "greedy" else SAMPLING_NOTE,
    )


@dataclass(frozen=True)
class ReplayResult:
    """Both decoding modes of one replay, and the backend that computed the acceptance."""

    greedy: ReplaySummary
    sampling: ReplaySummary
    backend: str
    mean_expected_acceptance: float  # mean over positions of Σ min(p, q)
    greedy_agreement: float  # share of positions whose argmaxes agree


def replay_logits(
    target_logits, draft_logits, *, temperature: float = 1.0, gamma: int = 3,
    backend: str = "auto", names=DEFAULT_NAMES,
) -> ReplayResult:
    """Replay from logits shaped [L, V] (one sequence) or [S, L, V] (S sequences)."""
    t_shape, d_shape = tuple(target_logits.shape), tuple(draft_logits.shape)
    if t_shape != d_shape:
        raise ReplayError(f"{names[0]} shape {t_shape} does not match {names[1]} shape {d_shape}")
    if len(t_shape) not in (2, 3):
        raise ReplayError(f"{names[0]}: expected [positions, vocab] or [sequences, positions, vocab], got shape {t_shape}")
    if len(t_shape) == 3:
        s, length, vocab = t_shape
        target_rows = target_logits.reshape(s * length, vocab)
        draft_rows = draft_logits.reshape(s * length, vocab)
    else:
        s, length = 1, t_shape[0]
        target_rows, draft_rows = target_logits, draft_logits
    rows = acceptance_per_row(target_rows, draft_rows, temperature, backend=backend, names=names)
    expected = np.clip(rows.expected, 0.0, 1.0).reshape(s, length)  # fp rounding can pass 1
    greedy = rows.greedy.astype(np.float64).reshape(s, length)
    return ReplayResult(
        greedy=replay_from_acceptance(greedy, gamma, mode="greedy"),
        sampling=replay_from_acceptance(expected, gamma, mode="sampling", temperature=float(temperature)),
        backend=rows.backend,
        mean_expected_acceptance=float(rows.expected.mean()),
        greedy_agreement=float(rows.greedy.mean()),
    )
