"""recommend()'s one input: a route's window as the cost model reads it (``RouteInputs``), and
its check (``check_inputs``), which turns it into arrays or names the input that is wrong
(ModelInputError).

Beside the survival curve a_1..a_γ (P(at least k draft tokens accepted)) a window may carry:
``survival_resamples`` (n, γ): the curve's resamples, whose spread the intervals and the
decision's probabilities carry (None: no interval, and a keep). ``deployed_gamma``: the γ the
window ran (default the curve's length). ``batch_mix``: request weights w_B by batch size (None:
batch 1), and ``batch_mix_resamples`` (m, nB): resampled weights over its batch sizes in
ascending order; survival resample i is priced at mix row i mod m, so the intervals carry the
batch mix's sampling error too. ``mix_in_time``: the mix was converted from time shares at the
deployed γ (num_requests_running), so a resample priced at another specialized speedup
re-weights it by that speedup's step times (w_B ∝ B·u_B / t_B(γ_d)).
``survival_by_batch``: {batch size: a_1..a_γ} for batch sizes of the mix whose own curve is
known (specdec's plugin); the others use the pooled curve.
``eligibility``: the clean share of steps for the specialized path (an Eligibility, a number,
or None = assumed 1). ``observed_tokens_per_second``: per-user decode tok/s at the deployed γ
(1 / mean ITL), which anchors the profile when baseline_tokens_per_second is not configured
(model.anchor; ``observed_latency_source`` says where it came from) and which model_error
compares the model with. ``mean_draft_length`` (T / D) and ``draft_reach`` (R_k / D): the
drafter's draft lengths at the observed γ, so that a step is priced at the tokens it verifies
(speedup.verify_widths), not γ + 1. ``undrafted_token_share``: ν, the share of decode tokens
from steps that carried no draft (acceptance.counts.undrafted_token_share; None = every step
drafted). ``step_sequences``: the requests' drafted steps in order at the deployed γ
(per-request ``detailed``): AL and the verify width of every candidate then come from
replaying them (acceptance.step_replay), once per tail model's guess of the positions after
full drafts. ``requests`` (acceptance.route_estimate.RequestRows): the window's rows one per
request, which a percentile objective prices. ``traffic`` (engines, draft rate, rows) and
``running_probe``: what a probe is planned from. ``speedup_measured``: the deployment's
specialized_speedup is a probe's measurement (model.probe.measured_speedup).
``observed_rate_spread``: the observed rate's resamples from the window's own rows
(acceptance.observed_rate), which say how sure what the engines measure is (model.deployed_speedup).
``measured_gammas``: the γ of the window's segments that measured their own step time
(acceptance.step_times): past the largest of them and the deployed γ no point bears on a γ
(model.decision.rules.unmeasured). ``segment_rates``: every γ's own rate with its resamples
where its segment keeps its latency block by block (acceptance.observed_rate.segment_rates),
which the decision compares between measured γ (model.decision.rules.between_segments).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from acceptance.definitions import check_survival_curve
from acceptance.observed_rate import RateSpread, SegmentRate
from acceptance.segment_measures import RouteTraffic
from acceptance.route_estimate import RequestRows
from acceptance.step_replay import StepSequence, replay_by_gamma, survival_and_reach, tokens_and_widths

from .deployment import Deployment, ModelInputError
from .drafters import drafter_for
from .extrapolate import bonus_acceptances
from .probe import RunningProbe
from .specialized import Eligibility
from .speedup import normalise_batch_mix, verify_widths


@dataclass(frozen=True, eq=False)
class RouteInputs:
    """One route's window, as recommend() prices it (module docstring: each field)."""

    survival: Sequence[float] | np.ndarray
    survival_resamples: np.ndarray | None = None
    deployed_gamma: int | None = None
    batch_mix: Mapping[int, float] | None = None
    eligibility: Eligibility | float | None = None
    gamma_max: int = 16  # the candidates: 0 .. min(gamma_max, the drafter's block when it has one)
    level: float = 0.9  # of the intervals
    observed_tokens_per_second: float | None = None
    batch_mix_resamples: np.ndarray | None = None
    survival_by_batch: Mapping[int, Sequence[float]] | None = None
    mix_in_time: bool = False
    mean_draft_length: float | None = None
    draft_reach: Sequence[float] | None = None
    observed_latency_source: str | None = None
    undrafted_token_share: float | None = None
    step_sequences: Sequence[StepSequence] | None = None
    traffic: RouteTraffic | None = None
    running_probe: RunningProbe | None = None
    requests: RequestRows | None = None
    speedup_measured: bool = False
    observed_rate_spread: RateSpread | None = None
    measured_gammas: tuple[int, ...] = ()
    segment_rates: tuple[SegmentRate, ...] = ()


