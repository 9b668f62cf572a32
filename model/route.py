"""A route's recommendation from its estimate: the window's extras turned into recommend()'s inputs.

``recommend_route(route, deployment, probe=)`` prices a
``acceptance.route_estimate.RouteEstimate`` and what its window holds for a probe
(``model.probe.evidence.ProbeEvidence``) under a deployment: the batch time shares u_B
become request weights w_B (and their Dirichlet resamples become resampled weights) under
THIS deployment's step times, the specialized path's clean share comes from the plugin's
steps or the iteration-token histogram, each batch size of the mix takes its plugin bucket's
own curve when the bucket holds enough drafts, and everything goes to
``model.recommend.recommend``. One way for tune-gamma and the what-if (which changes the
deployment or the batch time shares). On the specialized path, a window whose deployed
segment and running probe both keep their own latency measures the specialized speedup
(model.probe.measured_speedup); when it does, that interval is priced instead of the
configured specialized_speedup — and in later windows too, from the window in which the
probe last ran (model.probe.lookback).

``drafts_more_needed`` is the one "more data" figure of a tuning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from acceptance.counts import mean_draft_length
from acceptance.estimates import AcceptanceEstimate, drafts_needed
from acceptance.route_estimate import LOGGED_LOAD, RouteEstimate, survival_by_batch_size, time_share_resamples
from acceptance.step_replay import StepSequence

from .context_bands import context_view, with_context
from .sampling_split import sampling_view
from .engine_cost_check import with_engine_cost
from .deployment import Deployment
from .probe import RunningProbe
from .probe.evidence import NO_PROBE, ProbeEvidence, ProbeLatency
from .probe.running import ProbeSegment
from .recommend import Recommendation, recommend
from .route_inputs import RouteInputs
from .profiles import make_profile
from .specialized import route_eligibility
from .decision_kind import DecisionKind
from .verify_cost import with_verify_cost
from .probe.measured_speedup import (MEASURE_RESAMPLES, MeasuredSpeedup, SegmentLatency, SegmentShares, measurable,
                                   measure_specialized_speedup)
from .speedup import batch_mix_from_time_shares, normalise_batch_mix, request_weights_from_time_shares

# Half-width of the 90% interval of the mean acceptance length below which a window is
# precise enough to rank γ; used to say how many more drafts a thin window needs.
DECIDABLE_AL_HALFWIDTH = 0.05


@dataclass(frozen=True)
class RouteRecommendation:
    """A recommendation and the two inputs derived for it that views show."""

    recommendation: Recommendation
    batch_mix: dict[int, float] | None  # request-weighted w_B the model used (None: batch 1)
    survival_by_batch: dict[int, list[float]] | None  # per-batch curves the model used


def recommend_route(route: RouteEstimate, deployment: Deployment, *, probe: ProbeEvidence = NO_PROBE,
                    batch_time_shares: dict[int, float] | None, level: float = 0.9, seed: int = 0,
                    measure_speedup: bool = True, by_parts: bool = True) -> RouteRecommendation:
    """The recommendation for ``route`` under ``deployment``; ``probe``: what the route's window
    holds for a probe (none: a curve priced alone, or a context band); ``batch_time_shares``: the u_B to
    price (the route's own, ``route.batch_time_shares``, or a what-if's; None: batch 1);
    ``measure_speedup``: a probe's measured specialized speedup replaces the deployment's
    (False: a what-if that sets the figure itself prices it). A route whose requests say their
    context is priced at it (unless context_tokens is set) and, with ``by_parts``, band by band
    (model.context_bands) and its greedy and sampled requests apart, or for a route without
    per-request rows what its curve suggests of a mix (model.sampling_split); a part itself is
    priced without (False)."""
    estimate, gamma = route.estimate, route.gamma
    if route.context is not None:
        deployment = with_context(deployment, route.context.tokens)
    deployment = with_engine_cost(deployment, route.engine_cost)
    deployment, measured = (_measured_speedup(route, probe, deployment, batch_time_shares, seed) if measure_speedup
                            else (deployment, None))
    deployment = _with_verify_cost(route, deployment, batch_time_shares, level)
    batch_mix = mix_resamples = None
    if batch_time_shares:
        batch_mix = batch_mix_from_time_shares(batch_time_shares, deployment, gamma)
        if estimate.has_interval and len(batch_mix) > 1:
            sizes, drawn = time_share_resamples(batch_time_shares, max(estimate.n_blocks, route.effective_samples),
                                                len(estimate.survival_resamples), seed)
            mix_resamples = request_weights_from_time_shares(sizes, drawn, deployment, gamma)
    by_batch = survival_by_batch_size(route.plugin, list(batch_mix or ()))  # its batch sizes
    curve = _curve(route, probe.running)
    by_batch = None if curve.running is not None else by_batch
    rec = recommend(RouteInputs(
        curve.survival,
        survival_resamples=curve.resamples,
        deployed_gamma=gamma,
        batch_mix=batch_mix,
        eligibility=route_eligibility(deployment, route.plugin, route.iteration_tokens, batch_mix, gamma),
        level=level,
        observed_tokens_per_second=route.observed_tokens_per_second,
        batch_mix_resamples=mix_resamples,
        survival_by_batch=by_batch,
        mix_in_time=batch_mix is not None,
        mean_draft_length=curve.mean_draft_length,
        draft_reach=curve.draft_reach,
        observed_latency_source=route.observed_latency_source,
        undrafted_token_share=route.undrafted_token_share,
        step_sequences=curve.step_sequences,
        traffic=route.traffic,
        running_probe=curve.running,
        requests=route.requests,
        speedup_measured=measured is not None and measured.measured,
        observed_rate_spread=route.observed_rate_spread,
        measured_gammas=() if route.step_times is None else tuple(s.gamma for s in route.step_times.segments),
        segment_rates=route.segment_rates,
    ), deployment)
    rec = replace(rec, specialized_speedup_measured=measured)
    def price(part: RouteEstimate, part_deployment: Deployment) -> Recommendation:
        """A part of the route's requests (a context band, a sampling population) priced as the route is."""
        return recommend_route(part, part_deployment, batch_time_shares=batch_time_shares, level=level, seed=seed,
                               measure_speedup=False, by_parts=False).recommendation

    resamples = len(estimate.survival_resamples) if estimate.has_interval else 1000
    if by_parts and (route.requests is not None or route.context is not None):
        rec = replace(rec, context=context_view(route, deployment, rec.gamma_to_deploy, price,
                                                what_if=bool(rec.figures_needed), level=level, n_resamples=resamples,
                                                seed=seed))
    if by_parts:
        rec = replace(rec, sampling=sampling_view(route, deployment, price, level=level, n_resamples=resamples,
                                                  seed=seed))
    return RouteRecommendation(rec, batch_mix, by_batch)


