"""Every check that needs a GPU, in one run of at most 8 minutes (run it first whenever a
session is lent one; README "GPU checks" says how).

    make gpu-checks-prepare                 # here: cubins + PTX into .gpu/cubins (needs the DSL, no GPU)
    python3 benchmarks/gpu_checks.py --cubin .gpu/cubins --out DIR        # on the GPU machine
    python benchmarks/gpu_checks.py --dry-run --out DIR [--cubin DIR]     # on a CPU, tiny sizes (make test)

1. The CuTe DSL acceptance kernel (benchmarks/kernel_gpu.py) at V = 163,840, N = 4,096,
   bf16: max abs error against the torch reference ≤ 1e-3, bytes moved per second ≥ 80%
   of the copy bandwidth measured in the same run, ≥ 3× faster than plain torch. Before any
   launch, the cubin's entry and parameter layout are checked against what the loader
   passes (kernel_gpu.check_cubin_layout; the same check runs on the CPU in make test).
2. A measured verify-cost table of a Llama-3.1-8B-shaped target with random bf16 weights
   (benchmarks/dense_target.py): one step of B requests verifying q tokens each against a
   KV cache of 1,024 tokens, under CUDA graphs, B ∈ {1, 2, 4, 8, 16, 32, 64} ×
   q ∈ {1, 2, 3, 4, 6, 8}, the median of 30 timed replays per cell; written in specdec's
   measured-table CSV (batch_size,tokens_per_request,path,seconds) and read back through
   model.profiles.load_table.
3. The roofline profile for llama-3.1-8b on H200, anchored as specdec anchors it, against
   that table (benchmarks/roofline_check.py): error per cell; past 15% anywhere, a refit on
   half of the cells with its error on the other half.

Writes DIR/gpu_checks.json (every figure, each phase's seconds) and DIR/<table>.csv, prints
a console summary; exit status 0 when every check passed, 1 when one failed (the JSON says
which), 2 when the run could not start (one line on stderr). The dry run times the same
code eagerly on the CPU, with the NumPy reference standing in for the kernel; it judges
agreement and the file formats, not speed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import dense_target  # noqa: E402
import kernel_gpu  # noqa: E402
import roofline_check  # noqa: E402

BUDGET_S = 480.0  # the 8 minutes; cells left when it runs out are reported as skipped
TABLE_NAME = "llama-3.1-8b-h200.csv"
TABLE_HEADER = "batch_size,tokens_per_request,path,seconds"


@dataclass(frozen=True)
class Plan:
    """Sizes of one run: the GPU's, or the dry run's tiny ones."""

    kernel_rows: int
    kernel_vocab: int
    shape: dense_target.DenseShape
    batch_sizes: tuple[int, ...]
    tokens_per_request: tuple[int, ...]
    context: int
    repeats: int
    table_name: str


GPU_PLAN = Plan(4096, 163_840, dense_target.LLAMA_31_8B, (1, 2, 4, 8, 16, 32, 64), (1, 2, 3, 4, 6, 8), 1024, 30,
                TABLE_NAME)
DRY_RUN_PLAN = Plan(32, 1024, dense_target.TINY, (1, 2, 4), (1, 2, 3), 16, 5, "tiny-llama-cpu.csv")


class Progress:
    """Timestamped progress lines on stderr (stdout keeps the summary)."""

    def __init__(self):
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def __call__(self, message: str) -> None:
        print(f"[{self.elapsed:6.1f} s] {message}", file=sys.stderr, flush=True)


def write_table(path: Path, cells, comment: str) -> None:
    """specdec's measured-table CSV: stock rows, one per (B, q)."""
    lines = [f"# {comment}", TABLE_HEADER]
    lines += [f"{c.batch_size},{c.tokens_per_request},stock,{c.seconds:.9f}" for c in cells]
    path.write_text("\n".join(lines) + "\n")


def read_back(path: Path) -> list[roofline_check.Cell]:
    """The table as specdec reads it (model.profiles.load_table): the cells it holds."""
    from model.profiles import STOCK, load_table

    table = load_table(path)
    cells = []
    for (path_, q), (batch_sizes, seconds) in sorted(table.rows.items()):
        if path_ == STOCK:
            cells += [roofline_check.Cell(int(b), int(q), float(s)) for b, s in zip(batch_sizes, seconds)]
    return sorted(cells, key=lambda c: (c.batch_size, c.tokens_per_request))


# Llama-3.1-8B's config.json fields (benchmarks/data/hf-configs): the GPU run prices the model
# through the path users take (model = the path of a config.json), which gives the built-in
# llama-3.1-8b's figures (tests/test_gpu_checks.py)
LLAMA_CONFIG = Path(__file__).resolve().parent / "data" / "hf-configs" / "llama-3.1-8b.json"


