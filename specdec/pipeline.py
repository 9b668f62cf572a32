"""The tuning pipeline shared by every view (CLI, dashboard, notebook, demo): wiring only.

  source → route window → estimate_route (acceptance/) → probe_evidence, recommend_route (model/) → RouteTuning
  routes of one shared deployment: RouteTuning each → specdec.deployment_tuning

It picks the route's source (scraped targets in the store, a Prometheus selector, or what
`specdec ingest` stored), builds the window, estimates it (acceptance.route_estimate) and
prices it (model.route); nothing here is a quantity of its own. Views print, chart or
serialise the ``RouteTuning`` (specdec.report).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from model.probe.evidence import NO_PROBE, ProbeEvidence, probe_evidence, probed_route
from model.probe.lookback import earlier_probe_window
from acceptance.errors import InputError
from acceptance.counts import IntervalCounts
from acceptance.estimates import AcceptanceEstimate, estimate_from_survival
from acceptance.ingested_window import ingested_window
from acceptance.route_estimate import RouteEstimate, estimate_route
from model.deployment import INLINE_DEFAULTS, Deployment
from model.hf_config import model_from_labels
from model.recommend import Recommendation, RouteInputs, recommend
from model.route import drafts_more_needed, recommend_route
from model.probe.measured_speedup import measurable

from .config import Config, ConfigError, deployment_for_route, flagged, route_source
from .no_drafts import no_drafts_message
from .report import format_clock
from .tuning_options import DEFAULT_TUNING, TuningOptions

DEFAULT_WINDOW_S = 3600.0


class NoDataError(InputError):
    """A route's window holds no drafts (nothing to estimate)."""


def _from_estimate(name: str) -> property:
    """A RouteTuning property read from its route_estimate (None for an inline curve)."""
    return property(lambda self: None if self.route_estimate is None else getattr(self.route_estimate, name))


@dataclass
class RouteTuning:
    route: str
    deployment: Deployment
    estimate: AcceptanceEstimate
    recommendation: Recommendation
    window: object | None = None          # an acceptance.windows.Window, when from a store or Prometheus
    window_start: float | None = None
    window_end: float | None = None
    drafts_more_needed: int | None = None  # None: enough drafts to decide
    batch_mix: dict[int, float] | None = None  # request-weighted w_B the model used (None: batch 1)
    notes: list[str] = field(default_factory=list)
    survival_by_batch: dict[int, list[float]] | None = None  # per-batch curves the model used
    route_estimate: RouteEstimate | None = None  # what the window said (None: an inline curve)
    probe: ProbeEvidence = NO_PROBE  # what the window held for a probe (model.probe.evidence)
    # {"name", "routes"} of the deployment the route shares (its γ is the deployment's), else None
    shared_deployment: dict | None = None

    @property
    def observed_gamma(self) -> int:
        return self.estimate.gamma

    # What the window said beside the curve (acceptance.route_estimate.RouteEstimate), None inline.
    drift = _from_estimate("drift")  # Drift | None
    plugin = _from_estimate("plugin")  # PluginTotals | None
    survival_reached = _from_estimate("survival_reached")  # list[float] | None
    draft_reach = _from_estimate("draft_reach")  # list[float] | None
    step_sequences = _from_estimate("step_sequences")  # list | None


def tune_intervals(
    route: str,
    intervals: IntervalCounts,
    deployment: Deployment,
    *,
    window=None,
    options: TuningOptions = DEFAULT_TUNING,
    engines: int | None = None,  # the route's configured count where rows name none
    earlier=None,  # the window in which a probe last ran, where ``window`` holds none
) -> RouteTuning:
    """Estimate one γ segment and recommend from it (rows resampled as ``options`` say)."""
    if intervals.total().drafts <= 0:
        raise NoDataError(f"route {route!r}: the window holds no drafts at gamma {intervals.gamma}")
    estimate_options = options.estimate_options()
    estimated = estimate_route(window, intervals, engines=engines, **estimate_options)
    before = (None if earlier is None else  # the window in which a probe last measured the specialized speedup
              probed_route(earlier, estimate_route(earlier, earlier.newest_segment.intervals, **estimate_options)))
    probe = probe_evidence(window, estimated, earlier=before, **estimate_options)
    level, seed = options.level, options.seed  # priced at the estimate's level, from its seed
    priced = recommend_route(estimated, deployment, probe=probe, batch_time_shares=estimated.batch_time_shares,
                             level=level, seed=seed)
    notes = list(getattr(window, "notes", []))  # how the source read it (a Prometheus window says)
    if estimated.estimate.survival_restored:
        notes.append(estimated.estimate.survival_restored)
    if estimated.recent_start is not None:
        notes.append(f"drift: estimates and the recommendation use the window's newest part only, "
                     f"from {format_clock(estimated.recent_start)}")
    return RouteTuning(
        route=route, deployment=deployment, estimate=estimated.estimate, recommendation=priced.recommendation,
        window=window, drafts_more_needed=drafts_more_needed(estimated.estimate, priced.recommendation),
        notes=notes, batch_mix=priced.batch_mix, survival_by_batch=priced.survival_by_batch, route_estimate=estimated,
        probe=probe,
    )


