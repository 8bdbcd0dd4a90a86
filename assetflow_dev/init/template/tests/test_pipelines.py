"""The definitions load, validate and schedule as intended."""

from __future__ import annotations

from pathlib import Path

from assetflow.loader import load_catalog

ROOT = Path(__file__).resolve().parents[1]


def test_the_definitions_validate_and_the_job_exists() -> None:
    catalog = load_catalog(ROOT / "pipelines")
    assert set(catalog.pipelines) == {"order_totals"}
    pipeline = catalog.pipelines["order_totals"]
    assert (ROOT / pipeline.job.entry_point).is_file()
    assert [p.id for p, _ in catalog.consumers("s3://{{bucket}}/landing/orders")] == ["order_totals"]
