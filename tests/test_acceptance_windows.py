"""Window sums are exact through restarts, γ changes, spec off/on and failed scrapes.

The property test drives a model of a small fleet: engines accumulate drafts, restart
(with or without a new ``_created``; to zero or to a small value), change γ (with a restart,
or — impossible in vLLM but stored exactly — without), switch speculation off and on, and
are scraped (some scrapes fail). The model's truth is what a scraper can observe: increments
between two successful scrapes, attributed to the later one; increments made after the last
scrape and before a restart are gone with the restart. Every window's Σ deltas per γ must
equal the model's, with and without rollups.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acceptance import windows
from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts, StepShape
from acceptance.store import Store
from acceptance.windows import StepShapeWindow, route_window

# (target, engine label, exposes _created)
FLEET = [("http://a/metrics", "0", True), ("http://a/metrics", "1", False),
         ("http://b/metrics", "0", False), ("http://c/metrics", "0", True)]
TARGETS = sorted({t for t, _, _ in FLEET})


class ModelEngine:
    def __init__(self, has_created: bool, gamma: int):
        self.has_created = has_created
        self.gamma = gamma
        self.spec_on = True
        self.created = 1.0
        self.vec = np.zeros(3 + gamma)
        self.pending = np.zeros(3 + gamma)  # increments not yet seen by a successful scrape
        self.seen = False                  # a successful scrape has laid a baseline
        self.last_scraped = None           # vector at the last successful scrape
        self.restarted_unseen = False
        self.created_changed_unseen = False  # a restart since the last scrape changed _created
        self.straddling = False            # γ changed without restart since the last scrape
        self.lost_before = 0.0             # drafts since the last scrape, before that change

    def increment(self, accepted_lengths: list[int]):
        if not self.spec_on:
            return
        js = [min(j, self.gamma) for j in accepted_lengths]
        if self.restarted_unseen and not self.created_changed_unseen and self.last_scraped is not None:
            # without a _created change a restart is only visible as a drop: keep D below its old value
            room = int(self.last_scraped[0]) - 1 - int(self.vec[0])
            js = js[:max(room, 0)]
        inc = np.zeros(3 + self.gamma)
        inc[0] = len(js)
        inc[1] = self.gamma * len(js)
        inc[2] = sum(js)
        for k in range(1, self.gamma + 1):
            inc[2 + k] = sum(1 for j in js if j >= k)
        self.vec += inc
        self.pending += inc

    def restart(self, new_gamma: int | None, created_changes: bool, spec_on: bool = True, now: float = 0.0):
        self.gamma = new_gamma or self.gamma
        self.spec_on = spec_on
        self.vec = np.zeros(3 + self.gamma)
        self.pending = np.zeros(3 + self.gamma)  # what happened since the last scrape is lost
        self.straddling = False
        self.restarted_unseen = True
        if created_changes and self.has_created:
            # a new life's _created is when it started: after the old one's last scrape
            self.created = max(self.created + 0.001, now + 1.0)
            self.created_changed_unseen = True

    def change_gamma_without_restart(self, new_gamma: int):
        # A new γ is a new engine (vLLM fixes γ at start): a restart whose counters may pass
        # the old ones before the next scrape, without a _created change to tell.
        if not self.spec_on or new_gamma == self.gamma:
            return
        self.restart(new_gamma, created_changes=False)

    def snapshot(self, model: str, label: str) -> EngineSnapshot:
        counts = None
        if self.spec_on:
            counts = SpecCounts(*self.vec[:3].tolist(), tuple(self.vec[3:].tolist()))
        return EngineSnapshot(model, label, counts, self.created if self.has_created else None,
                              StepShape(num_requests_running=float(len(label)) + 1.0))

    def observed(self, t, truth, lost):
        """A successful scrape at t: book what it reveals."""
        if self.spec_on:
            if self.seen and not self.straddling:
                truth.append((t, self.gamma, self.pending.copy()))
            elif self.seen and self.straddling:
                lost.append((t, self.lost_before + self.pending[0]))
            self.last_scraped = self.vec.copy()
        else:
            self.last_scraped = None
        self.seen = True
        self.pending = np.zeros(3 + self.gamma)
        self.restarted_unseen = False
        self.created_changed_unseen = False
        self.straddling = False


action = st.one_of(
    st.tuples(st.just("inc"), st.integers(0, 3), st.lists(st.integers(0, 5), max_size=12)),
    st.tuples(st.just("scrape"), st.integers(1, 1500), st.lists(st.booleans(), min_size=3, max_size=3)),
    st.tuples(st.just("restart"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("gamma"), st.integers(0, 3), st.integers(1, 6), st.booleans()),
    st.tuples(st.just("off"), st.integers(0, 3)),
    st.tuples(st.just("on"), st.integers(0, 3), st.integers(1, 6)),
)


def run_model(store: Store, actions) -> tuple[list, list, float]:
    engines = [ModelEngine(has_created, 3) for _, _, has_created in FLEET]
    truth: dict[str, list] = defaultdict(list)
    lost: dict[str, list] = defaultdict(list)
    t = 1000.0
    for a in actions + [("scrape", 15, [False, False, False])]:
        kind = a[0]
        if kind == "inc":
            engines[a[1]].increment(a[2])
        elif kind == "restart":
            # a restarted vLLM's counters carry a new _created where they expose one (a drop with the
            # same _created is a set-back, refused: tests/test_impossible_counts.py); without it the
            # drop alone tells the restart
            engines[a[1]].restart(None, created_changes=a[2] or engines[a[1]].has_created, spec_on=True, now=t)
        elif kind == "gamma":
            if a[3]:
                engines[a[1]].restart(a[2], created_changes=True, now=t)
            else:
                engines[a[1]].change_gamma_without_restart(a[2])
        elif kind == "off":
            if engines[a[1]].spec_on:
                engines[a[1]].restart(None, created_changes=True, spec_on=False, now=t)
        elif kind == "on":
            if not engines[a[1]].spec_on:
                engines[a[1]].restart(a[2], created_changes=True, spec_on=True, now=t)
        else:
            t += a[1]
            results = []
            for i, target in enumerate(TARGETS):
                ts = t + 0.25 * i  # targets of one cycle are scraped a moment apart
                if a[2][i]:
                    results.append(ScrapeResult(target, ts, False, error=f"connection refused: {target}"))
                    continue
                snaps = []
                for (tgt, label, _), eng in zip(FLEET, engines):
                    if tgt == target:
                        snaps.append(eng.snapshot("m", label))
                        eng.observed(ts, truth[target], lost[target])
                results.append(ScrapeResult(target, ts, True, tuple(snaps)))
            store.write_cycle(results)
    return truth, lost, t


def _truth_by_gamma(truth, targets, s, e):
    out: dict[int, np.ndarray] = {}
    for tgt in targets:
        for t, g, v in truth[tgt]:
            if s < t <= e:
                out[g] = out.get(g, np.zeros(3 + g)) + v
    return {g: v for g, v in out.items() if v[0] > 0 or np.any(v)}


def _window_by_gamma(w):
    out: dict[int, np.ndarray] = {}
    for seg in w.segments:
        assert np.all(seg.intervals.counts >= 0)  # never negative
        assert len(seg.intervals) <= 2000
        v = np.asarray(seg.total.as_vector())
        out[seg.gamma] = out.get(seg.gamma, np.zeros(3 + seg.gamma)) + v
    return {g: v for g, v in out.items() if np.any(v)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(action, min_size=5, max_size=60),
       cuts=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=5))
# a restart of an engine that exposes _created, found by a fresh clone's run
@example(actions=[("scrape", 1, [False] * 3), ("inc", 0, [0, 0]), ("scrape", 1, [False] * 3), ("restart", 0, False),
                  ("inc", 0, [0])], cuts=[(0.0, 0.0), (0.0, 0.0)])
def test_window_sums_equal_the_fleet_truth(actions, cuts):
    with tempfile.TemporaryDirectory() as d:
        store = Store.open(Path(d) / "s.db")
        truth, lost, t_end = run_model(store, actions)
        span = t_end + 10 - 990.0
        windows_to_check = [(990.0, t_end + 10)] + [
            (990.0 + min(x, y) * span, 990.0 + max(x, y) * span) for x, y in cuts if abs(x - y) * span > 1e-6]
        for route in (TARGETS, TARGETS[:1], TARGETS[1:]):
            for s, e in windows_to_check:
                expected = _truth_by_gamma(truth, route, s, e)
                for min_blocks in (1, 10 ** 9):  # rollups as much as possible, then raw only
                    windows.MIN_BLOCKS_PER_LEVEL = min_blocks
                    try:
                        w = route_window(store, route, s, e)
                    finally:
                        windows.MIN_BLOCKS_PER_LEVEL = 60
                    got = _window_by_gamma(w)
                    assert got.keys() == expected.keys(), (s, e, route)
                    for g in got:
                        np.testing.assert_array_equal(got[g], expected[g])
                    lost_d = sum(x for tgt in route for (t, x) in lost[tgt] if s < t <= e)
                    ev_d = sum(ev.data["drafts"] for ev in w.events if ev.kind == "gamma_change_unattributed")
                    assert ev_d == lost_d
        store.close()


def _snap(label, d, gamma=3, created=1.0, running=None, itl=None, it=None):
    a = tuple(float(max(d - 2 * k, 0)) for k in range(gamma))
    return EngineSnapshot("m", label, SpecCounts(float(d), float(d * gamma), float(sum(a)), a), created,
                          StepShape(iteration_tokens=it or {}, num_requests_running=running,
                                    itl_sum=None if itl is None else itl[0], itl_count=None if itl is None else itl[1]))


def test_parallel_gamma_segments_and_newest(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        for i in range(10):
            t = 100.0 + 15 * i
            # engine x stays at γ 3; engine y restarts into γ 5 at i = 5
            y = _snap("y", 10 * i, 3) if i < 5 else _snap("y", 20 * (i - 4), 5, created=100.0 + 15 * 4 + 1)
            store.write_cycle([ScrapeResult("x", t, True, (_snap("x", 10 * i, 3),)),
                               ScrapeResult("y", t, True, (y,))])
        w = route_window(store, ["x", "y"], 0, 1000)
        gammas = sorted(s.gamma for s in w.segments)
        assert gammas == [3, 5]
        g3 = next(s for s in w.segments if s.gamma == 3)
        g5 = next(s for s in w.segments if s.gamma == 5)
        assert g3.total.drafts == 90 + 40  # x all along, y before its restart
        assert g5.total.drafts == 20 * 5  # first delta at the new γ is the new value
        assert {e.engine for e in g3.engines} == {"x", "y"}
        assert [e.engine for e in g5.engines] == ["y"]
        # both run to the end: the newest is the one with the most drafts in the window
        assert w.newest_segment is g3
        assert w.current_segments == [g3, g5] or w.current_segments == [g5, g3]  # a rolling change, neither older
        assert [e.engine for e in g3.engines_at_end] == ["x"]
        assert [e.engine for e in g5.engines_at_end] == ["y"]
        assert {e.kind for e in w.events} == {"restart", "gamma_change"}
        w2 = route_window(store, ["y"], 0, 1000)
        assert w2.newest_segment.gamma == 5


def test_max_blocks_merges_adjacent_blocks_exactly(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        for i in range(50):
            store.write_cycle([ScrapeResult("x", 15.0 * (i + 1), True, (_snap("0", 7 * i),))])
        full = route_window(store, ["x"], 0, 10_000)
        merged = route_window(store, ["x"], 0, 10_000, max_blocks=7)
        assert len(full.segments[0].intervals) == 49
        assert len(merged.segments[0].intervals) <= 7
        assert merged.segments[0].total == full.segments[0].total
        iv = merged.segments[0].intervals
        assert np.all(iv.start[1:] >= iv.end[:-1])  # blocks stay disjoint and in time order


def test_step_shape_and_not_speculating(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        it = lambda n: {1.0: n, 8.0: 2 * n, 64.0: 3 * n, float("inf"): 3 * n}  # noqa: E731
        store.write_cycle([ScrapeResult("x", 15.0, True, (_snap("0", 0, running=2, itl=(0.0, 0), it=it(0)),))])
        store.write_cycle([ScrapeResult("x", 30.0, True, (_snap("0", 10, running=2, itl=(1.0, 50), it=it(5)),))])
        store.write_cycle([ScrapeResult("x", 45.0, True, (_snap("0", 20, running=6, itl=(3.0, 150), it=it(9)),))])
        # a restart: ITL and buckets restart from the new values
        store.write_cycle([ScrapeResult("x", 60.0, True, (_snap("0", 4, created=9.0, running=0, itl=(0.5, 10), it=it(1)),))])
        off = EngineSnapshot("m", "0", None, None, StepShape(num_requests_running=1.0))
        store.write_cycle([ScrapeResult("x", 75.0, True, (off,))])
        w = route_window(store, ["x"], 0, 100)
        s = w.step_shape
        assert s.samples == 4  # the idle sample (0 running) is not a batch size
        assert s.batch_time_shares == {1: 0.25, 2: 0.5, 6: 0.25}
        # consecutive samples of one engine, both running: (2, 2) kept B, (2, 6) did not; the
        # pairs around the restart hold an idle sample (0 running), which is not a batch size
        assert (s.sample_pairs, s.repeated_pairs) == (2, 1)
        assert s.itl_mean_s == pytest.approx((1.0 + 2.0 + 0.5) / (50 + 100 + 10))
        assert s.iteration_tokens == {1.0: 10.0, 8.0: 20.0, 64.0: 30.0, float("inf"): 30.0}
        assert [e.engine for e in w.not_speculating] == ["0"]
        assert [e.kind for e in w.events] == ["restart", "spec_off"]
        assert route_window(store, ["x"], 0, 50).not_speculating == []


def test_bulk_history_matches_write_cycle(tmp_path):
    rng = np.random.default_rng(3)
    n, gamma = 400, 4
    times = 1000.0 + 37.0 * np.arange(n)
    inc = np.zeros((n, 3 + gamma))
    for row in inc[1:]:  # counts an engine can report (acceptance.counts.impossible_counts)
        d = int(rng.integers(0, 9))
        per_pos = np.sort(rng.integers(0, d + 1, size=gamma))[::-1]
        row[:] = [d, rng.integers(max(d, per_pos.sum()), gamma * d + 1), per_pos.sum(), *per_pos]
    cum = np.cumsum(inc, axis=0)
    running = rng.integers(0, 5, size=n).astype(float)
    itl_count = np.cumsum(rng.integers(0, 50, size=n)).astype(float)  # the step shape's counters too
    itl_sum = np.cumsum(rng.random(n) * 0.4)
    with Store.open(tmp_path / "a.db") as bulk, Store.open(tmp_path / "b.db") as cyc:
        bulk.bulk_load_history("x", "m", "0", times, cum, running=running, itl_sum=itl_sum, itl_count=itl_count)
        for i in range(n):
            c = SpecCounts(*cum[i, :3].tolist(), tuple(cum[i, 3:].tolist()))
            shape = StepShape(num_requests_running=running[i], itl_sum=float(itl_sum[i]), itl_count=float(itl_count[i]))
            cyc.write_cycle([ScrapeResult("x", float(times[i]), True, (EngineSnapshot("m", "0", c, None, shape),))])
        windows.MIN_BLOCKS_PER_LEVEL = 1
        try:
            for s, e in [(0, 1e6), (1500.5, 9000.0), (3600.0, 10800.0), (2000.0, 14000.2)]:
                a, b = route_window(bulk, ["x"], s, e), route_window(cyc, ["x"], s, e)
                assert a.segments[0].total == b.segments[0].total
                np.testing.assert_array_equal(a.segments[0].intervals.counts, b.segments[0].intervals.counts)
                assert a.step_shape == b.step_shape
                m = (times[1:] > s) & (times[1:] <= e)
                np.testing.assert_array_equal(a.segments[0].total.as_vector(), inc[1:][m].sum(axis=0))
        finally:
            windows.MIN_BLOCKS_PER_LEVEL = 60


def test_an_hour_of_data_reads_alike_in_any_window_that_holds_it(tmp_path):
    # the resolution follows the data a window holds, not its nominal length
    with Store.open(tmp_path / "s.db") as store:
        t0 = 1_800_000_000.0
        for i in range(241):  # one hour at 15 s
            store.write_cycle([ScrapeResult("x", t0 + 15 * i, True, (_snap("0", 40 * i),))])
        end = t0 + 3600 + 120
        reads = [route_window(store, ["x"], end - span, end).segments[0].intervals
                 for span in (3900, 2 * 3600, 6 * 3600, 86400, 7 * 86400)]
        for iv in reads[1:]:
            assert len(iv) == len(reads[0]) == 240  # scrape intervals, never 5-minute buckets
            np.testing.assert_array_equal(iv.counts, reads[0].counts)
            np.testing.assert_array_equal(iv.end, reads[0].end)
        cut = route_window(store, ["x"], t0 + 1800, end).segments[0].intervals  # a window inside the data
        assert len(cut) == 120


def test_window_rejects_empty_interval(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        with pytest.raises(ValueError, match="window"):
            route_window(store, ["x"], 10, 10)


def test_batch_persistence_and_effective_samples():
    # P(same) = ρ + (1 − ρ)·Σu²: with û = (½, ½) from n = 100 samples, Σu² ≈ (100·½ − 1)/99,
    # and P(same) = ¾: ρ ≈ ½, n_eff = n·(1 − ρ)/(1 + ρ)
    s = StepShapeWindow(batch_time_shares={1: 0.5, 2: 0.5}, samples=100, sample_pairs=80, repeated_pairs=60)
    collision = 49 / 99
    rho = (0.75 - collision) / (1 - collision)
    assert s.batch_persistence == pytest.approx(rho)
    assert rho == pytest.approx(0.5, abs=0.01)
    assert s.effective_samples == pytest.approx(100 * (1 - rho) / (1 + rho))
    # no pairs known, or one batch size: the samples count as independent
    assert StepShapeWindow(batch_time_shares={1: 0.5, 2: 0.5}, samples=100).effective_samples == 100
    assert StepShapeWindow(batch_time_shares={4: 1.0}, samples=100, sample_pairs=99, repeated_pairs=99).batch_persistence == 0
    # changing more often than a fresh draw would (anti-persistent): not counted as more samples
    assert StepShapeWindow(batch_time_shares={1: 0.5, 2: 0.5}, samples=100, sample_pairs=99,
                           repeated_pairs=0).effective_samples == 100


def test_batch_persistence_recovers_a_lazy_chain(tmp_path):
    """A batch that persists with probability 0.6 per scrape, else is redrawn: the store's
    pairs (consecutive raw samples of one engine) give ρ ≈ 0.6."""
    rng = np.random.default_rng(3)
    sizes, shares = np.array([1, 4, 8]), np.array([0.3, 0.5, 0.2])
    engines = [str(e) for e in range(8)]
    with Store.open(tmp_path / "s.db") as store:
        batch = {e: int(rng.choice(sizes, p=shares)) for e in engines}
        for i in range(240):  # an hour: raw scrape rows (rollups keep no order)
            for e in batch:
                if rng.random() >= 0.6:
                    batch[e] = int(rng.choice(sizes, p=shares))
            store.write_cycle([ScrapeResult("x", 15.0 * (i + 1), True,
                                            tuple(_snap(e, 10 * i, running=batch[e]) for e in engines))])
        s = route_window(store, ["x"], 0, 15.0 * 241).step_shape
    assert s.samples == 8 * 240
    assert s.sample_pairs == 8 * 239
    assert s.batch_persistence == pytest.approx(0.6, abs=0.08)
    assert s.effective_samples == pytest.approx(8 * 240 * 0.4 / 1.6, rel=0.3)


def test_every_window_kind_is_a_window_with_one_current_segment_rule():
    """The scraped, Prometheus and ingested windows all implement acceptance.windows.Window,
    and their current and newest segments come from the one rule (windows.current_segments)."""
    from acceptance.counts import IntervalCounts
    from acceptance.ingested_window import IngestedWindow
    from acceptance.prometheus import PrometheusWindow
    from acceptance.windows import GammaSegment, RouteWindow, StepShapeWindow, Window, current_segments

    def segment(gamma, start, end, drafts):
        rows = IntervalCounts(gamma, np.array([start, end - 10.0]), np.array([start + 10.0, end]),
                              np.array([[drafts / 2, gamma * drafts / 2, gamma * drafts / 8] + [drafts / 8] * gamma] * 2))
        return GammaSegment(gamma=gamma, start=start, end=end, engines=[], intervals=rows)

    # γ 3 ended inside the window; γ 7 runs to its end, and γ 5 (a probe) beside it
    segments = [segment(3, 0.0, 1000.0, 9000.0), segment(7, 1000.0, 3600.0, 5000.0), segment(5, 3000.0, 3595.0, 100.0)]
    shape = StepShapeWindow(batch_time_shares={}, iteration_tokens={}, samples=0)
    windows = [
        RouteWindow([], 0.0, 3600.0, segments, [], shape, [], []),
        PrometheusWindow("http://127.0.0.1:9090", "{}", 0.0, 3600.0, 15.0, 15.0, segments, [], shape),
        IngestedWindow("per-request", 0.0, 3600.0, segments),
    ]
    for window in windows:
        assert isinstance(window, Window), type(window).__name__
        assert [s.gamma for s in window.current_segments] == [7, 5], type(window).__name__
        assert window.newest_segment.gamma == 7, type(window).__name__
        assert window.plugin is None, type(window).__name__
        assert window.step_sequences is None, type(window).__name__
    assert [s.gamma for s in current_segments(segments)] == [7, 5]


def test_ingested_requests_of_two_gammas_interleaved_are_both_current():
    """A request row is stored at one instant, so the last row says nothing about what else
    still ran: γ whose requests came during the last segment's span are current too."""
    from acceptance.counts import IntervalCounts
    from acceptance.ingested_window import IngestedWindow
    from acceptance.windows import GammaSegment

    def requests(gamma, times, drafts):
        t = np.asarray(times, dtype=float)
        rows = np.array([[drafts, gamma * drafts, gamma * drafts / 4] + [drafts / 4] * gamma] * t.size)
        return GammaSegment(gamma=gamma, start=float(t[0]), end=float(t[-1]), engines=[],
                            intervals=IntervalCounts(gamma, t, t, rows))

    window = IngestedWindow("per-request", 0.0, 3600.0, [requests(3, [10.0, 1800.0, 3590.0], 900.0),
                                                         requests(5, [20.0, 1810.0, 3600.0], 100.0)])
    assert [s.gamma for s in window.current_segments] == [3, 5]
    assert window.newest_segment.gamma == 3  # the most drafts among the current ones


