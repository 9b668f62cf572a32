"""The γ recommendation for one route (docs/DESIGN.md, Cost model; The tune-gamma JSON).

For each candidate γ = 0 .. min(gamma_max, the drafter's block when it has one):
  speedup = AL(γ)·τ(0) / τ(γ) over the batch mix (model.speedup), AL from the survival
  curve, extended past the observed γ by the tail models (model.extrapolate) —
  the point is the mean over tail models, at the midpoint of specialized_speedup;
  speedup_low/high: the (1 − level)/2 and (1 + level)/2 quantiles of the ensemble — the
  resamples of every tail model pooled, each extrapolated one carrying its draw of the tail
  error measured on real curves (model.tail_evidence): one predictive distribution, the
  one the decision reads (null without resamples). A specialized_speedup
  range is a uniform prior: resample i of n runs at the midpoint of bin ⌊i·K/n⌋ of K equal
  bins of the range, so the quantiles are over the range too (its ends are not both
  inside every interval: a 90% interval leaves out the least likely 10%); a mix measured in
  time (``mix_in_time``) is converted at each bin's speedup
  (model.speedup.request_weights_at_speedups).
recommended γ: the best point speedup among allowed candidates (0 when nothing beats 1).
probability_best: the share of resamples × tail models (each resample at its own
specialized speedup) in which a candidate is the best allowed one.
decision: change / off / keep / probe over the same ensemble (model.decision), with the
evidence that would change it in decision_reason; without resamples there is no such
probability: "keep". The deployable config is for the γ the fleet is to run: the
recommended one on change / off / probe (a probe's fleet stays at the deployed γ or takes
the sure step; the canary's config is the probe's), else the deployed γ.
With ``survival_by_batch`` (a curve a_{B,1..γ} per batch size of the mix, from specdec's
plugin) AL(γ) is the mix's AL_mix(γ) = Σ_B w_B·AL_B(γ) (model.speedup), each batch size's
curve extended past γ by the tail models; batch sizes without a curve use the pooled
one. Resamples shift every batch size's curve by the pooled resample's deviation (the
per-batch counts carry no resamples of their own), clipped to [0, 1] and non-increasing.
A ``num_speculative_tokens_per_batch_size`` schedule (per batch size the best K ≤ γ; on the
specialized path only γ or 0) is suggested when it beats the fixed γ by more than min_gain
over the mix; it enters the deployable config only together with a change of γ.

Inputs of ``recommend`` beside the curve and the deployment: ``eligibility``: the clean share of
steps for the specialized path (an Eligibility, a number, or None = assumed 1).
``observed_tokens_per_second``: per-user decode tok/s at the deployed γ (1 / mean ITL);
model_error compares the model's per-user tok/s with it. The computation is deterministic.
``batch_mix_resamples`` (m, nB): resampled weights over ``batch_mix``'s batch sizes in
ascending order; survival resample i is priced at mix row i mod m, so the intervals and
probabilities carry the batch mix's sampling error too (the point uses ``batch_mix``).
``survival_by_batch``: {batch size: a_1..a_γ} for batch sizes of ``batch_mix`` whose
own curve is known (module docstring); others, and batch sizes not in the mix, fall
back to / are ignored in favour of the pooled ``survival``. ``mix_in_time``: the mix
was converted from time shares measured at the deployed γ (num_requests_running), so
a resample priced at another specialized speedup re-weights it by that speedup's step
times (w_B ∝ B·u_B / t_B(γ_d)); without it the request weights are taken as given.
``mean_draft_length`` (T / D) and ``draft_reach`` (R_k / D, k = 1..γ): the drafter's
draft lengths at the observed γ, so that a step is priced at the tokens it verifies
(speedup.verify_widths), not γ + 1, when drafts come out shorter than γ.
``observed_latency_source`` names where ``observed_tokens_per_second`` came from; when
baseline_tokens_per_second is not configured, the profile is anchored on it (model.anchor).
``undrafted_token_share``: ν, the share of decode tokens from steps that carried no draft
(acceptance.counts.undrafted_token_share), priced at every γ (speedup.speedup_with_undrafted);
None = every step drafted. ``step_sequences``: the requests' drafted steps in order at the
deployed γ (per-request ``detailed``); AL and the verify width of every candidate then come
from replaying them (acceptance.step_replay), not from the survival curve — once per tail
model's guess of the positions after full drafts (model.extrapolate.bonus_acceptances), the
point their mean and the intervals from all of them pooled, as for an extended curve.
``requests`` (acceptance.route_estimate.RequestRows): the window's rows one per request, which
a percentile objective (p90_interactivity, …) prices instead of the mean
(model.percentile_objective; without them it is an input error).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Mapping, Sequence

import numpy as np

from acceptance.route_estimate import LOGGED_LOAD
from acceptance.step_replay import StepSequence, replay_by_gamma, resampled_tokens, survival_and_reach, tokens_and_widths

from .deployment import PERCENTILE_OBJECTIVES, Deployment, ModelInputError, per_user
from .drafters import FREE, drafter_for
from .decision import Gain, decide, gain_of, probe_step  # noqa: F401 (Gain: importers of model.recommend keep it)
from .probe import ProbeInputs, RunningProbe
from .percentile_objective import axis_text, percentile_speedups
from .extrapolate import bonus_acceptances, extend_survival
from .tail_evidence import al_factors, one_step_error
from .profiles import make_profile
from .specialized import Eligibility, specialized_refusal
from .specialized_break_even import speedup_doubt
from .figures_needed import gated
from .recommendation import Candidate, Recommendation  # noqa: F401 (importers of model.recommend keep them)
from .anchor import (DEFAULT, OBSERVED, Anchor, Unpriceable, configured_or_default, priced_rate, profile_figures,
                     solve_observed_rate)
from .speedup import (
    CostModel,
    expected_tokens_by_gamma,
    mix_expected_tokens,
    normalise_batch_mix,
    objective_weights,
    request_weights_at_speedups,
    speedup_with_undrafted,
    tokens_per_time,
    verify_widths,
)
from .vllm_config import command_line, replay_config, speculative_config
from .load import LoadView, gamma_schedule, load_view
from acceptance.definitions import check_survival_curve, monotone_survival

# Beyond this the cost model is off by more than the gains it ranks (a few %): say so and what to do.
MODEL_ERROR_TOLERANCE = 0.15

# Bins of a specialized_speedup range the resamples are spread over (uniform prior).
SPECIALIZED_SPEEDUP_BINS = 8


def recommend(
    survival: np.ndarray,
    deployment: Deployment,
    *,
    survival_resamples: np.ndarray | None = None,
    deployed_gamma: int | None = None,
    batch_mix: dict[int, float] | None = None,
    eligibility: Eligibility | float | None = None,
    gamma_max: int = 16,
    level: float = 0.9,
    observed_tokens_per_second: float | None = None,
    batch_mix_resamples: np.ndarray | None = None,
    survival_by_batch: Mapping[int, Sequence[float]] | None = None,
    mix_in_time: bool = False,
    mean_draft_length: float | None = None,
    draft_reach: Sequence[float] | None = None,
    observed_latency_source: str | None = None,
    undrafted_token_share: float | None = None,
    step_sequences: Sequence[StepSequence] | None = None,
    traffic=None, running_probe: RunningProbe | None = None,
    requests=None,
    speedup_measured: bool = False,
) -> Recommendation:
    """Recommend γ for one route (module docstring: its inputs); deterministic — resamples,
    tail models and specialized speedup bins are spread in a fixed order."""
    a, resamples, deployed, gammas = _checked_curves(survival, survival_resamples, deployment, deployed_gamma,
                                                     gamma_max, level)
    g, top = a.size, int(gammas[-1])
    bs, ws = normalise_batch_mix(batch_mix)
    mix_res = _checked_mix_resamples(batch_mix_resamples, resamples, len(bs))
    specialized = deployment.decode_backend == "latency_specialized"
    elig = _eligibility(eligibility) if specialized else None
    _check_rates(observed_tokens_per_second, undrafted_token_share)
    nu = None if specialized or not undrafted_token_share else float(undrafted_token_share)  # dspark drafts always
    widths = None if specialized else verify_widths(top, g, mean_draft_length, draft_reach)
    per_batch = _per_batch_curves(survival_by_batch, bs, a)  # (nB, g) or None
    replayed, replayed_al, widths = _replayed(step_sequences, g, top, widths, specialized or per_batch is not None)
    deployment, anchor = _anchor(deployment, priced_rate(observed_tokens_per_second, undrafted_token_share, nu),
                                 observed_latency_source, a, per_batch, bs, ws, deployed, widths, elig, nu)
    profile = make_profile(deployment)
    model = CostModel.for_deployment(deployment, clean_share=elig.share if elig else 1.0, profile=profile)
    speeds = _specialized_speeds(deployment) if specialized else [deployment.specialized_speedup_point]
    price = _price(model, gammas, bs, ws, speeds, widths, nu, deployment.objective)
    # the law of draft lengths, when known, is extrapolated apart from acceptance (extend_survival)
    reach = None if draft_reach is None or specialized else np.asarray(draft_reach, dtype=float)
    tokens = _CurveTokens(a, per_batch, replayed, replayed_al, reach, top, *_own_curve(running_probe, deployed))
    al_point, al_by_batch = tokens.point(ws)
    allowed, reasons = _admissible(deployment, gammas)
    n_res = None if resamples is None else len(resamples)
    if deployment.objective in PERCENTILE_OBJECTIVES:  # a percentile of per-request rates, not the mean
        speed_point, tps, samples = percentile_speedups(requests, price.ratio[0], price.ratio_u[0], nu,
                                                        deployment.objective, deployed, n_res)
        ensemble, spread = (None, None) if samples is None else _ensemble(samples, allowed, level, False)
        tail_only = running_probe = None  # its doubt is the requests', not positions a probe measures
    else:
        speed_point = speedup_with_undrafted(al_point, price.ratio[0], price.ratio_u[0], nu).mean(axis=0)
        tps = _tokens_per_second(profile, price.tau, speed_point, deployment)
        ensemble, spread, tail_only = _mean_axis(tokens, a, resamples, mix_res, price, bs, ws, deployment, deployed,
                                                 speeds, mix_in_time, nu, allowed, level)
    rec = int(np.argmax(np.where(allowed, speed_point, -np.inf)))  # ties → the smaller γ; γ = 0 scores exactly 1
    candidates = _candidates(gammas, g, speed_point, spread, tps, allowed, reasons, al_point)
    rec, expected_best, verdict = decide(rec, deployed, allowed, speed_point, ensemble, deployment.min_gain,
                                            reasons, g, tail_only)
    rec, expected_best, verdict, probe = probe_step(
        rec, expected_best, verdict, deployment, deployed, traffic, running_probe,
        None if ensemble is None else ProbeInputs(ensemble, speed_point, allowed, al_point.mean(axis=0), price.tau[0],
                                                  1.0 + resamples[:, :min(deployed, g)].sum(axis=1), g))
    final, rec, verdict, probe, break_even = speedup_doubt(
        lambda speeds: _price(model, gammas, bs, ws, speeds, widths, None, deployment.objective).tau, al_point, deployment,
        allowed, deployed, rec, verdict, probe, traffic=traffic, running_probe=running_probe, measured=speedup_measured,
        ensemble=ensemble, step_time=price.tau[0], time_shares=ws * price.times[0, deployed] / bs, batch_sizes=bs,
        clean_share=model.clean_share, latency_from_running=observed_latency_source == LOGGED_LOAD)
    model_error = _model_error(observed_tokens_per_second, profile, anchor, al_point, price, ws, deployed, nu)
    schedule, spec_cfg, load = _deployable(final, deployed, bs, ws, price, al_point, al_by_batch, allowed,
                                           specialized, deployment, nu)
    return gated(Recommendation(
        objective=deployment.objective, cost_profile=profile.name,
        interval_level=float(level), deployed_gamma=int(deployed),
        recommended_gamma=rec,
        decision=verdict.decision, decision_reason=verdict.reason,
        probability_best=None if spread is None else float(spread.probability_best[rec]),
        candidates=candidates, model_error=model_error,
        vllm_speculative_config=spec_cfg,
        vllm_command_line=command_line(deployment, spec_cfg),
        replay_config=replay_config(deployment, a),
        specialized_eligibility=elig,
        schedule=schedule, load=load,
        verify_widths=None if widths is None else tuple(float(w) for w in widths),
        acceptance_model="replay" if replayed is not None else "survival",
        anchor=anchor,
        profile_figures=profile_figures(deployment, anchor),
        gain=gain_of(rec, deployed, speed_point, ensemble, level),
        model_error_warning=_model_error_warning(model_error, deployment),
        drafts_factor_to_settle=verdict.settle,
        expected_best_gamma=expected_best,
        probe=probe,
        specialized_break_even=break_even,
        ensemble=ensemble,
        objective_axis=axis_text(deployment.objective),
    ), deployment)


# ----------------------------------------------------------------- recommend(), step by step


def _checked_curves(survival, survival_resamples, deployment, deployed_gamma, gamma_max, level):
    """(a, finite resamples or None, deployed γ, candidates 0..top) after checking every input."""
    a = np.asarray(survival, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ModelInputError("survival: must be a non-empty curve a_1..a_γ")
    check_survival_curve(a, "survival", ModelInputError)
    g = a.size
    if not isinstance(deployment, Deployment):
        raise ModelInputError("deployment: must be a Deployment")
    if isinstance(gamma_max, bool) or not isinstance(gamma_max, int) or gamma_max < 0:
        raise ModelInputError(f"gamma_max must be an integer ≥ 0, got {gamma_max!r}")
    if not (isinstance(level, float) or isinstance(level, int)) or not 0 < level < 1:
        raise ModelInputError(f"level must be in (0, 1), got {level!r}")
    block = drafter_for(deployment.method).max_gamma  # a parallel drafter's block: no candidate past it
    top = gamma_max if block is None else min(gamma_max, max(block, g))
    deployed = g if deployed_gamma is None else deployed_gamma
    if isinstance(deployed, bool) or not isinstance(deployed, (int, np.integer)) or deployed < 0:
        raise ModelInputError(f"deployed_gamma must be an integer ≥ 0, got {deployed_gamma!r}")
    if deployed > top:
        raise ModelInputError(f"deployed_gamma {deployed} is outside the candidates 0..{top}")
    resamples = None
    if survival_resamples is not None:
        resamples = np.asarray(survival_resamples, dtype=float)
        if resamples.ndim != 2 or resamples.shape[1] != g:
            raise ModelInputError(f"survival_resamples: must have shape (n, {g}), got {resamples.shape}")
        resamples = resamples[np.all(np.isfinite(resamples), axis=1)]  # resamples without drafts
        if resamples.shape[0] == 0:
            raise ModelInputError("survival_resamples: no finite resample")
        check_survival_curve(resamples, "survival_resamples", ModelInputError)
    return a, resamples, deployed, np.arange(top + 1)


def _checked_mix_resamples(batch_mix_resamples, resamples, n_sizes: int) -> np.ndarray | None:
    """The resampled mix rows normalised to 1 (None without them or without survival resamples)."""
    if batch_mix_resamples is None or resamples is None:
        return None
    mix_res = np.asarray(batch_mix_resamples, dtype=float)
    if mix_res.ndim != 2 or mix_res.shape[1] != n_sizes or mix_res.shape[0] == 0:
        raise ModelInputError(f"batch_mix_resamples: must have shape (m, {n_sizes}), got {mix_res.shape}")
    if not np.all(np.isfinite(mix_res)) or np.any(mix_res < 0) or np.any(mix_res.sum(axis=1) <= 0):
        raise ModelInputError("batch_mix_resamples: weights must be finite, ≥ 0 and not all 0")
    return mix_res / mix_res.sum(axis=1, keepdims=True)


def _eligibility(eligibility) -> Eligibility:
    """The specialized path's clean share of steps as an Eligibility (None: assumed 1)."""
    if eligibility is None:
        elig = Eligibility(1.0, "assumed: every decode step clean (no iteration_tokens data)")
    elif isinstance(eligibility, Eligibility):
        elig = eligibility
    elif isinstance(eligibility, (int, float)) and not isinstance(eligibility, bool):
        elig = Eligibility(float(eligibility), "given")
    else:
        raise ModelInputError(f"eligibility: must be an Eligibility or a share in [0, 1], got {eligibility!r}")
    if not 0.0 <= elig.share <= 1.0:
        raise ModelInputError(f"eligibility: share must be in [0, 1], got {elig.share!r}")
    return elig


