"""Bad input at scale: 10,000+ generated messages through the real ingest and API handlers, on the emulators.

Hypothesis generates mixed batches: good messages, large good ones (stored by reference), and bad ones
(not JSON, invalid UTF-8, 256 KB bodies, deep nesting, wrong types for the watchers' schemas, huge SQS
attributes and Kafka headers, unknown sources). Each batch goes through the SQS and Kafka Lambda handlers
(their event shapes) and the API handler (HTTP API v2 events), against DynamoDB Local and moto's S3, with
the example pipelines' catalog. Some batches and requests are delivered twice. Per example: no handler
raises and no batch reports a failure; every API answer is the expected status with a clear reason. At
the end, from the store itself: every good message is one event with its payload (inline, or by reference
and resolved back to the identical payload by the job-side helper), every bad one is quarantined once with
the reason its kind calls for, and nothing else was written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import multiprocessing
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.messages import UNKNOWN_WATCHER
from assetflow.composition import Dependencies, Settings
from assetflow.core import limits
from assetflow.core.events import derive_id
from assetflow.core.jsonvalue import canonical_json
from assetflow.core.limits import (
    INLINE_EXTRA_BYTES,
    MAX_EXTRA_BYTES_BY_REFERENCE,
    MAX_PAYLOAD_DEPTH,
    MAX_QUARANTINE_BODY_BYTES,
)
from assetflow.functions import handle_api, handle_kafka_records, handle_sqs_messages
from assetflow.loader import load_catalog
from assetflow_dev import LOCAL_CLIENT_KWARGS, LOCAL_REGION, DynamoDbLocal, MotoServer, client
from assetflow_job import AssetEvent as JobEvent
from assetflow_job import ExtraResolver
from assetflow_job.contract import REF_KEY

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LANDING = "s3://assetflow-demo/landing/deliveries"  # the SQS watcher "deliveries" (JSON Schema)
READINGS = "x-iot://sensors/readings"  # the Kafka watcher "sensor-readings" (filter, schema, partition key)
CURATED = "s3://assetflow-demo/curated/deliveries"  # the API's events
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:deliveries"
OTHER_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:nobody-watches-this"
MSK_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/iot/751d2973-a626-431c-9d4e-d7975eb44dd7-2"
TOPIC = "sensor-readings"
PRINCIPAL = handle_api.ANONYMOUS

#: Examples and their sizes: 3 SQS batches of 10, a Kafka batch of 40 and 16 API requests per example.
EXAMPLES = 120
SQS_BATCHES, SQS_BATCH_SIZE, KAFKA_BATCH_SIZE, API_REQUESTS = 3, 10, 40, 16
MIN_MESSAGES = 10_000

#: What the quarantine reason of each reason code starts with (the record keeps the reason, not the code).
REASONS = {
    "schema": ("the payload does not match the watcher's JSON Schema at $",),
    "not-utf8": ("the message body is not valid Unicode text", "the record's value is not UTF-8"),
    "too-deep": (f"the JSON payload nests deeper than {MAX_PAYLOAD_DEPTH} levels",),
    "filter": ("filtered out",),
    "not-base64": ("the record's value is not base64",),
    "unknown-source": ("no watcher watches",),
    "partition-key": (
        "the payload's 'reading_time' (the watcher's partition_key_field) must be a non-empty string: it is empty",
    ),
    "too-large": ("payload too large for an event",),
}

STORED, BY_REFERENCE = "stored", "by-reference"


@dataclass(frozen=True)
class Spec:
    """A generated message before it gets its identity: its kind, content and what must become of it.

    ``expect`` is ``stored`` or ``by-reference`` for good messages, else the reason codes it may be
    quarantined with (API requests: ``"<status> <error code> <detail fragment>"``).
    """

    kind: str
    expect: frozenset[str]
    body: Any = None
    attributes: Any = None
    payload: Any = None


def spec(kind: str, expect: str | set[str], **fields: Any) -> Spec:
    return Spec(kind, frozenset({expect} if isinstance(expect, str) else expect), **fields)


def deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def filled(size: int, unit: str) -> list[str]:
    """About ``size`` bytes of JSON as a list of strings (cheap to build, unlike generated text)."""
    return [f"{unit}-{i:07}" for i in range(size // (len(unit) + 11))]


# ---- SQS: the "deliveries" watcher's messages ----------------------------------------------------

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
# Names from small integers: generating regex matches costs more than the handlers do with them.
names = st.integers(0, 10**6).map(lambda n: f"n{n:x}")
deliveries = st.fixed_dictionaries(
    {
        "delivery_id": st.text(min_size=1, max_size=16),
        "supplier": st.sampled_from(["acme-foods", "nordic-fish", "7-seas"]) | names,
        "files": st.lists(names.map(lambda n: f"s3://landing/{n}.csv"), min_size=1, max_size=3),
    },
    optional={"note": json_values},
)
wrong_deliveries = st.one_of(
    deliveries.map(lambda d: {**d, "delivery_id": 17}),
    deliveries.map(lambda d: {**d, "delivery_id": ""}),
    deliveries.map(lambda d: {**d, "supplier": "Not Valid"}),
    deliveries.map(lambda d: {**d, "files": "s3://not/a/list"}),
    deliveries.map(lambda d: {**d, "files": []}),
    deliveries.map(lambda d: {**d, "files": ["https://not.s3/x"]}),
    deliveries.map(lambda d: {k: v for k, v in d.items() if k != "supplier"}),
    json_values.filter(lambda v: not isinstance(v, dict)),
)
plain_text = st.text(max_size=40).map(lambda t: "<" + t)  # never JSON


def sqs_big(delivery: dict[str, Any], size: int) -> Spec:
    # The bulk is in a property the schema leaves open: validating a pattern on each of thousands of array
    # items would be the schema engine's benchmark, not this test's.
    delivery = {**delivery, "manifest": filled(size, "part")}
    return spec("big", BY_REFERENCE, body=json.dumps(delivery), payload=delivery)


#: Attributes, headers and payloads are either well below the inline limit or well above it, so that what the
#: rest of an event adds (its other facts, the JSON around them) cannot decide where it goes.
SMALL_PADDING = st.integers(1_000, INLINE_EXTRA_BYTES // 2)
LARGE_PADDING = st.integers(INLINE_EXTRA_BYTES + 4_096, 200_000)


def sqs_huge_attributes(delivery: dict[str, Any], size: int, binary: bytes) -> Spec:
    attributes = {
        "padding": {
            "stringValue": "a" * size,
            "dataType": "String",
            "stringListValues": [],
            "binaryListValues": [],
        },
        "signature": {
            "binaryValue": base64.b64encode(binary + b"\xff\xfe").decode(),
            "dataType": "Binary",
            "stringListValues": [],
            "binaryListValues": [],
        },
    }
    expect = BY_REFERENCE if size > INLINE_EXTRA_BYTES else STORED
    return spec("huge-attributes", expect, body=json.dumps(delivery), attributes=attributes, payload=delivery)


def sqs_surrogate(delivery: dict[str, Any], where: int, code: int) -> Spec:
    text = json.dumps(delivery)
    where %= len(text) + 1
    return spec("lone-surrogate", "not-utf8", body=text[:where] + chr(0xD800 + code) + text[where:])


SQS_KINDS: dict[str, st.SearchStrategy[Spec]] = {
    "good": deliveries.map(lambda d: spec("good", STORED, body=json.dumps(d), payload=d)),
    "big": st.builds(sqs_big, deliveries, st.integers(INLINE_EXTRA_BYTES + 4_096, 256 * 1024)),
    "huge-attributes": st.builds(
        sqs_huge_attributes, deliveries, SMALL_PADDING | LARGE_PADDING, st.binary(max_size=8)
    ),
    "not-json": plain_text.map(lambda t: spec("not-json", "schema", body=t)),
    "lone-surrogate": st.builds(sqs_surrogate, deliveries, st.integers(0, 10_000), st.integers(0, 0x7FF)),
    "wrong-types": wrong_deliveries.map(lambda d: spec("wrong-types", "schema", body=json.dumps(d))),
    "deep": st.builds(
        lambda d, depth: spec(
            "deep", {"too-deep", "schema"}, body=json.dumps(d)[:-1] + ', "deep": ' + deep_array(depth) + "}"
        ),
        deliveries,
        st.integers(MAX_PAYLOAD_DEPTH + 1, 5_000),
    ),
    "empty": st.just(spec("empty", "schema", body="")),
    "256k-text": st.integers(256 * 1024 - 64, 256 * 1024 + 64).map(
        lambda n: spec("256k-text", "schema", body="<" + "z" * n)
    ),
    "unknown-queue": deliveries.map(lambda d: spec("unknown-queue", "unknown-source", body=json.dumps(d))),
}
SQS_WEIGHTS = ["good"] * 6 + ["big", "huge-attributes"] + [k for k in SQS_KINDS if k != "good"]
sqs_specs = st.sampled_from(SQS_WEIGHTS).flatmap(lambda kind: SQS_KINDS[kind])


# ---- Kafka: the "sensor-readings" watcher's records ------------------------------------------------

readings = st.fixed_dictionaries(
    {
        "sensor_id": names.map(lambda n: f"s-{n}"),
        "reading_time": st.integers(0, 10**9).map(lambda t: f"2026-11-21T10:00:00.{t:09}Z"),
        "temperature_c": st.floats(-50, 60),
    },
    optional={"humidity_pct": st.floats(0, 100), "note": json_values},
)


def kafka_value(reading: Any) -> str:
    return base64.b64encode(json.dumps(reading).encode()).decode()


def kafka_big(reading: dict[str, Any], size: int) -> Spec:
    reading = {**reading, "samples": filled(size, "sample")}
    return spec("big", BY_REFERENCE, body=kafka_value(reading), payload=reading)


def kafka_huge_headers(reading: dict[str, Any], size: int, binary: bytes) -> Spec:
    headers = [
        {"trace": list(b"00-0af7651916cd43dd")},
        {"padding": list(b"h" * size)},
        {"bin": list(binary + b"\xff")},
    ]
    expect = BY_REFERENCE if size > INLINE_EXTRA_BYTES else STORED
    return spec("huge-headers", expect, body=kafka_value(reading), attributes=headers, payload=reading)


def invalid_utf8(data: bytes) -> str:
    return base64.b64encode(data + b"\xc3\x28" + data).decode()


KAFKA_KINDS: dict[str, st.SearchStrategy[Spec]] = {
    "good": readings.map(lambda r: spec("good", STORED, body=kafka_value(r), payload=r)),
    "big": st.builds(kafka_big, readings, st.integers(INLINE_EXTRA_BYTES + 4_096, 256 * 1024)),
    "huge-headers": st.builds(
        kafka_huge_headers, readings, SMALL_PADDING | LARGE_PADDING, st.binary(max_size=8)
    ),
    "not-utf8": st.binary(max_size=40).map(lambda b: spec("not-utf8", "not-utf8", body=invalid_utf8(b))),
    "not-base64": st.text(min_size=1, max_size=20).map(
        lambda t: spec("not-base64", "not-base64", body="!" + t)
    ),
    "not-json": plain_text.map(
        lambda t: spec("not-json", "filter", body=base64.b64encode(t.encode()).decode())
    ),
    "wrong-types": st.one_of(
        readings.map(lambda r: {**r, "temperature_c": "warm"}),
        readings.map(lambda r: {**r, "reading_time": 1763719500}),
        readings.map(lambda r: {k: v for k, v in r.items() if k != "temperature_c"}),
    ).map(lambda r: spec("wrong-types", "schema", body=kafka_value(r))),
    "filtered": readings.map(
        lambda r: spec("filtered", "filter", body=kafka_value({**r, "sensor_id": "x-1"}))
    ),
    "deep": st.builds(
        lambda r, depth: spec(
            "deep",
            {"too-deep", "filter"},
            body=base64.b64encode(
                (json.dumps(r)[:-1] + ', "deep": ' + deep_array(depth) + "}").encode()
            ).decode(),
        ),
        readings,
        st.integers(MAX_PAYLOAD_DEPTH + 1, 5_000),
    ),
    "tombstone": st.just(spec("tombstone", "filter", body=None)),
    "blank-partition-key": readings.map(
        lambda r: spec("blank-partition-key", "partition-key", body=kafka_value({**r, "reading_time": "  "}))
    ),
    "unknown-topic": readings.map(lambda r: spec("unknown-topic", "unknown-source", body=kafka_value(r))),
}
KAFKA_WEIGHTS = ["good"] * 8 + ["big", "huge-headers"] + [k for k in KAFKA_KINDS if k != "good"]
kafka_specs = st.sampled_from(KAFKA_WEIGHTS).flatmap(lambda kind: KAFKA_KINDS[kind])


# ---- the API: POST /assets/events -------------------------------------------------------------------

extras = st.dictionaries(st.text(max_size=8).filter(lambda k: k != REF_KEY), json_values, max_size=4)
BAD_REQUEST, TOO_LARGE = "400 bad_request", "413 payload_too_large"


def api_big(extra: dict[str, Any], size: int) -> Spec:
    extra = {**extra, "rows": filled(size, "row")}
    return spec("big", BY_REFERENCE, body=json.dumps({"uri": CURATED, "extra": extra}), payload=extra)


API_KINDS: dict[str, st.SearchStrategy[Spec]] = {
    "good": extras.map(
        lambda e: spec("good", STORED, body=json.dumps({"uri": CURATED, "extra": e}), payload=e)
    ),
    "big": st.builds(api_big, extras, st.integers(INLINE_EXTRA_BYTES + 4_096, 400 * 1024)),
    "huge-header": st.builds(
        lambda e, size: spec(
            "huge-header",
            STORED,
            body=json.dumps({"uri": CURATED, "extra": e}),
            attributes={"x-padding": "p" * size},
            payload=e,
        ),
        extras,
        st.integers(1_000, 10_000),
    ),
    "not-json": plain_text.map(lambda t: spec("not-json", f"{BAD_REQUEST} not valid JSON", body=t)),
    "not-utf8": st.binary(max_size=20).map(
        lambda b: spec("not-utf8", f"{BAD_REQUEST} not UTF-8", body=b'{"uri": "' + b + b'\xff"}')
    ),
    "lone-surrogate": extras.map(
        lambda e: spec(
            "lone-surrogate",
            f"{BAD_REQUEST} not valid Unicode",
            body=json.dumps({"uri": CURATED, "extra": {**e, "s": "\ud800"}}),
        )
    ),
    "wrong-types": st.sampled_from(
        [
            ({"uri": 17}, "asset URI must be a str"),
            ({"uri": None}, "uri is required"),
            ({"uri": CURATED, "extra": []}, "extra must be a JSON object"),
            ({"uri": CURATED, "extra": "text"}, "extra must be a JSON object"),
            ({"uri": CURATED, "partition_key": 5}, "partition_key"),
            ({"uri": CURATED, "partition_key": ""}, "partition_key"),
            ({"uri": CURATED, "color": "red"}, "unknown fields"),
            ([CURATED], "must be a JSON object"),
            ({"uri": "airflow://reserved"}, "airflow"),
        ]
    ).map(lambda pair: spec("wrong-types", f"{BAD_REQUEST} {pair[1]}", body=json.dumps(pair[0]))),
    "deep": st.integers(limits.MAX_EXTRA_DEPTH + 1, 5_000).map(
        lambda depth: spec(
            "deep",
            f"{BAD_REQUEST} nested",
            body='{"uri": "' + CURATED + '", "extra": {"a": ' + deep_array(depth) + "}}",
        )
    ),
    "reserved-key": st.just(
        spec(
            "reserved-key",
            f"{BAD_REQUEST} extra_ref",
            body=json.dumps({"uri": CURATED, "extra": {REF_KEY: {}}}),
        )
    ),
    "huge-idempotency-key": st.integers(256, 8_000).map(
        lambda n: spec(
            "huge-idempotency-key",
            f"{BAD_REQUEST} Idempotency-Key",
            body=json.dumps({"uri": CURATED}),
            attributes={"idempotency-key": "k" * n},
        )
    ),
}
API_WEIGHTS = ["good"] * 5 + ["big", "huge-header"] + [k for k in API_KINDS if k != "good"]


def over_ceiling() -> Spec:
    """A good delivery whose extra is over the ceiling of extras stored by reference (10 MiB)."""
    delivery = {"delivery_id": "d-huge", "supplier": "acme-foods", "files": ["s3://landing/huge.csv"]}
    body = json.dumps({**delivery, "manifest": filled(MAX_EXTRA_BYTES_BY_REFERENCE + 64 * 1024, "part")})
    return spec("over-ceiling", "too-large", body=body)


def over_4mib() -> Spec:
    """A body over the API's 4 MiB limit (built on demand: it is large)."""
    body = '{"uri": "' + CURATED + '", "extra": {"x": "' + "x" * (4 * 1024 * 1024) + '"}}'
    return spec("over-4mib", f"{TOO_LARGE} over the limit", body=body)


