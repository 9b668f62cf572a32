"""The cost model's one error for the user's input (a [deployment] key, a curve, a cost
table): a one-line message naming the input. The commands report it as bad input, exit 2."""

from __future__ import annotations

from acceptance.errors import InputError


class ModelInputError(InputError):
    """Bad input to the cost model; the message is one line naming the input."""
