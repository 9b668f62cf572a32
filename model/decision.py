"""The decision on a priced ensemble (docs/DESIGN.md, Cost model; Decisions past the deployed γ).

From the candidates' point speedups and the ensemble of their resampled speedups
(resamples × tail models, model.recommend):
  change  P(speedup(rec)/speedup(deployed) − 1 > min_gain) ≥ DECISION_CERTAINTY for the best
          expected γ — or, when that gain is plausible but not sure, for the best sure step
          (``expected_best_gamma`` names the farther one);
  off     the same for γ = 0;
  probe   the best expected γ's gain is plausible, not sure, and rests on positions past the
          observed γ that no window at it checks: measure it on one engine when that pays
          (model.probe); the fleet stays at the deployed γ or takes the sure step;
  keep    otherwise, with the evidence that would change it (the factor on the window's
          drafts that settles a gain, when more drafts can).
``gain_of``: the recommended γ's gain over the deployed one with its interval.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from acceptance.durations import approximate_duration

from .deployment import DECISION_CERTAINTY, Deployment
from .probe import PROBE_MIN_DRAFTS, PROBE_MIN_ROWS, ProbeInputs, RunningProbe, continued_probe, plan_probe


@dataclass(frozen=True)
class Gain:
    """speedup(recommended) / speedup(deployed) − 1: the point and its interval over the same
    resamples × tail models as the decision (None without resamples)."""

    value: float
    low: float | None
    high: float | None

    def __str__(self) -> str:
        """+9.6% [+8.1%, +11.0%] (the point alone without resamples)."""
        if self.low is None or self.high is None:
            return f"{self.value:+.1%}"
        return f"{self.value:+.1%} [{self.low:+.1%}, {self.high:+.1%}]"




# the decisions that have the fleet run the recommended γ (a probe: the fleet's; the canary its own)
DEPLOYING_DECISIONS = ("change", "off", "probe")


def gamma_to_deploy(decision: str, recommended: int, deployed: int) -> int:
    """The γ a decision has the fleet run: the recommended one on a change, an off (0) or a
    probe, else the deployed γ — a keep (or an undecided) runs it even when another looks
    better, and that other γ is then the recommendation's ``recommended_gamma``."""
    return recommended if decision in DEPLOYING_DECISIONS else deployed


def gain_of(rec, deployed, speed_point, ens, level) -> Gain | None:
    """Gain of the recommended γ over the deployed one (None when they are the same γ)."""
    if rec == deployed or not speed_point[deployed] > 0:
        return None
    value = float(speed_point[rec] / speed_point[deployed] - 1.0)
    if ens is None:
        return Gain(value, None, None)
    gains = ens[:, rec] / ens[:, deployed] - 1.0
    low, high = np.quantile(gains, [(1 - level) / 2, (1 + level) / 2])
    return Gain(value, float(low), float(high))


@dataclass(frozen=True)
class Verdict:
    """A decision on the best expected γ, why, and whether its gain is plausible but not sure:
    then ``settle`` is the factor on the window's drafts that would settle it, or None when
    no window at the observed γ can (the gain rests on positions past it: a probe's case)."""

    decision: str
    reason: str
    settle: float | None = None
    plausible: bool = False
    claim: str = ""  # the probability the reason starts from


