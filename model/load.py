"""How the best γ moves with load: per batch size of the route's mix, and the schedule that follows.

Verification gets dearer as the batch grows (more tokens per step, an MoE target wakes more
experts, the specialized path stops fitting), so the best γ falls with concurrency: public
sweeps show it fall from 4–5 at batch 1 to 2 or off at batch 32–64. Over the batch sizes the
route was seen at (its mix, from ``vllm:num_requests_running``), at the priced point:

  S(K, B) = AL_B(K)·t_B(0) / t_B(K)  (with the undrafted steps: model.speedup.projected_speedup)

- ``best_gamma`` at each B: the allowed K of highest S(K, B), over every candidate;
- where the fleet's γ stops paying: the smallest batch size of the mix at which S(γ, B) ≤ 1
  (None when it pays over the whole observed range);
- the ``num_speculative_tokens_per_batch_size`` schedule that follows: per batch size the
  best K ≤ γ (on the specialized path only γ or 0: partial drafts run stock).
``gamma_schedule`` is the same schedule when it beats the fixed γ over the mix by more than
min_gain — then it is deployed with the next change of γ (model.recommend).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .speedup import objective_weights, projected_speedup, tokens_per_time
from .vllm_config import schedule_from_best


@dataclass(frozen=True)
class BatchPoint:
    batch_size: int
    request_share: float  # w_B: the share of a request's decode steps spent at this batch size
    best_gamma: int
    speedup_at_best: float
    speedup_at_gamma: float  # of the γ the fleet is to run


@dataclass(frozen=True)
class LoadView:
    gamma: int  # the γ the fleet is to run, the one the view is about
    points: tuple[BatchPoint, ...]
    stops_paying_at: int | None  # the smallest batch size of the mix where S(γ, B) ≤ 1; None: never in range
    schedule: list[tuple[int, int, int]] | None  # per batch size the best K ≤ γ (None: γ everywhere)
    # the vLLM method whose engines would drop the schedule the mix asks for (model.vllm_config
    # .schedule_dropped): then no schedule is offered; None: kept, or none asked for
    schedule_dropped_for: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"gamma": self.gamma, "batch_sizes": [vars(p).copy() for p in self.points],
                "stops_paying_at": self.stops_paying_at,
                "schedule": None if self.schedule is None else [list(r) for r in self.schedule],
                "schedule_dropped_for": self.schedule_dropped_for}


@dataclass(frozen=True, eq=False)
class MixPrice:
    """The route's batch mix priced at every candidate K, at the point: what the load view reads."""

    batch_sizes: np.ndarray  # (nB,)
    weights: np.ndarray  # (nB,) w_B, request weights
    times: np.ndarray  # (G, nB) step time t_B(K)
    times_u: np.ndarray  # (G, nB) a step that drafted nothing
    tokens: np.ndarray  # AL(K) (G,) or AL_B(K) (G, nB)
    undrafted_share: float | None  # ν (None: every step drafted)


def _per_batch_tokens(al: npt.ArrayLike, times: np.ndarray) -> np.ndarray:
    """AL(K) (G,) or AL_B(K) (G, nB) as (G, nB)."""
    return np.broadcast_to(np.asarray(al, dtype=float).reshape(len(times), -1), times.shape)


def per_batch_speedups(times: np.ndarray, times_u: np.ndarray, al: npt.ArrayLike, nu: float | None) -> np.ndarray:
    """S(K, B) (G, nB) at step times ``times`` (G, nB), AL(K) (G,) or AL_B(K) (G, nB)."""
    speedups: np.ndarray = projected_speedup(_per_batch_tokens(al, times), times[0][None, :] / times,
                                             times[0][None, :] / times_u, nu)
    return speedups


def _best_up_to(speedups: np.ndarray, gamma: int, allowed: npt.NDArray[np.bool_], specialized: bool) -> list[int]:
    """Per batch size the best allowed K ≤ γ (on the specialized path only γ or 0)."""
    options = [k for k in ([0, gamma] if specialized else range(gamma + 1)) if allowed[k]]
    return [options[int(np.argmax(speedups[options, j]))] for j in range(speedups.shape[1])]


def load_view(gamma: int, mix: MixPrice, allowed: npt.ArrayLike, specialized: bool) -> LoadView:
    """The best γ at each batch size of the mix, where ``gamma`` stops paying, its schedule."""
    bs, ws = mix.batch_sizes, mix.weights
    speedups = per_batch_speedups(mix.times, mix.times_u, mix.tokens, mix.undrafted_share)
    ok = np.asarray(allowed, dtype=bool)
    best = [int(np.argmax(np.where(ok, speedups[:, j], -np.inf))) for j in range(len(bs))]
    points = tuple(BatchPoint(int(b), float(w), k, float(speedups[k, j]), float(speedups[gamma, j]))
                   for j, (b, w, k) in enumerate(zip(bs, ws, best)))
    losing = [p.batch_size for p in points if gamma > 0 and p.speedup_at_gamma <= 1.0]
    ks = _best_up_to(speedups, gamma, ok, specialized) if gamma > 0 else [0] * len(bs)
    schedule = None if all(k == gamma for k in ks) else schedule_from_best(dict(zip(map(int, bs), ks)))
    return LoadView(int(gamma), points, min(losing) if losing else None, schedule)


def gamma_schedule(load: LoadView, mix: MixPrice, objective: str, min_gain: float) -> list[tuple[int, int, int]] | None:
    """The load view's schedule when it beats the fixed γ over the mix by more than min_gain,
    else None (``mix`` as load_view priced it)."""
    if load.schedule is None:
        return None
    gamma, bs, ws, times, times_u, nu = load.gamma, mix.batch_sizes, mix.weights, mix.times, mix.times_u, \
        mix.undrafted_share
    ks = np.array([next(k for lo, hi, k in load.schedule if lo <= b <= hi) for b in bs])
    al = _per_batch_tokens(mix.tokens, times)
    v = objective_weights(bs, ws, objective)
    fixed = tokens_per_time(ws @ al[gamma], times[gamma] @ v, times_u[gamma] @ v, nu)  # tokens request-weighted
    cols = np.arange(len(bs))
    rate = tokens_per_time(ws @ al[ks, cols], v @ times[ks, cols], v @ times_u[ks, cols], nu)
    if rate / fixed - 1.0 <= min_gain:
        return None
    return load.schedule
