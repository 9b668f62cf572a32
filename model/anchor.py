"""Where a projection's level comes from: the anchor of the cost profile, and the figures
a roofline used — each with its source, so that no default passes for the user's engine.

The anchor is the plain-decode rate at batch 1 (``baseline_tokens_per_second``) that the
flat and roofline profiles are anchored on (docs/MODEL.md, Cost model):
- ``configured`` — set in the config (or by the caller);
- ``observed`` — not set, and the window has the engine's own latency
  (``vllm:inter_token_latency_seconds``, or per-request ``mean_itl_ms``): the rate b that
  makes the model's per-user tokens/s at the deployed γ equal the observed one,
  AL(γ_d) / τ_int(γ_d; b) = observed. The level is then the engine's own; what the model
  can still get wrong is the shape (how step time and acceptance move with γ), which only
  a γ sweep measures — so no model error is reported at the deployed γ. The rate at γ 0 is
  then the model's step times carried from γ_d, so it rests on the drafter and cost figures
  that price them: those left at their defaults are named (``rests_on_defaults``);
- ``default`` — neither: the built-in 118 tok/s of Kimi K3 on 16 GB300, or the roofline floor of
  the configured model and GPU (configured_or_default), announced as such;
- ``measured table`` — a table's own seconds (nothing to anchor).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Callable

from .deployment import Deployment
from .figures import Figure, ModelFigures
from .unused_keys import unused_keys

CONFIGURED, OBSERVED, DEFAULT, TABLE = "configured", "observed", "default", "measured table"
FLAG = "flag"  # a configured figure set on the command line, over the config
PAGE = "page"  # read off the engines' own page (their model_name label naming a local model folder)
KIMI_K3_DEFAULT = "Kimi K3 on 16 GB300"
# what prices the drafter and names it in the deploy line: each said to be a default when it is
# and prices this drafter (draft_cost a parallel or sequential one, draft_overhead an ngram or suffix one)
DRAFTER_FIGURES = ("method", "draft_cost", "draft_overhead", "cost_profile")
# the roofline's model figures profile_figures carries, each {"value", "source"}
MODEL_FIGURES = tuple(f.name for f in fields(ModelFigures) if f.type in (Figure, "Figure"))


@dataclass(frozen=True)
class Anchor:
    baseline_tokens_per_second: float | None
    source: str  # CONFIGURED | OBSERVED | DEFAULT | TABLE
    detail: str = ""  # what was observed, or why the observed rate was not used
    observed_gamma: int | None = None  # OBSERVED: the deployed γ whose rate was observed
    # OBSERVED: the default figures carrying that rate to γ 0 (model.figures_needed's keys)
    rests_on_defaults: Sequence[str] = ()

    def to_dict(self) -> dict[str, object]:
        return {"baseline_tokens_per_second": self.baseline_tokens_per_second, "source": self.source,
                "detail": self.detail, "observed_gamma": self.observed_gamma,
                "rests_on_defaults": list(self.rests_on_defaults)}

    def describe(self) -> str:
        """One line for the console and the dashboard."""
        if self.source == TABLE:
            return "anchor: the measured table's own step times" + (f" ({self.detail})" if self.detail else "")
        if self.baseline_tokens_per_second is None:
            return "anchor: none (relative units only)"
        rate = f"{self.baseline_tokens_per_second:,.1f} tok/s plain decode at batch 1"
        if self.source == OBSERVED:
            at = "the deployed gamma" if self.observed_gamma is None else f"gamma {self.observed_gamma}"
            line = (f"anchor: {rate}, observed — inferred from the engine's own rate at {at} "
                    f"({self.detail}), not measured at gamma 0: the level matches the engine there")
            if self.rests_on_defaults:
                line += (f"; the rate at gamma 0, and so each speedup, rests on the default "
                         f"{', '.join(self.rests_on_defaults)}")
            return line
        if self.source == DEFAULT:
            what, why = (self.detail, "") if self.detail.startswith(("Kimi K3", "the roofline floor")) else (
                KIMI_K3_DEFAULT, f" ({self.detail})" if self.detail else "")
            return (f"anchor: {rate}, the DEFAULT ({what}) — set baseline_tokens_per_second or "
                    f"collect latency metrics for your engine{why}")
        return f"anchor: {rate}, {'set by --baseline-tokens-per-second' if self.source == FLAG else 'configured'}"


def configured_or_default(deployment: Deployment) -> Anchor:
    """The anchor before any observation: the table's, the configured rate, or the default —
    Kimi K3's 118 tok/s on 16 GB300, unless the config names another model or GPU: then the
    roofline's own plain decode at batch 1 for them (its memory and compute floor, an upper
    bound: served engines run slower), announced as such."""
    if deployment.cost_profile not in ("flat", "roofline"):
        unused = (f"baseline_tokens_per_second {deployment.baseline_tokens_per_second:g} in the config is not used: "
                  f"the table's T(1, 1) is the plain decode" if deployment.is_configured("baseline_tokens_per_second")
                  else "")
        return Anchor(None, TABLE, unused)
    if deployment.is_configured("baseline_tokens_per_second"):
        return Anchor(deployment.baseline_tokens_per_second,
                      FLAG if "baseline_tokens_per_second" in deployment.flagged else CONFIGURED)
    if not any(deployment.is_configured(k) for k in ("model", "gpu", "tensor_parallel_size")) or _kimi_k3(deployment):
        # also when configured as Kimi K3 on 16 GB300 (keys set to their defaults): the same
        # engine, so the same rate, not its roofline floor (an upper bound some 20× above it)
        return Anchor(deployment.baseline_tokens_per_second, DEFAULT, KIMI_K3_DEFAULT)
    from .profiles import roofline_floor_tokens_per_second

    rate = roofline_floor_tokens_per_second(deployment)
    return Anchor(rate, DEFAULT, f"the roofline floor of {deployment.model} on {deployment.tensor_parallel_size} "
                                 f"{deployment.gpu}: an upper bound, served engines run slower")


def _kimi_k3(deployment: Deployment) -> bool:
    """Whether the model, GPU and tensor parallelism are those of the Kimi K3 default."""
    return ((deployment.model, deployment.gpu, deployment.tensor_parallel_size)
            == tuple(Deployment.__dataclass_fields__[k].default for k in ("model", "gpu", "tensor_parallel_size")))


def solve_observed_rate(model_rate_at: Callable[[float], float], observed_rate: float, start: float) -> float | None:
    """The b with model_rate_at(b) = observed_rate, by the fixed point b ← b·observed / model(b)
    (exact in one step for the flat profile, whose rate is proportional to b). None when the
    profile cannot reach the observed rate at any b (its increments alone are slower)."""
    b = start
    for _ in range(100):
        modelled = model_rate_at(b)
        if not (math.isfinite(modelled) and modelled > 0):
            return None
        nxt = b * observed_rate / modelled
        if not math.isfinite(nxt) or nxt > 1e12:
            return None
        if abs(nxt - b) <= 1e-12 * b:
            return nxt
        b = nxt
    return b if abs(model_rate_at(b) / observed_rate - 1.0) < 1e-6 else None


def profile_figures(deployment: Deployment, anchor: Anchor) -> dict[str, object]:
    """The figures the cost profile used, each with its source (configured or default), and
    ``unused``: {key: why} of the keys this deployment's pricing does not read."""
    def figure(key: str) -> dict[str, object]:
        source = (FLAG if key in deployment.flagged else PAGE if key in deployment.from_page
                  else CONFIGURED if deployment.is_configured(key) else DEFAULT)
        return {"value": getattr(deployment, key), "source": source}

    out: dict[str, object] = {"profile": deployment.cost_profile, "baseline_tokens_per_second": anchor.to_dict(),
                              **{k: figure(k) for k in DRAFTER_FIGURES}, "unused": unused_keys(deployment),
                              # the cost shape the engines measure, beside the profile's (model.verify_cost)
                              "verify_cost": None if deployment.verify_cost is None else deployment.verify_cost.to_dict()}
    if deployment.objective == "throughput":  # tokens per GPU-second: the GPUs per engine divide every rate
        out["tensor_parallel_size"] = figure("tensor_parallel_size")
    if deployment.cost_profile == "roofline":
        from .profiles import deployment_gpu, deployment_model

        out.update({k: figure(k) for k in ("model", "gpu", "tensor_parallel_size")})
        gpu = deployment_gpu(deployment)  # its figures, each with where it was read
        out["gpu_figures"] = {"hbm_bytes_per_s": vars(gpu.hbm_bytes_per_s),
                              "dense_flops": {p: vars(f) for p, f in gpu.dense_flops.items()}}
        model = deployment_model(deployment)  # a built-in's, or read from its config.json
        out["model_figures"] = {k: vars(getattr(model, k)) for k in MODEL_FIGURES}
        out["engine_cost_scale"] = deployment.engine_cost_scale  # the engines' own step cost preferred
    elif deployment.cost_profile not in ("flat",):
        out["table"] = deployment.cost_profile
    return out


