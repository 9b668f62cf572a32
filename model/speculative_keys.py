"""The rest of an engine's ``--speculative-config``: the keys beside the method, γ and draft
model that a deploy line carries back unchanged (``[deployment] speculative_keys``), checked
against vLLM 0.33's own ``SpeculativeConfig``; and which of them a method's behaviour reads.

Source: vLLM 0.33.0, ``vllm/config/speculative.py`` (``pip download vllm==0.33.0 --no-deps``),
class ``SpeculativeConfig``: its fields (``VLLM_FIELDS``, in the class's order), their
annotations and ``Field`` bounds (``KEYS``), the ngram defaults of ``__post_init__`` (both
prompt_lookup bounds unset: 5 and 5; one set: the other follows it), the suffix keys'
defaults and the bounds of ``_validate_suffix_decoding``,
and the checks of ``__post_init__`` and ``_verify_args`` that refuse a key for other methods
(dspark_draft_topk, xpress_topc, index_share_for_mtp_iteration, draft_lm_head_quantization,
use_heterogeneous_vocab), ``tensor_parallel_size`` outright, synthetic acceptance without
``rejection_sample_method = "synthetic"`` and FLy below γ 2 or at a window ≥ γ.
``tests/test_speculative_keys_vllm.py`` (``make test-vllm``) holds this table to the class.

/metrics carries none of these keys, so specdec knows them only when the config gives them.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Mapping

from .drafters import MTP_ALIASES

# Every field of vLLM 0.33.0's SpeculativeConfig, in the class's order.
VLLM_FIELDS: tuple[str, ...] = (
    "enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size",
    "tensor_parallel_size", "quantization", "moe_backend", "attention_backend", "kv_cache_dtype",
    "max_model_len", "revision", "code_revision", "index_share_for_mtp_iteration",
    "disable_padded_drafter_batch", "disable_eagle_block_drop", "disable_lookahead_block_hashes",
    "draft_lm_head_quantization", "use_local_argmax_reduction", "use_heterogeneous_vocab",
    "prompt_lookup_max", "prompt_lookup_min", "parallel_drafting", "target_model_config",
    "target_parallel_config", "num_speculative_tokens_per_batch_size", "draft_model_config",
    "draft_parallel_config", "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob", "draft_load_config",
    "rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length",
    "enable_adaptive_verification", "draft_sample_method", "dspark_draft_topk", "xpress_topc",
    "fly_window_size", "fly_entropy_threshold", "fly_entropy_top_k",
)

# The fields speculative_keys may not hold, and why: specdec writes them itself, or no serving
# deploy line may carry them.
OWN_KEYS: dict[str, str] = {
    "method": "it has a key of its own: method",
    "num_speculative_tokens": "it is the gamma specdec decides",
    "model": "it has a key of its own: draft_model",
    "num_speculative_tokens_per_batch_size": ("specdec writes the batch-size schedule itself, for the gamma it "
                                              "decides"),
    "parallel_drafting": 'set method = "parallel_drafting" (priced as a parallel drafter) instead',
    "tensor_parallel_size": ("vLLM refuses it in --speculative-config (the draft's is draft_tensor_parallel_size; "
                             "the target's, [deployment] tensor_parallel_size)"),
    "target_model_config": "the engine sets it, not --speculative-config",
    "target_parallel_config": "the engine sets it, not --speculative-config",
    "draft_model_config": "the engine sets it, not --speculative-config",
    "draft_parallel_config": "the engine sets it, not --speculative-config",
    "synthetic_acceptance_rates": ("synthetic acceptance forces accept decisions and corrupts outputs: benchmarks "
                                   "only (replay_config writes it), never a serving deploy line"),
    "synthetic_acceptance_length": ("synthetic acceptance forces accept decisions and corrupts outputs: benchmarks "
                                    "only (replay_config writes it), never a serving deploy line"),
}

# vLLM's methods (after its own renames: an <model>_mtp alias is mtp; specdec's
# parallel_drafting is draft_model with the flag) by the drafter they run.
NGRAM = ("ngram", "ngram_gpu")
SUFFIX = ("suffix",)
EAGLE_FAMILY = ("eagle", "eagle3", "mtp", "dflash", "dspark")  # SpeculativeConfig.use_eagle()
MODEL_DRAFTERS = ("draft_model", *EAGLE_FAMILY)  # a draft model or head of its own


# vLLM 0.33.0's MoEBackend (vllm/config/kernel.py), the values moe_backend takes.
MOE_BACKENDS = (
    "auto", "triton", "batched_triton", "deep_gemm", "deep_gemm_mega_moe", "cutlass", "flashinfer_trtllm",
    "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_moe_ep_cutedsl", "flashinfer_b12x", "b12x",
    "flashinfer_moe_ep_mega_deep_gemm", "marlin", "humming", "triton_unfused", "aiter", "aiter_mega_moe",
    "aiter_triton_mxfp4_bf16", "aiter_triton_mxfp4_mxfp4", "flydsl", "hpc", "emulation", "rdna3",
)


@dataclass(frozen=True)
class EngineKey:
    """One SpeculativeConfig field speculative_keys may hold: its JSON type (``boolean``,
    ``integer``, ``number``, ``string``, ``object``), whether null is allowed, the values a
    Literal allows, the bound a ``Field(ge=...)`` or the method's own check sets, the vLLM
    methods whose behaviour reads it (empty: every method) and whether vLLM refuses it for
    the others (``only``), and what vLLM runs when it is not set (None: derived, e.g. from
    the target, or nothing)."""

    json_type: str
    nullable: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    methods: tuple[str, ...] = ()
    only: bool = False
    default: object = None


KEYS: dict[str, EngineKey] = {
    "enforce_eager": EngineKey("boolean", nullable=True, methods=MODEL_DRAFTERS),
    "draft_tensor_parallel_size": EngineKey("integer", nullable=True, minimum=1, methods=MODEL_DRAFTERS),
    "quantization": EngineKey("string", nullable=True, methods=MODEL_DRAFTERS),
    "moe_backend": EngineKey("string", nullable=True, choices=MOE_BACKENDS, methods=MODEL_DRAFTERS),
    "attention_backend": EngineKey("string", nullable=True, methods=MODEL_DRAFTERS),
    "kv_cache_dtype": EngineKey("string", nullable=True, methods=MODEL_DRAFTERS),
    "max_model_len": EngineKey("integer", nullable=True, minimum=1, methods=MODEL_DRAFTERS),
    "revision": EngineKey("string", nullable=True, methods=MODEL_DRAFTERS),
    "code_revision": EngineKey("string", nullable=True, methods=MODEL_DRAFTERS),
    "index_share_for_mtp_iteration": EngineKey("boolean", nullable=True, methods=("mtp",), only=True),
    "disable_padded_drafter_batch": EngineKey("boolean", methods=EAGLE_FAMILY, default=False),
    "disable_eagle_block_drop": EngineKey("boolean", methods=EAGLE_FAMILY, default=False),
    "disable_lookahead_block_hashes": EngineKey("boolean", methods=EAGLE_FAMILY, default=False),
    "draft_lm_head_quantization": EngineKey("string", nullable=True, choices=("fp8", "nvfp4"),
                                            methods=("eagle", "eagle3", "mtp"), only=True),
    "use_local_argmax_reduction": EngineKey("boolean", methods=MODEL_DRAFTERS, default=False),
    "use_heterogeneous_vocab": EngineKey("boolean", methods=("draft_model",), only=True, default=False),
    "prompt_lookup_min": EngineKey("integer", nullable=True, minimum=1, methods=NGRAM, default=5),
    "prompt_lookup_max": EngineKey("integer", nullable=True, minimum=1, methods=NGRAM, default=5),
    "suffix_decoding_max_tree_depth": EngineKey("integer", minimum=1, methods=SUFFIX, default=24),
    "suffix_decoding_max_cached_requests": EngineKey("integer", minimum=0, methods=SUFFIX, default=10000),
    "suffix_decoding_max_spec_factor": EngineKey("number", minimum=0, methods=SUFFIX, default=1.0),
    "suffix_decoding_min_token_prob": EngineKey("number", minimum=0, maximum=1, methods=SUFFIX, default=0.1),
    "draft_load_config": EngineKey("object", nullable=True, methods=MODEL_DRAFTERS),
    # "synthetic" is vLLM's too, refused below: benchmarks only
    "rejection_sample_method": EngineKey("string", choices=("standard", "synthetic", "block", "fly"),
                                         default="standard"),
    "enable_adaptive_verification": EngineKey("boolean", methods=("dspark",), default=False),
    "draft_sample_method": EngineKey("string", choices=("greedy", "probabilistic"), methods=MODEL_DRAFTERS,
                                     default="greedy"),
    "dspark_draft_topk": EngineKey("integer", nullable=True, minimum=1, methods=("dspark",), only=True),
    "xpress_topc": EngineKey("integer", nullable=True, minimum=0, methods=("dflash",), only=True),
    "fly_window_size": EngineKey("integer", nullable=True, minimum=1),
    "fly_entropy_threshold": EngineKey("number", minimum=0, default=0.3),
    "fly_entropy_top_k": EngineKey("integer", minimum=1, default=3),
}

_TYPE_WORDS = {"boolean": "true or false", "integer": "a whole number", "number": "a number",
               "string": "a string", "object": "a table (a JSON object)"}


def vllm_method(method: str) -> str:
    """The method vLLM's SpeculativeConfig ends with for specdec's ``method``."""
    if method in MTP_ALIASES:
        return "mtp"
    if method == "parallel_drafting":
        return "draft_model"
    return method


def _json_type_of(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if value is None:
        return "null"
    return "array" if isinstance(value, (list, tuple)) else type(value).__name__


def _check_value(name: str, key: EngineKey, value: object) -> str | None:
    """Why ``value`` cannot be ``name``'s, or None."""
    got = _json_type_of(value)
    if value is None:
        return None if key.nullable else f"must be {_TYPE_WORDS[key.json_type]}, not null"
    if got != key.json_type and not (key.json_type == "number" and got == "integer"):
        return f"must be {_TYPE_WORDS[key.json_type]}, got {got} {value!r}"
    if key.choices and value not in key.choices:
        return f"must be one of {', '.join(key.choices)}, got {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            return f"must be finite, got {value!r}"
        if key.minimum is not None and value < key.minimum:
            return f"must be ≥ {key.minimum:g}, got {value!r}"
        if key.maximum is not None and value > key.maximum:
            return f"must be ≤ {key.maximum:g}, got {value!r}"
    return None


