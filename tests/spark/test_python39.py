"""The helper and the jobs compile and the helper runs on Python 3.9, EMR 7.x's Python."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = ("/root/.pyenv/versions/3.9.18/bin/python", shutil.which("python3.9"))


def _python39() -> str:
    for candidate in CANDIDATES:
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip(
        f"no Python 3.9 interpreter here (looked for {', '.join(c for c in CANDIDATES if c)}, python3.9)"
    )


def _run(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [python, *args], cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=120
    )


def test_every_helper_and_job_file_compiles_on_python39() -> None:
    python = _python39()
    files = sorted(str(p) for folder in ("assetflow_job", "spark_jobs") for p in (REPO / folder).glob("*.py"))
    assert len(files) > 10
    code = (
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    compile(open(path, encoding='utf-8').read(), path, 'exec', dont_inherit=True)\n"
        "assert sys.version_info[:2] == (3, 9), sys.version\n"
    )
    result = _run(python, "-c", code, *files)
    assert result.returncode == 0, result.stderr


SMOKE = r"""
import json, sys, tempfile, os
assert sys.version_info[:2] == (3, 9), sys.version
from assetflow_job import AliasRef, Metadata, run, AssetEvent
from spark_jobs import sample_data

folder = tempfile.mkdtemp()
context = {
    "format": "assetflow.run-context", "version": 1, "run_id": "r", "pipeline": "p",
    "partition_key": None, "created_at": "2026-11-21T12:00:00.000000Z",
    "triggering_asset_events": {"x-iot://sensors/readings": [
        {"asset": "x-iot://sensors/readings", "id": "b", "timestamp": "2026-11-21T10:00:00.000000Z",
         "extra": {"payload": {"sensor_id": "s-1"}}, "source": {}, "partition_key": None},
        {"asset": "x-iot://sensors/readings", "id": "a", "timestamp": "2026-11-21T09:00:00Z",
         "extra": {}, "source": {}, "partition_key": None}]},
    "outlets": [{"type": "asset", "uri": "s3://b/out"}, {"type": "alias", "name": "al"}],
    "inlets": [{"type": "asset", "uri": "s3://b/in"}],
    "outlet_metadata_uri": os.path.join(folder, "out.json"),
    "events_table": None, "path_map": {"s3://b/": folder + "/"},
}
path = os.path.join(folder, "ctx.json")
with open(path, "w") as handle:
    json.dump(context, handle)

class Reader:
    def read_page(self, uri, cursor):
        return [AssetEvent.from_dict({"asset": uri, "id": "e", "timestamp": "2026-11-21T08:00:00Z"})], None

with run(["--assetflow-context", "file://" + path, "--x"], event_reader=Reader()) as ctx:
    assert [e.id for e in ctx.triggering_asset_events["x-iot://sensors/readings"]] == ["a", "b"]
    assert ctx.inlet_events["s3://b/in"][-1].id == "e"
    assert ctx.path("s3://b/data") == folder + "/data" and ctx.args == ["--x"]
    ctx.emit(Metadata("s3://b/out", {"n": 1}))
    ctx.outlet_events[AliasRef("al")].add("s3://b/dyn", extra={"k": 1})
    ctx.outlet_events[AliasRef("al")].add("s3://b/dyn", extra={"k": 1})
with open(os.path.join(folder, "out.json")) as handle:
    events = json.load(handle)["events"]
assert [(e["asset"], e["alias"]) for e in events] == [("s3://b/out", None), ("s3://b/dyn", "al")], events

assert len(sample_data.write_delivery_files(os.path.join(folder, "landing"))) == 3
assert len(sample_data.sensor_messages()) == 24
bad = [m for m in ("boto3", "pyspark", "assetflow") if m in sys.modules]
assert not bad, bad
print("ok")
"""


def test_helper_runs_a_whole_job_lifecycle_on_python39() -> None:
    result = _run(_python39(), "-c", SMOKE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
