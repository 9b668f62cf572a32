"""Acceptance processes of the simulated vLLM fleet: the ground truth of tests and demos.

Each process draws, for every running request of every verify step, the accepted prefix
length L ∈ {0..γ} of a γ-token draft (vLLM stops at the first rejected token), and knows
the TRUE expected survival a_k = P(L ≥ k), k = 1..γ, at any γ and time t (seconds since
the fleet started).

The truth is draft-weighted, the way vLLM counts: every running request drafts once per
verify step, so a_k is the mean of P(L ≥ k) over drafts, not over requests. For the
processes whose acceptance does not depend on the request (independent, front-loaded)
the two coincide; for the heterogeneous one they do not (see ``HeterogeneousProcess``).

Draws are vectorised: one uniform U per draft and L = #{k : U < a_k} (a_k non-increasing),
which has P(L ≥ k) = a_k exactly.
"""

from __future__ import annotations

from ..errors import InputError

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy.special import roots_jacobi


class ProcessError(InputError):
    """A process was described with values outside its domain (one-line message)."""


def _check_probability(name: str, value: float, *, open_low: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ProcessError(f"{name}: must be a number in [0, 1], got {value!r}") from None
    if not (0.0 <= v <= 1.0) or (open_low and v == 0.0):
        raise ProcessError(f"{name}: must be a probability in {'(0' if open_low else '[0'}, 1], got {value!r}")
    return v


def _lengths_from_survival(u: np.ndarray, survival: np.ndarray) -> np.ndarray:
    """L = #{k : u < a_k} for a non-increasing survival a_1..a_γ, so P(L ≥ k) = a_k."""
    # -a is non-decreasing: the count of -a_k < -u is searchsorted(..., side="left").
    return np.searchsorted(-survival, -u, side="left").astype(np.int16)


class AcceptanceProcess(ABC):
    """One acceptance process. ``state`` is the per-engine memory (None when stateless)."""

    kind: str = ""

    @abstractmethod
    def true_survival(self, gamma: int, t: float = 0.0) -> np.ndarray:
        """Expected draft-weighted survival a_1..a_γ at time t (seconds since fleet start)."""

    def new_state(self, gamma: int, rng: np.random.Generator) -> object:
        """Fresh per-engine state at engine start, restart or γ change (opaque to the caller)."""
        return None

    @abstractmethod
    def draw_lengths(self, state: object, rng: np.random.Generator, gamma: int, step_times: np.ndarray,
                     batch: int) -> np.ndarray:
        """Accepted lengths, an int array (steps, batch): one draft per running request per step."""

    @abstractmethod
    def to_dict(self) -> dict[str, object]:
        """The description ``process_from_dict`` reads back."""


@dataclass(frozen=True)
class FrontLoadedProcess(AcceptanceProcess):
    """Position-dependent conditional acceptance α_k, the same for every request.

    a_k = Π_{j ≤ k} α_j, where α_j for j past the list's end repeats its last value.
    """

    alphas: tuple[float, ...]
    kind = "front_loaded"

    def __post_init__(self) -> None:
        if len(self.alphas) == 0:
            raise ProcessError("front_loaded.alphas: needs at least one value")
        object.__setattr__(self, "alphas", tuple(
            _check_probability(f"front_loaded.alphas[{i}]", a) for i, a in enumerate(self.alphas)))

    def conditional(self, gamma: int) -> np.ndarray:
        """α_1..α_γ, the last listed value repeating past the end."""
        a = np.asarray(self.alphas, dtype=float)
        if gamma <= len(a):
            return a[:gamma].copy()
        return np.concatenate([a, np.full(gamma - len(a), a[-1])])

    def true_survival(self, gamma: int, t: float = 0.0) -> np.ndarray:
        survival: np.ndarray = np.cumprod(self.conditional(gamma))
        return survival

    def draw_lengths(self, state: object, rng: np.random.Generator, gamma: int, step_times: np.ndarray,
                     batch: int) -> np.ndarray:
        u = rng.random((len(step_times), batch))
        return _lengths_from_survival(u, self.true_survival(gamma))

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "alphas": list(self.alphas)}


