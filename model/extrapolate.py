"""Survival past the observed γ: a guess the data cannot check (docs/MODEL.md, Cost model).

As far as the candidates go (the drafter's limit, gamma_max). Several tail models of the conditional
acceptance α_k = a_k / a_{k−1}; a_{g+j} = a_{g+j−1}·α_{g+j}; the spread across them is the
interval of an extrapolated candidate:
- ``last``: α_{g+j} = α_g (the last conditional continues);
- ``mean_last3``: α_{g+j} = mean of the last min(3, g) conditionals;
- ``trend``: a least-squares line through the last min(4, g) conditionals, extended
  (clipped to [0, 1]) — falls for a front-loaded drafter;
- ``heterogeneous``: a fleet whose per-request acceptance p ~ Beta(mean m = a_1,
  concentration s), so a_k = Π_{j<k} (m·s + j)/(s + j) and α_{k+1} = α_k + (1 − α_k)/(s + k):
  α rises with k as the easy requests survive. s is fitted so that the model's Σ a_k
  equals the observed one (s → ∞ when the curve is no heavier-tailed than independent p).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from acceptance.counts import among_reached
from acceptance.definitions import conditional_from_survival

from .deployment import ModelInputError
from acceptance.definitions import monotone_survival

TAIL_MODELS = ("last", "mean_last3", "trend", "heterogeneous")


def _beta_concentration(survival: np.ndarray) -> np.ndarray:
    """s of the Beta-mixture whose Σ_k a_k (mean a_1) matches the curve; shape (...).

    One position (g = 1) says nothing of heterogeneity — every s matches a_1 — so the curve
    is taken as independent (s → ∞), not as the most heterogeneous fleet the bisection
    would otherwise settle on (α rising to 1 after a single observed position)."""
    g = survival.shape[-1]
    m = np.clip(survival[..., 0], 1e-9, 1 - 1e-9)
    if g == 1:
        return np.full(m.shape, 1e6)
    target = survival.sum(axis=-1)
    j = np.arange(g)
    lo = np.full(m.shape, np.log(1e-3))
    hi = np.full(m.shape, np.log(1e6))
    for _ in range(50):  # Σ a_k falls as s grows: bisection in log s
        mid = 0.5 * (lo + hi)
        s = np.exp(mid)[..., None]
        model_sum = np.cumprod((m[..., None] * s + j) / (s + j), axis=-1).sum(axis=-1)
        heavier = model_sum > target  # model tail too heavy → more concentration
        lo = np.where(heavier, mid, lo)
        hi = np.where(heavier, hi, mid)
    return np.exp(0.5 * (lo + hi))


def _among_reached(survival: npt.NDArray[np.float64], reach: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """s_k = a_k / r_k (= A_k / R_k): survival among the drafts that proposed position k,
    made non-increasing in [0, 1] (0 where no draft reached k)."""
    s = among_reached(survival, np.clip(np.asarray(reach, dtype=float), 0.0, 1.0), none_reached=0.0)
    return monotone_survival(s)


def extend_survival(survival: npt.ArrayLike, extra: int, reach: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
    """(M, ..., g + extra): the curve extended by each of TAIL_MODELS (same order).

    survival: (..., g) non-increasing a_1..a_g; extra ≥ 0 positions (how far the tail
    models carry is measured on real curves: model.tail_evidence).
    reach: r_k = R_k / D, k = 1..g, when the drafter's draft lengths are known (n-gram and
    suffix drafts are often shorter than γ). a_k = r_k·s_k mixes two things — how far the
    drafter proposes and how far the target accepts what it proposed (s_k = A_k / R_k) —
    so the tail models then extend s's conditionals, and the drafts that reached g are
    taken to go on proposing (r_{g+j} = r_g, the assumption model.speedup.verify_widths
    prices): a_{g+j} = a_{g+j−1}·α^s_{g+j}. Without reach, a's own conditionals.
    """
    a = np.asarray(survival, dtype=float)
    if a.shape[-1] < 1:
        raise ModelInputError("survival: cannot extrapolate an empty curve")
    if extra < 0:
        raise ModelInputError(f"extrapolate a non-negative number of positions, asked {extra}")
    if extra == 0:
        return np.broadcast_to(a, (len(TAIL_MODELS),) + a.shape).copy()
    g = a.shape[-1]
    basis = a if reach is None else _among_reached(a, reach)
    alpha = np.nan_to_num(conditional_from_survival(basis), nan=0.0)
    last = alpha[..., -1]
    w = min(3, g)
    mean_last = alpha[..., -w:].mean(axis=-1)
    # Trend: least squares over the last min(4, g) positions (slope 0 for g = 1).
    w = min(4, g)
    k = np.arange(g - w + 1, g + 1, dtype=float)
    kc = k - k.mean()
    ys = alpha[..., -w:]
    slope = (ys * kc).sum(axis=-1) / (kc @ kc) if w > 1 else np.zeros_like(last)
    fitted_at_g = ys.mean(axis=-1) + slope * (g - k.mean())
    s = _beta_concentration(basis)

    ext = np.empty((len(TAIL_MODELS),) + a.shape[:-1] + (g + extra,))
    ext[..., :g] = a
    het = last
    for j in range(1, extra + 1):
        het = het + (1.0 - het) / (s + g + j - 1)
        alphas = (
            last,
            mean_last,
            np.clip(fitted_at_g + slope * j, 0.0, 1.0),
            np.clip(het, 0.0, 1.0),
        )
        for i, al in enumerate(alphas):
            ext[i, ..., g + j - 1] = ext[i, ..., g + j - 2] * al
    return ext


def bonus_acceptances(survival: npt.ArrayLike, reach: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
    """(M,): α_{g+1} under each of TAIL_MODELS — the chance that the token after a full draft
    would have been accepted too. The step replay (acceptance.step_replay) needs it at every
    position a full draft's bonus token took, which the deployed γ never checks: the same
    unseen position the tail models guess for an extrapolated candidate, so the replay's
    spread over them is the survival path's. 1 where nothing reached position g."""
    ext = extend_survival(survival, 1, reach)
    g = np.asarray(survival).shape[-1]
    last = ext[..., g - 1]
    return np.where(last > 0, ext[..., g] / np.where(last > 0, last, 1.0), 1.0)

