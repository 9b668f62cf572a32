"""Routes that share one deployment (model/shared_deployment.py, tune-gamma --deployment): one γ
for the deployment's traffic mix, and beside it what each route would gain on engines of its own."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pytest

from model.deployment import Deployment, ModelInputError
from model.recommend import RouteInputs, recommend
from model.shared_deployment import RouteShare, joint_speedup, recommend_deployment
from specdec.cli import main, tune_gamma_main
from support import independent_request_lines, run_cli
from test_model_recommend import resamples

EAGLE3 = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat")


def _shared_config(tmp_path, extra: str = "") -> str:
    config = tmp_path / "specdec.toml"
    config.write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.1\ncost_profile = "flat"\n'
                      '[routes.structured]\nsource = "per-request"\ndeployment = "pool"\n'
                      '[routes.open]\nsource = "per-request"\ndeployment = "pool"\n' + extra)
    return str(config)


def _ingest_two_routes(tmp_path, capsys, config: str, open_requests: int = 300) -> str:
    """Two routes of one deployment at γ 4: agentic requests the drafter gets right (p 0.9) and
    open-ended ones it mostly does not (p 0.45), both from the same engines."""
    t0 = time.time() - 1800
    lines = (independent_request_lines(300, 0.9, 4, t0, seed=1, route="structured")
             + independent_request_lines(open_requests, 0.45, 4, t0, seed=2, route="open"))
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(lines) + "\n")
    db = str(tmp_path / "specdec.db")
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "structured", "--per-request", str(requests),
                                          "--config", config, "--db", db])
    assert code == 0, err
    return db


def _decode_tokens(path, route: str) -> float:
    """D + A of the route's lines (these requests draft at every step: ν = 0)."""
    total = 0.0
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        if doc["route"] == route:
            spec = doc["metrics"]["speculative_decoding"]
            total += spec["num_spec_steps"] + spec["num_accepted_draft_tokens"]
    return total


def test_one_gamma_for_two_routes_lies_between_their_own_and_splitting_gains(tmp_path, capsys):
    config = _shared_config(tmp_path)
    db = _ingest_two_routes(tmp_path, capsys, config)
    argv = ["--deployment", "pool", "--config", config, "--db", db, "--window", "1h"]
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    assert code == 0, err
    doc = json.loads(out)
    dep = doc["deployment"]
    assert set(dep) >= {"name", "routes", "recommended_gamma", "decision", "candidates", "split"}
    assert dep["name"] == "pool"
    assert dep["routes"] == ["structured", "open"]
    own = {s["route"]: s["gamma"] for s in dep["split"]}
    # each route priced alone: the agentic one wants long drafts, the open one short ones
    assert own["open"] < own["structured"]
    joint = dep["recommended_gamma"]
    assert own["open"] <= joint <= own["structured"]
    assert own["open"] < joint or joint < own["structured"]  # neither route's own answer wholesale
    # the traffic weights are the routes' decode tokens in the window (D + A: every step drafted)
    requests = tmp_path / "requests.jsonl"
    tokens = {r: _decode_tokens(requests, r) for r in ("structured", "open")}
    for route in ("structured", "open"):
        assert dep["token_shares"][route] == pytest.approx(tokens[route] / sum(tokens.values()))
    # the deployment's speedup is the routes' token-weighted harmonic mean, at every γ
    by_route = {r["route"]: {c["gamma"]: c["speedup"] for c in r["candidates"]} for r in doc["routes"]}
    for cand in dep["candidates"]:
        g = cand["gamma"]
        expected = 1.0 / sum(dep["token_shares"][r] / by_route[r][g] for r in by_route)
        assert cand["speedup"] == pytest.approx(expected)
        assert cand["speedup_low"] <= cand["speedup"] <= cand["speedup_high"]
    assert joint == max((c for c in dep["candidates"] if c["allowed"]), key=lambda c: c["speedup"])["gamma"]
    # splitting a route off onto engines of its own gains ≥ 0 at the point, with its interval —
    # against the γ the shared engines run after this decision, and beside it the joint best
    final = joint if dep["decision"] in ("change", "off") else dep["deployed_gamma"]
    for s in dep["split"]:
        assert s["gain_of_splitting"] >= 0.0
        assert s["gain_low"] <= s["gain_of_splitting"] <= s["gain_high"]
        assert s["speedup"] == pytest.approx(by_route[s["route"]][s["gamma"]])
        assert s["against_gamma"] == final
        assert s["gain_of_splitting"] == pytest.approx(by_route[s["route"]][s["gamma"]]
                                                       / by_route[s["route"]][final] - 1.0)
        assert s["gain_over_joint_best"] == pytest.approx(by_route[s["route"]][s["gamma"]]
                                                          / by_route[s["route"]][joint] - 1.0)
    assert dep["gain_of_splitting"]["value"] > 0.0  # the two routes disagree: splitting pays
    # the console names the joint γ, the mix and the split
    code, console, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    assert "deployment pool · routes structured, open" in console
    assert f"(joint best {joint}," in console or f"-> {joint} (" in console
    assert "recommendation for deployment pool:" in console
    assert dep["vllm"]["speculative_config"] == {"method": "eagle3", "num_speculative_tokens": final}
    assert "gain of splitting" in console
    assert f"over gamma {final}" in console and f"over the joint best gamma {joint}" in console


