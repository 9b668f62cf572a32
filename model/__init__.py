"""What acceptance is worth: cost model, speedup, γ recommendation, vLLM config output."""

from .deployment import DEPLOYMENT_KEYS, INLINE_DEFAULTS, Deployment, ModelInputError
from .recommend import recommend
from .recommendation import Candidate, Recommendation
from .specialized import Eligibility, specialized_eligibility
from .speedup import ImpliedP, TableRow, implied_draft_cost, implied_p, seeds_table

__all__ = [
    "DEPLOYMENT_KEYS", "INLINE_DEFAULTS", "Deployment", "ModelInputError", "Candidate", "Recommendation",
    "recommend", "Eligibility", "specialized_eligibility", "ImpliedP", "TableRow", "implied_draft_cost",
    "implied_p", "seeds_table",
]
