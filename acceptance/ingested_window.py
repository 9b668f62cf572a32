"""The window of a route whose data came through `specdec ingest`: per-request rows or logged intervals.

Shaped like the scraped ``acceptance.windows.RouteWindow`` (one ``GammaSegment`` per γ, a
``StepShapeWindow``): its rows are requests (resampled one at a time) or the intervals
vLLM logged. Two sources of the same traffic are never added together: the route's
source picks one. Current and newest segments follow the one rule of every window
(acceptance.windows.current_segments), with the last segment's whole span as its last block
(a request row has no duration: two γ interleave request by request); the estimate
describes the current one with the most drafts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .counts import undrafted_token_share
from .step_replay import StepSequence
from .windows import GammaSegment, SegmentRules, StepShapeWindow


@dataclass(frozen=True)
class IngestedWindow(SegmentRules):
    """A window of ingested per-request or log-line rows, shaped like a RouteWindow."""

    ROWS_HAVE_NO_DURATION = True  # a request row is stored at one instant: γ interleave request by request

    source: str
    start: float
    end: float
    segments: list
    events: list = field(default_factory=list)
    target_status: list = field(default_factory=list)
    not_speculating: list = field(default_factory=list)
    step_shape: object = None
    # the newest segment's requests' drafted steps in order (acceptance.step_replay), when every
    # one of them carries them (per-request ``detailed``); None otherwise
    step_sequences: list | None = None
    # per row of the newest segment (per-request windows): vLLM's mean ITL (s) and decode
    # tokens, NaN where a request does not report them; None for logged intervals
    request_itl_s: object = None
    request_decode_tokens: object = None

    @property
    def plugin(self) -> None:
        """Ingested rows carry no plugin series."""
        return None


def ingested_window(store, route: str, source: str, start: float, end: float) -> IngestedWindow:
    """Per-request rows (or logged intervals) of a route, one γ segment per γ. Two sources
    of the same traffic are never added together: the route's source picks one."""
    with store.read_snapshot():  # one committed state, whatever an ingest writes meanwhile
        return _read_ingested_window(store, route, source, start, end)


def _read_ingested_window(store, route: str, source: str, start: float, end: float) -> IngestedWindow:
    segments = [
        GammaSegment(gamma=g, start=float(iv.start[0]), end=float(iv.end[-1]), engines=[], intervals=iv,
                     draft_tokens_per_position=store.ingested_draft_tokens_per_position(route, source, g, start, end))
        for g, iv in store.ingested_intervals(route, source, start, end).items()
    ]
    segments.sort(key=lambda s: s.end)
    window = IngestedWindow(source=source, start=start, end=end, segments=segments)
    itl_mean = undrafted = sequences = request_itl = request_decode = None
    newest = window.newest_segment
    if newest is not None:
        if source == "per-request":
            request_itl, request_decode = store.ingested_request_timing(route, source, newest.gamma, start, end)
        itl_sum, tokens = store.ingested_itl(route, source, newest.gamma, start, end)
        itl_mean = itl_sum / tokens if tokens > 0 else None
        decode = store.ingested_decode_tokens(route, source, newest.gamma, start, end)
        undrafted = None if decode is None else undrafted_token_share(*decode)
        steps = store.ingested_step_sequences(route, source, newest.gamma, start, end)
        sequences = None if steps is None else [StepSequence(newest.gamma, d, a) for d, a in steps]
    return replace(window, step_sequences=sequences, request_itl_s=request_itl, request_decode_tokens=request_decode,
                   step_shape=StepShapeWindow(batch_mix={}, iteration_tokens={}, itl_per_token_s=itl_mean,
                                              samples=0, undrafted_token_share=undrafted))
