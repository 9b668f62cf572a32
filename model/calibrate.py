"""Measured step costs: the benchmark plan that measures them, and the ingest that turns
the benchmark's results into the cost table ``model.profiles.load_table`` reads.

Plan (``calibration_plan``). For each candidate γ one vLLM server — on a BENCHMARK
deployment only: ``rejection_sample_method: "synthetic"`` forces accept decisions and
corrupts outputs — with the route's acceptance replayed through
``synthetic_acceptance_rates`` = a_1..a_γ (non-increasing; past the observed γ the median
of model.extrapolate's tail models; by default the plan goes DEFAULT_PAST_OBSERVED
positions past it, and the table's linear extension prices the rest), and γ = 0 (no
``--speculative-config``). Against each server, one ``vllm bench serve`` run per batch
size B: random prompts (their lengths and number: ``BenchWorkload``), ``--ignore-eos``,
``--max-concurrency B`` (B requests decode together), ``--save-result`` with
``--metadata`` naming γ, B and the path so the result identifies itself.
``--stream-interval 1`` on the server makes every engine step one streamed chunk, so the
inter-token latency (ITL) of a chunk is one step.

Ingest (``ingest_results``). From each result file (vLLM 0.33's ``--save-result`` JSON,
vllm/benchmarks/serve.py: the run's setup keys, ``--metadata`` keys at top level, then the
benchmark's metrics such as ``median_itl_ms``; ``--append-result`` files hold one object
per line) the measured step time at (B, γ) is
  t(B, γ) = median ITL                       (one chunk = one step)
and it includes the drafter. The cost model adds T_draft itself (docs/MODEL.md, Cost model:
S = AL·T(B,1) / (T(B,γ+1) + T_draft(B,γ))), so the table stores the target part
  T_target(B, γ+1) = t(B, γ) − f_draft(γ)·T_stock(B, 1),   T_stock(B, 1) = t(B, 0) (stock)
with f_draft the deployment's drafter factor (r, γ·c + c0, or 0): the model then gives
back exactly the measured step times. Rows: ``batch_size,tokens_per_request,path,seconds``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .deployment import Deployment, ModelInputError
from .drafters import drafter_for
from .extrapolate import extend_survival
from .profiles import SPECIALIZED, STOCK, TABLE_COLUMNS
from .vllm_config import SYNTHETIC_WARNING, replay_speculative_config
from acceptance.definitions import monotone_survival
from acceptance.specialized_steps import runs_specialized

DEFAULT_PAST_OBSERVED = 2  # servers past the observed γ in a plan without --gammas: each is a benchmark run

# --metadata keys the plan puts on every run; vLLM writes them at the result's top level.
META_GAMMA = "specdec_gamma"
META_BATCH_SIZE = "specdec_batch_size"
META_PATH = "specdec_path"

# Keys every `vllm bench serve --save-result` file of vLLM 0.33 has (setup and metrics).
BENCH_RESULT_KEYS = ("date", "backend", "model_id", "num_prompts", "max_concurrency", "duration", "completed")
STEP_TIME_KEY = "median_itl_ms"

PLAN_WARNING = (
    "BENCHMARK DEPLOYMENT ONLY — never a serving one: " + SYNTHETIC_WARNING + "."
)
TABLE_HEADER = TABLE_COLUMNS  # the measured table is written with the columns profiles reads


class CalibrationInputError(ModelInputError):
    """A result file or plan input that cannot be used; one line naming it."""


# --------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerConfig:
    """One benchmark server: γ, its speculative config (None: speculation off), the
    synthetic rates it replays, whether they are extrapolated past the observed γ."""

    gamma: int
    decode_backend: str
    speculative_config: dict[str, object] | None
    synthetic_acceptance_rates: tuple[float, ...]
    extrapolated: bool
    serve_command: str


@dataclass(frozen=True)
class BenchRun:
    """One ``vllm bench serve`` run: γ, batch size B, the path its steps take, its result file."""

    gamma: int
    batch_size: int
    path: str
    result_file: str
    bench_command: str
    server: int  # index into CalibrationPlan.servers


@dataclass(frozen=True)
class BenchWorkload:
    """What each ``vllm bench serve`` run sends: random prompts of ``input_len`` tokens, each
    decoding ``output_len`` tokens (``--ignore-eos``), ``rounds`` prompts per concurrent slot."""

    input_len: int = 32
    output_len: int = 512
    rounds: int = 4


@dataclass(frozen=True)
class CalibrationPlan:
    model: str
    warning: str
    servers: tuple[ServerConfig, ...]
    runs: tuple[BenchRun, ...]
    result_dir: str


def _synthetic_rates(survival: np.ndarray, gamma: int) -> tuple[tuple[float, ...], bool]:
    g = survival.size
    if gamma <= g:
        rates, extrapolated = survival[:gamma], False
    else:
        tails = extend_survival(survival, gamma - g)  # (tail models, γ)
        rates, extrapolated = np.median(tails, axis=0), True
    rates = monotone_survival(rates)  # vLLM requires non-increasing
    return tuple(round(float(r), 6) for r in rates), extrapolated


def _check_list(values: Sequence[int], what: str, low: int) -> tuple[int, ...]:
    out = []
    for v in values:
        if isinstance(v, bool) or int(v) != v or v < low:
            raise CalibrationInputError(f"{what}: {v!r} is not an integer ≥ {low}")
        out.append(int(v))
    if not out:
        raise CalibrationInputError(f"{what}: at least one value is needed")
    return tuple(sorted(set(out)))


def calibration_plan(
    deployment: Deployment,
    survival: Sequence[float],
    *,
    model: str,
    gammas: Sequence[int] | None = None,
    batch_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    result_dir: str = "specdec-calibration",
    port: int = 8000,
    workload: BenchWorkload = BenchWorkload(),
) -> CalibrationPlan:
    """The servers and runs that measure T(B, γ) for the candidate γs (default 0..observed
    γ + 2, within the drafter's limit) and batch sizes, each run sending ``workload``; γ = 0
    is always included (the stock pass, the unit of the draft cost)."""
    from acceptance.definitions import check_survival_curve

    from .specialized import specialized_refusal

    a = np.asarray(survival, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise CalibrationInputError("survival: a non-empty curve a_1..a_γ is needed")
    check_survival_curve(a, "survival", CalibrationInputError)
    if not 1 <= port <= 65535:
        raise CalibrationInputError(f"port: must be 1..65535, got {port}")
    drafter = drafter_for(deployment.method)
    if gammas is None:
        top = a.size + DEFAULT_PAST_OBSERVED
        if drafter.max_gamma is not None:
            top = min(top, drafter.max_gamma)
        gammas = range(0, top + 1)
    gs = _check_list([0, *gammas], "gammas", 0)
    bs = _check_list(batch_sizes, "batch sizes", 1)
    for g in gs:
        if (why := drafter.refusal(g)) is not None:
            raise CalibrationInputError(f"gammas: {g}: {why}")
    specialized = deployment.decode_backend == "latency_specialized"
    if specialized:
        for g in gs:
            if g and (why := specialized_refusal(deployment.method, g)) is not None:
                raise CalibrationInputError(f"gammas: {g} on decode_backend latency_specialized: {why}")
    servers: list[ServerConfig] = []
    runs: list[BenchRun] = []
    quoted_model = shlex.quote(model)

    def serve(gamma: int, backend: str, spec: dict[str, object] | None) -> str:
        parts = [f"vllm serve {quoted_model}", f"--port {port}", "--stream-interval 1",
                 f"--tensor-parallel-size {deployment.tensor_parallel_size}"]
        if spec is not None:
            parts.append("--speculative-config " + shlex.quote(json.dumps(spec, separators=(",", ":"))))
        if backend == "latency_specialized":
            parts.append("--additional-config " + shlex.quote('{"decode_backend":"latency_specialized"}'))
        return " ".join(parts)

    def bench(gamma: int, b: int, path: str, tag: str) -> BenchRun:
        fname = f"specdec-{tag}-g{gamma}-b{b}.json"
        cmd = " ".join([
            f"vllm bench serve --model {quoted_model} --port {port}",
            f"--dataset-name random --random-input-len {workload.input_len} "
            f"--random-output-len {workload.output_len} --ignore-eos",
            f"--max-concurrency {b} --num-prompts {workload.rounds * b} --request-rate inf",
            "--percentile-metrics ttft,tpot,itl",
            f"--save-result --result-dir {shlex.quote(result_dir)} --result-filename {fname}",
            f"--metadata {META_GAMMA}={gamma} {META_BATCH_SIZE}={b} {META_PATH}={path}",
        ])
        return BenchRun(gamma, b, path, str(Path(result_dir) / fname), cmd, len(servers) - 1)

    if specialized:
        # The draft cost is measured against the stock pass: measure it on the stock path.
        servers.append(ServerConfig(0, "auto", None, (), False, serve(0, "auto", None)))
        runs.extend(bench(0, b, STOCK, "stock") for b in bs)
    for g in gs:
        rates, extrapolated = _synthetic_rates(a, g) if g else ((), False)
        spec = replay_speculative_config(deployment, rates) if g else None
        backend = deployment.decode_backend
        servers.append(ServerConfig(g, backend, spec, rates, extrapolated, serve(g, backend, spec)))
        for b in bs:
            path = SPECIALIZED if specialized and runs_specialized(b, g + 1, deployment.cudagraph_capture_sizes) else STOCK
            if specialized and g == 0 and path == STOCK:
                continue  # measured on the stock server above
            runs.append(bench(g, b, path, "spec" if specialized else "stock"))
    return CalibrationPlan(model, PLAN_WARNING, tuple(servers), tuple(runs), result_dir)


def format_plan(plan: CalibrationPlan) -> str:
    lines = [f"!! {plan.warning}", ""]
    for i, server in enumerate(plan.servers, start=1):
        what = "speculation off" if server.gamma == 0 else f"γ = {server.gamma}"
        if server.synthetic_acceptance_rates:
            what += ", synthetic_acceptance_rates " + ", ".join(f"{r:.3f}" for r in server.synthetic_acceptance_rates)
            if server.extrapolated:
                what += " (extrapolated past the observed γ)"
        lines.append(f"{i}. server ({what}; decode_backend {server.decode_backend}):")
        lines.append(f"   {server.serve_command}")
        for run in plan.runs:
            if run.server == i - 1:
                lines.append(f"   B={run.batch_size} ({run.path}): {run.bench_command}")
        lines.append("   then stop the server")
    lines.append("")
    lines.append(f"Then: specdec calibrate ingest {plan.result_dir}/specdec-*.json --out cost_table.csv")
    lines.append(f"!! {plan.warning}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Ingest
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredStep:
    """One benchmark run: the step time it measured (drafter included), at (B, γ, path)."""

    gamma: int
    batch_size: int
    path: str
    step_seconds: float
    acceptance_length: float | None  # spec_decode_acceptance_length, when the server speculated
    source: str


@dataclass(frozen=True)
class CostRow:
    """A row of the measured cost table: T_target(B, q) on a path, seconds."""

    batch_size: int
    tokens_per_request: int
    path: str
    seconds: float


@dataclass(frozen=True)
class CalibrationResults:
    """The step times read from `vllm bench` result files, and the cost table made of them."""

    steps: tuple[MeasuredStep, ...]
    rows: tuple[CostRow, ...]
    method: str
    draft_cost: float


def _result_objects(path: Path) -> list[tuple[int, object]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CalibrationInputError(f"result {path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise CalibrationInputError(f"result {path}: not a text file") from None
    if not text.strip():
        raise CalibrationInputError(f"result {path}: empty file")
    try:
        return [(1, json.loads(text))]
    except json.JSONDecodeError:
        pass
    out = []  # --append-result: one JSON object per line
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((lineno, json.loads(line)))
        except json.JSONDecodeError as e:
            raise CalibrationInputError(f"result {path} line {lineno}: invalid JSON ({e.msg})") from None
    return out


def _number(obj: dict[str, object], key: str, where: str) -> float:
    v = obj.get(key)
    try:
        if not isinstance(v, (int, float, str)):  # what float() takes of the values json.loads gives
            raise TypeError(v)
        x = float(v)
    except (TypeError, ValueError):
        raise CalibrationInputError(f"{where}: {key} must be a number, got {v!r}") from None
    if not math.isfinite(x):
        raise CalibrationInputError(f"{where}: {key} must be finite, got {v!r}")
    return x


def read_bench_result(path: str | Path) -> list[MeasuredStep]:
    """The runs in one ``vllm bench serve --save-result`` file (one, or one per line)."""
    p = Path(path)
    steps = []
    for lineno, obj in _result_objects(p):
        where = f"result {p}" + (f" line {lineno}" if lineno > 1 else "")
        if not isinstance(obj, dict):
            raise CalibrationInputError(f"{where}: not a `vllm bench serve --save-result` file (a JSON object is expected)")
        missing = [k for k in BENCH_RESULT_KEYS if k not in obj]
        if missing:
            raise CalibrationInputError(
                f"{where}: not a `vllm bench serve --save-result` file (missing {', '.join(missing)})"
            )
        meta_missing = [k for k in (META_GAMMA, META_BATCH_SIZE, META_PATH) if k not in obj]
        if meta_missing:
            raise CalibrationInputError(
                f"{where}: no --metadata {', '.join(meta_missing)} (run the commands `specdec calibrate plan` prints)"
            )
        if STEP_TIME_KEY not in obj:
            raise CalibrationInputError(f"{where}: no {STEP_TIME_KEY} (run with --percentile-metrics ttft,tpot,itl)")
        try:
            gamma, batch = int(obj[META_GAMMA]), int(obj[META_BATCH_SIZE])
        except (TypeError, ValueError):
            raise CalibrationInputError(f"{where}: {META_GAMMA} and {META_BATCH_SIZE} must be integers") from None
        path_ = str(obj[META_PATH])
        if gamma < 0 or batch < 1 or path_ not in (STOCK, SPECIALIZED):
            raise CalibrationInputError(
                f"{where}: metadata {META_GAMMA}={obj[META_GAMMA]} {META_BATCH_SIZE}={obj[META_BATCH_SIZE]} "
                f"{META_PATH}={path_} out of range (γ ≥ 0, B ≥ 1, path stock or specialized)"
            )
        if obj.get("max_concurrency") not in (None, batch) and int(obj["max_concurrency"]) != batch:
            raise CalibrationInputError(f"{where}: max_concurrency {obj['max_concurrency']} differs from {META_BATCH_SIZE} {batch}")
        if _number(obj, "completed", where) < 1:
            raise CalibrationInputError(f"{where}: no completed requests")
        itl_ms = _number(obj, STEP_TIME_KEY, where)
        if itl_ms <= 0:
            raise CalibrationInputError(f"{where}: {STEP_TIME_KEY} must be > 0, got {itl_ms!r}")
        al = obj.get("spec_decode_acceptance_length")
        steps.append(MeasuredStep(gamma, batch, path_, itl_ms / 1000.0, float(al) if al is not None else None, str(p)))
    return steps


def measured_cost_table(steps: Iterable[MeasuredStep], deployment: Deployment) -> tuple[CostRow, ...]:
    """T_target rows: each step minus the deployment's draft time (module docstring)."""
    steps = list(steps)
    by_key: dict[tuple[int, int, str], MeasuredStep] = {}
    for s in steps:
        key = (s.gamma, s.batch_size, s.path)
        if key in by_key:
            raise CalibrationInputError(
                f"result {s.source}: γ {s.gamma}, batch {s.batch_size}, {s.path} measured twice (also in {by_key[key].source})"
            )
        by_key[key] = s
    stock_pass = {s.batch_size: s.step_seconds for s in steps if s.gamma == 0 and s.path == STOCK}
    if not stock_pass:
        raise CalibrationInputError("results: no γ = 0 stock run (the stock pass is the unit of the draft cost)")
    drafter = drafter_for(deployment.method)
    rows = []
    for (gamma, b, path), s in sorted(by_key.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        factor = float(drafter.draft_time_factor(gamma, deployment.draft_cost, deployment.draft_overhead))
        draft_s = 0.0
        if factor > 0:
            if b not in stock_pass:
                raise CalibrationInputError(f"result {s.source}: no γ = 0 stock run at batch {b} to take the draft time from")
            draft_s = factor * stock_pass[b]
        target = s.step_seconds - draft_s
        if not target > 0:
            raise CalibrationInputError(
                f"result {s.source}: step {s.step_seconds:.6g}s at γ {gamma}, batch {b} is not more than the modelled "
                f"draft time {draft_s:.6g}s (draft_cost {deployment.draft_cost} too high?)"
            )
        rows.append(CostRow(b, gamma + 1, path, target))
    return tuple(rows)


def table_csv(rows: Iterable[CostRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TABLE_HEADER)
    for r in rows:
        w.writerow([r.batch_size, r.tokens_per_request, r.path, f"{r.seconds:.9g}"])
    return buf.getvalue()


def ingest_results(paths: Sequence[str | Path], deployment: Deployment, out: str | Path | None = None) -> CalibrationResults:
    """Read every result, build the table and (when ``out`` is given) write it as CSV.
    Nothing is written unless every file reads."""
    if not paths:
        raise CalibrationInputError("results: at least one result file is needed")
    steps = [s for p in paths for s in read_bench_result(p)]
    rows = measured_cost_table(steps, deployment)
    if out is not None:
        out_path = Path(out)
        tmp = out_path.with_name(out_path.name + ".tmp")
        try:
            tmp.write_text(table_csv(rows), encoding="utf-8")
            tmp.replace(out_path)  # atomic: an old table is never half-overwritten
        except OSError as e:
            raise CalibrationInputError(f"cost table {out_path}: cannot write ({e.strerror or e})") from None
    return CalibrationResults(tuple(steps), rows, deployment.method, deployment.draft_cost)
