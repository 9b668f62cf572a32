"""One collector per store: an OS lock on ``<store>.writer`` held for as long as it runs.

A collector keeps the current chunk rows of every engine in memory and extends them cycle
by cycle; two collectors on one store each extend their own copy, so the store ends with
doubled deltas, lost intervals or a UNIQUE-constraint failure (measured: the window's drafts
1.99× the engines' own increase). The second collector therefore refuses at start, naming
the store and the running one. The lock is ``flock`` on a file beside the store: the kernel
releases it when its holder exits, however it dies (a SIGKILL never leaves the store locked).
Readers (tune-gamma, the dashboard) and ``ingest`` (one transaction a file, no chunk state
held between them) take no lock. Limits: a store on a network filesystem whose ``flock`` is
local to each host is not protected across hosts.

The lock file is named by the store's path (symlinks resolved), so another name of the same
file — a hard link — would find another lock beside it; and SQLite names a database's WAL and
its index by the path too, so two names of one file are two WALs over one file, each blind to
the other's writes (corrupting it once both checkpoint). A store file with more than one name
is therefore refused to every writer (``acceptance.store.disk.hard_linked``), in one line.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from pathlib import Path

from ..errors import InputError
from .disk import hard_linked, read_only_place
from .records import StoreError


class StoreBusyError(InputError):
    """Another process holds the store's writer lock (one line naming both)."""


class WriterLock:
    """The held lock (``release`` or the process's exit frees it)."""

    def __init__(self, fd: int, path: Path):
        self._fd: int | None = fd
        self.path = path

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def claim_writer(store_path: Path, role: str) -> WriterLock:
    """The writer lock of ``store_path`` for this process (``role``: what it is, for the other's
    message), or StoreBusyError naming the process that holds it."""
    # the file the path names, not the name typed: a symlink or another spelling of one store
    # must meet the same lock
    path = Path(f"{Path(store_path).resolve()}.writer")
    refused = hard_linked(Path(store_path))
    if refused is not None:
        raise StoreError(refused)
    read_only = read_only_place(Path(store_path))
    if read_only is not None:
        raise StoreError(f"store {store_path} is read-only ({read_only}): {role} writes to it; point --db "
                         f"(or [store] path) at a writable place")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise StoreError(f"store {store_path} cannot be written ({e.strerror} creating {path}): {role} "
                             f"writes to it; point --db (or [store] path) at a writable place") from None
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        from .records import StoreFullError

        raise StoreFullError(store_path, f"{e.strerror} creating {path}", "nothing was collected; "
                             "what it holds is kept") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise StoreBusyError(f"{store_path}: another writer is collecting into it ({holder}); one collector per store "
                             f"— stop that one, or collect into another --db") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "role": role, "since": time.time()}).encode())
    except OSError:
        pass  # a full disk: the lock holds without its note, and opening the store says the disk is full
    return WriterLock(fd, path)


def _holder(fd: int) -> str:
    """Who holds the lock, from what it wrote (it may not have written yet)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(info["since"])))
        return f"{info['role']}, pid {info['pid']}, since {since}"
    except (ValueError, KeyError, TypeError, OSError):
        return "a process that has not said which yet"
