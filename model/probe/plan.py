"""The probe decision (docs/MODEL.md, Decisions past the deployed γ): whether measuring an
extrapolated γ on one engine of the route is worth more than it costs, which γ, and for how long.

A window at the deployed γ_d never checks positions past it, so a best expected γ past the
measured ones stays a guess however many drafts the window holds: only running a γ measures
it. With S the ensemble's speedups (resamples × tail models × the tail error measured on real
curves, model.recommend) and b the γ the fleet runs otherwise (the deployed one, or the sure
step), a probe of γ_p is priced as:

  value rate   v = E[G_p·1{G_p > m}] − E[G_o·1{G_o > m}],   G_R = max_{γ ∈ R} S_γ/S_b − 1
               (R = the allowed γ ≤ γ_p, which the probe measures; o = those ≤ γ_d, which
               more drafts at γ_d settle without a probe; m = min_gain, the least gain acted on)
  value        V = v · (horizon − duration)            (decision_horizon_s)
  cost         C = (duration · E[max(0, 1 − S_p/S_b)] + 2 · engine_restart_s) · share
               (share: the probe's engines over the route's; its expected loss and two restarts)

both in seconds of the route's whole output at γ_b. It pays when V > C. A probe on every engine
the route has (a one-engine route) is a change of the route for its duration: it may run only
where a change would be as safe, P(S_p/S_b − 1 < −m) ≤ 1 − DECISION_CERTAINTY (``Probe.safe``).
Which γ (``choose_probe``): of the allowed γ past the largest measured one up to the target (the
best expected γ, or a change's past the measured), those that pay and are safe, the one of
greatest V − C (the nearest on a tie) — the tail error grows with the distance in both.

Drafts it needs: enough that, where γ_p gains the expected ḡ over γ_b, its estimate settles
P(gain > m) ≥ DECISION_CERTAINTY with probability DECISION_CERTAINTY — the estimate must land
z standard errors above m + z of them (z once settles it only when the estimate lands at ḡ or
above: half the time):

  drafts = deff · Var(X_p) · (2z · (1 + ḡ) / (AL_p · (ḡ − m)))²,   at least PROBE_MIN_DRAFTS

X_p the accepted tokens of one draft at γ_p (P(X ≥ k) = a_k, the extended curve), deff the
window's variance of AL over its resamples against independent drafts (drafts are
correlated within requests and scrape intervals), z the DECISION_CERTAINTY normal quantile.
Its rows (``probe_rows``): n rows leave its interval wider by the few-rows spread of the
estimator (acceptance.bootstrap.independent_rows_spread, against the window's), so it runs the
fewest n ≥ PROBE_MIN_ROWS (3: fewer give no interval) whose drafts, at the probe's own draft
rate (the route's drafts per engine-second scaled by τ(γ_d)/τ(γ_p): a wider draft makes slower
steps), hold drafts × that widening²; its duration is those n rows (a window sees a run only in
the scrape intervals it completed): a slow route's drafts' time rounded up to a whole row, a
busy route's rows where its drafts come sooner. Where the cost model misses the engines the
probe measures the γ's rate as well (model.decision.rules.between_segments), and runs the rows
that settle that too (``rate_rows``, ProbeInputs.rate_row_cv).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from acceptance.bootstrap import independent_rows_spread
from acceptance.estimates import MIN_ROWS_FOR_INTERVAL
from acceptance.segment_measures import RouteTraffic

from ..deployment import DECISION_CERTAINTY, Deployment
from ..vllm_config import speculative_config

# A probe's drafts also test its shared positions against the main segment's
# (position 0 moves with γ): at 2,000 drafts a survival value's binomial error is ≤ 0.011.
PROBE_MIN_DRAFTS = 2000
# ... in at least the rows (scrape intervals) from which its segment gets an interval at all
# (fewer are never joined: model.probe.running); more only where the few rows' widening asks
# for them (``probe_rows``).
PROBE_MIN_ROWS = MIN_ROWS_FOR_INTERVAL
PROBE_ENGINES = 1
# The longest run rate_rows asks for (a week of 15 s scrape intervals: the decision horizon's order).
MAX_RATE_ROWS = 40_320


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
    # P(γ loses more than min_gain against the γ the fleet runs otherwise) on the ensemble:
    # a whole-route trial is a change of the route for its duration, and may run only where
    # this is at most 1 − DECISION_CERTAINTY (``safe``); None where not priced on an ensemble
    loss_probability: float | None = None

    @property
    def pays(self) -> bool:
        return self.expected_value > self.expected_cost

    @property
    def safe(self) -> bool:
        """A trial of part of the route always is (its loss is that part's); a whole-route
        trial only as a change would be: P(loses > min_gain) ≤ 1 − DECISION_CERTAINTY."""
        return (not self.whole_route or self.loss_probability is None
                or self.loss_probability <= 1.0 - DECISION_CERTAINTY + 1e-12)

    @property
    def runs(self) -> bool:
        """It pays and is safe: the probe a decision may start."""
        return self.pays and self.safe


@dataclass(frozen=True, eq=False)
class RunningProbe:
    """A probe already running at ``gamma``, or one that ran in the window and ended
    (model.probe.running, joined to the deployed segment): its drafts so far, its draft rate per engine, its engines and — when its shared
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
    # False: it ended within the window (a trial, then back): its positions price the curve,
    # and there is nothing to carry on or stop (model.recommend hands the rules none)
    running: bool = True


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
    # one engine's per-user rate over a scrape interval, its coefficient of variation, where the
    # probe must measure the rate itself (the cost model misses the engines: ``rate_rows``);
    # None where its drafts size it
    rate_row_cv: float | None = None


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
    own_rate = own_draft_rate(rate, inputs.step_time, gamma=gamma, rate_at=deployed)
    per_row = own_rate * traffic.row_seconds
    rows = probe_rows(needed, per_row, window_rows=traffic.rows)
    drafts = int(np.ceil(needed * rows_widening(rows, traffic.rows) ** 2))
    probed = min(PROBE_ENGINES, engines)
    if inputs.rate_row_cv is not None:  # its rate against the fleet's must settle too
        rows = max(rows, rate_rows(inputs.rate_row_cv, gain=gain, min_gain=m, probed=probed,
                                   others=engines - probed, window_rows=traffic.rows))
        drafts = max(drafts, int(np.ceil(rows * per_row)))
    # whole rows: a window sees a run only in the rows (scrape intervals) it completed
    duration = rows * traffic.row_seconds
    return _valued_probe(inputs, deployment, ProbeRun(int(gamma), probed, drafts, duration,
                                                    probed / engines, restarts=2), base=base, deployed=None)


def probe_rows(drafts: float, drafts_per_row: float, *, window_rows: int) -> int:
    """The fewest rows (scrape intervals) in which a run settles what ``drafts`` settle in a
    window of ``window_rows``: its interval is widened by the few rows it has
    (acceptance.bootstrap.independent_rows_spread, relative to the window's), so n rows
    must hold drafts × that widening² — at least PROBE_MIN_ROWS, the fewest that give an
    interval at all. A slow route's drafts take many rows and the widening fades; a busy
    route's are in its first rows, and then its rows are what it waits for."""
    if not drafts_per_row > 0:
        return PROBE_MIN_ROWS
    n = max(PROBE_MIN_ROWS, int(np.ceil(drafts / drafts_per_row)))
    while n * drafts_per_row < drafts * rows_widening(n, window_rows) ** 2:
        n += 1
    return n


def rate_rows(cv: float, *, gain: float, min_gain: float, probed: int, others: int, window_rows: int) -> int:
    """The fewest rows (scrape intervals) in which the probe's measured rate settles its gain
    over the fleet's, as its drafts settle its acceptance (module docstring): where the gain
    is the expected one, the measured ratio must land z standard errors above min_gain + z of
    them, 2z·se·w(n) ≤ gain − min_gain, with se² = cv² (1 / (n·probed) + 1 / (n·others)) — the
    probe's engines against the others beside it over the same n rows (a whole-route trial:
    against the window's rows) — and w(n) the few rows' widening of the interval
    (acceptance.bootstrap.independent_rows_spread, against many rows'). At most MAX_RATE_ROWS:
    a gain that close to min_gain is not worth a probe that long (its duration prices it out)."""
    z = NormalDist().inv_cdf(DECISION_CERTAINTY)
    level = DECISION_CERTAINTY
    wide = independent_rows_spread(MAX_RATE_ROWS, level)

    def settles(n: int) -> bool:
        against = 1.0 / (n * others) if others else 1.0 / max(window_rows, 1)
        se = cv * float(np.sqrt(1.0 / (n * probed) + against))
        return 2.0 * z * se * independent_rows_spread(n, level) / wide <= gain - min_gain

    if not gain > min_gain or not settles(MAX_RATE_ROWS):
        return MAX_RATE_ROWS
    low, high = PROBE_MIN_ROWS, MAX_RATE_ROWS  # the first n that settles lies in (low - 1, high]
    if settles(low):
        return low
    while high - low > 1:  # se and the widening both fall as n grows
        mid = (low + high) // 2
        low, high = (low, mid) if settles(mid) else (mid, high)
    return high


def rows_widening(rows: int, window_rows: int) -> float:
    """How much wider a run of ``rows`` rows leaves a gain's interval than the window of
    ``window_rows`` whose resamples sized its drafts (≥ 1; rows taken as uncorrelated: their
    correlation is the design effect's)."""
    level = DECISION_CERTAINTY
    return max(1.0, independent_rows_spread(max(rows, PROBE_MIN_ROWS), level)
               / independent_rows_spread(max(window_rows, PROBE_MIN_ROWS), level))


@dataclass(frozen=True)
class ProbeChoice:
    """The probe a decision may start toward ``target`` (the best expected γ, or a change's γ
    past the measured ones), and why: ``probe`` the chosen one (None: none runs); ``aimed``
    the target's own pricing (None: its gain over the base is within min_gain)."""

    target: int
    probe: Probe | None
    aimed: Probe | None


def choose_probe(inputs: ProbeInputs, deployment: Deployment, traffic: RouteTraffic, *, target: int, base: int,
                 deployed: int, measured_upto: int) -> ProbeChoice:
    """The probe toward ``target``, stepped to the γ the evidence judges worth its trial: of the
    allowed γ past ``measured_upto`` (the largest γ a point bears on) up to ``target``, each
    priced against the fleet at ``base`` (plan_probe), those that may run (Probe.runs: it pays
    and, a whole-route trial, is as safe as a change), and of them the one of greatest expected
    net value V − C, the nearest on a tie. The ensemble carries the tail models' error at each
    distance (model.tail_evidence), growing with it, into V and C alike: a farther γ is probed
    only where the positions it adds pay for its added expected loss and it is safe; once a
    nearer γ is measured the next window probes farther from it (docs/MODEL.md, Decisions past
    the deployed γ)."""
    aimed = plan_probe(inputs, deployment, traffic, gamma=target, base=base, deployed=deployed)
    options = [aimed] if aimed is not None and aimed.runs else []
    for gamma in range(max(measured_upto, inputs.observed_gamma) + 1, target):
        if inputs.allowed[gamma]:
            planned = plan_probe(inputs, deployment, traffic, gamma=gamma, base=base, deployed=deployed)
            if planned is not None and planned.runs:
                options.append(planned)
    best = max(options, key=lambda p: (p.expected_value - p.expected_cost, -p.gamma), default=None)
    return ProbeChoice(target, best, aimed)


def continued_probe(inputs: ProbeInputs, deployment: Deployment, running: RunningProbe, *, base: int,
                    deployed: int, remaining: int, engines: int | None) -> Probe:
    """The running probe carried on for ``remaining`` more drafts (model.decision says how
    many: its minimum, or the factor that settles its gain on its drafts so far — its sampling
    error dominates the gain's, the deployed segment holding far more), at the probe's own
    draft rate; its cost is its expected loss meanwhile and the one restart back."""
    needed = int(remaining)
    rate = running.drafts_per_engine_second
    duration = needed / rate if rate else float("inf")
    duration = max(duration, (PROBE_MIN_ROWS - running.rows) * running.row_seconds)  # 0 once it has an interval
    # ``engines``: those still at the deployed γ beside it — the route is both
    share = running.engines / (running.engines + engines) if engines else 1.0
    return _valued_probe(inputs, deployment, ProbeRun(running.gamma, running.engines, needed, duration, share,
                                                    restarts=1), base=base, deployed=deployed)


def _valued_probe(inputs: ProbeInputs, deployment: Deployment, run: ProbeRun, *, base: int, deployed: int | None
                  ) -> Probe:
    """The Probe of ``run``, its value and loss rates from the ensemble."""
    value = value_rate(inputs, gamma=run.gamma, base=base, min_gain=deployment.min_gain, deployed=deployed)
    ratio = inputs.ensemble[:, run.gamma] / inputs.ensemble[:, base]
    loss = float(np.mean(np.maximum(0.0, 1.0 - ratio)))
    return replace(priced_probe(deployment, run, loss_rate=loss, value_rate=value),
                   loss_probability=float(np.mean(ratio - 1.0 < -deployment.min_gain)))


def probe_duration(drafts: float, drafts_per_engine_second: float, step_time: np.ndarray, *, gamma: int,
                    rate_at: int, min_seconds: float) -> float:
    """Seconds a run at ``gamma`` takes for ``drafts``: the draft rate per engine measured
    at γ ``rate_at``, scaled by τ(rate_at)/τ(γ) (one draft per request-step, and a wider
    draft makes slower steps), and at least ``min_seconds`` (the rows its test needs)."""
    return max(drafts / own_draft_rate(drafts_per_engine_second, step_time, gamma=gamma, rate_at=rate_at),
               min_seconds)


def own_draft_rate(drafts_per_engine_second: float, step_time: np.ndarray, *, gamma: int, rate_at: int) -> float:
    """An engine's drafts per second at ``gamma`` from those measured at γ ``rate_at``."""
    return drafts_per_engine_second * float(step_time[rate_at] / step_time[gamma])


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
    """The probe's drafts that settle P(gain > min_gain) ≥ DECISION_CERTAINTY with probability
    DECISION_CERTAINTY where the gain is the expected one (module docstring)."""
    z = NormalDist().inv_cdf(DECISION_CERTAINTY)
    al = inputs.expected_tokens
    per_draft = accepted_variance(np.diff(al[: gamma + 1]))
    deff = design_effect(inputs.deployed_al_resamples, np.diff(al[: inputs.observed_gamma + 1]), drafts)
    # z twice: the interval's own quantile, and as much again for the estimate to land at the
    # expected gain or above with P = DECISION_CERTAINTY (at z once it settles half the time)
    needed = deff * per_draft * (2.0 * z * (1.0 + gain) / (al[gamma] * (gain - min_gain))) ** 2
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
