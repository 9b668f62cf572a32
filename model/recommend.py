"""The γ recommendation for one route (docs/MODEL.md, Cost model; docs/REFERENCE.md, The tune-gamma JSON):
``recommend(inputs, deployment)``, its one input a model.route_inputs.RouteInputs.

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
The best expected γ: the best point speedup among allowed candidates (0 when nothing beats 1).
probability_best: the share of resamples × tail models (each resample at its own
specialized speedup) in which a candidate is the best allowed one.
decision: change / off / keep / probe / undecided over the same ensemble, by the ordered rules
of model.decision (one Decision object: which γ the JSON's recommended_gamma is, per kind),
with the evidence that would change it in decision_reason; without resamples there is no
such probability: "keep". The deployable config is for the γ the fleet is to run: the
recommended one on change / off / probe (a probe's fleet stays at the deployed γ or takes
the sure step; the probe's config is the probe's), else the deployed γ.
With ``survival_by_batch`` (a curve a_{B,1..γ} per batch size of the mix, from specdec's
plugin) AL(γ) is the mix's AL_mix(γ) = Σ_B w_B·AL_B(γ) (model.speedup), each batch size's
curve extended past γ by the tail models; batch sizes without a curve use the pooled
one. Resamples shift every batch size's curve by the pooled resample's deviation (the
per-batch counts carry no resamples of their own), clipped to [0, 1] and non-increasing.
A ``num_speculative_tokens_per_batch_size`` schedule (per batch size the best K ≤ γ; on the
specialized path only γ or 0) is suggested when it beats the fixed γ by more than min_gain
over the mix; it enters the deployable config only together with a change of γ.

"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from acceptance.definitions import acceptance_length_by_gamma
from acceptance.observed_rate import SegmentRate
from acceptance.route_estimate import LOGGED_LOAD
from acceptance.windows import SCRAPE_INTERVALS

from .anchor import (DEFAULT, OBSERVED, Anchor, Unpriceable, configured_or_default, priced_rate, profile_figures,
                     solve_observed_rate)
from .curve_tokens import CurveTokens, own_curve
from .decision import Decision, Gain, Priced, SpecializedPricing, decide, gain_of
from .decision_kind import DecisionKind
from .deployed_speedup import DeployedSpeedup, deployed_speedup
from .deployment import PERCENTILE_OBJECTIVES, Deployment, per_user
from .drafters import FREE, drafter_for
from .figures_needed import default_roofline_figures, figures_needed, names_default_drafter
from .load import LoadView, MixPrice, gamma_schedule, load_view
from .model_error_spread import model_error_beyond_noise, model_error_factors
from .percentile_objective import axis_text, percentile_speedups
from .probe import ProbeInputs
from .profiles import MeasuredShapeProfile, Profile, make_profile
# importers of model.recommend keep these
from .recommendation import Candidate as Candidate, Recommendation as Recommendation
from .route_inputs import CheckedInputs, RouteInputs, check_inputs
from .specialized import specialized_refusal
from .speedup import (CostModel, mix_acceptance_length, objective_weights, request_weights_from_time_shares,
                      request_weights_at_speedups, projected_speedup, tokens_per_time)
from .tail_evidence import al_factors, one_step_error
from .speculative_keys import UnknownMethodKeys, gamma_refusal, unknown_method_keys
from .vllm_config import command_line, replay_config, schedule_dropped, speculative_config, vllm_method

# Beyond this the cost model is off by more than the gains it ranks (a few %): say so and what to do.
MODEL_ERROR_TOLERANCE = 0.15

# Bins of a specialized_speedup range the resamples are spread over (uniform prior).
SPECIALIZED_SPEEDUP_BINS = 8


def recommend(inputs: RouteInputs, deployment: Deployment) -> Recommendation:
    """Recommend γ for one route (module docstring; ``inputs``: model.route_inputs); deterministic —
    resamples, tail models and specialized speedup bins are spread in a fixed order."""
    checked = check_inputs(inputs, deployment)
    deployment, anchor = _anchored(checked, deployment)
    pricing = _pricing(checked, deployment, anchor)
    outcome = _outcome(checked, pricing)
    decision = decide(_priced(checked, pricing, outcome))
    return _recommendation(checked, pricing, outcome, decision)


# ----------------------------------------------------------------- recommend(), step by step


@dataclass(frozen=True, eq=False)
class _Pricing:
    """Every candidate's step times and AL under the anchored deployment."""

    deployment: Deployment  # anchored (model.anchor)
    profile: Profile  # the step-time profile
    model: CostModel
    speeds: list[float]  # the specialized speedup's point, then its bins (one entry off the path)
    price: _Price
    tokens: CurveTokens
    al_point: np.ndarray  # (M, G) AL of every tail model at the point
    al_by_batch: np.ndarray | None  # (M, nB, G) per batch size when the curves are per batch
    allowed: np.ndarray  # (G,)
    refusals: list[str | None]  # (G,)
    anchor: Anchor  # the plain-decode rate priced at, and its source
    model_error: float | None = None  # the model's tok/s at the deployed γ against the observed, − 1
    deployed_measured: DeployedSpeedup | None = None  # the observed rate over the user's plain decode


