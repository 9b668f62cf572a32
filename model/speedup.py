"""Speedup of speculative decoding, as docs/MODEL.md, Cost model, writes it.

Expected tokens per verify step (the bonus token included):
  from a survival curve     AL(γ) = 1 + Σ_{k≤γ} a_k
  from an independent p     (1 − p^(γ+1)) / (1 − p)      (acceptance.estimates)
Speedup of γ over plain decoding at batch B:
  S(γ, B) = AL(γ)·T_target(B, 1) / (T_target(B, γ+1) + T_draft(B, γ)),   S(0, B) = 1
with T_draft relative to the stock pass T_stock(B, 1) (model.drafters).

Over a route's batch mix w_B (the share of a request's decode steps spent at batch B —
request-weighted; step counts n_B convert as w_B ∝ B·n_B), tokens over time:
- interactivity: per-user decode tokens/s = Σ_B w_B·AL / Σ_B w_B·t_B(γ) = AL / τ_int(γ),
  τ_int = Σ_B w_B·t_B — what one user of the route feels;
- throughput: tokens per GPU-second at the route's load, the same batch mix held fixed:
  Σ_B s_B·B·AL / (TP·Σ_B s_B·t_B) = AL / (TP·τ_thr(γ)),  s_B ∝ w_B / B the step shares,
  τ_thr = Σ_B (w_B / B)·t_B.
Speedup = the same ratio at γ over γ = 0: AL(γ)·τ(0) / τ(γ). The two weight batch sizes
differently (interactivity by the time users spend in each batch, throughput by the steps,
w_B / B, so small batches count for more per token), so they can disagree.

With a survival curve per batch size (specdec's vLLM plugin counts acceptance by batch
bucket), tokens are summed per batch size too: AL_B(γ) = 1 + Σ_{k≤γ} a_{B,k} and
  tokens over time = Σ_B w_B·AL_B(γ) / Σ_B v_B·t_B(γ)   (v_B = w_B, or w_B / B),
  speedup = Σ_B w_B·AL_B(γ) · τ(0) / τ(γ)            (AL_B(0) = 1, so γ = 0 gives 1).
The tokens are request-weighted under both objectives (a step at B yields B·AL_B tokens,
and s_B·B ∝ w_B). So the mix's expected tokens AL_mix(γ) = Σ_B w_B·AL_B(γ) takes the
place of AL(γ) — the same thing when the curves agree. It differs from the pooled curve
(drafts-weighted over the window) when the mix priced is not the one the drafts came from:
a what-if mix, a batch-size schedule, or a gauge-sampled mix that misses bursts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence, TypeAlias, overload

import numpy as np
import numpy.typing as npt

from acceptance.definitions import acceptance_length_by_gamma, acceptance_length_independent, equivalent_p

from .deployment import OBJECTIVES, Deployment, ModelInputError
from .drafters import Drafter, drafter_for
from .profiles import STOCK, FlatProfile, Profile, TableProfile, make_profile
from .specialized import padded_step_tokens, runs_specialized

_F64: TypeAlias = npt.NDArray[np.float64]
_Int: TypeAlias = npt.NDArray[np.int_]


def verify_widths(top: int, observed_gamma: int, mean_draft_length: float | None = None,
                  reach: npt.ArrayLike | None = None) -> _F64:
    """q(γ) = 1 + E[min(L, γ)], γ = 0..top: tokens one verify step checks per request, for a
    drafter whose drafts at the observed γ_o have length L with P(L ≥ k) = r_k = R_k / D
    (a step verifies its draft and the bonus token, not γ + 1 when the draft is short).

    - r known (per-request ``per_step_drafted``, the plugin): q(γ) = 1 + Σ_{k≤γ} r_k up to
      γ_o; past it the drafts that reached γ_o are assumed to go on: + (γ − γ_o)·r_{γ_o};
    - only T / D (every /metrics page): r_k = (T/D) / γ_o for every k — exact at γ_o, a
      flat guess elsewhere;
    - neither (or T = γ_o·D, full drafts): q(γ) = γ + 1.
    """
    gammas = np.arange(top + 1, dtype=float)
    if observed_gamma <= 0:
        return gammas + 1.0
    if reach is not None:
        r = np.clip(np.asarray(reach, dtype=float), 0.0, 1.0)
        if r.shape != (observed_gamma,) or not np.all(np.isfinite(r)):
            raise ModelInputError(f"draft reach: need {observed_gamma} finite shares R_k / D, got {list(r)}")
    elif mean_draft_length is not None and math.isfinite(mean_draft_length):
        if not 0.0 <= mean_draft_length <= observed_gamma + 1e-9:
            raise ModelInputError(f"mean draft length {mean_draft_length:g} is outside 0..γ = {observed_gamma}")
        r = np.full(observed_gamma, mean_draft_length / observed_gamma)
    else:
        return gammas + 1.0
    within = 1.0 + np.concatenate([[0.0], np.cumsum(r)])  # γ = 0..γ_o
    beyond = within[-1] + (np.arange(1, max(0, top - observed_gamma) + 1)) * r[-1]
    return np.concatenate([within, beyond])[: top + 1]


def normalise_batch_mix(batch_mix: Mapping[int, float] | None) -> tuple[_Int, _F64]:
    """(batch sizes, weights summing to 1); None → batch 1 only. Bad → ModelInputError."""
    if batch_mix is None:
        return np.array([1]), np.array([1.0])
    if not isinstance(batch_mix, Mapping) or not batch_mix:
        raise ModelInputError("batch_mix: must be a non-empty {batch size: weight} mapping")
    bs, ws = [], []
    for b, w in batch_mix.items():
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
            raise ModelInputError(f"batch_mix: batch sizes must be integers ≥ 1, got {b!r}")
        if isinstance(w, bool) or not isinstance(w, (int, float, np.floating, np.integer)) or not math.isfinite(w) or w < 0:
            raise ModelInputError(f"batch_mix: weights must be finite and ≥ 0, got {w!r} for batch {b}")
        bs.append(int(b))
        ws.append(float(w))
    total = sum(ws)
    if total <= 0:
        raise ModelInputError("batch_mix: the weights sum to 0")
    order = np.argsort(bs)
    return np.array(bs)[order], np.array(ws)[order] / total


def batch_mix_from_time_shares(time_shares: Mapping[int, float], deployment: Deployment, deployed_gamma: int) -> dict[int, float]:
    """The request-weighted batch mix w_B from the share of engine time spent at batch B.

    vllm:num_requests_running sampled at each scrape gives u_B, the share of an engine's
    time at batch B. Steps at B run at 1/t_B per second and each carries B requests, so a
    request's share of decode steps at B is w_B ∝ B·u_B / t_B, with t_B the step time at
    the deployed γ under this deployment's cost profile.
    """
    bs, us = normalise_batch_mix(time_shares)
    w = request_weights_from_time_shares(bs, us, deployment, deployed_gamma)
    return {int(b): float(x) for b, x in zip(bs, w)}


def _conversion_step_times(batch_sizes: _Int, deployment: Deployment, deployed_gamma: int,
                           specialized_speedups: Sequence[float | None] = (None,)) -> _F64:
    """(S, nB) t_B at the deployed γ that turns time shares into request weights: the
    deployment's profile, every step clean, at each specialized speedup (None: its point)."""
    cost = CostModel.for_deployment(deployment)
    gamma = [max(int(deployed_gamma), 0)]
    return np.stack([cost.step_times(gamma, batch_sizes, sp)[0] for sp in specialized_speedups])


