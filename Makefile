# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# KafkaJS for the client matrix (tests/clients), exactly as its package-lock.json says.
KAFKAJS := tests/clients/kafkajs
KAFKAJS_STAMP := $(KAFKAJS)/node_modules/.package-lock.json

.PHONY: run test test-ready lint bench clean tools fuzz native jars java-drivers harness helm image

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The hot modules compiled with mypyc and the machine's C compiler (pyproject.toml lists
# them); a no-op when they are up to date, pure Python where no compiler is found.
native: $(STAMP)
	$(BIN)/python tools/build_native.py

run: native
	$(BIN)/quotagate serve --config examples/quotagate.toml

# What the suite needs is made two jobs at a time (compiling, type-checking and javac each
# keep one core busy), each job's output printed whole once it is done; then the suite.
test:
	@$(MAKE) --no-print-directory --jobs=2 --output-sync=target test-ready
	$(BIN)/pytest

test-ready: native tools jars java-drivers harness helm $(KAFKAJS_STAMP) lint

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/mypy

# Apache Kafka's jars (brokers, tools, the Java clients, Streams) and Spark's Kafka connector
# (`pipeline stream`) from the Maven files in java/, copied once into a cache outside the
# checkout (tools/jars.py); `make run` needs none of them.
jars: | $(BIN)/python
	$(BIN)/python tools/jars.py

# The suite's small Java drivers (tests/clients/java), compiled with javac against each jar set
# into build/java (tools/java_drivers.py); compiled again only when a driver or a pom changes.
java-drivers: jars
	$(BIN)/python tools/java_drivers.py

# The Java harness that plays random sequences on Kafka's own quota classes (issue 32),
# compiled by javac against the Kafka jars into build/differential/ (tools/harness.py).
harness: jars
	$(BIN)/python tools/harness.py

# Helm for the chart's tests (tests/deploy), built from the Go module proxy into the cache
# (as the jars are: $QUOTAGATE_CACHE, else $XDG_CACHE_HOME/quotagate, else ~/.cache/quotagate).
# Needs Go 1.22 or later on the PATH (Debian 12's golang-go, 1.19, is too old for Helm 3.16).
HELM_VERSION := v3.16.4
QUOTAGATE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/quotagate
HELM := $(QUOTAGATE_CACHE)/bin/helm
helm: $(HELM)
$(HELM):
	@command -v go >/dev/null 2>&1 || { echo "make helm needs Go >= 1.22 on the PATH (https://go.dev/dl)"; exit 1; }
	GOBIN=$(QUOTAGATE_CACHE)/bin go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# quotagate's OCI image, localhost/quotagate:dev, with podman from a debootstrap base and
# no registry (tools/image.py; the time each step took goes to var/image-build.json).
# tests/deploy/test_image.py runs it when it exists.
image: native
	@command -v podman >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq podman debootstrap >/dev/null; }
	$(BIN)/python tools/image.py

# Debian's packages the suite drives for real: chromium (the report test), kcat (an old
# librdkafka, 2.0.2, in the client matrix), Node.js for KafkaJS, tmux (the terminal
# `quotagate top` is watched in) and haproxy (TLS in front of tansu, which speaks none).
# Installed only when missing.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
tools:
	@missing=""; \
	  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing="$$missing chromium"; \
	  command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	  command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	  command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	  command -v haproxy >/dev/null 2>&1 || test -x /usr/sbin/haproxy || missing="$$missing haproxy"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian's$$missing for the test suite"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	  fi


# The fuzz suite (tests/fuzz) on a large budget: FUZZ_CASES hostile connections (100 000 by
# default) and/or FUZZ_SECONDS of wall clock, fresh random seeds, every schema kio models.
# `make test` runs the same tests on a small fixed budget. Live-run figures: var/fuzz-live.json.
# tests/kafka/differential: FUZZ_CASES sequences per Kafka class played on Kafka's own code
# and on the engine (var/kafka-judge.json has the counts and times).
FUZZ_CASES ?=
FUZZ_SECONDS ?=
FUZZ_TESTS ?= tests/fuzz tests/kafka/differential
fuzz: native harness
	QUOTAGATE_FUZZ=1 QUOTAGATE_FUZZ_CASES=$(FUZZ_CASES) QUOTAGATE_FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  QUOTAGATE_FUZZ_REPORT=var/fuzz-live.json $(BIN)/pytest $(FUZZ_TESTS) --timeout=0 -rA

bench: native
	$(BIN)/python benchmarks/engine.py

clean:
	-$(BIN)/python tools/build_native.py --clean
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache $(KAFKAJS)/node_modules

# KafkaJS for the client matrix, exactly as locked in its package-lock.json (npm ci); npm
# writes node_modules/.package-lock.json, so it is reinstalled only when the lock changes.
$(KAFKAJS_STAMP): $(KAFKAJS)/package-lock.json | tools
	cd $(KAFKAJS) && npm ci --no-audit --no-fund --loglevel=error
