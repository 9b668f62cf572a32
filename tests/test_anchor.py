"""The anchor of the cost profile, from each of its sources (model.anchor): configured,
observed through vLLM's inter-token latency histogram, observed through the requests'
mean_itl_ms, and the default — which is announced, with the roofline figures it used."""

import json
import random

import pytest

from model.anchor import Anchor, solve_observed_rate
from model.deployment import Deployment
from model.recommend import RouteInputs, recommend
from specdec.cli import main, tune_gamma_main
from support import RECENT, deployed_candidate, run_cli, tune_ingested, tune_live_window, vllm_payload

CURVE = [0.8, 0.6, 0.45]


def per_request_file(tmp_path, *, itl_ms: float | None, n: int = 200, seed: int = 3):
    """Requests of γ 3 at independent p 0.75 with the given mean_itl_ms (None: not reported)."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        steps = []
        for _ in range(30):
            accepted = 0
            while accepted < 3 and rng.random() < 0.75:
                accepted += 1
            steps.append((3, accepted))
        metrics = {"mean_itl_ms": itl_ms, "tokens_per_second": None, "speculative_decoding": vllm_payload(steps, 3)}
        lines.append(json.dumps({"id": f"cmpl-{i}", "route": "chat", "time": RECENT + i, "metrics": metrics}))
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_per_request_latency_anchors_the_level(capsys, tmp_path):
    doc, console = tune_ingested(capsys, tmp_path, per_request_file(tmp_path, itl_ms=2.5), 'method = "ngram"\n')
    observed = doc["observed"]["observed_tokens_per_second"]
    assert observed == pytest.approx(1 / 2.5e-3)  # mean_itl_ms is per token (vLLM: decode time / (tokens − 1))
    assert doc["anchor"]["source"] == "observed"
    assert doc["anchor"]["detail"] == "per-request mean_itl_ms"
    assert deployed_candidate(doc)["tokens_per_second"] == pytest.approx(observed, rel=1e-6)
    assert doc["model_error"] is None  # the level matches by construction
    # the roofline's figures are still the defaults, and the output says so
    figures = doc["profile_figures"]
    assert figures["model"] == {"value": "kimi-k3", "source": "default"}
    assert "observed — inferred from the engine's own rate at gamma 3 (per-request mean_itl_ms)" in console
    assert "rests on the default draft_overhead, model, gpu, tensor_parallel_size" in console
    assert "roofline figures: kimi-k3 (default), GB300 (default), TP 16 (default)" in console


def test_configured_baseline_is_kept_and_the_model_error_reported(capsys, tmp_path):
    doc, console = tune_ingested(capsys, tmp_path, per_request_file(tmp_path, itl_ms=2.5),
                                 'method = "ngram"\nbaseline_tokens_per_second = 300\nmodel = "llama-3.1-8b"\n'
                                 'gpu = "H100"\ntensor_parallel_size = 1\n')
    assert doc["anchor"] == {"baseline_tokens_per_second": 300, "source": "configured", "detail": "",
                             "observed_gamma": None, "rests_on_defaults": []}
    assert doc["model_error"] is not None
    assert doc["profile_figures"]["gpu"] == {"value": "H100", "source": "configured"}
    assert "anchor: 300.0 tok/s plain decode at batch 1, configured" in console
    assert "roofline figures: llama-3.1-8b (configured), H100 (configured), TP 1 (configured)" in console
    assert "set model" not in console
    # the requests' own 400 tok/s at γ 3 over the configured 300 at batch 1: measured, beside the table
    measured = doc["deployed_speedup_measured"]
    assert measured["value"] == pytest.approx(400 / 300) and measured["plain_source"] == "configured"
    assert measured["gamma"] == 3 and measured["rests_on_defaults"] == []
    assert measured["summary"] in console
    assert "measured at gamma 3: 400.0 tok/s per user (mean) = 1.33x the plain decode's 300.0 tok/s" in console
    (row,) = [line for line in console.splitlines() if line.lstrip().startswith("3 ") and "deployed" in line]
    assert row.endswith("deployed (measured 1.33x)") or "deployed (measured 1.33x)," in row


def test_without_latency_the_default_is_announced(capsys, tmp_path):
    doc, console = tune_ingested(capsys, tmp_path, per_request_file(tmp_path, itl_ms=None), 'method = "ngram"\n')
    assert doc["anchor"]["source"] == "default"
    assert doc["anchor"]["baseline_tokens_per_second"] == 118.0
    assert deployed_candidate(doc)["tokens_per_second"] > 118.0
    assert "the DEFAULT (Kimi K3 on 16 GB300)" in console
    assert "set model, gpu and tensor_parallel_size for your engine" in console


def test_the_latency_histogram_anchors_a_scraped_window(capsys, tmp_path):
    code, out, err = tune_live_window(tmp_path, capsys)
    assert code == 0, err
    doc = json.loads(out)
    observed = doc["observed"]["observed_tokens_per_second"]
    assert observed
    assert doc["anchor"]["source"] == "observed"
    assert doc["anchor"]["detail"] == "vllm:inter_token_latency_seconds"
    assert deployed_candidate(doc)["tokens_per_second"] == pytest.approx(observed, rel=1e-6)
    assert doc["profile_figures"] == {"profile": "flat", "baseline_tokens_per_second": doc["anchor"],
                                      # the drafter's figures say which were configured (this config: the profile)
                                      "method": {"value": "dspark", "source": "default"},
                                      "draft_cost": {"value": 0.1, "source": "default"},
                                      "draft_overhead": {"value": 0.0, "source": "default"},
                                      "cost_profile": {"value": "flat", "source": "configured"},
                                      "unused": doc["profile_figures"]["unused"],
                                      "verify_cost": None}  # a parallel drafter: no cost shape fitted
    # dspark: one pass priced by draft_cost, no draft model named; nothing of the specialized path off it
    assert set(doc["profile_figures"]["unused"]) == {"draft_overhead", "draft_model", "specialized_speedup",
                                                       "cudagraph_capture_sizes"}


def test_the_roofline_fixed_point_and_an_unreachable_rate():
    import numpy as np

    dep = Deployment.from_mapping({"method": "ngram", "model": "llama-3.1-8b", "gpu": "H100",
                                   "tensor_parallel_size": 1}, where="test")
    rec = recommend(RouteInputs(np.array(CURVE), batch_mix={1: 0.5, 32: 0.5}, observed_tokens_per_second=250.0,
                    observed_latency_source="test"), dep)
    assert rec.anchor.source == "observed"
    deployed = rec.candidates[rec.deployed_gamma]
    assert deployed.tokens_per_second == pytest.approx(250.0, rel=1e-6)
    # the model's rate tops out below the observed one: no anchor is invented
    assert solve_observed_rate(lambda b: min(b, 100.0), 250.0, 118.0) is None
    assert solve_observed_rate(lambda b: 2.0 * b, 250.0, 118.0) == pytest.approx(125.0)
    assert Anchor(None, "measured table").describe() == "anchor: the measured table's own step times"


def test_the_drafters_defaults_are_said_when_used(capsys, tmp_path, monkeypatch):
    """A route known only from ingest, without a config: dspark, 0.10 and the flat profile —
    which the output names as defaults, since the deploy line's method is then the default's.
    A config that sets all three says nothing of them."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "chat", "--per-request",
                                          str(per_request_file(tmp_path, itl_ms=2.5))])
    assert code == 0, err
    code, console, err = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--window", "30d"])
    assert code == 0, err
    assert ("drafter figures: method dspark (default), draft_cost 0.1 (default), cost_profile flat (default) — "
            "set them for your engine" in console)
    code, out, _ = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--window", "30d", "--json"])
    figures = json.loads(out)["profile_figures"]
    assert [figures[k]["source"] for k in ("method", "draft_cost", "cost_profile")] == ["default"] * 3
    (tmp_path / "specdec.toml").write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.05\ncost_profile = "flat"\n')
    code, console, err = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--window", "30d"])
    assert code == 0, err
    assert "drafter figures" not in console


