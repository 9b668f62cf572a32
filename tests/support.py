"""Helpers several test files share, imported by name (``from support import …``; the
dashboard's shared fixtures sit in ``dashboard_fixtures``): no test module imports from another."""

from __future__ import annotations

import contextlib
import json
import re
import os
import shutil
import socket
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from acceptance.step_replay import StepSequence


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(name: str) -> str | None:
    """``name`` on PATH, else /usr/bin/``name`` (Debian's packages), else None."""
    return shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)


def cutlass_available() -> bool:
    from kernels.acceptance import cutlass_available as available

    return available()


def require_cutlass() -> None:
    """nvidia-cutlass-dsl importable, else fail in CI (make test installs it) and skip elsewhere."""
    if cutlass_available():
        return
    skip_or_fail("nvidia-cutlass-dsl not installed (set CI=1 to make this a failure)",
                 in_ci="nvidia-cutlass-dsl is not importable in CI: install nvidia-cutlass-dsl==4.8.1")


def skip_or_fail(message: str, *, in_ci: str | None = None) -> None:
    """A test needs something that is missing: it fails in CI (CI set; ``in_ci`` if given),
    where `make test` installs it, and skips elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(in_ci or message)
    pytest.skip(message)


def wait_until_streamlit_serves(proc, url: str, log: Path, timeout_s: float) -> None:
    """Poll ``url``'s Streamlit health endpoint until it says ok; fail (with the server's
    log) when ``proc`` exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"streamlit did not serve: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.3)


# ------------------------------------------------------------------ the commands, run in-process


def engine_steps(x: np.ndarray, gamma: int) -> StepSequence:
    """What a greedy engine at γ does over an output whose positions the drafter gets right
    (x = 1) or wrong (0), the drafter always proposing γ tokens: each step accepts the
    leading ones of its draft, then emits the target's token."""
    drafted, accepted, p = [], [], 0
    while p < x.size:
        length = min(gamma, x.size - p)
        window = x[p:p + length]
        acc = int(np.argmin(window)) if (window == 0).any() else length
        drafted.append(length)
        accepted.append(acc)
        p += acc + 1
    return StepSequence(gamma, tuple(drafted), tuple(accepted))


def runs_of_text(rng, n: int, stay_right: float, stay_wrong: float) -> np.ndarray:
    """Positions in runs: copied text the drafter gets right, novel text it gets wrong."""
    x = np.empty(n, dtype=int)
    x[0] = 1
    for t in range(1, n):
        stay = stay_right if x[t - 1] else stay_wrong
        x[t] = x[t - 1] if rng.random() < stay else 1 - x[t - 1]
    return x


# A moment inside every tune's window for lines written now: "time" of ingested test rows (a fixed
# epoch would fall out of a --window 30d a month after it was written).
RECENT = int(time.time()) - 3600


