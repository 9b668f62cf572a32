"""The specialized decode path: which steps take it, what it is allowed to run."""

import math

from dataclasses import replace

import numpy as np
import pytest

from model.deployment import Deployment, ModelInputError
from model.recommend import RouteInputs, recommend
from model.specialized import (
    Eligibility,
    default_capture_sizes,
    padded_step_tokens,
    runs_specialized,
    specialized_eligibility,
    specialized_refusal,
)
from model.speedup import CostModel

SPEC = Deployment(decode_backend="latency_specialized")
CURVE7 = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.42, 0.35])


def test_default_capture_sizes_are_vllms():
    sizes = default_capture_sizes()
    assert sizes[:5] == (1, 2, 4, 8, 16)
    assert sizes[-1] == 512
    assert 248 in sizes
    assert 272 in sizes


def test_which_steps_fit():
    # γ = 7: at most 8 requests; γ = 3: 16.
    assert all(runs_specialized(b, 8) for b in range(1, 9))
    assert not runs_specialized(9, 8)
    assert all(runs_specialized(b, 4) for b in range(1, 17))
    assert not runs_specialized(17, 4)
    assert padded_step_tokens(3, 4) == 16  # FULL graphs pad whole requests to a capture size
    assert runs_specialized(64, 1)
    assert not runs_specialized(65, 1)
    # Capture sizes from the config: 12 tokens at q = 4 run as a 12-token graph.
    assert padded_step_tokens(3, 4, (1, 2, 4, 12, 20, 128)) == 12
    assert runs_specialized(3, 4, (1, 2, 4, 12, 20, 128))
    assert runs_specialized(5, 4, (1, 2, 4, 12, 20, 128))  # 20 = a rounded capture size ≤ 64
    assert not runs_specialized(5, 4, (1, 2, 4, 12, 128))  # 20 tokens pad to 128 > 64: stock
    # no capture size ≥ B·q: eager → stock
    assert not runs_specialized(3, 4, (1, 2, 4))


def test_refusals():
    assert specialized_refusal("dspark", 7) is None
    assert specialized_refusal("eagle3", 0) is None
    assert "γ ≤ 7" in specialized_refusal("dspark", 8)
    assert "only dspark" in specialized_refusal("eagle3", 3)


def test_gamma_8_refused_with_the_reason():
    rec = recommend(RouteInputs(np.append(CURVE7, 0.3), deployed_gamma=7), SPEC)
    c8 = rec.candidates[8]
    assert not c8.allowed
    assert "γ ≤ 7" in c8.reason
    assert rec.candidates[7].allowed
    assert rec.recommended_gamma <= 7


def test_other_methods_refused_on_the_specialized_path():
    dep = Deployment(method="eagle3", decode_backend="latency_specialized", draft_cost=0.05)
    rec = recommend(RouteInputs(CURVE7[:3]), dep)
    assert rec.candidates[0].allowed
    assert all(not c.allowed and "only dspark" in c.reason for c in rec.candidates[1:])
    assert rec.recommended_gamma == 0


def test_big_batches_push_the_route_to_a_smaller_gamma():
    small = recommend(RouteInputs(CURVE7, batch_mix={8: 1.0}), SPEC)
    big = recommend(RouteInputs(CURVE7, batch_mix={12: 1.0}), SPEC)  # 12·8 = 96 > 64 at γ = 7; 12·4 = 48 fits at γ = 3
    assert small.recommended_gamma == 7
    assert big.recommended_gamma < 7
    assert 12 * (big.recommended_gamma + 1) <= 64
    # The same batch mix without the specialized path keeps γ = 7.
    assert recommend(RouteInputs(CURVE7, batch_mix={12: 1.0}), Deployment()).recommended_gamma == 7


def test_auto_backend_never_takes_the_specialized_path():
    for sp in (1.5, 3.0):
        model = CostModel.for_deployment(Deployment(specialized_speedup=sp))
        t = model.step_times([0, 3, 7], [1, 4])
        assert np.allclose(t, CostModel.for_deployment(Deployment()).step_times([0, 3, 7], [1, 4]))


