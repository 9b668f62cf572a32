"""The specialized decode speedup measured from two γ segments' latency (model.probe.measured_speedup)."""

from dataclasses import replace

import numpy as np
import pytest

from model.deployment import Deployment
from model.probe.measured_speedup import SegmentLatency, SegmentShares, measure_specialized_speedup

KIMI = Deployment(method="dspark", draft_cost=0.10, cost_profile="roofline", decode_backend="latency_specialized",
                  specialized_speedup=(1.5, 2.0))
SIZES = np.array([4, 8, 16])
SHARES = np.array([0.3, 0.3, 0.4])  # B = 16 fits the path at γ ≤ 3 only


def _flat_itl(gamma: int, x: float, s: float, draft: float = 0.1) -> float:
    """Mean ITL on the flat profile by hand: a step that fits (B·(γ+1) ≤ 64) takes x/s, else x;
    the drafter adds draft·x; request-steps weigh u_B·B / t_B."""
    t = np.where(SIZES * (gamma + 1) <= 64, x / s, x) + draft * x
    w = SHARES * SIZES
    return float(w.sum() / (w / t).sum())


def test_flat_profile_gives_back_the_speedup_and_rate_it_was_made_with():
    flat = replace(KIMI, cost_profile="flat")
    x, s = 1 / 90.0, 1.3
    m = measure_specialized_speedup(flat, SegmentLatency(3, _flat_itl(3, x, s)), SegmentLatency(7, _flat_itl(7, x, s)),
                                    SegmentShares(SIZES, SHARES))
    assert m.measured
    assert m.value == pytest.approx(s, rel=2e-3)
    assert m.baseline_tokens_per_second == pytest.approx(90.0, rel=2e-3)
    assert m.confidence_interval == pytest.approx((m.value, m.value))  # no resamples: the point


def test_a_slower_probe_reads_as_a_larger_speedup():
    """The main segment all on the path, the probe partly stock: the more the probe lags
    behind, the more the path is worth."""
    flat = replace(KIMI, cost_profile="flat")
    x = 1 / 90.0
    main = SegmentLatency(3, _flat_itl(3, x, 1.5))
    found = [measure_specialized_speedup(flat, main, SegmentLatency(7, _flat_itl(7, x, 1.5) * f),
                                         SegmentShares(SIZES, SHARES)).value
             for f in (0.97, 1.0, 1.03)]
    assert found[0] < found[1] < found[2]
    assert found[1] == pytest.approx(1.5, rel=2e-3)


def _roofline_itl(x: float, s: float, clean_share: float):
    """gamma → the roofline cost model's mean ITL at (x, s) over SHARES (request-steps weigh u_B·B / t_B)."""
    from model.speedup import CostModel
    cost = CostModel.for_deployment(replace(KIMI, baseline_tokens_per_second=1 / x), clean_share=clean_share)

    def itl(gamma: int) -> float:
        t = cost.step_times([gamma], SIZES, s)[0]
        return float((SHARES * SIZES).sum() / (SHARES * SIZES / t).sum())

    return itl


def test_roofline_interval_from_the_mix_resamples_holds_the_truth():
    x, s = 1 / 118.0, 1.25
    itl = _roofline_itl(x, s, clean_share=0.98)
    rng = np.random.default_rng(1)
    drawn = tuple(rng.dirichlet(300 * SHARES + 0.5, size=400) for _ in range(2))
    m = measure_specialized_speedup(KIMI, SegmentLatency(3, itl(3)), SegmentLatency(7, itl(7)),
                                    SegmentShares(SIZES, SHARES, resamples=drawn), clean_share=0.98, level=0.9)
    lo, hi = m.confidence_interval
    assert m.value == pytest.approx(s, rel=2e-3)
    assert lo < s < hi and hi - lo < 0.2
    assert m.path_contrast > 0.1
    assert m.to_dict()["segments"] == [{"gamma": 3, "itl_mean_s": itl(3), "batch_time_shares": None},
                                       {"gamma": 7, "itl_mean_s": itl(7), "batch_time_shares": None}]
    assert "1.25×" in m.describe() and "gamma 7" in m.describe()


