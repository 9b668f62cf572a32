"""The Grafana dashboard `specdec grafana` prints: one row per route over specdec's gauges
(`specdec collect --serve`, specdec/exporter.py) and its recording rules (`specdec rules`),
the Prometheus datasource a variable. A view: panels hold queries only, every figure in
them is computed by specdec or by the rules.

Per route: survival a_k per position with its interval band, conditional acceptance α_k,
mean acceptance length and equivalent p with bands, the survival the rules compute from
vLLM's counters alone, the recommended and deployed γ, the projected speedup per γ with its
band, the decision, drift (detected, not detected, or "not tested" when the window was too
short for the test: the exporter then has no drift gauge, and an empty panel would read as
"nothing happened") and events (the window's events by kind and the rules' per-engine
restarts). A band is drawn only where the exporter has bounds (an estimate without an
interval exports none), and the descriptions say so. The JSON follows Grafana's dashboard
schema (`Dashboard` of the @grafana/schema package; tests/test_grafana.py type-checks it
with it).
"""

from __future__ import annotations

import json

from acceptance.errors import InputError
from acceptance.prometheus_rules import RESOLUTION, resolution_seconds, series_names

from .exporter import check_rate_window

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39
# Bands are drawn per series (fill from high to low); one override pair per position or γ
# up to this many (γ_max is 16: positions 0..15, γ 0..16).
MAX_SERIES = 17
PANEL_HEIGHT, COLUMNS = 8, 3
LEGEND = {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []}
# The drift panel's value where the route has figures but no drift gauge (the exporter
# leaves specdec_route_drift_detected out when the window was too short to test drift):
# mapped to the text "not tested", apart from 0 ("no drift") and 1 ("drift").
DRIFT_NOT_TESTED = -1
DRIFT_MAPPINGS = [{"type": "value", "options": {
    "1": {"text": "drift", "color": "orange", "index": 0},
    "0": {"text": "no drift", "color": "green", "index": 1},
    str(DRIFT_NOT_TESTED): {"text": "not tested", "color": "#808080", "index": 2},
}}]
BANDS = ("with its interval band where one was computed (no band: the estimate has no interval, e.g. too few "
         "scrape intervals with drafts to resample)")