def test_fast_path_makes_the_drafter_relatively_dearer():
    auto = CostModel.for_deployment(Deployment(cost_profile="flat"))
    spec = CostModel.for_deployment(Deployment(cost_profile="flat", decode_backend="latency_specialized"))
    # Flat profile: S = AL·T0 / (T0 + r·T0) on stock; AL·(T0/s) / (T0/s + r·T0) on the fast path.
    for model, expected in ((auto, 1 / 1.1), (spec, (1 / 1.75) / (1 / 1.75 + 0.1))):
        t = model.step_times([0, 7], [1])
        assert t[0, 0] / t[1, 0] == pytest.approx(expected)


def test_eligibility_from_iteration_tokens():
    # 1000 steps, 600 of ≤ 64 tokens; at γ = 3 a mix of B = 4 (fits) and B = 32 (does not).
    hist = {1.0: 0, 8.0: 0, 16.0: 500, 32.0: 550, 64.0: 600, 128.0: 900, math.inf: 1000}
    mix = {4: 0.5, 32: 0.5}  # step shares ∝ w/B: 8/9 at B = 4
    e = specialized_eligibility(hist, mix, 3)
    assert e.share == pytest.approx(0.6 / (8 / 9))
    assert 'le="64"' in e.source
    assert specialized_eligibility(hist, None, 3).share == pytest.approx(0.6)
    assert specialized_eligibility({64.0: 900, math.inf: 900}, {4: 1.0}, 3).share == 1.0


@pytest.mark.parametrize("hist", [{}, {64.0: 5}, {64.0: 5, math.inf: 0}, {64.0: 9, math.inf: 5}])
def test_bad_iteration_tokens(hist):
    with pytest.raises(ModelInputError):
        specialized_eligibility(hist, None, 3)


def test_clean_share_blends_the_paths():
    low = recommend(RouteInputs(CURVE7, eligibility=Eligibility(0.0, "given"), batch_mix={4: 1.0}), SPEC)
    high = recommend(RouteInputs(CURVE7, eligibility=1.0, batch_mix={4: 1.0}), SPEC)
    assert high.specialized_eligibility.share == 1.0
    assert low.specialized_eligibility.share == 0.0
    # Without clean steps the specialized backend behaves like the stock one.
    stock = recommend(RouteInputs(CURVE7, batch_mix={4: 1.0}), Deployment())
    assert [c.speedup for c in low.candidates] == pytest.approx([c.speedup for c in stock.candidates])


# --- how far the decision rests on the configured specialized speedup

EDGE_MIX = {4: 0.3, 8: 0.3, 16: 0.4}  # B = 16 fits the specialized path only at γ ≤ 3
FRONT_LOADED = np.cumprod([0.95, 0.92, 0.88])


def _specialized(speedup) -> Deployment:
    return Deployment(method="dspark", draft_cost=0.10, cost_profile="roofline",
                      decode_backend="latency_specialized", specialized_speedup=speedup)


def _point_speedups(speedup: float) -> dict[int, float]:
    rec = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX), _specialized(speedup))
    return {c.gamma: c.speedup for c in rec.candidates if c.allowed}


def test_break_even_is_where_another_gamma_starts_to_win_by_min_gain():
    """Deployed 3 on the edge mix: γ 3 keeps B = 16 on the fast path, γ 7 does not, so below
    some speedup γ 7 wins. The break-even found by the search is checked by pricing at a
    single speedup either side of it."""
    rec = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX), _specialized(1.9))
    be = rec.specialized_break_even
    assert (be.gamma, be.gamma_below, be.holds_to, be.gamma_above) == (3, 7, None, None)
    assert 1.0 < be.holds_from < 1.9
    inside, outside = _point_speedups(be.holds_from + 0.01), _point_speedups(be.holds_from - 0.01)
    assert max(inside.values()) <= 1.03 * inside[3]
    assert outside[7] > 1.03 * outside[3] and max(outside, key=outside.get) == 7