def test_a_probe_priced_at_its_own_batch_mix_gives_back_the_speedup_the_fleet_s_mix_would_miss():
    """A probe at γ 7 whose requests stay longer runs larger batches than the fleet at γ 3
    (40% of its time at B = 16, which runs stock at γ 7, against 20%). Its latency is of its
    own batches: priced at its own shares s comes back; priced at the fleet's, the extra stock
    steps read as a faster path."""
    flat = replace(KIMI, cost_profile="flat")
    x, s = 1 / 90.0, 1.3
    fleet, probe_shares = np.array([0.5, 0.3, 0.2]), np.array([0.3, 0.3, 0.4])

    def itl(gamma, shares):
        t = np.where(SIZES * (gamma + 1) <= 64, x / s, x) + 0.1 * x
        w = shares * SIZES
        return float(w.sum() / (w / t).sum())

    main, probe = SegmentLatency(3, itl(3, fleet)), SegmentLatency(7, itl(7, probe_shares))
    own = measure_specialized_speedup(flat, main, probe, SegmentShares(SIZES, fleet, probe_shares))
    shared = measure_specialized_speedup(flat, main, probe, SegmentShares(SIZES, fleet))
    assert own.value == pytest.approx(s, rel=2e-3)
    assert own.baseline_tokens_per_second == pytest.approx(90.0, rel=2e-3)
    assert shared.value > s * 1.1  # the bias the probe's own mix removes


def test_segments_on_the_same_path_measure_nothing():
    flat = replace(KIMI, cost_profile="flat")
    x = 1 / 90.0
    m = measure_specialized_speedup(flat, SegmentLatency(2, _flat_itl(2, x, 1.5)), SegmentLatency(3, _flat_itl(3, x, 1.5)),
                                    SegmentShares(SIZES, SHARES))
    assert not m.measured and m.value is None
    assert "same share" in m.reason and "not measured" in m.describe()


def test_latencies_no_speedup_explains_are_not_measured():
    flat = replace(KIMI, cost_profile="flat")
    x = 1 / 90.0
    # the probe three times slower than its partly stock steps can be at any s in bounds
    m = measure_specialized_speedup(flat, SegmentLatency(3, _flat_itl(3, x, 1.5)),
                                    SegmentLatency(7, 3 * _flat_itl(7, x, 1.5)), SegmentShares(SIZES, SHARES))
    assert not m.measured and "no speedup within" in m.reason


def test_nothing_to_measure_off_the_path():
    stock = replace(KIMI, decode_backend="auto")
    assert measure_specialized_speedup(stock, SegmentLatency(3, 0.01), SegmentLatency(7, 0.02),
                                       SegmentShares(SIZES, SHARES)) is None


def test_a_latency_from_littles_law_moves_with_the_mix_and_is_measured_less_surely():
    """Logged intervals give ITL = N̄ / λ with N̄ from the sampled Running: each resample of the
    mix moves it by N̄*/N̄ (from_running). At the same latency and resamples the point is the
    same and the interval wider than an exact histogram's, and a planned probe's predicted
    half-width is wider as well."""
    from model.probe.measured_speedup import predicted_halfwidth
    x, s = 1 / 118.0, 1.25
    itl = _roofline_itl(x, s, clean_share=1.0)
    rng = np.random.default_rng(2)
    drawn = tuple(rng.dirichlet(300 * SHARES + 0.5, size=400) for _ in range(2))
    histogram, logged = (measure_specialized_speedup(
        KIMI, SegmentLatency(3, itl(3), from_running=f), SegmentLatency(7, itl(7), from_running=f),
        SegmentShares(SIZES, SHARES, resamples=drawn)) for f in (False, True))
    assert logged.value == pytest.approx(histogram.value) == pytest.approx(s, rel=2e-3)
    width = [m.confidence_interval[1] - m.confidence_interval[0] for m in (histogram, logged)]
    assert width[1] > 1.5 * width[0]  # 0.31 against 0.14
    assert logged.confidence_interval[0] <= s <= logged.confidence_interval[1]
    half = [predicted_halfwidth(replace(KIMI, baseline_tokens_per_second=1 / x), (3, 7), SegmentShares(SIZES, SHARES),
                                clean_share=1.0,
                                samples=(300.0, 100.0), from_running=f)(s) for f in (False, True)]
    assert half[1] > 1.5 * half[0]  # 0.24 against 0.12