def tune_route(config: Config, route: str, *, store=None, window_s: float = DEFAULT_WINDOW_S, now: float | None = None,
               level: float = 0.9, n_resamples: int = 1000) -> RouteTuning:
    """The route's window (ending ``now``), estimated and recommended."""
    end = time.time() if now is None else now
    source = route_source(config, route, store)
    deployment = deployment_for_route(config, route)  # a bad [deployment] key is named before any data is read
    window, block_length, unit = route_window_for(config, route, source, store, end - window_s, end)
    deployment, page_notes = model_from_labels(deployment, (e for s in window.segments for e in s.engines))
    segment = window.newest_segment
    if segment is None or segment.total.drafts <= 0:
        ingested = store.ingested_routes().get(route, []) if store is not None and source == "scrape" else []
        raise NoDataError(no_drafts_message(route, window, window_s, source, ingested))
    earlier, notes = (earlier_probe_window(lambda lo, hi: route_window_for(config, route, source, store, lo, hi)[0],
                                            window, window_s)
                      if measurable(deployment) else (None, []))
    options = TuningOptions(level=level, n_resamples=n_resamples, block_length=block_length, unit=unit)
    tuning = tune_intervals(route, segment.intervals, deployment, window=window, options=options,
                            engines=getattr(config.routes.get(route), "engines", None), earlier=earlier)
    tuning.notes += notes + page_notes
    tuning.window_start, tuning.window_end = end - window_s, end
    shared = getattr(config.routes.get(route), "shared_deployment", None)
    if shared is not None:  # its γ is the deployment's: say so, and where that is priced
        tuning.shared_deployment = {"name": shared, "routes": config.deployment_routes(shared)}
        tuning.notes.append(f"route {route} shares deployment {shared}: vLLM runs one gamma for all its routes; "
                            f"`tune-gamma --deployment {shared}` prices it for their mix")
    return tuning


def route_window_for(config: Config, route: str, source: str, store, start: float, end: float):
    """(window, block length, resampled unit) of the route's source over [start, end]:
    scraped targets from the store, a Prometheus selector, or what `specdec ingest` stored
    (per-request rows, resampled one request at a time; log intervals)."""
    from acceptance.windows import route_window

    if source == "scrape":
        return route_window(store, list(config.routes[route].targets), start, end), None, "scrape intervals"
    if source == "prometheus":  # computed in Prometheus (recorded series, else raw increase())
        from acceptance.prometheus_recorded import prometheus_window

        return prometheus_window(config.prometheus, route, config.routes[route].selector, start, end), None, \
            "scrape intervals"
    if store is None:
        raise ConfigError(f"route {route!r}: source {source!r} reads the store; pass --db or run `specdec ingest` first")
    own = config.routes.get(route)
    shared = getattr(own, "shared_deployment", None)
    window = ingested_window(store, route, source, start, end, engines=getattr(own, "engines", None),
                             deployment_routes=tuple(config.deployment_routes(shared)) if shared else ())
    if source == "per-request":
        return window, 1, "requests"  # requests are the independent units
    return window, None, "logged intervals"


def tune_inline(survival: list[float], *, drafts: int | None = None, deployed_gamma: int | None = None,
                figures: dict | None = None, config: Config | None = None, level: float = 0.9,
                n_resamples: int = 1000, undrafted_share: float | None = None) -> RouteTuning:
    """tune-gamma --survival A1,A2,...: the seeds' model by default; intervals only with
    --drafts (acceptance.estimates.estimate_from_survival says how). ``figures``: deployment
    keys given as flags; ``config``: a config whose [deployment] (with the flags over it) is
    priced instead of the inline defaults; ``undrafted_share``: ν, which a curve does not carry."""
    deployment = (deployment_for_route(config, None) if config is not None else
                  flagged(Deployment.from_mapping(figures or {}, where="tune-gamma", base=INLINE_DEFAULTS), figures or {}))
    estimate = estimate_from_survival(survival, drafts=drafts, level=level, n_resamples=n_resamples)
    rec = recommend(RouteInputs(estimate.survival.value,
                    survival_resamples=estimate.survival_resamples if estimate.has_interval else None,
                    deployed_gamma=deployed_gamma if deployed_gamma is not None else estimate.gamma, level=level,
                    undrafted_token_share=undrafted_share), deployment)
    notes = [estimate.note] if estimate.note else []
    return RouteTuning(route="inline", deployment=deployment, estimate=estimate, recommendation=rec, notes=notes)


def what_if(tuning: RouteTuning, overrides: dict, *, batch_time_shares: dict[int, float] | None = None,
            level: float = 0.9) -> tuple[Deployment, Recommendation]:
    """The route's recommendation with some deployment keys changed (the dashboard's what-if).

    ``overrides``: [deployment] keys over the route's deployment (validated: ModelInputError
    names the key). ``batch_time_shares``: the share of engine time at each batch size u_B
    (default: the window's observed shares; None and no window = batch 1); it becomes the
    request-weighted mix under the NEW deployment (model.route.recommend_route), and the
    clean share on latency_specialized and the per-batch survival come from the window as
    in tune_intervals (a mix moved to large batches takes their own curves); a specialized
    speedup a probe measured is priced unless the overrides set ``specialized_speedup``.
    """
    deployment = Deployment.from_mapping(overrides, where="what-if", base=tuning.deployment)
    estimated = tuning.route_estimate or RouteEstimate(tuning.estimate)
    shares = batch_time_shares if batch_time_shares is not None else estimated.batch_time_shares
    return deployment, recommend_route(estimated, deployment, probe=tuning.probe, batch_time_shares=shares, level=level,
                                       measure_speedup="specialized_speedup" not in overrides).recommendation
