"""The dashboard's pages under Streamlit's AppTest, against fixture stores.

Every number the pages show is checked against the package function that computes it
(tune_route, curve_history, what_if, seeds_table, implied_p), called here directly.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from acceptance.store import Store
from dashboard import data, text
from specdec import dashboard_launch as launch
from dashboard.seeds import SEEDS_BASELINE_TPS
from dashboard.views.whatif import BatchMixError, parse_batch_mix
from model.speedup import implied_p, seeds_table
from specdec.config import load_config
from acceptance.curve_history import curve_history
from specdec.pipeline import tune_route, what_if
from specdec.report import candidate_notes, tuning_to_dict

from dashboard_fixtures import FAILING_ERROR, build_drift_store, live_cycle, shared_demo_config

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")
PAGES = ("overview", "curves", "whatif", "recommendation")


@pytest.fixture(scope="module")
def demo_config(tmp_path_factory) -> Path:
    return shared_demo_config(tmp_path_factory)


@pytest.fixture(scope="module")
def drift_config(tmp_path_factory) -> Path:
    return build_drift_store(tmp_path_factory.mktemp("drift"))


def tuned(config_path: Path, route: str, window_s: float = 3600.0):
    """The route's tuning as tune-gamma computes it, window ending at the newest scrape."""
    config = load_config(config_path)
    with Store.open(config.store_path) as store:
        return tune_route(config, route, store=store, window_s=window_s, now=store.latest_time())


def run_page(monkeypatch, config: Path | str | None, page: str, *, db: str | None = None) -> AppTest:
    if config is None:
        monkeypatch.delenv("SPECDEC_CONFIG", raising=False)
    else:
        monkeypatch.setenv("SPECDEC_CONFIG", str(config))
    if db is None:
        monkeypatch.delenv("SPECDEC_DB", raising=False)
    else:
        monkeypatch.setenv("SPECDEC_DB", db)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = page
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def figures(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def values(y) -> np.ndarray:
    """Plotly's JSON array: a list, or {'dtype', 'bdata'} (base64 of the raw array)."""
    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])
    return np.asarray(y, dtype=float)


def trace(fig: dict, name: str) -> dict:
    found = [t for t in fig["data"] if t.get("name") == name]
    assert found, f"no trace {name!r} in {[t.get('name') for t in fig['data']]}"
    return found[0]


def route_table(at: AppTest):
    """The overview's two route tables (acceptance, decision) joined on the route."""
    acceptance, decisions = (at.dataframe[i].value.set_index("route") for i in (0, 1))
    assert list(acceptance.index) == list(decisions.index)
    return acceptance.join(decisions)


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "success") for e in getattr(at, kind)]
    parts += [str(m.value) + " " + m.label for m in at.metric]
    return "\n".join(parts)


# ----------------------------------------------------------------------------- pages on the demo store


def just_scraped(monkeypatch, config: Path) -> None:
    """The pages' clock set 5 s after the store's newest scrape (the shared demo store is
    built once per session: by wall clock its targets go stale after 3 collect intervals)."""
    with Store.open(load_config(config).store_path) as store:
        latest = store.latest_time()
    monkeypatch.setattr(data, "clock_now", lambda: latest + 5.0)


