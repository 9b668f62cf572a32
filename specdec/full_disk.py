"""How `specdec collect` lives through a full disk: a long-running collector keeps scraping
and stores again by itself when space returns; `--once` stops with the line.

A serving engineer leaves the collector running under a supervisor; exiting when the disk
fills would need someone to restart it after space is freed, and a restart loop would log
the same error forever. So each cycle that cannot be stored is tried whole (nothing of it
is kept, acceptance.store.disk) and the collector goes on: one line when storing starts to
fail, the cycle lines say "not stored", one line when it stores again. Nothing is lost:
engines' counters are cumulative, so the first stored cycle's deltas cover the cycles not
stored (an engine restart meanwhile loses what any scrape gap loses). A run that ends while
the disk is still full exits 2 with the store's line, as `--once` does.
"""

from __future__ import annotations

import sys
import time


class FullDiskWatch:
    """``store.write_cycle`` for a collector that runs on through a full disk (``once``: it does not)."""

    def __init__(self, write_cycle, *, once: bool):
        self._write, self._once = write_cycle, once
        self.full = None  # the current full-disk error (acceptance.store.StoreFullError), None while storing
        self.since: float | None = None  # wall time the current full run started
        self.not_stored = 0  # cycles of the current full run not stored
        self.not_stored_total = 0

    def __call__(self, results) -> None:
        from acceptance.store import StoreFullError

        try:
            self._write(results)
        except StoreFullError as e:
            if self._once:
                raise
            if self.full is None:
                self.since = time.time()
                print(f"store {e.path}: disk full ({e.reason}): {e.consequence}; collecting goes on and stores "
                      f"again once space is freed", file=sys.stderr, flush=True)
            self.full = e
            if not e.stored:
                self.not_stored += 1
                self.not_stored_total += 1
            return
        if self.full is not None:
            since = time.strftime("%H:%M:%S UTC", time.gmtime(self.since))
            print(f"store {self.full.path}: space is back, storing again: {self.not_stored} cycle(s) since {since} "
                  f"were not stored, and this cycle's deltas cover them", file=sys.stderr, flush=True)
            self.full, self.not_stored = None, 0

    def cycle_note(self) -> str:
        """What a cycle line adds while the disk is full."""
        if self.full is None:
            return ""
        return "; stored, old rows not deleted (disk full)" if self.full.stored else "; not stored (disk full)"

    def finish(self) -> None:
        """The run is over: still full, its last cycle was not stored — the store's line, exit 2."""
        if self.full is not None and not self.full.stored:
            raise self.full
