# Gradient Flow: every task a reader or contributor needs. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1:8000

export NO_MKDOCS_2_WARNING := 1
export MPLBACKEND := Agg

.PHONY: help env serve build offline test bench lock clean

help:  ## list the tasks
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:.*## /\t/'

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

env: $(STAMP)  ## create or update the virtual environment in .venv

serve: $(STAMP)  ## build the site strictly, then serve it at http://$(HOST)/ with live reload
	$(BIN)/mkdocs build --strict --quiet
	$(BIN)/mkdocs serve --strict --dev-addr $(HOST)

build: $(STAMP)  ## build the site strictly into site/
	$(BIN)/mkdocs build --strict

offline: $(STAMP)  ## build a copy for reading without a server: gradient-flow-offline.zip
	rm -rf build/offline gradient-flow-offline.zip
	OFFLINE=true $(BIN)/mkdocs build --strict --site-dir build/offline
	cd build && $(abspath $(BIN))/python -m zipfile -c ../gradient-flow-offline.zip offline
	@echo "Unzip gradient-flow-offline.zip and open offline/index.html in a browser."

test: $(STAMP)  ## run the whole test suite (snippets, reference vs torch, strict site build)
	$(BIN)/python -m pytest

bench: $(STAMP)  ## print clean/rebuild build times, test-suite time and page sizes
	$(BIN)/python -m gradflow_site.bench

lock:  ## regenerate requirements.txt from requirements.in in a fresh environment
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet -r requirements.in
	{ sed -n '1,3p' requirements.txt; .lock-venv/bin/pip freeze | sed -E 's/^torch==([0-9.]+)\+cpu$$/torch==\1/'; } > requirements.lock.tmp
	mv requirements.lock.tmp requirements.txt && rm -rf .lock-venv

clean:  ## remove the built site, the execution cache and test caches (keeps .venv)
	rm -rf site .cache .pytest_cache build *.egg-info gradient-flow-offline.zip
