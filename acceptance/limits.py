"""The bounds a reader of an untrusted source keeps, and the defaults the config's keys start
from: one definition each, in a module light enough for specdec.config to import without the
HTTP client or the page parser (a dashboard checks its config while its server boots)."""

# One vLLM server exposes an engine per data-parallel rank: tens, not thousands. A page
# with more is not a vLLM server's, and parsing it all would cost seconds per scrape.
DEFAULT_MAX_ENGINES = 1024
SCRAPE_TIMEOUT_S = 5.0  # one deadline per scrape, connect to last byte (acceptance.fetch)
DEFAULT_MAX_BYTES = 16 * 1024 * 1024  # a page's body, after decompression (acceptance.fetch)
PROMETHEUS_TIMEOUT_S = 10.0  # one query to Prometheus (acceptance.prometheus_http)
# A route's largest Prometheus answer is one series per engine (its γ, its restarts, the
# engines at a γ) or per γ and position. 50,000 holds 1,024 engines (the collector's own bound per page) ×
# (γ ≤ 21 positions + drafts, draft tokens, accepted) × 2 γ values in use (a probe beside
# the fleet), with room for series renamed by restarts; a runaway selector's 200,000 is refused.
DEFAULT_MAX_SERIES = 50_000
