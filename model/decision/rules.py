"""The decision rules, in the order they run (docs/MODEL.md, Cost model; Decisions past the
deployed γ). Each is ``rule(priced, decision) -> decision`` (model.decision.priced,
model.decision.outcome), on the candidates' point speedups and the ensemble of their resampled
speedups (resamples × tail models, model.recommend):

  change  P(speedup(rec)/speedup(deployed) − 1 > min_gain) ≥ DECISION_CERTAINTY for the best
          expected γ — or, when that gain is plausible but not sure, for the best sure step
          (the best expected γ stays named beside it);
  off     the same for γ = 0;
  probe   the best expected γ's gain is plausible, not sure, and rests on positions past the
          observed γ that no window at it checks (or that more drafts settle only on the tail
          models' guess past the measured γ): measure toward it on one engine — the γ of most
          net value that pays and, a trial of the whole route, is as safe as a change
          (model.probe.plan.choose_probe); the fleet stays at the deployed γ or takes the sure
          step among the measured γ. On the
          specialized path a keep that rests on the configured speedup probes the γ past the
          flip when that pays (model.probe.specialized_speedup);
  unmeasured  a change past the largest γ any segment of the window measured is a probe of it,
          never a change (the fleet taking the best sure step among the measured γ meanwhile);
  keep    otherwise, with the evidence that would change it (the factor on the window's
          drafts that settles a gain, when more drafts can);
  undecided  a change, off or probe that rests on default figures, or a change or off (or a
          trial of the whole route) on a cost model missing the engine's rate by more than its
          tolerance (model.figures_needed): a what-if; a probe on part of the route measures
          instead; a keep on default figures stays a keep and says so;
  measured  where the engines measure the deployed γ against the user's own plain decode
          at the route's mix and the difference is sure on the observed rate's resamples
          (model.deployed_speedup), off or keep follows the measurement whatever the table
          projects; the model keeps only a third γ it is sure of on its widened ensemble;
  between_segments  last: where the model misses the engines, two γ they measured (an earlier
          segment, a probe's beside the fleet) decide between themselves; a running probe not
          yet sure is carried on for the rows its rate needs (model.measured_segments).
"""

from __future__ import annotations

import math

from dataclasses import replace
from statistics import NormalDist
from typing import Callable

import numpy as np

from acceptance.durations import approximate_duration

from ..decision_kind import DecisionKind

from ..deployment import DECISION_CERTAINTY
from ..figures_needed import FigureNeeded, on_defaults
from ..measured_segments import SegmentComparison, compare
from ..probe import PROBE_MIN_DRAFTS, PROBE_MIN_ROWS, Probe, RunningProbe, continued_probe
from ..probe.plan import MAX_RATE_ROWS, ProbeChoice, choose_probe, rate_rows
from ..probe.specialized_speedup import decision_break_even, speedup_probe, speedups_at
from ..probe.measured_speedup import SegmentShares, measurable, predicted_halfwidth
from .outcome import DEPLOYING_DECISIONS, UNDECIDED, Decision, gain_of, start
from .priced import Priced


def verdict(priced: Priced, decision: Decision) -> Decision:
    """change / off / keep on the best expected γ and why (module docstring). ``tail_only()``
    says whether more drafts at the observed γ can settle a gain that rests past it."""
    rec, deployed, min_gain = decision.best_gamma, priced.deployed, priced.deployment.min_gain
    speed, ens, observed = priced.speedup, priced.ensemble, priced.observed
    sure = DecisionKind.OFF if rec == 0 else DecisionKind.CHANGE
    if not priced.allowed[deployed]:
        return decision.to(sure, f"the deployed γ={deployed} cannot run here: {priced.refusals[deployed]}",
                           fleet_gamma=rec)
    if rec == deployed:
        return decision.because(f"γ={deployed} already has the best expected speedup ({speed[deployed]:.3f}×)")
    expected_gain = speed[rec] / speed[deployed] - 1.0
    if ens is None:
        return decision.because(f"γ={rec} is expected to gain {expected_gain:+.1%} over γ={deployed}, but without "
                                f"resamples (draft counts) the certainty of that gain is unknown; a window with counts "
                                f"would decide")
    gains = ens[:, rec] / ens[:, deployed] - 1.0  # (M·n,)
    p_gain = float(np.mean(gains > min_gain))
    claim = f"P(γ={rec} gains > {min_gain:.0%} over γ={deployed}) = {p_gain:.2f}"
    if p_gain >= DECISION_CERTAINTY:
        return decision.to(sure, f"{claim} ≥ {DECISION_CERTAINTY}", fleet_gamma=rec)
    head = f"{claim} < {DECISION_CERTAINTY}"
    mean, sd = float(np.mean(gains)), float(np.std(gains))
    if mean <= min_gain:
        return decision.because(f"{head}: the expected gain {expected_gain:+.1%} is within min_gain {min_gain:.0%}; "
                                f"only a clearly different acceptance at γ={rec} would change this")
    error = priced.model_error
    if (rec > observed or error) and priced.tail_only is not None:
        ens_tail = priced.tail_only()
        p_tail = float(np.mean(ens_tail[:, rec] / ens_tail[:, deployed] - 1.0 > min_gain))
        if p_tail < DECISION_CERTAINTY and rec > observed:
            return replace(decision.because(
                f"{head}: it rests on positions {observed + 1}..{rec}, past the observed γ={observed}, which never "
                f"checks them: with any number of drafts at γ={observed} the probability stays {p_tail:.2f}; "
                f"measuring γ={rec} (a probe) would settle a gain of {mean:+.1%}"), plausible=True)
        if p_tail < DECISION_CERTAINTY:
            return replace(decision.because(
                f"{head}: it rests on the cost model, which misses the engines' rate at γ={deployed} by {error:+.1%}: "
                f"with any number of drafts the probability stays {p_tail:.2f}; measuring the step costs "
                f"(`specdec calibrate plan`) would settle a gain of {mean:+.1%}"), plausible=True)
    trial = priced.ended_trial
    if trial is not None and rec > deployed:
        return replace(decision.because(
            f"{head}: it rests on positions {deployed + 1}..{min(rec, trial.gamma)} that the trial of γ={trial.gamma} "
            f"measured over {trial.drafts:,.0f} drafts, which ended: more drafts at γ={deployed} do not add to them; "
            f"measuring γ={rec} longer (a probe) would settle a gain of {mean:+.1%}"), plausible=True)
    z = NormalDist().inv_cdf(DECISION_CERTAINTY)
    factor = max((z * sd / (mean - min_gain)) ** 2 if sd > 0 else 1.0, 1.0)
    return replace(decision.because(f"{head}: a window with about {factor:.1f}× the drafts (intervals shrinking as "
                                    f"1/√drafts) would settle a gain of {mean:+.1%}"),
                   settle=factor, plausible=True, claim=head)


