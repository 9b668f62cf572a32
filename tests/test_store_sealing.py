"""Sealing: an engine's closed hours of scrape intervals become one row per key, a few per
cycle at most, whatever stopped the collector before, and a window reads the same counts
from sealed rows as from the 5-minute rows they replaced. What the store knows of an
engine's speculation at a past moment comes from its segments and events, the sample
history being gone."""

from __future__ import annotations

import numpy as np

from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts, StepShape
from acceptance.store import Store
from acceptance.store import sealing
from acceptance.windows import route_window

T0 = 1_800_000_000.0  # an hour boundary


def scrape(target: str, t: float, i: int, engine: str = "0", spec: bool = True) -> ScrapeResult:
    counts = SpecCounts(10.0 * i, 30.0 * i, 12.0 * i, (6.0 * i, 4.0 * i, 2.0 * i)) if spec else None
    return ScrapeResult(target, t, True, (EngineSnapshot("m", engine, counts, 1.0, StepShape({}, 4.0, 0.01 * i, i)),))


def rows(store: Store) -> list[tuple[int, int]]:
    return store.conn.execute("SELECT sealed, COUNT(*) FROM interval_chunks GROUP BY sealed ORDER BY sealed").fetchall()


def counts(store: Store, targets: list[str], lo: float, hi: float) -> list[tuple]:
    w = route_window(store, targets, lo, hi)
    return [(s.gamma, s.total.drafts, s.itl_count, len(s.intervals)) for s in w.segments] + [
        (w.step_shape.samples, w.step_shape.batch_time_shares)]


def test_hours_left_open_by_a_stopped_collector_are_sealed_by_the_next_one(tmp_path, monkeypatch):
    path = tmp_path / "s.db"
    targets = [f"http://t{j}" for j in range(6)]
    with Store.open(path) as store:  # 2 h of six engines, then stopped
        for i in range(1, 2 * 240 + 1):
            store.write_cycle([scrape(t, T0 + 15 * i - 7.5, i) for t in targets])
    # each engine's hour 0 sealed as it went by; hour 1 (its newest sample's) still open
    with Store.open(path) as store:
        assert rows(store) == [(0, 6 * 12), (1, 6 * 2)]  # 5-min rows of hour 1; hour 0: spec key, baseline key
        before = counts(store, targets, T0, T0 + 3 * 3600)
    monkeypatch.setattr(sealing, "SEAL_PER_CYCLE", 4)  # a few engine-hours a cycle: six need two cycles
    with Store.open(path) as store:
        for k, i in enumerate(range(2 * 240 + 1 + 240, 2 * 240 + 3 + 240)):  # back an hour later
            store.write_cycle([scrape(t, T0 + 15 * i - 7.5, i) for t in targets])
            sealed = dict(rows(store))[1]
            assert sealed == 6 * 2 + min(4 * (k + 1), 6)
        assert rows(store) == [(0, 6), (1, 6 * 3)]  # the newest hour's first 5-min row each
        assert counts(store, targets, T0, T0 + 2 * 3600) == before  # the same counts, read from sealed rows
        # the hour away is one interval per engine, counted whole at its end
        w = route_window(store, targets, T0 + 2 * 3600, T0 + 3 * 3600 + 30)
        assert w.segments[0].total.drafts == 6 * 10 * (241 + 1)


def test_a_past_moment_s_speculation_is_read_from_segments_and_events(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        for i in range(1, 41):  # on, then off from scrape 20, on again from scrape 30
            store.write_cycle([scrape("x", T0 + 15 * i, i, spec=not (20 <= i < 30))])
        eid = store.engines_of(["x"])[0][0]
        assert [store.is_speculating(eid, T0 + 15 * i) for i in (1, 19, 20, 29, 30, 40)] == [
            True, True, False, False, True, True]
        assert store.is_speculating(eid, T0) is None  # before its first sighting
        assert [e.engine for e in route_window(store, ["x"], T0, T0 + 15 * 25).not_speculating] == ["0"]
        assert route_window(store, ["x"], T0, T0 + 15 * 35).not_speculating == []


def test_a_never_speculating_engine_is_not_speculating_at_a_past_moment(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        for i in range(1, 30):
            store.write_cycle([scrape("x", T0 + 15 * i, i, spec=False)])
        eid = store.engines_of(["x"])[0][0]
        assert store.is_speculating(eid, T0 + 15 * 10) is False
        assert store.is_speculating(eid, T0 + 15 * 29) is False  # its newest sample
        assert np.isclose(route_window(store, ["x"], T0, T0 + 15 * 10).step_shape.samples, 10)


def test_each_interval_keeps_its_cycle_when_a_cycle_s_targets_answer_at_different_times(tmp_path):
    # A cycle's time is its latest scrape's: the others' intervals are stored with a cycle
    # that is not their own time, and a window's blocks are keyed by it (one block a cycle,
    # whatever each target's own moment) — in a 5-min row of an open hour and once sealed.
    rng = np.random.default_rng(5)
    targets = [f"http://t{j}" for j in range(5)]
    cycles = []
    with Store.open(tmp_path / "s.db") as store:
        for i in range(1, 300):  # past an hour: the first hour sealed
            times = T0 + 15 * i + rng.uniform(0, 0.3, len(targets))
            store.write_cycle([scrape(t, float(at), i) for t, at in zip(targets, times)])
            cycles.append(float(times.max()))
        assert dict(rows(store))[1] > 0
        spec, _ = store.read_intervals([eid for eid, _ in store.engines_of(targets)], T0, T0 + 15 * 300)
        keys = np.concatenate([e.key for e in spec])
        ends = np.concatenate([e.end for e in spec])
        assert sorted(set(keys.tolist())) == cycles[1:]  # the first cycle is every engine's baseline
        assert bool((keys >= ends).all()) and bool((keys > ends).any())
        w = route_window(store, targets, T0, T0 + 15 * 300)
        assert len(w.segments[0].intervals) == len(cycles) - 1  # one block a cycle
