"""vLLM `SpecDecoding metrics:` log lines → counts, with drafts recovered from rounded fields."""

from __future__ import annotations

import datetime as dt
import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from acceptance.log_lines import (
    LogLinesError,
    consistent_drafts,
    parse_log_lines,
    parse_spec_decoding_message,
    read_log_file,
)

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden"  # a copy of the shared reference data

UTC = dt.timezone.utc


def vllm_message(drafts: int, draft_tokens: int, per_position: list[int], elapsed: float = 10.0) -> str:
    """The message of vLLM 0.33's SpecDecodingLogging.log, reimplemented from its source
    (vllm/v1/spec_decode/metrics.py) with the same NumPy arithmetic; vLLM is not imported."""
    num_drafts = np.sum([drafts])
    num_draft_tokens = np.sum([draft_tokens])
    num_accepted_tokens = np.sum([sum(per_position)])
    draft_throughput = num_draft_tokens / elapsed
    accepted_throughput = num_accepted_tokens / elapsed
    draft_acceptance_rate = num_accepted_tokens / num_draft_tokens * 100 if num_draft_tokens > 0 else float("nan")
    mean_acceptance_length = 1 + (num_accepted_tokens / num_drafts)
    acceptance_rates = np.sum(np.array([per_position]), axis=0) / num_drafts
    rates_str = ", ".join(f"{p:.3f}" for p in acceptance_rates)
    return (
        "SpecDecoding metrics: "
        "Mean acceptance length: %.2f, "
        "Accepted throughput: %.2f tokens/s, "
        "Drafted throughput: %.2f tokens/s, "
        "Accepted: %d tokens, "
        "Drafted: %d tokens, "
        "Per-position acceptance rate: %s, "
        "Avg Draft acceptance rate: %.1f%%"
    ) % (
        mean_acceptance_length,
        accepted_throughput,
        draft_throughput,
        num_accepted_tokens,
        num_draft_tokens,
        rates_str,
        draft_acceptance_rate,
    )


def vllm_prefix(when: dt.datetime, pid: int = 7, fileinfo: str = "metrics.py:157") -> str:
    """vllm/logger.py's format: "(%(vllm_process_name)s pid=%(process)d) %(levelname)s
    %(asctime)s [%(fileinfo)s:%(lineno)d] " with datefmt "%m-%d %H:%M:%S"."""
    return f"(APIServer pid={pid}) INFO {when.strftime('%m-%d %H:%M:%S')} [{fileinfo}] "


# --- golden lines ----------------------------------------------------------------------------


def test_golden_lines_recover_the_exact_counts():
    truth = json.loads((GOLDEN / "log_lines_sample_truth.json").read_text())
    parsed = read_log_file(GOLDEN / "log_lines_sample.txt", year=2025)
    assert parsed.lines == 2
    assert parsed.skipped == {}
    assert len(parsed.intervals) == len(truth)
    for interval, fed in zip(parsed.intervals, truth):
        c = interval.counts
        assert interval.gamma == fed["num_spec_tokens"] == c.gamma
        assert c.drafts == fed["num_drafts"]
        assert c.draft_tokens == fed["num_draft_tokens"]
        assert c.accepted_tokens == fed["num_accepted_tokens"]
        assert list(c.accepted_per_position) == fed["num_accepted_tokens_per_pos"]
        assert interval.drafts_estimated is True
        assert interval.drafts_range[0] <= fed["num_drafts"] <= interval.drafts_range[1]
        assert interval.interval_s == pytest.approx(fed["elapsed_seconds"], rel=1e-3)
        assert interval.time is None  # the sample lines carry no logger prefix
    # The first line pins D down; the second fits 1813 and 1814 alike (module docstring).
    assert [i.drafts_candidates for i in parsed.intervals] == [1, 2]


