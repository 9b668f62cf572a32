"""Writes store.db, a specdec store of schema version 6 with four hours of scrapes, and
expected.json, what windows over it said. Run once, with the specdec of commit 60c8bf0
(schema 8, the last before compressed chunks), from that checkout's root:

    PYTHONPATH=.:tests/data/store-v6 python tests/data/store-v6/make_store.py OUT_DIR

The file is written at schema 8 through Store.write_cycle, then taken back to version 6 as
a version-6 specdec left it (no engine_totals table, no ingested.prompt_tokens column).
tests/test_acceptance_store_upgrade.py opens a copy with today's specdec and reads the
same windows."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np

from acceptance import plugin_series as ps
from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts, StepShape
from acceptance.store import IngestedRow, Store
from acceptance.windows import route_window
from summary import window_summary

T0, STEP, N = 1_800_000_007.3, 15.0, 960  # 4 h at 15 s
A, B = "http://127.0.0.1:9/a", "http://127.0.0.1:9/b"
RETENTION_S = 5400.0  # raw rows of the first 2.5 h go; their rollups stay


def main(out: Path) -> None:
    rng = np.random.default_rng(6)
    path = out / "store.db"
    path.unlink(missing_ok=True)
    a0 = np.zeros(3 + 3)  # engine 0 of A: [D, T, A, A_1..A_γ], γ 3 then 5
    a1 = np.zeros(3 + 3 + 3)  # engine 1 of A: γ 3 with per-position drafts
    its = np.zeros(4)
    itl = np.zeros(2)
    plugin = {"1": np.zeros(7), "33-64": np.zeros(7)}  # [D, A_1..A_3, R_1..R_3]
    steps = 0.0
    created0 = 1.0
    with Store.open(path, retention_s=RETENTION_S) as store:
        store.ingest("r", "log", [IngestedRow(T0, SpecCounts(100, 300, 150, (80, 50, 20)), "000|a", True)])
        for i in range(N):
            t = T0 + STEP * i + float(rng.uniform(0, 0.05))
            if i == 480:  # γ 3 → 5: a new engine process, counters from zero
                a0, created0 = np.zeros(3 + 5), created0 + 1
            g0 = len(a0) - 3
            d = float(rng.poisson(40))
            acc = np.cumprod(rng.uniform(0.6, 0.95, g0))[::-1].cumsum()[::-1] / g0 * d
            acc = np.floor(np.minimum(acc, d))
            a0 += np.concatenate([[d, g0 * d, acc.sum()], acc])
            d1 = float(rng.poisson(20))
            acc1 = np.floor(d1 * np.array([0.8, 0.55, 0.3]))
            a1 += np.concatenate([[d1, 3 * d1, acc1.sum()], acc1, [d1, d1, d1]])
            its += rng.integers(0, 30, 4).cumsum()
            itl += [float(rng.uniform(0.5, 1.5)), float(rng.integers(50, 150))]
            for lab in plugin:
                dd = float(rng.integers(5, 30))
                accp = np.sort(rng.integers(0, int(dd) + 1, 3))[::-1].astype(float)
                plugin[lab] = plugin[lab] + np.concatenate([[dd], accp, np.full(3, dd)])
            steps += float(rng.integers(1, 9))
            shape0 = StepShape(dict(zip((1.0, 8.0, 64.0, float("inf")), its.tolist())), float(rng.integers(1, 9)),
                               float(itl[0]), float(itl[1]))
            e0 = EngineSnapshot("m", "0", SpecCounts(a0[0], a0[1], a0[2], tuple(a0[3:])), created0, shape0)
            off = 500 <= i < 520  # engine 1's speculation switched off for 5 minutes
            e1 = EngineSnapshot("m", "1", None if off else SpecCounts(a1[0], a1[1], a1[2], tuple(a1[3:6]),
                                                                       tuple(a1[6:])), 1.0,
                                StepShape(num_requests_running=float(rng.integers(0, 5))))
            by_batch = {lab: SpecCounts(v[0], float(v[4:].sum()), float(v[1:4].sum()), tuple(v[1:4]), tuple(v[4:]))
                        for lab, v in plugin.items()}
            pc = ps.PluginEngineCounts("m", "0", by_batch, (ps.StepCount(ps.UNIFORM_VERIFY, 16, True, steps),))
            eb = EngineSnapshot("m", "0", pc.total(), 1.0, StepShape(num_requests_running=8.0), pc)
            failing = 300 <= i < 306  # target A unreachable for 90 s
            results = [ScrapeResult(A, t, False, (), "connection refused") if failing else ScrapeResult(A, t, True, (e0, e1)),
                       ScrapeResult(B, t, True, (eb,))]
            store.write_cycle(results)
        t_end = t
        windows = {"all": (T0 - 1, t_end), "edges": (T0 + 2000.5, T0 + 7000.3),
                   "last hour": (t_end - 3600, t_end), "rolled up": (T0 + 3600, T0 + 7200 + 1800),
                   "recent edges": (t_end - 5000.7, t_end - 1234.5)}
        expected = {name: {"window": [lo, hi], "A": window_summary(route_window(store, [A], lo, hi)),
                           "B": window_summary(route_window(store, [B], lo, hi))}
                    for name, (lo, hi) in windows.items()}
        last_b = pc.total()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE engine_totals")  # a version-8 table
    conn.execute("ALTER TABLE ingested DROP COLUMN prompt_tokens")  # a version-7 column
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()
    (out / "expected.json").write_text(json.dumps({
        "t_end": t_end, "windows": expected,
        "last_counts_B": [last_b.drafts, last_b.draft_tokens, last_b.accepted_tokens,
                          list(last_b.accepted_per_position)],
    }, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
