# Two commands: `make run` (whole system, local stack) and `make test` (everything, from scratch).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
FUNCSTACK := packages/funcstack
OUTBOX := packages/cosmos-outbox
# The core's ways in (routes, console, command line) and its test kit, distributions of their own.
OPERATORS := packages/cosmos-outbox-operators
TESTKIT := packages/cosmos-outbox-testing
CHANGEFEED := packages/cosmos-changefeed
# The in-memory Cosmos DB SQL engine the test kit's store runs queries with.
SQL := packages/cosmos-sql
# The operators' commands: their entry points are made from this list (hatch_build.py), so the
# venv's install is made again when it changes.
OPERATOR_NAMES := $(OPERATORS)/src/cosmos_outbox_operators/cli/_names.py $(OPERATORS)/hatch_build.py


.PHONY: help setup browser venvs run test test-slow chaos docs docs-serve test-suite coverage test-funcstack test-operators test-changefeed test-sql test-generative unit example-tests wheels lint bench tail status clean reset conformance conformance-fast release-check

help:
	@echo "make run    start Cosmos + Service Bus + Azurite, the Functions app (http://127.0.0.1:7071/api) and the subscriber (7072)"
	@echo "make test   set up, then lint, the docs and every test tier (unit, contract, conformance, integration, e2e, deploy, release check); jobs sized by nproc"
	@echo "make test-slow  make test with every core kept busy by a CPU hog (the slow-machine mode: a verdict must not depend on speed; HOGS=N)"
	@echo "make release-check  build, check and serve the six distributions; each README's install lines, first example and own tests in clean venvs of each Python 3.11-3.14 found (PYTHONS=3.11 for one)"
	@echo "make chaos  the relay's long fault-injection runs, not in make test: processes, a mixed fleet, the hand-over (about 4 min)"
	@echo "make unit   every test that starts no server (the suite's, the packages', the examples' in-process ones)"
	@echo "make coverage  the test suite with coverage (the hosted apps' processes too), its report"
	@echo "make docs   the documentation site, strict (a broken link fails it), into .site/; make docs-serve to edit it live"
	@echo "make bench  benchmarks (figures, not assertions)"
	@echo "make tail   print events as they reach the topic, from now (ARGS=--from-start: what it kept too)"
	@echo "make status one-screen outbox summary (backlog, lag, sent, failures) from .stack/otel"
	@echo "make reset  forget the local stack's kept state (Cosmos documents and leases, Service Bus messages, Azurite, telemetry)"
	@echo "make conformance  the Azure SDKs' own test files and samples (installed versions) against the stack"

# Python writes its bytecode caches (__pycache__, git-ignored) under make, whatever the
# environment says: uv does not compile what it installs, and without the caches each of the
# hundreds of processes a run starts (hosts, workers, CLIs) would compile what it imports.
unexport PYTHONDONTWRITEBYTECODE

