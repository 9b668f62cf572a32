"""Routes overview: per route AL, equivalent p, whether drift was tested and found, the γ
its decision deploys and the projected speedups with intervals (or "no interval"), the
specialized path's share of steps on routes that run it, freshness (stale past a few
collect intervals) and failing targets; routes that share one deployment: its joint γ and
what splitting each route off would gain. Each route's decision first, as a badge with its
gain; past FILTER_PAST routes, a filter picks the routes the tables and charts show."""

from __future__ import annotations

import streamlit as st

from .. import data, text
from ..data import FleetView, RouteView, age_text
from .common import (DECISION_COLORS, NO_ICON, decision_badge, decision_summary, drift_cell, open_page, scrape_age,
                     stale_rule, untuned)

# Targets named one by one in the staleness warning; past these, a count.
LISTED_TARGETS = 5
# Routes past which the overview offers a filter (tens of routes make long tables and charts).
FILTER_PAST = 10


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
    probe = t.probe.running
    joined = "" if probe is None else (
        f" Positions {probe.deployed_gamma + 1}–{probe.gamma} come from the "
        + ("probe" if probe.running else "ended segment") + f" at γ={probe.gamma} "
        + ("(its conditional rates joined)." if probe.agrees else "(priced from its own curve: its shared positions differ)."))
    return (f"Route {rv.route}: " + "; ".join(parts) + f". Estimates describe γ={newest.gamma}, the current "
            f"segment with the most drafts; counts are never summed across γ." + joined)


SPECIALIZED_COLUMN = "specialized share of steps"


def specialized_text(rv: RouteView) -> str:
    """The share of steps the specialized path takes, on a route that runs it ('—' on the
    others: no step takes it there; the caption says so)."""
    if not rv.on_specialized_path:
        return "—"
    e = rv.specialized
    return "— (no iteration_tokens data)" if e is None else text.percent(e.share)


def acceptance_row(rv: RouteView, fleet: FleetView, now: float) -> dict:
    """The route's acceptance in the window and whether its targets answer."""
    t = rv.tuning
    e = t.estimate
    return {
        "route": rv.route,
        "γ deployed": e.gamma,
        "drafts": f"{e.drafts:,.0f}",
        "mean acceptance length": text.estimate(e.mean_acceptance_length, 3),
        "equivalent p": text.estimate(e.equivalent_p, 3),
        "drift": drift_cell(t),
        "newest scrape": scrape_age(rv.newest_ok_time, fleet, now),
        "failing targets": f"{len(rv.failing)} of {len(rv.targets)}",
    }


def decision_row(rv: RouteView, specialized_column: bool = False) -> dict:
    """What the route's decision deploys (a keep: the deployed γ, whatever looks better),
    and the speedups behind it; the specialized share when some route runs that path."""
    rec = rv.tuning.recommendation
    deploys = rec.candidates[rec.gamma_to_deploy]
    deployed = rec.candidates[rec.deployed_gamma]
    row = {
        "route": rv.route,
        "decision": decision_summary(rec),
        "γ to deploy": deploys.gamma,
        "speedup at γ to deploy": text.speedup(deploys.speedup, deploys.speedup_low, deploys.speedup_high),
        "speedup at deployed γ": text.speedup(deployed.speedup, deployed.speedup_low, deployed.speedup_high),
    }
    if specialized_column:
        row[SPECIALIZED_COLUMN] = specialized_text(rv)
    return row


def without_interval(views: list[RouteView]) -> list[RouteView]:
    """The routes whose estimate has no interval (too few rows with drafts to resample)."""
    return [rv for rv in views if not rv.tuning.estimate.has_interval]


def intervals_caption(views: list[RouteView]) -> str:
    """'Brackets: 90% intervals.', or which routes have none and why."""
    level = views[0].tuning.recommendation.interval_level
    missing = without_interval(views)
    said = text.intervals_said(level, [rv.route for rv in missing], len(views), what="intervals")
    why = "".join(f" Route {rv.route}: {rv.tuning.estimate.note or rv.tuning.estimate.method}." for rv in missing)
    return f"Brackets: {said}.{why}"


