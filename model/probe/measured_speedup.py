"""The specialized decode speedup measured from two γ segments' latency, instead of configured.

At one γ every step that fits the Kimi K3 specialized kernels runs the one path, and the
engine's latency sets the cost model's level, not the ratio of the two paths
(model.probe.specialized_speedup). Two segments at different γ whose steps take the path in
different shares — a probe at γ_p where the larger batches run stock — give two equations in
the two unknowns x = 1 / baseline_tokens_per_second (the plain-decode step at batch 1) and s:

    ITL_i = Σ_B u_B·B / Σ_B (u_B·B / t_i,B(x, s))        i = main, probe

vLLM observes vllm:inter_token_latency_seconds once per request per step, so its mean is the
step time averaged over request-steps: at time share u_B an engine makes u_B·B / t_B of them
per second. t_i,B is the cost model's step time of γ_i at batch B (model.speedup.CostModel,
clean share e), t = c0 + c1·x + (c2 + c3·x)/s on the flat and roofline profiles, the terms
as the cost model gives them (CostModel.anchor_terms). For each s the main
segment's equation fixes x (its ITL rises with x); s is where the probe's modelled ITL meets
its observed one, found on a grid over MEASURE_BOUNDS and interpolated. Each segment is
priced at its own engines' time shares where the source keeps gauge samples per segment (the
store: a probe whose γ keeps requests longer runs larger batches, and pricing its latency at
the fleet's mix would put that in s), else both at the route's; the interval is the same root
at each pair of resamples of them, drawn apart for each segment with its own gauge samples
(a probe of one engine for an hour saw far fewer batches than the fleet, and its latency is
of those). A latency from logged intervals is Little's law's N̄ / λ, N̄ from the same sampled
running counts as the mix: each resample moves it by N̄*/N̄ (``SegmentLatency.from_running``),
since what was counted is λ. The cost model's shape is taken as right — what a wrong shape does lands in s.

Not measured (``value`` None, with the reason) when the two segments take the path in
about the same share (their ITL ratio does not move with s), or no s in MEASURE_BOUNDS fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import numpy.typing as npt

from acceptance.durations import format_clock

from ..deployment import Deployment
from ..speedup import CostModel

MEASURE_BOUNDS = (0.5, 4.0)  # a fast path slower than stock is a finding too, so below 1×
# d ln ITL / d ln s must differ by this much between the segments: at 0.1 a 1% error in one
# segment's latency moves s by about 10%.
MIN_PATH_CONTRAST = 0.1
_GRID = 121
_NEWTON_STEPS = 12  # quadratic convergence: 1e-12 relative well before the last
# resamples of the time shares the interval is taken over (the rest add nothing to a 90% one)
MEASURE_RESAMPLES = 200
# ... and a planned probe's predicted interval (fewer leave its 5% and 95% quantiles ±20%
# apart between seeds), on a coarser grid (5% steps: a half-width of ±0.1 or more is what it
# is compared with)
_PREDICTION_RESAMPLES = 200
_PREDICTION_GRID = 41


@dataclass(frozen=True)
class SegmentLatency:
    """One γ segment's mean inter-token latency (the mean step time its requests saw)."""

    gamma: int
    itl_mean_s: float
    # {B: u_B} it was priced at: its own engines' (None: the route's, shared by both segments)
    time_shares: dict[int, float] | None = None
    # the latency is Little's law's N̄ / λ over logged intervals, N̄ the mean of the batch mix
    # it is priced at (acceptance.ingested_window): a resample of the mix moves it by N̄* / N̄
    from_running: bool = False