def sure_step(priced: Priced, decision: Decision) -> Decision:
    """A plausible but unsure gain of the best expected γ must not hold back a sure one: the
    allowed γ of best expected speedup among those whose gain over the deployed one is sure
    (P(gain > min_gain) ≥ DECISION_CERTAINTY) becomes a change; the best expected γ stays named."""
    if not decision.plausible or priced.ensemble is None:
        return decision
    ens, deployed, min_gain = priced.ensemble, priced.deployed, priced.deployment.min_gain
    p_gain = np.mean(ens / ens[:, [deployed]] - 1.0 > min_gain, axis=0)  # (G,)
    sure = np.asarray(priced.allowed) & (p_gain >= DECISION_CERTAINTY)
    sure[deployed] = False
    if not sure.any():
        return decision
    step = int(np.argmax(np.where(sure, priced.speedup, -np.inf)))
    return decision.to(DecisionKind.OFF if step == 0 else DecisionKind.CHANGE,
                       f"the best γ whose gain is sure now: P(γ={step} gains > {min_gain:.0%} over γ={deployed}) = "
                       f"{p_gain[step]:.2f} ≥ {DECISION_CERTAINTY}", fleet_gamma=step)


def probe(priced: Priced, decision: Decision) -> Decision:
    """A running probe's next step (``with_running_probe``), unless a probe farther out pays
    more; else whether to start one (``with_probe``)."""
    running = priced.running_probe
    farther = with_probe(priced, decision)
    if running is None or priced.probe_inputs is None:
        return farther
    if farther.probe is not None and farther.probe.gamma > running.gamma:
        return farther  # the best expected γ lies past the running probe's, and probing it pays
    carried = with_running_probe(priced, decision, running)
    priced_farther = farther.probe or farther.declined  # priced beside it, not run: what the horizon decided
    return carried if carried.probe is not None or priced_farther is None else replace(carried, declined=priced_farther)


def with_probe(priced: Priced, decision: Decision) -> Decision:
    """When the best expected γ's gain is plausible, not sure, and no window at the observed γ
    can settle it, probe toward it where that pays (model.probe.plan.choose_probe: the nearest
    γ past the measured ones worth measuring; a whole-route trial only as safe as a change);
    the fleet stays at the deployed γ or takes the sure step. Unchanged otherwise."""
    target, base, inputs, traffic = decision.best_gamma, decision.fleet_gamma, priced.probe_inputs, priced.traffic
    if inputs is None or not decision.plausible:
        return decision
    # an ended trial's positions are its drafts alone: a γ among them may be measured longer
    if target <= (priced.deployed if priced.ended_trial is not None else inputs.observed_gamma):
        return decision
    if decision.settle is not None:
        if target <= priced.largest_measured:
            return decision  # more drafts settle it: a window at the measured γ judges it
        decision = _past_the_measured(priced, decision, target)
    if traffic is None or traffic.drafts_per_engine_second is None:
        return decision.because(f"no probe of γ={target}: how many engines serve the route at what "
                                f"draft rate is not known here")
    upto, within = priced.largest_measured, base
    if base > upto:  # a sure step past the measured γ is itself unmeasured: beside a probe the fleet stays within
        step = _sure_step_within(priced, upto)
        within = priced.deployed if step is None else step
    choice = choose_probe(inputs, priced.deployment, traffic, target=target, base=within, deployed=priced.deployed,
                          measured_upto=upto)
    if choice.aimed is None:
        return decision.because(f"no probe: γ={target}'s expected gain over γ={within} is within min_gain "
                                f"{priced.deployment.min_gain:.0%}")
    if choice.probe is None:
        return replace(decision.because(_no_probe(priced, choice, traffic.engines, within)), declined=choice.aimed)
    terms = _probe_terms(priced, choice, choice.probe, traffic.engines, within)
    if within != base:
        terms = (f"γ={base} lies past γ={upto}, the largest measured: the fleet "
                 + ("keeps" if within == priced.deployed else "takes") + f" γ={within} while the probe measures; "
                 + terms)
    return decision.to(DecisionKind.PROBE, terms, probe=choice.probe, fleet_gamma=within)


