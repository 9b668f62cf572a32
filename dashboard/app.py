"""specdec dashboard: the Streamlit entry point.

`specdec dashboard` runs ``python -m dashboard.server run dashboard/app.py -- --config FILE
--db PATH`` (``streamlit run`` plus the server's warm-up, dashboard.warm); the arguments
after ``--`` reach this script as sys.argv. Without them the environment
variables SPECDEC_CONFIG and SPECDEC_DB are read (tests use these), then ./specdec.toml.

Pages (sidebar, or ``?page=NAME`` in the URL): overview, curves, whatif, recommendation.
Every number comes from the package through dashboard.data (the CLI's pipeline), read once
per store state for all sessions (dashboard.cache). A run draws the sidebar and the page's
title first, then imports the page's module and reads (or finds cached) what it shows.
"""

from __future__ import annotations

import importlib
import sys
from functools import partial

import streamlit as st

from dashboard import cache, data, warm

# page → its title; each page's module (dashboard.views.NAME, with its charts and the
# model functions it calls) is imported when that page is first shown.
PAGES = {
    "overview": "Routes overview",
    "curves": "Acceptance curves",
    "whatif": "What-if",
    "recommendation": "Recommendation",
}
READING = "Reading the store…"  # shown under the title while a read that is not cached runs (after 0.5 s)


def pick_page() -> str:
    requested = st.query_params.get("page", "overview")
    index = list(PAGES).index(requested) if requested in PAGES else 0
    page = st.sidebar.radio("Page", list(PAGES), index=index, format_func=PAGES.get, key="page")
    if st.query_params.get("page") != page:
        st.query_params["page"] = page
    return page


def main() -> None:
    st.set_page_config(page_title="specdec — speculative decoding", layout="wide")
    args = data.app_args(sys.argv[1:])
    page = pick_page()
    st.sidebar.divider()
    window = st.sidebar.selectbox("Window", data.WINDOW_CHOICES, index=data.WINDOW_CHOICES.index(data.DEFAULT_WINDOW),
                                  key="window")
    end_mode = st.sidebar.radio("Window ends at", data.END_CHOICES, key="end_mode",
                                help="The newest scrape shows a stopped collector's data (its age is shown); "
                                     "'now' is tune-gamma's rule.")
    # The title first: what follows may wait for imports and a read of the store — or for
    # the server's warm-up, which does both for the default view (dashboard.warm).
    st.header(PAGES[page])
    with st.spinner(READING):
        warm.wait()
        read = cache.read_for(args.config, args.db, window, end_mode)
        st.sidebar.caption(f"Config: {args.config or './specdec.toml'}  \nStore: {read.store_path}")
        if st.sidebar.button("Reload", key="reload"):
            cache.clear()
            st.rerun()
        view = importlib.import_module(f"dashboard.views.{page}")
        fleet = cache.fleet(read)
    extra = {"history": partial(cache.history, read)} if page == "curves" else {}
    view.render(fleet, **extra)


main()