@dataclass(frozen=True)
class MeasuredSpeedup:
    """The specialized decode speedup s that the two segments' latency gives, with its interval
    over the batch mix's resamples, and the plain-decode rate 1/x it comes with."""

    value: float | None
    confidence_interval: tuple[float, float] | None
    level: float
    segments: tuple[SegmentLatency, SegmentLatency]  # main, probe
    baseline_tokens_per_second: float | None = None
    path_contrast: float | None = None  # d ln ITL / d ln s, probe less main
    reason: str = ""  # why not measured
    # (start, end) of the earlier window whose probe measured it; None: the window tuned
    window: tuple[float, float] | None = None

    @property
    def measured(self) -> bool:
        return self.value is not None

    def describe(self) -> str:
        """One line for the console and the dashboard."""
        main, probe = self.segments
        at = f"gamma {main.gamma} ({main.itl_mean_s * 1e3:.2f} ms) and gamma {probe.gamma} ({probe.itl_mean_s * 1e3:.2f} ms)"
        if main.time_shares is not None:
            at += ", each at its own engines' batch mix"
        if self.window is not None:
            at += f" in the window ending {format_clock(self.window[1])}, the last in which a probe ran"
        if not self.measured:
            return f"specialized speedup: not measured from the latency at {at}: {self.reason}"
        assert self.confidence_interval is not None  # measured: the value comes with its interval
        lo, hi = self.confidence_interval
        return (f"specialized speedup: {self.value:.2f}× [{lo:.2f}, {hi:.2f}] measured from the latency at {at}, "
                f"priced instead of the configured figure")

    def to_dict(self) -> dict[str, object]:
        main, probe = self.segments
        return {"value": self.value,
                "confidence_interval": None if self.confidence_interval is None else list(self.confidence_interval),
                "level": self.level, "baseline_tokens_per_second": self.baseline_tokens_per_second,
                "path_contrast": self.path_contrast,
                "segments": [{"gamma": int(s.gamma), "itl_mean_s": float(s.itl_mean_s),
                              "batch_time_shares": None if s.time_shares is None else
                              {str(b): float(u) for b, u in s.time_shares.items()}} for s in (main, probe)],
                "reason": self.reason or None,
                "window": None if self.window is None else [float(t) for t in self.window],
                "summary": self.describe()}


def measurable(deployment: Deployment) -> bool:
    """Whether latency can measure s here: the specialized path, on a profile anchored on a
    plain-decode rate (a table's measured seconds leave nothing to solve)."""
    return deployment.decode_backend == "latency_specialized" and deployment.cost_profile in ("flat", "roofline")


@dataclass(frozen=True, eq=False)
class SegmentShares:
    """The time shares u_B the two segments' engines ran at, over ``batch_sizes``: the main
    segment's, and the probe's own where known (else the main's for both); ``resamples``:
    (main's, probe's) resampled shares, (n, nB) each, for the interval."""

    batch_sizes: Sequence[int] | np.ndarray
    main: Sequence[float] | np.ndarray
    probe: Sequence[float] | np.ndarray | None = None
    resamples: tuple[np.ndarray, np.ndarray] | None = None


def measure_specialized_speedup(deployment: Deployment, main: SegmentLatency, probe: SegmentLatency,
                                shares: SegmentShares, *, clean_share: float = 1.0, level: float = 0.9
                                ) -> MeasuredSpeedup | None:
    """s from the two segments' latency (module docstring) at their time ``shares``; None off
    the specialized path or on a profile in measured seconds (a table: nothing to solve)."""
    if not measurable(deployment):
        return None
    segments = (main, probe)
    sizes = np.asarray(shares.batch_sizes, dtype=int)
    coeffs = np.stack([_step_coefficients(deployment, s.gamma, sizes, clean_share) for s in segments])  # (2, 4, nB)
    itl = np.array([main.itl_mean_s, probe.itl_mean_s])
    main_shares = np.asarray(shares.main, dtype=float)[None]
    pair = (main_shares, main_shares if shares.probe is None else np.asarray(shares.probe, dtype=float)[None])
    result = MeasuredSpeedup(None, None, float(level), segments)
    at = deployment.specialized_speedup_point
    x_at = float(_x_for(coeffs[0], main_shares * sizes, itl[0], np.array([1.0 / at]))[0])
    contrast = _path_contrast(coeffs, pair, sizes, at, x_at if np.isfinite(x_at) else float(itl[0]))
    if not abs(contrast) >= MIN_PATH_CONTRAST:
        return replace(result, path_contrast=contrast,
                       reason=f"both segments take the specialized path in about the same share (contrast "
                              f"{contrast:+.2f}, below {MIN_PATH_CONTRAST}): their latency ratio does not move with it")
    s, x = _solve(coeffs, itl, pair, sizes)
    if not np.isfinite(s[0]):
        return replace(result, path_contrast=contrast,
                       reason=f"no speedup within {MEASURE_BOUNDS[0]:g}–{MEASURE_BOUNDS[1]:g}× gives both "
                              f"latencies under the cost model")
    contrast = _path_contrast(coeffs, pair, sizes, float(s[0]), float(x[0]))
    interval = (float(s[0]), float(s[0]))
    if shares.resamples is not None:
        resampled = tuple(np.asarray(r, dtype=float)[:MEASURE_RESAMPLES] for r in shares.resamples)
        drawn, _ = _solve(coeffs, _resampled_itl(itl, [g.from_running for g in segments], pair, resampled, sizes),
                          resampled, sizes)
        drawn = drawn[np.isfinite(drawn)]
        if drawn.size:
            lo, hi = np.quantile(drawn, [(1 - level) / 2, (1 + level) / 2])
            interval = (float(min(lo, s[0])), float(max(hi, s[0])))
    return replace(result, value=float(s[0]), confidence_interval=interval, baseline_tokens_per_second=float(1 / x[0]),
                   path_contrast=contrast)


