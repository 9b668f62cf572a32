"""Plotly figures from the package's results (estimates, candidates, table rows).

Each function only places given numbers on axes: values, interval bands and markers.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative, sample_colorscale

from acceptance.estimates import CurveEstimate
from model.recommend import Candidate

from . import text

PALETTE = qualitative.Plotly
# Streamlit's badge colours (dashboard.views.common.DECISION_COLORS) as bar colours
BADGE_COLORS = {"orange": "#ff8c00", "red": "#e0393e", "violet": "#8e44ad", "green": "#2e9e4f", "gray": "#9aa0a6"}
# Plotly's toolbar (the modebar) is drawn over the top MODEBAR_PX of a chart, at its right,
# when the pointer is on it: the title is placed below that band, and the plot below the
# title (its margin reserved: title.automargin). The legend sits at the chart's bottom edge,
# positioned on the container: Plotly then reserves its height under the x axis's tick
# labels and title instead of drawing it over them (a legend at a paper y below the plot
# covered "time (UTC)").
MODEBAR_PX = 32
SLANT_PAST = 6  # bars past which route names are slanted so that every one shows
TITLE = dict(x=0, xref="container", xanchor="left", y=1, yref="container", yanchor="top",
             pad=dict(t=MODEBAR_PX, b=8, l=8), automargin=True)
LEGEND = dict(orientation="h", x=0, xref="paper", xanchor="left", y=0, yref="container", yanchor="bottom")
LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=MODEBAR_PX, b=10), height=460, legend=LEGEND,
              modebar=dict(orientation="h"))


def _layout(fig: go.Figure, title: str, **kw) -> None:
    """The dashboard's layout for a figure: its title (below the modebar), legend and margins."""
    fig.update_layout(title=dict(text=title, **TITLE), **LAYOUT, **kw)
    fig.update_xaxes(automargin=True)  # the tick labels and the axis title: margin reserved, above the legend
    fig.update_yaxes(automargin=True)


def _rgba(color: str, alpha: float) -> str:
    h = color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _finite(xs) -> bool:
    a = np.asarray(xs, dtype=float)
    return a.size > 0 and bool(np.all(np.isfinite(a)))


def _error_bars(values, lows, highs) -> dict:
    """Asymmetric error bars from each value's interval. A value without one gets none: its
    arms are left NaN (Plotly draws nothing there), not 0 — a zero-length bar with its caps
    reads as an interval of no width, i.e. an exact value."""
    v = np.asarray(values, dtype=float)
    lo = np.asarray([np.nan if x is None else x for x in lows], dtype=float)
    hi = np.asarray([np.nan if x is None else x for x in highs], dtype=float)
    known = np.isfinite(lo) & np.isfinite(hi)
    return dict(type="data", symmetric=False, visible=bool(known.any()),
                array=np.where(known, hi - v, np.nan), arrayminus=np.where(known, v - lo, np.nan))


def _band(fig: go.Figure, x, low, high, color: str, name: str, group: str, hatch: str = "") -> None:
    """A filled band between low and high (skipped when the interval is missing), hatched
    with Plotly's ``hatch`` pattern ("/": extrapolated) when given."""
    if not (_finite(low) and _finite(high)):
        return
    fig.add_trace(go.Scatter(x=list(x), y=list(high), mode="lines", line=dict(width=0), hoverinfo="skip",
                             showlegend=False, legendgroup=group))
    fig.add_trace(go.Scatter(x=list(x), y=list(low), mode="lines", line=dict(width=0), fill="tonexty",
                             fillcolor=_rgba(color, 0.2), fillpattern=dict(shape=hatch) if hatch else None, name=name,
                             hoverinfo="skip", showlegend=False, legendgroup=group))


def curve_figure(curves: Sequence[tuple[str, CurveEstimate]], *, title: str, y_title: str,
                 level: float) -> go.Figure:
    """Curves over positions k = 1..γ with their interval bands, one colour per name."""
    fig = go.Figure()
    for i, (name, curve) in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        k = np.arange(1, len(curve.value) + 1)
        _band(fig, k, curve.low, curve.high, color, f"{name} {text.level(level)} interval", name)
        fig.add_trace(go.Scatter(x=k, y=curve.value, mode="lines+markers", name=name, legendgroup=name,
                                 line=dict(color=color, width=2)))
    _layout(fig, title, xaxis_title="draft position k", yaxis_title=y_title, yaxis_range=[0, 1.02])
    fig.update_xaxes(dtick=1)
    return fig


