"""Recommendation: the decision and the γ it deploys, the candidates table (intervals, or
"no interval" where none was computed), whether drift was tested, the reasons for refused
γ, and the vLLM config to copy."""

from __future__ import annotations

import json
from collections.abc import Mapping

import streamlit as st

from model.anchor import described_lines
from model.route import more_drafts_sentence
from specdec.sampling_words import sampling_lines
from specdec.report import candidate_notes, json_document, keys_unknown_sentence, probe_segment_line, tuning_to_dict, verify_cost_lines
from model.decision_kind import DecisionKind

from .. import text
from ..data import FleetView, best_expected_gamma
from .common import drift_sentence, open_page, route_picker


def candidate_rows(rec, notes: Mapping[int, list[str]] | None = None) -> list[dict]:
    """One row per γ; 'deploy' marks the γ the decision has the fleet run (a keep: the
    deployed one), 'best expected' the one with the best expected speedup; 'note' what the
    console's note column says of it (specdec.report.candidate_notes of the route's document)."""
    deploys, best = rec.gamma_to_deploy, best_expected_gamma(rec)
    return [{
        "γ": c.gamma,
        "speedup": text.speedup(c.speedup, c.speedup_low, c.speedup_high),
        "tokens/s": text.number(c.tokens_per_second, 1),
        "P(best)": text.number(c.probability_best),
        "extrapolated": c.extrapolated,
        "allowed": c.allowed,
        "deploy": c.gamma == deploys,
        "best expected": c.gamma == best,
        "note": ", ".join((notes or {}).get(c.gamma, [])),
    } for c in rec.candidates]  # why a γ is refused: in full under the table (a column cut it off at 1400 px)


def intervals_text(rec, estimate) -> str:
    """'90% intervals', or 'no intervals (why)' when the candidates have none."""
    if any(text.interval(c.speedup_low, c.speedup_high) for c in rec.candidates if c.gamma > 0):
        return f"{text.level(rec.interval_level)} intervals"
    return f"no intervals ({estimate.note or estimate.method})"


def decision_text(rec) -> str:
    word = "measured" if rec.decision_basis == "measured" else "expected"  # the engines' own rates decided
    gain = f", {word} gain {rec.gain}" if rec.gain is not None else ""
    if rec.decision == DecisionKind.CHANGE:
        farther = (f" (γ={rec.expected_best_gamma} is expected best, not surely enough yet: this is the sure step)"
                   if rec.expected_best_gamma is not None else "")
        return f"Change γ {rec.deployed_gamma} → {rec.recommended_gamma}{gain}{farther}"
    if rec.decision == DecisionKind.OFF and rec.decision_basis == "measured":  # the engines' own rates decided
        return f"Turn speculation off (γ {rec.deployed_gamma} → 0), measured gain {rec.gain}"
    if rec.decision == DecisionKind.OFF:
        return f"Turn speculation off (γ {rec.deployed_gamma} → 0){gain}"
    if rec.decision == DecisionKind.PROBE:
        fleet = (f"keep γ={rec.deployed_gamma}" if rec.recommended_gamma == rec.deployed_gamma
                 else f"change γ {rec.deployed_gamma} → {rec.recommended_gamma}{gain}")
        return (f"Probe γ={rec.probe.gamma} on {rec.probe.engines} engine(s) for about {rec.probe.drafts_needed:,} "
                f"drafts (about {text.approximate(rec.probe.duration_s)}); {fleet} on the others")
    if rec.decision != DecisionKind.KEEP:  # a decision that deploys nothing: its reason says why
        return f"{rec.decision.capitalize()}: the fleet keeps γ={rec.gamma_to_deploy}"
    if rec.recommended_gamma != rec.deployed_gamma:
        return f"Keep γ={rec.deployed_gamma} (γ={rec.recommended_gamma} looks better but not surely enough{gain})"
    return f"Keep γ={rec.deployed_gamma}"


