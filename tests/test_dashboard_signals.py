"""`specdec dashboard` takes its Streamlit server down with it.

The real command, started as a process on a free loopback port against a small store:
``kill -TERM`` or ``kill -INT`` on it ends it and its server within 5 s (nothing listens on
the port any more), and a server that dies on its own ends the command with its status.
Linux only (the server's pid is read from /proc).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dashboard_fixtures import build_drift_store
from support import free_port, wait_until_streamlit_serves

ROOT = Path(__file__).resolve().parents[1]
START_S = 60.0  # Streamlit's first start on a loaded 2-core machine
STOP_S = 5.0  # the promise
SPECDEC = Path(sys.executable).with_name("specdec")

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads children from /proc (Linux)"),
    pytest.mark.timeout(180),
]


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    return build_drift_store(tmp_path_factory.mktemp("signals"))


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/PID/task/*/children)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def alive(pid: int) -> bool:
    """Running (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def servers_on(port: int) -> list[int]:
    """Running dashboard servers (``python -m dashboard.server``) given ``port``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"dashboard.server" in argv and str(port).encode() in argv and alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _sigint_as_from_a_terminal() -> None:
    # A test run started in the background of a non-interactive shell (`make test &`)
    # inherits SIGINT ignored, and the command rightly keeps an ignored SIGINT ignored
    # (dashboard_launch.serve): start it as a shell in the foreground would.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_dashboard(config: Path, port: int, log: Path) -> subprocess.Popen:
    """`specdec dashboard` in a session of its own (so the finally can kill the group)."""
    cmd = [str(SPECDEC)] if SPECDEC.exists() else [sys.executable, "-m", "specdec.cli"]
    cmd += ["dashboard", "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_sigint_as_from_a_terminal)


def wait_serving(proc: subprocess.Popen, port: int, log: Path) -> int:
    """Wait until the port answers HTTP; returns the Streamlit server's pid."""
    wait_until_streamlit_serves(proc, f"http://127.0.0.1:{port}", log, START_S)
    kids = children(proc.pid)
    assert len(kids) == 1, f"expected one Streamlit child of {proc.pid}, found {kids}"
    return kids[0]


def wait_gone(proc: subprocess.Popen, server: int, port: int, within_s: float) -> dict:
    """Poll until the command has exited, its server is gone and the port is closed."""
    deadline = time.monotonic() + within_s
    while True:
        state = {"exited": proc.poll() is not None, "server_gone": not alive(server), "port_closed": not listening(port)}
        if all(state.values()) or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def kill_all(proc: subprocess.Popen, pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_dashboard_and_its_server(config, tmp_path, signum):
    port, log = free_port(), tmp_path / "dashboard.log"
    proc = start_dashboard(config, port, log)
    server: list[int] = []
    try:
        server.append(wait_serving(proc, port, log))
        os.kill(proc.pid, signum)  # the command's pid only, as `kill -TERM PID` does
        state = wait_gone(proc, server[0], port, STOP_S)
        assert all(state.values()), f"{STOP_S:.0f} s after {signum.name}: {state}; log: " \
                                    f"{log.read_text(errors='replace')[-2000:]}"
        assert proc.returncode == 128 + signum
    finally:
        kill_all(proc, server)


def test_server_dying_ends_the_dashboard_with_its_status(config, tmp_path):
    port, log = free_port(), tmp_path / "dashboard.log"
    proc = start_dashboard(config, port, log)
    server: list[int] = []
    try:
        server.append(wait_serving(proc, port, log))
        os.kill(server[0], signal.SIGKILL)
        state = wait_gone(proc, server[0], port, STOP_S)
        assert all(state.values()), f"{STOP_S:.0f} s after the server's SIGKILL: {state}"
        assert proc.returncode == 128 + signal.SIGKILL  # a shell's status for a killed child, not -9
    finally:
        kill_all(proc, server)


def test_a_bad_config_stops_the_server_started_beside_its_check(tmp_path):
    # The server is started while the config is read (its start is the cold page's critical
    # path): a config that cannot be read must still end with exit 2, one line, no server.
    bad = tmp_path / "bad.toml"
    bad.write_text("[colect]\ninterval = '15s'\n")
    port, log = free_port(), tmp_path / "dashboard.log"
    proc = start_dashboard(bad, port, log)
    try:
        assert proc.wait(30) == 2
        assert servers_on(port) == [], "the server started beside the check still runs"
        assert not listening(port)
        lines = log.read_text().strip().splitlines()
        assert len(lines) == 1 and "colect" in lines[0], lines
    finally:
        kill_all(proc, [])