def _check_rates(observed_tokens_per_second, undrafted_token_share) -> None:
    if observed_tokens_per_second is not None and (
            not isinstance(observed_tokens_per_second, (int, float)) or not observed_tokens_per_second > 0):
        raise ModelInputError(f"observed_tokens_per_second must be > 0, got {observed_tokens_per_second!r}")
    if undrafted_token_share is not None and not (
            isinstance(undrafted_token_share, (int, float)) and 0.0 <= undrafted_token_share < 1.0):
        raise ModelInputError(f"undrafted_token_share must be in [0, 1), got {undrafted_token_share!r}")


def _replayed(step_sequences, g: int, top: int, widths, not_replayable: bool):
    """(replayed, its AL, the verify widths): replayed (M, requests, G, 4) — expected D, A, T, U
    per tail model, request and candidate — the requests' steps replayed at every candidate,
    once per tail model's guess of the positions after full drafts (they are unseen); AL
    (M, G) and the widths from them. (None, None, ``widths``) without steps or where they are
    not replayed (the specialized path, per-batch curves)."""
    if step_sequences is None or not_replayable:
        return None, None, widths
    if any(seq.gamma != g for seq in step_sequences) or not step_sequences:
        raise ModelInputError(f"step_sequences: need the requests' steps at the deployed gamma {g}")
    replayed = np.stack([replay_by_gamma(step_sequences, top, q)
                         for q in bonus_acceptances(*survival_and_reach(step_sequences))])
    replayed_al, replayed_widths = tokens_and_widths(replayed.sum(axis=1))  # (M, G) each
    return replayed, replayed_al, replayed_widths.mean(axis=0)


