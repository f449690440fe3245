# Two entry points (see README): `make demo` and `make test`. Both create .venv/ on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU build of torch. Here it installs from a local wheel; elsewhere add
# TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu" to avoid a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean-data

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/hypa demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# ruff and mypy as configured in pyproject.toml (.ci/run runs this before the tests).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_100k.py
	$(BIN)/python bench/bench_slack_ack.py

clean-data:
	rm -rf data/index