def _past_the_measured(priced: Priced, decision: Decision, target: int) -> Decision:
    """A gain more drafts would settle on the tail models alone, at a γ past every measured one:
    settled so, it would be a change past the measured γ, which is a probe (``unmeasured``) —
    so the probe is weighed now, and the factor on the window's drafts is not offered."""
    upto = priced.largest_measured
    why = (f"{decision.claim}: it rests on positions {upto + 1}..{target}, past γ={upto}, the largest "
           f"measured: more drafts at γ={priced.deployed} would settle it only on the tail "
           f"models' guess of them, and a move there is a probe")
    return replace(decision, reasons=(why,) + decision.reasons[1:], settle=None)


def _probe_terms(priced: Priced, choice: ProbeChoice, planned: Probe, engines: int | None, base: int) -> str:
    """The probe to run, in words: where, how long, its value against its cost, and — when it
    steps short of the γ it aims at — why that nearer γ."""
    g = planned.gamma
    terms = (f"probe γ={g} on {planned.engines} of {engines} engine(s) for {planned.drafts_needed:,} drafts "
             f"(about {approximate_duration(planned.duration_s)}): expected value {planned.expected_value:,.0f} s "
             f"against cost {planned.expected_cost:,.0f} s of the route's output")
    if planned.whole_route:
        terms += (f"; a trial of the whole route, so as sure as a change: P(γ={g} loses > "
                  f"{priced.deployment.min_gain:.0%} against γ={base}) = {planned.loss_probability:.2f} ≤ "
                  f"{1 - DECISION_CERTAINTY:.1f}")
    if g < choice.target:
        terms += f"; γ={g} rather than γ={choice.target}: {_stepped_short(priced, choice, planned, base)}"
    return terms


def _stepped_short(priced: Priced, choice: ProbeChoice, planned: Probe, base: int) -> str:
    """Why the probe stops short of the γ it aims at (model.probe.plan.choose_probe)."""
    aimed, m, t = choice.aimed, priced.deployment.min_gain, choice.target
    tail = (f"once γ={planned.gamma} is measured, the tail models start from it and a later window can probe "
            f"farther")
    if aimed is None:
        return f"γ={t}'s expected gain over γ={base} is within min_gain {m:.0%}; {tail}"
    if not aimed.safe:
        return (f"a trial of the whole route at γ={t} would be a change of it for its duration, and P(γ={t} loses > "
                f"{m:.0%} against γ={base}) = {aimed.loss_probability:.2f} > {1 - DECISION_CERTAINTY:.1f}; γ={planned.gamma} "
                f"is the safe trial worth most; {tail}")
    if not aimed.pays:
        return f"γ={t}'s probe does not pay; {tail}"
    return (f"its probe is worth {planned.expected_value - planned.expected_cost:,.0f} s net of its cost against "
            f"γ={t}'s {aimed.expected_value - aimed.expected_cost:,.0f} s: the positions past γ={planned.gamma}, "
            f"whose guess grows less sure with the distance, add less than their expected loss; {tail}")


def _no_probe(priced: Priced, choice: ProbeChoice, engines: int | None, base: int) -> str:
    """Why no probe runs toward ``choice.target`` though its gain over ``base`` is expected."""
    aimed, m = choice.aimed, priced.deployment.min_gain
    assert aimed is not None  # a target within min_gain says so before
    head = (f"no probe γ={aimed.gamma} on {aimed.engines} of {engines} engine(s) for {aimed.drafts_needed:,} drafts "
            f"(about {approximate_duration(aimed.duration_s)}): ")
    if not aimed.safe:
        why = (f"it would be a trial of the whole route, a change of it for its duration, and P(γ={aimed.gamma} "
               f"loses > {m:.0%} against γ={base}) = {aimed.loss_probability:.2f} > {1 - DECISION_CERTAINTY:.1f}, "
               f"which no change may risk")
    else:
        why = f"expected value {aimed.expected_value:,.0f} s against cost {aimed.expected_cost:,.0f} s of the route's output"
    nearer = "" if choice.target <= priced.largest_measured + 1 else (
        f"; nor any nearer γ past the measured γ={priced.largest_measured}")
    return head + why + nearer


