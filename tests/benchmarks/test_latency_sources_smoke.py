"""The sources' latency benchmark in quick mode: it finishes, and its JSON makes sense."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.test_smoke import assert_common, assert_summary, run_quick

pytestmark = pytest.mark.slow


def test_latency_sources_quick(tmp_path: Path) -> None:
    status, document, _ = run_quick("latency_sources", tmp_path, timeout=300)
    assert status == 0
    assert_common(document, "latency_sources")
    sources = document["results"]["sources"]
    assert set(sources) == {"sqs", "s3", "eventbridge", "kinesis"}
    for source, stages in sources.items():
        assert set(stages) == {"event_stored", "event_readable", "run_created", "run_readable"}
        for figure in stages.values():
            assert set(figure) == {"p50", "p95", "p99"}
            for summary in figure.values():
                assert_summary(summary)
        p50 = {stage: figure["p50"]["median"] for stage, figure in stages.items()}
        # The event is stored before its run is created, and a read never finds an item before its stamp.
        assert 0 < p50["event_stored"] < p50["run_created"] <= p50["run_readable"], source
        assert p50["event_stored"] <= p50["event_readable"], source
