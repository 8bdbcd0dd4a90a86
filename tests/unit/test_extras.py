"""Extras stored by reference: placement, the reference shape, ingest and the API writing them, the job reading them."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from hypothesis import given
from hypothesis import strategies as st

from assetflow import Asset, AssetWatcher, Catalog, KafkaTopic, SqsQueue
from assetflow.adapters.extras import (
    Detached,
    ExtraRef,
    ExtraReferenceError,
    ExtrasUnavailableError,
    S3ExtrasStore,
    reference_of,
    summarise_facts,
    verified_extra,
)
from assetflow.adapters.messages import KafkaSource, MessageTranslator
from assetflow.core import limits
from assetflow.core.events import AssetEvent, derive_id
from assetflow.core.jsonvalue import canonical_json
from assetflow.core.limits import INLINE_EXTRA_BYTES
from assetflow.core.limits import MAX_MESSAGE_EXTRA_BYTES as MAX_EXTRA_BYTES
from assetflow.ports import Accepted, ExtraTooLargeError, Quarantined
from assetflow.usecases import requests
from assetflow.usecases.ingest import Ingest
from assetflow_dev import client
from assetflow_job import AssetEvent as JobEvent
from assetflow_job import ExtraReferenceError as JobExtraReferenceError
from assetflow_job import ExtraResolver, RunContext
from assetflow_job.contract import REF_KEY
from tests.unit.fakes import own_key, put_events_one_by_one

NOW = datetime(2026, 11, 21, 10, 15, 0, 123456, tzinfo=UTC)
BUCKET = "runs-bucket"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:orders"
MSK_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/plant/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-1"
# Small limits keep the examples small; the behaviour is the same at the real ones.
SMALL_INLINE, SMALL_CEILING = 2_000, 50_000


class FakeS3:
    """put_object/get_object over a dict, checking the SHA-256 checksum as S3 does."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.puts = 0

    def put_object(  # boto3's argument names
        self,
        *,
        Bucket: str,  # noqa: N803
        Key: str,  # noqa: N803
        Body: bytes,  # noqa: N803
        ChecksumSHA256: str,  # noqa: N803
        **_: Any,
    ) -> dict[str, Any]:
        assert base64.b64decode(ChecksumSHA256) == hashlib.sha256(Body).digest()
        self.objects[(Bucket, Key)] = Body
        self.puts += 1
        return {}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803
        if (Bucket, Key) not in self.objects:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "missing"}}, "GetObject")
        return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}

    def data(self, uri: str) -> bytes:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return self.objects[(bucket, key)]


def extras_store(s3: Any = None, **limits: int) -> S3ExtrasStore:
    return S3ExtrasStore(s3 or FakeS3(), BUCKET, **limits)


# --- canonical JSON and placement ------------------------------------------------------------------


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(st.characters(codec=None)),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=10,
    )
)
def test_canonical_json_is_ascii_sorted_and_round_trips(value: Any) -> None:
    data = canonical_json(value)
    assert data.isascii()
    assert json.loads(data) == value
    assert canonical_json(json.loads(data)) == data


def test_an_extra_within_the_inline_limit_stays_inline() -> None:
    store = extras_store(inline_limit=SMALL_INLINE)
    extra = {"payload": "x" * (SMALL_INLINE - 20)}
    assert len(canonical_json(extra)) <= SMALL_INLINE
    placed, detached = store.place("ev-1", extra, keep={"message": {"queue": "q"}})
    assert placed == extra
    assert detached is None


def test_a_larger_extra_becomes_a_reference_to_its_exact_bytes() -> None:
    store = extras_store(inline_limit=SMALL_INLINE)
    extra = {"payload": {"text": "é" * SMALL_INLINE}, "message": {"queue": "q"}}

    placed, detached = store.place("ev-1", extra, keep={"message": {"queue": "q"}})

    assert detached is not None
    data = canonical_json(extra).encode()
    digest = hashlib.sha256(data).hexdigest()
    assert detached.data == data
    assert placed == {
        "message": {"queue": "q"},
        REF_KEY: {"uri": f"s3://{BUCKET}/extras/ev-1/{digest}.json", "bytes": len(data), "sha256": digest},
    }
    assert reference_of(placed) == detached.ref
    assert reference_of(extra) is None
    assert len(canonical_json(placed)) < SMALL_INLINE