@dataclass(frozen=True, eq=False)
class _Outcome:
    """The candidates' speedups: at the point, in tok/s, and over the ensemble."""

    speedup: np.ndarray  # (G,)
    tokens_per_second: np.ndarray | None  # (G,) in the objective's unit (None: a relative profile)
    ensemble: np.ndarray | None  # (N, G) what the decision reads
    spread: _Spread | None  # what the candidates show
    tail_only: Callable[[], np.ndarray] | None
    percentile: bool  # a percentile objective: the requests' doubt, no probe


def _pricing(checked: CheckedInputs, deployment: Deployment, anchor: Anchor) -> _Pricing:
    profile = make_profile(deployment)
    elig = checked.eligibility
    model = CostModel.for_deployment(deployment, clean_share=elig.share if elig else 1.0, profile=profile)
    speeds = specialized_speeds(deployment) if checked.specialized else [deployment.specialized_speedup_point]
    models = [model] * len(speeds)
    if isinstance(profile, MeasuredShapeProfile) and deployment.verify_cost is not None and not checked.specialized:
        # the measured slope's doubt: resample i prices at the slope of bin ⌊i·K/n⌋ (as a specialized range's)
        slopes = deployment.verify_cost.slope_bins()
        models = [model] + [replace(model, profile=profile.with_slope(b)) for b in slopes]
        speeds = speeds * len(models)
    price = price_steps(models, checked.gammas, checked.batch_sizes, checked.weights, speeds, checked.widths,
                   checked.undrafted_share, deployment.objective)
    # the law of draft lengths, when known, is extrapolated apart from acceptance (extend_survival)
    given_reach = checked.given.draft_reach
    reach = None if given_reach is None or checked.specialized else np.asarray(given_reach, dtype=float)
    tokens = CurveTokens(checked.survival, checked.per_batch, checked.replayed, checked.replayed_al, reach,
                         checked.top, *own_curve(checked.given.running_probe, checked.deployed))
    al_point, al_by_batch = tokens.point(checked.weights)
    allowed, refusals = _admissible(deployment, checked.gammas)
    pricing = _Pricing(deployment, profile, model, speeds, price, tokens, al_point, al_by_batch, allowed, refusals,
                       anchor)
    return replace(pricing, model_error=_model_error(checked, pricing),
                   deployed_measured=_deployed_speedup(checked, pricing))


def _outcome(checked: CheckedInputs, pricing: _Pricing) -> _Outcome:
    """The point speedups and the ensemble: on a percentile objective a percentile of the
    per-request rates (model.percentile_objective), whose doubt is the requests' and not the
    positions a probe measures; else the mean objectives' (``_mean_axis``)."""
    deployment, price, nu = pricing.deployment, pricing.price, checked.undrafted_share
    n_res = None if checked.resamples is None else len(checked.resamples)
    if deployment.objective in PERCENTILE_OBJECTIVES:
        speed_point, tps, samples = percentile_speedups(checked.given.requests, price.ratio[0], price.ratio_u[0], nu,
                                                        deployment.objective, checked.deployed, n_res)
        ensemble, spread = (None, None) if samples is None else _ensemble(samples, pricing.allowed, checked.level,
                                                                          False)
        return _Outcome(speed_point, tps, ensemble, spread, None, True)
    speed_point = projected_speedup(pricing.al_point, price.ratio[0], price.ratio_u[0], nu).mean(axis=0)
    tps = _tokens_per_second(pricing.profile, price.tau, speed_point, deployment)
    ensemble, spread, tail_only = _mean_axis(checked, pricing)
    return _Outcome(speed_point, tps, ensemble, spread, tail_only, False)


