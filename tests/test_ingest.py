"""`specdec ingest` → store → tune-gamma, for routes that share one deployment (per-request
metrics) or only have logs: the stored counts are the truth's, exactly."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from acceptance.store import Store
from specdec.cli import main, tune_gamma_main
from support import independent_request_lines, run_cli

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden"


def _stored(db: Path, route: str, source: str) -> dict[int, np.ndarray]:
    with Store.open(db) as store:
        return {g: iv.counts for g, iv in store.ingested_intervals(route, source, 0, 4e9).items()}


def test_per_request_golden_is_stored_exactly_and_once(tmp_path, capsys):
    db = tmp_path / "s.db"
    argv = ["ingest", "--route", "shared", "--per-request", str(GOLDEN / "per_request_sample.jsonl"), "--db", str(db)]
    code, out, err = run_cli(capsys, main, argv)
    assert code == 0, err
    assert "3 per-request rows added" in out
    truth = json.loads((GOLDEN / "per_request_sample_truth.json").read_text())
    stored = _stored(db, "shared", "per-request")
    for t in truth:
        g = t["num_spec_tokens"]
        h = t["ground_truth"]["acceptance_histogram"]
        drafts = sum(h)
        per_pos = [sum(h[k:]) for k in range(1, g + 1)]
        row = [drafts, t["ground_truth"]["num_draft_tokens"], t["ground_truth"]["num_accepted_draft_tokens"], *per_pos]
        assert any(np.array_equal(r, row) for r in stored[g]), (row, stored[g])
    # The same file again adds nothing.
    code, out, _ = run_cli(capsys, main, argv)
    assert code == 0
    assert "0 per-request rows added, 3 already stored" in out


def test_a_config_route_without_targets_or_source_names_the_source_key(tmp_path, capsys):
    """A route table that says nothing of where its data comes from is refused naming both ways:
    targets to scrape, or the source of the rows `specdec ingest` stores."""
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "suffix"\n[routes.r]\n')
    code, out, err = run_cli(capsys, main, ["ingest", "--config", str(cfg), "--route", "r", "--per-request",
                                            str(GOLDEN / "per_request_sample.jsonl"), "--db", str(tmp_path / "s.db")])
    assert code == 2 and "[routes.r]: no targets and no source" in err
    assert 'or source = "per-request" or "log" for the rows `specdec ingest` stores' in err
    cfg.write_text('[deployment]\nmethod = "suffix"\n[routes.r]\nsource = "per-request"\n')
    code, out, err = run_cli(capsys, main, ["ingest", "--config", str(cfg), "--route", "r", "--per-request",
                                            str(GOLDEN / "per_request_sample.jsonl"), "--db", str(tmp_path / "s.db")])
    assert code == 0, err


def test_log_golden_is_stored_exactly(tmp_path, capsys):
    db = tmp_path / "s.db"
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "logs", "--log", str(GOLDEN / "log_lines_sample.txt"),
                                         "--db", str(db)])
    assert code == 0, err
    truth = json.loads((GOLDEN / "log_lines_sample_truth.json").read_text())
    stored = _stored(db, "logs", "log")[3]
    expected = [[t["num_drafts"], t["num_draft_tokens"], t["num_accepted_tokens"], *t["num_accepted_tokens_per_pos"]]
                for t in truth]
    np.testing.assert_array_equal(stored, np.array(expected, dtype=float))


def test_logged_drafts_are_said_to_be_reconstructed(tmp_path, capsys):
    """vLLM's log line prints A and T, not D: the golden's second line fits D = 1813 and 1814
    alike, and one was stored without a word (a γ 7 log gave 2,708 where vLLM counted 2,707).
    ingest says how many intervals fit more than one D and how far apart; every estimate of a
    logged route carries the note."""
    from specdec.cli import tune_gamma_main

    db = tmp_path / "s.db"
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "logs", "--log", str(GOLDEN / "log_lines_sample.txt"),
                                            "--db", str(db)])
    assert code == 0, err
    assert "drafts reconstructed, not read" in err and "1 of 2 intervals fit more than one (up to 0.06% apart)" in err
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "logs", "--db", str(db), "--window", "1d", "--json"])
    assert code == 0, err
    assert any(n.startswith("drafts reconstructed from vLLM's log lines") for n in json.loads(out)["observed"]["notes"])


def test_log_lines_without_timestamps_are_stored_once_and_said(tmp_path, capsys):
    """vLLM's golden lines carry no timestamp (the logger's message alone): they are stored at
    the ingest time, keyed by their place in the file, so the same file again adds nothing
    (keyed by that time, each ingest stored them again), and the output says where the row
    times came from."""
    db = tmp_path / "s.db"
    argv = ["ingest", "--route", "logs", "--log", str(GOLDEN / "log_lines_sample.txt"), "--db", str(db)]
    code, out, err = run_cli(capsys, main, argv)
    assert code == 0, err
    assert "2 log rows added" in out and "row times from the ingest time (lines without one) (2)" in out
    code, out, err = run_cli(capsys, main, argv)
    assert code == 0, err
    assert "0 log rows added, 2 already stored" in out
    assert len(_stored(db, "logs", "log")[3]) == 2


def test_a_route_known_only_from_ingest_is_tuned_with_request_intervals(tmp_path, capsys, monkeypatch):
    import time

    monkeypatch.chdir(tmp_path)  # no specdec.toml here: the inline defaults apply
    lines = independent_request_lines(400, 0.8, 4, time.time() - 1800)
    bad = ['{"route": "chat", "metrics": {"speculative_decoding": {"num_spec_tok',   # truncated
           "INFO 11-30 05:21:37 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s",  # other logger
           json.dumps({"route": "chat", "metrics": None})]                            # n > 1
    (tmp_path / "requests.jsonl").write_text("\n".join(lines + bad) + "\n")
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "ignored", "--per-request", "requests.jsonl"])
    assert code == 0, err
    assert "route chat: 400 per-request rows added" in out
    assert "403 lines read" in out
    assert "skipped" in out
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    obs = doc["observed"]
    assert doc["cost_profile"] == "flat"
    assert obs["gamma"] == 4
    assert "requests" in obs["interval_method"]
    truth = 0.8 ** np.arange(1, 5)
    low, high = np.array(obs["survival_low"]), np.array(obs["survival_high"])
    # One window: a 90% interval may just miss (here a_1's low end sits at 0.79992), so the
    # check is that it is informative and about the truth — coverage itself is measured over
    # many windows in tests/test_coverage.py.
    assert np.all(low < np.array(obs["survival"]))
    assert np.all(np.array(obs["survival"]) < high)
    assert np.all(high - low < 0.08)
    slack = 0.5 * (high - low)
    assert np.all(low - slack <= truth)
    assert np.all(truth <= high + slack)
    # the requests' mean inter-token latency gives the observed tok/s; no baseline is
    # configured, so the profile is anchored on it (model.anchor) — at the rate that
    # generated these requests, 118 tok/s under the flat model's draft cost
    assert obs["observed_tokens_per_second"] == pytest.approx(obs["mean_acceptance_length"] / (1.1 / 118), rel=1e-6)
    assert doc["anchor"]["source"] == "observed"
    assert doc["anchor"]["detail"] == "per-request mean_itl_ms"
    assert doc["anchor"]["baseline_tokens_per_second"] == pytest.approx(118, rel=1e-6)
    assert doc["model_error"] is None


@pytest.mark.parametrize("flag,content", [("--per-request", "not json at all\n"), ("--log", "nothing to see\n")])
def test_a_file_without_usable_lines_is_one_line_exit_2(tmp_path, capsys, flag, content):
    f = tmp_path / "input.txt"
    f.write_text(content)
    db = tmp_path / "s.db"
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "r", flag, str(f), "--db", str(db)])
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "input.txt" in err
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "r", flag, str(tmp_path / "missing.txt"), "--db", str(db)])
    assert code == 2
    assert "missing.txt" in err


def test_requests_without_id_or_time_are_each_counted_once(tmp_path, capsys):
    """Bare speculative_decoding objects carry neither an id nor a time: identical ones are
    still different requests, and ingesting the file again adds nothing."""
    spec = {"acceptance_histogram": [1, 2, 3], "num_spec_steps": 6, "num_accepted_draft_tokens": 8,
            "num_draft_tokens": 12, "num_spec_tokens": 2, "mean_acceptance_length": 1 + 8 / 6,
            "draft_acceptance_rate": 8 / 12}
    f = tmp_path / "bare.jsonl"
    f.write_text("\n".join(json.dumps(spec) for _ in range(10)) + "\n")
    db = tmp_path / "s.db"
    argv = ["ingest", "--route", "r", "--per-request", str(f), "--db", str(db)]
    code, out, err = run_cli(capsys, main, argv)
    assert code == 0, err
    assert "10 per-request rows added" in out, err
    code, out, _ = run_cli(capsys, main, argv)
    assert "0 per-request rows added, 10 already stored" in out
    assert _stored(db, "r", "per-request")[2][:, 0].sum() == 60  # 10 requests × 6 drafts


def test_a_log_only_route_measures_the_specialized_speedup_from_the_logged_load(tmp_path, capsys):
    """Three engines log every 10 s (vLLM 0.33's two lines: the stats line, then SpecDecoding):
    two at γ 3 run batches of 4 and 16 half the time each, a probe at γ 7 runs 16 three
    intervals in four (B = 16 runs stock at γ 7 and takes the specialized path at γ 3). Each
    interval's steps take the cost model's time at s = 1.3 for its batch; Running is the batch,
    the generation throughput its output tokens. Little's law gives each γ segment its own
    latency and batch mix, and the latency measures s as the store's scraped histogram does."""
    import dataclasses
    import datetime as dt

    from model.speedup import CostModel
    from specdec.config import config_from_mapping, deployment_for_route
    from specdec.pipeline import tune_route
    from specdec.report import tuning_to_dict
    from test_acceptance_log_lines import vllm_message, vllm_prefix

    spec = {"method": "dspark", "draft_cost": 0.1, "cost_profile": "roofline",
            "decode_backend": "latency_specialized", "specialized_speedup": [1.5, 2.0]}
    config = config_from_mapping({"deployment": spec, "routes": {"r": {"source": "log", "engines": 3}}}, path=None)
    s, x = 1.3, 1 / 90.0
    cost = CostModel.for_deployment(dataclasses.replace(deployment_for_route(config, "r"), baseline_tokens_per_second=1 / x))
    step_s = {g: dict(zip((4, 16), cost.step_times([g], np.array([4, 16]), s)[0].tolist())) for g in (3, 7)}
    survival = 0.93 ** np.arange(1, 8) * np.linspace(1.0, 0.8, 7)
    n, now = 360, dt.datetime.now(dt.timezone.utc).replace(microsecond=0, tzinfo=None)
    lines = []
    for i in range(1, n + 1):
        when = now - dt.timedelta(seconds=10 * (n - i) + 5)
        for pid, gamma in ((11, 3), (12, 3), (13, 7)):
            batch = (16 if i % 4 else 4) if gamma == 7 else (16 if (i + pid) % 2 else 4)
            drafts = int(round(10.0 / step_s[gamma][batch] * batch))  # every request-step drafts
            accepted = [int(round(drafts * a)) for a in survival[:gamma]]
            lines += [vllm_prefix(when, pid, "loggers.py:254") + "Engine 000: Avg prompt throughput: 0.0 tokens/s, "
                      f"Avg generation throughput: {(drafts + sum(accepted)) / 10.0:.1f} tokens/s, "
                      f"Running: {batch} reqs, Waiting: 0 reqs, GPU KV cache usage: 12.0%",
                      vllm_prefix(when, pid) + vllm_message(drafts, drafts * gamma, accepted)]
    (tmp_path / "vllm.log").write_text("\n".join(lines) + "\n")
    db = tmp_path / "s.db"
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "r", "--log", str(tmp_path / "vllm.log"),
                                            "--db", str(db)])
    assert code == 0, err
    assert "route r: 1080 log rows added" in out and "; 1080 with the stats line's Running" in out
    with Store.open(db) as store:
        tuning = tune_route(config, "r", store=store, window_s=3700.0, n_resamples=200)
    doc = tuning_to_dict(tuning)
    measured = doc["specialized_speedup_measured"]
    assert measured["value"] == pytest.approx(s, rel=0.01)
    lo, hi = measured["confidence_interval"]
    assert lo <= s <= hi and hi - lo < 0.2
    assert doc["observed"]["undrafted_token_share"] == pytest.approx(0.0, abs=1e-3)  # every step drafted
    assert [d["gamma"] for d in measured["segments"]] == [3, 7]
    assert measured["segments"][0]["batch_time_shares"] == pytest.approx({"4": 0.5, "16": 0.5})
    assert measured["segments"][1]["batch_time_shares"] == pytest.approx({"4": 0.25, "16": 0.75})
    # each segment's latency is Little's law's, Σ Running × 10 s over Σ request-steps: at γ 3
    # a 4 and a 16 interval for every two, Σ_B B / Σ_B (B / t_B)
    assert measured["segments"][0]["itl_mean_s"] == pytest.approx(
        (4 + 16) / sum(b / step_s[3][b] for b in (4, 16)), rel=1e-3)
    # the route's observed tok/s anchors the cost model, as a scraped histogram's does (true 1/x = 90)
    assert doc["anchor"]["source"] == "observed" and doc["anchor"]["detail"] == "logged Running and generation throughput"
    assert doc["anchor"]["baseline_tokens_per_second"] == pytest.approx(1 / x, rel=0.03)