def test_a_table_anchors_itself_and_says_a_configured_baseline_is_not_used(tmp_path):
    """A measured table's T(1, 1) is the plain decode: a baseline_tokens_per_second beside it
    changes nothing, and the anchor says so instead of passing over it in silence."""
    from model.anchor import configured_or_default

    table = tmp_path / "steps.csv"
    table.write_text("batch_size,tokens_per_request,path,seconds\n1,1,stock,0.01\n1,2,stock,0.011\n")
    told = Deployment.from_mapping({"cost_profile": str(table), "baseline_tokens_per_second": 116.5}, where="test")
    anchor = configured_or_default(told)
    assert anchor.baseline_tokens_per_second is None
    assert anchor.describe() == ("anchor: the measured table's own step times (baseline_tokens_per_second 116.5 in "
                                 "the config is not used: the table's T(1, 1) is the plain decode)")
    untold = configured_or_default(Deployment.from_mapping({"cost_profile": str(table)}, where="test"))
    assert untold.describe() == "anchor: the measured table's own step times"


def test_the_measured_speedup_marks_the_table_only_where_the_table_is_per_user_mean(capsys, tmp_path):
    """The measured ratio is of mean per-user rates: beside the deployed row on interactivity,
    its own line (not the row) on throughput, whose speedups are tokens per GPU-second; a
    ratio below 1 measured on both sides is a warning."""
    config = 'method = "ngram"\nbaseline_tokens_per_second = 500\ncost_profile = "flat"\ndraft_overhead = 0\n'
    for objective in ("interactivity", "throughput"):
        (tmp_path / objective).mkdir()
        doc, console = tune_ingested(capsys, tmp_path / objective, per_request_file(tmp_path, itl_ms=2.5),
                                     config + f'objective = "{objective}"\n')
        measured = doc["deployed_speedup_measured"]
        assert measured["value"] == pytest.approx(400 / 500) and measured["carried_by"] is None
        assert measured["slower_than_plain_decode"] is True
        assert f"warning: {measured['summary']}" in console and "runs slower than plain decode" in console
        marked = [line for line in console.splitlines() if "deployed (measured 0.80x)" in line]
        assert len(marked) == (objective == "interactivity"), console


