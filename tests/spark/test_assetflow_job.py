"""The job-side helper without Spark: context parsing, outlets and aliases, metadata on success only, inlets."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from assetflow_job import (
    AliasRef,
    AssetEvent,
    AssetRef,
    DynamoDbEventReader,
    Metadata,
    RunContext,
    RunContextError,
    UndeclaredInletError,
    UndeclaredOutletError,
    load_context,
    run,
)
from assetflow_job.context import split_context_argument
from assetflow_job.storage import endpoint_url
from tests.spark.contexts import alias_outlet, asset_outlet, context_document, event, write_context

REPO = Path(__file__).resolve().parents[2]
CURATED = "s3://assetflow-demo/curated/deliveries"
LANDING = "s3://assetflow-demo/landing/deliveries"


class Asset:
    """Stands for assetflow.Asset: a uri and a name."""

    def __init__(self, uri: str, name: str = "") -> None:
        self.uri = uri
        self.name = name or uri


class AssetAlias:
    """Stands for assetflow.AssetAlias: a name and no uri."""

    def __init__(self, name: str) -> None:
        self.name = name


def make_context(reader: Any = None, **kwargs: Any) -> RunContext:
    defaults: dict[str, Any] = {"pipeline": "p", "run_id": "r-1", "outlet_metadata_uri": "/dev/null"}
    return RunContext(context_document(**{**defaults, **kwargs}), event_reader=reader)


# --- the context argument and document -----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "uri", "rest"),
    [
        (["--assetflow-context", "s3://b/k.json"], "s3://b/k.json", []),
        (["--x", "1", "--assetflow-context", "/tmp/c.json", "--y"], "/tmp/c.json", ["--x", "1", "--y"]),
        (["--assetflow-context=file:///tmp/c.json", "a"], "file:///tmp/c.json", ["a"]),
    ],
)
def test_context_argument_is_taken_out_of_the_arguments(argv: list[str], uri: str, rest: list[str]) -> None:
    assert split_context_argument(argv) == (uri, rest)


@pytest.mark.parametrize(
    "argv", [[], ["--assetflow-context"], ["--assetflow-context", "a", "--assetflow-context", "b"]]
)
def test_missing_or_repeated_context_argument_is_an_error(argv: list[str]) -> None:
    with pytest.raises(RunContextError, match="assetflow-context"):
        split_context_argument(argv)


def test_context_is_read_from_a_path_or_a_file_uri(tmp_path: Path) -> None:
    path, _ = write_context(tmp_path, "c", pipeline="etl", run_id="r-9", partition_key="2026-11-21")
    for uri in (str(path), path.as_uri()):
        ctx = load_context(uri, args=["--flag"])
        assert (ctx.pipeline, ctx.run_id, ctx.partition_key, ctx.args) == (
            "etl",
            "r-9",
            "2026-11-21",
            ["--flag"],
        )
        assert ctx.created_at == datetime(2026, 11, 21, 12, tzinfo=UTC)


class FakeS3:
    """Records puts and serves gets, like the two S3 calls the helper makes."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, ContentType: str) -> None:  # noqa: N803
        assert ContentType == "application/json"
        self.objects[(Bucket, Key)] = Body


def test_context_and_metadata_go_through_s3() -> None:
    s3 = FakeS3()
    document = context_document(
        pipeline="p",
        run_id="r-1",
        outlet_metadata_uri="s3://runs/p/r-1/outlets.json",
        outlets=[asset_outlet(CURATED)],
    )
    s3.objects[("runs", "p/r-1/context.json")] = json.dumps(document).encode()
    with run(["--assetflow-context", "s3://runs/p/r-1/context.json"], s3_client=s3) as ctx:
        ctx.outlet_events[CURATED].extra = {"row_count": 3}
    written = json.loads(s3.objects[("runs", "p/r-1/outlets.json")])
    assert written["events"] == [{"asset": CURATED, "extra": {"row_count": 3}, "alias": None}]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "something-else"}, "not a run context"),
        ({"version": 2}, "version 2 is not supported"),
        ({"run_id": None}, "run_id"),
        ({"outlet_metadata_uri": None}, "outlet_metadata_uri"),
        ({"outlets": [{"type": "bucket"}]}, "unrecognised entry in 'outlets'"),
        ({"triggering_asset_events": {"a": [{"id": "e"}]}}, "bad triggering event"),
    ],
)
def test_bad_context_documents_are_refused_clearly(change: dict[str, Any], message: str) -> None:
    document = {**context_document(pipeline="p", run_id="r", outlet_metadata_uri="/x"), **change}
    with pytest.raises(RunContextError, match=message):
        RunContext(document)


