"""Cost profiles: the time of one target step, T_target(B, q), for B requests verifying q
tokens each (q = γ + 1; q = 1 is plain decode), on the stock or the specialized path.

Interface (every profile): ``name``; ``step_time_s(batch_size, tokens_per_request,
path="stock" | "specialized") -> seconds`` (array-friendly: arguments broadcast);
``stock_pass_s(batch_size) = step_time_s(batch_size, 1, "stock")``, the unit the draft
cost is measured in. The specialized path costs stock / specialized_speedup unless a
measured table has specialized rows.

- ``FlatProfile`` — the seeds' model: T_target flat in q and in B, T = 1 / baseline tok/s
  (or 1 time unit when there is no baseline: ``absolute`` False).
- ``RooflineProfile`` — anchored on a measured step time t_a at batch B_a, q = 1, and
  modelling only the increments (docs/MODEL.md, Cost model: a roofline alone is wrong at small batch):
    T(B, q) = t_a + roof(B, q) − roof(B_a, 1)
    roof(B, q) = max(bytes(B, q) / (HBM·TP), flops(B, q) / (FLOP/s·TP))
    bytes = W_dense + E·(1 − (1 − k/E)^n)·W_expert + B·L·kv + B·S·(1 + q),  n = B·q
  with W_dense the non-expert weight bytes, W_expert one expert slot's bytes over all MoE
  layers, E·(1 − (1 − k/E)^n) the experts touched per MoE layer by n tokens under uniform
  routing, L the context length, kv the KV bytes per token, S the recurrent state per
  request (read once, written once per verified position); flops = 2·active·n.
- ``TableProfile`` — measured seconds keyed by (batch_size, tokens_per_request, path),
  linear in B between measured batch sizes (and in q between measured q), extended
  linearly past the ends; specialized rows are used at their own q, else stock / speedup.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from acceptance.request_context import CONTEXT_SOURCE

from .deployment import Deployment, ModelInputError
from .figures import Figure, GpuFigures, ModelFigures, gpu_figures
from .hf_config import model_figures

STOCK, SPECIALIZED = "stock", "specialized"
_F64: TypeAlias = npt.NDArray[np.float64]
CONFIGURED_CONTEXT = "[deployment] context_tokens"  # the source of a configured context_tokens


def _check_path(path: str) -> None:
    if path not in (STOCK, SPECIALIZED):
        raise ModelInputError(f"path must be 'stock' or 'specialized', got {path!r}")


@dataclass(frozen=True)
class FlatProfile:
    """T_target(B, q) = T0 = 1 / baseline tok/s, whatever B and q (the seeds' model)."""

    base_step_s: float = 1.0
    specialized_speedup: float = 1.0
    absolute: bool = False
    name: str = "flat"

    def step_time_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike, path: str = STOCK) -> _F64:
        _check_path(path)
        t = self.base_step_s + self.increment_s(batch_size, tokens_per_request)
        return t / self.specialized_speedup if path == SPECIALIZED else t

    def increment_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> _F64:
        """A step's time past the plain-decode step: none (every step costs T0)."""
        return np.zeros(np.broadcast(np.asarray(batch_size), np.asarray(tokens_per_request)).shape)

    def specialized_terms(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> tuple[_F64, _F64]:
        """(fixed, scaled): the specialized path's step time at speedup s is fixed + scaled / s."""
        stock = self.step_time_s(batch_size, tokens_per_request, STOCK)
        return np.zeros_like(stock), stock

    def stock_pass_s(self, batch_size: npt.ArrayLike) -> _F64:
        return self.step_time_s(batch_size, 1, STOCK)

    def with_specialized_speedup(self, speedup: float) -> "FlatProfile":
        return replace(self, specialized_speedup=speedup)


def experts_touched(n_tokens: npt.ArrayLike, experts: float, experts_per_token: float) -> _F64:
    """E·(1 − (1 − k/E)^n): distinct experts one MoE layer reads for n tokens, uniform routing."""
    n = np.asarray(n_tokens, dtype=float)
    if experts <= 0:
        return np.zeros_like(n)
    return experts * (1.0 - (1.0 - experts_per_token / experts) ** n)


def step_bytes(m: ModelFigures, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> _F64:
    """Bytes one step of B requests verifying q tokens each reads over the whole TP group: the
    weights its n = B·q tokens touch, each request's KV at the context, its recurrent state
    read once and written once per verified position (module docstring)."""
    b = np.asarray(batch_size, dtype=float)
    q = np.asarray(tokens_per_request, dtype=float)
    weight_bytes = m.bytes_per_weight.value * (
        m.non_expert_params
        + experts_touched(b * q, m.experts.value, m.experts_per_token.value) * m.expert_params_all_layers
    )
    kv_bytes = b * m.context_tokens.value * m.kv_bytes_per_token.value
    state_bytes = b * m.state_bytes_per_request.value * (1.0 + q)
    return weight_bytes + kv_bytes + state_bytes


def step_flops(m: ModelFigures, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> _F64:
    """FLOPs of one step over the whole TP group: 2 per active parameter per token (attention
    over the context left out)."""
    flops: _F64 = 2.0 * m.active_params.value * np.asarray(batch_size, dtype=float) * np.asarray(tokens_per_request,
                                                                                                 dtype=float)
    return flops


@dataclass(frozen=True)
class RooflineProfile:
    """Anchored roofline (see module docstring)."""

    model: ModelFigures
    gpu: GpuFigures
    tensor_parallel_size: int
    anchor_step_s: float  # measured stock step time at anchor_batch, q = 1
    anchor_batch: int = 1
    specialized_speedup: float = 1.0
    absolute: bool = True
    name: str = "roofline"
    # the engines' reported bytes and FLOPs over the figures' for the same step (Deployment.engine_cost_scale)
    bytes_scale: float = 1.0
    flops_scale: float = 1.0

    def roof_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> _F64:
        """Pure roofline time max(bytes / bandwidth, flops / FLOP/s) over the TP group."""
        m, tp = self.model, self.tensor_parallel_size
        memory_s = self.bytes_scale * step_bytes(m, batch_size, tokens_per_request) / (self.gpu.hbm_bytes_per_s.value * tp)
        compute_s = self.flops_scale * step_flops(m, batch_size, tokens_per_request) / (
            self.gpu.flops(m.compute_precision).value * tp)
        return np.maximum(memory_s, compute_s)

    def step_time_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike, path: str = STOCK) -> _F64:
        _check_path(path)
        t = np.asarray(self.anchor_step_s + self.increment_s(batch_size, tokens_per_request), dtype=float)
        return t / self.specialized_speedup if path == SPECIALIZED else t

    def increment_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> _F64:
        """A step's time past the anchor's: the roofline's difference from the anchor step (B, q = 1)."""
        return np.asarray(self.roof_s(batch_size, tokens_per_request) - self.roof_s(self.anchor_batch, 1), dtype=float)

    def specialized_terms(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> tuple[_F64, _F64]:
        """(fixed, scaled): the specialized path's step time at speedup s is fixed + scaled / s."""
        stock = self.step_time_s(batch_size, tokens_per_request, STOCK)
        return np.zeros_like(stock), stock

    def stock_pass_s(self, batch_size: npt.ArrayLike) -> _F64:
        return self.step_time_s(batch_size, 1, STOCK)

    def with_specialized_speedup(self, speedup: float) -> "RooflineProfile":
        return replace(self, specialized_speedup=speedup)


@dataclass(frozen=True)
class TableProfile:
    """Measured step times; ``rows[(path, q)]`` = (batch sizes ascending, seconds)."""

    source: str
    rows: dict[tuple[str, int], tuple[npt.NDArray[np.int64], _F64]]
    specialized_speedup: float = 1.0
    absolute: bool = True

    @property
    def name(self) -> str:
        return f"table:{self.source}"

    @staticmethod
    def _interp_linear(at: npt.ArrayLike, known_x: npt.ArrayLike, known_y: npt.ArrayLike) -> _F64:
        """Linear interpolation, extended linearly past both ends (constant for one point)."""
        xs, ys = np.asarray(known_x, float), np.asarray(known_y, float)
        x = np.asarray(at, float)
        if len(xs) == 1:
            flat: _F64 = np.full_like(x, ys[0])
            return flat
        y: _F64 = np.interp(x, xs, ys)
        lo_slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
        hi_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        y = np.where(x < xs[0], ys[0] + (x - xs[0]) * lo_slope, y)
        y = np.where(x > xs[-1], ys[-1] + (x - xs[-1]) * hi_slope, y)
        return y

    def _path_time(self, b: _F64, q: _F64, path: str) -> _F64 | None:
        qs = sorted(q_ for (p, q_) in self.rows if p == path)
        if not qs:
            return None
        by_q = np.stack([self._interp_linear(b, *self.rows[(path, q_)]) for q_ in qs], axis=0)
        if len(qs) == 1:
            only: _F64 = by_q[0]
            return only
        # Linear in q between the measured ones, per batch size.
        out = np.empty(np.broadcast(b, q).shape)
        bb, qq = np.broadcast_arrays(b, q)
        flat_by_q = by_q.reshape(len(qs), -1) if by_q.ndim > 1 else by_q[:, None]
        bb_f, qq_f = bb.reshape(-1), qq.reshape(-1)
        flat_by_q = np.broadcast_to(flat_by_q, (len(qs), bb_f.size)) if flat_by_q.shape[1] == 1 else flat_by_q
        out_f = out.reshape(-1)
        for i in range(bb_f.size):
            out_f[i] = self._interp_linear(qq_f[i], qs, flat_by_q[:, i])
        return out_f.reshape(out.shape)

    def step_time_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike, path: str = STOCK) -> _F64:
        _check_path(path)
        b = np.asarray(batch_size, dtype=float)
        q = np.asarray(tokens_per_request, dtype=float)
        b, q = np.broadcast_arrays(b, q)
        if path == SPECIALIZED:
            # Measured specialized rows are used at their own q only (the fast path's q is
            # fixed by the deployment); otherwise stock / specialized_speedup.
            qs = np.unique(q)
            if len(qs) == 1 and (SPECIALIZED, int(qs[0])) in self.rows:
                return np.asarray(self._interp_linear(b, *self.rows[(SPECIALIZED, int(qs[0]))]), dtype=float)
            return self._stock_time(b, q) / self.specialized_speedup
        return self._stock_time(b, q)

    def specialized_terms(self, batch_size: npt.ArrayLike, tokens_per_request: int) -> tuple[_F64, _F64]:
        """(fixed, scaled): the specialized path's step time at speedup s is fixed + scaled / s —
        a measured specialized row is its own seconds at every s, else stock / s."""
        b = np.asarray(batch_size, dtype=float)
        if (SPECIALIZED, int(tokens_per_request)) in self.rows:
            measured = np.asarray(self._interp_linear(b, *self.rows[(SPECIALIZED, int(tokens_per_request))]), dtype=float)
            return measured, np.zeros_like(measured)
        stock = self._stock_time(*np.broadcast_arrays(b, np.asarray(float(tokens_per_request))))
        return np.zeros_like(stock), stock

    def _stock_time(self, b: _F64, q: _F64) -> _F64:
        """The stock rows' time, NaN for a table without them (load_table requires them)."""
        stock = self._path_time(b, q, STOCK)
        return np.asarray(np.nan if stock is None else stock, dtype=float)

    def stock_pass_s(self, batch_size: npt.ArrayLike) -> _F64:
        return self.step_time_s(batch_size, 1, STOCK)

    def with_specialized_speedup(self, speedup: float) -> "TableProfile":
        return replace(self, specialized_speedup=speedup)


def load_table(path: str | Path) -> TableProfile:
    """A measured table: CSV with a header ``batch_size,tokens_per_request,path,seconds``,
    or JSON lines / a JSON list of objects with those keys. Malformed → one-line
    ModelInputError naming the file and the line. Stock rows at q = 1 are required.
    Parsed once per version of the file (path, modification time, size): a tune builds
    the profile in several places."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise ModelInputError(f"cost table {p}: cannot read ({e.strerror or e})") from None
    return _parse_table(str(path), st.st_mtime_ns, st.st_size)


# The columns of a measured cost table (CSV header, or each JSON object's keys).
TABLE_COLUMNS = ("batch_size", "tokens_per_request", "path", "seconds")


@lru_cache(maxsize=16)
def _parse_table(path: str, mtime_ns: int, size: int) -> TableProfile:
    del mtime_ns, size  # the cache key: a rewritten file is parsed again
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ModelInputError(f"cost table {p}: cannot read ({e.strerror or e})") from None
    records: list[tuple[int, object]] = []  # (line number, record)
    if p.suffix.lower() == ".csv":
        lines = text.splitlines()
        reader = csv.reader(lines)
        header = None
        for lineno, row in enumerate(reader, start=1):
            if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
                continue
            if header is None:
                header = [c.strip() for c in row]
                if not set(TABLE_COLUMNS) <= set(header):
                    raise ModelInputError(
                        f"cost table {p} line {lineno}: header must name batch_size, tokens_per_request, path, seconds"
                    )
                continue
            if len(row) != len(header):
                raise ModelInputError(f"cost table {p} line {lineno}: expected {len(header)} fields, got {len(row)}")
            records.append((lineno, dict(zip(header, (c.strip() for c in row)))))
        if header is None:
            raise ModelInputError(f"cost table {p} line 1: empty table")
    else:
        stripped = text.lstrip()
        if stripped.startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as e:
                raise ModelInputError(f"cost table {p} line {e.lineno}: invalid JSON ({e.msg})") from None
            # A JSON list: locate each object's line for the error messages.
            starts = [i + 1 for i, line in enumerate(text.splitlines()) if line.lstrip().startswith("{")]
            for i, item in enumerate(items):
                records.append((starts[i] if i < len(starts) else i + 1, item))
        else:
            for lineno, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    records.append((lineno, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise ModelInputError(f"cost table {p} line {lineno}: invalid JSON ({e.msg})") from None
    table: dict[tuple[str, int], dict[int, float]] = {}
    for lineno, rec in records:
        where = f"cost table {p} line {lineno}"
        if not isinstance(rec, dict):
            raise ModelInputError(f"{where}: expected an object with batch_size, tokens_per_request, path, seconds")
        try:
            b = float(rec["batch_size"])
            q = float(rec["tokens_per_request"])
            path_ = str(rec.get("path", STOCK)).strip() or STOCK
            s = float(rec["seconds"])
        except KeyError as e:
            raise ModelInputError(f"{where}: missing {e.args[0]}") from None
        except (TypeError, ValueError):
            raise ModelInputError(f"{where}: batch_size, tokens_per_request and seconds must be numbers") from None
        if not (b >= 1 and b == int(b)) or not (q >= 1 and q == int(q)):
            raise ModelInputError(f"{where}: batch_size and tokens_per_request must be integers ≥ 1")
        if path_ not in (STOCK, SPECIALIZED):
            raise ModelInputError(f"{where}: path must be stock or specialized, got {path_!r}")
        if not (math.isfinite(s) and s > 0):
            raise ModelInputError(f"{where}: seconds must be > 0, got {rec['seconds']!r}")
        key = (path_, int(q))
        if int(b) in table.setdefault(key, {}):
            raise ModelInputError(f"{where}: duplicate row for batch_size {int(b)}, tokens_per_request {int(q)}, {path_}")
        table[key][int(b)] = s
    if (STOCK, 1) not in table:
        raise ModelInputError(f"cost table {p} line 1: no stock rows at tokens_per_request 1 (the unit of the draft cost)")
    rows = {k: (np.array(sorted(v)), np.array([v[b] for b in sorted(v)])) for k, v in table.items()}
    return TableProfile(source=str(path), rows=rows)


def deployment_model(deployment: Deployment) -> ModelFigures:
    """The deployment's model figures (model.hf_config.model_figures), at its context_tokens
    where set: the KV a step reads per request is the route's context, not the default's —
    configured, or measured from the route's requests (model.context_bands.with_context)."""
    model = model_figures(deployment.model)
    if deployment.context_tokens is None:
        return model
    source = CONTEXT_SOURCE if "context_tokens" in deployment.from_page else CONFIGURED_CONTEXT
    return replace(model, context_tokens=Figure(float(deployment.context_tokens), source))


def deployment_gpu(deployment: Deployment) -> GpuFigures:
    """The deployment's GPU figures: its `gpu`, with gpu_hbm_bytes_per_s / gpu_dense_flops over them."""
    return gpu_figures(deployment.gpu, deployment.gpu_hbm_bytes_per_s, deployment.gpu_dense_flops)


def roofline_floor_tokens_per_second(deployment: Deployment) -> float:
    """1 / the pure roofline of one plain decode step at batch 1 for the deployment's model,
    GPU and TP size: the fastest its weights and KV cache can be read (an upper bound)."""
    return float(1.0 / _roofline(deployment, 0.0).roof_s(1, 1))


def _roofline(deployment: Deployment, anchor_step_s: float, specialized_speedup: float = 1.0) -> RooflineProfile:
    """The deployment's roofline anchored at ``anchor_step_s`` (batch 1), scaled to the step cost
    its engines report where they do (Deployment.engine_cost_scale)."""
    scale = deployment.engine_cost_scale
    return RooflineProfile(deployment_model(deployment), deployment_gpu(deployment), deployment.tensor_parallel_size,
                           anchor_step_s, 1, specialized_speedup,
                           bytes_scale=scale.get("read_bytes", 1.0) if scale else 1.0,
                           flops_scale=scale.get("flops", 1.0) if scale else 1.0)


@dataclass(frozen=True)
class MeasuredShapeProfile:
    """A flat or roofline profile whose increments in q are the engines' measured slope
    (model.verify_cost): T(B, q) = T_base(B, 1) + slope·(q − 1), seconds. The base keeps its
    plain step at each batch size (its anchor, its batch increments); the slope was measured
    at the route's batch mix and is taken to hold at every batch size. Named as its base:
    ``cost_profile`` stays the configured profile, profile_figures.verify_cost says it was replaced."""

    base: FlatProfile | RooflineProfile
    slope_s: float

    @property
    def absolute(self) -> bool:
        return self.base.absolute

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def specialized_speedup(self) -> float:
        return self.base.specialized_speedup

    def step_time_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike, path: str = STOCK) -> _F64:
        _check_path(path)
        one = self.base.step_time_s(batch_size, 1, STOCK)
        t = np.asarray(one + self.slope_s * (np.asarray(tokens_per_request, dtype=float) - 1.0), dtype=float)
        return t / self.base.specialized_speedup if path == SPECIALIZED else t

    def increment_s(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> _F64:
        """A step's time past the anchor's: the base's at one token, and the measured slope past it."""
        return np.asarray(self.base.increment_s(batch_size, 1)
                          + self.slope_s * (np.asarray(tokens_per_request, dtype=float) - 1.0), dtype=float)

    def specialized_terms(self, batch_size: npt.ArrayLike, tokens_per_request: npt.ArrayLike) -> tuple[_F64, _F64]:
        stock = self.step_time_s(batch_size, tokens_per_request, STOCK)
        return np.zeros_like(stock), stock

    def stock_pass_s(self, batch_size: npt.ArrayLike) -> _F64:
        return self.step_time_s(batch_size, 1, STOCK)

    def with_specialized_speedup(self, speedup: float) -> "MeasuredShapeProfile":
        return replace(self, base=self.base.with_specialized_speedup(speedup))

    def with_slope(self, slope_s: float) -> "MeasuredShapeProfile":
        return replace(self, slope_s=slope_s)


Profile: TypeAlias = "FlatProfile | RooflineProfile | TableProfile | MeasuredShapeProfile"


def make_profile(deployment: Deployment) -> Profile:
    """The deployment's cost profile, at the midpoint of its specialized speedup, anchored
    on 1 / baseline_tokens_per_second at batch 1; where the engines measure a cost shape the
    assumed one disagrees with (Deployment.verify_cost), its increments are the measured ones."""
    sp = deployment.specialized_speedup_point
    base = deployment.baseline_tokens_per_second
    if deployment.cost_profile == "flat":
        flat = FlatProfile(1.0 / base, sp, True) if base else FlatProfile(1.0, sp, False)
        return _measured_shape(flat, deployment)
    if deployment.cost_profile == "roofline":
        assert base is not None  # a roofline deployment is anchored (deployment._validate)
        return _measured_shape(_roofline(deployment, 1.0 / base, sp), deployment)
    return replace(load_table(deployment.cost_profile), specialized_speedup=sp)


def _measured_shape(profile: FlatProfile | RooflineProfile, deployment: Deployment
                    ) -> FlatProfile | RooflineProfile | MeasuredShapeProfile:
    """``profile`` with the engines' measured slope in q where it is preferred (model.verify_cost),
    on a profile in seconds (the slope is); else as it is."""
    fit = deployment.verify_cost
    if fit is None or not fit.preferred or not profile.absolute:
        return profile
    return MeasuredShapeProfile(profile, fit.slope_s)
