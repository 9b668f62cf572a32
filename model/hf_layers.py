"""Which layer is which in a Hugging Face config, and what each holds: the parameter count
per layer kind (attention, linear attention, Mamba2, dense MLP, MoE), the KV bytes per
context token and the recurrent state per request.

Counts are of the weight matrices only: norms, biases, rotary tables and per-head scalars
are left out (well under 0.1% of any model here). Convolution weights of the recurrent
mixers are counted, being matrices of their own. Layer kinds come from, in order:
``hybrid_override_pattern`` (Nemotron-H: one character per layer), ``linear_attn_config``
(Kimi linear: KDA everywhere but ``full_attn_layers``, 1-based), ``layer_types``,
``full_attention_interval`` (Qwen3-Next: every n-th layer full, the rest Gated DeltaNet),
else every layer full attention. A full-attention layer is MLA when the config has
``kv_lora_rank``, else grouped-query attention.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .hf_fields import Fields

FULL, SLIDING, GDN, KDA, MAMBA = "full", "sliding", "gdn", "kda", "mamba"
DENSE, MOE = "dense", "moe"
# How each layer_types value reads; "attention" is Granite-4.0-H's spelling of full attention.
LAYER_TYPES = {"full_attention": FULL, "attention": FULL, "sliding_attention": SLIDING,
               "linear_attention": GDN, "mamba": MAMBA}
# hybrid_override_pattern characters (Nemotron-H): a layer is a mixer or an MLP, never both.
PATTERN = {"M": (MAMBA, ""), "*": (FULL, ""), "-": ("", DENSE), "E": ("", MOE)}
# Representative module names, matched against quantisation ignore lists ("{i}": layer index).
MODULES = {FULL: "model.layers.{i}.self_attn.q_proj", SLIDING: "model.layers.{i}.self_attn.q_proj",
           GDN: "model.layers.{i}.linear_attn.in_proj_qkvz", KDA: "model.layers.{i}.self_attn.q_proj",
           MAMBA: "model.layers.{i}.mixer.in_proj", DENSE: "model.layers.{i}.mlp.gate_proj",
           "routed": "model.layers.{i}.mlp.experts.0.gate_proj",
           "shared": "model.layers.{i}.mlp.shared_experts.gate_proj",
           "latent": "model.layers.{i}.mlp.latent_proj"}
# Every kind of weight, in the order sources list them, and how they read.
KIND_WORDS = {"embeddings": "embeddings", "lm_head": "lm_head", FULL: "full attention",
              SLIDING: "sliding-window attention", GDN: "Gated DeltaNet", KDA: "KDA", MAMBA: "Mamba2",
              DENSE: "dense MLP", "routed": "routed experts", "shared": "shared experts",
              "latent": "latent projections", "router": "router"}
KINDS = list(KIND_WORDS)


@dataclass(frozen=True)
class Layer:
    mixer: str  # FULL, SLIDING, GDN, KDA, MAMBA, or "" (an MLP-only layer of a pattern)
    ffn: str  # DENSE, MOE, or "" (a mixer-only layer of a pattern)


@dataclass(frozen=True)
class Part:
    """One layer's (or the model's) weights of one kind."""

    kind: str
    params: int
    module: str  # a module name for quantisation ignore lists; "" for never-quantised weights


@dataclass(frozen=True)
class Moe:
    experts: int
    top_k: int
    expert_params: int  # one routed expert in one layer
    shared_params: int  # all shared experts of one layer
    router_params: int
    latent_params: int  # latent MoE: the down/up projections around the routed experts
    notes: dict[str, str]  # kind → how its count was read


def mlp_matrices(f: Fields) -> tuple[int, str]:
    """Gated MLPs (SwiGLU: gate, up, down) have 3 matrices; relu² MLPs (Nemotron-H) have 2."""
    key = f.first(("mlp_hidden_act", "hidden_act"))
    if key and f.get(key) == "relu2":
        return 2, f"2 (up, down: {f.name(key)} relu2 is not gated)"
    return 3, "3 (gate, up, down)"


# ------------------------------------------------------------------------------ which layer is which
def layer_plan(f: Fields) -> tuple[list[Layer], str]:
    """Every decoder layer's mixer and MLP kind, and how they were read."""
    n = f.int("num_hidden_layers")
    if f.has("hybrid_override_pattern"):
        return _pattern_layers(f, n)
    moe = read_moe(f)
    ffn = [MOE if moe and is_moe_layer(f, i) else DENSE for i in range(n)]
    mixers, note = _mixers(f, n)
    if moe:
        note += f"; {ffn.count(MOE)} MoE layers ({moe_rule(f)})"
    return [Layer(m, x) for m, x in zip(mixers, ffn)], note


