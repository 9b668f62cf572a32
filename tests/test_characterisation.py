"""Behaviour pinned before the store and the simulator move into rooms of their own.

Fingerprints compared with tests/data/characterisation.json, which was written by the code
before the move and is never rewritten to make a test pass:
- the simulator's /metrics pages of built-in scenarios for one seed at several moments;
- the store's contents after a scripted history — the "demo" scenario's restart and γ
  change, speculation switched off and on, a target down and up — scraped every 15 s with
  retention on, rollups rewritten meanwhile: every table's rows, in value order
  (``store_tables``), for the tables whose format schema 9 kept;
- what schema 9 re-encoded (chunk rows compressed, closed hours sealed, the sample history
  reduced to each engine's newest), entry by entry (``store_entries``): every scrape
  interval's and rollup bucket's values, however they are chunked, and each engine's newest
  sample. It was written from the file the version-8 code (commit 60c8bf0) made of the same
  history, opened (so migrated) by the version-9 code: the same entries from the old writer.

    python tests/test_characterisation.py --write   # only when the behaviour is meant to change
    python tests/test_characterisation.py --entries-of FILE   # store_entries of another store file
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

import numpy as np

from acceptance.counts import ScrapeResult
from acceptance.parse import parse_metrics_page
from acceptance.sim import Fleet, build_scenario
from acceptance.store import Store
from acceptance.store.codecs import decode_interval_row, decode_spec_rollup, decode_step_rollup

GOLDEN = Path(__file__).resolve().parent / "data" / "characterisation.json"
SEED = 3
PAGE_SCENARIOS = ("demo", "restart", "gamma-change", "spec-off", "drift", "heterogeneous")
PAGE_TIMES_S = (60.0, 600.0, 1500.0, 2700.0)


def sim_pages() -> dict[str, str]:
    """sha256 of every target's page of each scenario at PAGE_TIMES_S."""
    out = {}
    for name in PAGE_SCENARIOS:
        with Fleet(build_scenario(name, seed=SEED)) as fleet:
            for t in PAGE_TIMES_S:
                fleet.advance(t - fleet.elapsed_s)
                for target in fleet.targets:
                    out[f"{name}/{target}@{t:g}"] = hashlib.sha256(fleet.page(target)).hexdigest()
    return out


def _scripted_history(store: Store) -> None:
    """90 simulated minutes of the demo fleet at 15 s, with speculation off and on and a
    target that fails for two minutes."""
    with Fleet(build_scenario("demo", seed=SEED)) as fleet:
        fleet.schedule(50 * 60, "spec_off", "open-a")
        fleet.schedule(60 * 60, "spec_on", "open-a")
        down = {int(70 * 60 / 15) + k for k in range(8)}
        for cycle in range(int(90 * 60 / 15) + 1):
            if cycle:
                fleet.advance(15.0)
            results = []
            for target in fleet.targets:
                if target == "structured-b" and cycle in down:
                    results.append(ScrapeResult(target, fleet.now, False, (), "connection refused"))
                    continue
                engines = parse_metrics_page(fleet.page(target).decode(), source=target)
                results.append(ScrapeResult(target, fleet.now, True, tuple(engines)))
            store.write_cycle(results)


# tables schema 9 re-encoded or replaced: store_entries fingerprints what they hold
_REENCODED = {"interval_chunks", "spec_rollups", "step_rollups", "samples", "plugin_samples", "engine_last", "meta"}


def _digest(rows) -> str:
    return hashlib.sha256("\n".join(sorted(repr(r) for r in rows)).encode()).hexdigest()


def store_contents() -> tuple[dict[str, str], dict[str, str]]:
    """(sha256 of each table's rows (all columns, sorted), store_entries) after the scripted history."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        with Store.open(path, retention_s=1800.0) as store:
            _scripted_history(store)
        conn = sqlite3.connect(path)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            return {t: _digest(conn.execute(f"SELECT * FROM {t}")) for t in tables}, store_entries(conn)
        finally:
            conn.close()


def store_entries(conn: sqlite3.Connection) -> dict[str, str]:
    """sha256 of what the re-encoded tables hold, entry by entry, whatever the rows' chunking."""
    width = {lid: len(json.loads(cols)) for lid, cols in conn.execute("SELECT id, columns FROM layouts")}
    intervals = []
    for eid, seg, lay, it_lay, *cols in conn.execute(
            "SELECT engine_id, seg_id, layout_id, it_layout_id, n, code, flags, first_start, data FROM interval_chunks"):
        a = decode_interval_row(tuple(cols), 1 + width.get(lay, 0) + width.get(it_lay, 0))
        intervals += [(eid, seg, lay, it_lay, *row) for row in zip(  # counts as floats, whatever their stored type
            a.times.tolist(), a.cycles.tolist(), a.starts.tolist(), a.itl.tolist(), a.counts.astype(float).tolist())]
    spec = []
    for eid, level, chunk, seg, lay, *cols in conn.execute(
            "SELECT engine_id, level, chunk, seg_id, layout_id, n, code, buckets, ends, counts FROM spec_rollups"):
        buckets, ends, counts = decode_spec_rollup(chunk, level, tuple(cols))  # as [bucket, intervals, ends, delta]
        spec += [(eid, level, chunk, seg, lay, *row) for row in np.column_stack(
            [buckets, counts[:, 0], ends, counts[:, 1:]]).tolist()]
    step, mix = [], []
    for eid, level, chunk, it_lay, *cols in conn.execute(
            "SELECT engine_id, level, chunk, it_layout_id, n, buckets, itl, it_code, it_delta, mix_code, batch_mix "
            "FROM step_rollups"):
        buckets, itl, it, triples = decode_step_rollup(chunk, level, tuple(cols))
        m = np.column_stack([buckets, itl] + ([it] if it is not None else []))  # [bucket, ITL sum, count, it delta]
        step += [(eid, level, chunk, it_lay, *row) for row in m.tolist()]
        mix += [(eid, level, chunk, it_lay, *row) for row in triples.tolist()]
    return {"intervals": _digest(intervals), "spec_rollups": _digest(spec), "step_rollups": _digest(step),
            "batch_mix": _digest(mix), "engine_last": _digest(conn.execute("SELECT * FROM engine_last")),
            "meta": _digest(conn.execute("SELECT * FROM meta WHERE key != 'schema_version'"))}


def _golden() -> dict:
    assert GOLDEN.exists(), f"{GOLDEN} is missing: it is written once, by the code before the move"
    return json.loads(GOLDEN.read_text())


def test_the_simulators_pages_are_as_pinned():
    assert sim_pages() == _golden()["sim_pages"]


def test_the_stores_contents_after_a_scripted_history_are_as_pinned():
    tables, entries = store_contents()
    pinned = _golden()["store_tables"]
    assert {t: h for t, h in tables.items() if t not in _REENCODED} == {
        t: h for t, h in pinned.items() if t not in _REENCODED}
    assert entries == _golden()["store_entries"]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--entries-of"] and len(sys.argv) == 3:
        with Store.open(sys.argv[2]):  # brought to the current schema
            pass
        with sqlite3.connect(sys.argv[2]) as c:
            print(json.dumps(store_entries(c), indent=1, sort_keys=True))
        raise SystemExit(0)
    if sys.argv[1:] != ["--write"]:
        raise SystemExit(__doc__)
    tables, entries = store_contents()
    GOLDEN.write_text(json.dumps({"sim_pages": sim_pages(), "store_tables": tables, "store_entries": entries},
                                 indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
