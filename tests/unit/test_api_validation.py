"""The HTTP API handler without AWS: request validation, error shapes and routing, over an in-memory store."""

from __future__ import annotations

import base64
import json
import urllib.parse
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from assetflow.core import limits
from assetflow.core.catalog import Catalog
from assetflow.core.errors import NotFoundError, StoreUnavailableError
from assetflow.core.events import AssetEvent, Run, RunState
from assetflow.core.queues import QueueHead, QueueSummary
from assetflow.functions import handle_api
from assetflow.loader import load_catalog
from assetflow.ports import Page, PipelineGate
from assetflow.usecases import requests

KNOWN = "s3://assetflow-demo/landing/deliveries"
USER_ARN = "arn:aws:iam::123456789012:user/alice"


class FakeStore:
    """The store methods the views call, in memory, with the real store's dedupe and token behaviour."""

    def __init__(self) -> None:
        self.events: list[AssetEvent] = []
        self.dedupe: dict[str, AssetEvent] = {}
        self.runs: dict[str, Run] = {}
        self.fail_with: Exception | None = None

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ):
        self._check()
        if dedupe_key is not None and dedupe_key in self.dedupe:
            return self.dedupe[dedupe_key], False
        if dedupe_key is not None:
            self.dedupe[dedupe_key] = event
        self.events.append(event)
        return event, True

    def list_events(self, uri: str, *, limit: int = 100, token: str | None = None) -> Page:
        self._check()
        if token is not None:
            raise ValueError("invalid page token; use the 'next' value of the previous page")
        found = sorted((e for e in self.events if e.asset == uri), key=lambda e: e.sort_key, reverse=True)
        return Page([e.to_json() for e in found[:limit]], None)

    def list_assets(self, *, limit: int = 100, token: str | None = None) -> Page:
        self._check()
        return Page([{"uri": u} for u in sorted({e.asset for e in self.events})][:limit], None)

    def assets_after(self, after: str | None, *, limit: int) -> list[dict[str, Any]]:
        self._check()
        uris = sorted({e.asset for e in self.events if after is None or e.asset > after})
        return [
            {"uri": u, "name": u, "created_at": None, "last_event_at": None, "event_count": 1} for u in uris
        ][:limit]

    def queue_keys(self, pipeline: str, *, pending_only: bool = True) -> list[str]:
        self._check()
        return []

    def read_queue_head(self, pipeline: str, key: str = "") -> QueueHead:
        return QueueHead(pipeline, key, 0, 0, (), None, QueueSummary(frozenset(), frozenset(), 0, {}))

    def pipeline_gate(self, pipeline: str) -> PipelineGate:
        return PipelineGate(active=0, paused=False)

    def held_runs(self, pipeline: str) -> list[str]:
        return []

    def clear_queue(self, pipeline: Any, uri: str | None = None) -> int:
        self._check()
        return 0

    def list_runs(self, pipeline: str | None = None, *, limit: int = 50, token: str | None = None) -> Page:
        self._check()
        return Page([r.to_json() for r in self.runs.values() if pipeline in (None, r.pipeline)][:limit], None)

    def get_run(self, run_id: str, *, with_events: bool = True) -> Run:
        self._check()
        if run_id not in self.runs:
            raise NotFoundError(f"no run {run_id!r}")
        return self.runs[run_id]

    def events_produced_by(self, run_id: str, **_: Any) -> list[dict[str, Any]]:
        return []

    def list_quarantine(self, *, limit: int = 100, token: str | None = None) -> Page:
        self._check()
        return Page([], None)


@dataclass
class FakeDeps:
    store: FakeStore
    catalog: Catalog
    extras: Any = None


@dataclass
class FakeContext:
    function_name: str = "assetflow-api"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-api"
    aws_request_id: str = "req-1"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog("pipelines")


@pytest.fixture
def deps(catalog: Catalog) -> FakeDeps:
    return FakeDeps(FakeStore(), catalog)