def _priced(checked: CheckedInputs, pricing: _Pricing, outcome: _Outcome) -> Priced:
    """What the decision rules read (model.decision)."""
    deployment, price, ensemble = pricing.deployment, pricing.price, outcome.ensemble
    probe_inputs = None
    warning = _model_error_warning(pricing.model_error, deployment)
    if ensemble is not None:
        assert checked.resamples is not None  # an ensemble is priced from the resamples
        probe_inputs = ProbeInputs(
            ensemble, outcome.speedup, pricing.allowed, pricing.al_point.mean(axis=0), price.tau[0],
            1.0 + checked.resamples[:, :min(checked.deployed, checked.observed)].sum(axis=1), checked.observed,
            rate_row_cv=_rate_row_cv(checked) if warning else None)
    return Priced(
        deployment=deployment, deployed=checked.deployed, observed=checked.observed, speedup=outcome.speedup,
        allowed=pricing.allowed, refusals=pricing.refusals, ensemble=ensemble, level=checked.level,
        tail_only=outcome.tail_only, traffic=checked.given.traffic,
        joined_probe=None if outcome.percentile else checked.given.running_probe, probe_inputs=probe_inputs,
        specialized=None if outcome.percentile or not checked.specialized else _specialized_pricing(checked, pricing),
        figures_needed=tuple(figures_needed(deployment, pricing.anchor,
                                            undrafted_known=checked.given.undrafted_token_share is not None)),
        model_error_warning=warning,
        model_error=None if outcome.percentile else _speedup_error(pricing),
        deployed_measured=pricing.deployed_measured,
        measured_upto=max((checked.deployed, *checked.given.measured_gammas)
                          + (() if checked.given.running_probe is None else (checked.given.running_probe.gamma,))),
        segment_rates=() if outcome.percentile else _rates_at_route_mix(checked, pricing))


def _rates_at_route_mix(checked: CheckedInputs, pricing: _Pricing) -> tuple[SegmentRate, ...]:
    """Each measured γ's rate carried from its segment's own batch mix to the route's, so that
    two segments compare at one mix (a probe's engine runs its own batches, and a per-user rate
    moves with the batch more than with γ): r · ITL(γ, own mix) / ITL(γ, route mix), the mean
    inter-token latency the cost model's step times t_B at that γ give each mix — the own
    mix's engine time shares u_B turned into request weights w_B ∝ u_B·B / t_B as the route's
    own were (model.speedup.request_weights_from_time_shares), ITL = Σ w_B·t_B. It rests on the model's batch dependence at that γ (verify and draft included:
    a model that misses the verify cost carries some of that miss across far-apart mixes, which
    is why the reason shows the factor). A segment whose mix is not known is left out."""
    out = []
    for rate in checked.given.segment_rates:
        if rate.batch_mix is None or rate.gamma >= len(checked.gammas):
            continue
        own_b = np.array([b for b, _ in rate.batch_mix])
        at = np.array([rate.gamma])
        width = None if checked.widths is None else np.asarray(checked.widths)[at]
        # its engine time shares as request weights, as the route's own were made (batch_mix_from_time_shares)
        own_w = request_weights_from_time_shares(own_b, [u for _, u in rate.batch_mix], pricing.deployment, rate.gamma)
        own = float(pricing.model.step_times(at, own_b, pricing.speeds[0], width)[0] @ own_w)
        route = float(pricing.model.step_times(at, checked.batch_sizes, pricing.speeds[0], width)[0]
                      @ (checked.weights / checked.weights.sum()))
        factor = own / route
        out.append(replace(rate, tokens_per_second=rate.tokens_per_second * factor, mix_factor=factor))
    return tuple(out)