def predicted_halfwidth(deployment: Deployment, gammas: tuple[int, int], shares: SegmentShares, *,
                        clean_share: float, samples: tuple[float, float], level: float = 0.9,
                        from_running: bool = False) -> Callable[[float], float]:
    """h(s): the half-width of the interval measure_specialized_speedup would give if the true
    speedup were s — the latencies the cost model makes at s and the deployment's plain-decode
    rate, for the (main, probe) ``gammas`` at the main segment's ``shares`` resampled as each
    segment's ``samples`` (main, probe) would leave them (inf where more than a tenth of the
    resamples fit no s; ``from_running``: the latency is Little's law's, moving with each
    resample as SegmentLatency.from_running says). What a probe planned to measure s can
    resolve (model.probe.specialized_speedup.speedup_probe)."""
    sizes = np.asarray(shares.batch_sizes, dtype=int)
    main = np.asarray(shares.main, dtype=float)
    u = main / np.sum(main)
    coeffs = np.stack([_step_coefficients(deployment, g, sizes, clean_share) for g in gammas])
    rng = np.random.default_rng(0)
    drawn = tuple(rng.dirichlet(max(n, 1.0) * u + 0.5, size=_PREDICTION_RESAMPLES) for n in samples)
    # x: the plain-decode step time. A flat profile without a rate (relative units) scales every
    # step time with x as a whole, so the interval of s it predicts is the same at any x: x = 1.
    baseline = deployment.baseline_tokens_per_second
    x = np.array([1.0 / baseline if baseline else 1.0])
    weights = (u * sizes)[None]

    def halfwidth(s: float) -> float:
        itl = np.array([_itl(c, weights, x, np.array([1.0 / s]))[0] for c in coeffs])
        resampled_itl = _resampled_itl(itl, (from_running, from_running), (u[None], u[None]), drawn, sizes)
        found, _ = _solve(coeffs, resampled_itl, drawn, sizes, _PREDICTION_GRID)
        if np.mean(np.isfinite(found)) < 0.9:
            return math.inf
        lo, hi = np.quantile(found[np.isfinite(found)], [(1 - level) / 2, (1 + level) / 2])
        return float(hi - lo) / 2.0

    return halfwidth


def _resampled_itl(itl: np.ndarray, from_running: Sequence[bool], shares: Sequence[np.ndarray],
                   resampled: Sequence[np.ndarray], sizes: np.ndarray) -> npt.NDArray[np.float64]:
    """(2, n) each segment's latency under each resample of its mix: the observed one, or for
    a latency from Little's law (its ``from_running``) the observed one × N̄* / N̄, N̄ = Σ_B u_B·B
    — the rate of request-steps is what was counted, the requests running were sampled."""
    def mean_running(u: np.ndarray) -> npt.NDArray[np.float64]:
        running: npt.NDArray[np.float64] = (u * sizes).sum(-1) / u.sum(-1)
        return running

    return np.stack([observed * (mean_running(drawn) / mean_running(u)[0] if moves else np.ones(len(drawn)))
                     for observed, moves, u, drawn in zip(itl, from_running, shares, resampled)])


def _step_coefficients(deployment: Deployment, gamma: int, sizes: np.ndarray, clean_share: float) -> np.ndarray:
    """(4, nB) c0..c3 with t_B(x, s) = c0 + c1·x + (c2 + c3·x)/s (CostModel.anchor_terms)."""
    return CostModel.for_deployment(deployment, clean_share=clean_share).anchor_terms([gamma], sizes)[:, 0, :]


