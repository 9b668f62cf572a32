"""A Hugging Face-style ``config.json`` turned into the roofline's ``ModelFigures``, every
figure with its source: the config fields it was computed from, and what was assumed.

- parameters: every weight matrix counted per layer kind (model/hf_layers.py); active =
  total − (experts − experts_per_token) × one routed expert's params over the MoE layers,
  so that ``ModelFigures.expert_params_all_layers`` gives back the routed expert's size;
- KV bytes per context token: full-attention layers only. A sliding-window layer's KV is
  bounded by its window, so it is state per request (window × its bytes per token), not
  per context token;
- recurrent state per request: Gated DeltaNet, KDA and Mamba2 layers, plus the sliding
  windows, in the model dtype (assumed: an engine may keep it in float32);
- bytes per weight and compute precision: model/hf_quant.py.

Public API: ``model_figures_from_config``, ``load_model_config``, ``model_figures_from_path``;
``model_figures`` (a built-in name or a path, as the ``model`` key takes it), ``is_model_folder``
and ``model_from_labels`` (the engines' model_name label naming a local model folder).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from .errors import ModelInputError
from .figures import Figure, ModelFigures
from .hf_fields import CONFIG_NAME, Fields, load_model_config
from .hf_layers import FULL, KIND_WORDS, KINDS, SLIDING, Layer, Moe, Part, kv_elements_per_token, layer_plan, \
    parameter_parts, read_moe, recurrent_state_elements
from .hf_quant import bytes_per_weight, cache_dtype, model_dtype

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    class _Deployment(DataclassInstance, Protocol):
        """What model_from_labels reads of a model.deployment.Deployment (which imports this
        module: named by what it holds, not imported)."""

        @property
        def cost_profile(self) -> str: ...
        @property
        def configured(self) -> frozenset[str] | None: ...
        @property
        def from_page(self) -> frozenset[str]: ...
        def is_configured(self, key: str) -> bool: ...

_D = TypeVar("_D", bound="_Deployment")

__all__ = ["load_model_config", "model_figures_from_config", "model_figures_from_path"]

DEFAULT_CONTEXT = Figure(8192, "assumed: an 8K-token context (the 8K-in/1K-out workload of the seeds); "
                               "pass context_tokens for yours")
RECURRENT = ("gdn", "kda", "mamba")


def model_figures_from_config(config: Mapping[str, object], *, name: str, source: str = CONFIG_NAME,
                              context_tokens: Figure | None = None) -> ModelFigures:
    """``ModelFigures`` from a config dict; ``source`` names the file in every figure's
    source and in errors (one-line ModelInputError naming the field)."""
    f = Fields.of_config(config, source)
    layers, plan_note = layer_plan(f)
    parts, notes = parameter_parts(f, layers)
    total = sum(p.params for p in parts)
    moe = read_moe(f) if any(p.kind == "routed" for p in parts) else None
    moe_layers = sum(1 for p in parts if p.kind == "routed")
    idle = (moe.experts - moe.top_k) * moe.expert_params * moe_layers if moe else 0
    # untied: the input table is read one row a token (the lm_head, a part of its own, is read whole)
    unread = sum(p.params for p in parts if p.kind == "embeddings") if any(p.kind == "lm_head" for p in parts) else 0
    total_source = _params_source(f, parts, notes, plan_note)
    weight_bytes, compute, scheme = bytes_per_weight(f, parts)
    kv_size, kv_note = cache_dtype(f, scheme)
    return ModelFigures(
        name=name,
        total_params=Figure(total, total_source),
        active_params=Figure(total - idle - unread, _active_source(f, moe, moe_layers, notes, unread)),
        input_embedding_params=Figure(unread, f"{f.where}: {notes['embeddings']}, tie_word_embeddings not true "
                                              f"(a step reads one row a token)" if unread else f"{f.where}: tied "
                                              f"(the lm_head's table, read whole)"),
        experts=Figure(moe.experts if moe else 0, _experts_source(f, moe, "experts")),
        experts_per_token=Figure(moe.top_k if moe else 0, _experts_source(f, moe, "top_k")),
        bytes_per_weight=weight_bytes,
        hidden_size=Figure(f.int("hidden_size"), f"{source}: {f.name('hidden_size')}"),
        kv_bytes_per_token=_kv_figure(f, layers, kv_size, kv_note),
        state_bytes_per_request=_state_figure(f, layers, kv_size, kv_note),
        context_tokens=context_tokens if context_tokens is not None else DEFAULT_CONTEXT,
        compute_precision=compute,
    )


def model_figures_from_path(path: str | Path, *, context_tokens: Figure | None = None) -> ModelFigures:
    """``ModelFigures`` from a config file or a model folder holding ``config.json``. The
    name is the folder's (or, for a file not named config.json, the file's stem)."""
    config, file = load_model_config(path)
    name = file.parent.name if file.name == CONFIG_NAME else file.stem
    return model_figures_from_config(config, name=name, source=str(file), context_tokens=context_tokens)


# ------------------------------------------------------------------------------ sources
def _billions(n: float) -> str:
    if n >= 1e11:
        return f"{n / 1e9:.1f}B"
    return f"{n / 1e9:.3g}B" if n >= 1e8 else f"{n / 1e6:.3g}M"


def _params_source(f: Fields, parts: list[Part], notes: dict[str, str], plan_note: str) -> str:
    by_kind: dict[str, list[int]] = {}
    for p in parts:
        by_kind.setdefault(p.kind, []).append(p.params)
    pieces = []
    for kind in sorted(by_kind, key=KINDS.index):
        values, word, note = by_kind[kind], KIND_WORDS[kind], notes.get(kind, kind)
        label = note if note.startswith(word) else f"{word} ({note})"
        count = "" if kind in ("embeddings", "lm_head") else f" × {len(values)} layer{'s' * (len(values) != 1)}"
        pieces.append(f"{label}{count} = {_billions(sum(values))}")
    extras = ["norms and biases neglected"]
    if f.has("num_nextn_predict_layers") and f.int("num_nextn_predict_layers", minimum=0):
        extras.append(f"{f.name('num_nextn_predict_layers')} MTP layers not counted (a draft module, not the target)")
    if any(n.startswith("text_config.") for n in f.names.values()):
        extras.append("the language model of text_config only (vision tower not counted)")
    return (f"{f.where}: {f.name('num_hidden_layers')} {f.int('num_hidden_layers')} ({plan_note}); "
            + "; ".join(pieces + extras))


def _active_source(f: Fields, moe: Moe | None, moe_layers: int, notes: dict[str, str], unread: int) -> str:
    table = f" − the untied input embedding table ({_billions(unread)})" if unread else ""
    if moe is None:
        return f"{f.where}: dense model, active = total{table}"
    return (f"{f.where}: total − ({moe.experts} − {moe.top_k}) idle routed experts × {_billions(moe.expert_params)} "
            f"each [{notes['routed']}] × {moe_layers} MoE layers{table}")


def _experts_source(f: Fields, moe: Moe | None, which: str) -> str:
    if moe is None:
        return f"{f.where}: dense model (no num_experts / n_routed_experts / num_local_experts)"
    keys = ("num_experts", "n_routed_experts", "num_local_experts") if which == "experts" else \
        ("num_experts_per_tok", "num_experts_per_token", "experts_per_token")
    key = f.first(keys)
    assert key is not None  # read_moe read the experts and top-k from one of them
    return f"{f.where}: {f.name(key)}"


def _kv_figure(f: Fields, layers: list[Layer], kv_size: float, kv_note: str) -> Figure:
    full = sum(1 for layer in layers if layer.mixer == FULL)
    if full == 0:
        return Figure(0, f"{f.where}: no full-attention layer, no KV growing with context")
    elements, note = kv_elements_per_token(f)
    source = f"{f.where}: {full} full-attention layers × {note} × {kv_note}"
    if any(layer.mixer == SLIDING for layer in layers):
        source += "; sliding-window layers are state per request, not per token"
    elif f.has("sliding_window") and f.flag("use_sliding_window", True):
        source += (f"; {f.name('sliding_window')} without layer_types: every layer counted as full attention "
                   f"(an upper bound)")
    return Figure(full * elements * kv_size, source)


def _state_figure(f: Fields, layers: list[Layer], kv_size: float, kv_note: str) -> Figure:
    total, pieces = 0.0, []
    state_size, state_note = model_dtype(f)
    for mixer in RECURRENT:
        count = sum(1 for layer in layers if layer.mixer == mixer)
        if count:
            state, conv, note = recurrent_state_elements(f, mixer)
            total += count * (state + conv) * state_size
            pieces.append(f"{count} {KIND_WORDS[mixer]} layers × [{note}] × {state_note} "
                          f"(assumed state dtype = model dtype: vLLM's mamba_ssm_cache_dtype may be float32)")
    sliding = sum(1 for layer in layers if layer.mixer == SLIDING)
    if sliding:
        window = f.int("sliding_window")
        elements, note = kv_elements_per_token(f)
        total += sliding * window * elements * kv_size
        pieces.append(f"{sliding} sliding-window layers × {f.name('sliding_window')} {window} tokens × {note} × "
                      f"{kv_note} (their KV is bounded by the window)")
    if not pieces:
        return Figure(0, f"{f.where}: no recurrent or sliding-window layer (full attention only)")
    return Figure(total, f"{f.where}: " + "; ".join(pieces))


def model_figures(model: str) -> ModelFigures:
    """The roofline figures ``model`` names: a built-in (model.figures.MODELS, any case) or the
    path of a Hugging Face config.json or of a model folder holding one (what `vllm serve`
    was given), read once per file version. Raises ModelInputError (one line) for neither."""
    from .figures import MODELS

    if model.lower() in MODELS:
        return MODELS[model.lower()]
    path = Path(model).expanduser()
    if not _exists(path):
        raise ModelInputError(f"no roofline figures for this model (known: {', '.join(MODELS)}; or the path of "
                              f"its config.json or model folder, which {model} is not)")
    config = path / CONFIG_NAME if path.is_dir() else path
    try:  # a file rewritten keeping its time (cp -p) changes size or inode
        st = config.stat()
        version = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        version = None  # load_model_config names what is missing
    return _figures_of_file(str(path.resolve()), version)


def is_model_folder(name: str) -> bool:
    """Whether ``name`` (a page's model_name label, say) is a local folder holding a config.json."""
    return bool(name) and _exists(Path(name).expanduser() / CONFIG_NAME, file=True)


def _exists(path: Path, *, file: bool = False) -> bool:
    """Whether ``path`` exists (is a file); a name no filesystem takes (too long, a NUL) does not."""
    try:
        return path.is_file() if file else path.exists()
    except (OSError, ValueError):
        return False


@functools.lru_cache(maxsize=32)
def _figures_of_file(path: str, version: tuple[int, int, int] | None) -> ModelFigures:
    return model_figures_from_path(path)


def model_from_labels(deployment: _D, engines: Iterable[object]) -> tuple[_D, list[str]]:
    """(the deployment, notes): when ``model`` is not configured, the roofline prices the model
    the engines name, if their one model_name label is a local model folder holding a
    config.json (vLLM labels a model served from a folder with its path); the note says so,
    or why the folder was not read. ``deployment``: a model.deployment.Deployment;
    ``engines``: the window's engines (each with a ``model_name``, as acceptance.store.EngineRef)."""
    from dataclasses import replace

    names = {getattr(e, "model_name", "") for e in engines} - {""}
    if deployment.cost_profile != "roofline" or deployment.is_configured("model") or len(names) != 1:
        return deployment, []
    (name,) = names
    if not is_model_folder(name):
        return deployment, []
    try:
        model_figures(name)
    except ModelInputError as e:
        return deployment, [f"model: the engines' model_name {name} is a model folder, but its config.json cannot be "
                            f"read ({e}); the roofline keeps the default model — set model"]
    configured = (deployment.configured or frozenset()) | {"model"}
    return (replace(deployment, model=name, configured=configured, from_page=deployment.from_page | {"model"}),
            [f"model: {name}, the engines' model_name, is a local model folder: the roofline reads its config.json "
             f"(set model to price another)"])
