"""S3 prefix reconciliation on the real parts: moto's S3, EventBridge and SQS, DynamoDB Local, the SQS ingest.

Objects are written to a watched bucket whose EventBridge rule fills the watcher's queue (as ``assetflow dev
up`` provisions it); ingest records some of the delivered events, and reconciliation lists the prefix, finds
exactly the objects no event records, replays them through the same ingest, and then finds none.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from assetflow import Asset, AssetWatcher, Catalog, S3ObjectCreated
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.functions import handle_sqs_messages
from assetflow.usecases.sources import SourceReconciler
from assetflow_dev import DynamoDbLocal, MotoServer, client
from assetflow_dev.pollers import sqs_record
from assetflow_dev.resources import LocalResources, ResourceNames, provision
from assetflow_dev.sources import S3_REPLAY_NAME, S3PrefixProbe
from tests.integration.test_reconcile_sources import Invoker, deps_for

pytestmark = pytest.mark.integration

LANDING = "x-test://landing"


@pytest.fixture
def table(dynamodb_client: Any) -> Iterator[str]:
    name = f"s3rec-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(dynamodb_client, name).create_table()
    yield name
    dynamodb_client.delete_table(TableName=name)


def _provision(asset: Asset, moto: MotoServer, dynamodb: DynamoDbLocal, tmp_path: Path) -> LocalResources:
    return provision(
        Catalog.build([asset]),
        dynamodb_endpoint=dynamodb.endpoint,
        moto_endpoint=moto.endpoint,
        kafka=None,
        work_dir=tmp_path,
        names=ResourceNames(prefix=f"af-{uuid.uuid4().hex[:8]}"),
    )


def _delivered(sqs: Any, url: str, n: int) -> dict[str, dict[str, Any]]:
    """The ``n`` messages EventBridge put on the watcher's queue, by object key (left in flight)."""
    got: dict[str, dict[str, Any]] = {}
    for _ in range(10):
        for m in sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["All"]
        ).get("Messages", []):
            got[json.loads(m["Body"])["detail"]["object"]["key"]] = m
        if len(got) >= n:
            break
    assert len(got) == n, sorted(got)
    return got


def _keys(deps: Any) -> list[str]:
    return sorted(e["extra"]["key"] for e in deps.store.list_events(LANDING, limit=1000).items)


