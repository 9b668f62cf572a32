"""Tail models past the observed γ."""

import numpy as np
import pytest

from acceptance.definitions import conditional_from_survival
from model.deployment import ModelInputError
from model.extrapolate import TAIL_MODELS, extend_survival


def test_shapes_and_observed_part_kept():
    a = np.array([0.8, 0.6, 0.45])
    ext = extend_survival(a, 2)
    assert ext.shape == (len(TAIL_MODELS), 5)
    assert np.allclose(ext[:, :3], a)
    assert np.all(np.diff(ext, axis=-1) <= 1e-12)
    assert np.all(ext >= 0)
    res = extend_survival(np.tile(a, (7, 1)), 1)
    assert res.shape == (len(TAIL_MODELS), 7, 4)
    assert extend_survival(a, 9).shape == (len(TAIL_MODELS), 12)  # as far as asked
    with pytest.raises(ModelInputError):
        extend_survival(a, -1)


def test_tail_models_disagree_as_they_should():
    front_loaded = np.cumprod([0.8, 0.7, 0.6, 0.5])  # α falls: a front-loaded drafter
    ext = dict(zip(TAIL_MODELS, extend_survival(front_loaded, 2)))
    alpha = {k: conditional_from_survival(v)[4:] for k, v in ext.items()}
    assert alpha["last"] == pytest.approx([0.5, 0.5])
    assert alpha["trend"][0] == pytest.approx(0.4)
    assert alpha["trend"][1] == pytest.approx(0.3)
    assert alpha["mean_last3"] == pytest.approx([0.6, 0.6])
    # The heterogeneous fleet: α rises past the last observed one.
    assert alpha["heterogeneous"][0] > 0.5
    assert alpha["heterogeneous"][1] > alpha["heterogeneous"][0]


def test_heterogeneous_tail_matches_a_beta_mixture():
    m, s = 0.6, 3.0  # a_k = Π_{j<k} (m·s + j) / (s + j)
    a = np.cumprod([(m * s + j) / (s + j) for j in range(8)])
    ext = dict(zip(TAIL_MODELS, extend_survival(a[:6], 2)))
    assert ext["heterogeneous"][6:] == pytest.approx(a[6:], rel=1e-3)


def test_independent_curve_extends_flat():
    a = 0.7 ** np.arange(1, 6)
    for row in extend_survival(a, 2):
        assert row[5:] == pytest.approx([0.7**6, 0.7**7], rel=1e-3)


def test_one_observed_position_extends_as_independent():
    # γ = 1 shows a_1 only: every Beta concentration matches it, so nothing says the fleet is
    # heterogeneous; the tail models agree on α = a_1 (the most heterogeneous fleet would
    # instead make α rise to ~1 and push the recommendation past a γ the data cannot check).
    for a1 in (0.3, 0.8):
        ext = extend_survival(np.array([a1]), 2)
        for row in ext:
            assert row == pytest.approx([a1, a1**2, a1**3], rel=1e-4)


def test_with_the_reach_the_tail_extends_acceptance_among_proposed_tokens():
    """Independent p = 0.8 per proposed token, drafts that reach 1, 2, 3 positions with
    r = 1, 0.8, 0.6: a_k = r_k·p^k. Past γ 3 the drafts that reached 3 go on (r = 0.6), so
    a_4 = 0.6·0.8^4; a's own conditionals (reach and acceptance mixed) would say 0.6·a_3."""
    import numpy as np

    from model.extrapolate import TAIL_MODELS, extend_survival

    p, r = 0.8, np.array([1.0, 0.8, 0.6])
    a = r * p ** np.arange(1, 4)
    with_reach = extend_survival(a, 2, reach=r)
    last = TAIL_MODELS.index("last")
    np.testing.assert_allclose(with_reach[last, :3], a)
    np.testing.assert_allclose(with_reach[last, 3:], 0.6 * p ** np.array([4, 5]))
    mixed = extend_survival(a, 2)
    assert mixed[last, 3] == pytest.approx(a[2] * (a[2] / a[1]))
    # full drafts (r = 1): the same as without reach
    full = np.array([0.8, 0.6, 0.45])
    np.testing.assert_allclose(extend_survival(full, 2, reach=np.ones(3)), extend_survival(full, 2))
