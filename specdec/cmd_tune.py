"""`tune-gamma`: one route, the routes of a shared deployment, or a typed-in curve.

    tune-gamma --route NAME [--config F] [--db P] [--window 1h] [--json | --emit vllm]
    tune-gamma --deployment NAME [--config F] [--db P] [--window 1h] [--json]
    tune-gamma --survival A1,A2,... [--drafts N] [--method M] [--draft-cost R] [--cost-profile P]

Everything it prints comes from specdec.pipeline (and specdec.report's views of it): this
module picks the source, opens the store and chooses the view. A route of scraped targets
with no store yet is scraped live for the window first.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from model.deployment import DEPLOYMENT_KEYS

from .args import UsageError, add_store_args, bounded_int, dump_json, duration, float_list, route_name, share


def cmd_tune_gamma(args) -> int:
    from . import pipeline
    from .config import load_config, refuse_unpriced_probe_flags, refuse_unread_flags
    from .report import format_tuning, tuning_to_dict

    given = [name for name, x in (("--route", args.route), ("--deployment", args.deployment),
                                  ("--survival", args.survival)) if x is not None]
    if len(given) > 1:
        raise UsageError(f"give only one of --route, --deployment or --survival (got {' and '.join(given)})")
    refuse_ignored(args)
    flags = figure_flags(args)
    args.window = pipeline.DEFAULT_WINDOW_S if args.window is None else args.window
    if args.deployment is not None:
        return _tune_deployment(args, flags)
    if args.survival is not None:
        # a config given with a typed curve lends its [deployment]; the flags go over it
        config = load_config(args.config, required=True).with_flags(flags) if args.config else None
        tuning = pipeline.tune_inline(args.survival, drafts=args.drafts, deployed_gamma=args.deployed_gamma,
                                      figures=flags, config=config, undrafted_share=args.undrafted_share)
    else:
        if not args.route:
            raise UsageError("give --route NAME (a route of the config), --deployment NAME (routes sharing one) "
                             "or --survival A1,A2,...")
        # Without a config file a route can still come from `specdec ingest` (default figures).
        config = load_config(args.config, required=args.config is not None).with_flags(flags)
        if args.route in config.routes and config.routes[args.route].source == "prometheus":
            tuning = pipeline.tune_route(config, args.route, window_s=args.window)
        else:
            if args.route not in config.routes and not config.store_path_for(args.db).exists():
                if config.path is None:
                    raise UsageError(f"no ./specdec.toml and no ./specdec.db: pass --config FILE (routes) or --db PATH "
                                     f"(a store with `specdec ingest --route {args.route}` data)")
                config.route(args.route)  # the unknown-route error, naming the configured ones
            route = config.routes.get(args.route)
            if route is not None and route.source == "scrape" and not args.db and not config.store_path.exists():
                tuning = _tune_live(config, args.route, args.window)
            else:
                store = _open_store_for_reading(config, args.db)
                try:
                    tuning = pipeline.tune_route(config, args.route, store=store, window_s=args.window)
                finally:
                    store.close()
    refuse_unread_flags(tuning.deployment, tuning.recommendation.anchor, args.route)
    refuse_unpriced_probe_flags(tuning.deployment, [tuning.recommendation.decided], args.route)
    doc = tuning_to_dict(tuning)
    if args.emit == "vllm":
        conf = doc["vllm"]["speculative_config"]
        if doc["vllm"]["command_line"] is None:
            keys = ", ".join(f["key"] for f in doc["figures_needed"])
            raise UsageError(f"no config to deploy: the answer rests on default figures ({keys}); set them in the "
                             f"config or as flags (tune-gamma without --emit lists what each changes)")
        if conf is None:
            print("speculation off: omit --speculative-config", file=sys.stderr)
            return 0
        print(json.dumps(conf))
    elif args.json:
        dump_json(doc)
    else:
        print(format_tuning(doc))
    return 0


def _tune_deployment(args, flags: dict) -> int:
    """tune-gamma --deployment NAME: the routes naming it, priced together (one γ for their mix)."""
    from .config import load_config, refuse_unpriced_probe_flags, refuse_unread_flags
    from .deployment_tuning import tune_deployment
    from .report import deployment_to_dict, format_deployment

    if args.emit:
        raise UsageError("--emit vllm is for one route; for a deployment take vllm.speculative_config of the joint "
                         "gamma from --json")
    config = load_config(args.config, required=args.config is not None).with_flags(flags)
    routes = config.deployment_routes(args.deployment)
    store = None
    if any(config.routes[r].source != "prometheus" for r in routes):
        store = _open_store_for_reading(config, args.db)
    try:
        tuned = tune_deployment(config, args.deployment, store=store, window_s=args.window)
    finally:
        if store is not None:
            store.close()
    for t in tuned.tunings:
        refuse_unread_flags(t.deployment, t.recommendation.anchor, t.route)
    if tuned.tunings:
        refuse_unpriced_probe_flags(tuned.tunings[0].deployment, [t.recommendation.decided for t in tuned.tunings])
    doc = deployment_to_dict(tuned)
    if args.json:
        dump_json(doc)
    else:
        print(format_deployment(doc))
    return 0


DEAD_CYCLES = 3  # a live window stops early when no target answered its first cycles

FLAG_ALIASES = {"baseline_tokens_per_second": ("--baseline-tps",)}
FLAG_HELP = {"method": "the --speculative-config method (dspark, eagle3, ngram, ...)",
             "draft_cost": "the drafter's time per pass as a share of the target's (what if it doubles?)",
             "cost_profile": "flat | roofline | the path of a measured table",
             "specialized_speedup": "a value, or LOW,HIGH",
             "cudagraph_capture_sizes": "batch sizes, comma-separated",
             "speculative_keys": "the rest of the engine's --speculative-config, a JSON object such as "
                                 "'{\"prompt_lookup_min\": 1}' (not method, num_speculative_tokens or model)"}


def figure_value(text: str):
    """A deployment key's value as its TOML would be (0.2 → a number, 1.5,2.0 → a list, eagle3
    → a string); Deployment.from_mapping then checks it as it checks the config's."""
    import tomllib

    for candidate in [text] + ([f"[{text}]"] if "," in text and not text.startswith("[") else []):
        try:
            return tomllib.loads(f"v = {candidate}")["v"]
        except tomllib.TOMLDecodeError:
            pass
    return text