def test_missing_context_file_is_a_context_error(tmp_path: Path) -> None:
    with pytest.raises(RunContextError, match="no run context"):
        load_context(str(tmp_path / "absent.json"))


def test_triggering_events_are_ordered_by_timestamp_then_id() -> None:
    ctx = make_context(
        events=[
            event(LANDING, "b", "2026-11-21T10:00:00.000000Z", payload={"n": 2}),
            event(LANDING, "c", "2026-11-21T09:00:00.000000Z", payload={"n": 1}),
            event(LANDING, "a", "2026-11-21T10:00:00.000000Z", payload={"n": 3}),
        ]
    )
    events = ctx.triggering_asset_events[LANDING]
    assert [e.id for e in events] == ["c", "a", "b"]
    assert [e.payload for e in events] == [{"n": 1}, {"n": 3}, {"n": 2}]
    assert events[0].timestamp == datetime(2026, 11, 21, 9, tzinfo=UTC)
    assert events[0].asset == LANDING and events[0].source["kind"] == "sqs"


def test_event_round_trips_through_its_json_shape() -> None:
    raw = event(CURATED, "e1", "2026-11-21T10:15:00.123456Z", extra={"row_count": 1}, partition_key="k")
    assert AssetEvent.from_dict(raw).to_dict() == raw


# --- outlets ----------------------------------------------------------------------------------------


def test_declared_asset_outlets_always_get_one_event() -> None:
    ctx = make_context(outlets=[asset_outlet(CURATED), asset_outlet("s3://assetflow-demo/other")])
    ctx.outlet_events[CURATED].extra = {"row_count": 3}
    assert ctx.outlet_metadata()["events"] == [
        {"asset": CURATED, "extra": {"row_count": 3}, "alias": None},
        {"asset": "s3://assetflow-demo/other", "extra": {}, "alias": None},
    ]


def test_outlet_keys_accept_uris_asset_objects_and_other_spellings() -> None:
    ctx = make_context(outlets=[asset_outlet(CURATED)])
    ctx.outlet_events[Asset(CURATED)].extra["a"] = 1
    ctx.outlet_events[AssetRef(CURATED + "/")].extra["b"] = 2
    ctx.outlet_events["S3://assetflow-demo/curated/deliveries"].extra["c"] = 3
    assert ctx.outlet_metadata()["events"][0]["extra"] == {"a": 1, "b": 2, "c": 3}
    assert Asset(CURATED) in ctx.outlet_events and AliasRef("x") not in ctx.outlet_events


def test_emit_metadata_merges_extra_like_yielding_it_from_a_task() -> None:
    ctx = make_context(outlets=[asset_outlet(CURATED)])
    ctx.outlet_events[CURATED].extra = {"a": 1, "b": 1}
    ctx.emit(Metadata(Asset(CURATED), {"b": 2}))
    assert ctx.outlet_metadata()["events"][0]["extra"] == {"a": 1, "b": 2}


def test_undeclared_asset_outlet_is_a_clear_error() -> None:
    ctx = make_context(outlets=[asset_outlet(CURATED)])
    with pytest.raises(UndeclaredOutletError, match=r"not an asset outlet.*declared assets: 's3://assetflow"):
        ctx.outlet_events["s3://assetflow-demo/elsewhere"].extra = {"x": 1}
    with pytest.raises(UndeclaredOutletError):
        ctx.emit(Metadata("s3://assetflow-demo/elsewhere", {"x": 1}))


def test_adding_to_an_undeclared_alias_is_a_clear_error() -> None:
    ctx = make_context(outlets=[alias_outlet("declared")])
    with pytest.raises(UndeclaredOutletError, match="alias 'other' is not an outlet"):
        ctx.outlet_events[AliasRef("other")].add("s3://b/x")
    with pytest.raises(UndeclaredOutletError):
        ctx.emit(Metadata("s3://b/x", {}, alias="other"))


