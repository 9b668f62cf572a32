"""Metrics servers the Prometheus, VictoriaMetrics and Grafana tests share: a simulated fleet
followed by a server scraping it and by the embedded store at once, Prometheus with
specdec's rules, and finding (or installing) the binaries they need."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np

from acceptance.collector import collect_cycle
from acceptance.estimates import estimate_acceptance
from acceptance.sim import Fleet
from acceptance.store import Store
from specdec.exporter import recording_rules
from support import find_binary, free_port, skip_or_fail

ROOT = Path(__file__).resolve().parents[1]
# Absolute, on each a_k, between a server's window and the store's over the same wall-clock
# span (tests/test_acceptance_prometheus.py's docstring says why).
SURVIVAL_TOLERANCE = 0.01
SPEED = 40.0  # simulated seconds per wall second: the restart at 10 min comes after 15 s
AFTER_RESTART_S = 12.0  # wall seconds of data after the restart
RULES_WINDOW = "10s"
RULES_RESOLUTION = "2s"  # the window rules' evaluation interval (2 s of wall time: 80 simulated)
RULES_QUERY_OFFSET = "1s"  # the scrape timeout: every sample the rules read is stored by then


def require_installed(find: Callable[[], str | None], script: str, what: str) -> str:
    """What ``find`` finds; if nothing, scripts/``script`` is run once (`make test` runs it too:
    root or sudo, no service started) and ``find`` asked again; still nothing: fail in CI,
    skip elsewhere."""
    path = find()
    if path is None:
        subprocess.run(["sh", str(ROOT / "scripts" / script)], capture_output=True, timeout=600)
        path = find()
    if path is None:
        skip_or_fail(f"{what} not installed (scripts/{script} installs it)")
    return path


def require_binary(name: str) -> str:
    """prometheus, promtool or victoria-metrics (Debian's packages)."""
    script = "ensure_victoria_metrics.sh" if name in ("victoria-metrics", "vmalert") else "ensure_prometheus.sh"
    return require_installed(lambda: find_binary(name), script, name)


def same_curve_as_store(window, store_window, label: str):
    """The restart fleet read from a server: one γ 4 segment of both engines, engine 0's
    restart seen once, survival within SURVIVAL_TOLERANCE of the store's. (server, store)
    estimates, for the caller's own checks."""
    assert [e.engine for e in window.events if e.kind == "restart"] == ["0"]
    assert [s.gamma for s in window.segments] == [4]
    assert sorted(ref.engine for ref in window.newest_segment.engines) == ["0", "1"]
    server = estimate_acceptance(window.newest_segment.intervals, n_resamples=300)
    store = estimate_acceptance(store_window.newest_segment.intervals, n_resamples=300)
    diff = np.abs(server.survival.value - store.survival.value)
    print(f"{label} {np.round(server.survival.value, 4)} ({server.drafts:.0f} drafts), store "
          f"{np.round(store.survival.value, 4)} ({store.drafts:.0f}): max |diff| {diff.max():.4f}")
    assert diff.max() <= SURVIVAL_TOLERANCE
    return server, store


def tune_through(url: str, job: str, window_s: float, where: Path, capsys, *extra_config: str) -> dict:
    """tune-gamma --json of route "restart" = {job="JOB"} read from the server at ``url``."""
    from specdec.cli import tune_gamma_main

    config = where / "specdec.toml"
    config.write_text(f'[source]\nkind = "prometheus"\nurl = "{url}"\n\n' + "".join(extra_config)
                      + f'[routes.restart]\nselector = \'{{job="{job}"}}\'\n')
    code = tune_gamma_main(["--route", "restart", "--config", str(config), "--window", f"{int(window_s)}s",
                            "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _wait_ready(ready_url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the metrics server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(ready_url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{ready_url} not ready after {timeout_s} s")


# Batch sizes that persist: 0.95 per 5 s chunk is 0.95^8 ≈ 0.66 per scrape (1 s of wall time
# at SPEED 40), so both backends' batch persistence has something to agree on.
CHUNK_PERSISTENCE = 0.95


def _persistent_batches(scenario):
    return replace(scenario, targets=tuple(
        replace(t, engines=tuple(replace(e, batch=replace(e.batch, persistence=CHUNK_PERSISTENCE)) for e in t.engines))
        for t in scenario.targets))


def scrape_config(job: str, hostports: list[str], *, evaluation_interval: str | None = None) -> str:
    """A scrape config of the fleet every second (Prometheus' format; VictoriaMetrics reads it
    too, but refuses a rules evaluation_interval)."""
    evaluation = f"  evaluation_interval: {evaluation_interval}\n" if evaluation_interval else ""
    return ("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n" + evaluation +
            f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n"
            f"      - targets: {json.dumps(hostports)}\n")


@contextlib.contextmanager
def fleet_followed(tmp: Path, scenario, launch, ready_path: str, *, event_at_s: float = 600.0, on_start=None,
                   answer_delay_s: float = 0.0):
    """The simulated ``scenario`` served (each page ``answer_delay_s`` late); a metrics server
    (``launch(hostports, port)`` gives its argv) scraping it and the embedded store collecting
    it, until AFTER_RESTART_S wall seconds after its event at ``event_at_s`` simulated. Yields
    the window both saw. ``on_start(seen)``: called once the fleet runs (to start another follower)."""
    fleet = Fleet(_persistent_batches(scenario))
    targets = list(fleet.serve(answer_delay_s=answer_delay_s).values())
    hostports = [u.split("//", 1)[1].split("/", 1)[0] for u in targets]
    port = free_port()
    log = tmp / "server.log"
    proc = subprocess.Popen(launch(hostports, port), stdout=log.open("w"), stderr=subprocess.STDOUT)
    store = Store.open(tmp / "store.db")
    stop = threading.Event()
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(f"{url}{ready_path}", proc, log)
        fleet.start_realtime(speed=SPEED)
        t0 = time.time()
        if on_start is not None:
            on_start({"url": url, "targets": targets})

        def collect():
            while not stop.is_set():
                store.write_cycle(collect_cycle(targets))
                stop.wait(1.0)

        collector = threading.Thread(target=collect, daemon=True)
        collector.start()
        event_at = event_at_s / SPEED
        time.sleep(event_at + AFTER_RESTART_S)
        stop.set()
        collector.join(timeout=10)
        t_stop = time.time()
        time.sleep(2.5)  # the server's last scrape before t_stop is in (and queryable)
        yield {"url": url, "store": store, "targets": targets, "start": t0 + 3.0, "end": t_stop - 1.0,
               "restart_wall": t0 + event_at, "fleet": fleet}
    finally:
        stop.set()
        stop_process(proc)
        fleet.close()
        store.close()


def stop_process(proc: subprocess.Popen) -> None:
    """Terminated, and killed when it has not exited 10 s later."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def prometheus_on(tsdb: Path):
    """Prometheus serving the TSDB folder ``tsdb`` (backfilled blocks; it scrapes nothing) on a
    free loopback port: its URL; stopped on leaving."""
    (tsdb.parent / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
    port = free_port()
    log = tsdb.parent / f"prometheus-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([require_binary("prometheus"), f"--config.file={tsdb.parent / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_ready(f"http://127.0.0.1:{port}/-/ready", proc, log, timeout_s=30)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)


def prometheus_with_rules(tmp: Path, job: str, route: str, *, also_scrape: list[str] = ()):
    """launch() for fleet_followed: Prometheus with specdec's rules for ``route`` = job (and
    ``also_scrape``, host:port targets of a job "specdec", e.g. `specdec collect --serve`)."""
    prometheus = require_binary("prometheus")
    (tmp / "rules.yml").write_text(recording_rules({route: f'{{job="{job}"}}'}, window=RULES_WINDOW,
                                                   resolution=RULES_RESOLUTION, query_offset=RULES_QUERY_OFFSET))

    def launch(hostports, port):
        extra = (f"  - job_name: specdec\n    static_configs:\n      - targets: {json.dumps(list(also_scrape))}\n"
                 if also_scrape else "")
        (tmp / "prometheus.yml").write_text(scrape_config(job, hostports, evaluation_interval="1s") + extra
                                            + f"rule_files:\n  - {json.dumps(str(tmp / 'rules.yml'))}\n")
        return [prometheus, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}"]
    return launch