def json_table(text: str):
    """A table flag's value: a JSON object (as vLLM's own --speculative-config takes it), or the
    TOML inline table the config would hold; Deployment.from_mapping then checks its keys."""
    import argparse

    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        value = figure_value(text)
        if isinstance(value, dict):
            return value
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"prompt_lookup_min\": 1}}', got "
                                         f"{text!r} ({e.msg} at column {e.colno})") from None


FLAG_TYPES = {"speculative_keys": json_table}


def figure_flags(args) -> dict:
    """{deployment key: value} of the figure flags given, checked as one [deployment] table."""
    from model.deployment import Deployment, ModelInputError
    from model.speculative_keys import check_speculative_keys

    flags = {k: getattr(args, f"figure_{k}") for k in DEPLOYMENT_KEYS if getattr(args, f"figure_{k}") is not None}
    if "speculative_keys" in flags and "method" not in flags:
        # which keys a method takes is checked once the config's method is known (its route's table)
        why = check_speculative_keys(flags["speculative_keys"], None)
        if why is not None:
            raise ModelInputError(f"tune-gamma flags speculative_keys: {why}")
        Deployment.from_mapping({k: v for k, v in flags.items() if k != "speculative_keys"}, where="tune-gamma flags")
    else:
        Deployment.from_mapping(flags, where="tune-gamma flags")  # a bad value is named as the flag's
    return flags