def test_a_byte_order_mark_costs_no_line(tmp_path):
    path = tmp_path / "bom.log"
    path.write_bytes(b"\xef\xbb\xbf" + (GOLDEN / "log_lines_sample.txt").read_bytes())
    plain = read_log_file(GOLDEN / "log_lines_sample.txt", year=2025)
    marked = read_log_file(path, year=2025)
    assert len(marked.intervals) == len(plain.intervals) > 0


def test_golden_line_matches_the_reimplemented_format():
    truth = json.loads((GOLDEN / "log_lines_sample_truth.json").read_text())
    for fed in truth:
        message = vllm_message(
            fed["num_drafts"], fed["num_draft_tokens"], fed["num_accepted_tokens_per_pos"], fed["elapsed_seconds"]
        )
        assert message == fed["log_line"]


# --- the logger's prefix, other lines, engines -------------------------------------------------


def golden_message(i: int) -> str:
    return (GOLDEN / "log_lines_sample.txt").read_text().splitlines()[i]


def engine_stats(index: str) -> str:
    """LoggingStatLogger.log's line, which vLLM writes just before the SpecDecoding one."""
    return (
        f"Engine {index}: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 190.3 tokens/s, "
        "Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%"
    )


def test_prefixed_log_gives_times_engines_and_counts_other_lines():
    t1 = dt.datetime(2025, 11, 30, 5, 21, 37)
    t2 = t1 + dt.timedelta(seconds=10)
    lines = [
        vllm_prefix(t1, fileinfo="api_server.py:1200") + "Starting vLLM API server 0 on http://0.0.0.0:8000",
        vllm_prefix(t1, fileinfo="loggers.py:254") + engine_stats("000"),
        vllm_prefix(t1) + golden_message(0),
        "INFO:     127.0.0.1:40000 - \"GET /metrics HTTP/1.1\" 200 OK",
        "",
        vllm_prefix(t2, fileinfo="loggers.py:254") + engine_stats("001"),
        vllm_prefix(t2) + golden_message(1),
    ]
    parsed = parse_log_lines(lines, year=2025, source="vllm.log")
    assert [i.time for i in parsed.intervals] == [t.replace(tzinfo=UTC).timestamp() for t in (t1, t2)]
    assert [i.engine for i in parsed.intervals] == ["000", "001"]
    assert [i.line_number for i in parsed.intervals] == [3, 7]
    assert [i.counts.drafts for i in parsed.intervals] == [666, 1814]
    assert parsed.skipped == {"other line": 4, "blank line": 1}
    assert parsed.lines == len(lines)


def test_the_stats_line_gives_each_interval_its_running_requests_and_output_tokens():
    """Running and the generation throughput × the interval, from the same process's stats
    line just before; not from another process's, not twice, not from the aggregated logger
    (its Running is a sum over engines, not a batch size)."""
    t1 = dt.datetime(2025, 11, 30, 5, 21, 37)

    def stats(pid: int, head: str, gen: str, running: int) -> str:
        return (vllm_prefix(t1, pid, "loggers.py:254") + f"{head}: Avg prompt throughput: 12.0 tokens/s, "
                f"Avg generation throughput: {gen} tokens/s, Running: {running} reqs, Waiting: 3 reqs, GPU KV cache usage: 40.1%, Prefix cache hit rate: 0.0%")

    def spec(pid: int, i: int) -> str:
        return vllm_prefix(t1, pid) + golden_message(i)

    lines = [stats(1, "Engine 000", "190.3", 4), stats(2, "Engine 000", "540.0", 9), spec(2, 1), spec(1, 0),
             spec(1, 0), stats(3, "2 Engines Aggregated", "700.0", 13), spec(3, 0)]
    parsed = parse_log_lines(lines, year=2025, source="vllm.log")
    assert [i.running for i in parsed.intervals] == [9, 4, None, None]
    # the golden lines span 10 s each (T / drafted throughput: 1995 / 199.50, 5426 / 542.60)
    assert [i.generation_tokens for i in parsed.intervals] == pytest.approx([5400.0, 1903.0, None, None])


