"""recommend(): candidates, intervals, probability of best, decisions, vLLM configs, errors."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from model.deployment import INLINE_DEFAULTS, Deployment, ModelInputError
from model.decision import Decision
from model.deployed_speedup import deployed_speedup
from model.recommend import Candidate, Recommendation, RouteInputs, recommend
from model.vllm_config import schedule_from_best, speculative_config, validate_schedule

EAGLE_FLAT = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat")
CURVE = 0.7 ** np.arange(1, 8)  # flat eagle3 c = 0.1: best γ = 4 (1.981×) over γ = 2 (1.825×)


def resamples(curve, drafts, n=400, seed=1):
    """Survival curves of ``drafts`` drafts drawn from the accepted-length distribution."""
    rng = np.random.default_rng(seed)
    a = np.concatenate([[1.0], curve, [0.0]])
    probs = a[:-1] - a[1:]  # P(exactly j accepted), j = 0..γ
    counts = rng.multinomial(drafts, probs, size=n)
    return np.cumsum(counts[:, ::-1], axis=1)[:, ::-1][:, 1:] / drafts


def test_candidates_span_zero_to_gamma_max_or_the_drafters_block():
    rec = recommend(RouteInputs(CURVE[:5]), EAGLE_FLAT)
    assert [c.gamma for c in rec.candidates] == list(range(17))  # gamma_max 16: no block for EAGLE-3
    assert [c.extrapolated for c in rec.candidates] == [False] * 6 + [True] * 11
    dspark = recommend(RouteInputs(CURVE[:3]), Deployment(method="dspark", draft_cost=0.1, cost_profile="flat"))
    assert dspark.candidates[-1].gamma == 7  # its block
    c0 = rec.candidates[0]
    assert c0.speedup == 1.0
    assert c0.allowed
    assert c0.reason is None
    assert recommend(RouteInputs(CURVE[:5], gamma_max=3, deployed_gamma=2), EAGLE_FLAT).candidates[-1].gamma == 3


def test_recommended_is_the_best_expected_speedup():
    rec = recommend(RouteInputs(CURVE, deployed_gamma=2), EAGLE_FLAT)
    assert rec.recommended_gamma == 4
    assert rec.candidates[4].speedup == pytest.approx((1 - 0.7**5) / 0.3 / 1.4)
    assert rec.candidates[4].tokens_per_second == pytest.approx(rec.candidates[4].speedup * 118)


def test_tight_resamples_make_the_best_certain_and_wide_ones_do_not():
    tight = recommend(RouteInputs(CURVE, survival_resamples=resamples(CURVE, 1_000_000), deployed_gamma=2), EAGLE_FLAT)
    wide = recommend(RouteInputs(CURVE, survival_resamples=resamples(CURVE, 50), deployed_gamma=2), EAGLE_FLAT)
    assert tight.probability_best > 0.95
    assert wide.probability_best < 0.8
    for r in (tight, wide):
        assert sum(c.probability_best for c in r.candidates) == pytest.approx(1.0)
        for c in r.candidates:
            assert c.speedup_low <= c.speedup + 1e-9
            assert c.speedup - 1e-9 <= c.speedup_high
    def width(r):
        return r.candidates[4].speedup_high - r.candidates[4].speedup_low

    assert width(wide) > 5 * width(tight)
    assert tight.decision == "change"
    assert tight.vllm_speculative_config["num_speculative_tokens"] == 4
    assert sum(c.probability_best > 0.05 for c in wide.candidates) >= 2  # no single sure winner


def test_keep_says_what_evidence_would_change_it():
    curve = np.array([0.7, 0.49, 0.343])
    # Too few drafts: γ 4 is better on average (+8%) but not surely by min_gain.
    rec = recommend(RouteInputs(curve, survival_resamples=resamples(curve, 15), deployed_gamma=2), EAGLE_FLAT)
    assert rec.recommended_gamma == 4
    assert rec.decision == "keep"
    assert "P(γ=4 gains > 3% over γ=2)" in rec.decision_reason
    assert "drafts" in rec.decision_reason
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 2  # the deployed γ stays
    # Plenty of drafts but a gain within min_gain: keep, and say so.
    modest = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat", min_gain=0.10)
    rec = recommend(RouteInputs(curve, survival_resamples=resamples(curve, 1_000_000), deployed_gamma=2), modest)
    assert rec.recommended_gamma == 4
    assert rec.decision == "keep"
    assert "within min_gain 10%" in rec.decision_reason
    no_res = recommend(RouteInputs(CURVE, deployed_gamma=2), EAGLE_FLAT)
    assert no_res.decision == "keep"
    assert "without resamples" in no_res.decision_reason
    assert no_res.probability_best is None
    assert no_res.candidates[3].speedup_low is None


def test_off_when_speculation_surely_does_not_pay():
    curve = np.array([0.2, 0.04, 0.008])
    dep = Deployment(method="eagle3", draft_cost=0.3, cost_profile="flat")
    rec = recommend(RouteInputs(curve, survival_resamples=resamples(curve, 100_000)), dep)
    assert rec.recommended_gamma == 0
    assert rec.decision == "off"
    assert rec.vllm_speculative_config is None
    assert "omit --speculative-config" in rec.vllm_command_line


def test_deployable_config_never_contains_synthetic_acceptance():
    cases = [
        recommend(RouteInputs(CURVE, survival_resamples=resamples(CURVE, 10**6), deployed_gamma=2), EAGLE_FLAT),
        recommend(RouteInputs(CURVE), Deployment()),
        recommend(RouteInputs(CURVE, batch_mix={1: 0.5, 40: 0.5}), Deployment(decode_backend="latency_specialized")),
        recommend(RouteInputs(CURVE[:3]), replace(INLINE_DEFAULTS, configured=None)),
    ]
    for rec in cases:
        deployable = json.dumps(rec.to_dict()["vllm"])
        assert "synthetic" not in deployable
        assert "rejection_sample_method" not in deployable
        replay = rec.replay_config
        cfg = replay["speculative_config"]
        assert cfg["rejection_sample_method"] == "synthetic"
        rates = cfg["synthetic_acceptance_rates"]
        assert len(rates) == cfg["num_speculative_tokens"]
        assert all(b <= a for a, b in zip(rates, rates[1:]))
        assert "corrupts outputs" in replay["warning"]
    # the inline defaults name no drafter the user gave: no replay config names one either
    assert recommend(RouteInputs(CURVE[:3]), INLINE_DEFAULTS).replay_config is None


def test_to_dict_has_the_json_keys_and_no_nan():
    rec = recommend(RouteInputs(CURVE, observed_tokens_per_second=300.0), Deployment(cost_profile="flat"))
    d = rec.to_dict()
    assert set(d) >= {"objective", "cost_profile", "interval_level", "deployed_gamma", "recommended_gamma", "decision",
                      "probability_best", "candidates", "model_error", "vllm", "replay_config"}
    assert set(d["candidates"][0]) == {"gamma", "speedup", "speedup_low", "speedup_high", "tokens_per_second",
                                       "probability_best", "extrapolated", "allowed", "reason", "expected_tokens"}
    assert d["cost_profile"] == "flat"
    assert d["interval_level"] == 0.9
    json.dumps(d, allow_nan=False)
    weird = Recommendation("interactivity", "flat", 0.9, 1, Decision("keep", fleet_gamma=1, best_gamma=1),
                           [Candidate(1, math.nan, None, None, None, math.nan, False, True, None)], math.nan, None, "",
                           {})
    wd = weird.to_dict()
    assert wd["probability_best"] is None
    assert wd["model_error"] is None
    assert wd["candidates"][0]["speedup"] is None


def test_model_error_at_the_deployed_gamma():
    dep = Deployment(cost_profile="flat")
    model_tps = (1 + CURVE.sum()) * 118 / 1.1
    rec = recommend(RouteInputs(CURVE, observed_tokens_per_second=model_tps / 1.1), dep)
    assert rec.model_error == pytest.approx(0.1)
    assert rec.model_error_warning is None
    assert rec.to_dict()["model_error_warning"] is None  # within ±15%
    far = recommend(RouteInputs(CURVE, observed_tokens_per_second=model_tps / 0.57), dep)  # the model 43% slow
    assert far.model_error == pytest.approx(-0.43)
    assert "-43.0%" in far.model_error_warning
    assert "specdec calibrate plan" in far.model_error_warning
    assert "baseline_tokens_per_second (118 now)" in far.model_error_warning
    assert recommend(RouteInputs(CURVE,
                     observed_tokens_per_second=100.0), Deployment(cost_profile="flat", baseline_tokens_per_second=None)).model_error is None


def test_relative_units_without_a_baseline():
    rec = recommend(RouteInputs(CURVE), Deployment(cost_profile="flat", baseline_tokens_per_second=None))
    assert all(c.tokens_per_second is None for c in rec.candidates)


def test_objectives_weight_batches_differently():
    dep = Deployment(method="eagle3", draft_cost=0.05)
    mix = {1: 0.5, 64: 0.5}
    inter = recommend(RouteInputs(CURVE, batch_mix=mix), dep)
    thr = recommend(RouteInputs(CURVE, batch_mix=mix), Deployment(method="eagle3", draft_cost=0.05, objective="throughput"))
    assert thr.objective == "throughput"
    assert inter.objective == "interactivity"
    # Per-user time vs per-step weights: the same mix gives different speedups.
    assert abs(thr.candidates[5].speedup / inter.candidates[5].speedup - 1) > 0.01
    flat = Deployment(method="eagle3", draft_cost=0.05, cost_profile="flat")
    assert recommend(RouteInputs(CURVE, batch_mix={1: 1.0}), flat).candidates[5].speedup == pytest.approx(
        recommend(RouteInputs(CURVE, batch_mix=mix), flat).candidates[5].speedup)


@pytest.mark.parametrize(
    "curve, kwargs, needle",
    [
        ([0.5, 0.6], {}, "cannot increase"),
        ([1.2, 0.5], {}, "[0, 1]"),
        ([0.5, -0.1], {}, "[0, 1]"),
        ([], {}, "non-empty"),
        ([0.5, 0.3], {"deployed_gamma": -1}, "deployed_gamma"),
        ([0.5, 0.3], {"deployed_gamma": 9}, "outside"),
        ([0.5, 0.3], {"gamma_max": -1}, "gamma_max"),
        ([0.5, 0.3], {"survival_resamples": np.ones((4, 3)) * 0.5}, "shape"),
        ([0.5, 0.3], {"survival_resamples": np.array([[0.3, 0.5]])}, "cannot increase"),
        ([0.5, 0.3], {"batch_mix": {0: 1.0}}, "batch_mix"),
        ([0.5, 0.3], {"batch_mix": {4: -1.0}}, "batch_mix"),
        ([0.5, 0.3], {"eligibility": 1.5}, "eligibility"),
    ],
)
def test_bad_inputs_raise_one_line(curve, kwargs, needle):
    dep = Deployment(decode_backend="latency_specialized") if "eligibility" in kwargs else Deployment()
    with pytest.raises(ModelInputError) as e:
        recommend(RouteInputs(np.array(curve, dtype=float), **kwargs), dep)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_gamma_and_draft_cost_in_the_table_functions():
    from model.speedup import implied_p, seeds_table

    with pytest.raises(ModelInputError, match="gamma"):
        seeds_table(-1, 0.1, [0.5])
    with pytest.raises(ModelInputError, match="draft cost"):
        seeds_table(7, -0.1, [0.5])
    with pytest.raises(ModelInputError, match="unknown speculative method"):
        implied_p(2.0, 7, 0.1, method="medusa")
    with pytest.raises(ModelInputError, match="p must be"):
        seeds_table(7, 0.1, [1.5])


def test_schedule_rules_are_vllms():
    assert validate_schedule([(9, 64, 0), (1, 8, 7)]) == [(1, 8, 7), (9, 64, 0)]
    for bad in ([(2, 8, 7)], [(1, 8, 7), (8, 16, 3)], [(1, 0, 3)], [(0, 4, 3)], [(1, 4, -1)], [], [(1, 4)]):
        with pytest.raises(ModelInputError):
            validate_schedule(bad)
    assert schedule_from_best({1: 7, 4: 7, 8: 7, 16: 0, 32: 0}) == [(1, 8, 7), (9, 32, 0)]
    cfg = speculative_config(Deployment(), 7, [(1, 8, 7), (9, 64, 0)])
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, 8, 7], [9, 64, 0]]


def test_specialized_schedule_uses_only_gamma_or_zero():
    dep = Deployment(decode_backend="latency_specialized", specialized_speedup=2.0)
    curve = np.array([0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02])
    rec = recommend(RouteInputs(curve, batch_mix={1: 0.5, 40: 0.5}), dep)
    assert rec.schedule is not None
    assert {k for _, _, k in rec.schedule} <= {0, 7}
    assert rec.schedule[0][0] == 1
    validate_schedule(rec.schedule)
    # Only a suggestion while γ is kept (a schedule restarts engines too).
    assert rec.decision != "change"
    assert "num_speculative_tokens_per_batch_size" not in rec.vllm_speculative_config
    # ...and the document says so (tune-gamma --json and its console table).
    assert rec.to_dict()["schedule"] == [list(r) for r in rec.schedule]


def test_vllm_config_per_method():
    assert speculative_config(Deployment(method="ngram", cost_profile="flat"), 4) == {"method": "ngram", "num_speculative_tokens": 4}
    pard = speculative_config(Deployment(method="parallel_drafting", cost_profile="flat", draft_model="x/pard"), 4)
    assert pard == {"method": "draft_model", "parallel_drafting": True, "num_speculative_tokens": 4, "model": "x/pard"}
    assert speculative_config(Deployment(), 0) is None


def test_batch_mix_resamples_widen_the_speedup_intervals_of_a_batch_dependent_cost():
    """The batch mix is measured too: its resamples widen the intervals where the cost
    depends on the batch size (roofline), and the point stays the same."""
    import numpy as np

    from model.deployment import Deployment
    from model.recommend import RouteInputs, recommend

    rng = np.random.default_rng(0)
    survival = np.array([0.8, 0.62, 0.48, 0.37, 0.28])
    resamples = np.clip(survival + rng.normal(0, 0.003, (400, 5)), 0, 1)
    resamples = np.minimum.accumulate(resamples, axis=1)
    dep = Deployment(cost_profile="roofline")
    mix = {4: 0.3, 16: 0.4, 64: 0.3}
    mixes = rng.dirichlet(np.array([0.3, 0.4, 0.3]) * 30, size=400)
    plain = recommend(RouteInputs(survival, survival_resamples=resamples, batch_mix=mix), dep)
    wide = recommend(RouteInputs(survival, survival_resamples=resamples, batch_mix=mix, batch_mix_resamples=mixes), dep)
    for a, b in zip(plain.candidates, wide.candidates):
        assert a.speedup == b.speedup
        if a.gamma >= 2:
            assert (b.speedup_high - b.speedup_low) > 1.2 * (a.speedup_high - a.speedup_low), a.gamma


def test_a_specialized_speedup_range_is_a_uniform_prior_over_the_resamples():
    """A range spreads the resamples over it: the interval is wider than at its midpoint
    alone, but inside the hull of the intervals at its two ends (a 90% interval leaves out
    the least likely ends), and the point stays at the midpoint."""
    curve = np.array([0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65])
    res = resamples(curve, 4000, n=800)

    def at(speedup):
        dep = Deployment(decode_backend="latency_specialized", specialized_speedup=speedup)
        return recommend(RouteInputs(curve, survival_resamples=res, batch_mix={1: 0.5, 4: 0.5}), dep).candidates[7]

    ranged, mid, low, high = at((1.5, 2.0)), at(1.75), at(1.5), at(2.0)
    assert ranged.speedup == pytest.approx(mid.speedup)
    assert ranged.speedup_high - ranged.speedup_low > 1.5 * (mid.speedup_high - mid.speedup_low)
    hull_low = min(low.speedup_low, high.speedup_low)
    hull_high = max(low.speedup_high, high.speedup_high)
    assert hull_low < ranged.speedup_low
    assert ranged.speedup_high < hull_high
    assert ranged.speedup_high - ranged.speedup_low < 0.95 * (hull_high - hull_low)


def test_a_mix_measured_in_time_follows_each_specialized_speedup():
    """Time shares u_B hold other requests at another specialized speedup (w_B ∝ B·u_B/t_B):
    with noiseless resamples the ranged interval's ends are exactly the point projections
    at the outermost bins, each with the mix converted at that bin's speedup."""
    from model.recommend import SPECIALIZED_SPEEDUP_BINS
    from model.speedup import batch_mix_from_time_shares

    curve = np.array([0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65])
    shares = {4: 0.3, 8: 0.3, 16: 0.4}  # B = 16 runs stock at γ 7 (128 tokens > 64)
    flat = np.tile(curve, (8 * SPECIALIZED_SPEEDUP_BINS, 1))
    ranged = Deployment(decode_backend="latency_specialized", specialized_speedup=(1.5, 2.0))
    mid_mix = batch_mix_from_time_shares(shares, ranged, 7)
    rec = recommend(RouteInputs(curve, survival_resamples=flat, batch_mix=mid_mix, mix_in_time=True), ranged)
    step = 0.5 / SPECIALIZED_SPEEDUP_BINS
    ends = []
    for sp in (1.5 + step / 2, 2.0 - step / 2):
        point = Deployment(decode_backend="latency_specialized", specialized_speedup=sp)
        ends.append(recommend(RouteInputs(curve, batch_mix=batch_mix_from_time_shares(shares, point, 7)), point).candidates)
    for g in (3, 7):
        lo, hi = sorted((ends[0][g].speedup, ends[1][g].speedup))
        assert rec.candidates[g].speedup_low == pytest.approx(lo, rel=1e-9)
        assert rec.candidates[g].speedup_high == pytest.approx(hi, rel=1e-9)
    # taken as request weights (mix_in_time=False) the ends differ: the mix does not move
    fixed = recommend(RouteInputs(curve, survival_resamples=flat, batch_mix=mid_mix), ranged)
    assert fixed.candidates[7].speedup_low != pytest.approx(rec.candidates[7].speedup_low, rel=1e-6)
    # with per-batch curves the tokens per step follow the re-weighted mix too
    by_batch = {4: curve, 8: curve * 0.97, 16: curve * 0.9}
    rec = recommend(RouteInputs(curve, survival_resamples=flat, batch_mix=mid_mix, mix_in_time=True,
                    survival_by_batch=by_batch), ranged)
    ends = []
    for sp in (1.5 + step / 2, 2.0 - step / 2):
        point = Deployment(decode_backend="latency_specialized", specialized_speedup=sp)
        ends.append(recommend(RouteInputs(curve, batch_mix=batch_mix_from_time_shares(shares, point, 7),
                              survival_by_batch=by_batch), point).candidates)
    for g in (3, 7):
        lo, hi = sorted((ends[0][g].speedup, ends[1][g].speedup))
        assert rec.candidates[g].speedup_low == pytest.approx(lo, rel=1e-9)
        assert rec.candidates[g].speedup_high == pytest.approx(hi, rel=1e-9)