def render_pricing_notes(rec) -> None:
    """What the pricing rests on and how far to trust it: the model's error, what the engines
    measured, the anchor and figures (a warning where they rest on defaults), the cost shape
    the engines measure (a warning where it contradicts the configured profile)."""
    if rec.model_error_warning:
        st.warning(text.sentence(rec.model_error_warning))
    if rec.deployed_speedup_measured is not None:
        (st.warning if rec.deployed_speedup_measured.slower_than_plain_decode else st.info)(
            text.sentence(rec.deployed_speedup_measured.describe()))
    if rec.specialized_speedup_measured is not None:
        st.info(text.sentence(rec.specialized_speedup_measured.describe()))
    if rec.specialized_break_even is not None and (warning := rec.specialized_break_even.warning()):
        st.warning(text.sentence(warning))
    for line, on_defaults in described_lines(rec.anchor, rec.profile_figures):
        (st.warning if on_defaults else st.caption)(line)
    fit = (rec.profile_figures or {}).get("verify_cost") or {}
    for line in verify_cost_lines(rec.profile_figures):  # the cost shape the engines measure
        (st.warning if fit.get("contradicts_configured") else st.caption)(text.sentence(line))


def render(fleet: FleetView) -> None:
    if not open_page(fleet):
        return
    route = route_picker(fleet, "Route", key="rec_route")
    if route is None:
        return
    tuning = fleet.tuned[route].tuning
    rec = tuning.recommendation
    doc = tuning_to_dict(tuning)
    (st.success if rec.decision == DecisionKind.KEEP else st.warning)(f"{decision_text(rec)} — {rec.decision_reason}")
    if probe_segment := doc["observed"]["probe_segment"]:
        st.info(probe_segment_line(probe_segment, doc["observed"]["gamma"]))
    unit = "tokens per GPU-second" if rec.objective == "throughput" else "per-user tok/s"
    best = {c.gamma: c for c in rec.candidates}[best_expected_gamma(rec)]  # its row of the table below
    st.caption(f"Objective {rec.objective} (tokens/s column: {unit}); cost profile {rec.cost_profile}; "
               f"{intervals_text(rec, tuning.estimate)}; P(best) of the best expected γ={best.gamma} "
               f"{text.number(best.probability_best)}; model error at the deployed γ: "
               + (text.percent(rec.model_error, 1) if rec.model_error is not None else
                  "— (anchored on the observed rate)" if rec.anchor and rec.anchor.source == "observed" else
                  "— (no latency metrics)")
               + ".")
    render_pricing_notes(rec)
    st.caption(drift_sentence(tuning))
    for note in doc["observed"]["notes"]:  # how the window was read: drift, a per-request batch mix, …
        st.caption(text.sentence(f"Note: {note}"))
    if more := more_drafts_sentence(tuning.drafts_more_needed, rec.drafts_factor_to_settle):
        st.info(text.sentence(more))
    render_sampling(doc["sampling"])

    st.subheader("Candidates")
    from .. import charts  # Plotly's figure: after the decision is on the page

    banded = any(text.interval(c.speedup_low, c.speedup_high) for c in rec.candidates if c.gamma > 0)
    bands = f"{text.level(rec.interval_level)} interval band" if banded else "no interval"
    st.plotly_chart(charts.recommendation_figure(
        rec.candidates, deployed=rec.deployed_gamma, deploy=rec.gamma_to_deploy, best=best.gamma,
        title=f"Projected speedup per γ ({bands}; hatched and dashed: extrapolated past the deployed γ)",
        y_title="× plain decoding"), key="rec_chart")
    st.dataframe(candidate_rows(rec, candidate_notes(doc)), hide_index=True, key="rec_candidates")
    refused = [c for c in rec.candidates if not c.allowed]
    if refused:
        st.markdown("**Refused γ, and why**")
        for c in refused:
            st.markdown(f"- γ={c.gamma}: {c.reason}")
    extrapolated = [c for c in rec.candidates if c.extrapolated]
    if extrapolated:
        guesses = f"{len(rec.tail_models)} guesses of how acceptance goes on past it"
        # without resamples there is no interval to span the guesses: the point is their mean
        spread = (f"the interval spans {guesses}" if any(text.interval(c.speedup_low, c.speedup_high)
                                                          for c in extrapolated)
                  else f"priced at the mean of {guesses}; no interval")
        st.caption(f"γ {', '.join(str(c.gamma) for c in extrapolated)}: extrapolated past the deployed "
                   f"γ={rec.deployed_gamma} ({spread}); the data cannot check them.")

    st.subheader("vLLM config to deploy")
    if rec.vllm_speculative_config is not None:
        st.code(json.dumps(rec.vllm_speculative_config, indent=2), language="json", wrap_lines=True)
    elif rec.gamma_to_deploy == 0:
        st.markdown("Speculation off: start vLLM without `--speculative-config`.")
    else:  # a decision that deploys nothing (its reason says why): the fleet keeps what it runs
        st.markdown(f"No config to deploy: the fleet keeps γ={rec.gamma_to_deploy} ({rec.decision}).")
    if rec.figures_needed:  # the defaults the answer rests on: the keys to set, and what each changes
        st.markdown("**Priced on defaults** — set these for your engine (the config's `[deployment]` or the "
                    "route's table):\n" + "\n".join(f"- `{f.key}` (priced at the default {f.default}): {f.changes}"
                                                   for f in rec.figures_needed))
    if rec.vllm_command_line:
        st.code(rec.vllm_command_line, language="bash", wrap_lines=True)
    if rec.probe is not None:
        st.markdown(f"**The probe** ({rec.probe.engines} engine): expected value {rec.probe.expected_value:,.0f} s "
                    f"against cost {rec.probe.expected_cost:,.0f} s of the route's output")
        st.code(json.dumps(rec.probe.speculative_config, indent=2), language="json", wrap_lines=True)
    if rec.speculative_keys_unknown is not None:  # the engine's own keys of its method, not known
        st.warning(text.sentence(keys_unknown_sentence(rec.speculative_keys_unknown.to_dict(),
                                                        rec.vllm_speculative_config)))
    if rec.schedule and rec.decision != DecisionKind.CHANGE:
        st.caption("Suggested batch-size schedule (num_speculative_tokens_per_batch_size), not in the config above "
                   "because it restarts engines like a γ change: "
                   + ", ".join(f"{lo}–{hi}: γ={g}" for lo, hi, g in rec.schedule))

    st.subheader("Replay config (benchmarks only)")
    if rec.replay_config is None:
        st.markdown("None: it would name a drafter, and the route's `method` is not set.")
    else:
        st.warning("Synthetic acceptance forces accept decisions and corrupts outputs: use this only to replay the "
                   "route's acceptance in a benchmark on a real engine, never in serving.")
        st.code(json.dumps(rec.replay_config, indent=2), language="json", wrap_lines=True)  # its "warning" in full
    st.download_button("tune-gamma JSON", json_document(doc),
                       file_name=f"tune-gamma-{route}.json", mime="application/json", key="rec_download")


def render_sampling(view) -> None:
    """Greedy and sampled requests priced apart, and the split that follows (the console's lines,
    specdec.sampling_words); a route without per-request rows: the mix its curve suggests."""
    lines = sampling_lines(view)
    if not lines:
        return
    if view["populations"]:
        st.subheader("Greedy and sampled requests")
    for line in lines:
        if line.startswith("  "):  # a population and its decision
            st.markdown(f"- {line.strip()}")
        elif line.startswith("split:"):
            st.warning(line)
        elif line.startswith("note:"):
            st.info(line.removeprefix("note: "))
        else:
            st.caption(line)
