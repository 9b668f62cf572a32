"""The words of a route's greedy and sampled requests (the tune-gamma document's ``sampling``,
model.sampling_split): each population's decision, the split that follows or why there is none,
and on a route without per-request rows the mix its curve suggests. The console and the
dashboard's recommendation page print these lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acceptance.request_sampling import MIN_POPULATION_REQUESTS
from model.decision_kind import DecisionKind

_KIND_WORDS = {"greedy": "greedy", "sampled": "sampled", "high_acceptance": "high-acceptance",
               "low_acceptance": "low-acceptance"}
_STATISTIC_WORDS = {"tokens_per_step": "tokens per decode step (AL with the undrafted steps)",
                    "acceptance_length": "acceptance length"}
_INGEST_HINT = ('add each request\'s "temperature" to the gateway\'s lines (specdec ingest --per-request) to price '
                "greedy and sampled requests apart")


def sampling_lines(view: Mapping[str, Any] | None) -> list[str]:
    """The console lines of a ``sampling`` document (none when it is null)."""
    if not view:
        return []
    if view.get("mix_suggested"):
        return [mix_sentence(view["mix_suggested"])]
    if not view["populations"]:
        return [f"by sampling: {_no_split(view)}"]
    lines = [f"by sampling ({_basis(view)}; each population priced from its own requests):"]
    lines += [f"  {_population(p, view['gamma'])}" for p in view["populations"]]
    lines.append(_split(view))
    return lines


def mix_sentence(mix: Mapping[str, Any]) -> str:
    """What a route's curve suggests of a mix, and what would split it (acceptance.acceptance_mix)."""
    nu = "" if mix["undrafted_token_share"] is None else f", {mix['undrafted_token_share']:.0%} of tokens undrafted"
    return (f"note: the acceptance by position suggests a mix of request populations: {mix['first_position']:.0%} of "
            f"drafts pass their first token while past it {mix['deeper_conditional']:.0%} pass each next one, as if "
            f"{mix['share_accepting_nothing']:.0%} of the drafts came from requests that accept nothing (at least "
            f"{mix['threshold']:.0%} suggests it; AL {mix['mean_acceptance_length']:.2f}{nu}). Greedy and sampled "
            f"requests mixed give this, and so does a drafter that often proposes a wrong continuation; the engines' "
            f"counters sum every request and cannot tell which: {_INGEST_HINT}")


def _basis(view: Mapping[str, Any]) -> str:
    if view["basis"] == "temperature":
        return (f"by the gateway lines' temperature: {view['greedy_requests']} greedy and "
                f"{view['sampled_requests']} sampled of {view['requests']} requests")
    test = view["inference"]
    return (f"inferred, as no line carries a temperature: the {test['requests']} requests' "
            f"{_STATISTIC_WORDS[test['statistic']]} fall in two groups, means {test['low_mean']:.2f} and "
            f"{test['high_mean']:.2f}, separation {test['separation']:.1f} >= {test['threshold']:g} (Ashman's D)")


def _no_split(view: Mapping[str, Any]) -> str:
    why, n = view["why_no_split"], view["requests"]
    if view["basis"] == "temperature":
        greedy, sampled = view["greedy_requests"], view["sampled_requests"]
        unknown = view["requests"] - view["requests_with_temperature"]
        without = f" ({unknown} without one)" if unknown else ""
        if why == "one_kind":
            kind = "greedy" if greedy else "sampled"
            return f"every request whose line gives a temperature is {kind}{without}: one population"
        return (f"{greedy} greedy and {sampled} sampled requests{without}: each population needs "
                f"{MIN_POPULATION_REQUESTS} requests to be priced apart")
    test = view["inference"]
    if why == "too_few":
        return (f"no line carries a temperature, and {test['requests']} requests are too few to find two populations "
                f"in ({2 * MIN_POPULATION_REQUESTS} needed); {_INGEST_HINT}")
    sep = f"no cut leaves {MIN_POPULATION_REQUESTS} requests each side" if test["separation"] is None else (
        f"separation {test['separation']:.1f} < {test['threshold']:g}, Ashman's D")
    return (f"no line carries a temperature, and the {n} requests' {_STATISTIC_WORDS[test['statistic']]} is not "
            f"bimodal ({sep}): one population found; {_INGEST_HINT}")


