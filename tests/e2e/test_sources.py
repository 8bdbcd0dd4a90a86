"""The S3, EventBridge and Kinesis sources end to end on the local runtime, through the services' own APIs.

A user puts an object into the runtime's S3 endpoint, puts an event on its EventBridge endpoint, puts a
record on its Kinesis endpoint (boto3, as against AWS); moto's S3 sends the bucket's events to EventBridge,
the watchers' rules put them on their queues, the pollers drive the same ingest handlers as Lambda would,
and the example pipeline ``inbox_digest`` runs once files, orders and clicks have all arrived.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow_dev.runtime import REPO_ROOT, LocalRuntime, RuntimeOptions

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BUCKET = "assetflow-demo-inbox"
LANDED = f"s3://{BUCKET}/incoming"
AUDIT = "x-audit://inbox/intake"
ORDERS = "x-shop://orders/placed"
CLICKS = "x-web://clickstream"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    work = tmp_path_factory.mktemp("sources")
    options = RuntimeOptions(
        pipelines=str(REPO_ROOT / "pipelines"),
        work_dir=work,
        launcher="emr-api",
        schedules=False,
        function_log=work / "logs" / "functions.log",
    )
    with LocalRuntime(options) as started:
        yield started


@pytest.fixture(scope="module")
def store(runtime: LocalRuntime) -> DynamoDbStore:
    assert runtime.resources is not None
    return DynamoDbStore(runtime.client("dynamodb"), runtime.resources.table)


def _eventually(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.2)


def _events(store: DynamoDbStore, uri: str, match: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    return [e for e in store.list_events(uri, limit=200).items if match(e.get("extra") or {})]


def _quarantined(store: DynamoDbStore, marker: str) -> list[dict[str, Any]]:
    return [q for q in store.list_quarantine(limit=200).items if marker in str(q.get("body"))]


def test_the_runtime_creates_the_watched_bucket_rules_and_stream(runtime: LocalRuntime) -> None:
    config = runtime.dev_config()
    assert BUCKET in config["watched_buckets"]
    assert set(config["rules"]) == {"inbox-files", "shop-orders"}
    assert config["streams"]["web-clicks"]["stream"] == "assetflow-demo-clicks"
    assert config["env"]["AWS_ENDPOINT_URL_KINESIS"] == config["endpoints"]["kinesis"]
    # moto's GetBucketNotificationConfiguration leaves EventBridgeConfiguration out: the next test shows it is on.


def test_an_object_put_in_s3_becomes_one_event_of_each_asset_it_feeds(
    runtime: LocalRuntime, store: DynamoDbStore
) -> None:
    s3 = runtime.client("s3")
    folder = f"incoming/{uuid.uuid4().hex[:8]} x"
    key = f"{folder}/orders.csv"

    # When: a CSV file, its _SUCCESS marker, and a file outside the prefix arrive
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"sku,quantity\nsku-1,2\n")
    s3.put_object(Bucket=BUCKET, Key=f"{folder}/_SUCCESS", Body=b"")
    s3.put_object(Bucket=BUCKET, Key=f"elsewhere/{folder}.csv", Body=b"x")

    # Then: one event of the landed files and one of the audit trail, with the object's description
    (event,) = _eventually(lambda: _events(store, LANDED, lambda x: x.get("key") == key), what="the S3 event")
    assert event["extra"]["bucket"] == BUCKET
    assert event["extra"]["size"] == len(b"sku,quantity\nsku-1,2\n")
    assert len(event["extra"]["etag"]) == 32
    assert "version_id" not in event["extra"]  # the bucket keeps no versions
    assert event["source"]["kind"] == "s3" and event["source"]["watcher"] == "inbox-files"
    (audit,) = _eventually(
        lambda: _events(store, AUDIT, lambda x: x.get("key") == key), what="the audit event"
    )
    assert audit["id"] != event["id"]
    # Nothing for the marker or the file outside the prefix: not an event, not a quarantine.
    time.sleep(1.0)
    assert not _events(store, LANDED, lambda x: str(x.get("key", "")).startswith(f"elsewhere/{folder}"))
    assert not _events(store, LANDED, lambda x: x.get("key") == f"{folder}/_SUCCESS")
    assert not _quarantined(store, folder)

    # When: the file is written again with other content (a new object version), and the event comes again
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"sku,quantity\nsku-1,3\n")
    _eventually(lambda: len(_events(store, LANDED, lambda x: x.get("key") == key)) == 2, what="the rewrite")


def test_a_versioned_bucket_gives_the_version_id(runtime: LocalRuntime, store: DynamoDbStore) -> None:
    s3 = runtime.client("s3")
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    try:
        key = f"incoming/{uuid.uuid4().hex[:8]}/v.csv"
        version = s3.put_object(Bucket=BUCKET, Key=key, Body=b"a\n")["VersionId"]
        (event,) = _eventually(
            lambda: _events(store, LANDED, lambda x: x.get("key") == key), what="the event"
        )
        assert event["extra"]["version_id"] == version
    finally:
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Suspended"})


def test_a_matching_eventbridge_event_becomes_an_event_and_a_bad_one_is_quarantined(
    runtime: LocalRuntime, store: DynamoDbStore
) -> None:
    events = runtime.client("events")
    order_id = f"o-{uuid.uuid4().hex[:8]}"
    entries = [
        {"Source": "assetflow.demo.shop", "DetailType": "Order Placed", "Detail": json.dumps(detail)}
        for detail in ({"order_id": order_id, "amount": 9.5}, {"order_id": f"bad-{order_id}"})
    ]
    entries.append(
        {"Source": "someone.else", "DetailType": "Order Placed", "Detail": json.dumps({"x": order_id})}
    )
    assert events.put_events(Entries=entries)["FailedEntryCount"] == 0

    (event,) = _eventually(
        lambda: _events(store, ORDERS, lambda x: (x.get("detail") or {}).get("order_id") == order_id),
        what="the EventBridge event",
    )
    assert event["extra"]["detail-type"] == "Order Placed"
    assert event["extra"]["source"] == "assetflow.demo.shop"
    assert event["source"]["kind"] == "eventbridge"
    (bad,) = _eventually(lambda: _quarantined(store, f"bad-{order_id}"), what="the quarantined event")
    assert bad["watcher"] == "shop-orders" and "amount" in bad["reason"]
    # The other source's event matches no rule: it never reaches the watcher.
    assert not _quarantined(store, f'"x": "{order_id}"')


def test_kinesis_records_become_events_and_a_filtered_one_is_quarantined(
    runtime: LocalRuntime, store: DynamoDbStore
) -> None:
    kinesis = runtime.client("kinesis")
    session = uuid.uuid4().hex[:8]
    for page in ("/a", "/b", "no-slash"):
        body = json.dumps({"page": page, "session": session}).encode()
        kinesis.put_record(StreamName="assetflow-demo-clicks", Data=body, PartitionKey=session)

    def clicks() -> list[dict[str, Any]]:
        return _events(store, CLICKS, lambda x: (x.get("payload") or {}).get("session") == session)

    found = _eventually(lambda: len(clicks()) == 2 and clicks(), what="the Kinesis events")
    assert sorted(e["extra"]["payload"]["page"] for e in found) == ["/a", "/b"]
    assert {e["extra"]["message"]["stream"] for e in found} == {"assetflow-demo-clicks"}
    (bad,) = _eventually(lambda: _quarantined(store, session), what="the filtered record")
    assert bad["watcher"] == "web-clicks" and "filter" in bad["reason"]


def test_the_inbox_digest_runs_once_files_orders_and_clicks_arrived(
    runtime: LocalRuntime, store: DynamoDbStore
) -> None:
    # The tests above fed all three sources: the pipeline on landed_files & shop_orders & web_clicks runs.
    def runs() -> list[dict[str, Any]]:
        return [r for r in store.list_runs("inbox_digest", limit=20).items if r["state"] == "success"]

    run = _eventually(runs, what="an inbox_digest run")[0]
    triggering = store.get_run(run["run_id"]).to_json()["triggering_asset_events"]
    assert set(triggering) == {LANDED, ORDERS, CLICKS}


def test_an_s3_event_stays_one_event_when_eventbridge_delivers_it_twice(
    runtime: LocalRuntime, store: DynamoDbStore, tmp_path: Path
) -> None:
    # EventBridge delivers at least once: a second copy of an S3 event on the watcher's queue is the same event.
    assert runtime.resources is not None
    key = f"incoming/{uuid.uuid4().hex[:8]}/twice.csv"
    runtime.client("s3").put_object(Bucket=BUCKET, Key=key, Body=b"1\n")
    (event,) = _eventually(lambda: _events(store, LANDED, lambda x: x.get("key") == key), what="the event")
    copy = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Object Created",
        "source": "aws.s3",
        "time": "2026-11-26T00:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{BUCKET}"],
        "detail": {
            "bucket": {"name": BUCKET},
            "object": {
                "key": key,
                "size": event["extra"]["size"],
                "etag": event["extra"]["etag"],
                "sequencer": event["extra"]["sequencer"],
            },
        },
    }
    queue = runtime.resources.queues["inbox-files"].url
    runtime.client("sqs").send_message(QueueUrl=queue, MessageBody=json.dumps(copy))
    time.sleep(2.0)
    assert len(_events(store, LANDED, lambda x: x.get("key") == key)) == 1


def test_a_projects_demo_messages_reach_s3_eventbridge_and_kinesis_watchers(
    runtime: LocalRuntime, store: DynamoDbStore
) -> None:
    from assetflow_dev.demo import put_to_source

    marker = uuid.uuid4().hex[:8]
    kinds = [
        put_to_source(runtime, "inbox-files", "a,b\n", 900),
        put_to_source(runtime, "shop-orders", json.dumps({"order_id": marker, "amount": 1}), 901),
        put_to_source(runtime, "web-clicks", json.dumps({"page": f"/{marker}"}), 902),
    ]
    assert kinds == ["s3", "eventbridge", "kinesis"]
    _eventually(
        lambda: _events(store, LANDED, lambda x: x.get("key") == "incoming/demo-900.csv"), what="file"
    )
    _eventually(
        lambda: _events(store, ORDERS, lambda x: (x.get("detail") or {}).get("order_id") == marker),
        what="order",
    )
    _eventually(
        lambda: _events(store, CLICKS, lambda x: (x.get("payload") or {}).get("page") == f"/{marker}"),
        what="click",
    )


def test_a_created_object_is_in_its_buckets_data_folder_before_its_event(
    runtime: LocalRuntime, store: DynamoDbStore
) -> None:
    # Locally s3:// data paths are folders: the run an object triggers finds the file where its path says.
    assert runtime.resources is not None
    key = f"incoming/{uuid.uuid4().hex[:8]}/data.csv"
    runtime.client("s3").put_object(Bucket=BUCKET, Key=key, Body=b"sku,quantity\nsku-9,9\n")
    _eventually(lambda: _events(store, LANDED, lambda x: x.get("key") == key), what="the event")
    local = Path(runtime.resources.path_map[f"s3://{BUCKET}"]) / key
    assert local.read_bytes() == b"sku,quantity\nsku-9,9\n"
