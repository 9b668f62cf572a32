"""A store written by an older specdec opens in place under today's schema: the file in
tests/data/store-v6 was written at schema 8 by commit 60c8bf0's write path (four hours of
two targets: a γ change, a restart, speculation switched off and on, a failing target,
per-position drafts, iteration tokens, plugin counters, retention), taken back to version 6,
and its windows recorded then (expected.json). Today's specdec must read the same windows,
exactly, from a file a fraction of the size, and go on from each engine's baseline."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts
from acceptance.store import SCHEMA_VERSION, Store
from acceptance.windows import route_window

DATA = Path(__file__).parent / "data" / "store-v6"
sys.path.insert(0, str(DATA))
from summary import window_summary  # noqa: E402  (the fixture's own reader, shared with make_store.py)

A, B = "http://127.0.0.1:9/a", "http://127.0.0.1:9/b"
EXPECTED = json.loads((DATA / "expected.json").read_text())


@pytest.fixture
def version_6_store(tmp_path) -> Path:
    path = tmp_path / "store.db"
    path.write_bytes(gzip.decompress((DATA / "store.db.gz").read_bytes()))
    return path


def as_json(x):
    return json.loads(json.dumps(x))


def test_a_version_6_store_reads_the_same_windows_after_migrating_in_place(version_6_store):
    before = version_6_store.stat().st_size
    with Store.open(version_6_store) as store:
        assert store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
            SCHEMA_VERSION)
        for name, w in EXPECTED["windows"].items():
            lo, hi = w["window"]
            for target in ("A", "B"):
                got = as_json(window_summary(route_window(store, [A if target == "A" else B], lo, hi)))
                assert got == w[target], f"window {name}, target {target}"
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "samples" not in tables and "plugin_samples" not in tables
        assert store.conn.execute("SELECT COUNT(*) FROM engine_last").fetchone()[0] == 3
        # every closed hour is one row per key; only the newest hour stays in 5-min rows
        open_hours = store.conn.execute("SELECT DISTINCT CAST(chunk / 3600 AS INTEGER) FROM interval_chunks "
                                        "WHERE sealed = 0").fetchall()
        assert open_hours == [(int(EXPECTED["t_end"] // 3600),)]
        assert store.conn.execute("SELECT route, key, prompt_tokens, temperature FROM ingested").fetchall() == [
            ("r", "000|a", None, None)]
    assert version_6_store.stat().st_size < before / 2  # the history went, the rest is compressed (VACUUM)


def test_a_migrated_store_goes_on_from_each_engines_baseline(version_6_store):
    d, t, a, per = EXPECTED["last_counts_B"]
    t_end = EXPECTED["t_end"]
    nxt = SpecCounts(d + 7, t + 21, a + 9, (per[0] + 5, per[1] + 3, per[2] + 1))
    with Store.open(version_6_store) as store:
        store.write_cycle([ScrapeResult(B, t_end + 15, True, (EngineSnapshot("m", "0", nxt, 1.0),))])
        w = route_window(store, [B], t_end, t_end + 15)
        assert [s.total.drafts for s in w.segments] == [7.0]
        assert list(w.segments[0].total.accepted_per_position) == [5.0, 3.0, 1.0]


def test_bulk_loaded_history_reads_as_the_same_history_written_cycle_by_cycle(tmp_path):
    # bulk_load_history writes sealed hours directly; write_cycle writes 5-min rows and seals
    # each hour once its engine has moved past it: both must read alike, to the count
    import numpy as np

    from acceptance.counts import StepShape

    rng = np.random.default_rng(3)
    n, t0 = 3 * 240 + 17, 1_800_000_007.3  # past three hour boundaries
    times = t0 + 15.0 * np.arange(n) + rng.uniform(0, 0.2, n)
    inc = np.column_stack([d := rng.poisson(30, n), 3 * d, np.zeros(n), rng.binomial(d, 0.8), rng.binomial(d, 0.5),
                           rng.binomial(d, 0.2)]).astype(float)
    inc[:, 2] = inc[:, 3:].sum(axis=1)
    cum = np.cumsum(inc, axis=0)
    running = rng.integers(0, 9, n).astype(float)
    itl_sum, itl_count = np.cumsum(rng.uniform(0.1, 1.0, n)), np.cumsum(rng.integers(10, 90, n)).astype(float)
    with Store.open(tmp_path / "bulk.db") as bulk, Store.open(tmp_path / "cycles.db") as cycles:
        bulk.bulk_load_history(A, "m", "0", times, cum, running=running, itl_sum=itl_sum, itl_count=itl_count)
        for i in range(n):
            c = cum[i]
            cycles.write_cycle([ScrapeResult(A, float(times[i]), True, (EngineSnapshot(
                "m", "0", SpecCounts(c[0], c[1], c[2], tuple(c[3:])), None,
                StepShape({}, float(running[i]), float(itl_sum[i]), float(itl_count[i]))),))])
        def rows(store):
            return store.conn.execute("SELECT sealed, COUNT(*) FROM interval_chunks GROUP BY sealed").fetchall()

        # three closed hours, one sealed row each, and the first sample's (a baseline: its batch
        # size only, under no spec key); the open hour: 17 samples in its first 5-min row
        assert rows(cycles) == rows(bulk) == [(0, 1), (1, 4)]
        for lo, hi in ((t0 - 1, float(times[-1])), (t0 + 1000.5, t0 + 9000.25), (t0 + 3599.0, t0 + 3601.0),
                       (float(times[-1]) - 900, float(times[-1]))):
            assert as_json(window_summary(route_window(bulk, [A], lo, hi))) == as_json(
                window_summary(route_window(cycles, [A], lo, hi))), (lo, hi)