def _specialized_speeds(deployment: Deployment) -> list[float]:
    """The point (midpoint) of specialized_speedup, then the K bin midpoints of its range
    that the resamples are spread over (none when the range is a point)."""
    lo_sp, hi_sp = deployment.specialized_speedup_range
    bins = (lo_sp + (hi_sp - lo_sp) * (np.arange(SPECIALIZED_SPEEDUP_BINS) + 0.5) / SPECIALIZED_SPEEDUP_BINS).tolist()
    return [deployment.specialized_speedup_point] + (bins if lo_sp != hi_sp else [])


@dataclass(frozen=True)
class _Price:
    """Step times per specialized speed s, candidate γ and batch size, and τ(0)/τ(γ) over the mix."""

    times: np.ndarray  # (S, G, nB)
    times_u: np.ndarray  # (S, G, nB) a step that drafted nothing (verifies one token)
    tau: np.ndarray  # (S, G) the objective's step time over the mix
    ratio: np.ndarray  # (S, G) τ(0)/τ(γ)
    ratio_u: np.ndarray  # (S, G) τ(0)/τ_u(γ)


def _price(model: CostModel, gammas, bs, ws, speeds, widths, nu, objective: str) -> _Price:
    times = np.stack([model.step_times(gammas, bs, sp, widths) for sp in speeds])
    # a step that drafted nothing verifies one token (only read when nu is set)
    times_u = times if nu is None else np.stack([model.step_times(gammas, bs, sp, np.ones(len(gammas)))
                                                  for sp in speeds])
    v = objective_weights(bs, ws, objective)
    tau = times @ v
    return _Price(times, times_u, tau, tau[:, :1] / tau, tau[:, :1] / (times_u @ v))


