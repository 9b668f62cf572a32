"""CPU cost of collecting a fleet: N loopback targets serving the real 84 KB vLLM page.

    python benchmarks/collector_fleet.py [--targets 200,1000] [--cycles 3] [--interval 15]

A separate process serves the page (asyncio, HTTP/1.1 keep-alive) on N ports — one per
target, as in a fleet where every engine is its own host:port — so the server's CPU is not
counted. This process runs ``acceptance.collector.Collector`` cycles back to back and
measures its own CPU time (user + system, all threads: ``resource.getrusage``), the
store's writes of every cycle included (``--no-store`` leaves them out). The
figure of merit is CPU-seconds per cycle / interval = the fraction of one core the
collector needs at that interval.

Two connection modes: ``keep-alive`` (connections stay open between cycles) and
``reconnect`` (a new TCP connection per scrape: what happens against vLLM's uvicorn, which
closes idle connections after 5 s, at a 15 s interval).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from acceptance.collector import Collector
from acceptance.store import Store
from acceptance.parse import parse_metrics_page

PAGE = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm-golden" / "exposition_gamma3_full_metrics_page.txt"


def _serve(n_ports: int, page: bytes, conn) -> None:
    """Serve ``page`` at /metrics on n_ports loopback ports; send the ports back, run until killed."""
    header = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=1.0.0; charset=utf-8\r\n"
        b"Content-Length: " + str(len(page)).encode() + b"\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                if not request:
                    break
                writer.write(header)
                writer.write(page)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        servers = [await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024) for _ in range(n_ports)]
        conn.send([s.sockets[0].getsockname()[1] for s in servers])
        await asyncio.Event().wait()

    asyncio.run(main())


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def measure(targets: list[str], *, cycles: int, keep_alive: bool, concurrency: int, store_writes: bool) -> dict:
    folder = tempfile.mkdtemp(prefix="specdec-fleet-")
    with Collector(concurrency=concurrency, keep_alive=keep_alive, timeout_s=10.0) as collector, \
            Store.open(Path(folder) / "fleet.db") as store:
        warm = collector.collect(targets)  # warm-up: threads started, connections opened
        failed = [r.error for r in warm if not r.ok]
        if failed:
            raise SystemExit(f"warm-up cycle failed for {len(failed)} targets, e.g. {failed[0]}")
        if store_writes:
            store.write_cycle(warm)  # the baseline: later cycles write deltas
        cpu0, wall0 = _cpu_s(), time.perf_counter()
        for _ in range(cycles):
            results = collector.collect(targets)
            assert all(r.ok for r in results), next(r.error for r in results if not r.ok)
            if store_writes:
                store.write_cycle(results)
        cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
    shutil.rmtree(folder, ignore_errors=True)
    return {"cpu_per_cycle_s": cpu / cycles, "wall_per_cycle_s": wall / cycles}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="200,1000", help="fleet sizes, comma-separated")
    ap.add_argument("--cycles", type=int, default=3, help="measured cycles per size and mode")
    ap.add_argument("--interval", type=float, default=15.0, help="scrape interval the CPU is charged against")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--no-store", action="store_true", help="leave out the store writes (on by default)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.targets.split(",")]
    page = PAGE.read_bytes()

    # The collector's cost floor: parsing alone, the same page, in this process.
    text = page.decode()
    t = time.process_time()
    for _ in range(200):
        parse_metrics_page(text)
    parse_ms = (time.process_time() - t) / 200 * 1e3

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * max(sizes) + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))

    print(f"page {len(page) / 1024:.1f} KiB; parse alone {parse_ms:.2f} ms CPU; cpus {os.cpu_count()}; "
          f"concurrency {args.concurrency}; {args.cycles} measured cycles each; interval {args.interval:g} s; "
          f"store writes {'off' if args.no_store else 'included'}")
    print(f"{'targets':>7}  {'mode':<10}  {'CPU s/cycle':>11}  {'CPU ms/target':>13}  {'wall s/cycle':>12}  "
          f"{'core fraction @ interval':>24}")
    for n in sizes:
        parent, child = mp.Pipe()
        server = mp.get_context("fork").Process(target=_serve, args=(n, page, child), daemon=True)
        server.start()
        try:
            ports = parent.recv()
            targets = [f"http://127.0.0.1:{port}/metrics" for port in ports]
            for mode, keep_alive in (("keep-alive", True), ("reconnect", False)):
                m = measure(targets, cycles=args.cycles, keep_alive=keep_alive, concurrency=args.concurrency,
                            store_writes=not args.no_store)
                frac = m["cpu_per_cycle_s"] / args.interval
                print(f"{n:>7}  {mode:<10}  {m['cpu_per_cycle_s']:>11.3f}  {m['cpu_per_cycle_s'] / n * 1e3:>13.2f}  "
                      f"{m['wall_per_cycle_s']:>12.3f}  {frac:>23.1%}")
        finally:
            server.kill()
            server.join()


if __name__ == "__main__":
    main()
