"""Why a route's window holds no drafts, in the one way that is so — the message of
``pipeline.NoDataError``. A scraped route's targets either were not scraped in the window
(or never answered), answered but do not speculate (no spec-decode counters: vLLM runs
without --speculative-config), speculate but drafted nothing (idle), or hold counts no engine
produces, left out of the window (acceptance.windows); an ingested route's rows may all lie
outside the window (their own times: the message says where); each wants another
step from the user, so one sentence for all three would send them the wrong way. Every
message starts "route R: no drafts in the last SPAN" (the dashboard words its hint on it).
"""

from __future__ import annotations

from acceptance.durations import approximate_duration

from .report import format_clock, format_duration


def no_drafts_message(route: str, window, window_s: float, source: str, ingested: list[str] = ()) -> str:
    """``ingested``: the sources of the store's ingested rows of a scraped route, which it does
    not read (a route with targets is scraped): named, with the key that reads them."""
    span_text = format_duration(window_s) if float(window_s).is_integer() else approximate_duration(window_s)
    head = f"route {route!r}: no drafts in the last {span_text}"
    failing = [s for s in getattr(window, "target_status", []) if getattr(s, "last_error", None)]
    status = f" ({len(failing)} target(s) failing, e.g. {failing[0].last_error})" if failing else ""
    span = getattr(window, "stored_span", None)
    if source != "scrape" and span:  # rows are stored, outside the window: say where
        rows, oldest, newest = span
        return (f"{head}: the store holds {rows:,} {source} row(s) of route {route}, from {format_clock(oldest)} to "
                f"{format_clock(newest)} (their own times); widen --window to reach them")
    if source != "scrape":
        hint = (f"ingest {source} data with `specdec ingest --route {route}`" if source != "prometheus"
                else "check the selector in Prometheus (VictoriaMetrics shows data only after its "
                     "-search.latencyOffset, 30 s by default)")
        return f"{head}{status}; {hint} or widen --window"
    unread = (f"; the store also holds {' and '.join(ingested)} rows of route {route}, which a route with targets "
              f"does not read: set source = \"{ingested[0]}\" in [routes.{route}] to tune from them" if ingested else "")
    statuses = list(getattr(window, "target_status", []))
    answered = [s for s in statuses if s.last_ok_time is not None and s.last_ok_time > window.start]
    if not answered:
        last = max((s.last_ok_time for s in statuses if s.last_ok_time is not None), default=None)
        when = f"last answered {format_clock(last)}" if last is not None else "never answered"
        return (f"{head}: its targets were not scraped in it ({when}){status}; run `specdec collect` (two scrapes "
                f"at least) or widen --window{unread}")
    left_out = getattr(window, "notes", [])
    if left_out and not window.segments:  # acceptance.windows left every engine out: their counts are impossible
        return f"{head} that it can use: {left_out[0]}" + (f" (+{len(left_out) - 1} more)" if len(left_out) > 1 else "")
    off = getattr(window, "not_speculating", [])
    if off and not any(s.gamma > 0 for s in window.segments):
        return (f"{head}: its {len(answered)} target(s) answered but do not speculate ({len(off)} engine(s) without "
                f"vllm:spec_decode_* counters: vLLM runs without --speculative-config); nothing to tune until "
                f"speculation is on{unread}")
    return (f"{head}: its {len(answered)} target(s) answered and speculate but drafted nothing: idle (no decode "
            f"traffic){status}; {_idle_hint(window)}{unread}")


def _idle_hint(window) -> str:
    """What helps an idle window: an older span where the store holds one, else traffic — the
    first scrape of a target is its baseline, so what its engine drafted before is not counted
    (a saved page scraped as it is stays idle)."""
    first = min((s.start for s in window.segments), default=None)
    if first is None or first <= window.start + 1.0:
        return "widen --window"
    return (f"the store holds nothing older (first scrape in it {format_clock(first)}), so a longer window cannot "
            f"help: a first scrape is a baseline and what the engines drafted before it is not counted — send "
            f"decode traffic while `specdec collect` runs (`specdec inspect URL` reads a page's counts since its "
            f"engine started)")