def _rate_row_cv(checked: CheckedInputs) -> float | None:
    """One engine's per-user rate over a scrape interval, its coefficient of variation, from the
    deployed segment's: the spread of the window's rate times √(rows · engines) — the engines'
    rates taken as independent, which overstates it where their traffic moves together (a
    longer probe, never a shorter one). None without a block-bootstrapped spread over scrape
    intervals (per-request rows, or too few rows for one)."""
    spread, traffic = checked.given.observed_rate_spread, checked.given.traffic
    if spread is None or spread.unit != SCRAPE_INTERVALS or traffic is None or not traffic.engines:
        return None
    return float(np.std(spread.factors) * np.sqrt(spread.rows * traffic.engines))


def _specialized_pricing(checked: CheckedInputs, pricing: _Pricing) -> SpecializedPricing:
    """The specialized path priced at any speedup, as the candidates are (model.decision.rules.specialized)."""
    bs, ws, deployment = checked.batch_sizes, checked.weights, pricing.deployment
    v = objective_weights(bs, ws, deployment.objective)
    fixed, scaled = pricing.model.speedup_terms(checked.gammas, bs)  # t = fixed + scaled / s
    return SpecializedPricing(
        step_time_terms=(fixed @ v, scaled @ v), expected_tokens=pricing.al_point, step_time=pricing.price.tau[0],
        time_shares=ws * pricing.price.times[0, checked.deployed] / bs, batch_sizes=bs,
        clean_share=pricing.model.clean_share, measured=checked.given.speedup_measured,
        latency_from_running=checked.given.observed_latency_source == LOGGED_LOAD)


def _recommendation(checked: CheckedInputs, pricing: _Pricing, outcome: _Outcome, decision: Decision
                    ) -> Recommendation:
    """The Recommendation every view reads: the decision, its candidates, and the config that
    deploys the γ the fleet is to run. An undecided one deploys nothing, though its load view
    shows the γ it would have run; no config names a default drafter."""
    deployment, deployed = pricing.deployment, checked.deployed
    schedule, spec_cfg, load = _deployable(checked, pricing, (decision.withheld or decision).fleet_gamma)
    if decision.withheld is not None:
        schedule = spec_cfg = None
    drafter_unknown = names_default_drafter(list(decision.figures_needed))
    model_error, anchor = pricing.model_error, pricing.anchor
    return Recommendation(
        objective=deployment.objective, cost_profile=pricing.profile.name,
        interval_level=checked.level, deployed_gamma=deployed,
        decided=decision,
        candidates=_candidates(checked, pricing, outcome), model_error=model_error,
        vllm_speculative_config=None if drafter_unknown else spec_cfg,
        vllm_command_line=None if drafter_unknown or decision.withheld else command_line(deployment, spec_cfg),
        speculative_keys_unknown=_keys_unknown(deployment, None if drafter_unknown else spec_cfg, decision),
        replay_config=None if drafter_unknown else replay_config(deployment, checked.survival),
        specialized_eligibility=checked.eligibility,
        schedule=schedule, load=load,
        verify_widths=None if checked.widths is None else tuple(float(w) for w in checked.widths),
        acceptance_model="replay" if checked.replayed is not None else "survival",
        replayed_requests=None if checked.replayed is None else int(checked.replayed.shape[1]),
        anchor=anchor,
        profile_figures=profile_figures(deployment, anchor),
        gain=_gain(checked, pricing, outcome, decision),
        model_error_warning=_model_error_warning(model_error, deployment),
        deployed_speedup_measured=pricing.deployed_measured,
        ensemble=outcome.ensemble,
        objective_axis=axis_text(deployment.objective),
    )


def _keys_unknown(deployment: Deployment, spec_cfg: dict[str, object] | None, decision: Decision
                  ) -> UnknownMethodKeys | None:
    """The method's own keys a written deploy or probe line lacks, speculative_keys not given."""
    probe_line = decision.probe is not None and decision.probe.speculative_config is not None
    if spec_cfg is None and not probe_line:
        return None
    return unknown_method_keys(deployment.method, deployment.speculative_keys is not None)


