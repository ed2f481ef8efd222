# The commands people type. Each sets up .venv first when it is missing or out of date.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: demo serve test test-js test-postgres lint bench clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -e .
	touch $(STAMP)

demo: $(STAMP)  ## the server, with a demo run streaming telemetry
	$(VENV)/bin/div serve --demo

serve: $(STAMP)
	$(VENV)/bin/div serve

test: $(STAMP) test-js  ## every test: the tab's pure JS on node, SQLite, then PostgreSQL if it answers
	$(PY) -m pytest
	@if [ -n "$$CI" ] || $(PY) -c "import socket; socket.create_connection(('127.0.0.1', 5432), 1)" 2>/dev/null; then \
		$(MAKE) --no-print-directory test-postgres; \
	else echo "no PostgreSQL on 127.0.0.1:5432: its pass is left out"; fi

test-js:  ## the tab's pure rules (static/telemetry/rules.js), on node
	node --test tests/js/

test-postgres: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} \
		$(PY) -m pytest -m "database and not browser"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)  ## the benchmarks: bench/README.md says what each figure is
	$(PY) bench/ingest.py
	$(PY) bench/reads.py
	$(PY) bench/tab.py
	$(PY) bench/many_keys.py
	$(PY) bench/compare.py
	$(PY) bench/latency.py
	$(PY) bench/backlog.py
	$(PY) bench/dashboard.py
	$(PY) bench/remote.py

clean:
	rm -rf $(VENV) var test-artifacts