def http_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    raw_query: str | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
    user_arn: str | None = None,
    stage: str = "$default",
    base64_body: bool = False,
) -> dict[str, Any]:
    """An API Gateway HTTP API event, payload format 2.0."""
    text = body if body is None or isinstance(body, str) else json.dumps(body)
    if base64_body and text is not None:
        text = base64.b64encode(text.encode()).decode()
    raw_path = path if stage == "$default" else f"/{stage}{path}"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": raw_query if raw_query is not None else urllib.parse.urlencode(query or {}),
        "headers": {"content-type": "application/json", "host": "api.example.com", **(headers or {})},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.example.com",
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "pytest",
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": "$default",
            "stage": stage,
            "time": "21/Nov/2026:10:15:00 +0000",
            "timeEpoch": 1795256100000,
        },
        "isBase64Encoded": base64_body,
    }
    if query:
        event["queryStringParameters"] = dict(query)
    if text is not None:
        event["body"] = text
    if user_arn:
        event["requestContext"]["authorizer"] = {
            "iam": {"accountId": "123456789012", "userArn": user_arn, "userId": "AIDAEXAMPLE"}
        }
    return event


def call(deps: FakeDeps, *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any], Any]:
    response = handle_api.lambda_handler(http_event(*args, **kwargs), FakeContext(), deps=deps)  # type: ignore[arg-type]
    body = json.loads(response["body"]) if response.get("body") else None
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    return response["statusCode"], headers, body


def assert_error(result: tuple[int, dict[str, Any], Any], status: int, code: str, *fragments: str) -> None:
    got_status, headers, body = result
    assert got_status == status, body
    assert headers["content-type"] == "application/json"
    assert set(body) == {"error", "detail"}
    assert body["error"] == code
    for fragment in fragments:
        assert fragment in body["detail"]


# ---- POST /assets/events -------------------------------------------------------------------------------


def test_post_creates_an_event_with_the_design_shape(deps: FakeDeps) -> None:
    status, headers, body = call(
        deps,
        "POST",
        "/assets/events",
        body={"uri": KNOWN, "extra": {"rows": 3}, "partition_key": "2026-11-21"},
    )
    assert status == 201
    assert set(body) == {"asset", "id", "timestamp", "extra", "source", "partition_key"}
    assert body["asset"] == KNOWN
    assert body["extra"] == {"rows": 3}
    assert body["partition_key"] == "2026-11-21"
    assert body["source"] == {"type": "api", "principal": "anonymous"}
    assert body["timestamp"].endswith("Z")
    assert "x-assetflow-warning" not in headers
    assert deps.store.events[0].to_json() == body


def test_post_normalises_the_uri_and_defaults_extra(deps: FakeDeps) -> None:
    _, _, body = call(deps, "POST", "/assets/events", body={"uri": "S3://assetflow-demo/landing/deliveries/"})
    assert body["asset"] == KNOWN
    assert body["extra"] == {}
    assert body["partition_key"] is None


def test_principal_comes_from_the_iam_authorizer(deps: FakeDeps) -> None:
    _, _, body = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, user_arn=USER_ARN)
    assert body["source"] == {"type": "api", "principal": USER_ARN}


def test_a_base64_body_is_decoded(deps: FakeDeps) -> None:
    status, _, body = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, base64_body=True)
    assert status == 201
    assert body["asset"] == KNOWN


