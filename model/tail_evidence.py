"""How far the tail models are right on real engines' curves, and what the ensemble takes from it.

For every reference curve (model.reference_curves, G positions) and every cut g = 2 .. G−1,
each of TAIL_MODELS (model.extrapolate) extends the first g positions to G. Its error at
distance j is the relative error of the mean acceptance length,

    e_{m,j} = AL_m(g + j) / AL(g + j) − 1,    AL(n) = 1 + Σ_{k ≤ n} a_k,

one row per (curve, g, j). From the rows of the curves it may use — never the curve it is
to predict (leave-one-curve-out) — the evidence at distance j is

- weights w_{m,j} ∝ 1 / mean(e_{m,j}²): inverse mean-square error, so the tail model that
  has been right at that distance counts most;
- the weighted ensemble's errors e_j = Σ_m w_{m,j}·e_{m,j} at that distance, taken with
  either sign (an error seen one way on one engine may go the other way on the next): the
  predictive distribution. The true AL of a candidate whose ensemble AL is Â lies at
  Â / (1 + e) for e drawn from ±e_j (``true_al_samples``);
- its ``level`` interval Â / (1 ± q), q the ⌈(n + 1)·level⌉-th smallest of the n values
  |e_j| (split conformal prediction): held out one curve at a time it covers the truth at
  89–93% of the rows (benchmarks/tail_holdout.py; a plain 90% quantile of e_j covered
  78–81%: curves differ more than the rows of one curve do).

Curves differ in how predictable they are, and a curve shows it before the cut: its own
one-step error σ (``one_step_error``: the tail models' mean predicting each seen position
from those before it, the RMS of the relative AL errors) is 0.3% on the public DSpark
curves and 1–3% on the real engine's, and the larger it is the larger the errors further
out. So each row's error is also kept in units of its cut's σ, and a curve with a record
takes the errors e_j / σ_row × its own σ (normalised conformal prediction): a curve the
models have tracked exactly (independent p: σ is its sampling noise) is not given the
errors of one they have not. Held out on the real curves it covers as the unscaled errors
do and its gain claims hold more often (benchmarks/tail_holdout.py); a curve of one
position has no record and takes the unscaled errors.

The recommendation prices every extrapolated candidate's resamples with those errors
(``al_factors``: resample i's AL at distance j times 1 / (1 + e), e its draw from ±e_j), on
top of the tail models' spread. A distance with fewer than MIN_ROWS rows takes the weights
of the farthest distance that has them and its errors scaled by j / j₀ (uncertainty grows with distance; the few far rows
come from one or two long curves and would understate it). benchmarks/tail_holdout.py
checks the intervals' coverage and the calibration of the gains claimed from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from contextlib import contextmanager
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from acceptance.definitions import acceptance_length_by_gamma

from .extrapolate import extend_survival
from .reference_curves import CURVES, ReferenceCurve

MIN_ROWS = 10
LEVEL = 0.9
_TINY_SCALE = 1e-12  # a reference cut tracked exactly: its errors count as very large in units of σ


@dataclass(frozen=True)
class HoldoutErrors:
    """Each tail model's relative AL error, one row per (curve, cut, distance)."""

    curve: np.ndarray  # (rows,) index into the curves
    cut: np.ndarray  # (rows,) g, the positions seen
    distance: np.ndarray  # (rows,) j, positions past the cut
    errors: np.ndarray  # (rows, len(TAIL_MODELS)) e_{m,j}
    scale: np.ndarray  # (rows,) one_step_error of the curve's first g positions


def one_step_error(survival: npt.ArrayLike, reach: npt.ArrayLike | None = None) -> float | None:
    """σ: how well the tail models' mean has predicted the curve's own positions one step
    ahead — the RMS over k = 1 .. g−1 of AL(k + 1) extended from a_1..a_k against the
    curve's AL(k + 1), relative. None for a curve of one position (no record)."""
    a = np.asarray(survival, dtype=float)
    if a.shape[-1] < 2:
        return None
    truth = acceptance_length_by_gamma(a)[..., 1:]  # AL(n), n = 1..g
    r = None if reach is None else np.asarray(reach, dtype=float)
    errors = [acceptance_length_by_gamma(extend_survival(a[:k], 1, None if r is None else r[:k]))[:, k + 1].mean() / truth[k] - 1.0
              for k in range(1, a.shape[-1])]
    return float(np.sqrt(np.mean(np.square(errors))))


def holdout_errors(curves: tuple[ReferenceCurve, ...] = CURVES) -> HoldoutErrors:
    rows: list[tuple[int, int, int, npt.NDArray[np.float64], float | None]] = []
    for index, curve in enumerate(curves):
        a = np.asarray(curve.survival, dtype=float)
        truth = acceptance_length_by_gamma(a)[..., 1:]  # AL(n), n = 1..g
        for g in range(2, len(a)):
            predicted = acceptance_length_by_gamma(extend_survival(a[:g], len(a) - g))[..., 1:]  # (M, G)
            scale = one_step_error(a[:g])
            for j in range(1, len(a) - g + 1):
                rows.append((index, g, j, predicted[:, g + j - 1] / truth[g + j - 1] - 1.0, scale))
    if not rows:
        raise ValueError("no reference curve of three positions or more")
    curve_index, cut, distance, errors, scales = zip(*rows)
    return HoldoutErrors(np.array(curve_index), np.array(cut), np.array(distance), np.array(errors),
                         np.array(scales))


