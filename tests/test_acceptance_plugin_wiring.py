"""specdec's vLLM plugin series through the whole path: page → snapshot → store → window →
cost model: per-batch survival and the counted clean share."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from acceptance import plugin_series as ps
from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts, StepShape
from acceptance.parse import MetricsPageError, parse_metrics_page
from acceptance.store import SCHEMA_VERSION, Store
from acceptance.vllm_plugin import PluginMetrics
from support import as_version_8
from acceptance.windows import StepShapeWindow, Window, route_window
from model.deployment import INLINE_DEFAULTS, Deployment
from acceptance.route_estimate import MIN_BUCKET_DRAFTS
from specdec.pipeline import TuningOptions, tune_intervals
from specdec.report import tuning_to_dict

GOLDEN = Path(__file__).parent / "data" / "vllm-golden" / "exposition_gamma3_full_metrics_page.txt"
GAMMA = 3


def plugin_page(model="kimi-k3", engines=(0,), gamma=GAMMA, batches=(1, 2, 5, 40, 300)) -> str:
    registry = CollectorRegistry()
    metrics = PluginMetrics(model, list(engines), gamma, None, registry)
    for engine in engines:
        for b in batches:
            accepted = [max(b - 2 * k, 0) for k in range(gamma)]
            spec = NS(num_drafts=b, num_draft_tokens=gamma * b, num_accepted_tokens=sum(accepted),
                      num_accepted_tokens_per_pos=accepted, num_draft_tokens_per_pos=[b] * gamma)
            metrics.record(NS(spec_decoding_stats=spec, iteration_details=None, num_running_reqs=b),
                           NS(num_prompt_tokens=0, inter_token_latencies_iter=[]), engine)
    metrics.flush()
    return generate_latest(registry).decode()


# -- parsing ------------------------------------------------------------------------------


def test_page_with_plugin_series_attaches_them_to_the_snapshot():
    page = GOLDEN.read_text()
    plugin = plugin_page()
    plain = parse_metrics_page(page)
    both = parse_metrics_page(page + plugin, source="http://h/metrics")
    expected = ps.parse_plugin_page(plugin)
    assert [s.key for s in both] == [s.key for s in plain]
    for with_plugin, without in zip(both, plain):
        assert with_plugin.counts == without.counts
        assert with_plugin.step_shape == without.step_shape
        assert with_plugin.plugin == expected.get(with_plugin.key)
    assert both[0].plugin is not None
    assert both[1].plugin is None  # only engine 0 runs it
    assert set(both[0].plugin.by_batch) == {"1", "2", "5-8", "33-64", "257-512"}
    # The plugin's lines first on the page parse the same.
    first = parse_metrics_page(plugin + page)
    assert [s.plugin for s in first] == [s.plugin for s in both]


def test_page_without_plugin_series_has_no_plugin():
    assert all(s.plugin is None for s in parse_metrics_page(GOLDEN.read_text()))


@pytest.mark.parametrize("line", [
    'specdec:spec_decode_drafts_by_batch_total{model_name="kimi-k3",engine="0",batch="3-5"} 1',
    'specdec:engine_steps_total{model_name="kimi-k3" engine="0"} 1',
])
def test_bad_plugin_series_on_a_page_are_one_line_errors(line):
    with pytest.raises(MetricsPageError) as e:
        parse_metrics_page(GOLDEN.read_text() + line + "\n", source="http://h/metrics")
    assert str(e.value).startswith("http://h/metrics")
    assert "\n" not in str(e.value)


# -- store and windows --------------------------------------------------------------------


class Engine:
    """Cumulative spec and plugin counters of one engine fed interval by interval."""

    def __init__(self, label: str, gamma: int = GAMMA):
        self.label, self.gamma, self.created = label, gamma, 1.0
        self.by_batch: dict[str, np.ndarray] = {}  # label → [D, A_1..A_γ, R_1..R_γ]
        self.steps: dict[tuple, float] = {}
        self.fed_by_batch: dict[str, np.ndarray] = {}  # what a window after the baseline must sum to
        self.fed_steps: dict[tuple, float] = {}

    def step(self, rng, buckets, counted: bool, restart: bool = False, now: float = 0.0):
        if restart:  # a new life's _created: when it started, after the old one's last scrape
            self.by_batch, self.steps, self.created = {}, {}, now
        for label in buckets:
            d = float(rng.integers(5, 30))
            acc = np.sort(rng.integers(0, int(d) + 1, self.gamma))[::-1].astype(float)
            row = np.concatenate([[d], acc, np.full(self.gamma, d)])
            self.by_batch[label] = self.by_batch.get(label, 0) + row
            if counted:
                self.fed_by_batch[label] = self.fed_by_batch.get(label, 0) + row
        key = (ps.UNIFORM_VERIFY, 16, True)
        n = float(rng.integers(1, 9))
        self.steps[key] = self.steps.get(key, 0.0) + n
        if counted:
            self.fed_steps[key] = self.fed_steps.get(key, 0.0) + n

    def snapshot(self) -> EngineSnapshot:
        g = self.gamma
        by_batch = {lab: SpecCounts(v[0], float(v[1 + g:].sum()), float(v[1:1 + g].sum()), tuple(v[1:1 + g]),
                                    tuple(v[1 + g:])) for lab, v in self.by_batch.items()}
        plugin = ps.PluginEngineCounts("m", self.label, by_batch,
                                       tuple(ps.StepCount(*k, v) for k, v in sorted(self.steps.items())))
        return EngineSnapshot("m", self.label, plugin.total(), self.created, StepShape(num_requests_running=8.0),
                              plugin)


def feed(store: Store, engines: list[Engine], times, rng, restart_at=None, new_bucket_at=None):
    for i, t in enumerate(times):
        for e in engines:
            buckets = ["1", "33-64"] + (["513+"] if new_bucket_at is not None and i >= new_bucket_at else [])
            e.step(rng, buckets, counted=i > 0, restart=(i == restart_at and e.label == "0"), now=float(t) - 1.0)
        store.write_cycle([ScrapeResult("x", float(t), True, tuple(e.snapshot() for e in engines))])


def expected_totals(engines: list[Engine]) -> tuple[dict, float]:
    by_batch: dict[str, np.ndarray] = {}
    for e in engines:
        for lab, v in e.fed_by_batch.items():
            by_batch[lab] = by_batch.get(lab, 0) + v
    return by_batch, sum(sum(e.fed_steps.values()) for e in engines)


def assert_window_equals(plugin: ps.PluginTotals, engines: list[Engine]):
    by_batch, steps = expected_totals(engines)
    assert set(plugin.by_batch) == set(by_batch)
    for lab, v in by_batch.items():
        c = plugin.by_batch[lab]
        assert c.drafts == v[0]
        assert c.accepted_per_position == pytest.approx(tuple(v[1:1 + GAMMA]))
        assert c.draft_tokens_per_position == pytest.approx(tuple(v[1 + GAMMA:]))
    assert sum(s.steps for s in plugin.steps) == steps
    assert plugin.engines == len(engines)


@pytest.mark.parametrize("interval,cycles", [(15.0, 40), (60.0, 420)])  # raw intervals; 7 h: rollups too
def test_window_sums_the_plugin_counts_fed_in_across_a_restart(tmp_path, interval, cycles):
    rng = np.random.default_rng(3)
    engines = [Engine("0"), Engine("1")]
    times = 1_000_000.0 + interval * np.arange(cycles)
    path = tmp_path / "s.db"
    with Store.open(path) as store:
        feed(store, engines, times[: cycles // 2], rng, restart_at=cycles // 3, new_bucket_at=cycles // 4)
    with Store.open(path) as store:  # the plugin baseline is reloaded
        feed_rest = times[cycles // 2:]
        for t in feed_rest:
            for e in engines:
                e.step(rng, ["1", "33-64", "513+"], counted=True)
            store.write_cycle([ScrapeResult("x", float(t), True, tuple(e.snapshot() for e in engines))])
        window = route_window(store, ["x"], times[0], times[-1])
        assert len(window.segments) == 1
        assert_window_equals(window.plugin, engines)
        # The spec counts are the plugin's own sums here: the two agree.
        total = window.segments[0].total
        assert total.drafts == sum(c.drafts for c in window.plugin.by_batch.values())
        # Split windows add up to the whole.
        mid = float(times[cycles // 2 + 3])
        a = route_window(store, ["x"], times[0], mid).plugin
        b = route_window(store, ["x"], mid, times[-1]).plugin
        for lab, c in window.plugin.by_batch.items():
            parts = [p.by_batch[lab].drafts for p in (a, b) if lab in p.by_batch]
            assert sum(parts) == c.drafts


def test_step_seconds_on_pages_reach_the_window_block_by_block(tmp_path):
    """The plugin's step seconds, exported on its /metrics page scrape after scrape, read back
    through the store: the window's segment holds, per (shape, tokens), the seconds and timed
    steps fed after the first scrape, and the same block by block."""
    registry = CollectorRegistry()
    metrics = PluginMetrics("m", [0], GAMMA, None, registry, flush_interval_s=3600.0)
    fed: dict[tuple, list[float]] = {}
    blocks = []
    with Store.open(tmp_path / "s.db") as store:
        for i in range(8):
            block: dict[tuple, list[float]] = {}
            for j in range(5):
                b = 1 + (i + j) % 4
                # a pure decode step at b tokens, then a uniform verify at b·(γ+1): every request drafts γ
                metrics.record(NS(spec_decoding_stats=None, iteration_details=None, num_running_reqs=b),
                               NS(num_prompt_tokens=0, inter_token_latencies_iter=[0.010 + 0.001 * b] * b), 0)
                spec = NS(num_drafts=b, num_draft_tokens=GAMMA * b, num_accepted_tokens=b,
                          num_accepted_tokens_per_pos=[b, 0, 0], num_draft_tokens_per_pos=[b] * GAMMA)
                metrics.record(NS(spec_decoding_stats=spec, iteration_details=None, num_running_reqs=b),
                               NS(num_prompt_tokens=0, inter_token_latencies_iter=[0.020 + 0.002 * b] * b), 0)
                for key, t in (((ps.PURE_DECODE, b), 0.010 + 0.001 * b),
                               ((ps.UNIFORM_VERIFY, b * (GAMMA + 1)), 0.020 + 0.002 * b)):
                    row = block.setdefault(key, [0.0, 0.0])
                    row[0] += t
                    row[1] += 1
            metrics.flush()
            plugin = ps.parse_plugin_page(generate_latest(registry).decode())[("m", "0")]
            snap = EngineSnapshot("m", "0", plugin.total(), 1.0, StepShape(num_requests_running=3.0), plugin)
            store.write_cycle([ScrapeResult("x", 1000.0 + 15 * i, True, (snap,))])
            if i > 0:  # the first scrape is the baseline
                blocks.append(block)
                for key, (sec, n) in block.items():
                    row = fed.setdefault(key, [0.0, 0.0])
                    row[0] += sec
                    row[1] += n
        window = route_window(store, ["x"], 0.0, 2000.0)
    [segment] = window.segments
    got = {(t.shape, t.tokens): [t.seconds, t.steps] for t in segment.plugin.step_times if t.timer == ps.ITL_TIMER}
    assert got.keys() == fed.keys()
    for key, row in fed.items():
        assert got[key] == pytest.approx(row)
    steps = {(s.shape, s.tokens): s.steps for s in segment.plugin.steps}
    assert {k: v[1] for k, v in fed.items()} == steps
    assert all(t.timer == ps.ITL_TIMER for t in segment.plugin.step_times)  # no details: no elapsed clock
    # block by block: one row per scrape interval, each the interval's own seconds and steps
    table = segment.plugin_step_blocks
    assert table.table.shape == (len(blocks), 2 * len(fed))
    for col, name in enumerate(table.columns):
        kind, _, shape, tokens, _ = ps.parse_step_time_column(name)
        expected = [blk.get((shape, tokens), [0.0, 0.0])[kind == "timed"] for blk in blocks]
        assert table.table[:, col] == pytest.approx(expected)


def test_window_without_plugin_series_has_none(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        for i in range(5):
            c = SpecCounts(10.0 * i, 30.0 * i, 12.0 * i, (6.0 * i, 4.0 * i, 2.0 * i))
            store.write_cycle([ScrapeResult("x", 100.0 + 15 * i, True, (EngineSnapshot("m", "0", c, 1.0),))])
        window = route_window(store, ["x"], 0.0, 1000.0)
        assert window.segments[0].total.drafts == 40
        assert window.plugin is None


def test_schema_2_store_migrates_to_the_current_schema_keeping_its_data(tmp_path):
    path = tmp_path / "s.db"
    with Store.open(path) as store:
        for i in range(4):
            c = SpecCounts(10.0 * i, 30.0 * i, 12.0 * i, (6.0 * i, 4.0 * i, 2.0 * i))
            store.write_cycle([ScrapeResult("x", 100.0 + 15 * i, True, (EngineSnapshot("m", "0", c, 1.0),))])
    as_version_8(path)  # schema 8's tables, then what came before them
    conn = sqlite3.connect(path)  # make it a version-2 file: no plugin tables
    conn.execute("DROP TABLE plugin_samples")
    conn.execute("DROP TABLE plugin_chunks")
    conn.execute("ALTER TABLE ingested DROP COLUMN mean_itl_s")  # a version-4 column
    conn.execute("ALTER TABLE ingested DROP COLUMN decode_tokens")  # version-5 columns
    conn.execute("ALTER TABLE ingested DROP COLUMN steps")
    for column in ("running", "interval_s", "generation_tokens", "stream"):  # version-6 columns
        conn.execute(f"ALTER TABLE ingested DROP COLUMN {column}")
    conn.execute("ALTER TABLE ingested DROP COLUMN prompt_tokens")  # a version-7 column
    conn.execute("DROP TABLE engine_totals")  # a version-8 table
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    rng = np.random.default_rng(1)
    with Store.open(path) as store:
        assert store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        e = Engine("0")
        e.created = 199.0  # a new engine process: its counters restart with a new _created
        e.step(rng, ["1"], counted=True)
        store.write_cycle([ScrapeResult("x", 200.0, True, (e.snapshot(),))])
        window = route_window(store, ["x"], 0.0, 1000.0)
        assert sum(s.total.drafts for s in window.segments) == 30 + e.by_batch["1"][0]
        assert window.plugin is not None
        assert window.plugin.by_batch["1"].drafts == e.by_batch["1"][0]


# -- cost model and pipeline --------------------------------------------------------------


def plugin_totals(curves: dict[str, list[float]], drafts: float, steps=()) -> ps.PluginTotals:
    by_batch = {}
    for label, a in curves.items():
        acc = [drafts * x for x in a]
        by_batch[label] = SpecCounts(drafts, drafts * len(a), sum(acc), tuple(acc), (drafts,) * len(a))
    return ps.PluginTotals(by_batch, tuple(steps), 1)


def window_with(plugin, batch_mix, iteration_tokens=None):
    """An acceptance.windows.Window with the given plugin totals, batch mix and histogram."""
    window = NS(step_shape=StepShapeWindow(batch_time_shares=batch_mix, iteration_tokens=iteration_tokens or {},
                                           itl_mean_s=None, samples=1000),
                plugin=plugin, newest_segment=None, current_segments=[], segments=[], events=[], target_status=[],
                start=0.0, end=3600.0, not_speculating=[], step_sequences=None, totals=None, request_itl_s=None,
                request_decode_tokens=None, request_prompt_tokens=None, request_temperatures=None)
    assert isinstance(window, Window)
    return window


def pooled_intervals(curve, n=40, drafts=500.0):
    from acceptance.counts import IntervalCounts

    acc = [drafts * x for x in curve]
    rows = np.tile([drafts, drafts * len(curve), sum(acc), *acc], (n, 1))
    t = np.arange(n, dtype=float) * 15
    return IntervalCounts(len(curve), t, t + 15, rows)


def test_per_batch_survival_lowers_gamma_when_acceptance_collapses_at_large_batch():
    # Pooled (what vLLM's counters say over the window): high. The plugin: high at B ≤ 4,
    # collapsed at B ≥ 33; the batch mix is mostly at 40.
    high, low = [0.9, 0.8, 0.7], [0.3, 0.1, 0.03]
    deployment = Deployment.from_mapping({"method": "eagle", "draft_cost": 0.1, "cost_profile": "flat"}, where="test",
                                         base=INLINE_DEFAULTS)
    plugin = plugin_totals({"1": high, "33-64": low}, drafts=float(MIN_BUCKET_DRAFTS))
    mix = {1: 0.1, 40: 0.9}
    options = TuningOptions(n_resamples=200)
    with_plugin = tune_intervals("r", pooled_intervals(high), deployment, window=window_with(plugin, mix),
                                 options=options)
    without = tune_intervals("r", pooled_intervals(high), deployment, window=window_with(None, mix), options=options)
    assert with_plugin.recommendation.recommended_gamma < without.recommendation.recommended_gamma
    assert with_plugin.survival_by_batch == {1: pytest.approx(high), 40: pytest.approx(low)}
    doc = tuning_to_dict(with_plugin)["observed"]
    assert doc["survival_by_batch"]["33-64"]["survival"] == pytest.approx(low)
    assert doc["survival_by_batch"]["33-64"]["used_in_model"] is True
    assert doc["survival_reached"] == pytest.approx([(0.9 + 0.3) / 2, (0.8 + 0.1) / 2, (0.7 + 0.03) / 2])
    assert tuning_to_dict(without)["observed"]["survival_by_batch"] is None
    # Too few drafts in the buckets: the pooled curve for every batch size.
    thin = plugin_totals({"1": high, "33-64": low}, drafts=float(MIN_BUCKET_DRAFTS - 1))
    fallback = tune_intervals("r", pooled_intervals(high), deployment, window=window_with(thin, mix), options=options)
    assert fallback.survival_by_batch is None
    assert fallback.recommendation.recommended_gamma == without.recommendation.recommended_gamma


def test_uniform_per_batch_curves_change_nothing():
    from model.recommend import RouteInputs, recommend

    curve = np.array([0.8, 0.6, 0.4])
    deployment = Deployment.from_mapping({"method": "eagle", "draft_cost": 0.1, "cost_profile": "flat"}, where="test",
                                         base=INLINE_DEFAULTS)
    mix = {1: 0.3, 40: 0.7}
    base = recommend(RouteInputs(curve, batch_mix=mix), deployment)
    same = recommend(RouteInputs(curve, batch_mix=mix, survival_by_batch={1: curve, 40: curve}), deployment)
    assert [c.speedup for c in same.candidates] == pytest.approx([c.speedup for c in base.candidates])


def test_specialized_clean_share_comes_from_the_plugin_steps():
    deployment = Deployment.from_mapping({"decode_backend": "latency_specialized"}, where="test",
                                         base=INLINE_DEFAULTS)
    steps = (ps.StepCount(ps.UNIFORM_VERIFY, 16, True, 600.0), ps.StepCount(ps.WITH_PREFILL, None, False, 400.0))
    plugin = plugin_totals({"3-4": [0.8, 0.6, 0.4]}, drafts=10.0, steps=steps)
    histogram = {64.0: 1000.0, float("inf"): 1000.0}  # the histogram's bound would say 100%
    t = tune_intervals("r", pooled_intervals([0.8, 0.6, 0.4]), deployment,
                       window=window_with(plugin, {4: 1.0}, histogram), options=TuningOptions(n_resamples=100))
    elig = t.recommendation.specialized_eligibility
    assert elig.share == pytest.approx(0.6)
    assert elig.source.startswith("specdec plugin: 600 of 1000 steps clean")
    assert tuning_to_dict(t)["specialized_eligibility"]["source"] == elig.source
    # Without the plugin: the histogram's upper bound, as before.
    t0 = tune_intervals("r", pooled_intervals([0.8, 0.6, 0.4]), deployment,
                        window=window_with(None, {4: 1.0}, histogram), options=TuningOptions(n_resamples=100))
    assert t0.recommendation.specialized_eligibility.source.startswith("vllm:iteration_tokens_total")


def test_plugin_totals_of_another_gamma_are_not_used():
    deployment = Deployment.from_mapping({"method": "eagle", "draft_cost": 0.1, "cost_profile": "flat"}, where="test",
                                         base=INLINE_DEFAULTS)
    other = plugin_totals({"33-64": [0.3, 0.1]}, drafts=float(MIN_BUCKET_DRAFTS))  # γ = 2
    t = tune_intervals("r", pooled_intervals([0.9, 0.8, 0.7]), deployment, window=window_with(other, {40: 1.0}),
                       options=TuningOptions(n_resamples=100))
    assert t.plugin is None
    assert t.survival_by_batch is None


def test_plugin_totals_round_trip_through_columns():
    counts = ps.parse_plugin_page(plugin_page(engines=(0,)))[("kimi-k3", "0")]
    columns, values = ps.plugin_columns(counts)
    back = ps.plugin_totals_from_columns(dict(zip(columns, values)))
    assert dict(back.by_batch) == dict(counts.by_batch)
    assert back.steps == counts.steps
    assert ps.plugin_columns_gamma(columns) == GAMMA
    assert dataclasses.asdict(back.specialized_share()) == dataclasses.asdict(counts.specialized_share())


def test_plugin_imports_nothing_of_model_dashboard_or_the_cli():
    """The plugin runs inside the engine's process, installed there with --no-deps: it may
    import neither model/, dashboard/, the CLI nor what only they need (scipy, Streamlit)."""
    import subprocess
    import sys

    probe = ("import sys, acceptance.vllm_plugin as p; p.PluginMetrics; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & "
             "{'model', 'dashboard', 'specdec', 'scipy', 'streamlit', 'plotly', 'vllm'}))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
