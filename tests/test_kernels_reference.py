"""The NumPy and torch references of the per-row acceptance against a naive computation."""

import math

import numpy as np
import pytest

from kernels.acceptance import acceptance_per_row, select_backend
from kernels.logits_io import bf16_bits_to_float32, float32_to_bf16_bits
from kernels.reference import acceptance_numpy
from kernels.rows import LogitsError


def _torch():
    try:
        import torch as t
    except ImportError:
        return None
    return t


def naive_row(target_row, draft_row, temperature):
    """Textbook softmax in Python floats, fsum, first-maximum argmax."""

    def softmax(row):
        top = max(x for x in row if x != -math.inf)
        e = [0.0 if x == -math.inf else math.exp((x - top) / temperature) for x in row]
        total = math.fsum(e)
        return [x / total for x in e]

    def first_argmax(row):
        best = 0
        for i, x in enumerate(row):
            if x > row[best]:
                best = i
        return best

    t, d = [float(x) for x in target_row], [float(x) for x in draft_row]
    p, q = softmax(t), softmax(d)
    return math.fsum(min(a, b) for a, b in zip(p, q)), first_argmax(t) == first_argmax(d)


def bf16_round(x):
    return bf16_bits_to_float32(float32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def random_pair(rng, n, v, spread=3.0, noise=1.0):
    target = rng.normal(scale=spread, size=(n, v)).astype(np.float32)
    draft = (target + rng.normal(scale=noise, size=(n, v))).astype(np.float32)
    return target, draft


BACKENDS = ["numpy", "torch"]


def run(backend, target, draft, temperature, **kw):
    if backend == "torch" and _torch() is None:
        pytest.skip("torch not installed")
    return acceptance_per_row(target, draft, temperature, backend=backend, **kw)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("temperature", [0.3, 0.7, 1.0, 2.0])
@pytest.mark.parametrize("bf16", [False, True])
def test_reference_matches_naive(backend, temperature, bf16):
    rng = np.random.default_rng(int(temperature * 10) + bf16)
    target, draft = random_pair(rng, 6, 257)
    if bf16:
        target, draft = bf16_round(target), bf16_round(draft)
    rows = run(backend, target, draft, temperature)
    for n in range(target.shape[0]):
        expected, greedy = naive_row(target[n], draft[n], temperature)
        assert rows.expected[n] == pytest.approx(expected, abs=1e-12)
        assert bool(rows.greedy[n]) == greedy
    assert rows.backend == backend
    assert np.all((rows.expected > 0) & (rows.expected <= 1 + 1e-12))


def test_torch_bfloat16_tensors_match_numpy():
    t = _torch()
    if t is None:
        pytest.skip("torch not installed")
    rng = np.random.default_rng(3)
    target, draft = random_pair(rng, 5, 300)
    target_bf, draft_bf = t.from_numpy(target).to(t.bfloat16), t.from_numpy(draft).to(t.bfloat16)
    rows_torch = acceptance_per_row(target_bf, draft_bf, 0.8, backend="torch")
    # the same bf16 values, rounded by our own bit helper, through NumPy
    rows_np = acceptance_numpy(bf16_round(target), bf16_round(draft), 0.8)
    np.testing.assert_allclose(rows_torch.expected, rows_np.expected, atol=1e-12)
    np.testing.assert_array_equal(rows_torch.target_argmax, rows_np.target_argmax)


@pytest.mark.parametrize("backend", BACKENDS)
def test_identical_rows_accept_fully_and_disjoint_support_never(backend):
    rng = np.random.default_rng(1)
    target, _ = random_pair(rng, 3, 64)
    same = run(backend, target, target.copy(), 1.3)
    np.testing.assert_allclose(same.expected, 1.0, atol=1e-12)
    assert same.greedy.all()
    # disjoint supports through −inf masking: p and q share no token
    a = np.full((1, 8), -np.inf, dtype=np.float32)
    b = a.copy()
    a[0, :4] = [1.0, 2.0, 3.0, 4.0]
    b[0, 4:] = [1.0, 2.0, 3.0, 4.0]
    rows = run(backend, a, b, 1.0)
    assert rows.expected[0] == pytest.approx(0.0, abs=1e-15)
    assert not rows.greedy[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_extreme_and_masked_logits(backend):
    big = np.float32(3.0e38)
    target = np.array([[big, -big, 0.0, -np.inf], [-1e30, -1e30, -1e30, -np.inf]], dtype=np.float32)
    draft = np.array([[0.0, big, -np.inf, 5.0], [-1e30, -1e30 + 1e24, -np.inf, -np.inf]], dtype=np.float32)
    rows = run(backend, target, draft, 0.5)
    for n in range(2):
        expected, greedy = naive_row(target[n], draft[n], 0.5)
        assert rows.expected[n] == pytest.approx(expected, abs=1e-12)
        assert bool(rows.greedy[n]) == greedy
    assert np.all(np.isfinite(rows.expected))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ties_break_to_lowest_index(backend):
    target = np.array([[1.0, 5.0, 5.0, 0.0]], dtype=np.float32)
    draft_first = np.array([[5.0, 5.0, 1.0, 5.0]], dtype=np.float32)  # argmax 0 (three ties)
    draft_second = np.array([[0.0, 7.0, 7.0, 7.0]], dtype=np.float32)  # argmax 1
    assert run(backend, target, draft_first, 1.0).target_argmax[0] == 1
    assert not run(backend, target, draft_first, 1.0).greedy[0]
    assert run(backend, target, draft_second, 1.0).greedy[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "target_row, draft_row, fragment",
    [
        ([0.0, np.nan, 1.0], [0.0, 1.0, 2.0], "target logits: row 1 has a NaN or +inf"),
        ([0.0, 1.0, 1.0], [0.0, np.inf, 2.0], "draft logits: row 1 has a NaN or +inf"),
        ([-np.inf] * 3, [0.0, 1.0, 2.0], "target logits: row 1 is all -inf"),
    ],
)
def test_bad_rows_are_one_line_errors(backend, target_row, draft_row, fragment):
    target = np.array([[0.0, 1.0, 2.0], target_row], dtype=np.float32)
    draft = np.array([[0.0, 1.0, 2.0], draft_row], dtype=np.float32)
    with pytest.raises(LogitsError) as info:
        run(backend, target, draft, 1.0)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan"), float("inf"), "hot"])
def test_bad_temperature(backend, temperature):
    x = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(LogitsError, match="temperature"):
        run(backend, x, x, temperature)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_mismatch_and_empty(backend):
    with pytest.raises(LogitsError, match=r"target logits shape \(2, 3\) does not match draft logits shape \(2, 4\)"):
        run(backend, np.zeros((2, 3)), np.zeros((2, 4)), 1.0)
    with pytest.raises(LogitsError, match="empty"):
        run(backend, np.zeros((0, 3)), np.zeros((0, 3)), 1.0)
    with pytest.raises(LogitsError, match="2-D"):
        run(backend, np.zeros(3), np.zeros(3), 1.0)


def test_auto_backend_on_this_machine():
    chosen = select_backend("auto")
    assert chosen in ("cute", "torch", "numpy")
    if _torch() is None:
        assert chosen == "numpy"
    with pytest.raises(LogitsError, match="unknown backend"):
        select_backend("triton")


def test_bf16_bits_round_trip():
    x = np.array([1.0, -2.5, 3.140625, 1e-3, np.inf, -np.inf], dtype=np.float32)
    back = bf16_bits_to_float32(float32_to_bf16_bits(x))
    np.testing.assert_array_equal(back[[0, 1, 2, 4, 5]], x[[0, 1, 2, 4, 5]])  # exact in bf16
    assert abs(back[3] - 1e-3) <= 1e-3 * 2**-8  # round to nearest: within half a bf16 ulp
    assert np.isnan(bf16_bits_to_float32(float32_to_bf16_bits(np.array([np.nan], np.float32))))[0]
