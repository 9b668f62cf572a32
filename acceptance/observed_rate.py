"""How sure the engines' own decode rate at the deployed γ is: the per-user rate a window
observes (acceptance.route_estimate.observed_tokens_per_second: decode tokens over the
seconds requests spent decoding them) resampled from the window's own rows, as the
acceptance is (acceptance/bootstrap.py; docs/MODEL.md, The decision: what the engines measure).

A scraped segment's blocks each carry their engines' inter-token latency sum and count
deltas (GammaSegment.block_latency): vLLM observes one latency per request per decode step,
so a block decoded count + A tokens (each step emits one, and its accepted drafts) in sum
seconds of request time, and the rate is Σ tokens / Σ seconds, a ratio of column sums —
resampled in circular blocks, its spread widened as the acceptance's. Per-request rows give
each request's decode tokens and mean_itl_ms, resampled one request at a time (a segment of
them keeps them as its blocks: GammaSegment.block_unit "requests"). The spread is
kept as factors on the point (resampled rate / the rows' own rate), so that it scales the
rate the route reports, whose tokens per step may come from the estimate's newest part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .bootstrap import choose_block_length, circular_block_sums, long_run_variance, ratio_contributions, spread_factor
from .windows import REQUESTS, SCRAPE_INTERVALS, GammaSegment

# Fewer rows than this get no block bootstrap (a long-run variance needs a few): from
# MIN_T_ROWS up to it, a Student-t interval over the rows' own rates (few_rows_spread).
MIN_RATE_ROWS = 4
MIN_T_ROWS = 2
_ACCEPTED = 2  # IntervalCounts' column of accepted draft tokens


@dataclass(frozen=True, eq=False)
class RateSpread:
    """The observed rate's resamples as factors on its point, and how they were drawn."""

    factors: np.ndarray  # (n,) resampled rate / the rows' rate, widened (acceptance/bootstrap.py)
    rows: int
    block_length: int
    unit: str  # SCRAPE_INTERVALS | REQUESTS, and with a few rows "(Student's t, n − 1 df)" after it

    def interval(self, level: float) -> tuple[float, float]:
        """The factors' central ``level`` interval."""
        low, high = np.quantile(self.factors, [(1 - level) / 2, (1 + level) / 2])
        return float(low), float(high)


def rate_spread(tokens: np.ndarray, seconds: np.ndarray, *, level: float, n_resamples: int, seed: int,
                unit: str, block_length: int | None = None) -> RateSpread | None:
    """Σ tokens / Σ seconds resampled over the rows (``block_length`` None: chosen from the
    data; rows that are requests are one a block); None with fewer than MIN_RATE_ROWS rows
    that decoded."""
    if block_length is None and unit == REQUESTS:
        block_length = 1
    keep = (np.asarray(seconds) > 0) & (np.asarray(tokens) > 0)
    rows = np.stack([np.asarray(tokens, dtype=float)[keep], np.asarray(seconds, dtype=float)[keep]], axis=1)
    if len(rows) < MIN_RATE_ROWS:
        return few_rows_spread(rows, n_resamples=n_resamples, seed=seed, unit=unit)
    lrv = long_run_variance(ratio_contributions(rows, [0], 1))
    length = choose_block_length(lrv) if block_length is None else int(block_length)
    widen = float(spread_factor(lrv, length, level)[0])
    sums = circular_block_sums(rows, length, n_resamples, np.random.default_rng(seed + 7))
    point = rows[:, 0].sum() / rows[:, 1].sum()
    factors = 1.0 + widen * (sums[:, 0] / sums[:, 1] / point - 1.0)
    return RateSpread(np.maximum(factors, 1e-3), len(rows), length, unit)


def few_rows_spread(rows: np.ndarray, *, n_resamples: int, seed: int, unit: str) -> RateSpread | None:
    """Two or three rows (a window of a few scrapes): Σ tokens / Σ seconds with the ratio
    estimator's standard error, (Σ w_i² (r_i − R)² / (n (n − 1))) ^ ½ / w̄ for the rows' rates r_i
    weighted by their seconds w_i, drawn from Student's t with n − 1 degrees of freedom — wide
    (t at 1 df has no variance), as so few rows should be, and nothing autocorrelation could
    narrow. None below MIN_T_ROWS."""
    n = len(rows)
    if n < MIN_T_ROWS:
        return None
    tokens, seconds = rows[:, 0], rows[:, 1]
    point = tokens.sum() / seconds.sum()
    weights = seconds / seconds.mean()
    se = float(np.sqrt(np.sum(weights ** 2 * (tokens / seconds - point) ** 2) / (n * (n - 1)))) / point
    draws = np.random.default_rng(seed + 11).standard_t(n - 1, size=n_resamples)
    return RateSpread(np.maximum(1.0 + se * draws, 1e-3), n, 1, f"{unit} (Student's t, {n - 1} df)")


