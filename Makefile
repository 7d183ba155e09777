# Set-up is part of every target: a fresh machine needs only `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Pinned: an unpinned torch can pull several GB of CUDA wheels. On an ordinary Linux machine this pin
# still installs PyPI's (CUDA) build; for the CPU-only build use PyTorch's CPU index, e.g.
#   make setup TORCH_PIN="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
TORCH_PIN := torch==2.13.0

.PHONY: setup lint test demo notebook clean

$(BIN)/bertforge: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/bertforge

setup: $(BIN)/bertforge

lint: setup
	$(BIN)/ruff check src tests benchmarks experiments scripts
	$(BIN)/ruff format --check src tests benchmarks experiments scripts

# Two workers, one torch thread each (tests/conftest.py): on 2 cores (an Intel Xeon) the suite's 950 tests take
# about 410 s (benchmarks are not tests, so nothing here is timed). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

demo: setup
	$(BIN)/bertforge demo

# The learners' notebook with its outputs, for reading (the committed one has none, so none goes stale).
notebook: setup
	mkdir -p build
	$(BIN)/jupyter nbconvert --to notebook --execute examples/bert_from_scratch.ipynb --output-dir build

clean:
	rm -rf $(VENV) demo_runs build src/*.egg-info
