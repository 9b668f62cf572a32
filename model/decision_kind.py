"""What a decision has the fleet do, by name: its kind (docs/MODEL.md, The decision). A str
enum, so the JSON and users' scripts read the same words as before ("keep", "change", ...)."""

from __future__ import annotations

from enum import StrEnum


class DecisionKind(StrEnum):
    KEEP = "keep"  # the fleet runs the deployed γ
    CHANGE = "change"  # the fleet changes to another γ > 0
    OFF = "off"  # the fleet turns speculation off
    PROBE = "probe"  # one engine (or the route, a trial) measures another γ; the fleet stays or takes a sure step
    UNDECIDED = "undecided"  # the decision rests on default figures or a model that misses: a what-if
