"""Circular block bootstrap over the rows of a window (scrape intervals or rollup buckets).

Why blocks: a request drafts for many consecutive steps and lives across neighbouring
scrape intervals, so neighbouring rows are correlated; resampling runs of L rows keeps that
correlation (single drafts or rows give intervals far too narrow). Every statistic is a
ratio of column sums, computed on its linearisation z_i = (num_i − ratio·den_i) / mean(den).
``choose_block_length``: twice the Politis & White plug-in length, kept in [⌈n^(1/3)⌉, n/3].
``spread_factor``: the percentile interval widened by √(n/(n − L)), the long-run variance
and a t quantile for the few blocks. The derivation and the measured coverage are in
docs/MODEL.md, Intervals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri, stdtrit

# Resamples are summed in chunks so that memory stays bounded for long windows
# (chunk · blocks · columns elements at a time).
_CHUNK_ELEMENTS = 4_000_000
# Bytes of start counts (as floats) one product of circular_block_sums works on: a few
# resamples of a long window, kept in cache (on 2 cores, 150,000 rows: 16 MB measured 2 times
# faster than 32 or more).
_COUNT_BYTES = 16 * 2**20

# A column counts as positively correlated when Ĝ exceeds this many of its standard errors
# under independence (module docstring: a lenient one-sided test, at about the 30% level).
_CORRELATION_Z = 0.5


@dataclass(frozen=True, eq=False)
class LongRunVariance:
    """Per column of a series (n, m): what the block length and spread correction need.

    autocovariance: (n, m) R(k) for k = 0..n−1 (centred on the sample mean, divided by n);
    variance: (m,) flat-top long-run variance g, corrected for centring (NaN if ≤ 0);
    plug_in_block_length: (m,) Politis–White L_PW (≥ 1), from the positive part of G;
    edge_covariance: (m,) flat-top G = Σ_{|k|≤M} λ(k/M) |k| R(k) (0 for a constant column
    or fewer than 4 rows);
    correlated: (m,) G exceeds half its standard error under independence: the column
    shows the positive correlation that blocks lose at their edges.
    """

    n: int
    autocovariance: np.ndarray
    variance: np.ndarray
    plug_in_block_length: np.ndarray
    edge_covariance: np.ndarray
    correlated: np.ndarray


def _flat_top(t: np.ndarray) -> np.ndarray:
    """Politis–Romano flat-top lag window: 1 for |t| ≤ 1/2, 2(1 − |t|) up to 1, then 0."""
    t = np.abs(t)
    return np.where(t <= 0.5, 1.0, np.where(t <= 1.0, 2.0 * (1.0 - t), 0.0))


def ratio_contributions(rows: np.ndarray, numerator_cols: Sequence[int], denominator_col: int) -> np.ndarray:
    """Linearised per-row contributions of Σ num / Σ den: (num_i − ratio·den_i) / mean(den).

    Returns (n, len(numerator_cols)); zeros when Σ den = 0.
    """
    rows = np.asarray(rows, dtype=float)
    den = rows[:, denominator_col]
    num = rows[:, list(numerator_cols)]
    total_den = den.sum()
    if total_den <= 0:
        return np.zeros_like(num)
    ratio: np.ndarray = num.sum(axis=0) / total_den
    contributions: np.ndarray = (num - ratio[None, :] * den[:, None]) / (total_den / len(rows))
    return contributions


def long_run_variance(series: np.ndarray) -> LongRunVariance:
    """Autocovariances, flat-top long-run variance and Politis–White length, per column."""
    x = np.asarray(series, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    n, m = x.shape
    x = x - x.mean(axis=0)
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(x, size, axis=0)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), size, axis=0)[:n] / n
    variance = np.full(m, np.nan)
    plug_in = np.ones(m)
    edge = np.zeros(m)
    correlated = np.zeros(m, dtype=bool)
    if n < 4:
        return LongRunVariance(n, acov, variance, plug_in, edge, correlated)

    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    m_max = min(math.ceil(math.sqrt(n)) + k_n, n - 1)
    threshold = 2.0 * math.sqrt(math.log10(n) / n)
    for j in range(m):
        r0 = acov[0, j]
        if not r0 > 0:
            continue  # a constant series: no correlation to respect
        insignificant = np.abs(acov[1 : m_max + 1, j] / r0) < threshold
        # m̂: smallest m with ρ(m+1..m+K_N) all insignificant (runs found by a cumsum).
        run = np.convolve(insignificant.astype(int), np.ones(k_n, dtype=int), mode="valid")
        hits = np.flatnonzero(run == k_n)
        m_hat = int(hits[0]) if hits.size else m_max
        big_m = min(2 * max(m_hat, 1), m_max)
        lags = np.arange(1, big_m + 1)
        weights = _flat_top(lags / big_m)
        g_edge = 2.0 * float(np.sum(weights * lags * acov[1 : big_m + 1, j]))
        edge[j] = g_edge
        # Under independence the R(k), k ≥ 1, are uncorrelated with variance ≈ R(0)² / n.
        g_edge_se = 2.0 * r0 * math.sqrt(float(np.sum((weights * lags) ** 2)) / n)
        correlated[j] = g_edge > _CORRELATION_Z * g_edge_se
        g = float(r0 + 2.0 * np.sum(weights * acov[1 : big_m + 1, j]))
        if g > 0:
            variance[j] = g / max(0.2, 1.0 - 1.5 * big_m / n)
            d_cb = (4.0 / 3.0) * g * g
            # Only G > 0 asks for longer blocks (module docstring): a negative G, mostly noise
            # on short windows, would otherwise inflate L_PW as g → 0.
            g_plus = max(g_edge, 0.0)
            plug_in[j] = max(1.0, (2.0 * g_plus * g_plus / d_cb) ** (1.0 / 3.0) * n ** (1.0 / 3.0))
    return LongRunVariance(n, acov, variance, plug_in, edge, correlated)


def choose_block_length(lrv: LongRunVariance) -> int:
    """L = 2 · max over columns of L_PW, kept in [⌈n^(1/3)⌉, n/3] (module docstring: why)."""
    return _kept_block_length(lrv.n, 2.0 * float(np.max(lrv.plug_in_block_length)))


def _kept_block_length(n: int, length: float) -> int:
    """``length`` rounded up and kept in [⌈n^(1/3)⌉, n/3] (1 below 3 rows)."""
    if n < 3:
        return 1
    floor = math.ceil(n ** (1.0 / 3.0))
    cap = max(1, n // 3)
    return int(min(max(math.ceil(length), floor), cap))


def spread_factor(lrv: LongRunVariance, block_length: int, level: float) -> np.ndarray:
    """Per column, the factor f ≥ 1 that widens the percentile interval (module docstring).

    Columns that show positive correlation (``lrv.correlated``) get the edge-loss and
    few-blocks corrections; the others only the centring correction and the t quantile of
    a Bartlett-window variance.
    """
    n = lrv.n
    length = int(block_length)
    q = 0.5 * (1.0 + level)
    centring = math.sqrt(n / (n - length)) if n > length else 1.0

    # Positive correlation: the blocks lose some of it at their edges.
    lags = np.arange(1, length)
    bartlett = lrv.autocovariance[0] + 2.0 * ((1.0 - lags / length)[:, None] * lrv.autocovariance[1:length]).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((bartlett > 0) & np.isfinite(lrv.variance), lrv.variance / bartlett, 1.0)
    variance_factor = np.sqrt(np.maximum(1.0, ratio))
    few_blocks = max(1.0, n / length - 1.0)
    correlated = centring * variance_factor * float(stdtrit(few_blocks, q) / ndtri(q))

    return np.where(lrv.correlated, correlated, _uncorrelated_factor(n, length, q))


def _uncorrelated_factor(n: int, length: int, q: float) -> float:
    """No positive correlation: nothing lost at the edges; the bootstrap variance is a
    Bartlett-window estimate with Satterthwaite degrees of freedom n / Σ_{|k|<L} w(k)² − 1."""
    centring = math.sqrt(n / (n - length)) if n > length else 1.0
    bartlett_dof = max(1.0, 3.0 * n * length / (2.0 * length * length + 1.0) - 1.0)
    return centring * float(stdtrit(bartlett_dof, q) / ndtri(q))


def independent_rows_spread(n: int, level: float) -> float:
    """The factor spread_factor widens a statistic of ``n`` uncorrelated rows by, at the block
    length choose_block_length gives them (L_PW = 1): what a window of few rows costs its
    interval however many drafts each row holds (2.2 at 3 rows, 1.5 at 8, 1.2 at 20, 1.06
    at 100, for a 0.9 level) — the rows a trial needs to settle a gain (model.probe.plan)."""
    return _uncorrelated_factor(n, _kept_block_length(n, 2.0), 0.5 * (1.0 + level))


def circular_block_sums(rows: np.ndarray, block_length: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Column sums of ``n_resamples`` circular-block resamples of ``rows``.

    rows: (n, c). Each resample is ⌈n/L⌉ blocks of L consecutive rows (wrapping), the
    last block cut to n − (⌈n/L⌉ − 1)·L rows, so each resample has exactly n rows.
    Returns (n_resamples, c). Block sums come from prefix sums, so the cost is
    O(n_resamples · ⌈n/L⌉ · c); with many short blocks (more block sums a resample than
    rows) each resample's full blocks are counted by start instead and the counts multiplied
    by the block sums, O(n_resamples · n · c) in one product for several resamples. Either
    way the starts are the same draws of ``rng``, in the same calls.
    """
    rows = np.asarray(rows, dtype=float)
    n, c = rows.shape
    length = int(block_length)
    n_blocks = -(-n // length)
    last_length = n - (n_blocks - 1) * length
    # Prefix sums over the window wrapped once: a block starting at s sums
    # prefix[s + L] − prefix[s] for any s in 0..n−1.
    wrapped = np.concatenate([rows, rows[:length]], axis=0)
    prefix = np.concatenate([np.zeros((1, c)), np.cumsum(wrapped, axis=0)], axis=0)
    starts_all = np.arange(n)
    full_block = prefix[starts_all + length] - prefix[starts_all]
    last_block = prefix[starts_all + last_length] - prefix[starts_all]

    out = np.empty((n_resamples, c))
    chunk = max(1, _CHUNK_ELEMENTS // max(1, n_blocks * c))
    # each call's starts: (resamples, blocks), the calls as they have always been made
    draws = ((lo, rng.integers(0, n, size=(min(n_resamples, lo + chunk) - lo, n_blocks)))
             for lo in range(0, n_resamples, chunk))
    if n_blocks > 1 and n_blocks * c > n:
        _counted_block_sums(draws, full_block, last_block, out)
        return out
    for lo, starts in draws:
        sums = last_block[starts[:, -1]]
        if n_blocks > 1:
            sums = sums + full_block[starts[:, :-1]].sum(axis=1)
        out[lo:lo + starts.shape[0]] = sums
    return out


def _counted_block_sums(draws: Iterable[tuple[int, npt.NDArray[np.int64]]], full_block: np.ndarray,
                        last_block: np.ndarray, out: np.ndarray) -> None:
    """circular_block_sums by counts: each resample's full blocks counted by start (a row of
    n), a few resamples' counts at a time multiplied by the full blocks' sums (n, c), plus
    its last block. The same sums as gathering the blocks (exactly, for whole counts)."""
    n = full_block.shape[0]
    group = max(1, _COUNT_BYTES // (8 * n))
    counts = np.empty((group, n))
    last = np.empty((group, full_block.shape[1]))
    filled, at = 0, 0

    def flush() -> None:
        out[at - filled:at] = last[:filled] + counts[:filled] @ full_block

    for _, starts in draws:
        for row in starts:
            counts[filled] = np.bincount(row[:-1], minlength=n)
            last[filled] = last_block[row[-1]]
            filled += 1
            at += 1
            if filled == group:
                flush()
                filled = 0
    if filled:
        flush()
