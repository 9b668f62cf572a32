"""What a simulated fleet is made of, and the reader of its description.

Specs (step time, batch mix, prefill, engine, target, scheduled event, scenario) and
``scenario_from_dict`` / ``scenario_to_dict``: the tables of a user's TOML or JSON file
(`specdec simulate --config FILE`), each bad value a one-line ``ScenarioError`` naming it.
"""

from __future__ import annotations

from ..errors import InputError

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..durations import duration_seconds
from .processes import AcceptanceProcess, ProcessError, process_from_dict

DEFAULT_START_TIME = 1_800_000_000.0
MAX_GAMMA = 16
EVENT_KINDS = ("restart", "set_gamma", "spec_off", "spec_on")
STEP_METRICS = ("design", "vllm")


class ScenarioError(InputError):
    """A scenario or an event was described wrongly (one-line message naming the input)."""


# The most tokens a speculative step verifies per request (γ ≤ 16, + the bonus); a step of
# more is a prefill, which drafts nothing.
MAX_VERIFY_TOKENS = 17


@dataclass(frozen=True)
class LatencyBoundStepTime:
    """Step time of a latency-bound decode: base_s · (1 + growth_per_token · B · q), plus on a
    speculative step a parallel drafter's pass costing ``draft_cost`` × the stock pass at the
    same batch (docs/MODEL.md, Cost model) — what a config's draft_cost tells the tool.

    B requests verifying q tokens each (q = γ+1; 1 without speculation; a prefill step is
    B = 1, q = its prompt tokens). 8.5 ms is the seeds' 118 tok/s on 16 GPUs.
    """

    base_s: float = 0.0085
    growth_per_token: float = 0.002
    draft_cost: float = 0.0

    def target(self, batch_size: int, tokens_per_request: int) -> float:
        """The target's verify pass alone (what `specdec calibrate` measures)."""
        return self.base_s * (1.0 + self.growth_per_token * batch_size * tokens_per_request)

    def __call__(self, batch_size: int, tokens_per_request: int) -> float:
        t = self.target(batch_size, tokens_per_request)
        if 1 < tokens_per_request <= MAX_VERIFY_TOKENS:
            t += self.draft_cost * self.target(batch_size, 1)
        return t

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"base_ms": self.base_s * 1e3, "growth_per_token": self.growth_per_token}
        return {**d, "draft_cost": self.draft_cost} if self.draft_cost else d


@dataclass(frozen=True)
class BatchMix:
    """Requests running per engine: piecewise constant over chunks of simulated time.

    At each chunk the batch size stays the same with probability ``persistence``, else is
    drawn from ``weights`` (batch size → share). That lazy chain's stationary law is
    ``weights`` itself: the true share of TIME spent at each batch size.
    """

    weights: tuple[tuple[int, float], ...]
    persistence: float = 0.0

    def __post_init__(self) -> None:
        if not self.weights:
            raise ScenarioError("batch.weights: needs at least one batch size")
        for b, w in self.weights:
            if not isinstance(b, int) or b < 1:
                raise ScenarioError(f"batch.weights: batch sizes must be integers >= 1, got {b!r}")
            if not (w >= 0 and math.isfinite(w)):
                raise ScenarioError(f"batch.weights[{b}]: must be a non-negative number, got {w!r}")
        if sum(w for _, w in self.weights) <= 0:
            raise ScenarioError("batch.weights: the weights sum to zero")
        if not 0.0 <= self.persistence < 1.0:
            raise ScenarioError(f"batch.persistence: must be in [0, 1), got {self.persistence!r}")

    @property
    def sizes(self) -> np.ndarray:
        return np.array([b for b, _ in self.weights])

    @property
    def shares(self) -> np.ndarray:
        w = np.array([w for _, w in self.weights], dtype=float)
        shares: np.ndarray = w / w.sum()
        return shares

    def to_dict(self) -> dict[str, object]:
        return {"weights": {str(b): w for b, w in self.weights}, "persistence": self.persistence}


@dataclass(frozen=True)
class PrefillMix:
    """Prefill steps: each step is one with probability ``prob`` and carries a prompt of
    one of ``tokens`` (uniform). Prefill steps draft nothing."""

    prob: float = 0.005
    tokens: tuple[int, ...] = (512, 1024, 2048, 4096)

    def __post_init__(self) -> None:
        if not 0.0 <= self.prob < 1.0:
            raise ScenarioError(f"prefill.prob: must be in [0, 1), got {self.prob!r}")
        if not self.tokens or any(not isinstance(t, int) or t < 1 for t in self.tokens):
            raise ScenarioError(f"prefill.tokens: must be positive integers, got {self.tokens!r}")

    def to_dict(self) -> dict[str, object]:
        return {"prob": self.prob, "tokens": list(self.tokens)}


