"""One target's /metrics page, as vLLM 0.33.0 renders it: the four spec-decode counters
(+ ``_created``), ``vllm:num_requests_running``, ``vllm:iteration_tokens_total`` and
``vllm:inter_token_latency_seconds``, under their exact names, HELP texts, labels and buckets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from .. import vllm_metrics as vm
from ..counts import SpecCounts

# vLLM 0.33.0 vllm/v1/metrics/buckets.py defaults.
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
INTER_TOKEN_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
                               1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
# HELP texts of the step-shape families, as vLLM 0.33.0's PrometheusStatLogger registers them.
_STEP_SHAPE_HELP = {
    vm.NUM_REQUESTS_RUNNING: "Number of requests in model execution batches.",
    vm.ITERATION_TOKENS: "Histogram of number of tokens per engine_step.",
    vm.INTER_TOKEN_LATENCY: "Histogram of inter-token latency in seconds.",
}
_LABELS = [vm.MODEL_NAME_LABEL, vm.ENGINE_LABEL]  # vLLM's labelnames order


@dataclass(frozen=True)
class EngineExposure:
    """What one engine's page shows at one instant (counters since the engine started).

    iteration_tokens / itl: NON-cumulative counts per bucket, +Inf last; counts of
    a histogram are the sum of its buckets. Any of the step-shape fields None: not shown.
    """

    model_name: str
    engine: str
    spec: SpecCounts | None
    created: float
    num_requests_running: float | None = None
    iteration_tokens: np.ndarray | None = None
    iteration_tokens_sum: float = 0.0
    itl: np.ndarray | None = None
    itl_sum: float = 0.0


def _histogram_buckets(bounds: Sequence[float], counts: np.ndarray) -> list[tuple[str, float]]:
    cumulative = np.cumsum(counts)
    # prometheus_client leaves floatToGoString unannotated
    les: list[str] = [floatToGoString(float(b)) for b in bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
    return [(le, float(c)) for le, c in zip(les, cumulative)]


class _PageCollector:
    """Families in vLLM's page order: spec decode first, then the step-shape ones."""

    def __init__(self, exposures: Sequence[EngineExposure]) -> None:
        self.exposures = exposures

    def collect(self) -> Iterator[Metric]:
        spec = [e for e in self.exposures if e.spec is not None]
        if spec:
            picks: tuple[tuple[str, Callable[[SpecCounts], float]], ...] = (
                (vm.DRAFTS, lambda c: c.drafts), (vm.DRAFT_TOKENS, lambda c: c.draft_tokens),
                (vm.ACCEPTED_TOKENS, lambda c: c.accepted_tokens))
            for name, pick in picks:
                fam = CounterMetricFamily(name, vm.HELP[name], labels=_LABELS)
                for e in spec:
                    assert e.spec is not None  # spec: the exposures with counts
                    fam.add_metric([e.model_name, e.engine], float(pick(e.spec)), created=e.created)
                yield fam
            fam = CounterMetricFamily(vm.ACCEPTED_PER_POSITION, vm.HELP[vm.ACCEPTED_PER_POSITION],
                                      labels=_LABELS + [vm.POSITION_LABEL])
            for e in spec:
                assert e.spec is not None  # spec: the exposures with counts
                for pos, a_k in enumerate(e.spec.accepted_per_position):
                    fam.add_metric([e.model_name, e.engine, str(pos)], float(a_k), created=e.created)
            yield fam
        running = [e for e in self.exposures if e.num_requests_running is not None]
        if running:
            gauge = GaugeMetricFamily(vm.NUM_REQUESTS_RUNNING, _STEP_SHAPE_HELP[vm.NUM_REQUESTS_RUNNING], labels=_LABELS)
            for e in running:
                assert e.num_requests_running is not None  # running: the exposures with the gauge
                gauge.add_metric([e.model_name, e.engine], float(e.num_requests_running))
            yield gauge
        histograms: tuple[tuple[str, Sequence[float], Callable[[EngineExposure], tuple[np.ndarray | None, float]]],
                          ...] = (
            (vm.ITERATION_TOKENS, ITERATION_TOKENS_BUCKETS, lambda e: (e.iteration_tokens, e.iteration_tokens_sum)),
            (vm.INTER_TOKEN_LATENCY, INTER_TOKEN_LATENCY_BUCKETS, lambda e: (e.itl, e.itl_sum)),
        )
        for name, bounds, get in histograms:
            shown = [e for e in self.exposures if get(e)[0] is not None]
            if not shown:
                continue
            hist = HistogramMetricFamily(name, _STEP_SHAPE_HELP[name], labels=_LABELS)
            for e in shown:
                counts, total = get(e)
                assert counts is not None  # shown: the exposures with the histogram
                hist.add_metric([e.model_name, e.engine], _histogram_buckets(bounds, counts), float(total))
                # A histogram's _created, as prometheus-client's own Histogram exposes it.
                hist.samples.append(Sample(name + "_created", {vm.MODEL_NAME_LABEL: e.model_name,
                                                               vm.ENGINE_LABEL: e.engine}, e.created))
            yield hist


def render_page(exposures: Sequence[EngineExposure]) -> bytes:
    """The /metrics page (classic text format) for engines sharing one target."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_PageCollector(exposures))
    return generate_latest(registry)
