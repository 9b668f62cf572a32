"""docs/schema/*.schema.json, generated from specdec/json_documents.py (specdec.json_schema).

The JSON Schemas of the tune-gamma document and of the deployment document: the TypedDicts
the producers return, as JSON Schema draft 2020-12.

    python scripts/json_schema.py           # write docs/schema/tune-gamma.schema.json, deployment.schema.json
    python scripts/json_schema.py --check   # exit 1, with a diff, when a committed file differs
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from specdec.json_schema import schema_texts, stale_files

ROOT = Path(__file__).resolve().parents[1]


def check(root: Path = ROOT) -> list[str]:
    """The unified diff of every committed schema file against the generated one ([] when all match)."""
    texts = schema_texts()
    diff: list[str] = []
    for path in stale_files(root):
        committed = (root / path).read_text(encoding="utf-8") if (root / path).is_file() else ""
        diff += difflib.unified_diff(committed.splitlines(), texts[path].splitlines(), f"{path} (committed)",
                                     f"{path} (generated)", lineterm="")
    return diff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed schema is not what the code gives")
    args = ap.parse_args(argv)
    if args.check:
        diff = check()
        if diff:
            print("\n".join(diff[:200]))
            print("docs/schema/ differs from specdec/json_documents.py: run python scripts/json_schema.py",
                  file=sys.stderr)
            return 1
        return 0
    for path, text in schema_texts().items():
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / path).write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
