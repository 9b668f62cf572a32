"""Acceptance curves: survival and conditional acceptance per position with interval
bands (or "no interval" where none was computed), routes side by side, and how the curve
moved over the window (drift flagged, or said not tested and why)."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from .. import charts, data, text
from ..data import FleetView, RouteView
from .common import drift_sentence, open_page, untuned


def position_rows(rv: RouteView) -> list[dict]:
    e = rv.tuning.estimate
    s, c = e.survival, e.conditional
    return [{
        "route": rv.route,
        "k": k + 1,
        "survival a_k": text.with_interval(text.number(s.value[k], 3), s.low[k], s.high[k], 3),
        "conditional α_k": text.with_interval(text.number(c.value[k], 3), c.low[k], c.high[k], 3),
    } for k in range(e.gamma)]


def bands_caption(views: list[RouteView]) -> str:
    """'Bands: 90% intervals (how they were made).', or which routes have none and why."""
    level = views[0].tuning.estimate.level
    bare = [rv for rv in views if not rv.tuning.estimate.has_interval]
    said = text.intervals_said(level, [rv.route for rv in bare], len(views), what="intervals")
    why = "".join(f" Route {rv.route}: {rv.tuning.estimate.note or rv.tuning.estimate.method}." for rv in bare)
    return f"Bands: {said}.{why}"


def slices_intervals(rv: RouteView) -> str:
    """How the history's slices name their intervals: '90% intervals', 'no intervals (…)',
    or '90% intervals; none for 2 of 6 slices (…)'."""
    level = rv.tuning.estimate.level
    bare = [s for s in rv.history if not s.estimate.has_interval]
    if not bare:
        return f"{text.level(level)} intervals"
    why = "too few intervals with drafts to resample"
    if len(bare) == len(rv.history):
        return f"no intervals: {why}"
    return f"{text.level(level)} intervals; none for {len(bare)} of {len(rv.history)} slices: {why}"


def history_series(rv: RouteView):
    """(name, slice midpoints, AL, low, high) per γ segment of the route's history."""
    by_gamma: dict[tuple[int, bool, bool], list] = {}
    for sl in rv.history:
        by_gamma.setdefault((sl.gamma, sl.newest_segment, sl.current_segment), []).append(sl)
    out = []
    for (gamma, newest, current), slices in sorted(by_gamma.items(), key=lambda kv: (not kv[0][1], kv[0][0])):
        al = [s.estimate.mean_acceptance_length for s in slices]
        role = "" if newest else " (current on other engines, not mixed in)" if current else " (older segment)"
        out.append((f"{rv.route} γ={gamma}{role}",
                    [0.5 * (s.start + s.end) for s in slices], [a.value for a in al], [a.low for a in al],
                    [a.high for a in al]))
    return out


def render_history(rv: RouteView, fleet: FleetView) -> None:
    t = rv.tuning
    drift = t.drift
    st.markdown(f"**{rv.route}** — mean acceptance length per sixth of the window, each slice estimated "
                f"on its own ({slices_intervals(rv)})")
    span = label = None
    if drift is not None and drift.detected:
        st.warning(f"Drift flagged on {rv.route}: {drift.message}")
        span, label = (drift.recent_start, fleet.window_end), "drift: recent part"
    else:
        st.caption(drift_sentence(t))
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.history_figure(history_series(rv), title=f"{rv.route}: acceptance over time",
                                              drift_span=span, drift_label=label), key=f"history_{rv.route}")
    with right:
        newest = [s for s in rv.history if s.newest_segment]
        st.plotly_chart(charts.slices_figure(
            [(f"{text.clock(s.start)[11:16]}–{text.clock(s.end)[11:16]}", s.estimate.survival.value) for s in newest],
            title=f"{rv.route}: survival per time slice (γ={t.estimate.gamma}, oldest light)"),
            key=f"slices_{rv.route}")
    if t.window is not None and t.window.events:
        st.dataframe([{"time": text.clock(ev.time), "target": ev.target, "engine": ev.engine or "",
                       "event": ev.kind, "detail": ev.detail} for ev in t.window.events],
                     hide_index=True, key=f"events_{rv.route}")


def render(fleet: FleetView, history=None) -> None:
    """``history(route)``: the route's curve over time slices (dashboard.cache.history; by
    default data.route_history, uncached)."""
    if not open_page(fleet):
        return
    tuned = fleet.tuned
    if not tuned:
        untuned(fleet)
        return
    chosen = st.multiselect("Routes", list(tuned), default=list(tuned), key="curves_routes")
    untuned(fleet)
    if not chosen:
        st.info("Pick at least one route.")
        return
    views = [tuned[name] for name in chosen]
    level = views[0].tuning.estimate.level
    gammas = ", ".join(f"{rv.route} γ={rv.tuning.estimate.gamma} ({rv.tuning.estimate.drafts:,.0f} drafts)"
                       for rv in views)
    st.caption(f"Newest γ segment of each route: {gammas}. {bands_caption(views)}")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.curve_figure(
            [(rv.route, rv.tuning.estimate.survival) for rv in views],
            title="Survival a_k = P(at least k draft tokens accepted)", y_title="a_k", level=level),
            key="curves_survival")
    with right:
        st.plotly_chart(charts.curve_figure(
            [(rv.route, rv.tuning.estimate.conditional) for rv in views],
            title="Conditional acceptance α_k = a_k / a_(k−1)", y_title="α_k", level=level),
            key="curves_conditional")
    with st.expander("Per-position values", expanded=False):
        st.dataframe([row for rv in views for row in position_rows(rv)], hide_index=True, key="curves_table")
    st.subheader("How the curve moved over the window")
    for rv in views:
        slices = history(rv.route) if history is not None else data.route_history(rv.tuning)
        render_history(replace(rv, history=slices), fleet)