@dataclass(frozen=True)
class EngineSpec:
    engine: str
    gamma: int
    process: AcceptanceProcess
    batch: BatchMix
    step_time_s: Callable[[int, int], float] = field(default_factory=LatencyBoundStepTime)
    prefill: PrefillMix = field(default_factory=PrefillMix)


@dataclass(frozen=True)
class TargetSpec:
    name: str
    route: str
    model_name: str
    engines: tuple[EngineSpec, ...]
    port: int = 0  # 0: an ephemeral port


@dataclass(frozen=True)
class ScheduledEvent:
    """An event at ``at_s`` seconds since the fleet started; engine None: every engine of
    the target. kinds: restart, set_gamma (gamma), spec_off, spec_on (gamma optional)."""

    at_s: float
    kind: str
    target: str
    engine: str | None = None
    gamma: int | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    targets: tuple[TargetSpec, ...]
    events: tuple[ScheduledEvent, ...] = ()
    start_time: float = DEFAULT_START_TIME
    chunk_s: float = 5.0
    step_metrics: str = "vllm"
    description: str = ""

    @property
    def routes(self) -> dict[str, list[TargetSpec]]:
        out: dict[str, list[TargetSpec]] = {}
        for t in self.targets:
            out.setdefault(t.route, []).append(t)
        return out


def check_gamma(gamma: object, where: str) -> int:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or not 0 <= gamma <= MAX_GAMMA:
        raise ScenarioError(f"{where}: gamma must be an integer 0..{MAX_GAMMA}, got {gamma!r}")
    return int(gamma)


def _seconds(value: object, where: str) -> float:
    v = duration_seconds(value)
    if v is None:
        raise ScenarioError(f"{where}: must be seconds or a duration like 90s, 15m, 1h; got {value!r}")
    if not (math.isfinite(v) and v >= 0):
        raise ScenarioError(f"{where}: must be a non-negative duration, got {value!r}")
    return v


def event_from_dict(d: object, where: str) -> ScheduledEvent:
    if not isinstance(d, dict):
        raise ScenarioError(f"{where}: must be a table, got {d!r}")
    extra = set(d) - {"at", "at_s", "kind", "target", "engine", "gamma"}
    if extra:
        raise ScenarioError(f"{where}: unknown keys {sorted(extra)}")
    kind = d.get("kind")
    if kind not in EVENT_KINDS:
        raise ScenarioError(f"{where}.kind: must be one of {list(EVENT_KINDS)}, got {kind!r}")
    if "target" not in d:
        raise ScenarioError(f"{where}: needs a 'target'")
    at = d.get("at", d.get("at_s"))
    if at is None:
        raise ScenarioError(f"{where}: needs 'at' (seconds since the start, or 15m, 1h ...)")
    gamma = d.get("gamma")
    if kind == "set_gamma" and gamma is None:
        raise ScenarioError(f"{where}: set_gamma needs 'gamma'")
    if gamma is not None:
        gamma = check_gamma(gamma, where)
    engine = d.get("engine")
    return ScheduledEvent(at_s=_seconds(at, f"{where}.at"), kind=kind, target=str(d["target"]),
                          engine=None if engine is None else str(engine), gamma=gamma)