# ---------------------------------------------------------------------------------------
# drafts shorter than γ: a step verifies its draft + the bonus token, not γ + 1


def test_verify_widths_from_reach_mean_length_or_neither():
    from model.speedup import verify_widths

    # reach known: q(γ) = 1 + Σ_{k≤γ} r_k, then r_γo per position past the observed γ
    np.testing.assert_allclose(verify_widths(5, 3, 2.1, [0.9, 0.7, 0.5]), [1, 1.9, 2.6, 3.1, 3.6, 4.1])
    # only T / D: flat reach, exact at the observed γ
    np.testing.assert_allclose(verify_widths(4, 3, 1.5), [1, 1.5, 2.0, 2.5, 3.0])
    # neither, or nothing observed: full drafts
    np.testing.assert_allclose(verify_widths(3, 3), [1, 2, 3, 4])
    np.testing.assert_allclose(verify_widths(2, 0, 0.0), [1, 2, 3])
    with pytest.raises(ModelInputError, match="outside 0..γ = 3"):
        verify_widths(3, 3, 3.5)
    with pytest.raises(ModelInputError, match="need 3 finite shares"):
        verify_widths(3, 3, None, [0.9, 0.5])


def test_short_drafts_are_priced_at_the_tokens_they_verify(tmp_path):
    """A measured table whose step time grows steeply with q: ngram at γ 3 proposing 1.5
    tokens per draft on average verifies 2.5 tokens per step, and the projection at the
    deployed γ is priced there, not at q = 4."""
    table = tmp_path / "steep.csv"
    table.write_text("batch_size,tokens_per_request,path,seconds\n"
                     + "".join(f"1,{q},stock,{0.010 * (1 + 0.5 * (q - 1)):.6f}\n" for q in range(1, 9)))
    d = Deployment.from_mapping({"method": "ngram", "cost_profile": str(table)}, where="test")
    survival = [0.45, 0.30, 0.20]
    al = 1 + sum(survival)
    full = recommend(RouteInputs(np.array(survival)), d)
    short = recommend(RouteInputs(np.array(survival), mean_draft_length=1.5), d)
    t = lambda q: 0.010 * (1 + 0.5 * (q - 1))  # noqa: E731
    assert full.candidates[3].speedup == pytest.approx(al * t(1) / t(4))
    assert short.candidates[3].speedup == pytest.approx(al * t(1) / t(2.5))
    assert short.candidates[3].speedup > 1.25 * full.candidates[3].speedup
    assert short.verify_widths[3] == pytest.approx(2.5)
    assert short.to_dict()["verify_widths"][3] == pytest.approx(2.5)
    # with the law of lengths (per_step_drafted or the plugin's R_k / D), γ 1 and 2 too
    reach = recommend(RouteInputs(np.array(survival), mean_draft_length=1.5, draft_reach=[0.7, 0.5, 0.3]), d)
    assert reach.candidates[1].speedup == pytest.approx((1 + 0.45) * t(1) / t(1.7))
    assert reach.candidates[2].speedup == pytest.approx((1 + 0.75) * t(1) / t(2.2))