def test_overview_shows_each_routes_tuning(monkeypatch, demo_config):
    just_scraped(monkeypatch, demo_config)
    at = run_page(monkeypatch, demo_config, "overview")
    table = route_table(at)
    assert set(table.index) == {"structured", "open"}
    for route in ("structured", "open"):
        t = tuned(demo_config, route)
        row = table.loc[route]
        e, rec = t.estimate, t.recommendation
        assert row["γ deployed"] == e.gamma
        assert row["mean acceptance length"] == text.estimate(e.mean_acceptance_length, 3)
        assert row["equivalent p"] == text.estimate(e.equivalent_p, 3)
        assert row["γ to deploy"] == rec.gamma_to_deploy
        assert row["decision"].startswith(rec.decision)
        deploys = rec.candidates[rec.gamma_to_deploy]
        assert row["speedup at γ to deploy"] == text.speedup(deploys.speedup, deploys.speedup_low, deploys.speedup_high)
        deployed = rec.candidates[rec.deployed_gamma]
        assert row["speedup at deployed γ"] == text.speedup(deployed.speedup, deployed.speedup_low, deployed.speedup_high)
        assert row["failing targets"] == "0 of 2"
        assert row["newest scrape"] == "5 s ago"
    # the demo's `open` route is deployed above its best γ: the page says change, to that γ
    rec = tuned(demo_config, "open").recommendation
    assert table.loc["open", "decision"] == f"change γ 7 → {rec.recommended_gamma}"
    assert table.loc["open", "γ to deploy"] == rec.recommended_gamma
    assert "specialized share of steps" not in table.columns  # the demo runs decode_backend auto
    figs = figures(at)
    assert len(figs) == 2
    al_bar = figs[0]["data"][0]
    expected = [tuned(demo_config, r).estimate.mean_acceptance_length.value for r in ("structured", "open")]
    np.testing.assert_allclose(values(al_bar["y"]), expected)
    assert "All 4 targets answered their last scrape (the oldest 5 s ago; collect interval 15s)." in texts(at)


def test_overview_says_gamma_changed_inside_the_window(monkeypatch, demo_config):
    # the demo's structured-b engine 0 goes 7 → 5 and stays: a rolling change, not an older segment
    at = run_page(monkeypatch, demo_config, "overview")
    notes = [i.value for i in at.info if "rolling change" in i.value]
    assert len(notes) == 1
    assert notes[0].startswith("Route structured: rolling change: γ 7 on 2 engines, γ 5 on 1 engine since ")
    assert "older" not in notes[0]
    t = tuned(demo_config, "structured")
    assert t.window.newest_segment.gamma == 7  # the current segment with the most drafts is the deployed γ
    assert "Estimates describe γ=7, the current segment with the most drafts" in notes[0]
    from dashboard.views.curves import history_series

    view = data.RouteView("structured", (), t, None, history=curve_history(t.window, n_slices=data.HISTORY_SLICES))
    names = [name for name, *_ in history_series(view)]
    assert "structured γ=7" in names
    assert "structured γ=5 (current on other engines, not mixed in)" in names


def test_curves_page_draws_the_estimates_with_bands(monkeypatch, demo_config):
    at = run_page(monkeypatch, demo_config, "curves")
    figs = figures(at)
    survival, conditional = figs[0], figs[1]
    for route in ("structured", "open"):
        e = tuned(demo_config, route).estimate
        np.testing.assert_allclose(values(trace(survival, route)["y"]), e.survival.value)
        band = trace(survival, f"{route} 90% interval")
        np.testing.assert_allclose(values(band["y"]), e.survival.low)
        np.testing.assert_allclose(values(trace(conditional, route)["y"]), e.conditional.value)
    # one history chart and one slices chart per route, the older γ segment drawn as its own line
    titles = [f["layout"]["title"]["text"] for f in figs]
    assert "structured: acceptance over time" in titles
    assert "open: acceptance over time" in titles
    history = figs[titles.index("structured: acceptance over time")]
    names = [tr["name"] for tr in history["data"]]
    assert "structured γ=7" in names
    assert any(n.startswith("structured γ=5") for n in names)
    t = tuned(demo_config, "structured")
    slices = [s for s in curve_history(t.window, n_slices=data.HISTORY_SLICES) if s.gamma == 5]
    np.testing.assert_allclose(values(trace(history, names[[n.startswith("structured γ=5") for n in names].index(True)])["y"]),
                               [s.estimate.mean_acceptance_length.value for s in slices])