def independent_request_lines(n: int, p: float, gamma: int, t0: float, seed: int = 0, route: str = "chat",
                              steps_range: tuple[int, int] = (20, 80), step_cost: float = 1.10) -> list[str]:
    """vLLM-shaped per-request lines (the gateway format) from an independent-p process, each
    with the mean ITL of a flat-cost engine at 118 tok/s whose step costs ``step_cost`` plain
    passes (1.10: a parallel drafter of r 0.10; 1 + γ·c for a sequential one)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        steps = int(rng.integers(*steps_range))
        # accepted length per step: geometric prefix, capped at gamma
        u = rng.random((steps, gamma))
        lengths = np.argmin(np.concatenate([u < p, np.zeros((steps, 1), bool)], axis=1), axis=1)
        hist = np.bincount(lengths, minlength=gamma + 1).tolist()
        acc = int(lengths.sum())
        spec = {"mean_acceptance_length": 1 + acc / steps, "draft_acceptance_rate": acc / (steps * gamma),
                "acceptance_histogram": hist, "num_spec_steps": steps, "num_accepted_draft_tokens": acc,
                "num_draft_tokens": steps * gamma, "num_spec_tokens": gamma,
                "per_step_accepted": None, "per_step_drafted": None}
        # steps of step_cost / 118 s; vLLM's mean_itl_ms is per output token, 1 + acc / steps per step
        itl_ms = 1000.0 / 118 * step_cost / (1 + acc / steps)
        lines.append(json.dumps({"route": route, "time": t0 + i,
                                 "metrics": {"mean_itl_ms": itl_ms, "speculative_decoding": spec}}))
    return lines


def tune_ingested(capsys, tmp_path, requests, deployment_toml: str) -> tuple[dict, str]:
    from specdec.cli import main, tune_gamma_main

    config = tmp_path / "specdec.toml"
    config.write_text("[deployment]\n" + deployment_toml)
    db = tmp_path / "specdec.db"
    code, _, err = run_cli(capsys, main, ["ingest", "--route", "chat", "--per-request", str(requests),
                                          "--config", str(config), "--db", str(db)])
    assert code == 0, err
    argv = ["--route", "chat", "--config", str(config), "--db", str(db), "--window", "30d"]
    code, out, err = run_cli(capsys, tune_gamma_main, argv + ["--json"])
    assert code == 0, err
    code, console, err = run_cli(capsys, tune_gamma_main, argv)
    assert code == 0, err
    return json.loads(out), console


def deployed_candidate(doc: dict) -> dict:
    return next(c for c in doc["candidates"] if c["gamma"] == doc["deployed_gamma"])


def vllm_payload(steps: list[tuple[int, int]], gamma: int, detailed: bool = False) -> dict:
    """What vLLM 0.33's RequestSpecDecodeMetrics.to_dict gives for (drafted, accepted) steps.

    Reimplemented from vllm/v1/metrics/stats.py for the test (vLLM is not imported).
    """
    histogram = [0] * (gamma + 1)
    for _, accepted in steps:
        histogram[accepted] += 1
    n_steps = sum(histogram)
    n_accepted = sum(j * h for j, h in enumerate(histogram))
    n_drafted = sum(d for d, _ in steps)
    payload = {
        "mean_acceptance_length": 1.0 + n_accepted / n_steps if n_steps else 1.0,
        "draft_acceptance_rate": n_accepted / n_drafted if n_drafted else 0.0,
        "acceptance_histogram": histogram,
        "num_spec_steps": n_steps,
        "num_accepted_draft_tokens": n_accepted,
        "num_draft_tokens": n_drafted,
        "num_spec_tokens": gamma,
    }
    if detailed and steps:
        payload["per_step_accepted"] = [a for _, a in steps]
        payload["per_step_drafted"] = [d for d, _ in steps]
    return payload


def run_cli(capsys, fn, argv):
    try:
        code = fn(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def route_config(tmp_path, urls, *, flat: bool = False):
    """specdec.toml with route `independent` on these targets (the seeds' flat cost if ``flat``)."""
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(('[deployment]\ncost_profile = "flat"\n' if flat else "")
                   + "[routes.independent]\ntargets = [" + ", ".join(f'"{u}"' for u in urls) + "]\n")
    return cfg


def tune_live_window(tmp_path, capsys):
    """tune-gamma --json on a 3 s live window of a simulated fleet (flat profile, no store)."""
    from acceptance.sim import Fleet, build_scenario
    from specdec.cli import tune_gamma_main

    with Fleet(build_scenario("independent", seed=7)) as fleet:
        urls = list(fleet.serve().values())
        fleet.start_realtime(speed=120.0)
        cfg = route_config(tmp_path, urls, flat=True)
        return run_cli(capsys, tune_gamma_main, ["--route", "independent", "--config", str(cfg),
                                                 "--window", "3s", "--json"])


def least_loaded_fleet(n: int, engines: int, rate: float, seed: int, median_decode_s: float = 8.0
                       ) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
    """Poisson arrivals, lognormal decode times, each request sent to the engine with the fewest
    running: (finish times, decode times, the engines' true {B: share of engine time at B ≥ 1})."""
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.exponential(1.0 / rate, n))
    decode = rng.lognormal(np.log(median_decode_s), 0.6, n)
    running: list[list[float]] = [[] for _ in range(engines)]  # each engine's requests' ends
    spans: list[list[tuple[float, float]]] = [[] for _ in range(engines)]
    for s, d in zip(starts, decode):
        running = [[e for e in ends if e > s] for ends in running]
        k = min(range(engines), key=lambda i: len(running[i]))
        running[k].append(s + d)
        spans[k].append((s, s + d))
    busy: dict[int, float] = {}
    for own in spans:
        times = np.array([t for span in own for t in span])
        order = np.argsort(times, kind="stable")
        count = np.cumsum(np.tile([1, -1], len(own))[order])[:-1]
        for b, dt in zip(count, np.diff(times[order])):
            if b >= 1:
                busy[int(b)] = busy.get(int(b), 0.0) + float(dt)
    total = sum(busy.values())
    return starts + decode, decode, {b: t / total for b, t in sorted(busy.items())}


