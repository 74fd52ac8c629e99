# The README's two commands: `make demo` (main experiment) and `make test` (test suite).
# Each creates .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
export PYTHONUNBUFFERED := 1

.PHONY: setup demo test test-fast benchmark reproduce lab clean-runs

setup:
	@VENV=$(VENV) bash scripts/setup.sh

demo: setup
	$(PY) -m workbench demo

test: setup
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not integration and not notebook"

benchmark: setup
	$(PY) benchmarks/generation.py

reproduce: setup
	$(PY) -m workbench reproduce

lab: setup
	$(VENV)/bin/jupyter lab notebooks/
