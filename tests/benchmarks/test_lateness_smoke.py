"""The lateness benchmark in quick mode: the local runtime shows a missed deadline within a second."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.test_smoke import assert_common, assert_summary, run_quick

pytestmark = pytest.mark.slow


def test_lateness(tmp_path: Path) -> None:
    status, document, _ = run_quick("lateness", tmp_path)
    assert_common(document, "lateness")
    figures = document["results"]["seconds_after_deadline"]
    assert set(figures) == {"health_late", "health_late_answered", "check", "fallback_run"}
    for name, summary in figures.items():
        assert_summary(summary)
        if name != "health_late":  # a request sent just before the deadline may be judged after it
            assert summary["min"] >= 0  # nothing shows late before its deadline
    for sample in document["results"]["samples"]:
        assert -1 < sample["health_late"] <= sample["health_late_answered"]
    assert (status == 0) is document["results"]["target"]["met"]