def _target(ref: str, expr: str, legend: str) -> dict:
    return {"refId": ref, "datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "range": True}


def _banded(metric: str, selector: str, label: str, by: str | None = None) -> dict:
    """targets and overrides of a value with its _low / _high bounds: series "label" (or
    "label N" per value N of label ``by``, up to MAX_SERIES), "low …" and "high …", the
    band filled from each high down to its low, the bounds' own lines hidden."""
    legend = f"{label} {{{{{by}}}}}" if by else label
    names = [f"{label} {i}" for i in range(MAX_SERIES)] if by else [label]
    hidden = [{"id": "custom.lineWidth", "value": 0},
              {"id": "custom.hideFrom", "value": {"legend": True, "tooltip": False, "viz": False}}]
    overrides = []
    for name in names:
        overrides.append({"matcher": {"id": "byName", "options": f"high {name}"},
                          "properties": [{"id": "custom.fillBelowTo", "value": f"low {name}"}] + hidden})
        overrides.append({"matcher": {"id": "byName", "options": f"low {name}"}, "properties": hidden})
    return {"targets": [_target("A", f"{metric}{selector}", legend),
                        _target("B", f"{metric}_low{selector}", f"low {legend}"),
                        _target("C", f"{metric}_high{selector}", f"high {legend}")],
            "overrides": overrides}


def _timeseries(title: str, description: str, targets: list[dict], *, unit: str = "none",
                overrides: list[dict] | None = None, minimum: float | None = None,
                maximum: float | None = None) -> dict:
    defaults = {"unit": unit, "custom": {"fillOpacity": 20, "lineWidth": 2, "showPoints": "never"}}
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    return {"type": "timeseries", "title": title, "description": description, "datasource": DATASOURCE,
            "targets": targets, "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
            "options": {"legend": LEGEND, "tooltip": {"mode": "multi", "sort": "none"}}}


def route_panels(route: str, *, rate_window: str = "5m", resolution: str = RESOLUTION) -> list[dict]:
    """The panels of one route's row (no grid positions yet)."""
    sel = f"{{route={json.dumps(route)}}}"
    rules = series_names(resolution)
    return [
        _timeseries("Survival a_k by position", "Share of drafts whose first k tokens were accepted "
                    f"(position = k - 1), {BANDS}; level: specdec_route_interval_level.",
                    unit="percentunit", minimum=0, maximum=1,
                    **_banded("specdec_route_survival", sel, "position", by="position")),
        _timeseries("Conditional acceptance α_k", "Of the drafts that reached position k, the share accepted there.",
                    [_target("A", f"specdec_route_conditional_acceptance{sel}", "position {{position}}")],
                    unit="percentunit", minimum=0, maximum=1),
        _timeseries("Mean acceptance length", f"Tokens per verify step (bonus token included), {BANDS}.",
                    **_banded("specdec_route_mean_acceptance_length", sel, "AL")),
        _timeseries("Equivalent p", "The independent p with the same mean acceptance length (a summary), "
                    f"{BANDS}.", unit="percentunit", minimum=0, maximum=1,
                    **_banded("specdec_route_equivalent_p", sel, "p")),
        _timeseries(f"Survival from vLLM's counters (rate {rate_window})",
                    "specdec's dashboard recording rule over all of the route's engines (mixes γ if they differ).",
                    [_target("A", f"specdec:route_survival:ratio_rate{rate_window}{sel}", "position {{position}}")],
                    unit="percentunit", minimum=0, maximum=1),
        {"type": "stat", "title": "Recommended and deployed γ", "datasource": DATASOURCE,
         "description": "Draft tokens per step: what the decision has the fleet run ('to deploy': on keep the "
                        "deployed γ, even when the recommended one looks better — not surely enough to change), "
                        "specdec's best expected γ (0 = speculation off) and what runs now.",
         "targets": [_target("C", f"specdec_route_gamma_to_deploy{sel}", "to deploy"),
                     _target("A", f"specdec_route_recommended_gamma{sel}", "recommended"),
                     _target("B", f"specdec_route_deployed_gamma{sel}", "deployed")],
         "fieldConfig": {"defaults": {"unit": "none", "decimals": 0}, "overrides": []},
         "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                     "orientation": "auto", "colorMode": "value", "graphMode": "none", "justifyMode": "auto",
                     "textMode": "value_and_name", "wideLayout": True, "showPercentChange": False,
                     "percentChangeColorMode": "standard"}},
        _timeseries("Projected speedup by γ", f"Speedup over plain decoding per candidate γ, {BANDS}.",
                    **_banded("specdec_route_projected_speedup", sel, "γ", by="gamma")),
        {"type": "state-timeline", "title": "Decision", "datasource": DATASOURCE,
         "description": "change, keep, off, probe or undecided: 1 for the route's decision.",
         "targets": [_target("A", f"specdec_route_decision{sel} == 1", "{{decision}}")],
         "fieldConfig": {"defaults": {"custom": {"fillOpacity": 70}}, "overrides": []},
         "options": {"showValue": "never", "mergeValues": True, "rowHeight": 0.9, "legend": LEGEND,
                     "tooltip": {"mode": "single", "sort": "none"}}},
        drift_panel(sel),
        _timeseries("Events", "Events in the estimate's window by kind (0, \"none\", where the route has figures "
                    "and no event), and engine restarts as the window rules see them (every "
                    f"{resolution}; 0 where they saw none).",
                    [_target("A", f"specdec_route_events{sel} > 0 or on(route) label_replace(0 * "
                                  f"specdec_route_last_update_timestamp_seconds{sel}, \"kind\", \"none\", \"\", \"\")",
                             "{{kind}}"),
                     _target("B", f"sum(last_over_time({rules['restarts']}{sel}[{rate_window}])) or "
                                  f"0 * sum(specdec_route_last_update_timestamp_seconds{sel})",
                             "restarts (rules)")]),
    ]