def test_objects_without_an_event_are_found_replayed_once_and_then_none_are_missing(
    moto_server: MotoServer, dynamodb_local: DynamoDbLocal, table: str, tmp_path: Path
) -> None:
    bucket = f"landing-{uuid.uuid4().hex[:8]}"
    asset = Asset(LANDING, watchers=[AssetWatcher("landing", S3ObjectCreated(bucket, "in/", ".csv"))])
    resources = _provision(asset, moto_server, dynamodb_local, tmp_path)
    queue = resources.queues["landing"]
    s3, sqs = client("s3", moto_server.endpoint), client("sqs", moto_server.endpoint)
    deps = deps_for(table, tmp_path, dynamodb_local, "landing", asset)
    invoke = Invoker(handle_sqs_messages.lambda_handler, deps)
    # Given four watched objects (and two the watcher does not cover), of which ingest recorded two
    for key in ("in/a.csv", "in/b.csv", "in/c.csv", "in/d.csv", "in/e.json", "out/f.csv"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    delivered = _delivered(sqs, queue.url, 4)
    records = [sqs_record(delivered[k], queue_arn=queue.arn) for k in ("in/a.csv", "in/c.csv")]
    invoke("ingest-landing", {"Records": records})
    assert _keys(deps) == ["in/a.csv", "in/c.csv"]
    probe = S3PrefixProbe(
        watcher="landing",
        asset=LANDING,
        source=S3ObjectCreated(bucket, "in/", ".csv"),
        s3=s3,
        events=deps.store,
        function="ingest-landing",
        invoke=invoke,
        queue_arn=queue.arn,
        settle=timedelta(0),
    )
    reconciler = SourceReconciler(watermarks=deps.store, probes=[probe])

    # When reconciled dry: exactly the two unrecorded objects are listed, nothing is replayed
    dry = reconciler.reconcile(dry_run=True)
    assert [(f["kind"], f["key"], f["count"]) for f in dry.sources[0].findings] == [
        ("s3-object", "in/b.csv", 1),
        ("s3-object", "in/d.csv", 1),
    ]
    assert (dry.found, dry.replayed, invoke.calls) == (2, 0, 1)
    assert _keys(deps) == ["in/a.csv", "in/c.csv"]

    # When reconciled: both go through the watcher's ingest as Object Created events, once
    done = reconciler.reconcile()
    assert (done.found, done.replayed, done.errors) == (2, 2, [])
    assert _keys(deps) == ["in/a.csv", "in/b.csv", "in/c.csv", "in/d.csv"]
    replayed = [
        e for e in deps.store.list_events(LANDING).items if e["extra"]["key"] in ("in/b.csv", "in/d.csv")
    ]
    assert {e["extra"]["event"]["replay-name"] for e in replayed} == {S3_REPLAY_NAME}
    assert {e["extra"]["etag"] for e in replayed} == {
        s3.head_object(Bucket=bucket, Key=k)["ETag"].strip('"') for k in ("in/b.csv", "in/d.csv")
    }
    assert reconciler.reconcile().found == 0
    # A second replay of the same object (two reconciliations racing) records nothing twice
    probe.replay(done.sources[0].findings[0])
    assert _keys(deps) == ["in/a.csv", "in/b.csv", "in/c.csv", "in/d.csv"]
    # A newer object is left to its own event while it may still be on its way
    s3.put_object(Bucket=bucket, Key="in/g.csv", Body=b"g")
    probe.settle = timedelta(minutes=5)
    assert reconciler.reconcile(dry_run=True).found == 0


def test_a_versioned_bucket_is_listed_by_version_and_a_late_real_event_is_not_recorded_twice(
    moto_server: MotoServer, dynamodb_local: DynamoDbLocal, table: str, tmp_path: Path
) -> None:
    bucket = f"versioned-{uuid.uuid4().hex[:8]}"
    asset = Asset(LANDING, watchers=[AssetWatcher("landing", S3ObjectCreated(bucket, prefix="in/"))])
    resources = _provision(asset, moto_server, dynamodb_local, tmp_path)
    queue = resources.queues["landing"]
    s3, sqs = client("s3", moto_server.endpoint), client("sqs", moto_server.endpoint)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    deps = deps_for(table, tmp_path, dynamodb_local, "landing", asset)
    invoke = Invoker(handle_sqs_messages.lambda_handler, deps)
    # Given two versions of one key and one other object, of which ingest recorded the first version only
    first = s3.put_object(Bucket=bucket, Key="in/a.csv", Body=b"1")["VersionId"]
    delivered = _delivered(sqs, queue.url, 1)
    invoke("ingest-landing", {"Records": [sqs_record(delivered["in/a.csv"], queue_arn=queue.arn)]})
    second = s3.put_object(Bucket=bucket, Key="in/a.csv", Body=b"2")["VersionId"]
    s3.put_object(Bucket=bucket, Key="in/b.csv", Body=b"3")
    late = _delivered(sqs, queue.url, 2)
    probe = S3PrefixProbe(
        watcher="landing",
        asset=LANDING,
        source=S3ObjectCreated(bucket, prefix="in/"),
        s3=s3,
        events=deps.store,
        function="ingest-landing",
        invoke=invoke,
        queue_arn=queue.arn,
        settle=timedelta(0),
    )
    reconciler = SourceReconciler(watermarks=deps.store, probes=[probe])

    # When reconciled dry: the second version and the other object, by version id
    dry = reconciler.reconcile(dry_run=True)
    found = {(f["key"], f["version_id"]) for f in dry.sources[0].findings}
    assert len(found) == 2 and ("in/a.csv", second) in found and ("in/a.csv", first) not in found
    assert dry.replayed == 0 and len(deps.store.list_events(LANDING).items) == 1

    # When reconciled, and then the real events arrive late: each version is one event
    assert reconciler.reconcile().replayed == 2
    invoke("ingest-landing", {"Records": [sqs_record(m, queue_arn=queue.arn) for m in late.values()]})
    versions = sorted(e["extra"]["version_id"] for e in deps.store.list_events(LANDING).items)
    assert len(versions) == 3 and {first, second} <= set(versions)
    assert reconciler.reconcile().found == 0
