"""The speedup the engines measure at the deployed γ: their own mean per-user tok/s there
over the plain-decode rate the user gave (``baseline_tokens_per_second``, or a measured
table's T(1, 1)), priced at the route's batch mix. It is what the fleet gains now, measured,
beside the table's projection of it; a cost model that misses the engines shows up as the
two disagreeing. Where both sides are measured at the mix, the measurement decides between
the deployed γ and plain decode when its difference is sure (``verdict``:
P(gain > min_gain) ≥ DECISION_CERTAINTY over the observed rate's resamples, drawn from the
window's own rows: acceptance.observed_rate), whatever the table projects
(model.decision.rules.measured). The user's plain-decode figure is taken as exact: the tool
cannot see how it was measured, and its sampling error is the user's to keep small (a rate
read over a few hundred requests, as `specdec inspect` reads a base page's).

Only where both sides are the user's own and comparable:
- the plain decode is configured, a flag, or a measured table — a default rate would make it
  a default's answer, and a rate inferred from the observed one (the anchor "observed") would
  make it 1 by construction;
- the stock decode path: on latency_specialized the γ 0 row runs the specialized kernels at
  a configured speedup, a guess this ratio would inherit;
- the window's own γ, deployed and speculating (γ > 0).
At a batch mix above 1 the plain side is the batch-1 rate carried to the mix by the flat or
roofline profile (a measured table measures it): ``carried_by`` names the profile, and
``rests_on_defaults`` the roofline figures among its defaults; such a ratio is partly the
model's and decides nothing. The rate is the mean per user, whatever the objective; the
table's speedups are in the objective's unit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from acceptance.observed_rate import RateSpread

from .anchor import CONFIGURED, FLAG, TABLE
from .decision_kind import DecisionKind
from .deployment import DECISION_CERTAINTY

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
    spread: RateSpread | None = None  # the observed rate's resamples (None: no interval)
    level: float = 0.9  # of the interval
    min_gain: float = 0.03  # the least gain a verdict acts on

    def to_dict(self) -> dict[str, object]:
        low, high = self.interval or (None, None)
        verdict = self.verdict()
        return {"value": self.value, "gamma": self.gamma, "observed_tokens_per_second": self.observed_tokens_per_second,
                "plain_tokens_per_second": self.plain_tokens_per_second, "plain_source": self.plain_source,
                "carried_by": self.carried_by, "rests_on_defaults": list(self.rests_on_defaults),
                "slower_than_plain_decode": self.slower_than_plain_decode, "summary": self.describe(),
                "low": low, "high": high,
                "interval_rows": None if self.spread is None else self.spread.rows,
                "interval_unit": None if self.spread is None else self.spread.unit,
                "probability_plain_decode_gains": None if verdict is None else verdict.p_plain_gains,
                "probability_deployed_gains": None if verdict is None else verdict.p_deployed_gains,
                "decides": None if verdict is None else verdict.decides}

    def with_spread(self, spread: RateSpread | None, level: float, min_gain: float) -> DeployedSpeedup:
        """The same measurement with the observed rate's resamples, at ``level``, judged at ``min_gain``."""
        return replace(self, spread=spread, level=level, min_gain=min_gain)

    @property
    def resampled(self) -> np.ndarray | None:
        """(n,) the measured speedup over the observed rate's resamples (the plain side exact)."""
        return None if self.spread is None else self.value * self.spread.factors

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.spread is None:
            return None
        low, high = self.spread.interval(self.level)
        return self.value * low, self.value * high

    def off_gain(self) -> tuple[float, float | None, float | None]:
        """Plain decode's gain over the deployed γ, measured: 1 / value − 1, and its interval."""
        interval = self.interval
        if interval is None:
            return 1.0 / self.value - 1.0, None, None
        return 1.0 / self.value - 1.0, 1.0 / interval[1] - 1.0, 1.0 / interval[0] - 1.0

    def verdict(self, certainty: float = DECISION_CERTAINTY) -> MeasuredVerdict | None:
        """Which of the deployed γ and plain decode the engines measure faster by more than
        min_gain with probability ≥ ``certainty`` (None: not measured at the mix, or no interval)."""
        ratio = self.resampled
        if ratio is None or not self.measured_at_the_mix:
            return None
        p_plain = float(np.mean(1.0 / ratio - 1.0 > self.min_gain))
        p_deployed = float(np.mean(ratio - 1.0 > self.min_gain))
        decides = DecisionKind.OFF if p_plain >= certainty else DecisionKind.KEEP if p_deployed >= certainty else None
        return MeasuredVerdict(decides, p_plain, p_deployed, certainty)

    def describe(self) -> str:
        """One line for the console and the dashboard."""
        where = ("at batch 1" if self.carried_by is None and self.plain_source != TABLE
                 else "at the route's batch mix" if self.carried_by is None
                 else f"carried to the route's batch mix by the {self.carried_by} profile")
        interval = self.interval
        spread, over = ("", "") if interval is None or self.spread is None else (
            f" [{interval[0]:.2f}, {interval[1]:.2f}]", f"; the interval over {self.spread.rows} {self.spread.unit}")
        line = (f"measured at gamma {self.gamma}: {self.observed_tokens_per_second:,.1f} tok/s per user (mean) = "
                f"{self.value:.2f}x{spread} the plain decode's {self.plain_tokens_per_second:,.1f} tok/s "
                f"({_SOURCE_WORDS[self.plain_source]}, {where}{over})")
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


@dataclass(frozen=True)
class MeasuredVerdict:
    """What the measurement alone says between the deployed γ and plain decode."""

    decides: DecisionKind | None  # "off": plain decode is surely faster by > min_gain; "keep": the deployed γ is; None
    p_plain_gains: float  # P(plain decode / the deployed γ − 1 > min_gain)
    p_deployed_gains: float  # P(the deployed γ / plain decode − 1 > min_gain)
    certainty: float


def deployed_speedup(gamma: int, observed: float | None, plain: float, plain_source: str, carried_by: str | None,
                     rests_on_defaults: Sequence[str]) -> DeployedSpeedup | None:
    """The measured speedup at the deployed γ, or None where the plain-decode rate is not the
    user's own, no rate was observed, or nothing was drafted."""
    if observed is None or plain_source not in USERS_OWN or not plain > 0 or gamma <= 0:
        return None
    return DeployedSpeedup(observed / plain, gamma, observed, plain, plain_source, carried_by,
                           tuple(rests_on_defaults))
