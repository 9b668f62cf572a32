"""The decision rules on hand-made ensembles: each rule's effect on the one Decision object,
the order they run in, and the JSON's γ read from the fleet's and the best expected γ."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np

from model.decision import RULES, UNDECIDED, Priced, decide
from model.decision.outcome import start
from model.decision.rules import given_figures, sure_step, verdict
from model.deployment import Deployment
from model.figures_needed import FigureNeeded

RNG = np.random.default_rng(7)


def ensemble(means: list[float], sd: float, n: int = 2000) -> np.ndarray:
    """(n, G) speedups around ``means``; every candidate shares one noise draw plus its own."""
    common = RNG.normal(0.0, sd, size=(n, 1))
    own = RNG.normal(0.0, sd, size=(n, len(means)))
    return np.asarray(means)[None, :] * (1.0 + common + own)


def priced(means: list[float], sd: float, *, deployed: int = 1, observed: int = 3, **kw) -> Priced:
    speedup = np.asarray(means)
    return Priced(Deployment(cost_profile="flat"), deployed, observed, speedup, np.ones(len(means), bool),
                  [None] * len(means), ensemble(means, sd), **kw)


def test_the_rules_run_in_the_documented_order():
    assert [r.__name__ for r in RULES] == ["verdict", "sure_step", "probe", "unmeasured", "specialized", "given_figures",
                                           "measured", "between_segments"]


def test_a_sure_gain_changes_the_fleet_and_the_json_names_one_gamma():
    d = decide(priced([1.0, 1.2, 1.5, 1.4], 0.01))
    assert (d.kind, d.fleet_gamma, d.best_gamma) == ("change", 2, 2)
    assert d.recommended_gamma == 2 and d.expected_best_gamma is None
    assert len(d.reasons) == 1 and d.reason == "P(γ=2 gains > 3% over γ=1) = 1.00 ≥ 0.9"  # min_gain 3%


def test_an_unsure_best_gamma_takes_the_sure_step_and_keeps_naming_the_best():
    # γ=3 is best expected but noisy; γ=2 gains surely
    ens = np.column_stack([np.ones(4000), np.full(4000, 1.2), np.full(4000, 1.4),
                           1.45 + RNG.normal(0.0, 0.2, 4000)])
    p = Priced(Deployment(cost_profile="flat"), 1, 3, np.array([1.0, 1.2, 1.4, 1.45]), np.ones(4, bool),
               [None] * 4, ens)
    after_verdict = verdict(p, start(1, 3))
    assert after_verdict.kind == "keep" and after_verdict.plausible and after_verdict.settle is not None
    d = sure_step(p, after_verdict)
    assert (d.kind, d.fleet_gamma, d.best_gamma) == ("change", 2, 3)
    assert d.recommended_gamma == 2 and d.expected_best_gamma == 3
    assert len(d.reasons) == 2 and d.reasons[1].startswith("the best γ whose gain is sure now: P(γ=2")


def test_a_keep_names_the_better_gamma_it_does_not_run():
    d = decide(priced([1.0, 1.2, 1.21, 1.0], 0.05))
    assert d.kind == "keep" and d.fleet_gamma == 1
    assert d.recommended_gamma == d.best_gamma == 2 and d.expected_best_gamma is None


def test_a_change_on_default_figures_is_withheld_and_keeps_what_it_would_have_done():
    needed = (FigureNeeded("draft_cost", 0.05, "the drafter's time"),)
    d = decide(priced([1.0, 1.2, 1.5, 1.4], 0.01, figures_needed=needed))
    assert d.kind == UNDECIDED and d.fleet_gamma == 1 and d.probe is None
    assert d.recommended_gamma == 1 and d.expected_best_gamma == 2
    assert d.withheld is not None and d.withheld.kind == "change" and d.withheld.fleet_gamma == 2
    assert d.reasons == (d.reason,) and "rests on default figures (draft_cost)" in d.reason
    kept = given_figures(priced([1.0, 1.2], 0.01, figures_needed=needed), start(1, 1).because("already best"))
    assert kept.kind == "keep" and kept.reasons[-1] == "priced on default figures (draft_cost), which could change it"


def test_a_cost_model_that_misses_the_engine_withholds_even_on_given_figures():
    d = decide(priced([1.0, 1.2, 1.5, 1.4], 0.01, model_error_warning="the cost model misses by +40%"))
    assert d.kind == UNDECIDED and d.reason.startswith("the cost model misses by +40%. On this model the tool would "
                                                       "run gamma 2")


def test_a_cost_model_that_misses_the_engine_still_probes_part_of_the_route():
    """A model that misses the engines cannot be trusted past the measured γ, so a change there
    is withheld; a probe on part of the route is how it is measured instead, and goes ahead.
    A trial of the whole route (one engine) is a change of the route and stays withheld."""
    from model.probe import Probe

    part = Probe(gamma=4, engines=1, drafts_needed=20_000, duration_s=600.0, expected_cost=50.0,
                 expected_value=900.0, speculative_config=None)
    probing = start(3, 4).to("probe", "probe γ=4 on 1 of 8 engine(s)", best_gamma=4, probe=part)
    p = priced([1.0, 1.2, 1.25, 1.3, 1.5], 0.05, deployed=3, model_error_warning="the cost model misses by +32%",
               model_error=0.32)
    d = given_figures(p, probing)
    assert d.kind == "probe" and d.probe is part and d.fleet_gamma == 3
    assert d.reasons[-1] == ("the cost model misses the engines at the deployed gamma beyond its tolerance (the "
                             "warning): a probe of gamma 4 on part of the route measures it where a change would "
                             "trust the model (the intervals carry its +32.0% at the deployed gamma)")
    whole = start(3, 4).to("probe", "probe γ=4 on its only engine", best_gamma=4,
                           probe=replace(part, whole_route=True, loss_probability=0.05))
    withheld = given_figures(p, whole)
    assert withheld.kind == UNDECIDED and withheld.reason.startswith("the cost model misses by +32%. On this model "
                                                                     "the tool would probe gamma 4 on 1 engine(s)")
    # the others taking a sure step meanwhile would move them on the model's word: withheld whole
    assert given_figures(p, replace(probing, fleet_gamma=2)).kind == UNDECIDED
    # on a default figure the probe is a what-if as before
    needed = (FigureNeeded("draft_cost", 0.05, "the drafter's time"),)
    assert given_figures(replace(p, figures_needed=needed), probing).kind == UNDECIDED


def test_a_plausible_gain_past_the_observed_gamma_is_probed_when_it_pays():
    # γ=4 is past the observed γ=3 and only the tail models' doubt remains: more drafts cannot settle it
    means = [1.0, 1.2, 1.25, 1.3, 1.5]
    ens = ensemble(means, 0.08)
    tail = ens.copy()
    traffic = SimpleNamespace(drafts=50_000.0, drafts_per_engine_second=100.0, engines=8, rows=240,
                              row_seconds=15.0)
    from model.probe import ProbeInputs

    inputs = ProbeInputs(ens, np.asarray(means), np.ones(5, bool), np.array([1.0, 1.8, 2.4, 2.9, 3.3]),
                         np.array([1.0, 1.05, 1.1, 1.15, 1.2]), 2.9 + RNG.normal(0, 0.01, 500), 3)
    p = Priced(Deployment(cost_profile="flat"), 3, 3, np.asarray(means), np.ones(5, bool), [None] * 5, ens,
               tail_only=lambda: tail, traffic=traffic, probe_inputs=inputs)
    d = decide(p)
    assert d.kind == "probe" and d.probe is not None and d.probe.gamma == 4
    assert d.fleet_gamma == 3 and d.best_gamma == 4 and d.expected_best_gamma == 4
    assert d.reasons[0].startswith("P(γ=4 gains") and d.reasons[-1].startswith("probe γ=4 on 1 of 8 engine(s)")


def _probe_inputs(ens, means, observed):
    from model.probe import ProbeInputs

    g = len(means)
    return ProbeInputs(ens, np.asarray(means), np.ones(g, bool), 1.0 + 0.6 * np.arange(g),
                       1.0 + 0.05 * np.arange(g), 1.0 + 0.6 * observed + RNG.normal(0, 0.01, 500), observed)


TRAFFIC = SimpleNamespace(drafts=50_000.0, drafts_per_engine_second=100.0, engines=8, rows=240, row_seconds=15.0)


def test_a_sure_change_past_every_measured_gamma_is_a_probe_never_a_change():
    """The table is sure of γ 4 from a window at γ 2 (a cost shape and a tail extrapolated):
    no point bears on γ 4, so it is probed on one engine; before, the fleet changed to it."""
    means = [1.0, 1.2, 1.3, 1.45, 1.6]
    ens = ensemble(means, 0.01)
    p = Priced(Deployment(cost_profile="flat"), 2, 2, np.asarray(means), np.ones(5, bool), [None] * 5, ens,
               traffic=TRAFFIC, probe_inputs=_probe_inputs(ens, means, 2))
    assert verdict(p, start(2, 4)).kind == "change"  # what the table alone decides
    d = decide(p)
    assert d.kind == "probe" and d.probe is not None and d.probe.gamma == 4 and d.best_gamma == 4
    assert d.fleet_gamma == 2  # no sure step within the measured γ: the fleet keeps γ 2 meanwhile
    assert any(r.startswith("gamma 4 lies past gamma 2, the largest measured")
               for r in d.reasons)


def test_without_a_probe_the_fleet_takes_the_sure_step_among_the_measured_gamma():
    means = [1.0, 1.2, 1.3, 1.45, 1.6]
    ens = ensemble(means, 0.01)
    d = decide(Priced(Deployment(cost_profile="flat"), 1, 1, np.asarray(means), np.ones(5, bool), [None] * 5, ens,
                      measured_upto=2))
    assert (d.kind, d.fleet_gamma, d.best_gamma) == ("change", 2, 4)
    assert "how many engines serve the route at what draft rate is not known" in d.reasons[-1] and d.reasons[-1].endswith("gamma 2")
    # nothing sure within the measured γ: keep, naming the γ it would probe
    d = decide(Priced(Deployment(cost_profile="flat"), 1, 1, np.asarray(means), np.ones(5, bool), [None] * 5, ens))
    assert (d.kind, d.fleet_gamma, d.recommended_gamma) == ("keep", 1, 4)
    # whatever the profile's shape: no point bears on γ 4, so it is not a change
    assert "past gamma 1, the largest measured" in d.reasons[-2]


def test_a_segment_that_measured_a_larger_gamma_lets_the_change_stand():
    means = [1.0, 1.2, 1.3, 1.45, 1.6]
    d = decide(Priced(Deployment(cost_profile="flat"), 2, 2, np.asarray(means), np.ones(5, bool), [None] * 5,
                      ensemble(means, 0.01), measured_upto=4))
    assert (d.kind, d.fleet_gamma) == ("change", 4)


def _one_trial(engines: int) -> Priced:
    """γ 3 past the observed γ 2, +11% expected but wide (the tail models' doubt): P(it loses
    more than 3% against γ 2) ≈ 0.2 — more drafts cannot settle it, a probe can."""
    means = [1.0, 1.2, 1.3, 1.45]
    ens = ensemble(means, 0.01)
    ens[:, 3] = 1.45 * (1.0 + RNG.normal(0.0, 0.13, ens.shape[0]))
    traffic = SimpleNamespace(drafts=50_000.0, drafts_per_engine_second=100.0, engines=engines, rows=240,
                              row_seconds=15.0)
    return Priced(Deployment(cost_profile="flat"), 2, 2, np.asarray(means), np.ones(4, bool), [None] * 4, ens,
                  tail_only=lambda: ens, traffic=traffic, probe_inputs=_probe_inputs(ens, means, 2))


def test_a_whole_route_trial_is_refused_where_a_change_would_be():
    """On one engine of two the probe of γ 3 runs (its loss is half the route's for its
    duration); on a one-engine route it is a change of the route for its duration, and
    P(γ 3 loses > 3% against γ 2) above 0.1 refuses it, as it would a change (before: probed)."""
    two = decide(_one_trial(2))
    assert two.kind == "probe" and two.probe is not None and two.probe.gamma == 3 and not two.probe.whole_route
    one = decide(_one_trial(1))
    assert (one.kind, one.fleet_gamma, one.best_gamma, one.probe) == ("keep", 2, 3, None)
    p_loss = float(np.mean(one_ens := _one_trial(1).ensemble[:, 3] / _one_trial(1).ensemble[:, 2] - 1 < -0.03))
    assert 0.1 < two.probe.loss_probability < 0.35 and 0.1 < p_loss < 0.35
    assert one.reasons[-1].startswith("no probe γ=3 on 1 of 1 engine(s)")
    assert "it would be a trial of the whole route, a change of it for its duration, and P(γ=3 loses > 3% against " \
           "γ=2) = " in one.reasons[-1] and one.reasons[-1].endswith("> 0.1, which no change may risk")
    assert one_ens.shape == (2000,)


def test_a_probe_steps_to_the_nearest_gamma_whose_trial_is_safe():
    """γ 4 is best expected and its trial of the whole route unsafe; γ 3 is safe and pays: the
    one-engine route probes γ 3, naming γ 4 (before: γ 4)."""
    means = [1.0, 1.2, 1.3, 1.4, 1.6]
    ens = ensemble(means, 0.01)
    ens[:, 3] = 1.4 * (1.0 + RNG.normal(0.0, 0.06, ens.shape[0]))  # plausible, not sure: no sure step
    ens[:, 4] = 1.6 * (1.0 + RNG.normal(0.0, 0.2, ens.shape[0]))
    traffic = SimpleNamespace(drafts=50_000.0, drafts_per_engine_second=100.0, engines=1, rows=240, row_seconds=15.0)
    d = decide(Priced(Deployment(cost_profile="flat"), 2, 2, np.asarray(means), np.ones(5, bool), [None] * 5, ens,
                      tail_only=lambda: ens, traffic=traffic, probe_inputs=_probe_inputs(ens, means, 2)))
    assert d.kind == "probe" and d.probe is not None and (d.probe.gamma, d.best_gamma, d.fleet_gamma) == (3, 4, 2)
    assert d.probe.whole_route and d.probe.loss_probability is not None and d.probe.loss_probability <= 0.1
    assert "γ=3 rather than γ=4: a trial of the whole route at γ=4 would be a change of it" in d.reasons[-1]


def test_the_decision_words_are_the_decision_kinds():
    """The JSON's decision words (specdec.json_documents, the schema's source) and the
    exporter's are DecisionKind's members, none more, none fewer."""
    from typing import get_args

    from model.decision_kind import DecisionKind
    from specdec.exporter import DECISIONS
    from specdec.json_documents import DecisionKind as Words

    assert set(get_args(Words)) == set(DecisionKind) == set(DECISIONS) and len(DECISIONS) == len(DecisionKind)
