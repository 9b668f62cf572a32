"""The decision benchmark's truth and its windows (benchmarks/decision.py says what is scored).

``Truth``: a class's process priced by the TRUE cost at every γ — the process's own survival
at the window's end through the tool's speedup formula, over the stationary batch mix.
``generate_window``: the counts vLLM would expose at the deployed γ (D, T, A, A_1..A_γ per
15 s scrape, summed over the route's engines) and the step shape, drawn in-process with the
law of the simulator's processes: a batch size per 5 s chunk (the simulator's lazy chain),
verify steps per chunk from the true step time; stateless processes draw per-interval
multinomial counts of accepted lengths; the heterogeneous process runs its renewal of
requests per batch slot and draws each request's share as conditional binomials.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decision_scenarios import TABLE_BATCHES, TABLE_MAX_Q, DecisionClass, table_step_s  # noqa: E402

from acceptance.counts import IntervalCounts  # noqa: E402
from acceptance.sim.processes import (  # noqa: E402
    AcceptanceProcess,
    DriftingProcess,
    FrontLoadedProcess,
    HeterogeneousProcess,
)
from acceptance.windows import StepShapeWindow  # noqa: E402
from model.deployment import Deployment  # noqa: E402
from model.drafters import drafter_for  # noqa: E402
from model.profiles import STOCK, make_profile  # noqa: E402
from model.specialized import SPECIALIZED_TOKEN_LIMIT, specialized_refusal  # noqa: E402
from model.speedup import CostModel, mix_speedup, normalise_batch_mix  # noqa: E402

SCRAPE_S = 15.0            # the collector's interval
CHUNK_S = 5.0              # the simulator's chunk: one batch size per chunk
CHUNKS_PER_SCRAPE = int(SCRAPE_S / CHUNK_S)
GAMMA_MAX = 16             # recommend()'s default gamma_max; the truth's range for drafters without a block
PREFILL_TOKENS = (512, 1024, 2048, 4096)  # the simulator's default prompt sizes


# --------------------------------------------------------------------------- truth


@dataclass(frozen=True)
class ScaledVerifyProfile:
    """A profile whose verify increments are ``factor`` × the base profile's:
    T(B, q) = T(B, 1) + factor·(T_base(B, q) − T_base(B, 1)) — the truth of the classes whose
    cost the tool is told wrongly. Same interface as model.profiles' profiles."""

    base: object
    factor: float

    @property
    def absolute(self) -> bool:
        return self.base.absolute

    @property
    def name(self) -> str:
        return f"{self.base.name}×{self.factor:g} verify"

    def step_time_s(self, batch_size, tokens_per_request, path: str = STOCK):
        one = self.base.step_time_s(batch_size, 1, path)
        return one + self.factor * (self.base.step_time_s(batch_size, tokens_per_request, path) - one)

    def stock_pass_s(self, batch_size):
        return self.base.stock_pass_s(batch_size)

    def with_specialized_speedup(self, speedup: float) -> "ScaledVerifyProfile":
        return replace(self, base=self.base.with_specialized_speedup(speedup))


@dataclass(frozen=True)
class LinearVerifyProfile:
    """A profile whose step grows by ``per_token`` of its plain step per extra verified token:
    T(B, q) = T_base(B, 1)·(1 + per_token·(q − 1)) — the truth of the classes whose target
    verifies like a CPU (or a small model) whatever profile the tool is told."""

    base: object
    per_token: float

    @property
    def absolute(self) -> bool:
        return self.base.absolute

    @property
    def name(self) -> str:
        return f"{self.base.name} with +{self.per_token:g} a verified token"

    def step_time_s(self, batch_size, tokens_per_request, path: str = STOCK):
        one = self.base.step_time_s(batch_size, 1, path)
        return one * (1.0 + self.per_token * (np.asarray(tokens_per_request, dtype=float) - 1.0))

    def stock_pass_s(self, batch_size):
        return self.base.stock_pass_s(batch_size)

    def with_specialized_speedup(self, speedup: float) -> "LinearVerifyProfile":
        return replace(self, base=self.base.with_specialized_speedup(speedup))


def measured_table_path() -> Path:
    """The measured step-time table the `measured_table` classes give the tool (written once)."""
    path = Path(tempfile.gettempdir()) / f"specdec-decision-{os.getuid()}" / "step_costs.csv"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["batch_size,tokens_per_request,path,seconds"]
        lines += [f"{b},{q},stock,{table_step_s(b, q):.9f}" for b in TABLE_BATCHES for q in range(1, TABLE_MAX_Q + 1)]
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(path)
    return path


