"""The Prometheus source and the exporter.

The integration test runs Debian's real Prometheus (2.42; `make test` installs it through
scripts/ensure_prometheus.sh) on a free loopback port, scraping the simulated "restart"
fleet every second while the embedded store collects the same targets, and compares
survival over the same wall-clock window, through the scheduled engine restart.

Tolerance 0.01 absolute on each a_k. Why: increase() extrapolates each block to its
edges and drops what happened between two blocks' samples; every series of an engine
comes from the same scrapes, so within a block its D and A_k are scaled alike and the
ratio is kept — what differs is which drafts each window holds (Prometheus' first block
needs a sample one block before it, blocks lose their edge gaps to extrapolation, the two
scrapers sample at different instants): on the order of 10–20 % of ~10^6 drafts not shared.
With a_k ≈ 0.4–0.8 the sampling difference over 10^5 unshared drafts has a standard
deviation of about sqrt(0.25 / 10^5) ≈ 0.0016, so 0.01 is about six of them, while a
wrong aggregation (summing across γ, losing the restarted engine, per-engine averaging)
moves a_k by far more. Missing Prometheus fails the test when CI is set, else skips.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from acceptance.estimates import estimate_acceptance
from acceptance.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusSettings,
    normalise_selector,
    prometheus_route_window,
)
from acceptance.fetch import UnreachableError
from specdec.exporter import DECISIONS
from acceptance.prometheus import plan_blocks
from acceptance.prometheus_recorded import block_plan, recorded_coverage, prometheus_window
from acceptance.prometheus_rules import query_offset_seconds, resolution_seconds, route_rules, series_names
from acceptance.sim import build_scenario
from acceptance.sim.scenarios import scenario_from_dict
from acceptance.windows import route_window
from specdec.exporter import RouteGauges, recording_rules
from specdec.pipeline import tune_inline
from specdec.report import tuning_to_dict
from metrics_servers import (
    RULES_QUERY_OFFSET,
    RULES_RESOLUTION,
    RULES_WINDOW,
    SURVIVAL_TOLERANCE,
    fleet_followed,
    prometheus_with_rules,
    require_binary,
    same_curve_as_store,
    tune_through,
)
from support import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Prometheus and the embedded store both following the simulated restart fleet."""
    tmp = tmp_path_factory.mktemp("prom")
    with fleet_followed(tmp, build_scenario("restart", seed=11), prometheus_with_rules(tmp, "sim-restart", "restart"),
                        "/-/ready") as seen:
        yield seen


def test_prometheus_and_store_agree_on_survival_through_a_restart(live):
    pw = prometheus_route_window(PrometheusSettings(live["url"]), '{job="sim-restart"}', live["start"], live["end"])
    sw = route_window(live["store"], live["targets"], live["start"], live["end"])
    # The restart is seen by both: the store from the counter drop, Prometheus from resets().
    assert [e.engine for e in sw.events if e.kind == "restart"] == ["0"]
    restarts = [e for e in pw.events if e.kind == "restart"]
    assert [e.engine for e in restarts] == ["0"]
    assert abs(restarts[0].time - live["restart_wall"]) <= pw.block_s + 3.0
    # One γ, both engines, the restarted one included, and the window spans the restart.
    assert len(pw.segments) == 1
    assert pw.newest_segment.gamma == 4
    assert sorted(ref.engine for ref in pw.newest_segment.engines) == ["0", "1"]
    seg = pw.newest_segment
    assert seg.start < live["restart_wall"] < seg.end
    assert len(seg.intervals) >= 3
    prom = estimate_acceptance(seg.intervals, n_resamples=300)
    store = estimate_acceptance(sw.newest_segment.intervals, n_resamples=300)
    diff = np.abs(prom.survival.value - store.survival.value)
    print(f"prometheus {np.round(prom.survival.value, 4)} ({len(seg.intervals)} blocks of {pw.block_s:g} s, "
          f"{prom.drafts:.0f} drafts); store {np.round(store.survival.value, 4)} ({store.drafts:.0f} drafts); "
          f"max |diff| {diff.max():.4f}")
    assert diff.max() <= SURVIVAL_TOLERANCE, (prom.survival.value, store.survival.value)
    # increase() extrapolates, so the draft counts are close but not equal (and fractional).
    assert 0.6 < prom.drafts / store.drafts < 1.2
    # The step shape came through too.
    assert set(pw.step_shape.batch_time_shares) <= {2, 4, 8}
    assert abs(sum(pw.step_shape.batch_time_shares.values()) - 1) < 1e-9
    assert pw.step_shape.itl_mean_s == pytest.approx(sw.step_shape.itl_mean_s, rel=0.05)
    assert pw.step_shape.iteration_tokens[float("inf")] > 0
    # consecutive gauge samples and how often B persisted (the batch mix's effective samples)
    ps, ss = pw.step_shape, sw.step_shape
    print(f"batch persistence: prometheus {ps.batch_persistence:.3f} ({ps.sample_pairs} pairs), "
          f"store {ss.batch_persistence:.3f} ({ss.sample_pairs} pairs)")
    assert 0 < ps.sample_pairs < ps.samples
    assert 0 <= ps.repeated_pairs <= ps.sample_pairs
    assert abs(ps.sample_pairs - ss.sample_pairs) <= 0.25 * ss.sample_pairs
    # ≈ 0.66 per scrape; ~40 pairs each, sampled at other instants of the same fleet: each
    # backend's estimate is noisy (±0.1), so the check is that both see the persistence
    assert 0.3 < ps.batch_persistence < 0.95
    assert 0.3 < ss.batch_persistence < 0.95
    assert pw.not_speculating == []


