# The commands people type. Each sets up .venv first when it is missing or out of date.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: demo serve test test-postgres lint bench clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -e .
	touch $(STAMP)

demo: $(STAMP)  ## the server, with a demo run streaming telemetry
	$(VENV)/bin/div serve --demo

serve: $(STAMP)
	$(VENV)/bin/div serve

test: $(STAMP)  ## every test, on SQLite, then the database tests again on PostgreSQL when one answers
	$(PY) -m pytest
	@if [ -n "$$CI" ] || $(PY) -c "import socket; socket.create_connection(('127.0.0.1', 5432), 1)" 2>/dev/null; then \
		$(MAKE) --no-print-directory test-postgres; \
	else echo "no PostgreSQL on 127.0.0.1:5432: its pass is left out"; fi

test-postgres: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} \
		$(PY) -m pytest tests/test_end_to_end.py tests/test_api.py tests/test_consumers.py \
			tests/test_scale_out.py tests/test_admin.py tests/test_storage.py \
			tests/test_storage_migration.py tests/test_panels_api.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)  ## the benchmarks: bench/README.md says what each figure is
	$(PY) bench/ingest.py
	$(PY) bench/reads.py
	$(PY) bench/tab.py
	$(PY) bench/latency.py

clean:
	rm -rf $(VENV) var test-artifacts