def test_routes_under_a_named_stage(deps: FakeDeps) -> None:
    status, _, _ = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, stage="prod")
    assert status == 201


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ("{not json", ("not valid JSON",)),
        ("", ("body is empty",)),
        ('{"uri": NaN}', ("NaN",)),
        ("[1, 2]", ("JSON object", "an array")),
        ('"s3://b/k"', ("JSON object", "a string")),
        ({"uri": KNOWN, "partitionKey": "x"}, ("unknown fields", "partitionKey")),
        ({"extra": {}}, ("uri is required",)),
        ({"uri": ""}, ("uri is required",)),
        ({"uri": 42}, ("must be a str",)),
        ({"uri": "airflow://x"}, ("reserved",)),
        ({"uri": "s3://"}, ("bucket name",)),
        ({"uri": "s3://bücket/k"}, ("non-ASCII",)),
        ({"uri": "s3://user:secret@bucket/k"}, ("invalid asset URI",)),
        ({"uri": KNOWN, "extra": [1]}, ("extra must be a JSON object", "an array")),
        ({"uri": KNOWN, "extra": "text"}, ("extra must be a JSON object",)),
        ({"uri": KNOWN, "partition_key": ""}, ("partition_key must be a non-empty string",)),
        ({"uri": KNOWN, "partition_key": 7}, ("partition_key", "a number")),
        ({"uri": KNOWN, "partition_key": "k" * 300}, ("over the limit",)),
    ],
)
def test_bad_bodies_are_400_with_the_reason(deps: FakeDeps, body: Any, fragments: tuple[str, ...]) -> None:
    assert_error(call(deps, "POST", "/assets/events", body=body), 400, "bad_request", *fragments)
    assert deps.store.events == []


def test_a_uri_with_a_password_is_refused_without_echoing_it(deps: FakeDeps) -> None:
    _, _, body = call(deps, "POST", "/assets/events", body={"uri": "s3://user:hunter2@bucket/k"})
    assert "hunter2" not in body["detail"]


def test_deeply_nested_extra_is_refused(deps: FakeDeps) -> None:
    nested: Any = {}
    for _ in range(40):
        nested = {"a": nested}
    assert_error(
        call(deps, "POST", "/assets/events", body={"uri": KNOWN, "extra": nested}),
        400,
        "bad_request",
        "nested",
    )


def test_a_body_nested_past_the_parser_is_refused(deps: FakeDeps) -> None:
    body = '{"uri": "x", "extra": ' + "[" * 5000 + "]" * 5000 + "}"
    assert_error(call(deps, "POST", "/assets/events", body=body), 400, "bad_request")


def test_oversized_extra_is_413(deps: FakeDeps) -> None:
    extra = {"blob": "x" * (limits.MAX_REQUEST_EXTRA_BYTES + 1)}
    assert_error(
        call(deps, "POST", "/assets/events", body={"uri": KNOWN, "extra": extra}), 413, "payload_too_large"
    )


def test_oversized_body_is_413_before_parsing(deps: FakeDeps) -> None:
    body = "{" + " " * (limits.MAX_REQUEST_BODY_BYTES + 1) + "}"
    assert_error(call(deps, "POST", "/assets/events", body=body), 413, "payload_too_large", "over the limit")
    assert_error(
        call(deps, "POST", "/assets/events", body=body, base64_body=True),
        413,
        "payload_too_large",
        "over the limit",
    )


def test_bad_base64_is_400(deps: FakeDeps) -> None:
    event = http_event("POST", "/assets/events", body="!!!not base64")
    event["isBase64Encoded"] = True
    response = handle_api.lambda_handler(event, FakeContext(), deps=deps)  # type: ignore[arg-type]
    assert response["statusCode"] == 400


def test_an_unknown_asset_is_accepted_with_a_warning(deps: FakeDeps) -> None:
    status, headers, body = call(deps, "POST", "/assets/events", body={"uri": "x-new://thing"})
    assert status == 201
    assert body["asset"] == "x-new://thing"
    assert "not declared in the catalog" in headers["x-assetflow-warning"]
    # Once it has events it is known: no warning the second time.
    _, headers, _ = call(deps, "POST", "/assets/events", body={"uri": "x-new://thing"})
    assert "x-assetflow-warning" not in headers


def test_views_can_refuse_unknown_assets(deps: FakeDeps) -> None:
    request = requests.parse_emit_request({"uri": "x-new://thing"})
    with pytest.raises(NotFoundError, match="not in the catalog"):
        requests.emit_event(
            deps.store,  # type: ignore[arg-type]
            deps.catalog,
            request,
            principal="p",
            request_id="r",
            now=datetime.now(UTC),
            allow_unknown=False,
        )


