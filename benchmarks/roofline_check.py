"""The roofline profile against a measured verify-cost table: error per cell, and a refit
judged on cells it did not see.

The profile is anchored as specdec anchors it (model.profiles.RooflineProfile): on the
measured plain-decode step at batch 1, T(1, 1), with only the increments
roof(B, q) − roof(1, 1) modelled from the model and GPU figures. The figures' context
length is set to the table's (the KV a step reads is the table's workload, not the
default's). Error per cell = (roofline − measured) / measured.

When any cell is off by more than ``MAX_ERROR`` (15%), the profile is changed by fitting
two factors — the fractions of the datasheet's HBM bandwidth and dense FLOP/s a real step
reaches — on half of the cells (a checkerboard over the (B, q) grid, the anchor cell on the
fitting side) and its error is reported on the other half only. The fit minimises the
largest relative error over the fitting cells (a grid search in log space: two parameters,
no optimiser to trust).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from model.figures import Figure, GpuFigures, ModelFigures
from model.profiles import RooflineProfile

MAX_ERROR = 0.15
EFFICIENCY_GRID = np.geomspace(0.05, 1.5, 141)  # fractions of the datasheet figure


@dataclass(frozen=True)
class Cell:
    batch_size: int
    tokens_per_request: int
    seconds: float


@dataclass(frozen=True)
class CellError:
    batch_size: int
    tokens_per_request: int
    measured_s: float
    modelled_s: float
    role: str  # "anchor", "fit" or "held-out"

    @property
    def error(self) -> float:
        return (self.modelled_s - self.measured_s) / self.measured_s


@dataclass(frozen=True)
class RooflineComparison:
    """The profile's error per cell; ``refit`` is set when the datasheet profile is off by
    more than MAX_ERROR somewhere."""

    cells: tuple[CellError, ...]
    max_abs_error: float
    within_tolerance: bool
    refit: "Refit | None"


@dataclass(frozen=True)
class Refit:
    hbm_fraction: float
    flops_fraction: float
    gpu: GpuFigures
    cells: tuple[CellError, ...]  # every cell, marked fit / held-out
    max_abs_error_fit: float
    max_abs_error_held_out: float


def anchored_profile(model: ModelFigures, gpu: GpuFigures, cells: Sequence[Cell], context_tokens: int,
                     tensor_parallel_size: int = 1) -> RooflineProfile:
    """The roofline anchored on the table's own T(1, 1), at the table's context."""
    anchor = _anchor(cells)
    at_context = replace(model, context_tokens=Figure(float(context_tokens), "the measured table's KV context"))
    return RooflineProfile(at_context, gpu, tensor_parallel_size, anchor.seconds, 1)


def _anchor(cells: Sequence[Cell]) -> Cell:
    for c in cells:
        if c.batch_size == 1 and c.tokens_per_request == 1:
            return c
    raise ValueError("the table has no cell at batch 1, q 1: nothing to anchor the roofline on")


def _modelled(profile: RooflineProfile, cells: Sequence[Cell]) -> np.ndarray:
    b = np.array([c.batch_size for c in cells], dtype=float)
    q = np.array([c.tokens_per_request for c in cells], dtype=float)
    return np.asarray(profile.step_time_s(b, q), dtype=float)


def checkerboard_split(cells: Sequence[Cell]) -> tuple[list[Cell], list[Cell]]:
    """(fit, held-out): alternate cells of the (B, q) grid; the anchor cell fits."""
    bs = sorted({c.batch_size for c in cells})
    qs = sorted({c.tokens_per_request for c in cells})
    fit, held_out = [], []
    for c in cells:
        parity = (bs.index(c.batch_size) + qs.index(c.tokens_per_request)) % 2
        (fit if parity == 0 else held_out).append(c)
    return fit, held_out


def scaled_gpu(gpu: GpuFigures, hbm_fraction: float, flops_fraction: float, source: str) -> GpuFigures:
    return GpuFigures(
        name=f"{gpu.name} (fitted)",
        hbm_bytes_per_s=Figure(gpu.hbm_bytes_per_s.value * hbm_fraction,
                               f"{hbm_fraction:.3f} × {gpu.name} datasheet HBM, fitted on {source}"),
        dense_flops={p: Figure(f.value * flops_fraction, f"{flops_fraction:.3f} × {gpu.name} datasheet {p}, fitted on {source}")
                     for p, f in gpu.dense_flops.items()},
    )


def _errors(profile: RooflineProfile, cells: Sequence[Cell], role_of) -> tuple[CellError, ...]:
    modelled = _modelled(profile, cells)
    return tuple(CellError(c.batch_size, c.tokens_per_request, c.seconds, float(m), role_of(c))
                 for c, m in zip(cells, modelled))


def refit(model: ModelFigures, gpu: GpuFigures, cells: Sequence[Cell], context_tokens: int, source: str,
          tensor_parallel_size: int = 1) -> Refit:
    fit, held_out = checkerboard_split(cells)
    if not held_out:
        raise ValueError("a refit needs at least two batch sizes or two q values: nothing would be held out")
    measured = np.array([c.seconds for c in fit])
    best = (np.inf, 1.0, 1.0)
    for hbm in EFFICIENCY_GRID:
        for flops in EFFICIENCY_GRID:
            profile = anchored_profile(model, scaled_gpu(gpu, hbm, flops, source), cells, context_tokens,
                                       tensor_parallel_size)
            worst = float(np.max(np.abs(_modelled(profile, fit) - measured) / measured))
            if worst < best[0] - 1e-12:
                best = (worst, float(hbm), float(flops))
    _, hbm, flops = best
    fitted_gpu = scaled_gpu(gpu, hbm, flops, source)
    profile = anchored_profile(model, fitted_gpu, cells, context_tokens, tensor_parallel_size)
    fit_ids = {id(c) for c in fit}
    anchor = _anchor(cells)
    errors = _errors(profile, cells, lambda c: "anchor" if c is anchor else ("fit" if id(c) in fit_ids else "held-out"))
    return Refit(
        hbm_fraction=hbm,
        flops_fraction=flops,
        gpu=fitted_gpu,
        cells=errors,
        max_abs_error_fit=max(abs(e.error) for e in errors if e.role != "held-out"),
        max_abs_error_held_out=max(abs(e.error) for e in errors if e.role == "held-out"),
    )


def compare_roofline(model: ModelFigures, gpu: GpuFigures, cells: Sequence[Cell], context_tokens: int,
                     source: str, tensor_parallel_size: int = 1) -> RooflineComparison:
    profile = anchored_profile(model, gpu, cells, context_tokens, tensor_parallel_size)
    anchor = _anchor(cells)
    errors = _errors(profile, cells, lambda c: "anchor" if c is anchor else "held-out")
    worst = max(abs(e.error) for e in errors)
    within = worst <= MAX_ERROR
    return RooflineComparison(
        cells=errors,
        max_abs_error=worst,
        within_tolerance=within,
        refit=None if within else refit(model, gpu, cells, context_tokens, source, tensor_parallel_size),
    )


def comparison_to_dict(comparison: RooflineComparison) -> dict:
    def cells(errors):
        return [{"batch_size": e.batch_size, "tokens_per_request": e.tokens_per_request,
                 "measured_ms": e.measured_s * 1e3, "modelled_ms": e.modelled_s * 1e3,
                 "error": e.error, "role": e.role} for e in errors]

    out = {"max_error": MAX_ERROR, "max_abs_error": comparison.max_abs_error,
           "within_tolerance": comparison.within_tolerance, "cells": cells(comparison.cells), "refit": None}
    if comparison.refit is not None:
        r = comparison.refit
        out["refit"] = {
            "hbm_fraction": r.hbm_fraction,
            "flops_fraction": r.flops_fraction,
            "hbm_bytes_per_s": r.gpu.hbm_bytes_per_s.value,
            "dense_flops": {p: f.value for p, f in r.gpu.dense_flops.items()},
            "max_abs_error_fit": r.max_abs_error_fit,
            "max_abs_error_held_out": r.max_abs_error_held_out,
            "within_tolerance_held_out": r.max_abs_error_held_out <= MAX_ERROR,
            "cells": cells(r.cells),
        }
    return out