@dataclass(frozen=True, eq=False)
class CheckedInputs:
    """RouteInputs as arrays, every one checked, with the requests' steps replayed."""

    given: RouteInputs
    survival: np.ndarray  # a_1..a_g
    resamples: np.ndarray | None  # (n, g), the finite ones
    deployed: int
    gammas: np.ndarray  # the candidates 0..top
    batch_sizes: np.ndarray  # (nB,) ascending
    weights: np.ndarray  # (nB,) w_B, summing to 1
    mix_resamples: np.ndarray | None  # (m, nB) rows summing to 1
    specialized: bool  # decode_backend latency_specialized
    eligibility: Eligibility | None  # the specialized path's clean share (None off the path)
    undrafted_share: float | None  # ν priced: None on the specialized path (dspark drafts every step)
    per_batch: np.ndarray | None  # (nB, g) each batch size's curve, or None
    widths: np.ndarray | None  # (G,) tokens a step verifies per request (None: γ + 1)
    replayed: np.ndarray | None  # (M, requests, G, 4) expected D, A, T, U per tail model (None: not replayed)
    replayed_al: np.ndarray | None  # (M, G) AL of the replayed steps

    @property
    def observed(self) -> int:
        """The positions the window measured."""
        return int(self.survival.size)

    @property
    def top(self) -> int:
        return int(self.gammas[-1])

    @property
    def level(self) -> float:
        return float(self.given.level)


def check_inputs(inputs: RouteInputs, deployment: Deployment) -> CheckedInputs:
    """``inputs`` as arrays for ``deployment``, or ModelInputError naming the input that is wrong."""
    if not isinstance(inputs, RouteInputs):
        raise ModelInputError("inputs: must be a RouteInputs")
    if not isinstance(deployment, Deployment):
        raise ModelInputError("deployment: must be a Deployment")
    a, resamples, deployed, gammas = _checked_curves(inputs, deployment)
    g, top = a.size, int(gammas[-1])
    bs, ws = normalise_batch_mix(inputs.batch_mix)
    specialized = deployment.decode_backend == "latency_specialized"
    _check_rates(inputs.observed_tokens_per_second, inputs.undrafted_token_share)
    share = inputs.undrafted_token_share
    nu = None if specialized or not share else float(share)  # dspark drafts always
    widths = None if specialized else verify_widths(top, g, inputs.mean_draft_length, inputs.draft_reach)
    per_batch = _per_batch_curves(inputs.survival_by_batch, bs, a)  # (nB, g) or None
    replayed, replayed_al, widths = _replayed(inputs.step_sequences, g, top, widths,
                                              specialized or per_batch is not None)
    return CheckedInputs(
        given=inputs, survival=a, resamples=resamples, deployed=deployed, gammas=gammas, batch_sizes=bs, weights=ws,
        mix_resamples=_checked_mix_resamples(inputs.batch_mix_resamples, resamples, len(bs)), specialized=specialized,
        eligibility=_eligibility(inputs.eligibility) if specialized else None, undrafted_share=nu, per_batch=per_batch,
        widths=widths, replayed=replayed, replayed_al=replayed_al)