def test_a_per_request_route_measures_the_specialized_speedup_from_its_probes_requests(tmp_path, capsys):
    """The log test's engines as a gateway sees them: two engines at γ 3 that run batches of 4
    and 16 half the time each (in step), a probe at γ 7 that runs 16 three times in four. Each
    batch starts together and decodes for about 10 s at the cost model's step time at s = 1.3;
    each request's line says when it finished, its tokens and its mean_itl_ms. The rows name no
    engine, but γ is an engine's: each γ's requests give their own latency (Σ decode time / Σ
    steps) and their own batch mix over their share of the three engines, and the two measure s."""
    import dataclasses

    from model.speedup import CostModel
    from specdec.config import config_from_mapping, deployment_for_route
    from specdec.pipeline import tune_route
    from specdec.report import tuning_to_dict

    spec = {"method": "dspark", "draft_cost": 0.1, "cost_profile": "roofline",
            "decode_backend": "latency_specialized", "specialized_speedup": [1.5, 2.0]}
    config = config_from_mapping({"deployment": spec, "routes": {"r": {"source": "per-request", "engines": 3}}},
                                 path=None)
    s, x = 1.3, 1 / 90.0
    cost = CostModel.for_deployment(dataclasses.replace(deployment_for_route(config, "r"), baseline_tokens_per_second=1 / x))
    step_s = {g: dict(zip((4, 16), cost.step_times([g], np.array([4, 16]), s)[0].tolist())) for g in (3, 7)}
    per_step = {3: [1, 1, 2, 6], 7: [1, 1, 1, 1, 1, 1, 2, 2]}  # steps that accepted 0..γ, in proportion
    now = time.time()
    lines = []
    # the probe's hour ends two hours ago; in the last hour the three engines all run γ 3
    for engine, gamma, start in ((0, 3, now - 3 * 3600), (1, 3, now - 3 * 3600), (2, 7, now - 3 * 3600),
                                 (0, 3, now - 3600), (1, 3, now - 3600), (2, 3, now - 3600)):
        t = start
        for i in range(360):
            batch = (16 if i % 4 else 4) if gamma == 7 else (16 if i % 2 else 4)
            steps = int(round(10.0 / step_s[gamma][batch]))
            histogram = [steps * h // sum(per_step[gamma]) for h in per_step[gamma]]
            histogram[0] += steps - sum(histogram)
            accepted = sum(j * h for j, h in enumerate(histogram))
            decode_s = steps * step_s[gamma][batch]
            t += decode_s
            for k in range(batch):
                payload = {"acceptance_histogram": histogram, "num_spec_steps": steps, "num_spec_tokens": gamma,
                           "num_accepted_draft_tokens": accepted, "num_draft_tokens": steps * gamma}
                lines.append(json.dumps({"id": f"{engine}-{start}-{i}-{k}", "route": "r", "time": t,
                                         "usage": {"completion_tokens": 1 + steps + accepted},
                                         "metrics": {"mean_itl_ms": 1000 * decode_s / (steps + accepted),
                                                     "speculative_decoding": payload}}))
    (tmp_path / "requests.jsonl").write_text("\n".join(lines) + "\n")
    db = tmp_path / "s.db"
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "r", "--per-request", str(tmp_path / "requests.jsonl"),
                                          "--db", str(db)])
    assert code == 0, err
    with Store.open(db) as store:
        tuning = tune_route(config, "r", store=store, window_s=3700.0, n_resamples=200, now=now - 2 * 3600 + 60)
        later = tuning_to_dict(tune_route(config, "r", store=store, window_s=3600.0, n_resamples=200, now=now + 1))
    doc = tuning_to_dict(tuning)
    measured = doc["specialized_speedup_measured"]
    # later, with the probe gone, the window in which it ran still measures s (model.probe.lookback)
    assert later["specialized_speedup_measured"]["value"] == pytest.approx(s, rel=0.01)
    assert later["specialized_speedup_measured"]["window"][1] == pytest.approx(now - 2 * 3600, abs=60)
    assert [d["gamma"] for d in measured["segments"]] == [3, 7]
    assert measured["segments"][0]["batch_time_shares"] == pytest.approx({"4": 0.5, "16": 0.5}, abs=0.01)
    assert measured["segments"][1]["batch_time_shares"] == pytest.approx({"4": 0.25, "16": 0.75}, abs=0.01)
    # each γ's latency is its requests' own: Σ decode time over Σ decode steps, Σ_B B / Σ_B (B / t_B) here
    assert measured["segments"][0]["itl_mean_s"] == pytest.approx(
        (4 + 16) / sum(b / step_s[3][b] for b in (4, 16)), rel=1e-3)
    assert measured["value"] == pytest.approx(s, rel=0.01)
    lo, hi = measured["confidence_interval"]
    # narrower than the log's (0.12 wide): the latency is counted, only the mixes are sampled
    assert lo <= s <= hi and hi - lo < 0.08
    assert doc["anchor"]["baseline_tokens_per_second"] == pytest.approx(1 / x, rel=0.03)