@dataclass(frozen=True)
class _CurveTokens:
    """Expected tokens per step AL(γ) of every tail model: from the pooled curve, the
    per-batch curves, or the replayed steps. With ``own`` (a running probe's own curve, when
    its shared positions disagree with the deployed segment's) the candidates past
    ``own_from`` (the deployed γ) take their AL from it instead, resample i from its
    resample i mod n."""

    pooled: np.ndarray  # a_1..a_g
    per_batch: np.ndarray | None  # (nB, g)
    replayed: np.ndarray | None  # (M, requests, G, 4)
    replayed_al: np.ndarray | None  # (M, G) AL of the replayed steps
    reach: np.ndarray | None
    top: int
    own: np.ndarray | None = None  # a_1..a_γp of the probe alone
    own_resamples: np.ndarray | None = None  # (n_p, γ_p)
    own_from: int = 0
    fixed_requests: bool = False  # the replay without resampling its requests (without_sampling)

    @property
    def extra(self) -> int:
        """Positions past the observed γ."""
        return max(0, self.top - self.pooled.size)

    def without_sampling(self) -> "_CurveTokens":
        """The same with the replay's requests and the probe's own resamples at their point (the
        pooled resamples are the caller's): what is left is the tail models' doubt."""
        own = None if self.own is None else np.broadcast_to(self.own, self.own_resamples.shape)
        return replace(self, own_resamples=own, fixed_requests=True)

    def point(self, ws) -> tuple[np.ndarray, np.ndarray | None]:
        """(M, G) AL at the point, and (M, nB, G) per batch size when the curves are per batch."""
        if self.replayed_al is not None:
            return self.replayed_al, None
        if self.per_batch is None:
            return self._own_past(self._pooled_tokens(self.pooled), self.own), None
        by_batch = expected_tokens_by_gamma(extend_survival(self.per_batch, self.extra, self.reach), self.top)
        return mix_expected_tokens(by_batch, ws), by_batch

    def resampled(self, resamples: np.ndarray, mix_w: np.ndarray, row: np.ndarray) -> np.ndarray:
        """(S or 1, M, n, G) AL of each survival resample (row: its mix row)."""
        n = resamples.shape[0]
        if self.replayed is not None and self.fixed_requests:
            return np.broadcast_to(self.replayed_al[:, None, :], (self.replayed_al.shape[0], n,
                                                                   self.replayed_al.shape[1]))[None]
        if self.replayed is not None:
            return resampled_tokens(self.replayed, n)[None]  # every replay with the same draws
        if self.per_batch is None:
            own = None if self.own is None else self.own_resamples[np.arange(n) % self.own_resamples.shape[0]]
            return self._own_past(self._pooled_tokens(resamples), own)[None]
        # every batch size's curve shifted by the pooled resample's deviation
        shifted = monotone_survival(self.per_batch[None] + (resamples - self.pooled)[:, None, :])  # (n, nB, g)
        al_b_res = expected_tokens_by_gamma(extend_survival(shifted, self.extra, self.reach), self.top)
        return np.stack([mix_expected_tokens(al_b_res, w[row]) for w in mix_w])

    def _pooled_tokens(self, curves: np.ndarray) -> np.ndarray:
        return expected_tokens_by_gamma(extend_survival(curves, self.extra, self.reach), self.top)

    def _own_past(self, tokens: np.ndarray, own: np.ndarray | None) -> np.ndarray:
        """``tokens`` (M, ..., G) with the candidates past own_from from the probe's own curve."""
        if own is None:
            return tokens
        own_tokens = expected_tokens_by_gamma(extend_survival(own, self.top - own.shape[-1]), self.top)
        return np.concatenate([tokens[..., : self.own_from + 1], own_tokens[..., self.own_from + 1:]], axis=-1)


