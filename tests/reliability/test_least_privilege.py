"""Each function's table grants are what it uses: its real requests, checked against its IAM profile.

The stack grants every function only the table actions it uses on the partitions it uses
(``assetflow/cdk/table_access.py``, ``dynamodb:LeadingKeys``). IAM is not enforced by the emulators, so here
every DynamoDB request of each function (the real handlers, on DynamoDB Local and moto, through the example
pipelines' whole flow: ingest of good, bad and redelivered messages, evaluation, run states with outlets and
alias additions, ticks, the sweep, every API route) is checked as IAM would check it against the function's
profile; a request the profile does not allow fails the test, naming the function, the action and the key.
"""

from __future__ import annotations

import base64
import collections
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

import assetflow_job
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.cdk import table_access
from assetflow.cdk.table_access import TableAccess
from assetflow.composition import Dependencies, Settings
from assetflow.functions import (
    handle_api,
    handle_asset_events,
    handle_job_state,
    handle_kafka_records,
    handle_kinesis_records,
    handle_reconcile,
    handle_schedule_tick,
    handle_sqs_messages,
)
from assetflow.loader import load_catalog
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_CLIENT_KWARGS, LOCAL_REGION, client
from tests.reliability.model import LambdaContext, StreamTail

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
QUEUE_ARN = f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:deliveries"
MSK_ARN = (
    f"arn:aws:kafka:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:cluster/iot/751d2973-a626-431c-9d4e-d7975eb44dd7-2"
)
DELIVERIES, READINGS = "s3://assetflow-demo/landing/deliveries", "x-iot://sensors/readings"
# The S3 and EventBridge watchers' queues (the stack generates their names), and the Kinesis watcher's stream.
INBOX_QUEUE_ARN = f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:assetflow-inbox-files-events"
ORDERS_QUEUE_ARN = f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:assetflow-shop-orders-events"
CLICKS_ARN = f"arn:aws:kinesis:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:stream/assetflow-demo-clicks"
INBOX = ("s3://assetflow-demo-inbox/incoming", "x-audit://inbox/intake")
AUDIT = "s3://assetflow-demo/audit/partner_feeds"

PROFILES: dict[str, TableAccess] = {
    "ingest-deliveries": table_access.ingest(DELIVERIES, [f"sqs:{QUEUE_ARN}:"], batched_puts=True),
    "ingest-sensor-readings": table_access.ingest(READINGS, ["kafka:"]),
    # as AssetflowService._ingest_access grants them: every asset the watcher feeds, its own identities
    "ingest-inbox-files": table_access.ingest(INBOX, ["s3:inbox-files:", f"sqs:{INBOX_QUEUE_ARN}:"]),
    "ingest-shop-orders": table_access.ingest(
        "x-shop://orders/placed", ["eventbridge:shop-orders:", f"sqs:{ORDERS_QUEUE_ARN}:"]
    ),
    "ingest-web-clicks": table_access.ingest("x-web://clickstream", ["kinesis:web-clicks:"]),
    "evaluator": table_access.EVALUATOR,
    "run-state": table_access.RUN_STATE,
    "schedule-tick": table_access.TICK,
    "reconcile": table_access.RECONCILE,
    "api": table_access.API,
}


