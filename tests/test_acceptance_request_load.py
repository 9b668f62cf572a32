"""A per-request route's batch mix from its requests' decode spans (acceptance.request_load)."""

from __future__ import annotations

import numpy as np
import pytest

from acceptance.request_load import request_load
from support import least_loaded_fleet


def test_two_overlapping_requests_on_one_engine():
    # [0, 10) and [5, 15): one running for 10 s, two for 5 s
    load = request_load(np.array([10.0, 15.0]), np.array([10.0, 10.0]), engines=1)
    assert load.time_shares == pytest.approx({1: 10 / 15, 2: 5 / 15})
    assert load.mean_running == pytest.approx(20 / 15)  # Σ d / span: Little's law
    assert load.requests == 2 and load.span_s == pytest.approx(15.0)


def test_requests_split_evenly_over_the_engines():
    # [0, 10), [0, 12), [0, 30) on two engines: three running (one engine at 2, the other at
    # 1) for 10 s, two (1 and 1) for 2 s, then one for 18 s (the other engine idle: no batch)
    load = request_load(np.array([10.0, 12.0, 30.0]), np.array([10.0, 12.0, 30.0]), engines=2)
    assert load.time_shares == pytest.approx({1: (10 + 2 * 2 + 18) / 42, 2: 10 / 42})
    assert load.mean_running == pytest.approx(52 / (30 * 2))


def test_idle_time_counts_in_the_mean_but_not_in_the_shares():
    load = request_load(np.array([10.0, 40.0]), np.array([10.0, 10.0]), engines=1)  # idle 10 s to 30 s
    assert load.time_shares == {1: 1.0}
    assert load.mean_running == pytest.approx(20 / 40)


@pytest.mark.parametrize("finish,decode", [
    ([100.0] * 50, [5.0] * 50),          # one time for all: the ingest's own, not when they ran
    ([100.0], [5.0]),                    # one row
    ([100.0, 100.0, 100.0, 160.0], [5.0] * 4),  # most at one time: lines that carried none
    ([100.0, 200.0], [0.0, np.nan]),     # nothing decoded
])
def test_rows_whose_times_cannot_say_when_requests_ran_give_no_mix(finish, decode):
    assert request_load(np.array(finish), np.array(decode), engines=1) is None


def test_engines_must_be_positive():
    with pytest.raises(ValueError, match="engines"):
        request_load(np.array([10.0, 15.0]), np.array([10.0, 10.0]), engines=0)


def test_a_least_loaded_fleet_mix_is_recovered_from_its_requests():
    """Four engines behind a least-loaded balancer: the mean per engine is Little's law's
    exactly, and the even split puts the engine time at each batch size within a few points
    of the engines' own (departures unbalance them between arrivals)."""
    finish, decode, truth = least_loaded_fleet(3000, engines=4, rate=2.0, seed=3)[:3]
    load = request_load(finish, decode, engines=4)
    true_mean = sum(b * u for b, u in truth.items())
    est_mean = sum(b * u for b, u in load.time_shares.items())
    assert est_mean == pytest.approx(true_mean, rel=0.01)
    sizes = sorted(set(truth) | set(load.time_shares))
    distance = 0.5 * sum(abs(truth.get(b, 0.0) - load.time_shares.get(b, 0.0)) for b in sizes)
    assert distance < 0.08  # 0.036–0.043 over seeds 0–2
    # one independent look per mean decode time (8 s × e^0.18) over the span
    assert load.samples == int(load.span_s / decode.mean())
    assert load.mean_running * load.span_s * 4 == pytest.approx(decode.sum())
