"""What every session of one dashboard server shares: the store's reads, cached.

A read is keyed by what it reads — the config and store paths, the window, where it ends —
and by ``data.store_signature`` (the store file's, its WAL's and the config's mtime and
size): any write to the store or the config makes the next read a fresh one. A window that
ends now also keys on the clock, in steps of NOW_BUCKET_S. Entries live CACHE_TTL_S at most.

* ``fleet``: every route tuned (data.load_fleet without history) — what each page needs.
* ``history``: one route's curve over time slices — the curves page's only, computed when
  that page first asks for it, from the cached fleet.

dashboard.warm fills ``fleet`` for the default view as soon as a server listens, so that its
first visitor finds the route table computed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from . import data

CACHE_TTL_S = 300
NOW_BUCKET_S = 15.0  # "window ends now" is re-read at most every scrape interval
MAX_ENTRIES = 32


@dataclass(frozen=True)
class Read:
    """One read of the store, as the cache keys it."""

    config_path: str | None
    db: str | None
    window: str
    end_mode: str
    store_path: Path
    signature: tuple  # data.store_signature: changes with every write to the store or the config
    now: float | None  # the window's end when it ends now (None: it ends at the newest scrape)


def read_for(config_path: str | None, db: str | None, window: str, end_mode: str) -> Read:
    """The read's key now. The config is read only to know which store file's changes
    invalidate the cache (load_fleet reports its errors); the clock is part of the key
    only when the window ends now: at the newest scrape the signature alone says when a
    read is stale."""
    from specdec.config import DEFAULT_CONFIG_NAME, ConfigError, load_config

    try:
        config = load_config(config_path)
    except ConfigError:
        config = None
    store_path = data.resolve_store_path(config, db)
    now = time.time()
    bucket = now - now % NOW_BUCKET_S if end_mode == data.END_AT_NOW else None
    return Read(config_path, db, window, end_mode, store_path,
                data.store_signature(store_path, config_path or DEFAULT_CONFIG_NAME), bucket)


@st.cache_data(ttl=CACHE_TTL_S, max_entries=MAX_ENTRIES, show_spinner=False)
def _fleet(config_path: str | None, db: str | None, window: str, end_mode: str, signature: tuple,
           now: float | None) -> data.FleetView:
    del signature  # part of the cache key only
    return data.load_fleet(config_path, db, window=window, end_mode=end_mode, now=now, history_slices=0)


@st.cache_data(ttl=CACHE_TTL_S, max_entries=MAX_ENTRIES, show_spinner=False)
def _history(config_path: str | None, db: str | None, window: str, end_mode: str, signature: tuple,
             now: float | None, route: str) -> list:
    fleet_view = _fleet(config_path, db, window, end_mode, signature, now)
    rv = fleet_view.routes.get(route)
    return [] if rv is None or rv.tuning is None else data.route_history(rv.tuning)


def fleet(read: Read) -> data.FleetView:
    """data.load_fleet without history: every route tuned, cached across sessions."""
    return _fleet(read.config_path, read.db, read.window, read.end_mode, read.signature, read.now)


def history(read: Read, route: str) -> list:
    """data.route_history of one route of ``fleet(read)``, cached like it."""
    return _history(read.config_path, read.db, read.window, read.end_mode, read.signature, read.now, route)


def clear() -> None:
    _fleet.clear()
    _history.clear()
