"""CPU per scrape of a ~30 KB /metrics page over loopback: the collector's client, raw aiohttp, httpx.

    python benchmarks/http_client_micro.py [--targets 200] [--rounds 5] [--page-kib 30]

The quick test that picked the library (benchmarks/http_client_compare.py then held it to
the collector's real target). The committed benchmarks/results/http-client-micro.json was
run at commit 5caf014, when the collector's client was the hand-written "today (http1.py)"
(acceptance/http1.py, in git history); since, acceptance.fetch.PageFetcher is on aiohttp,
and "collector" here measures what aiohttp costs wrapped in its guarantees. Each
client fetches the page from ``--targets`` loopback ports (the server of
benchmarks/collector_fleet.py, in a separate process whose CPU is not counted), 64 in
flight, on one asyncio loop, with no parsing: only the HTTP exchange and reading the body
with a byte count against a limit, under a per-scrape deadline. CPU = this process's user +
system time (``resource.getrusage``) over ``--rounds`` rounds after a warm-up round, per
scrape, in two modes: keep-alive (connections kept between rounds) and reconnect (a new
TCP connection per scrape). Clients and modes alternate round-robin per repeat, so a burst
of load from other work on this shared machine falls on all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

from acceptance.fetch import PageFetcher

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collector_fleet import PAGE, _serve  # noqa: E402  (the fleet benchmark's page and loopback server)

OUT = Path(__file__).resolve().parent / "results" / "http-client-micro.json"

MAX_BYTES = 16 * 1024 * 1024
TIMEOUT_S = 10.0
CONCURRENCY = 64


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def page_of(kib: int) -> bytes:
    """The golden vLLM page cut at a line end near ``kib`` KiB."""
    page = PAGE.read_bytes()
    cut = page.rfind(b"\n", 0, kib * 1024) + 1
    return page[:cut] if cut > 0 else page


class _Collector:
    name = "collector (acceptance.fetch)"

    def __init__(self, keep_alive: bool):
        self.fetcher = PageFetcher(timeout_s=TIMEOUT_S, max_bytes=MAX_BYTES, keep_alive=keep_alive)

    def run(self, work):
        return self.fetcher.run(work)

    async def get(self, url: str) -> int:
        return len(await self.fetcher.page(url))

    def close(self) -> None:
        self.fetcher.close()


class _Aiohttp:
    name = "aiohttp"

    def __init__(self, keep_alive: bool):
        import aiohttp

        self.aiohttp = aiohttp
        self.keep_alive = keep_alive
        self.loop = asyncio.new_event_loop()
        self.session = None

    def run(self, work):
        return self.loop.run_until_complete(work)

    async def get(self, url: str) -> int:
        aiohttp = self.aiohttp
        if self.session is None:
            connector = aiohttp.TCPConnector(limit=0, force_close=not self.keep_alive,
                                             keepalive_timeout=None if self.keep_alive else None)
            self.session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                                 skip_auto_headers=("Accept-Encoding", "User-Agent"))
        async with asyncio.timeout(TIMEOUT_S):
            async with self.session.get(url, allow_redirects=False, headers={"Accept": "text/plain"}) as resp:
                if resp.status != 200:
                    raise RuntimeError(resp.status)
                chunks, total = [], 0
                async for chunk in resp.content.iter_any():
                    total += len(chunk)
                    if total > MAX_BYTES:
                        raise RuntimeError("too large")
                    chunks.append(chunk)
                return len(b"".join(chunks).decode())

    def close(self) -> None:
        if self.session is not None:
            self.loop.run_until_complete(self.session.close())
        self.loop.close()


class _Httpx:
    name = "httpx"

    def __init__(self, keep_alive: bool):
        import httpx

        self.httpx = httpx
        self.keep_alive = keep_alive
        self.loop = asyncio.new_event_loop()
        self.client = None

    def run(self, work):
        return self.loop.run_until_complete(work)

    async def get(self, url: str) -> int:
        httpx = self.httpx
        if self.client is None:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=None if self.keep_alive else 0,
                                  keepalive_expiry=None)
            self.client = httpx.AsyncClient(limits=limits, timeout=TIMEOUT_S, follow_redirects=False,
                                            trust_env=False)
        headers = {"Accept": "text/plain", "Accept-Encoding": "identity"}
        if not self.keep_alive:
            headers["Connection"] = "close"
        async with asyncio.timeout(TIMEOUT_S):
            async with self.client.stream("GET", url, headers=headers) as resp:
                if resp.status_code != 200:
                    raise RuntimeError(resp.status_code)
                chunks, total = [], 0
                async for chunk in resp.aiter_raw():
                    total += len(chunk)
                    if total > MAX_BYTES:
                        raise RuntimeError("too large")
                    chunks.append(chunk)
                return len(b"".join(chunks).decode())

    def close(self) -> None:
        if self.client is not None:
            self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


CLIENTS = {"collector": _Collector, "aiohttp": _Aiohttp, "httpx": _Httpx}


def one_round(client, urls: list[str], expect: int) -> None:
    async def cycle():
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(url):
            async with gate:
                return await client.get(url)

        return await asyncio.gather(*(one(u) for u in urls))

    sizes = client.run(cycle())
    assert all(s == expect for s in sizes), set(sizes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds per client and mode (one scrape per target)")
    ap.add_argument("--repeats", type=int, default=3, help="times the whole client × mode grid is measured")
    ap.add_argument("--page-kib", type=int, default=30)
    ap.add_argument("--clients", default="collector,aiohttp,httpx")
    args = ap.parse_args()
    page = page_of(args.page_kib)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4 * args.targets + 256), hard), hard))

    parent, child = mp.Pipe()
    server = mp.get_context("fork").Process(target=_serve, args=(args.targets, page, child), daemon=True)
    server.start()
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        ports = parent.recv()
        urls = [f"http://127.0.0.1:{p}/metrics" for p in ports]
        for _ in range(args.repeats):
            for name in args.clients.split(","):
                for mode, keep_alive in (("keep-alive", True), ("reconnect", False)):
                    client = CLIENTS[name](keep_alive)
                    try:
                        one_round(client, urls, len(page))  # warm-up: imports, connections
                        cpu0 = _cpu_s()
                        for _ in range(args.rounds):
                            one_round(client, urls, len(page))
                        per_scrape_ms = (_cpu_s() - cpu0) / (args.rounds * len(urls)) * 1e3
                    finally:
                        client.close()
                    figures.setdefault((client.name, mode), []).append(per_scrape_ms)
    finally:
        server.kill()
        server.join()

    import aiohttp
    import httpx
    print(f"page {len(page)} bytes; {args.targets} loopback targets; {CONCURRENCY} in flight; "
          f"{args.rounds} rounds × {args.repeats} repeats; nproc {os.cpu_count()}; {platform.platform()}; "
          f"aiohttp {aiohttp.__version__}, httpx {httpx.__version__}")
    print(f"{'client':<18} {'mode':<11} {'CPU ms/scrape (median)':>22}  all repeats")
    for (name, mode), values in figures.items():
        print(f"{name:<18} {mode:<11} {statistics.median(values):>22.3f}  {', '.join(f'{v:.3f}' for v in values)}")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"nproc": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "libraries": {"aiohttp": aiohttp.__version__, "httpx": httpx.__version__},
        "page_bytes": len(page), "targets": args.targets, "in_flight": CONCURRENCY,
        "rounds": args.rounds, "repeats": args.repeats,
        "cpu_ms_per_scrape": [{"client": name, "mode": mode, "median": round(statistics.median(values), 4),
                               "repeats": [round(v, 4) for v in values]} for (name, mode), values in figures.items()],
    }, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t:.0f} s)")
