# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Each bootstraps its own virtual environment in .venv (idempotent: re-running reinstalls
# only when pyproject.toml changed).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-core
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: demo test bench venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# The tests also compile the CuTe DSL kernels (no GPU needed) and check them against a
# torch reference: torch is pinned to the CPU build this machine kind keeps on disk (any
# other version downloads a CUDA build of several GB).
TEST_EXTRAS := nvidia-cutlass-dsl==4.8.1 torch==2.13.0

$(DEVSTAMP): pyproject.toml Makefile $(STAMP)
	$(BIN)/pip install -q -e '.[dev]' $(TEST_EXTRAS)
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/specdec demo

test: $(DEVSTAMP)
	sh scripts/ensure_chromium.sh
	$(BIN)/python -m pytest -q tests

bench: $(STAMP)
	$(BIN)/python benchmarks/parse_page.py
	$(BIN)/python benchmarks/collector_fleet.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