def route_bars(names: Sequence[str], values, lows, highs, *, title: str, y_title: str,
               baseline: float | None = None, colors: Sequence[str] | None = None) -> go.Figure:
    """One bar per route with its interval as error bars (None bounds: no error bar), every
    route's name under its bar (slanted past a few routes); ``colors``: each bar's badge colour
    (BADGE_COLORS' names), else one colour — the axis names the routes, so tens of routes
    need no palette."""
    v = np.asarray(values, dtype=float)
    marker = [BADGE_COLORS.get(c, BADGE_COLORS["gray"]) for c in colors] if colors else PALETTE[0]
    fig = go.Figure(go.Bar(x=list(names), y=v, error_y=_error_bars(v, lows, highs), marker_color=marker,
                           text=[text.number(x) for x in v],  # over each bar while they fit; else on hover
                           textposition="outside" if len(names) <= 2 * SLANT_PAST else "none"))
    if baseline is not None:
        fig.add_hline(y=baseline, line_dash="dot", line_color="gray")
    _layout(fig, title, yaxis_title=y_title, showlegend=False)
    fig.update_xaxes(tickmode="array", tickvals=list(names), ticktext=list(names),
                     tickangle=-45 if len(names) > SLANT_PAST else 0)
    return fig


def history_figure(series: Sequence[tuple[str, list[float], list[float], list[float], list[float]]], *,
                   title: str, drift_span: tuple[float, float] | None, drift_label: str | None) -> go.Figure:
    """Mean acceptance length per time slice (x: slice midpoint, epoch s → UTC), one line
    per (route, γ) with error bars; the drift test's recent part shaded when drift is flagged."""
    from datetime import datetime, timezone

    def utc(ts):
        return [datetime.fromtimestamp(t, tz=timezone.utc) for t in ts]

    fig = go.Figure()
    for i, (name, mids, values, lows, highs) in enumerate(series):
        v = np.asarray(values, dtype=float)
        fig.add_trace(go.Scatter(x=utc(mids), y=v, mode="lines+markers", name=name,
                                 error_y=_error_bars(v, lows, highs), line=dict(color=PALETTE[i % len(PALETTE)])))
    if drift_span is not None:
        lo, hi = utc(drift_span)
        fig.add_vrect(x0=lo, x1=hi, fillcolor="orange", opacity=0.15, line_width=0,
                      annotation_text=drift_label or "drift", annotation_position="top left")
    _layout(fig, title, xaxis_title="time (UTC)", yaxis_title="mean acceptance length")
    return fig


def slices_figure(slices: Sequence[tuple[str, np.ndarray]], *, title: str) -> go.Figure:
    """Survival curves of successive time slices, oldest light, newest dark."""
    fig = go.Figure()
    n = len(slices)
    colors = sample_colorscale("Blues", [0.3 + 0.7 * i / max(n - 1, 1) for i in range(n)])
    for (name, values), color in zip(slices, colors):
        k = np.arange(1, len(values) + 1)
        fig.add_trace(go.Scatter(x=k, y=values, mode="lines+markers", name=name, line=dict(color=color)))
    _layout(fig, title, xaxis_title="draft position k", yaxis_title="survival a_k", yaxis_range=[0, 1.02])
    fig.update_xaxes(dtick=1)
    return fig


ROUTE_MARK = "{route}: flat model at its equivalent p"
OUTLINE = "outlined: {what}"


def seeds_figure(ps, speedups, *, title: str, published: Sequence[tuple[str, float, float]],
                 route_marks: Sequence[tuple[str, float, float | None, float | None, float]]) -> go.Figure:
    """Speedup over the acceptance p (the seeds' model), published points and routes marked.

    published: (label, p, speedup); route_marks: (route, p, p_low, p_high, speedup at p).
    A route's mark is the flat model's speedup at the route's equivalent p — not the route's
    projection, which prices γ with its own cost profile and batch mix (the route chart):
    its name says so (ROUTE_MARK).
    """
    fig = go.Figure(go.Scatter(x=list(ps), y=list(speedups), mode="lines", name="flat model (independent p, draft cost r)",
                               line=dict(color=PALETTE[0], width=2)))
    if published:
        fig.add_trace(go.Scatter(
            x=[p for _, p, _ in published], y=[s for _, _, s in published], mode="markers+text",
            name="seeds' published points", text=[label for label, _, _ in published],
            textposition="top left", marker=dict(symbol="diamond", size=10, color=PALETTE[1])))
    for i, (route, p, p_lo, p_hi, s) in enumerate(route_marks):
        err = None
        if p_lo is not None and p_hi is not None and math.isfinite(p_lo) and math.isfinite(p_hi):
            err = dict(type="data", symmetric=False, array=[p_hi - p], arrayminus=[p - p_lo])
        fig.add_trace(go.Scatter(x=[p], y=[s], mode="markers", name=ROUTE_MARK.format(route=route), error_x=err,
                                 marker=dict(symbol="circle-open", size=12, line=dict(width=2),
                                             color=PALETTE[(i + 2) % len(PALETTE)])))
    _layout(fig, title, xaxis_title="acceptance rate p (independent per token)",
            yaxis_title="speedup over plain decoding (×)")
    return fig


