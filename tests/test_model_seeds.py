"""The seeds' flat model, its inversions, drafter kinds and the roofline's plausibility."""

from dataclasses import replace

import numpy as np
import pytest

from model.deployment import Deployment, ModelInputError
from model.profiles import RooflineProfile, make_profile
from model.figures import GPUS, MODELS, Figure
from model.recommend import RouteInputs, recommend
from acceptance.definitions import acceptance_length, acceptance_length_by_gamma
from model.speedup import (
    implied_draft_cost,
    implied_p,
    seeds_table,
)

SEEDS = [  # p, speedup (2 digits), tok/s (1 digit) — seeds/004, docs/MODEL.md
    (0.95, "6.12", "722.1"),
    (0.90, "5.18", "611.0"),
    (0.80, "3.78", "446.4"),
    (0.70, "2.86", "337.0"),
    (0.60, "2.23", "263.7"),
    (0.50, "1.81", "213.7"),
]


def test_seeds_table_to_the_printed_digits():
    rows = seeds_table(7, 0.10, [p for p, _, _ in SEEDS], baseline_tps=118)
    for row, (p, s, tps) in zip(rows, SEEDS):
        assert row.p == p
        assert row.gamma == 7
        assert f"{row.speedup:.2f}" == s
        assert f"{row.tokens_per_second:.1f}" == tps


def test_seeds_table_without_baseline_has_no_tokens_per_second():
    (row,) = seeds_table(7, 0.10, [0.8])
    assert row.tokens_per_second is None
    assert row.expected_tokens_per_step == pytest.approx(sum(0.8**k for k in range(8)))


@pytest.mark.parametrize("tps, p, e", [(370, "0.7347", "3.45"), (464, "0.8129", "4.33")])
def test_implied_p_inverts_the_seeds(tps, p, e):
    got = implied_p(tps / 118, 7, 0.10)
    assert f"{got.p:.4f}" == p
    assert f"{got.expected_tokens_per_step:.2f}" == e
    assert got.gamma == 7
    assert got.draft_cost == 0.10
    # Round trip: the table at that p gives back the speedup.
    (row,) = seeds_table(7, 0.10, [got.p])
    assert row.speedup == pytest.approx(tps / 118, rel=1e-9)


def test_implied_p_refuses_impossible_speedups():
    with pytest.raises(ModelInputError, match="more than γ\\+1"):
        implied_p(9.0, 7, 0.10)


def test_implied_draft_cost_round_trips_the_flat_model():
    survival = np.array([0.8, 0.6, 0.45, 0.3])
    al = 1 + survival.sum()
    got = implied_draft_cost(al / 1.25, survival)  # S = AL / (1 + r) with r = 0.25
    assert got.draft_cost == pytest.approx(0.25)
    seq = implied_draft_cost(al / (1 + 4 * 0.2), survival, method="eagle3")  # 1 + γ·c
    assert seq.draft_cost == pytest.approx(0.2)


def _best_gamma_flat(p, c, method="eagle3", gmax=16):
    rows = {g: seeds_table(g, c, [p], method=method)[0].speedup for g in range(1, gmax + 1)}
    return max(rows, key=rows.get)


def test_sequential_drafter_classic_analysis():
    # Higher draft cost → smaller optimal γ; higher acceptance → larger γ.
    assert _best_gamma_flat(0.8, 0.05) > _best_gamma_flat(0.8, 0.2) > _best_gamma_flat(0.8, 0.5)
    assert _best_gamma_flat(0.6, 0.1) < _best_gamma_flat(0.8, 0.1) < _best_gamma_flat(0.95, 0.1)


def test_sequential_drafter_through_recommend():
    def best(p, c):
        dep = Deployment(method="eagle3", draft_cost=c, cost_profile="flat")
        curve = p ** np.arange(1, 15)
        return recommend(RouteInputs(curve, gamma_max=16), dep).recommended_gamma

    assert best(0.8, 0.05) > best(0.8, 0.3)
    assert best(0.6, 0.1) < best(0.9, 0.1)


def test_parallel_flat_never_falls_with_gamma():
    s = [seeds_table(g, 0.1, [0.7])[0].speedup for g in range(1, 8)]
    assert all(b >= a for a, b in zip(s, s[1:]))


def test_roofline_is_anchored_and_models_increments():
    prof = make_profile(Deployment())
    assert isinstance(prof, RooflineProfile)
    assert float(prof.step_time_s(1, 1)) == pytest.approx(1 / 118)
    t = [float(prof.step_time_s(1, q)) for q in (1, 2, 4, 8)]
    assert all(b > a for a, b in zip(t, t[1:]))
    assert float(prof.step_time_s(16, 1)) > float(prof.step_time_s(1, 1))
    assert float(prof.step_time_s(1, 8, "specialized")) == pytest.approx(t[3] / 1.75)


def test_dense_8b_verification_is_nearly_free_at_batch_1():
    prof = RooflineProfile(MODELS["llama-3.1-8b"], GPUS["H100"], 1, anchor_step_s=1 / 150)
    assert float(prof.step_time_s(1, 8)) / float(prof.step_time_s(1, 1)) < 1.05
    # …but not at a large batch of short contexts, where the step turns compute-bound.
    short = replace(prof, model=replace(prof.model, context_tokens=Figure(512, "test")))
    assert float(short.step_time_s(256, 8)) / float(short.step_time_s(256, 1)) > 1.5


def test_acceptance_length_from_a_survival_curve_and_from_counts_is_one_definition():
    assert acceptance_length_by_gamma([0.8, 0.5, 0.2]).tolist() == pytest.approx([1.0, 1.8, 2.3, 2.5])
    assert acceptance_length_by_gamma([0.8, 0.5, 0.2], 2)[2] == pytest.approx(2.3)
    with pytest.raises(ValueError, match="outside 0..1"):
        acceptance_length_by_gamma([0.8], 3)
    # 10 drafts accepting 8, 5 and 2 tokens through positions 1..3: the same AL from the counts
    assert acceptance_length(8 + 5 + 2, 10) == pytest.approx(2.5)
    assert np.isnan(acceptance_length(0, 0)) and acceptance_length(0, 0, no_drafts=1.0) == 1.0