def _with_verify_cost(route: RouteEstimate, deployment: Deployment, time_shares: dict[int, float] | None,
                      level: float) -> Deployment:
    """``deployment`` with the cost shape the route's window measures (model.verify_cost), set
    beside the profile's at the route's request weights."""
    mix = batch_mix_from_time_shares(time_shares, deployment, route.gamma) if time_shares else None
    # the profile as assumed (its increments do not depend on the anchor: any rate prices them)
    assumed = make_profile(replace(deployment, verify_cost=None,
                                   baseline_tokens_per_second=deployment.baseline_tokens_per_second or 100.0))
    return with_verify_cost(deployment, route.step_times, route.gamma, normalise_batch_mix(mix), level, assumed)


def _measured_speedup(route: RouteEstimate, probe: ProbeEvidence, deployment: Deployment,
                      time_shares: dict[int, float] | None, seed: int) -> tuple[Deployment, MeasuredSpeedup | None]:
    """(the deployment to price, the measurement): with the specialized speedup measured from
    the deployed segment's and a probe's latency (at any other γ), its interval replaces the
    configured figure (model.probe.measured_speedup); else the deployment as it is. A window
    without a probe takes the measurement of the earlier window in which one last ran
    (``probe.earlier``, at that window's own time shares, as a tune then priced it)."""
    earlier = probe.earlier
    if probe.latency is None and earlier is not None:
        deployment, measured = _measured_speedup(earlier.route, ProbeEvidence(latency=earlier.latency), deployment,
                                                 earlier.route.batch_time_shares, seed)
        return deployment, None if measured is None else replace(measured, window=earlier.route.window_span)
    probed = probe.latency
    if probed is None or route.itl_mean_s is None or not time_shares or not measurable(deployment):
        return deployment, None  # nothing to resample for: off the path, or no probe with latency
    mixes, own = _segment_mixes(route, probed, time_shares)
    sizes = sorted(set(mixes[0][0]) | set(mixes[1][0]))  # each segment's shares over both's batch sizes
    shares = [[mix.get(b, 0.0) for b in sizes] for mix, _ in mixes]
    drawn = tuple(time_share_resamples(dict(zip(sizes, u)), n, MEASURE_RESAMPLES, seed + i)[1]
                  for i, (u, (_, n)) in enumerate(zip(shares, mixes)))
    elig = route_eligibility(deployment, route.plugin, route.iteration_tokens,
                             batch_mix_from_time_shares(time_shares, deployment, route.gamma), route.gamma)
    logged = route.observed_latency_source == LOGGED_LOAD
    measured = measure_specialized_speedup(
        deployment, SegmentLatency(route.gamma, route.itl_mean_s, mixes[0][0] if own else None, logged),
        SegmentLatency(probed.gamma, probed.itl_mean_s, mixes[1][0] if own else None, logged),
        SegmentShares(sizes, shares[0], shares[1], (drawn[0], drawn[1])), clean_share=elig.share if elig else 1.0,
        level=route.estimate.level)
    if measured is None or not measured.measured:
        return deployment, measured
    assert measured.confidence_interval is not None  # measured: the value comes with its interval
    return replace(deployment, specialized_speedup=measured.confidence_interval), measured


