"""`specdec calibrate`: the benchmark plan, and ingest of `vllm bench serve --save-result`
files (vLLM 0.33 format, vllm/benchmarks/serve.py) into the measured cost table."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from model.calibrate import (
    META_BATCH_SIZE,
    META_GAMMA,
    META_PATH,
    BenchWorkload,
    CalibrationInputError,
    calibration_plan,
    format_plan,
    ingest_results,
)
from model.deployment import Deployment
from model.drafters import drafter_for
from model.profiles import load_table
from model.specialized import runs_specialized
from specdec.cli import main as specdec_main

SURVIVAL = [0.8, 0.6, 0.45]


def bench_result(gamma: int, batch: int, path: str, itl_ms: float, acceptance_length: float | None = None) -> dict:
    """A result as vLLM 0.33's `vllm bench serve --save-result --metadata ...` writes it:
    setup keys, then the --metadata pairs (string values), traffic keys, then the
    benchmark's metrics (lists such as itls dropped without --save-detailed)."""
    doc = {
        "date": "20260101-120000",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": "moonshotai/Kimi-K3",
        "tokenizer_id": "moonshotai/Kimi-K3",
        "num_prompts": 4 * batch,
        META_GAMMA: str(gamma),
        META_BATCH_SIZE: str(batch),
        META_PATH: path,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": batch,
        "duration": 12.5,
        "completed": 4 * batch,
        "failed": 0,
        "total_input_tokens": 128 * batch,
        "total_output_tokens": 2048 * batch,
        "request_throughput": 1.0,
        "request_goodput": None,
        "output_throughput": 100.0,
        "total_token_throughput": 110.0,
        "max_output_tokens_per_s": 120.0,
        "max_concurrent_requests": batch,
        "rtfx": 0.0,
        "latencies": [1.0] * 4 * batch,
        "queue_times": [0.0] * 4 * batch,
        "mean_ttft_ms": 40.0,
        "median_ttft_ms": 39.0,
        "std_ttft_ms": 2.0,
        "p99_ttft_ms": 45.0,
        "mean_tpot_ms": itl_ms / (acceptance_length or 1.0),
        "median_tpot_ms": itl_ms / (acceptance_length or 1.0),
        "std_tpot_ms": 0.1,
        "p99_tpot_ms": itl_ms,
        "mean_itl_ms": itl_ms * 1.02,
        "median_itl_ms": itl_ms,
        "std_itl_ms": 0.3,
        "p99_itl_ms": itl_ms * 1.5,
    }
    if acceptance_length is not None:
        doc.update(
            spec_decode_acceptance_rate=0.6,
            spec_decode_acceptance_length=acceptance_length,
            spec_decode_num_drafts=1000,
            spec_decode_draft_tokens=1000 * gamma,
            spec_decode_accepted_tokens=int(1000 * (acceptance_length - 1)),
            spec_decode_per_position_acceptance_rates=SURVIVAL[:gamma],
        )
    return doc


def true_target_s(b: int, q: int) -> float:
    """A made-up measured target step: grows with the tokens verified."""
    return 0.008 + 0.00004 * b * q + 0.0005 * (q - 1)


def write_runs(tmp_path, gammas, batches, draft_cost, method="dspark"):
    drafter = drafter_for(method)
    files = []
    for g in gammas:
        for b in batches:
            draft = float(drafter.draft_time_factor(g, draft_cost)) * true_target_s(b, 1)
            step_ms = (true_target_s(b, g + 1) + draft) * 1000
            f = tmp_path / f"specdec-stock-g{g}-b{b}.json"
            f.write_text(json.dumps(bench_result(g, b, "stock", step_ms, 1 + sum(SURVIVAL[:g]) if g else None)))
            files.append(f)
    return files


# -- plan ---------------------------------------------------------------------------------


