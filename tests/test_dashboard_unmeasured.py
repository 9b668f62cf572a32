"""The dashboard shows what was measured and marks what was not: drift "not tested" (and
why) on every page, "no interval" where none was computed, targets "stale" when their last
scrape is older than a few collect intervals (never green then), the γ a decision deploys
(a keep: the deployed one, the better-looking γ named as such), and the specialized share
of steps only on routes that run decode_backend latency_specialized.

Each case is a small store built here (Store.bulk_load_history) whose window triggers it:
a window of a few scrapes (drift not tested; two intervals: no interval), scrapes that
stopped 20 minutes ago, a min_gain that keeps the deployed γ though another looks better.
The pages are rendered with Streamlit's AppTest and their text is checked.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from acceptance.estimates import estimate_from_survival
from acceptance.route_estimate import MIN_ROWS_FOR_DRIFT
from acceptance.store import Store
from dashboard import data, text
from specdec.config import load_config
from specdec.pipeline import tune_route

from dashboard_fixtures import drafts_history

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")
INTERVAL_S = 15.0
SURVIVAL = (0.8, 0.6, 0.45)
T_END = 1_790_000_000.0  # the stores' newest scrape; the pages' clock is set against it
DEPLOYMENT = ('[deployment]\nmethod = "dspark"\ndraft_cost = 0.10\ncost_profile = "flat"\n'
              'baseline_tokens_per_second = 118\n')


def build_store(where: Path, routes: dict[str, int], *, deployment: str = "", collect: str = "",
                route_keys: dict[str, str] | None = None, flat_tail: int = 0, end: float = T_END) -> Path:
    """A config and store: route NAME with two targets, each one engine at γ 3 scraped
    ``routes[NAME]`` times every 15 s up to ``end``; ``flat_tail``: its counters stand still
    over the last scrapes (no drafts there). Returns the config's path."""
    where.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    tables = []
    with Store.open(where / "specdec.db") as store:
        for i, (route, scrapes) in enumerate(routes.items()):
            times = end - INTERVAL_S * np.arange(scrapes)[::-1]
            targets = [f"http://10.{i}.0.{j}:8000/metrics" for j in (1, 2)]
            for target in targets:
                cum = drafts_history(rng, scrapes, SURVIVAL, SURVIVAL, None)
                if flat_tail:
                    cum[-flat_tail:] = cum[-flat_tail - 1]
                store.bulk_load_history(target, "kimi-k3", "0", times, cum,
                                        running=rng.integers(1, 9, scrapes).astype(float))
            tables.append(f"[routes.{route}]\ntargets = {json.dumps(targets)}\n"
                          + (route_keys or {}).get(route, ""))
    config = where / "specdec.toml"
    config.write_text('[store]\npath = "specdec.db"\n\n' + collect + DEPLOYMENT + deployment + "\n"
                      + "\n".join(tables), encoding="utf-8")
    return config


@pytest.fixture
def clock(monkeypatch):
    """Sets the wall clock the pages judge ages by (dashboard.data.clock_now)."""
    def set_to(t: float) -> None:
        monkeypatch.setattr(data, "clock_now", lambda: t)
    set_to(T_END + 5.0)
    return set_to


def run_page(monkeypatch, config: Path, page: str, **controls) -> AppTest:
    monkeypatch.setenv("SPECDEC_CONFIG", str(config))
    monkeypatch.delenv("SPECDEC_DB", raising=False)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = page
    at.run()
    for key, value in controls.items():
        at.selectbox(key=key).set_value(value)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def texts(at: AppTest) -> list[str]:
    out = [e.value for kind in ("markdown", "caption", "info", "warning", "success") for e in getattr(at, kind)]
    return out + [f"{m.label}: {m.value}" for m in at.metric]


def plotly_values(y) -> np.ndarray:
    """Plotly's JSON array: a list, or {'dtype', 'bdata'} (base64 of the raw array)."""
    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])
    return np.asarray(y, dtype=float)


def chart_titles(at: AppTest) -> list[str]:
    return [json.loads(el.proto.spec)["layout"]["title"]["text"] for el in at.get("plotly_chart")]


def tuned(config: Path, route: str):
    cfg = load_config(config)
    with Store.open(cfg.store_path) as store:
        return tune_route(cfg, route, store=store, window_s=3600.0, now=store.latest_time())


