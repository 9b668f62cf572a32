"""The anchored roofline against the public step-time tables: for every measured table in
benchmarks/data/public-step-costs.json (copied, with sources, from public GitHub threads),
the ratio T(B, q) / T(1, 1) the roofline gives against the measured one, error per cell.

Each table is priced as specdec prices a deployment (model.profiles.RooflineProfile,
docs/MODEL.md, Cost model): anchored at the table's own measured batch-1 single-token
step and modelling only the increments roof(B, q) − roof(1, 1), from the model's figures
(model.hf_config on a config fixture, the quantisation's bytes per weight from the thread)
and the chip's memory bandwidth. Nothing is fitted: the cells are out-of-sample by
construction, and a cell over 15% is reported, not tuned away. Apple publishes no GPU
FLOP/s, so the Apple chips' compute term is left out and each cell says the FLOP/s below
which compute would bind.

Error per cell = (modelled − measured) / measured; a measured range gives an error range.
A table the data file cannot price honestly is listed under ``not_tested`` with its reason.

Run: PYTHONPATH=. python benchmarks/roofline_public.py  (prints the table, writes
benchmarks/results/roofline-public.json).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from model.figures import Figure, GpuFigures, ModelFigures  # noqa: E402
from model.hf_config import model_figures_from_path  # noqa: E402
from model.profiles import RooflineProfile  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "public-step-costs.json"
RESULTS = ROOT / "benchmarks" / "results" / "roofline-public.json"
MAX_ERROR = 0.15
UNPUBLISHED_FLOPS = math.inf  # Apple publishes none: memory roof only (see the module docstring)


def load_data(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------ figures
def table_model(table: dict, root: Path = ROOT) -> ModelFigures:
    """The config fixture's figures, with the bytes per weight of the quantisation the thread ran."""
    model = model_figures_from_path(root / table["config"])
    bpw = table["bytes_per_weight"]
    return replace(model, name=table["model"], bytes_per_weight=Figure(float(bpw["value"]), bpw["source"]))


def table_gpu(spec: dict) -> GpuFigures:
    """The chip's published bandwidth; FLOP/s infinite when the vendor publishes none."""
    flops = Figure(UNPUBLISHED_FLOPS, spec["flops_source"])
    return GpuFigures(spec["name"], Figure(float(spec["hbm_bytes_per_s"]), spec["hbm_source"]),
                      {p: flops for p in ("bf16", "fp8", "fp4")})


def anchored(table: dict, data: dict, root: Path = ROOT) -> RooflineProfile:
    gpu = table_gpu(data["gpus"][table["gpu"]])
    return RooflineProfile(table_model(table, root), gpu, int(table["tensor_parallel_size"]),
                           table["anchor_ms"] / 1e3, anchor_batch=1)


# ------------------------------------------------------------------------------ cells
def measured_ratio(cell: dict, anchor_ms: float) -> float | list[float]:
    if "ratio" in cell:
        return cell["ratio"]
    return cell["ms"] / anchor_ms


def relative_error(modelled: float, measured: float | list[float]) -> float | list[float]:
    if isinstance(measured, list):
        return sorted((modelled - m) / m for m in measured)
    return (modelled - measured) / measured


def smallest_abs(error: float | list[float]) -> float:
    return min(abs(e) for e in error) if isinstance(error, list) else abs(error)


def compute_binds_below(profile: RooflineProfile, batch: int, q: int) -> float:
    """The FLOP/s under which the compute term would exceed this cell's memory roof."""
    memory_s = float(profile.roof_s(batch, q))  # FLOP/s infinite: the memory roof alone
    return 2.0 * profile.model.active_params.value * batch * q / memory_s