def test_the_gain_of_the_recommended_gamma_comes_with_its_interval_and_one_more_data_figure():
    from types import SimpleNamespace

    from model.route import drafts_more_needed, more_drafts_sentence

    tight = recommend(RouteInputs(CURVE, survival_resamples=resamples(CURVE, 1_000_000), deployed_gamma=2), EAGLE_FLAT)
    point = tight.candidates[4].speedup / tight.candidates[2].speedup - 1
    assert tight.decision == "change"
    assert tight.gain.value == pytest.approx(point)
    assert tight.gain.low < point < tight.gain.high
    assert tight.gain.low > 0.03  # sure by min_gain
    assert str(tight.gain) == f"{point:+.1%} [{tight.gain.low:+.1%}, {tight.gain.high:+.1%}]"
    assert tight.to_dict()["gain"] == {"value": tight.gain.value, "low": tight.gain.low, "high": tight.gain.high}
    assert tight.drafts_factor_to_settle is None
    assert recommend(RouteInputs(CURVE, deployed_gamma=4), EAGLE_FLAT).gain is None  # the deployed γ is the best
    # an unsettled keep: its factor is the one "more drafts" figure, whatever the AL interval says
    # (γ 4 within the measured positions: more drafts at γ 2 settle it, a probe need not)
    curve = np.array([0.7, 0.49, 0.343, 0.24, 0.168])
    keep = recommend(RouteInputs(curve, survival_resamples=resamples(curve, 15), deployed_gamma=2), EAGLE_FLAT)
    factor = keep.drafts_factor_to_settle
    assert keep.decision == "keep"
    assert factor > 1
    assert f"about {factor:.1f}× the drafts" in keep.decision_reason
    wide_al = SimpleNamespace(drafts=15, mean_acceptance_length=SimpleNamespace(halfwidth=0.5), has_interval=True)
    more = drafts_more_needed(wide_al, keep)
    assert more == math.ceil((factor - 1) * 15)
    assert f"{factor:.1f}× the window's" in more_drafts_sentence(more, factor)
    assert "±0.05" in more_drafts_sentence(more, None)
    assert more_drafts_sentence(None, factor) is None
    # a sure change is decided: a wide AL interval asks for no more drafts "to decide" it
    assert tight.decision == "change" and drafts_more_needed(wide_al, tight) is None


