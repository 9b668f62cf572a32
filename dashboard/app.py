"""specdec dashboard: the Streamlit entry point.

`specdec dashboard` runs ``streamlit run dashboard/app.py -- --config FILE --db PATH``;
the arguments after ``--`` reach this script as sys.argv. Without them the environment
variables SPECDEC_CONFIG and SPECDEC_DB are read (tests use these), then ./specdec.toml.

Pages (sidebar, or ``?page=NAME`` in the URL): overview, curves, whatif, recommendation.
Every number comes from the package through dashboard.data (the CLI's pipeline).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import streamlit as st

from dashboard import data
from specdec.config import DEFAULT_CONFIG_NAME, ConfigError, load_config
from dashboard.views import curves, overview, recommendation, whatif

PAGES = {
    "overview": (overview.TITLE, overview.render),
    "curves": (curves.TITLE, curves.render),
    "whatif": (whatif.TITLE, whatif.render),
    "recommendation": (recommendation.TITLE, recommendation.render),
}
CACHE_TTL_S = 300
NOW_BUCKET_S = 15.0  # "window ends now" is re-read at most every scrape interval


def app_args(argv: list[str]) -> argparse.Namespace:
    """--config / --db after streamlit's `--`; unknown arguments are ignored (a test runner's)."""
    p = argparse.ArgumentParser(prog="specdec dashboard", add_help=False, allow_abbrev=False)
    p.add_argument("--config", default=os.environ.get("SPECDEC_CONFIG") or None)
    p.add_argument("--db", default=os.environ.get("SPECDEC_DB") or None)
    args, _ = p.parse_known_args(argv)
    return args


@st.cache_data(ttl=CACHE_TTL_S, max_entries=32, show_spinner="Reading the store…")
def cached_fleet(config_path: str | None, db: str | None, window: str, end_mode: str, signature: tuple,
                 now: float | None) -> data.FleetView:
    """data.load_fleet, cached per store state (``signature`` changes with every write);
    ``now``: the window's end when it ends now (None: it ends at the newest scrape)."""
    del signature  # part of the cache key only
    return data.load_fleet(config_path, db, window=window, end_mode=end_mode, now=now)


def pick_page() -> str:
    requested = st.query_params.get("page", "overview")
    index = list(PAGES).index(requested) if requested in PAGES else 0
    page = st.sidebar.radio("Page", list(PAGES), index=index, format_func=lambda k: PAGES[k][0], key="page")
    if st.query_params.get("page") != page:
        st.query_params["page"] = page
    return page


def main() -> None:
    st.set_page_config(page_title="specdec — speculative decoding", layout="wide")
    args = app_args(sys.argv[1:])
    page = pick_page()
    st.sidebar.divider()
    window = st.sidebar.selectbox("Window", data.WINDOW_CHOICES, index=data.WINDOW_CHOICES.index(data.DEFAULT_WINDOW),
                                  key="window")
    end_mode = st.sidebar.radio("Window ends at", data.END_CHOICES, key="end_mode",
                                help="The newest scrape shows a stopped collector's data (its age is shown); "
                                     "'now' is tune-gamma's rule.")
    try:  # only to know which file's changes invalidate the cache; load_fleet reports errors
        config = load_config(args.config)
    except ConfigError:
        config = None
    store_path = data.resolve_store_path(config, args.db)
    # The clock is part of the key only when the window ends now; at the newest scrape
    # the store's signature alone says when a read is stale.
    now = time.time()
    fleet = cached_fleet(args.config, args.db, window, end_mode,
                         data.store_signature(store_path, args.config or DEFAULT_CONFIG_NAME),
                         now - now % NOW_BUCKET_S if end_mode == data.END_AT_NOW else None)
    st.sidebar.caption(f"Config: {args.config or './specdec.toml'}  \nStore: {store_path}")
    if st.sidebar.button("Reload", key="reload"):
        cached_fleet.clear()
        st.rerun()
    PAGES[page][1](fleet)


main()
