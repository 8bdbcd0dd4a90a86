"""Fixtures of the Spark-side tests: one local Spark session for the whole run, and run-context files."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_timings: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _timings:
        terminalreporter.write_line(
            "spark timings: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in _timings.items())
        )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        # Not a skip: CI has Java, so its absence is a broken setup that must show.
        pytest.fail("the Spark tests need Java 17 (java on PATH or JAVA_HOME)", pytrace=False)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from spark_jobs.common import spark_session

    began = time.monotonic()
    with spark_session("assetflow-tests", master="local[2]") as session:
        session.sparkContext.setLogLevel("ERROR")
        _timings["session start"] = time.monotonic() - began
        yield session


@pytest.fixture
def demo_root(tmp_path: Path) -> Path:
    """The local folder that stands for the bucket s3://assetflow-demo/."""
    root = tmp_path / "assetflow-demo"
    root.mkdir()
    return root