@dataclass(frozen=True, eq=False)
class _Curve:
    """The curve recommend() prices and what goes with it: the deployed segment's, or with a
    running probe the joined one (model.probe.running), its draft lengths from the
    probe's counts and no per-request steps or per-batch curves (those are the deployed γ's)."""

    survival: np.ndarray
    resamples: np.ndarray | None
    mean_draft_length: float | None
    draft_reach: list[float] | None
    step_sequences: list[StepSequence] | None
    running: RunningProbe | None = None


def _curve(route: RouteEstimate, probe: ProbeSegment | None) -> _Curve:
    estimate = route.estimate
    if probe is None:
        return _Curve(estimate.survival.value, estimate.survival_resamples if estimate.has_interval else None,
                      mean_draft_length(estimate.counts), route.draft_reach, route.step_sequences)
    traffic = probe.traffic
    running = RunningProbe(
        gamma=probe.gamma, drafts=probe.estimate.drafts,
        drafts_per_engine_second=None if traffic is None else traffic.drafts_per_engine_second,
        engines=traffic.engines if traffic is not None and traffic.engines else 1,
        rows=traffic.rows if traffic is not None else 1,
        row_seconds=traffic.row_seconds if traffic is not None else 0.0,
        own_survival=None if probe.agrees else probe.estimate.survival.value,
        own_resamples=None if probe.agrees else probe.estimate.survival_resamples,
        running=probe.running)
    return _Curve(probe.survival, probe.survival_resamples, mean_draft_length(probe.estimate.counts), None, None,
                  running)


def _segment_mixes(route: RouteEstimate, probed: ProbeLatency, time_shares: dict[int, float]
                   ) -> tuple[list[tuple[dict[int, float], float]], bool]:
    """([(u_B, effective samples) of the deployed segment, of the probe], whether they are
    their own): each segment's own engines' where the window keeps both
    (acceptance.segment_measures.SegmentMix), else the route's ``time_shares`` for both, its
    samples split by the segments' engine-seconds."""
    main, own = route.segment_mix, probed.segment_mix
    if main is not None and own is not None:
        return [(m.time_shares, max(m.effective_samples, 1.0)) for m in (main, own)], True
    sizes, shares = normalise_batch_mix(time_shares)
    route_mix = dict(zip(sizes.tolist(), shares.tolist()))
    samples = max(route.estimate.n_blocks, route.effective_samples)
    return [(route_mix, max(samples * part, 1.0)) for part in _engine_seconds_shares(route, probed)], False


def _engine_seconds_shares(route: RouteEstimate, probed: ProbeLatency) -> tuple[float, float]:
    """The deployed segment's and the probe's shares of the window's engine-seconds, which
    the gauge samples behind the time shares are spread over (½ each where unknown)."""
    spans = [t.seconds * t.engines for t in (route.traffic, probed.traffic) if t is not None and t.engines]
    if len(spans) < 2 or not sum(spans) > 0:  # either unknown
        return 0.5, 0.5
    return spans[0] / sum(spans), spans[1] / sum(spans)


def drafts_more_needed(estimate: AcceptanceEstimate, rec: Recommendation) -> int | None:
    """The one "more data" figure of a tuning (None: enough to decide). A probe names its own
    drafts (at its γ, which no window at the deployed γ can replace); a change or off is sure of
    its gain (P ≥ 0.9 over min_gain), so none is wanted to decide it. A keep whose gain is not
    yet sure says which factor on the window's drafts would settle it, and that is the figure;
    otherwise a window whose mean acceptance length is wider than ±DECIDABLE_AL_HALFWIDTH
    wants the drafts that would narrow it to that."""
    if rec.probe is not None or rec.decision in (DecisionKind.CHANGE, DecisionKind.OFF):
        return None  # a probe names its own; a sure change or off is decided, whatever the AL interval's width
    if rec.drafts_factor_to_settle is not None and rec.drafts_factor_to_settle > 1.0:
        return math.ceil((rec.drafts_factor_to_settle - 1.0) * estimate.drafts)
    half = estimate.mean_acceptance_length.halfwidth
    if not math.isfinite(half) or half > DECIDABLE_AL_HALFWIDTH:
        return drafts_needed(estimate, DECIDABLE_AL_HALFWIDTH)
    return None


def more_drafts_sentence(drafts_more: int | None, factor: float | None) -> str | None:
    """What drafts_more_needed means, in the words every view prints."""
    if not drafts_more:
        return None
    if factor is not None and factor > 1.0:
        return (f"too few drafts to decide: about {drafts_more:,} more drafts ({factor:.1f}× the window's) "
                f"would settle the decision")
    return (f"too few drafts to decide: about {drafts_more:,} more drafts would narrow the mean acceptance "
            f"length to ±{DECIDABLE_AL_HALFWIDTH}")