def _gain(checked: CheckedInputs, pricing: _Pricing, outcome: _Outcome, decision: Decision) -> Gain | None:
    """The recommended γ's gain over the deployed one: measured where the engines' measurement
    turned speculation off (model.deployed_speedup), else the table's over its ensemble."""
    if decision.measured is not None and decision.kind == DecisionKind.OFF and pricing.deployed_measured is not None:
        return Gain(*pricing.deployed_measured.off_gain())
    between = decision.measured_between
    if between is not None and between.faster == decision.recommended_gamma and between.slower == checked.deployed:
        return Gain(between.gain, between.low, between.high)
    return gain_of(decision.recommended_gamma, checked.deployed, outcome.speedup, outcome.ensemble, checked.level)


def specialized_speeds(deployment: Deployment) -> list[float]:
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


def price_steps(models: Sequence[CostModel], gammas: np.ndarray, bs: np.ndarray, ws: np.ndarray, speeds: Sequence[float],
           widths: np.ndarray | None, nu: float | None, objective: str) -> _Price:
    """Step times of each variant: model i at specialized speed i (a range's bins, or a measured
    slope's, model.verify_cost), the point first."""
    times = np.stack([model.step_times(gammas, bs, sp, widths) for model, sp in zip(models, speeds)])
    # a step that drafted nothing verifies one token (only read when nu is set)
    times_u = times if nu is None else np.stack([model.step_times(gammas, bs, sp, np.ones(len(gammas)))
                                                  for model, sp in zip(models, speeds)])
    v = objective_weights(bs, ws, objective)
    tau = times @ v
    return _Price(times, times_u, tau, tau[:, :1] / tau, tau[:, :1] / (times_u @ v))


def _mean_axis(checked: CheckedInputs, pricing: _Pricing
               ) -> tuple[np.ndarray | None, _Spread | None, Callable[[], np.ndarray] | None]:
    """(the ensemble, its spread, tail_only) on the mean objectives' axis; (None, None, None)
    without resamples. tail_only(): the ensemble without the sampling part — the point curve
    (or the replay's requests) for every resample — which says whether more drafts can settle
    a gain (model.decision). Both carry the model's error at the measured deployed γ into the
    other candidates (model.model_error_spread), which no number of drafts narrows."""
    resamples, tokens, allowed, level = checked.resamples, pricing.tokens, pricing.allowed, checked.level
    if resamples is None:
        return None, None, None
    speed_range = len(pricing.speeds) > 1  # a specialized_speedup range, spread over its bins
    widen = model_error_factors(resamples.shape[0], checked.gammas.size, (0, checked.deployed),
                                _speedup_error(pricing))
    resampled = partial(_resampled_speedups, checked, pricing,
                        reweight_mix=checked.given.mix_in_time and speed_range and checked.specialized,
                        tail_scale=one_step_error(tokens.pooled, tokens.reach))

    def priced(tokens_: CurveTokens, resamples_: np.ndarray, mix_res: np.ndarray | None) -> np.ndarray:
        widened: np.ndarray = resampled(tokens_, resamples_, mix_res) * widen  # (S, M, n, G) × (n, G)
        return widened

    ensemble, spread = _ensemble(priced(tokens, resamples, checked.mix_resamples), allowed, level, speed_range)
    return ensemble, spread, lambda: _ensemble(
        priced(tokens.without_sampling(), np.broadcast_to(checked.survival, resamples.shape), None), allowed, level,
        speed_range)[0]


