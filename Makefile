# Gradient Flow: every task a reader or contributor needs. `make help` lists them.
# Python 3.11 (3.11.2 or later: Debian 12's python3), 3.12 or 3.13
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
NODE_STAMP := node_modules/.installed-stamp
HOST   ?= 127.0.0.1:8000

export NO_MKDOCS_2_WARNING := 1
export MPLBACKEND := Agg
export OMP_NUM_THREADS := 1

.PHONY: help env serve build offline test repro bench gpu-wheels train plain-loop freeze lighthouse screenshots linkcheck lock clean notebooks

help:  ## list the tasks
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:.*## /\t/'

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@# the site's build (gradflow_site: a Markdown extension mkdocs.yml names) is not installed
	@# with the package; a .pth file puts this checkout on the environment's sys.path instead
	$(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" | \
		xargs -I{} sh -c 'echo "$(CURDIR)" > "{}/gradflow-checkout.pth"'
	@touch $(STAMP)

# axe-core for the accessibility tests; without npm those tests skip (and fail under CI)
$(NODE_STAMP): package.json package-lock.json
	@if command -v npm >/dev/null; then npm ci --silent --no-audit --no-fund && touch $@; \
	else echo "npm not found: the accessibility tests will be skipped"; fi

env: $(STAMP) $(NODE_STAMP)  ## create or update .venv (and node_modules for the browser tests)

# every rebuild renders every page; a chapter runs again only when a file it read changed
serve: $(STAMP)  ## build the site strictly, then serve it at http://$(HOST)/ with live reload
	$(BIN)/mkdocs serve --strict --dev-addr $(HOST)

build: $(STAMP)  ## build the site strictly into site/
	$(BIN)/mkdocs build --strict

offline: $(STAMP)  ## build a copy for reading without a server: gradient-flow-offline.zip
	rm -rf build/offline gradient-flow-offline.zip
	OFFLINE=true $(BIN)/mkdocs build --strict --site-dir build/offline
	cd build && $(abspath $(BIN))/python -m zipfile -c ../gradient-flow-offline.zip offline
	@echo "Unzip gradient-flow-offline.zip and open offline/index.html in a browser."

test: $(STAMP) $(NODE_STAMP)  ## run the whole test suite (snippets, reference vs torch, build, browser)
	$(BIN)/python -m pytest -n auto --dist worksteal

# clean builds (no execution cache), the second running every chapter in one worker process
repro: $(STAMP)  ## build the site twice and check that the two are byte for byte the same
	rm -rf build/repro
	GRADFLOW_EXEC_CACHE=0 $(BIN)/mkdocs build --strict --site-dir build/repro/first
	GRADFLOW_EXEC_CACHE=0 GRADFLOW_WORKERS=1 $(BIN)/mkdocs build --strict --site-dir build/repro/second
	diff -r --brief build/repro/first build/repro/second
	@echo "Two clean builds are byte for byte the same."

bench: $(STAMP)  ## print clean/rebuild build times, test-suite time and page sizes
	$(BIN)/python -m tools.bench

# a GPU host without network installs them from wheels/ (python -m tools.bench_gpu --wheels wheels)
gpu-wheels: $(STAMP)  ## download into wheels/ what tools.bench_gpu needs beyond torch on a GPU host (torchao)
	$(BIN)/python -m tools.bench_gpu --stage-wheels wheels

# every core (the other tasks pin one thread); TRAIN_ARGS="--precision fp32" etc. adds flags;
# a fresh run each time: its checkpoint (saved when the minute is up) and log go to build/train
train: $(STAMP)  ## train the guide's GPT for a minute with snippets/train.py: tokens/s, loss, peak memory
	rm -rf build/train
	env -u OMP_NUM_THREADS $(BIN)/python snippets/train.py --max-seconds 60 \
		--ckpt-dir build/train --log-file build/train/log.jsonl $(TRAIN_ARGS)

# PLAIN_LOOP_ARGS="--pairs 7 -- --precision fp32" etc.; one thread, as the comparison in the issue
plain-loop: $(STAMP)  ## tokens/s of snippets/train.py against a plain PyTorch loop on one process, paired runs
	$(BIN)/python -m tools.plain_loop $(PLAIN_LOOP_ARGS)

# one experiment at a time, one thread each (tools/freeze.py); NAMES="a b" reruns only those
freeze: $(STAMP)  ## rerun the frozen experiments (tools/experiments/) and rewrite results/frozen/
	$(BIN)/python -m tools.freeze $(NAMES)

lighthouse: build  ## Lighthouse scores (mobile) of every page, served as GitHub Pages serves it
	$(BIN)/python -m tools.lighthouse site $(LIGHTHOUSE_ARGS)

screenshots: build  ## screenshot every widget in both colour schemes into build/screenshots/
	$(BIN)/python -m tools.screenshots site build/screenshots

linkcheck: build  ## check every external link of the built site (needs the internet)
	$(BIN)/python -m tools.links site

notebooks: $(STAMP)  ## regenerate docs/labs/ (the downloads, and what "Open in Colab" opens)
	$(BIN)/python -m gradflow_site.labs docs/labs

# every supported Python found here (3.11, 3.12, 3.13; also pyenv's); name others with
# make lock LOCK_PYTHONS="python3.11 /opt/py312/bin/python3 ..."
LOCK_PYTHONS ?= $(PYTHON) $(wildcard /usr/bin/python3) $(foreach v,3.11 3.12 3.13,$(shell command -v python$(v))) \
	$(wildcard $(HOME)/.pyenv/versions/3.1[123].*/bin/python)

lock:  ## regenerate requirements.txt from requirements.in, resolved for every supported Python
	$(PYTHON) -m tools.lock $(LOCK_PYTHONS)

clean:  ## remove the built site, the execution cache and test caches (keeps .venv)
	rm -rf site .cache .pytest_cache build *.egg-info gradient-flow-offline.zip
