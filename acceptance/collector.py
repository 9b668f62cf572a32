"""Scrape a fleet of vLLM /metrics targets concurrently, one cycle per interval.

A cycle fetches and parses every target on one thread (``concurrency`` scrapes in flight
at once), each scrape bounded by ``timeout_s`` in total. A target that fails — unreachable, slow,
over-size, not a vLLM page — becomes ``ScrapeResult(ok=False, error=<one line naming the
target>)`` and never stops the others. Results come back in target order.

Why one thread: the work per target is an HTTP exchange (mostly waiting) plus about 0.5 ms
of parsing that holds the GIL whatever runs it. On a pool of threads the waiting was free
but handing the GIL between 64 threads cost about 1 ms a target, more than the parse; on
the fetcher's event loop (``acceptance.fetch``) the exchanges wait together and each page
is parsed as soon as it is in (benchmarks/collector_fleet.py has the figures).

``run_collector`` runs cycles on a fixed schedule: cycle k starts at t0 + k·interval on the
monotonic clock. A cycle that overruns the interval does not make cycles pile up: the
schedule skips the ticks that passed, and the next cycle starts at the next tick. Its
``ScrapeOptions`` say how each scrape is made: deadline, page size, concurrency, clock,
engines per page.
"""

from __future__ import annotations

import asyncio
import math
import resource
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .errors import InputError
from .counts import ScrapeResult
from .fetch import PageFetcher, _one_line
from .target_access import TargetAccess
from .limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENGINES
from .limits import SCRAPE_TIMEOUT_S as DEFAULT_TIMEOUT_S
from .parse import parse_metrics_page



