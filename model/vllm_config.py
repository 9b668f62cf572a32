"""The vLLM 0.33.0 configuration that deploys a recommendation, and — separately — the one
that replays a route's acceptance in a benchmark.

``--speculative-config`` keys (vllm/config/speculative.py, SpeculativeConfig): ``method``,
``num_speculative_tokens``, ``model`` (the draft checkpoint; dspark and mtp take it from the
target, ngram/suffix need none), optionally ``num_speculative_tokens_per_batch_size`` — a
list of inclusive (range_start, range_end, K) entries validated by vLLM's
``validate_and_normalize_dynamic_sd_schedule`` (vllm/v1/spec_decode/dynamic/utils.py):
ranges positive, start ≤ end, K ≥ 0, sorted and non-overlapping, the first starting at 1.
vLLM has no "off" value inside the speculative config: γ = 0 means starting vLLM without
``--speculative-config``. The engine's other keys (``[deployment] speculative_keys``:
prompt_lookup_min, suffix_decoding_*, draft_tensor_parallel_size, …) follow the draft model,
as given: /metrics does not carry them, and a line without them would run vLLM's defaults.

The replay config uses ``rejection_sample_method: "synthetic"`` with
``synthetic_acceptance_rates`` (per-position unconditional rates, length γ, in [0, 1],
non-increasing): it forces accept decisions and corrupts outputs — benchmarks only. It is
never part of the deployable config.
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import numpy.typing as npt

from .deployment import Deployment, ModelInputError
from .drafters import drafter_for
from acceptance.definitions import monotone_survival

SYNTHETIC_WARNING = (
    "synthetic acceptance forces accept decisions and corrupts outputs: for benchmarks only, never for serving"
)
# Methods whose draft weights vLLM finds without a "model" entry.
NO_MODEL_NEEDED = {"dspark", "mtp", "ngram", "ngram_gpu", "suffix"}  # methods whose config names no draft model
# vLLM 0.33 drops a num_speculative_tokens_per_batch_size schedule without an error where its
# model runner cannot shorten the drafts (vllm/config/vllm.py, VllmConfig): the V1 runner keeps
# one only for these methods (_maybe_disable_dynamic_sd_for_v1), and runs suffix always — the V2
# runner refuses it (_get_v2_model_runner_unsupported_features) — so a suffix engine never keeps one
DYNAMIC_SD_V1_METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")
V1_RUNNER_ONLY_METHODS = ("suffix",)


def schedule_dropped(method: str) -> bool:
    """Whether vLLM 0.33 drops a batch-size schedule for the vLLM method ``method``: it runs the
    method on its V1 runner only, and that runner cannot shorten its drafts (above)."""
    return method in V1_RUNNER_ONLY_METHODS and method not in DYNAMIC_SD_V1_METHODS


def validate_schedule(schedule: object) -> list[tuple[int, int, int]]:
    """vLLM's rules for ``num_speculative_tokens_per_batch_size``; one-line ModelInputError."""
    if not isinstance(schedule, (list, tuple)) or not schedule:
        raise ModelInputError("num_speculative_tokens_per_batch_size: must be a non-empty list of (start, end, K)")
    parsed = []
    for entry in schedule:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise ModelInputError(f"num_speculative_tokens_per_batch_size: entry {entry!r} is not (start, end, K)")
        start, end, k = (int(x) for x in entry)
        if start <= 0 or end <= 0:
            raise ModelInputError(f"num_speculative_tokens_per_batch_size: range ({start}, {end}) must be positive")
        if start > end:
            raise ModelInputError(f"num_speculative_tokens_per_batch_size: range start > end in ({start}, {end}, {k})")
        if k < 0:
            raise ModelInputError(f"num_speculative_tokens_per_batch_size: K must be ≥ 0, got {k}")
        parsed.append((start, end, k))
    parsed.sort(key=lambda e: e[0])
    previous_end = 0
    for start, end, _ in parsed:
        if start <= previous_end:
            raise ModelInputError("num_speculative_tokens_per_batch_size: ranges must be non-overlapping and sorted")
        previous_end = end
    if parsed[0][0] != 1:
        raise ModelInputError("num_speculative_tokens_per_batch_size: the first range must start at 1")
    return parsed


