"""The one tune-gamma JSON document and its console view, the one NaN → null rule, the clock and duration wording.

Every view prints through here: ``tuning_to_dict`` is the tune-gamma document
(docs/REFERENCE.md, The tune-gamma JSON) of a ``specdec.pipeline.RouteTuning``;
``json_document`` the text of any document the views print (``schema_version`` first,
NaN and inf as null by ``json_safe``); ``format_tuning`` the console view of the same
document; ``format_clock`` and ``format_duration`` the times every message names.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any, cast

from acceptance.counts import mean_draft_length
from acceptance.durations import approximate_duration, format_clock, format_duration  # noqa: F401  (the views' one wording of times)
from acceptance.json_safe import json_safe
from acceptance.plugin_series import batch_bucket
from model.deployment import DECISION_CERTAINTY
from model.decision_kind import DecisionKind
from model.vllm_config import DYNAMIC_SD_V1_METHODS

from .sampling_words import sampling_lines
from .json_documents import DeploymentDocument, Event, Observed, ProbeSegment, TargetStatus, TuneGamma

# of every JSON document the views print (tune-gamma, inspect, ...); 2: decision "probe" and
# the tune-gamma `probe` object (nothing renamed)
JSON_SCHEMA_VERSION = 2


def json_document(doc: Mapping[str, Any]) -> str:
    """The text of one JSON document as the views print it: schema_version first, NaN and
    inf as null (json_safe), indented."""
    return json.dumps(json_safe({"schema_version": JSON_SCHEMA_VERSION, **doc}), indent=2, allow_nan=False)


def tuning_to_dict(t) -> TuneGamma:
    """The tune-gamma JSON document (docs/REFERENCE.md, The tune-gamma JSON), minus schema_version."""
    e = t.estimate
    rec = t.recommendation.to_dict()
    observed: Observed = {
        "gamma": e.gamma,
        "drafts": e.drafts,
        "survival": e.survival.value,
        "survival_low": e.survival.low,
        "survival_high": e.survival.high,
        "conditional": e.conditional.value,
        "mean_acceptance_length": e.mean_acceptance_length.value,
        "mean_acceptance_length_interval": list(e.mean_acceptance_length.confidence_interval),
        "draft_acceptance_rate": e.draft_acceptance_rate.value,
        "equivalent_p": e.equivalent_p.value,
        "equivalent_p_interval": list(e.equivalent_p.confidence_interval),
        "interval_method": e.method,
        "segments": [],
        "drift": None,
        "drafts_more_needed": t.drafts_more_needed,
        "batch_mix": None if t.batch_mix is None else {str(k): v for k, v in sorted(t.batch_mix.items())},
        "notes": list(t.notes),
        "survival_reached": t.survival_reached,
        "mean_draft_length": mean_draft_length(e.counts),
        "reached": t.draft_reach,
        "undrafted_token_share": None if t.route_estimate is None else t.route_estimate.undrafted_token_share,
        "undrafted_token_share_source": None if t.route_estimate is None else t.route_estimate.undrafted_source,
        "survival_by_batch": None,
        "probe_segment": _probe_segment_dict(t.probe.running),
    }
    if t.plugin is not None and t.plugin.by_batch:
        used = {batch_bucket(b).label for b in (t.survival_by_batch or {})}
        observed["survival_by_batch"] = {
            label: {"drafts": bs.drafts, "survival": list(bs.survival), "survival_reached": list(bs.reached_survival),
                    "used_in_model": label in used}
            for label, bs in t.plugin.survival_by_batch().items()
        }
    if t.drift is not None:
        d = t.drift
        observed["drift"] = {
            "detected": d.detected,
            "tested": d.tested,
            "recent_mean_acceptance_length": d.recent_mean_acceptance_length,
            "earlier_mean_acceptance_length": d.earlier_mean_acceptance_length,
            "difference": d.difference.value,
            "difference_interval": list(d.difference.confidence_interval),
            "recent_start": d.recent_start,
            "message": d.message,
        }
    w = t.window
    if w is not None:
        current = w.current_segments
        observed["segments"] = [
            {
                "gamma": s.gamma, "start": s.start, "end": s.end, "drafts": s.total.drafts,
                "engines": [list(x) for x in s.engines], "newest": s is w.newest_segment,
                # still running at the window's end (a rolling change or a probe), else older
                "current": any(s is c for c in current),
                "engines_at_end": [list(x) for x in getattr(s, "engines_at_end", None) or s.engines],
            }
            for s in w.segments
        ]
        observed["events"] = [_event_dict(ev) for ev in w.events]
        observed["batch_time_shares"] = {str(k): v for k, v in sorted(w.step_shape.batch_time_shares.items())}
        observed["observed_tokens_per_second"] = t.route_estimate.observed_tokens_per_second
        observed["targets"] = [_status_dict(s) for s in w.target_status]
    doc = {
        "route": t.route,
        "window": {"start": t.window_start, "end": t.window_end} if t.window_start is not None else None,
        "objective": rec.pop("objective"),
        "cost_profile": rec.pop("cost_profile"),
        "interval_level": rec.pop("interval_level"),
        "observed": observed,
    }
    doc.update(rec)
    doc["shared_deployment"] = t.shared_deployment
    return cast(TuneGamma, json_safe(doc))  # the keys and types: specdec/json_documents.py


def deployment_to_dict(d) -> DeploymentDocument:
    """The tune-gamma --deployment document: ``deployment`` (model.shared_deployment) and each
    route's own tune-gamma document, minus schema_version."""
    doc: DeploymentDocument = {"deployment": d.recommendation.to_dict(),
                               "routes": [tuning_to_dict(t) for t in d.tunings]}
    return cast(DeploymentDocument, json_safe(doc))


