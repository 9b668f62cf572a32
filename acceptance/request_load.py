"""A per-request route's batch mix: how many requests its engines ran at once, from the requests' own decode times.

Each row knows when its request finished (``time``) and how long it decoded,
d = mean_itl_ms × (output tokens − 1) (vLLM's ``generation_time_ms``). Over the window the
requests in decode at time t are

    N(t) = #{i : t_i − d_i ≤ t < t_i},        ∫ N(t) dt = Σ_i d_i

(Little's law, counted rather than sampled). The rows name no engine, so the route's
configured ``engines`` E share them evenly: N = qE + r puts r engines at q + 1 and E − r at q
(a least-outstanding-requests balancer; one that routes blindly spreads them wider). The
time shares u_B are each batch size's share of engine time at B ≥ 1 — an idle engine runs no
decode step — as /metrics' ``num_requests_running`` samples give them.

What the rows leave out: requests that carry no metrics (n > 1, a stream without usage, a
request that did not speculate) and another route's requests on the same engines (routes of
one ``deployment`` are counted together) run in the batches too, so the mix is then a floor;
requests still decoding when the window ends are not in it yet. N(t) of such a queue forgets
itself over about one decode time, so the mix is worth one independent sample per mean
decode time of the span (``samples``: what its Dirichlet resamples take). Rows whose times
do not spread — more than half at one time, as when lines that carried none took the
ingest's — say nothing of when requests ran: no mix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RequestLoad:
    """The batch mix the requests' decode spans give, per engine."""

    time_shares: dict[int, float]  # {B ≥ 1: share of engine time at batch B}
    samples: int  # independent looks at N: the span over the mean decode time
    mean_running: float  # N̄ per engine over the span, idle time included: Σ d / (span · E)
    requests: int  # rows with a decode span
    engines: int
    span_s: float


def request_load(finish: np.ndarray, decode_s: np.ndarray, engines: int) -> RequestLoad | None:
    """The batch mix of requests that finished at ``finish`` after decoding ``decode_s``
    seconds, shared by ``engines``; None when fewer than two rows decoded or more than half of
    them share one time (the rows then cannot say when their requests ran)."""
    if engines < 1:
        raise ValueError(f"engines must be at least 1, got {engines}")
    finish, decode_s = np.asarray(finish, dtype=float), np.asarray(decode_s, dtype=float)
    ran = np.isfinite(finish) & np.isfinite(decode_s) & (decode_s > 0)
    finish, decode_s = finish[ran], decode_s[ran]
    if len(finish) < 2 or np.unique(finish, return_counts=True)[1].max() * 2 > len(finish):
        return None
    durations, running = _running(finish - decode_s, finish)
    span = float(durations.sum())
    return RequestLoad(_engine_time_shares(durations, running, engines),
                       samples=max(1, int(span / decode_s.mean())),
                       mean_running=float(decode_s.sum() / (span * engines)),
                       requests=len(finish), engines=engines, span_s=span)


def _running(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pieces of [first start, last end] over which N(t) is constant: (durations, N)."""
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.argsort(times, kind="stable")
    times, count = times[order], np.cumsum(steps[order])
    return np.diff(times), count[:-1].astype(int)


def _engine_time_shares(durations: np.ndarray, running: np.ndarray, engines: int) -> dict[int, float]:
    """{B ≥ 1: share of engine time at B} when N(t) requests split evenly over the engines."""
    busy: dict[int, float] = {}
    per_engine, extra = np.divmod(running, engines)
    for size, engine_time in ((per_engine + 1, durations * extra), (per_engine, durations * (engines - extra))):
        for b in np.unique(size[size >= 1]):
            busy[int(b)] = busy.get(int(b), 0.0) + float(engine_time[size == b].sum())
    total = sum(busy.values())
    return {b: t / total for b, t in sorted(busy.items()) if t > 0} if total > 0 else {}