def test_littles_law_over_logged_intervals_and_the_pairs_that_show_persistence():
    """Σ Running × length over Σ (tokens − accepted); pairs only between contiguous intervals of
    one stream (not across a gap, not across streams); an interval without a decode step is
    left out of both sums."""
    from acceptance.ingested_window import logged_latency

    load = {"time": np.array([10.0, 20.0, 30.0, 60.0, 15.0, 25.0, 35.0]),
            "interval_s": np.full(7, 10.0),
            "running": np.array([4, 4, 8, 8, 2, 0, 2]),
            "generation_tokens": np.array([500.0, 500.0, 900.0, 900.0, 300.0, 0.0, 300.0]),
            "drafts": np.array([300.0, 300.0, 500.0, 500.0, 200.0, 0.0, 200.0]),
            "accepted_tokens": np.array([100.0, 100.0, 100.0, 100.0, 50.0, 0.0, 50.0]),
            "stream": np.array(["a", "a", "a", "a", "b", "b", "b"], dtype=object)}
    got = logged_latency(load)
    assert got.request_seconds == pytest.approx(10.0 * (4 + 4 + 8 + 8 + 2 + 2))
    assert got.request_steps == pytest.approx(400 + 400 + 800 + 800 + 250 + 250)
    assert got.batch_samples == {2: 2.0, 4: 2.0, 8: 2.0}
    # a: 10→20 (kept 4), 20→30 (4→8); 30→60 is a gap. b: 15→35 skips the idle row, a gap too.
    assert (got.sample_pairs, got.repeated_pairs) == (2, 1)
    # ν: of 3,400 output tokens, 2,000 drafted steps emitted 2,000 + 500; the other 900 steps drafted nothing
    assert got.undrafted_token_share == pytest.approx(900 / 3400)
    assert logged_latency({**load, "generation_tokens": load["accepted_tokens"]}) is None


