"""What a name the user gives (a route's, a deployment's) may hold: nothing that breaks the
one-line output every command promises. Light on purpose: the config reads it before
anything heavier is imported (``specdec dashboard`` checks the config while its server boots)."""

from __future__ import annotations


def has_control_characters(name: str) -> bool:
    """A name with a newline, tab or other control character."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in name)
