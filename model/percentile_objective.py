"""The percentile interactivity objectives: the per-user decode rate a share of requests reach, per γ.

``objective = "p90_interactivity"`` (and ``p50_``, ``p99_``) prices the axis published
"P90 interactivity" figures are read on: the rate r_q(γ) that a share q of the requests
reach — the (1 − q) quantile of the per-request decode rates r_i(γ), i.e. 1 / the q
quantile of their time per output token. Each request counts once (a request is a user), so
a route whose slow requests gain less from long drafts than its fast ones can have a
different best γ on this axis than on the mean (``interactivity``, tokens over time).

It needs per-request data (acceptance.route_estimate.RequestRows: each request's counts,
and vLLM's ``mean_itl_ms`` where reported). Per request i, at the deployed γ_d = g:
  AL_i(γ) = 1 + Σ_{k≤γ} a_{i,k}, a_{i,k} = A_{i,k} / D_i its own curve: cut for γ ≤ g, and
  past g extended by tail model m from its own conditionals (a route of easy and hard requests
  must not lend the hard ones the easy ones' tail);
  ν_i = (N_i − D_i − A_i) / N_i from its decode tokens N_i (else the route's ν; 1 without drafts);
  s_i(γ) = 1 / (ν_i / ρ_u(γ) + (1 − ν_i) / (AL_i(γ)·ρ(γ))), ρ = τ(0)/τ(γ) over the route's mix
  (model.speedup.projected_speedup, one request's);
  r_i(γ) = r_i(g) · s_i(γ) / s_i(g), r_i(g) = 1 / its mean ITL — what the cost model cannot
  see of it (its context, the batches it met) is in its own observed rate.
Without an observed rate for every request the rates are relative, r_i(γ) = s_i(γ), and no
tokens/s is given. A candidate's speedup is r_q(γ) / r_q(0) (the point: the mean over tail
models); the ensemble resamples the requests, the same resample at every γ, under every
tail model, and feeds the same decision rule as every objective (model.decision).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from acceptance.definitions import acceptance_length_by_gamma, monotone_survival

from .deployment import PERCENTILE_OBJECTIVES, ModelInputError
from .extrapolate import extend_survival
from .speedup import projected_speedup

if TYPE_CHECKING:
    from acceptance.route_estimate import RequestRows

# Resamples × requests held in one quantile at most (a day of requests at 1,000 resamples
# would be tens of millions of rates per γ); the resamples shrink, never below the floor.
MAX_RESAMPLED_RATES = 2_000_000
MIN_RESAMPLES = 200


def axis_text(objective: str) -> str:
    """What the objective optimises, in the words every view prints."""
    q = PERCENTILE_OBJECTIVES.get(objective)
    if q is not None:
        return (f"the per-user decode rate {q:.0%} of requests reach: the {1 - q:.0%} quantile of per-request "
                f"rates, 1 / the P{100 * q:g} time per output token")
    if objective == "throughput":
        return "tokens per GPU-second at the route's load"
    return "the mean per-user decode rate: tokens over time at the route's batch mix"


def needs_requests(objective: str, requests: RequestRows | None) -> None:
    """A percentile objective without per-request data: one line saying what it needs."""
    if objective in PERCENTILE_OBJECTIVES and requests is None:
        raise ModelInputError(
            f"objective {objective}: the percentile of per-user rates needs per-request data (each request's "
            f"acceptance, and mean_itl_ms where vLLM reports it); /metrics sums every request. Ingest the gateway's "
            f"per-request lines (`specdec ingest --per-request`), or use objective = \"interactivity\" (the mean)")


def request_tokens(requests: RequestRows, top: int) -> np.ndarray:
    """(M, n, G) AL_i(γ) per tail model: each request's own curve a_{i,k} = A_{i,k} / D_i,
    cut at γ ≤ g and extended past g by each tail model (model.extrapolate) — its own
    conditionals, not the route's: a route of easy and hard requests extends the hard ones
    with the easy ones' tail otherwise."""
    counts = np.asarray(requests.counts, dtype=float)
    drafts = counts[:, :1]
    with np.errstate(divide="ignore", invalid="ignore"):
        own = monotone_survival(np.where(drafts > 0, counts[:, 3:] / drafts, 0.0))  # (n, g)
    return acceptance_length_by_gamma(extend_survival(own, top - own.shape[1]), top)  # (M, n, G)


def request_undrafted(requests: RequestRows, route_nu: float | None) -> np.ndarray:
    """(n,) ν_i = (N_i − D_i − A_i) / N_i where N_i is known, else the route's ν; 1 without drafts."""
    counts = np.asarray(requests.counts, dtype=float)
    n_tokens = np.asarray(requests.decode_tokens, dtype=float)
    drafted = counts[:, 0] + counts[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.clip((n_tokens - drafted) / n_tokens, 0.0, 1.0)
    nu = np.where(np.isfinite(own) & (n_tokens > 0), own, route_nu or 0.0)
    return np.where(counts[:, 0] > 0, nu, 1.0)


def request_rates(requests: RequestRows, ratio: np.ndarray, ratio_u: np.ndarray, route_nu: float | None,
                  deployed: int) -> tuple[np.ndarray, bool]:
    """((M, n, G) r_i(γ), whether they are absolute tok/s): each request's speedup s_i(γ)
    (``ratio``, ``ratio_u``: ρ(γ), ρ_u(γ) over the route's mix, γ = 0 .. top) scaled to its
    own observed rate at the deployed γ when every request has one."""
    al = request_tokens(requests, len(ratio) - 1)
    nu = request_undrafted(requests, route_nu)[None, :, None]
    speedup = projected_speedup(al, ratio, ratio_u, nu)  # (M, n, G)
    itl = np.asarray(requests.itl_s, dtype=float)
    if itl.size and np.all(np.isfinite(itl) & (itl > 0)):
        return speedup * (1.0 / itl)[None, :, None] / speedup[:, :, [deployed]], True
    return speedup, False


def percentile_speedups(requests: RequestRows | None, ratio: np.ndarray, ratio_u: np.ndarray, route_nu: float | None, objective: str,
                        deployed: int, n_resamples: int | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(speedup r_q(γ)/r_q(0) (G,), r_q(γ) in tok/s (G,) or None when relative, the ensemble
    (1, M, B, G) over request resamples or None without resamples) — module docstring."""
    needs_requests(objective, requests)
    q = PERCENTILE_OBJECTIVES[objective]
    assert requests is not None  # needs_requests refuses a percentile objective without them
    rates, absolute = request_rates(requests, ratio, ratio_u, route_nu, deployed)
    n = rates.shape[1]
    if n == 0:
        raise ModelInputError(f"objective {objective}: the window holds no requests")
    quantile = np.quantile(rates, 1.0 - q, axis=1)  # (M, G)
    point = (quantile / quantile[:, :1]).mean(axis=0)
    tps = quantile.mean(axis=0) if absolute else None
    if not n_resamples:
        return point, tps, None
    b = max(MIN_RESAMPLES, min(int(n_resamples), MAX_RESAMPLED_RATES // n))
    drawn = np.random.default_rng(seed).integers(0, n, size=(b, n))
    samples = np.empty((rates.shape[0], b, rates.shape[2]))
    for m in range(rates.shape[0]):
        for gamma in range(rates.shape[2]):
            samples[m, :, gamma] = np.quantile(rates[m, :, gamma][drawn], 1.0 - q, axis=1)
    return point, tps, (samples / samples[:, :, :1])[None]
