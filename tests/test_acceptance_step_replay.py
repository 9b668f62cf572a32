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
    acceptance_length_by_replay,
    positions,
    replay,
    replay_by_gamma,
    replay_positions,
    resampled_tokens,
    survival_and_reach,
)
from acceptance.definitions import acceptance_length_by_gamma
from model.extrapolate import TAIL_MODELS, bonus_acceptances
from support import RECENT, engine_steps, runs_of_text, tune_ingested, vllm_payload


# ---------------------------------------------------------------- the pure-Python reference
# The replay as it was first written: dynamic programming over one request's positions, one γ'
# at a time, in Python loops. The module's array code (segments, a trie of their suffixes)
# must give the same counts to float rounding.

def reference_positions(seq: StepSequence) -> tuple[np.ndarray, np.ndarray]:
    x: list[int] = []
    remaining: list[int] = []
    for d, j in zip(seq.drafted, seq.accepted):
        full = d == seq.gamma
        for m in range(j + 1):
            remaining.append(-1 if full else d - m)
        x.extend([1] * j)
        x.append(0 if j < d else -1)
    return np.asarray(x, dtype=np.int8), np.asarray(remaining, dtype=np.int64)


def reference_replay_positions(x, remaining, gamma: int, q: float) -> np.ndarray:
    n = x.size
    f = np.zeros((n + gamma + 2, 4))
    for p in range(n - 1, -1, -1):
        budget = gamma if remaining[p] == -1 else min(gamma, int(remaining[p]))
        if budget <= 0:
            f[p] = f[p + 1] + (0.0, 0.0, 0.0, 1.0)
            continue
        length = min(budget, n - p)
        total = np.array([1.0, 0.0, float(budget), 0.0])
        alive = 1.0
        for k in range(length):
            xk = x[p + k]
            stop = alive if xk == 0 else alive * (1.0 - q) if xk == -1 else 0.0
            if stop:
                total += stop * (np.array([0.0, k, 0.0, 0.0]) + f[p + k + 1])
            alive -= stop
        if alive:
            total += alive * (np.array([0.0, length, 0.0, 0.0]) + f[p + length + 1])
        f[p] = total
    return f[0]


def reference_replay_by_gamma(sequences, top: int, q: float) -> np.ndarray:
    out = np.zeros((len(sequences), top + 1, 4))
    for i, seq in enumerate(sequences):
        x, remaining = reference_positions(seq)
        for g in range(1, top + 1):
            out[i, g] = reference_replay_positions(x, remaining, g, q)
    return out


def reference_bonus_acceptance(sequences) -> float:
    gamma = sequences[0].gamma
    reached, accepted = np.zeros(gamma + 1), np.zeros(gamma + 1)
    for seq in sequences:
        for d, j in zip(seq.drafted, seq.accepted):
            reached[1:d + 1] += 1
            accepted[1:j + 1] += 1
    if gamma == 1:
        return float(accepted[1] / reached[1]) if reached[1] else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        among = accepted / np.where(reached > 0, reached, 1.0)
    if reached[gamma] == 0 or among[gamma - 1] <= 0:
        return 1.0
    return float(min(1.0, among[gamma] / among[gamma - 1]))


def reference_survival_and_reach(sequences) -> tuple[np.ndarray, np.ndarray]:
    gamma = sequences[0].gamma
    accepted, reached, drafts = np.zeros(gamma), np.zeros(gamma), 0
    for seq in sequences:
        drafts += len(seq.drafted)
        for d, j in zip(seq.drafted, seq.accepted):
            accepted[:j] += 1
            reached[:d] += 1
    return accepted / max(drafts, 1), reached / max(drafts, 1)


