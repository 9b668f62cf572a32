"""The cost model's error at the points the engines measured, carried into every other
candidate (docs/MODEL.md, The decision: what the engines measure).

Where the model's rate at the deployed γ can be set beside the engines' own (model_error,
with the user's plain decode as the anchor), a model e off there is taken to be as far off
at every γ no engine measured: each resample of those candidates' speedups is scaled by
1 + ε, ε drawn from a normal of standard deviation |e| (at the n midpoints of its quantiles,
in a fixed shuffled order apart from the resamples' and the tail errors'; one draw per
resample, shared by the unmeasured candidates — a model off at one γ is off alike at its
neighbours, so their ranking among themselves keeps, while their gain over a measured point
widens). γ 0 (the user's plain decode) and the deployed γ are measured and keep their own
spread. A model 15% off at γ 3 is then not sure of +18.8% at γ 11: P(1.188·(1 + ε) > 1.03)
= Φ(0.89) = 0.81 < 0.9. The error read at the deployed γ holds the observed rate's sampling
noise too (its resamples' relative variance v, acceptance.observed_rate): |e| is taken as
√(e² − v), so a model that meets the engines within their own noise widens nothing.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Iterable

import numpy as np

# the least factor a draw may scale a speedup by (a normal of a large |e| reaches below 0)
_LEAST_FACTOR = 0.05


def model_error_beyond_noise(model_error: float, observed_factors: np.ndarray) -> float:
    """The model's error at the deployed γ less what the observed rate's own sampling noise
    explains: e = model/observed − 1 carries the rate's relative variance v as well, so the
    model's own is e² − v (at least 0), the sign kept."""
    noise = float(np.var(observed_factors))
    return float(np.copysign(np.sqrt(max(model_error * model_error - noise, 0.0)), model_error))


def model_error_factors(n: int, candidates: int, measured: Iterable[int], model_error: float | None) -> np.ndarray:
    """(n, candidates) factors on the resampled speedups: 1 at the measured γ and everywhere
    when the error is unknown or 0, else 1 + ε per resample (module docstring)."""
    factors = np.ones((n, candidates))
    if model_error is None or not model_error or n == 0:
        return factors
    quantiles = (np.random.default_rng(1).permutation(n) + 0.5) / n
    normal = NormalDist()
    eps = abs(model_error) * np.array([normal.inv_cdf(float(q)) for q in quantiles])
    factors[:] = np.maximum(1.0 + eps, _LEAST_FACTOR)[:, None]
    factors[:, [g for g in measured if 0 <= g < candidates]] = 1.0
    return factors
