"""Issue 7, item 4 (security), on the running code: what reaches the logs, credentials in asset URIs, the
local API's credential check.

- Logs: each real handler (SQS and Kafka ingest, the API, the evaluator on real stream records, the job-state
  handler) runs on the emulators with payloads, headers and attributes carrying secret-looking values, under
  unique fake AWS credentials; nothing logged at INFO or above (Powertools' JSON lines, standard logging
  records with every field and traceback, printed output, and what Lambda would log of an uncaught
  exception) contains any of them. Quarantine reasons, which quote payloads, stay out of the logs too.
- Asset URIs with credentials are refused with a clear error, and the password is not echoed back, by the
  core (``Asset``), the API, the CLI (``events emit`` and the other commands taking a URI) and
  ``assetflow validate``.
- The local runtime's stand-in for IAM: a request without the runtime's bearer token gets 401 before the API
  function runs, and the token never reaches the function or the logs.

The stack's half of item 4 (IAM-only API, ``*`` resources, encryption at rest, TLS only, log retention,
nothing public) is checked on the synthesised templates in tests/infra/test_security.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from assetflow import Asset, AssetUriError, AssetWatcher, Catalog, KafkaTopic, Pipeline, SparkJob, SqsQueue
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.emr import outlet_metadata_uri
from assetflow.composition import Dependencies, Settings
from assetflow.functions import (
    handle_api,
    handle_asset_events,
    handle_job_state,
    handle_kafka_records,
    handle_sqs_messages,
)
from assetflow.usecases import views
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_REGION, DynamoDbLocal, MotoServer, client
from assetflow_dev.api_server import LocalApiServer
from assetflow_dev.cli import main as cli
from assetflow_job.contract import DOCUMENT_VERSION, OUTLET_METADATA_FORMAT
from assetflow_job.storage import read_bytes
from tests.integration.test_evaluator_handler import stream_event

pytestmark = pytest.mark.slow

# Secret-looking values, new for every session, that no log line may ever contain.
FAKE_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/" + secrets.token_hex(9)  # the shape of an AWS secret access key
PASSWORD = "pw-" + secrets.token_hex(12)
BEARER = "eyJhbGciOiJIUzI1NiJ9." + secrets.token_hex(16)
MARKERS = {"secret key": FAKE_SECRET_KEY, "password": PASSWORD, "bearer token": BEARER}

ORDER_SCHEMA = {
    "type": "object",
    "required": ["order_id"],
    "properties": {"order_id": {"type": "string", "pattern": "^o-[0-9]+$"}},
}
ORDERS = Asset(
    "s3://secure-lake/raw/orders",
    watchers=[
        AssetWatcher("orders", SqsQueue("orders", schema=ORDER_SCHEMA)),
        AssetWatcher("order-stream", KafkaTopic("orders", schema=ORDER_SCHEMA)),
    ],
)
CLEAN = Asset("s3://secure-lake/clean/orders")
ETL = Pipeline("orders_etl", schedule=[ORDERS], job=SparkJob("spark_jobs/orders.py"), outlets=[CLEAN])
QUEUE_ARN = f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:orders"
MSK_ARN = (
    f"arn:aws:kafka:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:cluster/orders/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b-1"
)
JOB_ROLE = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/assetflow-job"
CALLER = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:user/operator"
UNREACHABLE = "http://127.0.0.1:9"  # nothing listens: a test that should never reach the store fails loudly

#: What the module checked, for the one-line summary at the end of the session.
TALLY: Counter[str] = Counter()


class _Summary:
    """Writes what the module checked as one line of the terminal summary (registered on first use)."""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if TALLY:
            terminalreporter.write_line(
                f"security: {TALLY['handlers']} handler runs scanned ({TALLY['log records']} log records, "
                f"{len(MARKERS)} planted secrets + 3 AWS credentials absent; {TALLY['quarantined']} quarantine "
                f"reasons kept out); {TALLY['uri refusals']} credential-bearing URIs refused without echo "
                f"(core/API/CLI/validate); {TALLY['unauthorised']} unsigned or wrong-token local API requests "
                "refused with 401 before the function"
            )


@pytest.fixture(scope="module", autouse=True)
def summary(request: pytest.FixtureRequest) -> None:
    if not request.config.pluginmanager.has_plugin("assetflow-security-summary"):
        request.config.pluginmanager.register(_Summary(), "assetflow-security-summary")


def payload(order_id: str = "o-1") -> dict[str, Any]:
    """A valid order message that carries secrets in its fields."""
    return {
        "order_id": order_id,
        "password": PASSWORD,
        "aws_secret_access_key": FAKE_SECRET_KEY,
        "auth": {"authorization": f"Bearer {BEARER}"},
    }


# --- capturing what is logged ---------------------------------------------------------------------------


@dataclass
class Logs:
    """Everything logged at INFO and above: log records (every field, the formatted lines, tracebacks) and
    whatever was printed (Powertools metrics)."""

    caplog: pytest.LogCaptureFixture
    capsys: pytest.CaptureFixture[str]

    def __post_init__(self) -> None:
        self._printed: list[str] = []
        self._raised: list[str] = []

    def raised(self, exc: BaseException) -> None:
        """Record an exception that left a handler: Lambda logs its message and traceback."""
        self._raised.append("".join(traceback.format_exception(exc)))

    def text(self) -> str:
        """Everything captured so far, as one text."""
        out, err = self.capsys.readouterr()
        self._printed += [out, err]
        records = [r for r in self.caplog.records if r.levelno >= logging.INFO]
        return "\n".join([*self._printed, *self._raised, *(_render(r) for r in records)])

    def assert_no_secrets(self, **more: str) -> str:
        """Fail naming each secret (never its value) that was logged; returns the logs' text."""
        text = self.text()
        TALLY["log records"] += sum(r.levelno >= logging.INFO for r in self.caplog.records)
        leaked = sorted(name for name, value in {**MARKERS, **more}.items() if value and value in text)
        assert not leaked, f"logged: {', '.join(leaked)}"
        return text