def tool_deployment(cls: DecisionClass) -> Deployment:
    """What the tool is told."""
    if cls.measured_table:
        return replace(cls.deployment, cost_profile=str(measured_table_path()))
    return cls.deployment


class Truth:
    """The class's true cost and acceptance: step times in seconds, S(γ) for γ = 0..GAMMA_MAX."""

    def __init__(self, cls: DecisionClass, specialized_speedup: float | None = None):
        self.cls = cls
        told = tool_deployment(cls)
        sp = specialized_speedup or cls.true_specialized_speedup or told.specialized_speedup_point
        overhead = told.draft_overhead if cls.true_draft_overhead is None else cls.true_draft_overhead
        self.deployment = replace(told, draft_cost=told.draft_cost * cls.true_draft_cost_factor,
                                  draft_overhead=overhead, specialized_speedup=float(sp))
        profile = make_profile(self.deployment)
        prefill_profile = profile  # a prefill's tokens are not verified draft tokens: the told profile prices them
        if cls.true_verify_factor != 1.0:
            profile = ScaledVerifyProfile(profile, cls.true_verify_factor)
        if cls.true_verify_per_token is not None:
            profile = LinearVerifyProfile(profile, cls.true_verify_per_token)
        if not profile.absolute:
            raise ValueError(f"class {cls.name}: the truth needs an absolute cost profile (set a baseline)")
        self.specialized_speedup = float(sp)
        self.profile = profile
        # Every verify step is pure decode in the simulation (prefills are steps of their own).
        self.cost = CostModel.for_deployment(self.deployment, clean_share=1.0, profile=profile)
        self.gammas = np.arange(GAMMA_MAX + 1)
        bs, us = normalise_batch_mix(cls.batch)
        self.batch_sizes, self.time_shares = bs, us
        self.step_times = self.cost.step_times(self.gammas, bs, self.specialized_speedup)  # (G, nB) seconds
        # a step whose drafter proposed nothing verifies one token (its proposer still runs)
        self.undrafted_step_times = self.cost.step_times(self.gammas, bs, self.specialized_speedup,
                                                         np.ones(len(self.gammas)))
        # Request weights w_B ∝ B·u_B / t_B at the deployed γ (model.speedup.batch_mix_from_time_shares).
        w = bs * us / self.step_times[cls.deployed_gamma]
        self.request_weights = w / w.sum()
        drafter = drafter_for(told.method)
        specialized = told.decode_backend == "latency_specialized"
        self.allowed = np.array([
            drafter.refusal(int(g)) is None and (not specialized or specialized_refusal(told.method, int(g)) is None)
            for g in self.gammas])
        self.prefill_s = float(np.mean([prefill_profile.step_time_s(1, t, STOCK) for t in PREFILL_TOKENS]))

    def survival(self, gamma: int, t: float) -> np.ndarray:
        return np.asarray(self.cls.process.true_survival(gamma, t), dtype=float)

    def expected_tokens(self, t: float) -> np.ndarray:
        """AL(γ) = 1 + Σ_{k≤γ} a_k(γ, t), γ = 0..GAMMA_MAX (a_k may depend on γ: heterogeneous)."""
        return np.array([1.0 + self.survival(int(g), t).sum() if g else 1.0 for g in self.gammas])

    def speedups(self, t: float) -> np.ndarray:
        """S(γ), γ = 0..GAMMA_MAX, under the true acceptance at time t (seconds since start)."""
        nu = self.cls.undrafted_share or None
        return mix_speedup(self.expected_tokens(t), self.step_times, self.batch_sizes, self.request_weights,
                           self.deployment.objective, undrafted_step_times=self.undrafted_step_times,
                           undrafted_token_share=nu)

    def undrafted_step_s(self, batch_size: int, gamma: int) -> float:
        """A request-step without a draft at γ (one token verified)."""
        return float(self.undrafted_step_times[int(gamma), list(self.batch_sizes).index(int(batch_size))])

    def undrafted_step_share(self, gamma: int, t: float, rng: np.random.Generator, rows: int) -> np.ndarray:
        """Per scrape interval, the share of request-steps without a draft: ν_i = ν·(1 ± swing)
        (uniform), as a share of steps u = ν / (ν + (1 − ν) / AL(γ))."""
        nu = np.clip(self.cls.undrafted_share * rng.uniform(1 - self.cls.undrafted_swing,
                                                            1 + self.cls.undrafted_swing, rows), 0.0, 0.95)
        al = float(self.expected_tokens(t)[int(gamma)])
        return nu / (nu + (1.0 - nu) / al)

    def step_s(self, batch_size: int, gamma: int) -> float:
        return _cached_step(self, int(batch_size), int(gamma))

    def engine_step_time(self, batch_size: int, tokens_per_request: int) -> float:
        """The simulator's step_time_s(B, q): a verify step (q = γ + 1 ≤ 17) or a prefill."""
        if tokens_per_request <= GAMMA_MAX + 1:
            return self.step_s(batch_size, tokens_per_request - 1)
        return float(self.profile.step_time_s(batch_size, tokens_per_request, STOCK))

    def verify_steps_per_s(self, batch_size: int, gamma: int) -> float:
        """Verify steps per second at batch B, prefill steps taking their share (as SimEngine)."""
        pi = self.cls.prefill_prob
        return (1.0 - pi) / ((1.0 - pi) * self.step_s(batch_size, gamma) + pi * self.prefill_s)


