"""The embedded store: scrape cycles → snapshots, per-interval deltas, events, rollups.

One SQLite file (WAL, ``synchronous=NORMAL``: a killed process loses at most the cycle it
was writing). ``write_cycle`` stores one scrape cycle in ONE transaction: every engine's
DELTA against its previous snapshot (the newest snapshot is kept as the next delta's
baseline) — the new value itself after a counter drop or a changed ``_created`` (Prometheus
``increase`` semantics), a γ change starting a new engine segment, so a delta is never
negative, never doubled and never summed across γ — with the step shape, failures, events,
target status, the plugin's counters and the rollups. A delta row covers (previous scrape,
this scrape]; windows take the rows whose END lies in (start, end], so window sums are exact
and additive. The schema (packed arrays with a layout table; chunk rows so that a week reads
in milliseconds, each scrape kept once), the rollups and retention are in docs/REFERENCE.md,
The store.

The package: ``core`` (the Store: open, close, identities, the read snapshot), ``writes``
(the write path), ``deltas`` (the delta rules), ``codecs`` (chunk rows) and ``packing`` (their
compression), ``sealing`` (a closed hour's rows made one), ``schema`` (the file and its
migrations) and ``upgrade`` (version 9's, in Python), ``disk`` (a full disk told from damage),
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
    LoggedLoad,
    IngestResult,
    PluginEntries,
    SpecEntries,
    StepTotals,
    StoreError,
    StoreFullError,
    TargetStatus,
)
from .schema import APPLICATION_ID, SCHEMA_VERSION

__all__ = [
    "Store", "StoreError", "StoreFullError", "EngineRef", "TargetStatus", "Event", "IngestedRow", "LoggedLoad",
    "IngestResult", "INGESTED_SOURCES",
    "SpecEntries", "PluginEntries", "StepTotals", "SCHEMA_VERSION", "APPLICATION_ID", "ROLLUP_LEVELS",
    "ROLLUP_RETENTION_FACTOR", "CHUNK_SPANS", "bucket_of", "chunk_of", "le_value",
]
