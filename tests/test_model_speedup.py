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
