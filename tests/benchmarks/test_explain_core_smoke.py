"""The explain benchmark in quick mode: it finishes, meets its target, and its JSON has the promised shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.test_smoke import assert_common, assert_summary, run_quick

pytestmark = pytest.mark.slow


def test_explain_core(tmp_path: Path) -> None:
    status, document, _ = run_quick("explain_core", tmp_path)
    assert_common(document, "explain_core")
    results = document["results"]
    assert status == 0 and results["target"]["met"] is True
    assert results["target"]["worst_median"] < 0.1
    assert {"all_of_4@1000", "operators@1000", "windows@1000"} <= set(results["explain_seconds"])
    assert set(results["operator_event_seconds"]) == {
        "asset (a & b)",
        "at_least",
        "where",
        "then",
        "failed",
        "late",
        "debounce + within",
    }
    for summary in (*results["explain_seconds"].values(), *results["operator_event_seconds"].values()):
        assert_summary(summary)
