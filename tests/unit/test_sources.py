"""The S3, EventBridge and Kinesis sources: declarations, and their messages into events or quarantine."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from assetflow import (
    Asset,
    AssetWatcher,
    Catalog,
    DefinitionError,
    EventBridgePattern,
    KinesisStream,
    S3ObjectCreated,
)
from assetflow.adapters.messages import UNKNOWN_WATCHER, MessageTranslator
from assetflow.core.catalog import Catalog as CatalogType
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.watchers import describe_source, source_from_json
from assetflow.ports import Accepted, Quarantined
from assetflow.usecases.ingest import Ingest
from tests.unit.test_messages import FakeContext, FakeStore

NOW = datetime(2026, 11, 26, 4, 30, tzinfo=UTC)
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:generated-queue-name"
STREAM_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/clicks"

landing = AssetWatcher("landing", S3ObjectCreated("landing-zone", prefix="in/", suffix=".csv"))
orders = AssetWatcher(
    "orders-placed",
    EventBridgePattern(
        {"source": ["shop.orders"], "detail-type": ["Order Placed"]},
        schema={"type": "object", "required": ["order_id"]},
        partition_key_field="day",
    ),
)
clicks = AssetWatcher("clicks", KinesisStream("clicks", filter={"page": [{"prefix": "/"}]}))


def build(*assets: Asset) -> CatalogType:
    return Catalog.build(assets)


CATALOG = build(
    Asset("s3://landing-zone/in", watchers=[landing]),
    Asset("x-shop://orders", watchers=[orders]),
    Asset("x-web://clicks", watchers=[clicks]),
)


def s3_event(
    key: str = "in/2026/a b.csv",
    *,
    bucket: str = "landing-zone",
    version: str | None = None,
    etag: str = "b1946ac92492d2347c6235b4d2611184",
    sequencer: str = "0064D3901D00059242",
    etag_name: str = "etag",
    detail_type: str = "Object Created",
) -> dict[str, Any]:
    obj: dict[str, Any] = {"key": key, "size": 5, etag_name: etag, "sequencer": sequencer}
    if version is not None:
        obj["version-id"] = version
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": detail_type,
        "source": "aws.s3",
        "account": "123456789012",
        "time": "2026-11-26T04:30:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {"version": "0", "bucket": {"name": bucket}, "object": obj, "reason": "PutObject"},
    }


def app_event(detail: Any, *, event_id: str = "e-1", source: str = "shop.orders") -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "Order Placed",
        "source": source,
        "account": "123456789012",
        "time": "2026-11-26T04:30:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
    }


def sqs_of(envelope: Any, message_id: str = "m-1") -> dict[str, Any]:
    body = envelope if isinstance(envelope, str) else json.dumps(envelope)
    return {"messageId": message_id, "body": body, "eventSourceARN": QUEUE_ARN, "attributes": {}}


def kinesis(
    data: bytes | str, *, sequence: str = "4959", shard: str = "shardId-000000000000"
) -> dict[str, Any]:
    raw = data.encode() if isinstance(data, str) else data
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": "pk-1",
            "sequenceNumber": sequence,
            "data": base64.b64encode(raw).decode(),
            "approximateArrivalTimestamp": 1_795_000_000.5,
        },
        "eventSource": "aws:kinesis",
        "eventID": f"{shard}:{sequence}",
        "eventSourceARN": STREAM_ARN,
        "awsRegion": "us-east-1",
    }


# --- declarations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: S3ObjectCreated("Bad_Bucket"),
        lambda: S3ObjectCreated("s3://landing-zone"),
        lambda: S3ObjectCreated("landing-zone", prefix="/in"),
        lambda: S3ObjectCreated("landing-zone", batch_size=11),
        lambda: EventBridgePattern({}),
        lambda: EventBridgePattern({"source": "shop"}),
        lambda: EventBridgePattern({"source": [{"wildcard": "x*"}]}),
        lambda: EventBridgePattern({"source": ["a"]}, bus="no spaces"),
        lambda: KinesisStream("bad stream"),
        lambda: KinesisStream("clicks", starting_position="AT_TIMESTAMP"),  # type: ignore[arg-type]
        lambda: KinesisStream("clicks", batch_size=0),
        lambda: KinesisStream("clicks", partition_key_field="a..b"),
    ],
)
def test_invalid_sources_are_refused_with_a_clear_error(make: Any) -> None:
    with pytest.raises(DefinitionError):
        make()


def test_sources_round_trip_through_the_catalog_document() -> None:
    document = CATALOG.to_document()
    again = Catalog.from_document(json.loads(json.dumps(document)))
    for name, (watcher, _uri) in CATALOG.watchers.items():
        assert again.watchers[name][0] == watcher
        assert source_from_json(watcher.source.to_json()) == watcher.source
    assert {describe_source(w.source) for w, _ in CATALOG.watchers.values()} == {
        "S3 landing-zone/in/*.csv",
        "EventBridge default",
        "Kinesis clicks",
    }


def test_s3_pattern_matches_the_bucket_prefix_and_suffix() -> None:
    assert S3ObjectCreated("b-1", prefix="in/").event_pattern()["detail"] == {
        "bucket": {"name": ["b-1"]},
        "object": {"key": [{"prefix": "in/"}]},
    }
    assert S3ObjectCreated("b-1", suffix=".csv").event_pattern()["detail"]["object"] == {
        "key": [{"suffix": ".csv"}]
    }
    both = S3ObjectCreated("b-1", prefix="a*b/", suffix=".csv").event_pattern()
    assert both["detail"]["object"] == {"key": [{"wildcard": "a\\*b/*.csv"}]}
    assert "object" not in S3ObjectCreated("b-1").event_pattern()["detail"]
    assert both["source"] == ["aws.s3"] and both["detail-type"] == ["Object Created"]


def test_two_watchers_may_watch_one_bucket_or_stream() -> None:
    # EventBridge rules and Kinesis mappings each get every event: nothing is split between watchers.
    build(
        Asset("x-a://a", watchers=[AssetWatcher("a", S3ObjectCreated("shared"))]),
        Asset("x-b://b", watchers=[AssetWatcher("b", S3ObjectCreated("shared", prefix="x/"))]),
        Asset("x-c://c", watchers=[AssetWatcher("c", KinesisStream("s"))]),
        Asset("x-d://d", watchers=[AssetWatcher("d", KinesisStream("s"))]),
    )


# --- S3 objects -----------------------------------------------------------------------------------


def test_an_s3_object_becomes_an_event_with_its_description() -> None:
    translator = MessageTranslator(CATALOG, watcher="landing")
    outcome = translator.from_sqs(sqs_of(s3_event()), now=NOW)
    assert isinstance(outcome, Accepted)
    extra = thaw_json(outcome.event.extra)
    assert {k: extra[k] for k in ("bucket", "key", "size", "etag")} == {
        "bucket": "landing-zone",
        "key": "in/2026/a b.csv",
        "size": 5,
        "etag": "b1946ac92492d2347c6235b4d2611184",
    }
    assert "version_id" not in extra
    assert outcome.event.source == {"type": "watcher", "watcher": "landing", "kind": "s3"}
    assert outcome.event.asset == "s3://landing-zone/in"


def test_s3_identity_is_the_object_version_not_the_message() -> None:
    translator = MessageTranslator(CATALOG, watcher="landing")
    first = translator.from_sqs(sqs_of(s3_event(version="v1"), "m-1"), now=NOW)
    again = translator.from_sqs(sqs_of(s3_event(version="v1", sequencer="other"), "m-2"), now=NOW)
    second = translator.from_sqs(sqs_of(s3_event(version="v2"), "m-3"), now=NOW)
    assert isinstance(first, Accepted) and isinstance(second, Accepted)
    assert first.identity == again.identity != second.identity
    assert thaw_json(first.event.extra)["version_id"] == "v1"
    # Without versions: the ETag and S3's sequencer (an overwrite has a new sequencer).
    plain = [
        translator.from_sqs(sqs_of(s3_event(etag=e, sequencer=q)), now=NOW).identity
        for e, q in (("e1", "01"), ("e1", "01"), ("e1", "02"), ("e2", "01"))
    ]
    assert plain[0] == plain[1] and len(set(plain)) == 3
    # moto's server spells the field eTag.
    moto = translator.from_sqs(sqs_of(s3_event(etag_name="eTag")), now=NOW)
    assert isinstance(moto, Accepted) and thaw_json(moto.event.extra)["etag"]


def test_an_s3_event_carries_the_objects_data_version_for_skip_unchanged() -> None:
    # The object's version id where the bucket keeps versions, else its content's ETag (the same bytes put
    # again make an event of the same version, which a skip_unchanged pipeline does not run for)
    translator = MessageTranslator(CATALOG, watcher="landing")
    versioned = translator.from_sqs(sqs_of(s3_event(version="v7")), now=NOW)
    plain = translator.from_sqs(sqs_of(s3_event(etag="e1", sequencer="01")), now=NOW)
    again = translator.from_sqs(sqs_of(s3_event(etag="e1", sequencer="02")), now=NOW)
    assert isinstance(versioned, Accepted) and isinstance(plain, Accepted) and isinstance(again, Accepted)
    assert versioned.event.version == "v7"
    assert plain.event.version == again.event.version == "e1"
    assert plain.event.to_json()["version"] == "e1"


def test_s3_redelivery_is_stored_once() -> None:
    translator = MessageTranslator(CATALOG, watcher="landing")
    store = FakeStore()
    ingest = Ingest(store=store)
    assert ingest.store_outcome(translator.from_sqs(sqs_of(s3_event(), "m-1"), now=NOW), now=NOW)
    assert not ingest.store_outcome(translator.from_sqs(sqs_of(s3_event(), "m-2"), now=NOW), now=NOW)
    assert len(store.events) == 1


@pytest.mark.parametrize(
    ("envelope", "code", "words"),
    [
        (s3_event("out/x.csv"), "filter", "not under the watched s3://landing-zone/in/*.csv"),
        (s3_event("in/x.json"), "filter", "not under"),
        (s3_event(bucket="other-bucket"), "filter", "s3://other-bucket/"),
        (s3_event(detail_type="Object Deleted"), "filter", "not an S3 object creation"),
        ({**s3_event(), "detail": {"bucket": {"name": "landing-zone"}}}, "malformed-record", "object key"),
        ("not json", "malformed-record", "not an EventBridge event"),
        ({"id": "x"}, "malformed-record", "not an EventBridge event"),
    ],
)
def test_s3_events_outside_the_watch_are_quarantined_with_the_reason(
    envelope: Any, code: str, words: str
) -> None:
    outcome = MessageTranslator(CATALOG, watcher="landing").from_sqs(sqs_of(envelope), now=NOW)
    assert isinstance(outcome, Quarantined)
    assert outcome.code == code and words in outcome.reason
    assert outcome.watcher == "landing"


def test_s3_filter_and_schema_apply_to_the_object_description() -> None:
    watcher = AssetWatcher(
        "big-files",
        S3ObjectCreated(
            "landing-zone",
            filter={"size": [{"numeric": [">", 10]}]},
            schema={"type": "object", "required": ["version_id"]},
        ),
    )
    translator = MessageTranslator(build(Asset("x-a://big", watchers=[watcher])), watcher="big-files")
    small = translator.from_sqs(sqs_of(s3_event()), now=NOW)
    assert isinstance(small, Quarantined) and small.code == "filter"
    big = s3_event()
    big["detail"]["object"]["size"] = 11
    unversioned = translator.from_sqs(sqs_of(big), now=NOW)
    assert isinstance(unversioned, Quarantined) and unversioned.code == "schema"
    big["detail"]["object"]["version-id"] = "v9"
    assert isinstance(translator.from_sqs(sqs_of(big), now=NOW), Accepted)


# --- EventBridge patterns -------------------------------------------------------------------------


def test_a_matching_event_becomes_an_event_with_detail_type_source_and_detail() -> None:
    translator = MessageTranslator(CATALOG, watcher="orders-placed")
    outcome = translator.from_sqs(sqs_of(app_event({"order_id": "o-1", "day": "2026-11-26"})), now=NOW)
    assert isinstance(outcome, Accepted)
    extra = thaw_json(outcome.event.extra)
    assert extra["detail-type"] == "Order Placed"
    assert extra["source"] == "shop.orders"
    assert extra["detail"] == {"order_id": "o-1", "day": "2026-11-26"}
    assert extra["event"]["id"] == "e-1"
    assert outcome.event.partition_key == "2026-11-26"
    assert outcome.event.source["kind"] == "eventbridge"
    # The identity is the EventBridge event id: a second delivery in another SQS message is the same.
    again = translator.from_sqs(
        sqs_of(app_event({"order_id": "o-1", "day": "2026-11-26"}), message_id="m-9"), now=NOW
    )
    assert again.identity == outcome.identity == "eventbridge:orders-placed:e-1"


def test_events_failing_the_pattern_or_schema_are_quarantined() -> None:
    translator = MessageTranslator(CATALOG, watcher="orders-placed")
    stranger = translator.from_sqs(sqs_of(app_event({"order_id": "o"}, source="other")), now=NOW)
    assert isinstance(stranger, Quarantined) and stranger.code == "filter"
    assert "'source'" in stranger.reason
    no_id = translator.from_sqs(sqs_of(app_event({"day": "2026-11-26"})), now=NOW)
    assert isinstance(no_id, Quarantined) and no_id.code == "schema"
    no_day = translator.from_sqs(sqs_of(app_event({"order_id": "o"})), now=NOW)
    assert isinstance(no_day, Quarantined) and no_day.code == "partition-key"


def test_one_pattern_feeding_several_assets_makes_one_event_per_asset() -> None:
    shared = AssetWatcher("shared", EventBridgePattern({"source": ["shop.orders"]}))
    catalog = build(Asset("x-a://one", watchers=[shared]), Asset("x-a://two", watchers=[shared]))
    store = FakeStore()
    outcome = MessageTranslator(catalog, watcher="shared").from_sqs(sqs_of(app_event({"n": 1})), now=NOW)
    Ingest(store=store).store_outcome(outcome, now=NOW)
    Ingest(store=store).store_outcome(outcome, now=NOW)
    assert sorted(e.asset for e in store.events.values()) == ["x-a://one", "x-a://two"]


# --- Kinesis ---------------------------------------------------------------------------------------


def test_a_kinesis_record_becomes_an_event_keyed_on_its_sequence_number() -> None:
    translator = MessageTranslator(CATALOG)
    outcome = translator.from_kinesis(kinesis('{"page": "/home"}'), now=NOW)
    assert isinstance(outcome, Accepted)
    assert outcome.identity == f"kinesis:clicks:{STREAM_ARN}:shardId-000000000000:4959"
    assert outcome.lasting_identity
    extra = thaw_json(outcome.event.extra)
    assert extra["payload"] == {"page": "/home"}
    assert extra["message"]["partition_key"] == "pk-1"
    assert extra["message"]["shard_id"] == "shardId-000000000000"
    assert outcome.event.source["kind"] == "kinesis"


@pytest.mark.parametrize(
    ("record", "code"),
    [
        (kinesis('{"page": "home"}'), "filter"),
        (kinesis(b"\xff\xfe"), "not-utf8"),
        ({**kinesis("{}"), "kinesis": {"sequenceNumber": "1", "data": "%%%"}}, "not-base64"),
        ({**kinesis("{}"), "eventSourceARN": STREAM_ARN.replace("clicks", "other")}, "unknown-source"),
        ({**kinesis('{"page": "/"}'), "eventID": ""}, "malformed-record"),
    ],
)
def test_bad_kinesis_records_are_quarantined(record: dict[str, Any], code: str) -> None:
    outcome = MessageTranslator(CATALOG).from_kinesis(record, now=NOW)
    assert isinstance(outcome, Quarantined) and outcome.code == code
    if code == "unknown-source":
        assert outcome.watcher == UNKNOWN_WATCHER


def _deps(store: FakeStore, watcher: str | None = None) -> Any:
    return SimpleNamespace(
        messages=MessageTranslator(CATALOG, watcher=watcher),
        store=store,
        extras=None,
        ingest=Ingest(store=store),
    )


def test_kinesis_batch_reports_its_first_failure_and_holds_back_the_rest() -> None:
    from assetflow.functions.handle_kinesis_records import lambda_handler

    store = FakeStore(fail_for={":2"})
    event = {"Records": [kinesis('{"page": "/"}', sequence=str(n)) for n in (1, 2, 3)]}
    assert lambda_handler(event, FakeContext(), deps=_deps(store)) == {
        "batchItemFailures": [{"itemIdentifier": "2"}]
    }
    assert [k.rsplit(":", 1)[1] for k in store.events] == ["1"]
    store.fail_for.clear()
    assert lambda_handler(event, FakeContext(), deps=_deps(store)) == {"batchItemFailures": []}
    assert len(store.events) == 3


def test_a_kinesis_batch_that_fails_entirely_fails_the_invocation() -> None:
    from assetflow.functions.handle_kinesis_records import lambda_handler

    store = FakeStore(fail_for={"kinesis:"})
    with pytest.raises(BatchProcessingError):
        lambda_handler({"Records": [kinesis('{"page": "/"}')]}, FakeContext(), deps=_deps(store))


def test_the_sqs_handler_ingests_an_eventbridge_watchers_queue() -> None:
    from assetflow.functions.handle_sqs_messages import lambda_handler

    store = FakeStore()
    event = {"Records": [sqs_of(s3_event(f"in/{n}.csv"), f"m-{n}") for n in range(3)]}
    assert lambda_handler(event, FakeContext(), deps=_deps(store, "landing")) == {"batchItemFailures": []}
    assert sorted(thaw_json(e.extra)["key"] for e in store.events.values()) == [
        "in/0.csv",
        "in/1.csv",
        "in/2.csv",
    ]


def test_the_null_version_of_an_unversioned_object_is_no_version() -> None:
    translator = MessageTranslator(CATALOG, watcher="landing")
    first = translator.from_sqs(sqs_of(s3_event(version="null", etag="e1")), now=NOW)
    rewritten = translator.from_sqs(sqs_of(s3_event(version="null", etag="e2")), now=NOW)
    assert isinstance(first, Accepted) and isinstance(rewritten, Accepted)
    assert first.identity != rewritten.identity
    assert "version_id" not in thaw_json(first.event.extra)


# --- the custom resource that turns on the watched buckets' EventBridge notifications ------------------


class _FakeS3:
    def __init__(self, configs: dict[str, dict[str, Any]], fail: bool = False) -> None:
        self.configs = configs
        self.fail = fail
        self.puts: list[tuple[str, dict[str, Any]]] = []

    def get_bucket_notification_configuration(self, *, Bucket: str) -> dict[str, Any]:  # noqa: N803
        if self.fail:
            raise RuntimeError("AccessDenied")
        return {"ResponseMetadata": {}, **self.configs.get(Bucket, {})}

    def put_bucket_notification_configuration(self, **kwargs: Any) -> None:
        self.puts.append((kwargs["Bucket"], kwargs["NotificationConfiguration"]))


def _cfn(request: str, buckets: list[str]) -> dict[str, Any]:
    return {
        "RequestType": request,
        "ResponseURL": "https://example.invalid/response",
        "StackId": "stack",
        "RequestId": "req",
        "LogicalResourceId": "Notifications",
        "ResourceProperties": {"ServiceToken": "arn", "Buckets": buckets},
    }


def test_create_turns_eventbridge_on_and_keeps_the_buckets_other_notifications() -> None:
    from assetflow.functions.handle_bucket_notifications import lambda_handler

    queue = {
        "QueueConfigurations": [{"QueueArn": "arn:aws:sqs:us-east-1:1:q", "Events": ["s3:ObjectCreated:*"]}]
    }
    s3 = _FakeS3({"a-bucket": queue, "b-bucket": {"EventBridgeConfiguration": {}}})
    answers: list[tuple[str, str]] = []
    lambda_handler(
        _cfn("Create", ["a-bucket", "b-bucket"]),
        FakeContext(),  # type: ignore[arg-type]
        s3=s3,
        respond=lambda event, status, physical, reason: answers.append((status, physical)),
    )
    assert s3.puts == [("a-bucket", {**queue, "EventBridgeConfiguration": {}})]  # b-bucket had it already
    assert answers == [("SUCCESS", "assetflow-eventbridge-notifications")]


def test_a_failure_is_answered_failed_and_delete_changes_nothing() -> None:
    from assetflow.functions.handle_bucket_notifications import lambda_handler

    answers: list[tuple[str, str]] = []

    def respond(event: Any, status: str, physical: str, reason: str) -> None:
        answers.append((status, reason))

    failing = _FakeS3({}, fail=True)
    lambda_handler(_cfn("Create", ["a-bucket"]), FakeContext(), s3=failing, respond=respond)  # type: ignore[arg-type]
    assert answers[-1][0] == "FAILED" and "AccessDenied" in answers[-1][1]
    untouched = _FakeS3({})
    lambda_handler(_cfn("Delete", ["a-bucket"]), FakeContext(), s3=untouched, respond=respond)  # type: ignore[arg-type]
    assert answers[-1][0] == "SUCCESS" and untouched.puts == []


def test_validate_warns_when_a_pipeline_writes_under_a_watched_prefix() -> None:
    from assetflow import Pipeline, SparkJob

    watched = Asset(
        "s3://drop-zone/in", watchers=[AssetWatcher("drops", S3ObjectCreated("drop-zone", prefix="in/"))]
    )
    job = SparkJob("spark_jobs/x.py")
    inside = Pipeline("writes_inside", schedule=watched, job=job, outlets=[Asset("s3://drop-zone/in/out")])
    outside = Pipeline("writes_outside", schedule=watched, job=job, outlets=[Asset("s3://drop-zone/curated")])
    warnings = [str(w) for w in Catalog.build([inside, outside]).warnings]
    assert len(warnings) == 1
    assert "writes_inside" in warnings[0] and "watcher 'drops' watches" in warnings[0]


def test_the_local_mirror_places_created_objects_inside_their_buckets_folder(tmp_path: Any) -> None:
    from assetflow_dev.mirror import local_path, object_created

    path_map = {"s3://landing-zone": str(tmp_path)}
    assert object_created(json.dumps(s3_event("in/a b.csv"))) == ("landing-zone", "in/a b.csv")
    assert object_created(json.dumps(app_event({"x": 1}))) is None
    assert object_created("not json") is None
    assert local_path(path_map, "landing-zone", "in/a b.csv") == tmp_path / "in" / "a b.csv"
    assert local_path(path_map, "landing-zone", "../../etc/passwd") is None  # never outside the folder
    assert local_path(path_map, "other-bucket", "x.csv") is None