def _own_curve(running: RunningProbe | None, deployed: int) -> tuple:
    """(own, own_resamples, own_from) for _CurveTokens: a running probe's own curve when it
    is to price the candidates past the deployed γ, else none."""
    if running is None or running.own_survival is None:
        return None, None, 0
    return np.asarray(running.own_survival, dtype=float), np.asarray(running.own_resamples, dtype=float), deployed


def _mean_axis(tokens: _CurveTokens, a, resamples, mix_res, price: _Price, bs, ws, deployment: Deployment,
               deployed: int, speeds, mix_in_time: bool, nu, allowed, level: float):
    """(the ensemble, its spread, tail_only) on the mean objectives' axis; (None, None, None)
    without resamples. tail_only(): the ensemble without the sampling part — the point curve
    (or the replay's requests) for every resample — which says whether more drafts can settle
    a gain (model.decision)."""
    if resamples is None:
        return None, None, None
    speed_range = len(speeds) > 1  # a specialized_speedup range, spread over its bins
    priced = partial(_resampled_speedups, price=price, bs=bs, ws=ws, deployment=deployment,
                     deployed=deployed, speeds=speeds, reweight_mix=mix_in_time and speed_range, nu=nu,
                     tail_scale=one_step_error(tokens.pooled, tokens.reach))
    ensemble, spread = _ensemble(priced(tokens, resamples, mix_res), allowed, level, speed_range)
    return ensemble, spread, lambda: _ensemble(
        priced(tokens.without_sampling(), np.broadcast_to(a, resamples.shape), None), allowed, level, speed_range)[0]


