"""The Kinesis poller and the bucket-notification function against moto's Kinesis and S3."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from assetflow.functions.handle_bucket_notifications import enable_eventbridge
from assetflow_dev import MotoServer, client
from assetflow_dev.moto_server import KINESIS_PUTS_PATH
from assetflow_dev.pollers import KinesisPoller, Poller
from tests.integration.test_pollers import Recorder, eventually, start


@pytest.fixture
def kinesis_client(moto_server: MotoServer) -> Any:
    return client("kinesis", moto_server.endpoint)


@pytest.fixture
def stream(kinesis_client: Any) -> Iterator[tuple[str, str]]:
    name = f"clicks-{uuid.uuid4().hex[:8]}"
    kinesis_client.create_stream(StreamName=name, ShardCount=1)
    arn = kinesis_client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    yield name, arn
    kinesis_client.delete_stream(StreamName=name)


@pytest.fixture
def pollers() -> Iterator[list[Poller]]:
    started: list[Poller] = []
    yield started
    for poller in started:
        poller.stop(timeout=15)
        assert not poller.running


def _clicks_poller(kinesis: Any, arn: str, handler: Any, **options: Any) -> KinesisPoller:
    """A poller of the test stream from its start, as the ``clicks`` watcher's mapping reads it."""
    settings: dict[str, Any] = {
        "function_name": "ingest-clicks",
        "starting_position": "TRIM_HORIZON",
        "idle_poll_interval": 0.2,
    } | options
    return KinesisPoller(name="clicks", kinesis=kinesis, stream_arn=arn, handler=handler, **settings)


def _put(kinesis_client: Any, name: str, *values: str) -> None:
    for value in values:
        kinesis_client.put_record(StreamName=name, Data=json.dumps({"v": value}).encode(), PartitionKey="p")


def _value(record: dict[str, Any]) -> str:
    import base64

    return str(json.loads(base64.b64decode(record["kinesis"]["data"]))["v"])


def test_records_arrive_as_lambdas_kinesis_event_and_a_reported_failure_is_retried_from_it(
    kinesis_client: Any, stream: tuple[str, str], pollers: list[Poller]
) -> None:
    name, arn = stream
    _put(kinesis_client, name, "a", "b", "c", "d")
    failures_left = {"c": 1}

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        for record in event["Records"]:
            value = _value(record)
            if failures_left.get(value):
                failures_left[value] -= 1
                return {"batchItemFailures": [{"itemIdentifier": record["kinesis"]["sequenceNumber"]}]}
        return {"batchItemFailures": []}

    handler = Recorder(handle)
    poller = start(
        pollers,
        _clicks_poller(kinesis_client, arn, handler),
    )
    eventually(lambda: len(handler.events) >= 2 and poller.idle, what="the retry")
    first, second = handler.events[:2]
    record = first["Records"][0]
    assert record["eventSource"] == "aws:kinesis" and record["eventSourceARN"] == arn
    assert record["eventID"] == f"shardId-000000000000:{record['kinesis']['sequenceNumber']}"
    assert record["kinesis"]["partitionKey"] == "p"
    assert [_value(r) for r in first["Records"]] == ["a", "b", "c", "d"]
    # Lambda checkpoints before the reported record and retries from it.
    assert [_value(r) for r in second["Records"]] == ["c", "d"]

    _put(kinesis_client, name, "e")
    eventually(lambda: any(_value(r) == "e" for e in handler.events for r in e["Records"]), what="the next")
    delivered = Counter(_value(r) for e in handler.events for r in e["Records"])
    assert delivered == {"a": 1, "b": 1, "c": 2, "d": 2, "e": 1}


class _CountingKinesis:
    """A Kinesis client that counts GetRecords."""

    def __init__(self, kinesis: Any) -> None:
        self.kinesis, self.reads = kinesis, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kinesis, name)

    def get_records(self, **kwargs: Any) -> Any:
        self.reads += 1
        return self.kinesis.get_records(**kwargs)


def test_an_idle_poller_waits_for_a_put_and_reads_at_lambdas_once_a_second_tick(
    kinesis_client: Any, stream: tuple[str, str], pollers: list[Poller], moto_server: MotoServer
) -> None:
    # Given a poller of an idle stream that may wait for puts to moto's Kinesis
    name, arn = stream
    counting = _CountingKinesis(kinesis_client)
    handler = Recorder(lambda event, context: {"batchItemFailures": []})
    poller = start(
        pollers,
        _clicks_poller(
            counting,
            arn,
            handler,
            idle_poll_interval=1.0,
            puts_url=f"{moto_server.endpoint}{KINESIS_PUTS_PATH}",
        ),
    )
    eventually(lambda: poller.ready, what="the poller")
    time.sleep(3.5)  # past its back-off (reads 0.05 s to 1 s apart) and first idle pause: parked in the wait

    # When nothing is put for 3 s, then a record is
    before = counting.reads
    time.sleep(3.0)
    idle_reads = counting.reads - before
    sent = time.monotonic()
    _put(kinesis_client, name, "a")
    eventually(lambda: handler.events, what="the record")
    latency = time.monotonic() - sent

    # Then the idle shard was not read (Lambda would have read it about 3 times), and the record came within the
    # second that Lambda's idle poll would take
    assert idle_reads == 0
    assert latency < 1.5
    assert [_value(r) for e in handler.events for r in e["Records"]] == ["a"]
    # and a poller parked in the wait stops at once
    began = time.monotonic()
    poller.stop(timeout=15)
    assert time.monotonic() - began < 2.0


