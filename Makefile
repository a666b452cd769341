# Kishpa backend. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# Our contracts only: protos/google/ (vendored error details) is served by googleapis-common-protos.
PROTO_SRC := $(shell find protos/kishpa -name '*.proto' 2>/dev/null)

.DEFAULT_GOAL := help
.PHONY: help install lock sbom proto ts-proto web chromium run test lint format bench clean release-contract audit checkov
WEB_SRC := $(shell find web/src web/static -type f -not -path 'web/src/gen/*' 2>/dev/null) web/build.mjs web/tsconfig.json

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Exactly what requirements/dev.lock pins, every package checked against its hash; the
# project itself on top without its dependencies (they are all in the lock). `make lock`
# remakes the lock from pyproject.toml; `make lint` fails when the two disagree.
LOCK := requirements/dev.lock
UV_VERSION := 0.13.9

$(VENV)/.installed: $(LOCK) pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r $(LOCK)
	$(MAKE) --no-print-directory proto
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	# The dev venv also sees the checkout's devkit/ and benchmarks/ (never packaged), so
	# `.venv/bin/python benchmarks/bench_x.py` runs from anywhere.
	echo "$(CURDIR)" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/kishpa-checkout.pth"
	touch $@

install: $(VENV)/.installed proto web ## Create .venv with exactly the locked dependencies and generate the protobuf code

lock: ## Remake requirements/*.lock from pyproject.toml (exact versions and hashes)
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q "uv==$(UV_VERSION)" packaging
	.venv-lock/bin/python -m devkit.lock --write .venv-lock/bin/uv

sbom: install ## CycloneDX SBOMs (JSON) of the image's locked Python packages and the web client's npm packages, in sbom/
	mkdir -p sbom
	$(BIN)/cyclonedx-py requirements requirements/runtime.lock --output-format JSON -o sbom/python.cdx.json
	cd web && npm sbom --sbom-format cyclonedx --omit dev > ../sbom/npm.cdx.json

kishpa/.generated: $(PROTO_SRC)
	rm -rf kishpa
	@if [ -n "$(PROTO_SRC)" ]; then \
	  PATH="$(abspath $(BIN)):$$PATH" $(PY) -m grpc_tools.protoc -I protos --python_out=. --grpc_python_out=. \
	    --mypy_out=. --mypy_grpc_out=. $(PROTO_SRC) && \
	  find kishpa -type d -exec touch {}/__init__.py \; ; \
	else mkdir -p kishpa && touch kishpa/__init__.py; fi
	touch $@

proto: kishpa/.generated ## Generate Python code and typed stubs from protos/ into kishpa/

# TypeScript from protos/ (protobuf-es v2, the plugin run by buf from node_modules): what the
# web client and the Node contract test (tests/integration/tables/test_ts_contract.py) use.
# The npm packages are pinned by web/package-lock.json.
WEB_PROTO_SRC := $(shell find protos -name '*.proto' 2>/dev/null)

web/node_modules/.installed: web/package.json web/package-lock.json
	cd web && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
	touch $@

web/src/gen/.generated: $(WEB_PROTO_SRC) web/buf.gen.yaml web/node_modules/.installed $(VENV)/.installed
	rm -rf web/src/gen
	cd web && ../$(BIN)/buf generate ../protos --template buf.gen.yaml
	touch $@

ts-proto: web/src/gen/.generated ## Generate TypeScript from protos/ into web/src/gen (protobuf-es)

# The web client (docs/web.md): bundled by esbuild into web/dist, what the edge serves at /.
# playwright-core (the browser tests) never downloads a browser: it drives Debian's chromium.
web/dist/.built: web/src/gen/.generated $(WEB_SRC)
	cd web && node build.mjs
	touch $@

web: web/dist/.built ## Build the web client (TypeScript from protos/, bundled into web/dist)

chromium: ## Install Debian's chromium for the browser tests, if /usr/bin/chromium is missing
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing Debian's chromium (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	fi

run: install ## Start the whole stack on this machine (Ctrl-C stops it)
	$(BIN)/kishpa run

# devkit/run_tests.py: the integration tests and, beside them on servers of their own, the
# whole-stack tests, and the Redis suites again on a 3-master Redis Cluster the fixtures
# start followed by the unit tests (docs/DEVELOPING.md "Three lanes side by side").
# PYTEST_ARGS: options for every run, or paths to run just those.
test: install lint ts-proto chromium ## Lint, type-check and run every test against real Redis/PostgreSQL/Celery/gRPC
	$(PY) -m devkit.run_tests $(PYTEST_ARGS)

lint: install ## the lock against pyproject.toml, ruff, ruff format --check, mypy --strict, import-linter, buf lint + breaking, tsc
	$(PY) -m devkit.lock --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	if [ -f protos/buf.yaml ]; then cd protos && ../$(BIN)/buf lint \
	  && ../$(BIN)/buf breaking --against released/contract.binpb; fi
	cd web && node_modules/.bin/tsc --noEmit -p .

release-contract: install ## Record protos/ as the released contract that buf breaking guards (docs/api.md)
	cd protos && ../$(BIN)/buf build --exclude-source-info -o released/contract.binpb

# Release tools, each in a virtualenv of its own so their pins never touch ours; not part of
# `make test` (docs/operations.md, "Releasing").
AUDIT_VENV ?= .venv-audit
CHECKOV_VENV ?= .venv-checkov

$(AUDIT_VENV)/.installed:
	$(PYTHON) -m venv $(AUDIT_VENV)
	$(AUDIT_VENV)/bin/python -m pip install -q "pip-audit==2.10.1"
	touch $@

$(CHECKOV_VENV)/.installed:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q "checkov==3.3.30"
	touch $@

audit: install $(AUDIT_VENV)/.installed ## Known vulnerabilities in Python and npm dependencies vs deploy/audit-allowlist.toml (release step; needs the advisory services)
	$(PY) -m deploy.audit --pip-audit $(AUDIT_VENV)/bin/pip-audit --python $(PY)

checkov: install $(CHECKOV_VENV)/.installed ## checkov on the rendered production overlay: 0 failures, skips only with reasons
	$(PY) -m deploy.checkov_run --checkov $(CHECKOV_VENV)/bin/checkov

format: install ## Apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install ## Run every benchmark and print the figures (see docs/BENCHMARKS.md)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean: ## Remove the virtualenv and generated code
	rm -rf $(VENV) .venv-lock sbom $(AUDIT_VENV) $(CHECKOV_VENV) kishpa .pytest_cache .mypy_cache .ruff_cache web/node_modules web/src/gen web/dist web/test/dist