def deployment_rows(joint) -> tuple[dict, list[dict]]:
    """A shared deployment (specdec.deployment_tuning.DeploymentTuning): its row, and one row per route."""
    rec = joint.recommendation
    deploys = {c.gamma: c for c in rec.candidates}[rec.gamma_to_deploy]
    whole = rec.gain_of_splitting
    row = {
        "deployment": rec.name,
        "routes": ", ".join(f"{r} ({text.percent(rec.token_shares[r])} of tokens)" for r in rec.routes),
        "γ deployed": rec.deployed_gamma,
        "joint γ": deploys.gamma,
        "decision": decision_summary(rec),
        "speedup at joint γ": text.speedup(deploys.speedup, deploys.speedup_low, deploys.speedup_high),
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
    now = data.clock_now()
    tuned = fleet.tuned
    if tuned:
        views = list(tuned.values())
        st.markdown(" ".join(decision_badge(rv.route, rv.tuning.recommendation) for rv in views))
        if len(views) > FILTER_PAST:
            shown = st.multiselect(f"Routes in the tables and charts ({len(views)} in all)", list(tuned),
                                   default=list(tuned), key="overview_routes")
            views = [tuned[r] for r in shown] or views  # none picked: all, rather than an empty page
        specialized_column = any(rv.on_specialized_path for rv in views)
        # Two tables of a width that fits the page (one of 13 columns did not at 1400 px).
        st.dataframe([acceptance_row(rv, fleet, now) for rv in views], hide_index=True, key="overview_table")
        st.dataframe([decision_row(rv, specialized_column) for rv in views], hide_index=True,
                      key="overview_decisions")
        level = views[0].tuning.recommendation.interval_level
        objective = {rv.tuning.recommendation.objective for rv in views}
        profiles = {rv.tuning.recommendation.cost_profile for rv in views}
        specialized = (f" {SPECIALIZED_COLUMN.capitalize()}: on the routes whose decode_backend is "
                       f"latency_specialized (— on the others, where no step takes that path)." if specialized_column else "")
        st.caption(f"{intervals_caption(views)} Speedup over plain decoding at each route's batch mix, "
                   f"objective {', '.join(sorted(objective))}, cost profile {', '.join(sorted(profiles))}."
                   + specialized)
        for rv in views:
            note = segments_note(rv)
            if note:
                st.info(note, icon=NO_ICON)
            if rv.tuning.drift is not None and rv.tuning.drift.detected:
                st.warning(f"Route {rv.route}: drift — {rv.tuning.drift.message}", icon=NO_ICON)
        from .. import charts  # Plotly's figures: after the tables are on the page

        names = [rv.route for rv in views]
        # side by side while their bars are few; tens of routes each get the page's width
        left, right = st.columns(2) if len(views) <= FILTER_PAST else (st.container(), st.container())
        with left:
            al = [rv.tuning.estimate.mean_acceptance_length for rv in views]
            al_intervals = text.intervals_said(level, [rv.route for rv in without_interval(views)], len(views))
            st.plotly_chart(charts.route_bars(
                names, [x.value for x in al], [x.low for x in al], [x.high for x in al],
                title=f"Mean acceptance length ({al_intervals})", y_title="tokens per verify step",
                baseline=1.0), key="overview_al")
        with right:
            deploys = [rv.tuning.recommendation.candidates[rv.tuning.recommendation.gamma_to_deploy] for rv in views]
            bare = [n for n, c in zip(names, deploys) if not text.interval(c.speedup_low, c.speedup_high)]
            st.plotly_chart(charts.route_bars(
                [f"{n} (γ={c.gamma})" for n, c in zip(names, deploys)], [c.speedup for c in deploys],
                [c.speedup_low for c in deploys], [c.speedup_high for c in deploys],
                title=f"Speedup at the γ to deploy ({text.intervals_said(level, bare, len(views))})",
                y_title="× plain decoding", baseline=1.0,
                colors=[DECISION_COLORS.get(rv.tuning.recommendation.decision, "gray") for rv in views]),
                key="overview_speedup")
        render_deployments(fleet)
    untuned(fleet)
    render_targets(fleet, now)


def render_targets(fleet: FleetView, now: float) -> None:
    """Each target's last good scrape: failing ones, stale ones (no good scrape for more than
    a few collect intervals: the collector stopped or the fleet is gone), and green only
    when every target answered recently."""
    st.subheader("Targets")
    status = fleet.all_target_status
    failing = [s for s in status if s.failing_since is not None]
    stale = [s for s in status
             if s.failing_since is None and data.is_stale(s.last_ok_time, now, fleet.collect_interval_s)]
    if failing:
        st.warning(f"{len(failing)} of {len(status)} targets failing: "
                   + "; ".join(f"{s.target} since {text.clock(s.failing_since)}: {s.last_error}" for s in failing),
                   icon=NO_ICON)
    if stale:
        listed = "; ".join(f"{s.target}: " + (f"last scrape {age_text(s.last_ok_time, now)}" if s.last_ok_time
                                                 is not None else "never scraped") for s in stale[:LISTED_TARGETS])
        more = f"; and {len(stale) - LISTED_TARGETS} more" if len(stale) > LISTED_TARGETS else ""
        st.warning(f"{len(stale)} of {len(status)} targets stale ({stale_rule(fleet)} without a good scrape): "
                   f"{listed}{more}. Is `specdec collect` running, and are the targets still there?", icon=NO_ICON)
    if status and not failing and not stale:
        oldest = min(s.last_ok_time for s in status)
        st.success(f"All {len(status)} targets answered their last scrape (the oldest {scrape_age(oldest, fleet, now)}; "
                   f"collect interval {text.duration(fleet.collect_interval_s)}).", icon=NO_ICON)
    st.dataframe([{
        "target": s.target,
        "route": ", ".join(n for n, rv in fleet.routes.items() if s.target in rv.targets),
        "last good scrape": text.clock(s.last_ok_time),
        "age": scrape_age(s.last_ok_time, fleet, now),
        "failing since": text.clock(s.failing_since) if s.failing_since is not None else "",
        "last error": s.last_error or "",
    } for s in status], hide_index=True, key="overview_targets")
