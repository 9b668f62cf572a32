"""Engine totals: counters a window reads only as increases over its whole span — the finished
requests' prompt and output lengths (the context a decode step reads: acceptance.request_lengths)
and vLLM's own estimate of its steps' cost (acceptance.engine_cost), with the steps, their tokens
and the inter-token latency they are divided by.

They move slowly and no block of the bootstrap needs them, so each engine keeps, as JSON in
``engine_totals``, its cumulative values about every TOTALS_EVERY_S (a row at least that long
after the last kept one is kept), the newest scrape's (a row replaced by the next until it is
kept) and the last of a life before a restart (a new ``_created``). ``engine_totals_increase`` sums, over the engines and their lives, the
increase from the first to the last row inside the window; a life with one row there adds
nothing, and a value lower than the row before (a reset without a new ``_created``) starts a new
life. Limits: a window shorter than TOTALS_EVERY_S holds at most one row of an engine, so no
increase; rows past the raw retention are deleted with the raw samples.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

from ..page_totals import page_totals
from .state import _EngineState, _Row, _StoreState, _TotalsRows

if TYPE_CHECKING:
    from ..counts import EngineSnapshot

TOTALS_EVERY_S = 300.0


class _Totals(_StoreState):
    """Store methods of engine totals."""

    def _with_totals(self, state: _EngineState, prev: _EngineState | None, snap: EngineSnapshot,
                     rows: _TotalsRows) -> _EngineState:
        """``state`` (an engine's staged sample) with its engine_totals row staged in ``rows``
        (module docstring): an insert, or an update of the newest row not yet kept; as the
        previous sample's totals state when the page holds no totals."""
        totals = page_totals(snap.step_shape)
        last, kept = (prev.totals_time, prev.totals_kept) if prev is not None else (None, None)
        if totals is None:
            return replace(state, totals_time=last, totals_kept=kept)
        t, created = state.time, snap.created
        text = json.dumps(totals, sort_keys=True)
        if last is None or kept is None or prev is None or (created is not None and created != prev.created):
            rows["insert"].append((state.engine_id, t, created, text))  # the first row, or a new life's
            return replace(state, totals_time=t, totals_kept=t)
        if last != kept:  # the newest row, not yet kept: this one takes its place
            rows["update"].append((t, created, text, state.engine_id, last))
        else:
            rows["insert"].append((state.engine_id, t, created, text))
        return replace(state, totals_time=t, totals_kept=t if t - kept >= TOTALS_EVERY_S else kept)

    def engine_totals_increase(self, engine_ids: list[int], start: float, end: float) -> dict[str, float] | None:
        """Σ over the engines and their lives of last − first row with time in [start, end]
        (module docstring); None when no life holds two rows there."""
        if not engine_ids:
            return None
        rows = self.conn.execute(
            f"SELECT engine_id, created, totals FROM engine_totals WHERE engine_id IN "
            f"({', '.join('?' * len(engine_ids))}) AND time >= ? AND time <= ? ORDER BY engine_id, time",
            (*engine_ids, float(start), float(end))).fetchall()
        out: dict[str, float] = {}
        for life in _lives(rows):
            first, last = life[0], life[-1]
            for key in set(first) & set(last):
                out[key] = out.get(key, 0.0) + last[key] - first[key]
        return out or None


def _lives(rows: list[_Row]) -> list[list[dict[str, float]]]:
    """The rows split into runs of one engine and one _created, none of whose values fall."""
    lives: list[list[dict[str, float]]] = []
    run: list[dict[str, float]] = []
    key: tuple[int, float | None] | None = None
    for eid, created, text in rows:
        totals = json.loads(text)
        fell = bool(run) and any(totals.get(k, v) < v for k, v in run[-1].items())
        if (eid, created) != key or fell:
            if len(run) > 1:
                lives.append(run)
            run, key = [], (eid, created)
        run.append(totals)
    if len(run) > 1:
        lives.append(run)
    return lives
