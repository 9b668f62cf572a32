"""One simulated vLLM engine: its steps, generated per chunk of simulated time from a random
stream keyed by (seed, engine, engine life, chunk), its counters at any instant, its events
(restart, set_gamma, spec_off, spec_on) and its truth (acceptance module docstring of
acceptance.sim).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ..counts import SpecCounts
from .exposition import INTER_TOKEN_LATENCY_BUCKETS, ITERATION_TOKENS_BUCKETS, EngineExposure
from .scenario import EVENT_KINDS, EngineSpec, Scenario, ScenarioError, TargetSpec, check_gamma


class _Fleet(Protocol):
    """What an engine uses of the Fleet whose clock it runs on (acceptance.sim.fleet)."""

    @property
    def scenario(self) -> Scenario: ...
    def _engine_event(self, eng: SimEngine, kind: str, gamma: int | None = None) -> None: ...

EPS_S = 1e-9  # simulated seconds: times closer than this are the same instant


@dataclass
class _Chunk:
    """Steps that start within one chunk, generated at once; cumulative per step."""

    end: np.ndarray               # (n,) relative end time of each step
    spec: np.ndarray              # (n, 3+γ) cumulative [D, T, A, A_1..A_γ]
    iter_tokens: np.ndarray       # (n, nb) cumulative non-cumulative-bucket counts
    iter_sum: np.ndarray          # (n,)
    itl: np.ndarray               # (n, nb)
    itl_sum: np.ndarray           # (n,)
    verify_steps: np.ndarray      # (n,) cumulative verify (non-prefill) steps
    batch: int
    gamma: int                    # 0: no speculation
    last_verify_end: float | None

    def upto(self, t: float) -> int:
        """Number of this chunk's steps that ended by t."""
        return int(np.searchsorted(self.end, t + EPS_S, side="right"))


def _bucket_index(bounds: Sequence[float], values: np.ndarray) -> np.ndarray:
    """Index of the first bucket with value ≤ le (len(bounds) = +Inf)."""
    return np.searchsorted(np.asarray(bounds, dtype=float), values, side="left")


