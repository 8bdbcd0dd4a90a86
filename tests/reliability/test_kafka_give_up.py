"""Kafka never commits past a record that is neither stored nor kept (the local poller on Tansu).

On AWS the mapping's retries (bisecting to the failing record, bounded by the maximum record age) end in its
on-failure destination, the failures bucket, with the records themselves; only then does Lambda move on.
Locally the poller does the same: it commits past a failing record only once its on-failure destination took
the record (with its payload), and without a destination, or while the destination itself fails, it never
does: the record is retried until it is stored.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from assetflow_dev import TansuBroker
from assetflow_dev.pollers import KafkaPoller

pytestmark = pytest.mark.integration


def produce(broker: TansuBroker, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.endpoint)
    try:
        for value in values:
            producer.send(topic, value=value, partition=0)
        producer.flush()
    finally:
        producer.close()


def committed(broker: TansuBroker, group: str, topic: str) -> int | None:
    from kafka import TopicPartition

    with broker.admin() as admin:
        offsets = admin.list_group_offsets({group: [TopicPartition(topic, 0)]})[group]
    found = [meta.offset for meta in offsets.values() if meta.offset >= 0]
    return found[0] if found else None


def eventually(check: Callable[[], Any], *, what: str, timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Store:
    """An ingest handler whose store fails while ``down``: what it stored, and how often it was asked."""

    def __init__(self) -> None:
        self.down = True
        self.stored: list[bytes] = []
        self.attempts = 0
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.lock:
            self.attempts += 1
            if self.down:
                raise RuntimeError("the store is throttling (injected)")
            for records in event["records"].values():
                for record in records:
                    value = base64.b64decode(record["value"])
                    if value not in self.stored:
                        self.stored.append(value)
        return {"batchItemFailures": []}


@pytest.fixture
def topic(kafka_broker: TansuBroker) -> str:
    name = f"giveup-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([name])
    return name


@pytest.fixture
def pollers() -> Iterator[list[KafkaPoller]]:
    started: list[KafkaPoller] = []
    yield started
    for poller in started:
        poller.stop()


def poller(broker: TansuBroker, topic: str, group: str, store: Store, **kwargs: Any) -> KafkaPoller:
    return KafkaPoller(
        name=group,
        bootstrap_servers=broker.endpoint,
        topics=[topic],
        group_id=group,
        handler=store,
        function_name="ingest",
        retry_attempts=2,
        **kwargs,
    )


def test_without_a_destination_a_failing_record_is_retried_never_committed_past(
    kafka_broker: TansuBroker, topic: str, pollers: list[KafkaPoller]
) -> None:
    store, group = Store(), f"g-{uuid.uuid4().hex[:8]}"
    produce(kafka_broker, topic, [b"r0", b"r1"])
    pollers.append(poller(kafka_broker, topic, group, store))
    pollers[0].start()

    # Well past its retry attempts (2), nothing is committed and nothing given up
    eventually(lambda: store.attempts >= 8, what="eight attempts")
    assert committed(kafka_broker, group, topic) is None
    assert pollers[0].stats.dead_lettered == 0

    # Once the store is back the records are stored, and only then committed past
    store.down = False
    eventually(lambda: committed(kafka_broker, group, topic) == 2, what="the commit")
    assert store.stored == [b"r0", b"r1"]


def test_a_record_is_committed_past_only_once_its_destination_took_it_with_its_payload(
    kafka_broker: TansuBroker, topic: str, pollers: list[KafkaPoller]
) -> None:
    store, group = Store(), f"g-{uuid.uuid4().hex[:8]}"
    kept: list[dict[str, Any]] = []
    destination_up = threading.Event()

    def destination(record: dict[str, Any]) -> None:
        if not destination_up.is_set():
            raise ConnectionError("the failures bucket is unreachable (injected)")
        kept.append(record)

    produce(kafka_broker, topic, [b"poison"])
    pollers.append(poller(kafka_broker, topic, group, store, on_failure=destination))
    pollers[0].start()

    # While the destination fails too, the record is neither stored nor kept: it is not committed past
    eventually(lambda: store.attempts >= 6, what="the retries and failed deliveries")
    assert committed(kafka_broker, group, topic) is None and kept == []

    # When the destination takes it, with the records themselves, the poller moves on
    destination_up.set()
    eventually(lambda: kept, what="the kept batch")
    eventually(lambda: committed(kafka_broker, group, topic) == 1, what="the commit past the kept record")
    (record,) = kept
    payload = json.loads(record["payload"])
    (records,) = payload["records"].values()
    assert [base64.b64decode(r["value"]) for r in records] == [b"poison"]
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
