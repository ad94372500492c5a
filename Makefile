# xlp developer entry points. `make setup` once, then `make demo` / `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
# The CPU wheel of torch 2.13.0 lies here on our machines; elsewhere pip uses the registry.
WHEELS ?= /opt/wheels
FIND_LINKS = $(if $(wildcard $(WHEELS)),--find-links $(WHEELS),)
XLP_DATA_DIR ?= $(abspath ../shared/data)
export XLP_DATA_DIR

.PHONY: setup demo test test-fast test-reliability bench clean

$(VENV)/.installed: pyproject.toml setup.py $(wildcard xlp_cli/bpe/*.cpp xlp_cli/bpe/csrc/* xlp_cli/text/csrc/*.cpp xlp_cli/text/csrc/*.h xlp_cli/text/csrc/*.inc)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# fastBPE 0.1.0 needs Cython and a recent setuptools in the *same* env, without build isolation.
	$(PIP) install -q cython==3.3.1 "setuptools>=70.1" wheel==0.48.0
	$(PIP) install -q --no-build-isolation fastBPE==0.1.0
	$(PIP) install -q $(FIND_LINKS) torch==2.13.0
	$(PIP) install -q $(FIND_LINKS) -e ".[dev,ray]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/xlp run pipelines/demo.toml

# pytest-xdist: TEST_WORKERS processes (CI has 2 cores); TEST_WORKERS=0 runs in one process. The Ray tests
# (marker `ray`) find and kill Ray workers machine-wide, so they run afterwards, alone, in one process.
TEST_WORKERS ?= 2
PYTEST = $(PY) -m pytest -q -n $(TEST_WORKERS) --durations=20

test: setup
	$(PYTEST) -m "not ray" tests
	$(PY) -m pytest -q -m ray tests

test-fast: setup
	$(PYTEST) -m "not slow and not integration and not reliability" tests

# the kill sweep over every stage and the fuzz corpus of bad inputs (docs/reliability.md); `make test` runs it too
test-reliability: setup
	$(PYTEST) -m reliability tests

bench: setup
	for b in benchmarks/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