def format_deployment(doc: Mapping[str, Any]) -> str:
    """The console view of a tune-gamma --deployment document."""
    dep, routes = doc["deployment"], doc["routes"]
    level = int(round(routes[0]["interval_level"] * 100))
    mix = ", ".join(f"{r} {dep['token_shares'][r]:.0%}" for r in dep["routes"])
    lines = [f"deployment {dep['name']} · routes {', '.join(dep['routes'])} · gamma {dep['deployed_gamma']} · "
             f"objective {routes[0]['objective']}",
             f"traffic mix (share of decode tokens in the window): {mix}",
             "", f"{'gamma':>5} {'speedup':>8} {f'{level}% interval':>17}  note"]
    for c in dep["candidates"]:
        interval = f"[{_fmt(c['speedup_low'])}, {_fmt(c['speedup_high'])}]" if c["speedup_low"] is not None else "-"
        notes = [word for word, holds in (("deployed", c["gamma"] == dep["deployed_gamma"]),
                                          ("joint best", c["gamma"] == dep["recommended_gamma"]),
                                          ("not allowed", not c["allowed"])) if holds]
        lines.append(f"{c['gamma']:>5} {_fmt(c['speedup']):>7}x {interval:>17}  {', '.join(notes)}".rstrip())
    gain = f"expected gain {_gain_text(dep['gain'])}" if dep.get("gain") else "no gain"
    rec = dep["recommended_gamma"]
    verb = {DecisionKind.CHANGE: f"change gamma {dep['deployed_gamma']} -> {rec} ({gain})",
            DecisionKind.OFF: f"turn speculation off ({gain})",
            DecisionKind.UNDECIDED: f"none for gamma {dep['deployed_gamma']}"}.get(
        dep["decision"], f"keep gamma {dep['deployed_gamma']} (joint best {rec}, {gain})")
    lines += ["", f"recommendation for deployment {dep['name']}: {verb}. {dep['decision_reason']}",
              *deploy_lines(dep), "",
              f"{'route':<16} {'own gamma':>9} {'speedup':>8}  {'gain of splitting it off':<31}  over the joint best"]
    runs = dep["split"][0]["against_gamma"] if dep["split"] else dep["deployed_gamma"]
    for s in dep["split"]:
        over_runs = _gain_text({"value": s["gain_of_splitting"], "low": s["gain_low"], "high": s["gain_high"]})
        over_best = _gain_text({"value": s["gain_over_joint_best"], "low": s["gain_over_joint_best_low"],
                                "high": s["gain_over_joint_best_high"]})
        lines.append(f"{s['route']:<16} {s['gamma']:>9} {_fmt(s['speedup']):>7}x  "
                     f"{f'{over_runs} over gamma {runs}':<31}  {over_best} over gamma {rec}")
    lines.append(f"every route on engines of its own: gain of splitting {_gain_text(dep['gain_of_splitting'])} "
                 f"over the deployment's tokens at gamma {runs} (the deployment's gamma after this decision); "
                 f"{_gain_text(dep['gain_of_splitting_over_joint_best'])} over the joint best gamma {rec}")
    return "\n".join(lines)


def _gain_text(g: dict) -> str:
    from model.decision import Gain

    return str(Gain(g["value"], g.get("low"), g.get("high")))


