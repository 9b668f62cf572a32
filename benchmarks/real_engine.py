"""One real vLLM engine for a benchmark: started on a free loopback port by
benchmarks/real_vllm.py, its CPU time read, runs measured on it, the results written.
Shared by the benchmarks of `make bench-real` (real_sweep, real_load, logged_latency,
request_load); the engine's own command line is real_vllm.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
    """`real_vllm.py serve` on a free loopback port (``log``: where vLLM's own log goes)."""

    def __init__(self, method: str, gamma: int, log: Path | None = None):
        self.method, self.gamma, self.port = method, gamma, free_port()
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "benchmarks" / "real_vllm.py"), "serve", "--method", method,
             "--gamma", str(gamma), "--port", str(self.port), "--startup-timeout", "900",
             *(() if log is None else ("--log", str(log)))],
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