def test_the_same_content_gets_the_same_object_and_other_content_another() -> None:
    store = extras_store(inline_limit=SMALL_INLINE)
    first = {"payload": "x" * SMALL_INLINE, "message": {"receive_count": "1"}}
    again = store.place("ev-1", dict(first))[1]
    changed = store.place("ev-1", {**first, "message": {"receive_count": "2"}})[1]
    assert again is not None and changed is not None
    assert store.place("ev-1", first)[1] == again
    assert changed.ref.uri != again.ref.uri
    assert changed.ref.uri.startswith(f"s3://{BUCKET}/extras/ev-1/")


def test_over_the_ceiling_nothing_is_placed() -> None:
    store = extras_store(inline_limit=SMALL_INLINE, ceiling=SMALL_CEILING)
    with pytest.raises(ExtraTooLargeError) as caught:
        store.place("ev-1", {"payload": "x" * SMALL_CEILING})
    assert caught.value.limit == SMALL_CEILING
    assert caught.value.size > SMALL_CEILING
    assert "ceiling" in str(caught.value)


@pytest.mark.parametrize(
    "doc",
    [
        None,
        [],
        {"uri": "https://x/y", "bytes": 1, "sha256": "0" * 64},
        {"uri": "s3://bucket", "bytes": 1, "sha256": "0" * 64},
        {"uri": "s3://b/k", "bytes": True, "sha256": "0" * 64},
        {"uri": "s3://b/k", "bytes": -1, "sha256": "0" * 64},
        {"uri": "s3://b/k", "bytes": 1, "sha256": "XYZ"},
    ],
)
def test_malformed_references_are_refused(doc: Any) -> None:
    with pytest.raises(ExtraReferenceError):
        ExtraRef.from_json(doc)


def test_bulky_facts_are_summarised_next_to_a_reference() -> None:
    small = {"queue": "q", "message_id": "m-1", "attributes": {"SentTimestamp": "1"}}
    assert summarise_facts(small) == small
    bulky = {**small, "message_attributes": {"blob": {"stringValue": "y" * 20_000}}}
    kept = summarise_facts(bulky)
    assert kept["message_id"] == "m-1"
    assert kept["attributes"] == small["attributes"]
    assert kept["message_attributes"] == {"omitted_bytes": len(canonical_json(bulky["message_attributes"]))}


# --- writing and reading -------------------------------------------------------------------------


def test_written_extras_read_back_verified() -> None:
    s3 = FakeS3()
    store = extras_store(s3, inline_limit=SMALL_INLINE)
    extra = {"payload": ["x" * SMALL_INLINE], "message": {}}
    _, detached = store.place("ev-1", extra)
    assert detached is not None
    store.write(detached)
    assert store.read(detached.ref) == extra

    bucket, key = detached.ref.bucket_and_key
    s3.objects[(bucket, key)] = s3.objects[(bucket, key)].replace(b"x", b"y")
    with pytest.raises(ExtraReferenceError, match="SHA-256"):
        store.read(detached.ref)
    s3.objects[(bucket, key)] += b" "
    with pytest.raises(ExtraReferenceError, match="bytes"):
        store.read(detached.ref)
    del s3.objects[(bucket, key)]
    with pytest.raises(ExtraReferenceError, match="missing"):
        store.read(detached.ref)


def test_verified_extra_refuses_a_non_object() -> None:
    data = b"[1,2]"
    ref = ExtraRef("s3://b/k", len(data), hashlib.sha256(data).hexdigest())
    with pytest.raises(ExtraReferenceError, match="not a JSON object"):
        verified_extra(ref, data)


def test_a_throttled_write_is_retryable_and_a_refused_one_is_not() -> None:
    s3 = client("s3", "http://127.0.0.1:9")  # never reached: the stubber answers
    store = extras_store(s3)
    detached = Detached(
        ExtraRef(f"s3://{BUCKET}/extras/e/k.json", 2, hashlib.sha256(b"{}").hexdigest()), b"{}"
    )
    with Stubber(s3) as stub:
        stub.add_client_error("put_object", service_error_code="SlowDown", http_status_code=503)
        with pytest.raises(ExtrasUnavailableError):
            store.write(detached)
        stub.add_client_error("put_object", service_error_code="AccessDenied", http_status_code=403)
        with pytest.raises(ClientError):
            store.write(detached)


# --- ingest ---------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}


