"""Between two γ the engines measured — the deployed one and another segment's (an earlier γ's
in the window, or a probe's beside the fleet) — which runs faster, from their own per-user
decode rates (acceptance.observed_rate.segment_rates), as the deployed γ against plain decode
is (model.deployed_speedup). The decision follows it (model.decision.rules.between_segments).

The ratio r_a / r_b is resampled pair by pair from the two rates' own resamples, drawn apart:
two segments are two sets of engines or two spans of time, so their noise is taken as
independent. Limits: each rate is the per-user rate at the segment's own batch mix and
traffic — a probe's one engine sees its own share of the requests, an earlier segment the
traffic of its hour — so a difference in mix or text lands in the ratio; two segments that
ran side by side (a probe beside the fleet) share their traffic's drift, and are said to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acceptance.observed_rate import SegmentRate
from acceptance.windows import REQUESTS, SCRAPE_INTERVALS


@dataclass(frozen=True)
class SegmentComparison:
    """γ ``faster`` against γ ``slower``: gain = r_faster / r_slower − 1, its interval and
    P(gain > min_gain) over the resamples."""

    faster: int
    slower: int
    faster_tokens_per_second: float  # at the route's batch mix (SegmentRate.mix_factor)
    slower_tokens_per_second: float
    gain: float
    low: float
    high: float
    probability: float  # P(gain > min_gain)
    min_gain: float
    side_by_side: bool  # both still ran at the window's end (a probe beside the fleet)
    rows: tuple[int, int]  # the faster's and the slower's rows
    mix_factors: tuple[float, float] = (1.0, 1.0)  # each rate's carry from its own mix to the route's
    rows_unit: str = SCRAPE_INTERVALS  # what the rows are: scrape intervals, or requests (per-request rows)

    @property
    def measured_tokens_per_second(self) -> tuple[float, float]:
        """The faster's and the slower's rates as the engines measured them, at their own mixes."""
        return (self.faster_tokens_per_second / self.mix_factors[0], self.slower_tokens_per_second / self.mix_factors[1])

    def to_dict(self) -> dict[str, object]:
        return {"faster_gamma": self.faster, "slower_gamma": self.slower,
                "faster_tokens_per_second": self.faster_tokens_per_second,
                "slower_tokens_per_second": self.slower_tokens_per_second, "gain": self.gain, "low": self.low,
                "high": self.high, "probability_gain_over_min_gain": self.probability, "min_gain": self.min_gain,
                "side_by_side": self.side_by_side, "rows": list(self.rows), "mix_factors": list(self.mix_factors),
                "measured_tokens_per_second": list(self.measured_tokens_per_second), "rows_unit": self.rows_unit}


def compare(faster: SegmentRate, slower: SegmentRate, *, min_gain: float, level: float) -> SegmentComparison:
    """How much faster γ ``faster`` runs than γ ``slower``, measured (module docstring)."""
    a, b = faster.resampled(), slower.resampled()
    n = min(len(a), len(b))
    gains = a[:n] / b[:n] - 1.0
    low, high = np.quantile(gains, [(1 - level) / 2, (1 + level) / 2])
    return SegmentComparison(
        faster.gamma, slower.gamma, faster.tokens_per_second, slower.tokens_per_second,
        faster.tokens_per_second / slower.tokens_per_second - 1.0, float(low), float(high),
        float(np.mean(gains > min_gain)), min_gain, faster.running and slower.running,
        (faster.spread.rows, slower.spread.rows), (faster.mix_factor, slower.mix_factor),
        REQUESTS if faster.unit == slower.unit == REQUESTS else SCRAPE_INTERVALS)