def test_a_window_wider_than_the_data_keeps_the_engines_that_started_in_it(live):
    """A day's window over a few minutes of data: its blocks (a day / 200) are longer than the
    engines' series, which all start inside the last block. That block must count them — a
    block was once kept only for engines present at both its ends, so the wider the window, the
    fewer drafts, and at a day none ("no drafts … widen --window")."""
    start, end = live["end"] - 86_400.0, live["end"]
    pw = prometheus_route_window(PrometheusSettings(live["url"]), '{job="sim-restart"}', start, end)
    sw = route_window(live["store"], live["targets"], start, end)
    assert pw.block_s > end - live["start"]  # the whole history inside one block
    assert pw.segments, "no γ segment: the engines' first block was dropped"
    prom = estimate_acceptance(pw.newest_segment.intervals, n_resamples=100)
    store = estimate_acceptance(sw.newest_segment.intervals, n_resamples=100)
    assert sorted(ref.engine for ref in pw.newest_segment.engines) == ["0", "1"]
    assert 0.8 < prom.drafts / store.drafts < 1.2, (prom.drafts, store.drafts)
    assert np.abs(prom.survival.value - store.survival.value).max() <= SURVIVAL_TOLERANCE


def test_recording_rules_run_in_prometheus(live):
    client = PrometheusClient(PrometheusSettings(live["url"]))
    at = live["end"]
    rows = client.query(f'specdec:route_survival:ratio_rate{RULES_WINDOW}{{route="restart"}}', at)
    by_pos = {int(labels["position"]): v for labels, v in rows}
    assert sorted(by_pos) == [0, 1, 2, 3]
    curve = np.array([by_pos[k] for k in range(4)])
    assert np.all(np.diff(curve) < 0)
    assert 0.6 < curve[0] < 0.95  # true p 0.8: a_1 ≈ 0.8
    al = client.query(f'specdec:route_mean_acceptance_length:ratio_rate{RULES_WINDOW}{{route="restart"}}', at)
    assert al
    assert al[0][1] == pytest.approx(1 + curve.sum(), rel=0.02)
    by_gamma = client.query('specdec:route_engines:count_by_gamma{route="restart"}', at)
    assert [(lab["gamma"], v) for lab, v in by_gamma] == [("4", 2.0)]


def test_promtool_accepts_the_rules(tmp_path):
    promtool = require_binary("promtool")
    path = tmp_path / "rules.yml"
    path.write_text(recording_rules({"structured": '{job="vllm-structured"}',
                                     "open": ["http://127.0.0.1:9102/metrics", "http://[::1]:8000/metrics"]}))
    out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    # 5 dashboard rules and 13 window rules per route
    assert "36 rules found" in out.stdout


def test_recorded_window_agrees_with_the_store_through_a_restart(live):
    """The window rules' exact increases, read back per block: the same curve as the store
    (window edges differ by a scrape and a rule evaluation), the restart seen."""
    pw = prometheus_window(PrometheusSettings(live["url"]), "restart", '{job="sim-restart"}', live["start"],
                           live["end"])
    sw = route_window(live["store"], live["targets"], live["start"], live["end"])
    assert pw.recorded == "specdec:route_spec_decode:delta2s"
    assert "recorded series specdec:route_spec_decode:delta2s" in pw.notes[0]
    assert pw.block_s == 2.0
    prom, store = same_curve_as_store(pw, sw, "recorded")
    restart = next(e for e in pw.events if e.kind == "restart")
    assert abs(restart.time - live["restart_wall"]) <= 2.0 + 2.0  # one evaluation and a scrape
    # exact increases: whole drafts. Fewer than the store's: Prometheus' first scrape comes
    # seconds after the fleet starts (its target discovery), the store's at once.
    assert float(prom.drafts).is_integer()
    assert 0.6 < prom.drafts / store.drafts < 1.2
    ps, ss = pw.step_shape, sw.step_shape
    assert set(ps.batch_time_shares) <= {2, 4, 8} and abs(sum(ps.batch_time_shares.values()) - 1) < 1e-9
    assert ps.itl_mean_s == pytest.approx(ss.itl_mean_s, rel=0.05)
    assert ps.iteration_tokens[float("inf")] > 0
    assert 0 < ps.sample_pairs < ps.samples and 0 <= ps.repeated_pairs <= ps.sample_pairs


def test_recorded_series_fall_back_to_raw_when_they_do_not_fit(live):
    """No rules for the route, rules for another selector, or rules younger than the window:
    raw increase() queries, and the note says why."""
    settings = PrometheusSettings(live["url"])
    raw = prometheus_route_window(settings, '{job="sim-restart"}', live["start"], live["end"])
    unrecorded = prometheus_window(settings, "other", '{job="sim-restart"}', live["start"], live["end"])
    assert unrecorded.recorded is None
    assert "no recorded series for route 'other'" in unrecorded.notes[0]
    assert "raw samples" in unrecorded.notes[0]
    np.testing.assert_allclose(unrecorded.newest_segment.total.accepted_per_position,
                               raw.newest_segment.total.accepted_per_position)
    moved = prometheus_window(settings, "restart", '{job="sim-restart",engine="0"}', live["start"], live["end"])
    assert moved.recorded is None and "written for selector" in moved.notes[0]
    older = prometheus_window(settings, "restart", '{job="sim-restart"}', live["start"] - 600, live["end"])
    assert older.recorded is None and "evaluations" in older.notes[0]


def test_tune_gamma_through_prometheus_says_it_read_the_recorded_series(live, tmp_path, capsys):
    doc = tune_through(live["url"], "sim-restart", live["end"] - live["start"], tmp_path, capsys)
    assert any("recorded series specdec:route_spec_decode:delta2s" in note for note in doc["observed"]["notes"])
    assert doc["observed"]["drafts"] > 0


def frozen_benchmark(*args: str) -> dict:
    """benchmarks/prometheus_vs_store.py at a small size (3 engines, 6 h): its JSON result."""
    require_binary("prometheus")
    require_binary("promtool")
    require_binary("victoria-metrics")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "prometheus_vs_store.py"), "--engines", "3",
                          "--days", "0.25", "--repeat", "1", *args], capture_output=True, text=True, timeout=600,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("phase", [0.0, 7.5], ids=["at-a-sample", "between-samples"])