def _verdict(rec, deployed, allowed, speed_point, ens, min_gain, reasons, observed: int, tail_only) -> Verdict:
    """change / off / keep and why (see module docstring). ``tail_only()``: the ensemble
    without the sampling part (the point curve under the tail models and their measured
    errors; None: not separable), which says whether more drafts at the observed γ can
    settle a gain that rests on positions past it."""
    if not allowed[deployed]:
        return Verdict("off" if rec == 0 else "change", f"the deployed γ={deployed} cannot run here: {reasons[deployed]}")
    if rec == deployed:
        return Verdict("keep", f"γ={deployed} already has the best expected speedup ({speed_point[deployed]:.3f}×)")
    expected_gain = speed_point[rec] / speed_point[deployed] - 1.0
    if ens is None:
        return Verdict("keep", f"γ={rec} is expected to gain {expected_gain:+.1%} over γ={deployed}, but without "
                                f"resamples (draft counts) the certainty of that gain is unknown; a window with counts "
                                f"would decide")
    gains = ens[:, rec] / ens[:, deployed] - 1.0  # (M·n,)
    p_gain = float(np.mean(gains > min_gain))
    if p_gain >= DECISION_CERTAINTY:
        return Verdict("off" if rec == 0 else "change",
                        f"P(γ={rec} gains > {min_gain:.0%} over γ={deployed}) = {p_gain:.2f} ≥ {DECISION_CERTAINTY}")
    head = f"P(γ={rec} gains > {min_gain:.0%} over γ={deployed}) = {p_gain:.2f} < {DECISION_CERTAINTY}"
    mean, sd = float(np.mean(gains)), float(np.std(gains))
    if mean <= min_gain:
        return Verdict("keep", f"{head}: the expected gain {expected_gain:+.1%} is within min_gain {min_gain:.0%}; "
                                f"only a clearly different acceptance at γ={rec} would change this")
    if rec > observed and tail_only is not None:
        ens_tail = tail_only()
        p_tail = float(np.mean(ens_tail[:, rec] / ens_tail[:, deployed] - 1.0 > min_gain))
        if p_tail < DECISION_CERTAINTY:
            return Verdict("keep", (
                f"{head}: it rests on positions {observed + 1}..{rec}, past the observed γ={observed}, which never "
                f"checks them: with any number of drafts at γ={observed} the probability stays {p_tail:.2f}; "
                f"measuring γ={rec} (a probe) would settle a gain of {mean:+.1%}"), plausible=True)
    z = NormalDist().inv_cdf(DECISION_CERTAINTY)
    factor = max((z * sd / (mean - min_gain)) ** 2 if sd > 0 else 1.0, 1.0)
    return Verdict("keep", f"{head}: a window with about {factor:.1f}× the drafts (intervals shrinking as "
                            f"1/√drafts) would settle a gain of {mean:+.1%}", factor, True, head)


def decide(rec, deployed, allowed, speed_point, ens, min_gain, reasons, observed: int, tail_only):
    """(the γ recommended, the farther best expected one or None, the verdict): ``_decide``
    on the best expected γ, and when its gain is plausible but not yet sure, the best sure
    step instead of a keep."""
    verdict = _verdict(rec, deployed, allowed, speed_point, ens, min_gain, reasons, observed, tail_only)
    step = _sure_step(deployed, allowed, speed_point, ens, min_gain) if verdict.plausible else None
    if step is None:
        return rec, None, verdict
    (gamma, p_gain), expected_best = step, rec
    reason = (f"{verdict.reason}; the best γ whose gain is sure now: P(γ={gamma} gains > {min_gain:.0%} over "
              f"γ={deployed}) = {p_gain:.2f} ≥ {DECISION_CERTAINTY}")
    return gamma, expected_best, replace(verdict, decision="off" if gamma == 0 else "change", reason=reason)


def probe_step(rec, expected_best, verdict: Verdict, deployment: Deployment, deployed: int, traffic,
               running: RunningProbe | None, inputs: ProbeInputs | None):
    """(γ the fleet runs, best expected γ, verdict, the probe or None): a running probe's
    (``running``) next step, else whether to start one (``with_probe``)."""
    if running is None or inputs is None:
        return with_probe(rec, expected_best, verdict, deployment, deployed, traffic, inputs)
    farther = with_probe(rec, expected_best, verdict, deployment, deployed, traffic, inputs)
    if farther[3] is not None and farther[3].gamma > running.gamma:
        return farther  # the best expected γ lies past the running probe's, and probing it pays
    return with_running_probe(rec, expected_best, verdict, deployment, deployed, running, inputs,
                              None if traffic is None else traffic.engines)


