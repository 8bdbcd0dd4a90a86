"""The DynamoDB Local growth benchmark in quick mode, as CI runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.test_smoke import assert_common, run_quick

pytestmark = pytest.mark.slow


def test_dynamodb_local_growth_quick(tmp_path: Path) -> None:
    code, document, _ = run_quick("dynamodb_local_growth", tmp_path)
    assert code == 0
    assert_common(document, "dynamodb_local_growth")
    assert document["results"], "no scenario measured"