def test_recorded_series_equal_the_store_on_frozen_data(phase):
    """benchmarks/prometheus_vs_store.py at a small size: a fleet backfilled into Prometheus,
    imported into VictoriaMetrics and loaded into the store, specdec's rules backfilled with
    promtool, evaluated at a raw sample's instant (--rule-phase 0: the samples fall every 15 s
    from a whole minute) or between samples: the recorded window's survival and
    VictoriaMetrics' (raw: MetricsQL's increase does not extrapolate) are the store's to 1e-6,
    their drafts the store's exactly, and so is every evaluation's."""
    doc = frozen_benchmark("--rule-phase", str(phase))
    seen = (f"window {doc['window']}, recorded {doc['prometheus_recorded']['drafts']} drafts "
            f"{doc['prometheus_recorded']['notes']}, store {doc['store']['drafts']} drafts, evaluations against "
            f"the store {doc['prometheus_recorded']['evaluations_against_store']}")
    assert doc["prometheus_recorded"]["rule_phase_s"] == phase
    checked = doc["prometheus_recorded"]["evaluations_against_store"]
    assert checked["slots"] > 300 and checked["without_an_evaluation"] == [] == checked["unlike_the_store"], seen
    assert doc["max_abs_survival_difference_recorded_vs_store"] <= 1e-6, seen
    assert doc["drafts_recorded_minus_store"] == 0, seen
    assert doc["max_abs_survival_difference_victoria_metrics_vs_store"] <= 1e-6
    assert doc["drafts_victoria_metrics_minus_store"] == 0
    assert "recorded series" in doc["prometheus_recorded"]["notes"][0]
    assert len(doc["prometheus_recorded"]["notes"]) == 1  # nothing was missing
    assert doc["prometheus_recorded"]["drafts"] == doc["store"]["drafts"] > 0
    assert doc["prometheus_recorded"]["series_added_per_route"]["specdec:route_spec_decode:delta1m"] == 5 + 3
    # each γ's own latency: a sum and a count per γ in use (the frozen fleet runs one γ)
    assert doc["prometheus_recorded"]["series_added_per_route"][
        "specdec:route_inter_token_latency_seconds_sum_by_gamma:delta1m"] == 1
    # ... and its own gauge samples: a series per batch size the γ ran (the route's have the same)
    added = doc["prometheus_recorded"]["series_added_per_route"]
    assert added["specdec:route_engines_by_batch_by_gamma:count1m"] == added["specdec:route_engines_by_batch:count1m"] > 0
    # the raw path extrapolates: close, not equal
    assert 0 < doc["max_abs_survival_difference_raw_vs_store"] < 0.01


@pytest.mark.parametrize("phase, stamped, skipped", [(59.9996, 0.0, 0.0), (59.5, 59.5, 7199.5)],
                         ids=["at-a-sample", "mid-second"])
def test_recorded_window_makes_the_evaluations_promtool_skipped(phase, stamped, skipped):
    """promtool's rule backfill never evaluates a slot in the last second before a 2-hour block
    (each block's range query ends at its last whole second, the next starts at the block): a
    rules file whose path hashes the group there lacks an evaluation every 2 hours. At 59.9996
    s past each minute Prometheus stamps the evaluations at the whole minute, a raw sample's
    instant: the frozen-data test's two failures, 1,449 drafts short — on the 6 h fleet the
    three slots that counted them. The window makes them from the raw samples (the rules'
    PromQL at those instants) and says so: every count the store's."""
    doc = frozen_benchmark("--rule-phase", str(phase))
    recorded = doc["prometheus_recorded"]
    checked = recorded["evaluations_against_store"]
    seen = f"notes {recorded['notes']}, evaluations against the store {checked}"
    assert recorded["rule_phase_s"] == stamped
    # the slot stamped at (or half a second before) each 2-hour block's start
    assert [slot["at"] % 7200 for slot in checked["without_an_evaluation"]] == [skipped] * 3, seen
    assert checked["store_drafts_without_an_evaluation"] == 489 + 522 + 438
    assert checked["unlike_the_store"] == [], seen  # every evaluation promtool made is exact
    assert any("3 of the window's" in note and "made from the raw samples" in note
               and "found no raw samples" not in note for note in recorded["notes"]), seen
    assert doc["drafts_recorded_minus_store"] == 0, seen
    assert recorded["drafts"] == doc["store"]["drafts"] > 0
    assert doc["max_abs_survival_difference_recorded_vs_store"] <= 1e-6, seen
    assert recorded["batch_mix_samples"] == 3 * checked["slots"]  # 3 engines at every slot, the made ones too


@pytest.fixture(scope="module")
def gamma_changed(tmp_path_factory):
    """Prometheus with specdec's rules following two engines at γ 4, one moved to γ 6 at 10m."""
    tmp = tmp_path_factory.mktemp("prom-gamma")
    scenario = scenario_from_dict({
        "name": "gamma-change", "routes": {"probe": {
            "gamma": 4, "process": {"kind": "independent", "p": 0.8},
            "batch": {"weights": {"2": 0.3, "4": 0.4, "8": 0.3}, "persistence": 0.5},
            "targets": [{"name": "probe-0", "engines": 2}]}},
        "events": [{"at": "10m", "kind": "set_gamma", "target": "probe-0", "engine": "0", "gamma": 6}]}, seed=5)
    with fleet_followed(tmp, scenario, prometheus_with_rules(tmp, "sim-gamma", "probe"), "/-/ready") as seen:
        yield seen


def test_recorded_window_splits_gamma_and_names_each_segments_engines(gamma_changed):
    """Engine 0 moves from γ 4 to 6: the recorded window has both segments, each with the
    engines the raw path's scan of samples finds, and the γ change as an event."""
    settings = PrometheusSettings(gamma_changed["url"])
    start, end = gamma_changed["start"], gamma_changed["end"]
    recorded = prometheus_window(settings, "probe", '{job="sim-gamma"}', start, end)
    raw = prometheus_route_window(settings, '{job="sim-gamma"}', start, end)
    assert recorded.recorded is not None, recorded.notes

    def engines(window):
        return {seg.gamma: sorted(ref.engine for ref in seg.engines) for seg in window.segments}

    assert engines(recorded) == {4: ["0", "1"], 6: ["0"]} == engines(raw)
    changes = [e for e in recorded.events if e.kind == "gamma_change"]
    assert [(e.engine, e.data["gamma"]) for e in changes] == [("0", 6)]
    assert abs(changes[0].time - gamma_changed["restart_wall"]) <= 2.0 + 2.0
    # the probe's counts are never summed with γ 4's: its own curve has 6 positions
    six = next(seg for seg in recorded.segments if seg.gamma == 6)
    assert len(six.total.accepted_per_position) == 6 and six.total.drafts > 0


