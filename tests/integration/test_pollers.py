"""The local runtime's pollers on the real emulators: Lambda's event shapes, retries, DLQs, crashes, restarts."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from botocore.exceptions import ClientError

from assetflow import Asset, AssetWatcher, Catalog, KafkaTopic, Pipeline, SparkJob, SqsQueue
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.core.events import AssetEvent, Run
from assetflow.functions import handle_asset_events, handle_kafka_records, handle_sqs_messages
from assetflow_dev import (
    LOCAL_CLIENT_KWARGS,
    LOCAL_REGION,
    DynamoDbLocal,
    MotoServer,
    TansuBroker,
    client,
)
from assetflow_dev.pollers import (
    KafkaPoller,
    LocalLambdaContext,
    Poller,
    SqsPoller,
    StreamPoller,
    lambda_context,
)

T = TypeVar("T")
ORDERS = "x-test://orders"
MSK_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/local/00000000-0000-0000-0000-000000000000-1"


# --- helpers ----------------------------------------------------------------------------------------------


def eventually(check: Callable[[], T], *, timeout: float = 20.0, what: str = "the condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Crash(BaseException):
    """The invocation dies (the batch processor cannot catch it): nothing of the batch is acknowledged."""


@dataclass
class Faults:
    """Failures injected into a handler's DynamoDB writes (the emulator never throttles or dies)."""

    throttle: dict[str, int] = field(default_factory=dict)  # marker in the write -> failures left
    crash_at_write: int | None = None
    crash_after_write: int | None = None  # the invocation dies right after this write, before answering
    writes: int = 0


class FaultyDynamoDb:
    def __init__(self, real: Any, faults: Faults) -> None:
        self._real = real
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _throttled(self, request: Any) -> bool:
        """Whether this write is refused (a throttle's marker in it, with failures left)."""
        text = json.dumps(request, default=str)
        for marker, left in self._faults.throttle.items():
            if left and marker in text:
                self._faults.throttle[marker] = left - 1
                return True
        return False

    def transact_write_items(self, **kwargs: Any) -> Any:
        faults = self._faults
        faults.writes += 1
        if faults.crash_at_write == faults.writes:
            raise Crash
        if self._throttled(kwargs):
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "Rate exceeded"}}
            raise ClientError(error, "TransactWriteItems")
        answer = self._real.transact_write_items(**kwargs)
        if faults.crash_after_write == faults.writes:
            raise Crash
        return answer

    def batch_write_item(self, **kwargs: Any) -> Any:
        faults = self._faults
        faults.writes += 1
        if faults.crash_at_write == faults.writes:
            raise Crash
        # DynamoDB hands back the puts a throttled partition refused, and writes the others.
        refused: dict[str, list[Any]] = {}
        passed: dict[str, list[Any]] = {}
        for table, writes in kwargs["RequestItems"].items():
            for write in writes:
                (refused if self._throttled(write) else passed).setdefault(table, []).append(write)
        answer = self._real.batch_write_item(RequestItems=passed) if passed else {}
        if faults.crash_after_write == faults.writes:
            raise Crash
        return {**answer, "UnprocessedItems": refused}


class Launcher:
    """EMR Serverless, faked: records the runs it is asked to submit."""

    def __init__(self) -> None:
        self.runs: list[Run] = []

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        self.runs.append(run)
        return f"job-{run.run_id}"


class LocalDeps(Dependencies):
    """The functions' composition root on the emulators, with injectable DynamoDB faults."""

    def __init__(self, settings: Settings, *, dynamodb: str, launcher: Launcher | None = None) -> None:
        super().__init__(
            settings,
            session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
            endpoints={"dynamodb": dynamodb},
            launcher=launcher,
        )
        self.faults = Faults()

    def client(self, service: str) -> Any:
        real = super().client(service)
        return FaultyDynamoDb(real, self.faults) if service == "dynamodb" else real


class Recorder:
    """Wraps a handler: keeps every event and context it got and every response it gave."""

    def __init__(self, handler: Callable[..., Any]) -> None:
        self._handler = handler
        self.events: list[dict[str, Any]] = []
        self.contexts: list[LocalLambdaContext] = []
        self.responses: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        with self._lock:
            self.events.append(json.loads(json.dumps(event)))  # also proves the event is plain JSON
            self.contexts.append(context)
        response = self._handler(event, context)
        self.responses.append(response)
        return response


@pytest.fixture
def pollers() -> Iterator[list[Poller]]:
    started: list[Poller] = []
    yield started
    for poller in started:
        poller.stop(timeout=15)
        assert not poller.running


def start(pollers: list[Poller], poller: Poller) -> Poller:
    pollers.append(poller)
    poller.start()
    return poller


def write_catalog(tmp_path: Path, *definitions: object) -> str:
    path = tmp_path / f"catalog-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(Catalog.build(list(definitions)).to_document()))
    return str(path)


@pytest.fixture
def store_table(dynamodb_client: Any) -> Iterator[str]:
    table = f"pollers-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(dynamodb_client, table).create_table()
    yield table
    dynamodb_client.delete_table(TableName=table)


