"""Bytes per weight, compute precision and cache dtypes from a Hugging Face config:
``quantization_config`` when there is one (fp8, mxfp4, AWQ, GPTQ, compressed-tensors,
ModelOpt), else ``torch_dtype`` / ``dtype``.

Quantisation never covers every weight: embeddings, the LM head and the MoE routers stay in
the model dtype under every method here (each method's default exclusions), and the config
may exclude more (``modules_to_not_convert``, ``ignore``, ``exclude_modules``). So bytes per
weight is a parameter-weighted average over all weights, and its source says which part
is quantised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .figures import Figure
from .hf_fields import Fields
from .hf_layers import KIND_WORDS, KINDS, Part

DTYPE_BYTES = {"bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2, "float32": 4, "fp32": 4, "float": 4,
               "float8_e4m3fn": 1, "float8_e5m2": 1, "uint8": 1, "int8": 1}
SCALE_NOTE = {1: "8-bit", 2: "16-bit", 4: "32-bit"}


@dataclass(frozen=True)
class Scheme:
    """How the quantised weights are stored."""

    bytes: float
    note: str  # the method and its fields, for the source
    compute: str  # "fp4", "fp8" or "bf16": the GPU FLOP/s figure that applies
    excluded: tuple[str, ...]  # the config's not-quantised module names or patterns
    kv_bytes: float | None = None  # a KV-cache dtype the config states, if any


# ------------------------------------------------------------------------------ dtypes
def model_dtype(f: Fields) -> tuple[float, str]:
    """Bytes of an unquantised weight: torch_dtype / dtype, else bf16 (assumed, said)."""
    key = f.first(("torch_dtype", "dtype"))
    if key is None:
        return 2, "2 bytes (assumed bfloat16: no torch_dtype or dtype)"
    name = f.text(key).removeprefix("torch.")
    if name not in DTYPE_BYTES or DTYPE_BYTES[name] == 1:
        raise f.fail(key, f"must be bfloat16, float16 or float32, got {name!r}")
    return DTYPE_BYTES[name], f"{DTYPE_BYTES[name]} bytes ({f.name(key)} {name})"


def _scale_bytes(f: Fields, key: str, default: int) -> int:
    if not f.has(key):
        return default
    name = f.text(key).removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise f.fail(key, f"is not a dtype this tool knows, got {name!r}")
    return DTYPE_BYTES[name]


# ------------------------------------------------------------------------------ methods
def read_scheme(f: Fields) -> Scheme | None:
    """The quantisation scheme of ``quantization_config``; None when there is none."""
    if not f.has("quantization_config"):
        return None
    q = f.sub("quantization_config")
    method = q.text("quant_method").lower()
    readers = {"fp8": _fp8, "fbgemm_fp8": _fp8, "mxfp4": _mxfp4, "awq": _int_groups, "gptq": _int_groups,
               "compressed-tensors": _compressed_tensors, "modelopt": _modelopt}
    if method not in readers:
        raise q.fail("quant_method", f"{method!r} is not modelled (known: {', '.join(sorted(readers))})")
    return readers[method](q, method)


def _fp8(q: Fields, method: str) -> Scheme:
    block = q.int_list("weight_block_size", minimum=1)
    scales = (f"one fp32 scale per {'×'.join(map(str, block))} block (+{4 / max(1, _product(block)):.4f} B) neglected"
              if block else "per-tensor/channel scales neglected")
    return Scheme(1.0, f"{q.name('quant_method')} {method}: 1 byte per weight, {scales}", "fp8",
                  tuple(q.str_list("modules_to_not_convert")))


def _mxfp4(q: Fields, method: str) -> Scheme:
    return Scheme(4.25 / 8, f"{q.name('quant_method')} mxfp4: 4-bit elements + one 8-bit E8M0 scale per 32 "
                            f"(OCP MX) = 4.25 bits", "fp4", tuple(q.str_list("modules_to_not_convert")))


def _int_groups(q: Fields, method: str) -> Scheme:
    """AWQ / GPTQ: integer weights, one fp16 scale per group (+ a zero point per group when
    asymmetric: AWQ's zero_point, GPTQ's sym false)."""
    bits, bits_key = q.one_of(("bits", "w_bit"))
    group_key = q.first(("group_size", "q_group_size"))
    group, where = -1, "per output channel (scales neglected)"
    if group_key and q.get(group_key, -1) != -1:
        group = q.int(group_key)
        where = f"{q.name(group_key)} {group}"
    asym = q.flag("zero_point", True) if method == "awq" else not q.flag("sym", True)
    per_group = 0.0 if group == -1 else (2 + (bits / 8 if asym else 0)) / group
    zero = f" + {bits}-bit zero point" if asym and group != -1 else ""
    return Scheme(bits / 8 + per_group, f"{q.name('quant_method')} {method} {q.name(bits_key)} {bits}, {where}: "
                                        f"{bits}/8 byte + fp16 scale{zero} per group", "bf16",
                  tuple(q.str_list("modules_to_not_convert")))


def _compressed_tensors(q: Fields, method: str) -> Scheme:
    groups = q.sub("config_groups")
    schemes = {}
    for name in groups.values:
        weights = groups.sub(name).sub("weights")
        schemes[name] = _ct_weights(weights)
    distinct = {(s[0], s[2]) for s in schemes.values()}
    if not distinct:
        raise q.fail("config_groups", "has no group")
    if len(distinct) > 1:
        raise q.fail("config_groups", "has groups with different weight schemes, which this tool does not model")
    size, note, compute = next(iter(schemes.values()))
    kv = None
    if q.has("kv_cache_scheme"):
        kv = q.sub("kv_cache_scheme").int("num_bits") / 8
    return Scheme(size, f"{q.name('quant_method')} compressed-tensors config_groups weights {note}", compute,
                  tuple(q.str_list("ignore")), kv)


def _ct_weights(w: Fields) -> tuple[float, str, str]:
    bits, kind = w.int("num_bits"), w.text("type", default="int")
    strategy = w.text("strategy", default="tensor")
    if strategy in ("group", "tensor_group"):
        group = w.int("group_size")
        # fp4 scales are 8-bit (NVFP4: E4M3 per 16, MXFP4: E8M0 per 32); int scales fp16.
        scale = _scale_bytes(w, "scale_dtype", 1 if kind == "float" and bits == 4 else 2)
        zero = 0 if w.flag("symmetric", True) else bits / 8
        size = bits / 8 + (scale + zero) / group
        zero_note = f" + {bits}-bit zero point" if zero else ""
        note = (f"num_bits {bits} {kind}, group_size {group}: {bits}/8 byte + one {SCALE_NOTE.get(scale, '')} scale"
                f"{zero_note} per group = {size * 8:g} bits")
    elif strategy == "block":
        block = w.int_list("block_structure", minimum=1)
        size, note = bits / 8, f"num_bits {bits} {kind}, block_structure {block}: block scales neglected"
    else:
        size, note = bits / 8, f"num_bits {bits} {kind}, strategy {strategy}: scales neglected"
    compute = ("fp4" if bits == 4 else "fp8" if bits == 8 else "bf16") if kind == "float" else "bf16"
    return size, note, compute


def _modelopt(q: Fields, method: str) -> Scheme:
    algo = q.text("quant_algo").upper()
    excluded = tuple(q.str_list("exclude_modules"))
    kv = 1.0 if str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" else None
    method_note = f"{q.name('quant_method')} modelopt, {q.name('quant_algo')} {algo}"
    if algo == "FP8":
        return Scheme(1.0, f"{method_note}: 1 byte per weight, scales neglected", "fp8", excluded, kv)
    if algo == "NVFP4":
        return Scheme(4.5 / 8, f"{method_note}: 4-bit elements + one FP8 E4M3 scale per 16 = 4.5 bits",
                      "fp4", excluded, kv)
    raise q.fail("quant_algo", f"{algo!r} is not modelled (known: FP8, NVFP4)")


def _product(values: list[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


# ------------------------------------------------------------------------------ which weights
def excluded(module: str, patterns: tuple[str, ...]) -> bool:
    """Whether an ignore list names ``module``: ``re:<regex>`` (compressed-tensors, matched
    from the start), or a dotted name / glob (``model.layers.*.self_attn``) matching whole
    components from the start or from any component (AWQ matches names inside paths)."""
    for pattern in patterns:
        if pattern.startswith("re:"):
            if re.match(pattern[3:], module):
                return True
            continue
        glob = r"[^.]+".join(re.escape(piece) for piece in pattern.split("*"))
        if re.search(rf"(^|\.){glob}(\.|$)", module):
            return True
    return False


def bytes_per_weight(f: Fields, parts: list[Part]) -> tuple[Figure, str, Scheme | None]:
    """The parameter-weighted bytes per weight, the compute precision, and the scheme."""
    size, dtype_note = model_dtype(f)
    scheme = read_scheme(f)
    where = f.where
    if scheme is None:
        return Figure(size, f"{where}: {dtype_note} per weight, no quantization_config"), "bf16", None
    quantised = sum(p.params for p in parts if p.module and not excluded(p.module, scheme.excluded))
    total = sum(p.params for p in parts)
    if quantised == 0:
        return (Figure(size, f"{where}: {dtype_note} per weight; {scheme.note} covers none of the counted weights"),
                "bf16", scheme)
    value = (quantised * scheme.bytes + (total - quantised) * size) / total
    kinds = sorted({p.kind for p in parts if p.params and (not p.module or excluded(p.module, scheme.excluded))},
                   key=KINDS.index)
    source = (f"{where}: parameter-weighted average: {quantised / 1e9:.2f}B weights at {scheme.bytes:g} B "
              f"({scheme.note}) + {(total - quantised) / 1e9:.2f}B unquantised at {dtype_note} "
              f"({', '.join(KIND_WORDS[k] for k in kinds)}: embeddings, lm_head and routers always, others by the "
              f"config's ignore list)")
    return Figure(value, source), scheme.compute, scheme


def cache_dtype(f: Fields, scheme: Scheme | None) -> tuple[float, str]:
    """Bytes of a KV-cache element: the config's KV scheme if it states one, else the model dtype."""
    if scheme is not None and scheme.kv_bytes is not None:
        return scheme.kv_bytes, f"{scheme.kv_bytes:g} bytes (the quantization_config's KV-cache scheme)"
    size, note = model_dtype(f)
    return size, f"{note}; assumed KV dtype = model dtype: vLLM's --kv-cache-dtype may differ"