@pytest.fixture(scope="module")
def slow_exporter(tmp_path_factory):
    """Prometheus with specdec's rules following one engine whose pages are answered 0.5 s
    late: each scrape is stamped at its request and stored 0.5 s later, so a rule reading at
    its own evaluation's instant finds the scrape in flight missing whenever the evaluation
    falls in that half second."""
    tmp = tmp_path_factory.mktemp("prom-slow")
    scenario = scenario_from_dict({
        "name": "slow", "routes": {"slow": {
            "gamma": 4, "process": {"kind": "independent", "p": 0.7},
            "batch": {"weights": {"4": 1.0}, "persistence": 0.5},
            "targets": [{"name": "slow-0", "engines": 1}]}}}, seed=11)
    with fleet_followed(tmp, scenario, prometheus_with_rules(tmp, "sim-slow", "slow"), "/-/ready",
                        event_at_s=200.0, answer_delay_s=0.5) as seen:
        yield seen


def test_recorded_counts_are_exact_when_scrapes_are_stored_late(slow_exporter):
    """The rules read their query offset in the past, where every scrape is stored: the
    window's drafts, accepted tokens and ITL sum and count are exactly the raw counters'
    change over the span the evaluations counted — none lost to a scrape in flight, and
    the ITL sum and count lost alike never (their mean unbiased)."""
    settings = PrometheusSettings(slow_exporter["url"])
    client = PrometheusClient(settings)
    r, offset = resolution_seconds(RULES_RESOLUTION), query_offset_seconds(RULES_QUERY_OFFSET)
    end, sel = slow_exporter["end"], '{job="sim-slow"}'
    # Prometheus' first scrape may come seconds after it is ready (its discovery's first
    # sync): the window starts where what its first evaluation counted from is a stored sample
    [(_, times, _)] = client.samples(f"vllm:spec_decode_num_drafts_total{sel}[{end - slow_exporter['start'] + 60:.0f}s]",
                                     end)
    start = float(times[0]) + offset + 2 * r
    window = prometheus_window(settings, "slow", sel, start, end)
    assert window.recorded is not None, window.notes
    coverage = recorded_coverage(client, "slow", sel, start, end, r, series_names(RULES_RESOLUTION)["heartbeat"])
    assert coverage.why_not is None and coverage.query_offset_s == offset == 1.0
    counted_to = coverage.last_evaluation - offset
    counted_from = counted_to - coverage.evaluations * r

    def change(counter: str) -> float:
        at = [client.query(f"sum({counter}{sel})", t) for t in (counted_from, counted_to)]
        assert all(at), f"{counter}: no sample at {counted_from:.3f} or {counted_to:.3f} (a failed scrape?)"
        return at[1][0][1] - at[0][0][1]

    [segment] = window.segments
    assert segment.total.drafts == change("vllm:spec_decode_num_drafts_total") > 0
    assert segment.total.accepted_tokens == change("vllm:spec_decode_num_accepted_tokens_total")
    assert segment.itl_count == change("vllm:inter_token_latency_seconds_count")
    assert segment.itl_mean_s == pytest.approx(change("vllm:inter_token_latency_seconds_sum") / segment.itl_count,
                                               rel=1e-9)
    assert window.end == pytest.approx(min(end, counted_to + r / 2))


def test_rules_read_their_query_offset_in_the_past():
    """Every raw selector of the window rules reads ``offset D`` and R before it ``offset
    (R + D)``; at 0 s the rules read the evaluation's instant, as before the offset."""
    late = dict(route_rules("a", '{job="x"}', "1m", "10s"))
    spec = late["specdec:route_spec_decode:delta1m"]
    assert 'vllm:spec_decode_num_drafts_total{job="x"} offset 10s' in spec
    assert 'vllm:spec_decode_num_drafts_total{job="x"} offset 70s' in spec
    assert '{job="x"})' not in spec and '{job="x"} -' not in spec  # no selector read at the instant
    now = dict(route_rules("a", '{job="x"}', "1m", "0s"))["specdec:route_spec_decode:delta1m"]
    assert "offset 10s" not in now and "offset 1m" in now
    rules = recording_rules({"a": '{job="x"}'}, query_offset="15s")
    assert 'query_offset: "15s"' in rules and "offset 75s" in rules
    assert "query_offset" not in recording_rules({"a": '{job="x"}'}, query_offset="0s")
    for bad in ("6m", "1.5s", "-1s", "", 10):
        with pytest.raises(ValueError, match="query offset"):
            recording_rules({"a": '{job="x"}'}, query_offset=bad)


def test_rules_time_options_take_seconds_as_every_time_option_does(tmp_path, capsys):
    """`specdec rules --query-offset 10 --resolution 60`: bare seconds, written as Prometheus
    durations; 0 is no offset; past 5 m is refused (exit 2)."""
    from specdec.cli import main

    config = tmp_path / "specdec.toml"
    config.write_text('[source]\nkind = "prometheus"\nurl = "http://127.0.0.1:9"\n[routes.a]\nselector = \'{job="x"}\'\n')
    assert main(["rules", "--config", str(config), "--query-offset", "10", "--resolution", "60"]) == 0
    out = capsys.readouterr().out
    assert "specdec:route_spec_decode:delta60s" in out and "offset 10s" in out and "offset 70s" in out
    assert main(["rules", "--config", str(config), "--query-offset", "0"]) == 0
    assert "query_offset" not in capsys.readouterr().out
    assert main(["rules", "--config", str(config), "--query-offset", "301"]) == 2
    assert "query offset '301s'" in capsys.readouterr().err


