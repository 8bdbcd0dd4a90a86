"""Shipping the jobs: the deterministic py-files zip, the local spark-submit command, the pyspark pin."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

from assetflow.jobcode import py_files_sources
from assetflow.versions import SPARK_VERSION
from assetflow_dev.submit import local_submit_command, local_submit_env
from assetflow_job.local import LOCAL_SPARK_CONF
from tests.examples import REPO_ROOT, example_entry_points
from tests.examples import example_py_files_zip as build_py_files_zip

REPO = Path(__file__).resolve().parents[2]


def test_zip_holds_the_helper_and_the_shared_module_only(tmp_path: Path) -> None:
    names = zipfile.ZipFile(build_py_files_zip(tmp_path / "jobs.zip")).namelist()
    assert names == sorted(names)
    assert {"assetflow_job/__init__.py", "assetflow_job/context.py", "spark_jobs/__init__.py"} <= set(names)
    assert {"spark_jobs/common.py", "assetflow_job/contract.py"} <= set(names)
    assert not [n for n in names if n.startswith("spark_jobs/") and "etl" in n]
    assert not [n for n in names if "__pycache__" in n or not n.endswith(".py")]


def test_zip_is_byte_for_byte_reproducible(tmp_path: Path) -> None:
    first = build_py_files_zip(tmp_path / "a" / "jobs.zip").read_bytes()
    second = build_py_files_zip(tmp_path / "b" / "jobs.zip").read_bytes()
    assert first == second
    assert {info.date_time for info in zipfile.ZipFile(tmp_path / "a" / "jobs.zip").infolist()} == {
        (1980, 1, 1, 0, 0, 0)
    }


def test_zip_alone_makes_the_helper_importable(tmp_path: Path) -> None:
    archive = build_py_files_zip(tmp_path / "jobs.zip")
    code = f"import assetflow_job, spark_jobs.common as c; assert c.__file__.startswith({str(archive)!r})"
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(archive)}, check=True)


def test_every_zip_source_exists() -> None:
    assert all(path.is_file() for _, path in py_files_sources(REPO_ROOT, example_entry_points()))


def test_local_submit_command_puts_pipeline_settings_after_the_local_ones() -> None:
    command = local_submit_command(
        "spark_jobs/sensor_check.py",
        "s3://runs/p/r/context.json",
        arguments=["--max-temperature", "25"],
        spark_conf={"spark.sql.shuffle.partitions": "4"},
        py_files="jobs.zip",
        spark_submit="spark-submit",
    )
    assert command[:3] == ["spark-submit", "--master", "local[2]"]
    confs = dict(command[i + 1].split("=", 1) for i, part in enumerate(command) if part == "--conf")
    assert confs == {**LOCAL_SPARK_CONF, "spark.sql.shuffle.partitions": "4"}
    assert command[-7:] == [
        "--py-files",
        "jobs.zip",
        "spark_jobs/sensor_check.py",
        "--assetflow-context",
        "s3://runs/p/r/context.json",
        "--max-temperature",
        "25",
    ]
    env = local_submit_env({"PYTHONPATH": "/elsewhere"}, REPO)
    assert env["PYTHONPATH"].split(":")[:2] == [str(REPO), "/elsewhere"]
    assert env["PYSPARK_PYTHON"] == sys.executable


def test_requirements_pin_pyspark_to_the_emr_release_spark() -> None:
    pins = dict(
        re.findall(
            r"^([A-Za-z0-9_.-]+)==([^\s#]+)", (REPO / "requirements-spark.txt").read_text(), re.MULTILINE
        )
    )
    assert pins["pyspark"] == SPARK_VERSION