api_specs = st.sampled_from(API_WEIGHTS).flatmap(lambda kind: API_KINDS[kind])


# ---- the harness ----------------------------------------------------------------------------------


@dataclass
class LambdaContext:
    function_name: str = "assetflow-bad-input"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-bad-input"
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"


def payload_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


@dataclass
class Ledger:
    """What was sent and what must be in the store at the end, across every example."""

    good: dict[str, dict[str, tuple[str, str]]] = field(
        default_factory=lambda: {LANDING: {}, READINGS: {}, CURATED: {}}
    )  # asset -> event id -> (expect, payload digest)
    bad: dict[str, tuple[frozenset[str], str]] = field(default_factory=dict)  # identity -> (codes, watcher)
    sent: Counter[str] = field(default_factory=Counter)
    rejected: Counter[int] = field(default_factory=Counter)  # API status -> count
    redelivered: int = 0
    examples: int = 0

    def expect_good(self, asset: str, event_id: str, item: Spec) -> None:
        (expect,) = item.expect
        self.good[asset][event_id] = (expect, payload_digest(item.payload))


@dataclass(frozen=True)
class Invocation:
    """An ingest function's Lambda event, and how many times it is delivered."""

    function: str
    event: dict[str, Any]
    deliveries: int


_ingest_deps: Dependencies | None = None


