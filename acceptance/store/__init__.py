"""The embedded store: scrape cycles → snapshots, per-interval deltas, events, rollups.

One SQLite file (WAL, ``synchronous=NORMAL``: a killed process loses at most the cycle it
was writing; the file always reopens). Data flows one way: ``write_cycle`` takes the
``ScrapeResult`` objects of one scrape cycle and, in ONE transaction, stores

* the raw snapshot of every engine (cumulative counters as exposed),
* the DELTA of every engine against its previous snapshot, computed at write time:
    delta = new − previous                      (same γ, counters did not reset)
    delta = new                                 (counter drop or changed ``_created``:
                                                 Prometheus ``increase`` semantics; event
                                                 ``restart``)
  so a delta is never negative and never doubled. A γ change (the position label set
  changed) starts a new engine *segment*; vLLM fixes γ at engine start, so it is a
  restart too and its first delta is the new value (events ``restart`` and
  ``gamma_change``), even when no counter went down. Families vanishing → event
  ``spec_off`` (no delta); returning → ``spec_on``, delta = new value. The first
  snapshot ever seen of an engine is a baseline only (what happened before it is not
  observable). A failed scrape is recorded and leaves the previous snapshot as the
  baseline, so the next good scrape's delta covers the gap.
* the step shape: the ``num_requests_running`` sample, ITL sum/count deltas and
  iteration-token bucket deltas (reset on the same signals or on their own drop),
* failures, events, per-target status, and the rollups below;
* the specdec vLLM plugin's counters when the engine exports them (schema 3,
  ``acceptance.plugin_series``): the cumulative vector per scrape in ``plugin_samples``
  (columns named by a ``plugin`` layout: drafts / accepted / reached per batch bucket and
  position, steps per shape, tokens and fit), and its delta in ``plugin_chunks``. The
  delta follows the spec counters' rules — the new value itself after a restart (a spec
  counter or a plugin counter went down, or ``_created`` changed) or when the previous
  sample had no plugin series; a series new since the previous sample counts whole — and
  is stored only for intervals that have a spec delta, under the same engine segment, so
  plugin counts are never attributed across γ either.

A delta row covers the interval (previous scrape, this scrape]; windows take the rows
whose END lies in (start, end] — so a window's sums are exact and additive: any window
split at any time t gives two windows whose sums add up to the whole.

Schema choice — packed arrays with a layout table, not one row per series. A row of
``samples`` holds one engine's scrape; its spec-decode counters are one float64 array
whose columns are named by ``layouts`` (e.g. ``drafts, draft_tokens, accepted_tokens,
accepted_per_position:0 .. γ-1`` and optionally ``draft_tokens_per_position:0 .. γ-1``).
The first 3 + γ columns are always the ``SpecCounts.as_vector`` layout [D, T, A, A_1..A_γ],
so readers need no lookup; later series (drafts per position, per-request acceptance
histograms, per-batch-size counts, iteration-token buckets with other bounds) are new
layouts, i.e. new columns, with no schema change. A series table keyed by (engine,
family, labels) would fit too, but costs 4 + γ rows per engine per scrape (≈ 30 M rows a
week for 100 engines at 15 s) where packed arrays cost one, and every window would have to
pivot them back into this layout.

Reading layout — chunks, so that a week reads in milliseconds. ``samples`` is the record
of what was scraped (and each engine's baseline); windows never read it. They read chunk
rows, each holding packed arrays for one engine over one span (``CHUNK_SPANS``):

* ``interval_chunks`` (level 0): every sample of an engine in a 5-min chunk (time ∈
  (c, c + 300]) with one (segment, layout, it layout) key: times, cycles, starts, ITL
  deltas, and a count matrix [batch size, delta (W), iteration-token delta] stored in the
  narrowest exact type (uint8/16/32, float64 for fractions or NaN). Derivable arrays
  (cycles = times, start[i] = time[i − 1], zero ITL) are NULL. An hour of a route's
  engines is ~13 rows per engine instead of 240.
* ``spec_rollups`` / ``step_rollups``: per (engine, level ∈ {5 min, 1 h}, chunk of 1 h /
  1 day, segment, layout) the buckets (b, b + level] of the chunk with their summed
  deltas, interval counts, first start and last end; the step shape per bucket (ITL sums,
  iteration-token deltas, batch mix as (bucket, batch size, samples) triples).

Chunks are maintained at write time inside the cycle's transaction (so they can never
disagree with ``samples``): the open chunks of each engine are kept in memory and written
back by rowid (rowid tables: chunk rows of a few KiB would spill into overflow pages in a
WITHOUT ROWID b-tree). A window reads whole buckets inside it and scrape intervals at its
edges (``acceptance.windows``), one query per level for all the route's engines.

``plugin_chunks`` holds the plugin deltas in the same plan, one table for every level:
level 0 rows hold a 5-min chunk of an engine's scrape intervals (keyed by interval end),
levels 300 / 3600 the summed buckets of an hour / a day; per (engine segment, plugin
layout), the (n, W) deltas in the narrowest exact type, zlib-compressed (most of a
plugin vector is zero in any one interval: ~150 columns per engine at γ = 3). Windows
only need their sums, so rows carry no interval starts.

Retention (``retention_s``): raw samples, failures and cycles older than ``retention_s``
and chunk entries are deleted (each engine's newest sample is kept: it is the baseline of
the next delta); rollups and events are kept ``ROLLUP_RETENTION_FACTOR`` times longer, so
long windows stay readable at bucket resolution after the raw rows are gone (their edges are then rounded to
whole buckets). ``write_cycle`` applies retention at most every ``retention_s / 10``
(capped at 1 h), in its own transaction after the cycle's.

The package: ``core`` (the Store: open, close, identities, the read snapshot), ``writes``
(the write path), ``codecs`` (chunk rows), ``schema`` (the file and its migrations),
``retention``, ``reads``, ``ingest`` (per-request and log rows), ``bulk`` (a vectorised
history loader for benchmarks and tests) and ``records`` (what the store hands out). The
names below are its interface.
"""

from .codecs import CHUNK_SPANS, ROLLUP_LEVELS, ROLLUP_RETENTION_FACTOR, bucket_of, chunk_of, le_value
from .core import Store
from .records import (
    INGESTED_SOURCES,
    EngineRef,
    Event,
    IngestedRow,
    IngestResult,
    PluginEntries,
    SpecEntries,
    StepTotals,
    StoreError,
    TargetStatus,
)
from .schema import APPLICATION_ID, SCHEMA_VERSION

__all__ = [
    "Store", "StoreError", "EngineRef", "TargetStatus", "Event", "IngestedRow", "IngestResult", "INGESTED_SOURCES",
    "SpecEntries", "PluginEntries", "StepTotals", "SCHEMA_VERSION", "APPLICATION_ID", "ROLLUP_LEVELS",
    "ROLLUP_RETENTION_FACTOR", "CHUNK_SPANS", "bucket_of", "chunk_of", "le_value",
]
