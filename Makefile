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

.PHONY: repro test test-fast bench venv clean-venv mlflow-ui

venv: $(STAMP)

# torch==2.13.0 first: pip takes the CPU wheel on this machine; a GPU user installs the CUDA
# build of the same version before running make (see README).
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

# An interrupted `dvc exp run` can leave HEAD detached at the branch's own commit: re-attach it.
repro: $(STAMP)
	@test -d .git || { echo "make repro needs a git checkout (DVC experiments)"; exit 2; }
	@branch=$$(git symbolic-ref -q --short HEAD); \
	reattach() { trap "" INT TERM; \
	  if [ -n "$$branch" ] && ! git symbolic-ref -q HEAD >/dev/null; then \
	    if [ "$$(git rev-parse HEAD)" = "$$(git rev-parse "$$branch")" ]; then \
	      git checkout -q "$$branch" && echo "ctxrep: re-attached HEAD to $$branch" >&2; \
	    else echo "ctxrep: WARNING: HEAD is detached; return with: git checkout $$branch" >&2; fi; \
	  fi; }; \
	trap reattach EXIT; trap 'exit 130' INT TERM; \
	args=$$($(BIN)/python -m ctxrep.config dvc-args $(PROFILE)) || exit 2; \
	echo "dvc exp run $$args"; \
	eval "$(DVC) exp run $$args"
	@echo "ctxrep: done. Report: reports/report.md; numbers: dvc metrics show / dvc exp show"

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python bench/bench_tokenize.py

mlflow-ui: $(STAMP)
	$(BIN)/mlflow ui --backend-store-uri sqlite:///$(abspath mlflow.db)

clean-venv:
	rm -rf $(VENV)