def reference_resampled_tokens(per_request: np.ndarray, n_resamples: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    r = per_request.shape[0]
    weights = np.stack([np.bincount(rng.integers(0, r, r), minlength=r) for _ in range(n_resamples)]).astype(float)
    totals = np.einsum("nr,rgc->ngc", weights, per_request)
    d, a = totals[..., 0], totals[..., 1]
    return 1.0 + np.where(d > 0, a / np.where(d > 0, d, 1.0), 0.0)


def step_lists(gamma: int, max_steps: int):
    """(drafted, accepted) lists at ``gamma``: full drafts most often, as an n-gram drafter's,
    fully accepted about as often as not (segments of several steps), some shorter drafts and
    some with no token at all."""
    step = st.one_of(st.integers(0, gamma).map(lambda j: (gamma, j)),
                     st.just((gamma, gamma)),
                     st.integers(0, gamma).flatmap(lambda d: st.tuples(st.just(d), st.integers(0, d))))
    return st.lists(step, max_size=max_steps).map(lambda steps: (tuple(d for d, _ in steps),
                                                                 tuple(a for _, a in steps)))


@st.composite
def replay_cases(draw, max_requests: int = 6, max_steps: int = 40):
    """Requests of varying γ (a list is mostly one γ, sometimes several), lengths, the γ' to
    replay up to, and q (0 and 1 included)."""
    gamma = draw(st.integers(1, 7))
    gammas = st.one_of(st.just(gamma), st.integers(1, 7))
    sequences = draw(st.lists(gammas.flatmap(lambda g: step_lists(g, max_steps).map(lambda s: StepSequence(g, *s))),
                              min_size=1, max_size=max_requests))
    top = draw(st.integers(1, 12))
    q = draw(st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0)))
    return sequences, top, q


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
    replayed = acceptance_length_by_replay(deployed, 7)
    # the survival curve at γ 3, cut to a shorter γ
    d = sum(len(s.drafted) for s in deployed)
    survival = [sum(sum(1 for a in s.accepted if a >= k) for s in deployed) / d for k in (1, 2, 3)]
    cut = acceptance_length_by_gamma(np.array(survival), 3)
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
    point = acceptance_length_by_replay(seqs, 5)
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
    replayed = np.mean([acceptance_length_by_replay(seqs, 5, q) for q in guesses], axis=0)
    by_gamma = {c["gamma"]: c for c in doc["candidates"]}
    for g in range(6):
        assert by_gamma[g]["expected_tokens"] == pytest.approx(replayed[g])
    lows = [acceptance_length_by_replay(seqs, 5, min(guesses))[g] for g in range(6)]
    assert lows[5] < by_gamma[5]["expected_tokens"] or min(guesses) == max(guesses)
    assert by_gamma[3]["expected_tokens"] == pytest.approx(doc["observed"]["mean_acceptance_length"])
    assert doc["replayed_requests"] == 80
    assert "the 80 requests' own drafted steps replayed at each gamma" in console
    assert "too few to resample" not in console  # 80 requests carry an interval


def test_one_request_s_replay_says_its_rows_past_the_deployed_gamma_are_that_text_alone(tmp_path, capsys):
    rng = np.random.default_rng(3)
    doc, console = tune_ingested(capsys, tmp_path, detailed_requests(tmp_path, [engine_steps(
        runs_of_text(rng, 200, 0.93, 0.6), 3)]), 'method = "eagle3"\ncost_profile = "flat"\n')
    assert doc["acceptance_model"] == "replay" and doc["replayed_requests"] == 1
    assert doc["observed"]["mean_acceptance_length_interval"] == [None, None]
    assert ("the request's own drafted steps replayed at each gamma (per-request detailed metrics), not the survival "
            "curve cut or extended; too few to resample: the rows past gamma 3 follow its text alone") in console


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
    assert acceptance_length_by_replay(seqs, 3)[3] == pytest.approx(1 + 4 / 2)


@settings(max_examples=300, deadline=None)
@given(replay_cases())
def test_the_array_replay_is_the_reference_dynamic_programming(case):
    sequences, top, q = case
    expected = reference_replay_by_gamma(sequences, top, q)
    got = replay_by_gamma(sequences, top, q)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(replay_cases(max_requests=2, max_steps=60), st.integers(1, 12))
