# The one place commands live. `make run` and `make test` create or refresh .venv themselves.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LINT_STAMP := $(VENV)/.lint-installed
export SAM_CLI_TELEMETRY := 0
export POWERTOOLS_TRACE_DISABLED := true
export AWS_DEFAULT_REGION ?= us-east-1

EXAMPLE ?= examples/chatbot.yaml

.PHONY: run estimate test unit test-all lint format serve build bench clean engine engine-stop test-engine fuzz-api

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The simulator's hot loop compiled with mypyc into .venv (sizing_local/native.py): rebuilt when its sources change;
# where no C compiler is at hand it says so and the simulations run as Python, with the same results.
NATIVE_SOURCES := $(addprefix layers/sizing/sizing/perf/,steptime.py decoderuns.py arrivals.py scheduler.py native.py)
NATIVE := $(VENV)/.native
$(NATIVE): $(STAMP) $(NATIVE_SOURCES) local/sizing_local/native.py
	$(BIN)/python -m sizing_local.native
	touch $(NATIVE)

$(LINT_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,lint]'
	touch $(LINT_STAMP)

run: $(NATIVE)
	$(BIN)/sizing run $(EXAMPLE)

estimate: $(NATIVE)
	$(BIN)/sizing estimate $(EXAMPLE)

# Parallel (pytest-xdist) on one worker more than the cores: the integration tests spend much of their time
# waiting on loopback servers and real-time load tests (2 workers on 2 cores kept ~1.2 cores busy), so a third
# worker fills the wait (measured on 2 cores, 1,359 tests: 2:49-2:52 warm, 2:53-3:09 on a fresh clone, whose
# first run also builds pytest's rewritten test modules in every worker). --dist loadgroup keeps tests of one
# xdist_group on one worker, one after another (the timing-sensitive twin and load-test checks, and modules that
# start their own server: see tests/conftest.py). Bytecode caching stays on for the tests: pytest caches its
# rewritten test modules there, which each worker otherwise redoes (~5 s).
CORES := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
XDIST ?= -n $(shell echo $$(($(CORES) + 1))) --dist loadgroup
#: the unit tier waits on nothing (no sockets, no servers): one worker per core
UNIT_XDIST ?= -n auto --dist loadgroup
test: export PYTHONDONTWRITEBYTECODE :=
test: $(NATIVE)
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow and not e2e and not engine"

# The unit tier alone: no sockets (pytest-socket), no moto -- tests/conftest.py enforces both.
unit: export PYTHONDONTWRITEBYTECODE :=
unit: $(NATIVE)
	$(BIN)/python -m pytest -q $(UNIT_XDIST) tests/unit -m "not slow"

test-all: export PYTHONDONTWRITEBYTECODE :=
test-all: $(NATIVE)
	$(BIN)/python -m pytest -q $(XDIST) -m "not engine"

# The real engine (engine/engine.sh; docs/engine.md): vLLM's CPU build in its own venv (.engine/venv, Python 3.11),
# serving a model built here from code in engine/, on 127.0.0.1:$(ENGINE_PORT). The product talks to it over HTTP
# only. `make engine` leaves it running (`make engine-stop` stops it); `make test-engine` starts it, runs
# tests/engine on the other core (the engine is pinned to core 0, the client to core 1, as vLLM's CPU docs
# advise), and stops it. Where the engine cannot install, it says why in one line; `make test` never needs it.
ENGINE := engine/engine.sh
ENGINE_PORT ?= 8765
export SIZING_ENGINE_PORT := $(ENGINE_PORT)
CLIENT_CORES := $(shell [ $(CORES) -gt 1 ] && echo "taskset -c 1-$$(($(CORES) - 1))")
engine:
	$(ENGINE) start

engine-stop:
	$(ENGINE) stop

test-engine: export PYTHONDONTWRITEBYTECODE :=
test-engine: $(NATIVE)
	$(ENGINE) start
	SIZING_ENGINE_URL=$$($(ENGINE) url) $(CLIENT_CORES) $(BIN)/python -m pytest -q tests/engine -m engine; \
	  rc=$$?; $(ENGINE) stop; exit $$rc

lint: $(LINT_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/cfn-lint template.yaml
	PATH=$(abspath $(BIN)):$$PATH PYENV_VERSION=3.11.7:3.12.1 $(BIN)/sam validate --lint --region us-east-1

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

serve: $(NATIVE)
	$(BIN)/sizing serve --port 3000

# After the build: the simulator's hot loop compiled with mypyc by the runtime's Python (3.12) into the layer and
# checked there against its Python modules (sizing_local/native.py; the build fails where it cannot be compiled);
# the layer ships bytecode compiled by the runtime's Python, checked by hash only at compile time -- Lambda's file
# system is read-only, so without it every cold start compiles each module it imports (~0.13 s for the API
# handler), with the validated catalog's compact copy (sizing.catalog.loading.package_compact: a cold start loads it
# in ~5 ms instead of validating the catalog in ~55 ms) -- and its unzipped size is printed against Lambda's
# 250 MB limit.
LAYER_BUILD := .aws-sam/build/SizingLayer
build: $(LINT_STAMP)
	PYENV_VERSION=3.11.7:3.12.1 $(BIN)/sam build
	PYENV_VERSION=3.12.1 $(BIN)/python -m sizing_local.native --layer $(LAYER_BUILD)/python --require
	PYENV_VERSION=3.12.1 PYTHONPATH=$(LAYER_BUILD)/python python3.12 -c \
	  "from sizing.catalog.loading import package_compact; print('catalog compact copy:', package_compact())"
	PYENV_VERSION=3.12.1 python3.12 -m compileall -q -j 0 --invalidation-mode unchecked-hash $(LAYER_BUILD)/python > /dev/null
	@echo "Lambda layer, unzipped: $$(du -sm $(LAYER_BUILD) | cut -f1) MB (Lambda's limit for function + layers: 250 MB)"

# The API fuzzed as an outside client would (benchmarks/api_fuzz.py): schemathesis --checks all, 30 examples per
# operation, against `sizing serve --max-runs 1`, on two seeds; fails on any failure, 5xx or answer over 29 s. Its
# own target, not part of `make test`: it takes ~10 minutes a seed on a busy 2-core machine.
# FUZZ_ARGS: --seeds and --examples per operation (default: two seeds, 30 examples: the contract's target run)
FUZZ_ARGS ?=
fuzz-api: $(NATIVE)
	$(BIN)/python benchmarks/api_fuzz.py $(FUZZ_ARGS)

bench: $(NATIVE)
	$(BIN)/python benchmarks/speed.py
	$(BIN)/python benchmarks/accuracy.py
	$(BIN)/python benchmarks/api.py

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache
