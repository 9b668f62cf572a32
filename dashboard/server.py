"""The dashboard's server: ``python -m dashboard.server run APP [streamlit options] -- [app options]``.

Streamlit's own command line (``streamlit run …``, the same options and signals), with one
addition: dashboard.warm's thread, which as soon as the server listens imports what the
first page draws with and reads the default view (window 1h ending at the newest scrape)
into the cache the sessions share. The first visitor's page then finds its route table
computed, instead of importing and reading behind an empty page with "Stop".
"""

from __future__ import annotations

import socket
import sys
import threading

DEFAULT_PORT = 8501  # Streamlit's


def option(argv: list[str], name: str) -> str | None:
    """A Streamlit option's value in ``argv`` (``--name V`` or ``--name=V``), before ``--``."""
    args = argv[:argv.index("--")] if "--" in argv else argv
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def server_listening(host: str, port: int) -> bool:
    """The server accepts connections on (host, port) — a wildcard address on loopback.
    Not Streamlit's runtime state: that turns ready before the HTTP server listens, and a
    warm-up started then delays the server's start."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def start_warm_up(argv: list[str]) -> threading.Thread:
    """dashboard.warm's thread for ``argv`` (Streamlit's: ``run APP [options] -- [app options]``)."""
    from dashboard import data, warm

    args = data.app_args(argv[argv.index("--") + 1:] if "--" in argv else [])
    host = option(argv, "--server.address") or "127.0.0.1"
    port = int(option(argv, "--server.port") or DEFAULT_PORT)
    return warm.start(args.config, args.db, ready=lambda: server_listening(host, port))


def main() -> None:
    start_warm_up(sys.argv[1:])
    from streamlit.web.cli import main as streamlit_main

    streamlit_main(prog_name="streamlit")


if __name__ == "__main__":
    main()
