"""The server's warm-up: what a fresh dashboard server does once, before its first visitor.

dashboard.server calls ``start`` before Streamlit starts: a thread that waits until the
server listens, then imports what the first page draws with (the pipeline and scipy behind
it, pandas and pyarrow for st.dataframe, Plotly's figure classes, the overview's module)
and reads the default view — window 1h ending at the newest scrape — into the cache every
session shares (dashboard.cache). A session that starts meanwhile draws the page's title,
then waits for it (``wait``) instead of importing the same modules beside it: the warm-up
does exactly the first run's work, and module imports racing in two threads can leave one
of them a half-initialised module.

Light on purpose (no Streamlit, no package import at module level): dashboard.server imports
it before Streamlit has a runtime.
"""

from __future__ import annotations

import threading
import time

DONE = threading.Event()
DONE.set()  # no warm-up (AppTest, a plain `streamlit run`): nothing to wait for
WAIT_S = 60.0  # a session waits at most this long for it
READY_TIMEOUT_S = 60.0


def wait(timeout_s: float = WAIT_S) -> bool:
    """Block until no warm-up runs; False if one still ran after ``timeout_s``."""
    return DONE.wait(timeout_s)


def preload() -> None:
    """Import what the first page draws with, and build one figure (Plotly's validators)."""
    import importlib

    for name in ("pandas", "pyarrow", "specdec.pipeline", "acceptance.store", "dashboard.cache",
                 "dashboard.charts", "dashboard.views.overview"):
        importlib.import_module(name)  # pandas, pyarrow: what st.dataframe converts through
    from dashboard import charts

    charts.route_bars(["a"], [1.0], [None], [None], title="", y_title="")


def run(config_path: str | None, db: str | None, *, ready=lambda: True,
        ready_timeout_s: float = READY_TIMEOUT_S) -> bool:
    """Once ``ready()`` (the server listens): preload, then read the default view into the
    sessions' cache. Returns whether it did; never raises (the pages report what is wrong),
    and always releases the sessions waiting for it."""
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not ready():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        preload()
        from dashboard import cache, data

        cache.fleet(cache.read_for(config_path, db, data.DEFAULT_WINDOW, data.END_AT_NEWEST))
        return True
    except Exception:  # noqa: BLE001 — a warm-up only: the first session reads again and shows the error
        return False
    finally:
        DONE.set()


def start(config_path: str | None, db: str | None, *, ready) -> threading.Thread:
    """The warm-up thread; sessions wait for it from now on (DONE is cleared here, before
    the server can accept one)."""
    DONE.clear()
    thread = threading.Thread(target=run, args=(config_path, db), kwargs={"ready": ready},
                              name="specdec-warm-up", daemon=True)
    thread.start()
    return thread