def _entry(figures: Mapping[str, object], key: str) -> Mapping[str, object]:
    """The object under ``key`` of a profile_figures document (or its JSON): a figure's
    {"value", "source"}, model_figures, engine_cost_scale; {} where there is none."""
    entry = figures.get(key)
    return entry if isinstance(entry, Mapping) else {}


def _roofline_on_defaults(figures: Mapping[str, object]) -> bool:
    """Whether the roofline's model, GPU or tensor-parallel size is a default."""
    return any(_entry(figures, k)["source"] == DEFAULT for k in ("model", "gpu", "tensor_parallel_size"))


def describe_figures(figures: Mapping[str, object]) -> str | None:
    """'roofline figures: kimi-k3 (default), GB300 (default), TP 16 (default)', or None."""
    if figures.get("profile") != "roofline":
        return None
    model, gpu, tp = (_entry(figures, k) for k in ("model", "gpu", "tensor_parallel_size"))
    parts = [f"{model['value']} ({model['source']})",
             f"{gpu['value']} ({gpu['source']})",
             f"TP {tp['value']} ({tp['source']})"]
    context = _entry(_entry(figures, "model_figures"), "context_tokens")
    if context and not str(context["source"]).startswith("assumed"):  # the assumed default goes unsaid here
        from .profiles import CONFIGURED_CONTEXT

        measured = "" if context["source"] == CONFIGURED_CONTEXT else " (measured from the requests)"
        parts.append(f"context {context['value']:,.0f} tokens{measured}")
    line = "roofline figures: " + ", ".join(parts)
    if _roofline_on_defaults(figures):
        line += " — set model, gpu and tensor_parallel_size for your engine"
    scale = _entry(figures, "engine_cost_scale")
    if scale:
        line += (f"; scaled to the step cost the engines report (vLLM's MFU counters over {scale['steps']:,.0f} steps): "
                 f"bytes x{scale['read_bytes']:.2f}, FLOPs x{scale['flops']:.2f}")
        if scale["disagree"]:
            line += f" — {scale['summary']}"
    return line


