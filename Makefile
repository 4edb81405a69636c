# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run

.PHONY: run test lint typecheck unit compiled bench clean sandbox browser postgres

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# `make run` installs the gateway alone; `make test` adds the test tools.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/commonos run $(if $(CONFIG),--config $(CONFIG),)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Three workers on the suite's 2 cores: much of a test's time is spent waiting on the
# processes and servers it starts (259 s with two workers, 215-233 s with three, measured
# here). A worker that runs out of tests takes some of another's (worksteal), so none is
# left alone with a long test file at the end: 231 s with each file on one worker, 189-209 s
# stealing, measured here with the bytecode compiled.
# Bytecode is compiled once, two processes at a time, into PYCACHE (outside the checkout)
# and read from there by the workers and every process the tests start, even where
# PYTHONDONTWRITEBYTECODE is set: otherwise each of them compiles every module it imports.
PYCACHE ?= /tmp/commonos-tests-pycache
TEST_ENV := env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy -u ALL_PROXY \
	-u all_proxy -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(PYCACHE)
unit: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m compileall -q -j 2 core adapters gateway bench tests >/dev/null
	$(TEST_ENV) $(BIN)/pytest -n 3 --dist worksteal

# What every worker would otherwise do at once when PYCACHE is empty: compile the libraries
# the tests import and rewrite the tests' assertions (about 25 s of one core, 7 s once
# done). `make test` does it while the type check keeps the other core busy.
compiled: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m compileall -q -j 2 core adapters gateway bench tests >/dev/null
	@out=$$($(TEST_ENV) $(BIN)/pytest --collect-only -qq -p no:cacheprovider 2>&1) || \
		{ echo "$$out" | tail -40; exit 1; }

# The terminal tool runs in bubblewrap; the tests use the real one. Installed when missing.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
		echo "bubblewrap (bwrap) is missing: installing it with apt-get"; \
		apt-get update && apt-get install -y bubblewrap; \
	} || { echo "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"; exit 1; }

# The web chat's browser tests drive Debian's Chromium (Playwright cannot download its own).
browser:
	@test -x /usr/bin/chromium || { \
		echo "chromium is missing: installing it with apt-get"; \
		apt-get update && apt-get install -y chromium; \
	} || { echo "install chromium (Debian/Ubuntu: apt-get install chromium)"; exit 1; }

# The store tests run a real PostgreSQL server (tests/support/postgres.py finds initdb on
# PATH or in /usr/lib/postgresql/*/bin). Installed when missing.
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "PostgreSQL (initdb) is missing: installing postgresql with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; \
	} || { echo "install PostgreSQL (Debian/Ubuntu: apt-get install postgresql)"; exit 1; }

test: sandbox browser postgres lint
	@$(MAKE) --no-print-directory -j 2 typecheck compiled
	@$(MAKE) --no-print-directory unit

bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
