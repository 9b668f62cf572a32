"""`specdec dashboard [--config FILE] [--db PATH] [--port N] [--host ADDR]`.

Starts ``python -m dashboard.server run dashboard/app.py`` with this interpreter — Streamlit's
``streamlit run``, which also warms the first page as soon as it listens (dashboard.warm) —
bound to 127.0.0.1 unless --host says otherwise, headless (no browser is opened on the
server); the app reads --config and --db after streamlit's ``--``. The server is a child process that
stops with the command (SIGTERM, SIGINT) and whose exit ends it (see `serve`).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

from acceptance.errors import InputError
from .args import add_store_args, bounded_int

# The app is a file Streamlit runs, not a module this imports: the dashboard package
# stays downstream of specdec (tests/test_import_graph.py).
APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501
STOP_GRACE_S = 2.0  # the server's time to stop on SIGTERM before SIGKILL (all within 5 s, with room for a loaded machine)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("dashboard", help="the Streamlit dashboard over the store (127.0.0.1 by default)",
                              description=__doc__.split("\n\n")[0].replace("`", ""))
    add_store_args(p)
    p.add_argument("--port", type=bounded_int(1, 65535), default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind (default {DEFAULT_HOST}; 0.0.0.0 exposes it to the network)")
    p.set_defaults(fn=run)
    return p


def streamlit_command(args) -> list[str]:
    """The command line `run` executes (a list, no shell)."""
    cmd = [sys.executable, "-m", "dashboard.server", "run", str(APP),
           "--server.address", args.host, "--server.port", str(args.port), "--server.headless", "true",
           "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "viewer",  # no Deploy button or developer menu: the page is for reading
           "--"]
    if args.config:
        cmd += ["--config", str(Path(args.config).resolve())]
    if args.db:
        cmd += ["--db", str(Path(args.db).resolve())]
    return cmd


def check_host(args) -> None:
    if not args.host or any(c.isspace() for c in args.host):
        raise InputError(f"--host: expected an address such as 127.0.0.1, got {args.host!r}")


def check_port(args) -> None:
    """The server could listen on --host:--port: a port in use (another dashboard) is the
    user's to change, not a server that prints its address and then dies of it. Bound with
    SO_REUSEADDR, as Tornado binds, so a port a stopped dashboard left in TIME_WAIT passes."""
    import socket

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((args.host, args.port))
        except OSError as e:
            raise InputError(f"--port {args.port}: cannot listen on {args.host}: {e.strerror or e} "
                             f"(another server on it? pick another --port)") from None


def check_inputs(args) -> None:
    """Refuse what the app could never read (InputError, one line), before the server serves."""
    check_host(args)
    _check_store_inputs(args)


def _check_store_inputs(args) -> None:
    """The config and --db: read while the server boots (``run``)."""
    from specdec.config import load_config

    config = load_config(args.config)  # ConfigError (an InputError) names the file and the key
    if args.db:
        db = Path(args.db)
        if db.is_dir():
            raise InputError(f"--db {db}: is a directory, expected a store file")
        if not db.exists() and not db.parent.exists():
            raise InputError(f"--db {db}: directory {db.parent} does not exist")
    del config


def run(args) -> int:
    check_host(args)
    check_port(args)

    def checked() -> None:
        _check_store_inputs(args)
        url_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        print(f"specdec dashboard: http://{url_host}:{args.port}/ (Ctrl-C stops it)", file=sys.stderr)

    # The server starts first and the inputs are checked while it boots (reading the config
    # imports what the first page then finds loaded): a bad input stops it before it listens.
    return serve(streamlit_command(args), while_starting=checked)


class _Stop(Exception):
    """SIGTERM or SIGINT arrived while the server ran."""


def serve(cmd: list[str], grace_s: float = STOP_GRACE_S, while_starting=lambda: None) -> int:
    """Run ``cmd`` (the server) as a child until it exits, and return its status (128 + N for
    signal N, as a shell says); ``while_starting()`` runs once the child is started, and
    what it raises stops the child and propagates. SIGTERM's default action would end this
    process alone and leave the server serving on its port, so SIGTERM and SIGINT here stop
    the server (terminate, ``grace_s``, then kill) and return 128 + the signal."""
    def stop(signum, _frame):
        raise _Stop(signum)

    previous, child = {}, None
    try:
        for s in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(s) is not signal.SIG_IGN:  # `cmd &` ignores SIGINT: keep that
                previous[s] = signal.signal(s, stop)
        child = subprocess.Popen(cmd)
        while_starting()
        code = child.wait()
        return 128 - code if code < 0 else code
    except (_Stop, KeyboardInterrupt) as e:
        return 128 + (e.args[0] if isinstance(e, _Stop) else signal.SIGINT)
    finally:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)  # a second signal must not cut the clean-up short
        if child is not None:
            _stop(child, grace_s)
        for s, handler in previous.items():
            signal.signal(s, handler)


def _stop(child: subprocess.Popen, grace_s: float) -> None:
    """Terminate ``child``; kill it if it still runs after ``grace_s``."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
