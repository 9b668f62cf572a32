"""The speedup the engines measure at the deployed γ: their own per-user tok/s there over the
plain-decode rate the user gave (``baseline_tokens_per_second``, or a measured table's T(1, 1)),
priced at the route's batch mix. It is what the fleet gains now, measured, beside the table's
projection of it; a cost model that misses the engines shows up as the two disagreeing.

Only where the plain-decode rate is the user's own (configured, a flag, or a measured table):
a default rate would make it a default's answer, and a rate inferred from the observed one
(the anchor "observed") would make it 1 at γ 0 by construction. At a batch mix above 1 the
plain-decode side is the rate priced at the mix, so it carries the roofline's figures; where
those are defaults it says so (``rests_on_defaults``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .anchor import CONFIGURED, FLAG, TABLE

# the plain-decode rates that are the user's own, so that a measured ratio over them is too
USERS_OWN = (CONFIGURED, FLAG, TABLE)
_SOURCE_WORDS = {CONFIGURED: "the configured baseline_tokens_per_second",
                 FLAG: "--baseline-tokens-per-second", TABLE: "the measured table's plain decode"}


@dataclass(frozen=True)
class DeployedSpeedup:
    """value = observed_tokens_per_second / plain_tokens_per_second at ``gamma``, the deployed γ."""

    value: float
    gamma: int
    observed_tokens_per_second: float  # the engines' per-user rate at the deployed γ (its latency metrics)
    plain_tokens_per_second: float  # the γ 0 row's per-user rate: the user's plain decode at the route's batch mix
    plain_source: str  # CONFIGURED | FLAG | TABLE (model.anchor)
    rests_on_defaults: Sequence[str] = ()  # roofline figures that price the plain decode at a mix above batch 1

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "gamma": self.gamma, "observed_tokens_per_second": self.observed_tokens_per_second,
                "plain_tokens_per_second": self.plain_tokens_per_second, "plain_source": self.plain_source,
                "rests_on_defaults": list(self.rests_on_defaults), "summary": self.describe()}

    def describe(self) -> str:
        """One line for the console and the dashboard."""
        line = (f"measured at gamma {self.gamma}: {self.observed_tokens_per_second:,.1f} tok/s per user = "
                f"{self.value:.2f}x the plain decode's {self.plain_tokens_per_second:,.1f} tok/s "
                f"({_SOURCE_WORDS[self.plain_source]}, at the route's batch mix)")
        if self.value < 1.0:
            line += ": speculation as deployed runs slower than plain decode — measured, whatever the table projects"
        if self.rests_on_defaults:
            line += (f"; the plain decode at the route's batch mix rests on the default "
                     f"{', '.join(self.rests_on_defaults)}")
        return line


def deployed_speedup(gamma: int, observed: float | None, plain: float, plain_source: str,
                     rests_on_defaults: Sequence[str]) -> DeployedSpeedup | None:
    """The measured speedup at the deployed γ, or None where the plain-decode rate is not the
    user's own or no rate was observed."""
    if observed is None or plain_source not in USERS_OWN or not plain > 0:
        return None
    return DeployedSpeedup(observed / plain, gamma, observed, plain, plain_source, tuple(rests_on_defaults))
