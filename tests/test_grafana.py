"""`specdec grafana`: the dashboard JSON against Grafana's own published schema, and every
panel's query against a real Prometheus.

Schema: the @grafana/schema npm package (pinned in tests/grafana/package-lock.json;
scripts/ensure_grafana_schema.sh installs it with the TypeScript compiler) publishes the
dashboard model as TypeScript types — ``Dashboard`` and each panel plugin's ``Options`` and
``FieldConfig``. The test writes the JSON as TypeScript object literals typed with them and
runs ``tsc --noEmit --strict``: an unknown key (object literals get excess-property checks),
a wrong type or a value outside an enum fails it. Enum-typed fields are compared by their
string values (``${Enum}``), which is what Grafana reads from JSON.

Queries: Prometheus scrapes the simulated restart fleet and `specdec collect --serve` (which
collects the same fleet and exports its gauges), with `specdec rules` loaded; every panel
query, run as a range query over the run, must return at least one series with data.
Missing node, npm or Prometheus fails the tests when CI is set, else skips.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acceptance.prometheus import PrometheusClient, PrometheusSettings
from acceptance.sim import build_scenario
from specdec.grafana import dashboard, panel_queries
from metrics_servers import fleet_followed, prometheus_with_rules, require_binary, require_installed
from support import free_port

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "tests" / "grafana"
PANEL_MODULES = {  # panel type → its @grafana/schema module (Options, and FieldConfig where it has one)
    "timeseries": "timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen",
    "stat": "stat/panelcfg/x/StatPanelCfg_types.gen",
    "state-timeline": "statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen",
}
WITHOUT_FIELD_CONFIG = {"stat"}  # its custom field config is the common one: not typed per panel
JSON_OF = ("type Json<T> = T extends string ? `${T}` : T extends number | boolean | null | undefined ? T : "
           "T extends Array<infer U> ? Array<Json<U>> : { [K in keyof T]: Json<T[K]> };")


def _tsc() -> str:
    tsc = SCHEMA_DIR / "node_modules" / ".bin" / "tsc"
    return require_installed(lambda: str(tsc) if tsc.exists() else None, "ensure_grafana_schema.sh",
                             "@grafana/schema and typescript")


def typecheck(doc: dict, where: Path) -> subprocess.CompletedProcess:
    """tsc on the dashboard and each panel's options and field config, typed by @grafana/schema."""
    alias = {kind: kind.replace("-", "_") for kind in PANEL_MODULES}
    lines = ['import type { Dashboard } from "@grafana/schema";', JSON_OF]
    lines += [f'import type * as {alias[k]} from "@grafana/schema/dist/esm/raw/composable/{m}";'
              for k, m in PANEL_MODULES.items()]
    lines.append(f"export const dashboard: Json<Dashboard> = {json.dumps(doc, ensure_ascii=False)};")
    for panel in doc["panels"]:
        if panel["type"] == "row":
            continue
        kind, pid = alias[panel["type"]], panel["id"]
        lines.append(f"export const options{pid}: Json<{kind}.Options> = {json.dumps(panel['options'])};")
        custom = panel["fieldConfig"]["defaults"].get("custom", {})
        if panel["type"] in WITHOUT_FIELD_CONFIG:
            assert not custom, f"{panel['title']}: a custom field config the schema does not type"
            continue
        lines.append(f"export const custom{pid}: Json<{kind}.FieldConfig> = {json.dumps(custom)};")
    (where / "dashboard.ts").write_text("\n".join(lines) + "\n")
    (where / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"strict": True, "noEmit": True, "module": "esnext", "moduleResolution": "bundler",
                            "target": "es2020", "skipLibCheck": True, "typeRoots": [],
                            "baseUrl": ".", "paths": {"@grafana/schema": [str(SCHEMA_DIR / "node_modules/@grafana/schema")],
                                                      "@grafana/schema/*": [str(SCHEMA_DIR / "node_modules/@grafana/schema/*")]}},
        "files": ["dashboard.ts"]}))
    return subprocess.run([_tsc(), "-p", str(where / "tsconfig.json")], capture_output=True, text=True,
                          timeout=300, cwd=where)