def _checked_curves(inputs: RouteInputs, deployment: Deployment
                    ) -> tuple[np.ndarray, np.ndarray | None, int, np.ndarray]:
    """(a, finite resamples or None, deployed γ, candidates 0..top) after checking every input."""
    a = np.asarray(inputs.survival, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ModelInputError("survival: must be a non-empty curve a_1..a_γ")
    check_survival_curve(a, "survival", ModelInputError)
    g, gamma_max, level = a.size, inputs.gamma_max, inputs.level
    if isinstance(gamma_max, bool) or not isinstance(gamma_max, int) or gamma_max < 0:
        raise ModelInputError(f"gamma_max must be an integer ≥ 0, got {gamma_max!r}")
    if not (isinstance(level, float) or isinstance(level, int)) or not 0 < level < 1:
        raise ModelInputError(f"level must be in (0, 1), got {level!r}")
    block = drafter_for(deployment.method).max_gamma  # a parallel drafter's block: no candidate past it
    top = gamma_max if block is None else min(gamma_max, max(block, g))
    deployed = g if inputs.deployed_gamma is None else inputs.deployed_gamma
    if isinstance(deployed, bool) or not isinstance(deployed, (int, np.integer)) or deployed < 0:
        raise ModelInputError(f"deployed_gamma must be an integer ≥ 0, got {inputs.deployed_gamma!r}")
    if deployed > top:
        raise ModelInputError(f"deployed_gamma {deployed} is outside the candidates 0..{top}")
    resamples = None
    if inputs.survival_resamples is not None:
        resamples = np.asarray(inputs.survival_resamples, dtype=float)
        if resamples.ndim != 2 or resamples.shape[1] != g:
            raise ModelInputError(f"survival_resamples: must have shape (n, {g}), got {resamples.shape}")
        resamples = resamples[np.all(np.isfinite(resamples), axis=1)]  # resamples without drafts
        if resamples.shape[0] == 0:
            raise ModelInputError("survival_resamples: no finite resample")
        check_survival_curve(resamples, "survival_resamples", ModelInputError)
    return a, resamples, int(deployed), np.arange(top + 1)


def _checked_mix_resamples(batch_mix_resamples: np.ndarray | None, resamples: np.ndarray | None, n_sizes: int
                           ) -> np.ndarray | None:
    """The resampled mix rows normalised to 1 (None without them or without survival resamples)."""
    if batch_mix_resamples is None or resamples is None:
        return None
    mix_res = np.asarray(batch_mix_resamples, dtype=float)
    if mix_res.ndim != 2 or mix_res.shape[1] != n_sizes or mix_res.shape[0] == 0:
        raise ModelInputError(f"batch_mix_resamples: must have shape (m, {n_sizes}), got {mix_res.shape}")
    if not np.all(np.isfinite(mix_res)) or np.any(mix_res < 0) or np.any(mix_res.sum(axis=1) <= 0):
        raise ModelInputError("batch_mix_resamples: weights must be finite, ≥ 0 and not all 0")
    normalised: npt.NDArray[np.float64] = mix_res / mix_res.sum(axis=1, keepdims=True)
    return normalised


def _eligibility(eligibility: Eligibility | float | None) -> Eligibility:
    """The specialized path's clean share of steps as an Eligibility (None: assumed 1)."""
    if eligibility is None:
        elig = Eligibility(1.0, "assumed: every decode step clean (no iteration_tokens data)")
    elif isinstance(eligibility, Eligibility):
        elig = eligibility
    elif isinstance(eligibility, (int, float)) and not isinstance(eligibility, bool):
        elig = Eligibility(float(eligibility), "given")
    else:
        raise ModelInputError(f"eligibility: must be an Eligibility or a share in [0, 1], got {eligibility!r}")
    if not 0.0 <= elig.share <= 1.0:
        raise ModelInputError(f"eligibility: share must be in [0, 1], got {elig.share!r}")
    return elig


def _check_rates(observed_tokens_per_second: float | None, undrafted_token_share: float | None) -> None:
    if observed_tokens_per_second is not None and (
            not isinstance(observed_tokens_per_second, (int, float)) or not observed_tokens_per_second > 0):
        raise ModelInputError(f"observed_tokens_per_second must be > 0, got {observed_tokens_per_second!r}")
    if undrafted_token_share is not None and not (
            isinstance(undrafted_token_share, (int, float)) and 0.0 <= undrafted_token_share < 1.0):
        raise ModelInputError(f"undrafted_token_share must be in [0, 1), got {undrafted_token_share!r}")


def _per_batch_curves(survival_by_batch: Mapping[int, Sequence[float]] | None, batch_sizes: np.ndarray,
                      pooled: np.ndarray) -> np.ndarray | None:
    """(nB, g) curves over the mix's batch sizes: each one's own where given, else pooled
    (None when no batch size of the mix has its own)."""
    if survival_by_batch is None:
        return None
    if not isinstance(survival_by_batch, Mapping):
        raise ModelInputError("survival_by_batch: must be a {batch size: survival curve} mapping")
    curves = np.tile(pooled, (len(batch_sizes), 1))
    own = False
    for j, b in enumerate(batch_sizes.tolist()):
        curve = survival_by_batch.get(b)
        if curve is None:
            continue
        c = np.asarray(curve, dtype=float)
        if c.shape != pooled.shape:
            raise ModelInputError(f"survival_by_batch[{b}]: must have {pooled.size} values like the survival curve, "
                                  f"got {c.size}")
        check_survival_curve(c, f"survival_by_batch[{b}]", ModelInputError)
        curves[j] = c
        own = True
    return curves if own else None


def _replayed(step_sequences: Sequence[StepSequence] | None, g: int, top: int, widths: np.ndarray | None,
              not_replayable: bool) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(replayed, its AL, the verify widths): replayed (M, requests, G, 4) — expected D, A, T, U
    per tail model, request and candidate — the requests' steps replayed at every candidate,
    once per tail model's guess of the positions after full drafts (they are unseen); AL
    (M, G) and the widths from them. (None, None, ``widths``) without steps or where they are
    not replayed (the specialized path, per-batch curves)."""
    if step_sequences is None or not_replayable:
        return None, None, widths
    if any(seq.gamma != g for seq in step_sequences) or not step_sequences:
        raise ModelInputError(f"step_sequences: need the requests' steps at the deployed gamma {g}")
    replayed = np.stack([replay_by_gamma(step_sequences, top, q)
                         for q in bonus_acceptances(*survival_and_reach(step_sequences))])
    replayed_al, replayed_widths = tokens_and_widths(replayed.sum(axis=1))  # (M, G) each
    return replayed, replayed_al, replayed_widths.mean(axis=0)