def check_speculative_keys(keys: object, method: str | None) -> str | None:
    """Why ``keys`` (the rest of a --speculative-config) cannot go into ``method``'s deploy
    line, in words naming the first bad key, or None: a table of SpeculativeConfig fields
    other than those specdec writes itself, each of its JSON type, as vLLM accepts them
    (``method`` None: what holds whatever the method, as for a flag given without --method)."""
    if not isinstance(keys, Mapping):
        return (f"must be a table of the engine's other --speculative-config keys (a JSON object such as "
                f'{{"prompt_lookup_min": 1}}), got {_json_type_of(keys)} {keys!r}')
    target = None if method is None else vllm_method(method)
    for name, value in keys.items():
        if name in OWN_KEYS:
            return f"{name}: not here — {OWN_KEYS[name]}"
        if name not in KEYS:
            close = difflib.get_close_matches(str(name), VLLM_FIELDS, n=1)
            return (f"{name}: not a field of vLLM 0.33's SpeculativeConfig (vllm/config/speculative.py)"
                    + (f"; did you mean {close[0]}?" if close else ""))
        key = KEYS[name]
        if (why := _check_value(name, key, value)) is not None:
            return f"{name}: {why}"
        if key.only and target is not None and target not in key.methods:
            return f"{name}: vLLM takes it only with method {' or '.join(key.methods)}, not {method}"
    if value_of(keys, "rejection_sample_method") == "synthetic":
        return "rejection_sample_method: " + OWN_KEYS["synthetic_acceptance_rates"]
    low, high = value_of(keys, "prompt_lookup_min"), value_of(keys, "prompt_lookup_max")
    if isinstance(low, int) and isinstance(high, int) and low > high and target in (None, *NGRAM):
        return f"prompt_lookup_min: vLLM needs it ≤ prompt_lookup_max, got {low} > {high}"
    return None


