"""The probe: one engine of a route run at another γ to measure what no window at the
deployed γ can (docs/MODEL.md, Decisions past the deployed γ; The specialized decode path).

  plan                what a probe is, its value against its cost, the drafts and time it
                      needs, and a running probe carried on (``Probe``, ``plan_probe``)
  specialized_speedup how far a decision on latency_specialized rests on the configured
                      speedup (its break-even), and the probe whose latency measures it
  running             a running probe's segment joined to the deployed one (``ProbeSegment``)
  evidence            what a route's window holds for a probe (``ProbeEvidence``: the running
                      probe, a segment at another γ with its own latency, the earlier window)
  measured_speedup    the specialized speedup measured from the probe's latency beside the
                      fleet's (``measure_specialized_speedup``)
  lookback            the window in which a stopped probe last ran beside the deployed γ,
                      whose measurement later windows keep

The decision rules that start, carry on or stop a probe are model.decision.rules'; what
acceptance/ gives it is each γ segment with its draft flow, latency and batch mix
(acceptance.segment_measures).
"""

from .plan import (PROBE_ENGINES, PROBE_MIN_DRAFTS, PROBE_MIN_ROWS, Probe, ProbeInputs, RunningProbe,
                   continued_probe, plan_probe)

__all__ = ["PROBE_ENGINES", "PROBE_MIN_DRAFTS", "PROBE_MIN_ROWS", "Probe", "ProbeInputs", "RunningProbe",
           "continued_probe", "plan_probe"]
