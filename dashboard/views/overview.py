"""Routes overview: per route AL, equivalent p, recommended γ and projected speedup with
intervals, the specialized path's share of steps, freshness and failing targets; routes
that share one deployment: its joint γ and what splitting each route off would gain."""

from __future__ import annotations

import time

import streamlit as st

from .. import text
from ..data import FleetView, RouteView, age_text
from .common import NO_ICON, open_page, untuned


def segments_note(rv: RouteView) -> str | None:
    """What the estimate describes when the window holds more than one γ (None: one segment):
    a rolling change as such, never a current segment as older."""
    t = rv.tuning
    if t is None or t.window is None or len(t.window.segments) < 2:
        return None
    w = t.window
    newest, current = w.newest_segment, w.current_segments
    older = [s for s in w.segments if not any(s is c for c in current)]

    def engines(s):
        n = len(getattr(s, "engines_at_end", None) or s.engines)
        return f"{n} engine" + ("s" if n != 1 else "")

    first = min(s.start for s in w.segments)  # a segment that began later began with the change
    parts = []
    if len(current) > 1:
        parts.append("rolling change: " + ", ".join(
            f"γ {s.gamma} on {engines(s)}" + (f" since {text.clock(s.start)[11:16]}" if s.start > first + 1 else "")
            for s in current) + " at the window's end")
    if older:
        parts.append("older segments: " + ", ".join(
            f"γ {s.gamma} until {text.clock(s.end)[11:16]} ({s.total.drafts:,.0f} drafts)" for s in older))
    probe = t.route_estimate.probe if t.route_estimate is not None else None
    joined = "" if probe is None else (
        f" Positions {probe.deployed_gamma + 1}–{probe.gamma} come from the probe at γ={probe.gamma} "
        + ("(its conditional rates joined)." if probe.agrees else "(priced from its own curve: its shared positions differ)."))
    return (f"Route {rv.route}: " + "; ".join(parts) + f". Estimates describe γ={newest.gamma}, the current "
            f"segment with the most drafts; counts are never summed across γ." + joined)


def specialized_text(rv: RouteView) -> str:
    e = rv.specialized
    if e is None:
        return "— (no iteration_tokens data)"
    if rv.tuning.deployment.decode_backend != "latency_specialized":
        return f"0% on auto ({text.percent(e.share)} on latency_specialized)"
    return text.percent(e.share)


def acceptance_row(rv: RouteView, now: float) -> dict:
    """The route's acceptance in the window and whether its targets answer."""
    t = rv.tuning
    e = t.estimate
    return {
        "route": rv.route,
        "γ deployed": e.gamma,
        "drafts": f"{e.drafts:,.0f}",
        "mean acceptance length": text.estimate(e.mean_acceptance_length, 3),
        "equivalent p": text.estimate(e.equivalent_p, 3),
        "drift": "yes (below)" if (t.drift and t.drift.detected) else "no",
        "newest scrape": age_text(rv.newest_ok_time, now),
        "failing targets": f"{len(rv.failing)} of {len(rv.targets)}",
    }


def decision_row(rv: RouteView) -> dict:
    """What tune-gamma recommends for the route, and the speedups behind it."""
    rec = rv.tuning.recommendation
    best = rec.candidates[rec.recommended_gamma]
    deployed = rec.candidates[rec.deployed_gamma]
    return {
        "route": rv.route,
        "recommended γ": rec.recommended_gamma,
        "decision": rec.decision,
        "speedup at recommended γ": text.speedup(best.speedup, best.speedup_low, best.speedup_high),
        "speedup at deployed γ": text.speedup(deployed.speedup, deployed.speedup_low, deployed.speedup_high),
        "specialized share of steps": specialized_text(rv),
    }


def deployment_rows(joint) -> tuple[dict, list[dict]]:
    """A shared deployment (specdec.deployment_tuning.DeploymentTuning): its row, and one row per route."""
    rec = joint.recommendation
    best = rec.candidates[rec.recommended_gamma]
    whole = rec.gain_of_splitting
    row = {
        "deployment": rec.name,
        "routes": ", ".join(f"{r} ({text.percent(rec.token_shares[r])} of tokens)" for r in rec.routes),
        "γ deployed": rec.deployed_gamma,
        "joint γ": rec.recommended_gamma,
        "decision": rec.decision,
        "speedup at joint γ": text.speedup(best.speedup, best.speedup_low, best.speedup_high),
        "gain of splitting every route": text.gain(whole.value, whole.low, whole.high),
    }
    split = [{"deployment": rec.name, "route": s.route, "own γ": s.gamma, "speedup at own γ": f"{s.speedup:.2f}×",
              "gain of splitting it off": text.gain(s.gain_of_splitting, s.gain_low, s.gain_high)}
             for s in rec.split]
    return row, split