def schedule_from_best(best_gamma_by_batch: dict[int, int]) -> list[tuple[int, int, int]]:
    """Inclusive ranges from {B: K}: bucket B_i covers (B_{i−1}, B_i]; equal neighbours merge.
    vLLM carries the last K forward past the last range."""
    out: list[list[int]] = []
    prev = 0
    for b in sorted(best_gamma_by_batch):
        k = best_gamma_by_batch[b]
        if out and out[-1][2] == k:
            out[-1][1] = b
        else:
            out.append([prev + 1, b, k])
        prev = b
    return validate_schedule([tuple(e) for e in out])


def vllm_method(method: str) -> str:
    """The ``method`` vLLM's --speculative-config names for specdec's: PARD (parallel_drafting)
    is a draft model trained for parallel drafting, run with vLLM's flag."""
    return "draft_model" if method == "parallel_drafting" else drafter_for(method).method


def speculative_config(
    deployment: Deployment, gamma: int, schedule: Sequence[tuple[int, int, int]] | None = None
) -> dict[str, object] | None:
    """The deployable ``--speculative-config`` for γ (None for γ = 0: speculation off)."""
    if gamma < 0:
        raise ModelInputError(f"gamma must be ≥ 0, got {gamma}")
    if gamma == 0:
        return None
    method = deployment.method
    cfg: dict[str, object] = {}
    cfg["method"] = vllm_method(method)
    if method == "parallel_drafting":
        cfg["parallel_drafting"] = True
    cfg["num_speculative_tokens"] = int(gamma)
    if deployment.draft_model:
        cfg["model"] = deployment.draft_model
    cfg.update(deployment.speculative_keys or ())
    if schedule:
        cfg["num_speculative_tokens_per_batch_size"] = [list(e) for e in validate_schedule(list(schedule))]
    return cfg


def command_line(deployment: Deployment, spec_config: dict[str, object] | None) -> str:
    """The vLLM serve arguments that deploy it (and keep the decode backend)."""
    parts = []
    if spec_config is None:
        parts.append("omit --speculative-config (speculation off)")
    else:
        parts.append("--speculative-config '" + json.dumps(spec_config, separators=(",", ":")) + "'")
        if deployment.draft_model is None and spec_config.get("method") not in NO_MODEL_NEEDED:
            parts.append("(add \"model\": the draft checkpoint you deploy)")
    if deployment.decode_backend == "latency_specialized":
        parts.append("--additional-config '{\"decode_backend\":\"latency_specialized\"}'")
    return " ".join(parts)


def replay_config(deployment: Deployment, survival: npt.ArrayLike) -> dict[str, object]:
    """Benchmark-only config replaying the observed curve at its γ (never deployable)."""
    return {"speculative_config": replay_speculative_config(deployment, survival), "warning": SYNTHETIC_WARNING}


def replay_speculative_config(deployment: Deployment, survival: npt.ArrayLike) -> dict[str, object]:
    """The ``--speculative-config`` of replay_config (benchmarks only, never deployable)."""
    a = np.asarray(survival, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ModelInputError("survival: a non-empty curve a_1..a_γ is needed for the replay config")
    rates = monotone_survival(a)  # vLLM requires non-increasing rates
    method = "draft_model" if deployment.method == "parallel_drafting" else deployment.method
    cfg: dict[str, object] = {
        "method": method,
        "num_speculative_tokens": int(a.size),
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": [round(float(r), 6) for r in rates],
    }
    if deployment.method == "parallel_drafting":
        cfg["parallel_drafting"] = True
    if deployment.draft_model:
        cfg["model"] = deployment.draft_model
    # the engine's drafter as it runs, but verified by the synthetic sampler above
    cfg.update((k, v) for k, v in deployment.speculative_keys or () if k != "rejection_sample_method")
    return cfg
