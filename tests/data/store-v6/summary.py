"""What a window of the version-6 store says, as JSON-able values: the same function reads it
with the code that wrote the file (make_store.py, expected.json) and with today's (the
migration test), so the two can be compared exactly."""

from __future__ import annotations


def window_summary(w) -> dict:
    """Segments (γ, span, engines, counts, per-block sums, ITL, batch samples, plugin drafts),
    the step shape, events and the engines not speculating at the end."""
    segments = []
    for s in w.segments:
        iv = s.intervals
        segments.append({
            "gamma": s.gamma, "start": s.start, "end": s.end, "engines": sorted(e.engine for e in s.engines),
            "total": [s.total.drafts, s.total.draft_tokens, s.total.accepted_tokens,
                      list(s.total.accepted_per_position)],
            "blocks": len(iv.start), "block_sums": iv.counts.sum(axis=0).tolist(),
            "block_ends": [float(iv.end[0]), float(iv.end[-1])] if len(iv.end) else [],
            "draft_tokens_per_position": list(s.draft_tokens_per_position or ()),
            "itl": [s.itl_sum_s, s.itl_count],
            "batch_samples": {str(k): v for k, v in sorted((s.batch_samples or {}).items())},
            "plugin_drafts": ({k: c.drafts for k, c in sorted(s.plugin.by_batch.items())}
                              if s.plugin is not None else None),
        })
    sh = w.step_shape
    return {
        "segments": segments,
        "step_shape": {"batch_time_shares": {str(k): v for k, v in sorted(sh.batch_time_shares.items())},
                       "iteration_tokens": {repr(k): v for k, v in sorted(sh.iteration_tokens.items())},
                       "itl_mean_s": sh.itl_mean_s, "samples": sh.samples, "sample_pairs": sh.sample_pairs,
                       "repeated_pairs": sh.repeated_pairs},
        "events": [[e.time, e.engine, e.kind] for e in w.events],
        "not_speculating": sorted(e.engine for e in w.not_speculating),
    }