def _itl(coeffs: np.ndarray, weights: np.ndarray, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Modelled mean ITL of one segment (coefficients (4, nB)) at request-step weights u_B·B
    (..., nB), x and u = 1/s of shape (...): Σ w / Σ (w / t)."""
    t = coeffs[0] + coeffs[1] * x[..., None] + (coeffs[2] + coeffs[3] * x[..., None]) * u[..., None]
    with np.errstate(divide="ignore"):  # t = 0 at x = 0 on the flat profile: an infinitely fast step
        itl: np.ndarray = weights.sum(-1) / (weights / t).sum(-1)
        return itl


def _x_for(coeffs: np.ndarray, weights: np.ndarray, itl: npt.ArrayLike, u: np.ndarray) -> np.ndarray:
    """The x at which the segment's modelled ITL is ``itl`` (a number, or one per row of u),
    for each u (NaN where even x = 0 is slower). With t_B = P_B + x·Q_B, f(x) = Σ w/t − Σ w/itl
    falls and is convex in x, so Newton's steps from a point left of the root (where the
    slowest t_B is itl, the harmonic mean then at most itl) climb to it without overshooting."""
    p = coeffs[0] + coeffs[2] * u[..., None]
    q = coeffs[1] + coeffs[3] * u[..., None]
    total = weights.sum(-1) / itl
    x = np.maximum(((np.asarray(itl)[..., None] - p) / q).min(-1), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(_NEWTON_STEPS):
            t = p + x[..., None] * q
            f = (weights / t).sum(-1) - total
            slope = -(weights * q / (t * t)).sum(-1)
            x = np.where(np.isfinite(f) & (slope < 0), x - f / slope, x)
    return np.where(_itl(coeffs, weights, np.zeros_like(u), u) < itl, x, np.nan)


def _solve(coeffs: np.ndarray, itl: np.ndarray, shares: Sequence[np.ndarray], sizes: np.ndarray,
           grid: int = _GRID) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(s, x) per row of the (main, probe) ``shares`` (n, nB) each: s where the probe's modelled
    ITL, at the x that fits the main segment, meets its observed one (the first crossing on a
    log grid of ``grid`` points over MEASURE_BOUNDS, interpolated); NaN where none does.
    ``itl``: the two segments' observed latency, (2,) or (2, n) one per row."""
    weights = shares[0] * sizes  # (n, nB)
    s_grid = np.geomspace(*MEASURE_BOUNDS, grid)
    u = np.broadcast_to(1.0 / s_grid, (len(weights), grid))  # (n, K)
    itl = np.asarray(itl, dtype=float)
    main_itl, probe_itl = (itl[0], itl[1]) if itl.ndim == 1 else (itl[0][:, None], itl[1][:, None])
    x = _x_for(coeffs[0], weights[:, None, :], main_itl, u)
    gap = np.log(_itl(coeffs[1], (shares[1] * sizes)[:, None, :], np.nan_to_num(x), u) / probe_itl)
    gap[~np.isfinite(x)] = np.nan
    crosses = np.sign(gap[:, :-1]) * np.sign(gap[:, 1:]) <= 0  # NaN compares False
    first = crosses & (np.cumsum(crosses, axis=1) == 1)  # the first crossing per row
    s, x_at = np.full(len(weights), np.nan), np.full(len(weights), np.nan)
    rows, j = np.nonzero(first)
    g0, g1 = gap[rows, j], gap[rows, j + 1]
    f = np.where(g0 == g1, 0.0, g0 / np.where(g0 == g1, 1.0, g0 - g1))
    log_s = np.log(s_grid)
    s[rows] = np.exp(log_s[j] + f * (log_s[j + 1] - log_s[j]))
    x_at[rows] = x[rows, j] + f * (x[rows, j + 1] - x[rows, j])
    return s, x_at


def _path_contrast(coeffs: np.ndarray, shares: tuple[np.ndarray, np.ndarray], sizes: np.ndarray, s: float,
                   x: float) -> float:
    """d ln ITL / d ln s of the probe segment less the main one's, at (x, s), each segment at
    its ``shares`` (main's, probe's; (1, nB) each)."""
    eps = 1e-3
    u = np.array([1.0 / (s * (1 - eps)), 1.0 / (s * (1 + eps))])
    xs = np.full(2, x)
    slopes = [np.diff(np.log(_itl(c, w * sizes, xs, u)))[0] / (np.log1p(eps) - np.log1p(-eps))
              for c, w in zip(coeffs, shares)]
    return float(slopes[1] - slopes[0])