@dataclass(frozen=True)
class TailEvidence:
    """The ensemble's weights and predictive errors at distances 1 .. len(weights)."""

    weights: np.ndarray  # (J, M), rows sum to 1
    ensemble_errors: tuple[np.ndarray, ...]  # J arrays of e_j
    rows: np.ndarray  # (J,) held-out rows behind each distance
    scales: tuple[np.ndarray, ...]  # J arrays: each e_j's row's one_step_error

    def _distance(self, j: int) -> tuple[int, float]:
        """The row behind distance j (1-based) and the factor its errors are scaled by."""
        if j < 1:
            raise ValueError(f"distance must be at least 1, got {j}")
        reliable = np.flatnonzero(self.rows >= MIN_ROWS)
        last = int(reliable[-1]) + 1 if reliable.size else 1
        return (j, 1.0) if j <= last else (last, j / last)

    def weights_at(self, j: int) -> np.ndarray:
        row: np.ndarray = self.weights[self._distance(j)[0] - 1]
        return row

    def errors_at(self, j: int, scale: float | None = None) -> np.ndarray:
        """e_j, or with ``scale`` (the predicted curve's one_step_error σ) e_j / its row's σ × σ."""
        row, widen = self._distance(j)
        e = self.ensemble_errors[row - 1] * widen
        return e if scale is None else e / np.maximum(self.scales[row - 1], _TINY_SCALE) * scale

    def ensemble_al(self, model_als: np.ndarray, j: int) -> np.ndarray:
        """The weighted AL from each tail model's (M, ...) AL at distance j."""
        return np.tensordot(self.weights_at(j), model_als, axes=1)

    def predictive_errors(self, j: int, scale: float | None = None) -> np.ndarray:
        """±e_j: the ensemble's errors at distance j (in units of ``scale``) taken with either sign."""
        e = self.errors_at(j, scale)
        return np.concatenate([e, -e])

    def true_al_samples(self, al: npt.ArrayLike, j: int, scale: float | None = None) -> np.ndarray:
        """The predictive distribution of the true AL for an ensemble AL ``al`` at distance j."""
        return np.asarray(al, dtype=float)[..., None] / (1.0 + self.predictive_errors(j, scale))

    def interval(self, al: float, j: int, level: float = LEVEL, scale: float | None = None) -> tuple[float, float]:
        """The ``level`` prediction interval of the true AL for an ensemble AL ``al`` at distance j."""
        q = conformal_quantile(np.abs(self.errors_at(j, scale)), level)
        return al / (1.0 + q), al / max(1.0 - q, 1e-9)


def conformal_quantile(scores: np.ndarray, level: float) -> float:
    """The ⌈(n + 1)·level⌉-th smallest of n scores (the largest when that passes n)."""
    ranked = np.sort(scores)
    k = min(len(ranked), int(np.ceil((len(ranked) + 1) * level)))
    return float(ranked[k - 1])


def tail_evidence(errors: HoldoutErrors, leave_out: int | None = None) -> TailEvidence:
    """The evidence from every curve but ``leave_out`` (an index into the curves)."""
    use = errors.curve != leave_out if leave_out is not None else np.ones(len(errors.curve), bool)
    far = int(errors.distance[use].max())
    weights, ensemble, rows, scales = [], [], [], []
    for j in range(1, far + 1):
        at = use & (errors.distance == j)
        e = errors.errors[at]
        mse = np.maximum((e ** 2).mean(axis=0), 1e-12)
        w = (1.0 / mse) / (1.0 / mse).sum()
        weights.append(w)
        ensemble.append(e @ w)
        rows.append(len(e))
        scales.append(errors.scale[at])
    return TailEvidence(np.array(weights), tuple(ensemble), np.array(rows), tuple(scales))


@lru_cache(maxsize=None)
def reference_evidence(leave_out: int | None = None) -> TailEvidence:
    """The evidence of every reference curve (but ``leave_out``): what the recommendation
    prices an extrapolated candidate's uncertainty with."""
    return tail_evidence(holdout_errors(), leave_out)


# Reference curves held out of the evidence al_factors reads (holding_out): a benchmark that
# judges the tool on a truth built from a reference curve must not price with that curve.
_HELD_OUT: list[int] = []


@contextmanager
def holding_out(name: str) -> Iterator[None]:
    """Inside, al_factors reads the evidence of every reference curve but ``name``."""
    index = next((i for i, c in enumerate(CURVES) if c.name == name), None)
    if index is None:
        raise ValueError(f"no reference curve named {name!r}")
    _HELD_OUT.append(index)
    try:
        yield
    finally:
        _HELD_OUT.pop()


def al_factors(n: int, observed: int, top: int, scale: float | None = None) -> np.ndarray:
    """(n, top + 1) factors on AL(γ) for n resamples: 1 up to the observed γ; past it,
    1 / (1 + e) with e resample i's draw from the predictive errors at distance γ − observed,
    in units of ``scale`` (the observed curve's one_step_error; None: unscaled) — at quantile
    u_i of ±e_j, the same u_i at every distance: a curve the models misjudge at one position
    they misjudge further on. The u_i are the n midpoints (i + ½)/n in a fixed shuffled
    order, so the draws do not line up with the resamples' own order."""
    factors = np.ones((n, top + 1))
    if top <= observed or n == 0:
        return factors
    evidence = reference_evidence(_HELD_OUT[-1] if _HELD_OUT else None)
    u = (np.random.default_rng(0).permutation(n) + 0.5) / n
    for gamma in range(observed + 1, top + 1):
        # a guess twice too high, mirrored, would be a factor of 1/0: AL at most 4× the guess
        e = np.quantile(evidence.predictive_errors(gamma - observed, scale), u)
        factors[:, gamma] = 1.0 / np.maximum(1.0 + e, 0.25)
    return factors