def with_running_probe(priced: Priced, decision: Decision, running: RunningProbe) -> Decision:
    """A probe runs at γ_p and its positions are measured (the joined curve). Stop it early
    when its own data shows it losing by more than min_gain with P ≥ DECISION_CERTAINTY; a
    sure decision settles it; else carry it on (decision probe) while it holds fewer than
    PROBE_MIN_DRAFTS drafts or, for a gain plausible but not yet sure, fewer than the factor
    that settles it asks; else it has done its work: stop it."""
    g, m, deployed, inputs = running.gamma, priced.deployment.min_gain, priced.deployed, priced.probe_inputs
    assert inputs is not None  # probe() carries a running probe on only with an ensemble to price it
    ens = inputs.ensemble
    p_lose = float(np.mean(ens[:, g] / ens[:, deployed] - 1.0 < -m))
    if p_lose >= DECISION_CERTAINTY:
        why = (f"stop the probe at γ={g} early: its own {running.drafts:,.0f} drafts show P(γ={g} loses > {m:.0%} "
               f"against γ={deployed}) = {p_lose:.2f} ≥ {DECISION_CERTAINTY}")
        return replace(decision, reasons=(why,) + decision.reasons)
    done = f"the probe at γ={g} ({running.drafts:,.0f} drafts)"
    if decision.kind in (DecisionKind.CHANGE, DecisionKind.OFF):  # sure: the fleet's change takes over from the probe
        return decision.because(f"{done} has settled this: "
                                + ("deploy it on every engine" if decision.fleet_gamma == g else "stop it"))
    unsettled = decision.settle if decision.plausible and decision.settle is not None else 1.0
    to_settle = (unsettled - 1.0) * running.drafts
    remaining = int(np.ceil(max(PROBE_MIN_DRAFTS - running.drafts, to_settle, 0.0)))
    if remaining <= 0 and running.rows >= PROBE_MIN_ROWS:
        return decision.because(f"{done} has done its work: stop it")
    engines = None if priced.traffic is None else priced.traffic.engines
    planned = continued_probe(inputs, priced.deployment, running, base=decision.fleet_gamma, deployed=deployed,
                             remaining=remaining, engines=engines)
    # per-request rows name no engine: the probe's draft rate per engine, and so its time, is unknown
    took = (f"about {approximate_duration(planned.duration_s)}" if math.isfinite(planned.duration_s)
            else "its time unknown: the rows name no engine")
    more = f"about {planned.drafts_needed:,} more ({took})"
    if to_settle > PROBE_MIN_DRAFTS - running.drafts and to_settle > 0:
        why = f"carry on the probe at γ={g}: {more} would settle it"
    elif running.drafts < PROBE_MIN_DRAFTS:
        why = f"carry on the probe at γ={g} to the {PROBE_MIN_DRAFTS:,} drafts a probe takes at least: {more}"
    else:
        why = (f"carry on the probe at γ={g} for the {PROBE_MIN_ROWS} rows (scrape intervals, or requests) a probe "
               f"takes at least: {took} more")
    # the factor on the window's drafts is said as the probe's own drafts: one figure
    head = (decision.claim,) if decision.settle is not None else decision.reasons
    return replace(decision, kind=DecisionKind.PROBE, best_gamma=g, reasons=head + (why,), settle=None, probe=planned)


def unmeasured(priced: Priced, decision: Decision) -> Decision:
    """Where no point bears on a γ — past the largest γ any segment of the window measured
    (Priced.largest_measured: the deployed one, another with its own latency, a running probe's):
    no engine checked its positions past that γ, and its step cost there is the profile's shape
    (or the measured line) extrapolated — a change there is a probe, never a change: probe it
    where that pays, the fleet taking the best sure step among the measured γ meanwhile; else
    that step; else keep (docs/MODEL.md, The decision)."""
    target, upto, deployed = decision.fleet_gamma, priced.largest_measured, priced.deployed
    if decision.kind != DecisionKind.CHANGE or target <= upto or not priced.allowed[deployed]:
        return decision
    step = _sure_step_within(priced, upto)
    base = deployed if step is None else step
    head = decision.reasons + (f"gamma {target} lies past gamma {upto}, the largest measured: no "
                               f"point bears on its acceptance or step cost there, so going there is a "
                               f"probe, never a change",)
    inputs, traffic = priced.probe_inputs, priced.traffic
    choice = None
    if inputs is not None and traffic is not None and traffic.drafts_per_engine_second is not None:
        choice = choose_probe(inputs, priced.deployment, traffic, target=target, base=base, deployed=deployed,
                              measured_upto=upto)
    if choice is not None and choice.probe is not None:
        assert traffic is not None  # planned from its draft rate
        return replace(decision, kind=DecisionKind.PROBE, fleet_gamma=base, best_gamma=target, probe=choice.probe,
                       reasons=head + (_probe_terms(priced, choice, choice.probe, traffic.engines, base),))
    why_not = ("no probe: how many engines serve the route at what draft rate is not known here"
               if choice is None
               else f"no probe: its expected gain over gamma {base} is within min_gain" if choice.aimed is None
               else _no_probe(priced, choice, None if traffic is None else traffic.engines, base))
    # the best expected γ stays named beside the fleet's (a keep's recommended_gamma: outcome.py)
    if choice is not None and choice.probe is None and choice.aimed is not None:
        decision = replace(decision, declined=choice.aimed)
    if step is not None:
        return replace(decision, kind=DecisionKind.OFF if step == 0 else DecisionKind.CHANGE, fleet_gamma=step,
                       reasons=head + (f"{why_not}; the fleet takes the best sure step among the measured gamma, "
                                       f"gamma {step}",))
    return replace(decision, kind=DecisionKind.KEEP, fleet_gamma=deployed, reasons=head + (why_not,))


