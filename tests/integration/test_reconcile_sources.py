"""Watermarks and source reconciliation on the real parts: Tansu's consumer groups, moto's SQS, DynamoDB Local.

Ingest (the real handlers) records the newest offset per partition and the newest SQS sent time; a consumer
group committed past records nothing stored (a batch given up after its retries) is a gap, which
reconciliation finds, replays through the same ingest function, and then finds no more.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from assetflow import Asset, AssetWatcher, Catalog, KafkaTopic, SqsQueue
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.functions import handle_kafka_records, handle_sqs_messages
from assetflow.usecases.sources import SourceReconciler, UnknownSourceError
from assetflow_dev import LOCAL_CLIENT_KWARGS, LOCAL_REGION, DynamoDbLocal, MotoServer, TansuBroker, client
from assetflow_dev.pollers import kafka_event, lambda_context, sqs_record
from assetflow_dev.resources import LOCAL_MSK_ARN
from assetflow_dev.sources import KafkaProbe, SqsDeadLetterProbe

pytestmark = pytest.mark.integration

READINGS = "x-test://readings"
ORDERS = "x-test://orders"


@pytest.fixture
def table(dynamodb_client: Any) -> Iterator[str]:
    name = f"sources-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(dynamodb_client, name).create_table()
    yield name
    dynamodb_client.delete_table(TableName=name)


def deps_for(
    table: str, tmp_path: Path, dynamodb: DynamoDbLocal, watcher: str, *assets: Asset
) -> Dependencies:
    path = tmp_path / f"catalog-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(Catalog.build(list(assets)).to_document()))
    settings = Settings(table_name=table, catalog_path=str(path), region=LOCAL_REGION, watcher_name=watcher)
    return Dependencies(
        settings,
        session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
        endpoints={"dynamodb": dynamodb.endpoint},
    )


class Invoker:
    """The ingest function, invoked as the runtime's invoke endpoint would: (response, error)."""

    def __init__(self, handler: Any, deps: Dependencies) -> None:
        self.handler, self.deps, self.calls = handler, deps, 0

    def __call__(self, function: str, event: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        self.calls += 1
        return self.handler(event, lambda_context(function), deps=self.deps), None


def produce(broker: TansuBroker, topic: str, n: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.endpoint)
    try:
        for i in range(n):
            producer.send(topic, value=json.dumps({"n": i}).encode(), partition=0)
        producer.flush()
    finally:
        producer.close()


def read(broker: TansuBroker, topic: str, first: int, last: int) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.endpoint, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, first)
        records: list[Any] = []
        while len(records) < last - first + 1:
            records += consumer.poll(timeout_ms=2000).get(tp, [])
        return [r for r in records if r.offset <= last]
    finally:
        consumer.close()


def commit(broker: TansuBroker, group: str, topic: str, offset: int) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.endpoint, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def test_a_kafka_gap_past_the_recorded_offsets_is_found_replayed_once_and_then_closed(
    kafka_broker: TansuBroker, dynamodb_local: DynamoDbLocal, table: str, tmp_path: Path
) -> None:
    topic, group = f"readings-{uuid.uuid4().hex[:8]}", f"assetflow.{uuid.uuid4().hex[:6]}"
    kafka_broker.create_topics([topic], partitions=1)
    asset = Asset(READINGS, watchers=[AssetWatcher("readings", KafkaTopic(topic))])
    deps = deps_for(table, tmp_path, dynamodb_local, "readings", asset)
    invoke = Invoker(handle_kafka_records.lambda_handler, deps)

    def ingest(first: int, last: int) -> None:
        event = kafka_event(
            read(kafka_broker, topic, first, last),
            event_source="aws:kafka",
            event_source_arn=LOCAL_MSK_ARN,
            bootstrap_servers=kafka_broker.endpoint,
        )
        invoke("ingest-readings", event)

    # Given 8 records: ingest recorded offsets 0-1 and 4-5 (the batch 2-3 was given up after its retries),
    # and the group committed through offset 6 (the mapping moved on; 6 itself was never recorded)
    produce(kafka_broker, topic, 8)
    ingest(0, 1)
    ingest(4, 5)
    commit(kafka_broker, group, topic, 7)
    probe = KafkaProbe(
        watcher="readings",
        topic=topic,
        group_id=group,
        bootstrap_servers=kafka_broker.endpoint,
        function="ingest-readings",
        invoke=invoke,
        event_source_arn=LOCAL_MSK_ARN,
    )
    (mark,) = deps.store.watermarks(probe.source)
    assert (mark.partition, mark.position, mark.contiguous) == ("0", 5, 1)
    reconciler = SourceReconciler(watermarks=deps.store, probes=[probe])

    # When reconciled dry: the gap from the contiguous mark to the committed offset is found, nothing replayed
    dry = reconciler.reconcile(dry_run=True)
    (finding,) = dry.sources[0].findings
    assert (finding["kind"], finding["first"], finding["last"], finding["count"]) == ("kafka-gap", 2, 6, 5)
    assert dry.replayed == 0 and len(deps.store.list_events(READINGS).items) == 4

    # When reconciled: offsets 2-6 go through ingest (4-5 are recognised), and the gap is closed
    done = reconciler.reconcile()
    assert (done.found, done.replayed, done.errors) == (5, 5, [])
    offsets = sorted(e["extra"]["message"]["offset"] for e in deps.store.list_events(READINGS).items)
    assert offsets == [0, 1, 2, 3, 4, 5, 6]  # offset 7 was never committed: the mapping still owns it
    (mark,) = deps.store.watermarks(probe.source)
    assert (mark.position, mark.contiguous) == (6, 6)
    assert reconciler.reconcile().found == 0
    # A replay of what was recorded meanwhile records nothing twice
    assert probe.replay(finding) == 5
    assert len(deps.store.list_events(READINGS).items) == 7
    with pytest.raises(UnknownSourceError, match="readings"):
        reconciler.reconcile(source="nope")