def render_deployments(fleet: FleetView) -> None:
    """Routes that share one deployment run one γ: the joint one, and what splitting would gain."""
    if not fleet.deployments:
        return
    st.subheader("Shared deployments")
    priced = {n: d for n, d in fleet.deployments.items() if not isinstance(d, str)}
    for message in (d for d in fleet.deployments.values() if isinstance(d, str)):
        st.warning(message, icon=NO_ICON)
    if priced:
        rows = [deployment_rows(d) for d in priced.values()]
        st.dataframe([r for r, _ in rows], hide_index=True, key="overview_deployments")
        st.dataframe([s for _, split in rows for s in split], hide_index=True, key="overview_split")
        st.caption("vLLM runs one --speculative-config per server: the joint γ maximises the objective over the "
                   "deployment's traffic mix (each route weighted by its decode tokens); a route's own γ is what it "
                   "would get on engines of its own. `tune-gamma --deployment NAME` prints the same.")


def render(fleet: FleetView) -> None:
    if not open_page(fleet):
        return
    now = time.time()
    tuned = fleet.tuned
    if tuned:
        # Two tables of a width that fits the page (one of 13 columns did not at 1400 px).
        st.dataframe([acceptance_row(rv, now) for rv in tuned.values()], hide_index=True, key="overview_table")
        st.dataframe([decision_row(rv) for rv in tuned.values()], hide_index=True, key="overview_decisions")
        level = next(iter(tuned.values())).tuning.recommendation.interval_level
        objective = {rv.tuning.recommendation.objective for rv in tuned.values()}
        profiles = {rv.tuning.recommendation.cost_profile for rv in tuned.values()}
        st.caption(f"Brackets: {text.level(level)} intervals. Speedup over plain decoding at each route's batch mix, "
                   f"objective {', '.join(sorted(objective))}, cost profile {', '.join(sorted(profiles))}.")
        for rv in tuned.values():
            note = segments_note(rv)
            if note:
                st.info(note, icon=NO_ICON)
            if rv.tuning.drift is not None and rv.tuning.drift.detected:
                st.warning(f"Route {rv.route}: drift — {rv.tuning.drift.message}", icon=NO_ICON)
        from .. import charts  # Plotly's figures: after the tables are on the page

        names = list(tuned)
        left, right = st.columns(2)
        with left:
            al = [rv.tuning.estimate.mean_acceptance_length for rv in tuned.values()]
            st.plotly_chart(charts.route_bars(
                names, [x.value for x in al], [x.low for x in al], [x.high for x in al],
                title=f"Mean acceptance length ({text.level(level)} interval)", y_title="tokens per verify step",
                baseline=1.0), key="overview_al")
        with right:
            best = [rv.tuning.recommendation.candidates[rv.tuning.recommendation.recommended_gamma]
                    for rv in tuned.values()]
            st.plotly_chart(charts.route_bars(
                [f"{n} (γ={c.gamma})" for n, c in zip(names, best)], [c.speedup for c in best],
                [c.speedup_low for c in best], [c.speedup_high for c in best],
                title=f"Projected speedup at the recommended γ ({text.level(level)} interval)",
                y_title="× plain decoding", baseline=1.0), key="overview_speedup")
        render_deployments(fleet)
    untuned(fleet)

    st.subheader("Targets")
    status = fleet.all_target_status
    failing = [s for s in status if s.failing_since is not None]
    if failing:
        st.warning(f"{len(failing)} of {len(status)} targets failing: "
                   + "; ".join(f"{s.target} since {text.clock(s.failing_since)}: {s.last_error}" for s in failing),
                   icon=NO_ICON)
    else:
        st.success(f"All {len(status)} targets answered their last scrape.", icon=NO_ICON)
    st.dataframe([{
        "target": s.target,
        "route": ", ".join(n for n, rv in fleet.routes.items() if s.target in rv.targets),
        "last good scrape": text.clock(s.last_ok_time),
        "age": age_text(s.last_ok_time, now),
        "failing since": text.clock(s.failing_since) if s.failing_since is not None else "",
        "last error": s.last_error or "",
    } for s in status], hide_index=True, key="overview_targets")