def make_queue(sqs: Any, name: str, **attributes: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def queue_counts(sqs: Any, url: str) -> tuple[int, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def orders_catalog(tmp_path: Path) -> str:
    orders = Asset(ORDERS, watchers=[AssetWatcher("orders", SqsQueue("orders"))])
    return write_catalog(
        tmp_path, orders, Pipeline("on-orders", schedule=orders, job=SparkJob("spark_jobs/x.py"))
    )


def ingest_deps(table: str, catalog: str, dynamodb: DynamoDbLocal, watcher: str | None = None) -> LocalDeps:
    settings = Settings(table_name=table, catalog_path=catalog, region=LOCAL_REGION, watcher_name=watcher)
    return LocalDeps(settings, dynamodb=dynamodb.endpoint)


def sqs_handler(deps: Dependencies) -> Recorder:
    return Recorder(lambda event, context: handle_sqs_messages.lambda_handler(event, context, deps=deps))


def stored_events(deps: Dependencies, uri: str) -> list[dict[str, Any]]:
    return deps.store.list_events(uri, limit=1000, newest_first=False).items


# --- the Lambda context -----------------------------------------------------------------------------------


def test_each_invocation_gets_a_fresh_context_that_counts_down() -> None:
    first = lambda_context("assetflow-ingest", timeout_seconds=30)
    second = lambda_context("assetflow-ingest")

    assert first.invoked_function_arn == "arn:aws:lambda:us-east-1:123456789012:function:assetflow-ingest"
    assert first.aws_request_id != second.aws_request_id
    assert str(uuid.UUID(first.aws_request_id)) == first.aws_request_id
    assert 25_000 < first.get_remaining_time_in_millis() <= 30_000
    assert first.log_group_name == "/aws/lambda/assetflow-ingest"
    assert "[$LATEST]" in first.log_stream_name
    assert (first.memory_limit_in_mb, first.function_version) == (512, "$LATEST")
    assert lambda_context("f", timeout_seconds=0).get_remaining_time_in_millis() == 0


# --- SQS --------------------------------------------------------------------------------------------------


def test_sqs_messages_reach_the_ingest_function_as_lambda_delivers_them_and_are_deleted(
    sqs_client: Any, dynamodb_local: DynamoDbLocal, store_table: str, tmp_path: Path, pollers: list[Poller]
) -> None:
    deps = ingest_deps(store_table, orders_catalog(tmp_path), dynamodb_local, watcher="orders")
    url, arn = make_queue(sqs_client, f"orders-{uuid.uuid4().hex[:8]}")
    bodies = [json.dumps({"order": n}) for n in range(3)]
    for body in bodies:
        sqs_client.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={
                "tenant": {"DataType": "String", "StringValue": "acme"},
                "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
                "weight": {"DataType": "Number", "StringValue": "2.5"},
            },
        )
    handler = sqs_handler(deps)

    poller = start(
        pollers,
        SqsPoller(
            name="orders",
            sqs=sqs_client,
            queue_url=url,
            queue_arn=arn,
            handler=handler,
            function_name="ingest",
        ),
    )

    stored = eventually(lambda: len(stored_events(deps, ORDERS)) == 3 and stored_events(deps, ORDERS))
    eventually(lambda: poller.idle, what="the poller to be idle")
    assert sorted(json.dumps(e["extra"]["payload"]) for e in stored) == sorted(bodies)
    assert queue_counts(sqs_client, url) == (0, 0)
    assert all(r == {"batchItemFailures": []} for r in handler.responses)
    record = handler.events[0]["Records"][0]
    assert set(record) == {
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "md5OfMessageAttributes",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    }
    assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == (
        "aws:sqs",
        arn,
        LOCAL_REGION,
    )
    assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()  # noqa: S324
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(record["attributes"])
    assert record["messageAttributes"] == {
        "tenant": {
            "stringValue": "acme",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        },
        "blob": {
            "binaryValue": base64.b64encode(b"\x00\xff").decode(),
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Binary",
        },
        "weight": {
            "stringValue": "2.5",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Number",
        },
    }
    # The ingest function keeps the attributes as it got them: the event's facts show Lambda's shape.
    facts = next(e for e in stored if e["extra"]["message"]["message_id"] == record["messageId"])["extra"]
    assert facts["message"]["message_attributes"] == record["messageAttributes"]
    context = handler.contexts[0]
    assert context.function_name == "ingest"
    assert context.invoked_function_arn.endswith(":function:ingest")
    assert len({c.aws_request_id for c in handler.contexts}) == len(handler.contexts)
    assert (poller.stats.records, poller.stats.succeeded, poller.stats.failed_attempts) == (3, 3, 0)


def test_an_sqs_poller_started_again_during_its_long_poll_consumes_at_once_and_once(
    sqs_client: Any, pollers: list[Poller]
) -> None:
    # Given a poller stopped while its long poll waits (stop() does not wait for a parked poll)
    url, arn = make_queue(sqs_client, f"restart-{uuid.uuid4().hex[:8]}")
    handler = Recorder(lambda event, context: {"batchItemFailures": []})
    poller = start(
        pollers,
        SqsPoller(
            name="restart",
            sqs=sqs_client,
            queue_url=url,
            queue_arn=arn,
            handler=handler,
            function_name="f",
            wait_seconds=3,
        ),
    )
    assert poller.wait_ready(10)
    eventually(lambda: poller.idle, what="the long poll to park")
    poller.stop()

    # When it is started again at once and a message comes
    poller.start()
    sqs_client.send_message(QueueUrl=url, MessageBody=json.dumps({"n": 1}))

    # Then the message is handled once, and once the old long poll ended only the new worker polls
    eventually(lambda: len(handler.events) == 1, what="the message")
    time.sleep(4)
    assert len(handler.events) == 1
    assert queue_counts(sqs_client, url) == (0, 0)
    polling = [t for t in threading.enumerate() if t.name.startswith("poller-restart")]
    assert [t.name for t in polling] == ["poller-restart-g2"]


def test_a_failing_message_comes_back_alone_and_lands_in_the_dead_letter_queue(
    sqs_client: Any, dynamodb_local: DynamoDbLocal, store_table: str, tmp_path: Path, pollers: list[Poller]
) -> None:
    deps = ingest_deps(store_table, orders_catalog(tmp_path), dynamodb_local, watcher="orders")
    run = uuid.uuid4().hex[:8]
    dlq_url, dlq_arn = make_queue(sqs_client, f"orders-dlq-{run}")
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    url, arn = make_queue(sqs_client, f"orders-{run}", RedrivePolicy=policy)
    for n in range(3):
        sqs_client.send_message(QueueUrl=url, MessageBody=json.dumps({"order": f"{run}-{n}"}))
    # Given a store that always refuses the second order's event
    deps.faults.throttle[f"{run}-1"] = 1_000
    handler = sqs_handler(deps)

    poller = start(
        pollers,
        SqsPoller(
            name="orders",
            sqs=sqs_client,
            queue_url=url,
            queue_arn=arn,
            handler=handler,
            function_name="ingest",
        ),
    )

    # Then SQS moves it to the DLQ after its second receive, and the poller goes idle
    dead = eventually(
        lambda: sqs_client.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=1).get("Messages"),
        what="the message in the DLQ",
    )
    eventually(lambda: poller.idle, what="the poller to be idle")
    assert [json.loads(m["Body"])["order"] for m in dead] == [f"{run}-1"]
    assert sorted(e["extra"]["payload"]["order"] for e in stored_events(deps, ORDERS)) == [
        f"{run}-0",
        f"{run}-2",
    ]
    deliveries = Counter(json.loads(r["body"])["order"] for e in handler.events for r in e["Records"])
    assert deliveries == {f"{run}-0": 1, f"{run}-1": 2, f"{run}-2": 1}  # the others were deleted at once
    receive_counts = [
        r["attributes"]["ApproximateReceiveCount"]
        for e in handler.events
        for r in e["Records"]
        if json.loads(r["body"])["order"] == f"{run}-1"
    ]
    assert receive_counts == ["1", "2"]
    assert queue_counts(sqs_client, url) == (0, 0)
    assert (poller.stats.succeeded, poller.stats.failed_attempts, poller.stats.dead_lettered) == (2, 2, 1)


