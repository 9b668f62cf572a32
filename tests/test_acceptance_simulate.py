"""The simulated vLLM fleet: pages in vLLM's exact format, exact ground truth, events."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from acceptance import vllm_metrics as vm
from acceptance.counts import SpecCounts
from acceptance.sim import (
    INTER_TOKEN_LATENCY_BUCKETS,
    ITERATION_TOKENS_BUCKETS,
    EngineExposure,
    Fleet,
    ScenarioError,
    build_scenario,
    render_page,
    scenario_from_dict,
    scenario_to_dict,
)
from acceptance.sim.processes import HeterogeneousProcess, ProcessError, process_from_dict

GOLDEN = Path(__file__).resolve().parent / "data" / "vllm-golden"  # a copy of the shared reference data
needs_golden = pytest.mark.skipif(not (GOLDEN / "exposition_gamma3.txt").exists(), reason="golden vLLM pages absent")

SPEC_FAMILIES = {vm.DRAFTS, vm.DRAFT_TOKENS, vm.ACCEPTED_TOKENS, vm.ACCEPTED_PER_POSITION}


def read_page(text: str) -> dict:
    """Engines on a page: (model_name, engine) → {"counts": SpecCounts | None, "created",
    "running", "iter": {le: cum}, "iter_sum", "itl_sum", "itl_count"}, via prometheus_client."""
    engines: dict[tuple[str, str], dict] = {}
    per_pos: dict[tuple[str, str], dict[int, float]] = {}

    def eng(labels):
        return engines.setdefault((labels["model_name"], labels["engine"]), {"spec": {}, "iter": {}})

    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            e = eng(s.labels)
            if fam.name in (vm.DRAFTS, vm.DRAFT_TOKENS, vm.ACCEPTED_TOKENS) and s.name.endswith("_total"):
                e["spec"][fam.name] = s.value
            elif fam.name == vm.ACCEPTED_PER_POSITION and s.name.endswith("_total"):
                per_pos.setdefault((s.labels["model_name"], s.labels["engine"]), {})[int(s.labels["position"])] = s.value
            elif fam.name == vm.DRAFTS + "_created":
                e["created"] = s.value
            elif fam.name == vm.NUM_REQUESTS_RUNNING:
                e["running"] = s.value
            elif fam.name == vm.ITERATION_TOKENS:
                if s.name.endswith("_bucket"):
                    e["iter"][float(s.labels["le"])] = s.value
                elif s.name.endswith("_sum"):
                    e["iter_sum"] = s.value
            elif fam.name == vm.INTER_TOKEN_LATENCY and s.name.endswith(("_sum", "_count")):
                e["itl_" + s.name.rsplit("_", 1)[1]] = s.value
    for key, e in engines.items():
        spec = e.pop("spec")
        if spec:
            pos = per_pos.get(key, {})
            e["counts"] = SpecCounts(spec[vm.DRAFTS], spec[vm.DRAFT_TOKENS], spec[vm.ACCEPTED_TOKENS],
                                     tuple(pos[k] for k in sorted(pos)))
        else:
            e["counts"] = None
    return engines


def page_of(fleet: Fleet, target: str) -> dict:
    return read_page(fleet.page(target).decode())


def as_vec(c: SpecCounts) -> np.ndarray:
    return np.asarray(c.as_vector(), dtype=float)


def mask_created(lines: list[str]) -> list[str]:
    return [re.sub(r"^(\S+_created\{[^}]*\}) \S+$", r"\1 <created>", line) for line in lines]


# ---------------------------------------------------------------- format


@needs_golden
def test_spec_decode_exposition_matches_vllm_golden_page_line_for_line():
    truth = json.loads((GOLDEN / "ground_truth_gamma3.json").read_text())
    exposures = []
    for idx, e in truth["per_engine"].items():
        counts = SpecCounts(e["num_drafts"], e["num_draft_tokens"], e["num_accepted_tokens"],
                            tuple(e["num_accepted_tokens_per_pos"]))
        exposures.append(EngineExposure(e["model_name"], e["engine"], counts, created=1.8e9 + int(idx)))
    ours = render_page(exposures).decode().splitlines()
    golden = (GOLDEN / "exposition_gamma3.txt").read_text().splitlines()
    assert mask_created(ours) == mask_created(golden)


def _family_block(lines: list[str], family: str) -> list[str]:
    """HELP/TYPE and samples of one family and of its _created gauge, in page order."""
    pat = re.compile(rf"^(# (HELP|TYPE) )?{re.escape(family)}(_bucket|_count|_sum|_created)?[ {{]")
    return [line for line in lines if pat.match(line)]


@needs_golden
@pytest.mark.parametrize("family", [vm.NUM_REQUESTS_RUNNING, vm.ITERATION_TOKENS, vm.INTER_TOKEN_LATENCY])
def test_step_shape_families_match_the_full_vllm_page(family):
    golden = (GOLDEN / "exposition_gamma3_full_metrics_page.txt").read_text().splitlines()
    exposures = [EngineExposure("kimi-k3", str(i), None, created=1.8e9, num_requests_running=running,
                                iteration_tokens=np.zeros(len(ITERATION_TOKENS_BUCKETS) + 1),
                                itl=np.zeros(len(INTER_TOKEN_LATENCY_BUCKETS) + 1))
                 for i, running in ((0, 6.0), (1, 5.0))]
    ours = render_page(exposures).decode().splitlines()
    want = mask_created(_family_block(golden, family))
    assert want, f"{family} missing from the golden page"
    assert mask_created(_family_block(ours, family)) == want


def test_families_keep_vllm_page_order():
    fleet = Fleet(build_scenario("independent", seed=3))
    fleet.advance(20)
    names = [line.split()[2] for line in fleet.page("independent-0").decode().splitlines() if line.startswith("# TYPE")]
    firsts = [names.index(n) for n in (vm.DRAFTS + "_total", vm.NUM_REQUESTS_RUNNING, vm.ITERATION_TOKENS,
                                       vm.INTER_TOKEN_LATENCY)]
    assert firsts == sorted(firsts)


# ------------------------------------------------------------ determinism


def test_same_seed_same_pages_however_the_clock_is_sliced():
    pages = []
    for steps in ([5.0] * 60, [15.0] * 20, [300.0], [0.7] * 100 + [230.0]):
        fleet = Fleet(build_scenario("heterogeneous", seed=11))
        for dt in steps:
            fleet.advance(dt)
        assert fleet.elapsed_s == pytest.approx(300.0)
        pages.append(fleet.page("heterogeneous-0"))
    assert all(p == pages[0] for p in pages)
    other = Fleet(build_scenario("heterogeneous", seed=12))
    other.advance(300)
    assert other.page("heterogeneous-0") != pages[0]


def test_clock_starts_at_a_fixed_epoch_and_only_advance_moves_it():
    fleet = Fleet(build_scenario("independent", seed=0))
    assert fleet.now == 1_800_000_000.0
    before = fleet.page("independent-0")
    assert fleet.page("independent-0") == before  # scraping does not run the engines
    fleet.advance(15)
    assert fleet.now == 1_800_000_015.0
    assert fleet.page("independent-0") != before


# ---------------------------------------------------------------- serving


def test_scraping_over_http_gives_the_counters():
    with Fleet(build_scenario("demo", seed=5)) as fleet:
        urls = fleet.serve()
        assert set(urls) == {"structured-a", "structured-b", "open-a", "open-b"}
        assert len(set(urls.values())) == 4
        assert all(u.startswith("http://127.0.0.1:") for u in urls.values())
        fleet.advance(45)
        with urllib.request.urlopen(urls["structured-a"], timeout=5) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=1.0.0")
            scraped = read_page(resp.read().decode())
        assert sorted(scraped) == [("kimi-k3", "0"), ("kimi-k3", "1")]
        for (_, engine), e in scraped.items():
            truth = fleet.truth_counts("structured-a", engine)
            assert list(truth) == [7]
            assert e["counts"] == truth[7]
            assert e["counts"].drafts > 0
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(urls["open-a"].replace("/metrics", "/other"), timeout=5)


def test_truth_equals_exposed_counters_without_restarts():
    fleet = Fleet(build_scenario("independent", seed=1))
    for _ in range(8):
        fleet.advance(15)
        page = page_of(fleet, "independent-0")
        total = SpecCounts.zero(4)
        for (_, engine), e in page.items():
            assert fleet.truth_counts("independent-0", engine) == {4: e["counts"]}
            total = total + e["counts"]
        assert fleet.truth_counts() == {4: total}


# -------------------------------------------------------------- events


def _reset_aware_deltas(prev: dict | None, cur: dict, totals: dict[int, np.ndarray]) -> None:
    """Prometheus `increase` per engine and γ: after a reset the delta is the value itself."""
    for key, e in cur.items():
        if e["counts"] is None:
            continue
        g = e["counts"].gamma
        now = as_vec(e["counts"])
        before = prev.get(key) if prev else None
        reset = (before is None or before["counts"] is None or before["counts"].gamma != g
                 or before.get("created") != e.get("created") or np.any(now < as_vec(before["counts"])))
        delta = now if reset else now - as_vec(before["counts"])
        totals[g] = totals.get(g, np.zeros(3 + g)) + delta


@pytest.mark.parametrize("name,targets", [("restart", ["restart-0"]), ("gamma-change", ["gamma-change-0"]),
                                          ("spec-off", ["spec-off-0"]), ("demo", ["structured-b", "open-b"])])
def test_scraped_deltas_add_up_to_the_truth_across_events(name, targets):
    fleet = Fleet(build_scenario(name, seed=2))
    totals: dict[str, dict[int, np.ndarray]] = {t: {} for t in targets}
    prev: dict[str, dict | None] = {t: None for t in targets}
    ticks = 170 if name == "demo" else 100  # past every event of the scenario
    for _ in range(ticks):
        fleet.advance(15)
        for t in targets:
            cur = page_of(fleet, t)
            _reset_aware_deltas(prev[t], cur, totals[t])
            prev[t] = cur
    for t in targets:
        truth = fleet.truth_counts(t)
        assert sorted(totals[t]) == sorted(truth)
        for g, c in truth.items():
            np.testing.assert_array_equal(totals[t][g], as_vec(c))


def test_restart_resets_counters_and_changes_created():
    fleet = Fleet(build_scenario("restart", seed=4))  # engine 0 restarts at 600 s
    fleet.advance(600)
    before = page_of(fleet, "restart-0")[("kimi-k3", "0")]
    assert before["created"] == fleet.scenario.start_time  # an event at exactly now is still pending
    truth_before = fleet.truth_counts("restart-0", "0")[4]
    assert before["counts"] == truth_before
    fleet.advance(15)
    after = page_of(fleet, "restart-0")
    assert after[("kimi-k3", "0")]["created"] == fleet.scenario.start_time + 600
    assert after[("kimi-k3", "0")]["counts"].drafts < before["counts"].drafts
    assert after[("kimi-k3", "1")]["created"] == fleet.scenario.start_time  # the other engine runs on
    # truth = what was counted before the restart + the new counters
    np.testing.assert_array_equal(as_vec(fleet.truth_counts("restart-0", "0")[4]),
                                  as_vec(truth_before) + as_vec(after[("kimi-k3", "0")]["counts"]))


def test_restart_between_scrapes_hides_counts_from_scrapers_but_not_from_truth():
    fleet = Fleet(build_scenario("independent", seed=6))
    fleet.advance(37.3)
    engine = fleet.engine("independent-0", "0")
    seen = page_of(fleet, "independent-0")[("kimi-k3", "0")]["counts"]
    fleet.advance(4.1)
    hidden = as_vec(fleet.truth_counts("independent-0", "0")[4]) - as_vec(seen)
    assert hidden[0] > 0
    engine.restart()
    assert page_of(fleet, "independent-0")[("kimi-k3", "0")]["counts"].drafts == 0
    fleet.advance(10)
    now = page_of(fleet, "independent-0")[("kimi-k3", "0")]["counts"]
    np.testing.assert_array_equal(as_vec(fleet.truth_counts("independent-0", "0")[4]),
                                  as_vec(seen) + hidden + as_vec(now))


def test_gamma_change_changes_the_position_label_set():
    fleet = Fleet(build_scenario("gamma-change", seed=0))  # γ 5 → 3 at 900 s
    fleet.advance(900)
    assert page_of(fleet, "gamma-change-0")[("kimi-k3", "0")]["counts"].gamma == 5
    fleet.advance(15)
    text = fleet.page("gamma-change-0").decode()
    positions = sorted(set(re.findall(r'position="(\d+)"', text)))
    assert positions == ["0", "1", "2"]
    assert set(fleet.truth_counts("gamma-change-0")) == {3, 5}
    fleet.engine("gamma-change-0").set_gamma(7)
    fleet.advance(15)
    assert page_of(fleet, "gamma-change-0")[("kimi-k3", "0")]["counts"].gamma == 7


def test_spec_off_removes_the_families_and_spec_on_brings_them_back():
    fleet = Fleet(build_scenario("spec-off", seed=0))  # off at 600 s, on at 1200 s
    fleet.advance(615)
    text = fleet.page("spec-off-0").decode()
    assert "spec_decode" not in text
    e = read_page(text)[("kimi-k3", "0")]
    assert e["counts"] is None
    assert e["iter"]  # the engine still serves its step shape
    steps = fleet.truth_step_counts("spec-off-0")
    assert any(g == 0 for g, _ in steps)  # plain decode steps ran
    fleet.advance(600)
    assert page_of(fleet, "spec-off-0")[("kimi-k3", "0")]["counts"].gamma == 3
    fleet.engine("spec-off-0").set_gamma(0)
    assert "spec_decode" not in fleet.page("spec-off-0").decode()


def test_gamma_zero_engine_serves_no_spec_decode_families():
    s = scenario_from_dict({"routes": {"plain": {"gamma": 0, "targets": [{"name": "p", "engines": 2}]}}})
    fleet = Fleet(s)
    fleet.advance(30)
    text = fleet.page("p").decode()
    assert "spec_decode" not in text
    assert vm.ITERATION_TOKENS in text
    assert fleet.truth_counts() == {}
    with pytest.raises(ScenarioError, match="spec_on on p/0"):
        fleet.engine("p", "0").spec_on()


# ----------------------------------------------------------- truth


def _interval_survival(fleet: Fleet, route: str, ticks: int, dt: float = 15.0):
    """Per-interval route deltas [D, T, A, A_k...] and interval mid times (no restarts)."""
    rows, mids, last = [], [], None
    for _ in range(ticks):
        fleet.advance(dt)
        (g, c), = fleet.route_truth_counts(route).items()
        v = as_vec(c)
        rows.append(v if last is None else v - last)
        mids.append(fleet.now - dt / 2)
        last = v
    return g, np.array(rows), np.array(mids)


@pytest.mark.parametrize("name", ["independent", "front-loaded", "heterogeneous", "drift"])
def test_empirical_survival_converges_to_the_true_survival(name):
    fleet = Fleet(build_scenario(name, seed=21))
    ticks = 180 if name == "drift" else 60
    gamma, rows, mids = _interval_survival(fleet, name, ticks)
    drafts, accepted_k = rows[:, 0], rows[:, 3:]
    est = accepted_k.sum(0) / drafts.sum()
    # Expected: the truth at each interval's middle, weighted by its drafts (drift moves it).
    truth = np.array([fleet.route_true_survival(name, gamma, t) for t in mids])
    expected = drafts @ truth / drafts.sum()
    # Ratio-estimator standard error with 15 s intervals as independent blocks (requests
    # last ~1 s, so counts are correlated within an interval, not across).
    resid = accepted_k - drafts[:, None] * truth
    se = np.sqrt((resid ** 2).sum(0)) / drafts.sum()
    assert np.all(np.abs(est - expected) < 4 * se + 1e-4), (est, expected, se)
    assert np.all(np.diff(expected) <= 0)


def test_heterogeneous_truth_is_draft_weighted_not_the_request_mean():
    proc = HeterogeneousProcess(2.0, 1.0, mean_output_tokens=200)
    request_mean = 2.0 / 3.0  # E[p] under Beta(2, 1)
    a3, a7 = proc.true_survival(3), proc.true_survival(7)
    # Requests that accept more finish sooner, so they draft less: a_1 < E[p].
    assert a3[0] < request_mean - 0.05
    assert a3[0] != pytest.approx(a7[0], abs=1e-4)  # the weighting depends on γ
    # With very long outputs every request lives as many steps... still weighted by 1/h(p).
    rng = np.random.default_rng(0)
    p = rng.beta(2.0, 1.0, 400_000)
    w = 1.0 / proc.end_probability(p, 3)
    np.testing.assert_allclose(proc.true_survival(3), (w @ (p[:, None] ** np.arange(1, 4))) / w.sum(), atol=3e-3)


def test_design_step_metrics_record_batch_times_gamma_plus_one():
    d = scenario_to_dict(build_scenario("demo", seed=8))
    d["step_metrics"] = "design"
    fleet = Fleet(scenario_from_dict(d))
    for _ in range(8):
        fleet.advance(15)
    for target in fleet.targets:
        for engine in fleet.engines(target):
            e = page_of(fleet, target)[("kimi-k3", engine.engine)]
            steps = fleet.truth_step_counts(target, engine.engine)
            counts = fleet.truth_counts(target, engine.engine)
            bounds = list(ITERATION_TOKENS_BUCKETS) + [float("inf")]
            expected = np.zeros(len(bounds))
            for (g, b), n in steps.items():
                expected[np.searchsorted(bounds, b * (g + 1))] += n
            observed = np.diff([0.0] + [e["iter"][le] for le in bounds])
            verify_steps = sum(steps.values())
            prefill_steps = observed.sum() - verify_steps
            assert prefill_steps >= 0
            # Verify steps land exactly where B·(γ+1) says; prefill steps (≥ 512 tokens) above 256.
            small = np.asarray(bounds) <= 256
            np.testing.assert_array_equal(observed[small], expected[small])
            scheduled = sum(b * (g + 1) * n for (g, b), n in steps.items())
            assert e["iter_sum"] >= scheduled + 512 * prefill_steps
            # Per-output-token latency: one observation per emitted token.
            (g, c), = counts.items()
            assert e["itl_count"] == c.drafts + c.accepted_tokens
            assert e["running"] in engine.batch_mix.sizes


def test_vllm_step_metrics_record_generated_tokens_and_one_itl_per_request_step():
    d = scenario_to_dict(build_scenario("independent", seed=9))
    d["step_metrics"] = "vllm"
    d["routes"]["independent"]["targets"][0]["engines"][0]["prefill"] = {"prob": 0.0, "tokens": [512]}
    fleet = Fleet(scenario_from_dict(d))
    fleet.advance(120)
    e = page_of(fleet, "independent-0")[("kimi-k3", "0")]
    c = fleet.truth_counts("independent-0", "0")[4]
    assert e["iter_sum"] == c.drafts + c.accepted_tokens  # Σ (L + 1) over drafts
    assert e["itl_count"] == c.drafts
    steps = sum(fleet.truth_step_counts("independent-0", "0").values())
    assert e["iter"][float("inf")] == steps


def test_route_batch_mix_matches_the_steps_run():
    d = {"routes": {"r": {"gamma": 3, "process": {"kind": "independent", "p": 0.7},
                          "batch": {"weights": {"1": 0.5, "8": 0.5}}, "prefill": {"prob": 0.0, "tokens": [512]},
                          "targets": [{"name": "t", "engines": 2}]}}}
    fleet = Fleet(scenario_from_dict(d, seed=3))
    fleet.advance(3600)
    steps = fleet.truth_step_counts("t")
    total = sum(steps.values())
    mix = fleet.route_batch_mix("r")
    # batch 1 steps are shorter, so there are more of them than the 50/50 time share.
    assert mix[1] > 0.5
    for b, share in mix.items():
        assert steps[(3, b)] / total == pytest.approx(share, abs=0.04)
    assert fleet.route_batch_mix("r", weighting="time") == {1: 0.5, 8: 0.5}


# --------------------------------------------------------- scenarios


def test_builtin_scenarios_build_and_demo_has_the_promised_shape():
    demo = build_scenario("demo", seed=0)
    routes = demo.routes
    assert set(routes) == {"structured", "open"}
    for targets in routes.values():
        assert len(targets) >= 2
        assert sum(len(t.engines) for t in targets) >= 2
    assert 4 <= sum(len(t.engines) for t in demo.targets) <= 8
    assert {e.kind for e in demo.events} >= {"restart", "set_gamma"}
    assert all(e.at_s < 3600 for e in demo.events)
    assert all(3 <= e.gamma <= 7 for t in demo.targets for e in t.engines)
    for name in ("independent", "front-loaded", "heterogeneous", "drift", "restart", "gamma-change"):
        Fleet(build_scenario(name, seed=0)).advance(1)
    with pytest.raises(ScenarioError, match="unknown name 'nope'"):
        build_scenario("nope", 0)


def test_scenario_dict_round_trip_gives_the_same_fleet():
    s = build_scenario("demo", seed=4)
    again = scenario_from_dict(json.loads(json.dumps(scenario_to_dict(s))))
    a, b = Fleet(s), Fleet(again)
    a.advance(30)
    b.advance(30)
    assert a.page("open-a") == b.page("open-a")


@pytest.mark.parametrize("bad,needle", [
    ({"routes": {}}, "scenario.routes"),
    ({"routes": {"r": {"gamma": 3}}}, "routes.r.targets[0].engines[0]: needs 'process'"),
    ({"routes": {"r": {"gamma": 3.5, "process": {"kind": "independent", "p": 0.5}}}}, "gamma"),
    ({"routes": {"r": {"gamma": 3, "process": {"kind": "independent", "p": 1.5}}}}, "independent.p"),
    ({"routes": {"r": {"gamma": 3, "process": {"kind": "magic"}}}}, "process.kind"),
    ({"routes": {"r": {"gamma": 3, "process": {"kind": "independent", "p": 0.5}, "batch": {"weights": {"x": 1}}}}},
     "batch.weights"),
    ({"routes": {"r": {"gamma": 3, "process": {"kind": "independent", "p": 0.5}}},
      "events": [{"at": "5 minutes", "kind": "restart", "target": "r-0"}]}, "events[0].at"),
    ({"routes": {"r": {"gamma": 3, "process": {"kind": "independent", "p": 0.5}}},
      "events": [{"at": 5, "kind": "restart", "target": "zz"}]}, "events[0].target"),
    ({"routes": {"r": {"gamma": 3, "process": {"kind": "independent", "p": 0.5}}},
      "events": [{"at": 5, "kind": "set_gamma", "target": "r-0"}]}, "set_gamma needs 'gamma'"),
    ({"routes": {"r": {"gamma": 3, "process": {"kind": "independent", "p": 0.5}}}, "colour": 1}, "unknown keys"),
])
def test_bad_scenarios_fail_with_one_line_naming_the_input(bad, needle):
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(bad)
    msg = str(err.value)
    assert needle in msg
    assert "\n" not in msg


def test_bad_process_and_advance_inputs():
    with pytest.raises(ProcessError, match="heterogeneous.a"):
        process_from_dict({"kind": "heterogeneous", "a": -1, "b": 1})
    fleet = Fleet(build_scenario("independent", seed=0))
    fleet.advance(15)
    page = fleet.page("independent-0")
    with pytest.raises(ValueError, match="dt_s"):
        fleet.advance(-1)
    with pytest.raises(ScenarioError, match="gamma must be an integer"):
        fleet.engine("independent-0").set_gamma(99)
    assert fleet.page("independent-0") == page  # bad input changed nothing
    with pytest.raises(ScenarioError, match="already past"):
        fleet.schedule(5, "restart", "independent-0")


def test_realtime_clock_advances_with_wall_time():
    with Fleet(build_scenario("independent", seed=0)) as fleet:
        fleet.start_realtime(speed=200.0, tick_s=0.01)
        deadline = __import__("time").monotonic() + 5
        while fleet.elapsed_s < 2.0 and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.01)
        assert fleet.elapsed_s >= 2.0
        assert fleet.truth_counts()[4].drafts > 0


def test_a_toml_file_describes_a_fleet():
    import tomllib

    text = """