def test_sqs_dead_letters_are_counted_and_replayed_through_ingest(
    moto_server: MotoServer, dynamodb_local: DynamoDbLocal, table: str, tmp_path: Path
) -> None:
    sqs = client("sqs", moto_server.endpoint)
    name = f"orders-{uuid.uuid4().hex[:6]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    asset = Asset(ORDERS, watchers=[AssetWatcher("orders", SqsQueue(name))])
    deps = deps_for(table, tmp_path, dynamodb_local, "orders", asset)
    invoke = Invoker(handle_sqs_messages.lambda_handler, deps)
    # Given one message ingested (the watermark: its sent time) and two left in the dead-letter queue
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"order": 0}))
    received = sqs.receive_message(QueueUrl=url, AttributeNames=["All"], MessageAttributeNames=["All"])
    invoke("ingest-orders", {"Records": [sqs_record(m, queue_arn=arn) for m in received["Messages"]]})
    for n in (1, 2):
        sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"order": n}))
    probe = SqsDeadLetterProbe(
        watcher="orders", queue_arn=arn, dead_letter_url=dlq, function="ingest-orders", invoke=invoke, sqs=sqs
    )
    (mark,) = deps.store.watermarks(probe.source)
    assert mark.position == int(received["Messages"][0]["Attributes"]["SentTimestamp"])
    reconciler = SourceReconciler(watermarks=deps.store, probes=[probe])
    (finding,) = reconciler.reconcile(dry_run=True).sources[0].findings
    assert (finding["kind"], finding["count"], finding["recorded_through_ms"]) == (
        "dead-letters",
        2,
        mark.position,
    )
    done = reconciler.reconcile()
    assert (done.found, done.replayed) == (2, 2)
    assert sorted(e["extra"]["payload"]["order"] for e in deps.store.list_events(ORDERS).items) == [0, 1, 2]
    assert reconciler.reconcile().found == 0


def test_an_sqs_watermark_is_written_once_a_second_per_instance_and_a_kafka_one_every_batch(
    dynamodb_client: Any, table: str
) -> None:
    # Given one ingest instance's store
    from datetime import UTC, datetime

    from assetflow.core.watermarks import Watermark

    store = DynamoDbStore(dynamodb_client, table)
    queue, topic = "sqs:arn:aws:sqs:us-east-1:000000000000:orders", "kafka:local:orders"
    now = datetime.now(UTC)

    def advance(*marks: Watermark) -> None:
        store.advance_watermarks(list(marks), now=now)

    def position(source: str) -> int:
        (mark,) = store.watermarks(source)
        return mark.position

    # When a burst's batches come within a second of each other
    for n in (1, 2, 3):
        advance(Watermark(queue, "", 1000 + n, f"m{n}"), Watermark(topic, "0", n, f"k{n}", first=n))

    # Then the queue's watermark (a hint) was written by the first only, the topic's (gaps are read from it) by all
    assert position(queue) == 1001
    assert position(topic) == 3
    # and the queue's next batch a second later writes it again
    store.sqs_watermark_seconds = 0.0
    advance(Watermark(queue, "", 1004, "m4"))
    assert position(queue) == 1004
