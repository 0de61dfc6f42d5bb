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
	$(PY) -m pip install -q -e '.[test,tansu,bench,capture,analytics]' tox
	touch $(STAMP)

venv: $(STAMP)

RUN_ID := $(shell date -u +%Y%m%dT%H%M%SZ)

# The main job: the conformance run (embedded target, every installed client), then the Allure
# report of that run and the Spark analytics over every run kept under results/runs/.
# A failing check is a finding, not a broken command: it is counted in the report and in the
# analytics; `kconform run` alone exits 1 for it (use that to gate CI), an invalid case exits 2.
run: $(STAMP)
	@status=0; $(VENV)/bin/kconform run --results results/runs/$(RUN_ID) $(ARGS) || status=$$?; \
	if [ $$status -gt 1 ]; then exit $$status; fi; \
	$(VENV)/bin/kconform analyze --results results/runs --out results/analytics && \
	$(VENV)/bin/kconform report --results results/runs/$(RUN_ID) --out results/report \
	    --analytics results/analytics && \
	echo "analytics summary: results/analytics/summary.txt" && \
	echo "HTML report: $$(pwd)/results/report/kconform-report.html"

# The test suite (tox env py311), then the Spark analytics tests (tox env analytics: PySpark is
# an optional extra, so it has its own environment).
test: $(STAMP)
	$(VENV)/bin/tox -e py311 -- $(ARGS)
	$(VENV)/bin/tox -e analytics

bench: $(STAMP)
	$(PY) bench/throughput.py
