"""Dedupe that survives: a retried API request from a new session, and Kafka replays older than 15 days.

Real handlers on DynamoDB Local. DynamoDB's TTL is played by ``expire``: it deletes what TTL would have
deleted by a given time (every item whose ``expires_at`` has passed), as DynamoDB does in the background.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from assetflow.adapters.dynamodb import DEDUPE_TTL, DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.functions import handle_api, handle_kafka_records
from assetflow.loader import load_catalog
from assetflow.usecases.requests import caller_identity
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_CLIENT_KWARGS, LOCAL_REGION, client

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
READINGS = "x-iot://sensors/readings"  # the example Kafka watcher "sensor-readings"
MSK_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/iot/751d2973-a626-431c-9d4e-d7975eb44dd7-2"
ROLE_SESSION = f"arn:aws:sts::{LOCAL_ACCOUNT_ID}:assumed-role/pipeline-operator/{{}}"


@dataclass
class LambdaContext:
    function_name: str = "assetflow-dedupe"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:assetflow-dedupe"
    aws_request_id: str = "00000000-0000-4000-8000-000000000002"


@pytest.fixture
def deps(dynamodb_local: Any, tmp_path: Path) -> Iterator[Dependencies]:
    table = f"dedupe-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(client("dynamodb", dynamodb_local.endpoint), table).create_table()
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(load_catalog(str(ROOT / "pipelines")).to_document()))
    yield Dependencies(
        Settings(
            table_name=table, catalog_path=str(path), region=LOCAL_REGION, watcher_name="sensor-readings"
        ),
        session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
        endpoints={"dynamodb": dynamodb_local.endpoint},
    )
    client("dynamodb", dynamodb_local.endpoint).delete_table(TableName=table)


def expire(deps: Dependencies, *, after: timedelta) -> int:
    """Delete what DynamoDB's TTL would have deleted ``after`` from now; returns how many items."""
    cutoff = int(time.time() + after.total_seconds())
    db, deleted = deps.store._db, 0
    for page in db.get_paginator("scan").paginate(TableName=deps.store.table):
        for item in page["Items"]:
            if "expires_at" in item and int(item["expires_at"]["N"]) <= cutoff:
                db.delete_item(TableName=deps.store.table, Key={"pk": item["pk"], "sk": item["sk"]})
                deleted += 1
    return deleted


def post(
    deps: Dependencies, *, session: str, key: str, body: dict[str, Any]
) -> tuple[int, dict[str, Any], str]:
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/assets/events",
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "idempotency-key": key},
        "requestContext": {
            "http": {
                "method": "POST",
                "path": "/assets/events",
                "protocol": "HTTP/1.1",
                "sourceIp": "10.0.0.1",
            },
            "requestId": uuid.uuid4().hex,
            "authorizer": {"iam": {"userArn": session}},
            "routeKey": "$default",
            "stage": "$default",
        },
        "isBase64Encoded": False,
        "body": json.dumps(body),
    }
    response = handle_api.lambda_handler(event, LambdaContext(), deps=deps)  # type: ignore[arg-type]
    return (
        response["statusCode"],
        json.loads(response["body"]),
        response["headers"].get("Idempotent-Replayed", ""),
    )


def kafka_event(offset: int, value: dict[str, Any] | str) -> dict[str, Any]:
    raw = value if isinstance(value, str) else json.dumps(value)
    record = {
        "topic": "sensor-readings",
        "partition": 0,
        "offset": offset,
        "timestamp": 1763719500000 + offset,
        "timestampType": "CREATE_TIME",
        "value": base64.b64encode(raw.encode()).decode(),
        "headers": [],
    }
    return {"eventSource": "aws:kafka", "eventSourceArn": MSK_ARN, "records": {"sensor-readings-0": [record]}}


def test_the_same_idempotency_key_from_a_new_session_of_the_same_role_makes_no_second_event(
    deps: Dependencies,
) -> None:
    body = {"uri": "s3://assetflow-demo/curated/deliveries", "extra": {"batch": 7}}
    first = post(deps, session=ROLE_SESSION.format("botocore-session-1763719200"), key="k-1", body=body)
    refreshed = post(deps, session=ROLE_SESSION.format("botocore-session-1763722800"), key="k-1", body=body)
    other_role = post(
        deps, session=f"arn:aws:sts::{LOCAL_ACCOUNT_ID}:assumed-role/someone-else/s1", key="k-1", body=body
    )

    assert (first[0], first[2]) == (201, "false")
    assert (refreshed[0], refreshed[2]) == (201, "true") and refreshed[1] == first[1]
    assert other_role[2] == "false" and other_role[1]["id"] != first[1]["id"]
    assert len(deps.store.list_events(body["uri"]).items) == 2
    # The event still records who sent it, session and all
    assert first[1]["source"]["principal"].endswith("botocore-session-1763719200")


@pytest.mark.parametrize(
    ("principal", "identity"),
    [
        (
            "arn:aws:sts::123456789012:assumed-role/ops/alice@example.com",
            "arn:aws:sts::123456789012:assumed-role/ops",
        ),
        ("arn:aws-cn:sts::123456789012:assumed-role/ops/s", "arn:aws-cn:sts::123456789012:assumed-role/ops"),
        ("arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"),
        ("arn:aws:sts::123456789012:federated-user/bob", "arn:aws:sts::123456789012:federated-user/bob"),
        ("cli:alice", "cli:alice"),
        ("anonymous", "anonymous"),
    ],
)
def test_a_callers_identity_drops_only_an_assumed_roles_session(principal: str, identity: str) -> None:
    assert caller_identity(principal) == identity


def test_a_kafka_record_replayed_after_the_dedupe_window_makes_no_second_event(deps: Dependencies) -> None:
    # Given a reading and a poison record ingested from the topic
    reading = kafka_event(
        41, {"sensor_id": "s-1", "reading_time": "2026-11-21T10:00:00Z", "temperature_c": 21.5}
    )
    poison = kafka_event(42, "not json")
    for batch in (reading, poison):
        assert handle_kafka_records.lambda_handler(batch, LambdaContext(), deps=deps) == {
            "batchItemFailures": []
        }
    events, quarantined = deps.store.list_events(READINGS).items, deps.store.list_quarantine().items
    assert len(events) == 1 and len(quarantined) == 1

    # When the consumer group is reset to an old offset weeks later (past the 15 days SQS and stream
    # redeliveries need), TTL having done its work meanwhile
    expire(deps, after=DEDUPE_TTL + timedelta(days=30))
    for batch in (reading, poison):
        assert handle_kafka_records.lambda_handler(batch, LambdaContext(), deps=deps) == {
            "batchItemFailures": []
        }

    # Then neither comes back a second time
    assert [e["id"] for e in deps.store.list_events(READINGS).items] == [events[0]["id"]]
    assert len(deps.store.list_quarantine().items) == 1


def test_an_api_dedupe_record_still_lives_fifteen_days(deps: Dependencies) -> None:
    post(
        deps,
        session="arn:aws:iam::123456789012:user/alice",
        key="k-2",
        body={"uri": "x-ops://dashboard/refresh"},
    )

    assert expire(deps, after=DEDUPE_TTL - timedelta(hours=1)) == 0
    assert expire(deps, after=DEDUPE_TTL + timedelta(hours=1)) == 1