def _render(record: logging.LogRecord) -> str:
    """A record as any formatter could print it: message, every attribute, the handlers' own lines."""
    lines = [record.getMessage(), json.dumps(vars(record), default=repr)]
    if record.exc_info:
        lines.append("".join(traceback.format_exception(*record.exc_info)))
    for handler in logging.getLogger(record.name).handlers:
        lines.append(handler.format(record))
    return "\n".join(lines)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> Iterator[Logs]:
    caplog.set_level(logging.INFO)
    # Records reach caplog through the root logger; a logger that does not propagate is tapped directly.
    isolated = [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.propagate
    ]
    for logger in isolated:
        logger.addHandler(caplog.handler)
    yield Logs(caplog, capsys)
    for logger in isolated:
        logger.removeHandler(caplog.handler)


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Unique fake credentials in the environment, used by every client the handlers build."""
    credentials = {
        "AWS_ACCESS_KEY_ID": "AKIA" + secrets.token_hex(8).upper(),
        "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30),
        "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjE" + secrets.token_urlsafe(48),
    }
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL") or n == "AWS_PROFILE"]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_DEFAULT_REGION", LOCAL_REGION)
    return credentials


# --- the world: a table, a runs bucket, an EMR Serverless application, a bus -------------------------------


@dataclass
class World:
    deps: Dependencies
    store: DynamoDbStore
    s3: Any
    streams: Any
    credentials: dict[str, str]


@dataclass
class LambdaContext:
    function_name: str = "assetflow-security"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = (
        f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:assetflow-security"
    )
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def world(
    dynamodb_local: DynamoDbLocal,
    moto_server: MotoServer,
    dynamodb_client: Any,
    aws_credentials: dict[str, str],
    tmp_path: Path,
) -> Iterator[World]:
    suffix = uuid.uuid4().hex[:10]
    store = DynamoDbStore(dynamodb_client, f"security-{suffix}")
    store.create_table()
    s3, emr = client("s3", moto_server.endpoint), client("emr-serverless", moto_server.endpoint)
    bucket = f"runs-{suffix}"
    s3.create_bucket(Bucket=bucket)
    application = emr.create_application(
        name=f"security-{suffix}", releaseLabel="emr-7.9.0", type="SPARK", clientToken=suffix
    )["applicationId"]
    bus = f"security-{suffix}"
    client("events", moto_server.endpoint).create_event_bus(Name=bus)
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(Catalog.build([ETL]).to_document()))
    settings = Settings(
        table_name=store.table,
        catalog_path=str(catalog),
        event_bus_name=bus,
        runs_bucket=bucket,
        emr_application_id=application,
        emr_job_role_arn=JOB_ROLE,
        region=LOCAL_REGION,
    )
    # The handlers' own composition root, signing with the credentials in the environment.
    deps = Dependencies(
        settings,
        session=boto3.session.Session(),
        endpoints={
            "dynamodb": dynamodb_local.endpoint,
            "s3": moto_server.endpoint,
            "emr-serverless": moto_server.endpoint,
            "events": moto_server.endpoint,
        },
    )
    yield World(deps, store, s3, client("dynamodbstreams", dynamodb_local.endpoint), aws_credentials)
    dynamodb_client.delete_table(TableName=store.table)


# --- the handlers' inputs -------------------------------------------------------------------------------


def sqs_event(*bodies: str) -> dict[str, Any]:
    records = []
    for n, body in enumerate(bodies):
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": f"AQEB{n}",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1763719200123",
                    "SenderId": "AROAIWPX5BD2BHG722MW4:order-service",
                    "ApproximateFirstReceiveTimestamp": "1763719200160",
                },
                "messageAttributes": {
                    "authorization": {
                        "stringValue": f"Bearer {BEARER}",
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": "String",
                    }
                },
                "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 (SQS's own checksum)
                "eventSource": "aws:sqs",
                "eventSourceARN": QUEUE_ARN,
                "awsRegion": LOCAL_REGION,
            }
        )
    return {"Records": records}


def kafka_event(*values: str) -> dict[str, Any]:
    def encoded(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    records = [
        {
            "topic": "orders",
            "partition": 0,
            "offset": 100 + n,
            "timestamp": 1763719500123 + n,
            "timestampType": "CREATE_TIME",
            "key": encoded(f"o-{n}"),
            "value": encoded(value),
            "headers": [
                {"authorization": list(f"Bearer {BEARER}".encode())},
                {"x-api-key": list(PASSWORD.encode())},
            ],
        }
        for n, value in enumerate(values)
    ]
    return {
        "eventSource": "aws:kafka",
        "eventSourceArn": MSK_ARN,
        "bootstrapServers": "b-1.orders.example.c2.kafka.us-east-1.amazonaws.com:9098",
        "records": {"orders-0": records},
    }


def api_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An HTTP API payload v2 event as API Gateway sends it after IAM authorisation."""
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": urllib.parse.urlencode(query or {}),
        "headers": {"content-type": "application/json", **(headers or {})},
        "requestContext": {
            "accountId": LOCAL_ACCOUNT_ID,
            "apiId": "secure",
            "authorizer": {"iam": {"userArn": CALLER, "accessKey": "ASIAEXAMPLEEXAMPLE00"}},
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "10.0.0.1"},
            "requestId": uuid.uuid4().hex,
            "routeKey": f"{method} {path}",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if body is not None:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    return event