# ---- idempotency ---------------------------------------------------------------------------------------


def test_the_same_idempotency_key_makes_one_event(deps: FakeDeps) -> None:
    first = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, headers={"Idempotency-Key": "k-1"})
    again = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, headers={"idempotency-key": "k-1"})
    assert first[0] == again[0] == 201
    assert first[2] == again[2]
    assert first[1]["idempotent-replayed"] == "false"
    assert again[1]["idempotent-replayed"] == "true"
    assert len(deps.store.events) == 1


def test_without_a_key_every_request_is_a_new_event(deps: FakeDeps) -> None:
    a = call(deps, "POST", "/assets/events", body={"uri": KNOWN})[2]
    b = call(deps, "POST", "/assets/events", body={"uri": KNOWN})[2]
    assert a["id"] != b["id"]
    assert len(deps.store.events) == 2


def test_keys_are_per_principal(deps: FakeDeps) -> None:
    headers = {"Idempotency-Key": "shared"}
    a = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, headers=headers, user_arn=USER_ARN)[2]
    b = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, headers=headers)[2]
    assert a["id"] != b["id"]


def test_a_key_reused_for_another_request_is_422(deps: FakeDeps) -> None:
    headers = {"Idempotency-Key": "k-2"}
    call(deps, "POST", "/assets/events", body={"uri": KNOWN, "extra": {"n": 1}}, headers=headers)
    result = call(deps, "POST", "/assets/events", body={"uri": KNOWN, "extra": {"n": 2}}, headers=headers)
    assert_error(result, 422, "idempotency_key_reused", "new key")


@pytest.mark.parametrize("key", ["", "k" * 256, "clé"])
def test_bad_idempotency_keys_are_400(deps: FakeDeps, key: str) -> None:
    result = call(deps, "POST", "/assets/events", body={"uri": KNOWN}, headers={"Idempotency-Key": key})
    assert_error(result, 400, "bad_request", "Idempotency-Key")


# ---- reads, query parameters ---------------------------------------------------------------------------


def test_list_events_needs_a_valid_uri(deps: FakeDeps) -> None:
    assert_error(call(deps, "GET", "/assets/events"), 400, "bad_request", "uri is required")
    assert_error(
        call(deps, "GET", "/assets/events", query={"uri": "airflow://x"}), 400, "bad_request", "reserved"
    )


def test_list_events_returns_the_list_shape(deps: FakeDeps) -> None:
    call(deps, "POST", "/assets/events", body={"uri": KNOWN})
    status, _, body = call(deps, "GET", "/assets/events", query={"uri": KNOWN, "limit": "5"})
    assert status == 200
    assert set(body) == {"items", "next"}
    assert [e["asset"] for e in body["items"]] == [KNOWN]
    assert body["next"] is None


def test_a_uri_with_commas_and_a_query_survives_the_query_string(deps: FakeDeps) -> None:
    uri = "x-feed://partners/a,b?day=1&kind=full"
    call(deps, "POST", "/assets/events", body={"uri": uri})
    _, _, body = call(deps, "GET", "/assets/events", raw_query="uri=" + urllib.parse.quote(uri, safe=""))
    assert [e["asset"] for e in body["items"]] == [uri]


def test_query_parameters_without_a_raw_query_string(deps: FakeDeps) -> None:
    event = http_event("GET", "/assets/events", query={"uri": KNOWN})
    event["rawQueryString"] = ""
    response = handle_api.lambda_handler(event, FakeContext(), deps=deps)  # type: ignore[arg-type]
    assert response["statusCode"] == 200


@pytest.mark.parametrize("limit", ["0", "1001", "abc", "-1", "2.5", "05"])
def test_bad_limits_are_400(deps: FakeDeps, limit: str) -> None:
    result = call(deps, "GET", "/assets/events", query={"uri": KNOWN, "limit": limit})
    assert_error(result, 400, "bad_request", "limit must be an integer from 1 to 1000")


