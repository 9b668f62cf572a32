"""`specdec replay`: offline acceptance of a drafter from recorded target and draft logits.

    specdec replay --target-logits FILE --draft-logits FILE [--temperature T] [--gamma G] [--json]

FILE: .npy, .npz or .safetensors holding [positions, vocab] (one sequence) or
[sequences, positions, vocab]; bf16 safetensors are widened to float32. Prints the greedy
replay (exact) and the sampling replay at T (approximate, expected counts); see
kernels/replay.py. Bad input: one line on stderr naming the file, exit code 2.
"""

from __future__ import annotations

import argparse

DEFAULT_GAMMA = 3
DEFAULT_TEMPERATURE = 1.0


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "replay",
        help="acceptance of a drafter replayed offline from target and draft logits",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--target-logits", required=True, metavar="FILE", help=".npy, .npz or .safetensors")
    parser.add_argument("--draft-logits", required=True, metavar="FILE", help="same shape as the target's")
    parser.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE,
                        help=f"sampling temperature T > 0 (default {DEFAULT_TEMPERATURE})")
    parser.add_argument("--gamma", type=int, default=DEFAULT_GAMMA,
                        help=f"draft tokens per draft (default {DEFAULT_GAMMA})")
    parser.add_argument("--backend", default="auto", choices=("auto", "cute", "torch", "numpy"),
                        help="implementation of the per-row acceptance (default: CuTe on a GPU, else torch, else NumPy)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(fn=run)
    return parser


def _document(args, result) -> dict:
    return {
        "target_logits": str(args.target_logits),
        "draft_logits": str(args.draft_logits),
        "gamma": result.greedy.gamma,
        "temperature": float(args.temperature),
        "backend": result.backend,
        "sequences": result.greedy.sequences,
        "positions": result.greedy.positions,
        "greedy_agreement": result.greedy_agreement,
        "mean_expected_acceptance": result.mean_expected_acceptance,
        "greedy": result.greedy.as_dict(),
        "sampling": result.sampling.as_dict(),
    }


def _table(doc: dict) -> str:
    g, s = doc["greedy"], doc["sampling"]

    def f(x, fmt="{:.3f}"):
        return "-" if x is None else fmt.format(x)

    lines = [
        f"replay: {doc['sequences']} sequence(s), {doc['positions']} positions, gamma {doc['gamma']}, "
        f"{g['drafts']} drafts, backend {doc['backend']}",
        f"{'':<24}{'greedy (exact)':>16}{'T=' + format(doc['temperature'], 'g') + ' (approx.)':>20}",
    ]
    for k in range(doc["gamma"]):
        lines.append(f"{'survival a_' + str(k + 1):<24}{f(g['survival'][k]):>16}{f(s['survival'][k]):>20}")
    for key, label in (("mean_acceptance_length", "mean acceptance length"),
                       ("draft_acceptance_rate", "draft acceptance rate"),
                       ("equivalent_p", "equivalent p")):
        lines.append(f"{label:<24}{f(g[key]):>16}{f(s[key]):>20}")
    lines.append("sampling: " + s["note"])
    return "\n".join(lines)


def run(args) -> int:
    """Load both files, replay, print (bad input raises a one-line ValueError naming the
    file: specdec.cli prints it, exit 2)."""
    from kernels.logits_io import load_logits
    from kernels.replay import replay_logits
    from kernels.rows import check_temperature

    from .args import dump_json

    check_temperature(args.temperature)
    target = load_logits(args.target_logits)
    draft = load_logits(args.draft_logits)
    names = (f"target logits {args.target_logits}", f"draft logits {args.draft_logits}")
    result = replay_logits(target, draft, temperature=args.temperature, gamma=args.gamma,
                           backend=getattr(args, "backend", "auto"), names=names)
    doc = _document(args, result)
    if args.json:
        dump_json(doc)
    else:
        print(_table(doc))
    return 0