def refuse_ignored(args) -> None:
    """A flag this form of tune-gamma would not use is refused, naming it (exit 2)."""
    inline_only = [("--drafts", args.drafts), ("--deployed-gamma", args.deployed_gamma),
                   ("--undrafted-share", args.undrafted_share)]
    if args.survival is None:
        given = [name for name, value in inline_only if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: only with --survival (a route's window gives its drafts and γ)")
    else:
        given = [name for name, value in (("--db", args.db), ("--window", args.window)) if value]
        if given:
            raise UsageError(f"{', '.join(given)}: not with --survival (a typed curve reads no store or window)")


def _tune_live(config, route: str, window_s: float):
    """No store yet: scrape the route's targets for the window into a temporary store, then
    tune it (Ctrl-C ends the window early and tunes what was seen)."""
    import tempfile
    from pathlib import Path

    from acceptance.collector import ScrapeOptions, run_collector
    from acceptance.store import Store

    from . import pipeline
    from .report import format_clock, format_duration

    targets = list(config.routes[route].targets)
    access = config.scrape_access([route])
    interval = min(config.collect_interval_s, window_s / 4)
    print(f"no store at {config.store_path}: scraping route {route}'s {len(targets)} target(s) every {interval:g}s "
          f"for the {format_duration(window_s)} window, so this takes {format_duration(window_s)} "
          f"(until {format_clock(time.time() + window_s)}); a shorter --window shortens it, Ctrl-C stops "
          f"early and tunes what was seen, and `specdec collect` keeps a store to tune at once", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="specdec-live-") as tmp, Store.open(Path(tmp) / "live.db") as store:
        started = time.time()

        answered = []
        stop = threading.Event()

        def progress(n: int, results, seconds: float) -> None:
            ok = sum(r.ok for r in results)
            answered.append(ok)
            print(f"\r  {time.time() - started:6.0f}s of {window_s:g}s: cycle {n}, {ok}/{len(results)} targets ok",
                  end="", file=sys.stderr, flush=True)
            if n >= DEAD_CYCLES and not any(answered):
                stop.set()  # nobody answers: say so now rather than after the whole window

        try:
            # One cycle past the window: a window needs a baseline scrape at its start.
            run_collector(store.write_cycle, targets, interval_s=interval, duration_s=window_s + interval / 2,
                          on_cycle=progress, stop=stop,
                          scrape=ScrapeOptions(timeout_s=config.collect_timeout_s, max_bytes=config.max_page_bytes,
                                               max_engines=config.max_engines, access=access))
        except KeyboardInterrupt:
            print("\n  stopped early", file=sys.stderr)
        print(file=sys.stderr)
        end = time.time()
        return pipeline.tune_route(config, route, store=store, window_s=end - started + 1.0, now=end)


def _open_store_for_reading(config, db: str | None):
    from acceptance.store import Store

    path = config.store_path_for(db)
    if not path.exists():
        raise UsageError(f"{path}: no store here yet; run `specdec collect --config {config.path}` first (or pass --db)")
    if path.is_file() and path.stat().st_size == 0:  # SQLite would make it a store: a read must not write one
        raise UsageError(f"{path}: an empty file, not a specdec store; run `specdec collect` or `specdec ingest` "
                         f"into it first")
    return Store.open(path, retention_s=config.retention_s, reading=True)  # a full disk: read it read-only


def add_arguments(p) -> None:
    """tune-gamma's options (its own parser, prog tune-gamma: specdec.cli.tune_gamma_main)."""
    p.add_argument("--route", type=route_name, help="a route of the config")
    p.add_argument("--deployment", type=route_name,
                   help="the routes naming this deployment (deployment = NAME), priced together: one γ for their mix")
    add_store_args(p)
    p.add_argument("--window", type=duration, help="window ending now (default 1h)")
    # one output: the document or the bare --speculative-config (argparse refuses both at once)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the documented JSON document")
    out.add_argument("--emit", choices=["vllm"], help="print only the --speculative-config JSON")
    p.add_argument("--survival", type=float_list, help="inline: a_1,a_2,... instead of a route")
    p.add_argument("--drafts", type=bounded_int(1, 10**12), help="inline: drafts behind the curve (for intervals)")
    p.add_argument("--deployed-gamma", type=bounded_int(0, 64), help="inline: the deployed γ (default: the curve's length)")
    p.add_argument("--undrafted-share", type=share, metavar="NU",
                   help="inline: ν, the share of decode tokens from steps that drafted nothing (an ngram or suffix "
                        "route's; `specdec inspect` shows a page's). Not given for ngram or suffix: no decision rests "
                        "on every step drafting")
    figures = p.add_argument_group("deployment figures", "every [deployment] key, over the config's [deployment] "
                                   "and the route's table (named 'flag' in profile_figures)")
    for key in DEPLOYMENT_KEYS:
        names = [f"--{key.replace('_', '-')}", *FLAG_ALIASES.get(key, ())]
        figures.add_argument(*names, dest=f"figure_{key}", type=FLAG_TYPES.get(key, figure_value), metavar=key.upper(),
                             help=FLAG_HELP.get(key, f"the {key} key"))