# ------------------------------------------------------------------ recommend()'s named steps


def test_a_refused_gamma_is_never_the_best_however_its_resamples_price_it():
    """eagle3 cannot run on the specialized path: every γ ≥ 1 is priced (and beats plain
    decoding on this curve) but refused, so none is ever the best and P(best) is all γ = 0's."""
    curve = 0.9 ** np.arange(1, 8)
    dep = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat", decode_backend="latency_specialized")
    rec = recommend(RouteInputs(curve, survival_resamples=resamples(curve, 5_000), deployed_gamma=7), dep)
    refused = [c for c in rec.candidates if not c.allowed]
    assert [c.gamma for c in refused] == list(range(1, 17)) and all(c.reason for c in refused)
    assert min(c.speedup for c in refused if c.gamma <= 7) > 1.0
    assert all(c.probability_best == 0.0 for c in refused) and rec.candidates[0].probability_best == 1.0
    assert rec.recommended_gamma == 0


def test_a_refusal_names_why_a_gamma_cannot_be_deployed():
    from model.recommend import refusal

    dep = Deployment.from_mapping({"method": "ngram", "draft_cost": 0.02, "decode_backend": "latency_specialized",
                                   "cost_profile": "flat"}, where="test", base=INLINE_DEFAULTS)
    reasons = [refusal(dep, g) for g in range(5)]
    assert reasons[0] is None, "gamma 0 (no speculation) is always deployable"
    assert all(r is not None for r in reasons[1:])
    assert all("ngram" in r or "specialized" in r for r in reasons[1:])