def test_a_crash_mid_batch_loses_nothing_and_stores_nothing_twice(
    sqs_client: Any, dynamodb_local: DynamoDbLocal, store_table: str, tmp_path: Path, pollers: list[Poller]
) -> None:
    deps = ingest_deps(store_table, orders_catalog(tmp_path), dynamodb_local, watcher="orders")
    url, arn = make_queue(sqs_client, f"orders-{uuid.uuid4().hex[:8]}")
    sqs_client.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": json.dumps({"order": n})} for n in range(4)]
    )
    # Given an invocation that dies right after its (batched) write stored the messages, before answering
    deps.faults.crash_after_write = 1
    handler = sqs_handler(deps)

    poller = start(
        pollers,
        SqsPoller(
            name="orders",
            sqs=sqs_client,
            queue_url=url,
            queue_arn=arn,
            handler=handler,
            function_name="ingest",
            retry_delay_seconds=0,
        ),
    )

    eventually(lambda: poller.idle and queue_counts(sqs_client, url) == (0, 0), what="the queue to drain")
    stored = stored_events(deps, ORDERS)
    assert sorted(e["extra"]["payload"]["order"] for e in stored) == [0, 1, 2, 3]
    assert len({e["id"] for e in stored}) == 4
    assert poller.running
    assert poller.stats.last_error is not None and poller.stats.last_error.startswith("Crash")
    assert poller.stats.failed_attempts >= 1
    assert handler.responses[-1] == {"batchItemFailures": []}


def test_a_fifo_queue_keeps_its_order_across_a_failure(
    sqs_client: Any, dynamodb_local: DynamoDbLocal, store_table: str, tmp_path: Path, pollers: list[Poller]
) -> None:
    deps = ingest_deps(store_table, orders_catalog(tmp_path), dynamodb_local, watcher="orders")
    run = uuid.uuid4().hex[:8]
    url, arn = make_queue(
        sqs_client, f"orders-{run}.fifo", FifoQueue="true", ContentBasedDeduplication="true"
    )
    for n in range(4):
        sqs_client.send_message(
            QueueUrl=url, MessageBody=json.dumps({"order": f"{run}-{n}"}), MessageGroupId="g"
        )
    # The second message's write fails as long as it is tried in this invocation: with the whole batch, with
    # its half, alone (a throttled batch is halved until the refused part is alone).
    deps.faults.throttle[f"{run}-1"] = 3
    handler = sqs_handler(deps)

    poller = start(
        pollers,
        SqsPoller(
            name="orders",
            sqs=sqs_client,
            queue_url=url,
            queue_arn=arn,
            handler=handler,
            function_name="ingest",
        ),
    )

    eventually(lambda: len(stored_events(deps, ORDERS)) == 4, what="four events")
    eventually(lambda: poller.idle, what="the poller to be idle")
    # Stored in queue order: the failure held back every later message of the group (FIFO processor).
    assert [e["extra"]["payload"]["order"] for e in stored_events(deps, ORDERS)] == [
        f"{run}-{n}" for n in range(4)
    ]
    assert handler.events[0]["Records"][0]["attributes"]["MessageGroupId"] == "g"
    assert "MessageDeduplicationId" in handler.events[0]["Records"][0]["attributes"]
    assert len(handler.events) == 2
    assert [json.loads(r["body"])["order"] for r in handler.events[1]["Records"]] == [
        f"{run}-{n}" for n in range(1, 4)
    ]


