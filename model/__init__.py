"""What acceptance is worth: cost model, speedup, γ recommendation, vLLM config output.

The names below are imported on first use (PEP 562), not with the package: a command that
only needs ``model.deployment`` (the CLI's flags, `specdec dashboard` before it starts the
server) does not pay for scipy behind ``recommend``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "DEPLOYMENT_KEYS": "deployment", "INLINE_DEFAULTS": "deployment", "Deployment": "deployment",
    "ModelInputError": "deployment", "recommend": "recommend", "Candidate": "recommendation",
    "Recommendation": "recommendation", "Eligibility": "specialized", "specialized_eligibility": "specialized",
    "ImpliedP": "speedup", "TableRow": "speedup", "implied_draft_cost": "speedup", "implied_p": "speedup",
    "seeds_table": "speedup",
}

__all__ = [
    "DEPLOYMENT_KEYS", "INLINE_DEFAULTS", "Deployment", "ModelInputError", "Candidate", "Recommendation",
    "recommend", "Eligibility", "specialized_eligibility", "ImpliedP", "TableRow", "implied_draft_cost",
    "implied_p", "seeds_table",
]

if TYPE_CHECKING:
    from .deployment import DEPLOYMENT_KEYS, INLINE_DEFAULTS, Deployment, ModelInputError
    from .recommend import recommend
    from .recommendation import Candidate, Recommendation
    from .specialized import Eligibility, specialized_eligibility
    from .speedup import ImpliedP, TableRow, implied_draft_cost, implied_p, seeds_table


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'model' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value  # kept: model.recommend the function, as the eager package bound it, not its module
    return value
