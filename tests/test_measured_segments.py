"""Two γ the engines measured, compared on their own rates (acceptance.observed_rate.segment_rates,
model.measured_segments), and the decision that follows where the cost model misses the
engines (model.decision.rules.between_segments); a probe sized for the rate it must measure
(model.probe.plan.rate_rows)."""

from __future__ import annotations

from statistics import NormalDist
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from acceptance.bootstrap import independent_rows_spread
from acceptance.observed_rate import RateSpread, SegmentRate, segment_rates
from model.decision import Priced
from model.deployment import DECISION_CERTAINTY, Deployment
from model.measured_segments import compare
from model.probe.plan import MAX_RATE_ROWS, PROBE_MIN_ROWS, rate_rows
from model.recommend import RouteInputs, recommend

CURVE = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])


def _segment(gamma, steps, accepted, seconds, *, end, batch=None, engines=1, unit="scrape intervals"):
    n = len(steps)
    counts = np.zeros((n, 3 + gamma))
    counts[:, 0], counts[:, 2] = 100.0, accepted
    return SimpleNamespace(gamma=gamma, block_latency=np.column_stack([seconds, steps]),
                           intervals=SimpleNamespace(counts=counts), engines=[object()] * engines,
                           start=end - 15.0 * n, end=end, batch_samples=batch,
                           total=SimpleNamespace(drafts=100.0 * n), block_unit=unit)


def test_each_gamma_s_rate_is_its_own_segment_s_tokens_over_its_latency_seconds():
    rng = np.random.default_rng(1)
    earlier3 = _segment(3, np.full(8, 100.0), np.full(8, 120.0), np.full(8, 2.0), end=100.0)
    later3 = _segment(3, np.full(8, 100.0), np.full(8, 150.0), np.full(8, 2.0), end=200.0)
    running5 = _segment(5, np.full(8, 100.0), 200.0 + rng.normal(0, 5, 8), np.full(8, 2.5), end=300.0, batch={1: 3.0, 4: 1.0})
    off = _segment(0, np.full(8, 100.0), np.zeros(8), np.full(8, 1.0), end=300.0)
    no_latency = _segment(7, np.full(8, 100.0), np.full(8, 90.0), np.full(8, 2.0), end=300.0)
    no_latency.block_latency = None
    rates = {r.gamma: r for r in segment_rates([earlier3, later3, running5, off, no_latency], [running5],
                                                 level=0.9, n_resamples=400, seed=0)}
    assert set(rates) == {3, 5}  # γ 0 drafts nothing; a segment without latency per block has no rate
    assert rates[3].tokens_per_second == pytest.approx(250.0 / 2.0) and not rates[3].running  # the latest earlier
    assert rates[5].tokens_per_second == pytest.approx((800.0 + running5.intervals.counts[:, 2].sum()) / 20.0)
    assert rates[5].running and rates[5].batch_mix == ((1, 3.0), (4, 1.0)) and rates[3].batch_mix is None
    assert rates[5].spread.rows == 8 and rates[5].spread.unit == "scrape intervals"


def _rate(gamma, value, sd, *, running=True, seed=0, rows=40, mix=((1, 1.0),)):
    """A measured γ's rate: its resamples about 1 ± sd, at batch 1 (the inline route's mix)."""
    factors = 1.0 + sd * np.random.default_rng(seed).standard_normal(2000)
    return SegmentRate(gamma, value, RateSpread(factors, rows, 1, "scrape intervals"), 1, 0.0, 1.0, running, mix)


def test_two_measured_gammas_compare_on_their_own_resamples():
    c = compare(_rate(7, 110.0, 0.01, seed=1), _rate(5, 100.0, 0.01, seed=2), min_gain=0.03, level=0.9)
    assert (c.faster, c.slower) == (7, 5) and c.gain == pytest.approx(0.10)
    assert c.low < 0.10 < c.high and c.probability == 1.0 and c.side_by_side
    # as uncertain as the difference: not sure
    assert compare(_rate(7, 104.0, 0.05, seed=1), _rate(5, 100.0, 0.05, seed=2), min_gain=0.03,
                   level=0.9).probability < DECISION_CERTAINTY