@pytest.mark.parametrize("min_blocks", [60, 1])  # raw scrape intervals, then rollup buckets as well
def test_each_gamma_segment_keeps_its_own_latency(tmp_path, min_blocks):
    """A probe at another γ has its own ITL: each segment's mean is its engines' alone (the
    route-wide mean mixes both). Each engine's step time is constant per γ, so any exact
    subset of its rows gives that mean; a rollup bucket holding both of y's γ must go to neither."""
    step_s = {("x", 3): 0.010, ("y", 3): 0.010, ("y", 5): 0.025}
    with Store.open(tmp_path / "s.db") as store:
        sums = {"x": 0.0, "y": 0.0}
        counts = {"x": 0.0, "y": 0.0}
        for i in range(1, 200):
            t = 15.0 * i
            snaps = []
            for label in ("x", "y"):
                gamma = 5 if label == "y" and i >= 97 else 3  # y restarts into γ 5 inside a 5-minute bucket
                if label == "y" and i == 97:
                    sums["y"] = counts["y"] = 0.0  # the restart resets its counters
                counts[label] += 40.0
                sums[label] += 40.0 * step_s[(label, gamma)]
                d = 10 * (i - 96 if label == "y" and i >= 97 else i)
                snaps.append(_snap(label, d, gamma, created=15.0 * 96 + 1 if gamma == 5 else 1.0, running=4,
                                   itl=(sums[label], counts[label])))
            store.write_cycle([ScrapeResult(label, t, True, (snap,)) for label, snap in zip(("x", "y"), snaps)])
        windows.MIN_BLOCKS_PER_LEVEL = min_blocks
        try:
            w = route_window(store, ["x", "y"], 0, 3000)
        finally:
            windows.MIN_BLOCKS_PER_LEVEL = 60
        g3 = next(s for s in w.segments if s.gamma == 3)
        g5 = next(s for s in w.segments if s.gamma == 5)
        assert g3.itl_mean_s == pytest.approx(0.010)
        assert g5.itl_mean_s == pytest.approx(0.025)
        assert g5.itl_count > 0 and g3.itl_count > g5.itl_count
        assert 0.010 < w.step_shape.itl_mean_s < 0.025  # route-wide: both


