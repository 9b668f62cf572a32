"""The JSON conventions of every document the tool prints: the one NaN → null rule.

numpy scalars and arrays → Python numbers and lists, tuples → lists, NaN and ±inf → null,
mapping keys → strings. A document through ``json_safe`` dumps with ``allow_nan=False``:
strict JSON that any consumer reads (NaN is not JSON).
"""

from __future__ import annotations

import math


def json_safe(x):
    """``x`` with the JSON conventions applied, recursively."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist"):  # numpy arrays and scalars (bool_, integer, floating)
        return json_safe(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