def call_api(deps: Dependencies, event: dict[str, Any]) -> tuple[int, Any]:
    response = handle_api.lambda_handler(event, LambdaContext(), deps=deps)  # type: ignore[arg-type]
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def job_state_event(application_id: str, job_run_id: str | None, state: str) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "applicationId": application_id,
        "state": state,
        "previousState": "RUNNING",
        "stateDetails": f"spark.hadoop.fs.s3a.secret.key={FAKE_SECRET_KEY} password={PASSWORD}",
    }
    if job_run_id is not None:
        detail["jobRunId"] = job_run_id
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "EMR Serverless Job Run State Change",
        "source": "aws.emr-serverless",
        "account": LOCAL_ACCOUNT_ID,
        "time": "2026-11-21T06:05:00Z",
        "region": LOCAL_REGION,
        "resources": [],
        "detail": detail,
    }


def _bucket_and_key(uri: str) -> tuple[str, str]:
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    return bucket, key


# --- logs -----------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_ingest_logs_no_payload_header_attribute_or_quarantine_reason(world: World, logs: Logs) -> None:
    poison = json.dumps({**payload(), "order_id": PASSWORD})  # fails the schema, which quotes the value
    sqs = handle_sqs_messages.lambda_handler(
        sqs_event(json.dumps(payload("o-1")), poison), LambdaContext(), deps=world.deps
    )
    kafka = handle_kafka_records.lambda_handler(
        kafka_event(json.dumps(payload("o-2")), poison), LambdaContext(), deps=world.deps
    )
    TALLY["handlers"] += 2

    assert sqs == kafka == {"batchItemFailures": []}
    # The secrets went through: stored in the events' extras and in the quarantine records' reasons.
    stored = world.store.list_events(ORDERS.uri, limit=10).items
    assert len(stored) == 2 and all(PASSWORD in json.dumps(e["extra"]) for e in stored)
    assert all(BEARER in json.dumps(e["extra"]["message"]) for e in stored)
    reasons = [q["reason"] for q in world.store.list_quarantine(limit=10).items]
    assert len(reasons) == 2 and all(PASSWORD in r for r in reasons)
    TALLY["quarantined"] += len(reasons)
    # And the logs tell what happened without any of it.
    text = logs.assert_no_secrets(**world.credentials)
    assert all(e["id"] in text for e in stored)
    assert text.count("quarantined") >= 2
    for reason in reasons:
        assert reason not in text