def _probe_then_change(store: Store, low: int, high: int, step_s: dict, change: int, running: int = 4) -> None:
    """Scrapes 1..579, 15 s apart: x and y at γ ``low``, z a probe at ``high`` from scrape 100,
    x and y restarting into ``high`` at scrape ``change``; each γ's step time constant."""
    sums, counts, restarted = defaultdict(float), defaultdict(float), {}
    for i in range(1, 580):
        snaps = []
        for label in ("x", "y", "z"):
            gamma = high if (label == "z" and i >= 100) or i >= change else low
            since = restarted.setdefault((label, gamma), i)
            if since == i and i > 1:
                sums[label] = counts[label] = 0.0  # a restart resets the engine's counters
            counts[label] += 40.0
            sums[label] += 40.0 * step_s[gamma]
            snaps.append(_snap(label, 10 * (i - since + 1), gamma, created=15.0 * (since - 1) + 1, running=running,
                               itl=(sums[label], counts[label])))
        store.write_cycle([ScrapeResult(url, 15.0 * i, True, (snap,)) for url, snap in zip(PROBE_TARGETS, snaps)])


PROBE_TARGETS = [f"http://127.0.0.1:1/{label}" for label in "xyz"]


@pytest.mark.parametrize("coarse", [False, True])  # the store's exact ends, then ends known to 10-minute blocks
def test_a_window_without_a_probe_finds_the_one_in_which_it_last_ran(tmp_path, coarse):
    """Engine z runs a γ 5 probe from 25 min beside x and y at γ 3; at 85 min x and y move
    to γ 5 too. An hour later the window holds γ 5 alone (no probe), and the lookback finds
    the window ending where the probe last ran beside γ 3: both current at its end, each
    segment with its own latency. The store keeps each segment's last interval end, even in
    rollups; a source whose lookback knows ends to a block only (Prometheus: its blocks) is
    read again until the window holds both at its end."""
    import dataclasses

    from model.probe.lookback import earlier_probe_window, has_probe, last_side_by_side
    from acceptance.prometheus import PrometheusError

    change = 340
    with Store.open(tmp_path / "s.db") as store:
        _probe_then_change(store, 3, 5, {3: 0.010, 5: 0.014}, change)
        end = 15.0 * 579
        targets = PROBE_TARGETS

        reads = []  # the ends of the windows read

        def read(lo, hi):
            reads.append(hi)
            window = route_window(store, targets, lo, hi)
            if not (coarse and hi - lo > 4000):
                return window
            return dataclasses.replace(window, segments=[dataclasses.replace(s, end=min(hi, np.ceil(s.end / 600) * 600))
                                                         for s in window.segments])

        now = read(end - 3600, end)
        assert {s.gamma for s in now.current_segments} == {5} and not has_probe(now)
        assert last_side_by_side(now) is None
        earlier, notes = earlier_probe_window(read, now, 3600.0, lookback_s=7 * 86400.0)
        assert earlier is not None and has_probe(earlier) and notes == []
        assert abs(earlier.end - 15.0 * change) <= 15.0  # where x and y left γ 3, to a scrape
        assert len(reads) == (4 if coarse else 3)  # now, the lookback, then one or two windows
        by_gamma = {s.gamma: s for s in earlier.current_segments}
        assert by_gamma[3].itl_mean_s == pytest.approx(0.010) and by_gamma[5].itl_mean_s == pytest.approx(0.014)
        assert [e.target for e in by_gamma[5].engines] == [PROBE_TARGETS[2]]
        # no probe ever: nothing to find
        alone = route_window(store, targets[:1], end - 3600, end)
        assert earlier_probe_window(lambda lo, hi: route_window(store, targets[:1], lo, hi), alone, 3600.0) == (None, [])
        # a window with its own probe does not look back; a lookback that cannot be read is a note
        assert earlier_probe_window(None, earlier, 3600.0) == (None, [])

        def dead(lo, hi):
            raise PrometheusError("Prometheus http://127.0.0.1:9/ did not answer")

        found, notes = earlier_probe_window(dead, now, 3600.0)
        assert found is None and notes == ["the look back for a probe's measured specialized speedup could not be "
                                           "read: Prometheus http://127.0.0.1:9/ did not answer"]


