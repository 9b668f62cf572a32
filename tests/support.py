"""Helpers several test files share (imported as ``support``, beside ``dashboard_fixtures``)."""

from __future__ import annotations

import os
import shutil
import socket
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(name: str) -> str | None:
    """``name`` on PATH, else /usr/bin/``name`` (Debian's packages), else None."""
    return shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)


def skip_or_fail(message: str, *, in_ci: str | None = None) -> None:
    """A test needs something that is missing: it fails in CI (CI set; ``in_ci`` if given),
    where `make test` installs it, and skips elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(in_ci or message)
    pytest.skip(message)


def wait_until_streamlit_serves(proc, url: str, log: Path, timeout_s: float) -> None:
    """Poll ``url``'s Streamlit health endpoint until it says ok; fail (with the server's
    log) when ``proc`` exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"streamlit did not serve: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.3)