# uv installs every venv's packages: .venv's, the other Pythons', checkov's. uv itself comes from
# PyPI with pip, into a venv of its own (.uv), pinned to a range; UV is what the scripts use. The
# interpreter's own pip installs it there (`pip --python`) into a venv made without pip; where
# that fails (an interpreter without pip, or a pip older than 22.3), the venv's own pip does.
UV_VENV := .uv
UV := $(CURDIR)/$(UV_VENV)/bin/uv
export UV
UV_SPEC := uv>=0.13.9,<0.14
PIP_NOISE := grep -v 'is ignored: it is neither a file nor a directory'
$(UV):
	@interp=$$(PYTHON="$(PYTHON)" scripts/find-python) || exit 1; \
	rm -rf $(UV_VENV); \
	if ! { "$$interp" -c 'import pip' 2>/dev/null && \
	       "$$interp" -m venv --without-pip $(UV_VENV) && \
	       "$$interp" -m pip --python $(UV_VENV)/bin/python install --quiet \
	         --disable-pip-version-check "$(UV_SPEC)" 2> >($(PIP_NOISE) >&2); }; then \
	  rm -rf $(UV_VENV) && "$$interp" -m venv $(UV_VENV) && \
	  $(UV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check "$(UV_SPEC)" \
	    2> >($(PIP_NOISE) >&2); \
	fi

# The venv is built from Python 3.13 (PYTHON=... overrides; scripts/find-python says what to
# install when there is none); a venv of another version is rebuilt. requirements.txt installs
# cosmos-outbox (and cosmos-outbox-operators) from their folders, as Azure's remote build does;
# they are then installed again in editable mode, with the test kit, so a change to their source
# needs no reinstall. python-qpid-proton (funcstack's AMQP codec) has no Linux wheel on PyPI: it
# is built from its sdist with the interpreter's compiler flags and no debug information (-g0);
# CFLAGS, if set and not empty, is used instead.
$(PY_STAMP): requirements.txt requirements-dev.txt $(OUTBOX)/pyproject.toml $(OPERATORS)/pyproject.toml $(TESTKIT)/pyproject.toml $(FUNCSTACK)/pyproject.toml $(CHANGEFEED)/pyproject.toml $(SQL)/pyproject.toml $(OPERATOR_NAMES) | $(UV)
	@interp=$$(PYTHON="$(PYTHON)" scripts/find-python) || exit 1; \
	if ! $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then \
	  rm -rf $(VENV); echo "creating $(VENV) with $$interp"; \
	  $(UV) venv --quiet --seed --python "$$interp" $(VENV); fi
	CFLAGS="$${CFLAGS:-$$($(PY) -c 'import sysconfig; print(sysconfig.get_config_var("CFLAGS"))') -g0}" \
	  $(UV) pip install --quiet --python $(PY) -r requirements-dev.txt
	$(UV) pip install --quiet --python $(PY) --no-deps -e $(OUTBOX) -e $(OPERATORS) -e $(TESTKIT)
	touch $@

# funcstack (packages/funcstack, installed editable by requirements-dev.txt) installs its Node
# packages (npm ci) and the Functions RPC messages (a hash-pinned wheel) into its cache; `funcstack
# setup` does it now, once, rather than in the first test that needs them.
setup: $(PY_STAMP) browser
	$(VENV)/bin/funcstack setup

# The browser the console's end-to-end test drives: Debian's Chromium and its chromedriver,
# installed with apt when missing (as root, or with sudo). Elsewhere: install a Chromium and
# its matching chromedriver, and set CHROMIUM and CHROMEDRIVER if they are not in /usr/bin.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium and chromium-driver (apt) for the console's browser test"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
	  $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null \
	    || { $$SUDO apt-get update >/dev/null && \
	         $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null; } \
	    || echo "could not install chromium and chromium-driver (not root, no sudo without a password): install them, or the browser test is skipped"; \
	else echo "no apt-get: install Chromium and its chromedriver for the console's browser test (CHROMIUM, CHROMEDRIVER), or it is skipped"; fi

run: setup
	$(PY) -m tools

# Dead code (vulture) at high confidence in everything that ships or runs; the names it cannot
# tell are required by an interface (a binding's parameter, __exit__'s, an SDK exporter's).
DEAD_CODE_PATHS := $(OUTBOX)/src $(OPERATORS)/src $(TESTKIT)/src $(FUNCSTACK)/src $(CHANGEFEED)/src $(SQL)/src domain application infra entrypoints \
  function_app.py subscriber tools bench examples/orders examples/fastapi-concerts \
  examples/library-loans conformance/*.py
DEAD_CODE_NAMES := exc_type,tb,timer,timeout_millis,signum,format,frame

# mypy runs once for the repository (pyproject.toml), then for each app folder and test folder
# whose modules would clash with another's (function_app, conftest, tests), every run with its
# cache in one folder (the SDKs' and pydantic's modules analysed once).
MYPY := $(CURDIR)/$(VENV)/bin/mypy --cache-dir $(CURDIR)/.mypy_cache
# Last, the workflows (.github/workflows): actionlint (and shellcheck over their `run:` scripts,
# found on the PATH) and zizmor, a security linter for workflows (actions pinned by commit, no
# template injection, least permissions, no cache restored into a release), offline.
lint: $(PY_STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(MYPY)
	$(MYPY) --python-version 3.11 $(OUTBOX)/src $(OPERATORS)/src $(TESTKIT)/src
	$(MYPY) subscriber/function_app.py
	cd $(OUTBOX)/tests && $(MYPY) --config-file ../../../pyproject.toml . --exclude 'queue_app/'
	cd $(OUTBOX)/tests && $(MYPY) --config-file ../../../pyproject.toml queue_app/function_app.py
	cd $(OPERATORS)/tests && $(MYPY) --config-file ../../../pyproject.toml . --exclude 'operators_app/'
	cd $(OPERATORS)/tests && $(MYPY) --config-file ../../../pyproject.toml operators_app/function_app.py
	cd examples/orders && $(MYPY) --config-file ../../pyproject.toml .
	cd examples/fastapi-concerts && $(MYPY) --config-file ../../pyproject.toml .
	cd examples/library-loans && $(MYPY) --config-file ../../pyproject.toml .
	cd $(FUNCSTACK) && $(MYPY)
	cd $(CHANGEFEED) && $(MYPY)
	cd $(SQL) && $(MYPY)
	$(VENV)/bin/vulture $(DEAD_CODE_PATHS) --min-confidence 90 --ignore-names $(DEAD_CODE_NAMES)
	bash deploy/checkov.sh
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/actionlint
	$(VENV)/bin/zizmor --offline --quiet .github/workflows
	$(VENV)/bin/shellcheck deploy/smoke.sh scripts/slow-machine

# The fast tiers: every test that starts no server (the ones that do are marked integration or
# e2e): the suite's and cosmos-outbox's, the operators', the processor's, the SQL engine's, then
# each example's in-process tests in its folder (its end-to-end test, on funcstack, is make example-tests').
unit: $(PY_STAMP)
	$(PY) -m pytest tests $(OUTBOX)/tests -m "not integration and not e2e" -q
	cd $(OPERATORS) && ../../$(PY) -m pytest -m "not integration and not e2e" -q
	cd $(CHANGEFEED) && ../../$(PY) -m pytest -m "not integration" -q
	cd $(SQL) && ../../$(PY) -m pytest -m "not integration" -q
	for app in $(EXAMPLES); do (cd examples/$$app && ../../$(PY) -m pytest -q -m "not e2e") || exit; done

# Each example is an app of its own (its own function_app.py): its tests run in its folder, as
# in a copy of it, one after another, on one set of services started once for the three
# (`funcstack exec`: each app's databases, topics and queue have names of their own; the services
# stop when the last ends, fails, or at a Ctrl-C). Alone, or copied, an example starts its own.
EXAMPLES := orders fastapi-concerts library-loans
example-tests: $(PY_STAMP)
	$(VENV)/bin/funcstack exec -- bash -c 'for app in $(EXAMPLES); do \
	  (cd examples/$$app && ../../$(PY) -m pytest -q) || exit; done'

# `make test`: set up, then the independent jobs, as many at once as the machine has cores and one
# more (a job waits on its servers part of the time), each one's output printed whole when it
# ends; then the servers the jobs started, counted against their budget. CORES (nproc's answer
# by default) sizes it: TEST_JOBS jobs at once, TEST_WORKERS xdist workers for the suite (a test
# module stays on one worker: its stack is shared by its tests), FUNCSTACK_WORKERS for
# funcstack's tests. Time is reported, not a gate: a run that passes on a quick machine and fails
# on a slow one is a defect (docs/testing.md, "The slow-machine mode").
CORES ?= $(shell nproc 2>/dev/null || echo 2)
TEST_JOBS ?= $(shell echo $$(( $(CORES) + 1 )))
TEST_WORKERS ?= $(CORES)
FUNCSTACK_WORKERS ?= $(shell echo $$(( ($(CORES) + 1) / 2 )))
export RELEASE_CHECK_TRIALS ?= $(CORES)
# pytest plugins that serve one module each are left out of every other pytest process:
# schemathesis' (the generative module asks for it itself, with pytest_plugins), pytest-examples'
# (tools/docblocks uses its library, not its plugin) and anyio's (no test uses it). Appended to
# what the caller's PYTEST_ADDOPTS says.
export PYTEST_ADDOPTS += -p no:schemathesis -p no:examples -p no:anyio
GENERATIVE := tests/contacts/api/test_api_generative.py

# One make for the set-up and the jobs: each starts when what it needs is there (checkov's venv
# beside the set-up; the rest after it), the longest first.
TEST_JOB_LIST := setup venvs test-suite test-funcstack release-check test-generative test-operators \
  test-changefeed test-sql example-tests conformance-fast lint-behind docs-behind
test:
	@rm -rf $(STARTS) && mkdir -p $(STARTS)
	@echo "make test: $(TEST_JOBS) jobs at once on $(CORES) cores (the suite over $(TEST_WORKERS) workers, funcstack's over $(FUNCSTACK_WORKERS))"
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target COUNT_STARTS=1 $(TEST_JOB_LIST); \
	  jobs=$$?; counted=0; \
	  if [ -x $(PY) ]; then $(PY) -m tools.server_starts $(STARTS) --budget $(SERVER_BUDGET) --restart-budget $(RESTART_BUDGET) || counted=1; fi; \
	  if [ $$jobs -ne 0 ]; then exit $$jobs; fi; exit $$counted

# The slow-machine mode: `make test` with every core kept busy by a CPU hog at nice 0 (one busy
# loop per core, HOGS=N for another count), started before and stopped after, whatever the end.
# The suite passes in it; a test that does not is a defect to fix (docs/testing.md).
HOGS ?= $(CORES)
test-slow:
	HOGS=$(HOGS) scripts/slow-machine $(MAKE) --no-print-directory test

# The servers a run starts, counted and held to a budget (docs/testing.md, "Servers started"):
# under `make test` each job's funcstack appends a line per server it starts (a Cosmos DB, Service
# Bus or Azurite endpoint, a Functions host, a worker, a process) to a file of the job's own
# (FUNCSTACK_STARTS); the run prints them by kind, job and test module, and fails when more
# Cosmos DB, Service Bus and Azurite endpoints started than SERVER_BUDGET, or more were started
# again on their state or port (a test's restart: the fault or the persistence it checks) than
# RESTART_BUDGET. A job run on its own counts nothing (COUNT_STARTS=1 turns it on). Raise a
# budget only with a reason, in the commit that needs it.
STARTS := .stack/starts
SERVER_BUDGET := 88
RESTART_BUDGET := 46
export FUNCSTACK_STARTS = $(if $(COUNT_STARTS),$(CURDIR)/$(STARTS)/$@.jsonl)

# Lint and the docs at a lower priority (nice 10) beside the tests: they start no server and wait
# on nothing, so they take the CPU the test jobs leave.
.PHONY: lint-behind docs-behind
lint-behind: $(PY_STAMP)
	@nice -n 10 $(MAKE) --no-print-directory lint

# The documentation site (mkdocs.yml): the guides in docs/ and the API reference generated from
# the public modules' docstrings (mkdocstrings), built strict: a broken link or anchor, a page
# left out of the navigation, an unresolved reference fails it. Not --quiet: mkdocs counts the
# warnings strict mode fails on only when it logs them.
DOCS_ENV := NO_MKDOCS_2_WARNING=1
docs: $(PY_STAMP)
	$(DOCS_ENV) $(VENV)/bin/mkdocs build
docs-serve: $(PY_STAMP)
	$(DOCS_ENV) $(VENV)/bin/mkdocs serve
docs-behind: $(PY_STAMP)
	@nice -n 10 $(MAKE) --no-print-directory docs

# Where apt is (setup installed the browser with it), the console's browser walk fails rather
# than skips without one.
test-suite: setup
	BROWSER_REQUIRED=$$(command -v apt-get >/dev/null && echo 1) \
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
	  --ignore $(GENERATIVE) --durations=15

# The relay's chaos runs (issue 64; packages/cosmos-outbox/tests/relay/test_relay_chaos.py):
# 3 `cosmos-outbox relay` processes, then a mixed fleet of Functions trigger instances and
# processes, under writers for 60 s, a live split, a SIGKILL, a pause past expiry and an added
# instance; then the hand-over from the trigger to processes and back. Marked `chaos`, which the
# tests' conftest deselects unless -m names it: `make test` runs none of them (docs/testing.md,
# "make chaos"); the figures (takeovers, counts, resends) are printed.
chaos: setup
	$(PY) -m pytest -q -s -p no:cacheprovider -m chaos --durations=5 \
	  $(OUTBOX)/tests/relay/test_relay_chaos.py

# The same suite measured by coverage.py, in the test processes and in every process they start
# (the hosts' workers run the apps); not part of `make test`.
coverage: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile \
	  --ignore $(GENERATIVE) --cov --cov-report=term

# funcstack's own tests (the stand-ins through the SDKs, the host, the CLI, the plugin), from
# its folder, as any package's, over FUNCSTACK_WORKERS workers (above).
test-funcstack: setup
	cd $(FUNCSTACK) && ../../$(PY) -m pytest -q -p no:cacheprovider -n $(FUNCSTACK_WORKERS) \
	  --dist loadfile --durations=10

# cosmos-outbox-operators' tests (its routes, console, command line, on the test kit; its bounded
# routes hosted on funcstack), from its folder, as any package's: their conftest and helpers are
# their own, so they run in a pytest of their own, in one process (-n 0): its modules on funcstack
# share one session stack.
OPERATORS_WORKERS ?= 0
test-operators: setup
	cd $(OPERATORS) && ../../$(PY) -m pytest -q -p no:cacheprovider -n $(OPERATORS_WORKERS) \
	  --dist loadfile --durations=5

# cosmos-changefeed's own tests (the processor against funcstack's Cosmos DB endpoint, in one
# process, one endpoint; the in-memory feed and the scale simulation in process), from its folder.
test-changefeed: setup
	cd $(CHANGEFEED) && ../../$(PY) -m pytest -q -p no:cacheprovider --durations=5

# cosmos-sql's own tests (its examples in process; its engine and funcstack's held equal over
# generated queries, one Node process), from its folder, as any package's.
test-sql: setup
	cd $(SQL) && ../../$(PY) -m pytest -q -p no:cacheprovider --durations=5

test-generative: setup
	$(PY) -m pytest -q -p no:cacheprovider $(GENERATIVE)

# The release check (tools/release; RELEASING.md, docs/testing.md "make release-check"): every
# distribution's sdist and wheel built once into dist/ and checked (metadata and README as PyPI
# renders them, the wheel's files, the wheel from the sdist equal to the tree's, every tracked file
# in the sdist, every requirement between them and in the docs met), dist/ served as a simple index
# on 127.0.0.1 with PyPI behind it, and in clean venvs on Python 3.11, 3.12 and 3.13: each README's
# and guide's install lines run verbatim (by pip on the oldest Python a distribution supports, by
# uv's pip interface on the others), its first example, a guide's other steps (its tests, its app
# on funcstack), and each distribution's own tests from its sdist on the oldest Python it
# supports (cosmos-outbox's adapter suites too, against funcstack's services started from .venv;
# on 3.13 the jobs above run them from the tree), RELEASE_CHECK_TRIALS trials at once. A missing
# interpreter is one line, and the rest runs. PYTHONS=3.11 (or "3.11 3.12") tries only those;
# RELEASE_TAG=<name>-v<version> is the release workflow's (that tag's checks, and pip and the own
# tests on every Python: --full).
PYTHONS ?=
RELEASE_TAG ?=
release-check: setup
	$(PY) -m tools.release $(foreach p,$(PYTHONS),--python $(p)) $(if $(RELEASE_TAG),--tag $(RELEASE_TAG))

# The venvs that need no .venv: checkov's.
venvs: | $(UV)
	@bash deploy/checkov.sh --install-only

# The SDKs' own suites and samples (sdists of the installed azure-cosmos / azure-servicebus from PyPI).
conformance: setup
	$(PY) -m conformance --label full --markdown .stack/conformance/results.md

conformance-fast: setup
	$(PY) -m conformance --fast --label fast

bench: setup
	$(PY) -m bench

# `make tail ARGS=--from-start`: also the events the tail subscription kept from before.
tail: setup
	$(PY) -m tools.tail $(ARGS)

status: $(PY_STAMP)
	@$(PY) -m tools.status

# Every package, each as a wheel and an sdist, into dist/, built and checked as the release check
# builds them (its first half: `python -m tools.release --build-only`); and cosmos-outbox's wheel,
# cosmos-changefeed's (its dependency), its test kit's and cosmos-sql's (the kit's dependency) into
# the folders of the apps published on their own (deploy/README.md, "How cosmos-outbox travels"): the subscriber and the examples,
# whose requirements find them in ./wheels (the test kit is their tests' requirement, never
# deployed), so that an app deploys the packages of its own commit.
WHEEL_APPS := subscriber examples/orders examples/fastapi-concerts examples/library-loans
wheels: $(PY_STAMP)
	$(PY) -m tools.release --build-only
	for app in $(WHEEL_APPS); do \
	  mkdir -p $$app/wheels && rm -f $$app/wheels/cosmos_outbox*.whl && \
	  rm -f $$app/wheels/cosmos_changefeed*.whl $$app/wheels/cosmos_sql*.whl && \
	  cp dist/cosmos_outbox-*.whl dist/cosmos_outbox_testing-*.whl dist/cosmos_changefeed-*.whl \
	    dist/cosmos_sql-*.whl $$app/wheels/ || exit 1; \
	done
	@ls dist

# Forget the local stack's state (.stack/state: Cosmos, Service Bus; Azurite data; telemetry).
# Refused while a stack runs from this checkout.
reset:
	@if [ -s .stack/pids.json ] && $(PY) -c 'import sys; from pathlib import Path; from tools.stack import running_stack; sys.exit(0 if running_stack(Path(".stack/pids.json")) else 1)'; then \
	  echo "a local stack is running from this checkout: stop it (Ctrl-C) before make reset"; exit 1; fi
	rm -rf .stack/state .stack/azurite .stack/otel
	@echo "local stack state removed"

clean:
	rm -rf $(VENV) $(UV_VENV) .venv-checkov .stack .pytest_cache .mypy_cache .ruff_cache .coverage
