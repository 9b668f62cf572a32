"""A full disk told apart from a damaged store, and transactions that end without hiding why.

SQLite reports a full disk two ways: SQLITE_FULL ("database or disk is full") when a page
write gets ENOSPC, and SQLITE_IOERR ("disk I/O error") when growing the WAL index (-shm)
fails — which is what opening a WAL store on a full filesystem meets first. Neither is
damage: the file's integrity_check is ok, and calling it corrupt invites the user to
delete it. So an I/O or cannot-open error is a full disk when the store's directory has
less than ``LOW_SPACE_BYTES`` (or no inode) left for this user, by os.statvfs; SQLITE_FULL
always is (it is also what ``PRAGMA max_page_count`` raises, a cap the tests use).

After SQLITE_FULL SQLite may have rolled the transaction back already, so a plain ROLLBACK
then fails ("cannot rollback - no transaction is active") and would replace the error
that explains everything: ``rollback`` ends only a transaction that is still open.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .records import StoreFullError

SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN = 10, 13, 14
LOW_SPACE_BYTES = 1 << 20  # the WAL index alone takes 32 KiB; under a MiB a store cannot grow


def free_space(directory: Path) -> tuple[int, int | None] | None:
    """Bytes and inodes this process may still use in ``directory`` (None: unknown). Root
    may use the blocks reserved for it, so its figure is the free one, not the available."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    blocks = st.f_bfree if root else st.f_bavail
    inodes = (st.f_ffree if root else st.f_favail) if st.f_files else None  # 0 files: not counted
    return blocks * st.f_frsize, inodes


def out_of_space(e: BaseException, path: Path) -> str | None:
    """Why ``e`` (from SQLite, on the store at ``path``) is a full disk, or None when it is not."""
    if not isinstance(e, sqlite3.Error):
        return None
    code = (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if code == SQLITE_FULL or (not code and "database or disk is full" in msg):
        return msg
    if code not in (SQLITE_IOERR, SQLITE_CANTOPEN) and not (not code and "disk I/O error" in msg):
        return None
    free = free_space(path.parent)
    if free is None:
        return None
    nbytes, inodes = free
    if inodes == 0:
        return f"{msg}; no inode left on {path.parent}'s filesystem"
    if nbytes < LOW_SPACE_BYTES:
        return f"{msg}; {nbytes} bytes free in {path.parent}"
    return None


def full_error(e: BaseException, path: Path, consequence: str, *, stored: bool = False) -> StoreFullError | None:
    """The StoreFullError to raise for ``e`` (``consequence``: what was and was not stored;
    ``stored``: the scrape cycle itself was), or None when ``e`` is not a full disk."""
    why = out_of_space(e, path)
    return None if why is None else StoreFullError(path, why, consequence, stored=stored)


def rollback(conn: sqlite3.Connection) -> None:
    """End the open transaction, if SQLite has not ended it already; a failing ROLLBACK is
    dropped so that the error being handled is the one raised."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection rolls back on close; the caller's error is the one to tell


def read_only_place(path: Path) -> str | None:
    """Why the store at ``path`` (or the folder it would be created in) cannot be written — on a
    read-only file system, or a file this process may not write — else None."""
    where = path if path.exists() else path.parent
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return "on a read-only file system"
    except OSError:
        return None  # _check_file and SQLite say what is wrong with the path
    if path.exists() and not os.access(path, os.W_OK):
        return "a read-only file"
    return None


def hard_linked(path: Path) -> str | None:
    """Why a writer must not open the store at ``path``: the file has more than one name (hard
    links). SQLite keeps a database's WAL and its index by name, so each name is a WAL of its
    own over one file, blind to the other's writes; a collector through either name would
    lose or corrupt what the other wrote. None when it has one name (a symlink is one name)."""
    try:
        names = os.stat(path).st_nlink
    except OSError:
        return None
    if names <= 1:
        return None
    return (f"store {path} has {names} names (hard links): SQLite keeps a database's WAL by name, so each name "
            f"writes a WAL of its own over one file, blind to the others; keep one name (a symlink is fine) and "
            f"point every command at it")
