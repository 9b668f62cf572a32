"""Time to handle the real 84 KB vLLM 0.33.0 /metrics page: specdec's parse vs a full parse.

    python benchmarks/parse_page.py [--page PATH] [--repeat N]

Prints milliseconds per page (best of several rounds, so other load on the machine
inflates the figures less): the line filter alone, ``parse_metrics_page`` (filter + its
regex reading of the kept lines + snapshots), prometheus-client on the spec-decode lines
alone, the line filter + prometheus-client on the kept lines (the target: the parse at or
below it), and prometheus-client's parse of the whole page.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from acceptance.parse import filter_metrics_lines, parse_metrics_page

DEFAULT_PAGE = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm-golden" / "exposition_gamma3_full_metrics_page.txt"


def best_ms(fn, repeat: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t) / repeat)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--page", type=Path, default=DEFAULT_PAGE)
    ap.add_argument("--repeat", type=int, default=100)
    args = ap.parse_args()
    text = args.page.read_text()
    kept = filter_metrics_lines(text)
    spec_only = "\n".join(line for line in kept if line.startswith("vllm:spec_decode"))
    n_lines = text.count("\n")

    rows = [
        ("line filter (regex)", best_ms(lambda: filter_metrics_lines(text), args.repeat)),
        ("parse_metrics_page (filter + parse + snapshots)", best_ms(lambda: parse_metrics_page(text), args.repeat)),
        ("prometheus-client, spec-decode lines only", best_ms(lambda: list(text_string_to_metric_families(spec_only)), args.repeat)),
        ("line filter + prometheus-client on the kept lines",
         best_ms(lambda: list(text_string_to_metric_families("\n".join(filter_metrics_lines(text)))), args.repeat)),
        ("prometheus-client, whole page", best_ms(lambda: list(text_string_to_metric_families(text)), max(5, args.repeat // 10))),
    ]
    print(f"page: {args.page.name}, {len(text.encode()) / 1024:.1f} KiB, {n_lines} lines; "
          f"kept {len(kept)} lines ({spec_only.count(chr(10)) + 1} spec-decode)")
    width = max(len(name) for name, _ in rows)
    for name, ms in rows:
        print(f"  {name:<{width}}  {ms:8.3f} ms")
    full, ours, client = rows[4][1], rows[1][1], rows[3][1]
    print(f"  speed-up of parse_metrics_page over the full parse: {full / ours:.1f}x; "
          f"against filter + prometheus-client on the kept lines: {client / ours:.2f}x")


if __name__ == "__main__":
    main()