def test_positions_and_one_request_replay_are_the_reference(case, gamma):
    sequences, _, q = case
    for seq in sequences:
        x, remaining = positions(seq)
        ref_x, ref_remaining = reference_positions(seq)
        assert x.tolist() == ref_x.tolist() and remaining.tolist() == ref_remaining.tolist()
        c = replay_positions(x, remaining, gamma, q)
        np.testing.assert_allclose([c.drafts, c.accepted, c.draft_tokens, c.undrafted],
                                   reference_replay_positions(ref_x, ref_remaining, gamma, q), rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(replay_cases())
def test_the_counted_curves_are_the_reference(case):
    sequences, _, _ = case
    same_gamma = [s for s in sequences if s.gamma == sequences[0].gamma]
    assert bonus_acceptance(same_gamma) == reference_bonus_acceptance(same_gamma)
    for got, expected in zip(survival_and_reach(same_gamma), reference_survival_and_reach(same_gamma)):
        assert got.tolist() == expected.tolist()


def test_a_route_of_many_requests_replays_as_the_reference():
    # n-gram-like requests at γ 5: long runs of full drafts, short drafts, rejections; several q
    rng = np.random.default_rng(5)
    sequences = []
    for _ in range(60):
        x = runs_of_text(rng, int(rng.integers(20, 300)), stay_right=0.92, stay_wrong=0.55)
        seq = engine_steps(x, 5)
        short = rng.random(len(seq.drafted)) < 0.2  # the drafter found fewer tokens to propose
        drafted = tuple(int(rng.integers(a, 6)) if s and a < 5 else d
                        for d, a, s in zip(seq.drafted, seq.accepted, short))
        sequences.append(StepSequence(5, drafted, seq.accepted))
    for q in (0.37, 1.0):
        np.testing.assert_allclose(replay_by_gamma(sequences, 16, q), reference_replay_by_gamma(sequences, 16, q),
                                   rtol=1e-9, atol=1e-9)


def test_the_replay_follows_a_new_list_of_sequences():
    # the arrays of the last list are kept for the next call: another list, or the same list
    # changed, is read anew
    rng = np.random.default_rng(9)
    first = [engine_steps(runs_of_text(rng, 80, 0.9, 0.5), 3) for _ in range(5)]
    second = [engine_steps(runs_of_text(rng, 80, 0.9, 0.5), 3) for _ in range(5)]
    for seqs in (first, second, first):
        np.testing.assert_allclose(replay_by_gamma(seqs, 6, 0.5), reference_replay_by_gamma(seqs, 6, 0.5), rtol=1e-9)
    changed = list(first)
    replay_by_gamma(changed, 6, 0.5)
    changed[2] = second[2]
    np.testing.assert_allclose(replay_by_gamma(changed, 6, 0.5), reference_replay_by_gamma(changed, 6, 0.5),
                               rtol=1e-9)
    assert bonus_acceptance(changed) == reference_bonus_acceptance(changed)


def test_requests_without_steps_replay_to_nothing():
    seqs = [StepSequence(3, (), ()), StepSequence(3, (), ())]
    assert replay_by_gamma(seqs, 4, 0.5).tolist() == np.zeros((2, 5, 4)).tolist()
    assert replay_by_gamma([], 4, 0.5).shape == (0, 5, 4)
    c = replay_positions(np.array([], dtype=np.int8), np.array([], dtype=np.int64), 3, 0.5)
    assert (c.drafts, c.accepted, c.draft_tokens, c.undrafted) == (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("requests", [1, 2, 37, 300])
def test_resampled_tokens_are_the_reference_draws(requests):
    rng = np.random.default_rng(requests)
    per_request = rng.random((3, requests, 6, 4))
    per_request[:, :, 0] = 0.0  # γ' = 0: no drafts
    expected = np.stack([reference_resampled_tokens(p, 40, seed=2) for p in per_request])
    np.testing.assert_allclose(np.stack([resampled_tokens(p, 40, seed=2) for p in per_request]), expected, rtol=1e-12)
    # several replays of the same requests at once: the same draws for each
    np.testing.assert_allclose(resampled_tokens(per_request, 40, seed=2), expected, rtol=1e-12)
    np.testing.assert_allclose(resampled_tokens(per_request[0], 40, seed=3),
                               reference_resampled_tokens(per_request[0], 40, seed=3), rtol=1e-12)


def test_a_step_sequence_outside_its_gamma_is_refused():
    from acceptance.errors import InputError

    for drafted, accepted in (((3, 4), (1, 1)), ((3, 2), (1, 3)), ((3,), (-1,)), ((3, 3), (1,))):
        with pytest.raises(InputError):
            StepSequence(3, drafted, accepted)


def test_step_counts_are_checked_as_the_plain_comparisons_do():
    """StepSequence's check (bytes for tuples of small counts) against min, max and a map, on
    counts around every edge: negative, above γ, above 255, accepted just above drafted."""
    from acceptance.errors import InputError

    def plain(gamma, drafted, accepted):
        return not drafted or not (min(accepted) < 0 or max(drafted) > gamma
                                   or any(a > d for a, d in zip(accepted, drafted)))

    rng = np.random.default_rng(11)
    values = [-1, 0, 1, 2, 3, 5, 6, 7, 126, 127, 128, 129, 255, 256, 300]
    for _ in range(20000):
        gamma = int(rng.choice([0, 1, 3, 5, 7, 126, 127, 128, 200, 300]))
        n = int(rng.integers(0, 9))
        drafted = tuple(int(v) for v in rng.choice(values + [gamma] * 4, n))
        accepted = tuple(int(min(d, v)) if rng.random() < 0.8 else int(v) for d, v in zip(drafted, rng.choice(values, n)))
        for d, a in ((drafted, accepted), (list(drafted), list(accepted)), (drafted, list(accepted))):
            if plain(gamma, drafted, accepted):
                StepSequence(gamma, d, a)
            else:
                with pytest.raises(InputError):
                    StepSequence(gamma, d, a)


def test_the_store_reads_each_rows_steps_back(tmp_path):
    """ingested_step_sequences: every row's (drafted, accepted) as stored, in time order, with
    counts that pass as bytes and counts that do not (γ 300), empty steps; None when a row of
    the γ has none."""
    from acceptance.counts import SpecCounts
    from acceptance.store import IngestedRow, Store

    def row(t, gamma, drafted, accepted, key):
        counts = SpecCounts(len(drafted or ()), sum(drafted or ()), sum(accepted or ()), tuple([0] * gamma))
        return IngestedRow(t, counts, key, steps=None if drafted is None else (tuple(drafted), tuple(accepted)))

    small = [((3, 3, 1), (3, 0, 1)), ((), ()), ((2,), (2,)), ((3, 3), (1, 2))]
    large = [((300, 299, 7), (256, 0, 7)), ((1,), (0,))]
    with Store.open(tmp_path / "s.db") as store:
        store.ingest("r", "per-request", [row(100.0 + i, 3, d, a, f"s{i}") for i, (d, a) in enumerate(small)])
        store.ingest("r", "per-request", [row(100.0 + i, 300, d, a, f"l{i}") for i, (d, a) in enumerate(large)])
        assert store.ingested_step_sequences("r", "per-request", 3, 0.0, 200.0) == small
        assert store.ingested_step_sequences("r", "per-request", 300, 0.0, 200.0) == large
        assert store.ingested_step_sequences("r", "per-request", 3, 101.5, 200.0) == small[2:]
        assert store.ingested_step_sequences("r", "per-request", 3, 200.0, 300.0) is None
        store.ingest("r", "per-request", [row(150.0, 3, None, None, "none")])
        assert store.ingested_step_sequences("r", "per-request", 3, 0.0, 200.0) is None


def reference_store_reads(conn, gamma: int) -> dict:
    """The per-request reads as they were, one row at a time (acceptance/store/ingest.py
    before the rows were decoded at once), on the route "r"'s window (0, 1e9]."""
    from acceptance.store.codecs import unpack_floats

    args = ("r", "per-request", gamma, 0.0, 1e9)
    total = tokens = 0.0
    for itl, blob, decode in conn.execute(
            "SELECT mean_itl_s, counts, decode_tokens FROM ingested WHERE route = ? AND source = ? AND gamma = ?"
            " AND time > ? AND time <= ? AND mean_itl_s IS NOT NULL", args):
        decode = float(decode) if decode is not None else float(unpack_floats(blob)[0] + unpack_floats(blob)[2])
        total += float(itl) * decode
        tokens += decode
    per_pos = np.zeros(gamma)
    for (blob,) in conn.execute("SELECT draft_per_pos FROM ingested WHERE route = ? AND source = ? AND gamma = ?"
                                " AND time > ? AND time <= ?", args):
        per_pos += unpack_floats(blob)
    n = d = a = 0.0
    known = True
    for blob, decode in conn.execute("SELECT counts, decode_tokens FROM ingested WHERE route = ? AND source = ?"
                                     " AND gamma = ? AND time > ? AND time <= ?", args):
        if decode is None:
            known = False
            break
        counts = unpack_floats(blob)
        n, d, a = n + float(decode), d + float(counts[0]), a + float(counts[2])
    timing = conn.execute("SELECT mean_itl_s, decode_tokens, time, counts FROM ingested WHERE route = ? AND source = ?"
                          " AND gamma = ? AND time > ? AND time <= ? ORDER BY time, id", args).fetchall()
    return {"itl": (total, tokens), "per_pos": tuple(float(x) for x in per_pos), "decode": (n, d, a) if known else None,
            "request_itl": [np.nan if r[0] is None else float(r[0]) for r in timing],
            "request_decode": [np.nan if r[1] is None else float(r[1]) for r in timing],
            "times": [r[2] for r in timing], "counts": np.vstack([unpack_floats(r[3]) for r in timing])}


def test_the_store_sums_a_routes_rows_as_a_running_total(tmp_path):
    """The per-request reads that sum or stack every row (the window of a replayed route): the
    same floats as adding the rows one by one, fractions and missing values included."""
    from acceptance.counts import SpecCounts
    from acceptance.store import IngestedRow, Store

    rng = np.random.default_rng(3)

    def rows(n, missing_tokens):
        out = []
        for i in range(n):
            gamma = 3 if i % 7 else 5
            counts = SpecCounts(*(rng.random(2) * 50), rng.random() * 40, tuple(rng.random(gamma) * 9),
                                tuple(rng.random(gamma) * 10))
            out.append(IngestedRow(100.0 + 1000 * rng.random(), counts, f"k{i}",
                                   mean_itl_s=None if i % 11 == 0 else rng.random(),
                                   decode_tokens=None if missing_tokens and i % 13 == 0 else int(rng.integers(1, 900))))
        return out

    for name, missing in (("some.db", True), ("all.db", False)):
        with Store.open(tmp_path / name) as store:
            store.ingest("r", "per-request", rows(500, missing))
            intervals = store.ingested_intervals("r", "per-request", 0.0, 1e9)
            for gamma in (3, 5):
                expected = reference_store_reads(store.conn, gamma)
                assert store.ingested_itl("r", "per-request", gamma, 0.0, 1e9) == expected["itl"]
                assert store.ingested_draft_tokens_per_position("r", "per-request", gamma, 0.0, 1e9) == expected["per_pos"]
                assert store.ingested_decode_tokens("r", "per-request", gamma, 0.0, 1e9) == expected["decode"]
                itl, decode, _ = store.ingested_request_timing("r", "per-request", gamma, 0.0, 1e9)
                np.testing.assert_array_equal(itl, expected["request_itl"])
                np.testing.assert_array_equal(decode, expected["request_decode"])
                np.testing.assert_array_equal(intervals[gamma].counts, expected["counts"])
                np.testing.assert_array_equal(intervals[gamma].start, expected["times"])
                np.testing.assert_array_equal(intervals[gamma].end, expected["times"])
            assert sorted(intervals) == [3, 5]
            assert (store.ingested_decode_tokens("r", "per-request", 3, 0.0, 1e9) is None) == missing