def _sure_step_within(priced: Priced, upto: int) -> int | None:
    """The allowed γ ≤ ``upto`` other than the deployed one of best expected speedup among those
    whose gain over it is sure (sure_step's test), or None."""
    ens, deployed = priced.ensemble, priced.deployed
    if ens is None:
        return None
    p_gain = np.mean(ens / ens[:, [deployed]] - 1.0 > priced.deployment.min_gain, axis=0)
    sure = np.asarray(priced.allowed) & (p_gain >= DECISION_CERTAINTY) & (np.arange(len(p_gain)) <= upto)
    sure[deployed] = False
    return int(np.argmax(np.where(sure, priced.speedup, -np.inf))) if sure.any() else None


def specialized(priced: Priced, decision: Decision) -> Decision:
    """On latency_specialized: how far the fleet's γ rests on the specialized speedup (its
    break-even), and a keep that rests on the configured figure probes the γ past the flip
    when that pays (model.probe.specialized_speedup.speedup_probe) — where its latency can
    measure s (model.probe.measured_speedup.measurable: not on a measured table)."""
    path = priced.specialized
    if path is None:
        return decision
    final, deployment = decision.fleet_gamma, priced.deployment
    speeds_at = speedups_at(path.step_time_terms, path.expected_tokens)
    break_even = decision_break_even(speeds_at, deployment, priced.allowed, final)
    if break_even is not None and path.measured:
        break_even = replace(break_even, source="measured")
    decision = replace(decision, break_even=break_even)
    if decision.probe is not None or priced.running_probe is not None or decision.kind != DecisionKind.KEEP:
        return decision
    if not measurable(deployment):  # a measured table: a probe's latency cannot tell s (nothing to solve)
        return decision
    shares = SegmentShares(path.batch_sizes, path.time_shares / np.sum(path.time_shares))

    def halfwidth_for(base: int, gamma: int, samples: tuple[float, float]) -> Callable[[float], float]:
        return predicted_halfwidth(deployment, (base, gamma), shares, clean_share=path.clean_share, samples=samples,
                                   level=DECISION_CERTAINTY, from_running=path.latency_from_running)

    planned = speedup_probe(break_even, speeds_at, deployment, priced.traffic, path.step_time, priced.ensemble,
                           halfwidth_for)
    if planned is None:
        return decision
    assert priced.traffic is not None  # speedup_probe plans only on the route's traffic
    terms = (f"γ={final} rests on the specialized decode speedup: probe γ={planned.gamma} on {planned.engines} of "
             f"{priced.traffic.engines} engine(s) for {planned.drafts_needed:,} drafts (about "
             f"{approximate_duration(planned.duration_s)}), whose latency against the fleet's measures it: expected "
             f"value {planned.expected_value:,.0f} s against cost {planned.expected_cost:,.0f} s of the route's output")
    if not planned.pays:
        return replace(decision.because(f"no probe: {terms}"), declined=planned)
    return decision.to(DecisionKind.PROBE, terms, best_gamma=final, probe=planned)


def given_figures(priced: Priced, decision: Decision) -> Decision:
    """A decision only on figures the user gave or the data shows, on a cost model that meets
    the engine's observed rate: a change, off or probe that rests on a default becomes
    ``undecided`` (the fleet keeps its γ; the γ it would have run or probed named as the
    best expected; nothing to deploy or probe), a keep stays but says what it rests on. A
    model that misses the observed tok/s at the deployed γ by more than its tolerance prices
    step times the engines do not have: its gains are as far off as the miss, so its change or
    off is withheld — but not a probe on part of the route on figures the user gave, the rest
    of the fleet staying where it is, which measures the γ instead of trusting the model (its
    ensemble widened by the miss where it can be: model.model_error_spread); with a sure step
    for the others it is withheld whole."""
    needed = priced.figures_needed
    if priced.model_error_warning and _measuring_probe(priced, decision):
        assert decision.probe is not None  # _measuring_probe
        return decision.because(f"the cost model misses the engines at the deployed gamma beyond its tolerance "
                                f"(the warning): a probe of gamma {decision.probe.gamma} on part of the route "
                                f"measures it where a change would trust the model"
                                + (f" (the intervals carry its {priced.model_error:+.1%} at the deployed gamma)"
                                   if priced.model_error else ""))
    if priced.model_error_warning and decision.kind in DEPLOYING_DECISIONS:
        return withheld(priced.deployed, decision, needed, f"{priced.model_error_warning}. On this model the tool would "
                                           f"{_what_it_would_do(decision)}: a what-if, not a decision")
    if not needed:
        return decision
    if decision.kind in DEPLOYING_DECISIONS:
        gain = gain_of(decision.recommended_gamma, priced.deployed, priced.speedup, priced.ensemble, priced.level)
        would = f"the tool would {_what_it_would_do(decision)}" + (f" ({gain})" if gain is not None else "")
        return withheld(priced.deployed, decision, needed, on_defaults(list(needed), would))
    keys = ", ".join(n.key for n in needed)
    return replace(decision.because(f"priced on default figures ({keys}), which could change it"),
                   figures_needed=needed)