@pytest.mark.integration
def test_the_api_logs_no_body_header_or_credential(world: World, logs: Logs) -> None:
    signed = {
        "authorization": (
            f"AWS4-HMAC-SHA256 Credential={world.credentials['AWS_ACCESS_KEY_ID']}/20261121/{LOCAL_REGION}/"
            f"execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature={secrets.token_hex(32)}"
        ),
        "x-amz-security-token": world.credentials["AWS_SESSION_TOKEN"],
        "x-api-key": PASSWORD,
        "cookie": f"session={BEARER}",
        "idempotency-key": f"k-{uuid.uuid4().hex}",
    }
    created = call_api(
        world.deps,
        api_event("POST", "/assets/events", body={"uri": ORDERS.uri, "extra": payload()}, headers=signed),
    )
    refused = [
        call_api(world.deps, api_event("POST", "/assets/events", body=body, headers=signed))
        for body in (
            {"uri": f"s3://admin:{PASSWORD}@secure-lake/raw/orders", "extra": payload()},
            {"uri": ORDERS.uri, "extra": payload(), "partition_key": {"token": BEARER}},
            f'{{"uri": "{ORDERS.uri}", "extra": {{"password": "{PASSWORD}"}}',  # not JSON
        )
    ]
    listed = call_api(
        world.deps, api_event("GET", "/assets/events", query={"uri": ORDERS.uri}, headers=signed)
    )
    TALLY["handlers"] += 5

    assert created[0] == 201 and created[1]["extra"] == payload()
    assert [status for status, _ in refused] == [400, 400, 400]
    assert listed[0] == 200 and listed[1]["items"][0]["id"] == created[1]["id"]
    text = logs.assert_no_secrets(**world.credentials, signature=signed["authorization"])
    assert created[1]["id"] in text