def price_cell(profile: RooflineProfile, table: dict, cell: dict) -> dict:
    b, q = int(cell["batch_size"]), int(cell["tokens_per_request"])
    anchor_s = profile.anchor_step_s
    modelled = float(profile.step_time_s(b, q)) / anchor_s
    measured = measured_ratio(cell, table["anchor_ms"])
    error = relative_error(modelled, measured)
    return {
        "source": table["source"], "table": table["id"], "model": table["model"],
        "gpu": profile.gpu.name, "batch_size": b, "tokens_per_request": q,
        "measured_ratio": measured, "modelled_ratio": modelled, "error": error,
        "over_max_error": smallest_abs(error) > MAX_ERROR,
        "whole_round": bool(cell.get("round_cost", False)),
        "compute_binds_below_flops": compute_binds_below(profile, b, q),
    }


def is_anchor(cell: dict) -> bool:
    return cell["batch_size"] == 1 and cell["tokens_per_request"] == 1


def price_table(table: dict, data: dict, root: Path = ROOT) -> dict:
    profile = anchored(table, data, root)
    m = profile.model
    return {
        "id": table["id"], "source": table["source"], "figure": table["figure"], "engine": table["engine"],
        "model": table["model"], "gpu": profile.gpu.name, "anchor_ms": table["anchor_ms"],
        "anchor_source": table["anchor_source"],
        "figures": {"total_params": m.total_params.value, "active_params": m.active_params.value,
                    "experts": m.experts.value, "experts_per_token": m.experts_per_token.value,
                    "bytes_per_weight": m.bytes_per_weight.value,
                    "state_bytes_per_request": m.state_bytes_per_request.value,
                    "hbm_bytes_per_s": profile.gpu.hbm_bytes_per_s.value, "config": table["config"]},
        "cells": [price_cell(profile, table, c) for c in table["cells"] if not is_anchor(c)],
    }


def compute(data: dict, root: Path = ROOT) -> dict:
    """Every table priced (the results file's content)."""
    tables = [price_table(t, data, root) for t in data["tables"]]
    cells = [c for t in tables for c in t["cells"]]
    return {
        "generated_by": "benchmarks/roofline_public.py", "data": "benchmarks/data/public-step-costs.json",
        "max_error": MAX_ERROR, "fitted": False,
        "cells_tested": len(cells), "cells_over_max_error": sum(c["over_max_error"] for c in cells),
        "tables": tables, "not_tested": data["not_tested"],
    }


# ------------------------------------------------------------------------------ output
def _ratio(r: float | list[float]) -> str:
    return "–".join(f"{v:.2f}" for v in r) + "×" if isinstance(r, list) else f"{r:.2f}×"


def _error(e: float | list[float]) -> str:
    return " to ".join(f"{v:+.0%}" for v in e) if isinstance(e, list) else f"{e:+.0%}"


def markdown_table(result: dict) -> str:
    """The cells as docs/BENCHMARKS.md's table (generated, pasted)."""
    lines = ["| source | model, chip | anchor T(1,1) | B | q | measured | roofline | error |",
             "|---|---|---|---|---|---|---|---|"]
    for t in result["tables"]:
        for c in t["cells"]:
            star = " (whole round)" if c["whole_round"] else ""
            lines.append(f"| {t['source']} | {t['model']}, {t['gpu']} | {t['anchor_ms']:.2f} ms | {c['batch_size']} "
                         f"| {c['tokens_per_request']} | {_ratio(c['measured_ratio'])}{star} "
                         f"| {_ratio(c['modelled_ratio'])} | {_error(c['error'])} |")
    return "\n".join(lines)


def not_tested_lines(result: dict) -> str:
    return "\n".join(f"- {n['source']}: not tested — {n['reason']}" for n in result["not_tested"])


def main() -> int:
    result = compute(load_data())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(markdown_table(result))
    print(f"\n{result['cells_over_max_error']} of {result['cells_tested']} cells off by more than "
          f"{MAX_ERROR:.0%}; nothing fitted.")
    lowest = min(c["compute_binds_below_flops"] for t in result["tables"] for c in t["cells"])
    print(f"compute would bind only below {lowest / 1e12:.1f} TFLOP/s in any cell (memory roof used).\n")
    print(not_tested_lines(result))
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
