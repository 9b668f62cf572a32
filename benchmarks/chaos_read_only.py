"""The chaos run's read-only store: the run's store, closed by its last collector, on a file
system made read-only for real — its folder bind-mounted over itself and remounted read-only
in a mount namespace of the process's own (`unshare -m`, root), so the host's mounts are
untouched and the mount ends with the process.

Inside it: tune-gamma --json on each route (the readers) must read what a run on the writable
store reads — compared field by field with a run just before and one just after, on the
fields those two agree on (the window's end moves with the clock) — and `collect --once` and
`ingest` (the writers) must exit 2 in one line naming the store as read-only. Every file of the
folder is hashed before and after: nothing may change.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

INSIDE = r"""
import json, subprocess, sys
bin_dir, cfg, per_request, routes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return {"exit": done.returncode, "out": done.stdout, "err": done.stderr}
said = {f"tune-gamma {r}": run([f"{bin_dir}/tune-gamma", "--route", r, "--config", cfg, "--window", "1h", "--json"])
        for r in routes}
said["collect --once"] = run([f"{bin_dir}/specdec", "collect", "--config", cfg, "--once"])
said["ingest"] = run([f"{bin_dir}/specdec", "ingest", "--route", routes[0], "--per-request", per_request,
                      "--config", cfg])
print(json.dumps(said))
"""


def hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def tune(bin_dir: Path, cfg: Path, route: str) -> dict | None:
    done = subprocess.run([str(bin_dir / "tune-gamma"), "--route", route, "--config", str(cfg), "--window", "1h",
                           "--json"], capture_output=True, text=True, timeout=300)
    return json.loads(done.stdout) if done.returncode == 0 else None


def differences(a: object, b: object, where: str = "") -> list[str]:
    """The paths at which two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [where or "."]


def read_only_store(folder: Path, cfg: Path, routes: list[str], per_request: Path) -> dict:
    """The check of the module docstring on the store in ``folder``; ``routes`` read from it."""
    if shutil.which("unshare") is None:
        return {"run": False, "why": "unshare (util-linux) is not installed"}
    bin_dir = Path(sys.executable).parent
    before = {r: tune(bin_dir, cfg, r) for r in routes}
    files = hashes(folder)
    script = folder.parent / "read-only-inside.py"
    script.write_text(INSIDE)
    shell = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec {sys.executable} "
             f"{script} {bin_dir} {cfg} {per_request} {' '.join(routes)}")
    done = subprocess.run(["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"run": False, "why": f"a private read-only mount failed: {done.stderr.strip()[-300:]}"}
    said = json.loads(done.stdout.splitlines()[-1])
    unchanged = hashes(folder) == files
    after = {r: tune(bin_dir, cfg, r) for r in routes}
    out: dict = {"run": True, "store_files": len(files), "unchanged": unchanged, "readers": {}, "writers": {}}
    for r in routes:
        got = said[f"tune-gamma {r}"]
        read = json.loads(got["out"]) if got["exit"] == 0 else None
        moving = set(differences(before[r], after[r])) if before[r] is not None and after[r] is not None else set()
        differ = [d for d in differences(before[r], read) if d not in moving] if read is not None else ["(no answer)"]
        out["readers"][r] = {"exit": got["exit"], "fields_compared": _leaves(read) - len(moving) if read else 0,
                             "fields_differing": differ[:5], "exact": got["exit"] == 0 and not differ,
                             "said": got["err"].strip().splitlines()[-1][:200] if got["err"].strip() else ""}
    for w in ("collect --once", "ingest"):
        got = said[w]
        lines = [line for line in got["err"].splitlines() if line.strip()]
        out["writers"][w] = {"exit": got["exit"], "lines": len(lines), "said": lines[-1][:300] if lines else "",
                             "held": got["exit"] == 2 and len(lines) == 1 and "read-only" in lines[0]
                             and "internal error" not in lines[0]}
    out["held"] = (unchanged and all(r["exact"] for r in out["readers"].values())
                   and all(w["held"] for w in out["writers"].values()))
    return out


def _leaves(doc: object) -> int:
    if isinstance(doc, dict):
        return sum(_leaves(v) for v in doc.values())
    if isinstance(doc, list):
        return sum(_leaves(v) for v in doc)
    return 1
