# The two quick-start targets (`make demo`, `make test`) set up what they need first.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint clean wheel test-localstack

$(STAMP): requirements*.txt pyproject.toml package.json package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check $(foreach f,$(wildcard requirements*.txt),-r $(f))
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	bash scripts/install-tools.sh
	touch $(STAMP)

setup: $(STAMP)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) cdk.out .assetflow dist

# The distribution users install (`pip install dist/assetflow-*.whl[local,cdk]`).
wheel: setup
	rm -rf build/lib build/bdist.* dist/assetflow-*.whl
	$(BIN)/pip wheel --quiet --disable-pip-version-check --no-deps -w dist .
	@ls -l dist/assetflow-*.whl

# The stack on LocalStack (needs Docker and a running LocalStack: this target fails when none answers), then
# the end-to-end tests against its one endpoint; what its free edition lacks (EMR Serverless, MSK, HTTP APIs)
# is skipped with the reason. `make test` runs the same tests against the local runtime.
LOCALSTACK ?= $(or $(AWS_ENDPOINT_URL),http://localhost:4566)
LOCALSTACK_ENV := AWS_ENDPOINT_URL=$(LOCALSTACK) AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
	AWS_DEFAULT_REGION=$(or $(AWS_DEFAULT_REGION),us-east-1) JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
test-localstack: setup
	@$(BIN)/python -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/_localstack/health', timeout=5)" \
		$(LOCALSTACK) 2>/dev/null || { echo "make test-localstack: no LocalStack answers at $(LOCALSTACK); start one \
	(docker run -d -p 4566:4566 localstack/localstack) or set AWS_ENDPOINT_URL" >&2; exit 1; }
	$(LOCALSTACK_ENV) npx cdklocal bootstrap
	$(LOCALSTACK_ENV) npx cdklocal deploy -c env=dev --require-approval never
	$(LOCALSTACK_ENV) ASSETFLOW_E2E_TARGET=localstack $(BIN)/pytest -ra tests/e2e/test_endpoints.py

# The example pipelines end to end on the local runtime: messages in, PySpark runs out.
demo: setup
	$(BIN)/assetflow validate
	$(BIN)/assetflow demo
