"""The roofline against the public step-time tables (benchmarks/roofline_public.py): the
results file and docs/BENCHMARKS.md's table are what the script computes from the data file
(no stale numbers), every cell carries its public source, every table left out says why,
and nothing is fitted."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import roofline_public as rp  # noqa: E402

SOURCE = re.compile(r"^[\w.-]+/[\w.-]+ #\d+")  # owner/repo #number, as the shared file writes it


@pytest.fixture(scope="module")
def result() -> dict:
    return rp.compute(rp.load_data())


def test_the_results_file_is_what_the_script_computes(result):
    stored = json.loads(rp.RESULTS.read_text(encoding="utf-8"))
    assert stored == result


def test_the_design_doc_holds_the_generated_table(result):
    doc = (ROOT / "docs/BENCHMARKS.md").read_text(encoding="utf-8")
    assert rp.markdown_table(result) in doc


def test_every_cell_has_a_public_source(result):
    data = rp.load_data()
    for table in data["tables"]:
        assert SOURCE.match(table["source"]), table["source"]
        assert table["figure"] and table["thread_notes"] and table["anchor_source"]
        assert table["bytes_per_weight"]["source"]
        config = json.loads((ROOT / table["config"]).read_text(encoding="utf-8"))
        assert config["_source"].startswith("https://github.com/")
    for gpu in data["gpus"].values():
        assert gpu["hbm_source"] and gpu["flops_source"]
    cells = [c for t in result["tables"] for c in t["cells"]]
    assert cells and all(SOURCE.match(c["source"]) for c in cells)


def test_every_table_not_tested_says_why(result):
    assert result["not_tested"]
    for entry in result["not_tested"]:
        assert entry["source"] and entry["figure"]
        assert len(entry["reason"]) > 40, entry


def test_nothing_is_fitted_and_the_anchor_is_not_a_cell(result):
    assert result["fitted"] is False
    for table in result["tables"]:
        assert all((c["batch_size"], c["tokens_per_request"]) != (1, 1) for c in table["cells"])


def test_error_is_modelled_against_measured(result):
    for c in (c for t in result["tables"] for c in t["cells"]):
        measured = c["measured_ratio"] if isinstance(c["measured_ratio"], list) else [c["measured_ratio"]]
        errors = c["error"] if isinstance(c["error"], list) else [c["error"]]
        assert sorted(errors) == pytest.approx(sorted((c["modelled_ratio"] - m) / m for m in measured))
        assert c["over_max_error"] == (min(abs(e) for e in errors) > rp.MAX_ERROR)


def test_each_cell_says_where_compute_would_bind(result):
    # Apple publishes no FLOP/s: the memory roof is used, and each cell records the FLOP/s
    # below which the compute term would have taken over
    for c in (c for t in result["tables"] for c in t["cells"]):
        assert 0 < c["compute_binds_below_flops"] < float("inf")
