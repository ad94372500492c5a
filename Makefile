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

.PHONY: setup demo test test-fast test-reliability bench gpu-data gpu-proof-smoke clean readme-times

$(VENV)/.installed: pyproject.toml setup.py $(wildcard xlp_cli/bpe/*.cpp xlp_cli/bpe/csrc/* xlp_cli/text/csrc/*.cpp xlp_cli/text/csrc/*.h xlp_cli/text/csrc/*.inc)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# fastBPE 0.1.0 needs Cython and a recent setuptools in the *same* env, without build isolation.
	$(PIP) install -q cython==3.3.1 "setuptools>=70.1" wheel==0.48.0
	$(PIP) install -q --no-build-isolation fastBPE==0.1.0
	$(PIP) install -q $(FIND_LINKS) torch==2.13.0
	$(PIP) install -q $(FIND_LINKS) -e ".[dev,ray,storage]"
	touch $@

# The package's bytecode, as pip writes it for an installed package: where PYTHONDONTWRITEBYTECODE is set (as on
# our machines), every `xlp` process would otherwise compile its ~80 modules again (~0.1 s of CPU per command).
setup: $(VENV)/.installed
	$(PY) -m compileall -q xlp_cli

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

# the real data a lent GPU trains on (Multi30k ids + VLE vocabularies, ~15 MiB, git-ignored): carry `gpu-data`
gpu-data: setup
	$(PY) benchmarks/gpu_data.py --out gpu-data

# what CI runs of the GPU proof: the same script on the CPU, `tiny` preset, under a minute
gpu-proof-smoke: gpu-data
	$(PY) benchmarks/gpu_proof.py --device cpu --smoke --data gpu-data

# run the README's blocks at their full sizes, timing each command, and write the `# measured:` lines into the README
# (tests/readme_times.py; about an hour and a half here). READMETIMES_ARGS="--until 3" runs sections 1-3 only.
readme-times: setup
	$(PY) tests/readme_times.py $(READMETIMES_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# the evaluation data of pipelines/fidelity_gpu.toml (dictionaries, Tatoeba, UD) under gpu-data/eval/, for the
# languages of gpu-data/ids (`make gpu-data`); it checks that gpu-data/ stays within 40 MiB (the device lease)
.PHONY: gpu-data-eval
gpu-data-eval: setup
	$(PY) pipelines/gpu_data_eval.py --src $(XLP_DATA_DIR) --ids gpu-data/ids --out gpu-data/eval