class _Heartbeat:
    """A client whose heartbeat was last evaluated at 1000 s and counted ``n`` times."""

    def __init__(self, n: float, selector: str = '{job="x"}'):
        self.n, self.selector = n, selector

    def query(self, expr: str, at: float):
        if expr.startswith("timestamp("):
            return [({}, 1000.0)]
        return [({"selector": self.selector}, self.n)]


@pytest.mark.parametrize("count, why", [(60, None), (59.5, None), (58, "cover 58 of the window's 60"),
                                        (120, "hold 120 evaluations"), (61, None)])
def test_recorded_coverage_wants_each_evaluation_once(count, why):
    """60 evaluations in (400, 1000] at 10 s: 99% of them are enough, twice as many (a backfill
    overlapping the live rules) are refused like too few."""
    coverage = recorded_coverage(_Heartbeat(count), "a", '{job="x"}', 400.0, 1000.0, 10.0, "hb")
    if why is None:
        assert coverage.why_not is None and coverage.evaluations == 60 and coverage.last_evaluation == 1000.0
    else:
        assert why in coverage.why_not


def test_recorded_coverage_wants_the_rules_running_at_the_windows_end():
    """Last evaluated at 1000 s: a window ending at 1015 s is covered (evaluations lag), one
    ending at 1100 s or starting after 1000 s is not."""
    assert recorded_coverage(_Heartbeat(60), "a", '{job="x"}', 400.0, 1015.0, 10.0, "hb").why_not is None
    assert "100 s before the window's end" in recorded_coverage(_Heartbeat(60), "a", '{job="x"}', 400.0, 1100.0, 10.0,
                                                       "hb").why_not
    assert "before the window's end" in recorded_coverage(_Heartbeat(1), "a", '{job="x"}', 1001.0, 1005.0, 10.0, "hb").why_not
    assert "written for selector" in recorded_coverage(_Heartbeat(60, '{job="y"}'), "a", '{job="x"}', 400.0, 1000.0, 10.0,
                                               "hb").why_not


class _Reoffset(_Heartbeat):
    """Rules rewritten inside the window: 30 evaluations at query offset 10s, 30 at 0s."""

    def query(self, expr: str, at: float):
        if expr.startswith("timestamp("):
            return [({}, 1000.0)]
        return [({"selector": self.selector, "query_offset": "10s"}, 30.0), ({"selector": self.selector}, 30.0)]


def test_recorded_coverage_reads_the_query_offset_and_refuses_a_change_of_it():
    """The heartbeat's query_offset dates what the evaluations counted (none: 0 s, rules
    written before it); changed inside the window, a span was counted twice or never."""
    assert recorded_coverage(_Heartbeat(60), "a", '{job="x"}', 400.0, 1000.0, 10.0, "hb").query_offset_s == 0.0
    why = recorded_coverage(_Reoffset(60), "a", '{job="x"}', 400.0, 1000.0, 10.0, "hb").why_not
    assert "query offsets 0s and 10s inside the window" in why


def test_recorded_window_plan_and_resolution():
    assert block_plan(10080, 200) == (51, 197, 33)  # a week at 1 m: 197 blocks of 51 and one of 33
    assert block_plan(12, 200) == (1, 12, 0)
    assert resolution_seconds("1m") == 60.0 and resolution_seconds("2s") == 2.0
    for bad in ("10m", "500ms", "1 m", "0s", 60):
        with pytest.raises(ValueError, match="resolution"):
            resolution_seconds(bad)
    with pytest.raises(ValueError, match="resolution"):
        recording_rules({"a": '{job="x"}'}, resolution="1d")


def test_recording_rules_bad_input():
    with pytest.raises(ValueError, match="window"):
        recording_rules({"a": '{job="x"}'}, window="5 minutes")
    with pytest.raises(ValueError, match="route 'a'.*not an http"):
        recording_rules({"a": ["ftp://x/metrics"]})
    with pytest.raises(ValueError, match="no routes"):
        recording_rules({})
    with pytest.raises(ValueError, match="route 'a'"):
        recording_rules({"a": '{job="x"'})


# ----------------------------------------------------------------------------- client errors

class _FakePrometheus(http.server.BaseHTTPRequestHandler):
    """Answers /api/v1/query with what the test put on the server; records the request."""

    def do_POST(self):  # noqa: N802
        server = self.server
        length = int(self.headers.get("Content-Length", 0))
        server.seen.append((self.path, dict(self.headers), self.rfile.read(length).decode()))
        if server.redirect_to is not None:
            self.send_response(302)
            self.send_header("Location", server.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if server.require_token and self.headers.get("Authorization") != f"Bearer {server.require_token}":
            body, status = json.dumps({"status": "error", "errorType": "unauthorized", "error": "bad token"}), 401
        elif server.answer is not None:
            body, status = server.answer(self.path) if callable(server.answer) else server.answer
        else:  # an empty, valid answer: a route without data
            kind = "matrix" if self.path.endswith("query_range") else "vector"
            body, status = json.dumps({"status": "success", "data": {"resultType": kind, "result": []}}), 200
        self.send_response(status)
        if status in (429, 503) and getattr(server, "retry_after", None):
            self.send_header("Retry-After", server.retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def fake():
    yield from _fake_server()


def _fake_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakePrometheus)
    server.seen = []
    server.require_token = None
    server.answer = None
    server.redirect_to = None
    th = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def elsewhere():
    yield from _fake_server()


def _url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_dead_endpoint_is_a_one_line_error_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PrometheusError) as info:
        prometheus_route_window(PrometheusSettings(url), '{job="x"}', 1000.0, 2000.0, timeout_s=2)
    message = str(info.value)
    assert url in message
    assert "\n" not in message
    assert "cannot reach" in message


