"""Point estimates, intervals, degenerate windows, drafts_needed and drift."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from acceptance.bootstrap import choose_block_length, circular_block_sums, long_run_variance, ratio_contributions
from acceptance.counts import IntervalCounts, SpecCounts
from acceptance.definitions import equivalent_p, acceptance_length_independent
from acceptance.estimates import (
    AcceptanceEstimate,
    detect_drift,
    drafts_needed,
    estimate_acceptance,
)

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden" / "ground_truth_gamma3.json"


def golden_engines() -> list[SpecCounts]:
    truth = json.loads(GOLDEN.read_text())
    return [
        SpecCounts(e["num_drafts"], e["num_draft_tokens"], e["num_accepted_tokens"], tuple(e["num_accepted_tokens_per_pos"]))
        for e in truth["per_engine"].values()
    ]


def window(rows, gamma: int, interval_seconds: float = 15.0, t0: float = 1_700_000_000.0) -> IntervalCounts:
    rows = np.asarray(rows, dtype=float).reshape(-1, 3 + gamma)
    start = t0 + np.arange(len(rows)) * interval_seconds
    return IntervalCounts(gamma, start, start + interval_seconds, rows)


def persistent_window(seed: int, n: int, gamma: int = 3, *, slots: int = 8, lifetime: float = 4.0, a=6.0, b=2.0):
    """Per-interval counts where each request keeps its acceptance over ~lifetime intervals."""
    rng = np.random.default_rng(seed)
    renew = rng.random((n, slots)) < 1.0 / lifetime
    renew[0] = True
    p = np.take_along_axis(rng.beta(a, b, size=(n, slots)), np.cumsum(renew, axis=0) - 1, axis=0)
    k = np.arange(1, gamma + 1)
    survival = np.concatenate([np.ones((n, slots, 1)), p[..., None] ** k, np.zeros((n, slots, 1))], axis=-1)
    drafts = rng.poisson(30, size=(n, slots))
    lengths = rng.multinomial(drafts, survival[..., :-1] - survival[..., 1:])
    at_least = np.cumsum(lengths[..., ::-1], axis=-1)[..., ::-1][..., 1:]
    rows = np.concatenate([drafts[..., None], gamma * drafts[..., None], at_least.sum(-1, keepdims=True), at_least], -1)
    return window(rows.sum(axis=1), gamma)


# --- point values ------------------------------------------------------------------------


def test_point_values_on_the_golden_vllm_counts():
    engines = golden_engines()
    est = estimate_acceptance(window([e.as_vector() for e in engines], 3))
    drafts = sum(e.drafts for e in engines)
    accepted = sum(e.accepted_tokens for e in engines)
    per_pos = np.sum([e.accepted_per_position for e in engines], axis=0)
    assert est.drafts == drafts == 17854
    np.testing.assert_array_equal(est.survival.value, per_pos / drafts)
    np.testing.assert_allclose(est.conditional.value, per_pos / np.concatenate([[drafts], per_pos[:-1]]))
    assert est.mean_acceptance_length.value == pytest.approx(1 + accepted / drafts, abs=1e-12)
    assert est.draft_acceptance_rate.value == pytest.approx(accepted / sum(e.draft_tokens for e in engines), abs=1e-12)
    p = est.equivalent_p.value
    assert float(acceptance_length_independent(p, 3)) == pytest.approx(est.mean_acceptance_length.value, abs=1e-9)
    # vLLM's per-position counts sum to the accepted tokens: AL = 1 + Σ a_k
    assert est.mean_acceptance_length.value == pytest.approx(1 + est.survival.value.sum(), abs=1e-12)
    # two rows (two engines): values, but no interval, and the estimate says why
    assert not est.has_interval
    assert np.isnan(est.survival.low).all()
    assert math.isnan(est.mean_acceptance_length.low)
    assert "too few" in est.note
    assert "2 scrape intervals" in est.note


def test_point_values_do_not_depend_on_how_the_window_is_cut():
    engines = golden_engines()
    total = np.array(engines[0].as_vector(), dtype=float) + np.array(engines[1].as_vector(), dtype=float)
    # split the same totals into 50 uneven rows
    rng = np.random.default_rng(3)
    shares = rng.dirichlet(np.ones(50))
    rows = np.floor(np.outer(shares, total))
    rows[-1] += total - rows.sum(axis=0)
    est = estimate_acceptance(window(rows, 3), n_resamples=200)
    single = estimate_acceptance(window(total, 3))
    np.testing.assert_allclose(est.survival.value, single.survival.value, rtol=1e-12)
    assert est.mean_acceptance_length.value == pytest.approx(single.mean_acceptance_length.value, rel=1e-12)
    assert est.has_interval
    assert est.n_intervals == 50


# --- degenerate windows --------------------------------------------------------------------


def test_empty_window_says_no_drafts():
    est = estimate_acceptance(window(np.empty((0, 6)), 3))
    assert np.isnan(est.survival.value).all()
    assert math.isnan(est.mean_acceptance_length.value)
    assert math.isnan(est.equivalent_p.value)
    assert est.drafts == 0
    assert "no drafts" in est.note
    assert "no drafts" in est.method
    assert est.survival_resamples.shape == (0, 3)
    assert est.block_length is None


def test_window_without_drafts_says_no_drafts():
    est = estimate_acceptance(window(np.zeros((10, 5)), 2))
    assert np.isnan(est.survival.value).all()
    assert "no drafts" in est.note


def test_single_huge_row_has_values_and_no_interval():
    row = [4e12, 1.2e13, 7e12, 3e12, 2.4e12, 1.6e12]
    est = estimate_acceptance(window(row, 3))
    np.testing.assert_allclose(est.survival.value, [0.75, 0.6, 0.4])
    assert est.mean_acceptance_length.value == pytest.approx(1 + 7 / 4)
    assert np.isnan(est.survival.high).all()
    assert "only 1 scrape interval with drafts" in est.note
    assert est.equivalent_p.value == pytest.approx(equivalent_p(2.75, 3))


def test_three_rows_are_enough_for_an_interval():
    rows = [[100, 300, 150, 70, 50, 30], [120, 360, 200, 90, 65, 45], [80, 240, 90, 45, 30, 15]]
    est = estimate_acceptance(window(rows, 3), n_resamples=200)
    assert est.has_interval
    assert est.block_length == 1
    assert est.n_blocks == 3
    assert np.all(est.survival.low <= est.survival.value)
    assert np.all(est.survival.value <= est.survival.high)


def test_rows_without_drafts_do_not_count_towards_an_interval():
    rows = np.zeros((30, 6))
    rows[[4, 17]] = [[100, 300, 150, 70, 50, 30], [90, 270, 120, 60, 40, 20]]
    est = estimate_acceptance(window(rows, 3), n_resamples=100)
    assert not est.has_interval
    assert "only 2 scrape intervals with drafts" in est.note
    assert est.survival.value[0] == pytest.approx(130 / 190)


def test_rows_without_drafts_inside_a_window_are_fine():
    w = persistent_window(1, 60)
    rows = w.counts.copy()
    rows[10:30] = 0.0  # a quiet stretch: counters did not move
    est = estimate_acceptance(window(rows, 3), n_resamples=300)
    assert est.has_interval
    assert np.isfinite(est.survival.low).all()


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"level": 1.0}, "level"),
        ({"level": 0}, "level"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"block_length": 0}, "block_length"),
        ({"block_length": 61}, "block_length"),
    ],
)
def test_bad_options_raise_one_line_naming_them(kwargs, fragment):
    with pytest.raises(ValueError) as err:
        estimate_acceptance(persistent_window(0, 60), **kwargs)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_bad_counts_raise_and_leave_the_input_untouched(bad):
    w = persistent_window(0, 20)
    rows = w.counts.copy()
    rows[7, 4] = bad
    bad_window = window(rows, 3)
    before = bad_window.counts.copy()
    with pytest.raises(ValueError, match="row 7") as err:
        estimate_acceptance(bad_window)
    assert "\n" not in str(err.value)
    np.testing.assert_array_equal(bad_window.counts, before)


def test_estimate_does_not_modify_its_input():
    w = persistent_window(2, 100)
    before = w.counts.copy()
    estimate_acceptance(w, n_resamples=100)
    detect_drift(w, n_resamples=100)
    np.testing.assert_array_equal(w.counts, before)


# --- intervals and resamples ------------------------------------------------------------------


def test_survival_resamples_are_monotone_probabilities_and_bracket_the_point():
    w = persistent_window(5, 200, gamma=5)
    est = estimate_acceptance(w, n_resamples=500)
    r = est.survival_resamples
    assert r.shape == (500, 5)
    assert np.all(np.diff(r, axis=1) <= 0)
    assert np.all((r >= 0) & (r <= 1))
    s = est.survival
    assert np.all(s.low <= s.value)
    assert np.all(s.value <= s.high)
    assert np.all(s.low < s.high)
    # percentiles of non-increasing curves are non-increasing
    assert np.all(np.diff(s.low) <= 0)
    assert np.all(np.diff(s.high) <= 0)
    # the AL interval brackets the point; equivalent p's bounds are the AL bounds mapped
    al = est.mean_acceptance_length
    assert al.low < al.value < al.high
    assert est.equivalent_p.low == pytest.approx(equivalent_p(al.low, 5))
    assert est.equivalent_p.high == pytest.approx(equivalent_p(al.high, 5))
    assert est.level == 0.9
    assert s.level == 0.9
    assert "block" in est.method
    assert "%" not in est.method  # the level is said by its printer, once


def test_higher_level_gives_wider_intervals():
    w = persistent_window(6, 150)
    narrow = estimate_acceptance(w, level=0.5, n_resamples=400)
    wide = estimate_acceptance(w, level=0.99, n_resamples=400)
    assert wide.mean_acceptance_length.halfwidth > narrow.mean_acceptance_length.halfwidth
    assert wide.level == 0.99
    assert wide.mean_acceptance_length.level == 0.99


def test_same_seed_same_result_other_seed_other_resamples():
    w = persistent_window(8, 120)
    a = estimate_acceptance(w, seed=11, n_resamples=300)
    b = estimate_acceptance(w, seed=11, n_resamples=300)
    c = estimate_acceptance(w, seed=12, n_resamples=300)
    np.testing.assert_array_equal(a.survival_resamples, b.survival_resamples)
    assert a.mean_acceptance_length == b.mean_acceptance_length
    assert not np.array_equal(a.survival_resamples, c.survival_resamples)


def test_persistent_requests_widen_the_interval_beyond_independent_rows():
    """The same counts in shuffled order lose their correlation: the interval must shrink."""
    w = persistent_window(9, 400, lifetime=8.0)
    shuffled = window(w.counts[np.random.default_rng(0).permutation(len(w))], 3)
    ordered_est = estimate_acceptance(w, n_resamples=400)
    shuffled_est = estimate_acceptance(shuffled, n_resamples=400)
    assert ordered_est.mean_acceptance_length.value == pytest.approx(shuffled_est.mean_acceptance_length.value)
    assert ordered_est.block_length > shuffled_est.block_length
    assert ordered_est.mean_acceptance_length.halfwidth > 1.3 * shuffled_est.mean_acceptance_length.halfwidth


def test_block_length_rule_stays_in_its_range():
    for n, lifetime in [(30, 1.0), (200, 1.0), (200, 20.0), (1000, 4.0)]:
        w = persistent_window(n, n, lifetime=lifetime)
        est = estimate_acceptance(w, n_resamples=50)
        assert math.ceil(n ** (1 / 3)) <= est.block_length <= n // 3
        assert est.n_blocks == math.ceil(n / est.block_length)
    fixed = estimate_acceptance(persistent_window(1, 100), block_length=7, n_resamples=50)
    assert fixed.block_length == 7
    assert fixed.n_blocks == 15
    assert "block 7 intervals" in fixed.method


def test_circular_blocks_of_the_whole_window_reproduce_its_total():
    rows = np.random.default_rng(0).integers(0, 100, size=(23, 4)).astype(float)
    sums = circular_block_sums(rows, 23, 50, np.random.default_rng(1))
    np.testing.assert_allclose(sums, np.broadcast_to(rows.sum(axis=0), sums.shape))
    # shorter blocks: every resample still has n rows' worth (the last block is cut)
    ones = circular_block_sums(np.ones((23, 1)), 5, 50, np.random.default_rng(2))
    np.testing.assert_array_equal(ones, 23.0)
    # and on average they reproduce the total (every row equally likely)
    many = circular_block_sums(rows, 4, 20000, np.random.default_rng(3))
    np.testing.assert_allclose(many.mean(axis=0), rows.sum(axis=0), rtol=0.02)


def test_politis_white_length_grows_with_correlation():
    rng = np.random.default_rng(4)
    noise = rng.normal(size=2000)
    ar = np.empty(2000)
    ar[0] = noise[0]
    for i in range(1, 2000):
        ar[i] = 0.8 * ar[i - 1] + noise[i]
    lengths = long_run_variance(np.column_stack([noise, ar])).plug_in_block_length
    assert lengths[0] < 3 < 10 < lengths[1]
    rows = persistent_window(3, 300, lifetime=6.0).counts
    assert choose_block_length(long_run_variance(ratio_contributions(rows, [2, 3], 0))) >= 7


# --- drafts_needed -----------------------------------------------------------------------------


def test_drafts_needed_scales_with_the_square_of_the_width():
    est = estimate_acceptance(persistent_window(10, 200), n_resamples=400)
    h = est.mean_acceptance_length.halfwidth
    assert drafts_needed(est, 2 * h) == 0
    assert drafts_needed(est, h / 2) == pytest.approx(3 * est.drafts, rel=1e-6, abs=1)
    widest = float(np.max(est.survival.high - est.survival.low)) / 2
    assert drafts_needed(est, widest / 3, quantity="survival") == pytest.approx(8 * est.drafts, rel=1e-6, abs=1)


def test_drafts_needed_without_an_interval_uses_independent_drafts():
    est = estimate_acceptance(window([1000, 3000, 1500, 700, 500, 300], 3))
    a = np.array([0.7, 0.5, 0.3])
    variance = (1 * 0.7 + 3 * 0.5 + 5 * 0.3) - a.sum() ** 2
    target = 0.01
    expected = (1.6448536269514722 * math.sqrt(variance) / target) ** 2 - 1000
    assert drafts_needed(est, target) == pytest.approx(expected, abs=1)


def test_drafts_needed_refuses_what_it_cannot_answer():
    empty = estimate_acceptance(window(np.empty((0, 6)), 3))
    with pytest.raises(ValueError, match="no drafts"):
        drafts_needed(empty, 0.1)
    est = estimate_acceptance(persistent_window(1, 30), n_resamples=50)
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="target_halfwidth"):
            drafts_needed(est, bad)
    with pytest.raises(ValueError, match="quantity"):
        drafts_needed(est, 0.1, quantity="speedup")


# --- drift --------------------------------------------------------------------------------------


def step_change_window(seed: int, n: int = 240, change_at: int = 180) -> IntervalCounts:
    before = persistent_window(seed, n, a=6.0, b=2.0)
    after = persistent_window(seed + 1000, n, a=4.0, b=2.5)  # a worse drafter fit: lower AL
    rows = np.concatenate([before.counts[:change_at], after.counts[change_at:]])
    return window(rows, 3)


def test_drift_detected_on_a_step_change_with_its_size():
    w = step_change_window(1)
    drift = detect_drift(w, n_resamples=500)
    assert drift.detected
    assert drift.recent_mean_acceptance_length < drift.earlier_mean_acceptance_length
    assert drift.difference.value == pytest.approx(
        drift.recent_mean_acceptance_length - drift.earlier_mean_acceptance_length
    )
    assert drift.difference.high < 0
    assert drift.difference.level == 0.9
    assert drift.recent_start == w.start[180]
    assert "fell from" in drift.message
    assert "last 15m" in drift.message
    assert "90% interval" in drift.message
    assert f"{drift.earlier_mean_acceptance_length:.2f}" in drift.message


def test_drift_detected_on_most_step_changes():
    detected = [detect_drift(step_change_window(seed), n_resamples=300).detected for seed in range(20)]
    assert sum(detected) >= 17


def test_no_drift_when_the_recent_part_repeats_the_earlier_one():
    pattern = persistent_window(3, 20).counts
    drift = detect_drift(window(np.tile(pattern, (12, 1)), 3), n_resamples=300)
    assert drift.difference.value == pytest.approx(0.0, abs=1e-12)
    assert not drift.detected
    assert drift.difference.low < 0 < drift.difference.high
    assert drift.message.startswith("no drift")


def test_false_alarm_rate_on_a_stationary_process_is_about_one_minus_the_level():
    """A 90% interval excludes 0 on ~10% of stationary windows (measured: 0.10 over 300
    windows with requests over ~4 intervals); 100 windows, so allow 2 standard errors."""
    results = [detect_drift(persistent_window(seed, 240), n_resamples=200) for seed in range(100)]
    false_alarm_rate = np.mean([d.detected for d in results])
    assert false_alarm_rate <= 0.16
    assert all(d.message.startswith("no drift") for d in results if not d.detected)


def test_drift_threshold_hides_tiny_significant_changes():
    w = step_change_window(2)
    assert detect_drift(w, n_resamples=300).detected
    assert not detect_drift(w, n_resamples=300, min_relative_change=0.5).detected


def test_drift_needs_enough_intervals_on_both_sides():
    drift = detect_drift(persistent_window(0, 8), n_resamples=100)
    assert not drift.detected
    assert "too few intervals" in drift.message
    assert not detect_drift(window(np.empty((0, 6)), 3)).detected


def test_drift_rejects_bad_input():
    w = persistent_window(0, 40)
    with pytest.raises(ValueError, match="recent_fraction"):
        detect_drift(w, recent_fraction=1.5)
    shuffled = IntervalCounts(3, w.start[::-1].copy(), w.end[::-1].copy(), w.counts)
    with pytest.raises(ValueError, match="time order"):
        detect_drift(shuffled)


def test_estimate_is_a_named_result():
    est = estimate_acceptance(persistent_window(0, 50), n_resamples=50)
    assert isinstance(est, AcceptanceEstimate)
    assert est.counts == window(persistent_window(0, 50).counts, 3).total()
    assert est.gamma == 3
    assert est.n_intervals == 50


def test_drift_accepts_blocks_whose_start_reaches_back():
    """A target that was down for a few scrapes counts its first delta from its last good
    scrape: that block starts before the previous one ends. Rows are ordered by end."""
    w = persistent_window(0, 40)
    start = w.start.copy()
    start[25] = start[22]  # the recovered target's delta spans three cycles
    reached_back = IntervalCounts(3, start, w.end.copy(), w.counts)
    d = detect_drift(reached_back)
    assert math.isfinite(d.difference.value)
    assert d.message
