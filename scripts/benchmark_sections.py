"""The sections of docs/BENCHMARKS.md, one renderer a results file: each turns the JSON a
benchmark wrote into the section's lines (tables and sentences), reading nothing else.
scripts/benchmarks_doc.py says which file each renders and writes the document.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ helpers
def _num(x, fmt: str = ".3g") -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    if isinstance(x, float):
        return format(x, fmt)
    return str(x)


def _pct(x, fmt: str = ".1%") -> str:
    return "—" if x is None else format(x, fmt)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def _flat_rows(items: list[dict]) -> list[str]:
    """A list of flat dicts as one table (nested values shown as JSON)."""
    keys: list[str] = []
    for item in items:
        keys += [k for k in item if k not in keys]

    def cell(v) -> str:
        if isinstance(v, (dict, list)):
            return "`" + json.dumps(v, ensure_ascii=False) + "`"
        return _num(v) if isinstance(v, (int, float)) else str(v)

    return _table(keys, [[cell(item.get(k)) for k in keys] for item in items])


# ------------------------------------------------------------------------------ renderers
def render_chaos(d: dict) -> list[str]:
    lost, added, expected = d["counts_lost"], d["counts_added"], d["counts_expected"]
    sc = d["second_collectors"]
    rows = [
        ["healthy samples stored", f"{d['healthy_samples_stored']} of {d['healthy_samples_expected']} "
                                   "(every stored cycle holds every healthy target)"],
        ["counts lost (engines' own increase − stored)",
         f"{_num(max(lost.values()))} of {_num(max(expected.values()))} per counted target ({len(expected)} targets)"],
        ["counts added (stored − engines' own increase)", f"{_num(max(added.values()))} per counted target"],
        ["second collectors", f"{sc['refused']} refused (exit 2, naming the running writer), {sc['ran']} ran beside "
                              f"the first, {sc['killed']} killed before deciding"],
        ["full disk", f"{d['disk_fills']} fills; {d['full_disk_lines']} one-line \"disk full\" reports"],
        ["false \"corrupt\" reports", _num(d["false_corrupt"])],
        ["internal errors (exit 1)", f"{d['internal_errors']} ({d['reader_runs']} scraped-route reader runs, "
                                     f"longest {d['reader_longest_s']:.2f} s)"],
        ["hostile Prometheus", f"{d['prometheus_runs']} runs, longest {d['prometheus_longest_s']:.2f} s at a "
                               f"{d['prometheus_deadline_s']:g} s deadline"],
        ["cycles lost per kill", f"at most {d['cycles_lost_per_kill_max']}, mean {d['cycles_lost_per_kill_mean']:.2f}"
         + (f" (the cycle in flight); {d['lives_with_a_full_disk']} lives that met a full disk, counted apart, lost "
            f"at most {d['cycles_lost_in_lives_with_a_full_disk_max']} (the disk kept them out, and said so)"
            if "lives_with_a_full_disk" in d else "")],
    ]
    rows += _chaos_new_fault_rows(d)
    out = [f"Collector lives SIGKILLed: {d['kills'] + d['joint_kills']} ({d['joint_kills']} with a reader); "
           f"scrape interval {d['interval_s']:g} s; cycles stored {d['cycles_stored']}.", ""]
    out += _table(["what", "result"], rows)
    out += ["", "What the hostile Prometheus' routes said:", ""]
    out += [f"- `{line}`" for line in d["prometheus_said"]]
    said = _chaos_new_fault_lines(d)
    if said:
        out += ["", "What the commands said of the clock steps, the read-only store and the bent Prometheus:", ""]
        out += said
    if d.get("product_bugs"):
        out += ["", "Product bugs the run found (counted above, not fixed by the benchmark):", ""]
        out += [f"- {bug}" for bug in d["product_bugs"]]
    return out


def _chaos_new_fault_rows(d: dict) -> list[list[str]]:
    """Rows of the clock steps, other engine lives, the read-only store and the bent Prometheus
    (results files before them have none; a fault not run says why)."""
    rows = []
    for key, title, render in _NEW_FAULTS:
        part = d.get(key)
        if part is None:
            continue
        rows += [[title, part["why"]]] if not part.get("run", True) else render(part)
    return rows


def _clock_rows(clock: dict) -> list[list[str]]:
    steps = ", ".join(f"{s['step_s']:+d} s" for s in clock["steps"])
    back = [s for s in clock["steps"] if s["step_s"] < 0]
    return [["clock steps of the collector (libfaketime)",
             f"{steps} while it collected {len(clock['targets'])} healthy targets: exit {clock['exit']} at "
             f"the end of its {clock['duration_s']:g} s; samples stored {clock['samples_stored']}, "
             f"{clock['held_total']} scrapes held while its clock was behind, "
             f"{clock['samples_not_stored_nor_held']} neither; counts lost {_num(clock['counts_lost'])}, "
             f"added {_num(clock['counts_added'])} of {_num(clock['counts_expected'])}; said: "
             + "; ".join(f"{s['step_s']:+d} s in {len(s.get('step_lines', []))} step line, "
                         f"{s['held_lines']} held and {s['resumed_lines']} resumed lines" for s in back)
             + f" (the held targets in one line); the forward steps in {clock['forward_steps_said']} lines, "
               f"one each"]]


def _lives_rows(lives: dict) -> list[list[str]]:
    gone = lives["first_engine_left"]
    return [["`_created` going back; two engines behind one URL",
             f"at most {lives['lines_per_url_and_life_max']} line per URL and collector life "
             f"({lives['lives_that_said_it']} of {lives['collector_lives']} lives said it); restarts stored "
             f"{sum(lives['restarts_stored'].values())}; the counted engines' counts are in the rows above"],
            ["a load-balanced URL's first engine gone for good",
             f"its drafts stored {_num(gone['first_engine_stored'])} of {_num(gone['first_engine_expected'])}; "
             f"the remaining engine's {_num(gone['remaining_engine_stored'])} of "
             f"{_num(gone['remaining_engine_increase'])} (counted from its rebaseline, three refused scrapes "
             f"after the first engine left: never more than it did)"]]


def _read_only_rows(ro: dict) -> list[list[str]]:
    readers = "; ".join(f"{name}: exit {r['exit']}, {r['fields_compared']} fields compared, "
                        f"{len(r['fields_differing'])} differing" for name, r in ro["readers"].items())
    writers = ", ".join(f"{name} exit {w['exit']} in {w['lines']} line" for name, w in ro["writers"].items())
    return [["read-only store (a read-only bind mount)",
             f"tune-gamma --json ({readers}); {writers}; store files {'unchanged' if ro['unchanged'] else 'CHANGED'}"]]


def _bent_rows(bent: dict) -> list[list[str]]:
    modes = "; ".join(f"{m}: {bent[m]['runs']} runs, exit " + ", ".join(f"{k} ×{v}" for k, v in bent[m]["exits"].items())
                      + ("" if bent[m]["held"] else " (NOT as it must)")
                      for m in ("clean", "nan", "inf", "busy", "partial") if m in bent)
    busy = bent["rate_limit"]
    return [["a real Prometheus' answers bent (NaN, +Inf, 429, warnings)",
             f"{modes}; {busy['answered_429']} answers 429, {busy['asked_again']} asked again after it, "
             f"{busy['refused_again']} refused again"]]


# (results key, its row's title where it did not run, the rows where it did)
_NEW_FAULTS = (("clock_steps", "clock steps of the collector", _clock_rows),
               ("other_lives", "`_created` going back; two engines behind one URL", _lives_rows),
               ("read_only_store", "read-only store", _read_only_rows),
               ("bent_prometheus", "a real Prometheus' answers bent", _bent_rows))


def _chaos_new_fault_lines(d: dict) -> list[str]:
    out = []
    clock = d.get("clock_steps") or {}
    for step in clock.get("steps", []):
        said = [*step.get("step_lines", []), *([step["example"]] if step["example"] else [])]
        out.append(f"- clock {step['step_s']:+d} s: " + ("; ".join(f"`{line}`" for line in said) or "nothing said"))
    ro = d.get("read_only_store") or {}
    out += [f"- read-only store, {name}: `{w['said']}`" for name, w in ro.get("writers", {}).items()]
    bent = d.get("bent_prometheus") or {}
    for mode in ("nan", "inf", "partial"):
        out += [f"- Prometheus {mode}: `{line}`" for line in (bent.get(mode) or {}).get("said", [])[:1] if line]
    return out


def render_first_contact(d: dict) -> list[str]:
    rows = [[r["input"], r["config"], _num(r.get("gamma")), _num(r.get("tokens_per_second"), ".1f"),
             _num(r.get("page_rate"), ".1f"), _num(r.get("undrafted_token_share"), ".3f"), _num(r.get("page_nu"), ".3f"),
             r.get("decision") or f"exit {r.get('exit')}", "deploy line" if r.get("deploy") else "none"]
            for r in d["rows"]]
    out = [f"Rows whose change, off, probe or deploy line rests on a default: {d['resting_on_defaults']} "
           "(the run fails if any does). The table with the deploy lines and the keys each row asks for: "
           "[first-contact.md](first-contact.md).", ""]
    return out + _table(["input", "config", "γ", "tok/s at γ", "page's own", "ν", "page's ν", "decision", "deploy"], rows)


def render_http_client_compare(d: dict) -> list[str]:
    out = []
    if d.get("settings"):
        out.append("Settings: " + ", ".join(f"{k} {v}" for k, v in d["settings"].items()) + ".")
    if d.get("target"):
        out.append(f"Target: {d['target']}.")
    guarantees = d.get("guarantees") or []
    clients: list[str] = []
    for g in guarantees:
        clients += [k for k, v in g.items() if isinstance(v, dict) and "pass" in v and k not in clients]
    if guarantees:
        rows = [[g["guarantee"], g["target"]] + [("pass" if g[c]["pass"] else "FAIL") if c in g else "—" for c in clients]
                for g in guarantees]
        out += ["", *_table(["guarantee", "case", *clients], rows)]
    if d.get("cpu"):
        out += ["", "CPU of a cycle of the collector's fetches:", "", *_flat_rows(d["cpu"])]
    tests = d.get("tests_on_prototype")
    if tests:
        out += ["", f"The collector's HTTP tests on the prototype: {tests.get('summary')}."]
    return out


def render_logged_latency(d: dict) -> list[str]:
    rows = [[r["concurrency"], r["intervals"], f"{r['requests_sent']:,}", f"{r['histogram_itl_ms']:.3f} ms",
             f"{r['logged_itl_ms']:.3f} ms ({r['relative_error']:+.1%})", f"±{r['running_relative_se']:.1%}",
             f"{r['histogram_request_steps']:,.0f} / {r['logged_request_steps']:,.0f}",
             f"{r['counted_undrafted_token_share']:.4f} / {r['logged_undrafted_token_share']:.4f}"] for r in d["runs"]]
    return _table(["concurrency", "intervals", "requests", "vLLM's mean ITL (histogram)", "Little's law over the log",
                   "the Running samples' standard error", "decode steps: histogram / log", "ν: counters / log"], rows)


def render_request_load(d: dict) -> list[str]:
    rows = []
    for r in d["runs"]:
        shares = ", ".join(f"{b}: {s['requests']:.3f}/{s['gauge']:.3f}" for b, s in r["time_shares"].items())
        rows.append([r["workers"], f"{r['requests']:,} ({r['span_s']:.0f} s)",
                     f"{r['mean_running']['requests']:.2f} / {r['mean_running']['gauge']:.2f}", shares,
                     f"{r['total_variation']:.3f}",
                     f"{r['itl_ms']['requests']:.3f} / {r['itl_ms']['histogram']:.3f} ms "
                     f"({r['itl_ms']['requests'] / r['itl_ms']['histogram'] - 1:+.1%})",
                     f"{r['request_steps']['requests']:,.0f} / {r['request_steps']['histogram']:,.0f}"])
    return _table(["workers", "requests (span)", "mean running: requests / gauge",
                   "share of busy time by batch size: requests / gauge", "apart (total variation)",
                   "mean ITL: requests / histogram", "request-steps: requests / histogram"], rows)


PATHS = (("prometheus_recorded", "Prometheus, specdec's recording rules"), ("prometheus_raw", "Prometheus, raw queries"),
         ("victoria_metrics_raw", "VictoriaMetrics, raw queries"), ("store", "the embedded store"),
         ("store_before", "the embedded store before schema 9 (an earlier run)"))


def render_prometheus_vs_store(d: dict) -> list[str]:
    out = [f"{d['engines']} engines, {d['days']:g} days at {d['interval_s']:g} s, γ {d['gamma']}, true survival "
           f"{', '.join(f'{x:g}' for x in d['true_survival'])}; one route tuned over the whole week.", ""]
    rows = []
    for key, name in PATHS:
        p = d.get(key)
        if p:
            rows.append([name, f"{p['tune_seconds_median']:.2f} s", _num(p.get("queries")), _num(p.get("blocks")),
                         f"{p['build_seconds']:.0f} s", f"{p['disk_bytes'] / 1e6:,.1f} MB",
                         f"{p['disk_bytes_per_engine_interval']:.1f}", f"{p['drafts']:,.0f}",
                         f"{p['recommended_gamma']} ({p['decision']})"])
    out += _table(["read through", "tune (median)", "queries", "blocks", "build or backfill", "on disk",
                   "bytes per engine-interval", "drafts", "recommended (decision)"], rows)
    if d.get("store_before"):
        out += ["", "The last row is the store as an earlier run of this benchmark measured it, before schema 9 (each "
                "scrape kept three ways): another week of the same generated fleet, tuned when a decision could still "
                "rest on the benchmark's default deployment; every path now answers undecided on those defaults."]
    out += ["", "Max |Δ survival| against the store: "
            f"recorded {d['max_abs_survival_difference_recorded_vs_store']:.2g}, "
            f"Prometheus raw {d['max_abs_survival_difference_raw_vs_store']:.2g}, "
            f"VictoriaMetrics {d['max_abs_survival_difference_victoria_metrics_vs_store']:.2g}; drafts recorded − store "
            f"{d['drafts_recorded_minus_store']:g}, VictoriaMetrics − store {d['drafts_victoria_metrics_minus_store']:g}."]
    rec = d.get("prometheus_recorded") or {}
    if rec.get("series_added_per_route"):
        added = ", ".join(f"`{k}` {v}" for k, v in rec["series_added_per_route"].items())
        out += ["", f"Series the rules add: {rec['series_added_total']} in all; per route: {added}."]
    return out


def render_store_window(d: dict) -> list[str]:
    before = d.get("compared") or {}
    tag = f"schema 8 (`{before.get('commit', '?')}`)" if before else ""
    out = [f"{d['targets']} targets × 2 engines, {d['days']:g} days at 15 s ({d['engine_intervals']:,} engine-intervals), "
           f"built by the bulk loader; {d['machine']['cpus']} CPUs, {d['date']}. Before: the same script and data on "
           f"{tag}, run in the same call (`{d['command']}`).", ""]

    def ms(x: dict | None, key: str) -> str:
        return f"{x[key]['median_ms']:.1f} ms" if x and key in x else "—"

    rows = [["bytes per engine-interval (the week)", f"{before.get('bytes_per_engine_interval', 0):.1f}" if before
             else "—", f"{d['bytes_per_engine_interval']:.1f}"]]
    for span in ("7 d", "1 d", "1 h"):
        rows.append([f"route_window {span} (median; 15 runs now, 5 before)", ms(before.get("route_window"), span),
                     ms(d["route_window"], span)])
    wb, wa = before.get("write_cycle_1000_targets_ms"), d["write_cycle_1000_targets_ms"]
    rows.append(["write_cycle, 1,000 targets × 2 engines (median of 10)", f"{wb['median']:.0f} ms" if wb else "—",
                 f"{wa['median']:.0f} ms"])
    cb, ca = before.get("collected"), d.get("collected")
    if ca:
        rows.append([f"bytes per engine-interval written by write_cycle ({ca['engines']} engines, {ca['hours']:g} h, "
                     "jittered scrape times)", f"{cb['bytes_per_engine_interval']:.1f}" if cb else "—",
                     f"{ca['bytes_per_engine_interval']:.1f}"])
        rows.append([f"write_cycle, {ca['engines']} engines (median, max)",
                     f"{cb['write_cycle_median_ms']:.1f}, {cb['write_cycle_max_ms']:.1f} ms" if cb else "—",
                     f"{ca['write_cycle_median_ms']:.1f}, {ca['write_cycle_max_ms']:.1f} ms"])
    out += _table(["", f"before: {tag}" if tag else "before", "now"], rows)
    if ca:
        tables = ", ".join(f"{k} {v:.2f}" for k, v in ca["bytes_per_engine_interval_by_table"].items())
        out += ["", f"Where the write path's bytes go, per engine-interval: {tables}."]
    return out


def render_real_load(d: dict) -> list[str]:
    out = [f"γ {', '.join(map(str, d['gammas']))}; {d['blocks']} randomised blocks of {d['requests_per_run']} "
           "requests; measured: the per-user decode rate's ratio to γ 0 (point [90%]).", ""]
    rows = []
    for m in d["methods"]:
        for c in m["concurrencies"]:
            ratios = ", ".join(f"{g}: {v[0]:.2f} [{v[1]:.2f}, {v[2]:.2f}]" for g, v in c["measured"].items() if g != "0")
            rows.append([m["method"], c["concurrency"], ratios, c["best_gamma"], c["load_view_gamma"],
                         _pct(c["regret_load_view"]), c["own_recommended_gamma"], _pct(c["regret_own"])])
    return out + _table(["method", "concurrency", "measured decode ratio to γ 0 by γ", "best measured",
                         "tool: best γ at this batch (load view)", "regret",
                         "tool: recommended from this concurrency's window", "regret"], rows)


def render_real_sweep(d: dict) -> list[str]:
    out = [f"γ {', '.join(map(str, d['gammas']))}; {d['blocks']} randomised blocks of {d['requests_per_run']} "
           "requests at batch 1; the tool sees the γ 3 window alone.", ""]

    def f(x, fmt=".2f"):
        return "" if x is None else format(x, fmt)

    rows = []
    for c in d["cells"]:
        for g in c["gammas"]:
            pred = "" if g["predicted_speedup"] is None else \
                f"{g['predicted_speedup']:.2f} [{f(g['speedup_low'])}, {f(g['speedup_high'])}]"
            rows.append([f"{c['method']} / {c['route']}", g["gamma"], f"{g['measured_al']:.3f}", f(g["predicted_al"], ".3f"),
                         f(g.get("al_positions_seen"), ".3f"), f(g["undrafted_token_share"], ".3f"),
                         f"{g['measured_ratio']:.2f} [{g['ratio_low']:.2f}, {g['ratio_high']:.2f}]", pred,
                         f"{g['wall_ratio']:.2f}", f"{g['step_time_ms']:.2f}"])
    out += _table(["method / route", "γ", "AL measured", "AL predicted", "AL, positions seen", "ν",
                   "decode tok/s ratio to γ 0 [90%]", "predicted speedup [90%]", "wall-clock ratio", "step ms"], rows)
    rows = [[f"{c['method']} / {c['route']}", f"{c['recommended_gamma']} ({c['decision']})", c["best_gamma"],
             "yes" if c["best_separated"] else "no", "— (past the sweep)" if c["regret_considered"] is None
             else _pct(c["regret_considered"]), "— (past the sweep)" if c["regret"] is None else _pct(c["regret"])]
            for c in d["cells"]]
    out += ["", *_table(["method / route", "recommended (decision)", "best measured", "separated",
                         f"regret vs best considered (γ ≤ {max(d['gammas'])})", "regret vs best"], rows)]
    s = d.get("summary") or {}
    if s:
        out += ["", "Summary:", ""]
        for k, v in s.items():
            out.append(f"- {k}: " + ("; ".join(v) if isinstance(v, list) else _num(v)))
    return out


def render_replay_scale(d: dict) -> list[str]:
    stages = list(d["runs"][0]["stages_s"]) if d["runs"] else []
    rows = [[f"{r['requests']:,}", r["gamma"], f"{r['short_drafts']:.0%}", f"{r['drafts']:,.0f}",
             f"{r['tune_gamma_s']['median']:.2f} s (min {r['tune_gamma_s']['min']:.2f})",
             *[f"{r['stages_s'].get(s, float('nan')):.2f}" for s in stages], r["decision"]] for r in d["runs"]]
    out = ["tune-gamma end to end in a fresh process (median of its runs) on stores of one route's per-request "
           "`detailed` rows, and the time of each stage that grows with the requests (s):", ""]
    out += _table(["requests", "γ", "drafts short", "drafts", "tune-gamma", *stages, "decision"], rows)
    old = d.get("old_code")
    if old:
        out += ["", f"The code at commit {old['commit']}: {old['requests']:,} requests at γ {old['gamma']}, "
                    f"{old['tune_gamma_s']:.1f} s."]
    return out


def render_roofline_public(d: dict) -> list[str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import roofline_public as rp  # the table exactly as the script prints it (tests/test_roofline_public.py)

    binds = [c["compute_binds_below_flops"] for t in d["tables"] for c in t["cells"]]
    out = [rp.markdown_table(d), "",
           f"{d['cells_over_max_error']} of {d['cells_tested']} cells off by more than {d['max_error']:.0%}; "
           f"fitted: {_num(d['fitted'])}. Error = (roofline − measured) / measured. Compute would bind only below "
           f"{min(binds) / 1e12:.1f}–{max(binds) / 1e12:.1f} TFLOP/s in these cells (the memory roof is used).", "",
           *ROOFLINE_WHY, "",
           "Not tested, and why:", "", rp.not_tested_lines(d)]
    return out


ROOFLINE_WHY = [
    "Why the cells miss, all the same way (the roofline prices verification too cheap on these engines):",
    "",
    "- MoE on MLX (vllm-mlx #763, omlx #2077): the roofline's increment is the extra experts a width-q step",
    "  touches, read once at the chip's full bandwidth. The engines read each position's experts through a",
    "  gather that does not batch across the verified positions (#763's own diagnosis: each token past width 2",
    "  costs 2.5–2.8 ms, 30% of a step) and run small-width kernels well below the memory roof. GLM-5.2's anchor",
    "  is the MTP-off rate of another thread on the same model and chip (omlx #2113, another 4-bit",
    "  quantisation): with half that anchor the roofline would say 1.44×, still −35%.",
    "- Dense 27B on MLX (rMLX #496, #516): at batch 1 the extra positions read no new weights, so the",
    "  roofline's increment is only the Gated DeltaNet state written per position. #496's figure is the whole",
    "  speculative round (the MTP draft and the verify), which the tool prices as T_target + T_draft; #516",
    "  measures the verify forward alone, whose per-position work in the quantised kernels (dequantisation",
    "  per row, per-row attention and scans) a roofline of bytes and FLOPs does not have.",
    "- Apple publishes no GPU FLOP/s, so the compute term is left out on the Apple chips; each cell records the",
    "  FLOP/s below which compute would bind (`compute_binds_below_flops`), under the 17.4 TFLOP/s fp16 matmul",
    "  MLX measured on an M3 Ultra (raullenchai/Rapid-MLX #258).",
    "",
    "What the tool does about it: docs/MODEL.md, Where the roofline is wrong.",
]


def render_tail_holdout(d: dict) -> list[str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tail_holdout as th  # its constants: the claim's gain and probability, the interval's level

    models = [k for k, v in d["errors"][0].items() if isinstance(v, dict) and "rmse" in v]
    rows = [[t["distances"], f"{t['rows']} ({t['curves']})",
             *[f"{t[m]['rmse']:.1%} ({t[m]['bias']:+.1%})" for m in models],
             f"{t['coverage']:.0%}", f"{t['unscaled_coverage']:.0%}"] for t in d["errors"]]
    out = [f"Reference curves: {len(d['curves'])} ({'; '.join(d['curves'])}). AL error RMSE (bias) at distance j "
           "past the cut, each curve predicted from the others' evidence:", ""]
    out += _table(["distance j", "rows (curves)", *models, f"{th.LEVEL:.0%} interval covers: scaled", "unscaled"], rows)
    sets = {"evidence, scaled": d["claims"], "evidence, unscaled": d["claims_unscaled"],
            "the four models counted equally": d["claims_models_counted_equally"]}
    claim = f"claims P(gain > {th.MIN_GAIN:.0%}) ≥ {th.CLAIM_PROBABILITY}"
    head = ["draft cost r"] + [h for name in sets for h in (f"{claim}: {name}", "held")]
    rows = []
    for i, c0 in enumerate(d["claims"]):
        row = [_num(c0["draft_cost"])]
        for cs in sets.values():
            c = cs[i]
            row += [c["claims"], "—" if c["fraction"] is None else f"{c['held']} ({c['fraction']:.0%})"]
        rows.append(row)
    out += ["", *_table(head, rows)]
    w = d.get("own_record_weights")
    if w:
        out += ["", f"Weighting each curve's models by their own one-step record: the best record was the best "
                    f"further out in {w['best_record_is_best_further_out']} of {w['rows']} held-out rows; that "
                    f"ensemble's RMSE {w['rmse_own_record_weights']:.2%} against the evidence weights' "
                    f"{w['rmse_evidence_weights']:.2%}."]
    return out


def render_decision(d: dict) -> list[str]:
    """The decision benchmark's summary, by the benchmark's own table (benchmarks/decision.py)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from decision import markdown_table  # the one rendering of its figures

    return markdown_table(d).splitlines()