def requests_of(operation: str, params: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """What IAM authorises for one DynamoDB request: (action, partition key or None for an index, index)."""

    def pk(key: dict[str, Any]) -> str:
        return str(key["pk"]["S"])

    if operation in ("GetItem", "UpdateItem", "DeleteItem"):
        return [(f"dynamodb:{operation}", pk(params["Key"]), None)]
    if operation == "PutItem":
        return [("dynamodb:PutItem", pk(params["Item"]), None)]
    if operation == "BatchGetItem":
        return [
            ("dynamodb:BatchGetItem", pk(k), None) for r in params["RequestItems"].values() for k in r["Keys"]
        ]
    if operation == "Query":
        if params.get("IndexName"):
            return [("dynamodb:Query", None, str(params["IndexName"]))]
        placeholder = params["KeyConditionExpression"].split("pk = ", 1)[1].split()[0]
        return [("dynamodb:Query", str(params["ExpressionAttributeValues"][placeholder]["S"]), None)]
    if operation == "BatchWriteItem":
        return [
            (
                "dynamodb:BatchWriteItem",
                pk((r.get("PutRequest") or {}).get("Item") or r["DeleteRequest"]["Key"]),
                None,
            )
            for requests in params["RequestItems"].values()
            for r in requests
        ]
    if operation == "TransactWriteItems":
        actions = {
            "Put": "PutItem",
            "Update": "UpdateItem",
            "Delete": "DeleteItem",
            "ConditionCheck": "ConditionCheckItem",
        }
        found = []
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            found.append((f"dynamodb:{actions[kind]}", pk(body.get("Item") or body["Key"]), None))
        return found
    return [(f"dynamodb:{operation}", "(table)", None)]


@dataclass
class Auditor:
    """Checks each request of one function against its profile; keeps what it saw and what it refused."""

    function: str
    profile: TableAccess
    used: collections.Counter[str] = field(default_factory=collections.Counter)
    refused: list[str] = field(default_factory=list)

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        for action, partition, index in requests_of(model.name, params):
            prefix = "(index " + str(index) + ")" if partition is None else partition.split("#", 1)[0] + "#"
            self.used[f"{action.removeprefix('dynamodb:')} {prefix}"] += 1
            allowed = (
                index in self.profile.indexes and action == "dynamodb:Query"
                if partition is None
                else self.profile.allows(action, partition)
            )
            if not allowed:
                self.refused.append(f"{self.function}: {action} on {partition or index}")


@dataclass
class World:
    deps: dict[str, Dependencies]
    auditors: dict[str, Auditor]
    s3: Any
    emr: Any
    application: str
    tail: StreamTail

    def evaluate(self) -> None:
        for _ in range(10):
            records = self.tail.poll()
            if not records:
                return
            answer = handle_asset_events.lambda_handler(
                {"Records": records}, LambdaContext(), deps=self.deps["evaluator"]
            )
            assert answer == {"batchItemFailures": []}


@pytest.fixture
def world(
    dynamodb_local: Any, moto_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    table, bucket = f"privilege-{uuid.uuid4().hex[:10]}", f"runs-{uuid.uuid4().hex[:10]}"
    dynamodb = client("dynamodb", dynamodb_local.endpoint)
    store = DynamoDbStore(dynamodb, table)
    store.create_table()
    s3 = client("s3", moto_server.endpoint)
    s3.create_bucket(Bucket=bucket)
    emr = client("emr-serverless", moto_server.endpoint)
    application = emr.create_application(name=table, releaseLabel="emr-7.9.0", type="SPARK")["applicationId"]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(load_catalog(str(ROOT / "pipelines")).to_document()))
    endpoints = {
        "dynamodb": dynamodb_local.endpoint,
        "s3": moto_server.endpoint,
        "emr-serverless": moto_server.endpoint,
    }
    deps, auditors = {}, {}
    for function, profile in PROFILES.items():
        watcher = function.removeprefix("ingest-") if function.startswith("ingest-") else None
        settings = Settings(
            table_name=table,
            catalog_path=str(path),
            region=LOCAL_REGION,
            runs_bucket=bucket,
            emr_application_id=application,
            emr_job_role_arn=f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/jobs",
            watcher_name=watcher,
        )
        deps[function] = Dependencies(
            settings, session=boto3.session.Session(**LOCAL_CLIENT_KWARGS), endpoints=endpoints
        )
        auditors[function] = Auditor(function, profile)
        deps[function].store._db.meta.events.register("before-parameter-build.dynamodb", auditors[function])
    tail = StreamTail(client("dynamodbstreams", dynamodb_local.endpoint), store.stream_arn())
    yield World(deps, auditors, s3, emr, application, tail)
    dynamodb.delete_table(TableName=table)


def s3_created(key: str, etag: str) -> dict[str, Any]:
    """An S3 ``Object Created`` EventBridge event of the inbox bucket."""
    return {
        "version": "0",
        "id": uuid.uuid4().hex,
        "detail-type": "Object Created",
        "source": "aws.s3",
        "time": "2026-11-21T08:00:00Z",
        "region": LOCAL_REGION,
        "resources": ["arn:aws:s3:::assetflow-demo-inbox"],
        "detail": {
            "bucket": {"name": "assetflow-demo-inbox"},
            "object": {"key": key, "size": 3, "etag": etag},
        },
    }


def order_placed(detail: dict[str, Any]) -> dict[str, Any]:
    """An EventBridge event that the shop-orders watcher's rule matches."""
    return {
        "version": "0",
        "id": f"ev-{json.dumps(detail, sort_keys=True)}",
        "detail-type": "Order Placed",
        "source": "assetflow.demo.shop",
        "time": "2026-11-21T08:00:00Z",
        "region": LOCAL_REGION,
        "resources": [],
        "detail": detail,
    }


def kinesis_event(values: list[Any], *, start: int) -> dict[str, Any]:
    records = [
        {
            "kinesis": {
                "partitionKey": "s-1",
                "sequenceNumber": str(49_000 + start + n),
                "data": base64.b64encode((v if isinstance(v, str) else json.dumps(v)).encode()).decode(),
                "approximateArrivalTimestamp": 1763719500.0,
            },
            "eventSource": "aws:kinesis",
            "eventID": f"shardId-000000000000:{49_000 + start + n}",
            "eventSourceARN": CLICKS_ARN,
            "awsRegion": LOCAL_REGION,
        }
        for n, v in enumerate(values)
    ]
    return {"Records": records}


def sqs_event(bodies: list[Any], *, start: int, arn: str = QUEUE_ARN) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m-{start + n}",
                "receiptHandle": "h",
                "body": body if isinstance(body, str) else json.dumps(body),
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1763719200123"},
                "messageAttributes": {},
                "md5OfBody": "0",
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": LOCAL_REGION,
            }
            for n, body in enumerate(bodies)
        ]
    }