def test_tune_route_prices_the_speedup_its_last_probe_measured(tmp_path):
    """Through the pipeline on the specialized path (dspark, roofline): x and y at γ 3, the
    probe z at γ 7 from 25 min, all at γ 7 from 85 min (batch 16: γ 7's steps run stock, γ 3's
    take the path). An hour later the window holds γ 7 alone; tune-gamma reads the earlier
    window in which the probe ran and says so. A route off the path never looks back."""
    from specdec.config import config_from_mapping
    from specdec.pipeline import tune_route
    from specdec.report import tuning_to_dict

    with Store.open(tmp_path / "s.db") as store:
        _probe_then_change(store, 3, 7, {3: 0.060, 7: 0.090}, 340, running=16)
        end = 15.0 * 579
        deployment = {"method": "dspark", "draft_cost": 0.1, "cost_profile": "roofline",
                      "decode_backend": "latency_specialized", "specialized_speedup": [1.5, 2.0]}
        config = config_from_mapping({"deployment": deployment, "routes": {"r": {"targets": PROBE_TARGETS}}},
                                     path=None)
        tuning = tune_route(config, "r", store=store, window_s=3600.0, now=end, n_resamples=200)
        measured = tuning.recommendation.specialized_speedup_measured
        assert tuning.recommendation.deployed_gamma == 7
        assert measured is not None and measured.window is not None
        assert abs(measured.window[1] - 15.0 * 340) <= 15.0 and measured.window[1] - measured.window[0] == 3600.0
        assert [s.gamma for s in measured.segments] == [3, 7]
        doc = tuning_to_dict(tuning)["specialized_speedup_measured"]
        assert doc["window"] == list(measured.window) and "the last in which a probe ran" in doc["summary"]
        plain = {k: v for k, v in deployment.items() if k not in ("decode_backend", "specialized_speedup")}
        off_path = config_from_mapping({"deployment": plain, "routes": {"r": {"targets": PROBE_TARGETS}}},
                                       path=None)
        assert tune_route(off_path, "r", store=store, window_s=3600.0, now=end,
                          n_resamples=200).recommendation.specialized_speedup_measured is None