def render_dashboard_cold_start(d: dict) -> list[str]:
    """Each dashboard's median first complete page (benchmarks/dashboard_overview.py), and its
    ratio to the bare Streamlit page's where that ran in the same turns."""
    results = d["results"]
    bare = next((r for r in results if r["dashboard"].startswith("bare")), None)
    rows = []
    for r in results:
        ratio = (f"{r['first_complete_page_median_s'] / bare['first_complete_page_median_s']:.2f}×"
                 if bare is not None and r is not bare else "—")
        rows.append([r["dashboard"], f"{r['marks']['health']['median_s']:.2f} s",
                     f"{r['first_complete_page_median_s']:.2f} s", f"{r['first_complete_page_after_opening_median_s']:.2f} s",
                     ratio])
    return [f"Store: {d['store']}; median of {d['runs']} runs; browser cache {d['browser_cache']}.", "",
            *_table(["dashboard", "server answers", "first complete page", "after opening", "× the bare page"], rows)]


def render_real_decisions(d: dict) -> list[str]:
    s = d["summary"]
    rows = [[r["fixture"], r["source"], f"{r.get('decision') or 'error'}" + (" (measured)" if r.get("basis") == "measured" else ""),
             _num(r.get("fleet_gamma")), _num(r.get("measured_speedup"), ".2f"),
             f"{r['sweep_best_gamma']}" + ("" if r.get("sweep_best_separated") else " (not separated)"),
             _pct(r.get("regret")), "yes" if r.get("refuted") else "no",
             "yes" if r.get("within_best_interval") else "no"] for r in d["rows"]]
    out = [f"Config: {d['config']}. Limits: {d['limits']}.", "",
           f"{s['decisions']} decisions, {s['judged']} judged; refuted by the sweep: {s['refuted']}; changes past the "
           f"sweep: {s['past_sweep']}; regret over 3% where the sweep's best is separated: "
           f"{s['over_3pct_where_best_separated']}; outside the sweep's own interval of its best elsewhere: "
           f"{s['outside_the_best_interval_elsewhere']}; errors: {s['errors']}.", ""]
    out += _table(["fixture", "fed as", "decision", "fleet γ", "measured ×", "sweep's best γ", "regret",
                   "refuted", "within best's interval"], rows)
    out += _real_round_two(d)
    if not d.get("populations"):
        return out
    p = d["population_summary"]
    refuted = "; ".join(p["refuted_rows"]) or "none"
    out += ["", f"Greedy and sampled requests of the mixed fixtures' per-request routes, each population priced "
                f"apart (its lines' temperature) and judged against its own kind's sweep: {p['populations']} "
                f"populations, {p['judged']} judged; refuted by the sweep: {p['refuted']} ({refuted}).", ""]
    pop_rows = [[r["fixture"], r["population"], _num(r.get("requests")),
                 f"{r.get('decision')}" + (" (measured)" if r.get("basis") == "measured" else ""),
                 _num(r.get("fleet_gamma")), _num(r.get("measured_speedup"), ".2f"),
                 f"{r['sweep_best_gamma']}" + ("" if r.get("sweep_best_separated") else " (not separated)"),
                 _pct(r.get("regret")), "yes" if r.get("refuted") else "no"] for r in d["populations"]]
    return out + _table(["fixture", "population", "requests", "decision", "fleet γ", "measured ×", "sweep's best γ",
                         "regret", "refuted"], pop_rows)


