"""The chaos run's clock steps: a collector whose wall clock steps back and forward while it
collects healthy targets, the machine's clock untouched.

The collector runs under libfaketime (Debian's `faketime` package, LD_PRELOAD): its offset
is read from a file on every call (FAKETIME_TIMESTAMP_FILE with FAKETIME_NO_CACHE=1), so it
steps while the process runs, as an NTP step or a resumed VM steps a real one. The
monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC=1), as a step leaves it: the
collector's cycles keep their pace. Before the run a child Python is checked to see the
offset in time.time(). The steps (``STEPS``): back 30 s, forward 30 s, forward 5 min, back
5 min; each back step holds the targets until the clock passes their last stored scrape (about
the step's length), so the phase takes about ``DURATION_S``. Reported: the collector's exit
(it must run to its --duration: exit 0), the lines it said after each step (the held and
resumed lines, and any other), and per target the pages it was served, the samples stored,
the scrapes it said it held, and the drafts stored against the engine's own increase.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
# (seconds after the collector starts, the step in seconds): back 30 s, forward again, forward
# 5 min, back 5 min; the clock ends where it began (the machine's own)
STEPS = [(8.0, -30), (46.0, 30), (54.0, 300), (62.0, -300)]
DURATION_S = 390.0  # the last back step holds the targets about 5 min, then some cycles stored again
# one target ("URL: ...") or many at once ("N targets (first URL): ...")
HELD = re.compile(r"^(.+?): this machine's clock is .* (?:its|their) last stored scrape \(it stepped back\)")
RESUMED = re.compile(r"^(.+?): the clock passed the last stored scrape again: storing resumed \((\d+) scrape")
STEPPED = re.compile(r"^this machine's clock stepped (forward|back) ")


def libfaketime() -> tuple[Path | None, str]:
    """The library, installed with apt where it is missing and this is root; else None and why."""
    if not LIBFAKETIME.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        done = subprocess.run(["apt-get", "install", "-y", "-q", "faketime"], capture_output=True, env=env)
        if done.returncode != 0:  # an old package list: update it once
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
            subprocess.run(["apt-get", "install", "-y", "-q", "faketime"], capture_output=True, env=env)
    if LIBFAKETIME.exists():
        return LIBFAKETIME, "installed"
    return None, ("libfaketime is not installed and could not be (apt-get install faketime, as root): "
                  "the clock steps were not run")


def faked_env(library: Path, offset_file: Path) -> dict[str, str]:
    return dict(os.environ, LD_PRELOAD=str(library), FAKETIME_TIMESTAMP_FILE=str(offset_file), FAKETIME_NO_CACHE="1",
                FAKETIME_DONT_FAKE_MONOTONIC="1")


def set_offset(offset_file: Path, seconds: int) -> None:
    tmp = offset_file.with_suffix(".tmp")
    tmp.write_text(f"{seconds:+d}\n")
    tmp.replace(offset_file)  # whole, never half written: the collector reads it on every call


def offset_seen(python: Path, library: Path, folder: Path) -> float:
    """The offset a child Python's time.time() shows with the file at −1000 s (about −1000: it works)."""
    probe = folder / "probe-offset"
    set_offset(probe, -1000)
    done = subprocess.run([str(python), "-c", "import time; print(time.time())"], capture_output=True, text=True,
                          env=faked_env(library, probe), timeout=60)
    return round(float(done.stdout.strip()) - time.time(), 1)


