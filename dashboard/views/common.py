"""Pieces every page uses: what the page shows, and why there is nothing to show."""

from __future__ import annotations

import time

import streamlit as st

from .. import text
from ..data import END_AT_NEWEST, FleetView

# An alert's icon given as none: Streamlit otherwise looks for a leading emoji in a body
# that is not ASCII (γ, —), and its first look compiles an emoji catalogue (about 0.1 s of
# a cold first page).
NO_ICON = ""


def window_caption(fleet: FleetView) -> str:
    """'Window 1h: 2026-07-29 07:15:00 UTC → 08:15:00 UTC (ends at the newest scrape, 3.0 min ago); 90% intervals.'"""
    if fleet.window_end is None:
        return f"Window {text.duration(fleet.window_s)}: nothing stored to show."
    from ..data import age_text

    where = "the newest scrape in the store" if fleet.end_mode == END_AT_NEWEST else "now"
    age = age_text(fleet.latest_time, time.time())
    return (f"Window {text.duration(fleet.window_s)}: {text.clock(fleet.window_start)} → "
            f"{text.clock(fleet.window_end)} (ends at {where}; newest scrape {age}). "
            f"Intervals are 90% unless a table says otherwise.")


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