@pytest.fixture(scope="module")
def translator() -> MessageTranslator:
    return MessageTranslator(
        Catalog.build(
            [
                Asset(
                    "x-shop://orders", watchers=[AssetWatcher("orders", SqsQueue("orders", schema=SCHEMA))]
                ),
                Asset("x-iot://raw", watchers=[AssetWatcher("raw", KafkaTopic("raw"))]),
            ]
        )
    )


def sqs(body: str, *, receive_count: str = "1", **attributes: Any) -> dict[str, Any]:
    return {
        "messageId": "m-1",
        "body": body,
        "attributes": {"ApproximateReceiveCount": receive_count, "SentTimestamp": "1763719200123"},
        "messageAttributes": attributes,
        "eventSourceARN": QUEUE_ARN,
    }


def big_order(size: int) -> str:
    return json.dumps({"order_id": "o-1", "lines": ["x" * 100] * (size // 100)})


@dataclass
class FakeStore:
    """The ingest store's dedupe behaviour, in memory."""

    events: dict[str, AssetEvent] = field(default_factory=dict)

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ):
        key = dedupe_key if dedupe_key is not None else own_key(event)
        if key in self.events:
            return self.events[key], False
        self.events[key] = event
        return event, True

    def find_dedupe(self, dedupe_key: str) -> AssetEvent | None:
        return self.events.get(dedupe_key)

    def find_stored(self, event: AssetEvent) -> AssetEvent | None:
        return self.events.get(own_key(event))

    def put_events(
        self, events: Any, *, now: datetime, lanes: Any = None, lasting: bool = False, blind: bool = False
    ) -> Any:
        return put_events_one_by_one(self, events, now=now, lanes=lanes, lasting=lasting, blind=blind)

    def quarantine(self, **fields: Any) -> bool:
        raise AssertionError(f"unexpected quarantine: {fields['reason']}")


def test_a_large_message_is_stored_by_reference_with_the_same_event_id(translator: MessageTranslator) -> None:
    s3 = FakeS3()
    extras = extras_store(s3)
    body = big_order(INLINE_EXTRA_BYTES * 2)
    record = sqs(body, trace={"stringValue": "t-1", "dataType": "String"})

    inline = translator.from_sqs(record, now=NOW)
    outcome = translator.from_sqs(record, now=NOW, extras=extras)

    assert isinstance(inline, Accepted) and isinstance(outcome, Accepted)
    assert outcome.event.id == inline.event.id == derive_id("ev", f"sqs:{QUEUE_ARN}:m-1")
    assert outcome.detached is not None
    extra = dict(outcome.event.to_json()["extra"])
    assert set(extra) == {REF_KEY, "message"}
    assert extra["message"] == inline.event.to_json()["extra"]["message"]
    assert extra[REF_KEY]["uri"].startswith(f"s3://{BUCKET}/extras/{outcome.event.id}/")

    store = FakeStore()
    assert Ingest(store=store, extras=extras).store_outcome(outcome, now=NOW) is True
    assert json.loads(s3.data(extra[REF_KEY]["uri"])) == inline.event.to_json()["extra"]
    assert json.loads(s3.data(extra[REF_KEY]["uri"]))["payload"] == json.loads(body)

    # A redelivery (its receive count is a fact, so its bytes differ) writes nothing and keeps the event.
    again = translator.from_sqs(sqs(body, receive_count="2"), now=NOW, extras=extras)
    assert isinstance(again, Accepted) and again.detached is not None
    assert again.detached.ref != outcome.detached.ref
    assert Ingest(store=store, extras=extras).store_outcome(again, now=NOW) is False
    assert s3.puts == 1
    assert store.events[own_key(outcome.event)] == outcome.event


def test_a_small_message_stays_inline_with_an_extras_store(translator: MessageTranslator) -> None:
    s3 = FakeS3()
    outcome = translator.from_sqs(sqs(big_order(1000)), now=NOW, extras=extras_store(s3))
    assert isinstance(outcome, Accepted) and outcome.detached is None
    assert outcome.event.extra["payload"]["order_id"] == "o-1"
    assert Ingest(store=FakeStore(), extras=extras_store(s3)).store_outcome(outcome, now=NOW) is True
    assert s3.puts == 0


def test_between_the_old_limit_and_the_ceiling_only_a_store_saves_the_message(
    translator: MessageTranslator,
) -> None:
    body = big_order(MAX_EXTRA_BYTES + 10_000)
    without = translator.from_sqs(sqs(body), now=NOW)
    assert isinstance(without, Quarantined) and without.code == "too-large"
    assert "no extras store" in without.reason
    with_store = translator.from_sqs(sqs(body), now=NOW, extras=extras_store())
    assert isinstance(with_store, Accepted) and with_store.detached is not None


def test_over_the_ceiling_a_message_is_quarantined_whole(translator: MessageTranslator) -> None:
    body = big_order(SMALL_CEILING)
    outcome = translator.from_sqs(sqs(body), now=NOW, extras=extras_store(ceiling=SMALL_CEILING))
    assert isinstance(outcome, Quarantined) and outcome.code == "too-large"
    assert outcome.reason.startswith("payload too large for an event; its extra is ")
    assert f"{SMALL_CEILING}-byte ceiling" in outcome.reason
    assert outcome.body == body


def test_huge_kafka_headers_stay_out_of_the_inline_facts(translator: MessageTranslator) -> None:
    record = {
        "topic": "raw",
        "partition": 0,
        "offset": 5,
        "timestamp": 1,
        "timestampType": "CREATE_TIME",
        "key": None,
        "value": base64.b64encode(b'{"ok": true}').decode(),
        "headers": [{"trace": list(b"t-1")}, {"blob": list(b"z" * 60_000)}],
    }
    source = KafkaSource(event_source="aws:kafka", event_source_arn=MSK_ARN)
    outcome = translator.from_kafka(record, source=source, now=NOW, extras=extras_store())
    assert isinstance(outcome, Accepted) and outcome.detached is not None
    message = outcome.event.extra["message"]
    assert message["offset"] == 5
    assert message["headers"] == {
        "omitted_bytes": len(canonical_json({"trace": "t-1", "blob": "z" * 60_000}))
    }
    assert json.loads(outcome.detached.data)["message"]["headers"]["blob"] == "z" * 60_000


def test_a_detached_outcome_needs_the_store_that_placed_it(translator: MessageTranslator) -> None:
    outcome = translator.from_sqs(sqs(big_order(INLINE_EXTRA_BYTES * 2)), now=NOW, extras=extras_store())
    with pytest.raises(ValueError, match="extras store"):
        Ingest(store=FakeStore()).store_outcome(outcome, now=NOW)


def test_an_sqs_body_with_a_lone_surrogate_is_quarantined(translator: MessageTranslator) -> None:
    outcome = translator.from_sqs(sqs('{"order_id": "o-1"}\ud800'), now=NOW)
    assert isinstance(outcome, Quarantined) and outcome.code == "not-utf8"
    assert "unpaired surrogate at character 19" in outcome.reason
    outcome.body.encode()


# --- the API's views ------------------------------------------------------------------------------


def test_api_extras_are_refused_when_they_use_the_reserved_key_or_are_not_unicode() -> None:
    with pytest.raises(requests.RequestError, match="extra_ref"):
        requests.check_extra({REF_KEY: {"uri": "s3://b/k"}})
    with pytest.raises(requests.RequestError, match="not valid Unicode"):
        requests.check_extra({"a": "\ud800"})
    with pytest.raises(requests.RequestError, match="not valid Unicode"):
        requests.check_partition_key("\udfff")
    with pytest.raises(requests.RequestError, match="not valid Unicode"):
        requests.parse_body('{"uri": "x"}\ud800')
    big = {"blob": "x" * (limits.MAX_REQUEST_EXTRA_BYTES + 1)}
    with pytest.raises(requests.PayloadTooLargeError):
        requests.parse_emit_request({"uri": "x-a://b", "extra": big})
    assert requests.parse_emit_request({"uri": "x-a://b", "extra": big}, by_reference=True).extra == big


class FakeEventStore(FakeStore):
    def list_events(self, uri: str, *, limit: int = 100, token: str | None = None) -> Any:
        from assetflow.ports import Page

        return Page([e.to_json() for e in self.events.values() if e.asset == uri][:limit], None)

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ):
        return super().put_event(event, dedupe_key=dedupe_key or event.id, now=now)


def test_the_api_stores_a_large_extra_by_reference_once_per_idempotency_key() -> None:
    s3, store = FakeS3(), FakeEventStore()
    extras = extras_store(s3)
    catalog = Catalog.build([Asset("x-a://b")])
    extra = {"rows": ["r" * 100] * 1000}
    request = requests.parse_emit_request({"uri": "x-a://b", "extra": extra}, by_reference=True)

    def emit(key: str, req: requests.EmitRequest = request) -> requests.EmitResult:
        return requests.emit_event(
            store,
            catalog,
            req,
            principal="p",
            request_id="r",
            now=NOW,
            idempotency_key=key,
            extras=extras,  # type: ignore[arg-type]
        )

    first = emit("k-1")
    ref = first.event.to_json()["extra"][REF_KEY]
    assert set(first.event.to_json()["extra"]) == {REF_KEY}
    assert json.loads(s3.data(ref["uri"])) == extra
    replay = emit("k-1")
    assert replay.created is False and replay.event == first.event
    assert s3.puts == 1
    other = requests.parse_emit_request(
        {"uri": "x-a://b", "extra": {"rows": ["s"] * 10_000}}, by_reference=True
    )
    with pytest.raises(requests.IdempotencyKeyReusedError):
        emit("k-1", other)
    assert s3.puts == 1

    too_big = requests.parse_emit_request({"uri": "x-a://b", "extra": extra}, by_reference=True)
    with pytest.raises(requests.PayloadTooLargeError, match="ceiling"):
        requests.emit_event(
            store,
            catalog,
            too_big,
            principal="p",
            request_id="r2",
            now=NOW,
            extras=extras_store(s3, ceiling=1000),  # type: ignore[arg-type]
        )


# --- the job side ----------------------------------------------------------------------------------


def job_event(extra: dict[str, Any], event_id: str = "ev-1") -> dict[str, Any]:
    return {
        "asset": "x-a://b",
        "id": event_id,
        "timestamp": "2026-11-21T10:00:00.000000Z",
        "extra": extra,
        "source": {},
        "partition_key": None,
    }


def stored_reference(s3: FakeS3, extra: dict[str, Any], event_id: str = "ev-1") -> dict[str, Any]:
    placed, detached = extras_store(s3, inline_limit=10).place(event_id, extra, keep={"message": {"q": 1}})
    assert detached is not None
    extras_store(s3).write(detached)
    return placed


def context(triggers: list[dict[str, Any]], s3: FakeS3, reader: Any = None) -> RunContext:
    document = {
        "format": "assetflow.run-context",
        "version": 1,
        "run_id": "r",
        "pipeline": "p",
        "outlet_metadata_uri": "/dev/null",
        "triggering_asset_events": {"x-a://b": triggers},
        "inlets": [{"type": "asset", "uri": "x-a://b"}],
    }
    return RunContext(document, s3_client=s3, event_reader=reader)


def test_the_job_sees_whole_extras_in_triggering_and_inlet_events() -> None:
    s3 = FakeS3()
    whole = {"payload": {"rows": list(range(50))}, "message": {"q": 1}}
    placed = stored_reference(s3, whole)

    class Reader:
        def read_page(self, uri: str, cursor: Any) -> tuple[list[JobEvent], Any]:
            return [
                JobEvent.from_dict(job_event(placed, "ev-2")),
                JobEvent.from_dict(job_event({"a": 1})),
            ], None

    ctx = context([job_event(placed), job_event({"small": True}, "ev-0")], s3, Reader())

    events = ctx.triggering_asset_events["x-a://b"]
    assert [e.extra for e in events] == [{"small": True}, whole]
    assert events[1].payload == {"rows": list(range(50))}
    assert [e.extra for e in ctx.inlet_events["x-a://b"]] == [whole, {"a": 1}]


def test_the_job_refuses_an_object_that_is_not_the_referenced_one() -> None:
    s3 = FakeS3()
    placed = stored_reference(s3, {"payload": "p" * 100})
    uri = placed[REF_KEY]["uri"]
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    s3.objects[(bucket, key)] = s3.objects[(bucket, key)].replace(b"p", b"q")
    with pytest.raises(JobExtraReferenceError, match="SHA-256"):
        context([job_event(placed)], s3)
    del s3.objects[(bucket, key)]
    with pytest.raises(JobExtraReferenceError, match="cannot be read"):
        context([job_event(placed)], s3)
    with pytest.raises(JobExtraReferenceError, match="malformed"):
        ExtraResolver(s3).resolve_extra({REF_KEY: {"uri": uri}})


def test_the_job_reads_local_references_too(tmp_path: Any) -> None:
    data = canonical_json({"payload": 1}).encode()
    path = tmp_path / "extra.json"
    path.write_bytes(data)
    ref = {"uri": f"file://{path}", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert ExtraResolver().resolve_extra({REF_KEY: ref}) == {"payload": 1}
