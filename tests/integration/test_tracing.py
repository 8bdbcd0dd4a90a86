"""X-Ray subsegments around AWS calls, sent to a daemon (a UDP socket here) as the X-Ray SDK would, without it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from botocore.session import get_session
from botocore.stub import Stubber

from assetflow.adapters.tracing import trace_calls

ROOT = "1-6750a1b2-0123456789abcdef01234567"
PARENT = "53995c3f42cd8ad8"


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(2)
    monkeypatch.setenv("AWS_XRAY_DAEMON_ADDRESS", f"127.0.0.1:{listener.getsockname()[1]}")
    yield listener
    listener.close()


def dynamodb() -> tuple[object, Stubber]:
    client = get_session().create_client(
        "dynamodb",
        region_name="eu-west-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",  # noqa: S106
    )
    return trace_calls(client), Stubber(client)


def test_a_sampled_invocation_sends_one_subsegment_per_call(
    daemon: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root={ROOT};Parent={PARENT};Sampled=1")
    client, stub = dynamodb()
    stub.add_response("get_item", {}, {"TableName": "events", "Key": {"pk": {"S": "a"}}})
    with stub:
        client.get_item(TableName="events", Key={"pk": {"S": "a"}})  # type: ignore[attr-defined]

    header, body = daemon.recv(65536).split(b"\n", 1)
    assert json.loads(header) == {"format": "json", "version": 1}
    segment = json.loads(body)
    assert segment["type"] == "subsegment" and segment["namespace"] == "aws"
    assert segment["trace_id"] == ROOT and segment["parent_id"] == PARENT
    assert len(segment["id"]) == 16 and segment["name"] == "DynamoDB"
    assert segment["aws"]["operation"] == "GetItem" and segment["aws"]["tableName"] == "events"
    assert segment["start_time"] <= segment["end_time"]


def test_an_unsampled_invocation_sends_nothing(
    daemon: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root={ROOT};Parent={PARENT};Sampled=0")
    client, stub = dynamodb()
    stub.add_response("get_item", {}, {"TableName": "events", "Key": {"pk": {"S": "a"}}})
    with stub:
        client.get_item(TableName="events", Key={"pk": {"S": "a"}})  # type: ignore[attr-defined]
    daemon.settimeout(0.3)
    with pytest.raises(TimeoutError):
        daemon.recv(65536)


def test_tracing_is_off_the_import_path() -> None:
    import subprocess
    import sys

    code = "import sys, assetflow.functions.handle_asset_events; print(sorted(m for m in sys.modules if m.startswith(('aws_xray_sdk', 'boto3', 's3transfer', 'asyncio'))))"
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == "[]"