def _measuring_probe(priced: Priced, decision: Decision) -> bool:
    """A probe on part of the route, on figures the user gave, with the rest of the fleet where
    it is: it measures the γ the model cannot be trusted at (its ensemble carries the model's
    error there where that error is known apart from the rate's noise: model.model_error_spread)
    and moves nothing on the model's word."""
    return (decision.kind == DecisionKind.PROBE and decision.probe is not None and not decision.probe.whole_route
            and decision.fleet_gamma == priced.deployed and not priced.figures_needed)


def measured(priced: Priced, decision: Decision) -> Decision:
    """What the engines measure outranks what the model projects: where the deployed γ is
    measured against the user's plain decode at the route's mix and the difference is sure
    (model.deployed_speedup.DeployedSpeedup.verdict), that measurement decides between the
    two. Off measured: the fleet turns speculation off, unless the table's best expected γ is
    a third one it may act on (``_third_gamma``): then it changes to that. Keep measured: a
    model's off is overruled. Otherwise unchanged."""
    deployed_measured = priced.deployed_measured
    verdict = None if deployed_measured is None else deployed_measured.verdict()
    if verdict is None or verdict.decides is None:
        return decision
    model = decision.withheld or decision
    if verdict.decides == DecisionKind.KEEP:
        if model.fleet_gamma != 0:
            return decision
        return decision.anew(DecisionKind.KEEP, priced.deployed, priced.deployed,
                             (_measured_reason(priced, verdict.p_deployed_gains, "keep"),), measured=verdict)
    best, why_not = _third_gamma(priced)
    if why_not is None:
        return decision.anew(DecisionKind.CHANGE, best, best,
                             (_measured_reason(priced, verdict.p_plain_gains, "slower"),
                              f"the table's best gamma {best}: {_over_plain_decode(priced, best)} ≥ "
                              f"{DECISION_CERTAINTY}{_widened(priced)}, so the fleet changes to it")
                             + _stop_running(priced, best), measured=verdict, figures_needed=())
    reasons = ((_measured_reason(priced, verdict.p_plain_gains, "off"),)
               + ((f"the table's best gamma {best} is not acted on: {why_not}",) if why_not else ())
               + _stop_running(priced, 0))
    return decision.anew(DecisionKind.OFF, 0, 0, reasons, measured=verdict, figures_needed=())


def _third_gamma(priced: Priced) -> tuple[int, str | None]:
    """(the table's best expected γ, why it may not stand beside a measured off — None when it
    may, "" when it is 0 or the deployed γ). It may where the model meets the engines within
    its tolerance, on figures the user gave, at a γ whose positions the window measured, sure
    to gain more than min_gain over plain decode on the ensemble its error at the deployed γ
    widened (model.model_error_spread)."""
    best = priced.best_expected
    if best in (0, priced.deployed):
        return best, ""
    if priced.model_error_warning:
        return best, "the cost model misses the engines at the deployed gamma beyond its tolerance"
    if priced.figures_needed:
        return best, f"the table rests on default figures ({', '.join(n.key for n in priced.figures_needed)})"
    if best > priced.largest_measured:
        return best, f"no engine measured gamma {best}: past gamma {priced.largest_measured} no point bears on it (a probe would)"
    p_gain = _p_over_plain_decode(priced, best)
    if p_gain is None:
        return best, "without resamples its gain over plain decode is not known to be sure"
    if p_gain < DECISION_CERTAINTY:
        return best, f"{_over_plain_decode(priced, best)} < {DECISION_CERTAINTY}{_widened(priced)}"
    return best, None


def _widened(priced: Priced) -> str:
    """Whether the ensemble carries the model's error at the deployed γ (model.model_error_spread)."""
    return f" with the model's {priced.model_error:+.1%} at the deployed gamma carried into it" if priced.model_error else ""


def _p_over_plain_decode(priced: Priced, gamma: int) -> float | None:
    """P(γ gains > min_gain over plain decode) on the ensemble (None without one)."""
    ens = priced.ensemble
    return None if ens is None else float(np.mean(ens[:, gamma] - 1.0 > priced.deployment.min_gain))


def _over_plain_decode(priced: Priced, gamma: int) -> str:
    p_gain = _p_over_plain_decode(priced, gamma)
    return f"P(gamma {gamma} gains > {priced.deployment.min_gain:.0%} over plain decode) = {p_gain:.2f}"


