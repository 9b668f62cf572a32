"""Console scripts `specdec` and `tune-gamma` (docs/REFERENCE.md, Commands).

Views only: every number printed here comes from acceptance/ and model/ (through
specdec.pipeline). Errors are one line on stderr; exit code 2 for bad input, 1 for an
internal failure (SPECDEC_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback

from . import __version__
from .args import (UsageError, add_store_args, dump_json, duration, float_list, positive_float, promql_duration,
                   route_name)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit 2 (argparse's own usage dump is noise)."""

    def error(self, message):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message}\n")


def _input_errors() -> tuple[type[BaseException], ...]:
    """Exception classes that mean bad input (exit 2), from every layer that raises them."""
    from acceptance.errors import InputError

    # ValueError itself is not here: one that is not an InputError is a bug (exit 1)
    errors: list[type[BaseException]] = [InputError, FileNotFoundError]
    try:
        from acceptance.store import StoreError

        errors.append(StoreError)
    except ImportError:
        pass
    return tuple(errors)


def _nothing_answered() -> tuple[type[BaseException], ...]:
    """Exception classes that mean no source gave anything (exit 3)."""
    from acceptance.fetch import UnreachableError

    return (UnreachableError, NothingAnswered)


class NothingAnswered(RuntimeError):
    """Every target (or source) failed: the commands' exit status 3."""


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _run(fn, args, prog: str) -> int:
    try:
        return fn(args)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except _nothing_answered() as e:
        print(f"{prog}: error: {_first_line(e)}", file=sys.stderr)
        return 3
    except _input_errors() as e:
        if os.environ.get("SPECDEC_DEBUG"):
            traceback.print_exc()
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the promise is one line, never a traceback
        if os.environ.get("SPECDEC_DEBUG"):
            traceback.print_exc()
        msg = str(e).splitlines()[0] if str(e) else ""
        print(f"{prog}: internal error: {type(e).__name__}: {msg} (set SPECDEC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


# ---------------------------------------------------------------------------- collect
def _open_store(config, db: str | None):
    from acceptance.store import Store

    return Store.open(config.store_path_for(db), retention_s=config.retention_s)


def cmd_collect(args) -> int:
    from acceptance.store.writer_lock import claim_writer

    from .config import load_config

    config = load_config(args.config, required=True)
    targets = config.all_targets()
    if not targets:
        raise UsageError(f"{config.path}: no route has targets to scrape (add targets = [...] under [routes.NAME])")
    interval = args.interval or config.collect_interval_s
    # one collector per store, claimed before the store is opened (a second one would double its deltas)
    writer = claim_writer(config.store_path_for(args.db), "specdec collect")
    try:
        answered = _collect_into(args, config, targets, interval)
    finally:
        writer.release()
    if answered["ok"] == 0 and answered["first_error"]:
        raise NothingAnswered(f"no target answered ({len(targets)} tried); first: {answered['first_error']}")
    if args.once and not answered["had_data"]:
        print("baseline laid: a window needs a second scrape (run collect again, or without --once)", file=sys.stderr)
    not_stored = f" ({answered['not_stored']} not stored: disk full)" if answered["not_stored"] else ""
    print(f"collected {answered['cycles']} cycle(s){not_stored}: {answered['ok']} of {answered['scrapes']} scrapes "
          f"answered, stored in {config.store_path_for(args.db)}; then: tune-gamma --route "
          f"{next(name for name, route in config.routes.items() if route.targets)}")
    return 0


def _collect_into(args, config, targets: list[str], interval: float) -> dict:
    """The collector's run into the store (and the gauges, with --serve): what answered."""
    from acceptance.collector import ClockWatch, ScrapeOptions, run_collector

    from .full_disk import FullDiskWatch

    access = config.scrape_access()  # the credentials' secrets, read from the environment before anything starts
    store = _open_store(config, args.db)
    print(f"collecting {len(targets)} target(s) every {interval:g}s into {config.store_path_for(args.db)}", file=sys.stderr)

    gauges = None
    if args.serve is not None:
        from .exporter import RouteGauges

        gauges = RouteGauges()
        server, _ = gauges.serve(args.serve, host=args.serve_host)
        print(f"serving per-route gauges on http://{args.serve_host}:{server.server_port}/metrics "
              f"(window {args.serve_window:g}s, refreshed every cycle)", file=sys.stderr)

    answered = {"ok": 0, "first_error": None, "cycles": 0, "scrapes": 0, "refused": 0,
                "had_data": store.latest_time() is not None}

    def write(results) -> None:
        refused = store.write_cycle(results)
        answered["refused"] = len(refused)
        for line in refused + store.clock_lines:  # an engine's inconsistent scrape, a clock step: said, not stored
            print(line, file=sys.stderr, flush=True)

    watch = FullDiskWatch(write, once=args.once)  # a full disk: collecting goes on (specdec.full_disk)
    clock = ClockWatch()
    clock.step()

    def progress(n: int, results, seconds: float) -> None:
        say_clock_step(clock.step())
        if gauges is not None:
            _refresh_gauges(gauges, config, store, args.serve_window)
        failed = [r for r in results if not r.ok]
        answered["ok"] += len(results) - len(failed)
        answered["cycles"], answered["scrapes"] = n, answered["scrapes"] + len(results)
        answered["first_error"] = answered["first_error"] or (failed[0].error if failed else None)
        line = f"cycle {n}: {len(results) - len(failed)}/{len(results)} targets ok in {seconds:.2f}s"
        if failed:
            line += f"; failing: {failed[0].error}" + (f" (+{len(failed) - 1} more)" if len(failed) > 1 else "")
        if answered["refused"]:
            line += f"; {answered['refused']} engine scrape(s) refused as inconsistent"
            answered["refused"] = 0
        print(line + watch.cycle_note(), file=sys.stderr, flush=True)

    try:
        run_collector(
            watch, targets, interval_s=interval, duration_s=args.duration, once=args.once, on_cycle=progress,
            scrape=ScrapeOptions(timeout_s=config.collect_timeout_s, max_bytes=config.max_page_bytes,
                                 max_engines=config.max_engines, access=access),
        )
    finally:
        store.close()
    watch.finish()
    answered["not_stored"] = watch.not_stored_total
    return answered


def say_clock_step(step_s: float | None) -> None:
    """A step of this machine's clock between two cycles (acceptance.collector.ClockWatch), once."""
    from acceptance.durations import approximate_duration

    if step_s is None:
        return
    size = approximate_duration(abs(step_s))
    if step_s > 0:
        print(f"this machine's clock stepped forward {size} (NTP, a resumed VM?): the scrape interval across the step "
              f"is stored {size} longer than it ran, so a rate over it reads low; counts stay exact", file=sys.stderr)
    else:
        print(f"this machine's clock stepped back {size} (NTP, a resumed VM?): targets whose last stored scrape is "
              f"ahead of it are held until it passes (said above); counts stay exact", file=sys.stderr)


def _refresh_gauges(gauges, config, store, window_s: float) -> None:
    """Re-tune every scraped route and publish it; a route without data yet keeps its gauges."""
    from . import pipeline
    from .report import tuning_to_dict

    for name, route in config.routes.items():
        if route.source != "scrape":
            continue
        try:
            tuning = pipeline.tune_route(config, name, store=store, window_s=window_s)
        except pipeline.NoDataError:
            continue
        except Exception as e:  # noqa: BLE001 - one route's trouble must not stop collecting
            print(f"gauges for route {name} not refreshed: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                  file=sys.stderr)
            continue
        gauges.update(name, tuning_to_dict(tuning))


def cmd_rules(args) -> int:
    from .config import load_config
    from .exporter import recording_rules

    config = load_config(args.config, required=True)
    routes = {name: (r.selector if r.source == "prometheus" else list(r.targets)) for name, r in config.routes.items()}
    if not routes:
        raise UsageError(f"{config.path}: no routes to write rules for")
    sys.stdout.write(recording_rules(routes, window=args.rate_window, resolution=args.resolution,
                                     query_offset=args.query_offset))
    return 0


def cmd_grafana(args) -> int:
    from .config import load_config
    from .grafana import dashboard

    config = load_config(args.config, required=True)
    if not config.routes:
        raise UsageError(f"{config.path}: no routes to draw")
    doc = dashboard(list(config.routes), rate_window=args.rate_window, resolution=args.resolution)
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return 0


# ---------------------------------------------------------------------------- ingest
def cmd_ingest(args) -> int:
    """Store per-request metrics or SpecDecoding log lines for a route (or the routes the
    lines name); ingesting the same file twice adds nothing (rows are keyed)."""
    from .config import load_config
    from .report import format_clock

    config = load_config(args.config)
    per_route, source, name, skipped, lines, stamped = _per_request_rows(args) if args.per_request else _log_rows(args)
    store = _open_store(config, args.db)  # opened once the input is read: a bad file leaves no empty store
    try:
        for route, rows in per_route.items():
            result = store.ingest(route, source, rows)
            gammas = sorted({r.counts.gamma for r in rows})
            with_load = sum(r.load is not None for r in rows)
            load_note = "" if source != "log" else (
                f"; {with_load} with the stats line's Running and generation throughput (the route's latency and "
                f"batch mix)" if with_load else "; none with vLLM's stats line before it: no latency or batch mix")
            print(f"route {route}: {result.added} {source} rows added, {result.duplicates} already stored "
                  f"(gamma {', '.join(map(str, gammas))}){load_note}; their times {format_clock(min(r.time for r in rows))}"
                  f" to {format_clock(max(r.time for r in rows))}")
    finally:
        store.close()
    print(f"{name}: {lines} lines read" + (
        "; skipped, by reason: " + ", ".join(f"{why} ({n})" for why, n in sorted(skipped.items())) if skipped else ""))
    if stamped:
        print("row times from " + ", ".join(f"{where} ({n})" for where, n in sorted(stamped.items()))
              + "; tune-gamma's window ends now (1h by default): --window reaches older rows")
    return 0


def _per_request_rows(args):
    """(rows by route, source, file name, skipped lines by reason, lines read, row times by
    where they came from) of ``--per-request``."""
    from collections import Counter

    from acceptance.per_request import read_per_request_file
    from acceptance.store import IngestedRow

    parsed = read_per_request_file(args.per_request, default_route=args.route, default_time=time.time())
    per_route: dict[str, list[IngestedRow]] = {}
    for rec in parsed.records:
        # a request id names the request; else the line's place and content do
        itl = rec.mean_itl_ms / 1000.0 if rec.mean_itl_ms else None
        per_route.setdefault(rec.route, []).append(
            IngestedRow(rec.time, rec.counts, rec.request_id or rec.line_key, mean_itl_s=itl,
                        decode_tokens=rec.decode_tokens, prompt_tokens=rec.prompt_tokens, temperature=rec.temperature,
                        steps=rec.steps))
    stamped = Counter(rec.time_source for rec in parsed.records)
    return per_route, "per-request", args.per_request, parsed.skipped, parsed.lines, stamped


def _log_rows(args):
    """The same of ``--log``."""
    from collections import Counter

    from acceptance.log_lines import read_log_file
    from acceptance.store import IngestedRow

    parsed = read_log_file(args.log, default_time=None)
    known, several, spread = parsed.ambiguous_drafts()
    if known:  # the log prints A and T exactly, never D: say that D is a reconstruction, and how loose
        fits = (f"{several} of {known} intervals fit more than one (up to {spread:.2%} apart): the one nearest "
                f"A / (AL − 1) is taken" if several else f"each of the {known} intervals fits one")
        print(f"{args.log}: drafts reconstructed, not read: vLLM's log line prints accepted and drafted tokens "
              f"exactly but not the drafts or the accepted count per position, so each interval's drafts are those "
              f"its rounded fields fit; {fits}", file=sys.stderr)
    now = time.time()
    skipped, stamped = Counter(parsed.skipped), Counter()
    per_route: dict[str, list[IngestedRow]] = {}
    for iv in parsed.intervals:
        if iv.counts is None:
            skipped["drafts unknown (mean acceptance length 1.00)"] += 1
            continue
        # a line without its timestamp is stored at the ingest time, keyed by its place in the
        # file (not by that time), so that ingesting the file again adds nothing
        where = f"{iv.time:.3f}" if iv.time is not None else f"line {iv.line_number}"
        stamped["the lines' own timestamps" if iv.time is not None else "the ingest time (lines without one)"] += 1
        key = f"{iv.engine or ''}|{where}|{iv.accepted_tokens}|{iv.draft_tokens}"
        per_route.setdefault(args.route, []).append(
            IngestedRow(now if iv.time is None else iv.time, iv.counts, key, iv.drafts_estimated,
                        load=_logged_load(iv)))
    return per_route, "log", args.log, dict(skipped), parsed.lines, stamped


def _logged_load(interval):
    """A logged interval's load (acceptance.store.LoggedLoad), None where its stats line gave none."""
    from acceptance.store import LoggedLoad

    if interval.running is None or interval.generation_tokens is None or not interval.interval_s:
        return None
    return LoggedLoad(interval.running, interval.interval_s, interval.generation_tokens,
                      f"{interval.process or ''}|{interval.engine or ''}")


# ---------------------------------------------------------------------------- model
def cmd_model_table(args) -> int:
    from dataclasses import asdict

    from model.speedup import seeds_table

    from model.drafters import drafter_for

    rows = seeds_table(args.gamma, args.draft_cost, args.p, method=args.method, baseline_tps=args.baseline_tps)
    refusal = drafter_for(args.method).refusal(args.gamma)  # a what-if the drafter cannot deploy
    if args.json:
        dump_json({"profile": "flat", "rows": [asdict(r) for r in rows], "deployable": refusal is None,
                   "reason": refusal})
        return 0
    print(f"flat profile (the flat model: independent p, draft cost r): gamma {args.gamma}, draft cost {args.draft_cost:g}, method {args.method}")
    if refusal:
        print(f"note: not deployable: {refusal}")
    print(f"{'p':>6} {'E[tokens/step]':>15} {'speedup':>9} {'tok/s':>9}")
    for r in rows:
        tps = "-" if r.tokens_per_second is None else f"{r.tokens_per_second:.1f}"
        print(f"{r.p:>6.3f} {r.expected_tokens_per_step:>15.2f} {r.speedup:>8.2f}x {tps:>9}")
    return 0


def cmd_model_implied_p(args) -> int:
    from dataclasses import asdict

    from model.speedup import implied_p

    if (args.speedup is None) == (args.tokens_per_second is None):
        raise UsageError("give either --speedup S or --tokens-per-second X with --baseline-tps Y")
    if (args.tokens_per_second is None) != (args.baseline_tps is None):
        raise UsageError("--tokens-per-second and --baseline-tps go together (the speedup is their ratio)")
    speedup = args.speedup if args.speedup is not None else args.tokens_per_second / args.baseline_tps
    r = implied_p(speedup, args.gamma, args.draft_cost, method=args.method)
    if args.json:
        dump_json(asdict(r))
    else:
        print(f"speedup {r.speedup:g}x at gamma {r.gamma}, draft cost {r.draft_cost:g} (flat profile) "
              f"-> p {r.p:.4f}, E[tokens/step] {r.expected_tokens_per_step:.2f}")
    return 0


# ---------------------------------------------------------------------------- simulate
def cmd_simulate(args) -> int:
    import tomllib
    from pathlib import Path

    from acceptance.sim import Fleet, build_scenario, scenario_from_dict

    if args.config:
        path = Path(args.config)
        try:
            text = path.read_text(encoding="utf-8")
            raw = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except FileNotFoundError:
            raise UsageError(f"{path}: scenario file not found") from None
        except (OSError, ValueError) as e:
            raise UsageError(f"{path}: cannot read scenario: {str(e).splitlines()[0]}") from None
        scenario = scenario_from_dict(raw, seed=args.seed)
    else:
        scenario = build_scenario(args.scenario, seed=args.seed if args.seed is not None else 0)
    with Fleet(scenario) as fleet:
        fleet.serve(host="127.0.0.1")
        described = fleet.describe()
        tables = _simulated_cost_tables(fleet, scenario)
        best_by_route = _simulated_best(fleet, tables)
        print(f"simulated fleet {scenario.name!r} (seed {scenario.seed}) at {args.speed:g}x wall time; Ctrl-C stops it")
        for route, info in described.items():
            print(f"route {route}:")
            for url in info["targets"]:
                print(f"  target {url}")
            for g, surv in info["true_survival"].items():
                print(f"  true survival at gamma {g}: " + " ".join(f"{x:.3f}" for x in surv))
            best, speedups = best_by_route[route]
            step = fleet.engines(fleet.routes[route][0])[0].step_time_s
            print(f"  best gamma {best} ({speedups[best]:.2f}x) for a dspark drafter costing {step.draft_cost:g} of the "
                  f"stock pass on these engines' step times, at the route's true batch mix")
        print("# config for these targets: the engines' own drafter cost and step times (a measured table, as "
              "`specdec calibrate` writes one, its T(1, 1) the plain decode: the best gamma above is priced on it)")
        for r, info in described.items():
            step = fleet.engines(fleet.routes[r][0])[0].step_time_s
            print(f"[routes.{r}]\ntargets = [{', '.join(json.dumps(u) for u in info['targets'])}]\n"
                  f'method = "dspark"\ndraft_cost = {step.draft_cost:g}\n'
                  f"cost_profile = {json.dumps(str(tables[r]))}")
        sys.stdout.flush()
        fleet.start_realtime(speed=args.speed)
        try:
            end = time.monotonic() + args.duration if args.duration else None
            while end is None or time.monotonic() < end:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    return 0


def _simulated_cost_tables(fleet, scenario) -> dict:
    """Each route's engines' step times as a measured table (specdec.demo.write_cost_table), in
    a folder of the system's temporary one named by the scenario and seed: the printed config
    names them, so they outlive the simulator."""
    import re
    import tempfile
    from pathlib import Path

    from .demo import write_cost_table

    def file_name(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", text)

    folder = Path(tempfile.gettempdir()) / file_name(f"specdec-simulate-{scenario.name}-seed{scenario.seed}")
    folder.mkdir(parents=True, exist_ok=True)
    tables = {route: folder / f"{file_name(route)}-step_costs.csv" for route in fleet.routes}
    for route, table in tables.items():
        write_cost_table(table, fleet.engines(fleet.routes[route][0])[0].step_time_s)
    return tables


def _simulated_best(fleet, tables: dict) -> dict[str, tuple[int, dict[int, float]]]:
    """Each route's best γ under its true acceptance and batch mix (specdec.demo.true_best),
    pricing steps as its engines pay them: their own step-time function as a measured table
    (``tables``) and their own drafter's cost (specdec.demo.engine_deployment)."""
    from .demo import engine_deployment, true_best

    out = {}
    for route in fleet.routes:
        engines = [e for t in fleet.routes[route] for e in fleet.engines(t)]
        out[route] = true_best(fleet, route, engine_deployment(engines[0].step_time_s, tables[route]),
                               max(e.gamma for e in engines))
    return out


# ---------------------------------------------------------------------------- demo
def as_typed(command: str) -> str:
    """``command`` as a fresh shell in this directory runs it: bare when PATH finds this
    installation's own, else its path (relative when under the current directory, as
    `.venv/bin/tune-gamma`), so that what specdec prints can be pasted as it is."""
    import shutil
    from pathlib import Path

    mine = Path(sys.executable).parent / command  # the console scripts sit beside the interpreter
    if not mine.exists():
        return command
    found = shutil.which(command)
    if found and Path(found).resolve() == mine.resolve():
        return command
    relative = os.path.relpath(mine, os.getcwd())
    return relative if not relative.startswith("..") else str(mine)


def cmd_demo(args) -> int:
    from pathlib import Path

    from .demo import run_demo
    from .report import format_tuning, tuning_to_dict

    out_dir = Path(args.dir)
    print("specdec demo: a simulated vLLM fleet -> the real collector over HTTP -> store -> tune-gamma")
    t0 = time.monotonic()
    results = run_demo(out_dir, seed=args.seed, progress=lambda msg: print(msg, flush=True))
    for r in results:
        print()
        print(format_tuning(tuning_to_dict(r.tuning)))
    print()
    print("the simulator's truth (speedups under the true acceptance and batch mix):")
    print(f"{'route':<12} {'deployed':>8} {'recommended':>12} {'decision':>9} {'true best':>10} {'speedup of ours / best':>24}")
    ok = True
    for r in results:
        rec = r.tuning.recommendation
        ratio = r.speedup_ratio
        ok &= ratio >= 0.99
        print(f"{r.route:<12} {rec.deployed_gamma:>8} {rec.recommended_gamma:>12} {rec.decision:>9} "
              f"{r.true_best_gamma:>10} {ratio:>24.4f}")
    print()
    config = out_dir / "specdec.toml"
    print(f"done in {time.monotonic() - t0:.1f}s. The store and config are in {out_dir}/:")
    tune, specdec = as_typed("tune-gamma"), as_typed("specdec")
    commands = [(f"{tune} --route open --config {config}", "the simulated hour ended now: a 1h window finds it"),
                (f"{tune} --route open --config {config} --json", "the same as JSON; --emit vllm for the config alone"),
                (f"{specdec} dashboard --config {config}", "then open http://127.0.0.1:8501")]
    width = max(len(c) for c, _ in commands)
    for command, why in commands:
        print(f"  {command:<{width}}  # {why}")
    if not ok:
        print("demo: the recommendation is more than 1% from the simulator's best", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------- parsers
def build_parser() -> argparse.ArgumentParser:
    from acceptance.limits import DEFAULT_MAX_BYTES

    parser = _root_parser()
    parser.add_argument("--version", action="version", version=f"specdec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    from . import cmd_inspect  # here, not at the top: `specdec dashboard` starts its server without them

    cmd_inspect.add_parser(sub, DEFAULT_MAX_BYTES)

    p = sub.add_parser("collect", help="scrape the config's targets into the store")
    add_store_args(p)
    p.add_argument("--interval", type=duration, help="seconds between cycles (default [collect] interval, 15s)")
    p.add_argument("--once", action="store_true", help="one cycle (a baseline: a window needs two)")
    p.add_argument("--duration", type=duration, help="stop after this long (default: run until Ctrl-C)")
    p.add_argument("--serve", type=int, metavar="PORT",
                   help="also expose per-route survival, AL, equivalent p, speedup and recommended γ as Prometheus gauges")
    p.add_argument("--serve-host", default="127.0.0.1", help="address the gauges bind to (default 127.0.0.1)")
    p.add_argument("--serve-window", type=duration, default=3600.0, help="window of the served gauges (default 1h)")
    p.set_defaults(fn=cmd_collect)

    p = sub.add_parser("rules", help="Prometheus recording rules that precompute per-route survival")
    p.add_argument("--config", help="config file (default ./specdec.toml)")
    p.add_argument("--rate-window", type=promql_duration, default="5m",
                   help="the rate() window of the dashboard rules (default 5m)")
    p.add_argument("--resolution", type=promql_duration, default="1m",
                   help="how often the window rules (what tune-gamma reads through Prometheus) are evaluated: "
                        "1s to 5m (default 1m)")
    p.add_argument("--query-offset", type=promql_duration, default="10s",
                   help="how far before each evaluation the window rules read, at least the scrape_timeout "
                        "(a sample is stamped at its scrape's start, stored at its end): 0s to 5m (default 10s, "
                        "Prometheus' default scrape_timeout)")
    p.set_defaults(fn=cmd_rules)

    p = sub.add_parser("grafana", help="a Grafana dashboard (JSON) of every route over specdec's gauges and rules")
    p.add_argument("--config", help="config file (default ./specdec.toml)")
    p.add_argument("--rate-window", type=promql_duration, default="5m",
                   help="the dashboard rules' rate() window, as given to `specdec rules`")
    p.add_argument("--resolution", type=promql_duration, default="1m",
                   help="the window rules' resolution, as given to `specdec rules`")
    p.set_defaults(fn=cmd_grafana)

    p = sub.add_parser("ingest", help="store per-request metrics or vLLM log lines for a route")
    p.add_argument("--route", required=True, type=route_name, help="the route (a per-request line's \"route\" key overrides it)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--per-request", metavar="FILE", help="JSON lines of vLLM responses' metrics (- for stdin)")
    src.add_argument("--log", metavar="FILE", help="a vLLM server log with SpecDecoding metrics lines")
    add_store_args(p)
    p.set_defaults(fn=cmd_ingest)

    p = sub.add_parser("simulate", help="serve a simulated vLLM fleet on loopback")
    p.add_argument("--scenario", default="demo", type=scenario_name,
                   help="a built-in scenario (default demo; an unknown name lists them)")
    p.add_argument("--config", help="a scenario file (TOML or JSON) instead of a named scenario")
    p.add_argument("--seed", type=int)
    p.add_argument("--speed", type=positive_float, default=1.0, help="simulated seconds per wall second")
    p.add_argument("--duration", type=duration, help="stop after this long (wall time)")
    p.set_defaults(fn=cmd_simulate)

    p = sub.add_parser("demo", help="the whole path on a simulated fleet (no GPU, no vLLM)")
    p.add_argument("--dir", default=".demo", help="where the demo leaves its store and config (default .demo)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("model", help="the seeds' flat model: tables and inversions")
    msub = p.add_subparsers(dest="model_command", required=True, parser_class=_Parser)
    t = msub.add_parser("table", help="speedup and tok/s for a list of p")
    t.add_argument("--gamma", type=int, required=True)
    t.add_argument("--draft-cost", type=float, required=True)
    t.add_argument("--p", type=float_list, required=True, help="comma-separated acceptance rates")
    t.add_argument("--method", default="dspark")
    t.add_argument("--baseline-tps", type=positive_float)
    t.add_argument("--json", action="store_true")
    t.set_defaults(fn=cmd_model_table)
    t = msub.add_parser("implied-p", help="the independent p a published speedup implies")
    t.add_argument("--speedup", type=float, help="the published speedup, or:")
    t.add_argument("--tokens-per-second", type=positive_float, help="the published tok/s with speculation ...")
    t.add_argument("--baseline-tps", type=positive_float, help="... and without it (speedup = their ratio)")
    t.add_argument("--gamma", type=int, required=True)
    t.add_argument("--draft-cost", type=float, required=True)
    t.add_argument("--method", default="dspark")
    t.add_argument("--json", action="store_true")
    t.set_defaults(fn=cmd_model_implied_p)

    from . import cmd_calibrate, cmd_replay, dashboard_launch

    cmd_replay.add_parser(sub)
    cmd_calibrate.add_parser(sub)
    dashboard_launch.add_parser(sub)
    return parser


def scenario_name(text: str) -> str:
    """A built-in scenario's name. Checked only when `simulate` runs: the simulator (scipy
    behind it) is not imported to build every command's parser."""
    from acceptance.sim import SCENARIO_NAMES

    if text not in SCENARIO_NAMES:
        raise argparse.ArgumentTypeError(f"unknown scenario {text!r} (known: {', '.join(SCENARIO_NAMES)})")
    return text


def _values_that_look_like_options(argv: list[str] | None) -> list[str]:
    """``--window -1h`` as ``--window=-1h``: argparse takes a value that starts with "-" and a
    digit (not a plain negative number) for an option and says "expected one argument";
    joined, the option's own check answers (a window must be positive)."""
    args = list(sys.argv[1:] if argv is None else argv)
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and "=" not in a and i + 1 < len(args) and re.match(r"^-\d", args[i + 1]):
            out.append(f"{a}={args[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _root_parser() -> argparse.ArgumentParser:
    return _Parser(prog="specdec", description="Speculative-decoding acceptance analyzer and γ tuner for vLLM.")


def dashboard_parser() -> argparse.ArgumentParser:
    """`specdec dashboard`'s parser alone: the dashboard's server starts sooner without the other
    commands' parsers (they import aiohttp and more: about 0.13 s of a cold start)."""
    from . import dashboard_launch

    parser = _root_parser()
    dashboard_launch.add_parser(parser.add_subparsers(dest="command", required=True, parser_class=_Parser))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = dashboard_parser() if argv[:1] == ["dashboard"] else build_parser()
    args = parser.parse_args(_values_that_look_like_options(argv))
    return _run(args.fn, args, "specdec")


def tune_gamma_main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="tune-gamma", description="Recommend the number of draft tokens γ for a route.")
    from . import cmd_tune

    cmd_tune.add_arguments(parser)
    args = parser.parse_args(_values_that_look_like_options(argv))
    return _run(cmd_tune.cmd_tune_gamma, args, "tune-gamma")


if __name__ == "__main__":
    sys.exit(main())
