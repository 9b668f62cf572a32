"""``specdec inspect``'s report of a page's engines (``inspect_report``): each engine's counts
and the ratios computed from them, its decode steps and tokens (ν), the context its requests
read and the step cost it reports, the total over engines of one γ — and the console's table
and decode lines (``format_inspect_table``, ``format_decode_lines``). The page is parsed by
acceptance.parse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from .counts import EngineSnapshot, SpecCounts, impossible_counts, steps_undrafted_share, survival, undrafted_token_share
from .definitions import conditional_from_survival, draft_acceptance_rate, equivalent_p, mean_acceptance_length
from .engine_cost import engine_cost
from .inspect_types import CountsEntry, DecodeEntry, EngineEntry, InspectReport
from .json_safe import json_safe
from .request_lengths import request_context


def _counts_entry(counts: SpecCounts) -> CountsEntry:
    surv = survival(counts)
    al = mean_acceptance_length(counts)
    return cast(CountsEntry, json_safe({  # json_safe keeps the keys; its return type cannot say so
        "gamma": counts.gamma,
        "drafts": counts.drafts,
        "draft_tokens": counts.draft_tokens,
        "accepted_tokens": counts.accepted_tokens,
        "accepted_per_position": counts.accepted_per_position,
        "survival": surv,
        "conditional": conditional_from_survival(surv),
        "mean_acceptance_length": al,
        "draft_acceptance_rate": draft_acceptance_rate(counts),
        "equivalent_p": equivalent_p(al, counts.gamma),
        # a relation the counts break within one engine step (a scrape raced it), or None
        "scrape_race": impossible_counts(counts),
    }))


def _not_speculating_entry() -> CountsEntry:
    return {
        "gamma": 0,
        "drafts": 0,
        "draft_tokens": 0,
        "accepted_tokens": 0,
        "accepted_per_position": [],
        "survival": [],
        "conditional": [],
        "mean_acceptance_length": None,
        "draft_acceptance_rate": None,
        "equivalent_p": None,
    }


def _mean_itl_ms(snap: EngineSnapshot) -> float | None:
    """Mean of vllm:inter_token_latency_seconds since the engine started, in ms (None: absent)."""
    shape = snap.step_shape
    if shape is None or not shape.itl_count or shape.itl_sum is None:
        return None
    return 1e3 * shape.itl_sum / shape.itl_count


def decode_steps_entry(snap: EngineSnapshot) -> DecodeEntry | None:
    """What the page says of one speculating engine's decode steps since it started (None
    without the inter-token latency histogram): S = its count (once per request per decode
    step), N = generation − first tokens when both are on the page, else S + A; U = S − D
    steps carried no draft, ν = U / N (counts.undrafted_token_share). N − S should equal the
    accepted tokens A but for the accepted drafts a length or stop limit cut from a request's
    last step — at most γ per request, so |A − (N − S)| ≤ γ × first tokens, else the page's
    counters disagree (``consistent`` False). ``undrafted_token_share_steps``: ν of N = S + A,
    as a window without the page's token counters counts it (tune-gamma's,
    counts.steps_undrafted_share), a little lower where a limit cut accepted drafts."""
    shape, counts = snap.step_shape, snap.counts
    if counts is None or shape is None or not shape.itl_count:
        return None
    steps, drafts, accepted = float(shape.itl_count), float(counts.drafts), float(counts.accepted_tokens)
    generation, first = shape.generation_tokens, shape.first_tokens
    counted = generation is not None and first is not None
    tokens = float(generation - first) if generation is not None and first is not None else steps + accepted
    cut = accepted - (tokens - steps) if counted else None
    most = counts.gamma * float(first) if first is not None and counted else None
    return {"decode_steps": steps, "decode_tokens": tokens if counted else None,
            "tokens_source": "generation - first tokens" if counted else "steps + accepted",
            "undrafted_token_share": undrafted_token_share(tokens, drafts, accepted, steps=steps),
            "undrafted_token_share_steps": steps_undrafted_share(steps, drafts, accepted),
            "accepted_not_output": cut, "accepted_not_output_max": most,
            "consistent": bool(abs(cut) <= most) if cut is not None and most is not None else None}


def format_decode_lines(report: InspectReport) -> list[str]:
    """One console line per engine with decode steps on its page (decode_steps_entry)."""
    lines = []
    for e in report["engines"]:
        d = e.get("decode")
        if not d:
            continue
        nu = d["undrafted_token_share"]
        head = f"engine {e['engine']}: {d['decode_steps']:,.0f} decode steps"
        if d["decode_tokens"] is None:
            head += " (no generation_tokens / time_to_first_token on the page: tokens taken as steps + accepted)"
        else:
            head += f", {d['decode_tokens']:,.0f} decode tokens ({d['decode_tokens'] / d['decode_steps']:.2f} per step)"
        head += f"; {_fmt(nu, '.1%')} of the tokens came from steps without a draft"
        decode_tokens = d["decode_tokens"]
        if d["consistent"] is not None and decode_tokens is not None:  # both or neither (decode_steps_entry)
            gap = f"tokens − steps {decode_tokens - d['decode_steps']:,.0f} against {e['accepted_tokens']:,.0f} accepted"
            head += (f"; {gap} (a length limit cuts at most {d['accepted_not_output_max']:,.0f})" if d["consistent"]
                     else f"; INCONSISTENT: {gap}, beyond the {d['accepted_not_output_max']:,.0f} a length limit can cut")
            head += (f"; of steps + accepted tokens, as tune-gamma counts a window, "
                     f"{_fmt(d['undrafted_token_share_steps'], '.1%')}")
        lines.append(head)
    return lines


def inspect_report(snapshots: list[EngineSnapshot]) -> InspectReport:
    """``specdec inspect --json`` without ``schema_version``: counters as they are (totals since start).

    ``engines``: one entry per engine (γ 0, zero counts, empty curves and null ratios when
    it does not speculate; ``mean_itl_ms``, the mean inter-token latency since start, null
    without the histogram; ``decode``, its decode steps and tokens and ν: decode_steps_entry). ``total``: the counts summed over the speculating engines and
    the same quantities computed from the sums (survival a_k = ΣA_k / ΣD, AL = 1 + ΣA/ΣD,
    …) — only when they share one γ; null when none speculates or when γ differ, in which
    case ``totals_by_gamma`` lists one total per γ (counts are never added across γ).
    """
    engines: list[EngineEntry] = []
    by_gamma: dict[int, SpecCounts] = {}
    for snap in snapshots:
        counts_entry = _not_speculating_entry() if snap.counts is None else _counts_entry(snap.counts)
        # a cast: mypy refuses ** into a TypedDict with NotRequired keys the item lacks (kv_cache, set later)
        entry = cast(EngineEntry, {"model_name": snap.model_name, "engine": snap.engine,
                                   "mean_itl_ms": _mean_itl_ms(snap), "decode": None,
                                   "context": request_context(snap.step_shape),
                                   "engine_cost": engine_cost(snap.step_shape), **counts_entry})
        if snap.counts is not None:
            entry["decode"] = decode_steps_entry(snap)
            g = snap.counts.gamma
            by_gamma[g] = by_gamma[g] + snap.counts if g in by_gamma else snap.counts
        engines.append(entry)
    report: InspectReport = {"engines": engines, "total": None}
    if len(by_gamma) == 1:
        report["total"] = _counts_entry(next(iter(by_gamma.values())))
    else:
        report["total"] = None
        if by_gamma:
            report["totals_by_gamma"] = [_counts_entry(by_gamma[g]) for g in sorted(by_gamma)]
    return report


def _fmt(x: object, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def format_inspect_table(report: InspectReport) -> str:
    """A fixed-width console table of an ``inspect_report``: one row per engine, then the total(s)."""
    rows: list[tuple[str, str, CountsEntry]] = []
    for engine_entry in report["engines"]:
        rows.append((engine_entry["model_name"], engine_entry["engine"], engine_entry))
    totals: list[tuple[str, str, CountsEntry]] = []
    total = report.get("total")
    if total is not None:
        totals.append(("total", "", total))
    for t in report.get("totals_by_gamma") or []:
        totals.append((f"total γ={t['gamma']}", "", t))
    header = ("model", "engine", "γ", "drafts", "draft_tok", "accepted", "AL", "accept", "p", "survival a_1..a_γ")
    body = []
    for model_name, engine, e in rows + totals:
        survival_text = " ".join(_fmt(a, ".3f") for a in e["survival"]) if e["gamma"] else "(not speculating)"
        body.append(
            (
                model_name,
                engine,
                str(e["gamma"]),
                _fmt(e["drafts"], ",.0f"),
                _fmt(e["draft_tokens"], ",.0f"),
                _fmt(e["accepted_tokens"], ",.0f"),
                _fmt(e["mean_acceptance_length"], ".3f"),
                _fmt(e["draft_acceptance_rate"], ".1%"),
                _fmt(e["equivalent_p"], ".3f"),
                survival_text,
            )
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    right = {2, 3, 4, 5, 6, 7, 8}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out.extend(line(r) for r in body[: len(rows)])
    if totals:
        out.append(line(["-" * w for w in widths]))
        out.extend(line(r) for r in body[len(rows):])
    out += [f"note: engine {engine}: {e['scrape_race']}, within one engine step: the page was read while the engine "
            f"recorded a step; its values are shown as read (a survival can pass 1 or rise) and a later scrape "
            f"should agree" for _, engine, e in rows if e.get("scrape_race")]
    return "\n".join(out)