def start_ingest_function(settings: Settings, endpoints: dict[str, str]) -> None:
    """Build an ingest function's dependencies once, as a Lambda container does (in a worker process)."""
    global _ingest_deps  # one composition per container
    _ingest_deps = Dependencies(
        settings, session=boto3.session.Session(**LOCAL_CLIENT_KWARGS), endpoints=endpoints
    )


def invoke_ingest(invocation: Invocation) -> list[Any]:
    """Run an ingest handler on its event, once per delivery (SQS's receive count going up): the responses."""
    handler = handle_sqs_messages if invocation.function == "sqs" else handle_kafka_records
    responses = []
    for attempt in range(1, invocation.deliveries + 1):
        for record in invocation.event.get("Records", []):
            record["attributes"]["ApproximateReceiveCount"] = str(attempt)
        responses.append(handler.lambda_handler(invocation.event, LambdaContext(), deps=_ingest_deps))
    return responses


class BadInputHarness:
    """Builds deliveries (their identities, and what must become of them) and sends the API's requests.

    The API function runs here, with one set of dependencies (one warm container); the ingest functions'
    invocations go to worker processes (``invoke_ingest``), at the same time.
    """

    def __init__(self, deps: Dependencies, endpoints: dict[str, str]) -> None:
        self.deps = deps
        self.endpoints = endpoints
        self.s3 = client("s3", endpoints["s3"])
        self.ledger = Ledger()
        self.counter = 0
        self.offsets = [0, 0]

    def next_id(self) -> int:
        self.counter += 1
        return self.counter

    def expect(self, watcher: str, asset: str, identity: str, item: Spec) -> None:
        if item.expect & {STORED, BY_REFERENCE}:
            self.ledger.expect_good(asset, derive_id("ev", identity), item)
        else:
            self.ledger.bad[identity] = (item.expect, watcher)

    # -- SQS

    def sqs_record(self, item: Spec) -> dict[str, Any]:
        message_id = f"m-{uuid.UUID(int=self.next_id())}"
        arn = OTHER_QUEUE_ARN if item.kind == "unknown-queue" else QUEUE_ARN
        identity = f"sqs:{arn}:{message_id}"
        self.expect(UNKNOWN_WATCHER if arn == OTHER_QUEUE_ARN else "deliveries", LANDING, identity, item)
        self.ledger.sent["sqs"] += 1
        return {
            "messageId": message_id,
            "receiptHandle": f"handle-{message_id}",
            "body": item.body,
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1763719200123"},
            "messageAttributes": item.attributes or {},
            "md5OfBody": "0",
            "eventSource": "aws:sqs",
            "eventSourceARN": arn,
            "awsRegion": LOCAL_REGION,
        }

    def sqs(self, batch: list[Spec], *, deliveries: int) -> Invocation:
        """A batch as one SQS Lambda event, to send ``deliveries`` times."""
        self.ledger.redelivered += len(batch) * (deliveries - 1)
        return Invocation("sqs", {"Records": [self.sqs_record(item) for item in batch]}, deliveries)

    # -- Kafka

    def kafka_record(self, item: Spec) -> tuple[str, dict[str, Any]]:
        partition = self.next_id() % 2
        self.offsets[partition] += 1
        topic = "some-other-topic" if item.kind == "unknown-topic" else TOPIC
        offset, stamp = self.offsets[partition], 1763719500000 + self.counter
        identity = f"kafka:{MSK_ARN}:{topic}:{partition}:{offset}:{stamp}"
        self.expect(UNKNOWN_WATCHER if topic != TOPIC else TOPIC, READINGS, identity, item)
        self.ledger.sent["kafka"] += 1
        record = {
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "timestamp": stamp,
            "timestampType": "CREATE_TIME",
            "key": base64.b64encode(f"k-{self.counter}".encode()).decode(),
            "value": item.body,
            "headers": item.attributes or [{"content-type": list(b"application/json")}],
        }
        return f"{topic}-{partition}", record

    def kafka(self, batch: list[Spec], *, deliveries: int) -> Invocation:
        """A batch as one MSK Lambda event (two partitions), to send ``deliveries`` times."""
        records: dict[str, list[dict[str, Any]]] = {}
        for item in batch:
            key, record = self.kafka_record(item)
            records.setdefault(key, []).append(record)
        self.ledger.redelivered += len(batch) * (deliveries - 1)
        event = {"eventSource": "aws:kafka", "eventSourceArn": MSK_ARN, "records": records}
        return Invocation("kafka", event, deliveries)

    # -- the API

    def api(self, item: Spec, *, deliveries: int) -> Callable[[], int | None]:
        """One POST /assets/events, sent ``deliveries`` times if good; ``send`` returns a refusal's status."""
        key = f"key-{self.next_id()}"
        headers = {"content-type": "application/json", "idempotency-key": key, **(item.attributes or {})}
        raw = item.body if isinstance(item.body, bytes) else item.body.encode("utf-8", "surrogatepass")
        text = _is_text(raw)
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": "/assets/events",
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {
                "http": {
                    "method": "POST",
                    "path": "/assets/events",
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                },
                "requestId": f"req-{self.counter}",
                "routeKey": "$default",
                "stage": "$default",
            },
            # API Gateway passes text bodies as they are and anything else base64-encoded.
            "isBase64Encoded": not text,
            "body": item.body if text else base64.b64encode(raw).decode(),
        }
        self.ledger.sent["api"] += 1
        good = bool(item.expect & {STORED, BY_REFERENCE})
        if good:
            self.ledger.expect_good(CURATED, derive_id("api", PRINCIPAL, headers["idempotency-key"]), item)
        else:
            deliveries = 1
        self.ledger.redelivered += deliveries - 1

        def send() -> int | None:
            first = None
            for attempt in range(deliveries):
                response = handle_api.lambda_handler(event, LambdaContext(), deps=self.deps)  # type: ignore[arg-type]
                status, answer = response["statusCode"], json.loads(response["body"])
                if not good:
                    (expected,) = item.expect
                    code, fragment = expected[4:].split(" ", 1)
                    assert (status, answer["error"]) == (int(expected[:3]), code), (item.kind, answer)
                    assert fragment in answer["detail"], (item.kind, answer)
                    return int(status)
                assert status == 201, (item.kind, answer)
                assert (REF_KEY in answer["extra"]) == (BY_REFERENCE in item.expect), item.kind
                if BY_REFERENCE not in item.expect:
                    assert answer["extra"] == item.payload
                assert response["headers"]["Idempotent-Replayed"] == ("true" if attempt else "false")
                assert first is None or answer == first
                first = answer
            return None

        return send

    # -- the end: what the store holds

    def events(self, asset: str) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            page = self.deps.store.list_events(asset, limit=1000, token=token, newest_first=False)
            yield from page.items
            if page.next is None:
                return
            token = page.next

    def quarantine(self) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            page = self.deps.store.list_quarantine(limit=1000, token=token)
            yield from page.items
            if page.next is None:
                return
            token = page.next


