"""How the best γ moves with load (model/load.py): per batch size of the route's mix, where the
fleet's γ stops paying, and the num_speculative_tokens_per_batch_size schedule that follows."""

from __future__ import annotations

import numpy as np
import pytest

from model.deployment import Deployment
from model.recommend import RouteInputs, recommend
from specdec.report import load_lines

BATCHES = (1, 2, 4, 8, 16, 32)
MEMORY_S, PER_TOKEN_S, DRAFT_COST = 0.015, 0.0015, 0.1


def _table(tmp_path):
    """A target whose step is memory-bound at batch 1 and compute-bound at 32: each token a
    step verifies costs 1.5 ms of compute on top of a 15 ms weight read (the shape of
    vllm#26504's A40 sweep: the best k falls from 4+ at batch 1 to off at batch 32)."""
    path = tmp_path / "steps.csv"
    rows = ["batch_size,tokens_per_request,path,seconds"]
    rows += [f"{b},{q},stock,{MEMORY_S + PER_TOKEN_S * b * q:.6f}" for b in BATCHES for q in range(1, 18)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _step(b: int, k: int) -> float:
    """The table's verify step plus the sequential drafter's k·c of the plain step."""
    plain = MEMORY_S + PER_TOKEN_S * b
    return MEMORY_S + PER_TOKEN_S * b * (k + 1) + k * DRAFT_COST * plain


def test_the_best_gamma_falls_with_the_batch_and_the_gamma_stops_paying(tmp_path):
    a = 0.88 ** np.arange(1, 5)  # acceptance flat in the batch, as in that sweep
    dep = Deployment(method="draft_model", draft_cost=DRAFT_COST, cost_profile=_table(tmp_path))
    rec = recommend(RouteInputs(a, deployed_gamma=4, batch_mix={b: 1.0 for b in BATCHES}), dep)
    load = rec.load
    assert load.gamma == 4  # no resamples: keep the deployed γ, the one the view is about
    al = np.array([1.0 + a[:k].sum() if k <= 4 else np.nan for k in range(5)])
    for p in load.points:
        s = {k: al[k] * _step(p.batch_size, 0) / _step(p.batch_size, k) for k in range(5)}
        assert p.speedup_at_gamma == pytest.approx(s[4])
        assert p.speedup_at_best >= max(s.values()) - 1e-12  # over every candidate, 5..16 extrapolated too
    best = [p.best_gamma for p in load.points]
    assert best == sorted(best, reverse=True)
    assert best[0] >= 4
    assert best[-1] <= 1
    # γ 4 loses against plain decoding from batch 32 on, and the schedule steps down to it
    losing = [p.batch_size for p in load.points if p.speedup_at_gamma <= 1.0]
    assert load.stops_paying_at == min(losing) == 32
    assert load.schedule[0][0] == 1
    assert load.schedule[-1][1] == 32
    ks = {b: next(g for lo, hi, g in load.schedule if lo <= b <= hi) for b in BATCHES}
    for b, k in ks.items():  # per batch size the best K ≤ 4
        s = [al[j] * _step(b, 0) / _step(b, j) for j in range(5)]
        assert k == int(np.argmax(s))
    doc = rec.to_dict()["load"]
    assert doc["stops_paying_at"] == 32
    assert [p["batch_size"] for p in doc["batch_sizes"]] == list(BATCHES)
    lines = load_lines(doc)
    assert lines[0].startswith(f"by load: best gamma {best[0]} at batch 1, ")
    assert lines[0].endswith("gamma 4 stops paying at batch 32")
    assert "num_speculative_tokens_per_batch_size schedule that follows for gamma 4: batch 1-" in lines[1]


def test_one_batch_size_says_nothing_of_load():
    a = 0.8 ** np.arange(1, 4)
    rec = recommend(RouteInputs(a, deployed_gamma=3), Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat"))
    assert [p.batch_size for p in rec.load.points] == [1]
    assert load_lines(rec.to_dict()["load"]) == []


def test_no_schedule_is_offered_for_a_method_vllm_drops_it_for(tmp_path):
    """The same falling best γ on an n-gram route asks for a schedule; on a suffix route vLLM
    0.33 would drop it without an error (it runs suffix on its V1 model runner, which keeps one
    only for ngram, eagle, eagle3, mtp, draft_model and dflash): no schedule, and it says why."""
    a = 0.88 ** np.arange(1, 5)
    docs = {}
    for method in ("ngram", "suffix"):
        dep = Deployment(method=method, draft_overhead=0.05, cost_profile=_table(tmp_path))
        docs[method] = recommend(RouteInputs(a, deployed_gamma=4, batch_mix={b: 1.0 for b in BATCHES}), dep).to_dict()
    ngram, suffix = docs["ngram"]["load"], docs["suffix"]["load"]
    assert ngram["schedule"] and ngram["schedule_dropped_for"] is None
    assert suffix["schedule"] is None and suffix["schedule_dropped_for"] == "suffix"
    assert docs["suffix"]["schedule"] is None
    assert "num_speculative_tokens_per_batch_size" not in (docs["suffix"]["vllm"]["speculative_config"] or {})
    assert [p["best_gamma"] for p in suffix["batch_sizes"]] == [p["best_gamma"] for p in ngram["batch_sizes"]]
    (line,) = [x for x in load_lines(suffix) if x.startswith("no num_speculative_tokens_per_batch_size")]
    assert "vLLM 0.33 drops it without an error for suffix" in line and "gamma 4 at every batch size" in line
