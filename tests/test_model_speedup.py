"""model.speedup's public pricing functions, asked for by name, against the recommender's own."""

from __future__ import annotations

import numpy as np
import pytest

from model.deployment import Deployment


def test_mix_speedup_prices_undrafted_steps_as_the_recommender_does():
    """An ngram route where 30% of the tokens came from steps without a match: the what-if
    notebook's mix_speedup, given ν and those steps' times, is the recommender's speedup."""
    from model.recommend import RouteInputs, recommend
    from model.speedup import CostModel, mix_speedup

    dep = Deployment(method="ngram", draft_overhead=0.4, model="llama-3.1-8b", gpu="H100", tensor_parallel_size=1,
                     baseline_tokens_per_second=100.0)
    curve = 0.8 ** np.arange(1, 6)
    rec = recommend(RouteInputs(curve, deployed_gamma=5, undrafted_token_share=0.3), dep)
    gammas = [c.gamma for c in rec.candidates]
    model = CostModel.for_deployment(dep)
    times, undrafted = model.step_times(gammas, [1]), model.step_times(gammas, [1], None, np.ones(len(gammas)))
    al = np.array([c.expected_tokens for c in rec.candidates])
    priced = mix_speedup(al, times, [1], [1.0], "interactivity", undrafted_step_times=undrafted,
                         undrafted_token_share=0.3)
    assert priced == pytest.approx([c.speedup for c in rec.candidates], rel=1e-9)
    every_step_drafted = mix_speedup(al, times, [1], [1.0], "interactivity")
    assert (priced[1:] < every_step_drafted[1:]).all()  # what leaving ν out overstated


@pytest.mark.parametrize("backend", ["latency_specialized", "auto"])
@pytest.mark.parametrize("profile", ["flat", "roofline"])
def test_the_step_time_terms_are_the_step_times_at_every_speedup_and_rate(profile, backend):
    """CostModel.speedup_terms and anchor_terms say how a step's time moves with the specialized
    speedup s and the plain-decode step time x; they are the cost model's own step times (the
    break-even and the measured speedup read them), at any s and x."""
    from dataclasses import replace

    from model.deployment import Deployment
    from model.speedup import CostModel

    dep = Deployment(method="dspark", draft_cost=0.03, cost_profile=profile, model="kimi-k3", gpu="GB300",
                     tensor_parallel_size=8, decode_backend=backend, baseline_tokens_per_second=90.0)
    gammas, sizes = [0, 1, 3, 7], [1, 4, 8, 16, 64]
    for x in (1 / 90.0, 1 / 40.0):
        cost = CostModel.for_deployment(replace(dep, baseline_tokens_per_second=1 / x), clean_share=0.9)
        fixed, scaled = cost.speedup_terms(gammas, sizes)
        c = cost.anchor_terms(gammas, sizes)
        for s in (1.0, 1.5, 3.0):
            times = cost.step_times(gammas, sizes, s)
            assert fixed + scaled / s == pytest.approx(times, rel=1e-12)
            assert c[0] + c[1] * x + (c[2] + c[3] * x) / s == pytest.approx(times, rel=1e-12)
        assert (scaled > 0).any() == (backend == "latency_specialized")


def test_a_measured_tables_specialized_rows_do_not_scale_with_the_speedup(tmp_path):
    from model.deployment import Deployment, ModelInputError
    from model.speedup import CostModel

    table = tmp_path / "t.csv"
    table.write_text("batch_size,tokens_per_request,path,seconds\n"
                     + "".join(f"{b},{q},stock,{0.01 + 0.001 * b + 0.0005 * q:.6f}\n" for b in (1, 8) for q in (1, 4, 8))
                     + "1,4,specialized,0.006\n8,4,specialized,0.009\n", encoding="utf-8")
    cost = CostModel.for_deployment(Deployment(method="dspark", draft_cost=0.03, cost_profile=str(table),
                                               decode_backend="latency_specialized"))
    fixed, scaled = cost.speedup_terms([3, 7], [1, 8])
    for s in (1.0, 2.0):
        assert fixed + scaled / s == pytest.approx(cost.step_times([3, 7], [1, 8], s), rel=1e-12)
    assert scaled[0].tolist() == [0.0, 0.0]  # γ 3 verifies 4 tokens: the measured rows, at every s
    with pytest.raises(ModelInputError, match="no plain-decode rate to vary"):
        cost.anchor_terms([3], [1])


@pytest.mark.parametrize("backend", ["latency_specialized", "auto"])
def test_the_target_time_is_the_step_time_less_the_drafter(backend):
    """CostModel.target_time (the what-if notebook reads it): a step's time without the drafter's
    passes, stock or with its clean share on the fast path."""
    from model.speedup import CostModel

    dep = Deployment(method="dspark", draft_cost=0.03, cost_profile="roofline", model="kimi-k3", gpu="GB300",
                     tensor_parallel_size=8, decode_backend=backend, baseline_tokens_per_second=90.0)
    cost = CostModel.for_deployment(dep, clean_share=0.9)
    for gamma, batch in [(0, 1), (3, 4), (7, 16), (7, 64)]:
        draft = float(cost.drafter.draft_time_factor(np.array([gamma]), 0.03, dep.draft_overhead)[0])
        step = float(cost.step_times([gamma], [batch])[0, 0])
        assert cost.target_time(batch, gamma + 1) + draft * float(cost.profile.stock_pass_s(batch)) == \
            pytest.approx(step, rel=1e-12)
