"""The JSON conventions of every document the tool prints: the one NaN → null rule.

numpy scalars and arrays → Python numbers and lists, tuples → lists, NaN and ±inf → null,
mapping keys → strings. A document through ``json_safe`` dumps with ``allow_nan=False``:
strict JSON that any consumer reads (NaN is not JSON).
"""

from __future__ import annotations

import math
from typing import TypeAlias, TypeVar, cast, overload

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"
"""A value as ``json_safe`` leaves it: what ``json.dumps(..., allow_nan=False)`` writes."""

_K = TypeVar("_K")
_V = TypeVar("_V")


@overload
def json_safe(x: dict[_K, _V]) -> dict[str, JsonValue]: ...
@overload
def json_safe(x: object) -> JsonValue: ...


def json_safe(x: object) -> JsonValue:
    """``x`` with the JSON conventions applied, recursively."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist"):  # numpy arrays and scalars (bool_, integer, floating)
        listed: object = x.tolist()
        return json_safe(listed)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return cast(JsonValue, x)  # a JSON scalar; anything else passes through for json.dumps to refuse