def request_weights_from_time_shares(batch_sizes: _Int, time_shares: npt.ArrayLike, deployment: Deployment,
                                     deployed_gamma: int) -> _F64:
    """w_B ∝ B·u_B / t_B (batch_mix_from_time_shares) for time shares of shape (..., nB)
    over ``batch_sizes``; each row normalised to 1."""
    t = _conversion_step_times(batch_sizes, deployment, deployed_gamma)[0]
    w = np.asarray(time_shares, dtype=float) * (batch_sizes / t)
    normalised: _F64 = w / w.sum(axis=-1, keepdims=True)
    return normalised


def request_weights_at_speedups(batch_sizes: _Int, request_weights: npt.ArrayLike, deployment: Deployment,
                                deployed_gamma: int, specialized_speedups: Sequence[float]) -> _F64:
    """The request weights the same time shares give at other specialized speedups:
    w'_B ∝ w_B · t_B / t'_B, with t the step times request_weights_from_time_shares converted
    with (the point speedup) and t' those at each of ``specialized_speedups``; weights
    (..., nB) → (S, ..., nB), rows normalised to 1."""
    t = _conversion_step_times(batch_sizes, deployment, deployed_gamma, [None, *specialized_speedups])
    w = np.asarray(request_weights, dtype=float)
    w = w[None] * (t[0] / t[1:]).reshape((len(t) - 1,) + (1,) * (w.ndim - 1) + (-1,))
    normalised: _F64 = w / w.sum(axis=-1, keepdims=True)
    return normalised


