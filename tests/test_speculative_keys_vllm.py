"""specdec's list of vLLM 0.33's SpeculativeConfig fields (model/speculative_keys.py) against
vLLM's own class, and the --speculative-config specdec writes (method, γ, the engine's other
keys) built by vLLM's own EngineArgs into a real VllmConfig on the CPU.

Marked ``vllm``: they run in the vLLM virtual environment only (``make test-vllm``:
VLLM_TARGET_DEVICE=cpu, HF_HUB_OFFLINE=1); the core run deselects them.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import types
import typing
from types import SimpleNamespace as NS

import pytest

from model.deployment import Deployment, ModelInputError
from model.drafters import KNOWN_METHODS
from model.speculative_keys import KEYS, NGRAM, OWN_KEYS, SUFFIX, VLLM_FIELDS, gamma_refusal, method_keys
from model.vllm_config import schedule_dropped, speculative_config

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_speculative():
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import vllm.config.speculative as module

    return module


@pytest.fixture(scope="module")
def build(vllm_speculative, tmp_path_factory):
    """--speculative-config (a dict, as vLLM's CLI parses the JSON) → vLLM's SpeculativeConfig,
    through EngineArgs.create_engine_config on a tiny Llama folder."""
    from transformers import LlamaConfig
    from vllm.engine.arg_utils import EngineArgs

    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, vocab_size=1024, max_position_embeddings=1024).save_pretrained(folder)

    def engine_config(spec: dict):
        args = EngineArgs(model=str(folder), skip_tokenizer_init=True, load_format="dummy", enforce_eager=True,
                          served_model_name="tiny", max_model_len=512, speculative_config=spec)
        return args.create_engine_config().speculative_config

    engine_config.folder = str(folder)
    return engine_config


def _vllm_shape(annotation) -> tuple[str, bool, tuple]:
    """(JSON type, nullable, the Literal's values when the field takes nothing else) of a
    SpeculativeConfig field's annotation."""
    args = typing.get_args(annotation)
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    parts = [a for a in args if a is not type(None)] if union else [annotation]
    nullable = union and type(None) in args
    literals = [p for p in parts if typing.get_origin(p) is typing.Literal]
    if literals and len(parts) == 1:
        return "string", nullable, typing.get_args(literals[0])
    if literals and parts[1:] == [str]:
        return "string", nullable, ()  # a Literal or any string
    (only,) = parts
    if isinstance(only, type) and issubclass(only, enum.Enum):
        return "string", nullable, ()  # by name (SpeculativeConfig._parse_attention_backend)
    if dataclasses.is_dataclass(only):
        return "object", nullable, ()
    return {bool: "boolean", int: "integer", float: "number", str: "string"}[only], nullable, ()


def test_the_field_list_is_vllm_s_own(vllm_speculative):
    assert tuple(f.name for f in dataclasses.fields(vllm_speculative.SpeculativeConfig)) == VLLM_FIELDS
    # each field is either one speculative_keys may hold or one it refuses, with its reason
    assert set(KEYS) | set(OWN_KEYS) == set(VLLM_FIELDS) and not set(KEYS) & set(OWN_KEYS)


def test_each_key_s_type_choices_bound_and_default_are_vllm_s(vllm_speculative):
    fields = vllm_speculative.SpeculativeConfig.__pydantic_fields__
    for name, key in KEYS.items():
        info = fields[name]
        json_type, nullable, choices = _vllm_shape(info.annotation)
        assert (key.json_type, key.nullable) == (json_type, nullable), name
        assert key.choices == choices, name
        bounds = [m.ge for m in info.metadata if hasattr(m, "ge")]
        if bounds:
            assert key.minimum == bounds[0], name
        elif name not in SUFFIX_BOUNDED:
            assert key.minimum is None and key.maximum is None, name
        if info.default is not None:
            assert key.default == info.default, name


# The suffix keys' bounds are vLLM's _validate_suffix_decoding's, not Field metadata.
SUFFIX_BOUNDED = {k for k in KEYS if k.startswith("suffix_decoding_")}


@pytest.mark.parametrize("name, value, refused", [
    ("suffix_decoding_max_tree_depth", 0, True), ("suffix_decoding_max_tree_depth", 1, False),
    ("suffix_decoding_max_cached_requests", -1, True), ("suffix_decoding_max_cached_requests", 0, False),
    ("suffix_decoding_max_spec_factor", -0.5, True), ("suffix_decoding_max_spec_factor", 0.0, False),
    ("suffix_decoding_min_token_prob", 1.5, True), ("suffix_decoding_min_token_prob", 1.0, False),
    ("suffix_decoding_min_token_prob", -0.1, True),
])
def test_the_suffix_bounds_are_vllm_s(vllm_speculative, monkeypatch, name, value, refused):
    """vLLM's own suffix check (arctic-inference, which it asks for first, is not installed
    here: its presence is stood in for) refuses what specdec refuses."""
    monkeypatch.setattr(vllm_speculative, "has_arctic_inference", lambda: True)
    config = NS(num_speculative_tokens=3, **{k: KEYS[k].default for k in SUFFIX_BOUNDED})
    setattr(config, name, value)
    try:
        vllm_speculative.SpeculativeConfig._validate_suffix_decoding(config)
        vllm_refused = False
    except ValueError:
        vllm_refused = True
    with _refused_by_specdec() as specdec:
        Deployment(method="suffix", cost_profile="flat", speculative_keys=((name, value),))
    assert vllm_refused == refused == specdec.refused


class _refused_by_specdec:
    refused = False

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        self.refused = kind is ModelInputError
        return self.refused


def _deployment(method: str, keys: dict, **more) -> Deployment:
    return Deployment(method=method, cost_profile="flat", speculative_keys=tuple(keys.items()), **more)


def test_the_issue_s_ngram_config_is_vllm_s_engine_as_it_ran(build):
    """An engine started with prompt_lookup_min 1 alone runs 1..1 (vLLM's max follows the min);
    the line specdec writes for another γ keeps it, where a line without it runs 5..5."""
    written = speculative_config(_deployment("ngram", {"prompt_lookup_min": 1}), 11)
    assert written == {"method": "ngram", "num_speculative_tokens": 11, "prompt_lookup_min": 1}
    spec = build(written)
    assert (spec.method, spec.num_speculative_tokens, spec.prompt_lookup_min, spec.prompt_lookup_max) == \
        ("ngram", 11, 1, 1)
    bare = build(speculative_config(Deployment(method="ngram", cost_profile="flat"), 11))
    assert (bare.prompt_lookup_min, bare.prompt_lookup_max) == (KEYS["prompt_lookup_min"].default,
                                                               KEYS["prompt_lookup_max"].default)
    assert method_keys("ngram") == ("prompt_lookup_min", "prompt_lookup_max")


@pytest.mark.parametrize("method, keys", [
    ("ngram", {"prompt_lookup_min": 2, "prompt_lookup_max": 5, "rejection_sample_method": "block"}),
    ("ngram_gpu", {"prompt_lookup_max": 4}),
    ("ngram", {"rejection_sample_method": "fly", "fly_window_size": 2, "fly_entropy_threshold": 0.5,
               "fly_entropy_top_k": 2}),
    ("draft_model", {"draft_tensor_parallel_size": 1, "max_model_len": 256, "enforce_eager": True,
                     "draft_load_config": {"load_format": "dummy"}, "draft_sample_method": "probabilistic",
                     "use_local_argmax_reduction": False, "revision": None}),
    ("draft_model", {"use_heterogeneous_vocab": True}),
])
def test_a_written_config_is_accepted_by_vllm_with_every_key_as_given(build, method, keys):
    extra = {"draft_model": build.folder} if method == "draft_model" else {}
    written = speculative_config(_deployment(method, keys, **extra), 3)
    assert written["num_speculative_tokens"] == 3 and written["method"] == method
    spec = build(written)
    assert spec.num_speculative_tokens == 3
    for name, value in keys.items():
        got = getattr(spec, name)
        if name == "draft_load_config":
            assert got.load_format == value["load_format"]
        else:
            assert got == value, name


def test_a_suffix_config_is_accepted_by_vllm(build, vllm_speculative, monkeypatch):
    monkeypatch.setattr(vllm_speculative, "has_arctic_inference", lambda: True)
    keys = {"suffix_decoding_max_tree_depth": 12, "suffix_decoding_max_cached_requests": 0,
            "suffix_decoding_max_spec_factor": 2, "suffix_decoding_min_token_prob": 0.2}
    spec = build(speculative_config(_deployment("suffix", keys), 5))
    assert spec.num_speculative_tokens == 5
    assert {k: getattr(spec, k) for k in keys} == keys
    assert method_keys("suffix") == SUFFIX_KEYS


SUFFIX_KEYS = ("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
               "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob")


@pytest.mark.parametrize("keys", [
    {"dspark_draft_topk": 3}, {"xpress_topc": 0}, {"index_share_for_mtp_iteration": True},
    {"draft_lm_head_quantization": "fp8"},
])
def test_a_key_vllm_takes_only_with_another_method_is_refused_by_both(build, keys):
    (name,) = keys
    assert KEYS[name].only and "draft_model" not in KEYS[name].methods
    with pytest.raises(Exception, match=name):
        build({"method": "draft_model", "model": build.folder, "num_speculative_tokens": 3, **keys})
    with pytest.raises(ModelInputError, match=f"speculative_keys: {name}: vLLM takes it only with method"):
        _deployment("draft_model", keys, draft_model=build.folder)


def test_use_heterogeneous_vocab_off_a_draft_model_is_refused_by_both(build):
    with pytest.raises(Exception, match="use_heterogeneous_vocab"):
        build({"method": "ngram", "num_speculative_tokens": 3, "use_heterogeneous_vocab": True})
    with pytest.raises(ModelInputError, match="use_heterogeneous_vocab: vLLM takes it only with method draft_model"):
        _deployment("ngram", {"use_heterogeneous_vocab": True})


@pytest.mark.parametrize("keys, vllm_error", [
    ({"tensor_parallel_size": 1}, "draft_tensor_parallel_size"),
    ({"synthetic_acceptance_length": 2.0}, "synthetic"),
    ({"prompt_lookup_min": 4, "prompt_lookup_max": 2}, "prompt_lookup_min"),
    ({"prompt_lookup_min": 0}, "greater than or equal to 1"),
    ({"rejection_sample_method": "blok"}, "rejection_sample_method"),
    ({"prompt_lookup_minimum": 1}, "prompt_lookup_minimum"),
    ({"prompt_lookup_min": "two"}, "prompt_lookup_min"),
])
def test_what_vllm_refuses_specdec_refuses_in_one_line(build, keys, vllm_error):
    with pytest.raises(Exception, match=vllm_error):
        build({"method": "ngram", "num_speculative_tokens": 3, **keys})
    with pytest.raises(ModelInputError, match=r"^x speculative_keys: ") as refused:
        Deployment.from_mapping({"method": "ngram", "speculative_keys": keys}, where="x")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("gamma, window", [(1, None), (3, 3), (3, 4), (4, 3), (2, None)])
def test_fly_s_gamma_limits_are_vllm_s(build, gamma, window):
    keys = {"rejection_sample_method": "fly", **({} if window is None else {"fly_window_size": window})}
    try:
        build({"method": "ngram", "num_speculative_tokens": gamma, **keys})
        vllm_refused = False
    except Exception as e:  # pydantic's ValidationError, raised from vLLM's own check
        assert "FLy" in str(e)
        vllm_refused = True
    assert (gamma_refusal(tuple(keys.items()), gamma) is not None) == vllm_refused


def test_every_method_s_own_keys_are_fields_its_drafter_reads(vllm_speculative):
    """Per method: the keys the note names are fields, and those vLLM resets for a method
    (prompt_lookup_* to 0 off ngram) are not named for it."""
    for method in ("ngram", "ngram_gpu", *SUFFIX, "draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark"):
        own = method_keys(method)
        assert own and set(own) <= set(VLLM_FIELDS)
        assert any(k.startswith("prompt_lookup") for k in own) == (method in NGRAM)
        assert any(k.startswith("suffix_decoding") for k in own) == (method in SUFFIX)


def _vllm_method(method: str) -> str:
    """The method specdec's --speculative-config names for a drafter (parallel_drafting: draft_model)."""
    config = speculative_config(Deployment(method=method, draft_model=None if method in ("ngram", "ngram_gpu", "suffix")
                                           else "d"), 4)
    assert config is not None
    return str(config["method"])


@pytest.mark.parametrize("method", sorted({_vllm_method(m) for m in KNOWN_METHODS if not m.startswith("<")}))
def test_vllm_drops_a_batch_size_schedule_where_specdec_offers_none(vllm_speculative, method):
    """vLLM 0.33's own VllmConfig rules, on a config of each method specdec writes, with a
    schedule: the model runner it picks on a GPU with Triton (V2 unless a feature it does not
    support sends it to V1: suffix does) and whether that runner keeps the schedule — dropped
    exactly where model.vllm_config.schedule_dropped says, so no schedule is offered there."""
    from vllm.config.vllm import VllmConfig

    schedule = [(1, 8, 4), (9, 256, 2)]
    spec = NS(method=method, parallel_drafting=False, use_heterogeneous_vocab=False, num_speculative_tokens=4,
              num_speculative_tokens_per_batch_size=list(schedule), uses_dynamic_speculative_decoding=lambda: True)
    parallel = NS(distributed_executor_backend="mp", pipeline_parallel_size=1, use_ubatching=False)
    v2_refuses = VllmConfig._get_v2_model_runner_unsupported_features(NS(speculative_config=spec,
                                                                         parallel_config=parallel))
    VllmConfig._maybe_disable_dynamic_sd_for_v1(NS(speculative_config=spec, use_v2_model_runner=not v2_refuses))
    assert (spec.num_speculative_tokens_per_batch_size is None) == schedule_dropped(method), v2_refuses
    assert schedule_dropped(method) == (method == "suffix")


def test_an_ngram_schedule_is_kept_by_vllm_s_engine_config_and_dropped_under_data_parallelism(build):
    """Through vLLM's own EngineArgs on the CPU (the V1 runner here: no Triton): an n-gram
    schedule as specdec writes it is kept; with data_parallel_size 2 vLLM drops it without an
    error (VllmConfig._maybe_disable_dynamic_sd_for_data_parallel) — which specdec cannot see:
    no [deployment] key holds the data-parallel size yet."""
    from vllm.engine.arg_utils import EngineArgs

    config = speculative_config(Deployment(method="ngram"), 4, [(1, 8, 4), (9, 256, 2)])
    kept = {}
    for dp in (1, 2):
        args = EngineArgs(model=build.folder, skip_tokenizer_init=True, load_format="dummy", enforce_eager=True,
                          served_model_name="tiny", max_model_len=512, speculative_config=config,
                          data_parallel_size=dp)
        kept[dp] = args.create_engine_config().speculative_config.num_speculative_tokens_per_batch_size
    assert kept == {1: [(1, 8, 4), (9, 256, 2)], 2: None}