def test_alias_additions_dedupe_on_asset_and_extra_as_airflow_does() -> None:
    ctx = make_context(outlets=[alias_outlet("one"), alias_outlet("two"), alias_outlet("three")])
    ctx.outlet_events[AliasRef("one")].add(Asset("s3://bucket/my-task"), extra={"k": "v"})
    # Same asset and extra, another alias: still one event.
    ctx.outlet_events[AssetAlias("two")].add("s3://bucket/my-task/", extra={"k": "v"})
    # Same asset and extra again, through Metadata: still one.
    ctx.emit(Metadata("s3://bucket/my-task", {"k": "v"}, alias=AssetAlias("one")))
    # A different extra is another event.
    ctx.outlet_events[AliasRef("three")].add("s3://bucket/my-task", extra={"k2": "v2"})
    ctx.outlet_events[AliasRef("three")].add("s3://bucket/other")
    assert ctx.outlet_metadata()["events"] == [
        {"asset": "s3://bucket/my-task", "extra": {"k": "v"}, "alias": "one", "aliases": ["one", "two"]},
        {"asset": "s3://bucket/my-task", "extra": {"k2": "v2"}, "alias": "three", "aliases": ["three"]},
        {"asset": "s3://bucket/other", "extra": {}, "alias": "three", "aliases": ["three"]},
    ]


def test_an_alias_nothing_was_added_to_makes_no_event() -> None:
    ctx = make_context(outlets=[alias_outlet("sensor-alerts")])
    assert ctx.outlet_metadata()["events"] == []


def test_extra_must_be_json() -> None:
    ctx = make_context(outlets=[asset_outlet(CURATED), alias_outlet("a")])
    with pytest.raises(TypeError, match="JSON-serialisable"):
        ctx.outlet_events[CURATED].extra = {"when": datetime(2026, 1, 1, tzinfo=UTC)}
    with pytest.raises(ValueError, match="NaN"):
        ctx.outlet_events[AliasRef("a")].add("s3://b/x", extra={"v": float("nan")})
    with pytest.raises(TypeError, match="mapping"):
        ctx.outlet_events[CURATED].extra = [1, 2]  # type: ignore[assignment]


def test_metadata_and_refs_validate_their_arguments() -> None:
    assert Metadata(Asset("s3://b/x"), {"k": 1}, alias=AliasRef("a")) == Metadata("s3://b/x", {"k": 1}, "a")
    with pytest.raises(TypeError, match="expected an asset"):
        Metadata(AliasRef("a"), {})
    with pytest.raises(TypeError, match="expected an alias"):
        Metadata("s3://b/x", {}, alias=Asset("s3://b/y"))
    with pytest.raises(ValueError, match="non-empty"):
        AssetRef("")


# --- run(): metadata only on success ----------------------------------------------------------------


def test_successful_run_writes_the_outlet_metadata(tmp_path: Path) -> None:
    path, metadata = write_context(
        tmp_path, "ok", pipeline="p", run_id="r-1", outlets=[asset_outlet(CURATED), alias_outlet("a")]
    )
    with run(["--assetflow-context", str(path), "--rest"]) as ctx:
        assert ctx.args == ["--rest"]
        ctx.emit(Metadata(CURATED, {"row_count": 2}))
        ctx.outlet_events[AliasRef("a")].add("s3://b/x", extra={"n": 1})
    assert json.loads(metadata.read_text()) == {
        "format": "assetflow.outlet-metadata",
        "version": 1,
        "run_id": "r-1",
        "events": [
            {"asset": CURATED, "extra": {"row_count": 2}, "alias": None},
            {"asset": "s3://b/x", "extra": {"n": 1}, "alias": "a", "aliases": ["a"]},
        ],
    }


def test_failed_run_writes_nothing_and_reraises(tmp_path: Path) -> None:
    path, metadata = write_context(
        tmp_path, "ko", pipeline="p", run_id="r-1", outlets=[asset_outlet(CURATED)]
    )

    def job() -> None:
        with run(["--assetflow-context", str(path)]) as ctx:
            ctx.outlet_events[CURATED].extra = {"row_count": 2}
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        job()
    assert not metadata.exists()
    assert list(tmp_path.iterdir()) == [path]


