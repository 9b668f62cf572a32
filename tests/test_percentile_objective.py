"""The percentile interactivity objectives (model/percentile_objective.py): the per-user rate a
share of requests reach, from per-request data, and what happens without it."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from acceptance.route_estimate import RequestRows
from model.deployment import Deployment, ModelInputError
from model.percentile_objective import request_rates
from model.recommend import RouteInputs, recommend
from specdec.cli import tune_gamma_main
from support import independent_request_lines, run_cli, tune_ingested

GAMMA = 4
DRAFT_COST = 0.1  # eagle3, flat: a step at γ costs 1 + γ·c plain passes
BASELINE = 118.0


def _heterogeneous_lines(n: int = 400, hard_share: float = 0.3) -> list[str]:
    """Agentic requests the drafter gets right (p 0.92) and a minority it does not (p 0.35),
    interleaved in time, on the flat engine ((1 + γ·c) / 118 s a step): the slow requests are
    the hard ones, and long drafts only slow them down further."""
    hard = int(round(n * hard_share))
    t0 = time.time() - 1800
    common = dict(route="chat", steps_range=(30, 90), step_cost=1 + GAMMA * DRAFT_COST)
    easy = iter(independent_request_lines(n - hard, 0.92, GAMMA, t0, seed=1, **common))
    hard_lines = iter(independent_request_lines(hard, 0.35, GAMMA, t0, seed=2, **common))
    # spread evenly over the window (hard requests bunched anywhere would read as drift)
    lines = [json.loads(next(hard_lines if int((i + 1) * hard_share) > int(i * hard_share) else easy))
             for i in range(n)]
    for i, line in enumerate(lines):
        line["time"] = t0 + i
    return [json.dumps(x) for x in lines]


def _tune(tmp_path, capsys, objective: str) -> tuple[dict, str]:
    """The route `chat` of these requests tuned on the objective (support.tune_ingested)."""
    requests = tmp_path / "requests.jsonl"
    if not requests.exists():
        requests.write_text("\n".join(_heterogeneous_lines()) + "\n")
    return tune_ingested(capsys, tmp_path, requests, f'method = "eagle3"\ndraft_cost = {DRAFT_COST}\n'
                         f'cost_profile = "flat"\nbaseline_tokens_per_second = {BASELINE}\nobjective = "{objective}"\n')


def test_the_mean_and_the_p90_pick_different_gammas_and_say_which_axis(tmp_path, capsys):
    mean, mean_console = _tune(tmp_path, capsys, "interactivity")
    p90, p90_console = _tune(tmp_path, capsys, "p90_interactivity")
    # long drafts pay on the mean (most tokens come from the easy requests) but not for the
    # slowest tenth of the requests, the hard ones
    assert p90["recommended_gamma"] < mean["recommended_gamma"]
    assert p90["objective"] == "p90_interactivity"
    assert "90% of requests reach" in p90["objective_axis"]
    assert "mean per-user decode rate" in mean["objective_axis"]
    assert "objective p90_interactivity (the per-user decode rate 90% of requests reach" in p90_console
    assert "objective interactivity (the mean per-user decode rate" in mean_console
    # the p90 candidates are the 10th percentile of the requests' own rates, scaled from
    # their observed mean ITL: at the deployed γ that is their observed rates' percentile
    lines = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    observed = np.array([1000.0 / x["metrics"]["mean_itl_ms"] for x in lines])
    deployed = next(c for c in p90["candidates"] if c["gamma"] == GAMMA)
    assert deployed["tokens_per_second"] == pytest.approx(np.quantile(observed, 0.1), rel=1e-9)
    # on the flat engine each request's rate at γ is its AL_i(γ) / (1 + γ·c) × 118: the
    # percentile at γ 1 is that of the requests' own cut curves
    counts = [x["metrics"]["speculative_decoding"] for x in lines]
    al1 = np.array([1 + (s["num_spec_steps"] - s["acceptance_histogram"][0]) / s["num_spec_steps"] for s in counts])
    at1 = next(c for c in p90["candidates"] if c["gamma"] == 1)
    assert at1["tokens_per_second"] == pytest.approx(np.quantile(al1 / (1 + DRAFT_COST) * BASELINE, 0.1), rel=1e-6)
    for c in p90["candidates"]:
        assert c["speedup_low"] <= c["speedup"] * 1.0001
        assert c["speedup"] <= c["speedup_high"] * 1.0001


def test_a_percentile_objective_without_per_request_data_says_what_it_needs():
    a = 0.8 ** np.arange(1, 5)
    with pytest.raises(ModelInputError, match="objective p90_interactivity: the percentile of per-user rates needs "
                                              "per-request data"):
        recommend(RouteInputs(a,
                  deployed_gamma=4), Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat", objective="p90_interactivity"))


def test_requests_without_observed_rates_are_ranked_by_their_speedups():
    # Two requests, no mean ITL: relative rates, each its own AL over the flat step cost,
    # extended past the deployed γ 4 from its own conditionals (independent p: exactly).
    p_easy, p_hard = 0.9, 0.3
    counts = np.array([[1e6, 4e6, 0, *(1e6 * p_easy ** np.arange(1, 5))],
                       [1e6, 4e6, 0, *(1e6 * p_hard ** np.arange(1, 5))]], dtype=float)
    rows = RequestRows(counts, np.full(2, np.nan), np.full(2, np.nan))
    gammas = np.arange(9)
    ratio = 1.0 / (1.0 + 0.1 * gammas)
    rates, absolute = request_rates(rows, ratio, ratio, None, 4)
    assert not absolute
    for i, p in enumerate((p_easy, p_hard)):
        al = (1 - p ** (gammas + 1)) / (1 - p)
        np.testing.assert_allclose(rates[:, i, :], np.broadcast_to(al * ratio, (rates.shape[0], 9)), rtol=1e-6)


def test_a_scraped_route_with_a_percentile_objective_is_one_line(tmp_path, capsys):
    from support import tune_live_window  # noqa: F401  (the scraped path is the demo's; a config is enough)

    config = tmp_path / "specdec.toml"
    config.write_text('[deployment]\nobjective = "p99_interactivity"\n[routes.r]\ntargets = ["http://127.0.0.1:9/metrics"]\n')
    db = tmp_path / "specdec.db"
    from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts
    from acceptance.store import Store

    with Store.open(db) as store:
        for k in range(6):
            d = 1000.0 * (k + 1)
            counts = SpecCounts(d, 3 * d, 1.5 * d, (0.8 * d, 0.5 * d, 0.2 * d))
            store.write_cycle([ScrapeResult("http://127.0.0.1:9/metrics", time.time() - 600 + 15 * k, True,
                                            (EngineSnapshot("m", "0", counts, None, None),), None, 0.01)])
    code, _, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(config), "--db", str(db)])
    assert code == 2
    assert "objective p99_interactivity: the percentile of per-user rates needs per-request data" in err
    assert len(err.strip().splitlines()) == 1