@pytest.mark.slow
def test_the_sqs_poller_survives_a_moto_restart(tmp_path: Path, pollers: list[Poller]) -> None:
    # Its own moto: a restart forgets every queue, which other tests must not see.
    with MotoServer(log_dir=tmp_path) as moto:
        sqs = client("sqs", moto.endpoint)
        url, arn = make_queue(sqs, "restarts")
        seen: list[str] = []
        handler = Recorder(lambda event, context: seen.extend(r["body"] for r in event["Records"]))
        poller = start(
            pollers,
            SqsPoller(
                name="restarts", sqs=sqs, queue_url=url, queue_arn=arn, handler=handler, function_name="f"
            ),
        )
        sqs.send_message(QueueUrl=url, MessageBody="before")
        eventually(lambda: seen == ["before"], what="the first message")

        moto.restart()
        eventually(lambda: poller.stats.last_error is not None, what="a failed poll")
        assert poller.running
        make_queue(sqs, "restarts")  # the runtime creates its queues again; the URL is the same
        sqs.send_message(QueueUrl=url, MessageBody="after")

        eventually(lambda: seen == ["before", "after"], what="the message sent after the restart")
        assert poller.running
        poller.stop()


# --- DynamoDB Streams -------------------------------------------------------------------------------------


def test_an_sqs_message_flows_through_both_functions_into_one_run(
    sqs_client: Any,
    dynamodb_local: DynamoDbLocal,
    dynamodb_streams_client: Any,
    store_table: str,
    tmp_path: Path,
    pollers: list[Poller],
) -> None:
    catalog = orders_catalog(tmp_path)
    ingest = ingest_deps(store_table, catalog, dynamodb_local, watcher="orders")
    launcher = Launcher()
    evaluator = LocalDeps(
        Settings(table_name=store_table, catalog_path=catalog, region=LOCAL_REGION),
        dynamodb=dynamodb_local.endpoint,
        launcher=launcher,
    )
    url, arn = make_queue(sqs_client, f"orders-{uuid.uuid4().hex[:8]}")
    stream_arn = evaluator.store.stream_arn()
    evaluate = Recorder(
        lambda event, context: handle_asset_events.lambda_handler(event, context, deps=evaluator)
    )
    start(
        pollers,
        SqsPoller(
            name="orders",
            sqs=sqs_client,
            queue_url=url,
            queue_arn=arn,
            handler=sqs_handler(ingest),
            function_name="ingest",
        ),
    )
    streams = start(
        pollers,
        StreamPoller(
            name="evaluator",
            streams=dynamodb_streams_client,
            stream_arn=stream_arn,
            handler=evaluate,
            function_name="evaluator",
        ),
    )

    sqs_client.send_message(QueueUrl=url, MessageBody=json.dumps({"order": 1}))

    (run,) = eventually(lambda: launcher.runs, what="the run")
    eventually(lambda: streams.idle, what="the stream poller to be idle")
    (event,) = stored_events(ingest, ORDERS)
    assert [e.id for e in run.triggering_asset_events[ORDERS]] == [event["id"]]
    assert all(r == {"batchItemFailures": []} for r in evaluate.responses)
    records = [r for e in evaluate.events for r in e["Records"]]
    (inserted,) = [r for r in records if r["dynamodb"]["Keys"]["sk"]["S"].startswith("EVENT#")]
    assert inserted["eventName"] == "INSERT"
    assert (inserted["eventSource"], inserted["eventVersion"], inserted["eventSourceARN"]) == (
        "aws:dynamodb",
        "1.1",
        stream_arn,
    )
    created = inserted["dynamodb"]["ApproximateCreationDateTime"]
    assert isinstance(created, int | float) and abs(created - time.time()) < 600
    assert {"Keys", "NewImage", "SequenceNumber", "SizeBytes", "StreamViewType"} <= set(inserted["dynamodb"])
    assert json.loads(inserted["dynamodb"]["NewImage"]["event"]["S"])["id"] == event["id"]
    assert streams.stats.failed_attempts == 0


@pytest.fixture
def plain_table(dynamodb_client: Any, dynamodb_streams_client: Any) -> Iterator[tuple[str, str]]:
    """A table with a NEW_AND_OLD_IMAGES stream (name, stream ARN)."""
    name = f"stream-{uuid.uuid4().hex[:10]}"
    dynamodb_client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    yield name, dynamodb_client.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    dynamodb_client.delete_table(TableName=name)


def put_keys(dynamodb: Any, table: str, keys: list[str]) -> None:
    for key in keys:
        dynamodb.put_item(TableName=table, Item={"pk": {"S": key}, "blob": {"B": key.encode()}})


