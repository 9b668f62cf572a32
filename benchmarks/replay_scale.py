"""tune-gamma on a week of a busy route's per-request rows, replayed at every γ (target: 150,000
requests in under 10 s end to end).

Builds stores of one route's per-request ``detailed`` rows as ``specdec ingest --per-request``
stores them: n-gram-like requests of about 70 drafted steps (Poisson), each in runs of
copied text (tokens accepted with 0.9) and novel text (0.3), a share of the drafts shorter
than γ (the lookup found fewer tokens; 10%, as ngram's at γ 7 on structured text in
benchmarks/real_sweep.py, and 25% in one harder case: the replay's cost grows with how varied
the steps are), and a few steps without a draft per request (decode tokens beyond D + A). Then times ``tune-gamma --route chat --db … --window 30d --json`` as a
user runs it (a fresh process: interpreter start, imports, store read, estimate, replay at
every candidate γ once per tail model, recommendation), median of ``--repeat``, and one
in-process run with the time spent in each stage. Prints a table and writes
benchmarks/results/replay-scale.json.

    .venv/bin/python benchmarks/replay_scale.py [--sizes 2000,10000,150000] [--gammas 3,5,7]
        [--harder 0.25] [--repeat 3] [--keep DIR] [--old COMMIT [--old-size 2000]]

``--old COMMIT`` also times that commit's tune-gamma (its whole tree, from ``git archive``) on
the ``--old-size`` store once: the pure-Python replay took minutes there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "replay-scale.json"
ROUTE = "chat"
SHORT = 0.1  # the share of drafts shorter than γ
CONFIG = '[deployment]\nmethod = "ngram"\ncost_profile = "flat"\n'
# Runs a tune-gamma from another tree: the editable install's finder would import this one.
_OTHER_TREE = """import sys
tree = sys.argv[1]
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, tree)
from specdec.cli import tune_gamma_main
sys.exit(tune_gamma_main(sys.argv[2:]))
"""


def request_steps(rng: np.random.Generator, n: int, gamma: int, short: float) -> list[tuple[list[int], list[int]]]:
    """(drafted, accepted) per step of ``n`` n-gram-like requests at ``gamma``, a ``short`` share
    of the drafts shorter than γ (module docstring)."""
    lengths = np.maximum(5, rng.poisson(70, n))
    width = int(lengths.max())
    good = np.empty((n, width), dtype=bool)
    good[:, 0] = rng.random(n) < 0.5
    for s in range(1, width):  # runs of copied text of ~10 steps, of novel text of ~5
        good[:, s] = np.where(good[:, s - 1], rng.random(n) >= 0.1, rng.random(n) < 0.2)
    drafted = np.where(rng.random((n, width)) < short, rng.integers(1, max(gamma, 2), (n, width)), gamma)
    drafted = np.minimum(drafted, gamma)
    accepted = np.zeros((n, width), dtype=np.int64)
    alive = np.ones((n, width), dtype=bool)
    p = np.where(good, 0.9, 0.3)
    for k in range(gamma):  # the accepted prefix: each token in turn, up to the draft's length
        alive &= (rng.random((n, width)) < p) & (k < drafted)
        accepted += alive
    return [(drafted[i, :lengths[i]].tolist(), accepted[i, :lengths[i]].tolist()) for i in range(n)]


def build(path: Path, n: int, gamma: int, short: float, seed: int = 0) -> float:
    """A store of ``n`` requests of the route at ``gamma``, the last a minute ago; seconds taken."""
    from acceptance.per_request import spec_counts_from_payload
    from acceptance.store import IngestedRow, Store

    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    end = time.time() - 60.0
    rows = []
    for i, (drafted, accepted) in enumerate(request_steps(rng, n, gamma, short)):
        spec = {"acceptance_histogram": np.bincount(accepted, minlength=gamma + 1).tolist(), "num_spec_tokens": gamma,
                "num_draft_tokens": sum(drafted), "per_step_drafted": drafted, "per_step_accepted": accepted}
        undrafted = int(rng.poisson(2.0))
        rows.append(IngestedRow(end - (n - i) * 4.0, spec_counts_from_payload(spec), f"req-{i}", mean_itl_s=0.012,
                                decode_tokens=len(drafted) + sum(accepted) + undrafted,
                                steps=(tuple(drafted), tuple(accepted))))
    with Store.open(path) as store:
        store.ingest(ROUTE, "per-request", rows)
    return time.perf_counter() - started


def tune_argv(folder: Path, db: Path) -> list[str]:
    return ["--route", ROUTE, "--config", str(folder / "specdec.toml"), "--db", str(db), "--window", "30d", "--json"]


def time_cli(command: list[str], repeat: int) -> tuple[list[float], dict]:
    """Seconds of each of ``repeat`` runs of ``command`` in a fresh process, and its last JSON."""
    seconds, out = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        out = subprocess.run(command, capture_output=True, text=True)
        seconds.append(time.perf_counter() - started)
        if out.returncode != 0:
            raise SystemExit(f"tune-gamma failed: {out.stderr.strip()[-2000:]}")
    return seconds, json.loads(out.stdout)


def stages(folder: Path, db: Path) -> dict[str, float]:
    """One in-process tune: seconds in the whole pipeline and in the stages that scale with the
    requests (each wrapped where its caller looks it up; a stage a refactor moved reads 0)."""
    import importlib

    from acceptance.store import Store
    from specdec.config import load_config
    from specdec.pipeline import tune_route

    # the modules themselves (``import a.b as c`` would give a package attribute of that name)
    estimates, ingested_window, ingest, recommend = (importlib.import_module(m) for m in (
        "acceptance.estimates", "acceptance.ingested_window", "acceptance.store.ingest", "model.recommend"))
    spent: dict[str, float] = {}
    wrapped: list[tuple[object, str, object]] = []  # put back after the run: each run times only itself

    def wrap(owner, name: str, label: str) -> None:
        fn = getattr(owner, name, None)
        if fn is None:
            return
        wrapped.append((owner, name, fn))

        def timed_call(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - started

        setattr(owner, name, timed_call)

    wrap(ingest._Ingested, "ingested_step_sequences", "read the steps (store)")
    wrap(ingested_window, "_request_window", "read the request window (store, steps included)")
    wrap(estimates, "circular_block_sums", "block bootstrap of the survival curve (acceptance.bootstrap)")
    wrap(recommend, "survival_and_reach", "survival and reach of the steps")
    wrap(recommend, "replay_by_gamma", "replay at every γ, per tail model")
    wrap(recommend, "resampled_tokens", "bootstrap of the replayed requests")
    config = load_config(folder / "specdec.toml")
    started = time.perf_counter()
    try:
        with Store.open(db) as store:
            tune_route(config, ROUTE, store=store, window_s=30 * 86400)
    finally:
        for owner, name, fn in wrapped:
            setattr(owner, name, fn)
    spent["whole pipeline, in process"] = time.perf_counter() - started
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,10000,150000", help="requests per store, at γ 5")
    ap.add_argument("--gammas", default="3,7", help="other deployed γ, at the largest size")
    ap.add_argument("--harder", type=float, default=0.25,
                    help="the share of short drafts of one more case at the largest size and γ 5 (0: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="build stores into (or reuse them from) this folder")
    ap.add_argument("--old", help="also time this commit's tune-gamma once (e.g. the commit before the array replay)")
    ap.add_argument("--old-size", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()

    sizes = [int(s) for s in args.sizes.split(",") if s]
    cases = ([(n, 5, SHORT) for n in sizes] + [(max(sizes), int(g), SHORT) for g in args.gammas.split(",") if g]
             + ([(max(sizes), 5, args.harder)] if args.harder else []))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="specdec-replay-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "specdec.toml").write_text(CONFIG)
    tune_gamma = str(Path(sys.executable).with_name("tune-gamma"))
    runs = []
    for n, gamma, short in cases:
        db = folder / f"requests-{n}-gamma-{gamma}-short-{short:g}.db"
        built = None if db.exists() else build(db, n, gamma, short)
        load = os.getloadavg()[0]  # the machine is shared: say how busy it was
        seconds, doc = time_cli([tune_gamma, *tune_argv(folder, db)], args.repeat)
        run = {"requests": n, "gamma": gamma, "short_drafts": short, "drafts": doc["observed"]["drafts"],
               "acceptance_model": doc.get("acceptance_model"), "build_s": built,
               "tune_gamma_s": {"median": statistics.median(seconds), "min": min(seconds), "all": seconds},
               "stages_s": stages(folder, db), "load_average_1min_before": load,
               "recommended_gamma": doc.get("recommended_gamma"),
               "decision": doc.get("decision")}
        runs.append(run)
        print(f"{n:>8,} requests  γ {gamma}  {short:4.0%} short  {run['drafts']:>12,.0f} drafts  tune-gamma median "
              f"{run['tune_gamma_s']['median']:6.2f} s  (min {run['tune_gamma_s']['min']:.2f} s)", flush=True)
        for label, s in sorted(run["stages_s"].items(), key=lambda kv: -kv[1]):
            print(f"{'':12}{s:7.2f} s  {label}")
    old = None
    if args.old:
        old = time_old(args.old, folder, args.old_size)
        print(f"{args.old_size:>8,} requests  γ 5  {SHORT:4.0%} short  old code ({args.old[:10]}): "
              f"{old['tune_gamma_s']:.1f} s, once")
    doc = {"benchmark": "replay_scale", "machine": f"{platform.processor() or platform.machine()}, "
           f"{os.cpu_count()} cores", "python": platform.python_version(), "numpy": np.__version__,
           "runs": runs, "old_code": old or previous_old(args.out)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")


def time_old(commit: str, folder: Path, n: int) -> dict:
    """tune-gamma of ``commit``'s tree on the ``n``-request γ 5 store, once."""
    db = folder / f"requests-{n}-gamma-5-short-{SHORT:g}.db"
    if not db.exists():
        build(db, n, 5, SHORT)
    with tempfile.TemporaryDirectory(prefix="specdec-old-") as tree:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        seconds, doc = time_cli([sys.executable, "-c", _OTHER_TREE, tree, *tune_argv(folder, db)], 1)
    return {"commit": commit, "requests": n, "gamma": 5, "short_drafts": SHORT, "tune_gamma_s": seconds[0],
            "drafts": doc["observed"]["drafts"]}


def previous_old(path: Path) -> dict | None:
    """The old code's figure of an earlier run (timing it again takes minutes)."""
    try:
        return json.loads(path.read_text()).get("old_code")
    except (OSError, ValueError):
        return None


if __name__ == "__main__":
    main()
