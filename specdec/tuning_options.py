"""The settings one tuning runs at (specdec.pipeline.tune_intervals): how the segment's rows
are resampled for the acceptance estimate, and the level and seed its pricing uses too."""

from __future__ import annotations

from dataclasses import dataclass

from acceptance.estimates import EstimateOptions


@dataclass(frozen=True)
class TuningOptions:
    """The confidence ``level``; ``n_resamples`` bootstrap resamples from ``seed``, in blocks of
    ``block_length`` rows (None: chosen from the data; 1 for independent requests), a row
    being one ``unit`` (the name the estimate's method gives the rows it resampled)."""

    level: float = 0.9
    n_resamples: int = 1000
    seed: int = 0
    block_length: int | None = None
    unit: str = "scrape intervals"

    def estimate_options(self) -> EstimateOptions:
        """These as estimate_acceptance's options (the route's rows and a running probe's alike)."""
        return EstimateOptions(level=self.level, n_resamples=self.n_resamples, seed=self.seed,
                               block_length=self.block_length, unit=self.unit)


DEFAULT_TUNING = TuningOptions()  # tune_intervals' default: frozen, so one instance serves every call
