"""Pieces every page uses: what the page shows, why there is nothing to show, and the
sentences that must read the same on every page — whether drift was tested, how old a
scrape is (stale past a few collect intervals), what a decision deploys."""

from __future__ import annotations

import streamlit as st

from model.decision_kind import DecisionKind

from .. import data, text
from ..data import END_AT_NEWEST, STALE_AFTER_INTERVALS, FleetView, age_text, best_expected_gamma

# An alert's icon given as none: Streamlit otherwise looks for a leading emoji in a body
# that is not ASCII (γ, —), and its first look compiles an emoji catalogue (about 0.1 s of
# a cold first page).
NO_ICON = ""


def scrape_age(last_ok_time: float | None, fleet: FleetView, now: float) -> str:
    """A last good scrape's age in a table's cell: '31 s ago'; 'stale: 20.1 min ago' when
    older than STALE_AFTER_INTERVALS collect intervals; 'never scraped'."""
    if last_ok_time is None:
        return "never scraped"
    age = age_text(last_ok_time, now)
    return f"stale: {age}" if data.is_stale(last_ok_time, now, fleet.collect_interval_s) else age


def stale_rule(fleet: FleetView) -> str:
    """'more than 3 collect intervals (15s)' — what stale means here."""
    return f"more than {STALE_AFTER_INTERVALS} collect intervals ({text.duration(fleet.collect_interval_s)})"


def window_caption(fleet: FleetView, now: float | None = None) -> str:
    """'Window 1h: 2026-07-29 07:15:00 UTC → 08:15:00 UTC (ends at the newest scrape in the
    store; newest scrape 3.0 min ago).', the newest scrape called stale past a few collect
    intervals. Each page names its own intervals (or says there are none)."""
    if fleet.window_end is None:
        return f"Window {text.duration(fleet.window_s)}: nothing stored to show."
    now = data.clock_now() if now is None else now
    where = "the newest scrape in the store" if fleet.end_mode == END_AT_NEWEST else "now"
    newest = f"newest scrape {age_text(fleet.latest_time, now)}"
    if data.is_stale(fleet.latest_time, now, fleet.collect_interval_s):
        newest += f" — stale: {stale_rule(fleet)}"
    return (f"Window {text.duration(fleet.window_s)}: {text.clock(fleet.window_start)} → "
            f"{text.clock(fleet.window_end)} (ends at {where}; {newest}).")


def _drift_unit(tuning) -> str:
    """What the drift test counts: requests on a per-request route, else intervals (scraped or logged)."""
    estimated = tuning.route_estimate
    return "requests" if estimated is not None and estimated.requests is not None else "intervals"


def drift_cell(tuning) -> str:
    """The drift column: 'yes (below)', 'no', or 'not tested (why, in short)' — the curves
    and recommendation pages say it in full (drift_sentence)."""
    from acceptance.route_estimate import MIN_ROWS_FOR_DRIFT

    drift = tuning.drift
    if drift is None:
        return f"not tested (< {MIN_ROWS_FOR_DRIFT} {_drift_unit(tuning)})"
    if not drift.tested:
        return "not tested (too few drafts)"
    return "yes (below)" if drift.detected else "no"


def drift_sentence(tuning) -> str:
    """'Drift: <the test's message>', or 'Drift: not tested — why.'"""
    from acceptance.route_estimate import MIN_ROWS_FOR_DRIFT

    drift = tuning.drift
    if drift is None:
        n = tuning.estimate.n_intervals
        return (f"Drift: not tested — the window holds {n} {_drift_unit(tuning)}, the test needs "
                f"{MIN_ROWS_FOR_DRIFT} or more.")
    if not drift.tested:
        return f"Drift: not tested — {drift.message.removeprefix('no drift test: ')}."
    return f"Drift: {drift.message}."


# A decision's badge colour: a change or an off asks the reader to act, a probe to run one
# engine at another γ; a keep is settled; an undecided answer waits for figures.
DECISION_COLORS = {DecisionKind.CHANGE: "orange", DecisionKind.OFF: "red", DecisionKind.PROBE: "violet", DecisionKind.KEEP: "green"}


