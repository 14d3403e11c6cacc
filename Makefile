# Two commands: `make run` (whole system, local stack) and `make test` (everything, from scratch).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_STAMP := localstack/node_modules/.installed
PY_STAMP := $(VENV)/.installed

.PHONY: help setup run test unit lint bench tail clean

help:
	@echo "make run    start Cosmos + Service Bus + Azurite + the Functions app (http://127.0.0.1:7071/api)"
	@echo "make test   lint + every test tier (unit, contract, conformance, integration, e2e, deploy)"
	@echo "make unit   unit + contract tests only (fast, no servers)"
	@echo "make bench  benchmarks (figures, not assertions)"
	@echo "make tail   print events as the all-events subscription receives them"

$(PY_STAMP): requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

$(NODE_STAMP): localstack/package.json localstack/package-lock.json
	npm ci --prefix localstack --no-audit --no-fund --loglevel=error
	touch $@

setup: $(PY_STAMP) $(NODE_STAMP)

run: setup
	$(PY) -m localstack

lint: $(PY_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	bash deploy/checkov.sh

unit: $(PY_STAMP)
	$(PY) -m pytest tests/unit tests/contract -q

test: setup lint
	$(PY) -m pytest -q --cov --cov-report=term

bench: setup
	$(PY) -m bench

tail: setup
	$(PY) -m localstack.servicebus.tail

clean:
	rm -rf $(VENV) .venv-checkov localstack/node_modules .stack .pytest_cache .mypy_cache .ruff_cache .coverage
