# Two commands set up everything on a fresh machine with python3 and make:
#   make demo   create .venv, install, run specs/lab5.yaml on whatever device is here, print the summary
#   make test   the whole test suite (installs its tools first)
#   make dashboard   the results dashboard (the shipped runs, or RESULTS=dir-or-gs://bucket/prefix)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo dashboard test test-tools clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/attnbench run specs/lab5.yaml --out results/

# the results dashboard on http://localhost:8501; RESULTS=dir-or-gs://bucket/prefix picks other runs
dashboard: $(INSTALLED)
	$(BIN)/attnbench dashboard $(if $(RESULTS),--results $(RESULTS))

test-tools:
	bash scripts/install-test-tools.sh

test: $(INSTALLED) test-tools
	$(BIN)/pytest

clean:
	rm -rf $(VENV) results .pytest_cache
