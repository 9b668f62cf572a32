"""The [deployment] keys a deployment's pricing and deploy line do not read, whatever the
window (a flag setting one is refused: specdec.config.flagged; profile_figures' ``unused``).
What a window's anchor leaves unread is model.figures_needed.unread_once_anchored's; what a
decision that priced no probe leaves unread, ``unread_without_probe``'s."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .deployment import Deployment
from .drafters import FREE, PARALLEL, drafter_for


class PricesProbe(Protocol):
    """What unread_without_probe reads of a decision (model.decision.Decision)."""

    @property
    def prices_probe(self) -> bool: ...


def unused_keys(deployment: Deployment) -> dict[str, str]:
    """{key: why} of the deployment keys this deployment's pricing and deploy line do not read:
    a flag setting one would change nothing, so tune-gamma refuses it (specdec.config)."""
    from .vllm_config import NO_MODEL_NEEDED

    out = {}
    kind = drafter_for(deployment.method).kind
    if kind == FREE:
        out["draft_cost"] = (f"{deployment.method} drafts are priced by draft_overhead (its proposer's time per "
                             f"step), not draft_cost")
    if kind == PARALLEL:
        out["draft_overhead"] = (f"a {deployment.method} draft is one pass priced by draft_cost; draft_overhead is a "
                                 f"sequential drafter's fixed cost per pass, or an ngram or suffix proposer's time")
    if deployment.decode_backend != "latency_specialized":
        for key in ("specialized_speedup", "cudagraph_capture_sizes"):
            out[key] = "only decode_backend = \"latency_specialized\" uses it"
    if deployment.method in NO_MODEL_NEEDED:
        out["draft_model"] = f"{deployment.method} takes no draft model"
    if deployment.cost_profile not in ("flat", "roofline"):
        for key in ("model", "gpu", "tensor_parallel_size", "baseline_tokens_per_second", "gpu_hbm_bytes_per_s",
                    "gpu_dense_flops", "context_tokens"):
            out[key] = f"the measured table {deployment.cost_profile} prices every step in its own seconds"
    return out


# what a probe's pricing alone reads (model.probe.plan.priced_probe)
PROBE_TERMS = ("decision_horizon_s", "engine_restart_s")


def unread_without_probe(decisions: Iterable[PricesProbe]) -> dict[str, str]:
    """{key: why} of the probe-pricing keys that ``decisions`` (model.decision.Decision, one
    per route tuned together) did not read: none of them priced a probe (run, carried on,
    declined or withheld), and only a probe's value over the horizon against its cost, its
    restarts included, reads them — known only once decided."""
    if any(d.prices_probe for d in decisions):
        return {}
    why = ("no probe was priced here, and only a probe's pricing reads it (its value over decision_horizon_s "
           "against its cost, engine_restart_s per restart)")
    return dict.fromkeys(PROBE_TERMS, why)
