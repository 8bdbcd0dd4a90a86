"""The HTTP API Lambda with HTTP API v2 events against DynamoDB Local: every route, paging, lineage, 4xx."""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.core.events import AssetEvent, Run, RunState
from assetflow.core.pipeline import Pipeline
from assetflow.functions import handle_api
from assetflow.loader import load_catalog
from assetflow_dev import LOCAL_AWS_ENV, LOCAL_CLIENT_KWARGS, LOCAL_REGION, DynamoDbLocal

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
LANDING = "s3://assetflow-demo/landing/deliveries"
CURATED = "s3://assetflow-demo/curated/deliveries"
READINGS = "s3://assetflow-demo/iot/readings"
USER_ARN = "arn:aws:iam::123456789012:user/operator"


class StubLauncher:
    """Accepts every run with a fake EMR Serverless job run id (no job runs in these tests)."""

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        self.submitted.append(run.run_id)
        return f"job-{run.run_id[-12:]}"


@dataclass
class FakeContext:
    function_name: str = "assetflow-api"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-api"
    aws_request_id: str = "req"


@pytest.fixture(scope="module")
def catalog_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalog") / "catalog.json"
    path.write_text(json.dumps(load_catalog(str(REPO_ROOT / "pipelines")).to_document()))
    return path


@pytest.fixture
def table(dynamodb_client: Any) -> Iterator[str]:
    name = f"api-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(dynamodb_client, name).create_table()
    yield name
    dynamodb_client.delete_table(TableName=name)


@pytest.fixture
def deps(
    table: str, catalog_path: Path, dynamodb_local: DynamoDbLocal, monkeypatch: pytest.MonkeyPatch
) -> Dependencies:
    # The composition root builds its clients as on Lambda: the endpoint comes from the environment.
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    for name, value in LOCAL_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    settings = Settings(table_name=table, catalog_path=str(catalog_path), region=LOCAL_REGION)
    return Dependencies(
        settings, session=boto3.session.Session(**LOCAL_CLIENT_KWARGS), launcher=StubLauncher()
    )


