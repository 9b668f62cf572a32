"""The SQLite store: reopen, bad files, atomic cycles, SIGKILL safety, retention."""

from __future__ import annotations

import os
from collections import Counter
import signal
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts
from acceptance.store import SCHEMA_VERSION, IngestedRow, Store, StoreError
from support import as_version_8
from acceptance.windows import route_window


def snap(d, gamma=3, created=1.0, label="0", per_position_drafts=False):
    a = tuple(float(max(d - 3 * k, 0)) for k in range(gamma))
    dtpp = tuple(float(d) for _ in range(gamma)) if per_position_drafts else None
    return EngineSnapshot("m", label, SpecCounts(float(d), float(gamma * d), float(sum(a)), a, dtpp), created)


def ok(target, t, *snaps):
    return ScrapeResult(target, t, True, tuple(snaps))


def drafts(store, targets=("x",), s=0.0, e=1e9):
    return sum(seg.total.drafts for seg in route_window(store, list(targets), s, e).segments)


def test_reopen_continues_deltas_from_the_stored_baseline(tmp_path):
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        store.write_cycle([ok("x", 10.0, snap(5))])
        store.write_cycle([ok("x", 20.0, snap(12))])
    with Store.open(p) as store:
        assert store.latest_time() == 20.0
        store.write_cycle([ok("x", 30.0, snap(20))])
        assert drafts(store) == 15  # 7 + 8: the baseline survived the reopen
        store.write_cycle([ok("x", 40.0, snap(3, created=2.0))])  # a restart: new counters, a new _created
        assert drafts(store) == 18
        assert [e.kind for e in store.events(["x"], 0, 100)] == ["restart"]
        store.write_cycle([ok("x", 50.0, snap(1, created=2.0))])  # down with the same _created: refused
        assert drafts(store) == 18
        assert [e.kind for e in store.events(["x"], 0, 100)] == ["restart", "inconsistent"]


def test_not_a_store(tmp_path):
    p = tmp_path / "notes.db"
    p.write_text("hello, this is not sqlite\n" * 10)
    with pytest.raises(StoreError, match="not a specdec store") as ei:
        Store.open(p)
    assert str(p) in str(ei.value)
    assert "\n" not in str(ei.value)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(StoreError, match="not a specdec store"):
        Store.open(other)


def test_truncated_store(tmp_path):
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        for i in range(200):
            store.write_cycle([ok(f"t{j}", 10.0 + i, snap(i, label=str(j))) for j in range(5)])
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = p.stat().st_size
    data = p.read_bytes()[: size // 2]
    p.write_bytes(data)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"s.db{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreError, match="corrupt") as ei:
        Store.open(p)
    assert str(p) in str(ei.value)
    # what is wrong, not quick_check's header (the message ended at "*** in database main ***")
    assert not str(ei.value).rstrip().endswith("***") and "\n" not in str(ei.value)


def test_a_bit_flipped_store_says_what_quick_check_found(tmp_path):
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        for i in range(200):
            store.write_cycle([ok(f"t{j}", 10.0 + i, snap(i, label=str(j))) for j in range(5)])
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(p.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for at in range(3 * page + 8, 3 * page + 40):  # the cell pointers of the third page
        data[at] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="corrupt") as ei:
        Store.open(p)
    said = str(ei.value)
    assert "*** in database main ***" not in said and "\n" not in said
    before = p.read_bytes()
    assert before == bytes(data)  # refused, left unchanged


def _last_wal_frame_of_page_1(wal: bytes, page_size: int) -> bytes | None:
    """The newest copy of page 1 in a WAL file (32-byte header, frames of a 24-byte header
    whose first 4 bytes are the page number, then the page)."""
    newest, at = None, 32
    while at + 24 + page_size <= len(wal):
        if int.from_bytes(wal[at:at + 4], "big") == 1:
            newest = wal[at + 24:at + 24 + page_size]
        at += 24 + page_size
    return newest


def test_a_store_mid_checkpoint_is_sound_and_opens(tmp_path):
    """A WAL store whose main file is shorter than its header says — a checkpoint writes page
    1 first, and a writer killed there leaves the other pages in the WAL — is sound: SQLite
    reads them from the WAL. It opens, with every count, and is never called corrupt."""
    p = tmp_path / "s.db"
    writer = Store.open(p)
    writer.conn.execute("PRAGMA wal_autocheckpoint = 0")  # every page stays in the WAL
    for i in range(200):
        writer.write_cycle([ok(f"t{j}", 10.0 + i, snap(i, label=str(j))) for j in range(5)])
    keep = tmp_path / "copy"
    keep.mkdir()
    for suffix in ("", "-wal"):
        (keep / f"s.db{suffix}").write_bytes((tmp_path / f"s.db{suffix}").read_bytes())  # as a SIGKILL leaves it
    writer.close()
    copy = keep / "s.db"
    main = bytearray(copy.read_bytes())
    page_size = int.from_bytes(main[16:18], "big")
    page_1 = _last_wal_frame_of_page_1((keep / "s.db-wal").read_bytes(), page_size)
    assert page_1 is not None
    main[:page_size] = page_1  # the checkpoint's first write
    copy.write_bytes(bytes(main))
    pages = int.from_bytes(page_1[28:32], "big")
    assert copy.stat().st_size < pages * page_size  # what the old check called "truncated"
    with Store.open(copy) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM cycles").fetchone()[0] == 200


def test_future_schema_version(tmp_path):
    p = tmp_path / "s.db"
    Store.open(p).close()
    c = sqlite3.connect(p)
    c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="newer"):
        Store.open(p)