def _batch_from_dict(d: object, where: str) -> BatchMix:
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        d = {"weights": {str(int(d)): 1.0}}
    if not isinstance(d, dict) or not isinstance(d.get("weights"), dict):
        raise ScenarioError(f"{where}: must be a table with 'weights' = {{batch size: share}}, got {d!r}")
    extra = set(d) - {"weights", "persistence"}
    if extra:
        raise ScenarioError(f"{where}: unknown keys {sorted(extra)}")
    weights = []
    for b, w in d["weights"].items():
        try:
            size = int(b)
            if str(size) != str(b).strip():
                raise ValueError
        except ValueError:
            raise ScenarioError(f"{where}.weights: batch sizes must be integers, got {b!r}") from None
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise ScenarioError(f"{where}.weights[{b}]: must be a number, got {w!r}")
        weights.append((size, float(w)))
    try:
        return BatchMix(tuple(sorted(weights)), float(d.get("persistence", 0.0)))
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _step_time_from_dict(d: object, where: str) -> LatencyBoundStepTime:
    if not isinstance(d, dict) or set(d) - {"base_ms", "growth_per_token", "draft_cost"}:
        raise ScenarioError(f"{where}: must be a table with base_ms, growth_per_token, draft_cost; got {d!r}")
    base = d.get("base_ms", 8.5)
    growth = d.get("growth_per_token", 0.002)
    draft_cost = d.get("draft_cost", 0.0)
    for name, v in (("base_ms", base), ("growth_per_token", growth), ("draft_cost", draft_cost)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ScenarioError(f"{where}.{name}: must be a non-negative number, got {v!r}")
    if base <= 0:
        raise ScenarioError(f"{where}.base_ms: must be positive, got {base!r}")
    return LatencyBoundStepTime(base / 1e3, float(growth), float(draft_cost))


def _prefill_from_dict(d: object, where: str) -> PrefillMix:
    if not isinstance(d, dict) or set(d) - {"prob", "tokens"}:
        raise ScenarioError(f"{where}: must be a table with prob, tokens; got {d!r}")
    try:
        return PrefillMix(float(d.get("prob", 0.005)), tuple(d.get("tokens", (512, 1024, 2048, 4096))))
    except (TypeError, ValueError) as e:
        raise ScenarioError(f"{where}: {e}") from None


_ENGINE_KEYS = {"gamma", "process", "batch", "step_time", "prefill"}


def scenario_from_dict(d: object, seed: int | None = None) -> Scenario:
    """A scenario from a TOML/JSON description (``specdec simulate --config FILE``).

    {"name", "seed", "start_time", "chunk_s", "step_metrics" ("design" | "vllm"),
     "model_name",
     "routes": {ROUTE: {"gamma", "process", "batch", "step_time", "prefill",   # defaults
                        "targets": [{"name", "port", "model_name", "engines": N or
                                     [{"engine", <engine keys>}], <engine keys>}] or N}},
     "events": [{"at": 900 or "15m", "kind", "target", "engine"?, "gamma"?}]}
    Engine keys (gamma, process, batch, step_time, prefill) cascade route → target →
    engine. process: see ``process_from_dict``; batch: {"weights": {"1": 0.3, "4": 0.7},
    "persistence": 0.5} or one integer; step_time: {"base_ms", "growth_per_token"};
    prefill: {"prob", "tokens"}. ``seed`` overrides the file's seed.
    """
    if not isinstance(d, dict):
        raise ScenarioError(f"scenario: must be a table, got {type(d).__name__}")
    extra = set(d) - {"name", "seed", "start_time", "chunk_s", "step_metrics", "model_name", "routes",
                      "events", "description"}
    if extra:
        raise ScenarioError(f"scenario: unknown keys {sorted(extra)}")
    name = str(d.get("name", "custom"))
    seed = d.get("seed", 0) if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(f"scenario.seed: must be a non-negative integer, got {seed!r}")
    start_time = d.get("start_time", DEFAULT_START_TIME)
    if isinstance(start_time, bool) or not isinstance(start_time, (int, float)) or not math.isfinite(start_time):
        raise ScenarioError(f"scenario.start_time: must be epoch seconds, got {start_time!r}")
    chunk_s = _seconds(d.get("chunk_s", 5.0), "scenario.chunk_s")
    if chunk_s <= 0:
        raise ScenarioError(f"scenario.chunk_s: must be positive, got {d.get('chunk_s')!r}")
    step_metrics = d.get("step_metrics", "vllm")
    if step_metrics not in STEP_METRICS:
        raise ScenarioError(f"scenario.step_metrics: must be one of {list(STEP_METRICS)}, got {step_metrics!r}")
    model_name = str(d.get("model_name", "kimi-k3"))
    routes = d.get("routes")
    if not isinstance(routes, dict) or not routes:
        raise ScenarioError("scenario.routes: needs at least one route table")

    targets: list[TargetSpec] = []
    names: set[str] = set()
    for route, rd in routes.items():
        where_r = f"routes.{route}"
        if not isinstance(rd, dict):
            raise ScenarioError(f"{where_r}: must be a table, got {rd!r}")
        extra = set(rd) - _ENGINE_KEYS - {"targets", "model_name"}
        if extra:
            raise ScenarioError(f"{where_r}: unknown keys {sorted(extra)}")
        route_defaults = {k: rd[k] for k in _ENGINE_KEYS if k in rd}
        tds = rd.get("targets", 1)
        if isinstance(tds, int) and not isinstance(tds, bool):
            if tds < 1:
                raise ScenarioError(f"{where_r}.targets: must be >= 1, got {tds!r}")
            tds = [{} for _ in range(tds)]
        if not isinstance(tds, list) or not tds:
            raise ScenarioError(f"{where_r}.targets: must be a list of target tables or a count, got {tds!r}")
        for i, td in enumerate(tds):
            where_t = f"{where_r}.targets[{i}]"
            if not isinstance(td, dict):
                raise ScenarioError(f"{where_t}: must be a table, got {td!r}")
            extra = set(td) - _ENGINE_KEYS - {"name", "port", "engines", "model_name"}
            if extra:
                raise ScenarioError(f"{where_t}: unknown keys {sorted(extra)}")
            tname = str(td.get("name", f"{route}-{i}"))
            if tname in names:
                raise ScenarioError(f"{where_t}.name: target {tname!r} appears twice")
            names.add(tname)
            port = td.get("port", 0)
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
                raise ScenarioError(f"{where_t}.port: must be an integer 0..65535, got {port!r}")
            target_defaults = {**route_defaults, **{k: td[k] for k in _ENGINE_KEYS if k in td}}
            eds = td.get("engines", 1)
            if isinstance(eds, int) and not isinstance(eds, bool):
                if eds < 1:
                    raise ScenarioError(f"{where_t}.engines: must be >= 1, got {eds!r}")
                eds = [{"engine": str(j)} for j in range(eds)]
            if not isinstance(eds, list) or not eds:
                raise ScenarioError(f"{where_t}.engines: must be a count or a list of engine tables, got {eds!r}")
            engines = []
            for j, ed in enumerate(eds):
                where_e = f"{where_t}.engines[{j}]"
                if not isinstance(ed, dict) or set(ed) - _ENGINE_KEYS - {"engine"}:
                    raise ScenarioError(f"{where_e}: must be a table with engine and {sorted(_ENGINE_KEYS)}, got {ed!r}")
                engines.append(_engine_spec({**target_defaults, **ed}, str(ed.get("engine", j)), where_e))
            if len({e.engine for e in engines}) != len(engines):
                raise ScenarioError(f"{where_t}.engines: engine labels repeat")
            targets.append(TargetSpec(tname, str(route), str(td.get("model_name", rd.get("model_name", model_name))),
                                      tuple(engines), port))

    events_d = d.get("events", [])
    if not isinstance(events_d, list):
        raise ScenarioError(f"scenario.events: must be a list, got {events_d!r}")
    events = tuple(event_from_dict(e, f"events[{i}]") for i, e in enumerate(events_d))
    by_name = {t.name: t for t in targets}
    for i, ev in enumerate(events):
        if ev.target not in by_name:
            raise ScenarioError(f"events[{i}].target: unknown target {ev.target!r}")
        if ev.engine is not None and ev.engine not in {e.engine for e in by_name[ev.target].engines}:
            raise ScenarioError(f"events[{i}].engine: target {ev.target!r} has no engine {ev.engine!r}")
    return Scenario(name=name, seed=int(seed), targets=tuple(targets), events=events, start_time=float(start_time),
                    chunk_s=chunk_s, step_metrics=step_metrics, description=str(d.get("description", "")))


def _engine_spec(d: dict[str, object], engine: str, where: str) -> EngineSpec:
    if "gamma" not in d:
        raise ScenarioError(f"{where}: needs 'gamma' (here, on its target or on its route)")
    if "process" not in d and d["gamma"] != 0:
        raise ScenarioError(f"{where}: needs 'process' (here, on its target or on its route)")
    gamma = check_gamma(d["gamma"], f"{where}.gamma")
    try:
        process = process_from_dict(d.get("process", {"kind": "independent", "p": 0.0}), f"{where}.process")
    except ProcessError as e:
        raise ScenarioError(str(e)) from None
    return EngineSpec(
        engine=engine, gamma=gamma, process=process,
        batch=_batch_from_dict(d.get("batch", {"weights": {"4": 1.0}}), f"{where}.batch"),
        step_time_s=_step_time_from_dict(d.get("step_time", {}), f"{where}.step_time"),
        prefill=_prefill_from_dict(d.get("prefill", {}), f"{where}.prefill"))


def scenario_to_dict(s: Scenario) -> dict[str, object]:
    """The description ``scenario_from_dict`` reads back (step_time must be LatencyBoundStepTime)."""
    routes: dict[str, dict[str, list[dict[str, object]]]] = {}
    for t in s.targets:
        engines = []
        for e in t.engines:
            ed: dict[str, object] = {"engine": e.engine, "gamma": e.gamma, "process": e.process.to_dict(), "batch": e.batch.to_dict(),
                  "prefill": e.prefill.to_dict()}
            if hasattr(e.step_time_s, "to_dict"):
                ed["step_time"] = e.step_time_s.to_dict()
            engines.append(ed)
        routes.setdefault(t.route, {"targets": []})["targets"].append(
            {"name": t.name, "port": t.port, "model_name": t.model_name, "engines": engines})
    events = [{"at": e.at_s, "kind": e.kind, "target": e.target,
               **({"engine": e.engine} if e.engine is not None else {}),
               **({"gamma": e.gamma} if e.gamma is not None else {})} for e in s.events]
    return {"name": s.name, "seed": s.seed, "start_time": s.start_time, "chunk_s": s.chunk_s,
            "step_metrics": s.step_metrics, "description": s.description, "routes": routes, "events": events}
