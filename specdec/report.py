"""The one tune-gamma JSON document, the one NaN → null rule, and the clock and duration wording.

Every view prints through here: ``tuning_to_dict`` is the tune-gamma document
(docs/DESIGN.md, The tune-gamma JSON) of a ``specdec.pipeline.RouteTuning``;
``json_document`` the text of any document the views print (``schema_version`` first,
NaN and inf as null by ``json_safe``); ``format_clock`` and ``format_duration`` the
times every message names.
"""

from __future__ import annotations

import json
import math
import time

from acceptance.counts import mean_draft_length
from acceptance.plugin_series import batch_bucket

JSON_SCHEMA_VERSION = 1  # of every JSON document the views print (tune-gamma, inspect, ...)


def json_document(doc: dict) -> str:
    """The text of one JSON document as the views print it: schema_version first, NaN and
    inf as null (json_safe), indented."""
    return json.dumps(json_safe({"schema_version": JSON_SCHEMA_VERSION, **doc}), indent=2, allow_nan=False)


def format_clock(t: float) -> str:
    """UTC wall time of an epoch second: '2026-07-29 08:15:00 UTC' (every view's wording)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def tuning_to_dict(t) -> dict:
    """The tune-gamma JSON document (docs/DESIGN.md, The tune-gamma JSON), minus schema_version."""
    e = t.estimate
    rec = t.recommendation.to_dict()
    observed = {
        "gamma": e.gamma,
        "drafts": e.drafts,
        "survival": e.survival.value,
        "survival_low": e.survival.low,
        "survival_high": e.survival.high,
        "conditional": e.conditional.value,
        "mean_acceptance_length": e.mean_acceptance_length.value,
        "mean_acceptance_length_interval": list(e.mean_acceptance_length.confidence_interval),
        "draft_acceptance_rate": e.draft_acceptance_rate.value,
        "equivalent_p": e.equivalent_p.value,
        "equivalent_p_interval": list(e.equivalent_p.confidence_interval),
        "interval_method": e.method,
        "segments": [],
        "drift": None,
        "drafts_more_needed": t.drafts_more_needed,
        "batch_mix": None if t.batch_mix is None else {str(k): v for k, v in sorted(t.batch_mix.items())},
        "notes": list(t.notes),
        "survival_reached": t.survival_reached,
        "mean_draft_length": mean_draft_length(e.counts),
        "reached": t.draft_reach,
        "undrafted_token_share": None if t.route_estimate is None else t.route_estimate.undrafted_token_share,
        "survival_by_batch": None,
    }
    if t.plugin is not None and t.plugin.by_batch:
        used = {batch_bucket(b).label for b in (t.survival_by_batch or {})}
        observed["survival_by_batch"] = {
            label: {"drafts": bs.drafts, "survival": list(bs.survival), "survival_reached": list(bs.reached_survival),
                    "used_in_model": label in used}
            for label, bs in t.plugin.survival_by_batch().items()
        }
    if t.drift is not None:
        d = t.drift
        observed["drift"] = {
            "detected": d.detected,
            "recent_mean_acceptance_length": d.recent_mean_acceptance_length,
            "earlier_mean_acceptance_length": d.earlier_mean_acceptance_length,
            "difference": d.difference.value,
            "difference_interval": list(d.difference.confidence_interval),
            "recent_start": d.recent_start,
            "message": d.message,
        }
    w = t.window
    if w is not None:
        current = w.current_segments
        observed["segments"] = [
            {
                "gamma": s.gamma, "start": s.start, "end": s.end, "drafts": s.total.drafts,
                "engines": [list(x) for x in s.engines], "newest": s is w.newest_segment,
                # still running at the window's end (a rolling change or a canary), else older
                "current": any(s is c for c in current),
                "engines_at_end": [list(x) for x in getattr(s, "engines_at_end", None) or s.engines],
            }
            for s in w.segments
        ]
        observed["events"] = [_event_dict(ev) for ev in w.events]
        observed["batch_time_shares"] = {str(k): v for k, v in sorted(w.step_shape.batch_mix.items())}
        observed["observed_tokens_per_second"] = t.route_estimate.observed_tokens_per_second
        observed["targets"] = [_status_dict(s) for s in w.target_status]
    doc = {
        "route": t.route,
        "window": {"start": t.window_start, "end": t.window_end} if t.window_start is not None else None,
        "objective": rec.pop("objective"),
        "cost_profile": rec.pop("cost_profile"),
        "interval_level": rec.pop("interval_level"),
        "observed": observed,
    }
    doc.update(rec)
    return json_safe(doc)


def json_safe(x):
    """The JSON conventions of every document the views print: numpy → Python numbers and
    lists, NaN/inf → null, keys → strings."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist"):
        return json_safe(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _event_dict(ev) -> dict:
    return {k: getattr(ev, k) for k in ("time", "target", "model_name", "engine", "kind", "detail") if hasattr(ev, k)}


def _status_dict(s) -> dict:
    return {k: getattr(s, k) for k in ("target", "last_ok_time", "last_error", "failing_since") if hasattr(s, k)}
