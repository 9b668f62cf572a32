"""Routes that share one deployment, tuned together — wiring only.

  each route's window → specdec.pipeline.tune_route → RouteTuning (its own γ)
  their recommendations and decode tokens → model.shared_deployment → the deployment's one γ

A route names its deployment with ``deployment = "NAME"`` in its [routes.NAME] table
(specdec.config); ``tune-gamma --deployment NAME`` prints ``DeploymentTuning``
(specdec.report.deployment_to_dict, format_deployment).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from acceptance.counts import decode_tokens
from model.shared_deployment import DeploymentRecommendation, RouteShare, recommend_deployment

from .config import Config
from .pipeline import DEFAULT_WINDOW_S, RouteTuning, tune_route


@dataclass
class DeploymentTuning:
    """Routes that share one deployment: each route's own tuning and the deployment's one γ."""

    name: str
    tunings: list[RouteTuning]
    recommendation: DeploymentRecommendation


def tune_deployment(
    config: Config,
    name: str,
    *,
    store=None,
    window_s: float = DEFAULT_WINDOW_S,
    now: float | None = None,
    level: float = 0.9,
    n_resamples: int = 1000,
) -> DeploymentTuning:
    """The routes naming deployment ``name``, each tuned over the same window, priced together."""
    end = time.time() if now is None else now
    routes = config.deployment_routes(name)
    tunings = [tune_route(config, route, store=store, window_s=window_s, now=end, level=level,
                          n_resamples=n_resamples) for route in routes]
    return priced_together(name, tunings, level=level)


def priced_together(name: str, tunings: list[RouteTuning], *, level: float = 0.9) -> DeploymentTuning:
    """The routes' own tunings (one window) priced as one deployment: each weighted by its
    decode tokens N = (D + A) / (1 − ν) in the window."""
    shares = [RouteShare(t.route, t.recommendation, decode_tokens(
        t.estimate.counts, None if t.route_estimate is None else t.route_estimate.undrafted_token_share))
        for t in tunings]
    return DeploymentTuning(name, tunings, recommend_deployment(name, shares, tunings[0].deployment, level=level))