name = "from-toml"
seed = 7
[routes.chat]
gamma = 4
process = { kind = "heterogeneous", a = 3.0, b = 2.0, mean_output_tokens = 250 }
batch = { weights = { "2" = 0.5, "8" = 0.5 }, persistence = 0.3 }
[[routes.chat.targets]]
name = "chat-a"
engines = 2
[[routes.chat.targets]]
name = "chat-b"
gamma = 6
[[events]]
at = "1m"
kind = "restart"
target = "chat-b"
"""
    s = scenario_from_dict(tomllib.loads(text))
    assert (s.name, s.seed) == ("from-toml", 7)
    assert [(t.name, len(t.engines), t.engines[0].gamma) for t in s.targets] == [("chat-a", 2, 4), ("chat-b", 1, 6)]
    with Fleet(s) as fleet:
        fleet.advance(75)
        assert set(fleet.truth_counts()) == {4, 6}
        assert page_of(fleet, "chat-b")[("kimi-k3", "0")]["created"] == s.start_time + 60
        urls = fleet.serve()
        described = fleet.describe()["chat"]
        assert described["targets"] == [urls["chat-a"], urls["chat-b"]]
        np.testing.assert_allclose(described["true_survival"][4], fleet.route_true_survival("chat", 4), atol=1e-6)
