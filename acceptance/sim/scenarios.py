"""The built-in scenarios, as data read through the same reader as a user's file
(acceptance.sim.scenario.scenario_from_dict); ``specdec simulate --scenario NAME``.
"""

from __future__ import annotations

import json

from .scenario import Scenario, ScenarioError, scenario_from_dict

# Agentic, low-entropy traffic: a drafter that is sure early and less so deeper (DSpark-like,
# proposes up to 7 tokens). Open-ended chat: requests differ a lot (Beta(3.2, 1.6): mean p 0.67).
_STRUCTURED_ALPHAS = [0.95, 0.92, 0.88, 0.84, 0.80, 0.76, 0.72]
_AGENTIC_BATCH = {"weights": {"1": 0.15, "2": 0.25, "4": 0.35, "8": 0.25}, "persistence": 0.6}
_CHAT_BATCH = {"weights": {"4": 0.2, "8": 0.35, "16": 0.3, "32": 0.15}, "persistence": 0.6}
_SMALL_BATCH = {"weights": {"2": 0.3, "4": 0.4, "8": 0.3}, "persistence": 0.5}
# Verify cost grows with the tokens a step verifies (8.5 ms at batch 1 = the seeds' 118 tok/s;
# +1% per verified token): large batches × long drafts get dear, so the best γ is not simply
# the drafter's maximum (the demo's `open` route's is 3, below its deployed 7).
_DEMO_STEP_TIME = {"base_ms": 8.5, "growth_per_token": 0.01, "draft_cost": 0.10}

_BUILTIN: dict[str, dict[str, object]] = {
    # `specdec demo` runs this very scenario: one truth for both (open deployed above its best γ)
    "demo": {
        "description": "structured (agentic, front-loaded, γ 7) and open (chat, heterogeneous, γ 7): "
                       "6 engines on 4 targets, a dspark drafter costing 0.10 of the stock pass, verify "
                       "+1% per token; a restart at 20m, a γ change 7→5 at 40m",
        "routes": {
            "structured": {"gamma": 7, "process": {"kind": "front_loaded", "alphas": _STRUCTURED_ALPHAS},
                           "batch": _AGENTIC_BATCH, "step_time": _DEMO_STEP_TIME,
                           "targets": [{"name": "structured-a", "engines": 2}, {"name": "structured-b", "engines": 1}]},
            "open": {"gamma": 7, "process": {"kind": "heterogeneous", "a": 3.2, "b": 1.6, "mean_output_tokens": 400},
                     "batch": _CHAT_BATCH, "step_time": _DEMO_STEP_TIME,
                     "targets": [{"name": "open-a", "engines": 2}, {"name": "open-b", "engines": 1}]},
        },
        "events": [{"at": "20m", "kind": "restart", "target": "open-b", "engine": "0"},
                   {"at": "40m", "kind": "set_gamma", "target": "structured-b", "engine": "0", "gamma": 5}],
    },
    "independent": {
        "description": "independent acceptance p = 0.8 at γ 4, 2 engines",
        "routes": {"independent": {"gamma": 4, "process": {"kind": "independent", "p": 0.8}, "batch": _SMALL_BATCH,
                                   "targets": [{"name": "independent-0", "engines": 2}]}},
    },
    "front-loaded": {
        "description": "front-loaded α 0.9, 0.85, 0.8, 0.75, 0.7 at γ 5",
        "routes": {"front-loaded": {"gamma": 5, "process": {"kind": "front_loaded",
                                                            "alphas": [0.9, 0.85, 0.8, 0.75, 0.7]},
                                    "batch": _SMALL_BATCH, "targets": [{"name": "front-loaded-0", "engines": 1}]}},
    },
    "heterogeneous": {
        "description": "per-request p ~ Beta(2, 1), 200-token outputs, γ 5",
        "routes": {"heterogeneous": {"gamma": 5, "process": {"kind": "heterogeneous", "a": 2.0, "b": 1.0,
                                                             "mean_output_tokens": 200},
                                     "batch": _SMALL_BATCH, "targets": [{"name": "heterogeneous-0", "engines": 2}]}},
    },
    "drift": {
        "description": "independent p 0.85 drifting to 0.6 between 20m and 30m, γ 4",
        "routes": {"drift": {"gamma": 4, "process": {"kind": "drifting", "base": {"kind": "independent", "p": 0.85},
                                                     "other": {"kind": "independent", "p": 0.6},
                                                     "start_s": 1200, "duration_s": 600},
                             "batch": _SMALL_BATCH, "targets": [{"name": "drift-0", "engines": 1}]}},
    },
    "restart": {
        "description": "independent p 0.8 at γ 4; engine 0 restarts at 10m",
        "routes": {"restart": {"gamma": 4, "process": {"kind": "independent", "p": 0.8}, "batch": _SMALL_BATCH,
                               "targets": [{"name": "restart-0", "engines": 2}]}},
        "events": [{"at": "10m", "kind": "restart", "target": "restart-0", "engine": "0"}],
    },
    "gamma-change": {
        "description": "front-loaded, γ 5 → 3 at 15m",
        "routes": {"gamma-change": {"gamma": 5, "process": {"kind": "front_loaded",
                                                            "alphas": [0.9, 0.85, 0.8, 0.75, 0.7]},
                                    "batch": _SMALL_BATCH, "targets": [{"name": "gamma-change-0", "engines": 1}]}},
        "events": [{"at": "15m", "kind": "set_gamma", "target": "gamma-change-0", "gamma": 3}],
    },
    "spec-off": {
        "description": "independent p 0.7 at γ 3; speculation off at 10m, back on at 20m",
        "routes": {"spec-off": {"gamma": 3, "process": {"kind": "independent", "p": 0.7}, "batch": _SMALL_BATCH,
                                "targets": [{"name": "spec-off-0", "engines": 1}]}},
        "events": [{"at": "10m", "kind": "spec_off", "target": "spec-off-0"},
                   {"at": "20m", "kind": "spec_on", "target": "spec-off-0"}],
    },
}
SCENARIO_NAMES = tuple(_BUILTIN)


def build_scenario(name: str, seed: int = 0) -> Scenario:
    """A built-in scenario by name (``SCENARIO_NAMES``)."""
    if name not in _BUILTIN:
        raise ScenarioError(f"scenario: unknown name {name!r} (known: {', '.join(SCENARIO_NAMES)})")
    # Through the same reader as a user's file, from a deep copy (the tables are shared).
    return scenario_from_dict({"name": name, **json.loads(json.dumps(_BUILTIN[name]))}, seed=seed)
