"""The local HTTP API over real HTTP: the bearer-token check, API Gateway's v2 event, the API function on DynamoDB Local."""

from __future__ import annotations

import base64
import http.client
import json
import logging
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.core.events import Run
from assetflow.core.pipeline import Pipeline
from assetflow.functions import handle_api
from assetflow.loader import load_catalog
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_CLIENT_KWARGS, LOCAL_REGION, DynamoDbLocal
from assetflow_dev.api_server import LOCAL_PRINCIPAL, LocalApiServer

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
LANDING = "s3://assetflow-demo/landing/deliveries"
ANY_TOKEN = uuid.uuid4().hex


class NoLauncher:
    """The API never submits runs."""

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        raise AssertionError("the API does not start runs")


class Spy:
    """Wraps an API handler: keeps every event and context it was called with."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], dict[str, Any]]) -> None:
        self.handler = handler
        self.calls: list[tuple[dict[str, Any], Any]] = []
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self._lock:
            self.calls.append((event, context))
        return self.handler(event, context)


@pytest.fixture(scope="module")
def catalog_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalog") / "catalog.json"
    path.write_text(json.dumps(load_catalog(str(REPO_ROOT / "pipelines")).to_document()))
    return path


@pytest.fixture(scope="module")
def deps(dynamodb_local: DynamoDbLocal, catalog_path: Path) -> Iterator[Dependencies]:
    name = f"local-api-{uuid.uuid4().hex[:10]}"
    settings = Settings(table_name=name, catalog_path=str(catalog_path), region=LOCAL_REGION)
    # The endpoint is given, not read from the environment: how the local runtime wires its handlers.
    deps = Dependencies(
        settings,
        session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
        launcher=NoLauncher(),
        endpoints={"dynamodb": dynamodb_local.endpoint},
    )
    store: DynamoDbStore = deps.store
    store.create_table()
    yield deps
    deps.client("dynamodb").delete_table(TableName=name)


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(24)


@pytest.fixture
def serve(token: str) -> Iterator[Callable[..., LocalApiServer]]:
    started: list[LocalApiServer] = []

    def start(handler: Callable[[dict[str, Any], Any], dict[str, Any]], **kwargs: Any) -> LocalApiServer:
        server = LocalApiServer(handler=handler, token=token, **kwargs)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def api(deps: Dependencies, serve: Callable[..., LocalApiServer]) -> tuple[LocalApiServer, Spy]:
    spy = Spy(lambda event, context: handle_api.lambda_handler(event, context, deps=deps))
    return serve(spy), spy


def call(
    server: LocalApiServer,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request through urllib; returns (status, lower-cased headers, body bytes), errors included."""
    request = urllib.request.Request(  # noqa: S310 - the server's own http URL
        server.url + path, data=body, method=method, headers=headers or {}
    )
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - as above
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def as_json(result: tuple[int, dict[str, str], bytes]) -> Any:
    return json.loads(result[2])


def test_requests_without_the_token_get_401_before_the_function_runs(
    api: tuple[LocalApiServer, Spy], token: str
) -> None:
    server, spy = api
    missing = call(server, "GET", "/assets")
    wrong = call(server, "GET", "/assets", token=token[:-1] + ("x" if token[-1] != "x" else "y"))
    basic = call(
        server, "GET", "/assets", headers={"Authorization": "Basic " + base64.b64encode(b"a:b").decode()}
    )
    unsigned_post = call(server, "POST", "/assets/events", body=json.dumps({"uri": LANDING}).encode())

    for status, headers, body in (missing, wrong, basic, unsigned_post):
        assert status == 401
        assert headers["www-authenticate"].startswith("Bearer")
        assert headers["content-type"] == "application/json"
        answer = json.loads(body)
        assert set(answer) == {"error", "detail"} and answer["error"] == "unauthorized" and answer["detail"]
        assert token not in body.decode()
    assert 'error="invalid_token"' in wrong[1]["www-authenticate"]
    assert spy.calls == []
    assert call(server, "GET", "/assets", token=token)[0] == 200
    assert len(spy.calls) == 1