def fleet_request_lines(finish: np.ndarray, decode_s: np.ndarray, p: float, gamma: int, t0: float, seed: int = 0,
                        route: str = "chat", step_s: float = 0.08) -> list[str]:
    """Gateway lines of the requests of ``least_loaded_fleet`` (times from t0): each decodes in
    about decode_s / step_s verify steps of an independent-p drafter, and reports its finish
    time, its output tokens and vLLM's mean_itl_ms = decode time / (tokens − 1)."""
    rng = np.random.default_rng(seed)
    lines = []
    for end, d in zip(finish, decode_s):
        steps = max(2, int(round(d / step_s)))
        lengths = np.argmin(np.concatenate([rng.random((steps, gamma)) < p, np.zeros((steps, 1), bool)], axis=1), axis=1)
        accepted = int(lengths.sum())
        tokens = 1 + steps + accepted  # the prompt step's token, then 1 + accepted per verify step
        spec = {"acceptance_histogram": np.bincount(lengths, minlength=gamma + 1).tolist(), "num_spec_steps": steps,
                "num_accepted_draft_tokens": accepted, "num_draft_tokens": steps * gamma, "num_spec_tokens": gamma}
        lines.append(json.dumps({"route": route, "time": t0 + float(end), "usage": {"completion_tokens": tokens},
                                 "metrics": {"mean_itl_ms": 1000.0 * d / (tokens - 1), "speculative_decoding": spec}}))
    return lines


_COUNTER_LINE = re.compile(r"^(vllm:[^{ ]+?(?:_total|_count|_sum|_bucket)(?:\{[^}]*\})?) (\S+)$", re.M)


def page_at_share(text: str, share: float) -> str:
    """A real /metrics page as its engine showed it when ``share`` of its traffic had run: every
    vllm: counter and histogram sample scaled by ``share`` (counts rounded), gauges and
    ``_created`` times as they are. The ratios between counters stay the page's own."""
    def scaled(m):
        value = float(m.group(2)) * share
        return f"{m.group(1)} {round(value) if float(m.group(2)).is_integer() else value!r}"
    return _COUNTER_LINE.sub(scaled, text)


def real_page_store(path, page: Path, *, target: str = "http://127.0.0.1:1/metrics", scrapes: int = 40,
                    interval_s: float = 15.0, end: float | None = None, idle: bool = False):
    """A store holding ``scrapes`` scrapes of one engine whose last shows the real ``page``
    (page_at_share, evenly spread; ``idle``: every scrape the page as it is), the last
    ``end`` (default: now)."""
    from acceptance.counts import ScrapeResult
    from acceptance.parse import parse_metrics_page
    from acceptance.store import Store

    text = page.read_text()
    end = time.time() if end is None else end
    store = Store.open(path)
    with store:
        for i in range(scrapes):
            at = end - interval_s * (scrapes - 1 - i)
            snapshots = parse_metrics_page(page_at_share(text, 1.0 if idle else i / (scrapes - 1)), source=str(page))
            store.write_cycle([ScrapeResult(target, at, True, tuple(snapshots))])
    return path


@contextlib.contextmanager
def growing_page_server(page: Path, scrapes: int):
    """A loopback /metrics serving the real ``page`` as its engine showed it while its
    traffic ran: the k-th answer is page_at_share(k / (scrapes − 1)), then the page as it
    is. Yields the URL; the server stops on exit."""
    text = page.read_text()
    with pages_server(lambda k: page_at_share(text, min(k, scrapes - 1) / (scrapes - 1))) as url:
        yield url


