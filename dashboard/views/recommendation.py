"""Recommendation: the candidates table, the reasons for refused γ, and the vLLM config to copy."""

from __future__ import annotations

import json

import streamlit as st

from model.anchor import describe_lines
from model.route import more_drafts_sentence
from specdec.report import json_document, probe_segment_line, tuning_to_dict

from .. import text
from ..data import FleetView
from .common import open_page, route_picker


def candidate_rows(rec) -> list[dict]:
    return [{
        "γ": c.gamma,
        "speedup": text.speedup(c.speedup, c.speedup_low, c.speedup_high),
        "tokens/s": text.number(c.tokens_per_second, 1),
        "P(best)": text.number(c.probability_best),
        "extrapolated": c.extrapolated,
        "allowed": c.allowed,
        "recommended": c.gamma == rec.recommended_gamma,
        "best expected": c.gamma == (rec.expected_best_gamma if rec.expected_best_gamma is not None
                                     else rec.recommended_gamma),
    } for c in rec.candidates]  # why a γ is refused: in full under the table (a column cut it off at 1400 px)


def decision_text(rec) -> str:
    gain = f", expected gain {rec.gain}" if rec.gain is not None else ""
    if rec.decision == "change":
        farther = (f" (γ={rec.expected_best_gamma} is expected best, not surely enough yet: this is the sure step)"
                   if rec.expected_best_gamma is not None else "")
        return f"Change γ {rec.deployed_gamma} → {rec.recommended_gamma}{gain}{farther}"
    if rec.decision == "off":
        return f"Turn speculation off (γ {rec.deployed_gamma} → 0){gain}"
    if rec.decision == "probe":
        fleet = (f"keep γ={rec.deployed_gamma}" if rec.recommended_gamma == rec.deployed_gamma
                 else f"change γ {rec.deployed_gamma} → {rec.recommended_gamma}{gain}")
        return (f"Probe γ={rec.probe.gamma} on {rec.probe.engines} engine(s) for about {rec.probe.drafts_needed:,} "
                f"drafts (about {text.approximate(rec.probe.duration_s)}); {fleet} on the others")
    if rec.recommended_gamma != rec.deployed_gamma:
        return f"Keep γ={rec.deployed_gamma} (γ={rec.recommended_gamma} looks better but not surely enough{gain})"
    return f"Keep γ={rec.deployed_gamma}"


def render(fleet: FleetView) -> None:
    if not open_page(fleet):
        return
    route = route_picker(fleet, "Route", key="rec_route")
    if route is None:
        return
    tuning = fleet.tuned[route].tuning
    rec = tuning.recommendation
    doc = tuning_to_dict(tuning)
    (st.success if rec.decision == "keep" else st.warning)(f"{decision_text(rec)} — {rec.decision_reason}")
    if doc["observed"].get("probe_segment"):
        st.info(probe_segment_line(doc["observed"]["probe_segment"], doc["observed"]["gamma"]))
    unit = "tokens per GPU-second" if rec.objective == "throughput" else "per-user tok/s"
    st.caption(f"Objective {rec.objective} (tokens/s column: {unit}); cost profile {rec.cost_profile}; "
               f"{text.level(rec.interval_level)} intervals; P(best) of the recommended γ "
               f"{text.number(rec.probability_best)}; model error at the deployed γ: "
               + (text.percent(rec.model_error, 1) if rec.model_error is not None else
                  "— (anchored on the observed rate)" if rec.anchor and rec.anchor.source == "observed" else
                  "— (no latency metrics)")
               + ".")
    if rec.model_error_warning:
        st.warning(text.sentence(rec.model_error_warning))
    if rec.specialized_speedup_measured is not None:
        st.info(text.sentence(rec.specialized_speedup_measured.describe()))
    if rec.specialized_break_even is not None and (warning := rec.specialized_break_even.warning()):
        st.warning(text.sentence(warning))
    for line in describe_lines(rec.anchor, rec.profile_figures):
        (st.warning if "DEFAULT" in line or "(default)" in line else st.caption)(line)
    for note in doc["observed"]["notes"]:  # how the window was read: drift, a per-request batch mix, …
        st.caption(text.sentence(f"Note: {note}"))
    more = more_drafts_sentence(tuning.drafts_more_needed, rec.drafts_factor_to_settle)
    if more:
        st.info(text.sentence(more))

    st.subheader("Candidates")
    st.dataframe(candidate_rows(rec), hide_index=True, key="rec_candidates")
    refused = [c for c in rec.candidates if not c.allowed]
    if refused:
        st.markdown("**Refused γ, and why**")
        for c in refused:
            st.markdown(f"- γ={c.gamma}: {c.reason}")
    extrapolated = [c.gamma for c in rec.candidates if c.extrapolated]
    if extrapolated:
        st.caption(f"γ {', '.join(map(str, extrapolated))}: extrapolated past the deployed γ={rec.deployed_gamma} "
                   f"(the interval spans {len(rec.tail_models)} guesses of how acceptance goes on past it); the data cannot check them.")

    st.subheader("vLLM config to deploy")
    if rec.vllm_speculative_config is None:
        st.markdown("Speculation off: start vLLM without `--speculative-config`.")
    else:
        st.code(json.dumps(rec.vllm_speculative_config, indent=2), language="json", wrap_lines=True)
    st.code(rec.vllm_command_line, language="bash", wrap_lines=True)
    if rec.probe is not None:
        st.markdown(f"**The canary** ({rec.probe.engines} engine): expected value {rec.probe.expected_value:,.0f} s "
                    f"against cost {rec.probe.expected_cost:,.0f} s of the route's output")
        st.code(json.dumps(rec.probe.speculative_config, indent=2), language="json", wrap_lines=True)
    if rec.schedule and rec.decision != "change":
        st.caption("Suggested batch-size schedule (num_speculative_tokens_per_batch_size), not in the config above "
                   "because it restarts engines like a γ change: "
                   + ", ".join(f"{lo}–{hi}: γ={g}" for lo, hi, g in rec.schedule))

    st.subheader("Replay config (benchmarks only)")
    st.warning("Synthetic acceptance forces accept decisions and corrupts outputs: use this only to replay the "
               "route's acceptance in a benchmark on a real engine, never in serving.")
    st.code(json.dumps(rec.replay_config, indent=2), language="json", wrap_lines=True)  # its "warning" in full
    st.download_button("tune-gamma JSON", json_document(doc),
                       file_name=f"tune-gamma-{route}.json", mime="application/json", key="rec_download")


