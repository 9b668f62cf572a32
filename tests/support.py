"""Helpers several test files share (imported as ``support``, beside ``dashboard_fixtures``)."""

from __future__ import annotations

import os
import shutil
import socket

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