def test_specialized_speeds_step_spreads_the_range_over_bins():
    from model.recommend import SPECIALIZED_SPEEDUP_BINS, specialized_speeds

    ranged = Deployment.from_mapping({"decode_backend": "latency_specialized", "method": "dspark",
                                      "specialized_speedup": [1.2, 1.6]}, where="test", base=INLINE_DEFAULTS)
    speeds = specialized_speeds(ranged)
    assert speeds[0] == pytest.approx(1.4)
    assert len(speeds) == 1 + SPECIALIZED_SPEEDUP_BINS
    assert speeds[1] == pytest.approx(1.2 + 0.4 / 16)
    assert speeds[-1] == pytest.approx(1.6 - 0.4 / 16)
    point = Deployment.from_mapping({"decode_backend": "latency_specialized", "method": "dspark",
                                     "specialized_speedup": 1.3}, where="test", base=INLINE_DEFAULTS)
    assert specialized_speeds(point) == [pytest.approx(1.3)]


def test_price_step_gives_one_at_gamma_zero_and_costlier_steps_after():
    from model.recommend import price_steps
    from model.speedup import CostModel

    dep = Deployment.from_mapping({"method": "draft_model", "draft_cost": 0.05, "cost_profile": "flat"},
                                  where="test", base=INLINE_DEFAULTS)
    gammas, bs, ws = np.arange(5), np.array([1, 8]), np.array([0.5, 0.5])
    price = price_steps([CostModel.for_deployment(dep)], gammas, bs, ws, [1.0], None, None, dep.objective)
    assert price.times.shape == (1, 5, 2)
    assert price.ratio[0, 0] == pytest.approx(1.0)
    assert np.all(np.diff(price.ratio[0]) < 0), "every draft token costs: τ(0)/τ(γ) falls with γ"
    assert price.ratio_u is not None
    assert price.ratio_u.shape == (1, 5)


def test_a_sure_step_past_the_measured_gamma_is_not_a_change():
    """γ 5 is expected best but not sure; γ 4's gain is sure on the tail models — but both lie
    past γ 3, the largest γ the window measured: no engine checked position 4 or 5, so moving
    there is a probe, never a change (it changed to γ 4). Without the route's engines and draft
    rate no probe can be planned: the fleet keeps γ 3 and the reasons say what to measure. A
    sure step among the measured γ stays a change (tests/test_decision_rules.py)."""
    a = np.array([0.9, 0.78, 0.62])
    dep = Deployment(method="eagle3", draft_cost=0.15, cost_profile="flat")
    rec = recommend(RouteInputs(a, survival_resamples=resamples(a, 50_000), deployed_gamma=3), dep)
    assert rec.decision == "keep"  # the fleet keeps γ 3 (its deploy line below); the γ it would probe is named
    by_gamma = {c.gamma: c for c in rec.candidates}
    assert by_gamma[5].speedup > by_gamma[4].speedup > by_gamma[3].speedup
    assert "P(γ=5 gains > 3% over γ=3) = 0.75 < 0.9" in rec.decision_reason
    assert "gamma 4 lies past gamma 3, the largest measured" in rec.decision_reason
    assert "going there is a probe, never a change" in rec.decision_reason
    assert rec.vllm_speculative_config["num_speculative_tokens"] == 3
    # a sure best needs no step: expected_best_gamma stays null
    sure = recommend(RouteInputs(CURVE, survival_resamples=resamples(CURVE, 200_000), deployed_gamma=2), EAGLE_FLAT)
    assert sure.expected_best_gamma is None


def test_the_dashboard_says_the_gamma_past_the_measured_one_is_kept_not_changed_to():
    from dashboard.views.recommendation import candidate_rows, decision_text

    a = np.array([0.9, 0.78, 0.62])
    rec = recommend(RouteInputs(a,
                    survival_resamples=resamples(a, 50_000), deployed_gamma=3), Deployment(method="eagle3", draft_cost=0.15, cost_profile="flat"))
    assert decision_text(rec).startswith("Keep γ=3")
    rows = {r["γ"]: r for r in candidate_rows(rec)}
    assert rows[3]["deploy"] and not rows[4]["deploy"] and not rows[5]["deploy"]


def _widths_with_and_without_tail_error(monkeypatch, a, deployment, drafts=1_000_000):
    import importlib

    recommend_module = importlib.import_module("model.recommend")  # model.recommend the function shadows it
    with_evidence = recommend(RouteInputs(a, survival_resamples=resamples(a, drafts), deployed_gamma=a.size), deployment)
    with monkeypatch.context() as patched:
        patched.setattr(recommend_module, "al_factors", lambda n, g, top, scale=None: np.ones((n, top + 1)))
        spread_only = recommend(RouteInputs(a, survival_resamples=resamples(a, drafts), deployed_gamma=a.size), deployment)
    assert [c.speedup for c in with_evidence.candidates] == [c.speedup for c in spread_only.candidates]
    return ([c.speedup_high - c.speedup_low for c in with_evidence.candidates],
            [c.speedup_high - c.speedup_low for c in spread_only.candidates])