def test_bearer_token_is_sent_and_never_printed(fake, monkeypatch):
    secret = "s3cr3t-token-value"
    monkeypatch.setenv("SPECDEC_TEST_PROM_TOKEN", secret)
    fake.require_token = secret
    settings = PrometheusSettings(_url(fake), "SPECDEC_TEST_PROM_TOKEN")
    window = prometheus_route_window(settings, '{job="x"}', 1000.0, 2000.0)
    assert window.segments == []
    assert window.newest_segment is None
    assert fake.seen
    assert all(h.get("Authorization") == f"Bearer {secret}" for _, h, _ in fake.seen)
    assert "query=" in fake.seen[0][2]
    assert fake.seen[0][0] == "/api/v1/query"
    # A rejected token: the server's error, one line, the URL named, the token nowhere.
    monkeypatch.setenv("SPECDEC_TEST_PROM_TOKEN", "wrong-" + secret)
    client = PrometheusClient(settings)
    with pytest.raises(PrometheusError) as info:
        client.query("up", 1000.0)
    message = str(info.value)
    assert "HTTP 401" in message
    assert _url(fake) in message
    assert "\n" not in message
    assert secret not in message
    assert secret not in repr(client)
    # A token variable that is not set is named, and nothing is sent.
    monkeypatch.delenv("SPECDEC_TEST_PROM_TOKEN")
    with pytest.raises(PrometheusError, match="SPECDEC_TEST_PROM_TOKEN.*not set"):
        PrometheusClient(settings)


def test_a_redirect_is_not_followed_and_the_token_stays_home(fake, elsewhere, monkeypatch):
    secret = "Tok3n-Value"
    monkeypatch.setenv("SPECDEC_TEST_PROM_TOKEN", secret)
    fake.redirect_to = _url(elsewhere)  # another port: another origin
    client = PrometheusClient(PrometheusSettings(_url(fake), "SPECDEC_TEST_PROM_TOKEN"))
    with pytest.raises(PrometheusError, match="redirects are not followed") as info:
        client.query("up", 1.0)
    assert elsewhere.seen == []  # nothing, and no token, went there
    assert _url(elsewhere) in str(info.value)
    assert "\n" not in str(info.value)


def test_credentials_are_masked_in_any_case_and_in_urls(fake, monkeypatch):
    secret = "Tok3n-Value"
    monkeypatch.setenv("SPECDEC_TEST_PROM_TOKEN", secret)
    fake.answer = (json.dumps({"status": "error", "errorType": "bad_data",
                               "error": f"token {secret.lower()} and {secret.upper()} refused"}), 400)
    client = PrometheusClient(PrometheusSettings(_url(fake), "SPECDEC_TEST_PROM_TOKEN"))
    with pytest.raises(PrometheusError) as info:
        client.query("up", 1.0)
    assert secret.lower() not in str(info.value).lower()
    assert "***" in str(info.value)
    port = fake.server_address[1]
    with_password = PrometheusClient(PrometheusSettings(f"http://admin:hunter2@127.0.0.1:{port}"))
    with pytest.raises(PrometheusError) as info:
        with_password.query("up", 1.0)
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(with_password)
    assert f"admin:***@127.0.0.1:{port}" in str(info.value)


def test_a_target_password_is_masked_in_scrape_errors():
    from acceptance.collector import collect_cycle

    url = f"http://user:pa55word@127.0.0.1:{free_port()}/metrics"
    (result,) = collect_cycle([url], timeout_s=1.0)
    assert not result.ok
    assert "pa55word" not in result.error
    assert "user:***@" in result.error


def test_error_document_and_bad_status_are_one_line(fake):
    fake.answer = (json.dumps({"status": "error", "errorType": "bad_data",
                               "error": "1:5: parse error:\nunexpected character"}), 400)
    client = PrometheusClient(PrometheusSettings(_url(fake)))
    with pytest.raises(PrometheusError) as info:
        client.query("up{", 1.0)
    assert "bad_data" in str(info.value)
    assert "\n" not in str(info.value)
    assert _url(fake) in str(info.value)
    # a query the server refused to parse is the selector's fault (exit 2), not an outage (3)
    assert not isinstance(info.value, UnreachableError)
    assert "check the route's selector" in str(info.value)
    fake.answer = ("<html>gateway down</html>", 502)
    with pytest.raises(PrometheusError, match="HTTP 502") as info:
        client.query("up", 1.0)
    assert isinstance(info.value, UnreachableError)
    fake.answer = ("not json", 200)
    with pytest.raises(PrometheusError, match="did not answer JSON"):
        client.query("up", 1.0)
    fake.answer = (json.dumps({"status": "error", "errorType": "timeout", "error": "query timed out"}), 200)
    with pytest.raises(PrometheusError, match="timeout: query timed out"):
        client.query("up", 1.0)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
@pytest.mark.parametrize("window_s", [600.0, 180.0])
def test_a_count_that_is_not_a_finite_number_is_one_line_naming_server_series_and_value(fake, value, window_s):
    """A Prometheus answering NaN or ±Inf for a spec-decode series: exit 2 naming the server,
    the series and the value (it was an internal error on a 10-minute window — int(NaN) — and
    'no drafts, check the selector' on a 3-minute one)."""
    series = {"__name__": "vllm:spec_decode_num_drafts_total", "engine": "0", "model_name": "m", "job": "x"}

    def answer(path):
        if path.endswith("query_range"):
            result = [{"metric": series, "values": [[1900.0, "5"], [1950.0, value]]}]
            return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}), 200
        result = [{"metric": series, "value": [2000.0, value]}]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}), 200

    fake.answer = answer
    with pytest.raises(PrometheusError) as info:
        prometheus_route_window(PrometheusSettings(_url(fake)), '{job="x"}', 2000.0 - window_s, 2000.0)
    message = str(info.value)
    assert _url(fake) in message and "vllm:spec_decode_num_drafts_total" in message and value in message
    assert "\n" not in message and not isinstance(info.value, UnreachableError)