def _probe_segment_dict(probe) -> ProbeSegment | None:
    """A probe's segment joined to the deployed one, running or ended (model.probe.running): what it measured, how its shared
    positions compare, and which segment each position of the priced curve comes from."""
    if probe is None:
        return None
    traffic = probe.traffic
    return {
        "gamma": probe.gamma, "drafts": probe.estimate.drafts,
        "engines": None if traffic is None else traffic.engines,
        "survival": probe.estimate.survival.value,
        "shared_difference": probe.shared_difference.value,
        "shared_difference_interval": list(probe.shared_difference.confidence_interval),
        "agrees": probe.agrees,
        "joined_survival": probe.survival,
        "sources": probe.sources,
        "running": probe.running,
    }


def _event_dict(ev) -> Event:
    return cast(Event, {k: getattr(ev, k) for k in ("time", "target", "model_name", "engine", "kind", "detail")
                        if hasattr(ev, k)})


def _status_dict(s) -> TargetStatus:
    return cast(TargetStatus, {k: getattr(s, k) for k in ("target", "last_ok_time", "last_error", "failing_since")
                               if hasattr(s, k)})


# --------------------------------------------------------------------------- the console view


def _fmt(x, spec: str = ".2f", none: str = "-") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


def format_tuning(doc: Mapping[str, Any]) -> str:
    """The console view of a tune-gamma document (the same numbers --json prints)."""
    lines = _head_lines(doc) + _observed_lines(doc) + [""] + _candidate_table(doc) + [""] + decision_lines(doc)
    return "\n".join(lines + deploy_lines(doc))


def deploy_lines(doc: Mapping[str, Any]) -> list[str]:
    """The deploy line, or — when the answer rests on default figures — none, and the keys to
    set, one line each with what it would change (model.figures_needed); when it is withheld
    for a cost model that misses the engine (model_error_warning), that says why."""
    needed = doc.get("figures_needed") or []
    if doc["vllm"]["command_line"] is None and not needed:
        if doc.get("model_error_warning"):
            return ["deploy: none — the cost model misses the engine's observed rate (see the warning above): "
                    "its gains are a what-if, not a decision"]
        return ["deploy: none — nothing is decided to deploy (see the recommendation above)"]
    if doc["vllm"]["command_line"] is None:
        head = ["deploy: none — no deploy line rests on a default. Set in specdec.toml [deployment] (or the route's "
                "table), or as tune-gamma flags (--method, --draft-cost, --model, ...):"]
    elif needed:
        head = [f"deploy: {doc['vllm']['command_line']}", *keys_unknown_lines(doc["vllm"]),
                "priced on defaults; set in specdec.toml [deployment] (or the route's table), or as tune-gamma flags:"]
    else:
        return [f"deploy: {doc['vllm']['command_line']}", *keys_unknown_lines(doc["vllm"])]
    return head + [f"- {f['key']} (priced at the default {_default(f['default'])}): {f['changes']}" for f in needed]


KEYS_SHOWN = 4  # the method's own keys a console note names; the JSON lists them all


def keys_unknown_lines(vllm: Mapping[str, Any]) -> list[str]:
    """The note under a deploy line written without the engine's own keys of its method
    (vllm.speculative_keys_unknown: model.speculative_keys), or none."""
    unknown = vllm.get("speculative_keys_unknown")
    return ["note: " + keys_unknown_sentence(unknown, vllm.get("speculative_config"))] if unknown else []


def keys_unknown_sentence(unknown: Mapping[str, Any], config: Mapping[str, Any] | None) -> str:
    """What a --speculative-config line (``config``, None: off) without the method's own keys
    lacks, and the key that keeps them."""
    names = "the method, gamma and draft model" if config and "model" in config else "the method and gamma"
    keys, defaults = unknown["keys"], unknown["vllm_defaults"]
    shown = keys[:KEYS_SHOWN]
    more = f" and {len(keys) - len(shown)} more" if len(keys) > len(shown) else ""
    runs = ""
    if not more and all(k in defaults for k in shown):
        runs = ("; without them vLLM runs " + ", ".join(f"{k} {json.dumps(defaults[k])}" for k in shown))
    example = ", ".join(f"{k} = ..." for k in shown[:2])
    return (f"specdec's --speculative-config lines carry only {names}: this engine's own "
            f"{unknown['method']} keys ({', '.join(shown)}{more}) are not known to specdec (/metrics does not carry "
            f"them){runs}. To keep them, set speculative_keys in specdec.toml [deployment] (or the route's table, or "
            f"--speculative-keys) to the rest of the engine's --speculative-config: speculative_keys = "
            f"{{ {example} }} with its values, or {{}} when it sets none")