def test_the_dashboard_is_valid_against_grafanas_schema(tmp_path):
    doc = dashboard(["structured", "open"])
    out = typecheck(doc, tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    rows = [p["title"] for p in doc["panels"] if p["type"] == "row"]
    assert rows == ["route open", "route structured"]
    assert doc["templating"]["list"][0]["type"] == "datasource"
    assert all(p.get("datasource", {}).get("uid") == "${datasource}" for p in doc["panels"] if p["type"] != "row")


@pytest.mark.parametrize("break_it, complaint", [
    (lambda d: d.update(schemaVersoin=39), "schemaVersoin"),
    (lambda d: d["panels"][1]["options"]["legend"].update(displayMode="lists"), '"lists"'),
    (lambda d: d["panels"][1].update(gridPos={"h": "8", "w": 8, "x": 0, "y": 1}), "string"),
    (lambda d: d["panels"][6]["options"].pop("colorMode"), "colorMode"),
])
def test_the_schema_check_catches_a_broken_dashboard(tmp_path, break_it, complaint):
    """The check can fail: a misspelled key, a value outside an enum, a wrong type, a
    required option missing (panel 6 is the stat panel)."""
    doc = dashboard(["structured"])
    assert doc["panels"][6]["type"] == "stat"
    break_it(doc)
    out = typecheck(doc, tmp_path)
    assert out.returncode != 0
    assert complaint in out.stdout


def test_specdec_grafana_prints_the_dashboard(tmp_path, capsys):
    from specdec.cli import main

    config = tmp_path / "specdec.toml"
    config.write_text('[routes.structured]\ntargets = ["http://127.0.0.1:9/metrics"]\n')
    assert main(["grafana", "--config", str(config)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == dashboard(["structured"])
    assert main(["grafana", "--config", str(config), "--resolution", "10m"]) != 0
    assert "resolution '10m'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fleet_and_exporter(tmp_path_factory):
    """Prometheus (specdec's rules loaded, rules at 2 s) scraping the restart fleet and
    `specdec collect --serve` following the same fleet."""
    require_binary("prometheus")
    tmp = tmp_path_factory.mktemp("grafana")
    exporter_port = free_port()
    launch = prometheus_with_rules(tmp, "sim-restart", "restart", also_scrape=[f"127.0.0.1:{exporter_port}"])
    collector = {}

    def started(seen):  # the fleet is up: follow it with specdec collect --serve
        config = tmp / "specdec.toml"
        config.write_text("[routes.restart]\ntargets = " + json.dumps(seen["targets"]) + "\n")
        collector["proc"] = subprocess.Popen(
            [sys.executable, "-m", "specdec.cli", "collect", "--config", str(config), "--db", str(tmp / "c.db"),
             "--interval", "1", "--serve", str(exporter_port), "--serve-window", "10m"],
            stdout=(tmp / "collect.log").open("w"), stderr=subprocess.STDOUT, cwd=ROOT)

    try:
        with fleet_followed(tmp, build_scenario("restart", seed=11), launch, "/-/ready", on_start=started) as seen:
            yield seen
    finally:
        if "proc" in collector:
            collector["proc"].terminate()
            collector["proc"].wait(timeout=30)


def test_every_panel_query_returns_data(fleet_and_exporter):
    seen = fleet_and_exporter
    client = PrometheusClient(PrometheusSettings(seen["url"]))
    doc = dashboard(["restart"], rate_window="10s", resolution="2s")
    empty = []
    for row, title, expr in panel_queries(doc):
        series = client.query_range(expr, seen["start"], seen["end"], 1.0)
        print(f"{title}: {expr} -> {len(series)} series, {sum(len(t) for _, t, _ in series)} points")
        if not any(len(times) for _, times, _ in series):
            empty.append(f"{row} / {title}: {expr}")
    assert not empty, "panel queries without data:\n" + "\n".join(empty)
    assert len(panel_queries(doc)) >= 15


def test_every_band_override_names_a_series_the_panel_draws():
    """A fill-between override only draws when its name is a series' display name: each
    "high …"/"low …" matcher must be what a target's legend gives (``{{label}}`` a value)."""
    import re

    for panel in dashboard(["structured"])["panels"]:
        legends = [re.escape(t["legendFormat"]).replace(r"\{\{", "{{").replace(r"\}\}", "}}")
                   for t in panel.get("targets", [])]
        patterns = [re.compile(re.sub(r"\{\{\w+\}\}", r"[0-9]+", legend)) for legend in legends]
        for override in panel.get("fieldConfig", {}).get("overrides", []):
            name = override["matcher"]["options"]
            assert any(p.fullmatch(name) for p in patterns), f"{panel['title']}: override {name!r} matches no series"


def _drift_panel(doc: dict) -> dict:
    (panel,) = [p for p in doc["panels"] if p.get("title") == "Drift"]
    return panel


def test_the_drift_panel_maps_each_state_to_words():
    """Drift not tested (the exporter has no drift gauge then) reads "not tested", not an
    empty panel; 0 and 1 read "no drift" and "drift"."""
    panel = _drift_panel(dashboard(["structured"]))
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    words = {value: result["text"] for value, result in mapping["options"].items()}
    assert words == {"1": "drift", "0": "no drift", "-1": "not tested"}
    assert panel["options"]["showValue"] == "always"
    assert "not tested" in panel["description"]


def panel_values(tmp_path, docs: dict[str, dict], queries: dict[str, str]) -> dict:
    """Prometheus scraping specdec's exporter serving ``docs`` ({route: tune-gamma document}):
    {name: [(labels, value)]} of each of ``queries`` once it answers, or what it had after 30 s."""
    import time
    import urllib.request

    from metrics_servers import scrape_config
    from specdec.exporter import RouteGauges

    prometheus = require_binary("prometheus")
    gauges = RouteGauges()
    for route, doc in docs.items():
        gauges.update(route, doc)
    server, _ = gauges.serve(0)
    port = free_port()
    (tmp_path / "prometheus.yml").write_text(scrape_config("specdec", [f"127.0.0.1:{server.server_port}"]))
    proc = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=(tmp_path / "prometheus.log").open("w"), stderr=subprocess.STDOUT)
    try:
        client = PrometheusClient(PrometheusSettings(f"http://127.0.0.1:{port}"))
        deadline, values = time.monotonic() + 30, {}
        while time.monotonic() < deadline and len(values) < len(queries):
            time.sleep(0.5)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1)
                for name, expr in queries.items():
                    found = client.query(expr, time.time())
                    if found:
                        values[name] = found
            except OSError:
                continue
        return values
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        server.shutdown()


def test_the_drift_panel_says_not_tested_where_the_exporter_has_no_drift(tmp_path):
    """Against a real Prometheus scraping specdec's exporter: a route whose window was too
    short for the drift test (drift null in its document: no specdec_route_drift_detected)
    gets the "not tested" value; a tested route keeps its 0 or 1. The panel was empty."""
    tested = {"detected": False, "difference": 0.01, "message": "no drift"}
    docs = {"tested": {"interval_level": 0.9, "observed": {"drift": tested}},
            "short": {"interval_level": 0.9, "observed": {"drift": None}}}
    queries = {route: t["expr"] for route in docs for t in _drift_panel(dashboard([route]))["targets"]}
    values = panel_values(tmp_path, docs, queries)
    assert {k: [v for _, v in found] for k, found in values.items()} == {"tested": [0.0], "short": [-1.0]}, \
        (tmp_path / "prometheus.log").read_text()[-2000:]


def test_the_events_panel_shows_0_for_a_route_without_events(tmp_path):
    """Against a real Prometheus scraping specdec's exporter: a route with figures and no event
    reads 0 ("none") in the Events panel, and the rules' restarts 0 where they saw none; the
    panel said "No data", which reads as a broken panel, not a quiet fleet."""
    (panel,) = [p for p in dashboard(["quiet"])["panels"] if p.get("title") == "Events"]
    values = panel_values(tmp_path, {"quiet": {"interval_level": 0.9, "observed": {"events": []}}},
                          {t["refId"]: t["expr"] for t in panel["targets"]})
    assert {k: [(labels.get("kind"), v) for labels, v in found] for k, found in values.items()} == {
        "A": [("none", 0.0)], "B": [(None, 0.0)]}, (tmp_path / "prometheus.log").read_text()[-2000:]
