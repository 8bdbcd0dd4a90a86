"""The ingest Lambdas against DynamoDB Local (and SQS on moto): one event per message, quarantine, failures."""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from assetflow import Asset, AssetWatcher, Catalog, SqsQueue
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.messages import UNKNOWN_WATCHER
from assetflow.composition import Dependencies, Settings
from assetflow.core.catalog import Definition
from assetflow.core.events import derive_id, format_timestamp
from assetflow.core.jsonvalue import thaw_json
from assetflow.functions import handle_kafka_records, handle_sqs_messages
from assetflow.loader import load_definitions
from assetflow_dev import LOCAL_REGION, DynamoDbLocal, MotoServer, client

ROOT = Path(__file__).parent.parent.parent
EVENTS = ROOT / "tests" / "fixtures" / "events"
DELIVERIES = "s3://assetflow-demo/landing/deliveries"
PRIORITY = "s3://assetflow-demo/landing/priority-deliveries"
READINGS = "x-iot://sensors/readings"


def fixture_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture(scope="module")
def catalog_document() -> dict[str, Any]:
    # The example definitions, plus a FIFO watcher (the examples have none) with the same message schema.
    definitions = load_definitions(ROOT / "pipelines")
    schema = thaw_json(
        next(
            w.source.schema
            for d in definitions
            for w in getattr(d.value, "watchers", ())
            if w.name == "deliveries"
        )
    )
    priority = Asset(
        PRIORITY,
        watchers=[AssetWatcher("priority-deliveries", SqsQueue("priority-deliveries.fifo", schema=schema))],
    )
    return Catalog.build(
        [*definitions, Definition(priority, "tests/integration/test_ingest.py")]
    ).to_document()


class ThrottlingClient:
    """A DynamoDB client that throttles writes mentioning a marker (the emulator never throttles)."""

    def __init__(self, real: Any, marker: str) -> None:
        self._real = real
        self.marker = marker
        self.writes: list[str] = []  # the batched write requests made, by operation

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.writes.append("TransactWriteItems")
        if self.marker and self.marker in json.dumps(kwargs):
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "Rate exceeded"}}
            raise ClientError(error, "TransactWriteItems")
        return self._real.transact_write_items(**kwargs)

    def batch_write_item(self, **kwargs: Any) -> Any:
        self.writes.append("BatchWriteItem")
        # DynamoDB hands back the writes a throttled partition refused, and writes the others.
        refused: dict[str, list[Any]] = {}
        passed: dict[str, list[Any]] = {}
        for table, writes in kwargs["RequestItems"].items():
            for write in writes:
                held = bool(self.marker) and self.marker in json.dumps(write)
                (refused if held else passed).setdefault(table, []).append(write)
        answer = self._real.batch_write_item(RequestItems=passed) if passed else {}
        return {**answer, "UnprocessedItems": refused}


class LocalDependencies(Dependencies):
    """The functions' composition root, with clients pointed at the emulators."""

    def __init__(self, settings: Settings, *, dynamodb: Any, endpoint: str) -> None:
        super().__init__(settings)
        self._dynamodb = dynamodb
        self._endpoint = endpoint

    def client(self, service: str) -> Any:
        if service == "dynamodb":
            return self._dynamodb
        return client(service, self._endpoint)


class Crash(BaseException):
    """The invocation dies mid-batch: the batch processor cannot catch it, nothing is acknowledged."""


@dataclass
class Ingest:
    deps: LocalDependencies
    store: DynamoDbStore
    db: ThrottlingClient

    def sqs(self, event: dict[str, Any]) -> dict[str, Any]:
        return handle_sqs_messages.lambda_handler(copy.deepcopy(event), LambdaContext(), deps=self.deps)

    def kafka(self, event: dict[str, Any]) -> dict[str, Any]:
        return handle_kafka_records.lambda_handler(copy.deepcopy(event), LambdaContext(), deps=self.deps)

    def events(self, uri: str) -> list[dict[str, Any]]:
        return self.store.list_events(uri, limit=1000, newest_first=False).items

    def quarantine(self) -> list[dict[str, Any]]:
        return self.store.list_quarantine(limit=1000).items