def test_a_decision_resting_on_the_configured_range_is_warned_with_the_way_to_measure_it():
    rec = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX), _specialized((1.8, 2.2)))
    be = rec.specialized_break_even
    assert be.rests_on_configuration and be.holds_from > 1.8 / 1.25
    assert f"below {be.holds_from:.2f}× gamma 7" in be.warning()
    assert "specdec calibrate plan" in be.warning()
    assert rec.to_dict()["specialized_break_even"]["warning"] == be.warning()


def test_a_gamma_that_holds_at_every_speedup_is_not_warned():
    """Every batch fits the specialized path at every candidate γ: s scales them alike."""
    rec = recommend(RouteInputs(np.full(7, 0.8).cumprod(), deployed_gamma=7,
                    batch_mix={1: 0.3, 2: 0.3, 4: 0.4}), _specialized((1.5, 2.0)))
    be = rec.specialized_break_even
    assert (be.gamma, be.holds_from, be.holds_to) == (7, None, None)
    assert not be.rests_on_configuration and be.warning() is None


def test_a_flip_far_outside_the_configured_range_is_reported_but_not_warned():
    # told 3.0-3.2x: gamma 3 holds there; the flip to 7 lies well below 3.0 / 1.25
    be = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3,
                   batch_mix=EDGE_MIX), _specialized((3.0, 3.2))).specialized_break_even
    assert be.holds_from is not None and be.holds_from < 3.0 / 1.25
    assert be.warning() is None


def test_a_decision_its_doubt_makes_has_no_break_even():
    """At the range's midpoint γ 7 is expected to gain 6.7% over the deployed 3, but without
    resamples that gain is not sure: the keep rests on the doubt, not on the figure."""
    rec = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX), _specialized((1.5, 2.0)))
    assert (rec.decision, rec.recommended_gamma) == ("keep", 7)
    assert rec.specialized_break_even is None


def test_off_the_specialized_path_there_is_no_break_even():
    rec = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3,
                    batch_mix=EDGE_MIX), Deployment(method="dspark", draft_cost=0.10))
    assert rec.specialized_break_even is None and rec.to_dict()["specialized_break_even"] is None


def test_the_console_prints_the_models_warning(capsys):
    """The tune-gamma console view prints the break-even's warning as the model worded it."""
    import json

    from specdec.cli import tune_gamma_main
    from specdec.report import format_tuning

    assert tune_gamma_main(["--survival", "0.95,0.874,0.769", "--drafts", "20000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["specialized_break_even"] is None  # the inline default deployment runs stock
    warned = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX), _specialized((1.8, 2.2)))
    doc["specialized_break_even"] = warned.to_dict()["specialized_break_even"]
    assert f"warning: {warned.specialized_break_even.warning()}" in format_tuning(doc).splitlines()
    assert doc["specialized_speedup_measured"] is None
    from model.probe.measured_speedup import SegmentLatency, SegmentShares, measure_specialized_speedup
    measured = measure_specialized_speedup(_specialized((1.5, 2.0)), SegmentLatency(3, 0.0128), SegmentLatency(7, 0.0166),
                                           SegmentShares([4, 8, 16], [0.3, 0.3, 0.4]))
    doc["specialized_speedup_measured"] = measured.to_dict()
    assert measured.describe() in format_tuning(doc).splitlines()


def _traffic(engines: int):
    from acceptance.segment_measures import RouteTraffic
    return RouteTraffic(drafts=2e6, seconds=3600.0, engines=engines, rows=240)