def _resampled_speedups(checked: CheckedInputs, pricing: _Pricing, tokens: CurveTokens, resamples: np.ndarray,
                        mix_res: np.ndarray | None, *, reweight_mix: bool, tail_scale: float | None) -> np.ndarray:
    """(S, M, n, G) speedup of every survival resample, tail model and specialized speed;
    resample i is priced at mix row i mod m. ``tail_scale``: the pooled curve's one-step
    error, the unit of its tail errors (model.tail_evidence)."""
    n, bs, ws, price, speeds = resamples.shape[0], checked.batch_sizes, checked.weights, pricing.price, pricing.speeds
    mix_w = ws[None, :] if mix_res is None else mix_res  # (m, nB)
    if reweight_mix:
        # The mix was measured in time at the deployed γ: at another specialized speedup
        # the same time shares hold other requests (w_B ∝ B·u_B / t_B(γ_d)).
        mix_w = request_weights_at_speedups(bs, mix_w, pricing.deployment, checked.deployed, speeds)
    else:
        mix_w = np.broadcast_to(mix_w[None], (len(speeds),) + mix_w.shape)  # (S, m, nB)
    row = np.arange(n) % mix_w.shape[1]
    # past the observed γ, each resample also draws the tail models' error measured on real curves,
    # in units of how well they have tracked this curve's own positions (model.tail_evidence)
    g, top = tokens.pooled.size, tokens.top
    factors = al_factors(n, g, top, tail_scale) if top > g else 1.0
    al_res = np.clip(tokens.resampled(resamples, mix_w, row) * factors, 1.0, np.arange(top + 1) + 1.0)
    v_res = objective_weights(bs, mix_w, pricing.deployment.objective)
    tau_res = np.einsum("sgb,smb->smg", price.times, v_res)  # (S, m, G)
    ratio_res = (tau_res[..., :1] / tau_res)[:, row]  # (S, n, G)
    ratio_u_res = (tau_res[..., :1] / np.einsum("sgb,smb->smg", price.times_u, v_res))[:, row]
    return projected_speedup(al_res, ratio_res[:, None], ratio_u_res[:, None], checked.undrafted_share)


def refusal(deployment: Deployment, gamma: int) -> str | None:
    """Why ``gamma`` cannot be deployed (the drafter's limits, the specialized path's), or None."""
    specialized = deployment.decode_backend == "latency_specialized"
    why = [r for r in (drafter_for(deployment.method).refusal(int(gamma)),
                       specialized_refusal(deployment.method, int(gamma)) if specialized else None,
                       gamma_refusal(deployment.speculative_keys, int(gamma))) if r]
    return "; ".join(why) or None


def _admissible(deployment: Deployment, gammas: Iterable[int]) -> tuple[np.ndarray, list[str | None]]:
    """Which candidates can be deployed, and why not."""
    reasons = [refusal(deployment, int(gm)) for gm in gammas]
    return np.array([r is None for r in reasons]), reasons


@dataclass(frozen=True)
class _Spread:
    probability_best: np.ndarray  # (G,) share of the ensemble in which each is the best allowed
    low: np.ndarray  # (G,) the ensemble's (1 − level)/2 quantile
    high: np.ndarray  # (G,) the ensemble's (1 + level)/2 quantile


def _ensemble(samples: np.ndarray, allowed: npt.ArrayLike, level: float, speed_range: bool
              ) -> tuple[np.ndarray, _Spread]:
    """(M·n, G) the ensemble the decision reads, and the spread the candidates show. With a
    specialized_speedup range, resample i runs at the speed of bin ⌊i·K/n⌋ (n/K each)."""
    if speed_range:
        n = samples.shape[2]
        bins = 1 + (np.arange(n) * (samples.shape[0] - 1)) // n
        drawn = samples[bins, :, np.arange(n), :].transpose(1, 0, 2)
    else:
        drawn = samples[0]  # (M, n, G)
    n_gammas = drawn.shape[-1]
    ensemble = drawn.reshape(-1, n_gammas)
    best = np.argmax(np.where(allowed, ensemble, -np.inf), axis=1)
    q_lo, q_hi = (1 - level) / 2, (1 + level) / 2
    return ensemble, _Spread(np.bincount(best, minlength=n_gammas) / best.size,
                             np.quantile(ensemble, q_lo, axis=0), np.quantile(ensemble, q_hi, axis=0))


def _tokens_per_second(profile: Profile, tau: np.ndarray, speed_point: np.ndarray, deployment: Deployment
                       ) -> np.ndarray | None:
    """Tokens/s in the objective's unit: speedup × the γ = 0 rate (a profile in seconds only)."""
    if not getattr(profile, "absolute", False):
        return None
    unit = tau[0] if per_user(deployment.objective) else tau[0] * deployment.tensor_parallel_size
    tokens_per_second: npt.NDArray[np.float64] = speed_point * (1.0 / unit[0])
    return tokens_per_second


