"""The one base class of every error that is the user's input, whatever the layer raising it.

A config, an option, a page, a file, a curve or a store that the tool cannot use raises an
``InputError`` (or a subclass naming the input's kind) whose message is one line naming the
input; the commands report it as bad input, exit status 2. Anything else that escapes — a
numpy ValueError, a bug — is an internal error, exit status 1 (specdec.cli).
"""

from __future__ import annotations


class InputError(ValueError):
    """Input the user can fix; the message is one line naming it."""
