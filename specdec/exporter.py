"""Per-route results as Prometheus gauges, and recording rules for Prometheus itself.

``RouteGauges`` holds the newest tune-gamma document of each route (specdec.pipeline
.tuning_to_dict) and exposes it, on every scrape, as gauges in its own CollectorRegistry:

  specdec_route_survival{route,position}            a_k, position = k − 1 (vLLM's label)
  specdec_route_survival_low / _high{route,position}  its interval at interval_level
  specdec_route_conditional_acceptance{route,position}  α_k = a_k / a_{k−1}
  specdec_route_mean_acceptance_length{route}       AL = 1 + Σ a_k (+ _low / _high)
  specdec_route_equivalent_p{route}                 p with (1 − p^(γ+1))/(1 − p) = AL (+ _low / _high)
  specdec_route_drafts{route}                       drafts D in the window behind the estimate
  specdec_route_projected_speedup{route,gamma}      S(γ) per candidate (+ _low / _high)
  specdec_route_recommended_gamma{route}            the best expected speedup's γ (0 = off)
  specdec_route_deployed_gamma{route}               γ the window observed
  specdec_route_gamma_to_deploy{route}              the γ the decision has the fleet run (a keep: the deployed γ)
  specdec_route_decision{route,decision}            1 for the decision (change | keep | off | probe | undecided), 0 for the others
  specdec_route_drift_detected{route}               1 when drift was detected (the estimate uses the recent part);
                                                    absent when the window was too short to test it
  specdec_route_drift_difference{route}             recent − earlier mean acceptance length
  specdec_route_events{route,kind}                  events in the window by kind (restart, gamma_change, ...)
  specdec_route_interval_level{route}               the level of every _low / _high (0.9 by default)
  specdec_route_last_update_timestamp_seconds{route}

A null in the document (no interval, no drafts) is left out rather than exported as NaN,
so a missing bound is visibly missing in Grafana. The collector builds the families from
the stored documents on each scrape: a route whose γ shrank leaves no stale positions.

``recording_rules`` prints a Prometheus rules file (YAML) that precomputes per-route
survival from vLLM's counters, for Grafana and Alertmanager without specdec in the loop.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

from acceptance.errors import InputError
from acceptance import vllm_metrics as vm
from acceptance.prometheus import normalise_selector
from acceptance.prometheus_rules import QUERY_OFFSET, RESOLUTION, window_rule_groups
from acceptance.store.records import EVENT_KINDS
from model.decision_kind import DecisionKind

DECISIONS = (DecisionKind.CHANGE, DecisionKind.KEEP, DecisionKind.OFF, DecisionKind.PROBE, DecisionKind.UNDECIDED)
_DURATION = re.compile(r"^[0-9]+(ms|s|m|h|d|w|y)$")


def _number(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


class _TuningCollector:
    def __init__(self, owner: "RouteGauges"):
        self.owner = owner

    def collect(self):
        with self.owner._lock:
            docs = dict(self.owner._docs)
        fams: dict[str, GaugeMetricFamily] = {}

        def fam(name, doc, labels):
            if name not in fams:
                fams[name] = GaugeMetricFamily(name, doc, labels=labels)
            return fams[name]

        def put(name, doc, labels, values, value):
            v = _number(value)
            if v is not None:
                fam(name, doc, labels).add_metric(values, v)

        for route, (d, updated) in sorted(docs.items()):
            obs = d.get("observed") or {}
            level = _number(d.get("interval_level"))
            surv = obs.get("survival") or []
            low = obs.get("survival_low") or [None] * len(surv)
            high = obs.get("survival_high") or [None] * len(surv)
            for k, (a, lo, hi) in enumerate(zip(surv, low, high)):
                pos = [route, str(k)]
                put("specdec_route_survival", "Survival a_k = A_k / D: share of drafts whose first k tokens "
                    "were accepted (position = k - 1, as vLLM labels it).", ["route", "position"], pos, a)
                put("specdec_route_survival_low", "Lower bound of specdec_route_survival's interval "
                    "(level: specdec_route_interval_level).", ["route", "position"], pos, lo)
                put("specdec_route_survival_high", "Upper bound of specdec_route_survival's interval.",
                    ["route", "position"], pos, hi)
            for k, alpha in enumerate(obs.get("conditional") or []):
                put("specdec_route_conditional_acceptance", "Conditional acceptance alpha_k = a_k / a_(k-1): "
                    "of the drafts that reached position k, the share accepted there (position = k - 1).",
                    ["route", "position"], [route, str(k)], alpha)
            al_iv = obs.get("mean_acceptance_length_interval") or [None, None]
            put("specdec_route_mean_acceptance_length", "Mean acceptance length AL = 1 + A / D "
                "(tokens per verify step, bonus token included).", ["route"], [route], obs.get("mean_acceptance_length"))
            put("specdec_route_mean_acceptance_length_low", "Lower bound of the mean acceptance length.",
                ["route"], [route], al_iv[0])
            put("specdec_route_mean_acceptance_length_high", "Upper bound of the mean acceptance length.",
                ["route"], [route], al_iv[1])
            p_iv = obs.get("equivalent_p_interval") or [None, None]
            put("specdec_route_equivalent_p", "Equivalent independent p: (1 - p^(gamma+1)) / (1 - p) = AL "
                "(a summary; the survival curve is the data).", ["route"], [route], obs.get("equivalent_p"))
            put("specdec_route_equivalent_p_low", "Lower bound of the equivalent p.", ["route"], [route], p_iv[0])
            put("specdec_route_equivalent_p_high", "Upper bound of the equivalent p.", ["route"], [route], p_iv[1])
            put("specdec_route_drafts", "Drafts D in the window behind the estimate.", ["route"], [route],
                obs.get("drafts"))
            for c in d.get("candidates") or []:
                g = [route, str(c.get("gamma"))]
                put("specdec_route_projected_speedup", "Projected speedup over plain decoding at gamma "
                    "(the cost model's objective and profile: see tune-gamma --json).", ["route", "gamma"], g,
                    c.get("speedup"))
                put("specdec_route_projected_speedup_low", "Lower bound of the projected speedup.",
                    ["route", "gamma"], g, c.get("speedup_low"))
                put("specdec_route_projected_speedup_high", "Upper bound of the projected speedup.",
                    ["route", "gamma"], g, c.get("speedup_high"))
            drift = obs.get("drift")
            if isinstance(drift, dict) and drift.get("tested", True):  # not tested: left out, not "no drift"
                put("specdec_route_drift_detected", "1 when the window's newest part departs from the rest (the "
                    "estimate then uses that part only), else 0.", ["route"], [route], 1.0 if drift.get("detected") else 0.0)
                put("specdec_route_drift_difference", "Mean acceptance length of the window's recent part minus "
                    "the earlier part's.", ["route"], [route], drift.get("difference"))
            if isinstance(obs.get("events"), list):
                kinds = [e.get("kind") for e in obs["events"] if isinstance(e, dict)]
                for kind in EVENT_KINDS:
                    put("specdec_route_events", "Events in the window behind the estimate, by kind (engine "
                        "restarts, gamma changes, speculation off/on, targets down/up, inconsistent scrapes refused, engines "
                        "taken as they are after three).", ["route", "kind"],
                        [route, kind], float(kinds.count(kind)))
            put("specdec_route_recommended_gamma", "Recommended number of draft tokens (0: speculation off).",
                ["route"], [route], d.get("recommended_gamma"))
            put("specdec_route_deployed_gamma", "Number of draft tokens the window observed.", ["route"], [route],
                d.get("deployed_gamma"))
            put("specdec_route_gamma_to_deploy", "Number of draft tokens the decision has the fleet run (a keep: "
                "the deployed one, however another looks).", ["route"], [route], d.get("gamma_to_deploy"))
            decision = d.get("decision")
            if decision in DECISIONS:
                for option in DECISIONS:
                    put("specdec_route_decision", "1 for the route's decision (change, keep, off, probe or undecided), 0 otherwise.",
                        ["route", "decision"], [route, option], 1.0 if option == decision else 0.0)
            put("specdec_route_interval_level", "Level of every _low/_high interval (e.g. 0.9).", ["route"],
                [route], level)
            put("specdec_route_last_update_timestamp_seconds", "When this route's figures were last computed "
                "(Unix seconds).", ["route"], [route], updated)
        return list(fams.values())


class RouteGauges:
    """The exporter's registry: ``update`` per route, ``serve`` over HTTP."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._docs: dict[str, tuple[dict, float]] = {}
        self.registry.register(_TuningCollector(self))
        self._server = None

    def update(self, route: str, tuning: dict, *, now: float | None = None) -> None:
        """Replace ``route``'s figures with a tune-gamma document (tuning_to_dict output)."""
        if not isinstance(route, str) or not route:
            raise InputError(f"route name must be a non-empty string, got {route!r}")
        if not isinstance(tuning, dict) or not isinstance(tuning.get("observed"), dict):
            raise InputError(f"route {route!r}: expected a tune-gamma document with an 'observed' object")
        with self._lock:
            self._docs[route] = (tuning, time.time() if now is None else float(now))

    def remove(self, route: str) -> None:
        """Stop exporting ``route`` (e.g. it left the config)."""
        with self._lock:
            self._docs.pop(route, None)

    @property
    def routes(self) -> list[str]:
        with self._lock:
            return sorted(self._docs)

    def serve(self, port: int, host: str = "127.0.0.1"):
        """Serve /metrics on host:port in a daemon thread; returns (server, thread).
        Port 0 picks a free port: ``server.server_port`` says which."""
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InputError(f"exporter port must be an integer from 0 to 65535, got {port!r}")
        try:
            server, thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            raise InputError(f"exporter: cannot listen on {host}:{port}: {e.strerror or e}") from None
        self._server = server
        return server, thread

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# ----------------------------------------------------------------------------- rules