EAGLE = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat", baseline_tokens_per_second=100.0,
                   configured=frozenset({"method", "draft_cost", "cost_profile", "baseline_tokens_per_second"}))


def _window(deployed_rate, other: SegmentRate, *, observed=None):
    deployed = _rate(7, deployed_rate, 0.005, seed=3)
    return RouteInputs(CURVE, observed_tokens_per_second=observed or deployed_rate,
                       observed_rate_spread=deployed.spread, segment_rates=(other, deployed))


def test_where_the_model_misses_the_engines_two_measured_gammas_decide():
    """The fleet's γ 7 runs 120 tok/s per user, 1.2× the plain decode's 100 (the flat model
    misses it by far: its change is withheld) and a segment at γ 3 measured 150: +25% surely,
    so the fleet changes to γ 3, measured; the gain is the measured one."""
    rec = recommend(_window(120.0, _rate(3, 150.0, 0.005, seed=4)), EAGLE)
    assert rec.model_error_warning is not None
    assert rec.decision == "change" and rec.recommended_gamma == 3 and rec.decision_basis == "measured"
    assert rec.gain.value == pytest.approx(0.25) and rec.gain.low < 0.25 < rec.gain.high
    assert rec.vllm_command_line is not None and '"num_speculative_tokens":3' in rec.vllm_command_line
    doc = rec.to_dict()["measured_between"]
    assert doc["faster_gamma"] == 3 and doc["slower_gamma"] == 7 and doc["probability_gain_over_min_gain"] == 1.0
    assert rec.decision_reason.startswith("the engines measure gamma 3 at 150.0 tok/s per user against gamma 7's "
                                          "120.0 (side by side, over 40 and 40 scrape intervals): +25.0% [")
    assert rec.decision_reason.endswith("so the fleet changes to gamma 3 whatever the table projects")
    from dashboard.views.recommendation import decision_text
    from specdec.report import decision_lines

    assert decision_text(rec).startswith("Change γ 7 → 3, measured gain +25.0% [")
    assert decision_lines({**rec.to_dict(), "observed": {}})[0].startswith(
        "recommendation: change gamma 7 -> 3, measured gain +25.0% [")
    # the difference not sure: the withheld answer stands
    unsure = recommend(_window(120.0, _rate(3, 122.0, 0.005, seed=4)), EAGLE)
    assert unsure.gamma_to_deploy == 7 and unsure.to_dict()["measured_between"] is None


def test_a_model_that_meets_the_engines_is_not_overruled_by_one_segment_s_rate():
    """The same two segments where the model prices the deployed γ within its tolerance: its
    own decision stands (it prices every γ on the measured points; one engine's rate against
    the fleet's carries its batch mix, its requests and the engine itself)."""
    model_rate = recommend(RouteInputs(CURVE, observed_tokens_per_second=100.0), EAGLE).candidates[7].tokens_per_second
    rec = recommend(_window(model_rate, _rate(3, model_rate * 1.25, 0.005, seed=4)), EAGLE)
    assert rec.model_error_warning is None and rec.decision_basis == "model"
    assert rec.to_dict()["measured_between"] is None


