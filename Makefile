# The two commands: `make run` and `make test`. Both set everything up from a bare machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PIPELINE_STAMP := $(VENV)/.pipeline-stamp
# Debian packages of the Spark pipeline: Java, the PostgreSQL JDBC driver, and junixsocket (JDBC
# over a unix socket, as the embedded server listens on).
JAVA_DEB := openjdk-17-jre-headless
JDBC_JAR := /usr/share/java/postgresql.jar
JUNIXSOCKET_JAR := /usr/share/java/junixsocket-common.jar
# The Node.js packages of the tests, each directory's pinned by its package-lock.json: the SQS
# tests' worker (AWS SDK) and the REST API's TypeScript client (openapi-typescript, openapi-fetch).
NODE_DIRS := tests/sqs/node tests/clients/ts
NODE_MIN := 20

# $(call apt_install,PACKAGES,WHAT TO DO ELSE): a recipe's shell fragment that installs Debian
# packages with apt-get (as root, or through sudo without a password), reading the package lists
# again once if the first try fails, and fails with what to do when it cannot. The hints are
# variables: a comma in a call's argument would split it.
apt_install = echo "installing" $(1) "(apt-get)"; \
  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
  export DEBIAN_FRONTEND=noninteractive; \
  { $$sudo apt-get install -y -qq $(1) >/dev/null 2>&1 \
    || { $$sudo apt-get update -qq >/dev/null 2>&1 && $$sudo apt-get install -y -qq $(1) >/dev/null 2>&1; }; } \
  || { echo "error: could not install" $(1) "with apt-get: $(2)" >&2; exit 1; }
JAVA_HINT := install them, or set PQS_JDBC_JAR (and JAVA_HOME), then run make test again
PGBOUNCER_HINT := install it, or set PQS_PGBOUNCER, then run make test again
NODE_HINT := install Node.js $(NODE_MIN) or later with npm, then run make test again
IMAGE_HINT := install them, then run make image-test again
CHROMIUM_HINT := install it, or set PQS_CHROMIUM, then run make test again

.PHONY: run test lint typecheck pytest openapi clean pipeline-deps node-deps pgbouncer-deps browser-deps image-test

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The pipeline extra (PySpark, matplotlib): for the tests, not for `make run`.
$(PIPELINE_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,pipeline]'
	touch $(PIPELINE_STAMP)

run: $(STAMP)
	$(BIN)/pqs serve

test: $(PIPELINE_STAMP) pipeline-deps node-deps pgbouncer-deps browser-deps lint typecheck pytest

# Installs what is missing with apt-get (as root, or through sudo without a password); fails
# with what to do when it cannot. PQS_JDBC_JAR / PQS_JUNIXSOCKET_JAR / JAVA_HOME stand in.
pipeline-deps:
	@missing=""; \
	command -v java >/dev/null 2>&1 || [ -x "$$JAVA_HOME/bin/java" ] || missing="$$missing $(JAVA_DEB)"; \
	[ -n "$$PQS_JDBC_JAR" ] || [ -f $(JDBC_JAR) ] || missing="$$missing libpostgresql-jdbc-java"; \
	[ -n "$$PQS_JUNIXSOCKET_JAR" ] || [ -f $(JUNIXSOCKET_JAR) ] || missing="$$missing libjunixsocket-java"; \
	if [ -n "$$missing" ]; then \
	  $(call apt_install,$$missing,$(JAVA_HINT)); \
	fi

# PgBouncer from Debian when missing (as pipeline-deps installs Java), for the test that runs the
# service behind it (tests/db/test_pgbouncer.py); Debian installs it in /usr/sbin. PQS_PGBOUNCER
# stands in (the path of another pgbouncer binary).
pgbouncer-deps:
	@if [ -z "$$PQS_PGBOUNCER" ] && ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then \
	  $(call apt_install,pgbouncer,$(PGBOUNCER_HINT)); \
	fi

# Chromium from Debian when missing (as pgbouncer-deps installs PgBouncer), for the dashboard's
# browser test (tests/ui), which Playwright drives at /usr/bin/chromium: never `playwright
# install`, whose browsers come from a CDN. PQS_CHROMIUM stands in (another Chromium's path).
browser-deps:
	@if [ -z "$$PQS_CHROMIUM" ] && [ ! -x /usr/bin/chromium ]; then \
	  $(call apt_install,chromium,$(CHROMIUM_HINT)); \
	fi

# Node.js and npm from Debian when missing (as pipeline-deps installs Java), then each directory's
# packages with `npm ci`, again only when its package-lock.json changed since the last install.
node-deps:
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  $(call apt_install,nodejs npm,$(NODE_HINT)); \
	fi
	@major=$$(node -p 'process.versions.node.split(".")[0]'); \
	[ "$$major" -ge $(NODE_MIN) ] || { echo "error: Node.js $$(node --version) is too old: the tests' Node.js" \
	  "workers need Node.js $(NODE_MIN) or later (the AWS SDK for JavaScript v3 does; Debian 12's own" \
	  "nodejs is 18): install a newer one (Debian 13, or NodeSource's packages), then run make test again" >&2; exit 1; }
	@for dir in $(NODE_DIRS); do \
	  stamp=$$(sha256sum $$dir/package-lock.json | cut -d' ' -f1); \
	  [ "$$(cat $$dir/node_modules/.lock-stamp 2>/dev/null)" = "$$stamp" ] || { \
	    (cd $$dir && npm ci --no-audit --no-fund --loglevel=error) && echo "$$stamp" > $$dir/node_modules/.lock-stamp; \
	  } || exit 1; \
	done

lint: $(PIPELINE_STAMP)
	$(BIN)/ruff check app tests alembic
	$(BIN)/ruff format --check app tests alembic
	$(BIN)/lint-imports

typecheck: $(PIPELINE_STAMP)
	$(BIN)/mypy

pytest: $(PIPELINE_STAMP) pipeline-deps node-deps pgbouncer-deps browser-deps
	$(BIN)/pytest -n 2 --dist loadgroup

# The container image, built and run (tests/image/test_build.py; minutes, so not in `make test`):
# buildah and debootstrap from Debian when missing (as pipeline-deps installs Java), as root.
image-test: $(STAMP)
	@missing=""; \
	command -v buildah >/dev/null 2>&1 || missing="$$missing buildah"; \
	command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then \
	  $(call apt_install,$$missing,$(IMAGE_HINT)); \
	fi
	PQS_IMAGE_TEST=1 $(BIN)/pytest -p no:cacheprovider tests/image

openapi: $(STAMP)
	$(BIN)/python -m app.openapi > openapi/openapi.json

clean:
	rm -rf $(VENV) .pqs .mypy_cache .ruff_cache .pytest_cache $(addsuffix /node_modules,$(NODE_DIRS))