def _resampled_speedups(tokens: _CurveTokens, resamples, mix_res, price: _Price, bs, ws, deployment: Deployment,
                        deployed: int, speeds, reweight_mix: bool, nu, tail_scale: float | None) -> np.ndarray:
    """(S, M, n, G) speedup of every survival resample, tail model and specialized speed;
    resample i is priced at mix row i mod m. ``tail_scale``: the pooled curve's one-step
    error, the unit of its tail errors (model.tail_evidence)."""
    n = resamples.shape[0]
    mix_w = ws[None, :] if mix_res is None else mix_res  # (m, nB)
    if reweight_mix:
        # The mix was measured in time at the deployed γ: at another specialized speedup
        # the same time shares hold other requests (w_B ∝ B·u_B / t_B(γ_d)).
        mix_w = request_weights_at_speedups(bs, mix_w, deployment, deployed, speeds)
    else:
        mix_w = np.broadcast_to(mix_w[None], (len(speeds),) + mix_w.shape)  # (S, m, nB)
    row = np.arange(n) % mix_w.shape[1]
    # past the observed γ, each resample also draws the tail models' error measured on real curves,
    # in units of how well they have tracked this curve's own positions (model.tail_evidence)
    g, top = tokens.pooled.size, tokens.top
    factors = al_factors(n, g, top, tail_scale) if top > g else 1.0
    al_res = np.clip(tokens.resampled(resamples, mix_w, row) * factors, 1.0, np.arange(top + 1) + 1.0)
    v_res = objective_weights(bs, mix_w, deployment.objective)
    tau_res = np.einsum("sgb,smb->smg", price.times, v_res)  # (S, m, G)
    ratio_res = (tau_res[..., :1] / tau_res)[:, row]  # (S, n, G)
    ratio_u_res = (tau_res[..., :1] / np.einsum("sgb,smb->smg", price.times_u, v_res))[:, row]
    return speedup_with_undrafted(al_res, ratio_res[:, None], ratio_u_res[:, None], nu)