def _default(value: object) -> str:
    """A default figure as a reader takes it in: a float to 4 significant digits."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _gpus_per_engine(doc: Mapping[str, Any]) -> str:
    """On the throughput objective, the GPUs per engine its tokens per GPU-second divide by, and
    whether that is the user's figure (a default scales the column, and under the roofline the
    shape too)."""
    tp = (doc.get("profile_figures") or {}).get("tensor_parallel_size")
    if doc.get("objective") != "throughput" or not isinstance(tp, dict):
        return ""
    if tp.get("source") != "default":
        return f", {tp['value']} GPU{'s' * (tp['value'] != 1)} per engine"
    return (f", over tensor_parallel_size {tp['value']} GPUs per engine — a default: set tensor_parallel_size "
            f"to your engines' own")


def _head_lines(doc: Mapping[str, Any]) -> list[str]:
    """Route, window, γ and drafts; objective, profile and interval method; the anchor."""
    from model.anchor import Anchor, describe_lines

    obs = doc["observed"]
    level = int(round(doc["interval_level"] * 100))
    head = f"route {doc['route']}"
    if doc.get("window"):
        w = doc["window"]
        head += f" · window {format_duration(w['end'] - w['start'])} ending {format_clock(w['end'])}"
    head += f" · gamma {obs['gamma']} · {_fmt(obs['drafts'], ',.0f')} drafts"
    axis = f" ({doc['objective_axis']}{_gpus_per_engine(doc)})" if doc.get("objective_axis") else ""
    return [head, f"objective {doc['objective']}{axis} · cost profile {doc['cost_profile']} · {level}% intervals: "
                  f"{obs['interval_method']}",
            *describe_lines(Anchor(**doc["anchor"]) if doc.get("anchor") else None, doc.get("profile_figures")),
            *verify_cost_lines(doc.get("profile_figures"))]


_POINT_WORDS = {"undrafted_steps": "undrafted steps", "drafted_steps": "drafted steps", "plain_decode": "plain decode",
                "segment": "mean step", "plugin_pure_decode": "plugin-timed pure decode",
                "plugin_uniform_verify": "plugin-timed uniform verify"}


def verify_cost_lines(figures: Mapping[str, Any] | None) -> list[str]:
    """The cost shape the engines measure (profile_figures.verify_cost, model.verify_cost) in
    words: a step at the widest measured width against a one-token step, the points, what the
    profile assumes and which was priced; [] where none was fitted."""
    fit = (figures or {}).get("verify_cost")
    if not fit:
        return []
    width = fit["reference_tokens_per_request"]
    points = "; ".join(f"{_POINT_WORDS.get(p['name'], p['name'])} at gamma {p['gamma']}: {p['step_s'] * 1e3:.2f} ms "
                       f"for {p['tokens_per_request']:.1f} tokens/request" + ("" if p["fitted"] else " (not fitted)")
                       for p in fit["points"])
    line = (f"verify cost, measured: a step verifying {width:.1f} tokens per request takes "
            f"{fit['measured_ratio']:.2f}x [{fit['measured_ratio_low']:.2f}, {fit['measured_ratio_high']:.2f}] "
            f"a one-token step ({points})")
    assumed, profile = fit["assumed_ratio"], fit["assumed_profile"]
    if assumed is None:
        return [line]
    if not fit["disagrees"]:
        return [line + f"; the {profile} profile's {assumed:.2f}x lies within it, and prices it"]
    used = ("priced on the measured slope instead" if fit["preferred"]
            else "the measured table still prices it: measure it again on this deployment")
    line += f"; the {profile} profile assumes {assumed:.2f}x: {used}"
    if fit["contradicts_configured"]:
        line += f" (the configured cost_profile {profile} contradicts what the engines show)"
    return [line]


def _replay_line(requests: int | None, no_interval: bool, gamma: int) -> str:
    """How AL at other γ was priced when the requests' steps were replayed (model.recommendation)."""
    whose = ("the requests'" if requests is None else "the request's" if requests == 1
             else f"the {requests:,} requests'")
    line = (f"acceptance at other gammas: {whose} own drafted steps replayed at each gamma (per-request detailed "
            f"metrics), not the survival curve cut or extended")
    if no_interval:
        line += (f"; too few to resample: the rows past gamma {gamma} follow {'its' if requests == 1 else 'their'} "
                 f"text alone and need not rise smoothly")
    return line


