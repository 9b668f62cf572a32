"""acceptance.step_replay: AL at another γ from the deployed γ's own steps, replayed in order."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptance.step_replay import (
    StepSequence,
    bonus_acceptance,
    expected_tokens_by_replay,
    positions,
    replay,
    replay_by_gamma,
    resampled_tokens,
    survival_and_reach,
)
from model.extrapolate import TAIL_MODELS, bonus_acceptances
from model.speedup import expected_tokens_by_gamma
from support import RECENT, engine_steps, runs_of_text, tune_ingested, vllm_payload


def al(sequences) -> float:
    d = sum(len(s.drafted) for s in sequences)
    return 1.0 + sum(sum(s.accepted) for s in sequences) / d


def test_positions_spell_out_the_steps():
    seq = StepSequence(3, drafted=(3, 2, 3), accepted=(1, 2, 3))
    x, remaining = positions(seq)
    # step 1: accepted, rejected; step 2 (a short draft, all taken): 1, 1, its end; step 3: 1, 1, 1, bonus
    assert x.tolist() == [1, 0, 1, 1, -1, 1, 1, 1, -1]
    assert remaining.tolist() == [-1, -1, 2, 1, 0, -1, -1, -1, -1]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6).flatmap(lambda g: st.tuples(st.just(g), st.lists(
    st.integers(0, g).flatmap(lambda d: st.tuples(st.just(d), st.integers(0, d))), min_size=1, max_size=40))))
def test_replay_at_the_deployed_gamma_gives_back_its_own_counts(case):
    gamma, steps = case
    steps = [(max(d, 1), min(a, max(d, 1))) for d, a in steps]
    seq = StepSequence(gamma, tuple(d for d, _ in steps), tuple(a for _, a in steps))
    c = replay(seq, gamma, q=0.37)
    assert c.drafts == pytest.approx(len(steps))
    assert c.accepted == pytest.approx(sum(a for _, a in steps))
    assert c.draft_tokens == pytest.approx(sum(d for d, _ in steps))
    assert c.undrafted == pytest.approx(0.0)


def test_on_text_in_runs_the_replay_finds_what_the_engine_does_and_the_cut_curve_does_not():
    rng = np.random.default_rng(7)
    texts = [runs_of_text(rng, 400, stay_right=0.93, stay_wrong=0.6) for _ in range(60)]
    deployed = [engine_steps(x, 3) for x in texts]
    replayed = expected_tokens_by_replay(deployed, 7)
    # the survival curve at γ 3, cut to a shorter γ
    d = sum(len(s.drafted) for s in deployed)
    survival = [sum(sum(1 for a in s.accepted if a >= k) for s in deployed) / d for k in (1, 2, 3)]
    cut = expected_tokens_by_gamma(np.array(survival), 3)
    for g in (1, 2):
        truth = al([engine_steps(x, g) for x in texts])
        assert replayed[g] == pytest.approx(truth, rel=0.01)
        assert abs(cut[g] / truth - 1) > 0.03  # where the drafts start moves with γ
    for g in (5, 7):  # past the deployed γ, the bonus positions are drawn with q
        truth = al([engine_steps(x, g) for x in texts])
        assert replayed[g] == pytest.approx(truth, rel=0.03)


def test_bonus_acceptance_is_the_last_conditional_among_drafts_that_reached():
    seqs = [StepSequence(3, (3, 3, 3, 1), (3, 2, 1, 1))]
    # position 2 reached by 3 drafts, accepted by 2; position 3 reached by 3, accepted by 1
    assert bonus_acceptance(seqs) == pytest.approx((1 / 3) / (2 / 3))


def test_the_tail_models_guess_the_bonus_position_and_last_is_the_one_seen():
    # drafts of a route whose acceptance falls with the position, some cut short by the drafter
    seqs = [StepSequence(3, (3, 3, 3, 2, 3, 1), (3, 2, 1, 2, 0, 1)), StepSequence(3, (3, 3), (3, 3))]
    survival, reach = survival_and_reach(seqs)
    assert survival == pytest.approx([7 / 8, 5 / 8, 3 / 8])
    assert reach == pytest.approx([1, 7 / 8, 6 / 8])
    guesses = dict(zip(TAIL_MODELS, bonus_acceptances(survival, reach)))
    assert guesses["last"] == pytest.approx(bonus_acceptance(seqs))  # one definition, two readers
    assert guesses["trend"] < guesses["last"]  # the conditionals fall: the trend carries the fall on
    assert all(0 <= q <= 1 for q in guesses.values())


def test_resampled_tokens_vary_around_the_point():
    rng = np.random.default_rng(3)
    seqs = [engine_steps(runs_of_text(rng, 120, 0.9, 0.5), 3) for _ in range(40)]
    per_request = replay_by_gamma(seqs, 5)
    res = resampled_tokens(per_request, 400)
    point = expected_tokens_by_replay(seqs, 5)
    assert res.shape == (400, 6)
    assert np.all(res[:, 0] == 1.0)
    assert np.quantile(res[:, 3], 0.05) < point[3] < np.quantile(res[:, 3], 0.95)
    assert np.std(res[:, 5]) > 0


def detailed_requests(tmp_path, seqs: list[StepSequence]):
    lines = []
    for i, seq in enumerate(seqs):
        payload = vllm_payload(list(zip(seq.drafted, seq.accepted)), seq.gamma, detailed=True)
        lines.append(json.dumps({"id": f"cmpl-{i}", "route": "chat", "time": RECENT + i,
                                 "metrics": {"mean_itl_ms": 2.5, "speculative_decoding": payload}}))
    path = tmp_path / "detailed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tune_gamma_prices_other_gammas_by_the_replay_of_detailed_requests(capsys, tmp_path):
    rng = np.random.default_rng(11)
    seqs = [engine_steps(runs_of_text(rng, 200, 0.93, 0.6), 3) for _ in range(80)]
    doc, console = tune_ingested(capsys, tmp_path, detailed_requests(tmp_path, seqs),
                                 'method = "eagle3"\ncost_profile = "flat"\n')
    assert doc["acceptance_model"] == "replay"
    # the point is the mean of one replay per tail model's guess of the unseen bonus positions
    guesses = bonus_acceptances(*survival_and_reach(seqs))
    replayed = np.mean([expected_tokens_by_replay(seqs, 5, q) for q in guesses], axis=0)
    by_gamma = {c["gamma"]: c for c in doc["candidates"]}
    for g in range(6):
        assert by_gamma[g]["expected_tokens"] == pytest.approx(replayed[g])
    lows = [expected_tokens_by_replay(seqs, 5, min(guesses))[g] for g in range(6)]
    assert lows[5] < by_gamma[5]["expected_tokens"] or min(guesses) == max(guesses)
    assert by_gamma[3]["expected_tokens"] == pytest.approx(doc["observed"]["mean_acceptance_length"])
    assert "drafted steps replayed at each gamma" in console


def test_a_request_without_drafts_does_not_hide_the_others_steps():
    from acceptance.per_request import parse_per_request_lines

    none = {"route": "r", "speculative_decoding": {
        "acceptance_histogram": [0, 0, 0, 0], "num_spec_steps": 0, "num_accepted_draft_tokens": 0,
        "num_draft_tokens": 0, "num_spec_tokens": 3, "per_step_accepted": None, "per_step_drafted": None}}
    record = parse_per_request_lines([json.dumps(none)], default_route=None, default_time=1.8e9,
                                     source="t").records[0]
    assert record.steps == ((), ())
    assert record.counts.draft_tokens_per_position == (0, 0, 0)
    seqs = [StepSequence(3, (3, 3), (3, 1)), StepSequence(3, *record.steps)]
    assert expected_tokens_by_replay(seqs, 3)[3] == pytest.approx(1 + 4 / 2)