def candidates_figure(series: Sequence[tuple[str, Sequence[Candidate]]], *, title: str, y_title: str,
                      highlight_gamma: int | None = None, highlight_label: str | None = None) -> go.Figure:
    """Projected speedup per γ with intervals, one bar group per named candidate list;
    refused γ are grey, extrapolated ones hatched; ``highlight_gamma``'s bars outlined in
    black, the outline's legend entry saying what it marks (``highlight_label``)."""
    fig = go.Figure()
    for i, (name, cands) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        g = [c.gamma for c in cands]
        v = np.array([c.speedup for c in cands], dtype=float)
        err = _error_bars(v, [c.speedup_low for c in cands], [c.speedup_high for c in cands])
        colors = [color if c.allowed else "lightgray" for c in cands]
        lines = [3 if c.gamma == highlight_gamma else 0 for c in cands]
        hover = [f"γ={c.gamma}: {text.speedup(c.speedup, c.speedup_low, c.speedup_high)}"
                 + (" (extrapolated)" if c.extrapolated else "") + (f" — refused: {c.reason}" if not c.allowed else "")
                 for c in cands]
        fig.add_trace(go.Bar(x=g, y=v, name=name, error_y=err, hovertext=hover, hoverinfo="text",
                             marker=dict(color=colors, line=dict(width=lines, color="black"),
                                         pattern=dict(shape=["/" if c.extrapolated else "" for c in cands]))))
    if highlight_gamma is not None:  # the outline's legend entry (a marker that draws nothing on the axes)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", hoverinfo="skip",
                                 name=OUTLINE.format(what=highlight_label or f"γ={highlight_gamma}"),
                                 marker=dict(symbol="square", size=14, color="white", line=dict(width=3, color="black"))))
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    _layout(fig, title, xaxis_title="γ (num_speculative_tokens)", yaxis_title=y_title, barmode="group")
    fig.update_xaxes(dtick=1)
    return fig


def recommendation_figure(cands: Sequence[Candidate], *, deployed: int, deploy: int, best: int, title: str,
                          y_title: str) -> go.Figure:
    """Projected speedup per γ: the line with its interval band (hatched and dashed where γ is
    extrapolated past the deployed γ), refused γ as grey crosses, and the deployed γ, the γ
    the decision deploys and the best expected one marked on the axis."""
    fig = go.Figure()
    color = PALETTE[0]
    allowed = [c for c in cands if c.allowed]
    measured = [c for c in allowed if not c.extrapolated]
    beyond = [c for c in allowed if c.extrapolated]
    if beyond and measured:  # the extrapolated part starts from the last measured point
        beyond = [measured[-1], *beyond]
    for part, name, dash, hatch in ((measured, "measured", "solid", ""), (beyond, "extrapolated", "dash", "/")):
        if not part:
            continue
        g = [c.gamma for c in part]
        _band(fig, g, [c.speedup_low for c in part], [c.speedup_high for c in part], color, f"{name}: interval", name,
              hatch)  # None bounds (no interval) read as NaN: no band
        fig.add_trace(go.Scatter(
            x=g, y=[c.speedup for c in part], mode="lines+markers", name=name, legendgroup=name,
            line=dict(color=color, dash=dash),
            hovertext=[f"γ={c.gamma}: {text.speedup(c.speedup, c.speedup_low, c.speedup_high)}" for c in part],
            hoverinfo="text"))
    refused = [c for c in cands if not c.allowed]
    if refused:
        fig.add_trace(go.Scatter(x=[c.gamma for c in refused], y=[c.speedup for c in refused], mode="markers",
                                 name="refused", marker=dict(symbol="x", size=10, color="gray"),
                                 hovertext=[f"γ={c.gamma} refused: {c.reason}" for c in refused], hoverinfo="text"))
    marks = {deployed: ["deployed"]}
    marks.setdefault(deploy, []).append("to deploy")
    marks.setdefault(best, []).append("best expected")
    for gamma, said in sorted(marks.items()):
        fig.add_vline(x=gamma, line_dash="dot", line_color="black",
                      annotation_text=f"γ={gamma}: {', '.join(dict.fromkeys(said))}", annotation_position="top")
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    _layout(fig, title, xaxis_title="γ (num_speculative_tokens)", yaxis_title=y_title)
    fig.update_xaxes(dtick=1)
    return fig