def with_running_probe(rec, expected_best, verdict: Verdict, deployment: Deployment, deployed: int,
                       running: RunningProbe, inputs: ProbeInputs, engines: int | None):
    """A canary runs at γ_p and its positions are measured (the joined curve). Stop it early
    when its own data shows it losing by more than min_gain with P ≥ DECISION_CERTAINTY; a
    sure decision settles it; else carry it on (decision probe) while it holds fewer than
    PROBE_MIN_DRAFTS drafts or, for a gain plausible but not yet sure, fewer than the factor
    that settles it asks; else it has done its work: stop it."""
    g, m = running.gamma, deployment.min_gain
    ens = inputs.ensemble
    p_lose = float(np.mean(ens[:, g] / ens[:, deployed] - 1.0 < -m))
    if p_lose >= DECISION_CERTAINTY:
        why = (f"stop the probe at γ={g} early: its own {running.drafts:,.0f} drafts show P(γ={g} loses > {m:.0%} "
               f"against γ={deployed}) = {p_lose:.2f} ≥ {DECISION_CERTAINTY}")
        return rec, expected_best, replace(verdict, reason=f"{why}; {verdict.reason}"), None
    done = f"the probe at γ={g} ({running.drafts:,.0f} drafts)"
    if verdict.decision in ("change", "off"):  # sure: the fleet's change takes over from the canary
        settled = "deploy it on every engine" if rec == g else "stop it"
        return rec, expected_best, replace(verdict, reason=f"{verdict.reason}; {done} has settled this: {settled}"), None
    unsettled = verdict.settle if verdict.plausible and verdict.settle is not None else 1.0
    to_settle = (unsettled - 1.0) * running.drafts
    remaining = int(np.ceil(max(PROBE_MIN_DRAFTS - running.drafts, to_settle, 0.0)))
    if remaining <= 0 and running.rows >= PROBE_MIN_ROWS:
        return rec, expected_best, replace(verdict, reason=f"{verdict.reason}; {done} has done its work: stop it"), None
    fleet = deployed if expected_best is None else rec
    probe = continued_probe(inputs, deployment, running, base=fleet, deployed=deployed, remaining=remaining,
                            engines=engines)
    more = f"about {probe.drafts_needed:,} more (about {approximate_duration(probe.duration_s)})"
    if to_settle > PROBE_MIN_DRAFTS - running.drafts and to_settle > 0:
        why = f"carry on the probe at γ={g}: {more} would settle it"
    elif running.drafts < PROBE_MIN_DRAFTS:
        why = f"carry on the probe at γ={g} to the {PROBE_MIN_DRAFTS:,} drafts a probe takes at least: {more}"
    else:
        why = (f"carry on the probe at γ={g} for the {PROBE_MIN_ROWS} scrape intervals a probe takes at least: "
               f"about {approximate_duration(probe.duration_s)} more")
    # the factor on the window's drafts is said as the probe's own drafts: one figure
    head = verdict.claim if verdict.settle is not None else verdict.reason
    return fleet, g, replace(verdict, decision="probe", reason=f"{head}; {why}", settle=None), probe


def with_probe(rec, expected_best, verdict: Verdict, deployment: Deployment, deployed: int, traffic,
               inputs: ProbeInputs | None):
    """(γ the fleet runs, best expected γ, verdict, the probe or None): when the best expected
    γ's gain is plausible, not sure, and no window at the observed γ can settle it, probe it
    on one engine if that pays (model.probe); the fleet stays at the deployed γ or takes the
    sure step. Unchanged otherwise."""
    target = rec if expected_best is None else expected_best
    if inputs is None or not verdict.plausible or verdict.settle is not None or target <= inputs.observed_gamma:
        return rec, expected_best, verdict, None
    base = deployed if expected_best is None else rec
    rate = None if traffic is None else traffic.drafts_per_engine_second
    if rate is None:
        why = f"no probe of γ={target}: the window does not say how many engines serve the route at what draft rate"
        return rec, expected_best, replace(verdict, reason=f"{verdict.reason}; {why}"), None
    probe = plan_probe(inputs, deployment, gamma=target, base=base, deployed=deployed, drafts=traffic.drafts,
                       drafts_per_engine_second=rate, engines=traffic.engines, row_seconds=traffic.row_seconds)
    if probe is None:
        why = f"no probe: γ={target}'s expected gain over γ={base} is within min_gain {deployment.min_gain:.0%}"
        return rec, expected_best, replace(verdict, reason=f"{verdict.reason}; {why}"), None
    terms = (f"probe γ={target} on {probe.engines} of {traffic.engines} engine(s) for {probe.drafts_needed:,} drafts "
             f"(about {approximate_duration(probe.duration_s)}): expected value {probe.expected_value:,.0f} s against "
             f"cost {probe.expected_cost:,.0f} s of the route's output")
    if not probe.pays:
        return rec, expected_best, replace(verdict, reason=f"{verdict.reason}; no {terms}"), None
    return base, target, replace(verdict, decision="probe", reason=f"{verdict.reason}; {terms}"), probe


def _sure_step(deployed, allowed, speed_point, ens, min_gain) -> tuple[int, float] | None:
    """The allowed γ of best expected speedup among those whose gain over the deployed one is
    sure (P(gain > min_gain) ≥ DECISION_CERTAINTY), with that probability; None if none is.
    A farther γ expected to be better but not yet sure must not hold back a sure gain."""
    p_gain = np.mean(ens / ens[:, [deployed]] - 1.0 > min_gain, axis=0)  # (G,)
    sure = np.asarray(allowed) & (p_gain >= DECISION_CERTAINTY)
    sure[deployed] = False
    if not sure.any():
        return None
    step = int(np.argmax(np.where(sure, speed_point, -np.inf)))
    return step, float(p_gain[step])