def test_extrapolated_intervals_carry_the_tail_error_measured_on_real_curves(monkeypatch):
    # The public DSpark k 7 curve's first three positions: the tail models' mean misses its
    # own positions one step ahead by 0.7% (its one_step_error), so past γ 3 each
    # resample carries the real curves' errors in those units.
    a = np.array([0.94, 0.86, 0.77])
    width, bare = _widths_with_and_without_tail_error(monkeypatch, a, EAGLE_FLAT)
    for gamma in range(4):  # observed: a sampling interval only
        assert width[gamma] == pytest.approx(bare[gamma])
    assert all(width[gamma] > 1.5 * bare[gamma] for gamma in range(4, 17))
    assert width[4] < width[6] < width[10]  # widening with distance


def test_a_curve_the_tail_models_track_exactly_gets_no_borrowed_tail_error(monkeypatch):
    # Independent p: every tail model extends it exactly, and its one-step error is its
    # sampling noise, so the real curves' errors (in units of theirs) add almost nothing.
    width, bare = _widths_with_and_without_tail_error(monkeypatch, CURVE[:3], EAGLE_FLAT)
    for gamma in range(4, 17):
        assert width[gamma] == pytest.approx(bare[gamma], rel=0.25)


def test_a_measured_table_that_misses_the_engine_asks_for_the_table_not_a_rate(tmp_path):
    """A measured table prices steps in its own seconds: when it misses the observed rate, the
    warning asks to measure it again (or the drafter's cost), not for baseline_tokens_per_second,
    which a table ignores; and the console says why there is no deploy line."""
    from specdec.report import deploy_lines

    table = tmp_path / "step_costs.csv"
    table.write_text("batch_size,tokens_per_request,path,seconds\n"
                     + "".join(f"1,{q},stock,{0.01 + 0.0001 * q:.6f}\n" for q in range(1, 10)), encoding="utf-8")
    dep = Deployment(method="eagle3", draft_cost=0.05, cost_profile=str(table))
    window = RouteInputs(CURVE, survival_resamples=resamples(CURVE, 1_000_000), deployed_gamma=1)
    model_tps = float(recommend(window, dep).candidates[1].tokens_per_second)
    far = recommend(replace(window, observed_tokens_per_second=model_tps / 0.6), dep)
    assert far.model_error == pytest.approx(-0.4)
    assert f"The measured table {table} may not be these engines' step costs" in far.model_error_warning
    assert "baseline_tokens_per_second" not in far.model_error_warning and "draft_cost (0.05 now)" in far.model_error_warning
    assert far.decision == "undecided" and far.figures_needed == []  # withheld on the model error alone
    assert deploy_lines(far.to_dict()) == ["deploy: none — the cost model misses the engine's observed rate (see "
                                           "the warning above): its gains are a what-if, not a decision"]
    # no warning above: the line does not point at one (an undecided for another reason)
    assert "warning" not in deploy_lines({**far.to_dict(), "model_error_warning": None})[0]
    needed = {"vllm": {"command_line": None},
              "figures_needed": [{"key": "baseline_tokens_per_second", "default": 195.52063025179388, "changes": "x"}]}
    assert deploy_lines(needed)[1] == "- baseline_tokens_per_second (priced at the default 195.5): x"


def test_no_config_names_a_default_drafter_whatever_withholds_the_decision(tmp_path):
    """A decision withheld because the cost model misses the engine, on a drafter the user did
    not name: neither the deploy line nor the replay (benchmark) config names the default one."""
    table = tmp_path / "step_costs.csv"
    table.write_text("batch_size,tokens_per_request,path,seconds\n"
                     + "".join(f"1,{q},stock,{0.01 + 0.0001 * q:.6f}\n" for q in range(1, 10)), encoding="utf-8")
    dep = Deployment.from_mapping({"cost_profile": str(table), "draft_cost": 0.05}, where="test")
    window = RouteInputs(CURVE, survival_resamples=resamples(CURVE, 1_000_000), deployed_gamma=1)
    model_tps = float(recommend(window, dep).candidates[1].tokens_per_second)
    far = recommend(replace(window, observed_tokens_per_second=model_tps / 0.6), dep)
    assert far.decision == "undecided" and far.model_error_warning
    assert [n.key for n in far.figures_needed][:1] == ["method"]
    assert far.replay_config is None and far.vllm_speculative_config is None and far.vllm_command_line is None


def test_the_deployed_gammas_measured_speedup_is_the_engines_rate_over_the_users_plain_decode():
    """Beside the table's projection, the engines' own rate at the deployed γ over the plain
    decode the user gave: where the cost model misses them, the two disagree and the measured
    one says so (the real suffix γ 7 page: 200.1 tok/s against a configured 284.8 is 0.70×)."""
    dep = Deployment(method="suffix", cost_profile="flat", baseline_tokens_per_second=284.8)
    rec = recommend(RouteInputs(CURVE, observed_tokens_per_second=200.1), dep)
    measured = rec.deployed_speedup_measured
    assert measured.value == pytest.approx(200.1 / 284.8) and measured.gamma == rec.deployed_gamma == 7
    assert measured.plain_tokens_per_second == pytest.approx(284.8) and measured.plain_source == "configured"
    assert measured.rests_on_defaults == ()
    assert "0.70x" in measured.describe() and "slower than plain decode" in measured.describe()
    deployed_row = next(c for c in rec.candidates if c.gamma == 7)
    assert deployed_row.speedup > 1.5  # the flat model's projection, which the measurement contradicts
    doc = rec.to_dict()["deployed_speedup_measured"]
    assert doc["value"] == pytest.approx(0.7026, abs=1e-4) and doc["summary"] == measured.describe()
    faster = recommend(RouteInputs(CURVE, observed_tokens_per_second=400.0), dep).deployed_speedup_measured
    assert faster.value == pytest.approx(400 / 284.8) and "slower" not in faster.describe()


