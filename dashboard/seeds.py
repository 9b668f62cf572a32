"""The seeds' published figures (seeds/004, docs/MODEL.md) that the what-if chart marks.

Data, not computation: the printed table at γ = 7, r = 0.10 and the two single-stream
measurements on Kimi K3 (GB300, TP16, batch 1). Where a measurement sits on the curve (its
implied p) is model.speedup.implied_p's answer, under the chart's γ and draft cost.
"""

from __future__ import annotations

SEEDS_GAMMA = 7
SEEDS_DRAFT_COST = 0.10
SEEDS_BASELINE_TPS = 118.0  # Kimi K3 without speculation, vLLM blog 2026-07-27

# (p, printed speedup) of the seeds' table at γ = 7, r = 0.10
SEEDS_TABLE_POINTS: tuple[tuple[float, float], ...] = (
    (0.95, 6.12), (0.90, 5.18), (0.80, 3.78), (0.70, 2.86), (0.60, 2.23), (0.50, 1.81),
)

# (label, tokens/s) measured with DSpark against SEEDS_BASELINE_TPS
SEEDS_MEASUREMENTS: tuple[tuple[str, float], ...] = (
    ("DSpark 370 tok/s (vLLM blog)", 370.0),
    ("DSpark 464 tok/s (vLLM notice)", 464.0),
)