def test_plan_servers_replay_survival_and_speculation_off():
    plan = calibration_plan(Deployment(), SURVIVAL, model="m", gammas=[1, 3, 5], batch_sizes=[1, 8])
    by_gamma = {s.gamma: s for s in plan.servers}
    assert sorted(by_gamma) == [0, 1, 3, 5]  # γ = 0 always measured
    assert by_gamma[0].speculative_config is None
    assert "--speculative-config" not in by_gamma[0].serve_command
    for g in (1, 3):
        spec = by_gamma[g].speculative_config
        assert spec["rejection_sample_method"] == "synthetic"
        assert spec["num_speculative_tokens"] == g
        assert spec["synthetic_acceptance_rates"] == SURVIVAL[:g]
        assert not by_gamma[g].extrapolated
        # the serve command carries exactly that config, shell-quoted
        argv = shlex.split(by_gamma[g].serve_command)
        assert json.loads(argv[argv.index("--speculative-config") + 1]) == spec
    rates5 = by_gamma[5].synthetic_acceptance_rates
    assert by_gamma[5].extrapolated
    assert len(rates5) == 5
    assert list(rates5[:3]) == SURVIVAL
    assert all(np.diff(rates5) <= 0)
    assert {(r.gamma, r.batch_size) for r in plan.runs} == {(g, b) for g in (0, 1, 3, 5) for b in (1, 8)}
    for r in plan.runs:
        argv = shlex.split(r.bench_command)
        assert argv[:3] == ["vllm", "bench", "serve"]
        assert "--save-result" in argv
        assert argv[argv.index("--max-concurrency") + 1] == str(r.batch_size)
        meta = argv[argv.index("--metadata") + 1:][:3]
        assert meta == [f"{META_GAMMA}={r.gamma}", f"{META_BATCH_SIZE}={r.batch_size}", f"{META_PATH}=stock"]
    text = format_plan(plan)
    assert text.count("never a serving one") == 2  # first and last line
    assert "corrupts outputs" in text
    for s in plan.servers:
        assert s.serve_command in text
    for r in plan.runs:
        assert r.bench_command in text


def test_plan_runs_send_the_workload_asked_for():
    default = calibration_plan(Deployment(), SURVIVAL, model="m", gammas=[1], batch_sizes=[2])
    argv = shlex.split(default.runs[0].bench_command)
    assert [argv[argv.index(flag) + 1] for flag in ("--random-input-len", "--random-output-len", "--num-prompts")] \
        == ["32", "512", "8"]  # BenchWorkload's defaults: 4 prompts per concurrent slot
    small = calibration_plan(Deployment(), SURVIVAL, model="m", gammas=[1], batch_sizes=[2],
                             workload=BenchWorkload(input_len=7, output_len=9, rounds=3))
    for r in small.runs:
        argv = shlex.split(r.bench_command)
        assert [argv[argv.index(flag) + 1] for flag in ("--random-input-len", "--random-output-len", "--num-prompts")] \
            == ["7", "9", str(3 * r.batch_size)]


def test_plan_latency_specialized_measures_stock_unit_and_paths():
    dep = Deployment(decode_backend="latency_specialized")
    plan = calibration_plan(dep, SURVIVAL, model="m", gammas=[3], batch_sizes=[1, 16, 32])
    stock0 = [s for s in plan.servers if s.gamma == 0 and s.decode_backend == "auto"]
    assert len(stock0) == 1
    assert "--additional-config" not in stock0[0].serve_command
    assert {(r.batch_size, r.path) for r in plan.runs if r.gamma == 0 and r.path == "stock"} >= {(1, "stock"), (16, "stock"), (32, "stock")}
    for r in plan.runs:
        if r.gamma == 3:
            expected = "specialized" if runs_specialized(r.batch_size, 4) else "stock"
            assert r.path == expected
    assert {r.path for r in plan.runs if r.gamma == 3} == {"specialized", "stock"}  # B=32·4 > 64 runs stock


def test_plan_goes_past_the_observed_gamma_as_asked_and_refuses_bad_survival():
    default = calibration_plan(Deployment(), SURVIVAL, model="m")
    assert max(s.gamma for s in default.servers) == len(SURVIVAL) + 2
    far = {s.gamma: s for s in calibration_plan(Deployment(), SURVIVAL, model="m", gammas=[7]).servers}  # dspark: its block
    assert far[7].extrapolated and len(far[7].synthetic_acceptance_rates) == 7
    assert all(np.diff(far[7].synthetic_acceptance_rates) <= 0)
    with pytest.raises(CalibrationInputError, match="survival"):
        calibration_plan(Deployment(), [0.5, 1.4], model="m")


# -- ingest -------------------------------------------------------------------------------


@pytest.mark.parametrize("method,draft_cost", [("dspark", 0.10), ("eagle3", 0.15), ("ngram", 0.0)])
def test_ingest_recovers_target_step_times(tmp_path, method, draft_cost):
    gammas, batches = [0, 1, 3], [1, 4, 16]
    files = write_runs(tmp_path, gammas, batches, draft_cost, method)
    out = tmp_path / "cost_table.csv"
    result = ingest_results(files, Deployment(method=method, draft_cost=draft_cost), out=out)
    assert len(result.steps) == 9
    assert len(result.rows) == 9
    table = load_table(out)  # the format model/profiles.py reads
    for g in gammas:
        for b in batches:
            got = float(table.step_time_s(b, g + 1))
            assert got == pytest.approx(true_target_s(b, g + 1), rel=1e-6)