def _observed_lines(doc: Mapping[str, Any]) -> list[str]:
    """What the window measured: AL, p, the survival with intervals, ν, drift, segments, events."""
    obs = doc["observed"]
    al_lo, al_hi = obs["mean_acceptance_length_interval"]
    p_lo, p_hi = obs["equivalent_p_interval"]
    lines = [
        f"mean acceptance length {_fmt(obs['mean_acceptance_length'])} [{_fmt(al_lo)}, {_fmt(al_hi)}] · "
        f"equivalent p {_fmt(obs['equivalent_p'], '.3f')} [{_fmt(p_lo, '.3f')}, {_fmt(p_hi, '.3f')}] · "
        f"draft acceptance rate {_fmt(obs['draft_acceptance_rate'], '.3f')}"
    ]
    n = len(obs["survival"])
    surv = " ".join(f"{_fmt(v, '.3f')} [{_fmt(lo, '.3f')}, {_fmt(hi, '.3f')}]"
                    for v, lo, hi in zip(obs["survival"], obs["survival_low"] or [None] * n,
                                         obs["survival_high"] or [None] * n))
    lines.append(f"survival a_1..a_{obs['gamma']}: {surv}")
    if doc.get("acceptance_model") == "replay":
        lines.append(_replay_line(doc.get("replayed_requests"), al_lo is None, obs["gamma"]))
    if obs.get("undrafted_token_share"):
        source = f", from {obs['undrafted_token_share_source']}" if obs.get("undrafted_token_share_source") else ""
        lines.append(f"steps without a draft: {obs['undrafted_token_share']:.1%} of decode tokens came from steps whose "
                     f"drafter proposed nothing (priced at every gamma{source})")
    if obs.get("drift"):
        d = obs["drift"]
        lines.append(f"drift: {d['message']}" if d["detected"] else "drift: none detected" if d["tested"]
                     else f"drift: not tested ({d['message']})")
    elif obs.get("segments"):
        from acceptance.route_estimate import MIN_ROWS_FOR_DRIFT

        lines.append(f"drift: not tested (the window holds fewer than {MIN_ROWS_FOR_DRIFT} rows: scrape intervals, "
                     f"requests or logged intervals)")
    lines += _segment_lines(obs.get("segments") or [])
    if obs.get("probe_segment"):
        lines.append(probe_segment_line(obs["probe_segment"], obs["gamma"]))
    for ev in obs.get("events") or []:
        when = time.strftime("%H:%M:%S", time.gmtime(ev["time"])) if ev.get("time") else "?"
        lines.append(f"event {when}: {ev.get('kind')} {ev.get('target', '')} engine {ev.get('engine', '')}: "
                     f"{ev.get('detail') or ''}".rstrip(" :"))
    lines += [f"failing target: {t['last_error']}" for t in obs.get("targets") or [] if t.get("last_error")]
    return lines


def _candidate_table(doc: Mapping[str, Any]) -> list[str]:
    """One row per candidate γ: speedup, interval, P(best), tokens/s, and what it is."""
    level = int(round(doc["interval_level"] * 100))
    has_tps = any(c.get("tokens_per_second") is not None for c in doc["candidates"])
    header = f"{'gamma':>5} {'speedup':>8} {f'{level}% interval':>17} {'P(best)':>8}"
    tps_unit = "tok/GPU-s" if doc["objective"] == "throughput" else "tok/s/user"
    if has_tps:
        header += f" {tps_unit:>10}"
    lines = [header + "  note"]
    notes = candidate_notes(doc)
    for c in doc["candidates"]:
        interval = f"[{_fmt(c['speedup_low'])}, {_fmt(c['speedup_high'])}]" if c["speedup_low"] is not None else "-"
        row = f"{c['gamma']:>5} {_fmt(c['speedup']):>7}x {interval:>17} {_fmt(c['probability_best']):>8}"
        if has_tps:
            row += f" {_fmt(c['tokens_per_second'], '.1f'):>10}"
        lines.append((row + "  " + ", ".join(notes[c["gamma"]])).rstrip())
    return lines


