# The two quick-start targets (`make demo`, `make test`) set up what they need first.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint clean

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
	rm -rf $(VENV) cdk.out .assetflow

# The example pipelines end to end on the local runtime: messages in, PySpark runs out.
demo: setup
	$(BIN)/assetflow validate
	$(BIN)/assetflow demo
