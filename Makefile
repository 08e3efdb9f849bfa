# Everyday commands. `make install` is idempotent and quick when nothing changed.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

# Tests and benchmarks run against the machine's PostgreSQL and Redis.
TEST_ENV := DJANGO_DEBUG=false DJANGO_SECRET_KEY=test-only-secret-key-not-for-production \
	SECURE_SSL_REDIRECT=false SESSION_COOKIE_SECURE=false CSRF_COOKIE_SECURE=false \
	DATABASE_URL=$${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/lat} \
	REDIS_URL=$${TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	RATE_LIMIT_ANON=1000000/min RATE_LIMIT_KEYED=1000000/min RATE_LIMIT_SIMULATE=1000000/min
# The demo runs on embedded defaults: SQLite file, local-memory cache, a local anvil chain.
DEMO_ENV := DJANGO_DEBUG=true

.PHONY: install test demo bench lint lock lock-check fmt migrations-check schema clean

install: $(VENV)/.installed node_modules/.installed build/contracts.json

$(VENV)/.installed: pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	$(PIP) install --quiet --disable-pip-version-check --no-deps -e .
	$(PIP) check --disable-pip-version-check
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

build/contracts.json: $(wildcard devchain/contracts/*.sol devchain/contracts/*/*.sol) node_modules/.installed $(VENV)/.installed
	$(PY) -m devchain.compile

# The pooler tests run Debian's PgBouncer (tests/pgcluster.py): installed when missing.
test: install
	@command -v pgbouncer >/dev/null || test -x /usr/sbin/pgbouncer || (apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends pgbouncer)
	$(TEST_ENV) $(PY) manage.py makemigrations --check --dry-run
	$(TEST_ENV) $(PY) -m pytest -n 2 --dist loadgroup -q $(PYTEST_ARGS)

demo: install
	@mkdir -p var
	$(DEMO_ENV) $(PY) manage.py migrate --noinput
	$(DEMO_ENV) $(PY) manage.py lat_devnet --import --sync --serve 127.0.0.1:8000 $(DEMO_ARGS)

# The bench's load comes from wrk: Debian's package, installed when missing.
bench: install
	@command -v wrk >/dev/null || (apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends wrk)
	$(TEST_ENV) $(PY) bench/run.py $(BENCH_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(TEST_ENV) $(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# requirements.lock: every package pyproject.toml needs (with the dev extra), pinned with hashes.
# `make lock` re-resolves it (keeping the pins that still fit); `make lock-check` fails when it
# no longer matches pyproject.toml.
LOCK_CMD := $(VENV)/bin/uv pip compile pyproject.toml --extra dev --generate-hashes \
	--python-version 3.11 --quiet

lock: $(VENV)/.installed
	$(LOCK_CMD) -o requirements.lock

lock-check: $(VENV)/.installed
	@tmp=$$(mktemp -d) && cp requirements.lock $$tmp/requirements.lock && \
	$(LOCK_CMD) -o $$tmp/requirements.lock && \
	if diff -u <(grep -v '^#' requirements.lock) <(grep -v '^#' $$tmp/requirements.lock); \
	then echo "requirements.lock matches pyproject.toml"; rm -rf $$tmp; \
	else echo "requirements.lock is out of date: run make lock" >&2; rm -rf $$tmp; exit 1; fi

fmt: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

schema: install
	$(TEST_ENV) $(PY) manage.py spectacular --validate --fail-on-warn --file var/openapi.yaml

clean:
	rm -rf $(VENV) node_modules build var
