"""Circular block bootstrap over the rows of a window (scrape intervals or rollup buckets).

Why blocks: a request drafts for many consecutive steps with its own acceptance, and it
lives across several neighbouring scrape intervals, so neighbouring rows are correlated.
Resampling single drafts (a binomial on D) or single rows treats them as independent and
gives intervals that are far too narrow (tests/test_coverage.py measures how much).
Resampling runs of L consecutive rows keeps that correlation inside each block.

Circular: blocks wrap around the end of the window, so every row is drawn with the same
probability. A resample is ⌈n/L⌉ blocks, the last one cut so that every resample has
exactly n rows.

Every statistic here is a ratio of column sums, Σ num / Σ den. Its linearisation, the
per-row contribution z_i = (num_i − ratio·den_i) / mean(den), carries the correlation that
matters, and everything below is computed on those series.

Block length (``choose_block_length``): twice the Politis & White (2004; corrected by
Patton, Politis & White 2009) plug-in length for the circular block bootstrap,

    L_PW = (2 G₊² / D_CB)^(1/3) · n^(1/3),   G = Σ_{|k|≤M} λ(k/M) |k| R(k),  G₊ = max(G, 0),
    D_CB = (4/3) g², g = Σ_{|k|≤M} λ(k/M) R(k),

with R(k) the autocovariance, λ the flat-top lag window (1 up to 1/2, falling linearly to
0 at 1) and M twice the smallest lag after which K_N = max(5, √log10 n) autocorrelations in
a row are insignificant (|ρ| < 2 √(log10 n / n)), at least 2; the longest over the
statistics is taken. L_PW minimises the error of the bootstrap variance; an interval's
coverage suffers more from the variance's downward bias (positive correlation across block
edges is lost, ~ G / L) than from its noise, which the t quantile below accounts for, hence
2·L_PW. Only G > 0 asks for longer blocks: with G ≤ 0 nothing positive is lost at the edges,
and on short windows a negative Ĝ (mostly noise: ρ(1) has standard error 1/√n, 0.22 at
n = 20) drove L_PW up as g → 0 and so L to its cap. L is kept between ⌈n^(1/3)⌉ and n/3 (at
least three blocks).

Spread correction (``spread_factor``): the percentile interval of the resamples is widened
about the point value by a factor f per statistic, which depends on whether its series
shows positive correlation: Ĝ > ½ SE₀(Ĝ), SE₀(Ĝ) = 2 R(0) √(Σ_{k≤M} (λ(k/M) k)² / n) being
Ĝ's standard error if the rows were independent (R(k), k ≥ 1, then uncorrelated with
variance R(0)²/n). That is a one-sided test at about the 30% level, lenient on purpose:
a missed correlation costs coverage, a false one only width (at n = 20, requests over ~3
intervals show ρ(1) ≈ 0.4, under two standard errors). With q = (1 + level) / 2:

  correlated:    f = √(n / (n − L)) · √max(1, g_c / v_L) · t_{n/L − 1}(q) / z(q),
  uncorrelated:  f = √(n / (n − L)) · t_ν(q) / z(q),   ν = 3nL / (2L² + 1) − 1,

where v_L = Σ_{|k|<L} (1 − |k|/L) R(k) is the long-run variance the block bootstrap
implies (Bartlett window of width L), g_c = g / (1 − 1.5 M / n) the flat-top estimate
corrected for centring on the sample mean (E R̂(k) ≈ R(k) − σ²/n, σ² the long-run variance,
and the flat-top weights sum to 1.5 M over |k| ≤ M), and n/(n − L) the same centring
correction for the bootstrap's own variance (E v_L ≈ σ² − G/L − L σ²/n). With correlation
the t quantile with n/L − 1 degrees of freedom accounts for a variance resting on only
about n/L independent blocks; on short windows it is also what keeps them near the level,
since g_c (small M) and v_L (L ≤ n/3) both miss much of a correlation spanning several
intervals (and g_c/v_L repeats part of the centring correction). Without correlation
nothing is lost at the edges, so only the noise of the
bootstrap's Bartlett-window variance is left: ν is its Satterthwaite degrees of freedom,
n / Σ_{|k|<L} (1 − |k|/L)² − 1 (n − 1 at L = 1, about 1.5 n/L for long blocks, as for
overlapping batch means). These corrections are first order; tests/test_coverage.py and
benchmarks/estimates.py measure the coverage they give against a known process for a
nominal 0.90 (1,000 windows per scenario):
  5-minute windows (n = 20) of independent rows, γ = 3 and 7:  0.89–0.92 (0.96–0.98
    before, when every statistic got the correlated correction and L often reached n/3);
  n = 20, requests over ~3 intervals:                          0.84 (0.85 before);
  n = 60, independent rows:                                    0.90 (0.93 before);
  n = 60 with requests over ~4 intervals (~4 blocks):          0.86;
  n = 120–960, requests over 3–8 intervals:                    0.88–0.93.
In benchmarks/decision.py the 90% speedup interval of the 5-minute independent classes
(ind-p60-flat-dspark-g7-short, ind-p75-moe-batch1-short; 200 seeds) covers 0.945 and 0.93
(1.00 and 0.985 before). Without the widening, plain percentiles gave 0.70–0.87 on the
same kind of windows in development runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri, stdtrit

# Resamples are summed in chunks so that memory stays bounded for long windows
# (chunk · blocks · columns elements at a time).
_CHUNK_ELEMENTS = 4_000_000

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


def ratio_contributions(rows: np.ndarray, numerator_cols, denominator_col: int) -> np.ndarray:
    """Linearised per-row contributions of Σ num / Σ den: (num_i − ratio·den_i) / mean(den).

    Returns (n, len(numerator_cols)); zeros when Σ den = 0.
    """
    rows = np.asarray(rows, dtype=float)
    den = rows[:, denominator_col]
    num = rows[:, list(numerator_cols)]
    total_den = den.sum()
    if total_den <= 0:
        return np.zeros_like(num)
    ratio = num.sum(axis=0) / total_den
    return (num - ratio[None, :] * den[:, None]) / (total_den / len(rows))


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
    n = lrv.n
    if n < 3:
        return 1
    floor = math.ceil(n ** (1.0 / 3.0))
    cap = max(1, n // 3)
    return int(min(max(math.ceil(2.0 * float(np.max(lrv.plug_in_block_length))), floor), cap))


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

    # No positive correlation: nothing lost at the edges; the bootstrap variance is a
    # Bartlett-window estimate with Satterthwaite degrees of freedom n / Σ_{|k|<L} w(k)² − 1.
    bartlett_dof = max(1.0, 3.0 * n * length / (2.0 * length * length + 1.0) - 1.0)
    uncorrelated = centring * float(stdtrit(bartlett_dof, q) / ndtri(q))

    return np.where(lrv.correlated, correlated, uncorrelated)


def circular_block_sums(rows: np.ndarray, block_length: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Column sums of ``n_resamples`` circular-block resamples of ``rows``.

    rows: (n, c). Each resample is ⌈n/L⌉ blocks of L consecutive rows (wrapping), the
    last block cut to n − (⌈n/L⌉ − 1)·L rows, so each resample has exactly n rows.
    Returns (n_resamples, c). Block sums come from prefix sums, so the cost is
    O(n_resamples · ⌈n/L⌉ · c).
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
    for lo in range(0, n_resamples, chunk):
        hi = min(n_resamples, lo + chunk)
        starts = rng.integers(0, n, size=(hi - lo, n_blocks))
        sums = last_block[starts[:, -1]]
        if n_blocks > 1:
            sums = sums + full_block[starts[:, :-1]].sum(axis=1)
        out[lo:hi] = sums
    return out
