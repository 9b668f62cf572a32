"""Deployment keys, defaults and one-line validation errors."""

import pytest

from model.deployment import DEPLOYMENT_KEYS, INLINE_DEFAULTS, Deployment, ModelInputError
from model.drafters import FREE, PARALLEL, SEQUENTIAL, drafter_for


def test_defaults_are_the_design_docs():
    d = Deployment()
    assert (d.method, d.draft_cost, d.decode_backend, d.specialized_speedup) == ("dspark", 0.10, "auto", (1.5, 2.0))
    assert (d.model, d.gpu, d.tensor_parallel_size, d.baseline_tokens_per_second) == ("kimi-k3", "GB300", 16, 118)
    assert (d.cost_profile, d.objective, d.min_gain) == ("roofline", "interactivity", 0.03)
    assert d.specialized_speedup_point == 1.75
    assert (INLINE_DEFAULTS.method, INLINE_DEFAULTS.draft_cost, INLINE_DEFAULTS.cost_profile) == ("dspark", 0.10, "flat")


def test_from_mapping_layers_over_a_base_and_converts_toml_lists():
    base = Deployment.from_mapping({"draft_cost": 0.2, "decode_backend": "latency_specialized"}, where="[deployment]")
    route = Deployment.from_mapping(
        {"specialized_speedup": [1.6, 1.9], "targets": ["http://x"]}, where="[routes.a]", base=base, ignore=("targets",)
    )
    assert route.draft_cost == 0.2
    assert route.decode_backend == "latency_specialized"
    assert route.specialized_speedup == (1.6, 1.9)
    assert Deployment.from_mapping({"specialized_speedup": 1.7}, where="x").specialized_speedup_range == (1.7, 1.7)


def test_error_names_key_and_where_on_one_line():
    with pytest.raises(ModelInputError) as e:
        Deployment.from_mapping({"draft_cost": -1}, where="specdec.toml [routes.open]")
    assert str(e.value) == "specdec.toml [routes.open] draft_cost: must be a number ≥ 0, got -1"


@pytest.mark.parametrize(
    "mapping, needle",
    [
        ({"method": "medusa"}, "known: dspark"),
        ({"decode_backend": "fast"}, "decode_backend"),
        ({"specialized_speedup": [2.0, 1.5]}, "specialized_speedup"),
        ({"specialized_speedup": 0}, "specialized_speedup"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
        ({"tensor_parallel_size": 2.5}, "tensor_parallel_size"),
        ({"baseline_tokens_per_second": -5}, "baseline_tokens_per_second"),
        ({"objective": "latency"}, "objective"),
        ({"min_gain": -0.1}, "min_gain"),
        ({"draft_cost": "cheap"}, "draft_cost"),
        ({"draft_cost": "0.1"}, "draft_cost: must be a number ≥ 0, got '0.1'"),
        ({"min_gain": 3}, "min_gain: must be a fraction in [0, 1): 0.03 asks for a 3% gain, got 3"),
        ({"draft_cost": True}, "draft_cost"),
        ({"cost_profile": "magic"}, "cost_profile"),
        ({"model": "gpt-9"}, "no roofline figures"),
        ({"gpu": "TPU"}, "no roofline figures"),
        ({"drafts_cost": 0.1}, "unknown deployment key 'drafts_cost'"),
        ({"cudagraph_capture_sizes": [0, 8]}, "cudagraph_capture_sizes"),
    ],
)
def test_bad_values_raise_one_line(mapping, needle):
    with pytest.raises(ModelInputError) as e:
        Deployment.from_mapping(mapping, where="cfg")
    msg = str(e.value)
    assert needle in msg
    assert "\n" not in msg
    assert msg.startswith("cfg")


def test_unknown_method_lists_the_known_ones():
    with pytest.raises(ModelInputError) as e:
        drafter_for("medusa")
    for m in ("dspark", "eagle3", "mtp", "ngram", "suffix", "draft_model", "dflash"):
        assert m in str(e.value)


def test_unknown_model_is_fine_without_the_roofline():
    d = Deployment.from_mapping({"model": "my-model", "cost_profile": "flat"}, where="x")
    assert d.model == "my-model"


def test_direct_construction_validates_too():
    with pytest.raises(ModelInputError, match="draft_cost"):
        Deployment(draft_cost=-0.5)


def test_drafter_kinds():
    assert drafter_for("dspark").kind == PARALLEL
    assert drafter_for("dspark").max_gamma == 7
    assert drafter_for("dflash").kind == PARALLEL
    for m in ("eagle", "eagle3", "mtp", "draft_model", "deepseek_mtp"):
        assert drafter_for(m).kind == SEQUENTIAL
    for m in ("ngram", "suffix"):
        assert drafter_for(m).kind == FREE
    seq = drafter_for("eagle3")
    assert seq.draft_time_factor(3, 0.1, 0.05) == pytest.approx(0.35)
    assert seq.draft_time_factor(0, 0.1, 0.05) == 0.0
    assert drafter_for("dspark").draft_time_factor(5, 0.1) == pytest.approx(0.1)
    assert drafter_for("ngram").draft_time_factor(5, 0.1) == 0.0
    assert "7" in drafter_for("dspark").refusal(8)
    assert drafter_for("dspark").refusal(7) is None


def test_keys_cover_the_design_doc():
    design = {"method", "draft_cost", "decode_backend", "specialized_speedup", "model", "gpu",
              "tensor_parallel_size", "baseline_tokens_per_second", "cost_profile", "objective", "min_gain"}
    assert design <= set(DEPLOYMENT_KEYS)