class IndependentProcess(FrontLoadedProcess):
    """Every draft token accepted with the same probability p: α_k = p, a_k = p^k."""

    kind = "independent"

    def __init__(self, p: float) -> None:
        super().__init__((_check_probability("independent.p", p),))

    @property
    def p(self) -> float:
        return self.alphas[0]

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "p": self.p}

    def __repr__(self) -> str:
        return f"IndependentProcess(p={self.p})"


@dataclass
class _RequestSlots:
    """Per-engine memory of the heterogeneous process: one request per batch slot.

    p: each slot's request acceptance; remaining: verify steps the request still runs.
    Slots past the current batch size are frozen (their requests wait), which keeps every
    slot's history a plain renewal process, independent of the batch size.
    """

    p: np.ndarray = field(default_factory=lambda: np.empty(0))
    remaining: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


@dataclass(frozen=True)
class HeterogeneousProcess(AcceptanceProcess):
    """Requests differ: request i accepts each draft token with its own p_i ~ Beta(a, b).

    Given p_i, a draft accepts a prefix of length L with P(L ≥ k | p_i) = p_i^k. Requests
    persist: each runs until it has produced its output, whose length in tokens is
    geometric with mean ``mean_output_tokens`` (q = 1 / mean), so in a verify step that
    emits L + 1 tokens the request ends with probability 1 − (1 − q)^(L+1). Its expected
    per-step end probability is

        h(p) = Σ_{j=0..γ} P(L = j | p) · (1 − (1 − q)^(j+1)),

    and its lifetime in verify steps is geometric with mean 1/h(p) (drawn as such: the
    same renewal law, without tying the end to the particular L drawn).

    The truth is draft-weighted: a request drafts once per verify step it runs, so a
    request of acceptance p contributes drafts in proportion to 1/h(p). Requests that
    accept more finish sooner and draft less. Over the Beta density f:

        a_k = ∫ p^k f(p) / h(p) dp  /  ∫ f(p) / h(p) dp

    (Gauss–Jacobi quadrature, exact to ~1e-12). This depends on γ through h: the same
    traffic gives a different a_1 at another γ. Slots start in the stationary state (p
    drawn with density ∝ f/h, residual lifetime geometric), so there is no warm-up.
    """

    a: float
    b: float
    mean_output_tokens: float = 300.0
    kind = "heterogeneous"

    def __post_init__(self) -> None:
        for name in ("a", "b", "mean_output_tokens"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise ProcessError(f"heterogeneous.{name}: must be a positive number, got {v!r}")
        if self.mean_output_tokens < 1:
            raise ProcessError(f"heterogeneous.mean_output_tokens: must be >= 1, got {self.mean_output_tokens!r}")

    @property
    def _q(self) -> float:
        return 1.0 / self.mean_output_tokens

    def end_probability(self, p: np.ndarray, gamma: int) -> np.ndarray:
        """h(p): a request's expected probability of finishing in one verify step."""
        p = np.asarray(p, dtype=float)
        j = np.arange(gamma + 1)
        pj = p[..., None] ** j
        prob_len = np.concatenate([pj[..., :-1] * (1.0 - p[..., None]), pj[..., -1:]], axis=-1)
        end_given_len = 1.0 - (1.0 - self._q) ** (j + 1)
        h: np.ndarray = prob_len @ end_given_len
        return h

    def true_survival(self, gamma: int, t: float = 0.0) -> np.ndarray:
        return _heterogeneous_truth(self.a, self.b, self.mean_output_tokens, gamma).copy()

    def _draw_stationary(self, rng: np.random.Generator, n: int, gamma: int) -> tuple[np.ndarray, np.ndarray]:
        """n requests as seen at a random time: p with density ∝ f(p)/h(p), residual steps."""
        out = np.empty(0)
        h_min = self._q  # h(p) ≥ q: every step emits at least one token
        while len(out) < n:
            cand = rng.beta(self.a, self.b, size=max(4 * (n - len(out)), 8))
            keep = rng.random(len(cand)) < h_min / self.end_probability(cand, gamma)
            out = np.concatenate([out, cand[keep]])
        p = out[:n]
        return p, rng.geometric(self.end_probability(p, gamma))

    def new_state(self, gamma: int, rng: np.random.Generator) -> _RequestSlots:
        return _RequestSlots()

    def draw_lengths(self, state: object, rng: np.random.Generator, gamma: int, step_times: np.ndarray,
                     batch: int) -> np.ndarray:
        assert isinstance(state, _RequestSlots)  # this process's new_state
        n = len(step_times)
        if len(state.p) < batch:  # new slots start in the stationary state
            p_new, rem_new = self._draw_stationary(rng, batch - len(state.p), gamma)
            state.p = np.concatenate([state.p, p_new])
            state.remaining = np.concatenate([state.remaining, rem_new]).astype(np.int64)
        if n == 0 or batch == 0:
            return np.zeros((n, batch), dtype=np.int16)
        # Per slot, the requests that cover the n steps: the one running, then new ones.
        h_max = float(self.end_probability(np.array(1.0), gamma))
        k = int(math.ceil(n * h_max * 1.5)) + 4
        ps = [state.p[:batch, None]]
        lives = [state.remaining[:batch, None]]
        cum_end = state.remaining[:batch].copy()
        while np.any(cum_end <= n):  # rarely more than once
            p_more = rng.beta(self.a, self.b, size=(batch, k))
            life_more = rng.geometric(self.end_probability(p_more, gamma))
            ps.append(p_more)
            lives.append(life_more)
            cum_end = cum_end + life_more.sum(axis=1)
        ps_all = np.concatenate(ps, axis=1)
        cum = np.cumsum(np.concatenate(lives, axis=1), axis=1)  # request j covers [cum[j-1], cum[j])
        width = ps_all.shape[1]
        # One sorted search for all slots: shift slot b's ends by b·(n+1) (ends clipped to n).
        offsets = np.arange(batch)[:, None] * (n + 1)
        flat_ends = (np.minimum(cum, n) + offsets).ravel()
        steps = (np.arange(n)[None, :] + offsets).ravel()
        req = np.searchsorted(flat_ends, steps, side="right") - (np.arange(batch)[:, None] * width).ravel().repeat(n)
        p_steps = ps_all[np.repeat(np.arange(batch), n), req].reshape(batch, n).T
        # Carry the request running at step n into the next draw.
        running = np.array([np.searchsorted(cum[i], n, side="right") for i in range(batch)])
        state.p[:batch] = ps_all[np.arange(batch), running]
        state.remaining[:batch] = cum[np.arange(batch), running] - n
        u = 1.0 - rng.random((n, batch))  # in (0, 1]
        p_safe = np.clip(p_steps, 1e-12, 1.0 - 1e-12)
        lengths: np.ndarray = np.floor(np.log(u) / np.log(p_safe))  # P(L ≥ k) = P(u ≤ p^k) = p^k
        drawn: np.ndarray = np.minimum(lengths, gamma).astype(np.int16)
        return drawn

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "a": self.a, "b": self.b, "mean_output_tokens": self.mean_output_tokens}