# ----------------------------------------------------------------------------- drift not tested


def test_drift_not_tested_reads_not_tested_on_every_page(monkeypatch, tmp_path, clock):
    """A window of 5 intervals is too short for the drift test (acceptance.route_estimate
    tests 8 or more): the overview said 'no' where the curves page said 'not tested'."""
    config = build_store(tmp_path, {"short": 6})
    assert tuned(config, "short").drift is None
    at = run_page(monkeypatch, config, "overview")
    row = at.dataframe[0].value.set_index("route").loc["short"]
    assert row["drift"] == f"not tested (< {MIN_ROWS_FOR_DRIFT} intervals)"
    why = f"Drift: not tested — the window holds 5 intervals, the test needs {MIN_ROWS_FOR_DRIFT} or more."
    assert why in texts(run_page(monkeypatch, config, "curves"))
    assert why in texts(run_page(monkeypatch, config, "recommendation"))


def test_drift_test_that_could_not_run_is_not_tested(monkeypatch, tmp_path, clock):
    """Enough intervals, but none with drafts in the window's newest quarter: detect_drift
    returns a Drift that did not test anything (no interval of its difference). It read
    'no'."""
    config = build_store(tmp_path, {"idle": 12}, flat_tail=4)
    at = run_page(monkeypatch, config, "overview")
    assert at.dataframe[0].value.set_index("route").loc["idle", "drift"] == "not tested (too few drafts)"
    curves = texts(run_page(monkeypatch, config, "curves"))
    assert "Drift: not tested — too few intervals with drafts (0 recent, 7 earlier; need 3 each)." in curves
    drift = tuned(config, "idle").drift
    assert drift is not None and not drift.detected and not drift.tested


def test_a_tested_window_still_reads_no(monkeypatch, tmp_path, clock):
    config = build_store(tmp_path, {"steady": 40})
    at = run_page(monkeypatch, config, "overview")
    assert at.dataframe[0].value.set_index("route").loc["steady", "drift"] == "no"
    drift = tuned(config, "steady").drift
    assert any(c.startswith(f"Drift: {drift.message}") for c in texts(run_page(monkeypatch, config, "curves")))
    assert drift.tested and not drift.detected


# ----------------------------------------------------------------------------- no interval


def test_no_interval_is_said_where_none_was_computed(monkeypatch, tmp_path, clock):
    """Three scrapes are two intervals: too few to resample, so the estimate has values and
    no interval. The overview said 'Brackets: 90% intervals' and titled its charts '(90%
    interval)'; beside a route with intervals, each is named for what it has."""
    config = build_store(tmp_path, {"tiny": 3, "long": 60})
    tiny, long = tuned(config, "tiny"), tuned(config, "long")
    assert not tiny.estimate.has_interval and long.estimate.has_interval
    at = run_page(monkeypatch, config, "overview")
    table = at.dataframe[0].value.set_index("route")
    al = tiny.estimate.mean_acceptance_length.value
    assert table.loc["tiny", "mean acceptance length"] == f"{al:.3f} (no interval)"
    assert table.loc["long", "mean acceptance length"] == text.estimate(long.estimate.mean_acceptance_length, 3)
    assert "[" in table.loc["long", "mean acceptance length"]
    captions = texts(at)
    assert any(c.startswith("Brackets: 90% intervals; none for tiny. Route tiny: only 2 scrape intervals with drafts "
                            "in the window: too few to resample, no interval.") for c in captions), captions
    assert not any(c.startswith("Brackets: 90% intervals.") for c in captions)
    assert chart_titles(at) == ["Mean acceptance length (90% interval; none for tiny)",
                                "Speedup at the γ to deploy (90% interval; none for tiny)"]
    decisions = at.dataframe[1].value.set_index("route")
    assert decisions.loc["tiny", "speedup at γ to deploy"].endswith("× (no interval)")
    # tiny's bar has no error bar at all (a zero-length one, caps drawn, read as an exact value)
    al_bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert al_bars["x"] == ["tiny", "long"]
    up, down = (plotly_values(al_bars["error_y"][arm]) for arm in ("array", "arrayminus"))
    assert np.isnan(up[0]) and np.isnan(down[0])
    assert up[1] > 0 and down[1] > 0

    curves = run_page(monkeypatch, config, "curves")
    said = texts(curves)
    assert any("Bands: 90% intervals; none for tiny. Route tiny: only 2 scrape intervals" in c for c in said), said
    assert any(c.startswith("**tiny** — ") and c.endswith("(no intervals: too few intervals with drafts to resample)")
               for c in said), said
    positions = curves.dataframe[0].value
    tiny_rows = positions[positions["route"] == "tiny"]
    assert all(cell.endswith("(no interval)") for cell in tiny_rows["survival a_k"])

    rec = run_page(monkeypatch, config, "recommendation", rec_route="tiny")
    assert any("; no intervals (only 2 scrape intervals with drafts in the window: too few to resample, no interval);"
               in c for c in texts(rec)), texts(rec)
    assert all(cell.endswith("(no interval)") for cell in rec.dataframe[0].value["speedup"][1:])
    assert any("(priced at the mean of 4 guesses of how acceptance goes on past it; no interval)" in c
               for c in texts(rec)), texts(rec)

    whatif = run_page(monkeypatch, config, "whatif", whatif_route="tiny")
    gamma = whatif.slider(key="whatif_gamma").value
    assert [m.label for m in whatif.metric][0] == f"Speedup at γ={gamma}"  # no "(90%)": there is no interval
    assert "no interval" in [c.value for c in whatif.caption]
    assert chart_titles(whatif)[1] == ("Projected speedup per γ (no intervals; grey: refused, hatched: "
                                       "extrapolated)")