def test_a_bad_page_token_is_400(deps: FakeDeps) -> None:
    result = call(deps, "GET", "/assets/events", query={"uri": KNOWN, "next": "garbage"})
    assert_error(result, 400, "bad_request", "page token")


def test_unknown_and_repeated_query_parameters_are_400(deps: FakeDeps) -> None:
    assert_error(
        call(deps, "GET", "/assets", query={"lmit": "5"}),
        400,
        "bad_request",
        "unknown query parameter 'lmit'",
    )
    result = call(deps, "GET", "/assets/events", raw_query=f"uri={KNOWN}&uri={KNOWN}")
    assert_error(result, 400, "bad_request", "more than once")


def test_an_empty_next_means_the_first_page(deps: FakeDeps) -> None:
    assert call(deps, "GET", "/assets", raw_query="limit=10&next=")[0] == 200


def test_unknown_pipeline_is_404(deps: FakeDeps) -> None:
    for method, path in [
        ("GET", "/pipelines/nope/queue"),
        ("DELETE", "/pipelines/nope/queue"),
        ("GET", "/pipelines/nope/runs"),
    ]:
        assert_error(call(deps, method, path), 404, "not_found", "no pipeline 'nope'", "deliveries_etl")


def test_known_pipeline_views(deps: FakeDeps) -> None:
    assert call(deps, "GET", "/pipelines/deliveries_etl/queue")[2] == {
        "items": [],
        "next": None,
        "updated": 0,
        "required": 1,
    }
    status, _, body = call(deps, "DELETE", "/pipelines/deliveries_etl/queue", query={"uri": KNOWN})
    assert (status, body) == (200, {"pipeline": "deliveries_etl", "uri": KNOWN, "deleted": 0})
    result = call(deps, "DELETE", "/pipelines/deliveries_etl/queue", query={"uri": "airflow://x"})
    assert_error(result, 400, "bad_request", "reserved")


def test_unknown_run_is_404(deps: FakeDeps) -> None:
    assert_error(call(deps, "GET", "/runs/run-missing"), 404, "not_found", "run-missing")


def test_a_run_has_the_design_shape(deps: FakeDeps) -> None:
    created = datetime(2026, 11, 21, 10, 15, tzinfo=UTC)
    event = AssetEvent(KNOWN, "e1", created, source={"type": "api", "principal": "p"})
    deps.store.runs["run-1"] = Run(
        "run-1", "deliveries_etl", RunState.QUEUED, created, triggering_asset_events={KNOWN: (event,)}
    )
    status, _, body = call(deps, "GET", "/runs/run-1")
    assert status == 200
    assert {
        "run_id",
        "pipeline",
        "state",
        "created_at",
        "partition_key",
        "job_run_id",
        "triggering_asset_events",
    } <= set(body)
    assert body["triggering_asset_events"] == {KNOWN: [event.to_json()]}
    assert body["produced_asset_events"] == {}
    listed = call(deps, "GET", "/pipelines/deliveries_etl/runs")[2]
    assert listed == {"items": [Run.from_json(body).to_json()], "next": None}


# ---- routing and failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/nope", "/assets/events/extra", "/pipelines/x", "/"])
def test_unknown_paths_are_404_json(deps: FakeDeps, path: str) -> None:
    assert_error(call(deps, "GET", path), 404, "not_found", path)


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/assets", "GET"),
        ("DELETE", "/assets/events", "GET, POST"),
        ("POST", "/pipelines/deliveries_etl/queue", "DELETE, GET"),
        ("DELETE", "/runs/run-1", "GET"),
        ("PATCH", "/quarantine", "GET"),
    ],
)
def test_known_paths_with_another_method_are_405(deps: FakeDeps, method: str, path: str, allow: str) -> None:
    result = call(deps, method, path)
    assert_error(result, 405, "method_not_allowed", method, allow)
    assert result[1]["allow"] == allow