def test_run_reads_sys_argv_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, metadata = write_context(tmp_path, "argv", pipeline="p", run_id="r-2")
    monkeypatch.setattr(sys, "argv", ["job.py", "--assetflow-context", str(path), "--x"])
    with run() as ctx:
        assert ctx.args == ["--x"]
    # Nothing emitted: no outlet metadata to write (the declared outlets are emitted without extras)
    assert not metadata.exists()


# --- path mapping ---------------------------------------------------------------------------------


def test_path_applies_the_longest_matching_prefix() -> None:
    ctx = make_context(
        path_map={
            "s3://assetflow-demo/": "/data/demo/",
            "s3://assetflow-demo/iot": "/fast/iot",
            "s3://x": "/x/",
        }
    )
    assert ctx.path("s3://assetflow-demo/curated/x") == "/data/demo/curated/x"
    assert ctx.path("s3://assetflow-demo/iot/readings") == "/fast/iot/readings"
    assert ctx.path(Asset("s3://assetflow-demo/iot")) == "/fast/iot"
    assert ctx.path("s3://assetflow-demo") == "/data/demo"
    assert ctx.path("s3://x/y") == "/x/y"
    # A prefix is a whole bucket or folder, never part of a name.
    assert ctx.path("s3://assetflow-demo-2/a") == "s3://assetflow-demo-2/a"
    assert ctx.path("s3://xy/a") == "s3://xy/a"


def test_path_is_identity_without_a_mapping() -> None:
    assert make_context().path("s3://assetflow-demo/curated/x") == "s3://assetflow-demo/curated/x"


# --- inlet events ---------------------------------------------------------------------------------


class FakeReader:
    """Serves a fixed history in pages, counting the pages read."""

    def __init__(self, history: dict[str, list[AssetEvent]], page_size: int = 2) -> None:
        self.history = history
        self.page_size = page_size
        self.calls: list[tuple[str, Any]] = []

    def read_page(self, uri: str, cursor: Any) -> tuple[list[AssetEvent], Any]:
        self.calls.append((uri, cursor))
        start = cursor or 0
        page = self.history.get(uri, [])[start : start + self.page_size]
        following = start + self.page_size
        return page, following if following < len(self.history.get(uri, [])) else None


def _history(uri: str, count: int) -> list[AssetEvent]:
    return [
        AssetEvent.from_dict(event(uri, f"e{i}", f"2026-11-21T10:{i:02d}:00.000000Z", extra={"row_count": i}))
        for i in range(count)
    ]


def test_inlet_events_read_nothing_until_accessed_then_page_lazily() -> None:
    reader = FakeReader({CURATED: _history(CURATED, 5)})
    ctx = make_context(inlets=[asset_outlet(CURATED)], reader=reader)
    events = ctx.inlet_events[CURATED]
    assert reader.calls == []
    assert events[0].extra["row_count"] == 0
    assert len(reader.calls) == 1
    assert events[3].id == "e3"
    assert len(reader.calls) == 2
    first_two = []
    for item in events:
        first_two.append(item.id)
        if len(first_two) == 2:
            break
    assert first_two == ["e0", "e1"] and len(reader.calls) == 2
    assert events[-1].extra["row_count"] == 4
    assert len(reader.calls) == 3
    assert [e.id for e in events[-2:]] == ["e3", "e4"]
    assert [e.id for e in events[1:3]] == ["e1", "e2"]
    assert len(events) == 5 and bool(events)
    assert [e.id for e in events] == ["e0", "e1", "e2", "e3", "e4"]
    assert len(reader.calls) == 3  # pages are kept
    assert ctx.inlet_events[Asset(CURATED)] is events


def test_inlet_events_of_an_asset_without_events_is_empty() -> None:
    ctx = make_context(inlets=[asset_outlet(CURATED)], reader=FakeReader({}))
    assert not ctx.inlet_events[CURATED]
    assert list(ctx.inlet_events[CURATED]) == []
    with pytest.raises(IndexError):
        ctx.inlet_events[CURATED][-1]


def test_inlet_events_only_for_declared_inlet_assets() -> None:
    ctx = make_context(inlets=[asset_outlet(CURATED)], reader=FakeReader({}))
    with pytest.raises(UndeclaredInletError, match="not an inlet of this pipeline"):
        ctx.inlet_events[LANDING]
    with pytest.raises(UndeclaredInletError, match="alias"):
        ctx.inlet_events[AliasRef("partner-exports")]
    assert CURATED in ctx.inlet_events and LANDING not in ctx.inlet_events