def test_a_rate_is_compared_at_the_route_s_batch_mix():
    """A segment measured at batch 1 beside a route that decodes at batch 32 (the roofline: a
    per-user step at batch 32 is slower): its rate is carried to the route's mix before it is
    compared, by the model's step times at its own γ."""
    roof = Deployment(method="eagle3", draft_cost=0.1, cost_profile="roofline", model="llama-3.1-8b", gpu="H100",
                      tensor_parallel_size=1, baseline_tokens_per_second=100.0,
                      configured=frozenset({"method", "draft_cost", "cost_profile", "model", "gpu",
                                            "tensor_parallel_size", "baseline_tokens_per_second"}))
    at_batch_1 = SegmentRate(3, 150.0, _rate(3, 150.0, 0.005, seed=4).spread, 1, 0.0, 1.0, True, ((1, 1.0),))
    deployed = SegmentRate(7, 60.0, _rate(7, 60.0, 0.005, seed=3).spread, 1, 0.0, 1.0, True, ((32, 1.0),))
    rec = recommend(RouteInputs(CURVE, observed_tokens_per_second=60.0, batch_mix={32: 1.0},
                                observed_rate_spread=deployed.spread, segment_rates=(at_batch_1, deployed)), roof)
    assert rec.model_error_warning is not None
    doc = rec.to_dict()["measured_between"]
    assert doc is not None and doc["faster_gamma"] == 3
    # the roofline's step at batch 32 is about twice its batch-1 step: 150 tok/s there is about 75 here
    assert 60.0 * 1.1 < doc["faster_tokens_per_second"] < 150.0 * 0.6
    assert doc["slower_tokens_per_second"] == pytest.approx(60.0)
    assert doc["measured_tokens_per_second"] == pytest.approx([150.0, 60.0]) and doc["mix_factors"][0] < 0.6
    carried = f"{doc['faster_tokens_per_second']:,.1f} at the route's batch mix, by the model's step times"
    assert f"the engines measure gamma 3 at 150.0 ({carried}) tok/s per user against gamma 7's 60.0 (" \
        in rec.decision_reason
    # a segment at the route's own mix of several batch sizes is carried by 1 (the same mean ITL):
    # its engine time shares, which the route's request weights come from (as a window's do)
    from model.speedup import batch_mix_from_time_shares

    shares = {1: 0.5, 8: 0.3, 64: 0.2}
    at_route = SegmentRate(7, 60.0, deployed.spread, 1, 0.0, 1.0, True, tuple(shares.items()))
    again = recommend(RouteInputs(CURVE, observed_tokens_per_second=60.0,
                                  batch_mix=batch_mix_from_time_shares(shares, roof, 7),
                                  observed_rate_spread=deployed.spread, segment_rates=(at_batch_1, at_route)), roof)
    assert again.to_dict()["measured_between"]["mix_factors"][1] == pytest.approx(1.0, abs=1e-9)
    # on a default figure (the drafter's cost) the carry is the defaults' model: no measured change
    defaulted = replace(roof, configured=roof.configured - {"draft_cost"})
    on_defaults = recommend(RouteInputs(CURVE, observed_tokens_per_second=60.0, batch_mix={32: 1.0},
                                        observed_rate_spread=deployed.spread,
                                        segment_rates=(at_batch_1, deployed)), defaulted)
    assert on_defaults.to_dict()["measured_between"] is None and on_defaults.decision_basis == "model"
    assert "draft_cost" in [f["key"] for f in on_defaults.to_dict()["figures_needed"]]


def test_the_deployed_gamma_measured_surely_faster_keeps_it_against_the_model_s_move():
    """The model (missing the engines) would move the fleet to γ 3, which a segment measured
    surely slower than the deployed γ 7: keep, measured, whatever the table projects."""
    from model.decision.outcome import start
    from model.decision.rules import between_segments

    means = np.array([1.0, 1.1, 1.2, 1.5, 1.3, 1.2, 1.1, 1.0])
    p = Priced(EAGLE, 7, 7, means, np.ones(8, bool), [None] * 8, None, model_error_warning="misses",
               segment_rates=(_rate(3, 100.0, 0.005, seed=4), _rate(7, 120.0, 0.005, seed=3)))
    d = between_segments(p, start(7, 3).to("change", "the table's gain", fleet_gamma=3))
    assert (d.kind, d.fleet_gamma, d.recommended_gamma) == ("keep", 7, 7) and d.measured_between is not None
    assert d.reasons == (d.reason,) and d.reason.endswith("so the fleet keeps gamma 7 whatever the table projects")
    # a model that meets the engines is left as it is
    same = between_segments(replace(p, model_error_warning=None), start(7, 3).to("change", "x", fleet_gamma=3))
    assert same.kind == "change" and same.fleet_gamma == 3