def decision_badge(route: str, rec) -> str:
    """One route's decision at a glance, as Streamlit's Markdown badge: its kind, the γ it
    deploys and the expected gain over the deployed γ ('structured · change γ 3 → 5 · +8.1%')."""
    gain = rec.gain if rec.decision in (DecisionKind.CHANGE, DecisionKind.OFF, DecisionKind.PROBE) and rec.gain is not None else None
    parts = [route, decision_head(rec)]
    if gain is not None:
        parts.append(f"{gain.value:+.1%}")
    label = " · ".join(parts).replace("[", "(").replace("]", ")")
    return f":{DECISION_COLORS.get(rec.decision, 'gray')}-badge[{label}]"


def decision_head(rec) -> str:
    """What a decision deploys: 'keep γ=7', 'change γ 7 → 3', 'off (γ 7 → 0)', 'probe γ=7
    on 1 engine(s), γ=5 on the others'; a decision that deploys nothing names the γ that keeps
    running."""
    deploys = rec.gamma_to_deploy
    if rec.decision == DecisionKind.KEEP:
        return f"keep γ={deploys}"
    if rec.decision == DecisionKind.OFF:
        return f"off (γ {rec.deployed_gamma} → 0)"
    if rec.decision == DecisionKind.PROBE:
        probe = rec.probe
        return (f"probe γ={probe.gamma} on the route's only engine(s), then back to γ={deploys}" if probe.whole_route
                else f"probe γ={probe.gamma} on {probe.engines} engine(s), γ={deploys} on the others")
    if rec.decision == DecisionKind.CHANGE:
        return f"change γ {rec.deployed_gamma} → {deploys}"
    return f"{rec.decision}, γ={deploys} runs"  # nothing deployed: the fleet runs what it runs


def decision_summary(rec) -> str:
    """decision_head, and the better-looking γ when it is another: 'keep γ=7 (best γ=5, not
    sure enough to change)'. Short: it is a table's cell."""
    head, deploys, best = decision_head(rec), rec.gamma_to_deploy, best_expected_gamma(rec)
    if best == deploys or (rec.decision == DecisionKind.PROBE and best == rec.probe.gamma):
        return head
    if rec.decision == DecisionKind.KEEP:
        why = "not sure enough to change"
    elif rec.decision in (DecisionKind.CHANGE, DecisionKind.PROBE):
        why = "not sure enough yet"  # the decision takes a nearer sure step, or measures it first
    else:
        why = "a what-if, not a decision"
    return f"{head} (best γ={best}, {why})"


def nothing_to_show(fleet: FleetView) -> bool:
    """Say why the page is empty (and return True) when the fleet could not be read."""
    if fleet.state == "ok" and fleet.routes:
        return False
    if fleet.state == "ok":
        st.info("The config defines no routes: add [routes.NAME] with targets to see them here.")
    elif fleet.state in ("config-error", "store-error"):
        st.warning(fleet.message)
    else:
        st.info(fleet.message)
    return True


def untuned(fleet: FleetView) -> None:
    """Routes that could not be tuned in this window, each with its one-line reason."""
    for rv in fleet.routes.values():
        if rv.tuning is None:
            st.info(f"Route {rv.route}: {rv.error}")


def open_page(fleet: FleetView) -> bool:
    """Every page's head under its title (the app draws that before reading): the window it
    shows; False (after saying why) when the fleet could not be read and there is nothing
    to show."""
    st.caption(window_caption(fleet))
    return not nothing_to_show(fleet)


def route_picker(fleet: FleetView, label: str, key: str) -> str | None:
    """A select box over the routes that have an estimate (None when none has)."""
    names = list(fleet.tuned)
    if not names:
        st.info("No route has drafts in this window yet, so there is nothing to chart.")
        untuned(fleet)
        return None
    return st.selectbox(label, names, key=key)
