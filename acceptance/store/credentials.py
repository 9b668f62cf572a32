"""The version-10 upgrade of a store file: no credential in what it holds. Earlier versions
kept a target's URL as written, so a userinfo password or a credential-named query value
(acceptance.target_access) sat in ``targets.url`` and in the messages that name the target
(``targets.last_error``, ``failures.error``, ``events.detail``). Each is rewritten with the
target's shown URL and its secrets as ***; a target whose shown URL another row already has
(two URLs that differed only in a token) keeps its own row, named ``<shown>#<id>``.

It runs inside the migration's transaction (acceptance.store.schema), which then, when
anything was rewritten, checkpoints the WAL and VACUUMs: the old text must not stay behind in
free pages or WAL frames."""

from __future__ import annotations

import sqlite3

from ..target_access import TargetAccess, shown_url

# (table, its key's columns, the text column) of the messages that may name a target
_MESSAGES = (("targets", ("id",), "last_error"), ("failures", ("target_id", "time"), "error"),
             ("events", ("id",), "detail"))


def scrub_credentials(conn: sqlite3.Connection) -> int:
    """Rewrite every stored URL with its shown one and every message naming it; returns how many
    targets held a secret (0: nothing was rewritten)."""
    rows = conn.execute("SELECT id, url FROM targets").fetchall()
    taken = {url for _, url in rows}
    secret = [(tid, url) for tid, url in rows if shown_url(url) != url]
    for tid, url in secret:
        shown = shown_url(url)
        name = shown if shown not in taken else f"{shown}#{tid}"
        taken.add(name)
        conn.execute("UPDATE targets SET url = ? WHERE id = ?", (name, tid))
        _scrub_messages(conn, TargetAccess(url))
    return len(secret)


def _scrub_messages(conn: sqlite3.Connection, access: TargetAccess) -> None:
    for table, key, column in _MESSAGES:
        where = " AND ".join(f"{k} = ?" for k in key)
        for needle in {access.url, *access.secrets()}:
            found = conn.execute(f"SELECT {column}, {', '.join(key)} FROM {table} WHERE instr({column}, ?) > 0",
                                 (needle,)).fetchall()
            conn.executemany(f"UPDATE {table} SET {column} = ? WHERE {where}",
                             [(access.scrub(text), *k) for text, *k in found])