def _route_selector(route: str, source) -> str:
    """A route's PromQL matchers: its selector, or its targets' ``instance`` labels
    (Prometheus labels a target host:port)."""
    if isinstance(source, str):
        try:
            return normalise_selector(source)
        except ValueError as e:
            raise InputError(f"route {route!r}: {e}") from None
    if isinstance(source, (list, tuple)) and source:
        instances = []
        for url in source:
            parts = urlsplit(url) if isinstance(url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
                raise InputError(f"route {route!r}: target {url!r} is not an http(s) URL")
            # "[.]" rather than "\\.": no backslash to double through PromQL and YAML strings
            instances.append(re.escape(parts.netloc).replace("\\.", "[.]"))
        # PromQL strings take Go escapes: any other regex backslash is written twice.
        regex = "|".join(sorted(set(instances))).replace("\\", "\\\\")
        return '{instance=~"' + regex + '"}'
    raise InputError(f"route {route!r}: give a PromQL selector or a non-empty list of target URLs")


def check_rate_window(window: str) -> None:
    """The dashboard rules' rate() window must be one Prometheus duration (5m, 1h)."""
    if not isinstance(window, str) or not _DURATION.match(window):
        raise InputError(f"rules window {window!r}: expected a Prometheus duration like 5m or 1h")


def recording_rules(routes: dict, window: str = "5m", resolution: str = RESOLUTION,
                    query_offset: str = QUERY_OFFSET) -> str:
    """A Prometheus rules file (YAML) with, per route (label ``route``), for dashboards:

      specdec:route_survival:ratio_rate<W>  a_k = sum by (position) (rate(A_k[W]))
                                              / ignoring(position) group_left sum(rate(D[W]))
      specdec:route_mean_acceptance_length:ratio_rate<W>  1 + sum(rate(A[W])) / sum(rate(D[W]))
      specdec:route_draft_acceptance_rate:ratio_rate<W>   sum(rate(A[W])) / sum(rate(T[W]))
      specdec:route_drafts:rate<W>                        sum(rate(D[W]))
      specdec:route_engines:count_by_gamma                engines per γ (label gamma)

    ``routes``: name → PromQL selector, or a list of target URLs (matched on ``instance``).
    These sums run over all of a route's engines: if they run different γ, the curve mixes
    γ (the file says so; the engines-by-γ rule shows when). Strings are written as JSON
    strings, which YAML reads as double-quoted scalars.

    Then one group per route, evaluated every ``resolution``: the window rules specdec's
    Prometheus source reads instead of raw samples, split by γ
    (acceptance.prometheus_rules).
    """
    check_rate_window(window)
    if not isinstance(routes, dict) or not routes:
        raise InputError("recording rules: no routes (configure [routes.NAME] with a selector or targets)")
    per_pos = f"{vm.ACCEPTED_PER_POSITION}_total"
    drafts = f"{vm.DRAFTS}_total"
    tokens = f"{vm.DRAFT_TOKENS}_total"
    accepted = f"{vm.ACCEPTED_TOKENS}_total"
    lines = [
        "# specdec recording rules: per-route acceptance from vLLM's spec-decode counters.",
        f"# Generated by `specdec rules` (window {window}). Survival a_k = A_k / D, position = k - 1.",
        "# These sums run over all of a route's engines: if they run different gamma (num_speculative_tokens),",
        "# the curve MIXES gamma — check specdec:route_engines:count_by_gamma, or give such a route one",
        "# selector per gamma. specdec's own Prometheus source splits by gamma; these rules do not.",
        f"# The groups specdec-window-ROUTE (every {resolution}) are what specdec's Prometheus source reads",
        "# instead of raw samples (per gamma and position, exact increases), each evaluation counting up to",
        f"# {query_offset} before it (at least your scrape_timeout: a scrape in flight is counted when stored);",
        "# backfill them over past data",
        "# with `promtool tsdb create-blocks-from rules`.",
        "groups:",
        '  - name: "specdec"',
        "    rules:",
    ]

    def rule(name: str, expr: str, route: str, comment: str) -> None:
        lines.append(f"      # {comment}")
        lines.append(f"      - record: {json.dumps(name)}")
        lines.append(f"        expr: {json.dumps(expr, ensure_ascii=False)}")
        lines.append("        labels:")
        lines.append(f"          route: {json.dumps(route, ensure_ascii=False)}")

    selectors = {}
    for route in sorted(routes):
        if not isinstance(route, str) or not route or "\n" in route:
            raise InputError(f"route name {route!r}: must be a non-empty one-line string")
        sel = selectors[route] = _route_selector(route, routes[route])
        rate = lambda metric: f"rate({metric}{sel}[{window}])"  # noqa: E731, B023 (used within this iteration)
        rule(f"specdec:route_survival:ratio_rate{window}",
             f"sum by ({vm.POSITION_LABEL}) ({rate(per_pos)}) / ignoring({vm.POSITION_LABEL}) group_left "
             f"sum({rate(drafts)})", route, f"route {route}: survival per position (mixes gamma if engines differ)")
        rule(f"specdec:route_mean_acceptance_length:ratio_rate{window}",
             f"1 + sum({rate(accepted)}) / sum({rate(drafts)})", route, f"route {route}: mean acceptance length")
        rule(f"specdec:route_draft_acceptance_rate:ratio_rate{window}",
             f"sum({rate(accepted)}) / sum({rate(tokens)})", route, f"route {route}: draft acceptance rate")
        rule(f"specdec:route_drafts:rate{window}", f"sum({rate(drafts)})", route, f"route {route}: drafts per second")
        rule("specdec:route_engines:count_by_gamma",
             f'count_values("gamma", count without ({vm.POSITION_LABEL}) ({per_pos}{sel}))', route,
             f"route {route}: engines per gamma (more than one series: the curves above mix gamma)")
    lines += window_rule_groups(selectors, resolution, query_offset)
    return "\n".join(lines) + "\n"


__all__ = ["RouteGauges", "recording_rules", "check_rate_window", "DECISIONS"]