def _candidates(checked: CheckedInputs, pricing: _Pricing, outcome: _Outcome) -> list[Candidate]:
    spread, tps, speed_point = outcome.spread, outcome.tokens_per_second, outcome.speedup
    return [Candidate(
        gamma=int(gm),
        speedup=float(speed_point[i]),
        speedup_low=None if spread is None else float(spread.low[i]),
        speedup_high=None if spread is None else float(spread.high[i]),
        tokens_per_second=None if tps is None else float(tps[i]),
        probability_best=None if spread is None else float(spread.probability_best[i]),
        extrapolated=bool(gm > checked.observed),
        allowed=bool(pricing.allowed[i]),
        reason=pricing.refusals[i],
        expected_tokens=float(pricing.al_point[:, i].mean()),
    ) for i, gm in enumerate(checked.gammas)]


def _observed_to_compare(checked: CheckedInputs, pricing: _Pricing) -> float | None:
    """The engines' observed rate where it can be set beside the model's: the profile is in
    seconds and the anchor is not that rate itself; else None."""
    if not getattr(pricing.profile, "absolute", False) or pricing.anchor.source == OBSERVED:
        return None
    return checked.given.observed_tokens_per_second


def _model_rate(checked: CheckedInputs, pricing: _Pricing, gamma: int) -> float:
    """The model's per-user tokens/s at candidate ``gamma`` over the route's batch mix
    (whatever the objective): its AL over the mix's step time, undrafted steps at theirs."""
    price, ws = pricing.price, checked.weights
    tau_int, tau_u_int = price.times[0] @ ws, price.times_u[0] @ ws
    return float(tokens_per_time(pricing.al_point[:, gamma].mean(), tau_int[gamma], tau_u_int[gamma],
                                 checked.undrafted_share))


def _model_error(checked: CheckedInputs, pricing: _Pricing) -> float | None:
    """The model's per-user tokens/s at the deployed γ against the observed, − 1; None where
    they are not comparable."""
    observed = _observed_to_compare(checked, pricing)
    return None if observed is None else _model_rate(checked, pricing, checked.deployed) / observed - 1.0


def _speedup_error(pricing: _Pricing) -> float | None:
    """The model's error on the speedup at the deployed γ: its rate error where the plain
    decode is the user's own, so that both sides of the measured speedup are the engines'
    (model.deployed_speedup); None elsewhere — over a default or observed anchor the rate's
    error is the anchor's as much as the table's — and where the observed rate has no interval
    from the window's rows (a typed curve, a context band, a source without latency per row):
    its own sampling noise is in that error too, and is taken out (model.model_error_spread)."""
    measured, error = pricing.deployed_measured, pricing.model_error
    if measured is None or error is None or measured.spread is None:
        return None
    return model_error_beyond_noise(error, measured.spread.factors)


def _deployed_speedup(checked: CheckedInputs, pricing: _Pricing) -> DeployedSpeedup | None:
    """The engines' own rate at the deployed γ over the user's plain decode at the route's
    batch mix (model.deployed_speedup), where the two are comparable: on the stock path, at
    the window's own γ."""
    observed = _observed_to_compare(checked, pricing)
    # the window's own γ: its curve's length, or below it the deployed segment a probe's curve
    # (running or ended) was joined to — the observed rate is that segment's either way
    probe = checked.given.running_probe
    own = checked.deployed if probe is not None and probe.gamma == checked.observed else checked.observed
    if observed is None or checked.specialized or checked.deployed != own:
        return None
    above_one = bool(np.any((checked.batch_sizes > 1) & (checked.weights > 0)))
    profile = pricing.deployment.cost_profile
    carried_by = profile if above_one and profile in ("flat", "roofline") else None
    rests_on = default_roofline_figures(pricing.deployment) if carried_by == "roofline" else []
    measured = deployed_speedup(checked.deployed, observed, _model_rate(checked, pricing, 0), pricing.anchor.source,
                                carried_by, rests_on)
    return None if measured is None else measured.with_spread(checked.given.observed_rate_spread, checked.level,
                                                              pricing.deployment.min_gain)