@pytest.mark.integration
def test_the_evaluator_and_the_job_state_handler_log_no_extras(world: World, logs: Logs) -> None:
    # Given events with secrets in their extras, as ingest and the API store them
    handle_sqs_messages.lambda_handler(sqs_event(json.dumps(payload())), LambdaContext(), deps=world.deps)
    call_api(world.deps, api_event("POST", "/assets/events", body={"uri": ORDERS.uri, "extra": payload()}))

    # When the evaluator gets them from the table's stream, and the runs' jobs succeed
    batch = stream_event(world.streams, world.store.stream_arn())
    evaluated = handle_asset_events.lambda_handler(batch, LambdaContext(), deps=world.deps)
    runs = world.store.list_runs(ETL.id).items
    assert evaluated == {"batchItemFailures": []} and runs
    settings = world.deps.settings
    answers = []
    for run in runs:
        bucket, key = _bucket_and_key(outlet_metadata_uri(settings.runs_bucket or "", ETL.id, run["run_id"]))
        world.s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=json.dumps(
                {
                    "format": OUTLET_METADATA_FORMAT,
                    "version": DOCUMENT_VERSION,
                    "run_id": run["run_id"],
                    "events": [
                        {"asset": CLEAN.uri, "extra": payload(), "alias": None, "aliases": []},
                        # Refused (and logged as refused): a credential-bearing URI, an undeclared asset.
                        {"asset": f"s3://admin:{PASSWORD}@secure-lake/clean/orders", "extra": {}},
                        {"asset": "s3://secure-lake/elsewhere", "extra": {"token": BEARER}},
                    ],
                }
            ).encode(),
        )
        event = job_state_event(settings.emr_application_id or "", run["job_run_id"], "SUCCESS")
        answers.append(handle_job_state.lambda_handler(event, LambdaContext(), deps=world.deps))
    ignored = handle_job_state.lambda_handler(
        job_state_event("00another-application", runs[0]["job_run_id"], "FAILED"),
        LambdaContext(),
        deps=world.deps,
    )
    TALLY["handlers"] += 2 + len(answers)

    # Then the context the jobs read and the outlet events carry the extras, and the logs none of it
    # (a small context travels inline, in the job's arguments; a large one through S3)
    job = world.deps.client("emr-serverless").get_job_run(
        applicationId=settings.emr_application_id, jobRunId=runs[0]["job_run_id"]
    )["jobRun"]
    argument = job["jobDriver"]["sparkSubmit"]["entryPointArguments"][-1]
    assert PASSWORD in read_bytes(argument, s3_client=world.s3).decode()
    assert all(
        a["status"] == "recorded" and len(a["emitted"]) == 1 and len(a["refused"]) == 2 for a in answers
    )
    assert ignored["status"] == "ignored"
    produced = views.show_run(world.store, runs[0]["run_id"], world.deps.catalog)["produced_asset_events"]
    assert next(iter(produced.values()))[0]["extra"] == payload()
    text = logs.assert_no_secrets(**world.credentials)
    assert all(r["run_id"] in text for r in runs)
    assert "outlet metadata refused" in text


def test_a_malformed_job_state_change_is_refused_without_echoing_its_detail(logs: Logs) -> None:
    deps = Dependencies(Settings(table_name="unused", catalog_path="unused.json", region=LOCAL_REGION))
    with pytest.raises(ValueError, match="jobRunId") as raised:
        handle_job_state.lambda_handler(job_state_event("00app", None, "SUCCESS"), LambdaContext(), deps=deps)
    logs.raised(raised.value)
    logs.assert_no_secrets()


# --- asset URIs with credentials ------------------------------------------------------------------------

CREDENTIAL_URIS = [
    f"s3://admin:{PASSWORD}@secure-lake/raw/orders",
    f"S3://admin:{PASSWORD}@secure-lake/raw/orders",
    f"s3://:{PASSWORD}@secure-lake/raw/orders",
    f"s3://admin:{PASSWORD}%40more@secure-lake/raw/orders",
    f"postgres://admin:{PASSWORD}@db.example.com:5432/shop/public/orders",
    f"kafka://svc:{PASSWORD}@broker.example.com:9092/orders",
    f"file://admin:{PASSWORD}@/data/orders.csv",
    f"gs://admin:{PASSWORD}@bucket/orders",
]
#: Cases that once leaked: an x- scheme skipped the check, a non-ASCII password was echoed percent-encoded.
LEAKY_URIS = [
    pytest.param(f"x-db://admin:{PASSWORD}@db.example.com/orders", id="x-scheme"),
    pytest.param(f"s3://admin:p\u00e4ss-{PASSWORD}@secure-lake/raw/orders", id="non-ascii-password"),
]


def assert_refused_clearly(message: str) -> None:
    assert "userinfo" in message or "credentials" in message, message
    assert PASSWORD not in message, message
    TALLY["uri refusals"] += 1


@pytest.mark.parametrize("uri", [*CREDENTIAL_URIS, *LEAKY_URIS])
def test_the_core_refuses_credentials_in_asset_uris(uri: str) -> None:
    with pytest.raises(AssetUriError) as raised:
        Asset(uri)
    assert_refused_clearly(str(raised.value))


