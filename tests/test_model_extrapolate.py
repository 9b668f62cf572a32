"""Tail models past the observed γ."""

import numpy as np
import pytest

from acceptance.estimates import conditional_from_survival
from model.deployment import ModelInputError
from model.extrapolate import TAIL_MODELS, extend_survival


def test_shapes_and_observed_part_kept():
    a = np.array([0.8, 0.6, 0.45])
    ext = extend_survival(a, 2)
    assert ext.shape == (len(TAIL_MODELS), 5)
    assert np.allclose(ext[:, :3], a)
    assert np.all(np.diff(ext, axis=-1) <= 1e-12) and np.all(ext >= 0)
    res = extend_survival(np.tile(a, (7, 1)), 1)
    assert res.shape == (len(TAIL_MODELS), 7, 4)
    with pytest.raises(ModelInputError):
        extend_survival(a, 3)


def test_tail_models_disagree_as_they_should():
    front_loaded = np.cumprod([0.8, 0.7, 0.6, 0.5])  # α falls: a front-loaded drafter
    ext = dict(zip(TAIL_MODELS, extend_survival(front_loaded, 2)))
    alpha = {k: conditional_from_survival(v)[4:] for k, v in ext.items()}
    assert alpha["last"] == pytest.approx([0.5, 0.5])
    assert alpha["trend"][0] == pytest.approx(0.4) and alpha["trend"][1] == pytest.approx(0.3)
    assert alpha["mean_last3"] == pytest.approx([0.6, 0.6])
    # The heterogeneous fleet: α rises past the last observed one.
    assert alpha["heterogeneous"][0] > 0.5 and alpha["heterogeneous"][1] > alpha["heterogeneous"][0]


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