def key_of(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"]["pk"]["S"])


def test_a_reported_stream_failure_is_retried_from_that_record(
    dynamodb_client: Any, dynamodb_streams_client: Any, plain_table: tuple[str, str], pollers: list[Poller]
) -> None:
    table, stream_arn = plain_table
    put_keys(dynamodb_client, table, ["k0", "k1", "k2", "k3", "k4"])
    failures_left = {"k2": 2}
    processed: list[str] = []

    def process(record: Any) -> None:
        key = record.dynamodb.keys["pk"]
        if failures_left.get(key):
            failures_left[key] -= 1
            raise RuntimeError("not yet")
        processed.append(key)

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
    handler = Recorder(
        lambda event, context: process_partial_response(
            event=event, record_handler=process, processor=processor, context=context
        )
    )

    poller = start(
        pollers,
        StreamPoller(
            name="plain",
            streams=dynamodb_streams_client,
            stream_arn=stream_arn,
            handler=handler,
            function_name="f",
        ),
    )

    eventually(lambda: poller.idle and "k4" in processed, what="every record")
    delivered = Counter(key_of(r) for e in handler.events for r in e["Records"])
    assert delivered == {"k0": 1, "k1": 1, "k2": 3, "k3": 3, "k4": 3}
    assert [len(e["Records"]) for e in handler.events] == [5, 3, 3]
    sequence_of_k2 = next(
        r["dynamodb"]["SequenceNumber"] for r in handler.events[0]["Records"] if key_of(r) == "k2"
    )
    assert handler.responses[0] == {"batchItemFailures": [{"itemIdentifier": sequence_of_k2}]}
    # Binary attributes arrive base64-encoded, as in Lambda's event.
    assert handler.events[0]["Records"][0]["dynamodb"]["NewImage"]["blob"] == {
        "B": base64.b64encode(b"k0").decode()
    }

    # And the shard goes on after the retried records
    put_keys(dynamodb_client, table, ["k5"])
    eventually(lambda: "k5" in processed, what="the next record")
    # (the records after a reported failure come again with it, as Lambda retries from the checkpoint)
    assert Counter(processed) == {"k0": 1, "k1": 1, "k2": 1, "k3": 3, "k4": 3, "k5": 1}
    assert (poller.stats.failed_attempts, poller.stats.dead_lettered) == (6, 0)


def test_a_filtering_stream_poller_batches_what_its_filter_keeps_and_moves_past_the_rest(
    dynamodb_client: Any, dynamodb_streams_client: Any, plain_table: tuple[str, str], pollers: list[Poller]
) -> None:
    """As Lambda filters a stream: refused records never reach the function, kept ones fill its batches."""
    table, stream_arn = plain_table
    keys = [f"{'keep' if n % 3 == 0 else 'drop'}{n:02d}" for n in range(30)]
    put_keys(dynamodb_client, table, keys)
    handler = Recorder(lambda event, context: {"batchItemFailures": []})
    poller = start(
        pollers,
        StreamPoller(
            name="filtered",
            streams=dynamodb_streams_client,
            stream_arn=stream_arn,
            handler=handler,
            function_name="f",
            batch_size=4,
            accept=lambda record: key_of(record).startswith("keep"),
        ),
    )
    kept = [k for k in keys if k.startswith("keep")]
    eventually(lambda: poller.idle and sum(len(e["Records"]) for e in handler.events) == len(kept))
    assert [key_of(r) for e in handler.events for r in e["Records"]] == kept
    assert [len(e["Records"]) for e in handler.events] == [4, 4, 2]
    # The checkpoint is past the last record read, kept or not: a resumed shard reads none of them again.
    (shard,) = poller._shards.values()
    assert shard.checkpoint == shard.read_up_to
    put_keys(dynamodb_client, table, ["drop99", "keep99"])
    eventually(lambda: key_of(handler.events[-1]["Records"][-1]) == "keep99", what="the next kept record")
    assert [key_of(r) for r in handler.events[-1]["Records"]] == ["keep99"]


def test_a_poison_record_is_bisected_out_and_sent_to_on_failure(
    dynamodb_client: Any, dynamodb_streams_client: Any, plain_table: tuple[str, str], pollers: list[Poller]
) -> None:
    table, stream_arn = plain_table
    put_keys(dynamodb_client, table, ["k0", "k1", "k2", "k3", "k4"])
    processed: list[str] = []
    failed_over: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        keys = [key_of(r) for r in event["Records"]]
        if "k2" in keys:
            raise ValueError("poison")  # a function error: the whole invocation fails
        processed.extend(keys)

    recorder = Recorder(handler)
    poller = start(
        pollers,
        StreamPoller(
            name="plain",
            streams=dynamodb_streams_client,
            stream_arn=stream_arn,
            handler=recorder,
            function_name="evaluator",
            retry_attempts=2,
            on_failure=failed_over.append,
        ),
    )

    eventually(lambda: poller.idle and "k4" in processed, what="every record but the poison")
    assert processed == ["k0", "k1", "k3", "k4"]
    # 0-4 fails, halves: 0-1 passes, 2-4 fails, halves: 2 fails three times (one try and two retries), 3-4 passes
    assert [[key_of(r) for r in e["Records"]] for e in recorder.events] == [
        ["k0", "k1", "k2", "k3", "k4"],
        ["k0", "k1"],
        ["k2", "k3", "k4"],
        ["k2"],
        ["k2"],
        ["k2"],
        ["k3", "k4"],
    ]
    (failure,) = failed_over
    poison = recorder.events[3]["Records"][0]
    shard = dynamodb_streams_client.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert failure["requestContext"]["approximateInvokeCount"] == 3
    assert failure["requestContext"]["functionArn"].endswith(":function:evaluator")
    assert failure["requestContext"]["requestId"] == recorder.contexts[5].aws_request_id
    assert failure["responseContext"] == {
        "statusCode": 200,
        "executedVersion": "$LATEST",
        "functionError": "Unhandled",
    }
    assert failure["version"] == "1.0"
    assert datetime.strptime(failure["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=UTC
    ) <= datetime.now(UTC)
    info = failure["DDBStreamBatchInfo"]
    arrival = datetime.fromtimestamp(poison["dynamodb"]["ApproximateCreationDateTime"], UTC)
    assert info == {
        "shardId": shard["ShardId"],
        "startSequenceNumber": poison["dynamodb"]["SequenceNumber"],
        "endSequenceNumber": poison["dynamodb"]["SequenceNumber"],
        "approximateArrivalOfFirstRecord": arrival.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "approximateArrivalOfLastRecord": arrival.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "batchSize": 1,
        "streamArn": stream_arn,
    }
    assert poller.stats.dead_lettered == 1


def test_a_crashed_evaluator_invocation_is_retried_without_a_second_run(
    dynamodb_local: DynamoDbLocal,
    dynamodb_streams_client: Any,
    store_table: str,
    tmp_path: Path,
    pollers: list[Poller],
) -> None:
    a, b = Asset("x-test://a"), Asset("x-test://b")
    catalog = write_catalog(tmp_path, Pipeline("both", schedule=a & b, job=SparkJob("spark_jobs/both.py")))
    launcher = Launcher()
    deps = LocalDeps(
        Settings(table_name=store_table, catalog_path=catalog, region=LOCAL_REGION),
        dynamodb=dynamodb_local.endpoint,
        launcher=launcher,
    )
    now = datetime.now(UTC)
    deps.store.put_event(AssetEvent(a.uri, "ea", now), dedupe_key="ma")
    deps.store.put_event(AssetEvent(b.uri, "eb", now), dedupe_key="mb")
    crashed: list[bool] = []

    def crash_after_a(event: dict[str, Any], context: Any) -> Any:
        if not crashed:
            # The first invocation evaluates the records up to a's event, then dies.
            records = event["Records"]
            cut = next(
                i
                for i, r in enumerate(records)
                if r["dynamodb"]["Keys"]["pk"]["S"] == f"ASSET#{a.uri}"
                and r["dynamodb"]["Keys"]["sk"]["S"].startswith("EVENT#")
            )
            handle_asset_events.lambda_handler({"Records": records[: cut + 1]}, context, deps=deps)
            crashed.append(True)
            raise Crash
        return handle_asset_events.lambda_handler(event, context, deps=deps)

    poller = start(
        pollers,
        StreamPoller(
            name="evaluator",
            streams=dynamodb_streams_client,
            stream_arn=deps.store.stream_arn(),
            handler=crash_after_a,
            function_name="evaluator",
        ),
    )

    eventually(lambda: poller.idle and launcher.runs, what="the run")
    (run,) = launcher.runs
    assert {uri: [e.id for e in events] for uri, events in run.triggering_asset_events.items()} == {
        a.uri: ["ea"],
        b.uri: ["eb"],
    }
    assert len(deps.store.list_runs("both").items) == 1
    assert crashed and poller.running
    assert poller.stats.last_error is not None and poller.stats.last_error.startswith("Crash")


class FakeStreams:
    """A DynamoDB Streams client over fixed shards; GetRecords returns `Limit` records per page."""

    def __init__(self, shards: list[tuple[str, str | None, list[str], bool]]) -> None:
        # (shard id, parent id, keys, closed)
        self._shards = {shard_id: (parent, keys, closed) for shard_id, parent, keys, closed in shards}
        self._order = [s[0] for s in shards]

    # boto3's keyword names (StreamArn, ShardId, ...) arrive in `request`.
    def describe_stream(self, **request: Any) -> dict[str, Any]:
        shards = []
        for shard_id in self._order:
            parent, keys, closed = self._shards[shard_id]
            numbers = {"StartingSequenceNumber": self._sequence(shard_id, 0)}
            if closed:
                numbers["EndingSequenceNumber"] = self._sequence(shard_id, len(keys) - 1)
            shards.append(
                {"ShardId": shard_id, "SequenceNumberRange": numbers}
                | ({"ParentShardId": parent} if parent else {})
            )
        return {"StreamDescription": {"StreamArn": request["StreamArn"], "Shards": shards}}

    def get_shard_iterator(self, **request: Any) -> dict[str, Any]:
        shard_id, kind = request["ShardId"], request["ShardIteratorType"]
        position = {"TRIM_HORIZON": 0, "LATEST": len(self._shards[shard_id][1])}.get(kind)
        if position is None:
            position = int(request["SequenceNumber"].rsplit("-", 1)[1]) + 1
        return {"ShardIterator": f"{shard_id}|{position}"}

    def get_records(self, **request: Any) -> dict[str, Any]:
        shard_id, position = request["ShardIterator"].split("|")
        _parent, keys, closed = self._shards[shard_id]
        start = int(position)
        page = keys[start : start + request["Limit"]]
        records = [
            {
                "eventID": f"{shard_id}-{start + i}",
                "eventName": "INSERT",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": datetime(2026, 11, 21, 10, 15, tzinfo=UTC),
                    "Keys": {"pk": {"S": key}},
                    "NewImage": {
                        "pk": {"S": key},
                        "data": {"M": {"raw": {"B": b"\xff"}, "tags": {"L": [{"BS": [b"\x01"]}]}}},
                    },
                    "SequenceNumber": self._sequence(shard_id, start + i),
                    "SizeBytes": 10,
                    "StreamViewType": "NEW_IMAGE",
                },
            }
            for i, key in enumerate(page)
        ]
        end = start + len(page)
        done = closed and end >= len(keys)
        return {"Records": records} | ({} if done else {"NextShardIterator": f"{shard_id}|{end}"})

    @staticmethod
    def _sequence(shard_id: str, index: int) -> str:
        return f"{shard_id}-{index}"


def test_a_child_shard_is_read_only_after_its_parent() -> None:
    # The stream lists the child first; the parent is closed and takes three pages to read.
    streams = FakeStreams(
        [("child", "parent", ["c1", "c2"], False), ("parent", None, ["p1", "p2", "p3"], True)]
    )
    handler = Recorder(lambda event, context: None)
    poller = StreamPoller(
        name="shards",
        streams=streams,
        stream_arn="arn:fake",
        handler=handler,
        function_name="f",
        batch_size=1,
    )
    poller.start()
    try:
        eventually(lambda: poller.idle and len(handler.events) == 5, timeout=5, what="both shards")
    finally:
        poller.stop()

    assert [key_of(e["Records"][0]) for e in handler.events] == ["p1", "p2", "p3", "c1", "c2"]
    first = handler.events[0]["Records"][0]["dynamodb"]
    assert first["ApproximateCreationDateTime"] == int(datetime(2026, 11, 21, 10, 15, tzinfo=UTC).timestamp())
    assert first["NewImage"]["data"] == {"M": {"raw": {"B": "/w=="}, "tags": {"L": [{"BS": ["AQ=="]}]}}}


@pytest.mark.slow
def test_the_stream_poller_resumes_after_a_dynamodb_local_restart(
    tmp_path: Path, pollers: list[Poller]
) -> None:
    # Its own DynamoDB Local, keeping its data on disk, so that the stream outlives the restart.
    with DynamoDbLocal(data_dir=tmp_path / "data", log_dir=tmp_path) as local:
        dynamodb, streams = client("dynamodb", local.endpoint), client("dynamodbstreams", local.endpoint)
        dynamodb.create_table(
            TableName="restarts",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        stream_arn = dynamodb.describe_table(TableName="restarts")["Table"]["LatestStreamArn"]
        seen: list[str] = []
        handler = Recorder(lambda event, context: seen.extend(key_of(r) for r in event["Records"]))
        poller = start(
            pollers,
            StreamPoller(
                name="restarts", streams=streams, stream_arn=stream_arn, handler=handler, function_name="f"
            ),
        )
        put_keys(dynamodb, "restarts", ["before"])
        eventually(lambda: seen == ["before"], what="the first record")

        local.stop()
        eventually(lambda: poller.stats.last_error is not None, what="a failed poll")
        local.start()
        put_keys(dynamodb, "restarts", ["after"])

        eventually(
            lambda: seen == ["before", "after"], timeout=30, what="the record written after the restart"
        )
        assert poller.running
        poller.stop()


# --- Kafka ------------------------------------------------------------------------------------------------


def produce(broker: TansuBroker, topic: str, records: list[dict[str, Any]]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.endpoint)
    try:
        for record in records:
            producer.send(topic, **record)
        producer.flush()
    finally:
        producer.close()


def committed(broker: TansuBroker, group: str, topic: str, partitions: int) -> dict[int, int]:
    from kafka import TopicPartition

    with broker.admin() as admin:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        offsets = admin.list_group_offsets({group: wanted})[group]
    return {tp.partition: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


@pytest.fixture
def readings(kafka_broker: TansuBroker, tmp_path: Path) -> tuple[str, str]:
    """A new two-partition topic and a catalog whose watcher reads it (topic, catalog path)."""
    topic = f"readings-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=2)
    asset = Asset("x-test://readings", watchers=[AssetWatcher("readings", KafkaTopic(topic))])
    return topic, write_catalog(tmp_path, asset)


def test_kafka_records_reach_the_ingest_function_as_msk_delivers_them_and_are_committed(
    kafka_broker: TansuBroker,
    dynamodb_local: DynamoDbLocal,
    store_table: str,
    readings: tuple[str, str],
    pollers: list[Poller],
) -> None:
    topic, catalog = readings
    deps = ingest_deps(store_table, catalog, dynamodb_local)
    produce(
        kafka_broker,
        topic,
        [
            {
                "value": b'{"n": 0}',
                "key": b"s-1",
                "partition": 0,
                "headers": [("trace", b"t-0"), ("raw", b"\x9f\x00")],
            },
            {"value": b'{"n": 1}', "key": None, "partition": 0},
            {"value": b'{"n": 2}', "key": b"s-2", "partition": 1},
        ],
    )
    group = f"ingest-{uuid.uuid4().hex[:8]}"
    handler = Recorder(lambda event, context: handle_kafka_records.lambda_handler(event, context, deps=deps))

    poller = start(
        pollers,
        KafkaPoller(
            name="readings",
            bootstrap_servers=kafka_broker.endpoint,
            topics=[topic],
            group_id=group,
            handler=handler,
            function_name="ingest",
            event_source_arn=MSK_ARN,
        ),
    )

    eventually(lambda: len(stored_events(deps, "x-test://readings")) == 3, what="three events")
    eventually(lambda: poller.idle, what="the poller to be idle")
    assert committed(kafka_broker, group, topic, 2) == {0: 2, 1: 1}
    facts = {
        (e["extra"]["message"]["partition"], e["extra"]["message"]["offset"]): e["extra"]["message"]
        for e in stored_events(deps, "x-test://readings")
    }
    assert facts[(0, 0)]["key"] == "s-1"
    assert facts[(0, 0)]["headers"] == {
        "trace": "t-0",
        "raw": {"base64": base64.b64encode(b"\x9f\x00").decode()},
    }
    assert facts[(0, 1)]["key"] is None
    assert facts[(0, 0)]["timestamp_type"] == "CREATE_TIME"
    event = handler.events[0]
    assert (event["eventSource"], event["eventSourceArn"], event["bootstrapServers"]) == (
        "aws:kafka",
        MSK_ARN,
        kafka_broker.endpoint,
    )
    records = {r["offset"]: r for e in handler.events for r in e["records"].get(f"{topic}-0", [])}
    assert records[0]["headers"] == [{"trace": list(b"t-0")}, {"raw": [-97, 0]}]  # Java's signed bytes
    assert records[0]["key"] == base64.b64encode(b"s-1").decode()
    assert "key" not in records[1]
    assert base64.b64decode(records[1]["value"]) == b'{"n": 1}'
    assert isinstance(records[1]["timestamp"], int)
    assert all(r == {"batchItemFailures": []} for r in handler.responses)
    assert poller.stats.succeeded == 3


def test_a_crashed_and_a_failed_kafka_batch_are_retried_and_stored_once(
    kafka_broker: TansuBroker,
    dynamodb_local: DynamoDbLocal,
    store_table: str,
    readings: tuple[str, str],
    pollers: list[Poller],
) -> None:
    topic, catalog = readings
    deps = ingest_deps(store_table, catalog, dynamodb_local)
    run = uuid.uuid4().hex[:8]
    produce(
        kafka_broker,
        topic,
        [{"value": json.dumps({"n": f"{run}-{n}"}).encode(), "partition": n % 2} for n in range(6)],
    )
    # Given a first invocation that dies at its third write, and a second whose write of one record fails
    deps.faults.crash_at_write = 3
    deps.faults.throttle[f"{run}-2"] = 1
    group = f"ingest-{uuid.uuid4().hex[:8]}"
    handler = Recorder(lambda event, context: handle_kafka_records.lambda_handler(event, context, deps=deps))

    poller = start(
        pollers,
        KafkaPoller(
            name="readings",
            bootstrap_servers=kafka_broker.endpoint,
            topics=[topic],
            group_id=group,
            handler=handler,
            function_name="ingest",
            event_source="SelfManagedKafka",
        ),
    )

    eventually(
        lambda: poller.idle and committed(kafka_broker, group, topic, 2) == {0: 3, 1: 3}, what="the commits"
    )
    stored = stored_events(deps, "x-test://readings")
    assert sorted(e["extra"]["payload"]["n"] for e in stored) == [f"{run}-{n}" for n in range(6)]
    assert len({e["id"] for e in stored}) == 6
    assert handler.responses[-1] == {"batchItemFailures": []}
    assert (
        "eventSourceArn" not in handler.events[0] and handler.events[0]["eventSource"] == "SelfManagedKafka"
    )
    assert poller.stats.failed_attempts >= 6 and poller.stats.dead_lettered == 0
    assert poller.running


def test_kafka_records_that_keep_failing_go_to_on_failure_and_are_committed_past(
    kafka_broker: TansuBroker, readings: tuple[str, str], pollers: list[Poller]
) -> None:
    topic, _catalog = readings
    produce(
        kafka_broker,
        topic,
        [
            {"value": b"good-0", "partition": 0},
            {"value": b"poison", "partition": 0},
            {"value": b"good-1", "partition": 0},
            {"value": b"good-2", "partition": 1},
        ],
    )
    processed: list[bytes] = []

    def process(record: Any) -> None:
        if record.decoded_value == b"poison":
            raise ValueError("poison")
        processed.append(record.decoded_value)

    processor = BatchProcessor(event_type=EventType.Kafka)
    handler = Recorder(
        lambda event, context: process_partial_response(
            event=event, record_handler=process, processor=processor, context=context
        )
    )
    failed_over: list[dict[str, Any]] = []
    group = f"partial-{uuid.uuid4().hex[:8]}"

    poller = start(
        pollers,
        KafkaPoller(
            name="partial",
            bootstrap_servers=kafka_broker.endpoint,
            topics=[topic],
            group_id=group,
            handler=handler,
            function_name="ingest",
            event_source_arn=MSK_ARN,
            retry_attempts=1,
            on_failure=failed_over.append,
        ),
    )

    eventually(lambda: failed_over and poller.idle, what="the on-failure record")
    (failure,) = failed_over
    # good-0 and good-2 were committed at the first try; the retry started at the poison (partition 0 only)
    delivered = Counter(
        base64.b64decode(r["value"]) for e in handler.events for rs in e["records"].values() for r in rs
    )
    assert delivered == {b"good-0": 1, b"poison": 2, b"good-1": 2, b"good-2": 1}
    assert committed(kafka_broker, group, topic, 2) == {0: 3, 1: 1}
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert failure["requestContext"]["approximateInvokeCount"] == 2
    assert failure["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST"}  # it answered
    assert failure["version"] == "1.0"
    info = failure["KafkaBatchInfo"]
    assert (info["batchSize"], info["eventSourceArn"], info["bootstrapServers"]) == (
        2,
        MSK_ARN,
        kafka_broker.endpoint,
    )
    assert info["payloadSize"] > 0
    (partition,) = info["recordsInfo"]
    assert partition == f"{topic}-0"
    assert (
        info["recordsInfo"][partition]["firstRecordOffset"],
        info["recordsInfo"][partition]["lastRecordOffset"],
    ) == (
        "1",
        "2",
    )
    assert info["recordsInfo"][partition]["firstRecordTimestamp"].endswith("Z")
    assert poller.stats.dead_lettered == 2

    # And the partition goes on after the records given up on
    produce(kafka_broker, topic, [{"value": b"good-3", "partition": 0}])
    eventually(lambda: b"good-3" in processed, what="the next record")
    assert committed(kafka_broker, group, topic, 2) == {0: 4, 1: 1}


@pytest.mark.slow
def test_the_kafka_poller_survives_a_broker_restart(tmp_path: Path, pollers: list[Poller]) -> None:
    # Its own broker: a restart of Tansu's memory storage loses every topic, which other tests must not see.
    with TansuBroker(log_dir=tmp_path) as broker:
        broker.create_topics(["restarts"])
        seen: list[bytes] = []

        def handler(event: dict[str, Any], context: Any) -> None:
            seen.extend(base64.b64decode(r["value"]) for rs in event["records"].values() for r in rs)

        poller = start(
            pollers,
            KafkaPoller(
                name="restarts",
                bootstrap_servers=broker.endpoint,
                topics=["restarts"],
                group_id="restarts",
                handler=handler,
                function_name="f",
                event_source="SelfManagedKafka",
            ),
        )
        produce(broker, "restarts", [{"value": b"before"}])
        eventually(lambda: seen == [b"before"], what="the first record")

        broker.restart()
        broker.create_topics(["restarts"])  # the runtime creates its topics again
        produce(broker, "restarts", [{"value": b"after"}])

        eventually(
            lambda: seen == [b"before", b"after"], timeout=90, what="the record sent after the restart"
        )
        assert poller.running
        poller.stop()