def candidate_notes(doc: Mapping[str, Any]) -> dict[int, list[str]]:
    """What each candidate γ is, in words: the deployed one (with its measured speedup where the
    table's is the same unit), the recommended one, the best expected (a what-if's where the
    decision is undecided), extrapolated, not allowed — the console's note column and the
    dashboard's, from one rule."""
    stepped = doc.get("expected_best_gamma") is not None  # a sure step short of the best expected
    # undecided: nothing is recommended, and the γ it would run is a what-if — on defaults
    # where figures are needed, else on a cost model that misses the engines
    undecided = doc["decision"] == DecisionKind.UNDECIDED
    what_if = ("best on defaults (what-if)" if doc.get("figures_needed")
               else "best on the model (what-if)" if doc.get("model_error_warning") else "best expected")
    # the measured speedup is the mean per-user rate's: beside the row only where the table's is too
    measured = doc.get("deployed_speedup_measured") if doc["objective"] == "interactivity" else None
    deployed = "deployed" + (f" (measured {_fmt(measured['value'])}x)" if measured else "")
    out = {}
    for c in doc["candidates"]:
        notes = [word for word, holds in ((deployed, c["gamma"] == doc["deployed_gamma"]),
                                          ("recommended (measured)" if doc.get("decision_basis") == "measured"
                                           else "recommended" if stepped else "best",
                                           c["gamma"] == doc["recommended_gamma"] and not undecided),
                                          (what_if if undecided else "best expected",
                                           c["gamma"] == doc.get("expected_best_gamma")),
                                          ("extrapolated", c["extrapolated"])) if holds]
        if not c["allowed"]:
            notes.append(f"not allowed: {(c['reason'] or '').split(' (')[0]}")
        out[c["gamma"]] = notes
    return out


def decision_lines(doc: Mapping[str, Any]) -> list[str]:
    """The decision with its gain, the one "more data" sentence, model error, notes, schedule."""
    from model.decision import Gain
    from model.route import more_drafts_sentence

    obs = doc["observed"]
    decision, rec, pb = doc["decision"], doc["recommended_gamma"], _fmt(doc["probability_best"])
    gain = str(Gain(**doc["gain"])) if doc.get("gain") else "none"
    measured = doc.get("decision_basis") == "measured"
    if decision == DecisionKind.CHANGE and measured:  # two γ the engines measured decided (measured_between)
        lines = [f"recommendation: change gamma {doc['deployed_gamma']} -> {rec}, measured gain {gain}. "
                 f"{doc['decision_reason']}"]
    elif decision == DecisionKind.CHANGE:
        lines = [f"recommendation: change gamma {doc['deployed_gamma']} -> {rec}, expected gain {gain} "
                 f"(probability best {pb}). {doc['decision_reason']}"]
    elif decision == DecisionKind.OFF and measured:
        lines = [f"recommendation: turn speculation off, measured gain {gain}. {doc['decision_reason']}"]
    elif decision == DecisionKind.OFF:
        lines = [f"recommendation: turn speculation off, expected gain {gain} (probability best {pb}). "
                 f"{doc['decision_reason']}"]
    elif decision == DecisionKind.KEEP and measured:
        lines = [f"recommendation: keep gamma {doc['deployed_gamma']} (measured). {doc['decision_reason']}"]
    elif decision == DecisionKind.PROBE:
        lines = [probe_line(doc, gain)]
    elif decision == DecisionKind.UNDECIDED:
        lines = [f"recommendation: none for gamma {doc['deployed_gamma']} — {doc['decision_reason']}"]
    else:
        best = f"best expected: {rec}" + (f", {gain}" if doc.get("gain") else "")
        lines = [f"recommendation: keep gamma {doc['deployed_gamma']} ({best}, probability best {pb}). "
                 f"{doc['decision_reason']}"]
    more = more_drafts_sentence(obs.get("drafts_more_needed"), doc.get("drafts_factor_to_settle"))
    if more:
        lines.append(more)
    if doc.get("model_error") is not None:
        lines.append(f"model error at the deployed gamma: {doc['model_error'] * 100:+.1f}% tokens/s vs observed "
                     f"{_fmt(obs.get('observed_tokens_per_second'), '.1f')} tok/s")
    if doc.get("model_error_warning"):
        lines.append(f"warning: {doc['model_error_warning']}")
    if measured := doc.get("deployed_speedup_measured"):
        lines.append(("warning: " if measured["slower_than_plain_decode"] else "") + measured["summary"])
    if doc.get("specialized_speedup_measured"):
        lines.append(doc["specialized_speedup_measured"]["summary"])
    if (doc.get("specialized_break_even") or {}).get("warning"):
        lines.append(f"warning: {doc['specialized_break_even']['warning']}")
    lines += [f"note: {note}" for note in obs.get("notes") or []]
    lines += load_lines(doc.get("load"))
    lines += _context_lines(doc.get("context"))
    lines += sampling_lines(doc.get("sampling"))
    if doc.get("schedule"):
        ranges = ", ".join(f"batch {lo}-{hi}: gamma {g}" for lo, hi, g in doc["schedule"])
        deployed = "num_speculative_tokens_per_batch_size" in (doc["vllm"]["speculative_config"] or {})
        where = "(in the config below)" if deployed else "(suggested; deploy it with the next change of gamma)"
        lines.append(f"per-batch-size schedule {where}: {ranges}")
    return lines