def kafka_event(values: list[Any], *, start: int) -> dict[str, Any]:
    records = [
        {
            "topic": "sensor-readings",
            "partition": 0,
            "offset": start + n,
            "timestamp": 1763719500000 + start + n,
            "timestampType": "CREATE_TIME",
            "value": base64.b64encode((v if isinstance(v, str) else json.dumps(v)).encode()).decode(),
            "headers": [],
        }
        for n, v in enumerate(values)
    ]
    return {"eventSource": "aws:kafka", "eventSourceArn": MSK_ARN, "records": {"sensor-readings-0": records}}


def api(world: World, method: str, path: str, *, query: str = "", body: Any = None) -> int:
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"content-type": "application/json", "idempotency-key": f"k-{uuid.uuid4().hex}"},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "10.0.0.1"},
            "requestId": uuid.uuid4().hex,
            "authorizer": {"iam": {"userArn": f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:user/ops"}},
            "routeKey": "$default",
            "stage": "$default",
        },
        "isBase64Encoded": False,
        "body": json.dumps(body) if body is not None else None,
    }
    response = handle_api.lambda_handler(event, LambdaContext(), deps=world.deps["api"])  # type: ignore[arg-type]
    return int(response["statusCode"])


def finish(world: World, pipeline: str, *, metadata: dict[str, Any] | None = None) -> None:
    """End a pipeline's submitted runs with SUCCESS, their jobs writing outlet metadata as the helper does."""
    for row in world.deps["api"].store.list_runs(pipeline).items:
        if row["state"] in ("success", "failed") or not row["job_run_id"]:
            continue
        job = world.emr.get_job_run(applicationId=world.application, jobRunId=row["job_run_id"])["jobRun"]
        with assetflow_job.run(
            job["jobDriver"]["sparkSubmit"]["entryPointArguments"], s3_client=world.s3
        ) as ctx:
            for uri, extra in (metadata or {}).items():
                if uri.startswith("check:"):  # a failed blocking check holds the outlet's event
                    ctx.outlet_events[uri.removeprefix("check:")].check(
                        "not_empty", passed=False, blocking=True
                    )
                elif uri.startswith("alias:"):
                    alias, asset = uri.removeprefix("alias:").split("=", 1)
                    ctx.outlet_events[assetflow_job.AliasRef(alias)].add(asset, extra=extra)
                else:
                    ctx.outlet_events[uri].extra = extra
        event = {
            "version": "0",
            "id": uuid.uuid4().hex,
            "detail-type": "EMR Serverless Job Run State Change",
            "source": "aws.emr-serverless",
            "account": LOCAL_ACCOUNT_ID,
            "time": "2026-11-21T08:05:00Z",
            "region": LOCAL_REGION,
            "resources": [],
            "detail": {"jobRunId": row["job_run_id"], "applicationId": world.application, "state": "SUCCESS"},
        }
        for _ in range(2):  # EventBridge delivers at least once
            handle_job_state.lambda_handler(event, LambdaContext(), deps=world.deps["run-state"])


