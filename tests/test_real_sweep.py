"""benchmarks/real_sweep.py's arithmetic on made-up runs (the sweep itself needs the real
engine: make bench-real)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import real_sweep as rs  # noqa: E402


def line(histogram, drafted, completion_tokens, itl_ms):
    return {"metrics": {"mean_itl_ms": itl_ms, "speculative_decoding": {
        "acceptance_histogram": histogram, "num_draft_tokens": drafted,
        "num_accepted_draft_tokens": sum(j * n for j, n in enumerate(histogram))}},
        "completion_tokens": completion_tokens}


def test_spec_totals_and_step_time_weight_requests_by_their_steps():
    a = line([1, 1, 2], 8, 11, 2.0)  # 10 tokens at 2 ms each over 11 − 1 − 5 accepted = 5 steps
    b = line([2, 0, 0], 3, 6, 4.0)   # 5 tokens at 4 ms over 5 steps
    totals = rs.spec_totals([a, b])
    assert totals == {"drafts": 6, "draft_tokens": 11, "accepted": 5, "accepted_per_position": [3, 2]}
    assert rs.step_time_s([a, b]) == pytest.approx((10 * 2e-3 + 5 * 4e-3) / 10)


def test_paired_ratio_compares_each_block_with_its_own_gamma_zero():
    def runs(rates):
        return [rs.Run(0, 1.0, int(r), 0.0, []) for r in rates]

    # phase 1 blocks run γ 0 at 100, 200, 100, 200 tok/s; γ 2 at exactly 1.5× of each
    by_gamma = {0: runs([100, 200, 100, 200] + [50] * 4), 2: runs([150, 300, 150, 300]), 5: runs([100] * 4)}
    wall = lambda run: run.tokens_per_s  # noqa: E731
    median, low, high = rs.paired_ratio(by_gamma, 2, np.random.default_rng(0), rate=wall)
    assert median == pytest.approx(1.5)
    assert low == pytest.approx(1.5)
    assert high == pytest.approx(1.5)
    assert rs.paired_ratio(by_gamma, 5, np.random.default_rng(0), rate=wall)[0] == pytest.approx(2.0)  # phase 2: γ 0 at 50


def test_line_fit_and_the_unmeasured_gamma():
    c0, c1 = rs.fit_line([(1.0, 0.010), (3.5, 0.015)])
    assert c0 == pytest.approx(0.008)
    assert c1 == pytest.approx(0.002)
    ratios = {3: (1.2, 1.1, 1.3), 5: (1.8, 1.7, 1.9)}
    assert rs.measured_or_interpolated(ratios, 4) == pytest.approx(np.sqrt(1.2 * 1.8))
    assert rs.measured_or_interpolated(ratios, 5) == 1.8


def test_decode_rate_leaves_out_the_prefill_and_the_wall_clock():
    a = line([1, 1, 2], 8, 11, 2.0)  # 10 decode tokens in 20 ms
    b = line([2, 0, 0], 3, 6, 4.0)   # 5 in 20 ms
    run = rs.Run(3, wall_s=1.0, tokens=17, cpu_s=0.0, responses=[a, b])
    assert run.decode_tokens_per_s == pytest.approx(15 / 0.040)
    assert run.tokens_per_s == 17.0


def test_step_cost_splits_the_fixed_overhead_from_the_width_slope(tmp_path):
    # plain step 5 ms; speculating steps 7 ms + 1 ms per extra verified token per step
    cost = rs.StepCost.fit(0.005, [(0.5, 0.0075), (2.0, 0.009), (3.0, 0.010)])
    assert cost.overhead == pytest.approx(0.002)
    assert cost.slope == pytest.approx(0.001)
    path, overhead = cost.write(tmp_path / "t.csv", "made up")
    assert overhead == pytest.approx(0.4)  # × the plain step: the deployment's draft_overhead
    from model.profiles import load_table

    table = load_table(path)
    assert table.step_time_s(1, 1) == pytest.approx(0.005)
    assert table.step_time_s(1, 4) == pytest.approx(0.008)


def made_up_cell(predicted_al_at_2: float) -> dict:
    def g(gamma, al, pal, ratio, lo, hi, pred, plo, phi):
        return {"gamma": gamma, "measured_al": al, "predicted_al": pal, "measured_ratio": ratio, "ratio_low": lo,
                "ratio_high": hi, "predicted_speedup": pred, "speedup_low": plo, "speedup_high": phi,
                "undrafted_token_share": None, "wall_ratio": ratio, "step_time_ms": 5.0, "al_positions_seen": al}
    return {"method": "m", "route": "r", "recommended_gamma": 3, "decision": "keep", "best_gamma": 3,
            "best_separated": True, "regret_considered": 0.0, "regret": 0.01,
            "gammas": [g(0, 1, 1, 1, 1, 1, 1, 1, 1), g(2, 2.0, predicted_al_at_2, 1.2, 1.1, 1.3, 1.25, 1.2, 1.3),
                       g(3, 2.5, 2.5, 1.4, 1.3, 1.5, 1.6, 1.55, 1.65)]}


def test_summary_counts_the_issues_checks():
    s = rs.summary([made_up_cell(2.04), made_up_cell(2.10)])
    assert s["al_within_3pct"] == "1/2"
    assert s["al_misses"] == ["m/r γ 2: +5.0%"]
    assert s["al_positions_seen_within_3pct"] == "2/2"
    assert s["predicted_in_measured_interval"] == "2/4"  # γ 2 inside [1.1, 1.3], γ 3's 1.6 outside [1.3, 1.5]
    assert s["measured_in_predicted_interval"] == "2/4"  # 1.2 in [1.2, 1.3]; 1.4 outside [1.55, 1.65]
    assert "| m / r | 3 (keep) | 3 | yes | 0.0% | 1.0% |" in rs.markdown([made_up_cell(2.0)])


def test_the_replay_with_the_positions_seen_comes_to_the_truth_for_a_drafter_of_the_position():
    # a deterministic drafter of the position: every γ's engine over the same texts; the γ 3
    # window alone guesses the bonus positions, the other γ's runs see them
    from support import engine_steps, runs_of_text

    rng = np.random.default_rng(5)
    texts = [runs_of_text(rng, 120, 0.9, 0.5) for _ in range(6)]

    def run(gamma):
        lines = []
        for x in texts:
            seq = engine_steps(x, gamma)
            lines.append({"metrics": {"speculative_decoding": {"per_step_drafted": list(seq.drafted),
                                                               "per_step_accepted": list(seq.accepted)}}})
        return rs.Run(gamma, 1.0, 1, 1.0, lines)

    runs = {g: [run(g)] for g in rs.GAMMAS}
    for g in (1, 2, 5):
        truth = 1 + sum(sum(s.accepted) for s in (engine_steps(x, g) for x in texts)) / sum(
            len(engine_steps(x, g).drafted) for x in texts)
        # a position that followed a full draft at every γ stays unseen (a few per text here)
        assert rs.al_with_positions_seen(runs, g) == pytest.approx(truth, rel=0.005)


def test_real_load_reads_the_gauge_and_the_load_view():
    import real_load as rl

    # idle samples (0 running) are no decode step: left out of the time shares
    assert rl.shares_of([0, 1, 1, 8, 8, 8, 0, 7]) == {1: 2 / 6, 7: 1 / 6, 8: 3 / 6}
    load = {"batch_sizes": [{"batch_size": 1, "best_gamma": 5}, {"batch_size": 7, "best_gamma": 2},
                            {"batch_size": 8, "best_gamma": 1}]}
    assert rl.best_at(load, 1) == 5
    assert rl.best_at(load, 8) == 1
    # the paired ratio over real_load's phases: γ 5 is compared with γ 0's second-phase blocks
    runs = lambda rates: [rs.Run(0, 1.0, int(r), 0.0, []) for r in rates]  # noqa: E731
    by_gamma = {0: runs([100, 100, 50, 50]), 1: runs([150, 150]), 5: runs([100, 100])}
    wall = lambda run: run.tokens_per_s  # noqa: E731
    assert rl.paired(by_gamma, 5, wall, np.random.default_rng(0))[0] == pytest.approx(2.0)
    assert rl.paired(by_gamma, 1, wall, np.random.default_rng(0))[0] == pytest.approx(1.5)


def test_a_probe_beside_the_fleet_on_per_request_rows_is_carried_on_without_a_time(tmp_path):
    """The engine's own γ 3 and γ 4 responses side by side (ngram, open route): the probe is
    carried on to its 2,000 drafts. Its rows name no engine, so its draft rate per engine and
    its time are unknown — that ended in an internal error (an infinite duration formatted)."""
    lines = rs.side_by_side([{"time": 0.0, "x": 0}, {"time": 10.0, "x": 1}], [{"time": 99.0, "x": 2}])
    assert [(line["time"], line["x"]) for line in lines] == [(0.0, 0), (5.0, 2), (10.0, 1)]
    measured = rs.load_raw(rs.RAW)
    cell = rs.cell_result("ngram", "open", measured["runs"]["ngram"]["open"], tmp_path, 0)
    second = cell["round2"]
    assert second["probe_gamma"] == 4 and second["decision"] == "probe" and second["deployed_gamma"] == 3
    assert "carry on the probe at γ=4 to the 2,000 drafts a probe takes at least" in second["decision_reason"]
    assert "(its time unknown: the rows name no engine)" in second["decision_reason"]
