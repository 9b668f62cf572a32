"""`specdec calibrate`: measure step costs on a benchmark deployment (model/calibrate.py).

    specdec calibrate plan --model CHECKPOINT --survival A1,A2,... [--gammas 0,1,2,3]
        [--batch-sizes 1,2,4,8] [--method M] [--decode-backend B] [--tensor-parallel-size N]
        [--result-dir DIR] [--port P] [--json]
    specdec calibrate ingest RESULTS... [--out cost_table.csv] [--method M] [--draft-cost R]
        [--draft-overhead C0] [--json]

`plan` prints the vLLM servers (synthetic acceptance — a benchmark deployment only,
never a serving one: it corrupts outputs) and the `vllm bench serve` runs; `ingest` turns
their `--save-result` JSON files into the measured cost table (`cost_profile = "<path>"`).
Bad input: one line on stderr naming it, exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from .args import float_list


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "calibrate",
        help="measure step costs per γ and batch size on a benchmark deployment",
        description=__doc__.split("\n\n")[0],
    )
    sub = parser.add_subparsers(dest="calibrate_command", required=True)
    plan = sub.add_parser("plan", help="print the benchmark servers and `vllm bench serve` runs")
    plan.add_argument("--model", required=True, help="the checkpoint the benchmark server loads")
    plan.add_argument("--survival", required=True, type=float_list, metavar="A1,A2,...",
                      help="the route's survival curve, replayed as synthetic_acceptance_rates")
    plan.add_argument("--gammas", type=_ints, default=None, metavar="G1,G2,...",
                      help="candidate γs (γ = 0 is always added; default 0..observed γ + 2, within the drafter's block)")
    plan.add_argument("--batch-sizes", type=_ints, default=[1, 2, 4, 8, 16, 32, 64], metavar="B1,B2,...")
    plan.add_argument("--method", default=None, help="vLLM speculative method (default dspark, said as a default)")
    plan.add_argument("--decode-backend", default="auto", choices=("auto", "latency_specialized"))
    plan.add_argument("--tensor-parallel-size", type=int, default=None,
                      help="the deployment's TP size (default 16, Kimi K3 on GB300, said as a default)")
    plan.add_argument("--result-dir", default="specdec-calibration")
    plan.add_argument("--port", type=int, default=8000)
    plan.add_argument("--json", action="store_true", help="print one JSON document")
    ingest = sub.add_parser("ingest", help="turn `vllm bench serve --save-result` files into the cost table")
    ingest.add_argument("results", nargs="+", metavar="RESULTS")
    ingest.add_argument("--out", default=None, help="write the table here (CSV); default: print it")
    ingest.add_argument("--method", default=None, help="the drafter the runs used (default dspark, said as a default)")
    ingest.add_argument("--draft-cost", type=float, default=None,
                        help="draft cost subtracted from each step (r, or c per token; default 0.10)")
    ingest.add_argument("--draft-overhead", type=float, default=None,
                        help="c0 of a sequential drafter; an ngram or suffix proposer's time per step")
    ingest.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(fn=run)
    return parser


def _given(args, keys: tuple[str, ...]) -> tuple[dict[str, object], list[str]]:
    """The flags' values, the Deployment's defaults in for those not given, and the defaults
    named: a figure the user did not give is said as one (the plan's servers and the table's
    draft time rest on it)."""
    from dataclasses import fields

    from model.deployment import Deployment

    defaults = {f.name: f.default for f in fields(Deployment)}
    values, named = {}, []
    for key in keys:
        given = getattr(args, key)
        values[key] = defaults[key] if given is None else given
        if given is None:
            named.append(f"--{key.replace('_', '-')} {defaults[key]}")
    return values, named


def _on_defaults(named: list[str]) -> str:
    return (f"on defaults ({', '.join(named)}: Kimi K3's): give the deployment's own values if it differs"
            if named else "")


def _plan(args) -> dict | str:
    from model.calibrate import calibration_plan, format_plan
    from model.deployment import Deployment

    values, named = _given(args, ("method", "tensor_parallel_size"))
    deployment = Deployment(method=values["method"], decode_backend=args.decode_backend,
                            tensor_parallel_size=values["tensor_parallel_size"])
    plan = calibration_plan(deployment, args.survival, model=args.model, gammas=args.gammas,
                            batch_sizes=args.batch_sizes, result_dir=args.result_dir, port=args.port)
    if not args.json:
        return "\n".join(filter(None, [_on_defaults(named), format_plan(plan)]))
    return {**asdict(plan), "defaults": named}


def _ingest(args) -> dict | str:
    from model.calibrate import ingest_results, table_csv
    from model.deployment import Deployment

    from model.drafters import FREE, PARALLEL, drafter_for

    method, named = _given(args, ("method",))
    kind = drafter_for(str(method["method"])).kind
    # the drafter's own price: an ngram or suffix proposer's is draft_overhead, a parallel drafter's
    # draft_cost, a sequential one's both; the keys it does not read are not named
    keys = {FREE: ("draft_overhead",), PARALLEL: ("draft_cost",)}.get(kind, ("draft_cost", "draft_overhead"))
    price, named_price = _given(args, ("draft_cost", "draft_overhead"))
    named += [n for n in named_price if n.split()[0][2:].replace("-", "_") in keys]
    deployment = Deployment(method=str(method["method"]), draft_cost=float(str(price["draft_cost"])),
                            draft_overhead=float(str(price["draft_overhead"])))
    result = ingest_results(args.results, deployment, out=args.out)
    if args.json:
        return {
            "defaults": named,
            "method": result.method,
            "draft_cost": result.draft_cost,
            "out": args.out,
            "runs": [asdict(s) for s in result.steps],
            "rows": [asdict(r) for r in result.rows],
        }
    if args.out is None:  # the table alone on stdout (a CSV to redirect); the defaults on stderr
        if named:
            print(_on_defaults(named), file=sys.stderr)
        return table_csv(result.rows).rstrip("\n")
    return (("" if not named else _on_defaults(named) + "\n") + f"{len(result.rows)} rows from {len(result.steps)} runs written to {args.out} "
            f"(draft time of {result.method}, draft_cost {result.draft_cost:g}, subtracted); "
            f'use it with cost_profile = "{args.out}"')


def run(args) -> int:
    """Plan or ingest (bad input raises a one-line ValueError: specdec.cli prints it, exit 2)."""
    from .args import dump_json

    out = _plan(args) if args.calibrate_command == "plan" else _ingest(args)
    if isinstance(out, dict):
        dump_json(out)
    else:
        print(out)
    return 0