def _mixers(f: Fields, n: int) -> tuple[list[str], str]:
    if f.has("linear_attn_config"):
        full = set(f.sub("linear_attn_config").int_list("full_attn_layers", minimum=1))
        mixers = [FULL if i + 1 in full else KDA for i in range(n)]
        note = f"{f.name('linear_attn_config')}.full_attn_layers (1-based), KDA elsewhere"
    elif f.has("layer_types"):
        mixers, note = _typed_layers(f, n), f.name("layer_types")
    elif f.has("full_attention_interval"):
        every = f.int("full_attention_interval")
        mixers = [FULL if (i + 1) % every == 0 else GDN for i in range(n)]
        note = (f"{f.name('full_attention_interval')} {every}: full attention every {every}th layer, "
                f"Gated DeltaNet elsewhere")
    else:
        mixers, note = [FULL] * n, "every layer full attention"
    return mixers, note


def _one_kind_per_layer(f: Fields, key: str, kinds: Sequence[str], n: int, known: Collection[str]) -> None:
    """``kinds`` (a field's entry per layer) names each of the n layers with a known kind."""
    if len(kinds) != n:
        raise f.fail(key, f"has {len(kinds)} entries, num_hidden_layers is {n}")
    unknown = sorted(set(kinds) - set(known))
    if unknown:
        raise f.fail(key, f"has unknown kinds {unknown}, known: {sorted(known)}")


def _pattern_layers(f: Fields, n: int) -> tuple[list[Layer], str]:
    pattern = f.text("hybrid_override_pattern")
    _one_kind_per_layer(f, "hybrid_override_pattern", pattern, n, PATTERN)
    if "E" in pattern and read_moe(f) is None:
        raise f.fail("hybrid_override_pattern", "has MoE layers (E) but the config names no experts")
    note = f"{f.name('hybrid_override_pattern')} (M Mamba2, * attention, - MLP, E MoE)"
    return [Layer(*PATTERN[c]) for c in pattern], note


def _typed_layers(f: Fields, n: int) -> list[str]:
    types = f.str_list("layer_types")
    _one_kind_per_layer(f, "layer_types", types, n, LAYER_TYPES)
    return [LAYER_TYPES[t] for t in types]


def moe_rule(f: Fields) -> str:
    """Which fields decided the MoE layers (is_moe_layer's rule), for the sources."""
    keys = [k for k in ("first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers")
            if f.has(k)]
    return ", ".join(f"{f.name(k)} {f.get(k)}" for k in keys) if keys else "every layer"


def is_moe_layer(f: Fields, i: int) -> bool:
    """DeepSeek/Kimi: layer i ≥ first_k_dense_replace and i % moe_layer_freq == 0; Qwen:
    i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0; else every layer."""
    if f.has("first_k_dense_replace") or f.has("moe_layer_freq"):
        first = f.int("first_k_dense_replace", minimum=0, default=0)
        return i >= first and i % f.int("moe_layer_freq", default=1) == 0
    if f.has("decoder_sparse_step") or f.has("mlp_only_layers"):
        return i not in f.int_list("mlp_only_layers") and (i + 1) % f.int("decoder_sparse_step", default=1) == 0
    return True