def _real_round_two(d: dict) -> list[str]:
    """The round-1 probes run on the engine's own sweep: what round 2 decided, judged the same way."""
    two = d["summary"].get("round_two")
    if not two:
        return []
    short = "; ".join(two["short_of_the_bar_after_round_two"]) or "none"
    rows = [[r["fixture"], r["source"], f"γ {x['probed_gamma']}", _num(x.get("baseline_tokens_per_second"), ".1f"),
             f"{x.get('decision') or 'not judged'}" + (" (measured)" if x.get("basis") == "measured" else ""),
             _num(x.get("fleet_gamma")), _pct(x.get("regret")), "yes" if x.get("refuted") else "no",
             "yes" if x.get("within_best_interval") else "no"]
            for r in d["rows"] if (x := r.get("round_two"))]
    return ["", f"Round 2 of the {two['probes']} probes: the sweep's own responses at the probe's γ, then the "
                f"deployed γ's (a one-engine route's trial, then back), tuned again with the same keys and the "
                f"sweep's own γ 0 as the plain decode, fed as the gateway's lines (the sweep's runs keep no page's "
                f"per-position counts). Judged: {two['judged']}; refuted: {two['refuted']}; meeting the bar (regret "
                f"≤ 3% where the best is separated, else inside its interval): {two['meet_the_bar']}. Decisions "
                f"short of the bar after round 2: {short}.", "",
            *_table(["fixture", "round 1 fed as", "probed", "plain decode tok/s", "round 2", "fleet γ", "regret",
                     "refuted", "within best's interval"], rows)]