@lru_cache(maxsize=256)
def _heterogeneous_truth(a: float, b: float, mean_output_tokens: float, gamma: int) -> np.ndarray:
    proc = HeterogeneousProcess(a, b, mean_output_tokens)
    # ∫_0^1 g(p) p^(a-1) (1-p)^(b-1) dp with x = 2p − 1: Jacobi weight (1−x)^(b−1) (1+x)^(a−1).
    x, w = roots_jacobi(96, b - 1.0, a - 1.0)
    p = (x + 1.0) / 2.0
    weight = w / proc.end_probability(p, gamma)
    powers = p[:, None] ** np.arange(1, gamma + 1)
    truth: np.ndarray = (weight @ powers) / weight.sum()
    return truth


@dataclass(frozen=True)
class DriftingProcess(AcceptanceProcess):
    """Moves from ``base`` to ``other`` over [start_s, start_s + duration_s].

    Each draft comes from ``other`` with probability w(t) = clip((t − start_s) / duration_s,
    0, 1) (a step at start_s when duration_s = 0), else from ``base``; both keep their own
    state, so the truth is exactly a_k(t) = (1 − w(t)) a_k^base(t) + w(t) a_k^other(t).
    t is seconds since the fleet started.
    """

    base: AcceptanceProcess
    other: AcceptanceProcess
    start_s: float
    duration_s: float
    kind = "drifting"

    def __post_init__(self) -> None:
        if not math.isfinite(self.start_s) or self.start_s < 0:
            raise ProcessError(f"drifting.start_s: must be >= 0 seconds, got {self.start_s!r}")
        if not math.isfinite(self.duration_s) or self.duration_s < 0:
            raise ProcessError(f"drifting.duration_s: must be >= 0 seconds, got {self.duration_s!r}")

    def weight(self, t: npt.ArrayLike) -> np.ndarray:
        """w(t): the share of drafts drawn from ``other``."""
        t = np.asarray(t, dtype=float)
        if self.duration_s == 0:
            return (t >= self.start_s).astype(float)
        return np.clip((t - self.start_s) / self.duration_s, 0.0, 1.0)

    def true_survival(self, gamma: int, t: float = 0.0) -> np.ndarray:
        w = float(self.weight(t))
        return (1.0 - w) * self.base.true_survival(gamma, t) + w * self.other.true_survival(gamma, t)

    def new_state(self, gamma: int, rng: np.random.Generator) -> tuple[object, object]:
        return (self.base.new_state(gamma, rng), self.other.new_state(gamma, rng))

    def draw_lengths(self, state: object, rng: np.random.Generator, gamma: int, step_times: np.ndarray,
                     batch: int) -> np.ndarray:
        assert isinstance(state, tuple)  # this process's new_state: (base's, other's)
        from_base = self.base.draw_lengths(state[0], rng, gamma, step_times, batch)
        from_other = self.other.draw_lengths(state[1], rng, gamma, step_times, batch)
        use_other = rng.random(from_base.shape) < self.weight(step_times)[:, None]
        return np.where(use_other, from_other, from_base)

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "base": self.base.to_dict(), "other": self.other.to_dict(),
                "start_s": self.start_s, "duration_s": self.duration_s}