@lru_cache(maxsize=4096)
def _cached_step(truth: Truth, batch_size: int, gamma: int) -> float:
    return float(truth.cost.step_times([gamma], [batch_size], truth.specialized_speedup)[0, 0])


# ----------------------------------------------------------------------- generation


def _length_pmf(survival: np.ndarray) -> np.ndarray:
    """P(L = j), j = 0..γ, from a_1..a_γ."""
    a = np.concatenate([[1.0], survival, [0.0]])
    return np.clip(a[:-1] - a[1:], 0.0, None)


def _lazy_chain(rng, sizes, shares, persistence: float, n: int) -> np.ndarray:
    """The simulator's batch chain: per chunk keep the batch with prob ``persistence``, else redraw."""
    fresh = rng.choice(sizes, p=shares, size=n)
    keep = rng.random(n) < persistence
    keep[0] = False
    last_draw = np.maximum.accumulate(np.where(keep, 0, np.arange(n)))
    return fresh[last_draw]


def _rows_from_lengths(length_counts: np.ndarray, gamma: int) -> np.ndarray:
    """[D, T, A, A_1..A_γ] per row from counts of drafts by accepted length j = 0..γ."""
    drafts = length_counts.sum(axis=1)
    reached = np.cumsum(length_counts[:, ::-1], axis=1)[:, ::-1][:, 1:]
    accepted = length_counts @ np.arange(gamma + 1)
    return np.column_stack([drafts, drafts * gamma, accepted, reached]).astype(float)


def _stateless_survival(process: AcceptanceProcess) -> bool:
    return isinstance(process, FrontLoadedProcess) or (
        isinstance(process, DriftingProcess) and _stateless_survival(process.base) and _stateless_survival(process.other))


def _heterogeneous_rows(process: HeterogeneousProcess, rng, gamma: int, slot_steps: np.ndarray,
                        n_rows: int, row_of_chunk: np.ndarray) -> np.ndarray:
    """Per-row [D, T, A, A_k] of one engine: each batch slot runs a renewal of requests.

    slot_steps: (slots, chunks) verify steps each slot runs per chunk (0 when the batch is
    smaller than the slot: its request waits, as in the simulator). Slots start stationary.
    """
    out = np.zeros((n_rows, 3 + gamma))
    h_one = float(process.end_probability(np.array(1.0), gamma))
    for steps in slot_steps:
        total = int(steps.sum())
        if total == 0:
            continue
        row_steps = np.bincount(row_of_chunk, weights=steps, minlength=n_rows)
        row_ends = np.cumsum(row_steps)
        # The request running at the start: p ∝ f(p)/h(p) (rejection), residual life geometric.
        p0 = None
        while p0 is None:
            cand = rng.beta(process.a, process.b, size=16)
            ok = rng.random(16) < (1.0 / process.mean_output_tokens) / process.end_probability(cand, gamma)
            if ok.any():
                p0 = float(cand[np.argmax(ok)])
        ps = [np.array([p0])]
        lives = [rng.geometric(process.end_probability(np.array([p0]), gamma))]
        covered = int(lives[0][0])
        while covered < total:
            k = int(math.ceil((total - covered) * h_one * 1.5)) + 8
            p_more = rng.beta(process.a, process.b, size=k)
            life_more = rng.geometric(process.end_probability(p_more, gamma))
            ps.append(p_more)
            lives.append(life_more)
            covered += int(life_more.sum())
        p_req = np.concatenate(ps)
        req_ends = np.cumsum(np.concatenate(lives))
        # Pieces: the slot's steps cut at request ends and at row ends.
        cuts = np.union1d(np.minimum(req_ends, total), row_ends)
        cuts = cuts[cuts > 0]
        starts = np.concatenate([[0], cuts[:-1]])
        length = cuts - starts
        keep = length > 0
        starts, length = starts[keep], length[keep].astype(np.int64)
        req = np.searchsorted(req_ends, starts, side="right")
        row = np.searchsorted(row_ends, starts, side="right")
        p = p_req[req]
        reached = np.empty((len(length), gamma), dtype=np.int64)
        n = length
        for k in range(gamma):  # N_k ~ Bin(N_{k−1}, p): drafts whose first k tokens were accepted
            n = rng.binomial(n, p)
            reached[:, k] = n
        out[:, 0] += np.bincount(row, weights=length, minlength=n_rows)
        out[:, 2] += np.bincount(row, weights=reached.sum(axis=1), minlength=n_rows)
        for k in range(gamma):
            out[:, 3 + k] += np.bincount(row, weights=reached[:, k], minlength=n_rows)
    out[:, 1] = out[:, 0] * gamma
    return out