def test_no_measured_speedup_over_a_plain_decode_the_user_did_not_give():
    observed = RouteInputs(CURVE, observed_tokens_per_second=200.0)
    # no baseline given: the anchor is the observed rate itself, 1 at the deployed γ by construction
    for dep in (Deployment(cost_profile="flat", configured=frozenset({"cost_profile"})),
                Deployment(method="eagle3", draft_cost=0.1, configured=frozenset({"method", "draft_cost"}))):
        rec = recommend(observed, dep)
        assert rec.anchor.source == "observed" and rec.deployed_speedup_measured is None
    # a default plain-decode rate would make it a default's answer
    assert deployed_speedup(7, 200.0, 118.0, "default", None, ()) is None
    assert deployed_speedup(7, 200.0, 118.0, "configured", None, ()).value == pytest.approx(200 / 118)
    assert deployed_speedup(0, 200.0, 118.0, "configured", None, ()) is None  # nothing drafted: no speedup to measure
    # no rate observed
    assert recommend(RouteInputs(CURVE), Deployment(cost_profile="flat")).deployed_speedup_measured is None
    flagged = Deployment(cost_profile="flat", baseline_tokens_per_second=250.0, flagged=frozenset({
        "baseline_tokens_per_second"}))
    assert recommend(observed, flagged).deployed_speedup_measured.plain_source == "flag"


def test_at_a_batch_mix_above_one_the_plain_decode_says_which_roofline_defaults_price_it():
    mix = {1: 0.5, 8: 0.5}
    given = frozenset({"method", "draft_cost", "cost_profile", "baseline_tokens_per_second"})
    dep = Deployment(method="eagle3", draft_cost=0.1, cost_profile="roofline", baseline_tokens_per_second=100.0,
                     configured=given)
    rec = recommend(RouteInputs(CURVE, observed_tokens_per_second=120.0, batch_mix=mix), dep)
    measured = rec.deployed_speedup_measured
    assert measured.carried_by == "roofline" and measured.rests_on_defaults == ("model", "gpu", "tensor_parallel_size")
    assert measured.plain_tokens_per_second < 100.0  # batch 8 steps are slower per user on the roofline
    assert measured.value == pytest.approx(120.0 / measured.plain_tokens_per_second)
    assert "carried to the route's batch mix by the roofline profile" in measured.describe()
    assert "rests on the default model, gpu, tensor_parallel_size" in measured.describe()
    at_one = recommend(RouteInputs(CURVE, observed_tokens_per_second=120.0, batch_mix={1: 1.0}), dep)
    assert at_one.deployed_speedup_measured.rests_on_defaults == () and at_one.deployed_speedup_measured.carried_by is None
    assert at_one.deployed_speedup_measured.plain_tokens_per_second == pytest.approx(100.0)
    flat = recommend(RouteInputs(CURVE, observed_tokens_per_second=120.0, batch_mix=mix),
                     replace(dep, cost_profile="flat")).deployed_speedup_measured
    assert flat.carried_by == "flat" and flat.rests_on_defaults == ()


def test_no_measured_speedup_where_the_plain_side_is_not_the_stock_decode_at_the_windows_gamma():
    # latency_specialized: the γ 0 row runs the specialized kernels at a configured guess of s
    specialized = Deployment(method="dspark", decode_backend="latency_specialized", cost_profile="flat",
                             baseline_tokens_per_second=100.0)
    rec = recommend(RouteInputs(CURVE, observed_tokens_per_second=200.0), specialized)
    assert rec.model_error is not None and rec.deployed_speedup_measured is None
    # a deployed γ other than the window's: the observed rate is the window's γ's
    other = recommend(RouteInputs(CURVE, observed_tokens_per_second=200.0, deployed_gamma=3), EAGLE_FLAT)
    assert other.deployed_gamma == 3 and other.deployed_speedup_measured is None


def _spread(relative_sd, n=400, seed=3):
    """The observed rate's resamples as a window's rows would give them: factors about 1."""
    from acceptance.observed_rate import RateSpread

    rng = np.random.default_rng(seed)
    return RateSpread(1.0 + relative_sd * rng.standard_normal(n), rows=40, block_length=4, unit="scrape intervals")


def test_what_the_engines_measure_against_plain_decode_decides_between_the_two():
    """The fleet's γ 7 measured at 0.60× the user's own plain decode at batch 1, sure on the
    observed rate's own resamples: speculation off, measured, whatever the table ranks (the
    flat table puts every γ above 1)."""
    dep = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat", baseline_tokens_per_second=100.0,
                     min_gain=0.5, configured=frozenset({"method", "draft_cost", "cost_profile",
                                                         "baseline_tokens_per_second"}))
    kept = recommend(RouteInputs(CURVE, observed_tokens_per_second=195.0, observed_rate_spread=_spread(0.01)), dep)
    assert kept.decision == "keep" and kept.deployed_speedup_measured.value > 1  # 1.95×: measured faster, kept
    slow = recommend(RouteInputs(CURVE, observed_tokens_per_second=60.0, observed_rate_spread=_spread(0.01)), dep)
    assert slow.deployed_speedup_measured.value == pytest.approx(0.60)
    assert slow.decision == "off" and slow.decision_basis == "measured" and slow.gamma_to_deploy == 0
    assert slow.gain.value == pytest.approx(1 / 0.6 - 1) and slow.gain.low < slow.gain.value < slow.gain.high
    assert "the engines measure gamma 7 at 0.60x" in slow.decision_reason
    assert "turning speculation off is faster whatever the table projects" in slow.decision_reason
    assert slow.vllm_speculative_config is None and slow.vllm_command_line is not None
    from dashboard.views.recommendation import decision_text
    assert decision_text(slow).startswith("Turn speculation off (γ 7 → 0), measured gain +66.7% [")
    doc = slow.to_dict()["deployed_speedup_measured"]
    assert doc["decides"] == "off" and doc["probability_plain_decode_gains"] == 1.0 and doc["low"] < 0.6 < doc["high"]
    # off would gain 43% at 0.70×: within min_gain 50%, nothing measured decides (and it says it measured slower)
    near = recommend(RouteInputs(CURVE, observed_tokens_per_second=70.0, observed_rate_spread=_spread(0.01)), dep)
    assert near.decision == "keep" and near.decision_basis == "model"
    assert "runs slower than plain decode" in near.deployed_speedup_measured.describe()
    # a rate as uncertain as the difference: not sure, the measurement decides nothing
    noisy = recommend(RouteInputs(CURVE, observed_tokens_per_second=60.0, observed_rate_spread=_spread(0.4)), dep)
    assert noisy.decision_basis == "model" and noisy.to_dict()["deployed_speedup_measured"]["decides"] is None
    # without the rate's resamples (an inline curve) there is no interval to be sure on
    bare = recommend(RouteInputs(CURVE, observed_tokens_per_second=60.0), dep)
    assert bare.decision_basis == "model" and bare.deployed_speedup_measured.interval is None
    # at a larger mix the flat profile carries the batch-1 rate there: partly a model, it decides nothing
    mixed = recommend(RouteInputs(CURVE, observed_tokens_per_second=60.0, batch_mix={1: 0.5, 8: 0.5},
                                  observed_rate_spread=_spread(0.01)), dep)
    assert mixed.deployed_speedup_measured.carried_by == "flat" and mixed.decision_basis == "model"
    assert not mixed.deployed_speedup_measured.slower_than_plain_decode
    assert near.deployed_speedup_measured.slower_than_plain_decode