# ------------------------------------------------------------------------------ MoE
def read_moe(f: Fields) -> Moe | None:
    """The routed and shared experts of one MoE layer; None for a dense model."""
    e_key = f.first(("num_experts", "n_routed_experts", "num_local_experts"))
    if e_key is None or f.int(e_key, minimum=0) == 0:
        return None
    experts = f.int(e_key)
    top_k, k_key = f.one_of(("num_experts_per_tok", "num_experts_per_token", "experts_per_token"))
    if top_k > experts:
        raise f.fail(k_key, f"must be at most {f.name(e_key)} ({experts}), got {top_k}")
    hidden = f.int("hidden_size")
    m, m_note = mlp_matrices(f)
    width, w_key = f.one_of(("moe_intermediate_size", "intermediate_size"))
    latent = f.int("routed_expert_hidden_size") if f.has("routed_expert_hidden_size") else hidden
    notes = {"routed": f"{f.name(e_key)} {experts} × {m_note} × {_latent_name(f, latent, hidden)} × "
                       f"{f.name(w_key)} {width}",
             "router": f"router hidden_size × {f.name(e_key)}"}
    latent_params = 0
    if latent != hidden:
        latent_params = 2 * hidden * latent
        notes["latent"] = (f"latent MoE down/up projections 2 × hidden_size × {f.name('routed_expert_hidden_size')} "
                           f"(assumed: one pair per MoE layer, outside the experts)")
    shared, notes["shared"] = _shared_params(f, hidden, m, width)
    return Moe(experts, top_k, m * latent * width, shared, hidden * experts, latent_params, notes)


def _latent_name(f: Fields, latent: int, hidden: int) -> str:
    return f"{f.name('routed_expert_hidden_size')} {latent}" if latent != hidden else f"hidden_size {hidden}"


def _shared_params(f: Fields, hidden: int, m: int, width: int) -> tuple[int, str]:
    key = f.first(("shared_expert_intermediate_size", "shared_intermediate_size"))
    if key:
        size = f.int(key, minimum=0)
        return m * hidden * size, f"{m} × hidden_size × {f.name(key)} {size}"
    key = f.first(("n_shared_experts", "num_shared_experts"))
    if key:
        count = f.int(key, minimum=0)
        return count * m * hidden * width, f"{f.name(key)} {count} × {m} × hidden_size × {width}"
    return 0, "no shared expert"


# ------------------------------------------------------------------------------ mixers
def head_dim(f: Fields) -> tuple[int, str]:
    """``head_dim`` / ``attention_head_dim``, else hidden_size / num_attention_heads."""
    key = f.first(("head_dim", "attention_head_dim"))
    if key:
        return f.int(key), f"{f.name(key)} {f.int(key)}"
    hidden, heads = f.int("hidden_size"), f.int("num_attention_heads")
    if hidden % heads:
        raise f.fail("head_dim", f"is missing and hidden_size {hidden} is not a multiple of "
                                 f"num_attention_heads {heads}")
    return hidden // heads, f"head_dim {hidden // heads} (hidden_size / num_attention_heads)"


def is_mla(f: Fields) -> bool:
    return f.has("kv_lora_rank")


def attention_params(f: Fields) -> tuple[int, str]:
    """One full or sliding attention layer: GQA q, k, v, o, or MLA's low-rank projections."""
    hidden, heads = f.int("hidden_size"), f.int("num_attention_heads")
    if is_mla(f):
        return _mla_params(f, hidden, heads)
    kv_heads = f.int("num_key_value_heads", default=heads)
    d, d_note = head_dim(f)
    # Qwen3-Next's gated attention doubles q_proj (query and output gate); vLLM reads
    # attn_output_gate, default true for that family.
    gate = f.flag("attn_output_gate", f.get("model_type") == "qwen3_next")
    q = hidden * heads * d * (2 if gate else 1)
    params = q + 2 * hidden * kv_heads * d + heads * d * hidden
    gate_note = " (q doubled: output gate)" if gate else ""
    return params, (f"GQA q,k,v,o{gate_note} from hidden_size {hidden}, num_attention_heads {heads}, "
                    f"num_key_value_heads {kv_heads}, {d_note}")