def _fleet_route(tmp_path, capsys, route_tables: str, routes: tuple[str, ...] = ("chat",), seed: int = 5):
    """Requests of a least-loaded fleet of four engines (2 arrivals/s, 8 s median decode),
    dealt to ``routes`` in turn and ingested; the config: roofline, dspark, then ``route_tables``.
    Returns (config path, db path, the engines' true time shares)."""
    from support import fleet_request_lines, least_loaded_fleet

    finish, decode, truth = least_loaded_fleet(2400, engines=4, rate=2.0, seed=seed)
    t0 = time.time() - 1500 - float(finish.max())
    lines = []
    for i, route in enumerate(routes):
        lines += fleet_request_lines(finish[i::len(routes)], decode[i::len(routes)], 0.8, 3, t0, seed=seed + i,
                                     route=route)
    (tmp_path / "requests.jsonl").write_text("\n".join(lines) + "\n")
    config, db = tmp_path / "specdec.toml", tmp_path / "specdec.db"
    config.write_text('[deployment]\nmethod = "dspark"\ncost_profile = "roofline"\n' + route_tables)
    code, _, err = run_cli(capsys, main, ["ingest", "--route", routes[0], "--per-request", "requests.jsonl",
                                          "--config", str(config), "--db", str(db)])
    assert code == 0, err
    return config, db, truth


