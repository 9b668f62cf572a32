"""The probe decision (docs/MODEL.md, Decisions past the deployed γ): whether measuring an
extrapolated γ on one engine of the route is worth more than it costs.

A window at the deployed γ_d never checks positions past γ_d, so a best expected γ_p past
it stays a guess however many drafts the window holds: only running γ_p measures it. With
S the ensemble's speedups (resamples × tail models × the tail error measured on real
curves, model.recommend) and b the γ the fleet runs otherwise (the deployed one, or the
sure step):

  value rate   v = E[G_p·1{G_p > m}] − E[G_o·1{G_o > m}],   G_R = max_{γ ∈ R} S_γ/S_b − 1
               (R = the allowed γ ≤ γ_p, which the probe measures; o = those ≤ γ_d, which
               more drafts at γ_d settle without a probe; m = min_gain, the least gain acted on)
  value        V = v · (horizon − duration)            (decision_horizon_s)
  cost         C = (duration · E[max(0, 1 − S_p/S_b)] + 2 · engine_restart_s) / engines
               (the probe's share of the route's traffic, its expected loss and two restarts)

both in seconds of the route's whole output at γ_b. The probe pays when V > C.
Drafts it needs: enough that, at the expected gain ḡ of γ_p over γ_b, the probe's own
sampling error leaves P(gain > m) ≥ DECISION_CERTAINTY:

  drafts = deff · Var(X_p) · (z · (1 + ḡ) / (AL_p · (ḡ − m)))²,   at least PROBE_MIN_DRAFTS

X_p the accepted tokens of one draft at γ_p (P(X ≥ k) = a_k, the extended curve), deff the
window's variance of AL over its resamples against independent drafts (drafts are
correlated within requests and scrape intervals), z the DECISION_CERTAINTY normal quantile.
Its duration: drafts over the probe's draft rate, the route's drafts per engine-second
scaled by the step times τ(γ_d)/τ(γ_p) (a wider draft makes slower steps), and at least
PROBE_MIN_ROWS of the route's rows (scrape intervals): a busy route's 2,000 drafts can take
less than one.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from acceptance.segment_measures import RouteTraffic

from ..deployment import DECISION_CERTAINTY, Deployment
from ..vllm_config import speculative_config

# A probe's drafts also test its shared positions against the main segment's
# (position 0 moves with γ): at 2,000 drafts a survival value's binomial error is ≤ 0.011.
PROBE_MIN_DRAFTS = 2000
# ... and at least this many of the route's rows (scrape intervals): the block bootstrap
# needs a few blocks each side, as the drift test does (acceptance.route_estimate).
PROBE_MIN_ROWS = 8
PROBE_ENGINES = 1


@dataclass(frozen=True)
class Probe:
    """One engine of the route at ``gamma`` for ``drafts_needed`` drafts (``duration_s``);
    expected_cost / expected_value in seconds of the route's whole output (module docstring)."""

    gamma: int
    engines: int
    drafts_needed: int
    duration_s: float
    expected_cost: float
    expected_value: float
    speculative_config: dict[str, object] | None
    # the run is every engine the route has: no engine stays at the other γ meanwhile, so it
    # is a trial change for its duration, then back (a one-engine route)
    whole_route: bool = False

    @property
    def pays(self) -> bool:
        return self.expected_value > self.expected_cost


@dataclass(frozen=True, eq=False)
class RunningProbe:
    """A probe already running at ``gamma`` (model.probe.running, joined to the deployed
    segment): its drafts so far, its draft rate per engine, its engines and — when its shared
    positions disagree with the deployed segment's — its own curve and resamples, from which
    the candidates past the deployed γ are priced (model.recommend)."""

    gamma: int
    drafts: float
    drafts_per_engine_second: float | None
    engines: int
    rows: int = PROBE_MIN_ROWS
    row_seconds: float = 0.0
    own_survival: np.ndarray | None = None
    own_resamples: np.ndarray | None = None