def _is_text(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.fixture
def ingest_functions(harness: BadInputHarness) -> Iterator[ProcessPoolExecutor]:
    """Two ingest function containers: processes, so that they run side by side as Lambda's would.

    (In one process the handlers would share their batch processors and Powertools' metric set.)
    """
    with ProcessPoolExecutor(
        max_workers=2,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_ingest_function,
        initargs=(harness.deps.settings, harness.endpoints),
    ) as pool:
        yield pool


@pytest.fixture
def harness(
    dynamodb_local: DynamoDbLocal, moto_server: MotoServer, tmp_path: Path
) -> Iterator[BadInputHarness]:
    table, bucket = f"bad-input-{uuid.uuid4().hex[:10]}", f"runs-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(client("dynamodb", dynamodb_local.endpoint), table).create_table()
    client("s3", moto_server.endpoint).create_bucket(Bucket=bucket)
    catalog_path = tmp_path / "catalog.json"
    catalog_path.write_text(json.dumps(load_catalog(str(ROOT / "pipelines")).to_document()))
    endpoints = {"dynamodb": dynamodb_local.endpoint, "s3": moto_server.endpoint}
    deps = Dependencies(
        Settings(table_name=table, catalog_path=str(catalog_path), region=LOCAL_REGION, runs_bucket=bucket),
        session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
        endpoints=endpoints,
    )
    yield BadInputHarness(deps, endpoints)
    client("dynamodb", dynamodb_local.endpoint).delete_table(TableName=table)


def test_bad_input_at_scale(
    harness: BadInputHarness, ingest_functions: ProcessPoolExecutor, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    ledger = harness.ledger

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        # An example is 86 messages against the emulators: shrinking one would take many minutes.
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(
        sqs_batches=st.lists(
            st.lists(sqs_specs, min_size=SQS_BATCH_SIZE, max_size=SQS_BATCH_SIZE),
            min_size=SQS_BATCHES,
            max_size=SQS_BATCHES,
        ),
        kafka_batch=st.lists(kafka_specs, min_size=KAFKA_BATCH_SIZE, max_size=KAFKA_BATCH_SIZE),
        api_requests=st.lists(api_specs, min_size=API_REQUESTS, max_size=API_REQUESTS),
        # One delivery in five comes twice (SQS at-least-once, a Kafka batch retried, a client's retry).
        deliveries=st.lists(
            st.sampled_from([1, 1, 1, 1, 2]),
            min_size=SQS_BATCHES + 1 + API_REQUESTS,
            max_size=SQS_BATCHES + 1 + API_REQUESTS,
        ),
        oversized=st.integers(0, 9),
    )
    def deliver(
        sqs_batches: list[list[Spec]],
        kafka_batch: list[Spec],
        api_requests: list[Spec],
        deliveries: list[int],
        oversized: int,
    ) -> None:
        ledger.examples += 1
        if oversized == 0:  # a body over the API's 4 MiB now and then: costly to build, so rare
            api_requests = [*api_requests[1:], over_4mib()]
        ingest = [harness.sqs(batch, deliveries=n) for batch, n in zip(sqs_batches, deliveries, strict=False)]
        ingest.append(harness.kafka(kafka_batch, deliveries=deliveries[SQS_BATCHES]))
        requests = [
            harness.api(request, deliveries=n)
            for request, n in zip(api_requests, deliveries[SQS_BATCHES + 1 :], strict=True)
        ]
        # The ingest functions run in their processes, the API function here, all at once.
        invocations = [(i, ingest_functions.submit(invoke_ingest, i)) for i in ingest]
        for status in [send() for send in requests]:
            if status is not None:
                ledger.rejected[status] += 1
        for invocation, responses in invocations:
            assert responses.result() == [{"batchItemFailures": []}] * invocation.deliveries

    deliver()
    # One message over the ceiling of extras stored by reference: quarantined, its size and digest kept.
    over = over_ceiling()
    invocation = harness.sqs([over], deliveries=1)
    assert ingest_functions.submit(invoke_ingest, invocation).result() == [{"batchItemFailures": []}]
    delivered = time.monotonic() - began

    # Every good message is exactly one event, with its payload; nothing else was stored.
    resolver = ExtraResolver(harness.s3)
    by_reference = 0
    for asset, expected in ledger.good.items():
        stored = list(harness.events(asset))
        ids = [e["id"] for e in stored]
        assert len(ids) == len(set(ids)), f"{asset}: {len(ids) - len(set(ids))} duplicate events"
        assert set(ids) == set(expected), (
            f"{asset}: missing {sorted(set(expected) - set(ids))[:5]}, unexpected {sorted(set(ids) - set(expected))[:5]}"
        )

        def whole_payload(event: dict[str, Any], asset: str = asset) -> str:
            whole = resolver.event(JobEvent.from_dict(event)).extra  # reads S3 when by reference
            return payload_digest(whole if asset == CURATED else whole["payload"])

        with ThreadPoolExecutor(max_workers=4) as readers:
            digests = list(readers.map(whole_payload, stored))
        for event, digest in zip(stored, digests, strict=True):
            expect, sent = expected[event["id"]]
            assert (REF_KEY in event["extra"]) == (expect == BY_REFERENCE), (asset, event["id"], expect)
            assert digest == sent, (asset, event["id"])
            by_reference += expect == BY_REFERENCE

    # Every bad message is quarantined once, with the reason its kind calls for; nothing else is.
    kept = list(harness.quarantine())
    identities = Counter(q["identity"] for q in kept)
    assert [i for i, n in identities.items() if n > 1] == []
    assert set(identities) == set(ledger.bad), (
        f"missing {sorted(set(ledger.bad) - set(identities))[:5]}, unexpected {sorted(set(identities) - set(ledger.bad))[:5]}"
    )
    for record in kept:
        codes, watcher = ledger.bad[record["identity"]]
        prefixes = tuple(p for code in codes for p in REASONS[code])
        assert record["reason"].startswith(prefixes), (codes, record["reason"][:200])
        assert record["watcher"] == watcher, record["identity"]
        body = record["facts"]["body"]
        assert len(record["body"].encode()) <= MAX_QUARANTINE_BODY_BYTES
        assert body["truncated"] == ("cut to its first" in record["reason"]), record["identity"]
    (too_large,) = [q for q in kept if q["identity"].endswith(invocation.event["Records"][0]["messageId"])]
    assert too_large["facts"]["body"]["sha256"] == hashlib.sha256(over.body.encode()).hexdigest()
    assert f"{MAX_EXTRA_BYTES_BY_REFERENCE}-byte ceiling" in too_large["reason"]

    # Only the events stored by reference have objects (no redelivery wrote one).
    pages = harness.s3.get_paginator("list_objects_v2").paginate(
        Bucket=harness.deps.settings.runs_bucket, Prefix="extras/"
    )
    objects = sum(page.get("KeyCount", 0) for page in pages)
    assert objects == by_reference

    tried = sum(ledger.sent.values())
    elapsed = time.monotonic() - began
    summary = (
        f"bad input: {tried} messages tried in {ledger.examples} examples (sqs {ledger.sent['sqs']}, "
        f"kafka {ledger.sent['kafka']}, api {ledger.sent['api']}), {ledger.redelivered} redelivered; "
        f"quarantined {len(kept)}, rejected {ledger.rejected.total()} "
        f"({', '.join(f'{status}: {n}' for status, n in sorted(ledger.rejected.items()))}), "
        f"stored {sum(len(v) for v in ledger.good.values())} (by reference {by_reference}); "
        f"{delivered:.0f} s delivering, {elapsed:.0f} s in all"
    )
    with capsys.disabled():
        print(f"\n{summary}")
    assert tried >= MIN_MESSAGES, summary