def value_of(keys: Mapping[str, object] | tuple[tuple[str, object], ...] | None, name: str) -> object:
    """The value ``keys`` give ``name`` (None: not given)."""
    if keys is None:
        return None
    return (keys if isinstance(keys, Mapping) else dict(keys)).get(name)


def gamma_refusal(keys: tuple[tuple[str, object], ...] | None, gamma: int) -> str | None:
    """Why vLLM would refuse these keys at ``gamma`` draft tokens, or None (FLy verification
    needs γ ≥ 2 and its window below γ: SpeculativeConfig._verify_args)."""
    if gamma <= 0 or value_of(keys, "rejection_sample_method") != "fly":
        return None
    if gamma < 2:
        return "rejection_sample_method fly needs at least 2 draft tokens (vLLM)"
    window = value_of(keys, "fly_window_size")
    if isinstance(window, int) and window >= gamma:
        return f"fly_window_size {window} must be below gamma (vLLM)"
    return None


def method_keys(method: str) -> tuple[str, ...]:
    """The SpeculativeConfig keys ``method``'s own drafter reads (KEYS' order)."""
    target = vllm_method(method)
    return tuple(name for name, key in KEYS.items() if key.methods and target in key.methods)


@dataclass(frozen=True)
class UnknownMethodKeys:
    """A deploy line written without the engine's own keys of its method: ``keys`` are those
    the method reads, which /metrics does not carry and [deployment] speculative_keys did
    not give; ``defaults`` what vLLM runs for those of them it fixes when they are not set."""

    method: str
    keys: tuple[str, ...]
    defaults: tuple[tuple[str, object], ...]

    def to_dict(self) -> dict[str, object]:
        return {"method": self.method, "keys": list(self.keys), "vllm_defaults": dict(self.defaults)}


def unknown_method_keys(method: str, keys_given: bool) -> UnknownMethodKeys | None:
    """The method's own keys a deploy line cannot carry because speculative_keys was not set
    (None: it was, or the method reads none)."""
    own = method_keys(method)
    if keys_given or not own:
        return None
    return UnknownMethodKeys(method, own, tuple((k, KEYS[k].default) for k in own if KEYS[k].default is not None))
