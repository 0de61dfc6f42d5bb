# Two commands on a fresh machine: `make run` (the conformance run on the embedded target)
# and `make test`. Everything is installed into caches outside the repository.
CACHE ?= $(HOME)/.cache/kconform
VENV  ?= $(CACHE)/venv
PY     = $(VENV)/bin/python
STAMP  = $(VENV)/.kconform-installed

.PHONY: run test venv bench clean-cache

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,tansu,bench]' tox
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/kconform run --results results/latest

test: $(STAMP)
	$(VENV)/bin/tox -e py311 -- $(ARGS)

bench: $(STAMP)
	$(PY) bench/throughput.py