def test_whatif_page_follows_the_controls(monkeypatch, demo_config):
    at = run_page(monkeypatch, demo_config, "whatif")
    assert at.selectbox(key="whatif_route").value == "structured"
    at.slider(key="whatif_gamma").set_value(7)
    at.number_input(key="whatif_draft_cost").set_value(0.10)
    at.selectbox(key="whatif_profile").set_value("flat")
    at.selectbox(key="whatif_backend").set_value("latency_specialized")
    at.radio(key="whatif_mix").set_value("batch 1 only")
    at.run()
    assert not at.exception
    assert not at.error
    seeds, route_fig = figures(at)
    line = seeds["data"][0]
    rows = seeds_table(7, 0.10, list(values(line["x"])), method="dspark")
    np.testing.assert_allclose(values(line["y"]), [r.speedup for r in rows])
    published = trace(seeds, "seeds' published points")
    p370 = implied_p(370 / SEEDS_BASELINE_TPS, 7, 0.10).p
    assert any(abs(p - p370) < 1e-12 for p in values(published["x"]))
    assert abs(p370 - 0.7347) < 5e-5  # the seeds' inversion, on the chart
    t = tuned(demo_config, "structured")
    _, rec = what_if(t, {"method": "dspark", "draft_cost": 0.10, "cost_profile": "flat",
                         "decode_backend": "latency_specialized"}, batch_time_shares={1: 1.0})
    bars = trace(route_fig, "what-if")
    np.testing.assert_allclose(values(bars["y"]), [c.speedup for c in rec.candidates])
    chosen = rec.candidates[7]
    metric = [m for m in at.metric if m.label.startswith("Speedup at γ=7")][0]
    # the value in the metric, its interval under it (together they were cut off at 1400 px)
    assert metric.value == text.speedup(chosen.speedup)
    assert f"90% interval {text.interval(chosen.speedup_low, chosen.speedup_high, 3)}" in [c.value for c in at.caption]
    # γ = 8 is refused on the specialized path (and by DSpark's block): the page says why
    at.slider(key="whatif_gamma").set_value(8)
    at.run()
    assert any("cannot be deployed" in w.value and "γ ≤ 7" in w.value for w in at.warning)


def test_whatif_bad_custom_mix_is_a_warning(monkeypatch, demo_config):
    at = run_page(monkeypatch, demo_config, "whatif")
    at.radio(key="whatif_mix").set_value("custom")
    at.run()
    at.text_input(key="whatif_mix_text").set_value("8:lots")
    at.run()
    assert not at.exception
    assert not at.error
    assert any("batch mix entry '8:lots'" in w.value for w in at.warning)


def test_recommendation_page_gives_the_config_to_copy(monkeypatch, demo_config):
    at = run_page(monkeypatch, demo_config, "recommendation")
    at.selectbox(key="rec_route").set_value("open")
    at.run()
    rec = tuned(demo_config, "open").recommendation
    table = at.dataframe[0].value
    assert list(table["γ"]) == [c.gamma for c in rec.candidates]
    assert list(table["speedup"]) == [text.speedup(c.speedup, c.speedup_low, c.speedup_high) for c in rec.candidates]
    assert list(table["allowed"]) == [c.allowed for c in rec.candidates]
    # the note column is the console's, by one rule (specdec.report.candidate_notes)
    notes = candidate_notes(tuning_to_dict(tuned(demo_config, "open")))
    assert list(table["note"]) == [", ".join(notes[c.gamma]) for c in rec.candidates]
    assert table.set_index("γ").loc[rec.deployed_gamma, "note"].startswith("deployed")
    codes = [c.value for c in at.code]
    assert json.dumps(rec.vllm_speculative_config, indent=2) in codes
    assert rec.vllm_command_line in codes
    assert json.dumps(rec.replay_config, indent=2) in codes
    body = texts(at)
    assert f"Change γ {rec.deployed_gamma} → {rec.recommended_gamma}" in body
    for c in rec.candidates:
        if not c.allowed:
            assert f"γ={c.gamma}: {c.reason}" in body
    assert any("corrupts outputs" in w.value for w in at.warning)
    # where the level comes from (model.anchor): the demo prices with its measured table
    assert rec.anchor.source == "measured table"
    assert "anchor: the measured table's own step times" in [c.value for c in at.caption]
    # the engines' own rate at the deployed γ over the table's plain decode, beside the projection
    measured = rec.deployed_speedup_measured
    assert measured is not None and measured.plain_source == "measured table"
    assert text.sentence(measured.describe()) in [i.value for i in at.info]


# ----------------------------------------------------------------------------- drift, failures, empty