def load_lines(load: dict | None) -> list[str]:
    """How the best γ moves over the batch sizes the route was seen at (model.load), when
    it was seen at more than one."""
    if not load or len(load["batch_sizes"]) < 2:
        return []
    points, gamma = load["batch_sizes"], load["gamma"]
    best = ", ".join(f"{p['best_gamma']} at batch {p['batch_size']}" for p in points)
    sizes = f"batch {points[0]['batch_size']}-{points[-1]['batch_size']}"
    pays = (f"gamma {gamma} stops paying at batch {load['stops_paying_at']}" if load["stops_paying_at"] is not None
            else f"gamma {gamma} pays over the whole range seen ({sizes})" if gamma > 0 else "speculation off")
    lines = [f"by load: best gamma {best}; {pays}"]
    if load.get("schedule"):
        ranges = ", ".join(f"batch {lo}-{hi}: gamma {g}" for lo, hi, g in load["schedule"])
        lines.append(f"the num_speculative_tokens_per_batch_size schedule that follows for gamma {gamma}: {ranges} "
                     f"(per batch size a gamma up to the configured {gamma}, never past it)")
    if load.get("schedule_dropped_for"):
        kept = ", ".join(DYNAMIC_SD_V1_METHODS[:-1]) + f" and {DYNAMIC_SD_V1_METHODS[-1]}"
        lines.append(f"no num_speculative_tokens_per_batch_size schedule: vLLM 0.33 drops it without an error for "
                     f"{load['schedule_dropped_for']} (it runs that method on its V1 model runner, which keeps one only "
                     f"for {kept}), so the engines would run gamma {gamma} at every batch size")
    return lines


def _context_lines(view: dict | None) -> list[str]:
    """γ by prompt length on a per-request route (model.context_bands): each band's acceptance
    and speedups, where the fleet's γ stops paying, and the routing that follows."""
    if not view:
        return []
    ctx, gamma = view["route_context"], view["gamma"]
    lines = []
    if ctx:
        lines.append(f"context: {ctx['tokens']:,.0f} tokens over {ctx['requests']:,} of {ctx['of_requests']:,} "
                     f"requests (mean prompt {ctx['mean_prompt_tokens']:,.0f}, output {ctx['mean_output_tokens']:,.0f} "
                     f"tokens; {ctx['source']}), the context the roofline reads unless context_tokens is set")
    if not view["bands"]:
        return lines + ([f"by context: no bands: {view['why_no_bands']}"] if view.get("why_no_bands") else [])
    what_if = " — a what-if: priced on default figures" if view["what_if"] else ""
    lines.append(f"by context (bands by prompt length, each priced from its own requests; speedups at gamma {gamma})"
                 f"{what_if}:")
    for b in view["bands"]:
        lo, hi = b["speedup_at_gamma_interval"]
        interval = f" [{_fmt(lo, '.2f')}, {_fmt(hi, '.2f')}]" if lo is not None else " (no interval)"
        al_lo, al_hi = b["mean_acceptance_length_interval"]
        lines.append(f"  prompt {b['prompt_tokens_from']:,.0f}-{b['prompt_tokens_to']:,.0f} tokens ({b['requests']} "
                     f"requests, context {b['context_tokens']:,.0f}): AL {b['mean_acceptance_length']:.2f} "
                     f"[{_fmt(al_lo, '.2f')}, {_fmt(al_hi, '.2f')}], {_fmt(b['observed_tokens_per_second'], '.0f')} "
                     f"tok/s observed; gamma {gamma} {b['speedup_at_gamma']:.2f}x{interval}, best gamma "
                     f"{b['best_gamma']} {b['speedup_at_best']:.2f}x"
                     + (" (extrapolated)" if b["best_extrapolated"] else ""))
    stops = view["stops_paying_from_prompt_tokens"]
    lines.append(f"gamma {gamma} stops paying from prompts of {stops:,.0f} tokens" if stops is not None
                 else f"gamma {gamma} pays over every prompt length seen" if gamma > 0 else "speculation off")
    routing = view.get("routing")
    if routing:
        what = (f"prompts of {routing['prompt_tokens_from']:,.0f} tokens or more run faster at gamma {routing['gamma']} "
                f"({routing['gain']:+.1%} over gamma {gamma} across those {routing['bands']} band(s)")
        if view["what_if"]:
            lines.append(f"routing (what-if, priced on default figures): {what})")
        elif routing["sure"]:
            lines.append(f"routing: {what}, each band gaining with probability >= {DECISION_CERTAINTY:g}): vLLM runs "
                         f"one gamma per engine, so send them to engines running gamma {routing['gamma']}")
        elif routing.get("extrapolated"):
            lines.append(f"routing: {what} expected, priced past the deployed gamma's positions): no advice on "
                         f"extrapolated gammas — probe them first")
        else:
            lines.append(f"routing: {what} expected, not yet sure in every band): no advice until it is")
    return lines


