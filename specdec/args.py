"""The commands' argument types, their usage error and the one JSON printer — a module of
their own, so that no subcommand module imports back from specdec.cli."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from typing import Any

from acceptance.errors import InputError


class UsageError(InputError):
    """Bad command-line input not caught by argparse itself."""


def dump_json(doc: Mapping[str, Any]) -> None:
    """Print one JSON document on stdout: NaN/inf become null, schema_version first."""
    from .report import json_document

    sys.stdout.write(json_document(doc) + "\n")


def duration(text: str) -> float:
    from .config import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def promql_duration(text: str) -> str:
    """An argparse type: a Prometheus duration as written into PromQL (``5m``, ``10s``); a bare
    whole number is seconds, as every time option takes (``10`` → ``10s``). Its range is the
    rules' to check (acceptance.prometheus_rules)."""
    return f"{text}s" if text.isdigit() else text


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return v


def share(text: str) -> float:
    """A share in [0, 1): ν, the undrafted tokens' share (1 would be no drafted step at all)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), such as 0.54, got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), such as 0.54, got {text!r}")
    return value


def bounded_int(low: int, high: int):
    """An argparse type: an integer in [low, high] (argparse names the option in its error)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"must be an integer from {low:,} to {high:,}, got {text!r}")
        return v
    return parse


def float_list(text: str) -> list[float]:
    """A1,A2,...: at least one finite number."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated finite numbers, got {text!r}")
    return values


def route_name(text: str) -> str:
    """An argparse type: a route name without control characters."""
    from acceptance.names import has_control_characters

    if not text.strip() or has_control_characters(text):
        raise argparse.ArgumentTypeError(f"route name {text!r} is empty or holds a control character")
    return text


def add_store_args(p) -> None:
    """--config and --db, as every command that reads a config and a store takes them."""
    p.add_argument("--config", help="config file (default ./specdec.toml)")
    p.add_argument("--db", help="store path (default [store] path, else specdec.db beside the config)")
