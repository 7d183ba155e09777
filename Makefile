# Set-up is part of every target: a fresh machine needs only `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# A CPU build of torch; an unpinned torch would pull several GB of CUDA wheels.
TORCH_PIN := torch==2.13.0

.PHONY: setup test demo clean

$(BIN)/bertforge: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/bertforge

setup: $(BIN)/bertforge

test: setup
	$(BIN)/python -m pytest

demo: setup
	$(BIN)/bertforge demo

clean:
	rm -rf $(VENV) demo_runs build src/*.egg-info
