"""The whole local runtime: `assetflow demo` end to end with Spark, and `assetflow dev up` driven as a user would."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from assetflow_dev import client, processes
from assetflow_dev.demo import run_demo
from assetflow_dev.runtime import REPO_ROOT, RuntimeOptions

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _port_open(endpoint: str) -> bool:
    host, port = endpoint.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


@pytest.mark.spark
def test_demo_runs_every_example_pipeline_to_success(tmp_path: Path) -> None:
    # Given: a fresh working folder and the repository's example pipelines
    out = io.StringIO()
    options = RuntimeOptions(
        pipelines=str(REPO_ROOT / "pipelines"),
        work_dir=tmp_path / "demo",
        function_log=tmp_path / "demo" / "logs" / "functions.log",
    )

    # When
    code = run_demo(options, out=out, timeout=600)

    # Then: it reports success, shows the views, and left no process behind
    text = out.getvalue()
    assert code == 0, text
    assert "demo OK" in text
    for pipeline in (
        "deliveries_etl",
        "partner_exports",
        "partner_feed_audit",
        "sensor_check",
        "sensor_daily_rollup",
        "ops_dashboard",
        "daily_report",
    ):
        assert f"  {pipeline}" in text, pipeline
    assert '"row_count": 8' in text  # the ETL's Metadata reached its outlet event's extra
    assert "Quarantined messages (1)" in text
    assert processes.live_processes() == []
    logs = list((tmp_path / "demo" / "logs").rglob("*.log"))
    assert any("deliveries_etl" in str(p) for p in logs), logs
    assert not (tmp_path / "demo" / "dev.json").exists()


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"dev up exited with {process.returncode}: {process.stdout.read()}")  # type: ignore[union-attr]
        if path.is_file():
            return json.loads(path.read_text())  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise AssertionError(f"{path} not written within {timeout} s")


def test_dev_up_serves_users_until_sigterm(tmp_path: Path) -> None:
    # Given: `assetflow dev up` in a working folder, with the EMR-API launcher (no Spark)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "assetflow_dev.cli",
            "dev",
            "up",
            "--launcher",
            "emr-api",
            "--pipelines",
            str(REPO_ROOT / "pipelines"),
        ],
        cwd=tmp_path,
        env=env | {"PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        config = _wait_for(tmp_path / ".assetflow" / "dev.json", process, timeout=90)
        endpoints = config["endpoints"]
        assert set(endpoints) >= {"sqs", "dynamodb", "s3", "events", "emr-serverless", "kafka"}
        assert config["env"]["AWS_ENDPOINT_URL_SQS"] == endpoints["sqs"]
        assert oct((tmp_path / ".assetflow" / "dev.json").stat().st_mode & 0o777) == "0o600"

        # When: a user sends a message as they would with boto3, and reads the views with the CLI and the API
        sqs = client("sqs", config["env"]["AWS_ENDPOINT_URL_SQS"])
        queue_url = config["queues"]["deliveries"]["url"]
        body = {"delivery_id": "d-9", "supplier": "acme", "files": ["s3://assetflow-demo/landing/x.csv"]}
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
        runs: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listed = subprocess.run(
                [sys.executable, "-m", "assetflow_dev.cli", "runs", "list", "--json"],
                cwd=tmp_path,
                env=env | {"PYTHONPATH": str(REPO_ROOT)},
                capture_output=True,
                text=True,
                check=True,
            )
            runs = json.loads(listed.stdout)["items"]
            if any(r["pipeline"] == "deliveries_etl" and r["state"] == "success" for r in runs):
                break
            time.sleep(0.5)
        api = config["api"]
        unsigned = urllib.request.Request(f"{api['url']}/assets")  # noqa: S310
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(unsigned, timeout=10)  # noqa: S310
        signed = urllib.request.Request(  # noqa: S310
            f"{api['url']}/assets", headers={"Authorization": f"Bearer {api['token']}"}
        )
        with urllib.request.urlopen(signed, timeout=10) as response:  # noqa: S310
            assets = json.loads(response.read())["items"]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()

    # Then: the message made a successful run (chained on through the EMR API), the API wanted the
    # token, and SIGTERM stopped everything and removed dev.json
    assert any(r["pipeline"] == "deliveries_etl" and r["state"] == "success" for r in runs), output
    assert refused.value.code == 401
    assert "s3://assetflow-demo/landing/deliveries" in {a["uri"] for a in assets}
    assert process.returncode == 0, output
    assert not (tmp_path / ".assetflow" / "dev.json").exists()
    for name in ("dynamodb", "sqs"):
        assert not _port_open(endpoints[name]), f"{name} still listening after SIGTERM"
