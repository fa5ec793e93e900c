# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean browser fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/quotagate serve --config examples/quotagate.toml

test: $(STAMP) browser
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest

# The pipeline report is checked in a real headless browser: Debian's chromium.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { echo "installing Debian's chromium for the report test"; \
	    $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq chromium >/dev/null; }

# The fuzz suite (tests/fuzz) on a large budget: FUZZ_CASES hostile connections (100 000 by
# default) and/or FUZZ_SECONDS of wall clock, fresh random seeds, every schema kio models.
# `make test` runs the same tests on a small fixed budget. Live-run figures: var/fuzz-live.json.
FUZZ_CASES ?=
FUZZ_SECONDS ?=
FUZZ_TESTS ?= tests/fuzz
fuzz: $(STAMP)
	QUOTAGATE_FUZZ=1 QUOTAGATE_FUZZ_CASES=$(FUZZ_CASES) QUOTAGATE_FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  QUOTAGATE_FUZZ_REPORT=var/fuzz-live.json $(BIN)/pytest $(FUZZ_TESTS) --timeout=0 -rA

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