def figures_for(plan: Plan, dry_run: bool):
    """(model, gpu) figures for the roofline: llama-3.1-8b from its config.json on H200, or for
    the dry run the tiny shape's own figures on nominal CPU figures (assumed: the dry run
    judges the code)."""
    from model.figures import GPUS, Figure, GpuFigures, ModelFigures
    from model.hf_config import model_figures_from_path

    if not dry_run:
        return model_figures_from_path(LLAMA_CONFIG), GPUS["H200"]
    s = plan.shape
    assumed = "dry run: the tiny shape's own figure"
    model = ModelFigures(
        name=s.name, total_params=Figure(s.params, assumed), active_params=Figure(s.params, assumed),
        experts=Figure(0, "dense"), experts_per_token=Figure(0, "dense"), bytes_per_weight=Figure(4.0, "fp32"),
        hidden_size=Figure(s.hidden, assumed), kv_bytes_per_token=Figure(2 * s.kv_bytes_per_token, "fp32"),
        state_bytes_per_request=Figure(0, "none"), context_tokens=Figure(plan.context, assumed),
        compute_precision="bf16",
    )
    cpu = GpuFigures("CPU", Figure(20e9, "assumed"), {"bf16": Figure(50e9, "assumed")})
    return model, cpu


def _device_and_dtype(dry_run: bool):
    import torch

    if dry_run:
        return torch.device("cpu"), torch.float32
    return torch.device("cuda"), torch.bfloat16


def check_layout(cubin_dir: Path | None, arch: str, dtype: str = "bf16") -> dict | None:
    if cubin_dir is None:
        return None
    layout = kernel_gpu.check_cubin_layout(cubin_dir / f"acceptance_{arch}_{dtype}.cubin")
    return {"arch": arch, "dtype": dtype, "entry": layout.entry[:60] + "…", "param_sizes": list(layout.param_sizes),
            "block_threads": layout.block_threads, "matches_loader": True}


def measure_table(plan: Plan, dry_run: bool, progress: Progress, deadline: float):
    import torch

    device, dtype = _device_and_dtype(dry_run)
    build_start = time.perf_counter()
    target = dense_target.DenseTarget(plan.shape, max_batch=max(plan.batch_sizes), context=plan.context,
                                      max_q=max(plan.tokens_per_request), device=device, dtype=dtype)
    if device.type == "cuda":
        torch.cuda.synchronize()
    progress(f"{plan.shape.name}: {plan.shape.params / 1e9:.2f} B params, random weights in "
             f"{time.perf_counter() - build_start:.1f} s")
    cells, skipped = [], []
    for b in plan.batch_sizes:
        if cells and progress.elapsed > deadline:  # batch 1 always: it anchors the roofline
            skipped += [(b, q) for q in plan.tokens_per_request]
            continue
        cells += dense_target.measure_verify_costs(target, [b], plan.tokens_per_request, cuda_graphs=not dry_run,
                                                   repeats=plan.repeats, progress=progress)
    del target
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return cells, skipped


def summary_lines(report: dict) -> list[str]:
    k = report["kernel"]
    lines = [f"GPU checks on {report['device']} ({report['seconds']:.0f} s)"]
    verdict = {True: "pass", False: "FAIL", None: "not judged (dry run)"}
    lines.append(
        f"1. kernel: max abs error {k['max_abs_error']:.2e} (≤ {k['error_tolerance']}): "
        f"{verdict[k['checks']['agreement']]}; {k['fraction_of_copy_bandwidth']:.0%} of copy bandwidth "
        f"{k['copy_bandwidth_gb_s']:.0f} GB/s (≥ {k['min_fraction_of_copy_bandwidth']:.0%}): "
        f"{verdict[k['checks']['bandwidth']]}; {k['speedup_vs_plain_torch']:.1f}× plain torch "
        f"(≥ {k['min_speedup_vs_plain_torch']:.0f}×): {verdict[k['checks']['speed']]}"
    )
    t = report["verify_table"]
    lines.append(f"2. verify-cost table: {len(t['cells'])} cells → {t['path']}"
                 + (f", {len(t['skipped'])} skipped (budget)" if t["skipped"] else ""))
    r = report["roofline"]
    lines.append(f"3. roofline vs table: max |error| {r['max_abs_error']:.1%} (≤ {r['max_error']:.0%}): "
                 f"{verdict[report['checks']['roofline']]}")
    lines.append("     B   q  measured ms  roofline ms   error" + ("  refit ms  error  role" if r["refit"] else ""))
    refit_cells = {(c["batch_size"], c["tokens_per_request"]): c for c in (r["refit"] or {}).get("cells", [])}
    for c in r["cells"]:
        line = (f"   {c['batch_size']:>3} {c['tokens_per_request']:>3} {c['measured_ms']:12.3f} "
                f"{c['modelled_ms']:12.3f} {c['error']:+7.1%}")
        f = refit_cells.get((c["batch_size"], c["tokens_per_request"]))
        if f:
            line += f" {f['modelled_ms']:9.3f} {f['error']:+6.1%}  {f['role']}"
        lines.append(line)
    if r["refit"]:
        f = r["refit"]
        lines.append(f"   refit: {f['hbm_fraction']:.3f} × datasheet HBM, {f['flops_fraction']:.3f} × dense FLOP/s; "
                     f"max |error| {f['max_abs_error_fit']:.1%} on the fitting half, "
                     f"{f['max_abs_error_held_out']:.1%} held out")
    return lines


def run(args) -> dict:
    import torch

    plan = DRY_RUN_PLAN if args.dry_run else GPU_PLAN
    progress = Progress()
    if not args.dry_run and not torch.cuda.is_available():
        raise kernel_gpu.KernelCheckError("no CUDA GPU present (torch.cuda.is_available() is False); use --dry-run on a CPU")
    from kernels.acceptance import cuda_arch

    arch = cuda_arch(torch.cuda.get_device_capability()) if not args.dry_run else "sm_90a"
    phases = {}
    layout = check_layout(args.cubin, arch)
    if layout:
        progress(f"cubin layout for {arch} matches the loader ({layout['param_sizes']}, {layout['block_threads']} threads)")

    t0 = time.perf_counter()
    kernel = kernel_gpu.run_kernel_check(rows=plan.kernel_rows, vocab=plan.kernel_vocab, dtype="bf16",
                                         cubin_dir=args.cubin, dry_run=args.dry_run)
    phases["kernel_s"] = time.perf_counter() - t0
    progress(f"kernel: max abs error {kernel['max_abs_error']:.2e}, {kernel['fraction_of_copy_bandwidth']:.0%} of copy "
             f"bandwidth, {kernel['speedup_vs_plain_torch']:.1f}× plain torch")

    t0 = time.perf_counter()
    cells, skipped = measure_table(plan, args.dry_run, progress, args.budget_s)
    phases["verify_table_s"] = time.perf_counter() - t0
    table_path = args.out / plan.table_name
    device_name = torch.cuda.get_device_name() if not args.dry_run else f"cpu ({platform.processor() or platform.machine()})"
    write_table(table_path, cells,
                f"{plan.shape.name}, random weights, KV context {plan.context}, CUDA graphs {not args.dry_run}, "
                f"median of {plan.repeats} steps per cell, {device_name}, torch {torch.__version__}, "
                f"benchmarks/gpu_checks.py {time.strftime('%Y-%m-%d', time.gmtime())}")
    read_cells = read_back(table_path)

    t0 = time.perf_counter()
    model, gpu = figures_for(plan, args.dry_run)
    comparison = roofline_check.compare_roofline(model, gpu, read_cells, plan.context, table_path.name)
    phases["roofline_s"] = time.perf_counter() - t0

    report = {
        "device": device_name,
        "dry_run": args.dry_run,
        "seconds": progress.elapsed,
        "budget_s": args.budget_s,
        "phases": phases,
        "cubin_layout": layout,
        "kernel": kernel,
        "verify_table": {
            "path": str(table_path),
            "model_shape": plan.shape.name,
            "params": plan.shape.params,
            "context": plan.context,
            "cuda_graphs": not args.dry_run,
            "cells": [{"batch_size": c.batch_size, "tokens_per_request": c.tokens_per_request, "seconds": c.seconds,
                       "repeats": c.repeats, "spread": c.spread} for c in cells],
            "skipped": [list(s) for s in skipped],
        },
        "roofline": roofline_check.comparison_to_dict(comparison),
    }
    roof = report["roofline"]
    report["checks"] = {
        "cubin_layout": None if layout is None else True,
        "kernel": kernel["passed"],
        "verify_table_complete": not skipped,
        # the datasheet profile within 15%, or a refit within 15% on the held-out half; a
        # CPU's step times say nothing of a GPU's roofline, so the dry run does not judge it
        "roofline": None if args.dry_run else (
            roof["within_tolerance"] or bool(roof["refit"] and roof["refit"]["within_tolerance_held_out"])),
    }
    report["passed"] = all(v is not False for v in report["checks"].values())
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_checks.json and the table")
    parser.add_argument("--cubin", type=Path, help="folder of cubins from `make gpu-checks-prepare` (no DSL needed)")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU (make test)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S,
                        help="stop measuring new batch sizes past this many seconds (default 480)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("gpu_checks: torch is not installed", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        report = run(args)
    except kernel_gpu.KernelCheckError as exc:
        print(f"gpu_checks: {exc}", file=sys.stderr)
        return 2
    (args.out / "gpu_checks.json").write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(summary_lines(report)))
    failed = [k for k, v in report["checks"].items() if v is False]
    print("all checks passed" if not failed else f"FAILED: {', '.join(failed)}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
