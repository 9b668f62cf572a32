"""The specialized decode path: which steps take it, what it is allowed to run."""

import math

import numpy as np
import pytest

from model.deployment import Deployment, ModelInputError
from model.recommend import recommend
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
    rec = recommend(np.append(CURVE7, 0.3), SPEC, deployed_gamma=7)
    c8 = rec.candidates[8]
    assert not c8.allowed
    assert "γ ≤ 7" in c8.reason
    assert rec.candidates[7].allowed
    assert rec.recommended_gamma <= 7


def test_other_methods_refused_on_the_specialized_path():
    dep = Deployment(method="eagle3", decode_backend="latency_specialized", draft_cost=0.05)
    rec = recommend(CURVE7[:3], dep)
    assert rec.candidates[0].allowed
    assert all(not c.allowed and "only dspark" in c.reason for c in rec.candidates[1:])
    assert rec.recommended_gamma == 0


def test_big_batches_push_the_route_to_a_smaller_gamma():
    small = recommend(CURVE7, SPEC, batch_mix={8: 1.0})
    big = recommend(CURVE7, SPEC, batch_mix={12: 1.0})  # 12·8 = 96 > 64 at γ = 7; 12·4 = 48 fits at γ = 3
    assert small.recommended_gamma == 7
    assert big.recommended_gamma < 7
    assert 12 * (big.recommended_gamma + 1) <= 64
    # The same batch mix without the specialized path keeps γ = 7.
    assert recommend(CURVE7, Deployment(), batch_mix={12: 1.0}).recommended_gamma == 7


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
    low = recommend(CURVE7, SPEC, eligibility=Eligibility(0.0, "given"), batch_mix={4: 1.0})
    high = recommend(CURVE7, SPEC, eligibility=1.0, batch_mix={4: 1.0})
    assert high.specialized_eligibility.share == 1.0
    assert low.specialized_eligibility.share == 0.0
    # Without clean steps the specialized backend behaves like the stock one.
    stock = recommend(CURVE7, Deployment(), batch_mix={4: 1.0})
    assert [c.speedup for c in low.candidates] == pytest.approx([c.speedup for c in stock.candidates])