def test_bad_cycle_rolls_back_that_cycle_only(tmp_path):
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        store.write_cycle([ok("x", 10.0, snap(5)), ok("y", 10.0, snap(1))])
        store.write_cycle([ok("x", 20.0, snap(9)), ok("y", 20.0, snap(2))])
        # y's sample fails after x's rows and a new target were written in the cycle's transaction
        sample = store._engine_sample

        def failing_on_y(eid, *args):
            if store._engine_refs[eid].target == "y":
                raise ValueError("y: a failure in the middle of the cycle")
            return sample(eid, *args)

        store._engine_sample = failing_on_y
        with pytest.raises(ValueError, match="y"):
            store.write_cycle([ok("x", 30.0, snap(30)), ok("z", 30.0, snap(1)), ok("y", 30.0, snap(3))])
        del store._engine_sample
        with pytest.raises(ValueError, match="x"):  # refused before the transaction: an impossible count
            store.write_cycle([ok("x", 30.0, EngineSnapshot("m", "0", SpecCounts(-1.0, 0, 0, (0.0,))))])
        assert store.latest_time() == 20.0
        assert drafts(store, ["x", "y", "z"]) == 4 + 1
        assert store.targets_status(["z"])[0].last_ok_time is None
        # the in-memory baseline was rolled back too: the next delta is against t = 20
        store.write_cycle([ok("x", 40.0, snap(30)), ok("y", 40.0, snap(3))])
        assert drafts(store, ["x"]) == 4 + 21
    with Store.open(p) as store:
        assert drafts(store, ["x", "y"]) == 4 + 21 + 1 + 1