def _mla_params(f: Fields, hidden: int, heads: int) -> tuple[int, str]:
    lora, rope = f.int("kv_lora_rank"), f.int("qk_rope_head_dim")
    nope, v = f.int("qk_nope_head_dim"), f.int("v_head_dim")
    qk = nope + rope
    if f.has("q_lora_rank"):
        q_rank = f.int("q_lora_rank")
        q, q_note = hidden * q_rank + q_rank * heads * qk, f"q_lora_rank {q_rank}"
    else:
        q, q_note = hidden * heads * qk, "plain q"
    params = q + hidden * (lora + rope) + lora * heads * (nope + v) + heads * v * hidden
    gate_note = ""
    if f.flag("mla_use_output_gate", False):
        params += hidden * heads * v
        gate_note = " + output gate hidden_size × heads × v_head_dim (mla_use_output_gate)"
    return params, (f"MLA ({q_note}, kv_lora_rank {lora}, qk_rope_head_dim {rope}, qk_nope_head_dim {nope}, "
                    f"v_head_dim {v}, num_attention_heads {heads}){gate_note}")


def gdn_dims(f: Fields) -> tuple[int, int, int, int, int, int]:
    """Gated DeltaNet: key heads, value heads, key head dim, value head dim, conv kernel, hidden."""
    return (f.int("linear_num_key_heads"), f.int("linear_num_value_heads"), f.int("linear_key_head_dim"),
            f.int("linear_value_head_dim"), f.int("linear_conv_kernel_dim"), f.int("hidden_size"))


def gdn_params(f: Fields) -> tuple[int, str]:
    """Qwen3-Next's in_proj_qkvz (q, k, v, z), in_proj_ba (β, α per value head), the short
    convolution over q, k, v, and out_proj."""
    nk, nv, dk, dv, kernel, hidden = gdn_dims(f)
    key, value = nk * dk, nv * dv
    params = hidden * (2 * key + 2 * value) + hidden * 2 * nv + (2 * key + value) * kernel + value * hidden
    return params, ("Gated DeltaNet in_proj_qkvz, in_proj_ba, conv, out_proj from linear_num_key_heads, "
                    "linear_num_value_heads, linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim")


def kda_dims(f: Fields) -> tuple[int, int, int]:
    sub = f.sub("linear_attn_config")
    return sub.int("num_heads"), sub.int("head_dim"), sub.int("short_conv_kernel_size")


def kda_params(f: Fields) -> tuple[int, str]:
    """Kimi Delta Attention, approximated from Kimi Linear's layout: q, k, v, o projections;
    the forget gate (full rank hidden → heads·head_dim under use_full_rank_gate, else low
    rank through head_dim); a low-rank output gate; β; short convolutions over q, k, v."""
    heads, d, kernel = kda_dims(f)
    hidden, width = f.int("hidden_size"), heads * d
    low_rank = hidden * d + d * width
    full_rank = f.sub("linear_attn_config").flag("use_full_rank_gate", False)
    params = 4 * hidden * width + (hidden * width if full_rank else low_rank) + low_rank + hidden * heads
    params += 3 * width * kernel
    gate = "full-rank" if full_rank else "low-rank"
    return params, (f"KDA (approximated) q,k,v,o + {gate} forget gate + low-rank output gate + conv from "
                    f"{f.name('linear_attn_config')}.num_heads {heads}, head_dim {d}")


def mamba_dims(f: Fields) -> tuple[int, int, int, int, int]:
    """Mamba2: heads, head dim, state size, groups, conv kernel (Nemotron-H or Granite names)."""
    heads, _ = f.one_of(("mamba_num_heads", "mamba_n_heads"))
    dim, _ = f.one_of(("mamba_head_dim", "mamba_d_head"))
    state, _ = f.one_of(("ssm_state_size", "mamba_d_state"))
    groups, _ = f.one_of(("n_groups", "mamba_n_groups"))
    kernel, _ = f.one_of(("conv_kernel", "mamba_d_conv"))
    return heads, dim, state, groups, kernel


def mamba_params(f: Fields) -> tuple[int, str]:
    """Mamba2's in_proj (x, z, B, C, dt), conv over x, B, C, and out_proj."""
    heads, dim, state, groups, kernel = mamba_dims(f)
    hidden, inner = f.int("hidden_size"), heads * dim
    conv_width = inner + 2 * groups * state
    params = hidden * (2 * inner + 2 * groups * state + heads) + conv_width * kernel + inner * hidden
    return params, (f"Mamba2 in_proj, conv, out_proj from {heads} heads × head dim {dim}, "
                    f"state size {state}, {groups} groups")