@dataclass(frozen=True)
class ProbeInputs:
    """What the probe is priced from, all at the recommendation's candidates 0..top."""

    ensemble: np.ndarray  # (N, G) speedups of the resamples × tail models
    speedup: np.ndarray  # (G,) the point speedups
    allowed: np.ndarray  # (G,) deployable candidates
    expected_tokens: np.ndarray  # (G,) AL(γ) priced (the tail models' mean)
    step_time: np.ndarray  # (G,) τ(γ), the objective's step time over the mix
    deployed_al_resamples: np.ndarray  # (n,) AL(γ_d) of the window's resamples
    observed_gamma: int


@dataclass(frozen=True)
class ProbeRun:
    """What a run is, before it is priced: ``engines`` at ``gamma`` for ``drafts`` drafts over
    ``duration`` seconds, ``share`` of the route's engines, and the engine restarts it costs."""

    gamma: int
    engines: int
    drafts: int
    duration: float
    share: float
    restarts: int


def plan_probe(inputs: ProbeInputs, deployment: Deployment, traffic: RouteTraffic, *, gamma: int, base: int,
               deployed: int) -> Probe | None:
    """The probe of ``gamma`` against the fleet at ``base`` (module docstring); None when its
    expected gain over ``base`` is within min_gain (no probe can settle a gain not expected).
    ``traffic``: the window's drafts, their rate per engine (known: model.decision.rules.with_probe),
    its engines and rows."""
    s, m = inputs.speedup, deployment.min_gain
    gain = float(s[gamma] / s[base] - 1.0)
    if gain <= m:
        return None
    rate, engines = traffic.drafts_per_engine_second, traffic.engines
    assert rate is not None and engines is not None  # a draft rate per engine names the engines
    needed = drafts_needed(inputs, gamma=gamma, gain=gain, min_gain=m, drafts=traffic.drafts)
    duration = probe_duration(needed, rate, inputs.step_time, gamma=gamma,
                               rate_at=deployed, min_seconds=PROBE_MIN_ROWS * traffic.row_seconds)
    probed = min(PROBE_ENGINES, engines)
    return _valued_probe(inputs, deployment, ProbeRun(int(gamma), probed, int(needed), duration,
                                                    probed / engines, restarts=2), base=base, deployed=None)


def continued_probe(inputs: ProbeInputs, deployment: Deployment, running: RunningProbe, *, base: int,
                    deployed: int, remaining: int, engines: int | None) -> Probe:
    """The running probe carried on for ``remaining`` more drafts (model.decision says how
    many: its minimum, or the factor that settles its gain on its drafts so far — its sampling
    error dominates the gain's, the deployed segment holding far more), at the probe's own
    draft rate; its cost is its expected loss meanwhile and the one restart back."""
    needed = int(remaining)
    rate = running.drafts_per_engine_second
    duration = needed / rate if rate else float("inf")
    duration = max(duration, (PROBE_MIN_ROWS - running.rows) * running.row_seconds)
    share = running.engines / engines if engines else 1.0
    return _valued_probe(inputs, deployment, ProbeRun(running.gamma, running.engines, needed, duration, share,
                                                    restarts=1), base=base, deployed=deployed)


def _valued_probe(inputs: ProbeInputs, deployment: Deployment, run: ProbeRun, *, base: int, deployed: int | None
                  ) -> Probe:
    """The Probe of ``run``, its value and loss rates from the ensemble."""
    value = value_rate(inputs, gamma=run.gamma, base=base, min_gain=deployment.min_gain, deployed=deployed)
    loss = float(np.mean(np.maximum(0.0, 1.0 - inputs.ensemble[:, run.gamma] / inputs.ensemble[:, base])))
    return priced_probe(deployment, run, loss_rate=loss, value_rate=value)