def test_a_busy_prometheus_is_asked_once_more_after_its_retry_after(fake):
    """429 with Retry-After: 1, then the answer: the query succeeds within its deadline."""
    calls = []

    def answer(path):
        calls.append(path)
        if len(calls) == 1:
            return json.dumps({"status": "error", "errorType": "too_many_requests", "error": "slow down"}), 429
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}), 200

    fake.answer = answer
    fake.retry_after = "1"
    assert PrometheusClient(PrometheusSettings(_url(fake)), timeout_s=5).query("up", 1.0) == []
    assert len(calls) == 2


def test_a_partial_answer_s_warnings_are_said_in_the_notes(fake):
    """Prometheus (or Thanos, or VictoriaMetrics) answering with `warnings` — a shard that did
    not answer, a limit hit — gives data that may be partial: said in the window's notes, once
    each, not passed without a word."""
    def answer(path):
        kind = "matrix" if path.endswith("query_range") else "vector"
        return json.dumps({"status": "success", "warnings": ["store 10.0.0.7:10901 did not answer: partial data"],
                           "data": {"resultType": kind, "result": []}}), 200

    fake.answer = answer
    window = prometheus_route_window(PrometheusSettings(_url(fake)), '{job="x"}', 1000.0, 2000.0)
    (note,) = [n for n in window.notes if "warned" in n]
    assert "may be partial" in note and "store 10.0.0.7:10901 did not answer" in note and _url(fake) in note


def test_window_and_selector_input_is_checked():
    settings = PrometheusSettings("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="empty"):
        prometheus_route_window(settings, '{job="x"}', 10.0, 10.0)
    with pytest.raises(ValueError, match="max_blocks"):
        prometheus_route_window(settings, '{job="x"}', 0.0, 10.0, max_blocks=0)
    with pytest.raises(ValueError, match="selector"):
        prometheus_route_window(settings, '{job="x"}}', 0.0, 10.0)
    with pytest.raises(PrometheusError, match="http"):
        PrometheusClient(PrometheusSettings("localhost:9090"))
    assert normalise_selector('job="x"') == '{job="x"}'
    assert normalise_selector(' {job="x", instance=~"a.*"} ') == '{job="x", instance=~"a.*"}'
    # A window of a millisecond or less (end − start a hair under 1 ms in floating point) still
    # plans a block PromQL can write: 1 ms, not 0 (a ZeroDivisionError once).
    now = 1_764_000_000.123
    for window in (0.001, 0.0004, 1e-9):
        n, block = plan_blocks(now - window, now, 15.0, 200, None)
        assert (n, block) == (1, 0.001)
    assert plan_blocks(0.0, 3600.0, 15.0, 200, None) == (80, 45.0)  # at least 3 scrapes a block


# ----------------------------------------------------------------------------- exporter

def test_exporter_page_holds_the_document():
    doc = tuning_to_dict(tune_inline([0.8, 0.62, 0.47], drafts=20000, n_resamples=200))
    gauges = RouteGauges()
    gauges.update("structured", doc, now=1_800_000_123.0)
    server, _ = gauges.serve(0)
    try:
        port = server.server_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            page = r.read().decode()
    finally:
        gauges.close()
    samples = {}
    for fam in text_string_to_metric_families(page):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    obs = doc["observed"]

    def get(name, **labels):
        return samples[(name, tuple(sorted({"route": "structured", **labels}.items())))]

    for k, a in enumerate(obs["survival"]):
        assert get("specdec_route_survival", position=str(k)) == pytest.approx(a)
        assert get("specdec_route_survival_low", position=str(k)) == pytest.approx(obs["survival_low"][k])
        assert get("specdec_route_survival_high", position=str(k)) == pytest.approx(obs["survival_high"][k])
    assert get("specdec_route_mean_acceptance_length") == pytest.approx(obs["mean_acceptance_length"])
    assert get("specdec_route_equivalent_p") == pytest.approx(obs["equivalent_p"])
    assert get("specdec_route_equivalent_p_low") == pytest.approx(obs["equivalent_p_interval"][0])
    assert get("specdec_route_recommended_gamma") == doc["recommended_gamma"]
    assert get("specdec_route_deployed_gamma") == 3
    assert get("specdec_route_gamma_to_deploy") == doc["gamma_to_deploy"]
    for c in doc["candidates"]:
        assert get("specdec_route_projected_speedup", gamma=str(c["gamma"])) == pytest.approx(c["speedup"])
    assert get("specdec_route_decision", decision=doc["decision"]) == 1.0
    assert sum(get("specdec_route_decision", decision=d) for d in DECISIONS) == 1.0
    assert get("specdec_route_last_update_timestamp_seconds") == 1_800_000_123.0
    assert get("specdec_route_interval_level") == pytest.approx(0.9)
    for k, alpha in enumerate(obs["conditional"]):
        assert get("specdec_route_conditional_acceptance", position=str(k)) == pytest.approx(alpha)
    # an inline curve has no window: no drift or event gauges rather than made-up zeros
    assert not any(name in ("specdec_route_drift_detected", "specdec_route_events") for name, _ in samples)


def test_exporter_counts_the_windows_events_and_says_drift():
    doc = tuning_to_dict(tune_inline([0.8, 0.62, 0.47], drafts=20000, n_resamples=200))
    doc["observed"]["drift"] = {"detected": True, "difference": -0.31}
    doc["observed"]["events"] = [{"kind": "restart"}, {"kind": "gamma_change"}, {"kind": "restart"}]
    gauges = RouteGauges()
    gauges.update("open", doc)
    page = {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in gauges.registry.collect() for s in fam.samples}
    assert page[("specdec_route_drift_detected", (("route", "open"),))] == 1.0
    assert page[("specdec_route_drift_difference", (("route", "open"),))] == pytest.approx(-0.31)
    events = {dict(labels)["kind"]: v for (name, labels), v in page.items() if name == "specdec_route_events"}
    assert events == {"restart": 2.0, "gamma_change": 1.0, "spec_off": 0.0, "spec_on": 0.0, "target_down": 0.0,
                      "target_up": 0.0, "inconsistent": 0.0, "rebaseline": 0.0}
    # a drift test that could not run (a part with too few rows) is left out, not exported as "no drift"
    doc["observed"]["drift"] = {"detected": False, "tested": False, "difference": None}
    gauges.update("open", doc)
    names = {s.name for fam in gauges.registry.collect() for s in fam.samples}
    assert "specdec_route_drift_detected" not in names


def test_exporter_replaces_a_route_and_leaves_out_nulls():
    gauges = RouteGauges()
    five = tuning_to_dict(tune_inline([0.9, 0.8, 0.7, 0.6, 0.5], drafts=5000, n_resamples=100))
    two = tuning_to_dict(tune_inline([0.7, 0.4]))  # no --drafts: no intervals (null bounds)
    gauges.update("r", five)
    gauges.update("r", two)
    from prometheus_client import generate_latest

    page = generate_latest(gauges.registry).decode()
    positions = {s.labels["position"] for f in text_string_to_metric_families(page)
                 for s in f.samples if s.name == "specdec_route_survival"}
    assert positions == {"0", "1"}  # γ shrank: positions 2-4 are gone
    assert "specdec_route_survival_low{" not in page
    assert "specdec_route_mean_acceptance_length_low{" not in page
    with pytest.raises(ValueError, match="route 'r'"):
        gauges.update("r", {"no": "observed"})
    gauges.remove("r")
    assert "specdec_route_survival{" not in generate_latest(gauges.registry).decode()


def test_exporter_port_in_use_is_a_one_line_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ValueError, match=f"127.0.0.1:{port}"):
            RouteGauges().serve(port)


