"""One real vLLM engine for a benchmark: started on a free loopback port by
benchmarks/real_vllm.py, its CPU time read, runs of requests on it and what their responses
say (acceptance totals, decode steps, step time), the results written. Shared by the
benchmarks of `make bench-real` (real_sweep, real_load, logged_latency, request_load); the
engine's own command line is real_vllm.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import real_vllm  # noqa: E402


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def runs_on_engine(method: str, gamma: int, settings: list, measure, describe) -> list[dict]:
    """One engine (its log in a temporary folder) for a benchmark's runs: ``measure(engine,
    log_path, setting, index, folder)`` for each setting in turn, each result logged as
    ``describe(setting, result)``; the engine stops whatever happens."""
    with tempfile.TemporaryDirectory() as tmp:
        engine_log = Path(tmp) / "vllm.log"
        engine = Engine(method, gamma, log=engine_log).wait_ready()
        try:
            runs = []
            for i, setting in enumerate(settings):
                runs.append(measure(engine, engine_log, setting, i, Path(tmp)))
                log(describe(setting, runs[-1]))
            return runs
        finally:
            engine.stop()


def write_results(path: Path, doc: dict, echo: bool) -> None:
    """A benchmark's results file (and the same JSON on stdout with ``echo``: --json)."""
    path.write_text(json.dumps(doc, indent=2) + "\n")
    log(f"wrote {path.relative_to(REPO)}")
    if echo:
        print(json.dumps(doc, indent=2))


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Engine:
    """`real_vllm.py serve` on a free loopback port (``log``: where vLLM's own log goes;
    ``spec_extra``: more speculative-config keys, real_vllm.py serve --spec-extra)."""

    def __init__(self, method: str, gamma: int, log: Path | None = None, spec_extra: dict | None = None):
        self.method, self.gamma, self.port, self.spec_extra = method, gamma, free_port(), spec_extra
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "benchmarks" / "real_vllm.py"), "serve", "--method", method,
             "--gamma", str(gamma), "--port", str(self.port), "--startup-timeout", "900",
             *(() if log is None else ("--log", str(log))),
             *(() if not spec_extra else ("--spec-extra", json.dumps(spec_extra)))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.group = None
        self.startup_s = None

    def wait_ready(self) -> "Engine":
        line = self.process.stdout.readline()
        if not line.startswith("ready "):
            raise SystemExit(f"real engine: {self.method} γ {self.gamma} did not start: "
                             f"{self.process.stderr.read()[-2000:]}")
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        self.group = int(fields["pid"])
        self.startup_s = float(line.rsplit("after", 1)[1].split()[0])
        log(f"engine {self.method} γ {self.gamma} ready on {self.port} after {self.startup_s:.0f} s")
        return self

    def cpu_seconds(self) -> float:
        """utime + stime of every process in the engine's process group, in seconds."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.group:  # pgrp
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=120)


@dataclass
class Run:
    """One γ's run of one block: its requests one at a time, what they took and emitted."""

    gamma: int
    wall_s: float
    tokens: int
    cpu_s: float
    responses: list

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per wall second: prefill, HTTP and scheduling included."""
        return self.tokens / self.wall_s

    @property
    def decode_tokens_per_s(self) -> float:
        """Per-user decode tokens/s, what the interactivity objective prices: Σ (tokens − 1) /
        Σ decode time, decode time = mean_itl_ms × (tokens − 1) (vLLM's per-request fields)."""
        tokens = seconds = 0.0
        for line in self.responses:
            n = line["completion_tokens"] - 1
            if n > 0 and line["metrics"].get("mean_itl_ms"):
                tokens += n
                seconds += line["metrics"]["mean_itl_ms"] / 1e3 * n
        return tokens / seconds

    def to_dict(self) -> dict:
        return {"gamma": self.gamma, "wall_s": self.wall_s, "tokens": self.tokens, "cpu_s": self.cpu_s,
                "responses": self.responses}

    @classmethod
    def from_dict(cls, d: dict) -> "Run":
        return cls(d["gamma"], d["wall_s"], d["tokens"], d["cpu_s"], d["responses"])


def run_requests(engine: Engine, prompts: list[str], route: str, seed: int) -> Run:
    sampling = real_vllm.ROUTE_SAMPLING[route]
    cpu0, t0, tokens, lines = engine.cpu_seconds(), time.perf_counter(), 0, []
    for i, prompt in enumerate(prompts):
        body = {"model": real_vllm.SERVED_NAME, "prompt": prompt, "max_tokens": real_vllm.MAX_TOKENS,
                "seed": seed + i, **sampling}
        response = real_vllm._post(engine.port, body, 300)
        tokens += response["usage"]["completion_tokens"]
        lines.append({"id": response["id"], "route": route, "time": time.time(), "metrics": response["metrics"],
                      "completion_tokens": response["usage"]["completion_tokens"]})
    return Run(engine.gamma, time.perf_counter() - t0, tokens, engine.cpu_seconds() - cpu0, lines)


def warm_up(engine: Engine, prompts: dict[str, list[str]]) -> None:
    """Two requests per route before any is timed: an engine's first requests compile (the
    first TTFT of a fresh engine is about 2 s against 20 ms after)."""
    for route, texts in prompts.items():
        run_requests(engine, texts[-2:], route, seed=0)


def spec_totals(responses: list) -> dict:
    d = t = a = 0
    per_pos = None
    for line in responses:
        sd = (line.get("metrics") or {}).get("speculative_decoding")
        if not sd:
            continue
        h = sd["acceptance_histogram"]
        d, t, a = d + sum(h), t + sd["num_draft_tokens"], a + sum(j * n for j, n in enumerate(h))
        pos = [sum(h[k:]) for k in range(1, len(h))]
        per_pos = pos if per_pos is None else [x + y for x, y in zip(per_pos, pos)]
    return {"drafts": d, "draft_tokens": t, "accepted": a, "accepted_per_position": per_pos or []}


def decode_steps(line: dict) -> int:
    """A request's decode steps: its drafted steps (num_spec_steps) and the steps without a
    draft, which emit one token each — the completion tokens − 1 (the first comes from the
    prefill) that the drafted steps (1 + accepted each) did not. A request that ends inside
    a full draft (max_tokens, a stop) emits fewer than 1 + accepted in its last step, so
    tokens − 1 − accepted would undercount; at γ 14 it reached 0 on short requests."""
    tokens = line["completion_tokens"] - 1
    sd = line["metrics"].get("speculative_decoding") or {}
    drafted = sd.get("num_spec_steps", 0)
    from_drafted = drafted + sd.get("num_accepted_draft_tokens", 0)
    return drafted + max(0, tokens - from_drafted)


def step_time_s(responses: list) -> float:
    """Mean step time, drafter included: Σ decode time / Σ decode steps. vLLM's mean_itl_ms
    is decode time / (tokens − 1), per output token."""
    decode_s = steps_total = 0.0
    for line in responses:
        tokens = line["completion_tokens"] - 1
        steps = decode_steps(line)
        if steps > 0 and line["metrics"].get("mean_itl_ms"):
            decode_s += line["metrics"]["mean_itl_ms"] / 1e3 * tokens
            steps_total += steps
    return decode_s / steps_total