def test_year_rolls_over_at_new_year():
    before = dt.datetime(2025, 12, 31, 23, 59, 55)
    after = dt.datetime(2026, 1, 1, 0, 0, 5)
    lines = [vllm_prefix(before) + golden_message(0), vllm_prefix(after) + golden_message(1)]
    times = [i.time for i in parse_log_lines(lines, year=2025, source="t").intervals]
    assert times == [before.replace(tzinfo=UTC).timestamp(), after.replace(tzinfo=UTC).timestamp()]
    # Lines a few seconds out of order (two processes) stay in the same year.
    lines = [vllm_prefix(after) + golden_message(0), vllm_prefix(after - dt.timedelta(seconds=3)) + golden_message(1)]
    times = [i.time for i in parse_log_lines(lines, year=2026, source="t").intervals]
    assert times[1] - times[0] == -3


def test_without_a_year_the_log_is_not_put_in_the_future():
    # A line dated 10 days ahead of today's month-day can only be from last year (in late
    # December, its month-day is next January's: last year's January is then too old, and
    # this year's is right). Either way it is the target date one year back.
    target = dt.datetime.now(UTC).replace(microsecond=0, tzinfo=None) + dt.timedelta(days=10)
    if (target.month, target.day) == (2, 29):
        target += dt.timedelta(days=1)
    parsed = parse_log_lines([vllm_prefix(target) + golden_message(0)], source="t")
    assert parsed.intervals[0].time == target.replace(year=target.year - 1, tzinfo=UTC).timestamp()
    # Today's lines keep the current year.
    today = dt.datetime.now(UTC).replace(microsecond=0, tzinfo=None) - dt.timedelta(hours=1)
    parsed = parse_log_lines([vllm_prefix(today) + golden_message(0)], source="t")
    assert parsed.intervals[0].time == today.replace(tzinfo=UTC).timestamp()


def test_colours_container_timestamps_and_json_formatter():
    grey, reset, green = "\x1b[90m", "\x1b[0m", "\x1b[32m"
    # ColoredFormatter: cyan process, green level, grey time and file.
    coloured = (
        f"\x1b[0;36m(APIServer pid=7)\x1b[0;0m {green}INFO{reset} {grey}11-30 05:21:37{reset} "
        f"{grey}[metrics.py:157]{reset} " + golden_message(0)
    )
    kubectl = "2025-11-30T05:21:47.123456789Z " + vllm_prefix(dt.datetime(2025, 11, 30, 5, 21, 47)) + golden_message(1)
    as_json = json.dumps(
        {"asctime": "2025-11-30 05:21:57,001", "levelname": "INFO", "name": "vllm", "process": 7, "message": golden_message(0)}
    )
    stats_as_json = json.dumps(
        {"asctime": "2025-11-30 05:21:57,000", "levelname": "INFO", "name": "vllm", "process": 7,
         "message": engine_stats("000")})
    parsed = parse_log_lines([coloured, kubectl, stats_as_json, as_json], year=2025, source="t")
    base = dt.datetime(2025, 11, 30, 5, 21, 37, tzinfo=UTC).timestamp()
    assert [round(i.time - base, 3) for i in parsed.intervals] == [0.0, 10.123, 20.001]
    assert [i.counts.drafts for i in parsed.intervals] == [666, 1814, 666]
    # the JSON formatter's stats line gives its process's next interval its load (190.3 tok/s × 10 s)
    assert [i.running for i in parsed.intervals] == [None, None, 4]
    assert parsed.intervals[2].generation_tokens == pytest.approx(1903.0)


def test_time_zone_and_default_time():
    when = dt.datetime(2025, 6, 1, 12, 0, 0)
    tz = dt.timezone(dt.timedelta(hours=9))
    lines = [vllm_prefix(when) + golden_message(0), golden_message(1)]
    parsed = parse_log_lines(lines, year=2025, source="t", tz=tz, default_time=123.0)
    assert parsed.intervals[0].time == when.replace(tzinfo=tz).timestamp()
    assert parsed.intervals[1].time == 123.0