def test_a_posted_event_shows_in_the_events_view(api: tuple[LocalApiServer, Spy], token: str) -> None:
    server, _ = api
    uri = f"{LANDING}/{uuid.uuid4().hex[:8]}"
    posted = call(
        server,
        "POST",
        "/assets/events",
        token=token,
        body=json.dumps({"uri": uri, "extra": {"rows": 3}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert posted[0] == 201, posted[2]
    event = as_json(posted)
    assert event["extra"] == {"rows": 3}
    assert event["source"] == {"type": "api", "principal": LOCAL_PRINCIPAL}
    assert posted[1]["content-type"] == "application/json"
    assert posted[1]["apigw-requestid"]

    listed = call(server, "GET", "/assets/events?" + urllib.parse.urlencode({"uri": uri}), token=token)

    assert listed[0] == 200
    assert as_json(listed) == {"items": [event], "next": None}


def test_unknown_routes_and_methods_pass_through_as_404_and_405(
    api: tuple[LocalApiServer, Spy], token: str
) -> None:
    server, spy = api
    missing = call(server, "GET", "/nothing/here", token=token)
    wrong_method = call(server, "PUT", "/assets", token=token, body=b"{}")

    assert missing[0] == 404 and as_json(missing)["error"] == "not_found"
    assert wrong_method[0] == 405 and as_json(wrong_method)["error"] == "method_not_allowed"
    assert wrong_method[1]["allow"] == "GET"
    assert len(spy.calls) == 2


def test_a_body_over_the_limit_gets_413_without_being_read(
    deps: Dependencies, serve: Callable[..., LocalApiServer], token: str
) -> None:
    spy = Spy(lambda event, context: handle_api.lambda_handler(event, context, deps=deps))
    server = serve(spy, max_body_bytes=64 * 1024)

    # A 4 MiB body through urllib: the client still reads the answer.
    huge = call(server, "POST", "/assets/events", token=token, body=b"x" * (4 * 1024 * 1024))
    # A declared 1 GB body that never comes: answered at once, so it was not waited for.
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    connection.putrequest("POST", "/assets/events")
    connection.putheader("Authorization", f"Bearer {token}")
    connection.putheader("Content-Length", str(10**9))
    connection.endheaders()
    declared = connection.getresponse()
    declared_body = declared.read()
    connection.close()
    # Chunked bodies are counted as they come.
    chunked = urllib.request.Request(  # noqa: S310 - the server's own http URL
        server.url + "/assets/events",
        data=iter([b"y" * 40_000, b"y" * 40_000]),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Transfer-Encoding": "chunked"},
    )
    with pytest.raises(urllib.error.HTTPError) as streamed:
        urllib.request.urlopen(chunked, timeout=10)  # noqa: S310 - as above

    assert huge[0] == 413 and as_json(huge)["error"] == "payload_too_large"
    assert declared.status == 413 and json.loads(declared_body)["error"] == "payload_too_large"
    assert streamed.value.code == 413
    streamed.value.close()
    assert spy.calls == []
    # A body within the limit reaches the function.
    small = json.dumps({"uri": f"{LANDING}/small", "extra": {"pad": "z" * 30_000}}).encode()
    assert call(server, "POST", "/assets/events", token=token, body=small)[0] == 201
    assert len(spy.calls) == 1


def test_the_function_gets_the_http_api_v2_event_api_gateway_builds(
    serve: Callable[..., LocalApiServer], token: str
) -> None:
    spy = Spy(lambda event, context: {"statusCode": 204, "headers": {}, "body": ""})
    server = serve(spy)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    body = bytes(range(256))
    connection.putrequest("POST", "/pipelines/daily%20report/queue?uri=s3%3A%2F%2Fb%2Fk&a=1&a=2&empty=")
    connection.putheader("Authorization", f"Bearer {token}")
    connection.putheader("X-Trace", "one")
    connection.putheader("X-Trace", "two")
    connection.putheader("Cookie", "session=abc; theme=dark")
    connection.putheader("User-Agent", "assetflow-test/1")
    connection.putheader("Content-Type", "application/octet-stream")
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    response = connection.getresponse()
    response.read()
    connection.close()
    text_post = call(
        server,
        "POST",
        "/assets/events",
        token=token,
        body=b'{"uri": "x"}',
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    plain_get = call(server, "GET", "/assets", token=token)

    assert response.status == 204 and text_post[0] == 204 and plain_get[0] == 204
    (event, context), (text_event, _), (get_event, _) = (c for c in spy.calls)
    assert event["version"] == "2.0" and event["routeKey"] == "$default"
    assert event["rawPath"] == "/pipelines/daily report/queue"
    assert event["rawQueryString"] == "uri=s3%3A%2F%2Fb%2Fk&a=1&a=2&empty="
    assert event["queryStringParameters"] == {"uri": "s3://b/k", "a": "1,2", "empty": ""}
    assert event["cookies"] == ["session=abc", "theme=dark"]
    headers = event["headers"]
    assert all(name == name.lower() for name in headers)
    assert headers["x-trace"] == "one,two"
    assert "authorization" not in headers and "cookie" not in headers
    assert headers["x-forwarded-for"] == "127.0.0.1" and headers["x-forwarded-proto"] == "http"
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == body
    assert "pathParameters" not in event
    context_ = event["requestContext"]
    assert context_["accountId"] == LOCAL_ACCOUNT_ID and context_["stage"] == "$default"
    assert context_["routeKey"] == "$default" and context_["requestId"]
    assert context_["http"] == {
        "method": "POST",
        "path": "/pipelines/daily report/queue",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "assetflow-test/1",
    }
    assert context_["authorizer"]["iam"]["userArn"] == LOCAL_PRINCIPAL
    assert context_["domainName"] == "127.0.0.1" and context_["domainPrefix"] == "127"
    assert isinstance(context_["timeEpoch"], int)
    assert context_["time"].endswith(" +0000") and len(context_["time"]) == len("12/Mar/2020:19:03:58 +0000")
    assert text_event["body"] == '{"uri": "x"}' and text_event["isBase64Encoded"] is False
    assert "body" not in get_event and get_event["isBase64Encoded"] is False
    assert "queryStringParameters" not in get_event and "cookies" not in get_event
    assert context.function_name and context.memory_limit_in_mb and context.aws_request_id
    assert context.invoked_function_arn.startswith(
        f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:"
    )
    assert spy.calls[0][1].aws_request_id != spy.calls[1][1].aws_request_id


def test_the_function_response_is_written_back_faithfully(
    serve: Callable[..., LocalApiServer], token: str
) -> None:
    answers = iter(
        [
            {
                "statusCode": 202,
                "headers": {"X-Thing": "a,b", "Content-Type": "image/png"},
                "cookies": ["a=1; Path=/", "b=2; HttpOnly"],
                "body": base64.b64encode(b"\x89PNG\x00\xff").decode(),
                "isBase64Encoded": True,
            },
            {"answer": 42},
        ]
    )

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        answer = next(answers, None)
        if answer is None:
            raise RuntimeError("the function crashed")
        return answer

    server = serve(handler)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    connection.request("GET", "/x", headers={"Authorization": f"Bearer {token}"})
    binary = connection.getresponse()
    payload = binary.read()
    cookies = binary.headers.get_all("Set-Cookie")
    connection.close()
    inferred = call(server, "GET", "/y", token=token)
    crashed = call(server, "GET", "/z", token=token)

    assert binary.status == 202 and payload == b"\x89PNG\x00\xff"
    assert binary.headers["X-Thing"] == "a,b" and binary.headers["Content-Type"] == "image/png"
    assert cookies == ["a=1; Path=/", "b=2; HttpOnly"]
    assert inferred[0] == 200 and as_json(inferred) == {"answer": 42}
    assert inferred[1]["content-type"] == "application/json"
    assert crashed[0] == 500 and as_json(crashed) == {"message": "Internal Server Error"}


def test_logs_carry_neither_the_token_nor_the_body(
    api: tuple[LocalApiServer, Spy], token: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = api
    marker = f"secret-{uuid.uuid4().hex}"
    with caplog.at_level(logging.DEBUG, logger="assetflow_dev.api_server"):
        call(server, "GET", "/assets", token=marker)
        call(
            server,
            "POST",
            "/assets/events",
            token=token,
            body=json.dumps({"uri": f"{LANDING}/logs", "extra": {"password": marker}}).encode(),
            headers={"Content-Type": "application/json"},
        )
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert "api request" in logged
    assert token not in logged and marker not in logged


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com", ""])  # noqa: S104 - refused
def test_only_a_loopback_address_is_accepted(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        LocalApiServer(handler=lambda e, c: {}, token=ANY_TOKEN, host=host)


def test_loopback_names_are_accepted_and_an_empty_token_is_not() -> None:
    assert (
        LocalApiServer(handler=lambda e, c: {}, token=ANY_TOKEN, host="localhost").url == "http://127.0.0.1:0"
    )
    assert (
        LocalApiServer(handler=lambda e, c: {}, token=ANY_TOKEN, host="::1", port=8080).url
        == "http://[::1]:8080"
    )
    with pytest.raises(ValueError, match="token"):
        LocalApiServer(handler=lambda e, c: {}, token="")


# ---- the route table, /openapi.json and the web page ------------------------------------------------------


def test_the_local_server_answers_every_route_of_the_table_and_serves_the_generated_openapi(
    api: tuple[LocalApiServer, Spy], token: str
) -> None:
    from assetflow.openapi import openapi_document
    from assetflow.routes import ROUTES

    server, _ = api
    for route in ROUTES:
        path = route.path.replace("{id}", "deliveries_etl").replace("{run_id}", "no-such-run")
        query = "?" + urllib.parse.urlencode({"uri": LANDING}) if route.required else ""
        bodies = {
            "createAssetEvent": {"uri": LANDING},
            "triggerRun": {"conf": {"from": "the route test"}},
            "backfillPipeline": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
        }
        doc = bodies.get(route.operation)
        body = json.dumps(doc).encode() if doc is not None else None
        status, _, answer = call(
            server,
            route.method,
            path + query,
            token=token,
            body=body,
            headers={"Content-Type": "application/json"},
        )
        # No run has that id, and no event is called after a pipeline: both are 404s.
        unknown = "{run_id}" in route.path or route.operation == "releaseAssetEvent"
        expected = 404 if unknown else route.status
        assert status == expected, (route.key, answer)
        # A route missing from the function would answer 404 not_found with "no route": never for a table line.
        assert b"no route" not in answer
    status, headers, answer = call(server, "GET", "/openapi.json", token=token)
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(answer) == openapi_document()
    assert call(server, "GET", "/openapi.json")[0] == 401
    catalog = call(server, "GET", "/catalog", token=token)
    assert catalog[0] == 200 and set(json.loads(catalog[2])["pipelines"]) >= {"deliveries_etl"}


@pytest.fixture
def page_files(tmp_path: Path) -> Path:
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<!doctype html><title>assetflow</title>")
    (static / "app.js").write_text("export const x = 1;\n")
    (static / "app.css").write_text("body { margin: 0 }\n")
    (static / ".hidden.js").write_text("secret\n")
    (tmp_path / "outside.js").write_text("outside\n")
    return static


def test_the_web_page_is_served_without_the_token_with_its_content_types(
    deps: Dependencies, serve: Callable[..., LocalApiServer], page_files: Path, token: str
) -> None:
    spy = Spy(lambda event, context: handle_api.lambda_handler(event, context, deps=deps))
    server = serve(spy, static_dir=page_files)

    index = call(server, "GET", "/ui/")
    script = call(server, "GET", "/ui/app.js")
    style = call(server, "GET", "/ui/app.css")
    html = call(server, "GET", "/ui/index.html")

    assert index[0] == 200 and index[1]["content-type"] == "text/html; charset=utf-8"
    assert index[2].startswith(b"<!doctype html>") and html[2] == index[2]
    assert script[0] == 200 and script[1]["content-type"].startswith("text/javascript")
    assert style[0] == 200 and style[1]["content-type"].startswith("text/css")
    assert index[1]["x-content-type-options"] == "nosniff"
    # /ui redirects to /ui/ (urllib follows it); nothing outside the folder, hidden or unknown is served.
    assert call(server, "GET", "/ui")[2] == index[2]
    for bad in (
        "/ui/.hidden.js",
        "/ui/../outside.js",
        "/ui/%2e%2e/outside.js",
        "/ui/nothing.js",
        "/ui/sub/app.js",
    ):
        status, _headers, body = call(server, "GET", bad)
        assert status == 404, bad
        assert json.loads(body)["error"] == "not_found"
    assert call(server, "POST", "/ui/app.js", body=b"x")[0] == 405
    # The API beside the page still wants the token; the function never saw a page request.
    assert call(server, "GET", "/assets")[0] == 401
    assert spy.calls == []
    assert server.ui_url == f"{server.url}/ui/#token={urllib.parse.quote(token, safe='')}"


def test_the_redirect_from_ui_to_ui_slash(serve: Callable[..., LocalApiServer], page_files: Path) -> None:
    server = serve(lambda event, context: {"statusCode": 200}, static_dir=page_files)
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        connection.request("GET", "/ui")
        response = connection.getresponse()
        response.read()
        assert response.status == 301 and response.getheader("Location") == "/ui/"
    finally:
        connection.close()


def test_the_real_web_page_is_served_from_the_package(serve: Callable[..., LocalApiServer]) -> None:
    from assetflow_dev.api_server import UI_STATIC

    server = serve(lambda event, context: {"statusCode": 200})
    index = call(server, "GET", "/ui/")
    assert index[0] == 200 and index[2] == (UI_STATIC / "index.html").read_bytes()
    for script in sorted(UI_STATIC.glob("*.js")):
        status, headers, body = call(server, "GET", f"/ui/{script.name}")
        assert status == 200 and headers["content-type"].startswith("text/javascript"), script.name
        assert body == script.read_bytes()
    assert call(server, "GET", "/ui/app.css")[1]["content-type"].startswith("text/css")


def test_versions_and_stale_backfills_go_through_the_http_api(
    api: tuple[LocalApiServer, Spy], token: str
) -> None:
    server, _ = api
    uri = f"{LANDING}/{uuid.uuid4().hex[:8]}"
    json_headers = {"Content-Type": "application/json"}
    posted = call(
        server,
        "POST",
        "/assets/events",
        token=token,
        body=json.dumps({"uri": uri, "version": "etag-7"}).encode(),
        headers=json_headers,
    )
    assert posted[0] == 201, posted[2]
    assert as_json(posted)["version"] == "etag-7"
    listed = call(server, "GET", "/assets/events?" + urllib.parse.urlencode({"uri": uri}), token=token)
    assert [e["version"] for e in as_json(listed)["items"]] == ["etag-7"]

    # The example pipelines declare no code_version: a stale backfill says how to declare one, creates nothing
    stale = call(
        server,
        "POST",
        "/pipelines/deliveries_etl/backfill",
        token=token,
        body=json.dumps({"stale": True, "dry_run": True}).encode(),
        headers=json_headers,
    )
    assert stale[0] == 400, stale[2]
    assert "declares no code_version" in as_json(stale)["detail"]
    bad = call(
        server,
        "POST",
        "/pipelines/deliveries_etl/backfill",
        token=token,
        body=json.dumps({"stale": "yes"}).encode(),
        headers=json_headers,
    )
    assert bad[0] == 400 and "stale must be true or false" in as_json(bad)["detail"]