def test_failures_status_and_gap(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        store.write_cycle([ok("x", 10.0, snap(5))])
        store.write_cycle([ScrapeResult("x", 20.0, False, error="timeout after 5 s: http://x")])
        store.write_cycle([ScrapeResult("x", 30.0, False, error="connection refused: http://x")])
        st = store.targets_status(["x", "never"])
        assert st[0].failing_since == 20.0
        assert st[0].last_ok_time == 10.0
        assert st[0].last_error == "connection refused: http://x"
        assert st[1].last_ok_time is None
        assert st[1].failing_since is None
        store.write_cycle([ok("x", 40.0, snap(17))])
        assert store.targets_status(["x"])[0].failing_since is None
        w = route_window(store, ["x"], 0, 100)
        iv = w.segments[0].intervals
        assert iv.start.tolist() == [10.0]
        assert iv.end.tolist() == [40.0]  # one delta covers the gap
        assert w.segments[0].total.drafts == 12
        assert [e.kind for e in w.events] == ["target_down", "target_up"]
        assert [f[0] for f in store.failures("x", 0, 100)] == [20.0, 30.0]


def test_gamma_change_is_a_restart_even_without_a_visible_drop(tmp_path):
    """vLLM fixes γ at engine start: a new position label set is a new engine, whose
    counters (no _created in multiprocess mode) may already have passed the old ones."""
    with Store.open(tmp_path / "s.db") as store:
        store.write_cycle([ok("x", 10.0, snap(5, gamma=3))])
        store.write_cycle([ok("x", 20.0, snap(9, gamma=3))])
        store.write_cycle([ok("x", 30.0, snap(14, gamma=5))])  # no drop, same _created
        store.write_cycle([ok("x", 40.0, snap(20, gamma=5))])
        w = route_window(store, ["x"], 0, 100)
        assert [(s.gamma, s.total.drafts) for s in w.segments] == [(3, 4.0), (5, 20.0)]
        assert [e.kind for e in w.events] == ["restart", "gamma_change"]


def test_per_position_draft_columns_are_stored_and_rolled_up(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        store.write_cycle([ok("x", 10.0, snap(5, per_position_drafts=True))])
        store.write_cycle([ok("x", 20.0, snap(9, per_position_drafts=True))])
        (interval,), _ = store.read_intervals([1], 0.0, 30.0)
        assert store.layout_columns(interval.layout_id)[-1] == "draft_tokens_per_position:2"
        assert interval.end.tolist() == [20.0]
        assert interval.delta[0, -3:].tolist() == [4.0, 4.0, 4.0]
        (rollup,), _ = store.read_rollups([1], 300, 0.0, 300.0)
        assert rollup.delta.tolist() == interval.delta.tolist()


def test_retention_keeps_rollups_and_the_baseline(tmp_path):
    with Store.open(tmp_path / "s.db", retention_s=3600.0) as store:
        for i in range(1, 8 * 240 + 1):  # 8 h at 15 s
            store.write_cycle([ok("x", 15.0 * i, snap(i)), ok("y", 15.0 * i, snap(2 * i))] if i < 100 else
                              [ok("x", 15.0 * i, snap(i))])
        now = 15.0 * 8 * 240
        store.apply_retention(now)
        spec, _ = store.read_intervals([1, 2], 0.0, now)
        assert min(e.end.min() for e in spec) >= now - 3600.0
        assert store.raw_from() == now - 3600.0
        # y stopped reporting long ago: its newest sample stays as its baseline
        assert store.conn.execute("SELECT time FROM engine_last WHERE engine_id = 2").fetchall() == [(15.0 * 99,)]
        # rollups outlive raw rows: a bucket-aligned window over old data still reads
        assert drafts(store, ["x"], 18000.0, 21600.0) == 240
        # rollups older than 4 x retention are gone too
        assert drafts(store, ["x"], 3600.0, 7200.0) == 0
        # recent windows are exact
        assert drafts(store, ["x"], now - 1799.5, now) == 120  # scrapes at now - 1785 .. now
        store.write_cycle([ok("y", now + 15, snap(2 * 99 + 10))])
        assert drafts(store, ["y"], now, now + 20) == 10


WRITER = textwrap.dedent("""
    import sys
    from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts
    from acceptance.store import Store
    store = Store.open(sys.argv[1])
    i = 0
    while True:
        i += 1
        t = 15.0 * i
        results = [ScrapeResult(f"http://t{j}", t, True, tuple(
            EngineSnapshot("m", str(e), SpecCounts(float(i), 3.0 * i, float(i), (float(i), 0.0, 0.0)), 1.0)
            for e in range(2))) for j in range(40)]
        store.write_cycle(results)
        print(t, flush=True)
""")


def test_sigkill_mid_cycle_loses_at_most_that_cycle(tmp_path):
    p = tmp_path / "s.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(p)], stdout=subprocess.PIPE, text=True)
    committed = []
    try:
        while len(committed) < 60:
            line = proc.stdout.readline()
            assert line, "writer died"
            committed.append(float(line))
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    rest = proc.stdout.read().split()
    committed += [float(x) for x in rest]
    with Store.open(p) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        cycles = {r[0] for r in store.conn.execute("SELECT time FROM cycles")}
        assert set(committed) <= cycles
        assert len(cycles - set(committed)) <= 1  # committed but killed before it printed
        last = max(cycles)
        spec, _ = store.read_intervals([eid for eid, _ in store.engines_of(f"http://t{j}" for j in range(40))],
                                       0.0, last)
        per_cycle = Counter(np.concatenate([e.key for e in spec]).tolist())
        assert all(per_cycle[t] == 80 for t in cycles if t > min(cycles))  # every stored cycle is complete
        assert set(store.conn.execute("SELECT time FROM engine_last")) == {(last,)}
        # and the store keeps working from its baseline
        i = last / 15 + 1
        store.write_cycle([ScrapeResult("http://t0", last + 15, True, (
            EngineSnapshot("m", "0", SpecCounts(i, 3.0 * i, i, (i, 0.0, 0.0)), 1.0),))])
        w = route_window(store, ["http://t0"], last, last + 15)
        assert w.segments[0].total.drafts == 1


def test_a_reader_opened_before_a_gamma_change_reads_the_new_segment(tmp_path):
    """A collector commits a new γ segment (and a new engine) after a reader opened the
    store: the reader's next window meets their ids and reads them, no KeyError."""
    p = tmp_path / "s.db"
    writer = Store.open(p)
    for i in range(3):
        writer.write_cycle([ok("x", 10.0 + i, snap(10 * (i + 1)))])
    reader = Store.open(p)
    before = route_window(reader, ["x"], 0.0, 1e9)
    assert [s.gamma for s in before.segments] == [3]
    writer.write_cycle([ok("x", 20.0, snap(5, gamma=5, created=2.0), snap(7, label="1"))])  # γ 3 → 5, a new engine
    writer.write_cycle([ok("x", 21.0, snap(15, gamma=5, created=2.0), snap(17, label="1"))])
    after = route_window(reader, ["x"], 0.0, 1e9)
    assert {s.gamma for s in after.segments} == {3, 5}
    # the restarted engine's counters count from its new _created: 5, then 10 more
    assert sum(s.total.drafts for s in after.segments if s.gamma == 5) == 15
    reader.close()
    writer.close()


def test_reads_inside_one_snapshot_do_not_see_a_commit_made_meanwhile(tmp_path):
    p = tmp_path / "s.db"
    writer = Store.open(p)
    writer.write_cycle([ok("x", 10.0, snap(10))])
    writer.write_cycle([ok("x", 11.0, snap(20))])
    with Store.open(p) as reader, reader.read_snapshot():
        first = drafts(reader)
        writer.write_cycle([ok("x", 12.0, snap(35))])
        assert drafts(reader) == first == 10  # the same state inside the snapshot
    with Store.open(p) as reader:
        assert drafts(reader) == 25
    writer.close()


_V6_COLUMNS = ("running", "interval_s", "generation_tokens", "stream")
_V7_COLUMNS = ("prompt_tokens",)


def test_a_version_5_store_gains_the_logged_load_and_reading_the_log_again_fills_it_in(tmp_path):
    from acceptance.store import LoggedLoad

    counts = SpecCounts(100, 300, 150, (80, 50, 20))
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        store.ingest("r", "log", [IngestedRow(1.8e9, counts, "000|1.8e9|150|300", True)])
    as_version_8(p)  # schema 8's tables, then what came before them
    conn = sqlite3.connect(p)
    for column in (*_V6_COLUMNS, *_V7_COLUMNS):
        conn.execute(f"ALTER TABLE ingested DROP COLUMN {column}")
    conn.execute("DROP TABLE engine_totals")  # a version-8 table
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Store.open(p) as store:
        assert store.ingested_load("r", "log", 3, 0.0, 2e9)["running"].size == 0  # kept before: no load
        load = LoggedLoad(6, 10.0, 400.0, "EngineCore_DP0 pid=9|000")
        again = store.ingest("r", "log", [IngestedRow(1.8e9, counts, "000|1.8e9|150|300", True, load=load)])
        assert (again.added, again.duplicates) == (0, 1)
        got = store.ingested_load("r", "log", 3, 0.0, 2e9)
        assert got["running"].tolist() == [6] and got["generation_tokens"].tolist() == [400.0]
        assert got["accepted_tokens"].tolist() == [150.0] and got["stream"].tolist() == ["EngineCore_DP0 pid=9|000"]
        store.ingest("r", "log", [IngestedRow(1.8e9, counts, "000|1.8e9|150|300", True,
                                              load=LoggedLoad(9, 10.0, 1.0, "other"))])
        assert store.ingested_load("r", "log", 3, 0.0, 2e9)["running"].tolist() == [6]  # the first kept


def test_a_version_6_store_gains_prompt_tokens_and_reading_the_file_again_fills_them_in(tmp_path):
    counts = SpecCounts(10, 30, 12, (6, 4, 2))
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        store.ingest("r", "per-request", [IngestedRow(1.8e9, counts, "req-1", mean_itl_s=0.01, decode_tokens=40)])
    as_version_8(p)  # schema 8's tables, then what came before them
    conn = sqlite3.connect(p)
    conn.execute("ALTER TABLE ingested DROP COLUMN prompt_tokens")
    conn.execute("DROP TABLE engine_totals")  # a version-8 table
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Store.open(p) as store:
        itl, decode, prompt = store.ingested_request_timing("r", "per-request", 3, 0.0, 2e9)
        assert itl.tolist() == [0.01] and decode.tolist() == [40.0] and np.isnan(prompt).all()  # kept, no prompt
        again = store.ingest("r", "per-request", [IngestedRow(1.8e9, counts, "req-1", mean_itl_s=0.01,
                                                              decode_tokens=40, prompt_tokens=812)])
        assert (again.added, again.duplicates) == (0, 1)
        assert store.ingested_request_timing("r", "per-request", 3, 0.0, 2e9)[2].tolist() == [812.0]
        store.ingest("r", "per-request", [IngestedRow(1.8e9, counts, "req-1", prompt_tokens=5)])
        assert store.ingested_request_timing("r", "per-request", 3, 0.0, 2e9)[2].tolist() == [812.0]  # the first kept


def test_a_version_10_store_gains_the_temperature_and_reading_the_file_again_fills_it_in(tmp_path):
    counts = SpecCounts(10, 30, 12, (6, 4, 2))
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        store.ingest("r", "per-request", [IngestedRow(1.8e9, counts, "req-1", mean_itl_s=0.01, decode_tokens=40,
                                                      prompt_tokens=812)])
    conn = sqlite3.connect(p)  # the file as specdec wrote it at schema 10: no temperature column
    conn.execute("ALTER TABLE ingested DROP COLUMN temperature")
    conn.execute("UPDATE meta SET value = '10' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Store.open(p) as store:
        assert store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "11"
        assert np.isnan(store.ingested_request_temperatures("r", "per-request", 3, 0.0, 2e9)).all()  # kept, none
        assert store.ingested_request_timing("r", "per-request", 3, 0.0, 2e9)[2].tolist() == [812.0]
        again = store.ingest("r", "per-request", [IngestedRow(1.8e9, counts, "req-1", mean_itl_s=0.01,
                                                              decode_tokens=40, temperature=0.0)])
        assert (again.added, again.duplicates) == (0, 1)
        assert store.ingested_request_temperatures("r", "per-request", 3, 0.0, 2e9).tolist() == [0.0]
        store.ingest("r", "per-request", [IngestedRow(1.8e9, counts, "req-1", temperature=1.0)])
        assert store.ingested_request_temperatures("r", "per-request", 3, 0.0, 2e9).tolist() == [0.0]  # first kept
        store.ingest("r", "per-request", [IngestedRow(1.9e9, counts, "req-2", temperature=0.7),
                                          IngestedRow(1.7e9, counts, "req-0")])
        # in the rows' order (time), NaN where a line gave none
        got = store.ingested_request_temperatures("r", "per-request", 3, 0.0, 2e9)
        assert np.isnan(got[0]) and got[1:].tolist() == [0.0, 0.7]


def test_schema_4_line_keys_become_text_keys_keeping_identical_lines_apart(tmp_path):
    import json as _json

    from acceptance.per_request import parse_per_request_lines

    spec = {"acceptance_histogram": [1, 2], "num_spec_steps": 3, "num_accepted_draft_tokens": 2,
            "num_draft_tokens": 3, "num_spec_tokens": 1}
    lines = [_json.dumps(spec)] * 3
    records = parse_per_request_lines(lines, default_route="r", default_time=1.8e9, source="t").records
    p = tmp_path / "s.db"
    with Store.open(p) as store:
        store.ingest("r", "per-request", [IngestedRow(1.8e9, rec.counts, f"{i + 1}:{rec.line_key[:16]}")
                                          for i, rec in enumerate(records)])  # the old keys
    as_version_8(p)  # schema 8's tables, then what came before them
    conn = sqlite3.connect(p)
    for column in ("decode_tokens", "steps", *_V6_COLUMNS, *_V7_COLUMNS):
        conn.execute(f"ALTER TABLE ingested DROP COLUMN {column}")
    conn.execute("DROP TABLE engine_totals")  # a version-8 table
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Store.open(p) as store:
        again = store.ingest("r", "per-request", [IngestedRow(1.8e9, rec.counts, rec.line_key) for rec in records])
        assert (again.added, again.duplicates) == (0, 3)  # the same file: nothing new


def _lengths_snapshot(prompts: float, prompt_sum: float, created: float) -> EngineSnapshot:
    from acceptance.counts import StepShape

    lengths = {"vllm:request_prompt_tokens_sum": prompt_sum, "vllm:request_prompt_tokens_count": prompts,
               "vllm:request_generation_tokens_sum": 10.0 * prompts, "vllm:request_generation_tokens_count": prompts}
    return EngineSnapshot("m", "0", SpecCounts(prompts, 3 * prompts, prompts, (prompts, 0, 0)), created,
                          StepShape(num_requests_running=1, request_lengths=lengths))


def test_engine_totals_keep_a_row_every_5_minutes_and_the_newest_and_sum_each_life(tmp_path):
    from acceptance.store.totals import TOTALS_EVERY_S

    p = tmp_path / "s.db"
    t0 = 1.8e9
    with Store.open(p) as store:
        for i in range(41):  # 10 minutes at 15 s: a request of prompt 100 a scrape
            store.write_cycle([ScrapeResult("x", t0 + 15 * i, True, (_lengths_snapshot(i, 100.0 * i, t0 - 100),))])
        times = [t for (t,) in store.conn.execute("SELECT time FROM engine_totals ORDER BY time")]
        assert times == [t0, t0 + TOTALS_EVERY_S, t0 + 600]  # kept every 5 minutes, and the newest
        assert store.engine_totals_increase([1], t0, t0 + 600)["prompt_count"] == 40
        assert store.engine_totals_increase([1], t0 + 1, t0 + 600)["prompt_sum"] == 100.0 * 20  # from the 5-minute row
        # a restart (a new _created) starts a life of its own: the old one counts to its newest row
        store.write_cycle([ScrapeResult("x", t0 + 615, True, (_lengths_snapshot(2, 200.0, t0 + 610),))])
        store.write_cycle([ScrapeResult("x", t0 + 630, True, (_lengths_snapshot(5, 500.0, t0 + 610),))])
        store.write_cycle([ScrapeResult("x", t0 + 945, True, (_lengths_snapshot(9, 900.0, t0 + 610),))])
        got = store.engine_totals_increase([1], t0, t0 + 1000)
        assert got["prompt_count"] == 40 + (9 - 2) and got["prompt_sum"] == 4000 + 700
        assert got["output_sum"] == 10.0 * got["prompt_count"]
        assert store.engine_totals_increase([1], t0 + 601, t0 + 614) is None  # no life holds two rows there
    from acceptance.counts import StepShape

    plain = EngineSnapshot("m", "1", SpecCounts(1, 3, 1, (1, 0, 0)), 1.0,  # every page's iteration histogram only
                           StepShape(iteration_tokens={1.0: 0, float("inf"): 5}, engine_cost={
                               "vllm:iteration_tokens_total_sum": 20.0}))
    with Store.open(tmp_path / "plain.db") as store:
        store.write_cycle([ScrapeResult("y", t0, True, (plain,))])
        assert store.conn.execute("SELECT count(*) FROM engine_totals").fetchone()[0] == 0  # nothing to keep