@contextlib.contextmanager
def pages_server(page_for, *, authorization: str | None = None, seen: list | None = None):
    """A loopback /metrics whose k-th answer (k = 0, 1, …) is ``page_for(k)``. Yields the URL;
    the server stops on exit. ``authorization``: every request without that header is answered
    401; ``seen`` collects each request's (path, Authorization header)."""
    import http.server
    import threading

    served = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if seen is not None:
                seen.append((self.path, self.headers.get("Authorization")))
            if authorization is not None and self.headers.get("Authorization") != authorization:
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = page_for(served[0]).encode()
            served[0] += 1
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def as_version_8(path) -> None:
    """Take a store file back to schema 8's tables, keeping what it holds as specdec 8 kept it
    (each engine's newest sample as its one-row history, 5-min chunk rows of raw arrays,
    uncompressed rollups): the tests of migrations from older versions start from it and
    drop what came later still."""
    import sqlite3

    from acceptance.store import schema
    from acceptance.store.codecs import narrowest_type, decode_interval_row, decode_spec_rollup, decode_step_rollup

    conn = sqlite3.connect(path)
    widths = {lid: len(json.loads(cols)) for lid, cols in conn.execute("SELECT id, columns FROM layouts")}
    old = {m.group(1): m.group(0) for m in re.finditer(r"CREATE TABLE (\w+) \([^;]*;",
                                                      schema._SCHEMA_V1 + schema._SCHEMA_V3)}
    intervals = conn.execute("SELECT engine_id, seg_id, layout_id, it_layout_id, n, code, flags, first_start, data "
                             "FROM interval_chunks").fetchall()
    spec = conn.execute("SELECT engine_id, level, chunk, seg_id, layout_id, n, code, buckets, ends, counts "
                        "FROM spec_rollups").fetchall()
    step = conn.execute("SELECT engine_id, level, chunk, it_layout_id, n, buckets, itl, it_code, it_delta, mix_code, "
                        "batch_mix FROM step_rollups").fetchall()
    last = conn.execute("SELECT * FROM engine_last").fetchall()
    for table in ("interval_chunks", "spec_rollups", "step_rollups", "engine_last"):
        conn.execute(f"DROP TABLE {table}")
    for table in ("samples", "interval_chunks", "spec_rollups", "step_rollups", "plugin_samples"):
        conn.execute(old[table])

    def narrow(m):  # schema 8 stored counts as schema 9 narrows them
        code, a = narrowest_type(m)
        return code, a.tobytes()

    for eid, seg, lay, it_lay, *cols in intervals:
        a = decode_interval_row(tuple(cols), 1 + widths.get(lay, 0) + widths.get(it_lay, 0))
        slot = (np.ceil(a.times / 300) - 1) * 300
        for ch in np.unique(slot):
            m = slot == ch
            times, cycles, starts = a.times[m], a.cycles[m], a.starts[m]
            contiguous = np.array_equal(starts[1:], times[:-1])
            code, counts = narrow(a.counts[m].astype(np.float64))
            conn.execute("INSERT INTO interval_chunks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                eid, float(ch), seg, lay, it_lay, int(m.sum()), code, times.tobytes(),
                None if np.array_equal(cycles, times) else cycles.tobytes(),
                float(starts[0]) if contiguous and not np.isnan(starts[0]) else None,
                None if contiguous else starts.tobytes(), counts, a.itl[m].tobytes() if a.itl[m].any() else None))
    for eid, level, ch, seg, lay, *cols in spec:
        buckets, ends, counts = decode_spec_rollup(ch, level, tuple(cols))
        conn.execute("INSERT INTO spec_rollups VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
            eid, level, ch, seg, lay, len(buckets), buckets.tobytes(), np.ascontiguousarray(counts[:, 0]).tobytes(),
            np.ascontiguousarray(ends[:, 0]).tobytes(), np.ascontiguousarray(ends[:, 1]).tobytes(),
            np.ascontiguousarray(counts[:, 1:]).tobytes()))
    for eid, level, ch, it_lay, *cols in step:
        buckets, itl, it, mix = decode_step_rollup(ch, level, tuple(cols))
        code, triples = narrow(mix)
        conn.execute("INSERT INTO step_rollups VALUES (?,?,?,?,?,?,?,?,?,?)", (
            eid, level, ch, it_lay, len(buckets), buckets.tobytes(), itl.tobytes(),
            it.tobytes() if it_lay and it is not None else None, code, triples))
    for eid, t, seg, lay, created, value, itl_sum, itl_count, it_lay, it_value, p_lay, p_value in last:
        conn.execute("INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     (eid, t, seg, lay, created, value, None, None, itl_sum, itl_count, it_lay, it_value))
        if p_lay is not None:
            conn.execute("INSERT INTO plugin_samples VALUES (?,?,?,?)", (eid, t, p_lay, p_value))
    conn.execute("ALTER TABLE ingested DROP COLUMN temperature")  # a version-11 column
    conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


_SPEC_COUNTER = re.compile(r"^vllm:spec_decode_")
_ITL = "vllm:inter_token_latency_seconds"


def page_value(text: str, name: str) -> float:
    """The first sample of ``name`` (a full series name, e.g. vllm:inter_token_latency_seconds_sum) on a page."""
    m = re.search(r"^" + re.escape(name) + r"(?:\{[^}]*\})? (\S+)$", text, re.M)
    assert m is not None, name
    return float(m.group(1))


def drafted_step_s(text: str, undrafted_step_s: float) -> float:
    """The drafted step's time t_d that, with undrafted request-steps at ``undrafted_step_s``,
    gives the page's own ITL sum: Σ = t_u·(S − D) + t_d·D (acceptance.step_times)."""
    steps, drafts = page_value(text, f"{_ITL}_count"), page_value(text, "vllm:spec_decode_num_drafts_total")
    return (page_value(text, f"{_ITL}_sum") - undrafted_step_s * (steps - drafts)) / drafts


def pages_with_moving_mix(text: str, scrapes: int, undrafted_step_s: float, drafted_step_s: float, *,
                          swing: float = 0.6, period: int = 10, noise: float = 0.02, seed: int = 0) -> list[str]:
    """A real page's engine as ``scrapes`` cumulative pages whose intervals move the drafted
    share: interval i runs (1 + swing·sin 2πi/period) of the page's drafted request-steps D and
    (1 − swing·sin …) of its undrafted ones U (each normalised to the page's total), its ITL sum
    t_u·U_i + t_d·D_i times a lognormal noise of ``noise``. What is real: the page's totals
    (D, T, A per position, S, its last page's counters but the ITL sum), what is constructed:
    how they split over the intervals, and t_u, t_d (their sum over the page is the page's ITL
    sum when noise is 0). Spec-decode counters follow the drafted steps, the ITL count and its
    buckets the request-steps, every other counter the request-steps' share."""
    rng = np.random.default_rng(seed)
    steps, drafts = page_value(text, f"{_ITL}_count"), page_value(text, "vllm:spec_decode_num_drafts_total")
    undrafted = steps - drafts
    wave = swing * np.sin(2 * np.pi * np.arange(1, scrapes) / period)
    d_share = np.concatenate([[0.0], np.cumsum((1 + wave) / (1 + wave).sum())])
    u_share = np.concatenate([[0.0], np.cumsum((1 - wave) / (1 - wave).sum())])
    interval_sum = (undrafted_step_s * undrafted * np.diff(u_share) + drafted_step_s * drafts * np.diff(d_share))
    itl_sum = np.concatenate([[0.0], np.cumsum(interval_sum * rng.lognormal(0.0, noise, scrapes - 1))])
    pages = []
    for k in range(scrapes):
        count = round(undrafted * u_share[k] + drafts * d_share[k])
        share = count / steps

        def scaled(m, k=k, count=count, share=share):
            name, value = m.group(1), float(m.group(2))
            if name.startswith(f"{_ITL}_sum"):
                new: float = float(itl_sum[k])
            elif name.startswith(f"{_ITL}_count"):
                new = count
            else:
                new = value * (d_share[k] if _SPEC_COUNTER.match(name) else share)
            return f"{name} {round(new) if value.is_integer() and not name.startswith(f'{_ITL}_sum') else new!r}"
        pages.append(_COUNTER_LINE.sub(scaled, text))
    return pages


def pages_store(path, target: str, pages: list[str], *, interval_s: float = 15.0, end: float | None = None):
    """A store holding one engine's ``pages`` scraped every ``interval_s``, the last at ``end`` (default: now)."""
    from acceptance.counts import ScrapeResult
    from acceptance.parse import parse_metrics_page
    from acceptance.store import Store

    end = time.time() if end is None else end
    store = Store.open(path)
    with store:
        for i, text in enumerate(pages):
            at = end - interval_s * (len(pages) - 1 - i)
            store.write_cycle([ScrapeResult(target, at, True, tuple(parse_metrics_page(text, source=target)))])
    return path
