"""The speedup the engines measure at the deployed γ: their own mean per-user tok/s there
over the plain-decode rate the user gave (``baseline_tokens_per_second``, or a measured
table's T(1, 1)), priced at the route's batch mix. It is what the fleet gains now, measured,
beside the table's projection of it; a cost model that misses the engines shows up as the
two disagreeing, and a fleet whose speculation measures slower than its plain decode says so
(model.decision.rules.measured_slower withholds keeping it when turning speculation off would
gain more than min_gain, measured on both sides).

Only where both sides are the user's own and comparable:
- the plain decode is configured, a flag, or a measured table — a default rate would make it
  a default's answer, and a rate inferred from the observed one (the anchor "observed") would
  make it 1 by construction;
- the stock decode path: on latency_specialized the γ 0 row runs the specialized kernels at
  a configured speedup, a guess this ratio would inherit;
- the window's own γ, deployed and speculating (γ > 0).
At a batch mix above 1 the plain side is the batch-1 rate carried to the mix by the flat or
roofline profile (a measured table measures it): ``carried_by`` names the profile, and
``rests_on_defaults`` the roofline figures among its defaults. The rate is the mean per
user, whatever the objective; the table's speedups are in the objective's unit.
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
    observed_tokens_per_second: float  # the engines' mean per-user rate at the deployed γ (latency metrics)
    plain_tokens_per_second: float  # the γ 0 row's mean per-user rate at the route's batch mix
    plain_source: str  # CONFIGURED | FLAG | TABLE (model.anchor)
    carried_by: str | None = None  # "flat" | "roofline": the profile carrying batch 1 to a mix above it
    rests_on_defaults: Sequence[str] = ()  # of the roofline's figures that carry it

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "gamma": self.gamma, "observed_tokens_per_second": self.observed_tokens_per_second,
                "plain_tokens_per_second": self.plain_tokens_per_second, "plain_source": self.plain_source,
                "carried_by": self.carried_by, "rests_on_defaults": list(self.rests_on_defaults),
                "slower_than_plain_decode": self.slower_than_plain_decode, "summary": self.describe()}

    def describe(self) -> str:
        """One line for the console and the dashboard."""
        where = ("at batch 1" if self.carried_by is None and self.plain_source != TABLE
                 else "at the route's batch mix" if self.carried_by is None
                 else f"carried to the route's batch mix by the {self.carried_by} profile")
        line = (f"measured at gamma {self.gamma}: {self.observed_tokens_per_second:,.1f} tok/s per user (mean) = "
                f"{self.value:.2f}x the plain decode's {self.plain_tokens_per_second:,.1f} tok/s "
                f"({_SOURCE_WORDS[self.plain_source]}, {where})")
        if self.rests_on_defaults:
            line += f"; that carrying rests on the default {', '.join(self.rests_on_defaults)}"
        elif self.slower_than_plain_decode:
            line += ": speculation as deployed runs slower than plain decode — measured, whatever the table projects"
        elif self.value < 1.0:
            line += f": speculation as deployed runs slower than plain decode as the {self.carried_by} profile prices it"
        return line

    @property
    def measured_at_the_mix(self) -> bool:
        """Both sides measured at the route's batch mix: the mix is batch 1, or a measured table
        prices the plain side (not carried there by a profile)."""
        return self.carried_by is None

    @property
    def slower_than_plain_decode(self) -> bool:
        """Speculation as deployed measures slower than plain decode, both sides measured."""
        return self.value < 1.0 and self.measured_at_the_mix


def deployed_speedup(gamma: int, observed: float | None, plain: float, plain_source: str, carried_by: str | None,
                     rests_on_defaults: Sequence[str]) -> DeployedSpeedup | None:
    """The measured speedup at the deployed γ, or None where the plain-decode rate is not the
    user's own, no rate was observed, or nothing was drafted."""
    if observed is None or plain_source not in USERS_OWN or not plain > 0 or gamma <= 0:
        return None
    return DeployedSpeedup(observed / plain, gamma, observed, plain, plain_source, carried_by,
                           tuple(rests_on_defaults))