def _anchored(checked: CheckedInputs, deployment: Deployment) -> tuple[Deployment, Anchor]:
    """The deployment with the anchor it is priced at (model.anchor): the observed rate when
    baseline_tokens_per_second is not configured and the window has the engine's latency."""
    given, deployed, nu = checked.given, checked.deployed, checked.undrafted_share
    observed_tps = priced_rate(given.observed_tokens_per_second, given.undrafted_token_share, nu)
    anchor = configured_or_default(deployment)
    if anchor.source == DEFAULT:  # the configured model's and GPU's own default, not Kimi K3's
        deployment = replace(deployment, baseline_tokens_per_second=anchor.baseline_tokens_per_second)
    if anchor.source != DEFAULT or observed_tps is None or deployed > checked.observed:
        return deployment, anchor
    if isinstance(observed_tps, Unpriceable):
        return deployment, replace(anchor, detail=observed_tps.why)
    bs, ws, elig = checked.batch_sizes, checked.weights, checked.eligibility
    if checked.per_batch is None:
        tokens = float(acceptance_length_by_gamma(checked.survival, deployed)[deployed])
    else:
        tokens = float(mix_acceptance_length(acceptance_length_by_gamma(checked.per_batch, deployed), ws)[deployed])
    width = None if checked.widths is None else [checked.widths[deployed]]

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
    defaults = [k.strip() for f in figures_needed(deployment, None) for k in f.key.split(",")]
    return (replace(deployment, baseline_tokens_per_second=rate),
            Anchor(rate, OBSERVED, given.observed_latency_source or "observed latency", deployed, tuple(defaults)))


def _model_error_warning(model_error: float | None, deployment: Deployment) -> str | None:
    """model_error beyond ±MODEL_ERROR_TOLERANCE: the speedups are priced on step times the
    engines do not have, and the two things that set them."""
    if model_error is None or abs(model_error) <= MODEL_ERROR_TOLERANCE:
        return None
    cost = (f"draft_overhead ({deployment.draft_overhead:g} now: the {deployment.method} proposer's time per step)"
            if drafter_for(deployment.method).kind == FREE else f"draft_cost ({deployment.draft_cost:g} now)")
    head = (f"the cost model misses the observed tokens/s at the deployed gamma by {model_error:+.1%} (beyond "
            f"±{MODEL_ERROR_TOLERANCE:.0%}): its speedups may be as far off. ")
    if deployment.cost_profile not in ("flat", "roofline"):  # a measured table: its seconds, not a rate, set the steps
        return (head + f"The measured table {deployment.cost_profile} may not be these engines' step costs: measure "
                       f"them again on this deployment (`specdec calibrate plan`), or check {cost}")
    baseline = deployment.baseline_tokens_per_second
    return (head + "Measure the step costs (`specdec calibrate plan`, then cost_profile = the table), or check "
                   "baseline_tokens_per_second" + (f" ({baseline:g} now)" if baseline else "") + f" and {cost}")


def _deployable(checked: CheckedInputs, pricing: _Pricing, final: int
                ) -> tuple[list[tuple[int, int, int]] | None, dict[str, object] | None, LoadView]:
    """(the schedule, the fleet's speculative config, how the best γ moves over the mix's batch
    sizes) for the γ the fleet is to run, ``final``. A schedule restarts engines like a γ change:
    it joins the deployable config only when γ changes anyway; otherwise it is reported as a
    suggestion (Recommendation.schedule)."""
    price, deployment, al_by_batch = pricing.price, pricing.deployment, pricing.al_by_batch
    al_sched = pricing.al_point.mean(axis=0) if al_by_batch is None else al_by_batch.mean(axis=0).T  # (G,) or (G, nB)
    mix = MixPrice(checked.batch_sizes, checked.weights, price.times[0], price.times_u[0], al_sched,
                   checked.undrafted_share)
    load = load_view(final, mix, pricing.allowed, checked.specialized)
    method = vllm_method(deployment.method)
    if load.schedule is not None and schedule_dropped(method):  # vLLM would run the fixed γ: no schedule offered
        load = replace(load, schedule=None, schedule_dropped_for=method)
    schedule = None
    if final > 0 and len(mix.batch_sizes) > 1:
        schedule = gamma_schedule(load, mix, deployment.objective, deployment.min_gain)
    deployed = checked.deployed
    return schedule, speculative_config(deployment, final, schedule if final != deployed else None), load