class SimEngine:
    """One simulated vLLM engine. Call the event methods with the fleet's lock free; they
    act at the fleet's current time."""

    def __init__(self, fleet: _Fleet, target: TargetSpec, spec: EngineSpec, uid: int) -> None:
        self._fleet = fleet
        self.target = target.name
        self.route = target.route
        self.model_name = target.model_name
        self.engine = spec.engine
        self.process = spec.process
        self.batch_mix = spec.batch
        self.step_time_s = spec.step_time_s
        self.prefill = spec.prefill
        self._uid = uid
        self._seed = fleet.scenario.seed
        self._chunk_s = fleet.scenario.chunk_s
        self._vllm_step_metrics = fleet.scenario.step_metrics == "vllm"
        self.gamma = spec.gamma
        self._last_spec_gamma = spec.gamma if spec.gamma > 0 else None
        self._life = -1
        self._batch_now: int | None = None
        self._truth: dict[int, np.ndarray] = {}
        self._truth_steps: dict[tuple[int, int], int] = {}
        self._start_life(0.0)

    # -- lifecycle

    @property
    def created(self) -> float:
        """Epoch time this engine (re)started: the counters' ``_created``."""
        return self._fleet.scenario.start_time + self._life_start

    def _start_life(self, t: float) -> None:
        self._life += 1
        self._life_start = t
        self._clock = t           # when the next step may start
        self._chunk: _Chunk | None = None
        nb_iter, nb_itl = len(ITERATION_TOKENS_BUCKETS) + 1, len(INTER_TOKEN_LATENCY_BUCKETS) + 1
        self._spec = np.zeros(3 + self.gamma)
        self._iter = np.zeros(nb_iter)
        self._iter_sum = 0.0
        self._itl = np.zeros(nb_itl)
        self._itl_sum = 0.0
        self._last_verify_end: float | None = None  # a restart drops the running requests
        state_rng = np.random.default_rng([self._seed, self._uid, self._life, 0, 1])
        self._state = self.process.new_state(self.gamma, state_rng) if self.gamma > 0 else None

    def _rng(self, chunk: int) -> np.random.Generator:
        return np.random.default_rng([self._seed, self._uid, self._life, chunk + 1, 0])

    # -- simulation

    def _next_batch(self, rng: np.random.Generator) -> int:
        mix = self.batch_mix
        if self._batch_now is not None and rng.random() < mix.persistence:
            return self._batch_now
        return int(rng.choice(mix.sizes, p=mix.shares))

    def _generate_chunk(self) -> _Chunk:
        chunk_index = int(math.floor(self._clock / self._chunk_s + EPS_S))
        chunk_end = (chunk_index + 1) * self._chunk_s
        rng = self._rng(chunk_index)
        batch = self._next_batch(rng)
        self._batch_now = batch
        gamma = self.gamma
        q = gamma + 1
        verify_s = float(self.step_time_s(batch, q))
        prefill_tokens = np.asarray(self.prefill.tokens)
        prefill_s = np.array([float(self.step_time_s(1, int(t))) for t in prefill_tokens])
        if not (verify_s > 0 and np.all(prefill_s > 0)):
            raise ScenarioError(f"step_time_s: must be positive, got {verify_s!r} for engine {self.target}/{self.engine}")
        shortest = min(verify_s, float(prefill_s.min()))
        n_max = int((chunk_end - self._clock) / shortest) + 2
        is_prefill = rng.random(n_max) < self.prefill.prob
        which_prompt = rng.integers(0, len(prefill_tokens), n_max)
        durations = np.where(is_prefill, prefill_s[which_prompt], verify_s)
        ends = self._clock + np.cumsum(durations)
        n = int(np.searchsorted(ends - durations, chunk_end - EPS_S, side="left"))  # steps starting before the chunk ends
        n = max(n, 1)
        ends, durations, is_prefill, which_prompt = ends[:n], durations[:n], is_prefill[:n], which_prompt[:n]
        verify = ~is_prefill
        nv = int(verify.sum())

        spec_rows = np.zeros((n, 3 + gamma))
        tokens_per_request = np.ones((nv, batch))  # tokens emitted per request per verify step
        if gamma > 0 and nv > 0:
            lengths = self.process.draw_lengths(self._state, rng, gamma, ends[verify] - durations[verify], batch)
            cell = np.repeat(np.arange(nv) * (gamma + 1), batch) + lengths.ravel()
            per_len = np.bincount(cell, minlength=nv * (gamma + 1)).reshape(nv, gamma + 1)
            reached = per_len[:, ::-1].cumsum(axis=1)[:, ::-1]  # drafts with L ≥ k, k = 0..γ
            accepted = lengths.sum(axis=1, dtype=np.int64)
            spec_rows[verify, 0] = batch
            spec_rows[verify, 1] = batch * gamma
            spec_rows[verify, 2] = accepted
            spec_rows[verify, 3:] = reached[:, 1:]
            tokens_per_request = lengths + 1.0

        # Iteration tokens per step.
        if self._vllm_step_metrics:
            verify_tokens = tokens_per_request.sum(axis=1)  # generated tokens
        else:
            verify_tokens = np.full(nv, float(batch * q))  # scheduled tokens
        step_tokens = prefill_tokens[which_prompt].astype(float)
        step_tokens[verify] = verify_tokens
        iter_rows = np.zeros((n, len(ITERATION_TOKENS_BUCKETS) + 1))
        iter_rows[np.arange(n), _bucket_index(ITERATION_TOKENS_BUCKETS, step_tokens)] = 1.0

        # Inter-token latency: a running request's token gap spans any prefill step between.
        itl_rows = np.zeros((n, len(INTER_TOKEN_LATENCY_BUCKETS) + 1))
        itl_sum_rows = np.zeros(n)
        last_verify_end = self._last_verify_end
        if nv > 0:
            v_ends = ends[verify]
            prev = np.concatenate([[last_verify_end if last_verify_end is not None else v_ends[0] - verify_s], v_ends[:-1]])
            gap = v_ends - prev
            if self._vllm_step_metrics:
                values = np.broadcast_to(gap[:, None], (nv, batch))
                weights = np.ones((nv, batch))
            else:
                values = gap[:, None] / tokens_per_request
                weights = tokens_per_request
            idx = _bucket_index(INTER_TOKEN_LATENCY_BUCKETS, values)
            nb = itl_rows.shape[1]
            cell = np.repeat(np.arange(nv) * nb, batch) + idx.ravel()
            itl_rows[verify] = np.bincount(cell, weights=weights.ravel(), minlength=nv * nb).reshape(nv, nb)
            itl_sum_rows[verify] = gap * batch
            last_verify_end = float(v_ends[-1])

        self._clock = float(ends[-1])
        return _Chunk(
            end=ends, spec=np.cumsum(spec_rows, axis=0), iter_tokens=np.cumsum(iter_rows, axis=0),
            iter_sum=np.cumsum(step_tokens), itl=np.cumsum(itl_rows, axis=0), itl_sum=np.cumsum(itl_sum_rows),
            verify_steps=np.cumsum(verify), batch=batch, gamma=gamma, last_verify_end=last_verify_end)

    def _commit(self, c: _Chunk, k: int) -> None:
        """Add the first k steps of chunk c to the engine's counters and the truth."""
        if k <= 0:
            return
        row = c.spec[k - 1]
        self._spec += row
        self._iter += c.iter_tokens[k - 1]
        self._iter_sum += c.iter_sum[k - 1]
        self._itl += c.itl[k - 1]
        self._itl_sum += c.itl_sum[k - 1]
        if c.gamma > 0:
            self._truth[c.gamma] = self._truth.get(c.gamma, np.zeros(3 + c.gamma)) + row
        key = (c.gamma, c.batch)
        self._truth_steps[key] = self._truth_steps.get(key, 0) + int(c.verify_steps[k - 1])

    def _advance_to(self, t: float) -> None:
        """Generate and commit every chunk whose steps all ended by t (relative seconds)."""
        while True:
            if self._chunk is None:
                self._chunk = self._generate_chunk()
            if self._chunk.end[-1] <= t + EPS_S:
                self._commit(self._chunk, len(self._chunk.end))
                self._last_verify_end = self._chunk.last_verify_end
                self._chunk = None
            else:
                return

    def _partial(self, t: float) -> tuple[_Chunk | None, int]:
        c = self._chunk
        return (c, c.upto(t)) if c is not None else (None, 0)

    def _apply(self, kind: str, t: float, gamma: int | None = None) -> None:
        """Apply an event at relative time t (the engine is already advanced to t)."""
        new_gamma: int | None
        if kind == "restart":
            new_gamma = self.gamma
        elif kind == "set_gamma":
            new_gamma = check_gamma(gamma, f"set_gamma on {self.target}/{self.engine}")
        elif kind == "spec_off":
            new_gamma = 0
        elif kind == "spec_on":
            new_gamma = gamma if gamma is not None else self._last_spec_gamma
            if new_gamma is None:
                raise ScenarioError(f"spec_on on {self.target}/{self.engine}: no gamma given and none deployed before")
            new_gamma = check_gamma(new_gamma, f"spec_on on {self.target}/{self.engine}")
        else:
            raise ScenarioError(f"event kind: must be one of {list(EVENT_KINDS)}, got {kind!r}")
        # Steps that ended by t happened; the one in flight and later ones did not.
        c, k = self._partial(t)
        if c is not None:
            self._commit(c, k)
        self.gamma = new_gamma
        if new_gamma > 0:
            self._last_spec_gamma = new_gamma
        self._start_life(t)

    # -- public events (act at the fleet's now)

    def restart(self) -> None:
        """Counters back to zero with a new ``_created``; running requests are dropped."""
        self._fleet._engine_event(self, "restart")

    def set_gamma(self, gamma: int) -> None:
        """Restart with γ = gamma (a new position label set; 0 = no speculation)."""
        self._fleet._engine_event(self, "set_gamma", gamma)

    def spec_off(self) -> None:
        """Restart without speculation: the spec-decode families vanish."""
        self._fleet._engine_event(self, "spec_off")

    def spec_on(self, gamma: int | None = None) -> None:
        """Restart with speculation back on (the last γ unless given)."""
        self._fleet._engine_event(self, "spec_on", gamma)

    # -- views

    def exposure(self, t: float) -> EngineExposure:
        c, k = self._partial(t)
        spec, it, it_sum, itl, itl_sum = self._spec, self._iter, self._iter_sum, self._itl, self._itl_sum
        if c is not None and k > 0:
            spec = spec + c.spec[k - 1]
            it = it + c.iter_tokens[k - 1]
            it_sum = it_sum + c.iter_sum[k - 1]
            itl = itl + c.itl[k - 1]
            itl_sum = itl_sum + c.itl_sum[k - 1]
        running = c.batch if c is not None else (self._batch_now or 0)
        return EngineExposure(
            model_name=self.model_name, engine=self.engine,
            spec=SpecCounts.from_vector([float(x) for x in spec]) if self.gamma > 0 else None,
            created=self.created, num_requests_running=float(running),
            iteration_tokens=it, iteration_tokens_sum=float(it_sum), itl=itl, itl_sum=float(itl_sum))

    def truth(self, t: float) -> dict[int, SpecCounts]:
        """Exact counts generated since the fleet started, per γ, up to relative time t."""
        out = {g: v.copy() for g, v in self._truth.items()}
        c, k = self._partial(t)
        if c is not None and k > 0 and c.gamma > 0:
            out[c.gamma] = out.get(c.gamma, np.zeros(3 + c.gamma)) + c.spec[k - 1]
        return {g: SpecCounts.from_vector([float(x) for x in v]) for g, v in sorted(out.items())}

    def truth_steps(self, t: float) -> dict[tuple[int, int], int]:
        """Verify steps generated since the fleet started, keyed by (γ, batch size)."""
        out = dict(self._truth_steps)
        c, k = self._partial(t)
        if c is not None and k > 0:
            key = (c.gamma, c.batch)
            out[key] = out.get(key, 0) + int(c.verify_steps[k - 1])
        return {key: v for key, v in sorted(out.items()) if v > 0}

    def verify_steps_per_second(self, batch: int, gamma: int) -> float:
        """Expected verify steps per second at a batch size (prefill steps take their share)."""
        verify_s = self.step_time_s(batch, gamma + 1)
        prefill_s = float(np.mean([self.step_time_s(1, t) for t in self.prefill.tokens]))
        pi = self.prefill.prob
        return (1.0 - pi) / ((1.0 - pi) * verify_s + pi * prefill_s)