def render_real_decisions_repeats(d: dict) -> list[str]:
    """Each packed run judged as the committed one is: its tallies, then every decision side by side."""
    out = [f"Config: {d['config']}.", ""]
    for i, run in enumerate(d["runs"], 1):
        s, two, made = run["summary"], run["summary"]["round_two"], run["made"]
        short = "; ".join(two["short_of_the_bar_after_round_two"]) or "none"
        out.append(f"- repeat {i} (`{run['archive']}`, made from a fresh clone at {made['commit']}, packed "
                   f"{made['packed']}): {s['decisions']} decisions, {s['judged']} judged; refuted by the sweep: "
                   f"{s['refuted']}; changes past the sweep: {s['past_sweep']}; regret over 3% where the sweep's best "
                   f"is separated: {s['over_3pct_where_best_separated']}; outside the sweep's own interval of its "
                   f"best elsewhere: {s['outside_the_best_interval_elsewhere']}; round 2: {two['judged']} of "
                   f"{two['probes']} probes judged, {two['refuted']} refuted, {two['meet_the_bar']} meeting the bar; "
                   f"short of the bar after round 2: {short}; populations refuted: "
                   f"{run['population_summary']['refuted']} of {run['population_summary']['judged']}; judged on "
                   f"a sweep whose γ 0 ran some runs at under 60% of its others' median (the shared machine "
                   f"slowed it: the ratios carry it): {', '.join(s.get('on_disturbed_sweeps') or []) or 'none'}.")
    keys = [(r["fixture"], r["source"]) for r in d["runs"][0]["rows"]] if d["runs"] else []
    by_run = [{(r["fixture"], r["source"]): r for r in run["rows"]} for run in d["runs"]]
    rows = [[fixture, source, *(_repeat_cell(b.get((fixture, source))) for b in by_run)] for fixture, source in keys]
    return out + ["", "Each cell: the decision → the γ the fleet runs (its regret against that run's own sweep; "
                      "\"inside\": within the sweep's interval of its best, which is not separated), a probe's "
                      "round 2 after the arrow.", "",
                  *_table(["fixture", "fed as", *(f"repeat {i}" for i in range(1, len(by_run) + 1))], rows)]