def test_the_api_refuses_credentials_in_asset_uris(logs: Logs, tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(Catalog.build([ETL]).to_document()))
    # The store is unreachable: any request that got past the URI check would fail with another status.
    deps = Dependencies(
        Settings(table_name="unused", catalog_path=str(catalog), region=LOCAL_REGION),
        endpoints={"dynamodb": UNREACHABLE},
    )
    uri = CREDENTIAL_URIS[0]
    for event in (
        api_event("POST", "/assets/events", body={"uri": uri, "extra": {}}),
        api_event("GET", "/assets/events", query={"uri": uri}),
        api_event("DELETE", f"/pipelines/{ETL.id}/queue", query={"uri": uri}),
    ):
        status, body = call_api(deps, event)
        assert status == 400, body
        assert_refused_clearly(body["detail"])
        assert PASSWORD not in json.dumps(body)
    logs.assert_no_secrets()


@pytest.mark.parametrize(
    "command",
    [
        ["events", "emit", "{uri}", "--extra", '{"rows": 1}'],
        ["events", "list", "{uri}"],
        ["queue", "clear", ETL.id, "--asset", "{uri}"],
    ],
    ids=["events-emit", "events-list", "queue-clear"],
)
def test_the_cli_refuses_credentials_in_asset_uris(
    command: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    definitions = tmp_path / "pipelines"
    definitions.mkdir()
    (definitions / "orders.py").write_text(
        "from assetflow import Asset, Pipeline, SparkJob\n"
        f"etl = Pipeline({ETL.id!r}, schedule=[Asset({ORDERS.uri!r})],\n"
        "               job=SparkJob('spark_jobs/orders.py'))\n"
    )
    monkeypatch.chdir(tmp_path)
    argv = [part.replace("{uri}", CREDENTIAL_URIS[0]) for part in command]
    code = cli([*argv, "--pipelines", str(definitions), "--table", "t", "--endpoint-url", UNREACHABLE])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith(f"assetflow {command[0]} {command[1]}: invalid asset URI"), err
    assert_refused_clearly(err)


@pytest.mark.parametrize(
    "uri",
    [
        pytest.param(CREDENTIAL_URIS[0], id="s3"),
        pytest.param(LEAKY_URIS[0].values[0], id="x-scheme"),
    ],
)
def test_validate_refuses_credentials_in_definitions(
    uri: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "orders.py").write_text(
        "from assetflow import Asset, Pipeline, SparkJob\n"
        f"raw = Asset({ORDERS.uri!r})\n"
        "etl = Pipeline('orders_etl', schedule=[raw], job=SparkJob('spark_jobs/orders.py'),\n"
        f"                outlets=[Asset({uri!r})])\n"
    )
    code = cli(["validate", "--pipelines", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert "AssetUriError: invalid asset URI" in err
    assert_refused_clearly(err)


# --- the local runtime's credential check ---------------------------------------------------------------


def _http(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    # Only ever the local server on 127.0.0.1, and no proxy in between.
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})  # noqa: S310
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_the_local_api_refuses_unsigned_and_wrong_token_requests_before_the_function(logs: Logs) -> None:
    token = secrets.token_urlsafe(32)
    calls: list[dict[str, Any]] = []

    def spy(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append(event)
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{}"}

    server = LocalApiServer(handler=spy, token=token)
    server.start()
    try:
        url = f"{server.url}/assets"
        basic = base64.b64encode(f"assetflow:{token}".encode()).decode()
        refused = [
            _http(url),
            _http(url, headers={"Authorization": f"Bearer {BEARER}"}),
            _http(url, headers={"Authorization": f"Bearer {token}x"}),
            _http(url, headers={"Authorization": f"Bearer {token[:-1]}"}),
            _http(url, headers={"Authorization": f"Basic {basic}"}),
            _http(url, headers={"Authorization": token}),
            _http(url, headers={"Authorization": f"AWS4-HMAC-SHA256 Credential=AKIA/x, Signature={token}"}),
            _http(f"{url}?token={urllib.parse.quote(token)}"),
            _http(url, headers={"Cookie": f"token={token}"}),
            _http(
                f"{server.url}/assets/events",
                method="POST",
                body=json.dumps({"uri": ORDERS.uri}).encode(),
                headers={"Content-Type": "application/json"},
            ),
        ]
        assert calls == []  # the function never ran
        allowed = _http(url, headers={"Authorization": f"Bearer {token}"})
    finally:
        server.stop()
    TALLY["unauthorised"] += len(refused)

    for status, headers, body in refused:
        assert status == 401, body
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert json.loads(body)["error"] == "unauthorized"
        assert token.encode() not in body and BEARER.encode() not in body
    # The right token reaches the function, which never sees it (as IAM's signature never reaches it on AWS).
    assert allowed[0] == 200 and len(calls) == 1
    assert token not in json.dumps(calls[0])
    assert calls[0]["requestContext"]["authorizer"]["iam"]["userArn"]
    logs.assert_no_secrets(local_token=token)


def test_the_local_api_listens_on_loopback_only() -> None:
    for host in ("0.0.0.0", "::", "192.0.2.10"):  # noqa: S104 (the addresses it must refuse)
        with pytest.raises(ValueError, match="loopback"):
            LocalApiServer(handler=lambda event, context: {}, token=secrets.token_urlsafe(), host=host)
    with pytest.raises(ValueError, match="token"):
        LocalApiServer(handler=lambda event, context: {}, token="")


@pytest.mark.integration
def test_the_local_api_with_the_real_function_logs_no_token_or_body(world: World, logs: Logs) -> None:
    token = secrets.token_urlsafe(32)
    server = LocalApiServer(
        handler=lambda event, context: handle_api.lambda_handler(event, context, deps=world.deps), token=token
    )
    server.start()
    try:
        status, _, body = _http(
            f"{server.url}/assets/events",
            method="POST",
            body=json.dumps({"uri": ORDERS.uri, "extra": payload()}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        refused, _, _ = _http(f"{server.url}/assets", headers={"Authorization": f"Bearer {BEARER}"})
    finally:
        server.stop()
    TALLY["handlers"] += 1
    TALLY["unauthorised"] += 1

    assert status == 201 and json.loads(body)["extra"] == payload()
    assert refused == 401
    text = logs.assert_no_secrets(local_token=token, **world.credentials)
    assert json.loads(body)["id"] in text


# ---- every local service listens on 127.0.0.1 only (issue 14) ---------------------------------------------


def _listening_addresses(port: int) -> set[str]:
    """The local addresses listening on ``port`` (Linux: /proc/net/tcp and tcp6)."""
    import ipaddress as ip

    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, _remote, state = line.split()[1:4]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            # /proc writes each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(str(ip.ip_address(raw)) if width == 8 else str(ip.IPv6Address(raw)))
    return found


def _loopback(address: str) -> bool:
    import ipaddress as ip

    parsed = ip.ip_address(address)
    mapped = getattr(parsed, "ipv4_mapped", None)
    return bool((mapped or parsed).is_loopback)


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket tables")
def test_every_local_emulator_and_endpoint_listens_on_loopback_only(tmp_path: Path) -> None:
    from assetflow_dev import DynamoDbLocal, MotoServer, TansuBroker
    from assetflow_dev.invoke_server import LocalInvokeServer

    started = []
    try:
        for emulator in (
            DynamoDbLocal(log_dir=tmp_path),
            MotoServer(log_dir=tmp_path),
            TansuBroker(log_dir=tmp_path),
        ):
            emulator.start()
            started.append(emulator)
        invoke = LocalInvokeServer({}, token=secrets.token_urlsafe())
        invoke.start()
        api = LocalApiServer(handler=lambda event, context: {}, token=secrets.token_urlsafe())
        ports = {e.name: e.port for e in started} | {"invoke": int(invoke.url.rsplit(":", 1)[1])}
        api.start()
        ports["api"] = int(api.url.rstrip("/").rsplit(":", 1)[1])
        for name, port in ports.items():
            addresses = _listening_addresses(port)
            assert addresses, f"{name} is not listening on {port}"
            assert all(_loopback(a) for a in addresses), f"{name} listens on {sorted(addresses)}"
        assert started[0].loopback_only  # the loopback launcher, not the jar's own main
        api.stop()
        invoke.stop()
    finally:
        for emulator in reversed(started):
            emulator.stop()