def test_ingest_reads_append_result_lines(tmp_path):
    f = tmp_path / "all.json"
    lines = [json.dumps(bench_result(g, 2, "stock", 10.0 + g, 1.5 if g else None)) for g in (0, 1)]
    f.write_text("\n".join(lines))
    result = ingest_results([f], Deployment(method="ngram"))
    assert sorted((s.gamma, s.step_seconds) for s in result.steps) == [(0, 0.010), (1, 0.011)]
    assert [s.acceptance_length for s in sorted(result.steps, key=lambda s: s.gamma)] == [None, 1.5]


def test_ingest_rejects_another_shape_with_one_line(tmp_path):
    other = tmp_path / "latency.json"  # what `vllm bench latency --output-json` writes
    other.write_text(json.dumps({"avg_latency": 1.2, "latencies": [1.1, 1.3], "percentiles": {"50": 1.2}}))
    with pytest.raises(CalibrationInputError) as e:
        ingest_results([other], Deployment())
    msg = str(e.value)
    assert "\n" not in msg
    assert str(other) in msg
    assert "--save-result" in msg
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]")
    with pytest.raises(CalibrationInputError, match="JSON object"):
        ingest_results([not_object], Deployment())


def test_ingest_needs_metadata_and_stock_unit(tmp_path):
    doc = bench_result(1, 2, "stock", 10.0, 1.5)
    del doc[META_GAMMA]
    f = tmp_path / "nometa.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CalibrationInputError, match="calibrate plan"):
        ingest_results([f], Deployment())
    only_spec = tmp_path / "g1.json"
    only_spec.write_text(json.dumps(bench_result(1, 2, "stock", 10.0, 1.5)))
    with pytest.raises(CalibrationInputError, match="no γ = 0 stock run"):
        ingest_results([only_spec], Deployment())


def test_cli_ingest_bad_file_exits_2_and_keeps_old_table(tmp_path, capsys):
    files = write_runs(tmp_path, [0, 1], [1], 0.10)
    out = tmp_path / "table.csv"
    assert specdec_main(["calibrate", "ingest", *map(str, files), "--out", str(out)]) == 0
    before = out.read_text()
    assert before.startswith("batch_size,tokens_per_request,path,seconds\n")
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    capsys.readouterr()
    assert specdec_main(["calibrate", "ingest", *map(str, files), str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "bad.json" in err
    assert out.read_text() == before  # stored data survives bad input


def test_cli_plan_json(capsys):
    assert specdec_main(["calibrate", "plan", "--model", "m", "--survival", "0.8,0.6", "--gammas", "2",
                               "--batch-sizes", "1,2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 2
    assert "never a serving one" in doc["warning"]
    assert [s["gamma"] for s in doc["servers"]] == [0, 2]
    assert len(doc["runs"]) == 4


def test_a_plan_and_a_table_on_default_figures_say_which(capsys, tmp_path):
    """The servers a plan prints and the draft time a table subtracts rest on the method, the TP
    size and the draft cost: when the user gave none, the output names the defaults it used."""
    args = ["calibrate", "plan", "--model", "m", "--survival", "0.8,0.6", "--gammas", "2", "--batch-sizes", "1,2"]
    assert specdec_main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("on defaults (--method dspark, --tensor-parallel-size 16: Kimi K3's)")
    assert "--tensor-parallel-size 16" in out
    assert specdec_main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["defaults"] == ["--method dspark", "--tensor-parallel-size 16"]
    assert specdec_main(args + ["--method", "eagle3", "--tensor-parallel-size", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["defaults"] == [] and "--tensor-parallel-size 1" in doc["servers"][0]["serve_command"]


def test_a_table_names_the_default_price_of_the_drafter_it_read(capsys, tmp_path):
    """The table subtracts the drafter's time: an ngram proposer's is draft_overhead (draft_cost
    it ignores), a parallel drafter's draft_cost; the default named is the one read."""
    files = [str(f) for f in write_runs(tmp_path, [0, 3], [1, 8], 0.1)]
    assert specdec_main(["calibrate", "ingest", *files, "--method", "ngram", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["defaults"] == ["--draft-overhead 0.0"]
    assert specdec_main(["calibrate", "ingest", *files, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["defaults"] == ["--method dspark", "--draft-cost 0.1"]