def probe_duration(drafts: float, drafts_per_engine_second: float, step_time: np.ndarray, *, gamma: int,
                    rate_at: int, min_seconds: float) -> float:
    """Seconds a run at ``gamma`` takes for ``drafts``: the draft rate per engine measured
    at γ ``rate_at``, scaled by τ(rate_at)/τ(γ) (one draft per request-step, and a wider
    draft makes slower steps), and at least ``min_seconds`` (the rows its test needs)."""
    rate = drafts_per_engine_second * float(step_time[rate_at] / step_time[gamma])
    return max(drafts / rate, min_seconds)


def priced_probe(deployment: Deployment, run: ProbeRun, *, loss_rate: float, value_rate: float) -> Probe:
    """The Probe of ``run`` (module docstring), in seconds of the route's whole output:
    cost = share × (duration × loss_rate + restarts × engine_restart_s),
    value = value_rate × (decision_horizon_s − duration) — every probe, whatever it measures."""
    duration = run.duration
    return Probe(gamma=int(run.gamma), engines=int(run.engines), drafts_needed=int(run.drafts),
                 duration_s=float(duration),
                 expected_cost=float(run.share * (duration * loss_rate + run.restarts * deployment.engine_restart_s)),
                 expected_value=float(value_rate * max(0.0, deployment.decision_horizon_s - duration)),
                 speculative_config=speculative_config(deployment, int(run.gamma), None),
                 whole_route=run.share >= 1.0)


def value_rate(inputs: ProbeInputs, *, gamma: int, base: int, min_gain: float, deployed: int | None = None) -> float:
    """v: the expected gain acted on per second once γ ≤ ``gamma`` are measured, less what the
    γ ≤ ``deployed`` (default: the observed γ) offer without a probe (module docstring)."""
    ens = inputs.ensemble / inputs.ensemble[:, [base]] - 1.0
    gammas = np.arange(ens.shape[1])
    measured = np.asarray(inputs.allowed) & (gammas <= gamma)
    observed = np.asarray(inputs.allowed) & (gammas <= (inputs.observed_gamma if deployed is None else deployed))

    def acted_on(reach: np.ndarray) -> float:
        best = np.where(reach, ens, -np.inf).max(axis=1)
        return float(np.mean(np.where(best > min_gain, best, 0.0)))

    return max(0.0, acted_on(measured) - acted_on(observed))


def drafts_needed(inputs: ProbeInputs, *, gamma: int, gain: float, min_gain: float, drafts: float) -> int:
    """The probe's drafts for P(gain > min_gain) ≥ DECISION_CERTAINTY at the expected gain
    (module docstring)."""
    z = NormalDist().inv_cdf(DECISION_CERTAINTY)
    al = inputs.expected_tokens
    per_draft = accepted_variance(np.diff(al[: gamma + 1]))
    deff = design_effect(inputs.deployed_al_resamples, np.diff(al[: inputs.observed_gamma + 1]), drafts)
    needed = deff * per_draft * (z * (1.0 + gain) / (al[gamma] * (gain - min_gain))) ** 2
    return int(max(PROBE_MIN_DRAFTS, np.ceil(needed)))


def accepted_variance(survival: np.ndarray) -> float:
    """Var(X) of the accepted tokens of one draft, P(X ≥ k) = a_k: E[X] = Σ a_k, E[X²] = Σ (2k − 1)·a_k."""
    a = np.clip(np.asarray(survival, dtype=float), 0.0, 1.0)
    k = np.arange(1, a.size + 1)
    return float(max(np.sum((2 * k - 1) * a) - np.sum(a) ** 2, 0.0))


def design_effect(al_resamples: np.ndarray, survival: np.ndarray, drafts: float) -> float:
    """The window's resampled variance of AL against that of ``drafts`` independent drafts
    (≥ 1: correlated drafts never count for more than independent ones)."""
    iid = accepted_variance(survival) / max(drafts, 1.0)
    boot = float(np.var(al_resamples)) if np.size(al_resamples) > 1 else 0.0
    return max(1.0, boot / iid) if iid > 0 else 1.0