def test_store_unavailable_is_503(deps: FakeDeps) -> None:
    deps.store.fail_with = StoreUnavailableError("query: ThrottlingException")
    result = call(deps, "GET", "/assets")
    assert_error(result, 503, "unavailable", "retry")
    assert result[1]["retry-after"] == "1"
    assert_error(call(deps, "POST", "/assets/events", body={"uri": KNOWN}), 503, "unavailable")


def test_unexpected_errors_are_500_without_internals(deps: FakeDeps) -> None:
    deps.store.fail_with = RuntimeError("secret internal detail")
    result = call(deps, "GET", "/quarantine")
    assert_error(result, 500, "internal_error", "unexpected error")
    assert "secret" not in result[2]["detail"]


def test_every_route_answers(deps: FakeDeps) -> None:
    for path in ["/assets", "/runs", "/quarantine", "/pipelines/deliveries_etl/runs"]:
        status, _, body = call(deps, "GET", path)
        assert status == 200, (path, body)
        assert set(body) == {"items", "next"}


# ---- the views' validators -----------------------------------------------------------------------------


def test_parse_limit() -> None:
    assert requests.parse_limit(None) == 100
    assert requests.parse_limit("", 50) == 50
    assert requests.parse_limit("1000") == 1000
    assert requests.parse_limit(7) == 7
    for bad in (0, 1001, True, "1e3", " ", "x"):
        with pytest.raises(requests.RequestError):
            requests.parse_limit(bad)


def test_extra_within_the_limit_is_kept() -> None:
    extra = {"blob": "x" * (limits.MAX_REQUEST_EXTRA_BYTES - 20)}
    assert requests.check_extra(extra) is extra
    assert requests.check_extra(None) == {}


# ---- every route of the table answers ------------------------------------------------------------------

DESIGN_ROUTES = {
    ("POST", "/assets/events"),
    ("GET", "/assets"),
    ("GET", "/assets/events"),
    ("GET", "/pipelines/{id}/queue"),
    ("DELETE", "/pipelines/{id}/queue"),
    ("GET", "/pipelines/{id}/runs"),
    ("GET", "/runs"),
    ("GET", "/runs/{run_id}"),
    ("GET", "/quarantine"),
    ("GET", "/catalog"),
    ("GET", "/openapi.json"),
}


def test_every_route_of_the_table_is_served(deps: FakeDeps) -> None:
    from assetflow.routes import ROUTES

    assert {(r.method, r.path) for r in ROUTES} >= DESIGN_ROUTES
    deps.store.runs["r1"] = Run("r1", "deliveries_etl", RunState.QUEUED, datetime.now(UTC))
    for route in ROUTES:
        if route.method == "POST" and route.permission == "operate":
            continue  # served over the real store and launcher: tests/integration/test_operate.py
        path = route.path.replace("{id}", "deliveries_etl").replace("{run_id}", "r1")
        if route.method == "POST":
            status, _, body = call(deps, route.method, path, body={"uri": KNOWN})
        else:
            status, _, body = call(
                deps, route.method, path, query={"uri": KNOWN} if "uri" in route.required else None
            )
        assert status == route.status, (route.key, body)


def test_get_catalog_is_the_compiled_document(deps: FakeDeps) -> None:
    status, _, body = call(deps, "GET", "/catalog")
    assert status == 200
    assert body == json.loads(json.dumps(deps.catalog.to_document()))


def test_an_emitted_event_may_carry_a_data_version() -> None:
    assert requests.parse_emit_request({"uri": "x-a://b", "version": "etag-1"}).version == "etag-1"
    assert requests.parse_emit_request({"uri": "x-a://b"}).version is None
    for bad in ("", 3, "v" * 257, ["v"]):
        with pytest.raises(requests.RequestError, match="version must be a string of 1 to 256"):
            requests.parse_emit_request({"uri": "x-a://b", "version": bad})