def test_inlet_events_without_an_events_table_fail_only_when_read() -> None:
    document = context_document(
        pipeline="p", run_id="r", outlet_metadata_uri="/x", inlets=[asset_outlet(CURATED)]
    )
    document["events_table"] = None
    ctx = RunContext(document)
    with pytest.raises(RunContextError, match="events_table"):
        ctx.inlet_events[CURATED]


class AliasReader(FakeReader):
    """A FakeReader that also knows which assets each alias resolved to."""

    def __init__(self, history: dict[str, list[AssetEvent]], aliases: dict[str, list[str]]) -> None:
        super().__init__(history)
        self.aliases = aliases
        self.alias_calls: list[str] = []

    def alias_assets(self, alias: str) -> list[str]:
        self.alias_calls.append(alias)
        return self.aliases.get(alias, [])


def _through(uri: str, event_id: str, minute: int, *aliases: str) -> AssetEvent:
    source = {"type": "run", "pipeline": "exports", "run_id": "r"} | (
        {"aliases": list(aliases)} if aliases else {}
    )
    return AssetEvent.from_dict(event(uri, event_id, f"2026-11-21T10:{minute:02d}:00.000000Z", source=source))


def test_inlet_events_through_an_alias_are_the_events_emitted_through_it_in_order() -> None:
    # Given two assets the alias resolved to, each with events through it and one produced otherwise
    eu, us = "s3://lake/exports/eu", "s3://lake/exports/us"
    history = {
        eu: [
            _through(eu, "eu1", 1, "partner-exports"),
            _through(eu, "eu2", 4),
            _through(eu, "eu3", 5, "partner-exports"),
        ],
        us: [_through(us, "us1", 2, "partner-exports", "audit"), _through(us, "us2", 3, "audit")],
    }
    reader = AliasReader(history, {"partner-exports": [eu, us], "audit": [us]})
    ctx = make_context(inlets=[alias_outlet("partner-exports"), alias_outlet("audit")], reader=reader)

    # When a job reads them, as in Airflow: inlet_events[AssetAlias("partner-exports")]
    exported = ctx.inlet_events[AliasRef("partner-exports")]

    # Then: nothing read until used; the events through the alias, merged by (timestamp, id)
    assert reader.alias_calls == [] and reader.calls == []
    assert exported[0].id == "eu1"
    assert [e.id for e in exported] == ["eu1", "us1", "eu3"]
    assert len(exported) == 3 and exported[-1].asset == eu and bool(exported)
    assert [e.id for e in ctx.inlet_events[AliasRef("audit")]] == ["us1", "us2"]
    assert ctx.inlet_events[AliasRef("partner-exports")] is exported
    assert AliasRef("audit") in ctx.inlet_events and AliasRef("nope") not in ctx.inlet_events
    with pytest.raises(UndeclaredInletError, match="not an inlet of this pipeline"):
        ctx.inlet_events[AliasRef("nope")]