def test_a_typed_curve_reads_no_interval():
    """A curve typed in without drafts (tune-gamma --survival) has no interval: its numbers
    read 'no interval', and a chart of it draws no band."""
    from dashboard import charts

    typed = estimate_from_survival([0.8, 0.6, 0.45])
    assert text.estimate(typed.mean_acceptance_length) == "2.850 (no interval)"
    assert text.speedup(2.5, None, None) == "2.500× (no interval)"
    assert text.speedup(2.5) == "2.500×"  # a value shown alone, its interval said beside it
    assert text.gain(0.05) == "+5.0% (no interval)"
    fig = charts.curve_figure([("typed", typed.survival)], title="t", y_title="a_k", level=typed.level)
    assert [tr.name for tr in fig.data] == ["typed"]
    assert text.intervals_said(0.9, ["typed"], 1) == "no interval"
    assert text.intervals_said(0.9, [], 2) == "90% interval"


# ----------------------------------------------------------------------------- stale targets


def test_targets_whose_last_scrape_is_old_are_stale_not_green(monkeypatch, tmp_path, clock):
    """The fleet gone and the collector stopped 20 minutes ago: the overview said 'All 4
    targets answered their last scrape' in green."""
    config = build_store(tmp_path, {"structured": 40, "open": 40})
    clock(T_END + 1200.0)
    at = run_page(monkeypatch, config, "overview")
    assert not at.success
    (stale,) = [w.value for w in at.warning if "stale" in w.value]
    assert stale.startswith("4 of 4 targets stale (more than 3 collect intervals (15s) without a good scrape): "
                            "http://10.0.0.1:8000/metrics: last scrape 20.0 min ago; ")
    assert "Is `specdec collect` running" in stale
    targets = at.dataframe[2].value.set_index("target")
    assert set(targets["age"]) == {"stale: 20.0 min ago"}
    assert set(at.dataframe[0].value["newest scrape"]) == {"stale: 20.0 min ago"}
    assert at.caption[0].value.endswith("newest scrape 20.0 min ago — stale: more than 3 collect intervals (15s)).")
    clock(T_END + 5.0)  # just scraped: green
    at = run_page(monkeypatch, config, "overview")
    assert [s.value for s in at.success] == [
        "All 4 targets answered their last scrape (the oldest 5 s ago; collect interval 15s)."]


def test_staleness_is_judged_against_the_configured_collect_interval(monkeypatch, tmp_path, clock):
    """Scraped every 10 minutes, a scrape 20 minutes old is two intervals: not stale."""
    config = build_store(tmp_path, {"hourly": 40}, collect='[collect]\ninterval = "10m"\n\n')
    clock(T_END + 1200.0)
    at = run_page(monkeypatch, config, "overview")
    assert [s.value for s in at.success] == [
        "All 2 targets answered their last scrape (the oldest 20.0 min ago; collect interval 10m)."]
    clock(T_END + 1900.0)
    at = run_page(monkeypatch, config, "overview")
    assert not at.success
    assert any(w.value.startswith("2 of 2 targets stale (more than 3 collect intervals (10m)") for w in at.warning)


