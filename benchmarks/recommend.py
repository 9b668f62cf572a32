"""Benchmark: one route's full recommendation with intervals.

1,000 survival resamples, candidates γ 0–16 (observed γ 14, two extrapolated), a 32-bucket
batch mix, the roofline profile; then the specialized path (dspark, γ ≤ 7) with a
specialized_speedup range, whose resamples are priced at 8 speedups, with 1,000 resampled
mixes measured in time; then a decision there that rests on the configured speedup on a
route of 4 engines, so that the probe that would measure it is priced (its predicted
measurement at 5 speedups, model.probe.specialized_speedup). Target: under 200 ms on a 2-core
machine. Prints figures.

    .venv/bin/python benchmarks/recommend.py
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from acceptance.segment_measures import RouteTraffic
from model.deployment import Deployment
from model.recommend import RouteInputs, recommend
from timing import timed


def main() -> None:
    rng = np.random.default_rng(0)
    gamma = 14
    curve = np.cumprod(np.linspace(0.85, 0.6, gamma))
    drafts = 20_000
    probs = -np.diff(np.concatenate([[1.0], curve, [0.0]]))
    counts = rng.multinomial(drafts, probs, size=1000)
    resamples = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1][:, 1:] / drafts
    batch_mix = {int(b): float(w) for b, w in zip(range(1, 33), rng.dirichlet(np.ones(32)))}
    dep = Deployment(method="eagle3", draft_cost=0.08, model="llama-3.1-8b", gpu="H100",
                     tensor_parallel_size=1, baseline_tokens_per_second=150)
    kwargs = dict(survival_resamples=resamples, batch_mix=batch_mix, gamma_max=16, deployed_gamma=gamma)
    rec, runs = timed(lambda: recommend(RouteInputs(curve, **kwargs), dep), 10, warm_up=True)
    print(f"recommend: 1000 resamples × γ 0–16 × 32 batch buckets: "
          f"median {1e3 * np.median(runs):.1f} ms, min {1e3 * min(runs):.1f} ms (target < 200 ms)")
    print(f"recommended γ {rec.recommended_gamma} ({rec.decision}), P(best) {rec.probability_best:.2f}")

    spec = Deployment(method="dspark", draft_cost=0.10, decode_backend="latency_specialized",
                      specialized_speedup=(1.5, 2.0))
    mixes = rng.dirichlet(200 * np.array(list(batch_mix.values())), size=1000)
    kwargs = dict(survival_resamples=resamples[:, :5], batch_mix=batch_mix, deployed_gamma=5,
                  batch_mix_resamples=mixes, mix_in_time=True)
    rec, runs = timed(lambda: recommend(RouteInputs(curve[:5], **kwargs), spec), 10, warm_up=True)
    print(f"recommend, specialized range: 1000 resamples × 1000 mixes × γ 0–7 × 32 batch buckets: "
          f"median {1e3 * np.median(runs):.1f} ms, min {1e3 * min(runs):.1f} ms (target < 200 ms)")

    # γ 3 on batches of 4, 8 and 16 (16 runs stock at γ 7): below 1.875× γ 7 would win
    front = np.cumprod([0.95, 0.92, 0.88])
    edge = {4: 0.3, 8: 0.3, 16: 0.4}
    edge_mixes = rng.dirichlet(200 * np.array(list(edge.values())), size=1000)
    front_resamples = np.minimum.accumulate(np.clip(front + rng.normal(0, 0.005, (1000, 3)), 0, 1), axis=1)
    kwargs = dict(survival_resamples=front_resamples, batch_mix=edge,
                  deployed_gamma=3, batch_mix_resamples=edge_mixes, mix_in_time=True,
                  traffic=RouteTraffic(drafts=2e6, seconds=3600.0, engines=4, rows=240))
    rec, runs = timed(lambda: recommend(RouteInputs(front, **kwargs), replace(spec, specialized_speedup=(1.7, 2.1))), 10,
                       warm_up=True)
    print(f"recommend, specialized range resting on it, its probe priced: 1000 resamples × 1000 mixes: "
          f"median {1e3 * np.median(runs):.1f} ms, min {1e3 * min(runs):.1f} ms (target < 200 ms); "
          f"decision {rec.decision}" + (f", probe γ {rec.probe.gamma}" if rec.probe else ""))


if __name__ == "__main__":
    main()