def process_from_dict(d: object, where: str = "process") -> AcceptanceProcess:
    """Build a process from its description, e.g. {"kind": "independent", "p": 0.8}.

    Kinds: independent (p), front_loaded (alphas), heterogeneous (a, b,
    mean_output_tokens), drifting (base, other, start_s, duration_s). Errors are one
    line naming ``where``.
    """
    if not isinstance(d, dict):
        raise ProcessError(f"{where}: must be a table with a 'kind', got {d!r}")
    kind = str(d.get("kind", "")).replace("-", "_")
    known = {"independent": {"p"}, "front_loaded": {"alphas"},
             "heterogeneous": {"a", "b", "mean_output_tokens"},
             "drifting": {"base", "other", "start_s", "duration_s"}}
    if kind not in known:
        raise ProcessError(f"{where}.kind: must be one of {sorted(known)}, got {d.get('kind')!r}")
    extra = set(d) - known[kind] - {"kind"}
    if extra:
        raise ProcessError(f"{where}: unknown keys {sorted(extra)} for kind {kind!r}")
    try:
        if kind == "independent":
            return IndependentProcess(d["p"])
        if kind == "front_loaded":
            alphas = d["alphas"]
            if not isinstance(alphas, (list, tuple)):
                raise ProcessError(f"{where}.alphas: must be a list of probabilities, got {alphas!r}")
            return FrontLoadedProcess(tuple(alphas))
        if kind == "heterogeneous":
            return HeterogeneousProcess(d["a"], d["b"], d.get("mean_output_tokens", 300.0))
        return DriftingProcess(process_from_dict(d["base"], f"{where}.base"),
                               process_from_dict(d["other"], f"{where}.other"),
                               float(d.get("start_s", 0.0)), float(d.get("duration_s", 0.0)))
    except KeyError as e:
        raise ProcessError(f"{where}: kind {kind!r} needs key {e.args[0]!r}") from None
    except ProcessError as e:
        raise ProcessError(f"{where}: {e}") from None
    except (TypeError, ValueError) as e:
        raise ProcessError(f"{where}: {e}") from None
