"""specdec's vLLM stat-logger plugin (acceptance/vllm_plugin.py) and its series
(acceptance/plugin_series.py).

Tests marked ``vllm`` use vLLM 0.33's real classes and run only in the vLLM virtual
environment (``make test-vllm``: VLLM_TARGET_DEVICE=cpu, HF_HUB_OFFLINE=1); the core run
deselects them (``-m "not vllm"``). The others need no vLLM: stand-ins with the same
attribute names as vLLM's SchedulerStats / SpecDecodingStats / SchedulerIterationDetails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from acceptance import plugin_series as ps
from acceptance.counts import SpecCounts
from acceptance.vllm_plugin import PluginMetrics, classify_step, infer_step
from model.specialized import runs_specialized

ROOT = Path(__file__).resolve().parents[1]


def spec_stats(gamma: int, drafts: list[tuple[int, int]]):
    """A SpecDecodingStats stand-in filled the way vLLM's observe_draft fills it:
    drafts = [(draft tokens, accepted tokens)] of one step."""
    acc, reached = [0] * gamma, [0] * gamma
    for n_draft, n_acc in drafts:
        for i in range(n_acc):
            acc[i] += 1
        for i in range(n_draft):
            reached[i] += 1
    return NS(num_spec_tokens=gamma, num_drafts=len(drafts), num_draft_tokens=sum(d for d, _ in drafts),
              num_accepted_tokens=sum(a for _, a in drafts), num_accepted_tokens_per_pos=acc,
              num_draft_tokens_per_pos=reached)


def random_steps(rng, gamma: int, n_steps: int, dynamic: bool):
    """Steps of random batch size with random draft lengths (dynamic γ) and acceptances."""
    steps = []
    for _ in range(n_steps):
        batch = int(rng.integers(1, 200))
        drafts = []
        for _ in range(batch):
            n_draft = int(rng.integers(1, gamma + 1)) if dynamic else gamma
            drafts.append((n_draft, int(rng.integers(0, n_draft + 1))))
        steps.append((batch, drafts))
    return steps


def expected_by_batch(gamma, steps) -> dict[str, SpecCounts]:
    out: dict[str, SpecCounts] = {}
    for batch, drafts in steps:
        s = spec_stats(gamma, drafts)
        c = SpecCounts(s.num_drafts, s.num_draft_tokens, s.num_accepted_tokens,
                       tuple(s.num_accepted_tokens_per_pos), tuple(s.num_draft_tokens_per_pos))
        label = ps.batch_bucket(batch).label
        out[label] = out[label] + c if label in out else c
    return out


# -- no vLLM needed ---------------------------------------------------------------------------


def test_importing_the_plugin_module_does_not_import_vllm():
    code = "import sys, acceptance, acceptance.vllm_plugin; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("dynamic", [False, True])
def test_series_equal_the_counts_fed_in(dynamic):
    rng = np.random.default_rng(7 + dynamic)
    gamma = 4
    registry = CollectorRegistry()
    metrics = PluginMetrics("route-a", [0, 1], gamma, None, registry)
    steps = {0: random_steps(rng, gamma, 40, dynamic), 1: random_steps(rng, gamma, 25, dynamic)}
    for engine, engine_steps in steps.items():
        for batch, drafts in engine_steps:
            s = spec_stats(gamma, drafts)
            metrics.record(NS(spec_decoding_stats=s, iteration_details=None, num_running_reqs=batch),
                           NS(num_prompt_tokens=0, inter_token_latencies_iter=[]), engine)
    metrics.flush()  # counts are buffered for up to a second (the engine loop's cost)
    parsed = ps.parse_plugin_page(generate_latest(registry).decode())
    assert set(parsed) == {("route-a", "0"), ("route-a", "1")}
    for engine, engine_steps in steps.items():
        got = parsed[("route-a", str(engine))]
        assert dict(got.by_batch) == expected_by_batch(gamma, engine_steps)
        assert sum(s.steps for s in got.steps) == len(engine_steps)
        total = got.total()
        assert total.draft_tokens == sum(len(d) and sum(x for x, _ in d) for _, d in engine_steps)
    # With dynamic γ, acceptance of the drafts that reached a position is higher than A_k / D.
    surv = parsed[("route-a", "0")].survival_by_batch()
    for bs in surv.values():
        if dynamic:
            assert all(r >= a for r, a in zip(bs.reached_survival, bs.survival))
        else:
            assert bs.reached_survival == pytest.approx(bs.survival)


def test_step_shapes_from_iteration_details():
    g = 3
    # 4 requests × (γ + 1) = 16 tokens: uniform verify, fits the specialized path
    s = classify_step(gamma=g, num_ctx_requests=0, num_ctx_tokens=0, num_generation_requests=4, num_generation_tokens=16)
    assert (s.shape, s.tokens, s.batch_size, s.fits_specialized) == (ps.UNIFORM_VERIFY, 16, 4, True)
    # 20 requests × 4 = 80 tokens > 64: uniform, but stock
    s = classify_step(gamma=g, num_ctx_requests=0, num_ctx_tokens=0, num_generation_requests=20, num_generation_tokens=80)
    assert (s.shape, s.fits_specialized) == (ps.UNIFORM_VERIFY, runs_specialized(20, 4))
    assert not s.fits_specialized
    s = classify_step(gamma=g, num_ctx_requests=0, num_ctx_tokens=0, num_generation_requests=5, num_generation_tokens=5)
    assert (s.shape, s.fits_specialized) == (ps.PURE_DECODE, True)
    s = classify_step(gamma=g, num_ctx_requests=0, num_ctx_tokens=0, num_generation_requests=4, num_generation_tokens=13)
    assert (s.shape, s.fits_specialized) == (ps.PARTIAL_VERIFY, False)
    s = classify_step(gamma=g, num_ctx_requests=1, num_ctx_tokens=7, num_generation_requests=2, num_generation_tokens=8)
    assert (s.shape, s.tokens, s.batch_size, s.fits_specialized) == (ps.WITH_PREFILL, 15, 3, False)
    # Without details: inferred from the drafts.
    s = infer_step(gamma=g, num_drafts=4, num_draft_tokens=12, num_running_reqs=4, num_prompt_tokens=0)
    assert (s.shape, s.tokens) == (ps.UNIFORM_VERIFY, 16)
    s = infer_step(gamma=g, num_drafts=4, num_draft_tokens=9, num_running_reqs=4, num_prompt_tokens=0)
    assert (s.shape, s.tokens) == (ps.PARTIAL_VERIFY, 13)
    s = infer_step(gamma=g, num_drafts=0, num_draft_tokens=0, num_running_reqs=6, num_prompt_tokens=100)
    assert s.shape == ps.WITH_PREFILL


def test_specialized_share_counted_from_steps():
    registry = CollectorRegistry()
    metrics = PluginMetrics("m", [0], 3, None, registry, flush_interval_s=0.0)
    shapes = [(4, 16)] * 6 + [(20, 80)] * 3 + [(4, 13)]  # (requests, generation tokens)
    for n_req, n_tok in shapes:
        details = NS(is_dummy=False, num_ctx_requests=0, num_ctx_tokens=0,
                     num_generation_requests=n_req, num_generation_tokens=n_tok, elapsed_ms=1.0)
        metrics.record(NS(spec_decoding_stats=None, iteration_details=details, num_running_reqs=n_req), None, 0)
    dummy = NS(is_dummy=True, num_ctx_requests=0, num_ctx_tokens=0, num_generation_requests=0, num_generation_tokens=0,
               elapsed_ms=0.0)
    metrics.record(NS(spec_decoding_stats=None, iteration_details=dummy, num_running_reqs=0), None, 0)
    metrics.record(None, NS(num_prompt_tokens=0, inter_token_latencies_iter=[]), 0)  # another API server's message: not a step
    counts = ps.parse_plugin_page(generate_latest(registry).decode())[("m", "0")]
    share = counts.specialized_share()
    assert (share.fitting_steps, share.clean_steps, share.steps) == (6, 9, 10)
    assert share.share == pytest.approx(0.6)
    assert counts.steps_by_shape()[ps.UNIFORM_VERIFY] == 9
    assert {s.tokens for s in counts.steps} == {16, None, 13}  # 80 tokens → gt64


def _decode_details(requests: int, tokens: int, elapsed_ms: float = 0.0):
    return NS(is_dummy=False, num_ctx_requests=0, num_ctx_tokens=0, num_generation_requests=requests,
              num_generation_tokens=tokens, elapsed_ms=elapsed_ms)


def test_step_seconds_by_key_from_both_clocks():
    """Each step's time is added to its (shape, tokens) key by clock: the median of its
    requests' inter-token latencies, and the iteration details' elapsed_ms; a step without a
    clock's reading is counted as a step but adds to neither of that clock's series."""
    registry = CollectorRegistry()
    metrics = PluginMetrics("m", [0], 3, None, registry, flush_interval_s=3600.0)

    def step(details, latencies, running=4):
        metrics.record(NS(spec_decoding_stats=None, iteration_details=details, num_running_reqs=running),
                       NS(num_prompt_tokens=0, inter_token_latencies_iter=latencies), 0)

    # uniform verify at 16 tokens (4 requests × 4): ITL medians 0.030 and 0.034 (one request
    # skipped a step: 0.090, the median ignores it); elapsed 20 ms and 24 ms
    step(_decode_details(4, 16, 20.0), [0.030, 0.030, 0.090, 0.030])
    step(_decode_details(4, 16, 24.0), [0.034, 0.034, 0.034, 0.034])
    # pure decode at 4 tokens: one step with latencies (median of an even count: the middle pair's mean)
    step(_decode_details(4, 4, 10.0), [0.010, 0.012, 0.014, 0.100])
    # pure decode at 4 tokens whose requests all had their first token before: no latency, elapsed only
    step(_decode_details(4, 4, 9.0), [])
    # without details: the ITL clock alone, the shape inferred (no drafts: pure decode at 2 tokens)
    step(None, [0.008, 0.008], running=2)
    step(None, [], running=2)  # no clock at all: a step, no seconds
    metrics.flush()
    counts = ps.parse_plugin_page(generate_latest(registry).decode())[("m", "0")]
    by_key = {(t.timer, t.shape, t.tokens): (t.seconds, t.steps) for t in counts.step_times}
    assert by_key[(ps.ITL_TIMER, ps.UNIFORM_VERIFY, 16)] == pytest.approx((0.064, 2))
    assert by_key[(ps.ELAPSED_TIMER, ps.UNIFORM_VERIFY, 16)] == pytest.approx((0.044, 2))
    assert by_key[(ps.ITL_TIMER, ps.PURE_DECODE, 4)] == pytest.approx((0.013, 1))
    assert by_key[(ps.ELAPSED_TIMER, ps.PURE_DECODE, 4)] == pytest.approx((0.019, 2))
    assert by_key[(ps.ITL_TIMER, ps.PURE_DECODE, 2)] == pytest.approx((0.008, 1))
    assert (ps.ELAPSED_TIMER, ps.PURE_DECODE, 2) not in by_key
    assert len(by_key) == 5
    steps = {(s.shape, s.tokens): s.steps for s in counts.steps}
    assert steps == {(ps.PURE_DECODE, 2): 2, (ps.PURE_DECODE, 4): 2, (ps.UNIFORM_VERIFY, 16): 2}
    mean = {(t.timer, t.shape, t.tokens): t.mean_s for t in counts.step_times}
    assert mean[(ps.ITL_TIMER, ps.UNIFORM_VERIFY, 16)] == pytest.approx(0.032)
    # the page's series, as the plugin writes them
    page = generate_latest(registry).decode()
    assert ('specdec:engine_step_seconds_total{engine="0",fits_specialized="true",model_name="m",shape="uniform_verify",'
            'timer="inter_token_latency",tokens="16"} 0.064') in page
    assert ('specdec:engine_timed_steps_total{engine="0",fits_specialized="true",model_name="m",shape="pure_decode",'
            'timer="iteration_elapsed",tokens="4"} 2.0') in page


def test_step_seconds_survive_the_store_columns():
    """A PluginEngineCounts' step times written as the store's columns read back as totals."""
    registry = CollectorRegistry()
    metrics = PluginMetrics("m", [0], 3, None, registry, flush_interval_s=3600.0)
    for ms in (20.0, 22.0):
        metrics.record(NS(spec_decoding_stats=None, iteration_details=_decode_details(4, 16, ms), num_running_reqs=4),
                       NS(num_prompt_tokens=0, inter_token_latencies_iter=[ms / 1000 + 0.005] * 4), 0)
    metrics.flush()
    counts = ps.parse_plugin_page(generate_latest(registry).decode())[("m", "0")]
    names, values = ps.plugin_columns(counts)
    totals = ps.plugin_totals_from_columns(dict(zip(names, values)), engines=1)
    assert totals.step_times == counts.step_times
    got = {t.timer: (t.seconds, t.steps) for t in totals.step_times}
    assert got[ps.ITL_TIMER] == pytest.approx((0.052, 2.0))
    assert got[ps.ELAPSED_TIMER] == pytest.approx((0.042, 2.0))


def test_counts_are_buffered_until_flush():
    registry = CollectorRegistry()
    metrics = PluginMetrics("m", [0], 2, None, registry, flush_interval_s=3600.0)
    s = spec_stats(2, [(2, 1), (2, 2)])
    metrics.record(NS(spec_decoding_stats=s, iteration_details=None, num_running_reqs=2), NS(num_prompt_tokens=0, inter_token_latencies_iter=[]), 0)
    assert ps.parse_plugin_page(generate_latest(registry).decode()) == {}
    metrics.flush()
    got = ps.parse_plugin_page(generate_latest(registry).decode())[("m", "0")]
    assert got.by_batch["2"] == SpecCounts(2, 4, 3, (2, 1), (2, 2))


@pytest.mark.parametrize("bad,match", [
    ('specdec:spec_decode_drafts_by_batch_total{model_name="m",engine="0",batch="3-5"} 1\n', "batch buckets"),
    ('specdec:spec_decode_drafts_by_batch_total{model_name="m",engine="0",batch="1"} 4\n'
     'specdec:spec_decode_accepted_tokens_per_pos_by_batch_total{model_name="m",engine="0",batch="1",position="0"} 1\n'
     'specdec:spec_decode_accepted_tokens_per_pos_by_batch_total{model_name="m",engine="0",batch="1",position="2"} 1\n'
     'specdec:spec_decode_draft_tokens_per_pos_by_batch_total{model_name="m",engine="0",batch="1",position="0"} 4\n'
     'specdec:spec_decode_draft_tokens_per_pos_by_batch_total{model_name="m",engine="0",batch="1",position="2"} 4\n',
     "not 0..γ-1"),
    ('specdec:spec_decode_accepted_tokens_per_pos_by_batch_total{model_name="m",engine="0",batch="1",position="0"} 1\n'
     'specdec:spec_decode_draft_tokens_per_pos_by_batch_total{model_name="m",engine="0",batch="1",position="0"} 1\n',
     "no drafts"),
    ('specdec:engine_steps_total{model_name="m",engine="0",shape="odd",tokens="4",fits_specialized="true"} 1\n', "shape"),
    ('specdec:engine_steps_total{model_name="m",engine="0",shape="pure_decode",tokens="4",fits_specialized="true"} -1\n', "≥ 0"),
    ('specdec:engine_step_seconds_total{model_name="m",engine="0",shape="pure_decode",tokens="4",fits_specialized="true",'
     'timer="wallclock"} 1\n', "timer"),
    ('specdec:engine_step_seconds_total{model_name="m",engine="0",shape="pure_decode",tokens="4",fits_specialized="true",'
     'timer="inter_token_latency"} 1\n', "not both"),
])
def test_bad_series_are_one_line_errors(bad, match):
    with pytest.raises(ps.PluginSeriesError, match=match) as e:
        ps.parse_plugin_page(bad, source="http://h/metrics")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("http://h/metrics")


_MP_WRITER = textwrap.dedent("""
    import sys
    from types import SimpleNamespace as NS
    from acceptance.vllm_plugin import PluginMetrics
    seed, engine = int(sys.argv[1]), int(sys.argv[2])
    m = PluginMetrics("m", [0, 1], 2, None)
    for i in range(50):
        b = 1 + (seed * 7 + i) % 40
        spec = NS(num_drafts=b, num_draft_tokens=2 * b, num_accepted_tokens=b,
                  num_accepted_tokens_per_pos=[b - (i % 2), i % 2], num_draft_tokens_per_pos=[b, b])
        m.record(NS(spec_decoding_stats=spec, iteration_details=None, num_running_reqs=b),
                 NS(num_prompt_tokens=0, inter_token_latencies_iter=[]), engine)
    m.flush()
