# Two commands on a fresh machine: `make demo` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup demo test lint lab bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama-cpp-python compiles once (~7 min on 2 cores); pip caches the built wheel for later runs
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[all,test]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/python -m gwlab.demo

test: setup
	$(BIN)/ruff check gwlab tests bench
	$(BIN)/pytest -q -p no:cacheprovider

lint: setup
	$(BIN)/ruff check gwlab tests bench

lab: setup
	$(BIN)/pip install -q jupyterlab
	$(BIN)/jupyter lab notebooks/

bench: setup
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) out .pytest_cache