def test_every_functions_requests_are_within_its_table_grants(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"delivery_id": "d-1", "supplier": "acme-foods", "files": ["s3://landing/a.csv"]}
    reading = {"sensor_id": "s-1", "reading_time": "2026-11-21T10:00:00Z", "temperature_c": 41.5}
    # Ingest: good, bad and redelivered messages and records
    for _ in range(2):
        handle_sqs_messages.lambda_handler(
            sqs_event([good, {**good, "delivery_id": "d-2"}, "not json", {"delivery_id": 7}], start=0),
            LambdaContext(),
            deps=world.deps["ingest-deliveries"],
        )
        handle_kafka_records.lambda_handler(
            kafka_event([reading, {**reading, "sensor_id": "x-9"}, "{"], start=0),
            LambdaContext(),
            deps=world.deps["ingest-sensor-readings"],
        )
    # The S3, EventBridge and Kinesis watchers: good, filtered, malformed and redelivered messages
    inbox = [s3_created("incoming/a.csv", "e-1"), s3_created("elsewhere/b.csv", "e-2"), "not an event"]
    orders = [order_placed({"order_id": "o-1", "amount": 2.5}), order_placed({"order_id": "o-2"})]
    for _ in range(2):
        handle_sqs_messages.lambda_handler(
            sqs_event(inbox, start=100, arn=INBOX_QUEUE_ARN),
            LambdaContext(),
            deps=world.deps["ingest-inbox-files"],
        )
        handle_sqs_messages.lambda_handler(
            sqs_event(orders, start=200, arn=ORDERS_QUEUE_ARN),
            LambdaContext(),
            deps=world.deps["ingest-shop-orders"],
        )
        handle_kinesis_records.lambda_handler(
            kinesis_event([{"page": "/a"}, {"page": "no-slash"}, "{"], start=0),
            LambdaContext(),
            deps=world.deps["ingest-web-clicks"],
        )
    # The API: an event, every view, a queue cleared
    assert api(world, "POST", "/assets/events", body={"uri": "x-ops://dashboard/refresh"}) == 201
    # The evaluator: runs of batch=False, batch, partitioned and alias pipelines
    world.evaluate()
    # Run states: successes with outlets (and alias additions), releasing held runs; outlets evaluated
    finish(world, "deliveries_etl", metadata={"s3://assetflow-demo/curated/deliveries": {"row_count": 8}})
    world.evaluate()
    finish(world, "sensor_check", metadata={"alias:sensor-alerts=x-iot://alerts/s-1": {"max": 41.5}})
    finish(
        world,
        "partner_exports",
        metadata={"alias:partner-exports=s3://assetflow-demo/exports/acme-foods": {}},
    )
    world.evaluate()
    for pipeline in ("sensor_daily_rollup", "ops_dashboard"):
        finish(world, pipeline)
    finish(world, "partner_feed_audit", metadata={f"check:{AUDIT}": {}})
    world.evaluate()
    # An operator releases the held event through the API
    (held,) = world.deps["api"].store.list_events(AUDIT).items
    assert api(world, "POST", f"/assets/events/{held['id']}/release") == 200
    world.evaluate()
    # A tick, twice
    for _ in range(2):
        handle_schedule_tick.lambda_handler(
            {"pipeline": "daily_report", "scheduled_time": "2026-11-22T06:00:00Z"},
            LambdaContext(),
            deps=world.deps["schedule-tick"],
        )
    # A deadline check of an expected asset two days on (read its events, record the miss once), twice
    checks = world.deps["schedule-tick"].expectations
    checks.clock = lambda: datetime.now(UTC) + timedelta(days=2)
    for _ in range(2):
        handle_schedule_tick.lambda_handler(
            {"expectation": DELIVERIES, "deadline": "2026-11-22T08:00:00Z"},
            LambdaContext(),
            deps=world.deps["schedule-tick"],
        )
    # The sweep, with a run whose state change was lost and a queue left waiting
    world.deps["reconcile"].reconciler.submit_grace = timedelta(0)
    world.deps["reconcile"].reconciler.state_change_grace = timedelta(0)
    handle_reconcile.lambda_handler({}, LambdaContext(), deps=world.deps["reconcile"])
    # Every API view, and a queue cleared
    for method, path, query in (
        ("GET", "/assets", ""),
        ("GET", "/assets/events", f"uri={DELIVERIES}"),
        ("GET", "/pipelines/ops_dashboard/queue", ""),
        ("GET", "/pipelines/deliveries_etl/runs", ""),
        ("GET", "/quarantine", ""),
        ("GET", "/runs", ""),
        ("GET", "/catalog", ""),
        ("DELETE", "/pipelines/ops_dashboard/queue", ""),
    ):
        assert api(world, method, path, query=query) == 200, (method, path)
    run_id = world.deps["api"].store.list_runs("deliveries_etl").items[0]["run_id"]
    assert api(world, "GET", f"/runs/{run_id}") == 200
    # The run actions: a manual run (held, admitted, submitted), cancelled with its events re-queued
    assert api(world, "POST", "/pipelines/deliveries_etl/runs", body={}) == 201
    assert api(world, "POST", f"/runs/{run_id}/cancel", body={"requeue": True}) in (200, 409)

    # Then no function made a request its grants would refuse, and each made some
    refused = [r for a in world.auditors.values() for r in a.refused]
    assert refused == [], "\n".join(refused)
    assert all(a.used for a in world.auditors.values()), {f: bool(a.used) for f, a in world.auditors.items()}
    deletes = {f for f, a in world.auditors.items() if any(k.startswith("DeleteItem") for k in a.used)}
    assert not any(f.startswith("ingest-") for f in deletes)
    with capsys.disabled():
        print("\ntable requests by function (action partition-prefix: count):")
        for function, auditor in world.auditors.items():
            print(f"  {function}: " + ", ".join(f"{k} {v}" for k, v in sorted(auditor.used.items())))