def test_a_probe_where_the_model_misses_runs_the_rows_its_rate_needs():
    """rate_rows: the fewest rows n where 2z·se·w(n) ≤ gain − min_gain, se² = cv²(1/n + 1/n)
    for one probed engine beside one other; a gain within min_gain is priced out."""
    z, level = NormalDist().inv_cdf(DECISION_CERTAINTY), DECISION_CERTAINTY
    wide = independent_rows_spread(MAX_RATE_ROWS, level)

    def settles(n, cv=0.05, gain=0.06, m=0.03):
        return 2 * z * cv * np.sqrt(2.0 / n) * independent_rows_spread(n, level) / wide <= gain - m

    n = rate_rows(0.05, gain=0.06, min_gain=0.03, probed=1, others=1, window_rows=240)
    assert settles(n) and not settles(n - 1) and n > PROBE_MIN_ROWS
    assert rate_rows(0.05, gain=0.03, min_gain=0.03, probed=1, others=1, window_rows=240) == MAX_RATE_ROWS
    assert rate_rows(0.001, gain=0.5, min_gain=0.03, probed=1, others=1, window_rows=240) == PROBE_MIN_ROWS
    # more engines beside the probe: fewer rows
    assert rate_rows(0.05, gain=0.06, min_gain=0.03, probed=1, others=9, window_rows=240) < n


def test_a_running_probe_whose_rate_is_not_yet_sure_is_carried_on_for_the_rows_it_needs():
    """The model misses the engines and would move the fleet to the probe's γ 9 (withheld); the
    probe's rate runs +4% over the fleet's γ 7, not yet surely above min_gain 3% over its 20
    rows: carried on for the rows its rate needs at that gain (rate_rows), the fleet at γ 7. A
    probe measured below min_gain is not carried on: the withheld answer stands."""
    from model.decision.outcome import start
    from model.decision.rules import between_segments, withheld
    from model.probe import ProbeInputs, RunningProbe

    means = np.array([1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.85, 1.9])
    ens = means[None, :] * (1.0 + 0.02 * np.random.default_rng(5).standard_normal((500, 10)))
    inputs = ProbeInputs(ens, means, np.ones(10, bool), 1.0 + 0.5 * np.arange(10), 1.0 + 0.05 * np.arange(10),
                         np.full(500, 4.0), 7, rate_row_cv=0.05)
    running = RunningProbe(gamma=9, drafts=30_000.0, drafts_per_engine_second=100.0, engines=1, rows=20,
                           row_seconds=15.0)
    traffic = SimpleNamespace(drafts=400_000.0, drafts_per_engine_second=100.0, engines=3, rows=240, row_seconds=15.0)

    def priced(probe_rate):
        return Priced(EAGLE, 7, 7, means, np.ones(10, bool), [None] * 10, ens, model_error_warning="misses",
                      joined_probe=running, probe_inputs=inputs, traffic=traffic,
                      segment_rates=(_rate(7, 100.0, 0.002, seed=3, rows=240),
                                     _rate(9, probe_rate, 0.02, seed=4, rows=20)))

    would = start(7, 9).to("change", "the table's gain", fleet_gamma=9)
    d = between_segments(priced(104.0), withheld(7, would, (), "misses. On this model the tool would run gamma 9"))
    n = rate_rows(0.05, gain=0.04, min_gain=0.03, probed=1, others=3, window_rows=240)
    assert (d.kind, d.fleet_gamma, d.probe.gamma, d.best_gamma) == ("probe", 7, 9, 9) and d.withheld is None
    assert d.probe.drafts_needed == pytest.approx((n - 20) * 15.0 * 100.0, rel=1e-6)
    assert f"carry on the probe at gamma 9 for about {n - 20:,} more scrape intervals" in d.reason
    assert "P(gain > 3%) = " in d.reason and "< 0.9: carry on" in d.reason
    # measured surely faster (+10%, tight): the fleet changes to the probe's γ and the probe stops, said
    sure = replace(priced(110.0), segment_rates=(_rate(7, 100.0, 0.002, seed=3, rows=240),
                                                 _rate(9, 110.0, 0.002, seed=4, rows=200)))
    changed = between_segments(sure, withheld(7, would, (), "misses"))
    assert (changed.kind, changed.fleet_gamma, changed.probe) == ("change", 9, None)
    assert changed.reasons[-1] == "stop the probe at gamma 9: the fleet now runs it"
    low = between_segments(priced(102.0), withheld(7, would, (), "misses"))
    assert low.kind == "undecided" and low.probe is None
    # +3.05%: no run short of a week settles it so near min_gain, and none pays: the answer stands
    near = between_segments(priced(103.05), withheld(7, would, (), "misses"))
    assert near.kind == "undecided" and near.probe is None