@dataclass(frozen=True)
class ScrapeOptions:
    """How each scrape of a run is made: ``timeout_s`` for the whole exchange, at most
    ``max_bytes`` of page, ``concurrency`` scrapes in flight, ``now`` stamping each result,
    at most ``max_engines`` engines read from a page, and ``access``: for a target's name, the
    URL fetched and the credential sent (acceptance.target_access; a name not in it is fetched
    as written)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES
    concurrency: int = 64
    now: Callable[[], float] = time.time
    max_engines: int = DEFAULT_MAX_ENGINES
    access: Mapping[str, TargetAccess] = field(default_factory=dict)


# A wall-clock step smaller than this is NTP's slewing or scheduling noise, not a step.
CLOCK_STEP_S = 1.0


class ClockWatch:
    """Whether this machine's wall clock stepped since the last look (NTP, a resumed VM, a
    hand): the wall clock against the monotonic one, which no step moves. A step back holds the
    targets whose last stored scrape is ahead of it (acceptance.store.writes); a step forward
    stores the scrape interval across it that much longer than it ran — counts stay exact,
    a rate over that interval reads low. ``step()`` gives the step in seconds, None without one."""

    def __init__(self, threshold_s: float = CLOCK_STEP_S):
        self.threshold_s = threshold_s
        self._offset: float | None = None

    def step(self) -> float | None:
        offset = time.time() - time.monotonic()
        previous, self._offset = self._offset, offset
        if previous is None or abs(offset - previous) < self.threshold_s:
            return None
        return offset - previous


def _check_concurrency(concurrency: object) -> None:
    if not (isinstance(concurrency, int) and concurrency >= 1):
        raise InputError(f"concurrency must be a positive integer, got {concurrency!r}")


class Collector:
    """A reusable scraper: a fetcher (its event loop and keep-alive connections) kept across cycles."""

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        concurrency: int = 64,
        keep_alive: bool = True,
        now: Callable[[], float] = time.time,
        max_engines: int = DEFAULT_MAX_ENGINES,
        access: Mapping[str, TargetAccess] | None = None,
    ):
        _check_concurrency(concurrency)
        self.max_engines = max_engines
        self.access = dict(access or {})
        self.fetcher = PageFetcher(timeout_s=timeout_s, max_bytes=max_bytes, keep_alive=keep_alive)
        self.concurrency = concurrency
        self.now = now

    def scrape(self, target: str) -> ScrapeResult:
        """One target: fetch, parse; any failure is a result with ``ok`` False, not an exception."""
        return self.fetcher.run(self._scrape(target))

    async def _scrape(self, target: str) -> ScrapeResult:
        """The result is named by the target's shown URL (acceptance.target_access): no secret
        of it reaches the store or a message."""
        taken_at = self.now()
        started = time.monotonic()
        access = self.access.get(target) or TargetAccess(target)
        shown = access.shown
        try:
            page = await self.fetcher.page(access)
            engines = parse_metrics_page(page, source=shown, max_engines=self.max_engines)
        except Exception as exc:  # a bad target must never stop the cycle
            message = access.scrub(_one_line(exc))
            if shown not in message:
                message = f"{shown}: {type(exc).__name__}: {message}"
            return ScrapeResult(shown, taken_at, False, (), message, time.monotonic() - started)
        return ScrapeResult(shown, taken_at, True, tuple(engines), None, time.monotonic() - started)

    def collect(self, targets: list[str]) -> list[ScrapeResult]:
        """Every target scraped concurrently; results in target order."""
        _ensure_open_file_limit(len(targets) + self.concurrency + 256)
        return self.fetcher.run(self._cycle(targets))

    async def _cycle(self, targets: list[str]) -> list[ScrapeResult]:
        in_flight = asyncio.Semaphore(self.concurrency)

        async def scrape(target: str) -> ScrapeResult:
            async with in_flight:
                return await self._scrape(target)

        return list(await asyncio.gather(*(scrape(t) for t in targets)))

    def close(self) -> None:
        self.fetcher.close()

    def __enter__(self) -> "Collector":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ensure_open_file_limit(needed: int) -> None:
    """Raise the soft limit on open files to ``needed`` (at most the hard limit), best effort.

    A keep-alive connection per target means a thousand targets hold a thousand sockets,
    and the usual soft limit is 1,024: past it every new connection fails with EMFILE.
    """
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < needed:
            target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
            if target > soft:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        pass  # then a scrape that runs out fails on its own, with a message naming its target


def collect_cycle(
    targets: list[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
    concurrency: int = 64,
    now: Callable[[], float] = time.time,
) -> list[ScrapeResult]:
    """One scrape of every target (concurrently, each within ``timeout_s``), in target order.

    A failed fetch or parse is ``ScrapeResult(ok=False, error=...)`` with a one-line message
    naming the target; the other targets are still collected.
    """
    with Collector(timeout_s=timeout_s, max_bytes=max_bytes, concurrency=concurrency, now=now) as collector:
        return collector.collect(targets)


def run_collector(
    write_cycle: Callable[[list[ScrapeResult]], None],
    targets: list[str],
    *,
    interval_s: float,
    duration_s: float | None = None,
    once: bool = False,
    on_cycle: Callable[[int, list[ScrapeResult], float], None] | None = None,
    stop: threading.Event | None = None,
    scrape: ScrapeOptions = ScrapeOptions(),
) -> int:
    """Scrape ``targets`` every ``interval_s`` and hand each cycle's results to ``write_cycle``.

    Cycle k (k = 0, 1, …) starts at t0 + k·interval_s (monotonic clock); when a cycle
    overruns, the ticks it covered are skipped. Stops after one cycle when ``once``; when
    ``duration_s`` has passed since t0 (no cycle starts at or after t0 + duration_s); or when
    ``stop`` is set (the wait between cycles wakes at once). ``on_cycle(n, results,
    seconds)`` is called after each cycle is written (n from 1; seconds for scrape + write).
    ``scrape``: how each target is scraped. An exception from ``write_cycle`` (the store)
    propagates: it is not a target's failure. Returns the number of cycles run.
    """
    if not (isinstance(interval_s, (int, float)) and math.isfinite(interval_s) and interval_s > 0):
        raise InputError(f"interval must be a positive number of seconds, got {interval_s!r}")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s >= 0):
        raise InputError(f"duration must be a non-negative number of seconds, got {duration_s!r}")
    if not targets:
        raise InputError("no targets to collect")
    stop = stop or threading.Event()
    cycles = 0
    t0 = time.monotonic()
    with Collector(timeout_s=scrape.timeout_s, max_bytes=scrape.max_bytes, concurrency=scrape.concurrency,
                   now=scrape.now, max_engines=scrape.max_engines, access=scrape.access) as collector:
        tick = 0
        while not stop.is_set():
            started = time.monotonic()
            results = collector.collect(targets)
            write_cycle(results)
            cycles += 1
            if on_cycle is not None:
                on_cycle(cycles, results, time.monotonic() - started)
            if once:
                break
            # Next tick strictly after now: a slow cycle skips the ticks it overran.
            tick = max(tick + 1, math.floor((time.monotonic() - t0) / interval_s) + 1)
            next_start = t0 + tick * interval_s
            if duration_s is not None and next_start >= t0 + duration_s:
                break
            if stop.wait(max(0.0, next_start - time.monotonic())):
                break
    return cycles
