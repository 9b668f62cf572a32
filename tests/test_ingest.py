"""`specdec ingest` → store → tune-gamma, for routes that share one deployment (per-request
metrics) or only have logs: the stored counts are the truth's, exactly."""

from __future__ import annotations

import json
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