def block_rate_spread(counts: np.ndarray, block_latency: np.ndarray | None, *, level: float, n_resamples: int,
                      seed: int, unit: str = SCRAPE_INTERVALS) -> RateSpread | None:
    """A segment's rate spread from its blocks' latency (module docstring); None where its
    source keeps none per block (``unit``: what its rows are)."""
    if block_latency is None or len(block_latency) != len(counts):
        return None
    tokens, seconds = block_tokens_seconds(counts, block_latency)
    return rate_spread(tokens, seconds, level=level, n_resamples=n_resamples, seed=seed, unit=unit)


def block_tokens_seconds(counts: np.ndarray, block_latency: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each block's decode tokens (its ITL count, one a request-step, plus its accepted drafts)
    and its ITL seconds."""
    latency = np.asarray(block_latency, dtype=float)
    return latency[:, 1] + np.asarray(counts)[:, _ACCEPTED], latency[:, 0]


def block_rate(counts: np.ndarray, block_latency: np.ndarray) -> float:
    """Σ tokens / Σ seconds over the blocks that decoded: the point block_rate_spread resamples."""
    tokens, seconds = block_tokens_seconds(counts, block_latency)
    keep = (seconds > 0) & (tokens > 0)
    return float(tokens[keep].sum() / seconds[keep].sum())


def request_rate_spread(itl_s: np.ndarray, decode_tokens: np.ndarray, *, level: float, n_resamples: int,
                        seed: int) -> RateSpread | None:
    """Per-request rows' rate spread: each request's decode tokens over its decode seconds
    (mean_itl_ms is per token), one request a block."""
    itl, n = np.asarray(itl_s, dtype=float), np.asarray(decode_tokens, dtype=float)
    ok = np.isfinite(itl) & np.isfinite(n)
    return rate_spread(n[ok], (itl * n)[ok], level=level, n_resamples=n_resamples, seed=seed, unit=REQUESTS)


@dataclass(frozen=True, eq=False)
class SegmentRate:
    """One γ's own per-user decode rate over its segment's blocks, with its resamples: a point
    the engines measured, which the decision compares with the deployed γ's
    (model.decision.rules.between_segments)."""

    gamma: int
    tokens_per_second: float  # Σ (steps + accepted) / Σ ITL seconds over the segment's blocks
    spread: RateSpread
    engines: int
    start: float
    end: float
    running: bool  # still running at the window's end (the deployed γ, a probe, a rolling change)
    # its engines' time share at each batch size (vllm:num_requests_running samples), where its
    # source keeps them per segment: a rate is of its own mix (None: not known)
    batch_mix: tuple[tuple[int, float], ...] | None = None
    # the factor the rate was carried by from that mix to the route's (model.recommend); 1: as measured
    mix_factor: float = 1.0
    unit: str = SCRAPE_INTERVALS  # what its rows are (GammaSegment.block_unit)

    def resampled(self) -> np.ndarray:
        """(n,) the rate's resamples in tokens per second."""
        return self.tokens_per_second * self.spread.factors


def segment_rates(segments: Sequence[GammaSegment], running: Sequence[GammaSegment], *, level: float,
                  n_resamples: int, seed: int) -> tuple[SegmentRate, ...]:
    """Every γ > 0 whose segment keeps its latency block by block: its running segment with the
    most drafts, else its latest earlier one, with the rate's resamples (block_rate_spread, drawn
    apart for each γ: two segments are two sets of engines or two spans of time)."""
    chosen: dict[int, GammaSegment] = {}
    for segment in sorted(segments, key=lambda s: s.end):  # the latest earlier one wins ...
        if segment.gamma > 0 and segment.block_latency is not None:
            chosen[segment.gamma] = segment
    for segment in sorted(running, key=lambda s: s.total.drafts):  # ... and a running one over it
        if segment.gamma > 0 and segment.block_latency is not None:
            chosen[segment.gamma] = segment
    out = []
    for gamma, segment in sorted(chosen.items()):
        counts, latency = segment.intervals.counts, segment.block_latency
        assert latency is not None  # chosen above
        spread = block_rate_spread(counts, latency, level=level, n_resamples=n_resamples, seed=seed + 101 * gamma,
                                   unit=segment.block_unit)
        if spread is None:
            continue
        mix = None if not segment.batch_samples else tuple(sorted((int(b), float(n)) for b, n in
                                                                  segment.batch_samples.items() if b >= 1 and n > 0))
        out.append(SegmentRate(gamma, block_rate(counts, latency), spread, len(segment.engines),
                               segment.start, segment.end, any(segment is r for r in running), mix or None,
                               unit=segment.block_unit))
    return tuple(out)