# ----------------------------------------------------------------------------- what a decision deploys


def test_a_keep_shows_the_deployed_gamma_and_names_the_better_looking_one(monkeypatch, tmp_path, clock):
    """min_gain 60%: γ 7 looks better than the deployed γ 3 but not by enough, so the fleet
    keeps γ 3. The overview's row said 'recommended γ 7 | keep'."""
    config = build_store(tmp_path, {"kept": 200}, deployment="min_gain = 0.6\n")
    rec = tuned(config, "kept").recommendation
    assert (rec.decision, rec.deployed_gamma, rec.recommended_gamma) == ("keep", 3, 7)
    at = run_page(monkeypatch, config, "overview")
    row = at.dataframe[1].value.set_index("route").loc["kept"]
    assert row["γ to deploy"] == 3
    assert row["decision"] == "keep γ=3 (best γ=7, not sure enough to change)"
    kept = rec.candidates[3]
    assert row["speedup at γ to deploy"] == text.speedup(kept.speedup, kept.speedup_low, kept.speedup_high)
    assert "Speedup at the γ to deploy (90% interval)" in chart_titles(at)
    speedup_bars = json.loads(at.get("plotly_chart")[1].proto.spec)["data"][0]
    assert speedup_bars["x"] == ["kept (γ=3)"]

    page = run_page(monkeypatch, config, "recommendation")
    table = page.dataframe[0].value.set_index("γ")
    assert list(table.index[table["deploy"]]) == [3]
    assert list(table.index[table["best expected"]]) == [7]
    assert any(c.startswith("Keep γ=3 (γ=7 looks better but not surely enough") for c in texts(page))

    whatif = run_page(monkeypatch, config, "whatif")
    metrics = {m.label: m.value for m in whatif.metric}
    assert metrics["γ to deploy as configured"] == "3 (keep)"
    assert metrics["γ to deploy under these figures"] == "3 (keep)"
    assert "Keep γ=3 (best γ=7, not sure enough to change)." in [c.value for c in whatif.caption]


def test_a_move_past_the_measured_gamma_shows_as_a_probe_and_deploys_nothing_new(monkeypatch, tmp_path, clock):
    """γ 7 is sure on the tail models but lies past the measured γ 3: the overview says probe,
    and the γ to deploy stays the fleet's (a change there would rest on no measured point).
    The demo's open route, whose change (7 → 3) lies within its measured γ, shows a change
    (tests/test_dashboard_browser.py)."""
    config = build_store(tmp_path, {"moved": 200})
    row = run_page(monkeypatch, config, "overview").dataframe[1].value.set_index("route").loc["moved"]
    assert (row["decision"], row["γ to deploy"]) == ("probe γ=7 on 1 engine(s), γ=3 on the others", 3)
    rec = tuned(config, "moved").recommendation
    assert rec.decision == "probe" and rec.gamma_to_deploy == 3 and rec.probe.gamma == 7


# ----------------------------------------------------------------------------- specialized share


def test_specialized_share_only_for_routes_on_the_specialized_path(monkeypatch, tmp_path, clock):
    """The column appeared on every deployment ('0% on auto (…)'): now only where a route
    runs decode_backend latency_specialized, and '—' with the backend on the others."""
    plain = build_store(tmp_path / "plain", {"auto": 40})
    at = run_page(monkeypatch, plain, "overview")
    assert "specialized share of steps" not in at.dataframe[1].value.columns
    mixed = build_store(tmp_path / "mixed", {"auto": 40, "fast": 40},
                        route_keys={"fast": 'decode_backend = "latency_specialized"\n'})
    at = run_page(monkeypatch, mixed, "overview")
    decisions = at.dataframe[1].value.set_index("route")
    share = tuned(mixed, "fast").recommendation.specialized_eligibility.share
    assert decisions.loc["fast", "specialized share of steps"] == text.percent(share)
    assert decisions.loc["auto", "specialized share of steps"] == "—"
    assert any("Specialized share of steps: on the routes whose decode_backend is latency_specialized (— on the "
               "others" in c for c in texts(at))