def test_a_failing_batch_is_bisected_then_kept_whole_by_the_on_failure_destination(
    kinesis_client: Any, stream: tuple[str, str], pollers: list[Poller]
) -> None:
    name, arn = stream
    _put(kinesis_client, name, "ok-1", "poison", "ok-2", "ok-3")
    kept: list[dict[str, Any]] = []

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if any(_value(r) == "poison" for r in event["Records"]):
            raise RuntimeError("cannot store this batch")
        return {"batchItemFailures": []}

    handler = Recorder(handle)
    poller = start(
        pollers,
        _clicks_poller(kinesis_client, arn, handler, retry_attempts=1, on_failure=kept.append),
    )
    eventually(lambda: kept and poller.idle, what="the poison record given up")
    (record,) = kept
    info = record["KinesisBatchInfo"]
    assert info["batchSize"] == 1 and info["streamArn"] == arn and info["shardId"] == "shardId-000000000000"
    assert [_value(r) for r in json.loads(record["payload"])["Records"]] == ["poison"]
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    # Bisection isolated the poison record: the others were stored, each once.
    succeeded = Counter(
        _value(r)
        for e in handler.events
        if not any(_value(r) == "poison" for r in e["Records"])
        for r in e["Records"]
    )
    assert succeeded == {"ok-1": 1, "ok-2": 1, "ok-3": 1}
    assert poller.stats.dead_lettered == 1


def test_eventbridge_notifications_are_turned_on_once_keeping_the_others(moto_server: MotoServer) -> None:
    s3 = client("s3", moto_server.endpoint)
    sqs = client("sqs", moto_server.endpoint)
    bucket = f"watched-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    url = sqs.create_queue(QueueName=bucket)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    assert enable_eventbridge(s3, bucket) is True
    configured = s3.get_bucket_notification_configuration(Bucket=bucket)
    assert configured["QueueConfigurations"][0]["QueueArn"] == queue_arn


def test_a_given_up_kinesis_batch_lands_in_the_failures_bucket_under_its_shard(
    moto_server: MotoServer, kinesis_client: Any, stream: tuple[str, str], pollers: list[Poller]
) -> None:
    from assetflow_dev.failures import S3FailureSink

    name, arn = stream
    s3 = client("s3", moto_server.endpoint)
    bucket = f"failures-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    _put(kinesis_client, name, "poison")

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("cannot store this batch")

    poller = start(
        pollers,
        _clicks_poller(
            kinesis_client,
            arn,
            Recorder(handle),
            function_name="assetflow-local-ingest-clicks",
            retry_attempts=0,
            on_failure=S3FailureSink(s3, bucket, "ingest-clicks"),
        ),
    )
    eventually(lambda: poller.stats.dead_lettered == 1, what="the batch given up")
    (item,) = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert item["Key"].split("/")[3] == "shardId-000000000000"  # aws/lambda/<mapping>/<shard>/...
    kept = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
    assert kept["KinesisBatchInfo"]["streamArn"] == arn
    assert kept["requestContext"]["functionArn"].endswith(":function:assetflow-local-ingest-clicks")


def test_a_pattern_on_a_bus_of_its_own_and_a_second_watcher_of_one_bucket(
    moto_server: MotoServer, provisioned: Callable[..., Any]
) -> None:
    from assetflow import Asset, AssetWatcher, Catalog, EventBridgePattern, S3ObjectCreated

    bucket = f"shared-{uuid.uuid4().hex[:8]}"
    catalog = Catalog.build(
        [
            Asset(
                "x-a://orders",
                watchers=[AssetWatcher("orders", EventBridgePattern({"source": ["shop"]}, bus="shop-bus"))],
            ),
            Asset("x-a://csv", watchers=[AssetWatcher("csv", S3ObjectCreated(bucket, suffix=".csv"))]),
            Asset("x-a://raw", watchers=[AssetWatcher("raw", S3ObjectCreated(bucket, prefix="raw/"))]),
        ]
    )
    resources = provisioned(catalog)
    assert resources.rules["orders"].bus == "shop-bus"
    events, sqs, s3 = (client(s, moto_server.endpoint) for s in ("events", "sqs", "s3"))
    events.put_events(
        Entries=[{"Source": "shop", "DetailType": "x", "Detail": "{}", "EventBusName": "shop-bus"}]
    )
    events.put_events(
        Entries=[{"Source": "shop", "DetailType": "x", "Detail": "{}"}]
    )  # the default bus: not watched
    s3.put_object(Bucket=bucket, Key="raw/a.csv", Body=b"1")  # both watchers
    s3.put_object(Bucket=bucket, Key="raw/b.json", Body=b"1")  # raw only
    s3.put_object(Bucket=bucket, Key="c.csv", Body=b"1")  # csv only

    def bodies(watcher: str) -> list[dict[str, Any]]:
        got = sqs.receive_message(
            QueueUrl=resources.queues[watcher].url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        return [json.loads(m["Body"]) for m in got.get("Messages", [])]

    assert [b["source"] for b in bodies("orders")] == ["shop"]
    assert sorted(b["detail"]["object"]["key"] for b in bodies("csv")) == ["c.csv", "raw/a.csv"]
    assert sorted(b["detail"]["object"]["key"] for b in bodies("raw")) == ["raw/a.csv", "raw/b.json"]