def test_drift_and_failing_target_are_flagged(monkeypatch, drift_config):
    at = run_page(monkeypatch, drift_config, "overview")
    t = tuned(drift_config, "drifting")
    assert t.drift is not None
    assert t.drift.detected
    assert any(w.value == f"Route drifting: drift — {t.drift.message}" for w in at.warning)
    failing = [w.value for w in at.warning if "targets failing" in w.value]
    assert failing
    assert FAILING_ERROR in failing[0]
    assert failing[0].startswith("1 of 4")
    table = route_table(at)
    assert table.loc["drifting", "failing targets"] == "1 of 2"
    assert table.loc["steady", "drift"] == "no"
    assert table.loc["drifting", "drift"] == "yes (below)"
    # the recommendation page gives the window's notes as the console does (here: drift's)
    at = run_page(monkeypatch, drift_config, "recommendation")
    at.selectbox(key="rec_route").set_value("drifting").run()
    assert t.notes and all(text.sentence(f"Note: {n}") in [c.value for c in at.caption] for n in t.notes)
    at = run_page(monkeypatch, drift_config, "curves")
    assert any(w.value == f"Drift flagged on drifting: {t.drift.message}" for w in at.warning)
    history = [f for f in figures(at) if f["layout"]["title"]["text"] == "drifting: acceptance over time"][0]
    assert history["layout"]["shapes"], "the recent part of a drifting route is shaded"


def test_overview_shows_a_shared_deployment_s_joint_gamma_and_splitting_gains(monkeypatch, tmp_path, drift_config):
    # The drift store's two routes named as one deployment: the page shows the joint γ and,
    # per route, its own γ and the gain of splitting it off, as tune-gamma --deployment does.
    from specdec.deployment_tuning import priced_together

    config = tmp_path / "specdec.toml"
    shutil.copy(drift_config.parent / "specdec.db", tmp_path / "specdec.db")
    config.write_text(drift_config.read_text().replace("[routes.steady]\n", '[routes.steady]\ndeployment = "pool"\n')
                      .replace("[routes.drifting]\n", '[routes.drifting]\ndeployment = "pool"\n'))
    at = run_page(monkeypatch, config, "overview")
    assert "Shared deployments" in [h.value for h in at.subheader]
    joint = priced_together("pool", [tuned(config, r) for r in ("steady", "drifting")]).recommendation
    frames = [d.value for d in at.dataframe]
    deployments = next(f for f in frames if "joint γ" in f.columns).set_index("deployment")
    row = deployments.loc["pool"]
    assert row["joint γ"] == joint.gamma_to_deploy  # what the deployment is to run
    assert row["decision"].startswith(joint.decision)
    deploys = {c.gamma: c for c in joint.candidates}[joint.gamma_to_deploy]
    assert row["speedup at joint γ"] == text.speedup(deploys.speedup, deploys.speedup_low, deploys.speedup_high)
    assert row["routes"] == ", ".join(f"{r} ({text.percent(joint.token_shares[r])} of tokens)" for r in joint.routes)
    split = next(f for f in frames if "gain of splitting it off" in f.columns).set_index("route")
    for s in joint.split:
        assert split.loc[s.route, "own γ"] == s.gamma
        assert split.loc[s.route, "gain of splitting it off"] == text.gain(s.gain_of_splitting, s.gain_low, s.gain_high)


def run_ending_now(monkeypatch, config) -> AppTest:
    """The app on ``config`` with the sidebar's window ending now (the drift store is older)."""
    monkeypatch.setenv("SPECDEC_CONFIG", str(config))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.radio(key="end_mode").set_value(data.END_AT_NOW)
    at.run()
    return at


def test_window_ending_now_on_an_old_store_says_there_is_nothing(monkeypatch, drift_config):
    at = run_ending_now(monkeypatch, drift_config)
    assert not at.exception
    assert not at.error
    infos = [i.value for i in at.info]
    assert any(i.startswith("Route steady: route 'steady': no drafts in the last 1h") for i in infos)
    assert any(i.startswith("Route drifting: route 'drifting': no drafts in the last 1h") for i in infos)
    assert not at.get("plotly_chart")


@pytest.mark.parametrize("page", PAGES)
def test_missing_store_is_said_and_not_created(monkeypatch, tmp_path, page):
    config = tmp_path / "specdec.toml"
    config.write_text('[routes.a]\ntargets = ["http://127.0.0.1:9/metrics"]\n', encoding="utf-8")
    at = run_page(monkeypatch, config, page)
    assert any("does not exist yet" in i.value for i in at.info)
    assert not (tmp_path / "specdec.db").exists()