@pytest.mark.parametrize(
    ("function", "action", "partition"),
    [
        ("ingest-deliveries", "dynamodb:DeleteItem", "QUEUE#deliveries_etl#"),
        ("ingest-deliveries", "dynamodb:PutItem", "ASSET#x-iot://sensors/readings"),
        ("ingest-deliveries", "dynamodb:PutItem", "DEDUPE#sqs:arn:aws:sqs:us-east-1:123456789012:other:m-1"),
        ("ingest-deliveries", "dynamodb:UpdateItem", "RUN#run-1"),
        ("ingest-sensor-readings", "dynamodb:PutItem", "PIPELINE#sensor_check"),
        ("evaluator", "dynamodb:DeleteItem", "RUN#run-1"),
        ("evaluator", "dynamodb:PutItem", "QUARANTINE"),
        ("run-state", "dynamodb:PutItem", "DEDUPE#api#arn:aws:iam::1:user/x#k"),
        ("api", "dynamodb:DeleteItem", "ASSET#s3://a/b"),
        ("api", "dynamodb:PutItem", "DEDUPE#sqs:arn:aws:sqs:us-east-1:123456789012:deliveries:m-1"),
    ],
)
def test_the_profiles_refuse_what_a_function_must_not_do(function: str, action: str, partition: str) -> None:
    assert not PROFILES[function].allows(action, partition)


def test_uri_patterns_match_only_their_uri() -> None:
    access = table_access.ingest("s3://b/k?x=*", ["kafka:"])
    assert access.allows("dynamodb:PutItem", "ASSET#s3://b/k?x=*")
    assert not access.allows("dynamodb:PutItem", "ASSET#s3://b/kax=other")
    assert not access.allows("dynamodb:PutItem", "ASSET#s3://b/k?x=anything")