def request(
    deps: Dependencies,
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
    user_arn: str | None = None,
) -> tuple[int, dict[str, str], Any]:
    """Call the handler with an HTTP API payload v2 event; returns (status, headers, parsed body)."""
    raw_query = urllib.parse.urlencode(query or {})
    context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "local",
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
        "requestId": uuid.uuid4().hex,
        "routeKey": "$default",
        "stage": "$default",
    }
    if user_arn:
        context["authorizer"] = {"iam": {"userArn": user_arn}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": {"content-type": "application/json", **(headers or {})},
        "requestContext": context,
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if body is not None:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    response = handle_api.lambda_handler(event, FakeContext(), deps=deps)  # type: ignore[arg-type]
    parsed = json.loads(response["body"]) if response.get("body") else None
    return response["statusCode"], {k.lower(): v for k, v in response.get("headers", {}).items()}, parsed


def emit(deps: Dependencies, uri: str, *, evaluate: bool = True, **fields: Any) -> dict[str, Any]:
    """POST an event, then do what the stream would: run the evaluator on it."""
    status, _, body = request(deps, "POST", "/assets/events", body={"uri": uri, **fields})
    assert status == 201, body
    if evaluate:
        deps.evaluator.handle_event(AssetEvent.from_json(body))
    return body


def assert_error(result: tuple[int, dict[str, str], Any], status: int, code: str) -> None:
    assert result[0] == status, result[2]
    assert set(result[2]) == {"error", "detail"}
    assert result[2]["error"] == code
    assert result[2]["detail"]


def test_post_creates_an_event_that_the_views_show(deps: Dependencies) -> None:
    status, headers, event = request(
        deps,
        "POST",
        "/assets/events",
        body={"uri": LANDING, "extra": {"rows": 12, "file": "a.csv"}, "partition_key": "2026-11-21"},
        user_arn=USER_ARN,
    )
    assert status == 201
    assert headers["content-type"] == "application/json"
    assert set(event) == {"asset", "id", "timestamp", "extra", "source", "partition_key"}
    assert event["source"] == {"type": "api", "principal": USER_ARN}
    assert event["extra"] == {"rows": 12, "file": "a.csv"}
    assert event["partition_key"] == "2026-11-21"
    _, _, listed = request(deps, "GET", "/assets/events", query={"uri": LANDING})
    assert listed == {"items": [event], "next": None}


def test_an_idempotency_key_makes_one_event_across_retries(deps: Dependencies) -> None:
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    first = request(deps, "POST", "/assets/events", body={"uri": LANDING}, headers=headers)
    retry = request(deps, "POST", "/assets/events", body={"uri": LANDING}, headers=headers)
    assert first[0] == retry[0] == 201
    assert first[2] == retry[2]
    assert (first[1]["idempotent-replayed"], retry[1]["idempotent-replayed"]) == ("false", "true")
    _, _, listed = request(deps, "GET", "/assets/events", query={"uri": LANDING})
    assert [e["id"] for e in listed["items"]] == [first[2]["id"]]
    changed = request(deps, "POST", "/assets/events", body={"uri": CURATED}, headers=headers)
    assert_error(changed, 422, "idempotency_key_reused")


def test_an_unknown_asset_is_created_with_a_warning(deps: Dependencies) -> None:
    status, headers, event = request(deps, "POST", "/assets/events", body={"uri": "x-adhoc://backfill/1"})
    assert status == 201
    assert "not declared in the catalog" in headers["x-assetflow-warning"]
    deps.evaluator.handle_event(AssetEvent.from_json(event))
    _, _, assets = request(deps, "GET", "/assets", query={"limit": "1000"})
    by_uri = {a["uri"]: a for a in assets["items"]}
    # Listed with the declared ones, marked undeclared.
    assert by_uri["x-adhoc://backfill/1"]["declared"] is False
    assert by_uri["x-adhoc://backfill/1"]["event_count"] == 1
    assert set(by_uri) == set(deps.catalog.assets) | {"x-adhoc://backfill/1"}


def test_assets_and_events_page_with_next(deps: Dependencies) -> None:
    created = [emit(deps, READINGS, extra={"n": n}) for n in range(5)]
    emit(deps, LANDING)
    _, _, assets = request(deps, "GET", "/assets", query={"limit": "1000"})
    by_uri = {a["uri"]: a for a in assets["items"]}
    # Every declared asset is listed, with or without events, each with its health.
    assert set(by_uri) == set(deps.catalog.assets)
    assert {uri for uri, a in by_uri.items() if a["event_count"]} == {READINGS, LANDING}
    assert {a["health"] for a in by_uri.values()} <= {"fresh", "late", "quarantined_input"}
    assert by_uri[READINGS]["event_count"] == 5
    assert by_uri[READINGS]["last_event_at"] == created[-1]["timestamp"]
    assert by_uri[READINGS]["name"] == "iot_readings"

    seen: list[dict[str, Any]] = []
    token: str | None = None
    pages = 0
    while True:
        query = {"uri": READINGS, "limit": "2", **({"next": token} if token else {})}
        status, _, page = request(deps, "GET", "/assets/events", query=query)
        assert status == 200
        seen += page["items"]
        pages += 1
        token = page["next"]
        if token is None:
            break
    assert pages >= 3
    assert seen == list(reversed(created))  # newest first

    _, _, first = request(deps, "GET", "/assets", query={"limit": "1"})
    assert len(first["items"]) == 1 and first["next"]
    _, _, second = request(deps, "GET", "/assets", query={"limit": "1", "next": first["next"]})
    assert second["items"] != first["items"]
    # A token of another listing is refused, not passed through as a server error.
    assert_error(
        request(deps, "GET", "/assets/events", query={"uri": READINGS, "next": first["next"]}),
        400,
        "bad_request",
    )
    assert_error(request(deps, "GET", "/assets", query={"next": "not-a-token"}), 400, "bad_request")


def test_queue_entries_appear_after_evaluation_and_can_be_cleared(deps: Dependencies) -> None:
    readings = emit(deps, READINGS)
    later = emit(deps, READINGS, extra={"second": True})
    status, _, queue = request(deps, "GET", "/pipelines/ops_dashboard/queue")
    assert status == 200
    assert queue["next"] is None
    assert [q["event"] for q in queue["items"]] == [readings, later]
    assert {q["pipeline"] for q in queue["items"]} == {"ops_dashboard"}

    status, _, cleared = request(deps, "DELETE", "/pipelines/ops_dashboard/queue", query={"uri": CURATED})
    assert (status, cleared) == (200, {"pipeline": "ops_dashboard", "uri": CURATED, "deleted": 0})
    status, _, cleared = request(deps, "DELETE", "/pipelines/ops_dashboard/queue", query={"uri": READINGS})
    assert (status, cleared) == (200, {"pipeline": "ops_dashboard", "uri": READINGS, "deleted": 2})
    assert request(deps, "GET", "/pipelines/ops_dashboard/queue")[2] == {
        "items": [],
        "next": None,
        "updated": 0,
        "required": 3,
    }

    emit(deps, READINGS)
    status, _, cleared = request(deps, "DELETE", "/pipelines/ops_dashboard/queue")
    assert cleared == {"pipeline": "ops_dashboard", "uri": None, "deleted": 1}


def test_runs_carry_their_triggering_events_and_produced_events(deps: Dependencies) -> None:
    # Given a single-asset batch=False run and a batch run consuming two assets
    landing = emit(deps, LANDING)
    readings = emit(deps, READINGS)
    curated = emit(deps, CURATED)

    status, _, runs = request(deps, "GET", "/pipelines/deliveries_etl/runs")
    assert status == 200 and runs["next"] is None
    (etl,) = runs["items"]
    assert {
        "run_id",
        "pipeline",
        "state",
        "created_at",
        "partition_key",
        "job_run_id",
        "triggering_asset_events",
    } <= set(etl)
    assert etl["pipeline"] == "deliveries_etl"
    assert etl["state"] == "running"  # from its submission
    assert etl["job_run_id"] == f"job-{etl['run_id'][-12:]}"
    assert etl["triggering_asset_events"] == {LANDING: [landing]}

    (dashboard,) = request(deps, "GET", "/pipelines/ops_dashboard/runs")[2]["items"]
    status, _, shown = request(deps, "GET", f"/runs/{dashboard['run_id']}")
    assert status == 200
    assert shown["triggering_asset_events"] == {CURATED: [curated], READINGS: [readings]}
    assert shown["produced_asset_events"] == {}
    assert {k: v for k, v in shown.items() if k != "produced_asset_events"} == dashboard
    # The run consumed the queue.
    assert request(deps, "GET", "/pipelines/ops_dashboard/queue")[2]["items"] == []

    # When the run ends and its outlet event is recorded (the run-state function does this on success,
    # the event timestamped from the run's recorded end)
    ended, _ = deps.store.set_run_state(dashboard["run_id"], RunState.SUCCESS, now=datetime.now(UTC))
    assert ended.ended_at is not None
    outlet = AssetEvent(
        asset="s3://assetflow-demo/reports/ops_dashboard",
        id="evt-outlet-1",
        timestamp=ended.ended_at,
        extra={"rows": 3},
        source={"type": "run", "pipeline": "ops_dashboard", "run_id": dashboard["run_id"]},
    )
    deps.store.put_event(outlet)
    # Then the run shows it: lineage both ways
    shown = request(deps, "GET", f"/runs/{dashboard['run_id']}")[2]
    assert shown["produced_asset_events"] == {outlet.asset: [outlet.to_json()]}

    _, _, everything = request(deps, "GET", "/runs", query={"limit": "10"})
    assert {r["pipeline"] for r in everything["items"]} == {
        "deliveries_etl",
        "ops_dashboard",
        "partner_exports",
    }
    _, _, one = request(deps, "GET", "/runs", query={"limit": "1"})
    assert len(one["items"]) == 1 and one["next"]


def test_quarantine_lists_rejected_messages(deps: Dependencies) -> None:
    deps.store.quarantine(
        watcher="raw_deliveries_sqs",
        reason="payload does not match the schema: 'rows' is required",
        body='{"file": "x.csv"}',
        facts={"queue": "deliveries", "message_id": "m-1"},
        identity="sqs:deliveries:m-1",
        now=datetime.now(UTC),
    )
    status, _, page = request(deps, "GET", "/quarantine")
    assert status == 200
    (item,) = page["items"]
    assert item["watcher"] == "raw_deliveries_sqs"
    assert item["reason"].startswith("payload does not match")
    assert item["facts"] == {"queue": "deliveries", "message_id": "m-1"}
    assert page["next"] is None


def test_client_errors(deps: Dependencies) -> None:
    assert_error(request(deps, "POST", "/assets/events", body="{oops"), 400, "bad_request")
    assert_error(request(deps, "POST", "/assets/events", body={"uri": "airflow://dag"}), 400, "bad_request")
    assert_error(
        request(deps, "POST", "/assets/events", body={"uri": LANDING, "extra": []}), 400, "bad_request"
    )
    assert_error(
        request(deps, "POST", "/assets/events", body={"uri": LANDING, "partition_key": ""}),
        400,
        "bad_request",
    )
    big = {"uri": LANDING, "extra": {"blob": "x" * 70_000}}
    assert_error(request(deps, "POST", "/assets/events", body=big), 413, "payload_too_large")
    assert_error(request(deps, "GET", "/assets/events"), 400, "bad_request")
    assert_error(
        request(deps, "GET", "/assets/events", query={"uri": LANDING, "limit": "0"}), 400, "bad_request"
    )
    assert_error(request(deps, "GET", "/pipelines/nope/queue"), 404, "not_found")
    assert_error(request(deps, "DELETE", "/pipelines/nope/queue"), 404, "not_found")
    assert_error(request(deps, "GET", "/pipelines/nope/runs"), 404, "not_found")
    assert_error(request(deps, "GET", "/runs/run-does-not-exist"), 404, "not_found")
    assert_error(request(deps, "GET", "/no/such/route"), 404, "not_found")
    result = request(deps, "PUT", "/assets/events")
    assert_error(result, 405, "method_not_allowed")
    assert result[1]["allow"] == "GET, POST"
    # Nothing was written by any of them.
    assert request(deps, "GET", "/assets/events", query={"uri": LANDING})[2]["items"] == []


def test_a_large_extra_is_stored_by_reference_and_shown_as_stored(
    deps: Dependencies, moto_server: Any, s3_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assetflow_job import AssetEvent as JobEvent
    from assetflow_job import ExtraResolver

    bucket = f"runs-{uuid.uuid4().hex[:10]}"
    s3_client.create_bucket(Bucket=bucket)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server.endpoint)
    with_bucket = Dependencies(
        dataclasses.replace(deps.settings, runs_bucket=bucket),
        session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
        launcher=StubLauncher(),
    )
    extra = {"rows": [{"id": i, "name": f"row-{i}"} for i in range(10_000)]}

    # Over the 64 KiB that the API takes inline, and stored by reference instead
    status, _, event = request(
        with_bucket,
        "POST",
        "/assets/events",
        body={"uri": LANDING, "extra": extra},
        headers={"Idempotency-Key": "k"},
    )
    assert status == 201, event
    ref = event["extra"]["extra_ref"]
    assert set(event["extra"]) == {"extra_ref"}
    assert ref["uri"].startswith(f"s3://{bucket}/extras/{event['id']}/")

    # The views show the event as stored; the job resolves it to the extra as sent
    listed = request(with_bucket, "GET", "/assets/events", query={"uri": LANDING})[2]["items"]
    assert listed == [event]
    assert ExtraResolver(s3_client).event(JobEvent.from_dict(event)).extra == extra

    # A replay of the key is the same event; a body over 4 MiB is refused whole
    again = request(
        with_bucket,
        "POST",
        "/assets/events",
        body={"uri": LANDING, "extra": extra},
        headers={"Idempotency-Key": "k"},
    )
    assert again[0] == 201 and again[2] == event and again[1]["idempotent-replayed"] == "true"
    huge = {"uri": LANDING, "extra": {"blob": "x" * (4 * 1024 * 1024)}}
    assert_error(request(with_bucket, "POST", "/assets/events", body=huge), 413, "payload_too_large")
    assert len(s3_client.list_objects_v2(Bucket=bucket, Prefix="extras/")["Contents"]) == 1
