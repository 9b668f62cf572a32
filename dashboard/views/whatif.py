"""What-if: γ, drafter method, draft cost, cost profile, decode backend and batch mix as
controls; the seeds' speedup-over-acceptance curve live (published points marked), and
the selected route's projected speedup per γ under the controls' figures."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import streamlit as st

from acceptance.errors import InputError
from model.deployment import BUILTIN_PROFILES, DECODE_BACKENDS, ModelInputError
from model.drafters import KNOWN_METHODS
from model.recommend import refusal
from model.speedup import implied_p, seeds_table
from specdec.pipeline import what_if

from .. import charts, text
from ..data import FleetView, best_expected_gamma
from ..seeds import SEEDS_BASELINE_TPS, SEEDS_DRAFT_COST, SEEDS_GAMMA, SEEDS_MEASUREMENTS, SEEDS_TABLE_POINTS
from .common import decision_summary, open_page, route_picker

MAX_GAMMA = 16
P_GRID = np.round(np.linspace(0.0, 0.99, 100), 4)
MIX_OBSERVED, MIX_BATCH1, MIX_CUSTOM = "observed in the window", "batch 1 only", "custom"


class BatchMixError(InputError):
    """A custom batch mix that does not read as 'B:share, B:share'."""


def parse_batch_mix(spec: str) -> dict[int, float]:
    """'1:0.5, 8:0.5' → {1: 0.5, 8: 0.5}: the share of engine time at each batch size
    (normalised by the cost model). Bad text → BatchMixError naming the entry."""
    mix: dict[int, float] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        b, sep, w = part.partition(":")
        try:
            batch, share = int(b), float(w)
        except ValueError:
            raise BatchMixError(f"batch mix entry {part!r}: expected BATCH:SHARE such as 8:0.5") from None
        if not sep or batch < 1 or not np.isfinite(share) or share < 0:
            raise BatchMixError(f"batch mix entry {part!r}: batch ≥ 1 and share ≥ 0 expected")
        mix[batch] = mix.get(batch, 0.0) + share
    if not mix or sum(mix.values()) <= 0:
        raise BatchMixError(f"batch mix {spec!r}: no batch size with a positive share")
    return mix


def _methods(current: str) -> list[str]:
    methods = [m for m in KNOWN_METHODS if not m.startswith("<")]
    return methods if current in methods else [current, *methods]


class _Controls(NamedTuple):
    gamma: int
    method: str
    draft_cost: float
    profile: str
    backend: str
    mix_kind: str
    mix_text: str


def render(fleet: FleetView) -> None:
    if not open_page(fleet):
        return
    route = route_picker(fleet, "Route", key="whatif_route")
    if route is None:
        return
    tuning = fleet.tuned[route].tuning
    dep = tuning.deployment
    deployed = tuning.observed_gamma
    st.caption(f"Controls start at route {route}'s configured figures: method {dep.method}, draft cost "
               f"{dep.draft_cost:g}, cost profile {dep.cost_profile}, decode backend {dep.decode_backend}, "
               f"deployed γ={deployed}.")
    controls = _controls(dep, deployed)
    # The route's projection under the controls (drawn in 2., compared with in 1.).
    overrides = {"method": controls.method, "draft_cost": float(controls.draft_cost), "cost_profile": controls.profile,
                 "decode_backend": controls.backend}
    try:
        deployment, rec = what_if(tuning, overrides, batch_time_shares=_batch_time_shares(controls, tuning))
        model_error = None
    except ModelInputError as e:
        deployment = rec = None
        model_error = e
    chosen = {c.gamma: c for c in rec.candidates}.get(controls.gamma) if rec is not None else None
    _flat_model_section(fleet, route, controls, chosen, rec)
    st.subheader(f"Route {route}: projected speedup per γ")
    if rec is None:
        st.warning(f"These figures cannot be modelled: {model_error}")
        return
    _route_section(tuning, controls.gamma, deployed, deployment, rec, chosen)


def _controls(dep, deployed: int) -> _Controls:
    """The page's controls, starting at the route's configured figures."""
    c1, c2, c3 = st.columns(3)
    with c1:
        gamma = st.slider("γ (draft tokens)", 1, MAX_GAMMA, value=min(max(deployed, 1), MAX_GAMMA), key="whatif_gamma")
        methods = _methods(dep.method)
        method = st.selectbox("Drafter method", methods, index=methods.index(dep.method), key="whatif_method")
    with c2:
        draft_cost = st.number_input("Draft cost (r, or c per token; × the stock pass)", min_value=0.0, max_value=10.0,
                                     value=float(dep.draft_cost), step=0.01, format="%.3f", key="whatif_draft_cost")
        profiles = list(BUILTIN_PROFILES) + ([dep.cost_profile] if dep.cost_profile not in BUILTIN_PROFILES else [])
        profile = st.selectbox("Cost profile", profiles, index=profiles.index(dep.cost_profile), key="whatif_profile",
                               format_func=lambda p: p if p in BUILTIN_PROFILES else f"measured table ({p.split('/')[-1]})")
    with c3:
        backend = st.selectbox("Decode backend", list(DECODE_BACKENDS), index=list(DECODE_BACKENDS).index(dep.decode_backend),
                               key="whatif_backend")
        mix_kind = st.radio("Batch mix (share of engine time per batch size)", [MIX_OBSERVED, MIX_BATCH1, MIX_CUSTOM],
                            key="whatif_mix", horizontal=True)
        mix_text = st.text_input("Custom mix (BATCH:SHARE, …)", value="1:0.5, 8:0.5", key="whatif_mix_text",
                                 disabled=mix_kind != MIX_CUSTOM)
    return _Controls(gamma, method, draft_cost, profile, backend, mix_kind, mix_text)


def _batch_time_shares(controls: _Controls, tuning) -> dict[int, float] | None:
    """The u_B the controls ask for (None: the window's observed shares)."""
    if controls.mix_kind == MIX_BATCH1:
        return {1: 1.0}
    if controls.mix_kind == MIX_CUSTOM:
        try:
            return parse_batch_mix(controls.mix_text)
        except BatchMixError as e:
            st.warning(f"{e}; using the observed mix instead.")
    elif not (tuning.window is not None and tuning.window.step_shape.batch_time_shares):
        st.caption("No vllm:num_requests_running samples in the window: the model uses batch 1.")
    return None


def _flat_model_section(fleet: FleetView, route: str, controls: _Controls, chosen, rec) -> None:
    """1. The seeds' curve over acceptance, under the controls' γ, method and draft cost."""
    gamma, draft_cost, method = controls.gamma, controls.draft_cost, controls.method
    st.subheader("Speedup over acceptance (the flat model: independent p, draft cost r; live)")
    try:
        rows = seeds_table(gamma, draft_cost, P_GRID.tolist(), method=method)
    except ModelInputError as e:
        st.warning(str(e))
        return
    if not rows:
        return
    published = [(f"p={p:g}", p, s) for p, s in SEEDS_TABLE_POINTS]
    skipped = []
    for label, tps in SEEDS_MEASUREMENTS:
        try:
            imp = implied_p(tps / SEEDS_BASELINE_TPS, gamma, draft_cost, method=method)
            published.append((label, imp.p, imp.speedup))
        except ModelInputError as e:
            skipped.append(f"{label}: {e}")
    marks = []
    for name, rv in fleet.tuned.items():
        e = rv.tuning.estimate
        if np.isfinite(e.equivalent_p.value):
            (row,) = seeds_table(gamma, draft_cost, [e.equivalent_p.value], method=method)
            marks.append((name, e.equivalent_p.value, e.equivalent_p.low, e.equivalent_p.high, row.speedup))
    st.plotly_chart(charts.seeds_figure(
        [r.p for r in rows], [r.speedup for r in rows],
        title=f"S = (1 − p^(γ+1)) / ((1 − p)·step cost), γ={gamma}, {method}, draft cost {draft_cost:g} (flat profile)",
        published=published, route_marks=marks), key="whatif_seeds")
    st.caption(f"Diamonds: the seeds' printed table (γ={SEEDS_GAMMA}, r={SEEDS_DRAFT_COST:g}) and the published "
               f"370 / 464 tok/s over {SEEDS_BASELINE_TPS:g} tok/s placed at the p they imply under these controls. "
               "Circles: each route's equivalent p (bars: its interval) and the flat model's speedup there — "
               "not the route's projection. " + flat_vs_route(route, gamma, marks, chosen, rec))
    for s in skipped:
        st.caption(f"Not on this curve — {s}")


def _route_section(tuning, gamma: int, deployed: int, deployment, rec, chosen) -> None:
    """2. The route's projected speedup per γ under the controls' figures."""
    m1, m2, m3 = st.columns(3)
    past_candidates = None
    if chosen is None:
        top = max(c.gamma for c in rec.candidates)
        past_candidates = refusal(deployment, gamma) or f"candidates stop at gamma_max = {top}"
        m1.metric(f"Speedup at γ={gamma}", "—", help=past_candidates)
    else:
        # The value alone in the metric's large type (with its interval it was cut at 1400 px),
        # the interval under it, or that there is none.
        bounds = text.interval(chosen.speedup_low, chosen.speedup_high, 3)
        m1.metric(f"Speedup at γ={gamma}" + (f" ({text.level(rec.interval_level)})" if bounds else ""),
                  text.speedup(chosen.speedup),
                  help=("refused: " + chosen.reason) if not chosen.allowed else
                  ("extrapolated past the deployed γ" if chosen.extrapolated else None))
        m1.caption(f"{text.level(rec.interval_level)} interval {bounds}" if bounds else text.NO_INTERVAL)
    # What each decision deploys (a keep: the deployed γ), the better-looking γ named under it.
    for column, label, decided in ((m2, "γ to deploy under these figures", rec),
                                   (m3, "γ to deploy as configured", tuning.recommendation)):
        column.metric(label, f"{decided.gamma_to_deploy} ({decided.decision})")
        if best_expected_gamma(decided) != decided.gamma_to_deploy:
            column.caption(text.sentence(decision_summary(decided)))
    if chosen is not None and not chosen.allowed or past_candidates:
        st.warning(f"γ={gamma} cannot be deployed with these figures: {past_candidates or chosen.reason}")
    if rec.specialized_eligibility is not None:
        st.caption(f"Specialized path: clean share {text.percent(rec.specialized_eligibility.share)} — "
                   f"{rec.specialized_eligibility.source}")
    if rec.specialized_speedup_measured is not None:
        st.info(text.sentence(rec.specialized_speedup_measured.describe()))
    if rec.specialized_break_even is not None and (warning := rec.specialized_break_even.warning()):
        st.warning(text.sentence(warning))
    outlined = f"γ={gamma}, the slider's" + (" (the deployed γ)" if gamma == deployed else "")
    series = [("what-if", rec.candidates), ("configured", tuning.recommendation.candidates)]
    bare = [name for name, cands in series
            if not any(text.interval(c.speedup_low, c.speedup_high) for c in cands if c.gamma > 0)]
    intervals = text.intervals_said(rec.interval_level, bare, len(series), what="intervals")
    st.plotly_chart(charts.candidates_figure(
        series,
        title=f"Projected speedup per γ ({intervals}; grey: refused, hatched: extrapolated)",
        y_title="× plain decoding", highlight_gamma=gamma, highlight_label=outlined), key="whatif_candidates")
    st.caption(f"Black outline: {outline_text(gamma, deployed)}. What-if: cost profile {rec.cost_profile}, "
               f"objective {rec.objective}, decode backend {deployment.decode_backend}. {rec.decision_reason}")


def outline_text(gamma: int, deployed: int) -> str:
    """What the route chart's outlined bars are."""
    where = (f"it starts at the deployed γ={deployed}" if gamma == deployed
             else f"the deployed γ is {deployed}")
    return f"the bars at γ={gamma}, the γ chosen with the slider above ({where})"


def flat_vs_route(route: str, gamma: int, marks, chosen, rec) -> str:
    """The selected route's two speedups on this page, and what differs between them."""
    mine = [s for name, _, _, _, s in marks if name == route]
    if not mine or chosen is None or rec is None:
        return "The route chart below prices each γ with the route's own cost profile and batch mix."
    return (f"Route {route} at γ={gamma}: {text.speedup(mine[0])} on this curve, {text.speedup(chosen.speedup)} in the "
            f"route chart below, which prices each γ with the route's measured acceptance per position (not one "
            f"independent p), its batch mix and cost profile {rec.cost_profile}.")
