# Two commands on a fresh machine: `make demo` and `make test`. Both set everything up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup demo test test-core lint typecheck lab bench clean browser-deps db-deps screenshots byo ppi-ref

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama-cpp-python compiles once (~7 min on 2 cores); pip caches the built wheel for later runs
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[all,test,docs]"
	touch $(STAMP)

setup: $(STAMP)

# tests/byo start third-party servers: llama-cpp-python's and laya-serve come with the test extra (same
# llama-cpp-python install as the engine's, so nothing recompiles); LiteLLM's proxy lives in its own venv
# (tests/byo/requirements-litellm.txt says why). Built once, ~1 min with pip's cache (docs/guide/byo-gateway.md).
BYO := .venv-byo
BYO_STAMP := $(BYO)/.installed
$(BYO_STAMP): tests/byo/requirements-litellm.txt
	$(PY) -m venv $(BYO)
	$(BYO)/bin/pip install -q -r tests/byo/requirements-litellm.txt
	touch $(BYO_STAMP)

byo: $(BYO_STAMP)

# tests/stats/test_ppi.py checks gwlab's PPI++ against the paper's package, ppi-python, run as a subprocess
# from its own venv (tests/stats/requirements-ppi.txt says why not .venv). Built once, ~1 min with pip's cache;
# the suite is told where it is (GWLAB_PPI_PYTHON), so under `make test` a missing reference fails, never skips.
PPI := .venv-ppi
PPI_STAMP := $(PPI)/.installed
$(PPI_STAMP): tests/stats/requirements-ppi.txt
	$(PY) -m venv $(PPI)
	$(PPI)/bin/pip install -q -r tests/stats/requirements-ppi.txt
	touch $(PPI_STAMP)

ppi-ref: $(PPI_STAMP)

# A core install (`pip install gwlab`, no extras: pandas 3 without pyarrow) runs the client and df.gw paths
# of tests/core against a gateway served by the full venv (tests/core/run_core.py says how). Built once.
CORE := .venv-core
CORE_STAMP := $(CORE)/.installed
$(CORE_STAMP): pyproject.toml
	$(PY) -m venv $(CORE)
	$(CORE)/bin/pip install -q --upgrade pip
	$(CORE)/bin/pip install -q -e . "pandas>=3" pytest pytest-asyncio pytest-timeout
	touch $(CORE_STAMP)

test-core: setup $(CORE_STAMP)
	$(CORE)/bin/python -c "import importlib.util as u, sys; u.find_spec('pyarrow') and sys.exit('$(CORE) has pyarrow: not a core install')"
	$(BIN)/python tests/core/run_core.py $(CORE)/bin/python

demo: setup
	$(BIN)/python -m gwlab.demo

# tests/browser drive Debian's chromium (never Playwright's own download); installed here when missing and root
browser-deps:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; } || \
		echo "browser-deps: no chromium (as root: apt-get install chromium chromium-driver); tests/browser skip"

# tests/frames start a PostgreSQL server from Debian's packages (loopback, temporary data directory, as the
# postgres user when root); installed here when missing and root, else those tests skip and say why
db-deps:
	@{ ls /usr/lib/postgresql/*/bin/initdb || command -v initdb; } >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; } || \
		echo "db-deps: no PostgreSQL (as root: apt-get install postgresql); the PostgreSQL tests skip"

# The suite runs on two xdist workers (much of a test waits on the gateway's models, so two keep the cores
# busy; tests/conftest.py sends each module, and each folder sharing servers, to one worker); the type
# check, the core-install tests, the notebooks and the fuzzer run beside it (-j2). Each target's output is
# printed whole when it ends (--output-sync). The notebooks get their own gateway database and checkpoint.
# On a clean clone the three venvs are built at once (pip's downloads and unpacking overlap), and the type
# check runs beside the suite rather than before it: together ~3 min of a CI run's 22 before this.
test: browser-deps db-deps
	$(MAKE) --no-print-directory -j3 setup byo ppi-ref
	$(BIN)/ruff check gwlab tests bench
	$(MAKE) --no-print-directory -j2 --output-sync=target suite beside

.PHONY: suite beside fuzz notebooks-apart
suite: setup
	GWLAB_PPI_PYTHON=$(CURDIR)/$(PPI)/bin/python $(BIN)/pytest -q -p no:cacheprovider -n 2 --durations=20

beside: setup
	$(MAKE) --no-print-directory typecheck
	$(MAKE) --no-print-directory test-core
	$(MAKE) --no-print-directory notebooks-apart
	$(MAKE) --no-print-directory fuzz

# the HTTP fuzzer, serially: under xdist schemathesis would fuzz one operation a test (test_fuzz_http.py)
fuzz: setup
	$(BIN)/pytest -q -p no:cacheprovider -p no:xdist tests/reliability/test_fuzz_http.py

notebooks-apart: setup
	apart=$$(mktemp -d) && GWLAB_DB=$$apart/gateway.sqlite GWLAB_CHECKPOINT=$$apart/frames.sqlite \
		$(MAKE) --no-print-directory notebooks; status=$$?; rm -rf $$apart; exit $$status

# the widget screenshots in docs/img, retaken in JupyterLab + chromium (plain test runs write them to a temp dir)
screenshots: setup browser-deps
	GWLAB_SCREENSHOTS=1 $(BIN)/pytest -q -p no:cacheprovider tests/browser

lint: setup
	$(BIN)/ruff check gwlab tests bench

# mypy over gwlab/ as [tool.mypy] in pyproject.toml sets it: 0 errors. Its cache lives in the venv (it
# describes that install, and goes with it): ~1 min of CPU on a fresh clone, seconds after that.
typecheck: setup
	$(BIN)/mypy --cache-dir $(VENV)/.mypy_cache

lab: setup
	$(BIN)/pip install -q jupyterlab
	$(BIN)/jupyter lab notebooks/

bench: setup
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(BYO) $(CORE) $(PPI) out .pytest_cache

# Notebooks run by nbval on the embedded gateway (hosted variables unset); outputs marked
# NBVAL_CHECK_OUTPUT are compared after notebooks/nbval_sanitize.cfg. `make notebooks` runs them alone.
NBVAL := env -u GWLAB_BASE_URL -u GWLAB_API_KEY $(BIN)/pytest -q -p no:cacheprovider --nbval-lax \
	--nbval-current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg
.PHONY: notebooks

notebooks: setup
	$(BIN)/ruff check notebooks
	$(NBVAL) notebooks/

# The documentation site (mkdocs-material + mkdocstrings), strict: any warning fails. Output in site/.
.PHONY: docs binder-check
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Binder's environment rebuilt from binder/requirements.txt in a fresh venv, then notebooks 01-03 run in
# it (~10 min; too slow for every `make test`): see docs/binder.md
binder-check: setup
	GWLAB_BINDER_CHECK=1 $(BIN)/pytest -q -s -p no:cacheprovider tests/test_binder_env.py