""")


def test_multiprocess_mode_sums_api_servers(tmp_path):
    """PROMETHEUS_MULTIPROC_DIR with two API-server processes: the multiprocess collector's
    page holds the sum of what both recorded."""
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    for seed, engine in [(1, 0), (2, 0), (3, 1)]:
        subprocess.run([sys.executable, "-c", _MP_WRITER, str(seed), str(engine)], env=env, check=True, cwd=ROOT)
    reader = ("from prometheus_client import CollectorRegistry, generate_latest, multiprocess\n"
              "r = CollectorRegistry(); multiprocess.MultiProcessCollector(r)\n"
              "import sys; sys.stdout.write(generate_latest(r).decode())")
    page = subprocess.run([sys.executable, "-c", reader], env=env, capture_output=True, text=True, check=True).stdout
    parsed = ps.parse_plugin_page(page)
    expected_drafts = {0: 0, 1: 0}
    for seed, engine in [(1, 0), (2, 0), (3, 1)]:
        expected_drafts[engine] += sum(1 + (seed * 7 + i) % 40 for i in range(50))
    for engine, drafts in expected_drafts.items():
        counts = parsed[("m", str(engine))]
        assert counts.total().drafts == drafts
        assert sum(s.steps for s in counts.steps) == 50 * (2 if engine == 0 else 1)


# -- vLLM 0.33's real classes ---------------------------------------------------------------


@pytest.fixture
def vllm_config(tmp_path_factory):
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import LlamaConfig
    from vllm.engine.arg_utils import EngineArgs

    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, vocab_size=1024, max_position_embeddings=1024).save_pretrained(folder)
    args = EngineArgs(model=str(folder), skip_tokenizer_init=True, load_format="dummy", enforce_eager=True,
                      served_model_name="tiny", max_model_len=512,
                      speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                          "prompt_lookup_max": 3, "prompt_lookup_min": 1})
    return args.create_engine_config()


@pytest.fixture
def clean_registry():
    yield prometheus_client.REGISTRY
    from vllm.v1.metrics.prometheus import unregister_vllm_metrics

    unregister_vllm_metrics()
    for collector, names in list(prometheus_client.REGISTRY._collector_to_names.items()):
        if any(n.startswith("specdec:") for n in names):
            prometheus_client.REGISTRY.unregister(collector)


@pytest.mark.vllm
def test_plugin_loads_through_the_entry_point():
    pytest.importorskip("vllm")
    from importlib.metadata import entry_points

    from vllm.v1.metrics.loggers import StatLoggerBase, load_stat_logger_plugin_factories

    names = {ep.name: ep.value for ep in entry_points(group="vllm.stat_logger_plugins")}
    assert names.get("specdec") == "acceptance.vllm_plugin:SpecdecStatLogger"
    factories = load_stat_logger_plugin_factories()
    ours = [f for f in factories if f.__module__ == "acceptance.vllm_plugin"]
    assert len(ours) == 1
    assert issubclass(ours[0], StatLoggerBase)


@pytest.mark.vllm
def test_series_fed_by_real_scheduler_stats_equal_the_counts(vllm_config, clean_registry):
    from vllm.v1.metrics.loggers import StatLoggerManager, load_stat_logger_plugin_factories
    from vllm.v1.metrics.stats import IterationStats, SchedulerIterationDetails, SchedulerStats
    from vllm.v1.spec_decode.metrics import SpecDecodingStats

    gamma = vllm_config.speculative_config.num_speculative_tokens
    # vLLM's own manager, with the plugin as vLLM's API server loads it, beside vLLM's Prometheus logger.
    manager = StatLoggerManager(vllm_config, engine_idxs=[0, 1],
                                custom_stat_loggers=load_stat_logger_plugin_factories(),
                                enable_default_loggers=False)
    rng = np.random.default_rng(3)
    expected = {0: [], 1: []}
    n_uniform_fit = 0
    for i in range(60):
        engine = i % 2
        batch, drafts = random_steps(rng, gamma, 1, dynamic=True)[0]
        stats = SpecDecodingStats.new(gamma)
        for n_draft, n_acc in drafts:
            stats.observe_draft(num_draft_tokens=n_draft, num_accepted_tokens=n_acc)
        details = None
        if i % 3 == 0:  # some steps carry iteration details (--enable-logging-iteration-details)
            uniform = [(gamma, int(rng.integers(0, gamma + 1))) for _ in range(4)]
            stats = SpecDecodingStats.new(gamma)
            for n_draft, n_acc in uniform:
                stats.observe_draft(num_draft_tokens=n_draft, num_accepted_tokens=n_acc)
            batch, drafts = 4, uniform
            details = SchedulerIterationDetails(iteration_index=i, num_ctx_requests=0, num_ctx_tokens=0,
                                                num_generation_requests=4,
                                                num_generation_tokens=4 * (gamma + 1), elapsed_ms=1.0)
            n_uniform_fit += engine == 0
        expected[engine].append((batch, drafts))
        iteration = IterationStats()  # the attribute vLLM's output processor appends each request's latency to
        iteration.inter_token_latencies_iter.extend([0.01 * (1 + engine)] * batch)
        manager.record(SchedulerStats(num_running_reqs=batch, spec_decoding_stats=stats, iteration_details=details),
                       iteration, engine_idx=engine)
    manager.log()  # vLLM's periodic log() flushes the plugin's buffered counts
    page = generate_latest(clean_registry).decode()
    parsed = ps.parse_plugin_page(page)
    from acceptance.parse import parse_metrics_page

    vllm_side = {e.key: e.counts for e in parse_metrics_page(page, source="vllm page")}
    for engine in (0, 1):
        got = parsed[("tiny", str(engine))]
        assert dict(got.by_batch) == expected_by_batch(gamma, expected[engine])
        # Summed over batch sizes, the plugin agrees with vLLM's own counters.
        theirs = vllm_side[("tiny", str(engine))]
        total = got.total()
        assert (total.drafts, total.draft_tokens, total.accepted_tokens, total.accepted_per_position) == (
            theirs.drafts, theirs.draft_tokens, theirs.accepted_tokens, theirs.accepted_per_position)
    steps0 = parsed[("tiny", "0")]
    assert sum(s.steps for s in steps0.steps) == 30
    assert sum(s.steps for s in steps0.steps if s.shape == ps.UNIFORM_VERIFY and s.tokens == 16) >= n_uniform_fit
    # Step times: every step carried its requests' latencies; the steps with details their elapsed_ms too.
    for engine in (0, 1):
        times = parsed[("tiny", str(engine))].step_times
        itl = [t for t in times if t.timer == ps.ITL_TIMER]
        assert sum(t.steps for t in itl) == 30
        assert sum(t.seconds for t in itl) == pytest.approx(30 * 0.01 * (1 + engine))
        elapsed = [t for t in times if t.timer == ps.ELAPSED_TIMER]
        assert {(t.shape, t.tokens) for t in elapsed} <= {(ps.UNIFORM_VERIFY, 4 * (gamma + 1))}
        assert sum(t.seconds for t in elapsed) == pytest.approx(0.001 * sum(t.steps for t in elapsed))
    assert sum(t.steps for t in parsed[("tiny", "0")].step_times if t.timer == ps.ELAPSED_TIMER) == n_uniform_fit