def describe_defaults(figures: Mapping[str, object]) -> str | None:
    """'drafter figures: method dspark (default), draft_cost 0.1 (default), … — …' when any of
    DRAFTER_FIGURES was not configured, else None: the deploy line's method is then the default's."""
    from .drafters import FREE, drafter_for

    free = drafter_for(str(_entry(figures, "method")["value"])).kind == FREE
    prices = {"draft_cost": not free, "draft_overhead": free}  # a sequential drafter's overhead is an extension
    unset = [k for k in DRAFTER_FIGURES
             if k in figures and _entry(figures, k)["source"] == DEFAULT and prices.get(k, True)]
    if "cost_profile" in unset and figures.get("profile") == "roofline" and all(
            _entry(figures, k).get("source") not in (None, DEFAULT) for k in ("model", "gpu", "tensor_parallel_size")):
        unset.remove("cost_profile")  # the roofline of a configured model and GPU was chosen with them
    if not unset:
        return None
    values = ", ".join(f"{k} {value:g} (default)" if isinstance(value := _entry(figures, k)["value"], float)
                       else f"{k} {value} (default)" for k in unset)
    flags = ", ".join("--" + k.replace("_", "-") for k in unset)
    return (f"drafter figures: {values} — set them for your engine ([deployment] or the route's table in the "
            f"config, or tune-gamma's {flags})")


def described_lines(anchor: Anchor | None, figures: Mapping[str, object] | None) -> list[tuple[str, bool]]:
    """(line, whether it rests on default figures) for the anchor's line, the roofline figures'
    line (when a roofline priced it) and the drafter's defaults (when used): what the CLI header
    and the dashboard say, the dashboard warning on the lines that rest on defaults."""
    figures = figures or {}
    out = [] if anchor is None else [(anchor.describe(), anchor.source == DEFAULT or bool(anchor.rests_on_defaults))]
    roofline = describe_figures(figures)
    if roofline:
        out.append((roofline, _roofline_on_defaults(figures)))
    drafter = describe_defaults(figures)
    return out + ([(drafter, True)] if drafter else [])


def describe_lines(anchor: Anchor | None, figures: Mapping[str, object] | None) -> list[str]:
    """described_lines' lines alone."""
    return [line for line, _ in described_lines(anchor, figures)]


# ν below this is every step drafted within the counts' noise (a scrape race, a request at
# its length limit): pricing without it moves tokens per step by at most this share
UNDRAFTED_NEGLIGIBLE = 0.02


def priced_rate(observed_tps: float | None, page_nu: float | None, priced_nu: float | None
                ) -> float | Unpriceable | None:
    """The observed rate, or an Unpriceable saying why it cannot anchor: its tokens per step
    count a share ``page_nu`` of tokens from undrafted steps that the pricing leaves out (the
    specialized path prices dspark, which drafts every step)."""
    if observed_tps is None or not page_nu or priced_nu is not None or page_nu <= UNDRAFTED_NEGLIGIBLE:
        return observed_tps
    return Unpriceable(f"the window's steps say {page_nu:.1%} of the tokens came from steps without a draft, "
                        f"which the specialized path's pricing (every step drafted) leaves out: its "
                        f"{observed_tps:.1f} tok/s is not this model's rate")


@dataclass(frozen=True)
class Unpriceable:
    """An observed rate that cannot anchor the pricing, and why."""

    why: str
