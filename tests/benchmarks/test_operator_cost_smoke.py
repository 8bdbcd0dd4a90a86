"""The operator cost benchmark in quick mode: it finishes, every operator makes its runs, its JSON has the shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.test_smoke import assert_common, assert_summary, run_quick

pytestmark = pytest.mark.slow


def test_operator_cost(tmp_path: Path) -> None:
    status, document, _ = run_quick("operator_cost", tmp_path)
    assert_common(document, "operator_cost")
    assert status == 0
    operators = document["results"]["operators"]
    assert set(operators) == {"asset", "where", "then", "key", "skip_unchanged", "failed"}
    for name, figures in operators.items():
        for field in ("requests_per_event", "read_units_per_event", "write_units_per_event"):
            assert_summary(figures[field])
            assert figures[field]["median"] > 0, (name, field)
        assert_summary(figures["evaluator_ms_per_event"])
        assert figures["runs_per_run"] >= 1
        assert "TransactWriteItems" in figures["dynamodb_operations_last_run"], name
    # skip_unchanged reads the consumed-version facts once per batch; it writes them inside the run's transaction
    skip = operators["skip_unchanged"]
    skip_ops = skip["dynamodb_operations_last_run"]
    assert skip_ops["BatchGetItem"]["calls"] >= skip["events_per_run"]
    assert "PutItem" not in skip_ops
    assert skip_ops["TransactWriteItems"]["calls"] == skip["runs_per_run"]