def test_a_probe_that_goes_on_beside_a_measured_change_says_its_terms():
    """A measured change to γ 3 beside a probe of γ 12 planned past it: the probe goes on, and
    the reason says where, for how many drafts and how long (it said only that it went on)."""
    from model.decision import Decision
    from model.decision.rules import between_segments
    from model.probe import Probe

    probe = Probe(12, 1, 4_000, 95.0, 10.0, 900.0, None)
    decision = Decision("probe", fleet_gamma=7, best_gamma=12, probe=probe)
    priced = SimpleNamespace(segment_rates=(_rate(3, 150.0, 0.005, seed=4), _rate(7, 120.0, 0.005, seed=3)),
                             deployed=7, allowed=np.ones(17, dtype=bool), deployment=EAGLE, level=0.9,
                             model_error_warning="the cost model misses", figures_needed=(), running_probe=None)
    changed = between_segments(priced, decision)
    assert (changed.kind, changed.fleet_gamma, changed.best_gamma, changed.probe) == ("probe", 3, 12, probe)
    assert changed.reasons[1] == "the probe of gamma 12 goes on meanwhile: on 1 engine(s) for 4,000 drafts (about 95s)"


def test_a_gain_resting_on_an_ended_trial_is_measured_longer_not_by_more_drafts_at_the_deployed_gamma():
    """A trial of γ 8 ran and ended (then back to γ 3): positions 4..8 are its drafts alone. A
    plausible, unsure gain of γ 6 said "a window with about N× the drafts would settle it",
    which drafts at γ 3 cannot: it says the trial measured them, and offers no such factor."""
    from model.decision import Decision
    from model.decision.rules import verdict
    from model.probe import RunningProbe

    rng = np.random.default_rng(0)
    ens = np.ones((4000, 9))
    ens[:, 6] = 1.06 + 0.04 * rng.standard_normal(4000)  # +6% ± 4%: P(gain > 3%) ≈ 0.77
    trial = RunningProbe(8, 600.0, None, 1, running=False)
    priced = SimpleNamespace(speedup=ens.mean(axis=0), ensemble=ens, observed=8, deployed=3,
                             allowed=np.ones(9, dtype=bool), refusals=[None] * 9, model_error=None, tail_only=None,
                             deployment=EAGLE, ended_trial=trial)
    decided = verdict(priced, Decision("keep", fleet_gamma=3, best_gamma=6))
    assert decided.plausible and decided.settle is None and decided.kind == "keep"
    assert ("it rests on positions 4..6 that the trial of γ=8 measured over 600 drafts, which ended: more drafts at "
            "γ=3 do not add to them; measuring γ=6 longer (a probe) would settle") in decided.reason
    assert "the drafts (intervals shrinking" not in decided.reason
    # with the trial still running, the window's drafts (its own among them) are the factor
    running = verdict(SimpleNamespace(**{**vars(priced), "ended_trial": None}), Decision("keep", 3, 6))
    assert running.settle is not None and "the drafts (intervals shrinking" in running.reason