def _small_step_share(pmf: np.ndarray, batch_size: int) -> float:
    """P(B + Σ_{i≤B} L_i ≤ 64): a verify step's GENERATED tokens within the le="64" bucket
    (vLLM counts generated tokens in iteration_tokens), lengths i.i.d. with ``pmf``."""
    dist = np.array([1.0])
    for _ in range(batch_size):
        dist = np.convolve(dist, pmf)[: SPECIALIZED_TOKEN_LIMIT + 1]
    return float(dist[: SPECIALIZED_TOKEN_LIMIT - batch_size + 1].sum()) if batch_size <= SPECIALIZED_TOKEN_LIMIT else 0.0


def generate_window(cls: DecisionClass, truth: Truth, rng: np.random.Generator, t0: float = 0.0):
    """One seed's window at the deployed γ, starting t0 seconds into the process:
    (IntervalCounts, StepShapeWindow); the shape's itl_mean_s is the segment's own
    (generate_latency)."""
    intervals, shape, _ = generate_segment(cls, truth, rng, t0)
    return intervals, shape


def generate_segment(cls: DecisionClass, truth: Truth, rng: np.random.Generator, t0: float = 0.0):
    """(IntervalCounts, StepShapeWindow, (n, 2) ITL sum and count per scrape interval) of one
    seed's window at the deployed γ: generate_window's, with the latency that makes the
    shape's mean, interval by interval as the store keeps it."""
    gamma = cls.deployed_gamma
    n_rows = int(round(cls.window_s / SCRAPE_S))
    n_chunks = n_rows * CHUNKS_PER_SCRAPE
    chunk_mid = t0 + (np.arange(n_chunks) + 0.5) * CHUNK_S
    row_of_chunk = np.arange(n_chunks) // CHUNKS_PER_SCRAPE
    sizes, shares = truth.batch_sizes, truth.time_shares
    rate = {int(b): truth.verify_steps_per_s(int(b), gamma) for b in sizes}
    specialized = cls.deployment.decode_backend == "latency_specialized"
    process = cls.process
    stateless = _stateless_survival(process)
    if not stateless and not isinstance(process, HeterogeneousProcess):
        raise ValueError(f"class {cls.name}: no in-process generator for process kind {process.kind!r}")

    rows = np.zeros((n_rows, 3 + gamma))
    length_counts = np.zeros((n_rows, gamma + 1), dtype=np.int64)
    gauge: dict[int, int] = {}
    pairs = repeats = 0          # consecutive gauge samples of one engine, and those that kept B
    small_steps = all_steps = 0.0
    latency = np.zeros((n_rows, 2))  # per scrape interval: Σ ITL sum and count over the engines
    undrafted = truth.undrafted_step_share(gamma, t0 + cls.window_s, rng, n_rows) if cls.undrafted_share else None
    for _ in range(cls.engines):
        batch = _lazy_chain(rng, sizes, shares, cls.persistence, n_chunks)
        expected = np.array([rate[int(b)] for b in batch]) * CHUNK_S
        steps = np.floor(expected + rng.random(n_chunks)).astype(np.int64)
        # num_requests_running at each scrape: the batch of the interval's last chunk.
        at_scrape = batch[CHUNKS_PER_SCRAPE - 1::CHUNKS_PER_SCRAPE]
        for b, n in zip(*np.unique(at_scrape, return_counts=True)):
            gauge[int(b)] = gauge.get(int(b), 0) + int(n)
        pairs += len(at_scrape) - 1
        repeats += int((at_scrape[1:] == at_scrape[:-1]).sum())
        drafts = steps * batch
        if undrafted is not None:  # a share of the request-steps proposed nothing: no draft counted
            drafts = rng.binomial(drafts, 1.0 - undrafted[row_of_chunk])
        total, count = generate_latency(truth, gamma, batch, steps, None if undrafted is None else drafts)
        if cls.latency_noise:
            total = total * rng.lognormal(0.0, cls.latency_noise, n_chunks)
        latency += np.stack([np.bincount(row_of_chunk, weights=total, minlength=n_rows),
                             np.bincount(row_of_chunk, weights=count, minlength=n_rows)], axis=1)
        if stateless:
            if isinstance(process, DriftingProcess):
                other = rng.binomial(drafts, process.weight(chunk_mid))
                parts = ((drafts - other, process.base), (other, process.other))
            else:
                parts = ((drafts, process),)
            for part, proc in parts:
                per_row = np.bincount(row_of_chunk, weights=part, minlength=n_rows).astype(np.int64)
                if isinstance(proc, DriftingProcess) or not isinstance(proc, FrontLoadedProcess):
                    raise ValueError(f"class {cls.name}: nested drift is not generated in-process")
                length_counts += rng.multinomial(per_row, _length_pmf(proc.true_survival(gamma)))
        else:
            slots = np.arange(int(sizes.max()))[:, None]
            rows += _heterogeneous_rows(process, rng, gamma, np.where(batch[None, :] > slots, steps[None, :], 0),
                                        n_rows, row_of_chunk)
        if specialized:
            pmf = _length_pmf(truth.survival(gamma, t0 + cls.window_s))
            for b in np.unique(batch):
                n_b = int(steps[batch == b].sum())
                if b * (gamma + 1) <= SPECIALIZED_TOKEN_LIMIT:
                    small_steps += n_b
                else:
                    small_steps += rng.binomial(n_b, _small_step_share(pmf, int(b)))
            pi = cls.prefill_prob
            all_steps += steps.sum() + rng.poisson(steps.sum() * pi / (1.0 - pi))
    if stateless:
        rows = _rows_from_lengths(length_counts, gamma)
    ends = (np.arange(n_rows) + 1) * SCRAPE_S
    intervals = IntervalCounts(gamma, ends - SCRAPE_S, ends, rows)
    samples = sum(gauge.values())
    iteration_tokens = {float(SPECIALIZED_TOKEN_LIMIT): float(small_steps), math.inf: float(all_steps)} if specialized else {}
    shape = StepShapeWindow(batch_time_shares={b: n / samples for b, n in sorted(gauge.items())},
                            iteration_tokens=iteration_tokens,
                            itl_mean_s=latency[:, 0].sum() / latency[:, 1].sum() if latency[:, 1].sum() else None,
                            samples=samples, sample_pairs=pairs, repeated_pairs=repeats)
    return intervals, shape, latency


def generate_latency(truth: Truth, gamma: int, batch: np.ndarray, steps: np.ndarray,
                     drafted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """vllm:inter_token_latency_seconds (sum, count) of each of one engine's chunks: every
    verify step of B requests is B observations of its true step time, and the prefill steps
    between them (their expected number: no draw, so the counts' random stream is the one it
    was) delay the B running requests by their length. ``drafted``: the request-steps of each
    chunk that carried a draft (None: all), the others a one-token step's time (a step's time
    taken as its requests' mean: linear in the tokens it verifies)."""
    step_s = np.array([truth.step_s(int(b), gamma) for b in batch])
    pi = truth.cls.prefill_prob
    observations = steps * batch
    delay = steps * pi / (1.0 - pi) * truth.prefill_s * batch
    if drafted is None:
        return observations * step_s + delay, observations.astype(float)
    one_token_s = np.array([truth.undrafted_step_s(int(b), gamma) for b in batch])
    return drafted * step_s + (observations - drafted) * one_token_s + delay, observations.astype(float)