def drift_panel(sel: str) -> dict:
    """Drift as a state over time: "drift", "no drift", or "not tested" where the route has
    figures (its last-update gauge) but no drift gauge — the exporter's way of saying the
    window was too short for the test. No figures at all reads "no data"."""
    tested_or_not = (f"specdec_route_drift_detected{sel} or on(route) "
                     f"(0 * specdec_route_last_update_timestamp_seconds{sel} + ({DRIFT_NOT_TESTED}))")
    return {"type": "state-timeline", "title": "Drift", "datasource": DATASOURCE,
            "description": "Whether the newest quarter of the estimate's window departs from the rest (the estimate "
                           "then uses that part only); \"not tested\" when the window was too short to test it.",
            "targets": [_target("A", tested_or_not, "drift")],
            "fieldConfig": {"defaults": {"custom": {"fillOpacity": 70}, "mappings": DRIFT_MAPPINGS,
                                         "noValue": "no data (specdec collect --serve)"},
                            "overrides": []},
            "options": {"showValue": "always", "mergeValues": True, "rowHeight": 0.9, "legend": LEGEND,
                        "tooltip": {"mode": "single", "sort": "none"}}}


def _placed(panels: list[dict], y: int, next_id: int) -> tuple[list[dict], int, int]:
    """Panels laid out COLUMNS to a line from height y: (panels, the height after, next id)."""
    width = 24 // COLUMNS
    out = []
    for i, panel in enumerate(panels):
        out.append({"id": next_id + i, **panel, "gridPos": {"h": PANEL_HEIGHT, "w": width, "x": (i % COLUMNS) * width,
                                                            "y": y + (i // COLUMNS) * PANEL_HEIGHT}})
    lines = -(-len(panels) // COLUMNS)
    return out, y + lines * PANEL_HEIGHT, next_id + len(panels)


def dashboard(routes: list[str], *, rate_window: str = "5m", resolution: str = RESOLUTION) -> dict:
    """The whole dashboard: a datasource variable and one open row per route."""
    if not routes:
        raise InputError("grafana: no routes (configure [routes.NAME])")
    check_rate_window(rate_window)
    resolution_seconds(resolution)
    panels, y, next_id = [], 0, 1
    for route in sorted(routes):
        panels.append({"type": "row", "id": next_id, "title": f"route {route}", "collapsed": False, "panels": [],
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        placed, y, next_id = _placed(route_panels(route, rate_window=rate_window, resolution=resolution), y + 1,
                                     next_id + 1)
        panels += placed
    return {
        "title": "specdec: speculative decoding by route", "uid": "specdec-routes", "editable": True,
        "schemaVersion": SCHEMA_VERSION, "tags": ["specdec", "vllm", "speculative-decoding"],
        "time": {"from": "now-6h", "to": "now"}, "refresh": "1m", "timezone": "browser",
        "description": "Acceptance, projections and decisions per route, from `specdec collect --serve` gauges "
                       "and `specdec rules` recording rules.",
        "templating": {"list": [{"name": "datasource", "label": "Prometheus", "type": "datasource",
                                 "query": "prometheus", "hide": 0, "refresh": 1, "includeAll": False,
                                 "multi": False}]},
        "panels": panels,
    }


def panel_queries(doc: dict) -> list[tuple[str, str, str]]:
    """(row title, panel title, PromQL) of every query in a dashboard: what the tests run."""
    out, row = [], ""
    for panel in doc.get("panels", []):
        if panel.get("type") == "row":
            row = panel.get("title", "")
            continue
        for target in panel.get("targets", []):
            out.append((row, panel.get("title", ""), target["expr"]))
    return out


__all__ = ["dashboard", "route_panels", "panel_queries", "SCHEMA_VERSION"]