def objective_weights(batch_sizes: _Int, weights: _F64, objective: str) -> _F64:
    """v_B with τ = Σ_B v_B·t_B: w_B (interactivity and its percentiles: a user's steps) or
    w_B / B (throughput)."""
    if objective == "throughput":
        return weights / batch_sizes
    if objective in OBJECTIVES:
        return weights
    raise ModelInputError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")


@dataclass
class CostModel:
    """Step times of one deployment: target (stock or specialized) plus drafter.

    t_B(γ) = T_target(B, γ+1) + T_draft(B, γ). On decode_backend latency_specialized a
    clean step that fits (model.specialized) costs T_spec at its padded size; a share
    ``clean_share`` of steps is clean, the rest run stock:
      T_target = e·T_spec(B', q) + (1 − e)·T_stock(B, q),  B' = padded tokens / q.
    """

    deployment: Deployment
    profile: Profile
    drafter: Drafter
    clean_share: float = 1.0

    @classmethod
    def for_deployment(cls, deployment: Deployment, *, clean_share: float = 1.0, profile: Profile | None = None
                       ) -> "CostModel":
        return cls(deployment, profile if profile is not None else make_profile(deployment),
                   drafter_for(deployment.method), clean_share)

    def step_times(self, gammas: npt.ArrayLike, batch_sizes: npt.ArrayLike, specialized_speedup: float | None = None,
                   widths: npt.ArrayLike | None = None) -> _F64:
        """t[γ, B] in the profile's time unit (seconds when the profile is absolute).
        ``widths[i]``: tokens per request the step verifies at gammas[i] (``verify_widths``;
        default γ + 1, full drafts). The specialized path always verifies γ + 1: it runs
        only uniform verify steps, of dspark's full blocks."""
        prof = self.profile if specialized_speedup is None else self.profile.with_specialized_speedup(specialized_speedup)
        g = np.asarray(gammas, dtype=int)
        b = np.asarray(batch_sizes, dtype=int)
        if self.deployment.decode_backend == "latency_specialized":  # the fast path's share at 1/s
            fixed, scaled = self.speedup_terms(g, b)
            specialized: _F64 = fixed + scaled / prof.specialized_speedup
            return specialized
        q = g + 1.0 if widths is None else np.asarray(widths, dtype=float)
        stock_pass = np.asarray(prof.stock_pass_s(b), dtype=float)  # T_stock(B, 1), the draft's unit
        target = np.broadcast_to(np.asarray(prof.step_time_s(b[None, :], q[:, None], STOCK), dtype=float),
                                 (len(g), len(b)))
        draft = self.drafter.draft_time_factor(g, self.deployment.draft_cost, self.deployment.draft_overhead)
        times: _F64 = target + draft[:, None] * stock_pass[None, :]
        return times

    def target_time(self, batch_size: int, q: int, profile: Profile | None = None) -> float:
        """The target's time for one step of ``batch_size`` requests verifying ``q`` tokens each,
        without the drafter: stock, or on latency_specialized with its clean share on the fast
        path at the profile's speedup (speedup_terms less its drafter part)."""
        model = self if profile is None else replace(self, profile=profile)
        prof = model.profile
        if model.deployment.decode_backend != "latency_specialized":
            return float(prof.step_time_s(batch_size, q, STOCK))
        fixed, scaled = model.speedup_terms([q - 1], [batch_size])
        draft = model.drafter.draft_time_factor(np.array([q - 1]), self.deployment.draft_cost,
                                                self.deployment.draft_overhead)
        return float(fixed[0, 0] - float(draft[0]) * float(prof.stock_pass_s(batch_size))
                     + scaled[0, 0] / prof.specialized_speedup)

    def speedup_terms(self, gammas: npt.ArrayLike, batch_sizes: npt.ArrayLike) -> tuple[_F64, _F64]:
        """(fixed, scaled), each (G, B): t[γ, B] at specialized speedup s is fixed + scaled / s (what
        step_times prices on latency_specialized) — the specialized kernels' share of a step scales with 1/s (a
        measured table's specialized rows do not); the stock share and the drafter do not.
        Full drafts (γ + 1 verified), as the specialized path runs them."""
        g, b, prof = np.asarray(gammas, dtype=int), np.asarray(batch_sizes, dtype=int), self.profile
        stock = np.broadcast_to(np.asarray(prof.step_time_s(b[None, :], g[:, None] + 1.0, STOCK), dtype=float),
                                (len(g), len(b)))
        draft = self.drafter.draft_time_factor(g, self.deployment.draft_cost, self.deployment.draft_overhead)
        fixed = stock + draft[:, None] * np.asarray(prof.stock_pass_s(b), dtype=float)[None, :]
        scaled = np.zeros_like(fixed)
        e = self.clean_share
        for i, j, padded_requests, q in self._fast_cells(g, b):
            fast_fixed, fast_scaled = prof.specialized_terms(padded_requests, q)
            fixed[i, j] += e * (float(fast_fixed) - stock[i, j])
            scaled[i, j] = e * float(fast_scaled)
        return fixed, scaled

    def anchor_terms(self, gammas: npt.ArrayLike, batch_sizes: npt.ArrayLike) -> _F64:
        """(4, G, B) c0..c3: t[γ, B] = c0 + c1·x + (c2 + c3·x)/s at plain-decode step time x and
        specialized speedup s — a flat or roofline profile's step is its anchor x plus an
        increment that does not depend on x (model.profiles), so the terms are exact. Full
        drafts, as speedup_terms. A measured table has no x to vary: ModelInputError."""
        prof = self.profile
        if isinstance(prof, TableProfile):
            raise ModelInputError(f"the measured table {prof.source} prices steps in its own seconds: no "
                                  f"plain-decode rate to vary")
        g, b = np.asarray(gammas, dtype=int), np.asarray(batch_sizes, dtype=int)
        inc = np.broadcast_to(prof.increment_s(b[None, :], g[:, None] + 1.0), (len(g), len(b)))
        draft = self.drafter.draft_time_factor(g, self.deployment.draft_cost, self.deployment.draft_overhead)[:, None]
        terms = np.stack([inc + draft * prof.increment_s(b, 1)[None, :], np.broadcast_to(1.0 + draft, inc.shape),
                          np.zeros(inc.shape), np.zeros(inc.shape)])
        e = self.clean_share
        for i, j, padded_requests, q in self._fast_cells(g, b):
            terms[0, i, j] -= e * inc[i, j]  # the clean share leaves the stock path ...
            terms[1, i, j] -= e
            terms[2, i, j] = e * float(prof.increment_s(padded_requests, q))  # ... for the fast one, at 1/s
            terms[3, i, j] = e
        return terms

    def _fast_cells(self, g: npt.NDArray[np.int_], b: npt.NDArray[np.int_]) -> list[tuple[int, int, int, int]]:
        """(i, j, padded requests, q) of the candidates × batch sizes whose clean steps take the
        specialized path (model.specialized.runs_specialized); none off it."""
        if self.deployment.decode_backend != "latency_specialized":
            return []
        caps = self.deployment.cudagraph_capture_sizes
        cells = []
        for i, gamma in enumerate(g.tolist()):
            q = gamma + 1
            for j, batch in enumerate(b.tolist()):
                padded = padded_step_tokens(batch, q, caps)
                if runs_specialized(batch, q, caps) and padded is not None:
                    cells.append((i, j, padded // q, q))
        return cells


@overload
def projected_speedup(expected_tokens: float, ratio: float, undrafted_ratio: float,
                      undrafted_token_share: float | None) -> float: ...
@overload
def projected_speedup(expected_tokens: _F64, ratio: _F64 | float, undrafted_ratio: _F64 | float,
                      undrafted_token_share: npt.ArrayLike | None) -> _F64: ...
def projected_speedup(expected_tokens: _F64 | float, ratio: _F64 | float, undrafted_ratio: _F64 | float,
                      undrafted_token_share: npt.ArrayLike | None) -> _F64 | float:
    """The projected speedup S(γ) of decoding at γ over plain decoding, the one every view
    shows: AL(γ)·τ(0)/τ(γ), with a share ν of the decode tokens from steps that drafted nothing
    (acceptance.counts.undrafted_token_share; ν holds across γ). Per token the time is
    ν·τ_u(γ) + (1 − ν)·τ(γ)/AL(γ), τ_u the step of a request with no draft at γ (it verifies
    one token; the drafter's fixed cost still runs), so

        S(γ) = 1 / (ν / ρ_u(γ) + (1 − ν) / (AL(γ)·ρ(γ))),   ρ = τ(0)/τ(γ), ρ_u = τ(0)/τ_u(γ).

    ν = 0 or None: AL·ρ, every step drafted. ν may be an array (one per request) that
    broadcasts against AL."""
    if undrafted_token_share is None or np.all(np.asarray(undrafted_token_share) == 0):
        return expected_tokens * ratio
    # τ(0) = 1: the per-token rate of tokens_per_time, at step times 1/ρ and 1/ρ_u
    return _tokens_per_time(expected_tokens, 1.0 / ratio, 1.0 / undrafted_ratio, undrafted_token_share)


@overload
def tokens_per_time(expected_tokens: float, step_time: float, undrafted_step_time: float,
                    undrafted_token_share: float | None) -> float: ...
@overload
def tokens_per_time(expected_tokens: _F64, step_time: _F64 | float, undrafted_step_time: _F64 | float,
                    undrafted_token_share: npt.ArrayLike | None) -> _F64: ...
def tokens_per_time(expected_tokens: _F64 | float, step_time: _F64 | float, undrafted_step_time: _F64 | float,
                    undrafted_token_share: npt.ArrayLike | None) -> _F64 | float:
    """Tokens per unit of step time, the rate behind projected_speedup:
    AL/τ, or 1 / (ν·τ_u + (1 − ν)·τ/AL) with a share ν of undrafted tokens (a number, or
    an array that broadcasts)."""
    return _tokens_per_time(expected_tokens, step_time, undrafted_step_time, undrafted_token_share)


def _tokens_per_time(expected_tokens: _F64 | float, step_time: _F64 | float, undrafted_step_time: _F64 | float,
                     undrafted_token_share: npt.ArrayLike | None) -> _F64 | float:
    """tokens_per_time for numbers or arrays alike (projected_speedup's too)."""
    if undrafted_token_share is None or np.all(np.asarray(undrafted_token_share) == 0):
        return expected_tokens / step_time
    nu = np.asarray(undrafted_token_share, dtype=float)
    return 1.0 / (nu * undrafted_step_time + (1.0 - nu) * step_time / expected_tokens)


def mix_speedup(expected_tokens: npt.ArrayLike, step_times: _F64, batch_sizes: npt.ArrayLike, weights: npt.ArrayLike,
                objective: str, *, undrafted_step_times: npt.ArrayLike | None = None,
                undrafted_token_share: npt.ArrayLike | None = None) -> _F64:
    """S(γ) over the batch mix, as the recommender prices it: AL(γ)·τ(0) / τ(γ) with
    τ = Σ_B v_B·t_B (step_times[γ, B] must start at γ = 0); with a share ν of the tokens from
    steps that drafted nothing (an ngram or suffix drafter without a match:
    ``undrafted_token_share``) and those steps' times ``undrafted_step_times[γ, B]``
    (CostModel.step_times at widths 1), projected_speedup's.

    expected_tokens: (..., G) with G = step_times.shape[0]; returns the same shape.
    """
    v = objective_weights(np.asarray(batch_sizes), np.asarray(weights), objective)
    tau = step_times @ v
    if undrafted_token_share is None:
        speedup: _F64 = np.asarray(expected_tokens) * tau[0] / tau
        return speedup
    if undrafted_step_times is None:
        raise ModelInputError("mix_speedup: a share of undrafted tokens needs the undrafted steps' times")
    return projected_speedup(np.asarray(expected_tokens, dtype=float), tau[0] / tau,
                                  tau[0] / (np.asarray(undrafted_step_times) @ v), undrafted_token_share)


def mix_acceptance_length(al_by_batch: npt.ArrayLike, weights: npt.ArrayLike) -> _F64:
    """AL_mix(γ) = Σ_B w_B·AL_B(γ): al_by_batch (..., nB, G), weights
    (nB,) or (..., nB) request weights summing to 1 → (..., G)."""
    al = np.asarray(al_by_batch, dtype=float)
    w = np.asarray(weights, dtype=float)
    mixed: _F64 = np.einsum("...bg,...b->...g", al, w)
    return mixed


@dataclass(frozen=True)
class TableRow:
    p: float
    gamma: int
    expected_tokens_per_step: float
    speedup: float
    tokens_per_second: float | None


@dataclass(frozen=True)
class ImpliedP:
    p: float
    expected_tokens_per_step: float
    speedup: float
    gamma: int
    draft_cost: float


@dataclass(frozen=True)
class ImpliedDraftCost:
    draft_cost: float
    expected_tokens_per_step: float
    speedup: float
    gamma: int


def _check_common(gamma: int, draft_cost: float, method: str) -> Drafter:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or gamma < 0:
        raise ModelInputError(f"gamma must be an integer ≥ 0, got {gamma!r}")
    if not isinstance(draft_cost, (int, float)) or isinstance(draft_cost, bool) or not math.isfinite(draft_cost) or draft_cost < 0:
        raise ModelInputError(f"draft cost must be ≥ 0, got {draft_cost!r}")
    return drafter_for(method)


def flat_step_cost(gamma: int, draft_cost: float, method: str = "dspark", draft_overhead: float = 0.0) -> float:
    """(T_target + T_draft) / T_target under the flat model: 1 + r, 1 + γ·c + c0, or 1."""
    drafter = _check_common(gamma, draft_cost, method)
    return 1.0 + float(drafter.draft_time_factor(gamma, draft_cost, draft_overhead))


def seeds_table(gamma: int, draft_cost: float, ps: Iterable[float], *, method: str = "dspark",
                baseline_tps: float | None = None) -> list[TableRow]:
    """The seeds' table: S = (1 − p^(γ+1)) / ((1 − p)·(1 + r)) for each p (flat profile);
    tokens/s = S·baseline when a baseline is given."""
    cost = flat_step_cost(gamma, draft_cost, method)
    if baseline_tps is not None and (not isinstance(baseline_tps, (int, float)) or not baseline_tps > 0):
        raise ModelInputError(f"baseline tokens/s must be > 0, got {baseline_tps!r}")
    rows = []
    for p in ps:
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not (0.0 <= p <= 1.0):
            raise ModelInputError(f"p must be in [0, 1], got {p!r}")
        e = float(acceptance_length_independent(p, gamma))
        s = e / cost
        rows.append(TableRow(float(p), gamma, e, s, None if baseline_tps is None else s * baseline_tps))
    return rows


def implied_p(speedup: float, gamma: int, draft_cost: float, *, method: str = "dspark") -> ImpliedP:
    """The independent p whose flat-model speedup at (γ, r) is ``speedup``:
    E = S·(1 + r), then (1 − p^(γ+1)) / (1 − p) = E (acceptance.estimates.equivalent_p)."""
    cost = flat_step_cost(gamma, draft_cost, method)
    if not isinstance(speedup, (int, float)) or not math.isfinite(speedup) or speedup <= 0:
        raise ModelInputError(f"speedup must be > 0, got {speedup!r}")
    if gamma < 1:
        raise ModelInputError(f"gamma must be ≥ 1 to imply an acceptance, got {gamma}")
    e = speedup * cost
    if e > gamma + 1 + 1e-12:
        raise ModelInputError(
            f"speedup {speedup:g} needs {e:.3f} tokens per step, more than γ+1 = {gamma + 1} (draft cost {draft_cost:g})"
        )
    if e < 1:
        raise ModelInputError(f"speedup {speedup:g} needs {e:.3f} tokens per step, fewer than the 1 every step yields")
    return ImpliedP(float(equivalent_p(e, gamma)), e, float(speedup), gamma, float(draft_cost))


def implied_draft_cost(
    speedup: float, survival: npt.ArrayLike, gamma: int | None = None, *, method: str = "dspark",
    profile: Profile | None = None, batch_size: int = 1
) -> ImpliedDraftCost:
    """The draft cost that makes the observed curve's speedup ``speedup`` at batch B:
    from S = AL·T(B,1) / (T(B,γ+1) + f·T_stock(B,1)), f = AL·T(B,1)/S − T(B,γ+1) in
    stock-pass units; r = f (parallel) or c = (f − c0)/γ with c0 = 0 (sequential).
    Flat profile by default (then r = AL/S − 1)."""
    a = np.asarray(survival, dtype=float)
    g = a.shape[-1] if gamma is None else gamma
    drafter = _check_common(g, 0.0, method)
    if g < 1 or g > a.shape[-1]:
        raise ModelInputError(f"gamma {g} is outside 1..{a.shape[-1]} (the survival curve's length)")
    al = float(acceptance_length_by_gamma(a, g)[..., g])
    prof = profile if profile is not None else FlatProfile()
    t1 = float(prof.step_time_s(batch_size, 1))
    tq = float(prof.step_time_s(batch_size, g + 1))
    f = (al * t1 / speedup - tq) / float(prof.stock_pass_s(batch_size))
    if drafter.kind == "sequential":
        f = f / g
    elif drafter.kind == "free":
        raise ModelInputError(f"{method} drafts for free: there is no draft cost to imply")
    if f < 0:
        raise ModelInputError(f"speedup {speedup:g} exceeds what AL {al:.3f} allows with a free drafter")
    return ImpliedDraftCost(f, al, float(speedup), g)
