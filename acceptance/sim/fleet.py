"""The simulated fleet: engines grouped in targets (one /metrics URL each) and routes, the
simulated clock and its events in time order, the loopback HTTP servers, and the truth
(counts, survival, batch mix) that tests and benchmarks check the tool against.
"""

from __future__ import annotations

from ..errors import InputError

import math
import threading
import time as _wall
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable, cast

import numpy as np

from ..counts import SpecCounts
from .engine import EPS_S, SimEngine
from .exposition import EngineExposure, render_page
from .scenario import Scenario, ScenarioError, check_gamma, event_from_dict


class _Handler(BaseHTTPRequestHandler):
    fleet: "Fleet"
    target: str
    answer_delay_s: float = 0.0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?")[0] != "/metrics":
            self.send_error(404, "only /metrics")
            return
        body = self.fleet.page(self.target)
        if self.answer_delay_s:  # the page as of the request, answered late (a slow exporter)
            _wall.sleep(self.answer_delay_s)
        try:
            self.send_response(200)
            # vLLM always answers in the classic text format, whatever the Accept header.
            self.send_header("Content-Type", "text/plain; version=1.0.0; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the scraper gave up waiting (its timeout, or it stopped): nothing to answer

    def log_message(self, format: str, *args: object) -> None:  # quiet: a scraper hits this every few seconds
        pass


class Fleet:
    """The simulated fleet of a ``Scenario``. Use as a context manager, or call close()."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self._lock = threading.RLock()
        self._t = 0.0
        self._engines: dict[str, list[SimEngine]] = {}
        uid = 0
        for target in scenario.targets:
            engines = []
            for spec in target.engines:
                engines.append(SimEngine(self, target, spec, uid))
                uid += 1
            self._engines[target.name] = engines
        self._pending = sorted(scenario.events, key=lambda e: e.at_s)
        for ev in self._pending:
            self._resolve(ev.target, ev.engine)
        self._servers: dict[str, ThreadingHTTPServer] = {}
        self._threads: list[threading.Thread] = []
        self._realtime: threading.Thread | None = None
        self._stop = threading.Event()

    # -- time

    @property
    def now(self) -> float:
        """Simulated epoch seconds."""
        return self.scenario.start_time + self._t

    @property
    def elapsed_s(self) -> float:
        """Simulated seconds since the start."""
        return self._t

    def advance(self, dt_s: float) -> None:
        """Run dt_s seconds of simulated time, applying scheduled events in time order.

        An event at t is applied when the clock moves past t, before the steps after t;
        one at exactly the new time stays pending until the next advance.
        """
        if not (isinstance(dt_s, (int, float)) and math.isfinite(dt_s) and dt_s >= 0):
            raise InputError(f"advance: dt_s must be a finite number of seconds >= 0, got {dt_s!r}")
        with self._lock:
            end = self._t + float(dt_s)
            while self._pending and self._pending[0].at_s < end - EPS_S:
                ev = self._pending.pop(0)
                t = max(ev.at_s, self._t)
                for eng in self._resolve(ev.target, ev.engine):
                    eng._advance_to(t)
                    eng._apply(ev.kind, t, ev.gamma)
            for engines in self._engines.values():
                for eng in engines:
                    eng._advance_to(end)
            self._t = end

    def schedule(self, at_s: float, kind: str, target: str, engine: str | None = None,
                 gamma: int | None = None) -> None:
        """Schedule an event at ``at_s`` seconds since the start (not in the past)."""
        ev = event_from_dict({"at": at_s, "kind": kind, "target": target, "engine": engine, "gamma": gamma}, "event")
        with self._lock:
            if ev.at_s < self._t - EPS_S:
                raise ScenarioError(f"event at {at_s!r}s: already past (now {self._t}s since start)")
            self._resolve(ev.target, ev.engine)
            self._pending.append(ev)
            self._pending.sort(key=lambda e: e.at_s)

    def _engine_event(self, eng: SimEngine, kind: str, gamma: int | None = None) -> None:
        with self._lock:
            eng._advance_to(self._t)
            eng._apply(kind, self._t, gamma)

    def start_realtime(self, speed: float = 1.0, tick_s: float = 0.05) -> None:
        """Advance the clock from a background thread at ``speed``× wall time."""
        if not (speed > 0 and math.isfinite(speed)):
            raise InputError(f"speed: must be a positive number, got {speed!r}")
        if self._realtime is not None:
            return

        def run() -> None:
            last = _wall.monotonic()
            while not self._stop.wait(tick_s):
                t = _wall.monotonic()
                self.advance((t - last) * speed)
                last = t

        self._realtime = threading.Thread(target=run, name="specdec-sim-clock", daemon=True)
        self._realtime.start()

    # -- serving

    def serve(self, host: str = "127.0.0.1", answer_delay_s: float = 0.0) -> dict[str, str]:
        """Start one HTTP server per target (port 0 → ephemeral); returns target → URL.
        ``answer_delay_s``: each page is read when its request arrives and sent that much
        later, as a slow exporter's: a scraper stamps it at the request, stores it later."""
        with self._lock:
            for target in self.scenario.targets:
                if target.name in self._servers:
                    continue
                handler = type("Handler", (_Handler,), {"fleet": self, "target": target.name,
                                                        "answer_delay_s": answer_delay_s})
                server = ThreadingHTTPServer((host, target.port), handler)
                server.daemon_threads = True
                self._servers[target.name] = server
                # A short poll keeps close() quick (shutdown waits for the loop to notice).
                th = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                      name=f"specdec-sim-{target.name}", daemon=True)
                th.start()
                self._threads.append(th)
        return self.urls

    @property
    def urls(self) -> dict[str, str]:
        """target → its /metrics URL (only once serving)."""
        # an AF_INET server's address is (host str, port)
        return {name: f"http://{cast(str, s.server_address[0])}:{s.server_address[1]}/metrics"
                for name, s in self._servers.items()}

    def close(self) -> None:
        self._stop.set()
        if self._realtime is not None:
            self._realtime.join(timeout=2)
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        for th in self._threads:
            th.join(timeout=2)
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- structure

    @property
    def targets(self) -> list[str]:
        return list(self._engines)

    @property
    def routes(self) -> dict[str, list[str]]:
        """route → its target names."""
        return {r: [t.name for t in ts] for r, ts in self.scenario.routes.items()}

    def engines(self, target: str | None = None) -> list[SimEngine]:
        if target is None:
            return [e for es in self._engines.values() for e in es]
        return list(self._resolve(target, None))

    def engine(self, target: str, engine: str = "0") -> SimEngine:
        return self._resolve(target, engine)[0]

    def _resolve(self, target: str, engine: str | None) -> list[SimEngine]:
        if target not in self._engines:
            raise ScenarioError(f"target: unknown target {target!r} (known: {', '.join(self._engines)})")
        engines = self._engines[target]
        if engine is None:
            return engines
        found = [e for e in engines if e.engine == str(engine)]
        if not found:
            raise ScenarioError(f"engine: target {target!r} has no engine {engine!r}")
        return found

    def _route_engines(self, route: str) -> list[SimEngine]:
        if route not in self.routes:
            raise ScenarioError(f"route: unknown route {route!r} (known: {', '.join(self.routes)})")
        return [e for t in self.routes[route] for e in self._engines[t]]

    # -- pages

    def exposures(self, target: str) -> list[EngineExposure]:
        with self._lock:
            return [e.exposure(self._t) for e in self._resolve(target, None)]

    def page(self, target: str) -> bytes:
        """The target's /metrics page at the current simulated time."""
        return render_page(self.exposures(target))

    # -- ground truth

    def truth_counts(self, target: str | None = None, engine: str | None = None) -> dict[int, SpecCounts]:
        """Exact counts generated since the fleet started, per γ (whole fleet, one target,
        or one engine of it) — including what restarts hid from any scraper."""
        with self._lock:
            engines = self.engines() if target is None else self._resolve(target, engine)
            return _sum_by_gamma(e.truth(self._t) for e in engines)

    def route_truth_counts(self, route: str) -> dict[int, SpecCounts]:
        """``truth_counts`` over a route's engines."""
        with self._lock:
            return _sum_by_gamma(e.truth(self._t) for e in self._route_engines(route))

    def truth_step_counts(self, target: str | None = None, engine: str | None = None) -> dict[tuple[int, int], int]:
        """Verify steps generated since the start, keyed by (γ, batch size); γ 0: plain decode."""
        with self._lock:
            engines = self.engines() if target is None else self._resolve(target, engine)
            out: dict[tuple[int, int], int] = {}
            for e in engines:
                for key, v in e.truth_steps(self._t).items():
                    out[key] = out.get(key, 0) + v
            return dict(sorted(out.items()))

    def route_true_survival(self, route: str, gamma: int, t: float | None = None) -> np.ndarray:
        """Expected a_1..a_γ of the route at γ and epoch time t (default now), draft-weighted
        over its engines: engine e weighs Σ_B w_B · B · (verify steps/s at B, γ), its
        expected drafts per second at γ over its batch mix."""
        gamma = check_gamma(gamma, "route_true_survival")
        if gamma == 0:
            return np.zeros(0)
        t_rel = (self.now if t is None else float(t)) - self.scenario.start_time
        engines = self._route_engines(route)
        weights = np.array([sum(w * b * e.verify_steps_per_second(b, gamma)
                                for b, w in zip(e.batch_mix.sizes, e.batch_mix.shares)) for e in engines])
        curves = np.array([e.process.true_survival(gamma, t_rel) for e in engines])
        survival: np.ndarray = weights @ curves / weights.sum()
        return survival

    def route_batch_mix(self, route: str, weighting: str = "steps") -> dict[int, float]:
        """The route's true batch-size distribution over its engines at their current γ.

        weighting "steps" (default): the share of verify steps run at each batch size
        (what ``iteration_tokens_total`` counts); "time": the share of time.
        """
        if weighting not in ("steps", "time"):
            raise InputError(f"weighting: must be 'steps' or 'time', got {weighting!r}")
        mix: dict[int, float] = {}
        for e in self._route_engines(route):
            for b, w in zip(e.batch_mix.sizes, e.batch_mix.shares):
                rate = e.verify_steps_per_second(int(b), e.gamma) if weighting == "steps" else 1.0
                mix[int(b)] = mix.get(int(b), 0.0) + w * rate
        total = sum(mix.values())
        return {b: float(v / total) for b, v in sorted(mix.items())}

    def describe(self) -> dict[str, dict[str, object]]:
        """Routes → targets (URL when serving), engines' γ, true survival: for printing."""
        urls = self.urls
        out: dict[str, dict[str, object]] = {}
        for route, targets in self.routes.items():
            engines = self._route_engines(route)
            gammas = sorted({e.gamma for e in engines})
            out[route] = {
                "targets": [urls.get(t, t) for t in targets],
                "engines": [{"target": e.target, "engine": e.engine, "gamma": e.gamma,
                             "process": e.process.to_dict()} for e in engines],
                "true_survival": {g: [round(float(x), 6) for x in self.route_true_survival(route, g)]
                                  for g in gammas if g > 0},
                "batch_mix": self.route_batch_mix(route),
            }
        return out


def _sum_by_gamma(per_engine: Iterable[dict[int, SpecCounts]]) -> dict[int, SpecCounts]:
    out: dict[int, SpecCounts] = {}
    for d in per_engine:
        for g, c in d.items():
            out[g] = out[g] + c if g in out else c
    return dict(sorted(out.items()))
