"""Behaviour pinned before the store and the simulator move into rooms of their own.

Two fingerprints, compared with tests/data/characterisation.json, which was written by the
code before the move and is never rewritten to make a test pass:
- the simulator's /metrics pages of built-in scenarios for one seed at several moments;
- the store's contents after a scripted history — the "demo" scenario's restart and γ
  change, speculation switched off and on, a target down and up — scraped every 15 s with
  retention on, rollups rewritten meanwhile: every table's rows, in value order.

    python tests/test_characterisation.py --write   # only when the behaviour is meant to change
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

from acceptance.counts import ScrapeResult
from acceptance.parse import parse_metrics_page
from acceptance.sim import Fleet, build_scenario
from acceptance.store import Store

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


def store_contents() -> dict[str, str]:
    """sha256 of each table's rows (all columns, sorted) after the scripted history."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        with Store.open(path, retention_s=1800.0) as store:
            _scripted_history(store)
        conn = sqlite3.connect(path)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            out = {}
            for table in tables:
                rows = sorted(repr(r) for r in conn.execute(f"SELECT * FROM {table}"))
                out[table] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
            return out
        finally:
            conn.close()


def _golden() -> dict:
    assert GOLDEN.exists(), f"{GOLDEN} is missing: it is written once, by the code before the move"
    return json.loads(GOLDEN.read_text())


def test_the_simulators_pages_are_as_pinned():
    assert sim_pages() == _golden()["sim_pages"]


def test_the_stores_contents_after_a_scripted_history_are_as_pinned():
    assert store_contents() == _golden()["store_tables"]


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit(__doc__)
    GOLDEN.write_text(json.dumps({"sim_pages": sim_pages(), "store_tables": store_contents()}, indent=1,
                                 sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