def test_the_joint_gamma_follows_the_traffic_mix():
    # The same two curves; the route that carries most of the tokens pulls the joint γ its way.
    steep, long_tail = 0.45 ** np.arange(1, 5), 0.92 ** np.arange(1, 5)
    recs = [recommend(RouteInputs(a, survival_resamples=resamples(a, 200_000), deployed_gamma=4), EAGLE3)
            for a in (steep, long_tail)]
    joints = []
    for tokens in ((9.0, 1.0), (1.0, 9.0)):
        dep = recommend_deployment("pool", [RouteShare(r, rec, t) for r, rec, t in zip(("a", "b"), recs, tokens)],
                                   EAGLE3)
        joints.append(dep.recommended_gamma)
        points = np.array([[c.speedup for c in rec.candidates] for rec in recs])
        w = np.array(tokens) / sum(tokens)
        np.testing.assert_allclose([c.speedup for c in dep.candidates], joint_speedup(points, w))
    assert joints[0] < joints[1]
    assert recs[0].recommended_gamma <= joints[0] and joints[1] <= recs[1].recommended_gamma


def test_routes_of_one_deployment_must_run_one_gamma_and_one_method():
    a = 0.8 ** np.arange(1, 5)
    at4 = recommend(RouteInputs(a, survival_resamples=resamples(a, 100_000), deployed_gamma=4), EAGLE3)
    at3 = recommend(RouteInputs(a[:3], survival_resamples=resamples(a[:3], 100_000), deployed_gamma=3), EAGLE3)
    with pytest.raises(ModelInputError, match="route 'b' ran γ 3 in the window and 'a' γ 4"):
        recommend_deployment("pool", [RouteShare("a", at4, 1.0), RouteShare("b", at3, 1.0)], EAGLE3)
    dspark = recommend(RouteInputs(a,
                       survival_resamples=resamples(a, 100_000), deployed_gamma=4), Deployment(method="dspark", draft_cost=0.1, cost_profile="flat"))
    with pytest.raises(ModelInputError, match="price different candidates"):
        recommend_deployment("pool", [RouteShare("a", at4, 1.0), RouteShare("b", dspark, 1.0)], EAGLE3)


def test_a_route_s_own_tuning_says_which_deployment_sets_its_gamma(tmp_path, capsys):
    config = _shared_config(tmp_path)
    db = _ingest_two_routes(tmp_path, capsys, config)
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "open", "--config", config, "--db", db,
                                                       "--window", "1h", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["shared_deployment"] == {"name": "pool", "routes": ["structured", "open"]}
    assert any("shares deployment pool" in n and "tune-gamma --deployment pool" in n for n in doc["observed"]["notes"])


@pytest.mark.parametrize("extra, message", [
    ('[routes.other]\nsource = "per-request"\ndeployment = "pool"\ndraft_cost = 0.2\n',
     "routes 'structured' and 'other' share deployment 'pool' (one set of engines, one --speculative-config) "
     "but set draft_cost differently (0.1 and 0.2)"),
    ('[routes.other]\nsource = "per-request"\ndeployment = 7\n', "deployment must name the deployment"),
])
def test_a_broken_shared_deployment_is_one_line_naming_it(tmp_path, capsys, extra, message):
    config = _shared_config(tmp_path, extra)
    code, _, err = run_cli(capsys, tune_gamma_main, ["--deployment", "pool", "--config", config])
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_an_unknown_deployment_names_the_known_ones(tmp_path, capsys):
    config = _shared_config(tmp_path)
    db = _ingest_two_routes(tmp_path, capsys, config)
    code, _, err = run_cli(capsys, tune_gamma_main, ["--deployment", "poool", "--config", config, "--db", db])
    assert code == 2
    assert "no route names deployment 'poool' (deployments: pool)" in err
    code, _, err = run_cli(capsys, tune_gamma_main, ["--deployment", "pool", "--route", "open", "--config", config])
    assert code == 2
    assert "give only one of --route, --deployment or --survival (got --route and --deployment)" in err


def test_a_percentile_objective_on_a_deployment_is_refused_with_what_to_use():
    a = 0.8 ** np.arange(1, 5)
    rec = recommend(RouteInputs(a, survival_resamples=resamples(a, 100_000), deployed_gamma=4), EAGLE3)
    p90 = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat", objective="p90_interactivity")
    with pytest.raises(ModelInputError, match="objective p90_interactivity is a percentile over one route's requests"):
        recommend_deployment("pool", [RouteShare("a", rec, 1.0), RouteShare("b", rec, 1.0)], p90)


def test_the_split_question_is_answered_against_the_gamma_the_pool_keeps():
    """A pool that keeps γ 3 (the joint best's gain is not sure enough) is asked "should I split
    the agent route off?" of γ 3, what its engines will run — not of the joint best it did not
    take; the gain over the joint best is given beside it, named."""
    steep, long_tail = 0.5 ** np.arange(1, 4), 0.95 ** np.arange(1, 4)
    recs = [recommend(RouteInputs(a, survival_resamples=resamples(a, 200_000), deployed_gamma=3), replace(EAGLE3, min_gain=0.5))
            for a in (steep, long_tail)]
    dep = recommend_deployment("pool", [RouteShare(r, rec, 1.0) for r, rec in zip(("chat", "agent"), recs)],
                               replace(EAGLE3, min_gain=0.5))
    assert dep.decision == "keep" and dep.recommended_gamma != 3
    agent = next(s for s in dep.split if s.route == "agent")
    speeds = [c.speedup for c in recs[1].candidates]
    assert agent.against_gamma == 3
    assert agent.gain_of_splitting == pytest.approx(speeds[agent.gamma] / speeds[3] - 1.0)
    assert agent.gain_over_joint_best == pytest.approx(speeds[agent.gamma] / speeds[dep.recommended_gamma] - 1.0)
    assert agent.gain_of_splitting > agent.gain_over_joint_best