MIXERS = {FULL: attention_params, SLIDING: attention_params, GDN: gdn_params, KDA: kda_params, MAMBA: mamba_params}


# ------------------------------------------------------------------------------ parameters
def parameter_parts(f: Fields, layers: list[Layer]) -> tuple[list[Part], dict[str, str]]:
    """Every weight of the model as parts per layer and kind, and how each kind was counted."""
    hidden, vocab = f.int("hidden_size"), f.int("vocab_size")
    parts = [Part("embeddings", vocab * hidden, "")]
    notes = {"embeddings": f"embeddings vocab_size {vocab} × hidden_size {hidden}"}
    if not f.flag("tie_word_embeddings", False):
        parts.append(Part("lm_head", vocab * hidden, ""))
        notes["lm_head"] = "lm_head vocab_size × hidden_size (tie_word_embeddings not true)"
    moe = read_moe(f) if any(layer.ffn == MOE for layer in layers) else None
    for i, layer in enumerate(layers):
        if layer.mixer:
            params, notes[layer.mixer] = MIXERS[layer.mixer](f)
            parts.append(Part(layer.mixer, params, MODULES[layer.mixer].format(i=i)))
        if layer.ffn == DENSE:
            m, m_note = mlp_matrices(f)
            width = f.int("intermediate_size")
            notes[DENSE] = f"dense MLP {m_note} × hidden_size × intermediate_size {width}"
            parts.append(Part(DENSE, m * hidden * width, MODULES[DENSE].format(i=i)))
        elif layer.ffn == MOE:
            assert moe is not None  # layer_plan gives MoE layers only to a config naming experts
            parts.extend(_moe_parts(moe, i))
    if moe:
        notes.update(moe.notes)
    return parts, notes


def _moe_parts(moe: Moe, i: int) -> list[Part]:
    parts = [Part("routed", moe.experts * moe.expert_params, MODULES["routed"].format(i=i)),
             Part("router", moe.router_params, "")]
    if moe.shared_params:
        parts.append(Part("shared", moe.shared_params, MODULES["shared"].format(i=i)))
    if moe.latent_params:
        parts.append(Part("latent", moe.latent_params, MODULES["latent"].format(i=i)))
    return parts


# ------------------------------------------------------------------------------ KV and state
def kv_elements_per_token(f: Fields) -> tuple[int, str]:
    """Cached elements per token in one attention layer: K and V of every KV head (GQA), or
    MLA's latent plus its rope key."""
    if is_mla(f):
        lora, rope = f.int("kv_lora_rank"), f.int("qk_rope_head_dim")
        return lora + rope, f"(kv_lora_rank {lora} + qk_rope_head_dim {rope}) MLA latent"
    kv_heads = f.int("num_key_value_heads", default=f.int("num_attention_heads"))
    d, d_note = head_dim(f)
    return 2 * kv_heads * d, f"{kv_heads} num_key_value_heads × {d_note} × K,V"


def recurrent_state_elements(f: Fields, mixer: str) -> tuple[int, int, str]:
    """One recurrent layer's state per request: (recurrent state, convolution state) in
    elements, and how they were read."""
    if mixer == GDN:
        nk, nv, dk, dv, kernel, _ = gdn_dims(f)
        conv = (2 * nk * dk + nv * dv) * (kernel - 1)
        return nv * dk * dv, conv, ("Gated DeltaNet linear_num_value_heads × linear_key_head_dim × "
                                    "linear_value_head_dim + conv (q,k,v widths × (linear_conv_kernel_dim − 1))")
    if mixer == KDA:
        heads, d, kernel = kda_dims(f)
        return heads * d * d, 3 * heads * d * (kernel - 1), (
            "KDA num_heads × head_dim × head_dim + conv (q,k,v widths × (short_conv_kernel_size − 1))")
    heads, dim, state, groups, kernel = mamba_dims(f)
    conv = (heads * dim + 2 * groups * state) * (kernel - 1)
    return heads * dim * state, conv, ("Mamba2 heads × head dim × state size + conv "
                                       "((heads·head dim + 2·groups·state) × (kernel − 1))")