def _total_variation(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def test_a_per_request_route_is_priced_at_the_batch_mix_its_requests_ran_in(tmp_path, capsys, monkeypatch):
    """Four engines behind a least-loaded balancer: the requests' finish and decode times give the
    engines' batch mix (their mean exactly, each size's time share within a few points), and the
    route is priced at it — the same projection as a what-if at the engines' true time shares."""
    from specdec.config import load_config
    from specdec.pipeline import tune_route, what_if

    monkeypatch.chdir(tmp_path)
    config, db, truth = _fleet_route(tmp_path, capsys, '[routes.chat]\nsource = "per-request"\nengines = 4\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    shares = {int(b): u for b, u in doc["observed"]["batch_time_shares"].items()}
    assert _total_variation(shares, truth) < 0.08
    mean = sum(b * u for b, u in shares.items())
    assert mean == pytest.approx(sum(b * u for b, u in truth.items()), rel=0.01)
    assert doc["observed"]["batch_mix"] and len(doc["observed"]["batch_mix"]) > 3
    assert any(n.startswith("batch mix: ") and "over 4 engine(s)" in n and "(2,400)" in n for n in doc["observed"]["notes"])
    with Store.open(db) as store:
        tuning = tune_route(load_config(config), "chat", store=store)
    _, at_truth = what_if(tuning, {}, batch_time_shares=truth)
    for ours, true in zip(tuning.recommendation.candidates, at_truth.candidates):
        assert ours.speedup == pytest.approx(true.speedup, rel=0.01)
    batch_one = what_if(tuning, {}, batch_time_shares={1: 1.0})[1]
    moved = max(abs(a.speedup / b.speedup - 1) for a, b in zip(at_truth.candidates, batch_one.candidates))
    assert moved > 0.03  # at batch 1 the projection would differ: the mix is what is priced


def test_a_per_request_route_without_engines_is_priced_at_batch_1_and_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _fleet_route(tmp_path, capsys, '[routes.chat]\nsource = "per-request"\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "chat"])
    assert code == 0, err
    assert "note: batch mix: none — per-request rows name no engine" in out
    assert "set engines = N under [routes.chat]" in out
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--json"])
    assert json.loads(out)["observed"]["batch_mix"] is None


def test_routes_of_one_deployment_count_each_others_requests_in_the_batch(tmp_path, capsys, monkeypatch):
    """Half the requests on each of two routes of one deployment: each route's batch mix is the
    engines' whole one, where a route counted alone would see half the batch."""
    monkeypatch.chdir(tmp_path)
    tables = ''.join(f'[routes.{r}]\nsource = "per-request"\nengines = 4\ndeployment = "pool"\n' for r in ("a", "b"))
    _, _, truth = _fleet_route(tmp_path, capsys, tables, routes=("a", "b"))
    mean = {}
    for route in ("a", "b"):
        code, out, err = run_cli(capsys, tune_gamma_main, ["--route", route, "--json"])
        assert code == 0, err
        doc = json.loads(out)
        shares = {int(b): u for b, u in doc["observed"]["batch_time_shares"].items()}
        assert _total_variation(shares, truth) < 0.08
        assert any("the decode times of the requests of routes" in n for n in doc["observed"]["notes"])
        mean[route] = sum(b * u for b, u in shares.items())
    (tmp_path / "specdec.toml").write_text('[deployment]\nmethod = "dspark"\ncost_profile = "roofline"\n'
                                           '[routes.a]\nsource = "per-request"\nengines = 4\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "a", "--json"])
    alone = json.loads(out)["observed"]["batch_time_shares"]
    assert sum(int(b) * u for b, u in alone.items()) < 0.7 * mean["a"]