def test_each_segment_is_priced_at_its_own_batch_mix(tmp_path):
    """x and y at γ 3 run batches of 4 and 16 half the time each; the probe z at γ 7 keeps
    its requests longer and runs 16 three scrapes in four (B = 16 runs stock at γ 7 and takes
    the path at γ 3). Each engine's latency is the cost model's at s = 1.3 for its own batch.
    The store keeps each segment's gauge samples, through raw rows and rollups alike, and the
    measurement prices each at its own: s comes back within its interval. Priced at the
    route's mix (the segments' own unknown) the probe's extra stock steps read as a faster
    path."""
    import dataclasses

    from acceptance.route_estimate import estimate_route
    from model.probe.evidence import probe_evidence
    from model.route import recommend_route
    from model.speedup import CostModel
    from specdec.config import config_from_mapping, deployment_for_route
    from specdec.pipeline import tune_route
    from specdec.report import tuning_to_dict

    spec = {"method": "dspark", "draft_cost": 0.1, "cost_profile": "roofline",
            "decode_backend": "latency_specialized", "specialized_speedup": [1.5, 2.0]}
    config = config_from_mapping({"deployment": spec, "routes": {"r": {"targets": PROBE_TARGETS}}}, path=None)
    deployment = deployment_for_route(config, "r")
    s, x = 1.3, 1 / 90.0
    cost = CostModel.for_deployment(dataclasses.replace(deployment, baseline_tokens_per_second=1 / x))
    step_s = {g: dict(zip((4, 16), cost.step_times([g], np.array([4, 16]), s)[0].tolist())) for g in (3, 7)}
    n = 1500  # 6¼ hours at 15 s: read from 5-minute rollups
    with Store.open(tmp_path / "s.db") as store:
        sums, counts = defaultdict(float), defaultdict(float)
        for i in range(1, n + 1):
            cycle = []
            for label, url in zip("xyz", PROBE_TARGETS):
                gamma = 7 if label == "z" else 3
                batch = (16 if i % 4 else 4) if label == "z" else (16 if i % 2 else 4)
                counts[label] += 15.0 * batch / step_s[gamma][batch]  # request-steps in the scrape interval
                sums[label] += 15.0 * batch  # each observes its step: count × t_B
                cycle.append(ScrapeResult(url, 15.0 * i, True, (_snap(label, 10 * i, gamma, running=batch,
                                                                      itl=(sums[label], counts[label])),)))
            store.write_cycle(cycle)
        end = 15.0 * n
        window = route_window(store, PROBE_TARGETS, 0.0, end)
        by_gamma = {seg.gamma: seg for seg in window.current_segments}
        assert by_gamma[3].batch_samples == pytest.approx({4: n, 16: n}, abs=2)  # x and y, each half the time
        assert by_gamma[7].batch_samples == pytest.approx({4: n / 4, 16: 3 * n / 4}, abs=2)
        for lo, hi in ((end - 900.0, end), (100.0, end)):  # raw rows alone; rollups with raw edges
            scrapes = sum(1 for i in range(1, n + 1) if lo < 15.0 * i <= hi)
            mixes = {seg.gamma: seg.batch_samples for seg in route_window(store, PROBE_TARGETS, lo, hi).segments}
            assert sum(mixes[3].values()) == 2 * scrapes and sum(mixes[7].values()) == scrapes
            assert mixes[7][16] / scrapes == pytest.approx(0.75, abs=0.02)

        tuning = tune_route(config, "r", store=store, window_s=end, now=end, n_resamples=200)
        measured = tuning.recommendation.specialized_speedup_measured
        lo, hi = measured.confidence_interval
        assert measured.value == pytest.approx(s, rel=0.01) and lo <= s <= hi
        doc = tuning_to_dict(tuning)["specialized_speedup_measured"]["segments"]
        assert [d["gamma"] for d in doc] == [3, 7]
        assert doc[0]["batch_time_shares"] == pytest.approx({"4": 0.5, "16": 0.5}, abs=0.01)
        assert doc[1]["batch_time_shares"] == pytest.approx({"4": 0.25, "16": 0.75}, abs=0.01)

        unknown = dataclasses.replace(window, segments=[dataclasses.replace(seg, batch_samples=None)
                                                        for seg in window.segments])
        main = by_gamma[3]
        route = estimate_route(unknown, main.intervals, n_resamples=200)
        shared = recommend_route(route, deployment, probe=probe_evidence(unknown, route, n_resamples=200),
                                 batch_time_shares=route.batch_time_shares)
        assert shared.recommendation.specialized_speedup_measured.value > s * 1.1
