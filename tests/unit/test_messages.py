"""Ingest translation: SQS messages and Kafka records into asset events or quarantine decisions."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assetflow import (
    Asset,
    AssetWatcher,
    Catalog,
    DefinitionError,
    KafkaTopic,
    MskCluster,
    SelfManagedKafka,
    SqsQueue,
)
from assetflow.adapters.messages import UNKNOWN_WATCHER, KafkaSource, MessageTranslator, decode_payload
from assetflow.core.errors import StoreUnavailableError
from assetflow.core.events import AssetEvent, derive_id
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.limits import MAX_MESSAGE_EXTRA_BYTES as MAX_EXTRA_BYTES
from assetflow.core.limits import MAX_PAYLOAD_DEPTH, MAX_QUARANTINE_BODY_BYTES
from assetflow.ports import Accepted, Quarantined
from assetflow.usecases.ingest import Ingest
from tests.unit.fakes import own_key, put_events_one_by_one

NOW = datetime(2026, 11, 21, 10, 15, 0, 123456, tzinfo=UTC)
REGION_ACCOUNT = "us-east-1:123456789012"
ORDERS_ARN = f"arn:aws:sqs:{REGION_ACCOUNT}:orders"
FIFO_ARN = f"arn:aws:sqs:{REGION_ACCOUNT}:payments.fifo"
LEGACY_ARN = "arn:aws:sqs:eu-west-1:210987654321:legacy-feed"
MSK_A = "arn:aws:kafka:us-east-1:123456789012:cluster/plant-a/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-1"
MSK_B = "arn:aws:kafka:us-east-1:123456789012:cluster/plant-b/1b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-2"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "events"

ORDER_SCHEMA = {
    "type": "object",
    "required": ["order_id", "amount"],
    "properties": {
        "order_id": {"type": "string", "minLength": 1},
        "amount": {"type": "number", "minimum": 0},
    },
}


def catalog(*assets: Asset) -> Catalog:
    return Catalog.build(assets)


def default_catalog() -> Catalog:
    return catalog(
        Asset("x-shop://orders", watchers=[AssetWatcher("orders", SqsQueue("orders", schema=ORDER_SCHEMA))]),
        Asset(
            "x-shop://payments",
            watchers=[AssetWatcher("payments", SqsQueue("payments.fifo", partition_key_field="meta.day"))],
        ),
        Asset("x-shop://legacy", watchers=[AssetWatcher("legacy", SqsQueue(arn=LEGACY_ARN))]),
        Asset(
            "x-shop://returns",
            watchers=[AssetWatcher("returns", SqsQueue("returns", filter={"kind": ["return"]}))],
        ),
        Asset(
            "x-iot://readings",
            watchers=[
                AssetWatcher(
                    "readings",
                    KafkaTopic(
                        "readings",
                        filter={"sensor_id": [{"prefix": "s-"}]},
                        schema={"type": "object", "required": ["sensor_id"]},
                        partition_key_field="day",
                    ),
                )
            ],
        ),
        Asset("x-iot://raw", watchers=[AssetWatcher("raw", KafkaTopic("raw"))]),
    )


@pytest.fixture(scope="module")
def translator() -> MessageTranslator:
    return MessageTranslator(default_catalog())


def sqs(body: str, *, arn: str = ORDERS_ARN, message_id: str = "m-1", **attributes: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": "AQEB-handle",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1763719200123", **attributes},
        "messageAttributes": {"trace-id": {"stringValue": "abc", "dataType": "String"}},
        "md5OfBody": "0",
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": "us-east-1",
    }


def kafka(
    value: bytes | None,
    *,
    topic: str = "readings",
    partition: int | str = 0,
    offset: int = 7,
    key: bytes | None = b"s-1",
    headers: list[dict[str, Any]] | None = None,
    timestamp: int = 1763719200123,
) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": timestamp,
        "timestampType": "CREATE_TIME",
        "key": None if key is None else base64.b64encode(key).decode(),
        "value": None if value is None else base64.b64encode(value).decode(),
        "headers": headers if headers is not None else [],
    }


MSK = KafkaSource(event_source="aws:kafka", event_source_arn=MSK_A)


def order(**fields: Any) -> str:
    return json.dumps({"order_id": "o-1", "amount": 12.5, **fields})


def reading(**fields: Any) -> bytes:
    return json.dumps({"sensor_id": "s-1", "day": "2026-11-21", **fields}).encode()


def accepted(outcome: Any) -> Accepted:
    assert isinstance(outcome, Accepted), outcome
    return outcome


def quarantined(outcome: Any, code: str) -> Quarantined:
    assert isinstance(outcome, Quarantined), outcome
    assert outcome.code == code, outcome.reason
    return outcome


# --- bodies -------------------------------------------------------------------------------------


def test_an_sqs_message_becomes_an_event_of_the_watched_asset(translator: MessageTranslator) -> None:
    result = accepted(translator.from_sqs(sqs(order()), now=NOW))

    identity = f"sqs:{ORDERS_ARN}:m-1"
    assert result.identity == identity
    assert result.watcher == "orders"
    assert result.event.to_json() == {
        "asset": "x-shop://orders",
        "id": derive_id("ev", identity),
        # When SQS took the message in (SentTimestamp), which every delivery carries: not the ingest time.
        "timestamp": "2025-11-21T10:00:00.123000Z",
        "extra": {
            "payload": {"order_id": "o-1", "amount": 12.5},
            "message": {
                "queue": "orders",
                "message_id": "m-1",
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1763719200123"},
                "message_attributes": {"trace-id": {"stringValue": "abc", "dataType": "String"}},
            },
        },
        "source": {"type": "watcher", "watcher": "orders", "kind": "sqs"},
        "partition_key": None,
    }


@pytest.mark.parametrize(
    ("body", "payload"),
    [
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ("[1, 2]", [1, 2]),
        ("42", 42),
        ('"quoted"', "quoted"),
        ("null", None),
        ("  true \n", True),
        ("plain text, not JSON", "plain text, not JSON"),
        ('{"broken": ', '{"broken": '),
        ("NaN", "NaN"),
        ('{"x": Infinity}', '{"x": Infinity}'),
        ('{"x": 1e400}', '{"x": 1e400}'),
        ("", ""),
        ("héllo ✓", "héllo ✓"),
    ],
)
def test_a_body_is_json_when_it_parses_else_text(body: str, payload: Any) -> None:
    assert decode_payload(body) == payload
    result = accepted(MessageTranslator(default_catalog()).from_sqs(sqs(body, arn=LEGACY_ARN), now=NOW))
    assert result.event.to_json()["extra"]["payload"] == payload


def test_a_kafka_value_is_base64_then_utf8_then_json(translator: MessageTranslator) -> None:
    event = accepted(translator.from_kafka(kafka("plain ✓".encode(), topic="raw"), source=MSK, now=NOW)).event
    assert event.extra["payload"] == "plain ✓"
    event = accepted(translator.from_kafka(kafka(b'{"n": 1}', topic="raw"), source=MSK, now=NOW)).event
    assert event.extra["payload"] == {"n": 1}


def test_an_invalid_utf8_value_is_quarantined_with_its_bytes_as_base64(translator: MessageTranslator) -> None:
    raw = b"\xff\xfe\x00binary"
    result = quarantined(translator.from_kafka(kafka(raw, topic="raw"), source=MSK, now=NOW), "not-utf8")

    assert "not UTF-8" in result.reason
    assert base64.b64decode(result.body) == raw
    assert result.facts["body"]["encoding"] == "base64"
    assert result.facts["body"]["bytes"] == len(raw)
    assert result.watcher == "raw"


def test_a_value_that_is_not_base64_is_quarantined(translator: MessageTranslator) -> None:
    record = kafka(b"x", topic="raw") | {"value": "%%% not base64 %%%"}
    result = quarantined(translator.from_kafka(record, source=MSK, now=NOW), "not-base64")
    assert result.body == "%%% not base64 %%%"


def test_a_tombstone_has_a_null_payload(translator: MessageTranslator) -> None:
    event = accepted(translator.from_kafka(kafka(None, topic="raw"), source=MSK, now=NOW)).event
    assert event.extra["payload"] is None
    # A watcher with a schema for objects rejects it, with the reason.
    quarantined(translator.from_kafka(kafka(None), source=MSK, now=NOW), "filter")


def test_payloads_nested_too_deeply_are_quarantined(translator: MessageTranslator) -> None:
    deep = "[" * (MAX_PAYLOAD_DEPTH + 1) + "]" * (MAX_PAYLOAD_DEPTH + 1)
    result = quarantined(translator.from_sqs(sqs(deep, arn=LEGACY_ARN), now=NOW), "too-deep")
    assert str(MAX_PAYLOAD_DEPTH) in result.reason
    # At the limit, filters and schema validation still run (no recursion error).
    nested: Any = {"order_id": "o", "amount": 1}
    for _ in range(MAX_PAYLOAD_DEPTH - 2):
        nested = {"order_id": "o", "amount": 1, "x": nested}
    accepted(translator.from_sqs(sqs(json.dumps(nested)), now=NOW))


def test_json_too_deep_for_the_parser_is_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert decode_payload(deep) == deep


# --- filters and schemas ------------------------------------------------------------------------


def test_a_filter_lets_matching_messages_through(translator: MessageTranslator) -> None:
    returns = f"arn:aws:sqs:{REGION_ACCOUNT}:returns"
    accepted(translator.from_sqs(sqs('{"kind": "return", "id": 1}', arn=returns), now=NOW))

    result = quarantined(translator.from_sqs(sqs('{"kind": "order"}', arn=returns), now=NOW), "filter")
    assert result.reason == "filtered out: the payload does not match the watcher's filter on 'kind'"
    assert result.watcher == "returns"
    assert result.body == '{"kind": "order"}'

    result = quarantined(translator.from_sqs(sqs("kind=return", arn=returns), now=NOW), "filter")
    assert "needs a JSON object payload, got text" in result.reason


def test_a_schema_failure_says_where_and_what(translator: MessageTranslator) -> None:
    result = quarantined(translator.from_sqs(sqs(order(amount=-3)), now=NOW), "schema")
    assert result.reason == (
        "the payload does not match the watcher's JSON Schema at $.amount: -3 is less than the minimum of 0"
    )

    result = quarantined(translator.from_sqs(sqs('{"amount": "x"}'), now=NOW), "schema")
    assert result.reason.startswith("the payload does not match the watcher's JSON Schema at $")
    assert result.reason.endswith("(and 1 more)")


def test_schema_messages_are_truncated(translator: MessageTranslator) -> None:
    result = quarantined(translator.from_sqs(sqs(order(order_id=["x" * 50_000])), now=NOW), "schema")
    assert len(result.reason) < 700
    assert "$.order_id" in result.reason


def test_an_invalid_schema_is_a_definition_error_when_the_translator_is_built() -> None:
    bad = catalog(
        Asset("x-a://a", watchers=[AssetWatcher("bad-one", SqsQueue("a", schema={"type": "nope"}))])
    )
    with pytest.raises(DefinitionError, match=r"watcher 'bad-one' schema: invalid JSON Schema at \$\.type"):
        MessageTranslator(bad)


def test_a_schema_that_cannot_be_applied_quarantines_with_the_reason() -> None:
    remote = {"$ref": "https://schemas.example.com/order.json"}
    translator = MessageTranslator(
        catalog(Asset("x-a://a", watchers=[AssetWatcher("remote", SqsQueue("a", schema=remote))]))
    )
    arn = f"arn:aws:sqs:{REGION_ACCOUNT}:a"
    result = quarantined(translator.from_sqs(sqs("{}", arn=arn), now=NOW), "schema-unusable")
    assert "Unresolvable" in result.reason


def test_a_schema_names_its_draft_or_gets_2020_12() -> None:
    # prefixItems exists from Draft 2020-12: by default it applies.
    schema = {"type": "array", "prefixItems": [{"type": "integer"}]}
    translator = MessageTranslator(
        catalog(Asset("x-a://a", watchers=[AssetWatcher("tuple", SqsQueue("a", schema=schema))]))
    )
    arn = f"arn:aws:sqs:{REGION_ACCOUNT}:a"
    accepted(translator.from_sqs(sqs("[1, 2]", arn=arn), now=NOW))
    quarantined(translator.from_sqs(sqs('["x"]', arn=arn), now=NOW), "schema")


# --- partition keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("day", "key"),
    [("2026-11-21", "2026-11-21"), (20261121, "20261121"), (1.5, "1.5"), (True, "true"), (" d ", " d ")],
)
def test_the_partition_key_field_gives_the_key(translator: MessageTranslator, day: Any, key: str) -> None:
    body = json.dumps({"meta": {"day": day}})
    event = accepted(translator.from_sqs(sqs(body, arn=FIFO_ARN), now=NOW)).event
    assert event.partition_key == key


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ({}, "is missing or null"),
        ({"day": None}, "is missing or null"),
        ({"day": ""}, "is empty"),
        ({"day": "   "}, "is empty"),
        ({"day": {"y": 2026}}, "is an object; a partition key must be a string or a number"),
        ({"day": [1]}, "is an array"),
        ({"day": "d" * 257}, "is 257 bytes long"),
        ({"day": "é" * 129}, "is 258 bytes long"),
        ({"day": "../../x"}, "must not contain '/'"),
        ({"day": "a\nb"}, "must not contain control characters"),
    ],
)
def test_without_a_usable_partition_key_the_message_is_quarantined(
    translator: MessageTranslator, meta: dict[str, Any], problem: str
) -> None:
    result = translator.from_sqs(sqs(json.dumps({"meta": meta}), arn=FIFO_ARN), now=NOW)
    result = quarantined(result, "partition-key")
    assert result.reason.startswith("the payload's 'meta.day' (the watcher's partition_key_field)")
    assert problem in result.reason


def test_a_lone_surrogate_cannot_be_a_partition_key(translator: MessageTranslator) -> None:
    result = translator.from_sqs(sqs('{"meta": {"day": "\\ud800"}}', arn=FIFO_ARN), now=NOW)
    assert "not valid Unicode" in quarantined(result, "partition-key").reason


# --- identities ---------------------------------------------------------------------------------


def test_the_same_message_always_gets_the_same_event_id(translator: MessageTranslator) -> None:
    first = accepted(translator.from_sqs(sqs(order()), now=NOW))
    again = accepted(
        translator.from_sqs(sqs(order(), ApproximateReceiveCount="2"), now=NOW + timedelta(hours=1))
    )
    assert (again.identity, again.event.id) == (first.identity, first.event.id)

    other = accepted(translator.from_sqs(sqs(order(), message_id="m-2"), now=NOW))
    assert other.event.id != first.event.id


def test_a_message_id_is_scoped_by_its_queue(translator: MessageTranslator) -> None:
    # The name-based watcher claims its queue in every account and region; the identity keeps them apart.
    elsewhere = "arn:aws:sqs:eu-west-1:210987654321:orders"
    here = accepted(translator.from_sqs(sqs(order()), now=NOW))
    there = accepted(translator.from_sqs(sqs(order(), arn=elsewhere), now=NOW))
    assert there.watcher == "orders"
    assert there.identity == f"sqs:{elsewhere}:m-1"
    assert there.event.id != here.event.id


def test_kafka_identity_is_cluster_topic_partition_offset_and_timestamp(
    translator: MessageTranslator,
) -> None:
    result = accepted(translator.from_kafka(kafka(reading()), source=MSK, now=NOW))
    assert result.identity == f"kafka:{MSK_A}:readings:0:7:1763719200123"
    assert result.event.id == derive_id("ev", result.identity)

    # A partition spelled "0" (some Lambda samples do) is the same record.
    same = accepted(translator.from_kafka(kafka(reading(), partition="0"), source=MSK, now=NOW))
    assert same.event.id == result.event.id
    # Another cluster, another offset, or a re-created topic (offsets restart, timestamps differ): new records.
    other_cluster = KafkaSource(event_source="aws:kafka", event_source_arn=MSK_B)
    for record, source in [
        (kafka(reading()), other_cluster),
        (kafka(reading(), offset=8), MSK),
        (kafka(reading(), timestamp=1763800000000), MSK),
    ]:
        assert accepted(translator.from_kafka(record, source=source, now=NOW)).event.id != result.event.id


def test_self_managed_clusters_are_identified_by_their_bootstrap_servers() -> None:
    event = json.loads((FIXTURES / "self_managed_kafka_sensor_readings.json").read_text())
    source = KafkaSource.from_event(event)
    assert source.event_source == "SelfManagedKafka"
    assert source.event_source_arn is None
    assert source.cluster_id == "bootstrap:kafka-1.plant.example.com:9092,kafka-2.plant.example.com:9092"


# --- which watcher ------------------------------------------------------------------------------


def test_fifo_and_standard_queues_by_name(translator: MessageTranslator) -> None:
    body = json.dumps({"meta": {"day": "2026-11-21"}})
    result = accepted(
        translator.from_sqs(sqs(body, arn=FIFO_ARN, MessageGroupId="g-1", SequenceNumber="1"), now=NOW)
    )
    assert result.watcher == "payments"
    assert result.event.extra["message"]["queue"] == "payments.fifo"
    assert result.event.extra["message"]["attributes"]["MessageGroupId"] == "g-1"
    # "payments" (standard) is not "payments.fifo".
    standard = f"arn:aws:sqs:{REGION_ACCOUNT}:payments"
    quarantined(translator.from_sqs(sqs(body, arn=standard), now=NOW), "unknown-source")


def test_a_watcher_given_by_arn_claims_only_that_queue(translator: MessageTranslator) -> None:
    assert accepted(translator.from_sqs(sqs("x", arn=LEGACY_ARN), now=NOW)).watcher == "legacy"
    other_account = "arn:aws:sqs:eu-west-1:111111111111:legacy-feed"
    quarantined(translator.from_sqs(sqs("x", arn=other_account), now=NOW), "unknown-source")


def test_a_function_serving_one_watcher_takes_its_queue_whatever_its_name() -> None:
    # The stack deploys one function per watcher, and the queues it creates get generated names.
    generated = f"arn:aws:sqs:{REGION_ACCOUNT}:assetflow-dev-IngestOrdersQueue1A2B3C-Xy9"
    translator = MessageTranslator(default_catalog(), watcher="orders")
    assert accepted(translator.from_sqs(sqs(order(), arn=generated), now=NOW)).watcher == "orders"
    # A queue another watcher names by ARN stays that watcher's.
    assert accepted(translator.from_sqs(sqs("x", arn=LEGACY_ARN), now=NOW)).watcher == "legacy"

    kafka_function = MessageTranslator(default_catalog(), watcher="raw")
    elsewhere = KafkaSource("SelfManagedKafka", None, ("b-1.other:9092",))
    assert (
        accepted(kafka_function.from_kafka(kafka(b"1", topic="raw"), source=elsewhere, now=NOW)).watcher
        == "raw"
    )
    # A topic of another watcher is matched as usual; a topic nobody watches is still unknown.
    assert accepted(kafka_function.from_kafka(kafka(reading()), source=MSK, now=NOW)).watcher == "readings"
    quarantined(kafka_function.from_kafka(kafka(b"1", topic="nobody"), source=MSK, now=NOW), "unknown-source")


def test_a_function_serving_an_unknown_watcher_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="serves watcher 'gone'"):
        MessageTranslator(default_catalog(), watcher="gone")


def test_unknown_sources_are_quarantined_naming_the_source(translator: MessageTranslator) -> None:
    arn = f"arn:aws:sqs:{REGION_ACCOUNT}:nobody-watches-this"
    result = quarantined(translator.from_sqs(sqs("hello", arn=arn), now=NOW), "unknown-source")
    assert result.watcher == UNKNOWN_WATCHER
    assert result.reason == f"no watcher watches SQS queue {arn}"
    assert result.body == "hello"
    assert result.identity == f"sqs:{arn}:m-1"

    result = quarantined(
        translator.from_kafka(kafka(b"x", topic="nobody"), source=MSK, now=NOW), "unknown-source"
    )
    assert result.reason == f"no watcher watches Kafka topic 'nobody' on {MSK_A}"
    assert result.facts["key"] == "s-1"

    record = sqs("hello")
    del record["eventSourceARN"]
    assert "(no eventSourceARN)" in quarantined(translator.from_sqs(record, now=NOW), "unknown-source").reason


def test_kafka_watchers_are_chosen_by_cluster() -> None:
    translator = MessageTranslator(
        catalog(
            Asset("x-a://a", watchers=[AssetWatcher("on-a", KafkaTopic("t", cluster=MskCluster(MSK_A)))]),
            Asset(
                "x-b://b",
                watchers=[
                    AssetWatcher("on-b", KafkaTopic("t", cluster=SelfManagedKafka(("k1:9092", "k2:9092"))))
                ],
            ),
            Asset("x-d://d", watchers=[AssetWatcher("on-default", KafkaTopic("t"))]),
        )
    )

    def watcher(source: KafkaSource) -> str:
        return accepted(translator.from_kafka(kafka(b"1", topic="t"), source=source, now=NOW)).watcher

    assert watcher(MSK) == "on-a"
    assert watcher(KafkaSource("SelfManagedKafka", None, ("k2:9092", "k3:9092"))) == "on-b"
    assert watcher(KafkaSource("aws:kafka", MSK_B)) == "on-default"


def test_a_topic_watched_on_one_cluster_only_is_that_watchers_anywhere() -> None:
    # The local runtime delivers every watched topic from its own broker.
    translator = MessageTranslator(
        catalog(Asset("x-a://a", watchers=[AssetWatcher("on-a", KafkaTopic("t", cluster=MskCluster(MSK_A)))]))
    )
    local = KafkaSource("SelfManagedKafka", None, ("127.0.0.1:19092",))
    assert accepted(translator.from_kafka(kafka(b"1", topic="t"), source=local, now=NOW)).watcher == "on-a"


def test_malformed_records_are_quarantined(translator: MessageTranslator) -> None:
    record = sqs(order())
    del record["messageId"]
    result = quarantined(translator.from_sqs(record, now=NOW), "malformed-record")
    assert result.identity.startswith(f"sqs:{ORDERS_ARN}:no-message-id:")

    first = quarantined(
        translator.from_kafka(kafka(b"1", topic="raw") | {"offset": "x"}, source=MSK, now=NOW),
        "malformed-record",
    )
    second = quarantined(
        translator.from_kafka(kafka(b"2", topic="raw") | {"offset": "x"}, source=MSK, now=NOW),
        "malformed-record",
    )
    assert first.identity != second.identity


# --- keys and headers ---------------------------------------------------------------------------


def test_kafka_keys_and_headers_are_kept_decoded(translator: MessageTranslator) -> None:
    headers = [
        {"content-type": list(b"application/json")},
        {"fingerprint": [-97, -29, 0, 122]},  # a Java producer's signed bytes: 9f e3 00 7a
        {"hop": list(b"edge-1")},
        {"hop": list(b"core-2")},
        {"hop": list(b"core-3")},
        {"empty": None},
        {"b64": base64.b64encode(b"headerValue").decode()},  # some event samples spell values as base64
    ]
    result = accepted(translator.from_kafka(kafka(reading(), headers=headers), source=MSK, now=NOW))
    message = result.event.to_json()["extra"]["message"]

    assert message == {
        "topic": "readings",
        "partition": 0,
        "offset": 7,
        "key": "s-1",
        "headers": {
            "content-type": "application/json",
            "fingerprint": {"base64": base64.b64encode(bytes([0x9F, 0xE3, 0x00, 0x7A])).decode()},
            "hop": ["edge-1", "core-2", "core-3"],
            "empty": None,
            "b64": "headerValue",
        },
        "timestamp": 1763719200123,
        "timestamp_type": "CREATE_TIME",
    }
    assert result.event.partition_key == "2026-11-21"


@pytest.mark.parametrize(
    ("key", "expected"),
    [(None, None), (b"order-17", "order-17"), (b"\x00\x00\x01\x8b\xff", {"base64": "AAABi/8="})],
)
def test_kafka_keys_are_text_or_marked_base64(
    translator: MessageTranslator, key: bytes | None, expected: Any
) -> None:
    event = accepted(translator.from_kafka(kafka(b"1", topic="raw", key=key), source=MSK, now=NOW)).event
    assert event.extra["message"]["key"] == expected


# --- size ---------------------------------------------------------------------------------------


def test_oversized_payloads_are_quarantined_not_truncated(translator: MessageTranslator) -> None:
    big = "x" * MAX_EXTRA_BYTES
    result = quarantined(translator.from_sqs(sqs(big, arn=LEGACY_ARN), now=NOW), "too-large")
    assert result.reason.startswith("payload too large for an event; its extra is ")
    assert "s3://" in result.reason
    assert result.body == big  # under the quarantine body limit: kept whole

    fits = "x" * (MAX_EXTRA_BYTES - 1024)
    assert accepted(translator.from_sqs(sqs(fits, arn=LEGACY_ARN), now=NOW)).event.extra["payload"] == fits


def test_the_size_counts_json_escapes(translator: MessageTranslator) -> None:
    # Non-ASCII is stored as \\uXXXX escapes: six bytes per character.
    text = "é" * (MAX_EXTRA_BYTES // 6 + 10)
    quarantined(translator.from_sqs(sqs(text, arn=LEGACY_ARN), now=NOW), "too-large")


def test_huge_bodies_are_cut_in_quarantine_and_say_so(translator: MessageTranslator) -> None:
    huge = "ü" * MAX_QUARANTINE_BODY_BYTES  # two bytes each
    result = quarantined(translator.from_sqs(sqs(huge, arn=LEGACY_ARN), now=NOW), "too-large")
    assert len(result.body.encode()) <= MAX_QUARANTINE_BODY_BYTES
    assert result.body == "ü" * (MAX_QUARANTINE_BODY_BYTES // 2)
    assert result.facts["body"]["truncated"] is True
    assert result.facts["body"]["bytes"] == 2 * MAX_QUARANTINE_BODY_BYTES
    assert "cut to its first" in result.reason

    raw = b"\xff" * (MAX_QUARANTINE_BODY_BYTES * 2)
    result = quarantined(translator.from_kafka(kafka(raw, topic="raw"), source=MSK, now=NOW), "not-utf8")
    assert len(result.body) <= MAX_QUARANTINE_BODY_BYTES
    assert result.facts["body"]["truncated"] is True


def test_bulky_facts_are_summarised_in_quarantine(translator: MessageTranslator) -> None:
    record = sqs("x", arn=f"arn:aws:sqs:{REGION_ACCOUNT}:unknown")
    record["messageAttributes"] = {"blob": {"stringValue": "y" * 200_000, "dataType": "String"}}
    result = quarantined(translator.from_sqs(record, now=NOW), "unknown-source")
    assert result.facts["message_attributes"] == {
        "omitted_bytes": len(json.dumps(record["messageAttributes"]))
    }
    assert result.facts["message_id"] == "m-1"


# --- property: every message becomes exactly one outcome -------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
payload_objects = st.fixed_dictionaries(
    {},
    optional={
        "order_id": st.text(max_size=5) | st.integers(),
        "amount": st.integers(-5, 5) | st.text(max_size=3),
        "kind": st.sampled_from(["return", "order"]),
        "meta": st.fixed_dictionaries({}, optional={"day": json_values}),
        "sensor_id": st.sampled_from(["s-1", "t-2", ""]),
        "day": json_values,
    },
)
# Any code point, lone surrogates included: a body must never make the translator raise.
any_text = st.text(st.characters(codec=None, exclude_categories=()))
bodies = any_text | json_values.map(json.dumps) | payload_objects.map(json.dumps)
arns = st.sampled_from(
    [ORDERS_ARN, FIFO_ARN, LEGACY_ARN, f"arn:aws:sqs:{REGION_ACCOUNT}:returns", "arn:aws:sqs:x:1:gone", ""]
)


def _storable(outcome: Any) -> None:
    assert isinstance(outcome, Accepted) != isinstance(outcome, Quarantined)
    if isinstance(outcome, Accepted):
        doc = outcome.event.to_json()
        assert AssetEvent.from_json(json.loads(json.dumps(doc))) == outcome.event
        assert len(json.dumps(doc["extra"], sort_keys=True)) <= MAX_EXTRA_BYTES
        assert outcome.event.id == derive_id("ev", outcome.identity)
    else:
        outcome.body.encode("utf-8")  # storable as a DynamoDB string: no lone surrogates
        json.dumps(outcome.facts)
        assert outcome.reason


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies, arn=arns, message_id=st.none() | st.text(max_size=10))
def test_any_sqs_body_becomes_an_event_or_a_quarantine(body: str, arn: str, message_id: str | None) -> None:
    record = sqs(body, arn=arn) | {"messageId": message_id}
    _storable(_TRANSLATOR.from_sqs(record, now=NOW))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=st.none() | st.binary() | payload_objects.map(lambda d: json.dumps(d).encode()),
    key=st.none() | st.binary(max_size=12),
    topic=st.sampled_from(["readings", "raw", "nobody"]),
    headers=st.lists(
        st.dictionaries(
            st.text(max_size=5),
            st.none() | st.lists(st.integers(-128, 255), max_size=6) | st.text(max_size=6),
        ),
        max_size=3,
    ),
    partition=st.integers(0, 3) | st.text(max_size=3) | st.sampled_from(["1", "²", "-0", " 1"]),
)
def test_any_kafka_record_becomes_an_event_or_a_quarantine(
    value: bytes | None, key: bytes | None, topic: str, headers: list[dict[str, Any]], partition: Any
) -> None:
    record = kafka(value, key=key, topic=topic, headers=headers, partition=partition)
    _storable(_TRANSLATOR.from_kafka(record, source=MSK, now=NOW))


_TRANSLATOR = MessageTranslator(default_catalog())


# --- writing outcomes ---------------------------------------------------------------------------


@dataclass
class FakeStore:
    """Keeps events and quarantine records once per identity, like the DynamoDB store."""

    events: dict[str, AssetEvent] = field(default_factory=dict)
    quarantined: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_for: set[str] = field(default_factory=set)

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ) -> tuple[AssetEvent, bool]:
        # A keyed message's event is its own dedupe record: found by what its item's key is made of.
        key = dedupe_key if dedupe_key is not None else own_key(event)
        message_id = thaw_json(event.extra).get("message", {}).get("message_id")
        if any(marker in key or marker == message_id for marker in self.fail_for):
            raise StoreUnavailableError("throttled")
        if key in self.events:
            return self.events[key], False
        self.events[key] = event
        return event, True

    def put_events(
        self, events: Any, *, now: datetime, lanes: Any = None, lasting: bool = False, blind: bool = False
    ) -> Any:
        return put_events_one_by_one(self, events, now=now, lanes=lanes, lasting=lasting, blind=blind)

    def quarantine(self, *, identity: str, **fields: Any) -> bool:
        if identity in self.quarantined:
            return False
        self.quarantined[identity] = fields
        return True


def test_store_outcome_writes_once_per_identity(translator: MessageTranslator) -> None:
    store = FakeStore()
    good = accepted(translator.from_sqs(sqs(order()), now=NOW))
    again = translator.from_sqs(sqs(order(), ApproximateReceiveCount="2"), now=NOW)
    bad = translator.from_sqs(sqs("{}"), now=NOW)
    assert Ingest(store=store).store_outcome(good, now=NOW) is True
    assert Ingest(store=store).store_outcome(again, now=NOW) is False
    assert Ingest(store=store).store_outcome(bad, now=NOW) is True
    assert Ingest(store=store).store_outcome(bad, now=NOW) is False
    assert list(store.events) == [own_key(good.event)]
    assert store.quarantined[f"sqs:{ORDERS_ARN}:m-1"]["watcher"] == "orders"


def test_a_standard_queue_message_is_keyed_by_itself_and_the_fifo_or_untimed_ones_are_not(
    translator: MessageTranslator,
) -> None:
    # A standard queue's message: timed by SQS (SentTimestamp), the same on every delivery.
    first = accepted(translator.from_sqs(sqs(order()), now=NOW))
    later = accepted(
        translator.from_sqs(sqs(order(), ApproximateReceiveCount="3"), now=NOW + timedelta(hours=1))
    )
    assert (first.keyed, first.first_delivery) == (True, True)
    assert (later.keyed, later.first_delivery) == (True, False)
    assert (later.event.timestamp, later.event.id) == (first.event.timestamp, first.event.id)
    assert first.event.timestamp == datetime(2025, 11, 21, 10, 0, 0, 123000, tzinfo=UTC)

    # A FIFO queue's keeps the ingest time (its batch's order), as does a record SQS did not time.
    body = json.dumps({"meta": {"day": "2026-11-21"}})
    fifo = accepted(translator.from_sqs(sqs(body, arn=FIFO_ARN, MessageGroupId="g"), now=NOW))
    untimed = sqs(order())
    del untimed["attributes"]["SentTimestamp"]
    for outcome in (fifo, accepted(translator.from_sqs(untimed, now=NOW))):
        assert (outcome.keyed, outcome.event.timestamp) == (False, NOW)


@dataclass
class RecordingStore(FakeStore):
    """A fake store that records how each batch of events was written."""

    batches: list[tuple[bool, int]] = field(default_factory=list)  # (blind, events)

    def put_events(
        self, events: Any, *, now: datetime, lanes: Any = None, lasting: bool = False, blind: bool = False
    ) -> Any:
        self.batches.append((blind, len(events)))
        return super().put_events(events, now=now, lanes=lanes, lasting=lasting, blind=blind)


def test_ingest_puts_first_deliveries_blind_and_checks_the_rest(translator: MessageTranslator) -> None:
    store = RecordingStore()
    outcomes = [
        translator.from_sqs(sqs(order(), message_id="m-1"), now=NOW),
        translator.from_sqs(sqs(order(), message_id="m-2", ApproximateReceiveCount="2"), now=NOW),
        translator.from_sqs(sqs(order(), message_id="m-3"), now=NOW),
    ]
    assert Ingest(store=store).store_outcomes(outcomes, now=NOW) == [True, True, True]
    # Two first deliveries in one blind batch; the redelivery in a checked one (no dedupe records).
    assert store.batches == [(True, 2), (False, 1)]
    assert not any(key.startswith("sqs:") for key in store.events)

    # In lanes (a FIFO queue, a Kafka partition) nothing is written blind: order and failures hold per lane.
    store = RecordingStore()
    Ingest(store=store).store_outcomes(outcomes, now=NOW, lanes=["a", "a", "b"])
    assert store.batches == [(False, 3)]


def test_one_source_feeding_several_assets_makes_one_event_per_asset_once() -> None:
    # Given one SQS watcher attached to two assets (as two Airflow assets sharing one watcher's trigger)
    feed = AssetWatcher("orders", SqsQueue("orders"))
    catalog = Catalog.build(
        [Asset("s3://lake/orders", watchers=[feed]), Asset("s3://lake/audit", watchers=[feed])]
    )
    translator = MessageTranslator(catalog)
    store = FakeStore()

    # When one message arrives, twice (a redelivery)
    outcome = translator.from_sqs(sqs('{"order_id": 7}'), now=NOW)
    again = translator.from_sqs(sqs('{"order_id": 7}', ApproximateReceiveCount="2"), now=NOW)
    assert Ingest(store=store).store_outcome(outcome, now=NOW) is True
    assert Ingest(store=store).store_outcome(again, now=NOW) is False

    # Then: one event of each asset, with the same payload and distinct ids, each stored once
    events = sorted(store.events.values(), key=lambda e: e.asset)
    assert [e.asset for e in events] == ["s3://lake/audit", "s3://lake/orders"]
    assert len({e.id for e in events}) == 2
    assert [thaw_json(e.extra)["payload"] for e in events] == [{"order_id": 7}] * 2
    assert {e.source["watcher"] for e in events} == {"orders"}
    assert len(store.events) == 2


# --- the handlers' failure semantics, with a fake store ----------------------------------------------


@dataclass
class FakeContext:
    function_name: str = "ingest"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:ingest"
    aws_request_id: str = "req-1"


def fake_deps(store: FakeStore) -> Any:
    return SimpleNamespace(messages=_TRANSLATOR, store=store, extras=None, ingest=Ingest(store=store))


def sqs_event(*records: Mapping[str, Any]) -> dict[str, Any]:
    return {"Records": [dict(r) for r in records]}


def test_sqs_standard_batch_fails_only_the_failed_message() -> None:
    from assetflow.functions.handle_sqs_messages import lambda_handler

    store = FakeStore(fail_for={"m-2"})
    event = sqs_event(*(sqs(order(), message_id=f"m-{i}") for i in range(1, 5)))
    response = lambda_handler(event, FakeContext(), deps=fake_deps(store))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-2"}]}
    assert len(store.events) == 3


def test_sqs_fifo_batch_stops_at_the_first_failure() -> None:
    from assetflow.functions.handle_sqs_messages import lambda_handler

    store = FakeStore(fail_for={"m-2"})
    body = json.dumps({"meta": {"day": "2026-11-21"}})
    event = sqs_event(
        *(sqs(body, arn=FIFO_ARN, message_id=f"m-{i}", MessageGroupId="g") for i in range(1, 5))
    )
    response = lambda_handler(event, FakeContext(), deps=fake_deps(store))
    assert response == {"batchItemFailures": [{"itemIdentifier": f"m-{i}"} for i in (2, 3, 4)]}
    assert list(store.events) == [f"sqs:{FIFO_ARN}:m-1"]


def test_quarantines_are_acknowledged_and_counted(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from assetflow.functions._ingest import SERVICE
    from assetflow.functions.handle_sqs_messages import lambda_handler

    store = FakeStore()
    event = sqs_event(
        sqs(order(), message_id="ok"), sqs("{}", message_id="bad-1"), sqs("[]", message_id="bad-2")
    )
    assert lambda_handler(event, FakeContext(), deps=fake_deps(store)) == {"batchItemFailures": []}
    assert len(store.quarantined) == 2

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    emf = [line for line in lines if "_aws" in line]
    assert len(emf) == 1
    assert emf[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "assetflow"
    # The alarm on quarantines filters on the service the stack names (POWERTOOLS_SERVICE_NAME).
    assert emf[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
    assert emf[0]["service"] == SERVICE
    assert emf[0]["QuarantinedMessages"] == [1.0, 1.0]
    # The payload stays out of the logs; the reason code and identity are there.
    warnings = [r for r in caplog.records if r.getMessage() == "message quarantined"]
    assert [(r.reason_code, r.identity) for r in warnings] == [  # type: ignore[attr-defined]
        ("schema", f"sqs:{ORDERS_ARN}:bad-1"),
        ("schema", f"sqs:{ORDERS_ARN}:bad-2"),
    ]
    assert not any("reason" in vars(r) or "body" in vars(r) for r in warnings)

    # A redelivery of the quarantined messages is acknowledged again but not counted again.
    assert lambda_handler(event, FakeContext(), deps=fake_deps(store)) == {"batchItemFailures": []}
    assert "QuarantinedMessages" not in capsys.readouterr().out


def test_every_message_failing_fails_the_invocation() -> None:
    from assetflow.functions.handle_sqs_messages import lambda_handler

    with pytest.raises(BatchProcessingError):
        lambda_handler(sqs_event(sqs(order())), FakeContext(), deps=fake_deps(FakeStore(fail_for={"m-1"})))


def test_a_failed_kafka_record_fails_the_invocation_and_holds_back_its_partition() -> None:
    from assetflow.functions.handle_kafka_records import KafkaBatchRetryError, lambda_handler

    store = FakeStore(fail_for={":readings:0:8:"})
    event = {
        "eventSource": "aws:kafka",
        "eventSourceArn": MSK_A,
        "records": {
            "readings-0": [kafka(reading(), offset=o) for o in (7, 8, 9)],
            "readings-1": [kafka(reading(), partition=1, offset=o) for o in (3, 4)],
        },
    }
    with pytest.raises(KafkaBatchRetryError, match="2 record"):
        lambda_handler(event, FakeContext(), deps=fake_deps(store))
    # Offset 9 waits behind offset 8; partition 1 is not held back.
    stored = sorted(k.removeprefix(f"kafka:{MSK_A}:readings:").rsplit(":", 1)[0] for k in store.events)
    assert stored == ["0:7", "1:3", "1:4"]

    # The retry stores the rest, and the records stored before are not stored twice.
    store.fail_for.clear()
    assert lambda_handler(event, FakeContext(), deps=fake_deps(store)) == {"batchItemFailures": []}
    assert len(store.events) == 5