@dataclass
class LambdaContext:
    function_name: str = "assetflow-ingest"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-ingest"
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def ingest(
    dynamodb_local: DynamoDbLocal, dynamodb_client: Any, tmp_path: Path, catalog_document: dict[str, Any]
) -> Iterator[Ingest]:
    table = f"ingest-{uuid.uuid4().hex[:12]}"
    store = DynamoDbStore(dynamodb_client, table)
    store.create_table()
    catalog_path = tmp_path / "catalog.json"
    catalog_path.write_text(json.dumps(catalog_document))
    db = ThrottlingClient(dynamodb_client, marker="")
    settings = Settings(table_name=table, catalog_path=str(catalog_path), region=LOCAL_REGION)
    yield Ingest(LocalDependencies(settings, dynamodb=db, endpoint=dynamodb_local.endpoint), store, db)
    dynamodb_client.delete_table(TableName=table)


# --- SQS ----------------------------------------------------------------------------------------


def test_each_message_becomes_one_event_with_its_payload_and_facts(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries.json")

    assert ingest.sqs(event) == {"batchItemFailures": []}

    stored = ingest.events(DELIVERIES)
    assert len(stored) == 3
    first = next(e for e in stored if e["extra"]["message"]["message_id"] == event["Records"][0]["messageId"])
    record = event["Records"][0]
    identity = f"sqs:{record['eventSourceARN']}:{record['messageId']}"
    assert first["id"] == derive_id("ev", identity)
    assert first["source"] == {"type": "watcher", "watcher": "deliveries", "kind": "sqs"}
    assert first["extra"]["payload"] == json.loads(record["body"])
    assert first["extra"]["message"] == {
        "queue": "deliveries",
        "message_id": record["messageId"],
        "attributes": record["attributes"],
        "message_attributes": record["messageAttributes"],
    }
    assert first["partition_key"] is None
    # Timed by when SQS took the message in, which every delivery carries: its item is its own dedupe record.
    sent = datetime.fromtimestamp(int(record["attributes"]["SentTimestamp"]) / 1000, UTC)
    assert first["timestamp"] == format_timestamp(sent)
    assert ingest.store.find_dedupe(identity) is None


def test_a_redelivered_message_makes_no_second_event(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries.json")
    assert ingest.sqs(event) == {"batchItemFailures": []}
    before = ingest.events(DELIVERIES)

    # The same messages again (SQS at-least-once, or the batch response lost after the writes).
    for record in event["Records"]:
        record["attributes"]["ApproximateReceiveCount"] = "2"
    assert ingest.sqs(event) == {"batchItemFailures": []}

    assert ingest.events(DELIVERIES) == before


def test_first_deliveries_go_out_in_batched_puts_and_redeliveries_in_checked_ones(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries.json")

    def count() -> int:
        return next(a["event_count"] for a in ingest.store.list_assets().items if a["uri"] == DELIVERIES)

    # First deliveries (a receive count of 1): one BatchWriteItem, no transaction, no dedupe records.
    assert ingest.sqs(event) == {"batchItemFailures": []}
    assert ingest.db.writes == ["BatchWriteItem"]
    before = ingest.events(DELIVERIES)
    assert len(before) == 3 and count() == 3
    assert (
        ingest.store.find_dedupe(
            f"sqs:{event['Records'][0]['eventSourceARN']}:{event['Records'][0]['messageId']}"
        )
        is None
    )

    # A redelivery checks (a conditional transaction): its own item is found, nothing is written or counted.
    ingest.db.writes.clear()
    for record in event["Records"]:
        record["attributes"]["ApproximateReceiveCount"] = "2"
    assert ingest.sqs(event) == {"batchItemFailures": []}
    assert ingest.db.writes == ["TransactWriteItems"]
    assert ingest.events(DELIVERIES) == before and count() == 3

    # SQS's rare duplicate that still says "first delivery" puts the very same items again: no second event.
    for record in event["Records"]:
        record["attributes"]["ApproximateReceiveCount"] = "1"
    assert ingest.sqs(event) == {"batchItemFailures": []}
    assert ingest.events(DELIVERIES) == before


def test_a_crash_between_the_writes_and_the_response_makes_no_second_event(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries.json")
    real_put = ingest.store.put_events
    written: list[str] = []

    def put_two_then_crash(events: Any, **kwargs: Any) -> Any:
        # As if the batch's writes had been split and the invocation died after the first part.
        result = real_put(events[:2], **kwargs)
        written.extend(answer.event.id for answer in result)
        raise Crash

    # Given an invocation that dies after storing two of the three messages
    ingest.deps.store.put_events = put_two_then_crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        ingest.sqs(event)
    assert len(ingest.events(DELIVERIES)) == 2
    del ingest.deps.store.put_events

    # When SQS delivers the whole batch again
    assert ingest.sqs(event) == {"batchItemFailures": []}

    # Then every message has exactly one event, the first two unchanged
    stored = ingest.events(DELIVERIES)
    assert len(stored) == 3
    assert set(written) <= {e["id"] for e in stored}


def test_a_poison_message_is_quarantined_and_acknowledged(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries_poison.json")
    poison = event["Records"][1]

    assert ingest.sqs(event) == {"batchItemFailures": []}

    assert len(ingest.events(DELIVERIES)) == 2
    (kept,) = ingest.quarantine()
    assert kept["watcher"] == "deliveries"
    assert kept["identity"] == f"sqs:{poison['eventSourceARN']}:{poison['messageId']}"
    assert kept["reason"].startswith("the payload does not match the watcher's JSON Schema at $.")
    assert kept["body"] == poison["body"]
    assert kept["facts"]["message_id"] == poison["messageId"]
    assert kept["facts"]["attributes"]["ApproximateReceiveCount"] == "3"

    # Redelivered, the poison is neither quarantined twice nor failed.
    assert ingest.sqs(event) == {"batchItemFailures": []}
    assert len(ingest.quarantine()) == 1


def test_an_unknown_queue_is_quarantined_naming_it(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries.json")
    event["Records"] = event["Records"][:1]
    event["Records"][0]["eventSourceARN"] = "arn:aws:sqs:us-east-1:123456789012:nobody-watches-this"

    assert ingest.sqs(event) == {"batchItemFailures": []}

    (kept,) = ingest.quarantine()
    assert kept["watcher"] == UNKNOWN_WATCHER
    assert "nobody-watches-this" in kept["reason"]


def test_a_store_failure_fails_only_that_message(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries.json")
    unlucky = event["Records"][1]["messageId"]
    ingest.db.marker = unlucky

    assert ingest.sqs(event) == {"batchItemFailures": [{"itemIdentifier": unlucky}]}
    assert len(ingest.events(DELIVERIES)) == 2

    # SQS delivers the failed message again once the store recovers.
    ingest.db.marker = ""
    retry = {"Records": [event["Records"][1]]}
    assert ingest.sqs(retry) == {"batchItemFailures": []}
    assert len(ingest.events(DELIVERIES)) == 3


def test_a_fifo_failure_holds_back_the_rest_of_the_batch(ingest: Ingest) -> None:
    event = fixture_event("sqs_priority_deliveries_fifo.json")
    ids = [r["messageId"] for r in event["Records"]]
    ingest.db.marker = ids[1]

    assert ingest.sqs(event) == {"batchItemFailures": [{"itemIdentifier": i} for i in ids[1:]]}
    (stored,) = ingest.events(PRIORITY)
    assert stored["extra"]["message"]["message_id"] == ids[0]
    assert stored["extra"]["message"]["attributes"]["MessageGroupId"] == "acme-foods"

    ingest.db.marker = ""
    assert ingest.sqs({"Records": event["Records"][1:]}) == {"batchItemFailures": []}
    stored_ids = [e["extra"]["message"]["message_id"] for e in ingest.events(PRIORITY)]
    assert stored_ids == ids  # stored in queue order


def test_the_function_of_one_watcher_takes_its_generated_queue(ingest: Ingest) -> None:
    # On AWS the stack deploys one function per watcher (WATCHER_NAME) and names the queues it creates itself.
    event = fixture_event("sqs_deliveries.json")
    generated = "arn:aws:sqs:us-east-1:123456789012:assetflow-dev-IngestWatcherdeliveriesQueue4F2A-9xYz"
    for record in event["Records"]:
        record["eventSourceARN"] = generated
    settings = dataclasses.replace(ingest.deps.settings, watcher_name="deliveries")
    ingest.deps = LocalDependencies(settings, dynamodb=ingest.db, endpoint="http://unused")

    assert ingest.sqs(event) == {"batchItemFailures": []}

    stored = ingest.events(DELIVERIES)
    assert len(stored) == 3
    assert {e["source"]["watcher"] for e in stored} == {"deliveries"}
    assert {e["extra"]["message"]["queue"] for e in stored} == {generated.rsplit(":", 1)[1]}


# --- Kafka --------------------------------------------------------------------------------------


def test_an_msk_batch_keeps_keys_and_headers(ingest: Ingest) -> None:
    event = fixture_event("msk_sensor_readings.json")

    assert ingest.kafka(event) == {"batchItemFailures": []}

    stored = {
        (e["extra"]["message"]["partition"], e["extra"]["message"]["offset"]): e
        for e in ingest.events(READINGS)
    }
    assert sorted(stored) == [(0, 1041), (0, 1042), (1, 388)]
    first = stored[(0, 1041)]
    assert first["source"] == {"type": "watcher", "watcher": "sensor-readings", "kind": "kafka"}
    assert first["partition_key"] == "2026-11-21T10:05:00Z"
    assert first["extra"]["payload"]["sensor_id"] == "s-0017"
    assert first["extra"]["message"]["key"] == "s-0017"
    assert first["extra"]["message"]["headers"]["content-type"] == "application/json"
    assert first["extra"]["message"]["headers"]["traceparent"].startswith("00-0af7651916cd43dd")
    assert first["extra"]["message"]["timestamp"] == 1763719500123
    unkeyed = stored[(1, 388)]["extra"]["message"]
    assert unkeyed["key"] is None
    assert unkeyed["headers"]["schema-fingerprint"] == {
        "base64": base64.b64encode(b"\x9f\xe3\x00\x7a").decode()
    }

    # Redelivered (Lambda retries a batch as a whole): no second event.
    assert ingest.kafka(event) == {"batchItemFailures": []}
    assert len(ingest.events(READINGS)) == 3


def test_a_self_managed_batch_quarantines_what_it_cannot_use(ingest: Ingest) -> None:
    event = fixture_event("self_managed_kafka_sensor_readings.json")

    assert ingest.kafka(event) == {"batchItemFailures": []}

    (stored,) = ingest.events(READINGS)
    assert stored["extra"]["message"]["offset"] == 77
    assert stored["extra"]["message"]["headers"] == {"source": "plant-7"}
    reasons = {q["facts"]["offset"]: q["reason"] for q in ingest.quarantine()}
    assert reasons[78].startswith("the record's value is not UTF-8")
    assert reasons[79].startswith("filtered out")
    assert all(
        q["identity"].startswith("kafka:bootstrap:kafka-1.plant.example.com:9092,")
        for q in ingest.quarantine()
    )


def test_a_kafka_store_failure_fails_the_invocation_and_the_retry_completes_it(ingest: Ingest) -> None:
    event = fixture_event("msk_sensor_readings.json")
    ingest.db.marker = ":sensor-readings:0:1041:"

    with pytest.raises(handle_kafka_records.KafkaBatchRetryError):
        ingest.kafka(event)
    # Partition 0 is held back behind its failed record; partition 1 went ahead.
    assert [e["extra"]["message"]["partition"] for e in ingest.events(READINGS)] == [1]

    ingest.db.marker = ""
    assert ingest.kafka(event) == {"batchItemFailures": []}
    assert len(ingest.events(READINGS)) == 3


# --- a real queue -------------------------------------------------------------------------------


def _lambda_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """A received message in the shape the SQS event source mapping gives Lambda."""
    attributes = {}
    for name, value in message.get("MessageAttributes", {}).items():
        attributes[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": base64.b64encode(value["BinaryValue"]).decode()
            if "BinaryValue" in value
            else None,
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value["DataType"],
        }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message["Attributes"],
        "messageAttributes": attributes,
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": LOCAL_REGION,
    }


def _receive(sqs: Any, url: str, run: str, count: int) -> list[dict[str, Any]]:
    """Receive this test's messages (others' messages on the shared emulator are released at once)."""
    ours: list[dict[str, Any]] = []
    for _ in range(20):
        answer = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            VisibilityTimeout=30,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        for message in answer.get("Messages", []):
            if message.get("MessageAttributes", {}).get("run", {}).get("StringValue") == run:
                ours.append(message)
            else:
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
        if len(ours) >= count:
            return ours
    raise AssertionError(f"received {len(ours)} of {count} messages")


def test_a_real_sqs_round_trip(ingest: Ingest, moto_server: MotoServer, sqs_client: Any) -> None:
    url = sqs_client.create_queue(QueueName="deliveries")["QueueUrl"]
    arn = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    run = uuid.uuid4().hex
    bodies = [
        {"delivery_id": f"{run}-1", "supplier": "acme-foods", "files": ["s3://assetflow-demo/landing/a.csv"]},
        {"delivery_id": f"{run}-2", "supplier": "Not Valid", "files": ["s3://assetflow-demo/landing/b.csv"]},
        {
            "delivery_id": f"{run}-3",
            "supplier": "nordic-fish",
            "files": ["s3://assetflow-demo/landing/c.csv"],
        },
    ]
    for body in bodies:
        sqs_client.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(body),
            MessageAttributes={"run": {"DataType": "String", "StringValue": run}},
        )

    # Given the messages as the event source mapping hands them over
    messages = _receive(sqs_client, url, run, 3)
    event = {"Records": [_lambda_record(m, arn) for m in messages]}

    # When the function runs, and every message it did not fail is deleted (what the mapping does)
    response = ingest.sqs(event)
    assert response == {"batchItemFailures": []}

    # Then two events and one quarantined message
    stored = ingest.events(DELIVERIES)
    assert sorted(e["extra"]["payload"]["delivery_id"] for e in stored) == [f"{run}-1", f"{run}-3"]
    assert {e["extra"]["message"]["queue"] for e in stored} == {"deliveries"}
    assert all(int(e["extra"]["message"]["attributes"]["SentTimestamp"]) > 0 for e in stored)
    assert all(e["extra"]["message"]["message_attributes"]["run"]["stringValue"] == run for e in stored)
    (kept,) = ingest.quarantine()
    assert json.loads(kept["body"])["delivery_id"] == f"{run}-2"

    # And a redelivery (the visibility timeout ran out before the delete) changes nothing
    for message in messages:
        sqs_client.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    again = _receive(sqs_client, url, run, 3)
    assert {m["MessageId"] for m in again} == {m["MessageId"] for m in messages}
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}
    assert ingest.sqs({"Records": [_lambda_record(m, arn) for m in again]}) == {"batchItemFailures": []}
    assert len(ingest.events(DELIVERIES)) == 2
    assert len(ingest.quarantine()) == 1
    for message in again:
        sqs_client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


# --- extras stored by reference (the runs bucket on moto's S3) ------------------------------------


@pytest.fixture
def runs_bucket(moto_server: MotoServer, s3_client: Any) -> str:
    bucket = f"runs-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=bucket)
    return bucket


@pytest.fixture
def ingest_by_reference(ingest: Ingest, moto_server: MotoServer, runs_bucket: str) -> Ingest:
    settings = dataclasses.replace(ingest.deps.settings, runs_bucket=runs_bucket)
    ingest.deps = LocalDependencies(settings, dynamodb=ingest.db, endpoint=moto_server.endpoint)
    return ingest


def test_a_large_message_is_stored_by_reference_and_resolves_to_its_payload(
    ingest_by_reference: Ingest, s3_client: Any, runs_bucket: str
) -> None:
    from assetflow.core.limits import INLINE_EXTRA_BYTES
    from assetflow_job import AssetEvent as JobEvent
    from assetflow_job import ExtraResolver

    event = fixture_event("sqs_deliveries.json")
    big = json.loads(event["Records"][0]["body"])
    big["files"] = [f"s3://assetflow-demo/landing/deliveries/2026-11-21/é-{i:05}.csv" for i in range(2000)]
    event["Records"][0]["body"] = json.dumps(big)
    identity = f"sqs:{event['Records'][0]['eventSourceARN']}:{event['Records'][0]['messageId']}"

    assert ingest_by_reference.sqs(event) == {"batchItemFailures": []}

    stored = {e["id"]: e for e in ingest_by_reference.events(DELIVERIES)}
    assert len(stored) == 3
    by_reference = stored[derive_id("ev", identity)]
    ref = by_reference["extra"]["extra_ref"]
    assert ref["uri"].startswith(f"s3://{runs_bucket}/extras/{by_reference['id']}/")
    assert ref["bytes"] > INLINE_EXTRA_BYTES
    assert by_reference["extra"]["message"]["message_id"] == event["Records"][0]["messageId"]
    assert "payload" not in by_reference["extra"]
    # The small messages of the batch stay inline.
    assert sum("payload" in e["extra"] for e in stored.values()) == 2

    # The job reads the whole extra back, checked: the payload as sent, the facts as for an inline event.
    resolved = ExtraResolver(s3_client).event(JobEvent.from_dict(by_reference))
    assert resolved.payload == big
    assert resolved.extra["message"]["attributes"] == event["Records"][0]["attributes"]

    # A redelivery (receive count 2) makes no second event and no second object.
    for record in event["Records"]:
        record["attributes"]["ApproximateReceiveCount"] = "2"
    assert ingest_by_reference.sqs(event) == {"batchItemFailures": []}
    assert {e["id"]: e for e in ingest_by_reference.events(DELIVERIES)} == stored
    objects = s3_client.list_objects_v2(Bucket=runs_bucket, Prefix="extras/")["Contents"]
    assert [o["Key"] for o in objects] == [ref["uri"].split("/", 3)[3]]


def test_a_large_kafka_record_is_stored_by_reference(ingest_by_reference: Ingest, s3_client: Any) -> None:
    from assetflow_job import AssetEvent as JobEvent
    from assetflow_job import ExtraResolver

    event = fixture_event("msk_sensor_readings.json")
    record = event["records"]["sensor-readings-0"][0]
    reading = json.loads(base64.b64decode(record["value"]))
    reading["samples"] = list(range(20_000))
    record["value"] = base64.b64encode(json.dumps(reading).encode()).decode()

    assert ingest_by_reference.kafka(event) == {"batchItemFailures": []}

    (stored,) = [e for e in ingest_by_reference.events(READINGS) if "extra_ref" in e["extra"]]
    assert stored["extra"]["message"]["offset"] == record["offset"]
    assert stored["partition_key"] == reading["reading_time"]
    assert ExtraResolver(s3_client).event(JobEvent.from_dict(stored)).payload == reading
    assert ingest_by_reference.kafka(event) == {"batchItemFailures": []}
    assert len(ingest_by_reference.events(READINGS)) == 3


def test_without_a_runs_bucket_a_large_message_is_still_quarantined(ingest: Ingest) -> None:
    event = fixture_event("sqs_deliveries.json")
    event["Records"] = event["Records"][:1]
    big = json.loads(event["Records"][0]["body"])
    big["files"] = [f"s3://assetflow-demo/landing/{i:06}.csv" for i in range(12_000)]
    event["Records"][0]["body"] = json.dumps(big)

    assert ingest.sqs(event) == {"batchItemFailures": []}

    assert ingest.events(DELIVERIES) == []
    (kept,) = ingest.quarantine()
    assert kept["reason"].startswith("payload too large for an event")
    assert kept["facts"]["body"]["sha256"] == hashlib.sha256(event["Records"][0]["body"].encode()).hexdigest()
