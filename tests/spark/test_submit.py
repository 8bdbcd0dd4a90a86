"""One real spark-submit of deliveries_etl, shipped as on EMR: the entry point alone plus the py-files zip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")

from pyspark.sql import SparkSession

from assetflow_dev.submit import local_submit_command
from spark_jobs import sample_data
from spark_jobs.common import CURATED_DELIVERIES, LANDING_DELIVERIES
from tests.examples import REPO_ROOT, example_py_files_zip
from tests.spark.contexts import BUCKET, asset_outlet, event, read_metadata, write_context

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_spark_submit_runs_deliveries_etl_from_the_py_files_zip(spark: SparkSession, tmp_path: Path) -> None:
    # Given: sample deliveries in a local stand-in for the bucket, a run context naming them, and the
    # job shipped as EMR gets it (the entry point file elsewhere, everything it imports in the zip).
    bucket = tmp_path / "assetflow-demo"
    bodies = sample_data.write_delivery_files(bucket / "landing" / "deliveries", deliveries=1)
    context, metadata = write_context(
        tmp_path / "runs",
        "submit",
        pipeline="deliveries_etl",
        run_id="r-submit",
        events=[
            event(LANDING_DELIVERIES, "m-1", "2026-11-21T15:00:00.000000Z", payload=json.loads(bodies[0]))
        ],
        outlets=[asset_outlet(CURATED_DELIVERIES)],
        path_map={BUCKET: str(bucket)},
    )
    entry_point = tmp_path / "job" / "deliveries_etl.py"
    entry_point.parent.mkdir()
    shutil.copy(REPO_ROOT / "spark_jobs" / "deliveries_etl.py", entry_point)
    zip_path = example_py_files_zip(tmp_path / "job" / "assetflow_jobs.zip")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)

    # When
    began = time.monotonic()
    result = subprocess.run(
        local_submit_command(entry_point, context.as_uri(), py_files=zip_path),
        cwd=tmp_path / "job",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    seconds = time.monotonic() - began

    # Then (spark-submit passes the Python driver's stderr, and so its logs, to its own stdout)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "outlet metadata written" in output
    document = read_metadata(metadata)
    assert document["run_id"] == "r-submit"
    assert document["events"] == [
        {
            "asset": CURATED_DELIVERIES,
            "alias": None,
            "extra": {"row_count": 8, "rejected_rows": 4, "duplicate_rows": 1, "delivery_ids": ["d-001"]},
        }
    ]
    curated = spark.read.parquet(str(bucket / "curated" / "deliveries"))
    assert {r["delivery_id"] for r in curated.collect()} == {"d-001"}
    assert sum(r["order_count"] for r in curated.collect()) == 8
    assert seconds < 240