class ClockRun:
    """One collector life of DURATION_S under a stepped clock, on a store and config of its own
    (``targets``: healthy pages that only it and the closing scrape read)."""

    def __init__(self, specdec: Path, folder: Path, targets: list[str], interval: float, library: Path):
        self.specdec, self.folder, self.targets, self.library = specdec, folder, targets, library
        folder.mkdir(parents=True, exist_ok=True)
        self.cfg = folder / "specdec.toml"
        listed = ", ".join(f'"{t}"' for t in targets)
        self.cfg.write_text(f'[store]\npath = "clock.db"\n\n[collect]\ninterval = {interval}\ntimeout = 1\n\n'
                            f'[deployment]\nmethod = "eagle3"\ncost_profile = "flat"\n\n'
                            f'[routes.clock]\ntargets = [{listed}]\n')
        self.db = folder / "clock.db"
        self.offset_file = folder / "offset"
        self.lines: list[tuple[float, str]] = []  # (seconds after start, line) the collector said
        self.exit: int | None = None
        self.closing_exit: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        set_offset(self.offset_file, 0)
        began = time.monotonic()
        proc = subprocess.Popen([str(self.specdec), "collect", "--config", str(self.cfg), "--duration",
                                 f"{DURATION_S:g}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=faked_env(self.library, self.offset_file))
        reader = threading.Thread(target=self._read, args=(proc, began), daemon=True)
        reader.start()
        offset = 0
        for at, step in STEPS:
            time.sleep(max(0.0, began + at - time.monotonic()))
            offset += step
            set_offset(self.offset_file, offset)
            self.lines.append((time.monotonic() - began, f"(benchmark) clock stepped {step:+d} s"))
        try:
            self.exit = proc.wait(timeout=DURATION_S + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.exit = proc.wait()
        reader.join(timeout=10)
        # the closing scrape, on the machine's clock (where the faked one ended): each engine's count at the end
        done = subprocess.run([str(self.specdec), "collect", "--config", str(self.cfg), "--once"], capture_output=True,
                              text=True, timeout=120)
        self.closing_exit = done.returncode
        self.lines += [(time.monotonic() - began, f"(closing) {line}")
                       for line in (done.stderr + done.stdout).splitlines()]

    def _read(self, proc: subprocess.Popen, began: float) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append((time.monotonic() - began, line.rstrip("\n")))

    def result(self, served: dict[str, int], per_page: int, base: str) -> dict:
        """What the phase showed (module docstring); ``served``: pages each target path served."""
        from acceptance.store import Store
        from acceptance.windows import route_window

        steps = []
        marks = [i for i, (_, line) in enumerate(self.lines) if line.startswith("(benchmark) clock stepped")]
        for k, i in enumerate(marks):
            end = marks[k + 1] if k + 1 < len(marks) else len(self.lines)
            said = [line for _, line in self.lines[i + 1:end] if not line.startswith(("cycle ", "(closing)"))]
            steps.append({"step_s": STEPS[k][1], "at_s": round(self.lines[i][0], 1),
                          "held_lines": sum(bool(HELD.match(s)) for s in said),
                          "resumed_lines": sum(bool(RESUMED.match(s)) for s in said),
                          "step_lines": [s for s in said if STEPPED.match(s)],
                          "other_lines": [s for s in said if not HELD.match(s) and not RESUMED.match(s)
                                          and not STEPPED.match(s) and not s.startswith("collected ")][:5],
                          "example": next((s for s in said if HELD.match(s) or RESUMED.match(s)), None)})
        held_total = sum(int(m.group(2)) for _, line in self.lines if (m := RESUMED.match(line)))
        targets = {}
        with Store.open(self.db) as store:
            for url in self.targets:
                path = url[len(base):]
                window = route_window(store, [url], 0.0, time.time() + 3600)
                drafts = sum(s.total.drafts for s in window.segments)
                spec, _ = store.read_intervals([eid for eid, _ in store.engines_of([url])], 0.0, time.time() + 3600)
                expected = per_page * (served.get(path, 0) - 1)  # its first page: the baseline
                targets[path] = {"served": served.get(path, 0), "samples_stored": sum(len(e.end) for e in spec),
                                 "drafts_stored": drafts, "drafts_expected": expected,
                                 "restarts_or_refusals": [e.kind for e in window.events]}
        collected = next((line for _, line in reversed(self.lines) if line.startswith("collected ")), "")
        return {"steps": steps, "exit": self.exit, "closing_exit": self.closing_exit, "duration_s": DURATION_S,
                "collector_said_at_exit": collected[:200], "targets": targets, "held_total": held_total}