def refusal(deployment: Deployment, gamma: int) -> str | None:
    """Why ``gamma`` cannot be deployed (the drafter's limits, the specialized path's), or None."""
    specialized = deployment.decode_backend == "latency_specialized"
    why = [r for r in (drafter_for(deployment.method).refusal(int(gamma)),
                       specialized_refusal(deployment.method, int(gamma)) if specialized else None) if r]
    return "; ".join(why) or None


def _admissible(deployment: Deployment, gammas) -> tuple[np.ndarray, list[str | None]]:
    """Which candidates can be deployed, and why not."""
    reasons = [refusal(deployment, int(gm)) for gm in gammas]
    return np.array([r is None for r in reasons]), reasons


@dataclass(frozen=True)
class _Spread:
    probability_best: np.ndarray  # (G,) share of the ensemble in which each is the best allowed
    low: np.ndarray  # (G,) the ensemble's (1 − level)/2 quantile
    high: np.ndarray  # (G,) the ensemble's (1 + level)/2 quantile


def _ensemble(samples: np.ndarray, allowed, level: float, speed_range: bool) -> tuple[np.ndarray, _Spread]:
    """(M·n, G) the ensemble the decision reads, and the spread the candidates show. With a
    specialized_speedup range, resample i runs at the speed of bin ⌊i·K/n⌋ (n/K each)."""
    if speed_range:
        n = samples.shape[2]
        bins = 1 + (np.arange(n) * SPECIALIZED_SPEEDUP_BINS) // n
        drawn = samples[bins, :, np.arange(n), :].transpose(1, 0, 2)
    else:
        drawn = samples[0]  # (M, n, G)
    n_gammas = drawn.shape[-1]
    ensemble = drawn.reshape(-1, n_gammas)
    best = np.argmax(np.where(allowed, ensemble, -np.inf), axis=1)
    q_lo, q_hi = (1 - level) / 2, (1 + level) / 2
    return ensemble, _Spread(np.bincount(best, minlength=n_gammas) / best.size,
                             np.quantile(ensemble, q_lo, axis=0), np.quantile(ensemble, q_hi, axis=0))


def _tokens_per_second(profile, tau: np.ndarray, speed_point: np.ndarray, deployment: Deployment):
    """Tokens/s in the objective's unit: speedup × the γ = 0 rate (a profile in seconds only)."""
    if not getattr(profile, "absolute", False):
        return None
    unit = tau[0] if per_user(deployment.objective) else tau[0] * deployment.tensor_parallel_size
    return speed_point * (1.0 / unit[0])


def _candidates(gammas, g: int, speed_point, spread: _Spread | None, tps, allowed, reasons, al_point) -> list[Candidate]:
    return [Candidate(
        gamma=int(gm),
        speedup=float(speed_point[i]),
        speedup_low=None if spread is None else float(spread.low[i]),
        speedup_high=None if spread is None else float(spread.high[i]),
        tokens_per_second=None if tps is None else float(tps[i]),
        probability_best=None if spread is None else float(spread.probability_best[i]),
        extrapolated=bool(gm > g),
        allowed=bool(allowed[i]),
        reason=reasons[i],
        expected_tokens=float(al_point[:, i].mean()),
    ) for i, gm in enumerate(gammas)]


def _model_error(observed_tps: float | None, profile, anchor: Anchor, al_point, price: _Price, ws, deployed: int,
                 nu) -> float | None:
    """The model's per-user tokens/s at the deployed γ against the observed, − 1 (whatever the
    objective); None without an observed rate, a profile in seconds, or when priced at it."""
    if observed_tps is None or not getattr(profile, "absolute", False) or anchor.source == OBSERVED:
        return None
    tau_int, tau_u_int = price.times[0] @ ws, price.times_u[0] @ ws
    model_tps = float(tokens_per_time(al_point[:, deployed].mean(), tau_int[deployed], tau_u_int[deployed], nu))
    return model_tps / observed_tps - 1.0


