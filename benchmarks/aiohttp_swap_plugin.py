"""pytest plugin for benchmarks/http_client_compare.py: every ``PageFetcher`` the tests make
is benchmarks/fetch_aiohttp.py's prototype, so the tests that pin today's client judge it.

    PYTHONPATH=benchmarks python -m pytest -p aiohttp_swap_plugin tests/test_acceptance_http1.py
"""

import acceptance.collector as collector
import acceptance.fetch as fetch
from fetch_aiohttp import AiohttpPageFetcher

fetch.PageFetcher = AiohttpPageFetcher  # type: ignore[misc]  # fetch_page and read_source build it by this name
collector.PageFetcher = AiohttpPageFetcher  # type: ignore[misc]  # Collector builds it by this name