def _measured_reason(priced: Priced, probability: float, outcome: str) -> str:
    """The measurement that decided, in words: its figure, its probability and what follows."""
    m = priced.deployed_measured
    assert m is not None  # measured() decides only on a measurement
    low, high = m.interval or (m.value, m.value)
    head = (f"the engines measure gamma {m.gamma} at {m.value:.2f}x [{low:.2f}, {high:.2f}] the plain decode's "
            f"{m.plain_tokens_per_second:,.1f} tok/s per user ({m.observed_tokens_per_second:,.1f} observed)")
    gain = priced.deployment.min_gain
    if outcome == "keep":
        return (f"{head}: P(gamma {m.gamma} gains > {gain:.0%} over plain decode) = {probability:.2f} "
                f"≥ {DECISION_CERTAINTY}, measured, so speculation stays on whatever the table projects")
    claim = f"P(plain decode gains > {gain:.0%} over gamma {m.gamma}) = {probability:.2f} ≥ {DECISION_CERTAINTY}"
    if outcome == "slower":
        return f"{head}: {claim}, measured, so speculation as deployed is slower than plain decode"
    return f"{head}: {claim}, measured, so turning speculation off is faster whatever the table projects"


def _what_it_would_do(decision: Decision) -> str:
    """The withheld decision in words: run a γ, turn speculation off, or probe one."""
    if decision.probe is not None:
        return f"probe gamma {decision.probe.gamma} on {decision.probe.engines} engine(s)"
    return "turn speculation off" if decision.fleet_gamma == 0 else f"run gamma {decision.fleet_gamma}"


def withheld(deployed: int, decision: Decision, needed: tuple[FigureNeeded, ...], reason: str) -> Decision:
    """``decision`` withheld: the fleet keeps the ``deployed`` γ, the γ it would have run (or
    probed) named as the best expected, nothing to deploy or probe."""
    best = decision.probe.gamma if decision.probe is not None else decision.recommended_gamma
    return replace(decision, kind=UNDECIDED, fleet_gamma=deployed, best_gamma=best, reasons=(reason,), probe=None,
                   declined=None, figures_needed=needed, withheld=decision)


def between_segments(priced: Priced, decision: Decision) -> Decision:
    """Where the cost model misses the engines, what they measure between two γ decides: where
    the window holds another γ's segment with its own rate (an earlier γ, a probe's beside the
    fleet), each carried to the route's batch mix, and the faster of the measured γ beats the
    deployed one by more than min_gain with P ≥ DECISION_CERTAINTY (model.measured_segments),
    the fleet changes to it, measured — a probe the table wants past it going on meanwhile;
    where the deployed γ surely beats the measured γ the table would move the fleet to, it
    keeps its γ, measured. A model that meets the engines at the deployed γ prices every γ on
    the same points (the probe's curve, the step costs measured) and may name a third γ between
    or beside them, which one engine's rate against the fleet's (a probe's batch mix, its own
    requests, the engine itself) does not overrule. Only on the mean per-user objective (the
    rate measured); an off measured against plain decode stands; where the pricing rests on
    default figures (the rates are carried to the route's mix by the model) the withheld answer
    stands, naming them; only γ that can run here."""
    rates = {r.gamma: r for r in priced.segment_rates
             if r.gamma == priced.deployed or (r.gamma < len(priced.allowed) and priced.allowed[r.gamma])}
    deployed = rates.get(priced.deployed)
    if (deployed is None or len(rates) < 2 or priced.deployment.objective != "interactivity"
            or not priced.model_error_warning or priced.figures_needed
            or (decision.measured is not None and decision.kind == DecisionKind.OFF)):
        return decision
    m, level = priced.deployment.min_gain, priced.level
    best = max(rates.values(), key=lambda r: r.tokens_per_second)
    if best.gamma != priced.deployed:
        faster = compare(best, deployed, min_gain=m, level=level)
        if faster.probability >= DECISION_CERTAINTY:
            return _measured_change(priced, decision, faster)
        if best.running and decision.fleet_gamma == priced.deployed and faster.gain > m:
            carried = _carried_on(priced, decision, faster)
            if carried is not None and carried.probe is not None:
                return carried
            decision = carried or decision  # a carry-on priced and declined stays named
    target = (decision.withheld or decision).fleet_gamma
    if target != priced.deployed and target in rates:
        kept = compare(deployed, rates[target], min_gain=m, level=level)
        if kept.probability >= DECISION_CERTAINTY:
            return decision.anew(DecisionKind.KEEP, priced.deployed, priced.deployed, (_between_reason(kept, "keep"),),
                                 measured_between=kept)
    return decision