class FakeDynamoDb:
    """Answers Query like DynamoDB: items in sort-key order, Limit per page, LastEvaluatedKey."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = sorted(items, key=lambda item: item["sk"]["S"])
        self.requests: list[dict[str, Any]] = []

    def query(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        pk = request["ExpressionAttributeValues"][":pk"]["S"]
        prefix = request["ExpressionAttributeValues"][":prefix"]["S"]
        matching = [i for i in self.items if i["pk"]["S"] == pk and i["sk"]["S"].startswith(prefix)]
        after = request.get("ExclusiveStartKey")
        if after is not None:
            matching = [i for i in matching if i["sk"]["S"] > after["sk"]["S"]]
        page = matching[: request.get("Limit", len(matching))]
        response: dict[str, Any] = {
            "Items": [{k: v for k, v in i.items() if k in ("event", "sk")} for i in page]
        }
        if len(matching) > len(page):
            response["LastEvaluatedKey"] = {"pk": page[-1]["pk"], "sk": page[-1]["sk"]}
        return response


def test_dynamodb_reader_queries_the_asset_partition_in_order_page_by_page() -> None:
    items = [
        {
            "pk": {"S": f"ASSET#{CURATED}"},
            "sk": {"S": f"EVENT#{e.to_dict()['timestamp']}#{e.id}"},
            "event": {"S": json.dumps(e.to_dict())},
        }
        for e in reversed(_history(CURATED, 3))
    ]
    items.append({"pk": {"S": f"ASSET#{CURATED}"}, "sk": {"S": "META"}, "event": {"S": "{}"}})
    items.append({"pk": {"S": "ASSET#other"}, "sk": {"S": "EVENT#x"}, "event": {"S": "{}"}})
    client = FakeDynamoDb(items)
    reader = DynamoDbEventReader("events", page_size=2, client=client)
    ctx = make_context(inlets=[asset_outlet(CURATED)], reader=reader)
    assert [e.id for e in ctx.inlet_events[CURATED]] == ["e0", "e1", "e2"]
    assert len(client.requests) == 2
    first = client.requests[0]
    assert first["TableName"] == "events" and first["ScanIndexForward"] is True
    assert first["KeyConditionExpression"] == "pk = :pk AND begins_with(sk, :prefix)"
    assert first["ExpressionAttributeValues"] == {
        ":pk": {"S": f"ASSET#{CURATED}"},
        ":prefix": {"S": "EVENT#"},
    }
    assert "ExclusiveStartKey" not in first and "ExclusiveStartKey" in client.requests[1]


def test_dynamodb_reader_finds_the_assets_an_alias_resolved_to() -> None:
    items = [
        {"pk": {"S": "ALIAS#partner-exports"}, "sk": {"S": f"ASSET#{uri}"}, "created_at": {"S": "x"}}
        for uri in ("s3://lake/b", "s3://lake/a")
    ]
    items.append({"pk": {"S": "ALIAS#other"}, "sk": {"S": "ASSET#s3://lake/c"}})
    reader = DynamoDbEventReader("events", client=FakeDynamoDb(items))
    assert reader.alias_assets("partner-exports") == ["s3://lake/a", "s3://lake/b"]


def test_endpoints_come_from_the_service_variable_then_the_global_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", raising=False)
    assert endpoint_url("S3") is None
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    assert endpoint_url("S3") == "http://127.0.0.1:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    assert endpoint_url("S3") == "http://127.0.0.1:2"
    assert endpoint_url("S3", "http://127.0.0.1:3") == "http://127.0.0.1:3"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert endpoint_url("S3") is None


# --- what the helper may import -----------------------------------------------------------------


def test_helper_imports_neither_assetflow_nor_boto3_nor_pyspark_at_import() -> None:
    code = (
        "import sys, assetflow_job; "
        "bad = [m for m in ('assetflow', 'boto3', 'botocore', 'pyspark') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_helper_source_never_imports_assetflow() -> None:
    for path in (REPO / "assetflow_job").glob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            assert not stripped.startswith(("import assetflow ", "from assetflow ", "from assetflow.")), path


def test_the_context_carries_the_runs_conf_and_what_triggered_it() -> None:
    document = context_document(pipeline="p", run_id="r", outlet_metadata_uri="/x")
    assert (RunContext(document).conf, RunContext(document).triggered_by) == (None, None)  # an older context
    document |= {"triggered_by": "replay", "conf": {"full_refresh": True}, "replay_of": "r-0"}
    ctx = RunContext(document)
    assert (ctx.conf, ctx.triggered_by, ctx.replay_of) == ({"full_refresh": True}, "replay", "r-0")
    with pytest.raises(RunContextError, match="conf"):
        RunContext({**document, "conf": [1]})


def test_a_job_names_the_data_version_it_wrote() -> None:
    ctx = make_context(outlets=[asset_outlet(CURATED), asset_outlet("s3://assetflow-demo/other")])
    ctx.emit(Metadata(CURATED, {"rows": 3}, version="snapshot-8812"))
    ctx.outlet_events["s3://assetflow-demo/other"].version = 42  # an integer snapshot id becomes its text
    assert ctx.outlet_metadata()["events"] == [
        {"asset": CURATED, "extra": {"rows": 3}, "alias": None, "version": "snapshot-8812"},
        {"asset": "s3://assetflow-demo/other", "extra": {}, "alias": None, "version": "42"},
    ]
    assert Metadata(CURATED, version="v") != Metadata(CURATED)
    with pytest.raises(TypeError, match="version must be a string"):
        Metadata(CURATED, version=1.5)
    with pytest.raises(ValueError, match="version must be 1 to 256 characters"):
        ctx.outlet_events[CURATED].version = ""
