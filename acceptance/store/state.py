"""What the Store's mixins share (acceptance.store.core): the engines' and targets' states,
and the Store's state as core sets it — the file, its cached identities and engine states —
with the methods one mixin calls on another, declared for the type checker only (their
bodies are the mixins'; at run time ``_StoreState`` is an empty base)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from .records import EngineRef

if TYPE_CHECKING:
    from ..counts import EngineSnapshot
    from .codecs import _IntervalChunk, _PluginChunk, _SpecRollupChunk, _StepRollupChunk


@dataclass
class _EngineState:
    """What the next delta of an engine is computed against: its newest sample."""

    engine_id: int
    time: float
    seg_id: int | None
    gamma: int
    layout_id: int | None
    created: float | None
    value: np.ndarray | None
    itl_sum: float | None
    itl_count: float | None
    it_layout_id: int | None
    it_value: np.ndarray | None
    plugin_layout_id: int | None = None  # the specdec plugin's counters, when exported
    plugin_value: np.ndarray | None = None
    totals_time: float | None = None  # of the engine's newest engine_totals row (acceptance.store.totals)
    totals_kept: float | None = None  # of its newest row kept for good


@dataclass
class _TargetState:
    target_id: int
    last_ok_time: float | None
    last_error: str | None
    last_error_time: float | None
    failing_since: float | None


_Row: TypeAlias = tuple[Any, ...]  # a row as sqlite3 returns it (its values are typed Any there)
# an open chunk of kind i | s | p | t, by (kind, engine, level) and (chunk, *its key) (writes._open_chunk)
_Chunk: TypeAlias = "_IntervalChunk | _SpecRollupChunk | _PluginChunk | _StepRollupChunk"
_ChunkGroup: TypeAlias = tuple[str, int, int]
_ChunkKey: TypeAlias = "tuple[float, *tuple[int | None, ...]]"  # (chunk, *its ids: segment, layouts)
_DirtyKey: TypeAlias = "tuple[str, int, int, float, *tuple[int | None, ...]]"  # (kind, engine, level, chunk, *ids)
# a staged engine_totals row, by "insert" | "update" (totals._with_totals)
_TotalsRows: TypeAlias = dict[str, list[tuple[object, ...]]]


class _StoreState:
    """The Store's state (core: Store.__init__, _load_state, _load_identities) and the methods
    its mixins call on one another."""

    path: Path
    retention_s: float | None
    _conn: sqlite3.Connection | None
    _last_retention: float | None
    _state_unread: bool
    _refusals_running: dict[int, int]
    _other_lives: dict[int, set[float | None]]
    _held_targets: dict[int, int]
    clock_lines: list[str]
    _clock_held: list[tuple[str, float]]
    _clock_resumed: list[tuple[str, int]]
    _chunk_cache: dict[_ChunkGroup, dict[_ChunkKey, _Chunk]]
    _dirty: dict[_DirtyKey, _Chunk]
    _closing: dict[_DirtyKey, _Chunk]
    _open_rowids: dict[str, int]
    _seal_pending: bool
    _column_lists: dict[str, str]
    _engines: dict[int, _EngineState]
    _target_ids: dict[str, int]
    _targets: dict[int, _TargetState]
    _target_urls: dict[int, str]
    _engine_ids: dict[tuple[int, str, str], int]
    _engine_refs: dict[int, EngineRef]
    _layout_ids: dict[tuple[str, str], int]
    _layouts: dict[int, tuple[str, list[str]]]
    _layout_by_columns: dict[tuple[str, tuple[str, ...]], int]
    _iteration_layouts: dict[tuple[float, ...], int]
    _segment_gamma: dict[int, int]
    _segment_engine: dict[int, int]

    if TYPE_CHECKING:
        @property
        def conn(self) -> sqlite3.Connection: ...  # core
        def _load_state(self) -> None: ...  # core
        def _reload_after_rollback(self) -> None: ...  # core
        def _target_id(self, url: str) -> int: ...  # writes
        def _engine_id(self, tid: int, model: str, eng: str) -> int: ...  # writes
        def _layout_id(self, kind: str, columns: Sequence[str]) -> int: ...  # writes
        def _new_segment(self, eid: int, gamma: int, t: float) -> int: ...  # writes
        def _width(self, layout_id: int | None) -> int: ...  # writes
        def _row_width(self, layout_id: int, it_layout_id: int) -> int: ...  # sealing
        def apply_retention(self, now: float) -> None: ...  # retention
        def _with_totals(self, state: _EngineState, prev: _EngineState | None, snap: EngineSnapshot,
                         rows: _TotalsRows) -> _EngineState: ...  # totals
