"""AL(γ) of every candidate and every tail model, at the point and for each resample: from the
pooled survival curve, the per-batch curves, the requests' replayed steps, or past the deployed
γ a running probe's own curve (``CurveTokens``). model.recommend prices these tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from acceptance.definitions import acceptance_length_by_gamma, monotone_survival
from acceptance.step_replay import resampled_tokens

from .extrapolate import extend_survival
from .probe import RunningProbe
from .speedup import mix_acceptance_length


@dataclass(frozen=True)
class CurveTokens:
    """Expected tokens per step AL(γ) of every tail model: from the pooled curve, the
    per-batch curves, or the replayed steps. With ``own`` (a running probe's own curve, when
    its shared positions disagree with the deployed segment's) the candidates past
    ``own_from`` (the deployed γ) take their AL from it instead, resample i from its
    resample i mod n."""

    pooled: np.ndarray  # a_1..a_g
    per_batch: np.ndarray | None  # (nB, g)
    replayed: np.ndarray | None  # (M, requests, G, 4)
    replayed_al: np.ndarray | None  # (M, G) AL of the replayed steps
    reach: np.ndarray | None
    top: int
    own: np.ndarray | None = None  # a_1..a_γp of the probe alone
    own_resamples: np.ndarray | None = None  # (n_p, γ_p)
    own_from: int = 0
    fixed_requests: bool = False  # the replay without resampling its requests (without_sampling)

    @property
    def extra(self) -> int:
        """Positions past the observed γ."""
        return max(0, self.top - self.pooled.size)

    def without_sampling(self) -> "CurveTokens":
        """The same with the replay's requests and the probe's own resamples at their point (the
        pooled resamples are the caller's): what is left is the tail models' doubt."""
        own = None
        if self.own is not None:
            assert self.own_resamples is not None  # own_curve gives both or neither
            own = np.broadcast_to(self.own, self.own_resamples.shape)
        return replace(self, own_resamples=own, fixed_requests=True)

    def point(self, ws: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray | None]:
        """(M, G) AL at the point, and (M, nB, G) per batch size when the curves are per batch."""
        if self.replayed_al is not None:
            return self.replayed_al, None
        if self.per_batch is None:
            return self._own_past(self._pooled_tokens(self.pooled), self.own), None
        by_batch = acceptance_length_by_gamma(extend_survival(self.per_batch, self.extra, self.reach), self.top)
        return mix_acceptance_length(by_batch, ws), by_batch

    def resampled(self, resamples: np.ndarray, mix_w: np.ndarray, row: np.ndarray) -> np.ndarray:
        """(S or 1, M, n, G) AL of each survival resample (row: its mix row)."""
        n = resamples.shape[0]
        if self.replayed is not None and self.fixed_requests:
            assert self.replayed_al is not None  # model.route_inputs replays both or neither
            return np.broadcast_to(self.replayed_al[:, None, :], (self.replayed_al.shape[0], n,
                                                                   self.replayed_al.shape[1]))[None]
        if self.replayed is not None:
            return resampled_tokens(self.replayed, n)[None]  # every replay with the same draws
        if self.per_batch is None:
            own = None
            if self.own is not None:
                assert self.own_resamples is not None  # own_curve gives both or neither
                own = self.own_resamples[np.arange(n) % self.own_resamples.shape[0]]
            return self._own_past(self._pooled_tokens(resamples), own)[None]
        # every batch size's curve shifted by the pooled resample's deviation
        shifted = monotone_survival(self.per_batch[None] + (resamples - self.pooled)[:, None, :])  # (n, nB, g)
        al_b_res = acceptance_length_by_gamma(extend_survival(shifted, self.extra, self.reach), self.top)
        return np.stack([mix_acceptance_length(al_b_res, w[row]) for w in mix_w])

    def _pooled_tokens(self, curves: np.ndarray) -> np.ndarray:
        return acceptance_length_by_gamma(extend_survival(curves, self.extra, self.reach), self.top)

    def _own_past(self, tokens: np.ndarray, own: np.ndarray | None) -> np.ndarray:
        """``tokens`` (M, ..., G) with the candidates past own_from from the probe's own curve."""
        if own is None:
            return tokens
        own_tokens = acceptance_length_by_gamma(extend_survival(own, self.top - own.shape[-1]), self.top)
        return np.concatenate([tokens[..., : self.own_from + 1], own_tokens[..., self.own_from + 1:]], axis=-1)


def own_curve(running: RunningProbe | None, deployed: int
              ) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.float64] | None, int]:
    """(own, own_resamples, own_from) for CurveTokens: a running probe's own curve when it
    is to price the candidates past the deployed γ, else none."""
    if running is None or running.own_survival is None:
        return None, None, 0
    return np.asarray(running.own_survival, dtype=float), np.asarray(running.own_resamples, dtype=float), deployed