def _repeat_cell(r: dict | None) -> str:
    if r is None:
        return "—"

    def one(x: dict) -> str:
        where = "" if x.get("sweep_best_separated") or x.get("regret") is None else (
            ", inside" if x.get("within_best_interval") else ", outside")
        refuted = ", refuted" if x.get("refuted") else ""
        return f"{x.get('decision')} {_num(x.get('fleet_gamma'))} ({_pct(x.get('regret'))}{where}{refuted})"

    cell = one(r) if r.get("decision") != "probe" else f"probe {_num(r.get('probe_gamma'))}"
    return cell + (f" → {one(r['round_two'])}" if r.get("round_two") else "")


def render_unknown(d: dict) -> list[str]:
    """A results file without a renderer: its top-level figures and its lists of flat records."""
    skip = {"command", "machine", "date", "seconds", "engine", "python", "numpy", "libraries", "generated_by", "data"}
    out = ["(No renderer in scripts/benchmark_sections.py yet: its top-level figures as recorded.)", ""]
    for k, v in d.items():
        if k in skip:
            continue
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            out += [f"{k}:", "", *_flat_rows(v), ""]
        elif isinstance(v, (dict, list)):
            out.append(f"- {k}: `{json.dumps(v, ensure_ascii=False)[:300]}`")
        else:
            out.append(f"- {k}: {_num(v)}")
    return out