def test_a_models_off_is_overruled_where_the_engines_measure_speculation_faster():
    """A dear drafter the model prices off (c 0.9: every γ below 1 on the flat table), while
    the engines measure γ 7 at 1.5× the user's plain decode: keep, measured."""
    dep = Deployment(method="eagle3", draft_cost=0.9, cost_profile="flat", baseline_tokens_per_second=100.0,
                     configured=frozenset({"method", "draft_cost", "cost_profile", "baseline_tokens_per_second"}))
    window = RouteInputs(CURVE, survival_resamples=resamples(CURVE, 1_000_000), observed_tokens_per_second=150.0,
                         observed_rate_spread=_spread(0.01))
    model_only = recommend(replace(window, observed_rate_spread=None), dep)
    assert model_only.decision == "undecided" and model_only.decided.withheld.kind == "off"  # on the model: a what-if
    rec = recommend(window, dep)
    assert rec.decision == "keep" and rec.decision_basis == "measured" and rec.gamma_to_deploy == 7
    assert "speculation stays on whatever the table projects" in rec.decision_reason


def test_the_models_error_at_the_deployed_gamma_widens_every_other_candidate():
    """A model 15% off at the measured γ cannot be sure of a gain the size of its error
    elsewhere: the unmeasured candidates' intervals widen by it, the measured ones do not, and
    what keeps a plausible gain unsure is the model, which more drafts do not narrow."""
    from model.model_error_spread import model_error_factors

    factors = model_error_factors(2000, 12, (0, 3), 0.15)
    assert (factors[:, [0, 3]] == 1).all() and np.std(factors[:, 11]) == pytest.approx(0.15, rel=0.02)
    assert np.mean(1.188 * factors[:, 11] - 1 > 0.03) == pytest.approx(0.81, abs=0.01)  # not sure of +18.8%
    assert (model_error_factors(10, 4, (0, 1), None) == 1).all()
    dep = Deployment(method="eagle3", draft_cost=0.1, cost_profile="flat", baseline_tokens_per_second=100.0)
    # the window's own γ 7, its rate with an interval from its rows: a measured point
    window = RouteInputs(CURVE, survival_resamples=resamples(CURVE, 1_000_000), observed_rate_spread=_spread(0.001))
    exact = recommend(window, dep)
    model_tps = float(exact.candidates[7].tokens_per_second)
    off = recommend(replace(window, observed_tokens_per_second=model_tps / 1.12), dep)
    assert off.model_error == pytest.approx(0.12) and off.model_error_warning is None
    width = {g: c.speedup_high - c.speedup_low for g, c in enumerate(off.candidates)}
    exact_width = {g: c.speedup_high - c.speedup_low for g, c in enumerate(exact.candidates)}
    assert width[7] == pytest.approx(exact_width[7]) and width[4] > 5 * exact_width[4]
    assert exact.decision == "change" and exact.recommended_gamma == 4
    assert off.decision == "keep"  # +7.6% for γ 4 is sure only on an exact model
    assert "it rests on the cost model, which misses the engines' rate at γ=7 by +12.0%" in off.decision_reason
    assert off.drafts_factor_to_settle is None
    # without the rate's interval the error cannot be told from its noise: nothing is widened
    bare = recommend(replace(window, observed_tokens_per_second=model_tps / 1.12, observed_rate_spread=None), dep)
    assert bare.candidates[4].speedup_high - bare.candidates[4].speedup_low == pytest.approx(exact_width[4])


def test_beside_a_measured_off_the_model_may_change_to_a_third_gamma_it_reproduces_the_point_for():
    """eagle3 at c 0.4 on the flat table: γ 7 at 0.82×, γ 2 at 1.22× plain decode. The engines
    measure γ 7 slower than plain decode; a model that meets them there changes to γ 2, sure of
    it over plain decode; one 14% off there is not sure of +22% at γ 2 once that error is
    carried into it (P = Φ(1.1) = 0.86), so off."""
    dep = Deployment(method="eagle3", draft_cost=0.4, cost_profile="flat", baseline_tokens_per_second=100.0,
                     configured=frozenset({"method", "draft_cost", "cost_profile", "baseline_tokens_per_second"}))
    window = RouteInputs(CURVE, survival_resamples=resamples(CURVE, 1_000_000), observed_rate_spread=_spread(0.005))
    model_tps = float(recommend(window, dep).candidates[7].tokens_per_second)
    met = recommend(replace(window, observed_tokens_per_second=model_tps), dep)
    assert met.deployed_speedup_measured.value == pytest.approx(0.82, abs=0.01) and abs(met.model_error) < 1e-9
    assert met.decision == "change" and met.recommended_gamma == 2 and met.decision_basis == "measured"
    assert "so speculation as deployed is slower than plain decode" in met.decision_reason
    assert "the table's best gamma 2: P(gamma 2 gains > 3% over plain decode) = 1.00" in met.decision_reason
    assert met.vllm_speculative_config["num_speculative_tokens"] == 2
    missed = recommend(replace(window, observed_tokens_per_second=model_tps / 1.14), dep)
    assert missed.model_error == pytest.approx(0.14) and missed.model_error_warning is None
    assert missed.decision == "off" and missed.decision_basis == "measured"
    assert "the table's best gamma 2 is not acted on: P(gamma 2 gains > 3% over plain decode) = 0.8" in \
        missed.decision_reason
    assert "with the model's +14.0% at the deployed gamma carried into it" in missed.decision_reason