def test_empty_and_broken_stores(monkeypatch, tmp_path):
    config = tmp_path / "specdec.toml"
    config.write_text('[routes.a]\ntargets = ["http://127.0.0.1:9/metrics"]\n', encoding="utf-8")
    Store.open(tmp_path / "specdec.db").close()  # schema, no scrape
    at = run_page(monkeypatch, config, "overview")
    assert any("holds no scrapes yet" in i.value for i in at.info)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 10)
    at = run_page(monkeypatch, config, "curves", db=str(junk))
    assert any("not a specdec store" in w.value for w in at.warning)
    assert junk.read_bytes() == b"not a database at all" * 10  # never touched


def test_no_config_and_broken_config(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    at = run_page(monkeypatch, None, "overview")
    assert any("no config" in i.value for i in at.info)
    bad = tmp_path / "bad.toml"
    bad.write_text("[routes.a]\ntargets = 3\n", encoding="utf-8")
    at = run_page(monkeypatch, bad, "recommendation")
    (warning,) = [w.value for w in at.warning]
    assert "targets must be a list" in warning
    assert "\n" not in warning


def test_pages_while_collect_writes(monkeypatch, tmp_path, demo_config):
    """A writer adds cycles (and a γ change: new segments) while the pages read."""
    live = tmp_path / "live"
    shutil.copytree(demo_config.parent, live)
    config = load_config(live / "specdec.toml")
    target = config.routes["open"].targets[0]
    with Store.open(config.store_path) as store:
        t0 = store.latest_time()
    stop = threading.Event()
    written = []

    def writer():
        with Store.open(config.store_path) as store:
            step = 1
            while not stop.is_set() and step < 400:
                gamma = 4 if step < 40 else 2
                store.write_cycle([live_cycle(target + "?live", t0 + 15.0 * step, step, gamma)])
                written.append(step)
                step += 1

    config_text = (live / "specdec.toml").read_text(encoding="utf-8").replace(
        f'"{target}"', f'"{target}", "{target}?live"', 1)
    (live / "specdec.toml").write_text(config_text, encoding="utf-8")
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        for page in PAGES * 2:
            at = run_page(monkeypatch, live / "specdec.toml", page)
            assert at.get("plotly_chart") or at.dataframe
    finally:
        stop.set()
        thread.join(10)
    assert written, "the writer wrote while the pages read"


# ----------------------------------------------------------------------------- what a first run computes (item 9)


@pytest.fixture
def pipeline_calls(monkeypatch):
    """Counts the pipeline's calls wherever the dashboard reaches them: route name per
    tune_route call, one entry per curve_history / what_if call."""
    import acceptance.curve_history as curve_history
    import specdec.pipeline as pipeline
    from dashboard.views import whatif as whatif_view

    calls: dict[str, list] = {"tune_route": [], "curve_history": [], "what_if": []}
    for name in calls:
        home = curve_history if name == "curve_history" else pipeline
        real = getattr(home, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            calls[_name].append(args[1] if _name == "tune_route" else None)
            return _real(*args, **kwargs)

        monkeypatch.setattr(home, name, counting)
        for module in (data, whatif_view):
            if hasattr(module, name):  # a name imported at module level
                monkeypatch.setattr(module, name, counting)
    return calls


def cold_cache() -> None:
    from dashboard import cache

    cache.clear()


def test_first_overview_run_tunes_each_route_once(monkeypatch, demo_config, pipeline_calls):
    """The overview's first run computes its table — each route tuned once — and nothing
    the page does not show (no curve history, no what-if); other sessions read that from
    the cache, and the curves page adds each route's history once."""
    cold_cache()
    at = run_page(monkeypatch, demo_config, "overview")
    assert set(at.dataframe[0].value["route"]) == {"structured", "open"}
    assert sorted(pipeline_calls["tune_route"]) == ["open", "structured"]
    assert pipeline_calls["curve_history"] == [], "the overview built the curves page's history"
    assert pipeline_calls["what_if"] == []
    run_page(monkeypatch, demo_config, "overview")  # a second session: the same read, cached
    run_page(monkeypatch, demo_config, "recommendation")
    assert sorted(pipeline_calls["tune_route"]) == ["open", "structured"]
    run_page(monkeypatch, demo_config, "curves")
    run_page(monkeypatch, demo_config, "curves")
    assert len(pipeline_calls["curve_history"]) == 2  # once per route, across both sessions
    assert sorted(pipeline_calls["tune_route"]) == ["open", "structured"]


def test_a_write_to_the_store_invalidates_the_cache(monkeypatch, tmp_path, demo_config, pipeline_calls):
    live = tmp_path / "live"
    shutil.copytree(demo_config.parent, live)
    config = live / "specdec.toml"
    cold_cache()
    run_page(monkeypatch, config, "overview")
    assert len(pipeline_calls["tune_route"]) == 2
    store = load_config(config).store_path
    stat = Path(store).stat()
    import os

    os.utime(store, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # what a write does to the key
    run_page(monkeypatch, config, "overview")
    assert len(pipeline_calls["tune_route"]) == 4


def test_server_warm_up_reads_the_first_page_before_any_session(monkeypatch, demo_config, pipeline_calls):
    """dashboard.server's thread: once the server listens, the default view (1h, newest
    scrape) is read into the cache the sessions share — the first visitor's overview
    tunes nothing."""
    from dashboard import server, warm

    cold_cache()
    monkeypatch.setattr(server, "server_listening", lambda host, port: (host, port) == ("127.0.0.1", 1))
    thread = server.start_warm_up(["run", "dashboard/app.py", "--server.port", "1", "--",
                                   "--config", str(demo_config)])
    thread.join(120)
    assert not thread.is_alive()
    assert sorted(pipeline_calls["tune_route"]) == ["open", "structured"]
    at = run_page(monkeypatch, demo_config, "overview")
    assert set(at.dataframe[0].value["route"]) == {"structured", "open"}
    assert sorted(pipeline_calls["tune_route"]) == ["open", "structured"], "the first session read the store again"
    assert warm.DONE.is_set()  # sessions no longer wait
    assert warm.run(str(demo_config), None, ready=lambda: False, ready_timeout_s=0.05) is False  # no server: gives up
    assert warm.DONE.is_set()


def test_a_session_during_the_warm_up_waits_for_it(monkeypatch, demo_config, pipeline_calls):
    """A visitor who arrives while the warm-up still waits for the server (or works) gets the
    page's title, then the warm-up's read: the two never import or tune side by side."""
    import time

    from dashboard import server, warm

    cold_cache()
    listening = threading.Event()
    monkeypatch.setattr(server, "server_listening", lambda host, port: listening.is_set())
    thread = server.start_warm_up(["run", "dashboard/app.py", "--", "--config", str(demo_config)])
    try:
        assert not warm.DONE.is_set()
        monkeypatch.setenv("SPECDEC_CONFIG", str(demo_config))
        monkeypatch.delenv("SPECDEC_DB", raising=False)
        at = AppTest.from_file(APP, default_timeout=120)
        session = threading.Thread(target=at.run)
        session.start()
        time.sleep(2.0)
        assert session.is_alive(), "the session did not wait"
        assert pipeline_calls["tune_route"] == [], "the session did not wait"
    finally:
        listening.set()
        thread.join(120)
    session.join(120)
    assert not at.exception, [e.value for e in at.exception]
    assert set(at.dataframe[0].value["route"]) == {"structured", "open"}
    assert sorted(pipeline_calls["tune_route"]) == ["open", "structured"]


def test_launch_runs_the_warming_server(tmp_path, drift_config):
    cmd = launch.streamlit_command(_parse(["--config", str(drift_config)]))
    assert cmd[1:3] == ["-m", "dashboard.server"]
    from dashboard import server

    assert callable(server.main)
    argv = cmd[3:]
    assert server.option(argv, "--server.address") == "127.0.0.1"
    assert server.option(argv, "--server.port") == "8501"
    assert server.option(["--server.port=9"], "--server.port") == "9"
    from support import free_port

    port = free_port()
    assert not server.server_listening("127.0.0.1", port)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert server.server_listening("0.0.0.0", port)


# ----------------------------------------------------------------------------- layout (item 13)


def all_figures(monkeypatch, config) -> dict[str, list[dict]]:
    return {page: figures(run_page(monkeypatch, config, page)) for page in PAGES}


def test_chart_titles_sit_below_the_modebar_and_legends_below_the_axis_titles(monkeypatch, demo_config, drift_config):
    """Plotly's toolbar covers the top 32 px at the right of a chart: every title is placed
    below that band (container-referenced, padded) with the plot's margin reserved under it;
    every legend sits at the chart's bottom edge on the container, so that Plotly reserves
    its height under the x axis's tick labels and title (automargin) instead of drawing it
    over "time (UTC)"."""
    from dashboard import charts

    seen = 0
    for config in (demo_config, drift_config):
        for page, figs in all_figures(monkeypatch, config).items():
            for fig in figs:
                layout = fig["layout"]
                title = layout["title"]
                where = f"{page}: {title.get('text')!r}"
                assert title.get("yref") == "container", where
                assert title.get("y") == 1, where
                assert title.get("yanchor") == "top", where
                assert title["pad"]["t"] >= charts.MODEBAR_PX, where
                assert title.get("automargin") is True, where
                legend = layout["legend"]
                assert (legend.get("yref"), legend.get("y"), legend.get("yanchor"), legend.get("orientation")) == \
                    ("container", 0, "bottom", "h"), where
                assert layout["xaxis"].get("automargin") is True, where
                assert layout["yaxis"].get("automargin") is True, where
                assert layout["margin"]["t"] >= charts.MODEBAR_PX, where
                seen += 1
    assert seen >= 2 * 10


def test_whatif_says_which_speedup_is_which(monkeypatch, demo_config):
    """The flat-model chart's route markers are the flat model at the route's equivalent p,
    and say so; the caption puts the selected route's two speedups side by side with what
    differs; the outlined bars of the route chart are explained (legend and caption)."""
    at = run_page(monkeypatch, demo_config, "whatif")
    at.selectbox(key="whatif_route").set_value("open")
    at.run()
    assert not at.exception
    assert not at.error
    seeds, route_fig = figures(at)
    t = tuned(demo_config, "open")
    p = t.estimate.equivalent_p.value
    gamma, deployment = at.slider(key="whatif_gamma").value, t.deployment
    (flat,) = seeds_table(gamma, at.number_input(key="whatif_draft_cost").value, [p], method=deployment.method)
    mark = trace(seeds, "open: flat model at its equivalent p")
    assert values(mark["y"])[0] == pytest.approx(flat.speedup)
    assert not [tr for tr in seeds["data"] if str(tr.get("name", "")).endswith(": equivalent p")]
    _, rec = what_if(t, {"method": deployment.method, "draft_cost": float(deployment.draft_cost),
                         "cost_profile": deployment.cost_profile, "decode_backend": deployment.decode_backend})
    route_speedup = {c.gamma: c for c in rec.candidates}[gamma].speedup
    captions = [c.value for c in at.caption]
    both = [c for c in captions if f"Route open at γ={gamma}: {text.speedup(flat.speedup)} on this curve, "
            f"{text.speedup(route_speedup)} in the route chart below" in c]
    assert both
    assert "measured acceptance per position" in both[0]
    assert "batch mix" in both[0]
    assert abs(flat.speedup - route_speedup) > 0.5  # the demo's open route: the two differ, hence the label
    outline = trace(route_fig, f"outlined: γ={gamma}, the slider's (the deployed γ)")
    assert outline["marker"]["line"]["color"] == "black"
    assert any(c.startswith(f"Black outline: the bars at γ={gamma}, the γ chosen with the slider above "
                            f"(it starts at the deployed γ={t.observed_gamma})") for c in captions)


def test_messages_name_the_dashboards_controls_not_the_clis_flags(monkeypatch, drift_config):
    """The pipeline's 'widen --window' is the CLI's: the dashboard says its sidebar's Window."""
    at = run_ending_now(monkeypatch, drift_config)
    infos = [i.value for i in at.info if "no drafts in the last" in i.value]
    assert len(infos) == 2
    for info in infos:
        assert "--window" not in info
        assert "choose a longer Window in the sidebar" in info
        assert f"'Window ends at' to {data.END_AT_NEWEST}" in info
    assert data.dashboard_wording("no drafts in the last 1h; run `specdec collect` or widen --window") == \
        "no drafts in the last 1h; run `specdec collect` or choose a longer Window in the sidebar"
    assert data.dashboard_wording("no drafts in the last 1h: … drafted nothing: idle (no decode traffic); widen "
                                  "--window") == ("no drafts in the last 1h: … drafted nothing: idle (no decode "
                                                  "traffic); choose a longer Window in the sidebar")


# ----------------------------------------------------------------------------- functions behind the pages


def test_curve_history_slices_add_up_to_each_segment(demo_config):
    t = tuned(demo_config, "structured")
    slices = curve_history(t.window, n_slices=4)
    for seg in t.window.segments:
        mine = [s for s in slices if s.gamma == seg.gamma and s.start >= seg.start - 3600]
        assert sum(s.estimate.drafts for s in mine) == pytest.approx(seg.total.drafts)
        assert all(len(s.estimate.survival.value) == seg.gamma for s in mine)
    assert [s.start for s in slices] == sorted(s.start for s in slices)
    with pytest.raises(ValueError, match="n_slices"):
        curve_history(t.window, n_slices=0)


def test_what_if_without_changes_is_the_routes_recommendation(demo_config):
    t = tuned(demo_config, "open")
    _, rec = what_if(t, {})
    assert [c.speedup for c in rec.candidates] == pytest.approx([c.speedup for c in t.recommendation.candidates])
    assert rec.recommended_gamma == t.recommendation.recommended_gamma
    # the same intervals, probabilities and decision: the what-if is tune-gamma's own wiring
    fields = ("speedup_low", "speedup_high", "probability_best")
    for mine, theirs in zip(rec.candidates, t.recommendation.candidates):
        assert [getattr(mine, f) for f in fields] == pytest.approx([getattr(theirs, f) for f in fields])
    assert rec.decision == t.recommendation.decision
    from model.deployment import ModelInputError

    with pytest.raises(ModelInputError, match="draft_cost"):
        what_if(t, {"draft_cost": -1})


def test_parse_batch_mix():
    assert parse_batch_mix("1:0.5, 8:0.25,8:0.25") == {1: 0.5, 8: 0.5}
    for bad in ("", "8", "0:1", "x:1", "4:-1", "2:0"):
        with pytest.raises(BatchMixError):
            parse_batch_mix(bad)


def test_load_fleet_rejects_a_bad_window(drift_config):
    with pytest.raises(ValueError, match="window"):
        data.load_fleet(str(drift_config), None, window="soon")
    with pytest.raises(ValueError, match="window end"):
        data.load_fleet(str(drift_config), None, end_mode="yesterday")


# ----------------------------------------------------------------------------- `specdec dashboard`


def _parse(argv):
    import argparse

    parser = argparse.ArgumentParser(exit_on_error=False)
    sub = parser.add_subparsers()
    launch.add_parser(sub)
    return parser.parse_args(["dashboard", *argv])


def test_launch_command_binds_loopback_by_default(tmp_path, drift_config):
    args = _parse(["--config", str(drift_config)])
    cmd = launch.streamlit_command(args)
    assert cmd[1:4] == ["-m", "dashboard.server", "run"]
    assert cmd[4].endswith("dashboard/app.py")
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8501"
    assert cmd[cmd.index("--") + 1:] == ["--config", str(drift_config.resolve())]
    args = _parse(["--host", "0.0.0.0", "--port", "9000", "--db", str(tmp_path / "x.db")])
    cmd = launch.streamlit_command(args)
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0"
    assert "9000" in cmd
    assert args.fn is launch.run


def test_launch_refuses_bad_input(tmp_path):
    with pytest.raises(SystemExit):
        _parse(["--port", "70000"])
    from specdec.config import ConfigError

    with pytest.raises(ConfigError, match="not found"):
        launch.check_inputs(_parse(["--config", str(tmp_path / "nope.toml")]))
    with pytest.raises(ValueError, match="does not exist"):
        launch.check_inputs(_parse(["--db", str(tmp_path / "no" / "dir" / "x.db")]))