def test_tune_gamma_reads_a_prometheus_route(live, tmp_path, capsys):
    """`source = "prometheus"`: tune-gamma gets the same curve as from the embedded store (a
    10-minute window: older than the rules, so read from raw samples)."""
    doc = tune_through(live["url"], "sim-restart", 600, tmp_path, capsys, '[deployment]\ncost_profile = "flat"\n\n')
    assert doc["observed"]["gamma"] == 4
    assert any("raw samples" in note for note in doc["observed"]["notes"])
    store = estimate_acceptance(route_window(live["store"], live["targets"], live["start"], live["end"])
                                .newest_segment.intervals, n_resamples=300)
    assert np.max(np.abs(np.array(doc["observed"]["survival"]) - store.survival.value)) <= SURVIVAL_TOLERANCE
    assert any(e["kind"] == "restart" for e in doc["observed"]["events"])


def test_each_gamma_segment_keeps_its_own_latency_through_prometheus(gamma_changed):
    """The raw path's per-segment ITL (increase() of the histogram's sum and count over the
    engines of each γ) and the recorded series' (the rules' exact increases, summed by the
    engines' γ at each evaluation) agree with the store's per-segment ITL, each over its own
    engines: the γ 6 probe's requests are counted there, not with γ 4's (what lets a
    probe's latency measure the specialized speedup). The simulated step time hardly moves
    with γ, so the check of the split is the counts."""
    start, end = gamma_changed["start"], gamma_changed["end"]
    settings = PrometheusSettings(gamma_changed["url"])
    raw = prometheus_route_window(settings, '{job="sim-gamma"}', start, end)
    recorded = prometheus_window(settings, "probe", '{job="sim-gamma"}', start, end)
    assert recorded.recorded is not None, recorded.notes
    assert not any("hold no" in note for note in recorded.notes)
    stored = route_window(gamma_changed["store"], gamma_changed["targets"], start, end)
    prom = {seg.gamma: seg for seg in raw.segments}
    rec = {seg.gamma: seg for seg in recorded.segments}
    store = {seg.gamma: seg for seg in stored.segments}
    print("per-segment ITL (mean, count, drafts): "
          + "; ".join(f"{name} { {g: (s.itl_mean_s, s.itl_count, s.total.drafts) for g, s in by.items()} }"
                      for name, by in (("raw", prom), ("recorded", rec), ("store", store))))
    assert set(prom) == set(rec) == set(store) == {4, 6}
    for g in (4, 6):
        # the simulator observes one ITL per step: the rules counted the same steps for both
        assert store[g].itl_count == store[g].total.drafts and rec[g].itl_count == rec[g].total.drafts
        assert prom[g].itl_mean_s == pytest.approx(store[g].itl_mean_s, rel=0.05)
        assert rec[g].itl_mean_s == pytest.approx(store[g].itl_mean_s, rel=0.05)
        # the simulator observes the ITL once per request per step, and every step drafts for
        # each request: a segment's ITL count is its drafts when both are summed over the same
        # engines and blocks (the raw path's segments start later than the store's: its blocks;
        # the recorded increases are exact, each engine's at its γ of the evaluation, but two
        # rules of a group run one after the other, and a scrape appended between them is seen
        # by the later one only)
        assert prom[g].itl_count == pytest.approx(prom[g].total.drafts, rel=0.02)
        assert rec[g].itl_count == pytest.approx(rec[g].total.drafts, rel=0.02)
        assert store[g].itl_count == store[g].total.drafts
    # each segment's own gauge samples: the raw path's histogram of num_requests_running over
    # the engines at its γ at each step of the scrape interval — one engine's samples for the
    # γ 6 probe, both engines' for γ 4 until engine 0 left it (the two sample the sim's gauge
    # at other instants than the store's collector, so the counts, not the values, are checked)
    # (the recorded series: the engines running B at each γ, per rule evaluation, 2 s apart)
    change = gamma_changed["restart_wall"]
    for name, by, step in (("raw", prom, raw.scrape_interval_s), ("recorded", rec, 2.0)):
        engine_seconds = {6: by[6].end - by[6].start, 4: by[4].end - by[4].start + change - by[4].start}
        print(f"per-segment batch samples, {name}: { {g: by[g].batch_samples for g in (4, 6)} }, store "
              f"{ {g: store[g].batch_samples for g in (4, 6)} }, step {step} s, engine-seconds {engine_seconds}")
        for g in (4, 6):
            assert set(by[g].batch_samples) <= {2, 4, 8} and set(store[g].batch_samples) <= {2, 4, 8}
            assert sum(by[g].batch_samples.values()) == pytest.approx(engine_seconds[g] / step, rel=0.15)