def test_a_keep_resting_on_the_configured_speedup_probes_the_gamma_past_the_flip():
    """Told 1.7–2.1×, γ 3 holds at the point, but below 1.875× γ 7 wins: a probe at γ 7
    measures s, and an hour of it tells the lower part of the doubted range from the flip."""
    rec = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX,
                    traffic=_traffic(4)), _specialized((1.7, 2.1)))
    p = rec.probe
    assert rec.decision == "probe" and rec.recommended_gamma == 3 and p.gamma == 7
    assert p.expected_value > p.expected_cost > 0
    assert p.duration_s >= 240 * 15.0  # an hour of the route's 15 s rows at least
    assert p.speculative_config["num_speculative_tokens"] == 7
    assert "measures it" in rec.decision_reason
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 3  # the fleet stays


def test_no_speedup_probe_on_one_engine_where_the_flip_is_far_or_the_probe_could_not_tell():
    alone = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX,
                      traffic=_traffic(1)), _specialized((1.7, 2.1)))
    assert alone.decision == "keep" and alone.probe is None
    # told 1.8–2.2×: where γ 7 would win (below 1.875×) an hour's probe measures s no closer
    # than ±0.45, so it could not say which side of the flip s lies: worth nothing
    blurred = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX,
                        traffic=_traffic(4)), _specialized((1.8, 2.2)))
    assert blurred.decision == "keep" and blurred.probe is None
    assert "no probe: γ=3 rests on the specialized decode speedup" in blurred.decision_reason
    assert "expected value 0 s" in blurred.decision_reason
    far = recommend(RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX,
                    traffic=_traffic(4)), _specialized((3.0, 3.2)))
    assert far.decision == "keep" and far.probe is None


def test_a_relative_flat_profile_on_the_specialized_path_prices_the_speedup_probe():
    """A flat profile without a plain-decode rate (relative units) scales every step time as a
    whole: the speedup probe's predicted interval is priced at any rate, and the recommendation
    neither fails nor depends on the rate given."""
    from acceptance.segment_measures import RouteTraffic

    curve = np.cumprod(np.full(3, 0.6))
    inputs = RouteInputs(curve, deployed_gamma=3, batch_mix={4: 0.3, 8: 0.3, 16: 0.4},
                         traffic=RouteTraffic(drafts=2e6, seconds=3600.0, engines=4, rows=240))
    relative = Deployment(method="dspark", draft_cost=0.02, cost_profile="flat", baseline_tokens_per_second=None,
                          decode_backend="latency_specialized", specialized_speedup=(1.2, 1.6))
    rec = recommend(inputs, relative)
    at_rate = recommend(inputs, replace(relative, baseline_tokens_per_second=80.0))
    assert rec.decision == at_rate.decision and rec.recommended_gamma == at_rate.recommended_gamma
    assert [c.speedup for c in rec.candidates] == pytest.approx([c.speedup for c in at_rate.candidates])
    assert rec.decision == at_rate.decision == "probe" and rec.probe.gamma == at_rate.probe.gamma


def test_no_speedup_probe_where_a_probes_latency_cannot_measure_the_speedup(tmp_path):
    """On a measured table the step times are the table's seconds: a probe's latency beside the
    fleet's has no plain-decode rate and speedup to solve for (model.probe.measured_speedup
    .measurable). The roofline deployment whose keep rests on its configured speedup probes γ 7;
    the same step times as a measured table rest on it as much, and plan no probe."""
    from model.profiles import STOCK, make_profile

    roofline = _specialized((1.7, 2.1))
    prof = make_profile(roofline)
    table = tmp_path / "steps.csv"
    table.write_text("batch_size,tokens_per_request,path,seconds\n" + "".join(
        f"{b},{q},stock,{float(prof.step_time_s(b, q, STOCK)):.9f}\n" for b in (1, 2, 4, 8, 16, 32, 64)
        for q in range(1, 10)), encoding="utf-8")
    inputs = RouteInputs(FRONT_LOADED, deployed_gamma=3, batch_mix=EDGE_MIX, traffic=_traffic(4))
    assert recommend(inputs, roofline).decision == "probe"
    measured = recommend(inputs, replace(roofline, cost_profile=str(table)))
    assert measured.specialized_break_even is not None and measured.specialized_break_even.rests_on_configuration
    assert measured.probe is None and measured.decision == "keep"