def test_the_lines_that_rest_on_default_figures_say_so_by_a_flag_not_by_their_words():
    """The dashboard warns on the header lines resting on defaults: the default anchor, an
    observed anchor carried to gamma 0 on default figures (whose words hold no "DEFAULT"), the
    roofline's default model or GPU, the drafter's defaults; a configured line is a caption."""
    from model.anchor import DEFAULT, OBSERVED, described_lines

    method = {"method": {"value": "ngram", "source": "configured"}}
    flags = dict(described_lines(Anchor(118.0, DEFAULT, "Kimi K3 on 16 GB300"), method))
    assert list(flags.values()) == [True]
    observed = Anchor(250.0, OBSERVED, "per-request latency", 3, ("model", "gpu"))
    ((line, on_defaults),) = described_lines(observed, method)
    assert on_defaults and "DEFAULT" not in line and "(default)" not in line
    assert described_lines(Anchor(284.8, "configured", ""), method)[0][1] is False
    roofline = {**method, "profile": "roofline", "model": {"value": "llama-3.1-8b", "source": "configured"},
                "gpu": {"value": "H100", "source": "configured"},
                "tensor_parallel_size": {"value": 1, "source": DEFAULT}}
    assert described_lines(None, roofline) == [(described_lines(None, roofline)[0][0], True)]
    roofline["tensor_parallel_size"]["source"] = "configured"
    assert [flag for _, flag in described_lines(None, roofline)] == [False]