def test_malformed_and_inconsistent_lines_are_skipped():
    good = golden_message(0)
    lines = [
        good[: len(good) // 2],  # cut off mid-line
        good.replace("Avg Draft acceptance rate: 74.7%", "Avg Draft acceptance rate: 80.0%"),  # not A/T
        good.replace("Per-position acceptance rate: 0.901", "Per-position acceptance rate: 0.999"),  # no D fits
        vllm_prefix(dt.datetime(2025, 2, 28)).replace("02-28", "02-29") + good,  # no 29 February in 2025
        good,
    ]
    parsed = parse_log_lines(lines, year=2025, source="t")
    assert len(parsed.intervals) == 1
    assert parsed.intervals[0].line_number == 5
    assert parsed.skipped == {"malformed SpecDecoding line": 1, "inconsistent SpecDecoding line": 2, "bad timestamp": 1}


def test_acceptance_near_zero_leaves_drafts_unknown():
    line = vllm_message(5000, 15000, [0, 0, 0])
    assert "Mean acceptance length: 1.00" in line
    (interval,) = parse_log_lines([line], year=2025, source="t").intervals
    assert interval.counts is None
    assert interval.drafts_candidates == 0
    assert interval.drafts_range is None
    assert (interval.accepted_tokens, interval.draft_tokens, interval.gamma) == (0, 15000, 3)
    # AL 1.00 with a non-zero rate: drafts unknown all the same (docs/REFERENCE.md), A and T exact.
    line = vllm_message(100_000, 300_000, [300, 100, 0])
    (interval,) = parse_log_lines([line], year=2025, source="t").intervals
    assert interval.counts is None
    assert interval.drafts_candidates == 0
    assert (interval.accepted_tokens, interval.draft_tokens) == (400, 300_000)


# --- errors ------------------------------------------------------------------------------------


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(LogLinesError, match="missing.log") as err:
        read_log_file(tmp_path / "missing.log", year=2025)
    assert "\n" not in str(err.value)
    other = tmp_path / "other.log"
    other.write_text("INFO starting\nWARNING something\n")
    with pytest.raises(LogLinesError, match=r"other\.log: no SpecDecoding metrics line in 2 lines") as err:
        read_log_file(other, year=2025)
    assert "\n" not in str(err.value)


def test_gzipped_log_is_read(tmp_path):
    path = tmp_path / "vllm.log.gz"
    with gzip.open(path, "wt") as f:
        f.write(vllm_prefix(dt.datetime(2025, 11, 30, 5, 21, 37)) + golden_message(0) + "\n")
    assert read_log_file(path, year=2025).intervals[0].counts.drafts == 666


# --- the recovery, against vLLM's own rounding -------------------------------------------------


@st.composite
def true_counts(draw, max_drafts: int = 1_000_000, max_gamma: int = 8):
    gamma = draw(st.integers(1, max_gamma))
    drafts = draw(st.integers(1, max_drafts))
    # Non-increasing A_k ≤ D: survival of a front-loaded or a flat drafter alike.
    per_position = sorted(
        (draw(st.integers(0, drafts)) for _ in range(gamma)), reverse=True
    )
    accepted = sum(per_position)
    # Drafted tokens: at least the accepted ones and at most γ per draft (shorter drafts
    # under dynamic γ).
    draft_tokens = draw(st.integers(max(accepted, 1), gamma * drafts))
    return drafts, draft_tokens, per_position


def printed(message: str) -> tuple:
    m = parse_spec_decoding_message(message)
    return (m.mean_acceptance_length, m.accepted_tokens, m.draft_tokens, m.per_position_rates, m.draft_acceptance_rate_percent)


@settings(max_examples=150, deadline=None)
@given(true_counts())
def test_recovered_drafts_are_the_truth_or_among_the_candidates(truth):
    drafts, draft_tokens, per_position = truth
    message = vllm_message(drafts, draft_tokens, per_position)
    (interval,) = parse_log_lines([message], year=2025, source="t").intervals
    assert interval.accepted_tokens == sum(per_position)
    assert interval.draft_tokens == draft_tokens
    if interval.counts is None:
        # Only when the printed AL is 1.00: nothing else bounds D from above.
        assert parse_spec_decoding_message(message).mean_acceptance_length == "1.00"
        return
    candidates = consistent_drafts(parse_spec_decoding_message(message))
    assert drafts in set(candidates.tolist())
    assert interval.drafts_candidates == len(candidates)
    assert interval.drafts_range == (candidates[0], candidates[-1])
    c = interval.counts
    if interval.drafts_candidates == 1:
        assert c.drafts == drafts
        if drafts < 1000:  # 3-digit rates then admit one A_k each
            assert list(c.accepted_per_position) == per_position
    # Whatever D was picked, its counts print exactly as vLLM printed the truth.
    assert list(c.accepted_per_position) == sorted(c.accepted_per_position, reverse=True)
    assert printed(vllm_message(int(c.drafts), int(c.draft_tokens), list(c.accepted_per_position))) == printed(message)


def brute_force_drafts(message: str, scan_to: int) -> list[int]:
    """Every D ≤ scan_to consistent with the printed fields, by formatting every candidate
    A_k and searching all non-increasing vectors (independent of the module's bounds)."""
    m = parse_spec_decoding_message(message)
    found = []
    for d in range(1, scan_to + 1):
        if d * m.gamma < m.draft_tokens or f"{1 + m.accepted_tokens / d:.2f}" != m.mean_acceptance_length:
            continue
        choices = [[c for c in range(d + 1) if f"{c / d:.3f}" == r] for r in m.per_position_rates]
        if any(
            sum(v) == m.accepted_tokens and all(x >= y for x, y in zip(v, v[1:]))
            for v in itertools.product(*choices)
        ):
            found.append(d)
    return found


@settings(max_examples=25, deadline=None)
@given(true_counts(max_drafts=40, max_gamma=3))
def test_candidate_set_equals_brute_force_on_small_counts(truth):
    drafts, draft_tokens, per_position = truth
    assume(per_position[0] * 4 >= drafts)  # AL well above 1 keeps the brute-force scan short
    message = vllm_message(drafts, draft_tokens, per_position)
    # AL − 1 ≥ 0.25 − 0.005 rounding: no consistent D lies beyond 5 D.
    expected = brute_force_drafts(message, scan_to=5 * drafts + 10)
    assert consistent_drafts(parse_spec_decoding_message(message)).tolist() == expected


def test_ties_are_rounded_as_vllm_rounds_them():
    # 1 + 1/8 = 1.125 prints as 1.12 (half to even on the exact binary value) and 1/16 =
    # 0.0625 as 0.062: the boundaries must be decided by formatting, not by ≥ 0.005.
    message = vllm_message(16, 16, [1, 1])
    assert "Mean acceptance length: 1.12" in message
    assert "0.062, 0.062" in message
    candidates = consistent_drafts(parse_spec_decoding_message(message)).tolist()
    assert 16 in candidates
    assert candidates == brute_force_drafts(message, scan_to=100)
    # D = 8000 with A = 1000 gives AL exactly 1.125, which prints 1.12: a log printing 1.13
    # (truth D = 7999) excludes it, though its rate 0.125 fits.
    assert "1.12" in vllm_message(8000, 8000, [1000])
    assert "1.13" in vllm_message(7999, 7999, [1000])
    candidates = consistent_drafts(parse_spec_decoding_message(vllm_message(7999, 7999, [1000]))).tolist()
    assert 7999 in candidates
    assert 8000 not in candidates