def _carried_on(priced: Priced, decision: Decision, faster: SegmentComparison) -> Decision | None:
    """A running probe whose rate beats the fleet's by more than min_gain, not yet surely, where
    the model cannot settle it: carried on for the rows its rate needs at the gain it measured
    (model.probe.plan.rate_rows), so that its measurement decides; the standing decision with
    that carry-on as declined where it does not pay; None where it is not the running probe
    or its rows cannot be sized."""
    running, inputs, traffic = priced.running_probe, priced.probe_inputs, priced.traffic
    if (running is None or running.gamma != faster.faster or inputs is None or inputs.rate_row_cv is None
            or not running.drafts_per_engine_second or not running.row_seconds or priced.figures_needed):
        return None
    others = traffic.engines if traffic is not None and traffic.engines else 0
    rows = rate_rows(inputs.rate_row_cv, gain=faster.gain, min_gain=faster.min_gain, probed=running.engines,
                     others=others, window_rows=faster.rows[1])
    more_rows = max(0, rows - faster.rows[0])
    if more_rows == 0 or rows >= MAX_RATE_ROWS:
        return None  # it ran the rows, or no run settles a gain that near min_gain: the answer stands
    # drafts at one engine's rate, as continued_probe times them
    remaining = int(np.ceil(more_rows * running.row_seconds * running.drafts_per_engine_second))
    planned = continued_probe(inputs, priced.deployment, running, base=priced.deployed, deployed=priced.deployed,
                              remaining=remaining, engines=others or None)
    if not planned.runs:
        return replace(decision, declined=planned)  # its value does not pay for its time: the answer stands
    more = f"{more_rows:,} more scrape intervals (about {approximate_duration(planned.duration_s)})"
    why = (f"the cost model misses the engines at the deployed gamma beyond its tolerance (the warning), so the "
           f"probe's measurement decides: {_between_reason(faster, 'unsure')}: carry on the probe at gamma "
           f"{running.gamma} for about {more}, the rows its rate needs against the fleet's at that gain")
    return decision.anew(DecisionKind.PROBE, priced.deployed, running.gamma, (why,), probe=planned, plausible=True, measured=None)


def _measured_change(priced: Priced, decision: Decision, faster: SegmentComparison) -> Decision:
    """The fleet to the faster measured γ; a probe past it goes on (its γ stays the best named),
    a running probe at or below it stops, said."""
    goes_on = decision.probe if decision.probe is not None and decision.probe.gamma > faster.faster else None
    reasons: tuple[str, ...] = (_between_reason(faster, "change"),)
    if goes_on is not None:
        reasons += (f"the probe of gamma {goes_on.gamma} goes on meanwhile: on {goes_on.engines} engine(s) for "
                    f"{goes_on.drafts_needed:,} drafts (about {approximate_duration(goes_on.duration_s)})",)
    if goes_on is None or priced.running_probe is None or goes_on.gamma != priced.running_probe.gamma:
        reasons += _stop_running(priced, faster.faster)
    dropped = None if goes_on is not None else decision.probe or decision.declined
    return decision.anew(DecisionKind.PROBE if goes_on else DecisionKind.CHANGE, faster.faster,
                         goes_on.gamma if goes_on else faster.faster, reasons, probe=goes_on, declined=dropped,
                         measured=None, measured_between=faster, figures_needed=())


def _stop_running(priced: Priced, fleet_gamma: int) -> tuple[str, ...]:
    """The sentence that stops a running probe once a measured decision moves the fleet
    (nothing where none runs)."""
    running = priced.running_probe
    if running is None:
        return ()
    return (f"stop the probe at gamma {running.gamma}: "
            + ("the fleet now runs it" if running.gamma == fleet_gamma
               else f"the fleet's change to gamma {fleet_gamma} takes over from it"),)


def _between_reason(c: SegmentComparison, outcome: str) -> str:
    """Two measured γ's rates and what follows (``outcome``: change, keep, unsure), in words:
    each as measured, and where its mix differs from the route's, as carried there."""
    where = "side by side" if c.side_by_side else "in the window"
    sure = c.probability >= DECISION_CERTAINTY

    def rate(i: int) -> str:
        measured, carried = c.measured_tokens_per_second[i], (c.faster_tokens_per_second, c.slower_tokens_per_second)[i]
        at_route = (f" ({carried:,.1f} at the route's batch mix, by the model's step times)"
                    if abs(c.mix_factors[i] - 1.0) > 5e-4 else "")
        return f"{measured:,.1f}{at_route}"

    head = (f"the engines measure gamma {c.faster} at {rate(0)} tok/s per user against gamma {c.slower}'s {rate(1)} "
            f"({where}, over {c.rows[0]} and {c.rows[1]} {c.rows_unit}): {c.gain:+.1%} [{c.low:+.1%}, "
            f"{c.high:+.1%}], P(gain > {c.min_gain:.0%}) = {c.probability:.2f} {'≥' if sure else '<'} "
            f"{DECISION_CERTAINTY}")
    if outcome == "unsure":
        return head
    if outcome == "keep":
        return f"{head}, measured, so the fleet keeps gamma {c.faster} whatever the table projects"
    return f"{head}, measured, so the fleet changes to gamma {c.faster} whatever the table projects"


RULES: tuple[Callable[[Priced, Decision], Decision], ...] = (verdict, sure_step, probe, unmeasured, specialized,
                                                               given_figures, measured, between_segments)


def decide(priced: Priced) -> Decision:
    """The route's decision: every rule of RULES in order, from the best expected γ."""
    decision = start(priced.deployed, priced.best_expected)
    for rule in RULES:
        decision = rule(priced, decision)
    return decision


def decide_on_ensemble(priced: Priced) -> Decision:
    """The decision on an ensemble alone (no probe, no specialized path, no figures gate):
    verdict and sure step, as a shared deployment's joint γ is decided."""
    return sure_step(priced, verdict(priced, start(priced.deployed, priced.best_expected)))

