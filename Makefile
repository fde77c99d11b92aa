# Gradient Flow: every task a reader or contributor needs. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
NODE_STAMP := node_modules/.installed-stamp
HOST   ?= 127.0.0.1:8000

export NO_MKDOCS_2_WARNING := 1
export MPLBACKEND := Agg
export OMP_NUM_THREADS := 1

.PHONY: help env serve build offline test bench lighthouse screenshots linkcheck lock clean notebooks

help:  ## list the tasks
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:.*## /\t/'

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# axe-core for the accessibility tests; without npm those tests skip (and fail under CI)
$(NODE_STAMP): package.json package-lock.json
	@if command -v npm >/dev/null; then npm ci --silent --no-audit --no-fund && touch $@; \
	else echo "npm not found: the accessibility tests will be skipped"; fi

env: $(STAMP) $(NODE_STAMP)  ## create or update .venv (and node_modules for the browser tests)

serve: $(STAMP)  ## build the site strictly, then serve it at http://$(HOST)/ with live reload
	$(BIN)/mkdocs build --strict --quiet
	$(BIN)/mkdocs serve --strict --dirty --dev-addr $(HOST)

build: $(STAMP)  ## build the site strictly into site/
	$(BIN)/mkdocs build --strict

offline: $(STAMP)  ## build a copy for reading without a server: gradient-flow-offline.zip
	rm -rf build/offline gradient-flow-offline.zip
	OFFLINE=true $(BIN)/mkdocs build --strict --site-dir build/offline
	cd build && $(abspath $(BIN))/python -m zipfile -c ../gradient-flow-offline.zip offline
	@echo "Unzip gradient-flow-offline.zip and open offline/index.html in a browser."

test: $(STAMP) $(NODE_STAMP)  ## run the whole test suite (snippets, reference vs torch, build, browser)
	$(BIN)/python -m pytest -n auto --dist loadgroup

bench: $(STAMP)  ## print clean/rebuild build times, test-suite time and page sizes
	$(BIN)/python -m gradflow_site.bench

lighthouse: build  ## Lighthouse scores (mobile) of every page, served as GitHub Pages serves it
	$(BIN)/python -m gradflow_site.lighthouse site $(LIGHTHOUSE_ARGS)

screenshots: build  ## screenshot every widget in both colour schemes into build/screenshots/
	$(BIN)/python -m gradflow_site.screenshots site build/screenshots

linkcheck: build  ## check every external link of the built site (needs the internet)
	$(BIN)/python -m gradflow_site.links site

notebooks: $(STAMP)  ## regenerate notebooks/ (what "Open in Colab" opens) from snippets/ and gradflow_ref/
	$(BIN)/python -m gradflow_site.labs notebooks

lock:  ## regenerate requirements.txt from requirements.in in a fresh environment
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet -r requirements.in
	{ sed -n '1,3p' requirements.txt; .lock-venv/bin/pip freeze --all | grep -v '^pip==' | sed -E 's/^torch==([0-9.]+)\+cpu$$/torch==\1/'; } > requirements.lock.tmp
	mv requirements.lock.tmp requirements.txt && rm -rf .lock-venv

clean:  ## remove the built site, the execution cache and test caches (keeps .venv)
	rm -rf site .cache .pytest_cache build *.egg-info gradient-flow-offline.zip