def _anchor(deployment: Deployment, observed_tps, observed_source, survival, per_batch, bs, ws, deployed: int,
            widths, elig, nu) -> tuple[Deployment, Anchor]:
    """The deployment with the anchor it is priced at (model.anchor): the observed rate when
    baseline_tokens_per_second is not configured and the window has the engine's latency."""
    anchor = configured_or_default(deployment)
    if anchor.source == DEFAULT:  # the configured model's and GPU's own default, not Kimi K3's
        deployment = replace(deployment, baseline_tokens_per_second=anchor.baseline_tokens_per_second)
    if anchor.source != DEFAULT or observed_tps is None or deployed > survival.size:
        return deployment, anchor
    if isinstance(observed_tps, Unpriceable):
        return deployment, replace(anchor, detail=observed_tps.why)
    if per_batch is None:
        tokens = float(expected_tokens_by_gamma(survival, deployed)[deployed])
    else:
        tokens = float(mix_expected_tokens(expected_tokens_by_gamma(per_batch, deployed), ws)[deployed])
    width = None if widths is None else [widths[deployed]]

    def model_rate_at(rate: float) -> float:
        at = replace(deployment, baseline_tokens_per_second=rate)
        cost = CostModel.for_deployment(at, clean_share=elig.share if elig else 1.0)
        drafted = float(cost.step_times([deployed], bs, None, width)[0] @ ws)
        undrafted = float(cost.step_times([deployed], bs, None, [1.0])[0] @ ws)
        return float(tokens_per_time(tokens, drafted, undrafted, nu))

    rate = solve_observed_rate(model_rate_at, float(observed_tps), deployment.baseline_tokens_per_second or 1.0)
    if rate is None:
        return deployment, replace(anchor, detail=f"the observed {observed_tps:.1f} tok/s is faster than the profile "
                                                  f"can model at any plain-decode rate")
    return (replace(deployment, baseline_tokens_per_second=rate),
            Anchor(rate, OBSERVED, observed_source or "observed latency"))


def _per_batch_curves(survival_by_batch, batch_sizes: np.ndarray, pooled: np.ndarray) -> np.ndarray | None:
    """(nB, g) curves over the mix's batch sizes: each one's own where given, else pooled
    (None when no batch size of the mix has its own)."""
    if survival_by_batch is None:
        return None
    if not isinstance(survival_by_batch, Mapping):
        raise ModelInputError("survival_by_batch: must be a {batch size: survival curve} mapping")
    curves = np.tile(pooled, (len(batch_sizes), 1))
    own = False
    for j, b in enumerate(batch_sizes.tolist()):
        curve = survival_by_batch.get(b)
        if curve is None:
            continue
        c = np.asarray(curve, dtype=float)
        if c.shape != pooled.shape:
            raise ModelInputError(f"survival_by_batch[{b}]: must have {pooled.size} values like the survival curve, "
                                  f"got {c.size}")
        check_survival_curve(c, f"survival_by_batch[{b}]", ModelInputError)
        curves[j] = c
        own = True
    return curves if own else None


def _model_error_warning(model_error: float | None, deployment: Deployment) -> str | None:
    """model_error beyond ±MODEL_ERROR_TOLERANCE: the speedups are priced on step times the
    engines do not have, and the two things that set them."""
    if model_error is None or abs(model_error) <= MODEL_ERROR_TOLERANCE:
        return None
    baseline = deployment.baseline_tokens_per_second
    cost = (f"draft_overhead ({deployment.draft_overhead:g} now: the {deployment.method} proposer's time per step)"
            if drafter_for(deployment.method).kind == FREE else f"draft_cost ({deployment.draft_cost:g} now)")
    return (f"the cost model misses the observed tokens/s at the deployed gamma by {model_error:+.1%} (beyond "
            f"±{MODEL_ERROR_TOLERANCE:.0%}): its speedups may be as far off. Measure the step costs "
            f"(`specdec calibrate plan`, then cost_profile = the table), or check baseline_tokens_per_second"
            + (f" ({baseline:g} now)" if baseline else "") + f" and {cost}")


def _deployable(final, deployed, bs, ws, price: _Price, al_point, al_by_batch, allowed, specialized,
                deployment: Deployment, nu) -> tuple[list | None, dict | None, LoadView]:
    """(the schedule, the fleet's speculative config, how the best γ moves over the mix's batch
    sizes) for the γ the fleet is to run. A schedule restarts engines like a γ change: it joins
    the deployable config only when γ changes anyway; otherwise it is reported as a suggestion
    (Recommendation.schedule)."""
    al_sched = al_point.mean(axis=0) if al_by_batch is None else al_by_batch.mean(axis=0).T  # (G,) or (G, nB)
    load = load_view(final, bs, ws, price.times[0], price.times_u[0], al_sched, allowed, specialized, nu)
    schedule = None
    if final > 0 and len(bs) > 1:
        schedule = gamma_schedule(load, bs, ws, price.times[0], al_sched, deployment.objective, deployment.min_gain,
                                  price.times_u[0], nu)
    return schedule, speculative_config(deployment, final, schedule if final != deployed else None), load
