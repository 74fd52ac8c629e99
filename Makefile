# The README's two commands: `make demo` (main experiment) and `make test` (test suite).
# Each creates .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
export PYTHONUNBUFFERED := 1
# Python keeps the bytecode of the modules it imports, in one folder inside the environment
# (never beside the sources), also where the shell asks it not to (PYTHONDONTWRITEBYTECODE):
# the suite starts hundreds of Python processes, and each compiled torch, transformers and
# vLLM again without it (vLLM's import took 33 s on a 2-core machine, 15 s with the bytecode
# kept; the suite's command-line tests 37 s against 23 s).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache

.PHONY: setup setup-vllm lock demo test checks test-fast verify tables lint hooks docs docs-notebooks benchmark reproduce lab clean-runs

setup:
	@VENV=$(VENV) bash scripts/setup.sh

# Refresh requirements.lock and environment.yml from pyproject.toml (resolves, installs nothing);
# the next `make setup` installs the new versions.
lock: setup
	$(PY) scripts/lock.py

# The vLLM back end's environment (.venv-vllm; the CPU build pins an older transformers).
setup-vllm:
	@bash scripts/setup_vllm.sh

demo: setup
	$(PY) -m workbench demo

# The suite on every core: a worker per core with one thread each, a test file's tests on one
# worker (tests/conftest.py groups them and puts the heaviest first).
PARALLEL ?= -n auto --no-loadscope-reorder

# The test command (CI's): lint, format and type checks, the documentation site, then the whole
# suite, which includes the check that this machine gives the recorded answers natively and on
# other CPU kernels (tests/test_verify_answers.py: `make verify` as two tests).
test: checks
	$(PY) -m pytest $(PARALLEL) --durations=30

# What runs before the suite, side by side (each leaves a core idle much of the time): the
# vLLM environment (pip waits on downloads and unpacks on one core) from the start, and the
# main environment, then lint and docs (one core each) once it is there. The two set-ups'
# editable installs take turns (scripts/checkout_lock.sh). Each step's output is printed whole
# when it ends.
checks:
	@$(MAKE) --no-print-directory -j3 --output-sync=target setup-vllm lint docs

# Rerun a fixed slice of the main experiment and compare every answer with the reference in
# data/reference/verify.json: natively, then on narrower CPU kernels (another machine's stand-in).
verify: setup
	OMP_WAIT_POLICY=PASSIVE $(PY) -m workbench verify
	OMP_WAIT_POLICY=PASSIVE $(PY) -m workbench verify --kernels other

# Fill the README's and the docs' tables of measured numbers from the runs' records
# (docs/results/, data/reference/verify.json); a test fails while one differs.
tables: setup
	$(PY) -m workbench tables

# The documentation site (mkdocs.yml, docs/) into site/; strict: any warning fails it. Built by
# ProperDocs, the maintained MkDocs 1.x line (`mkdocs build` gives the same site, with two
# notices about MkDocs 2 that NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true silence).
docs: setup
	$(VENV)/bin/properdocs build --strict --quiet

# Re-run the notebooks the site shows and copy the executed copies into docs/notebooks/.
docs-notebooks: setup
	$(PY) scripts/docs_notebooks.py

# ruff (lint and format), mypy on workbench/ and the notebook check: the pre-commit hooks,
# run on every file (.pre-commit-config.yaml).
lint: setup
	$(VENV)/bin/pre-commit run --all-files --show-diff-on-failure

# Run the same hooks on each `git commit`.
hooks: setup
	$(VENV)/bin/pre-commit install

test-fast: setup
	$(PY) -m pytest $(PARALLEL) -m "not integration and not notebook and not browser and not vllm"

benchmark: setup setup-vllm
	$(PY) benchmarks/generation.py

reproduce: setup
	$(PY) -m workbench reproduce

# Kernels' messages CurveZMQ-encrypted (the project's kernelspec supports it), as `python -m
# workbench run` runs them: ipykernel warns on each start of a kernel over unencrypted TCP.
lab: setup
	$(VENV)/bin/jupyter lab notebooks/ --MappingKernelManager.transport_encryption=auto