def _population(p: Mapping[str, Any], gamma: int) -> str:
    kind = _KIND_WORDS[p["kind"]]
    if p["temperature_from"] is None:
        what = f"{kind} ({p['requests']} requests)"
    else:
        lo, hi = p["temperature_from"], p["temperature_to"]
        what = f"{kind} (temperature {lo:g}{'' if lo == hi else f'-{hi:g}'}; {p['requests']} requests)"
    al_lo, al_hi = p["mean_acceptance_length_interval"]
    nu = "" if p["undrafted_token_share"] is None else f", {p['undrafted_token_share']:.0%} of tokens undrafted"
    rate = "" if p["observed_tokens_per_second"] is None else f", {p['observed_tokens_per_second']:.0f} tok/s observed"
    return (f"{what}: AL {p['mean_acceptance_length']:.2f} [{al_lo:.2f}, {al_hi:.2f}]{nu}{rate}: "
            f"{decision_words(p, gamma)}")


def decision_words(p: Mapping[str, Any], gamma: int) -> str:
    """One population's decision, with what it gains."""
    how = "measured" if p["decision_basis"] == "measured" else "projected"
    gain = p["gain"]
    gained = "" if gain is None else (f"{gain['value']:+.1%}" + (
        "" if gain["low"] is None else f" [{gain['low']:+.1%}, {gain['high']:+.1%}]") + f" over gamma {gamma}")
    if p["decision"] == DecisionKind.OFF:
        return f"turn speculation off ({gained}, {how})"
    if p["decision"] == DecisionKind.CHANGE:
        return f"change gamma {gamma} -> {p['recommended_gamma']} ({gained}, {how})"
    if p["decision"] == DecisionKind.PROBE:
        return f"probe gamma {p['recommended_gamma']}, keeping gamma {p['gamma_to_deploy']} meanwhile"
    if p["decision"] == DecisionKind.UNDECIDED:
        return f"no decision: its pricing rests on default figures (the route's figures_needed), gamma {gamma} runs on"
    lo, hi = p["speedup_at_gamma_interval"]
    at = (f"{p['speedup_at_gamma']:.2f}x plain decode" + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")
          + (", measured" if p["speedup_measured"] else ", projected"))
    return f"keep gamma {gamma} ({at}){_better(p, gamma, gained)}"


def _better(p: Mapping[str, Any], gamma: int, gained: str) -> str:
    """Why a population keeps its γ where another projects better: a longer one lies past the
    only γ its requests ran, which a probe measures and more drafts do not (a part of the route
    is priced without one); a shorter one is not yet sure."""
    better, projects = p["recommended_gamma"], f" ({gained})" if gained else ""
    if better == gamma:
        return ""
    if better > gamma and p["decision_basis"] == "model":
        return (f"; gamma {better} projects better{projects}, past gamma {gamma}, the only gamma these requests ran: "
                f"a probe would measure it (none is priced for a part of the route)")
    return f"; gamma {better} looks better{projects}, not yet surely"


def _engines(gamma: int) -> str:
    return "engines without speculation" if gamma == 0 else f"engines running gamma {gamma}"


def _split(view: Mapping[str, Any]) -> str:
    split, gamma = view["split"], view["gamma"]
    runs = "; ".join(f"{_KIND_WORDS[k]} requests on {_engines(g)}" for k, g in split["gammas"].items())
    if split["advised"]:
        return (f"split: vLLM runs one gamma per engine, so route them apart — {runs} (the route runs gamma "
                f"{gamma} for both now)")
    if split["why_not"] == "same_gamma":
        return f"no split: both populations' decisions run the same gamma ({runs})"
    if split["why_not"] == "undecided":
        return "no split advised: a population's decision rests on default figures"
    return (f"no split advised: inferred populations would run apart ({runs}), but a gateway cannot route a request "
            f"by an acceptance it has not run yet; {_INGEST_HINT}, which says whether these are they")
