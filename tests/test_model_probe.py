"""The probe decision (model/probe.py, model/decision.py): a canary on one engine when the
best expected γ rests on positions no window at the deployed γ checks, and it pays."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from acceptance.counts import IntervalCounts
from acceptance.route_estimate import RouteTraffic, route_traffic
from model.deployment import Deployment
from model.probe import PROBE_MIN_DRAFTS, accepted_variance, design_effect
from model.recommend import recommend

from test_model_recommend import resamples

# γ 3 deployed; the conditionals rise (0.6, 0.6, 0.9): the tail models disagree on how far
# that goes, so γ 8's expected +10% rests on positions 4..8 that γ 3 never checks.
RISING = np.array([0.6, 0.36, 0.324])
DRAFT_MODEL = Deployment(method="draft_model", draft_cost=0.1, cost_profile="flat")
TRAFFIC = RouteTraffic(drafts=50_000, seconds=3600.0, engines=8)


def _tune(curve=RISING, deployment=DRAFT_MODEL, traffic=TRAFFIC, drafts=50_000):
    return recommend(curve, deployment, survival_resamples=resamples(curve, drafts), deployed_gamma=3,
                     traffic=traffic)


def test_an_unsure_extrapolated_best_is_probed_on_one_engine_while_the_fleet_keeps_its_gamma():
    rec = _tune()
    probe = rec.probe
    assert rec.decision == "probe"
    assert (rec.recommended_gamma, rec.expected_best_gamma, probe.gamma, probe.engines) == (3, probe.gamma, 8, 1)
    assert probe.speculative_config == {"method": "draft_model", "num_speculative_tokens": 8}
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 3  # the rest of the route as it is
    assert probe.drafts_needed >= PROBE_MIN_DRAFTS
    # its duration is its drafts at one engine's draft rate, scaled by the slower γ 8 steps (flat: 1 + 0.1·γ)
    rate = 50_000 / 3600 / 8 * (1 + 0.1 * 3) / (1 + 0.1 * 8)
    assert probe.duration_s == pytest.approx(probe.drafts_needed / rate)
    assert probe.expected_value > probe.expected_cost > 0
    assert rec.drafts_factor_to_settle is None  # no window at γ 3 settles it
    assert f"probe γ=8 on 1 of 8 engine(s) for {probe.drafts_needed:,} drafts" in rec.decision_reason
    doc = rec.to_dict()
    assert doc["decision"] == "probe" and doc["probe"]["gamma"] == 8
    assert set(doc["probe"]) == {"gamma", "engines", "drafts_needed", "duration_s", "expected_cost",
                                 "expected_value", "speculative_config"}
    json.dumps(doc, allow_nan=False)


def test_with_a_sure_step_the_fleet_takes_it_and_the_canary_runs_the_farther_gamma():
    rec = _tune(deployment=Deployment(method="draft_model", draft_cost=0.05, cost_profile="flat"))
    assert rec.decision == "probe"
    assert rec.recommended_gamma == 8 and rec.probe.gamma == 16 == rec.expected_best_gamma
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 8
    assert rec.gain is not None and rec.gain.value > 0.03  # the step, sure on its own (below)
    assert "the best γ whose gain is sure now: P(γ=8" in rec.decision_reason


def test_no_probe_without_the_route_s_engines_or_when_it_does_not_pay():
    unknown = _tune(traffic=None)
    assert unknown.decision == "keep" and unknown.probe is None
    assert "no probe of γ=8: the window does not say how many engines" in unknown.decision_reason
    ingested = _tune(traffic=RouteTraffic(50_000, 3600.0, None))
    assert ingested.probe is None and "does not say how many engines" in ingested.decision_reason
    # a decision that stands ten minutes cannot repay two restarts of 5 minutes
    short = _tune(deployment=Deployment(method="draft_model", draft_cost=0.1, cost_profile="flat",
                                        decision_horizon_s=600.0))
    assert short.decision == "keep" and short.probe is None
    assert "; no probe γ=8 on 1 of 8 engine(s)" in short.decision_reason
    assert "expected value" in short.decision_reason and "against cost" in short.decision_reason


def test_a_gain_more_drafts_can_settle_is_not_probed():
    # γ 4 is one position past γ 3 and 15 drafts are far too few: more drafts settle it
    rec = _tune(curve=np.array([0.8, 0.64, 0.55]), drafts=40)
    assert rec.decision != "probe" and rec.probe is None


def test_a_one_engine_route_pays_the_whole_route_s_share():
    one = _tune(traffic=RouteTraffic(50_000 / 8, 3600.0, 1))
    eight = _tune()
    assert one.probe.engines == 1
    assert one.probe.duration_s == pytest.approx(eight.probe.duration_s, rel=1e-9)  # same per-engine rate
    assert one.probe.expected_cost == pytest.approx(8 * eight.probe.expected_cost, rel=1e-6)


def test_accepted_variance_is_that_of_the_accepted_tokens():
    a = np.array([0.8, 0.5, 0.3])
    rng = np.random.default_rng(0)
    probs = np.concatenate([[1.0], a]) - np.concatenate([a, [0.0]])  # P(X = 0..3)
    x = rng.choice(4, size=400_000, p=probs)
    assert accepted_variance(a) == pytest.approx(x.var(), rel=0.01)
    assert accepted_variance(np.ones(4)) == 0.0 and accepted_variance(np.zeros(3)) == 0.0


def test_the_design_effect_counts_correlated_drafts_for_less_never_more():
    a = np.array([0.8, 0.5, 0.3])
    iid = accepted_variance(a) / 10_000
    rng = np.random.default_rng(1)
    assert design_effect(1 + a.sum() + rng.normal(0, np.sqrt(4 * iid), 4000), a, 10_000) == pytest.approx(4, rel=0.1)
    assert design_effect(1 + a.sum() + rng.normal(0, np.sqrt(iid / 4), 4000), a, 10_000) == 1.0


def test_the_route_s_traffic_is_its_rows_drafts_over_their_span_and_the_engines_at_its_gamma():
    counts = np.array([[100, 300, 150, 80, 50, 20], [300, 900, 450, 240, 150, 60]], dtype=float)
    rows = IntervalCounts(3, np.array([0.0, 15.0]), np.array([15.0, 45.0]), counts)
    engines = [("t", "m", 0), ("t", "m", 1)]
    window = SimpleNamespace(newest_segment=SimpleNamespace(gamma=3, engines=engines + [("t", "m", 2)],
                                                            engines_at_end=engines))
    traffic = route_traffic(window, rows)
    assert traffic == RouteTraffic(400.0, 45.0, 2)
    assert traffic.drafts_per_engine_second == pytest.approx(400 / 45 / 2)
    assert route_traffic(SimpleNamespace(newest_segment=None), rows).drafts_per_engine_second is None
    instant = IntervalCounts(3, np.array([5.0]), np.array([5.0]), counts[:1])
    assert route_traffic(window, instant) is None  # rows that span no time say no rate


def test_the_console_and_the_gauges_say_probe():
    from specdec.exporter import DECISIONS
    from specdec.report import _probe_line

    rec = _tune()
    doc = rec.to_dict()
    line = _probe_line(doc, "none")
    assert line.startswith(f"recommendation: probe gamma 8 on 1 engine(s) for about {rec.probe.drafts_needed:,} drafts")
    assert "keep gamma 3 on the others" in line
    assert '"num_speculative_tokens": 8' in line
    assert "probe" in DECISIONS
