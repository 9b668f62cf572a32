"""The probe decision (model/probe/plan.py, model/decision/rules.py): a probe on one engine when the
best expected γ rests on positions no window at the deployed γ checks, and it pays."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from acceptance.counts import IntervalCounts
from acceptance.route_estimate import RouteTraffic, route_traffic
from model.deployment import Deployment
from model.probe.plan import PROBE_MIN_DRAFTS, accepted_variance, design_effect
from model.recommend import RouteInputs, recommend
from model.unused_keys import unread_without_probe

from test_model_recommend import resamples

# γ 3 deployed; the conditionals rise (0.6, 0.6, 0.9): the tail models disagree on how far
# that goes, so γ 8's expected +10% rests on positions 4..8 that γ 3 never checks.
RISING = np.array([0.6, 0.36, 0.324])
DRAFT_MODEL = Deployment(method="draft_model", draft_cost=0.1, cost_profile="flat")
TRAFFIC = RouteTraffic(drafts=50_000, seconds=3600.0, engines=8, rows=240)  # 15 s scrapes


def _tune(curve=RISING, deployment=DRAFT_MODEL, traffic=TRAFFIC, drafts=50_000):
    return recommend(RouteInputs(curve, survival_resamples=resamples(curve, drafts), deployed_gamma=3,
                     traffic=traffic), deployment)


def test_an_unsure_extrapolated_best_is_probed_on_one_engine_while_the_fleet_keeps_its_gamma():
    rec = _tune()
    probe = rec.probe
    assert rec.decision == "probe"
    assert (rec.recommended_gamma, rec.expected_best_gamma, probe.gamma, probe.engines) == (3, probe.gamma, 8, 1)
    assert probe.speculative_config == {"method": "draft_model", "num_speculative_tokens": 8}
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 3  # the rest of the route as it is
    assert probe.drafts_needed >= PROBE_MIN_DRAFTS
    # its duration is its drafts at one engine's draft rate, scaled by the slower γ 8 steps (flat: 1 + 0.1·γ),
    # rounded up to the whole 15 s scrape intervals a window sees it in, and no more
    rate = 50_000 / 3600 / 8 * (1 + 0.1 * 3) / (1 + 0.1 * 8)
    assert probe.duration_s == pytest.approx(15.0 * np.ceil(probe.drafts_needed / rate / 15.0))
    assert probe.duration_s - 15.0 < probe.drafts_needed / rate <= probe.duration_s
    assert probe.duration_s > 3 * 15  # longer than the 3 scrape intervals a probe takes at least
    assert probe.expected_value > probe.expected_cost > 0
    assert rec.drafts_factor_to_settle is None  # no window at γ 3 settles it
    assert f"probe γ=8 on 1 of 8 engine(s) for {probe.drafts_needed:,} drafts" in rec.decision_reason
    doc = rec.to_dict()
    assert doc["decision"] == "probe" and doc["probe"]["gamma"] == 8
    assert set(doc["probe"]) == {"gamma", "engines", "drafts_needed", "duration_s", "expected_cost",
                                 "expected_value", "speculative_config", "whole_route", "loss_probability"}
    assert doc["probe"]["whole_route"] is False  # one engine of several: the others stay at the deployed γ
    # one engine of eight may risk it: P(γ 8 loses > 3% against γ 3), said, not a bar
    assert 0.1 < doc["probe"]["loss_probability"] < 0.5
    json.dumps(doc, allow_nan=False)


def test_a_sure_step_past_the_measured_gamma_is_not_taken_beside_the_probe():
    """γ 6's gain is sure on the tail models, γ 16's is not: the probe runs γ 16, and the fleet
    keeps γ 3 meanwhile — γ 6 lies past every measured γ, and a move there is a probe, never a
    change (before: the fleet changed to γ 6 beside the probe)."""
    rec = _tune(deployment=Deployment(method="draft_model", draft_cost=0.05, cost_profile="flat"))
    assert rec.decision == "probe"
    assert rec.recommended_gamma == 3 and rec.probe.gamma == 16 == rec.expected_best_gamma
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 3
    assert "the best γ whose gain is sure now: P(γ=6" in rec.decision_reason
    assert ("γ=6 lies past γ=3, the largest measured: the fleet keeps γ=3 while the "
            "probe measures") in rec.decision_reason


def test_no_probe_without_the_route_s_engines_or_when_it_does_not_pay():
    unknown = _tune(traffic=None)
    assert unknown.decision == "keep" and unknown.probe is None
    assert "no probe of γ=8: how many engines serve the route at what draft rate is not known" in unknown.decision_reason
    ingested = _tune(traffic=RouteTraffic(50_000, 3600.0, None, 240))
    assert ingested.probe is None and "how many engines serve the route at what draft rate is not known" in ingested.decision_reason
    # a decision that stands ten minutes cannot repay two restarts of 5 minutes
    short = _tune(deployment=Deployment(method="draft_model", draft_cost=0.1, cost_profile="flat",
                                        decision_horizon_s=600.0))
    assert short.decision == "keep" and short.probe is None
    # priced and declined: the horizon decided it, so the decision says it priced one
    assert short.decided.declined is not None and short.decided.declined.gamma == 8 and short.decided.prices_probe
    assert short.decided.declined.expected_value < short.decided.declined.expected_cost
    assert unknown.decided.declined is None and not unknown.decided.prices_probe
    assert unread_without_probe([unknown.decided]).keys() == {"decision_horizon_s", "engine_restart_s"}
    assert unread_without_probe([unknown.decided, short.decided]) == {}
    assert "; no probe γ=8 on 1 of 8 engine(s)" in short.decision_reason
    assert "expected value" in short.decision_reason and "against cost" in short.decision_reason


def test_a_sure_step_past_the_measured_gamma_is_probed_not_changed_to():
    """Few drafts: γ 8's gain is plausible (more drafts at γ 3 would settle it on the tail
    models), γ 6's is sure on them — but no engine measured positions 4 to 8, so neither is a
    change: the probe measures them, the fleet staying at γ 3 (it was the change, or a wait for
    more drafts)."""
    rec = _tune(curve=np.array([0.8, 0.64, 0.55]), drafts=40)
    assert rec.decision == "probe" and rec.probe.gamma > 3
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 3  # the fleet stays meanwhile
    assert "γ=6 lies past γ=3, the largest measured" in rec.decision_reason


def test_a_busy_route_s_probe_runs_the_rows_that_settle_it_not_a_fixed_floor():
    """100 × the drafts: 2,000 drafts take seconds, less than a scrape interval. The probe runs
    the fewest rows whose drafts, widened by so few rows (acceptance.bootstrap), settle it: 4
    here, where 3 (the fewest from which its segment gets an interval at all) would not hold
    the drafts their wider interval asks (it ran a fixed 8 rows before)."""
    from acceptance.bootstrap import independent_rows_spread

    busy = _tune(traffic=RouteTraffic(5_000_000, 3600.0, 8, 240), drafts=5_000_000)
    assert busy.decision == "probe"
    assert busy.probe.duration_s == pytest.approx(4 * 15.0)
    per_row = 5_000_000 / 3600 / 8 * (1 + 0.1 * 3) / (1 + 0.1 * 8) * 15  # the probe's own drafts per row

    def widening(n):
        return independent_rows_spread(n, 0.9) / independent_rows_spread(240, 0.9)

    assert busy.probe.drafts_needed == int(np.ceil(PROBE_MIN_DRAFTS * widening(4) ** 2)) <= 4 * per_row
    assert 3 * per_row < PROBE_MIN_DRAFTS * widening(3) ** 2


def test_a_probe_s_rows_are_those_its_drafts_need_with_their_few_rows_widening():
    from model.probe.plan import PROBE_MIN_ROWS, probe_rows, rows_widening

    assert PROBE_MIN_ROWS == 3
    # drafts in their first row: the estimator's fewest rows
    assert probe_rows(2000, 1e6, window_rows=240) == 3
    # a slow route: its drafts take 400 rows, where the widening has faded (≤ 1.05² of the drafts)
    slow = probe_rows(2000, 5.0, window_rows=240)
    assert 400 <= slow <= 420 and rows_widening(slow, 240) == 1.0
    # between: n rows hold n × 1,000 drafts, and 2,000 drafts widened by n rows' spread fit first at 5
    assert probe_rows(2000, 1000.0, window_rows=240) == 5
    for n in range(3, 5):  # fewer rows would not hold the drafts their widening asks
        assert n * 1000.0 < 2000 * rows_widening(n, 240) ** 2
    assert rows_widening(3, 3) == 1.0 and rows_widening(3, 240) > 2.0


def test_a_one_engine_route_s_trial_is_as_safe_as_a_change_or_steps_nearer():
    """A one-engine route's probe is a trial of the whole route: γ 8's P(loses > 3% against
    γ 3) = 0.28 passes for one engine of eight, never as a change of the route; of the γ
    past 3 whose trial is that safe and pays, the one worth most net of its cost runs (γ 5;
    before, γ 8 for about 28 minutes)."""
    one = _tune(traffic=RouteTraffic(50_000 / 8, 3600.0, 1, 240))
    eight = _tune()
    assert one.probe.engines == eight.probe.engines == 1
    assert one.probe.whole_route and not eight.probe.whole_route
    assert eight.probe.gamma == 8 and eight.probe.loss_probability > 0.1
    assert one.decision == "probe" and one.probe.gamma == 5 and one.probe.loss_probability <= 0.1
    assert (one.recommended_gamma, one.expected_best_gamma) == (3, 8)  # the best expected stays named
    assert f"P(γ=8 loses > 3% against γ=3) = {eight.probe.loss_probability:.2f} > 0.1" in one.decision_reason
    assert "γ=5 rather than γ=8: a trial of the whole route at γ=8 would be a change of it" in one.decision_reason
    assert "as sure as a change: P(γ=5 loses > 3% against γ=3) = 0.05 ≤ 0.1" in one.decision_reason
    assert one.probe.expected_cost > 600  # the whole route's: two restarts of it, and its expected loss


def test_a_gain_past_the_measured_gamma_that_drafts_would_settle_on_the_tail_models_is_probed():
    """20 drafts: γ 8's gain is unsure on sampling, and more drafts at γ 3 would settle it on the
    tail models' guess of positions 4..8 — a change there would still be a probe (unmeasured),
    so the probe is weighed now (before: keep, 'a window with about 2.7× the drafts')."""
    rec = _tune(curve=np.array([0.8, 0.64, 0.55]), drafts=20)
    assert rec.decision == "probe" and rec.probe.gamma > 3 and rec.recommended_gamma == 3
    assert rec.drafts_factor_to_settle is None and "× the drafts" not in rec.decision_reason
    assert "more drafts at γ=3 would settle it only on the tail models' guess of them" in rec.decision_reason


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
    traffic = route_traffic(window.newest_segment, rows)
    assert traffic == RouteTraffic(400.0, 45.0, 2, 2) and traffic.row_seconds == 22.5
    assert traffic.drafts_per_engine_second == pytest.approx(400 / 45 / 2)
    assert route_traffic(None, rows).drafts_per_engine_second is None
    instant = IntervalCounts(3, np.array([5.0]), np.array([5.0]), counts[:1])
    assert route_traffic(window.newest_segment, instant) is None  # rows that span no time say no rate


def test_the_console_and_the_gauges_say_probe():
    from specdec.exporter import DECISIONS
    from specdec.report import probe_line

    rec = _tune()
    doc = rec.to_dict()
    line = probe_line(doc, "none")
    assert line.startswith(f"recommendation: probe gamma 8 on 1 engine(s) for about {rec.probe.drafts_needed:,} drafts")
    assert "keep gamma 3 on the others" in line
    assert '"num_speculative_tokens": 8' in line
    assert "probe" in DECISIONS


# ---------------------------------------------------------------- a running probe's data


def _fleet_store(path, main_curve, probe_curve, *, engines=7, scrapes=121, drafts_per_scrape=400, seed=0):
    """A store of ``engines`` engines at γ 3 and one probe at γ len(probe_curve) (none: None), scraped
    every 15 s: each scrape's drafts accept j tokens with P(X ≥ k) = the engine's curve."""
    from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts
    from acceptance.store import Store

    rng = np.random.default_rng(seed)
    curves = {f"e{i}": np.asarray(main_curve) for i in range(engines)}
    if probe_curve is not None:
        curves["probe"] = np.asarray(probe_curve)
    totals = {e: np.zeros(3 + c.size) for e, c in curves.items()}
    store = Store.open(path)
    for i in range(scrapes):
        results = []
        for e, c in curves.items():
            if i:
                probs = np.concatenate([[1.0], c]) - np.concatenate([c, [0.0]])
                x = rng.choice(c.size + 1, size=drafts_per_scrape, p=probs)
                totals[e] += np.concatenate([[drafts_per_scrape, drafts_per_scrape * c.size, x.sum()],
                                             [(x >= k).sum() for k in range(1, c.size + 1)]])
            v = totals[e]
            counts = SpecCounts(float(v[0]), float(v[1]), float(v[2]), tuple(float(a) for a in v[3:]))
            results.append(ScrapeResult(f"http://127.0.0.1:1/{e}", 1000.0 + 15 * i, True,
                                        (EngineSnapshot("m", e, counts, 1.0),)))
        store.write_cycle(results)
    return store, sorted(f"http://127.0.0.1:1/{e}" for e in curves)


def _priced(window, deployment=DRAFT_MODEL):
    """(the route's estimate, what its window holds for a probe, the recommendation) of the
    window's newest segment, priced at batch 1."""
    from acceptance.route_estimate import estimate_route
    from model.probe.evidence import probe_evidence
    from model.route import recommend_route

    route = estimate_route(window, window.newest_segment.intervals)
    probe = probe_evidence(window, route)
    return route, probe, recommend_route(route, deployment, probe=probe, batch_time_shares=None).recommendation


def _tune_window(tmp_path, main_curve, probe_curve, deployment=DRAFT_MODEL, **fleet):
    from acceptance.windows import route_window

    store, targets = _fleet_store(tmp_path / "s.db", main_curve, probe_curve, **fleet)
    with store:
        return _priced(route_window(store, targets, 0.0, 1e6), deployment)


# The truth: conditionals 0.6, 0.6, 0.9 and then 0.9 .. 0.75 — the deployed γ 3 sees three.
TRUE = np.cumprod([0.6, 0.6, 0.9, 0.9, 0.9, 0.85, 0.8, 0.75])


def test_a_running_probe_s_conditionals_continue_the_deployed_curve(tmp_path):
    route, evidence, rec = _tune_window(tmp_path, TRUE[:3], TRUE)
    probe = evidence.running
    assert (probe.gamma, probe.deployed_gamma, probe.traffic.engines) == (8, 3, 1)
    assert route.traffic.engines == 7 and route.estimate.gamma == 3
    assert probe.agrees and probe.sources == ["main"] * 3 + ["probe"] * 5
    # the join: the deployed segment's a_1..a_3, then a_3 × the probe's own α_4..α_8
    main_a, own = route.estimate.survival.value, probe.estimate.survival.value
    assert probe.survival[:3] == pytest.approx(main_a)
    assert probe.survival[3:] == pytest.approx(main_a[2] * np.cumprod(own[3:] / own[2:-1]))
    assert np.all(np.diff(probe.survival) <= 1e-12)  # never rises at the join
    assert probe.survival == pytest.approx(TRUE, abs=0.02)
    # γ 4..8 are measured now, not extrapolated; the best (γ 8 or past) is priced from them
    by_gamma = {c.gamma: c for c in rec.candidates}
    assert not any(by_gamma[g].extrapolated for g in range(9)) and by_gamma[9].extrapolated
    # the truth's best (flat, c = 0.1) is γ 6: the probe's data settles the change there
    true_speedup = [(1 + TRUE[:g].sum()) / (1 + 0.1 * g) for g in range(9)]
    assert int(np.argmax(true_speedup)) == 6
    assert (rec.decision, rec.recommended_gamma) == ("change", 6)
    assert "the probe at γ=8 (48,000 drafts) has settled this: stop it" in rec.decision_reason


def test_the_window_says_which_positions_came_from_which_segment(tmp_path, capsys):
    from specdec.pipeline import RouteTuning
    from specdec.report import format_tuning, tuning_to_dict

    route, evidence, rec = _tune_window(tmp_path, TRUE[:3], TRUE)
    doc = tuning_to_dict(RouteTuning("r", DRAFT_MODEL, route.estimate, rec, route_estimate=route, probe=evidence))
    seg = doc["observed"]["probe_segment"]
    assert seg["gamma"] == 8 and seg["agrees"] and seg["sources"] == ["main"] * 3 + ["probe"] * 5
    assert seg["joined_survival"] == pytest.approx(list(evidence.running.survival))
    text = format_tuning(doc)
    assert "probe segment: gamma 8 on 1 engine(s)" in text and "positions 1-3 from gamma 3, 4-8 from the probe" in text
    assert "conditional rates joined; shared positions agree" in text and seg["running"] is True
    # a trial that ended (then back) is said as such, not as a probe that runs
    ended = format_tuning({**doc, "observed": {**doc["observed"], "probe_segment": {**seg, "running": False}}})
    assert "ended segment: gamma 8" in ended and "4-8 from that segment" in ended
    assert "probe segment:" not in ended
    # per-request rows name no engine: none is said (it read "on ? engine(s)")
    unnamed = format_tuning({**doc, "observed": {**doc["observed"], "probe_segment": {**seg, "running": False,
                                                                                        "engines": None}}})
    assert "ended segment: gamma 8, " in unnamed and "?" not in unnamed.split("ended segment:")[1].split(";")[0]


def test_a_probe_whose_shared_positions_differ_prices_its_gammas_alone(tmp_path):
    # the probe's traffic accepts far more at position 1 (its requests are easier)
    easy = np.cumprod([0.9, 0.6, 0.9, 0.9, 0.9, 0.85, 0.8, 0.75])
    route, evidence, rec = _tune_window(tmp_path, TRUE[:3], easy)
    assert not evidence.running.agrees and evidence.running.shared_difference.low > 0
    by_gamma = {c.gamma: c for c in rec.candidates}
    al_own = 1 + np.cumsum(evidence.running.estimate.survival.value)
    al_main = 1 + np.cumsum(route.estimate.survival.value)
    assert by_gamma[8].expected_tokens == pytest.approx(al_own[7])  # γ 8 from the probe alone
    assert by_gamma[3].expected_tokens == pytest.approx(al_main[2])  # γ ≤ 3 from the deployed segment


def test_a_probe_losing_surely_is_stopped_early(tmp_path):
    collapse = np.cumprod([0.6, 0.6, 0.9, 0.05, 0.05, 0.05, 0.05, 0.05])
    _, _, rec = _tune_window(tmp_path, collapse[:3], collapse, drafts_per_scrape=100, scrapes=31)
    assert rec.decision == "keep" and rec.probe is None
    assert rec.decision_reason.startswith("stop the probe at γ=8 early: its own")
    assert "loses > 3% against γ=3" in rec.decision_reason


@pytest.mark.parametrize("alpha, says", [
    (0.75, "would settle it"),  # a gain of about 3%: the factor that settles it asks for more
    (0.8, "to the 2,000 drafts a probe takes at least"),  # a clearer gain, but 300 drafts are too few
])
def test_a_thin_probe_carries_on_with_the_drafts_still_needed(tmp_path, alpha, says):
    mild = np.cumprod([0.6, 0.6, 0.9, alpha, alpha])
    _, evidence, rec = _tune_window(tmp_path, mild[:3], mild, drafts_per_scrape=30, scrapes=11)
    assert evidence.running is not None and evidence.running.estimate.drafts == 300
    assert (rec.decision, rec.recommended_gamma) == ("probe", 3), rec.decision_reason
    assert rec.probe.gamma == 5 and rec.probe.engines == 1
    assert rec.probe.drafts_needed >= 2000 - 300
    assert "carry on the probe at γ=5" in rec.decision_reason and says in rec.decision_reason
    assert "× the drafts" not in rec.decision_reason and rec.drafts_factor_to_settle is None  # one figure
    rate = evidence.running.traffic.drafts_per_engine_second
    assert rec.probe.duration_s == pytest.approx(rec.probe.drafts_needed / rate)


def test_a_running_probe_beside_one_engine_is_half_the_route_not_all_of_it(tmp_path):
    """One engine at γ 3 and the probe at γ 5: the route is both, so carrying the probe on is
    no trial of the whole route (it was: its share was its engines over the deployed γ's alone)."""
    mild = np.cumprod([0.6, 0.6, 0.9, 0.75, 0.75])
    _, evidence, rec = _tune_window(tmp_path, mild[:3], mild, engines=1, drafts_per_scrape=30, scrapes=11)
    assert evidence.running is not None and rec.decision == "probe" and rec.probe.gamma == 5
    assert rec.probe.whole_route is False
    # half of the one restart back (300 s) and of its expected loss meanwhile (the route's would be ≥ 300 s)
    assert 150.0 <= rec.probe.expected_cost < 300.0, rec.probe


def test_successive_windows_of_a_stationary_route_do_not_alternate(tmp_path):
    """No flapping: six successive 30-minute windows of the same fleet at γ 3, first without
    a probe (each plans the same probe), then with one (each settles the same change)."""
    from acceptance.windows import route_window

    def decisions(curves, path):
        store, targets = _fleet_store(path, *curves, scrapes=6 * 120 + 1, drafts_per_scrape=50)
        out = []
        with store:
            for w in range(6):
                start = 1000.0 + w * 1800.0
                window = route_window(store, targets, start, start + 1800.0)
                rec = _priced(window)[2]
                out.append((rec.decision, rec.recommended_gamma, rec.probe and rec.probe.gamma))
        return out

    alone = decisions((RISING, None), tmp_path / "a.db")
    assert alone == [("probe", 3, 8)] * 6
    joined = decisions((TRUE[:3], TRUE), tmp_path / "b.db")
    assert len(set(joined)) == 1 and joined[0][0] == "change"


def test_the_dashboard_says_probe_and_where_the_positions_came_from(tmp_path):
    from acceptance.windows import route_window
    from dashboard.views.overview import segments_note
    from dashboard.views.recommendation import decision_text
    from specdec.pipeline import RouteTuning

    text = decision_text(_tune())
    assert text.startswith("Probe γ=8 on 1 engine(s) for about") and text.endswith("keep γ=3 on the others")
    store, targets = _fleet_store(tmp_path / "s.db", TRUE[:3], TRUE)
    with store:
        window = route_window(store, targets, 0.0, 1e6)
    route, evidence, rec = _priced(window)
    tuning = RouteTuning("r", DRAFT_MODEL, route.estimate, rec, window=window, route_estimate=route, probe=evidence)
    note = segments_note(SimpleNamespace(route="r", tuning=tuning))
    assert "rolling change: γ 3 on 7 engines, γ 8 on 1 engine" in note
    assert note.endswith("Positions 4–8 come from the probe at γ=8 (its conditional rates joined).")


def _per_request_route(tmp_path, capsys, engines_line: str):
    from support import run_cli, vllm_payload
    from specdec.cli import main, tune_gamma_main

    rng = np.random.default_rng(5)
    probs = np.concatenate([[1.0], RISING]) - np.concatenate([RISING, [0.0]])
    lines = []
    for i in range(600):
        steps = [(3, int(a)) for a in rng.choice(4, size=80, p=probs)]
        lines.append(json.dumps({"id": f"cmpl-{i}", "route": "chat", "time": 1_796_000_000 + 6 * i,
                                 "metrics": {"speculative_decoding": vllm_payload(steps, 3)}}))
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(lines) + "\n")
    config = tmp_path / "specdec.toml"
    config.write_text('[deployment]\nmethod = "draft_model"\ndraft_cost = 0.1\ncost_profile = "flat"\n'
                      f'[routes.chat]\nsource = "per-request"\n{engines_line}')
    db = tmp_path / "specdec.db"
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "chat", "--per-request", str(requests),
                                          "--config", str(config), "--db", str(db)])
    assert code == 0, err
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--config", str(config), "--db", str(db),
                                                        "--window", "30d", "--json"])
    assert code == 0, err
    return json.loads(out)


def test_a_per_request_route_probes_once_its_engines_are_configured(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    unnamed = _per_request_route(tmp_path / "a", capsys, "")
    assert unnamed["decision"] == "keep" and unnamed["probe"] is None
    assert "how many engines serve the route at what draft rate is not known" in unnamed["decision_reason"]
    named = _per_request_route(tmp_path / "b", capsys, "engines = 4\n")
    assert named["decision"] == "probe" and named["probe"]["gamma"] == 8 and named["probe"]["engines"] == 1
    assert "on 1 of 4 engine(s)" in named["decision_reason"]


def test_a_route_s_engines_must_be_a_count(tmp_path):
    from specdec.config import ConfigError, load_config

    config = tmp_path / "specdec.toml"
    config.write_text('[routes.chat]\nsource = "per-request"\nengines = 0\n')
    with pytest.raises(ConfigError, match=r"\[routes.chat\]: engines must be an integer ≥ 1"):
        load_config(config)
