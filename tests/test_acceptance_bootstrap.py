"""acceptance.bootstrap.circular_block_sums against the gather of every block it replaced:
the same draws, the same sums, on both of its paths (gathered blocks, counted starts)."""

from __future__ import annotations

import numpy as np
import pytest

import acceptance.bootstrap as bootstrap
from acceptance.bootstrap import circular_block_sums


def reference_block_sums(rows: np.ndarray, block_length: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """circular_block_sums as it was before the counted path: every resample's blocks gathered
    from the prefix sums and summed, the starts drawn in chunks of 4,000,000 numbers."""
    rows = np.asarray(rows, dtype=float)
    n, c = rows.shape
    length = int(block_length)
    n_blocks = -(-n // length)
    last_length = n - (n_blocks - 1) * length
    wrapped = np.concatenate([rows, rows[:length]], axis=0)
    prefix = np.concatenate([np.zeros((1, c)), np.cumsum(wrapped, axis=0)], axis=0)
    starts_all = np.arange(n)
    full_block = prefix[starts_all + length] - prefix[starts_all]
    last_block = prefix[starts_all + last_length] - prefix[starts_all]
    out = np.empty((n_resamples, c))
    chunk = max(1, 4_000_000 // max(1, n_blocks * c))
    for lo in range(0, n_resamples, chunk):
        hi = min(n_resamples, lo + chunk)
        starts = rng.integers(0, n, size=(hi - lo, n_blocks))
        sums = last_block[starts[:, -1]]
        if n_blocks > 1:
            sums = sums + full_block[starts[:, :-1]].sum(axis=1)
        out[lo:hi] = sums
    return out


# (rows, columns, block length, resamples): gathered blocks (few per resample), counted starts
# (more block sums than rows: short blocks, many columns), one block, a cut last block,
# chunks of draws smaller than a product's group and larger
CASES = [(500, 4, 10, 300), (1000, 8, 1, 200), (997, 8, 2, 150), (37, 3, 37, 40), (2, 8, 1, 30), (3, 8, 2, 30),
         (5000, 9, 1, 120), (20000, 8, 1, 7), (1234, 5, 3, 257)]


@pytest.mark.parametrize("n, c, length, n_resamples", CASES)
def test_block_sums_are_the_gathered_blocks_on_whole_counts(n, c, length, n_resamples):
    rows = np.random.default_rng(n + c).integers(0, 200, size=(n, c)).astype(float)
    new_rng, old_rng = np.random.default_rng(7), np.random.default_rng(7)
    np.testing.assert_array_equal(circular_block_sums(rows, length, n_resamples, new_rng),
                                  reference_block_sums(rows, length, n_resamples, old_rng))
    # the same draws, and no more: the generator is where the reference left it
    assert new_rng.integers(0, 2**62) == old_rng.integers(0, 2**62)


@pytest.mark.parametrize("n, c, length, n_resamples", CASES)
def test_block_sums_are_the_gathered_blocks_on_fractions(n, c, length, n_resamples):
    rows = np.random.default_rng(n * c).gamma(2.0, 3.0, size=(n, c))
    np.testing.assert_allclose(circular_block_sums(rows, length, n_resamples, np.random.default_rng(3)),
                               reference_block_sums(rows, length, n_resamples, np.random.default_rng(3)), rtol=1e-12)


def test_counted_products_of_one_resample_each(monkeypatch):
    """A product group of one resample (and one that does not divide the calls' draws)."""
    rows = np.random.default_rng(1).integers(0, 50, size=(300, 8)).astype(float)
    expected = reference_block_sums(rows, 1, 25, np.random.default_rng(5))
    for group_bytes in (8, 8 * 300 * 4):
        monkeypatch.setattr(bootstrap, "_COUNT_BYTES", group_bytes)
        np.testing.assert_array_equal(circular_block_sums(rows, 1, 25, np.random.default_rng(5)), expected)


@pytest.mark.parametrize("n", [3, 5, 8, 20, 240])
def test_independent_rows_spread_is_the_widening_of_uncorrelated_rows(n):
    """What a run of n uncorrelated rows costs its interval: spread_factor's own figure at the
    block length choose_block_length gives such rows (the probe's rows are sized by it)."""
    white = np.zeros((n, 1))
    white[0] = 1.0  # white noise: R(k) = 0 for k ≥ 1, the plug-in length 1, nothing correlated
    lrv = bootstrap.LongRunVariance(n, white, np.ones(1), np.ones(1), np.zeros(1), np.zeros(1, bool))
    length = bootstrap.choose_block_length(lrv)
    assert bootstrap.independent_rows_spread(n, 0.9) == pytest.approx(float(bootstrap.spread_factor(lrv, length, 0.9)[0]))
    assert bootstrap.independent_rows_spread(3, 0.9) > bootstrap.independent_rows_spread(8, 0.9) > \
        bootstrap.independent_rows_spread(240, 0.9) > 1.0
