"""What the dashboard shows, read through the same functions as the CLI (no Streamlit here).

  config (specdec.config) → store (acceptance.store) → per route: tune_route (the
  tune-gamma pipeline) → ``FleetView``; the curves page's curve_history (specdec.pipeline)
  per route on demand (``route_history``)

The views format and chart these results; they compute no quantity of their own.
Reading never writes: a store file that does not exist is reported as missing, not
created (Store.open would create it), and the store is read inside one read transaction
so that a `specdec collect` writing at the same time cannot show half a cycle.

The package's modules (the store, the pipeline, scipy behind them) are imported when a
function here first needs them, not with this module: the app draws its sidebar and the
page's title before anything heavy is loaded.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acceptance.store import TargetStatus
    from model.specialized import Eligibility
    from specdec.config import Config
    from acceptance.curve_history import CurveSlice
    from specdec.pipeline import RouteTuning
    from specdec.deployment_tuning import DeploymentTuning

from acceptance.errors import InputError

WINDOW_CHOICES = ("15m", "1h", "6h", "1d", "7d")
DEFAULT_WINDOW = "1h"
# Where the window ends: at the newest scrape in the store (a stopped collector or a demo
# store still shows its data, with its age said), or at the wall clock (tune-gamma's rule).
END_AT_NEWEST = "newest scrape"
END_AT_NOW = "now"
END_CHOICES = (END_AT_NEWEST, END_AT_NOW)
HISTORY_SLICES = 6
# A store being written can change under a read (a new γ segment appears between the
# engine list and the rows): read again, up to this many times.
READ_ATTEMPTS = 3
# The pipeline's messages name the CLI's flags (specdec.pipeline.tune_route: "… or widen
# --window"); on the dashboard the same choice is a sidebar control: (the CLI's words, the
# dashboard's).
DASHBOARD_WORDING = (
    ("or widen --window", "or choose a longer Window in the sidebar"),
    ("; widen --window", "; choose a longer Window in the sidebar"),
)
# A target whose last good scrape is older than this many collect intervals is stale: the
# collector has stopped, or the target is gone, and what the store says of it is old news.
# A few intervals, not one: a cycle that is being written, or one slow scrape, is not staleness.
STALE_AFTER_INTERVALS = 3


def clock_now() -> float:
    """The wall clock the pages judge ages and staleness by (one place, so tests can set it)."""
    return time.time()


def is_stale(last_ok_time: float | None, now: float, collect_interval_s: float) -> bool:
    """Whether a last good scrape at ``last_ok_time`` is older than STALE_AFTER_INTERVALS
    collect intervals at ``now`` (never scraped counts as stale: nothing answered)."""
    if last_ok_time is None or not math.isfinite(last_ok_time):
        return True
    return now - last_ok_time > STALE_AFTER_INTERVALS * collect_interval_s


def best_expected_gamma(rec) -> int:
    """The γ with the best expected speedup: the farther one when the decision takes a nearer
    sure step, else the recommended γ (the candidates table's 'best expected')."""
    farther = getattr(rec, "expected_best_gamma", None)
    return rec.recommended_gamma if farther is None else farther


def dashboard_wording(message: str, end_mode: str | None = None) -> str:
    """A pipeline message as the dashboard says it: its controls instead of the CLI's flags
    ("widen --window" → "choose a longer Window in the sidebar"); a window that ends now
    and finds nothing also says that it could end at the newest scrape instead."""
    for cli, page in DASHBOARD_WORDING:
        message = message.replace(cli, page)
    if end_mode == END_AT_NOW and "no drafts in the last" in message:
        message += f", or set 'Window ends at' to {END_AT_NEWEST}"
    return message


@dataclass(frozen=True)
class RouteView:
    """One route: its tuning (None when it cannot be tuned), or the one-line reason why not."""

    route: str
    targets: tuple[str, ...]
    tuning: RouteTuning | None
    error: str | None
    history: list[CurveSlice] = field(default_factory=list)
    target_status: list[TargetStatus] = field(default_factory=list)

    @property
    def newest_ok_time(self) -> float | None:
        """The newest successful scrape of any of the route's targets (freshness)."""
        times = [s.last_ok_time for s in self.target_status if s.last_ok_time is not None]
        return max(times) if times else None

    @property
    def failing(self) -> list[TargetStatus]:
        return [s for s in self.target_status if s.failing_since is not None]

    @property
    def on_specialized_path(self) -> bool:
        """Whether the route's deployment runs decode_backend latency_specialized (only there
        does a share of its steps take the specialized path)."""
        return self.tuning is not None and self.tuning.deployment.decode_backend == "latency_specialized"

    @property
    def specialized(self) -> Eligibility | None:
        """The share of steps the specialized decode path can take at the deployed γ, as the
        recommendation priced it (None off that path, or without vllm:iteration_tokens data)."""
        if not self.on_specialized_path:
            return None
        return self.tuning.recommendation.specialized_eligibility


@dataclass(frozen=True)
class FleetView:
    """Everything the pages show, for one window."""

    config_path: str | None
    store_path: str
    state: str                       # "ok" | "no-config" | "config-error" | "missing" | "empty" | "store-error"
    message: str | None              # one line saying why there is nothing to show (state != ok)
    config: Config | None
    window_s: float
    window_end: float | None         # None: nothing stored, no window
    end_mode: str
    latest_time: float | None        # newest scrape cycle in the store
    read_time: float                 # wall clock when it was read
    routes: dict[str, RouteView] = field(default_factory=dict)
    # routes that share one deployment (deployment = "NAME"): the joint γ, or why it is not
    # priced (a route without a tuning, routes at different γ)
    deployments: dict[str, DeploymentTuning | str] = field(default_factory=dict)

    @property
    def window_start(self) -> float | None:
        return None if self.window_end is None else self.window_end - self.window_s

    @property
    def all_target_status(self) -> list[TargetStatus]:
        seen: dict[str, TargetStatus] = {}
        for rv in self.routes.values():
            for s in rv.target_status:
                seen.setdefault(s.target, s)
        return list(seen.values())

    @property
    def tuned(self) -> dict[str, RouteView]:
        return {name: rv for name, rv in self.routes.items() if rv.tuning is not None}

    @property
    def collect_interval_s(self) -> float:
        """The config's [collect] interval: what a target's last scrape is judged stale against."""
        from specdec.config import Config  # imported for typing only at the top

        return (self.config or Config).collect_interval_s  # no config: the class's default


def app_args(argv: list[str]):
    """The app's --config / --db (after streamlit's `--`; unknown arguments, a test
    runner's, are ignored); without them the environment's SPECDEC_CONFIG and SPECDEC_DB."""
    import argparse

    p = argparse.ArgumentParser(prog="specdec dashboard", add_help=False, allow_abbrev=False)
    p.add_argument("--config", default=os.environ.get("SPECDEC_CONFIG") or None)
    p.add_argument("--db", default=os.environ.get("SPECDEC_DB") or None)
    args, _ = p.parse_known_args(argv)
    return args


def resolve_store_path(config: Config | None, db: str | None) -> Path:
    """--db, else the config's [store] path, else ./specdec.db (specdec.config's rule)."""
    if config is not None:
        return config.store_path_for(db)
    from specdec.config import DEFAULT_STORE_NAME

    return Path(db or DEFAULT_STORE_NAME)


def load_fleet(config_path: str | None, db: str | None, *, window: str | float = DEFAULT_WINDOW,
               end_mode: str = END_AT_NEWEST, now: float | None = None,
               history_slices: int = HISTORY_SLICES, n_resamples: int = 1000) -> FleetView:
    """Read the config and the store and tune every configured route over the window.

    window: seconds or a duration ("1h"); end_mode: END_AT_NEWEST or END_AT_NOW.
    Bad window or end_mode → ValueError (one line naming it). A missing or broken config
    or store is not an exception: the FleetView's state and message say what is wrong.
    history_slices > 0 also fills each RouteView's history (the dashboard asks for it per
    route, on the curves page only: route_history).
    """
    import sqlite3

    from acceptance.store import StoreError
    from specdec.config import ConfigError, load_config, parse_duration

    window_s = parse_duration(window, what="window")
    if end_mode not in END_CHOICES:
        raise InputError(f"window end: must be one of {', '.join(END_CHOICES)}, got {end_mode!r}")
    read_time = time.time() if now is None else now

    def empty(state: str, message: str, config=None, store_path="", latest=None) -> FleetView:
        return FleetView(config_path, str(store_path), state, message, config, window_s, None, end_mode,
                         latest, read_time)

    config = None
    try:
        config = load_config(config_path)
    except ConfigError as e:
        return empty("config-error", str(e).splitlines()[0], store_path=db or "")
    store_path = resolve_store_path(config, db)
    if config.path is None and not config_path:
        note = "no config (./specdec.toml not found; pass --config): no routes to show"
        return empty("no-config", note, config, store_path)
    if not store_path.exists():
        return empty("missing", f"store {store_path} does not exist yet: run `specdec collect"
                     f"{' --config ' + str(config.path) if config.path else ''}` to fill it", config, store_path)
    if store_path.stat().st_size == 0:
        return empty("empty", f"store {store_path} is empty: run `specdec collect` (two scrapes at least)",
                     config, store_path)

    last_error: Exception | None = None
    for _ in range(READ_ATTEMPTS):
        try:
            return _read(config, config_path, store_path, window_s, end_mode, read_time, history_slices, n_resamples)
        except StoreError as e:
            return empty("store-error", str(e).splitlines()[0], config, store_path)
        except KeyError as e:  # a segment or engine written after the store was opened
            last_error = e
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                return empty("store-error", f"store {store_path} cannot be read: {e}", config, store_path)
            last_error = e
    return empty("store-error", f"store {store_path} kept changing while being read: {last_error}",
                 config, store_path)


def _read(config: Config, config_path, store_path: Path, window_s: float, end_mode: str, read_time: float,
          history_slices: int, n_resamples: int) -> FleetView:
    from acceptance.store import Store
    from specdec.config import ConfigError
    from specdec.pipeline import NoDataError, tune_route

    store = Store.open(store_path, reading=True)  # no retention: the dashboard never deletes anything
    try:
        with store.read_snapshot():  # one read snapshot (WAL) for everything below
            latest = store.latest_time()
            if latest is None:
                return FleetView(config_path, str(store_path), "empty",
                                 f"store {store_path} holds no scrapes yet: run `specdec collect` (two scrapes at least)",
                                 config, window_s, None, end_mode, None, read_time)
            end = latest if end_mode == END_AT_NEWEST else read_time
            routes: dict[str, RouteView] = {}
            for name, rc in config.routes.items():
                status = store.targets_status(rc.targets)
                try:
                    tuning = tune_route(config, name, store=store, window_s=window_s, now=end, n_resamples=n_resamples)
                except (NoDataError, ConfigError, ValueError) as e:
                    routes[name] = RouteView(name, rc.targets, None, dashboard_wording(str(e).splitlines()[0], end_mode),
                                             [], status)
                    continue
                history = route_history(tuning, history_slices) if history_slices else []
                routes[name] = RouteView(name, rc.targets, tuning, None, history, status)
    finally:
        store.close()
    return FleetView(config_path, str(store_path), "ok", None, config, window_s, end, end_mode, latest,
                     read_time, routes, shared_deployments(config, routes))


def shared_deployments(config: Config, routes: dict[str, RouteView]) -> dict[str, DeploymentTuning | str]:
    """Each shared deployment priced from its routes' tunings (specdec.deployment_tuning), or
    the one line saying why it cannot be."""
    from model.deployment import ModelInputError
    from specdec.deployment_tuning import priced_together

    out: dict[str, DeploymentTuning | str] = {}
    for name, members in config.shared_deployments().items():
        untuned = [r for r in members if routes[r].tuning is None]
        if untuned:
            out[name] = f"deployment {name}: route {untuned[0]} has no tuning in this window ({routes[untuned[0]].error})"
            continue
        try:
            out[name] = priced_together(name, [routes[r].tuning for r in members])
        except ModelInputError as e:
            out[name] = str(e).splitlines()[0]
    return out


def route_history(tuning: RouteTuning, n_slices: int = HISTORY_SLICES) -> list[CurveSlice]:
    """How the route's curve moved over the window: acceptance.curve_history.curve_history over
    ``n_slices`` slices ([] for a window without one)."""
    from acceptance.curve_history import curve_history

    return curve_history(tuning.window, n_slices=n_slices) if tuning.window is not None else []


def store_signature(store_path: str | Path, config_path: str | Path | None = None) -> tuple:
    """Changes whenever the store file (or its WAL), or the config, is written: the cache
    key of a read."""
    out = []
    paths = [Path(store_path), Path(f"{store_path}-wal")] + ([Path(config_path)] if config_path else [])
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def age_text(then: float | None, now: float) -> str:
    """'12 s ago', '3.5 h ago', 'never'; 'in the future' for a clock ahead of this one."""
    if then is None or not math.isfinite(then):
        return "never"
    dt = now - then
    ahead = dt < 0
    dt = abs(dt)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if dt >= size:
            text = f"{dt / size:.1f} {unit}"
            break
    else:
        text = f"{dt:.0f} s"
    return f"{text} ahead of this clock" if ahead else f"{text} ago"