def probe_line(doc: Mapping[str, Any], gain: str) -> str:
    """The probe decision: the probe to run, and what the rest of the route runs meanwhile."""
    probe, deployed, rec = doc["probe"], doc["deployed_gamma"], doc["recommended_gamma"]
    word = "measured" if doc.get("decision_basis") == "measured" else "expected"
    fleet = f"keep gamma {deployed}" if rec == deployed else f"change gamma {deployed} -> {rec} ({word} gain {gain})"
    where, meanwhile = ((f"on the route's only engine(s) ({probe['engines']}), a trial", f"then back: {fleet}")
                        if probe.get("whole_route") else (f"on {probe['engines']} engine(s)", f"{fleet} on the others"))
    best = doc.get("expected_best_gamma")
    toward = f" (toward gamma {best})" if best is not None and best != probe["gamma"] else ""
    return (f"recommendation: probe gamma {probe['gamma']}{toward} {where} for about {probe['drafts_needed']:,} drafts "
            f"(about {approximate_duration(probe['duration_s'])}), {meanwhile}; "
            f"probe config: {json.dumps(probe['speculative_config'])}. {doc['decision_reason']}")


def probe_segment_line(p: Mapping[str, Any], deployed: int) -> str:
    """Which positions come from which segment, and whether the shared ones agree."""
    lo, hi = p["shared_difference_interval"]
    shared = (f"AL over positions 1-{deployed} differs by {_fmt(p['shared_difference'], '+.3f')} "
              f"[{_fmt(lo, '+.3f')}, {_fmt(hi, '+.3f')}]")
    running = p.get("running", True)
    what, its = ("probe segment", "the probe") if running else ("ended segment", "that segment")
    where = f" on {p['engines']} engine(s)" if p["engines"] else ""  # per-request rows name none
    head = (f"{what}: gamma {p['gamma']}{where}, {_fmt(p['drafts'], ',.0f')} drafts; "
            f"positions 1-{deployed} from gamma {deployed}, {deployed + 1}-{p['gamma']} from {its}")
    if p["agrees"]:
        return f"{head} (conditional rates joined; shared positions agree: {shared})"
    return (f"{head}; the shared positions disagree ({shared}): gammas above {deployed} are priced from "
            f"{its}'s own curve alone")


def _segment_lines(segments: list[dict]) -> list[str]:
    """A window with more than one γ: the current ones (a rolling change, a probe) as such,
    which one the estimate describes, and the older ones — never a current one as older."""
    if len(segments) < 2:
        return []
    first = min(s["start"] for s in segments)  # a segment that began later began with the change

    def engines(s):
        n = len(s["engines_at_end"])
        return f"{n} engine" + ("s" if n != 1 else "")

    current = [s for s in segments if s.get("current")]
    older = [s for s in segments if not s.get("current")]
    lines = []
    if len(current) > 1:
        described = next(s for s in current if s.get("newest"))
        parts = [f"gamma {s['gamma']} on {engines(s)}" + (f" since {format_clock(s['start'])[11:16]}"
                                                         if s["start"] > first + 1 else "") for s in current]
        lines.append(f"rolling change: {', '.join(parts)} at the window's end; estimates describe gamma "
                     f"{described['gamma']} (the most drafts), the others are not mixed in; the recommendation "
                     f"is for every engine of the route")
    if older:
        lines.append("older segments in the window (not mixed in): " + ", ".join(
            f"gamma {s['gamma']} ({_fmt(s['drafts'], ',.0f')} drafts, until {format_clock(s['end'])[11:16]})"
            for s in older))
    return lines
