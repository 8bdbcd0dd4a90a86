"""End to end through the services' endpoints only, against the local runtime (default) or LocalStack.

``ASSETFLOW_E2E_TARGET=localstack`` (what ``make test-localstack`` sets after deploying the stack with
``cdklocal``) points every client at the one LocalStack endpoint, ``AWS_ENDPOINT_URL``, and finds the table
and the queues in the outputs of the stack ``assetflow-dev``. Nothing else differs: the same messages go in
through SQS (and Kafka), the same views come out of DynamoDB. What LocalStack's free edition lacks (EMR
Serverless, MSK, HTTP APIs) is skipped there with a message saying so. When no LocalStack answers, the
module fails: it never passes by skipping everything.

Without the variable a local runtime is started in-process (``emr-api`` launcher: the EMR Serverless API of
moto, no Spark), which is how these tests run in CI here.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.stack_outputs import read_stack_outputs
from assetflow.loader import load_catalog
from assetflow.usecases import views

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LANDING = "s3://assetflow-demo/landing/deliveries"
CURATED = "s3://assetflow-demo/curated/deliveries"
TARGET = os.environ.get("ASSETFLOW_E2E_TARGET", "local")
LOCALSTACK_LACKS = {
    "emr": "LocalStack's free edition has no EMR Serverless: runs are created but never start there",
    "kafka": "LocalStack's free edition has no MSK",
    "api": "LocalStack's free edition has no API Gateway HTTP APIs (v2)",
}


@dataclass
class Target:
    """Where the system runs: clients for its services and the names of its resources."""

    name: str
    client: Callable[[str], Any]
    table: str
    queue_urls: dict[str, str]
    api: dict[str, str] | None
    kafka: str | None

    def skip_unless_local(self, feature: str) -> None:
        """Skip what LocalStack's free edition cannot do, saying so."""
        if self.name == "localstack":
            pytest.skip(LOCALSTACK_LACKS[feature])

    @property
    def store(self) -> DynamoDbStore:
        """The views, read straight from DynamoDB."""
        return DynamoDbStore(self.client("dynamodb"), self.table)


def _localstack() -> Target:
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or "http://localhost:4566"
    try:
        with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=5) as answer:  # noqa: S310
            health = json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        pytest.fail(
            f"ASSETFLOW_E2E_TARGET=localstack but no LocalStack answers at {endpoint} ({exc}): start it "
            "(docker run -p 4566:4566 localstack/localstack) and deploy with `make test-localstack`",
            pytrace=False,
        )
    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    session = boto3.session.Session(
        aws_access_key_id="test",
        aws_secret_access_key="test",  # noqa: S106 - LocalStack's documented fake credentials
        region_name=region,
    )

    def client(service: str) -> Any:
        return session.client(service, endpoint_url=endpoint)  # type: ignore[call-overload]

    outputs = read_stack_outputs(client("cloudformation"), "dev")
    queue_urls = json.loads(outputs.outputs.get("QueueUrls", "{}"))
    print(f"LocalStack {health.get('version')} at {endpoint}: stack {outputs.stack_name}")
    return Target("localstack", client, outputs.table_name, queue_urls, None, None)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    if TARGET == "localstack":
        yield _localstack()
        return
    if TARGET != "local":
        pytest.fail(f"ASSETFLOW_E2E_TARGET must be local or localstack, not {TARGET!r}", pytrace=False)
    from assetflow_dev.runtime import LocalRuntime, RuntimeOptions

    work = tmp_path_factory.mktemp("endpoints")
    options = RuntimeOptions(
        pipelines=str(ROOT / "pipelines"),
        work_dir=work,
        launcher="emr-api",
        schedules=False,
        function_log=work / "logs" / "functions.log",
    )
    with LocalRuntime(options) as runtime:
        config = runtime.dev_config()
        yield Target(
            "local",
            runtime.client,
            config["table"],
            {name: queue["url"] for name, queue in config["queues"].items()},
            config["api"],
            config["endpoints"].get("kafka"),
        )


def _eventually(check: Callable[[], Any], timeout: float = 90.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.5)


def _delivery(target: Target, delivery_id: str) -> None:
    body = {"delivery_id": delivery_id, "supplier": "acme", "files": [f"{LANDING}/{delivery_id}/part-0.csv"]}
    target.client("sqs").send_message(QueueUrl=target.queue_urls["deliveries"], MessageBody=json.dumps(body))


def _events_of(target: Target, uri: str, delivery_id: str) -> list[dict[str, Any]]:
    items = target.store.list_events(uri, limit=100).items
    return [e for e in items if (e.get("extra") or {}).get("payload", {}).get("delivery_id") == delivery_id]


def _runs_for(target: Target, event_id: str) -> list[dict[str, Any]]:
    store = target.store
    runs = [store.get_run(r["run_id"]).to_json() for r in store.list_runs("deliveries_etl", limit=100).items]
    return [
        r for r in runs if any(e["id"] == event_id for e in r["triggering_asset_events"].get(LANDING, []))
    ]


def test_an_sqs_message_becomes_one_asset_event_and_one_run(target: Target) -> None:
    delivery_id = f"d-{uuid.uuid4().hex[:8]}"
    _delivery(target, delivery_id)

    (event,) = _eventually(lambda: _events_of(target, LANDING, delivery_id), what="the asset event")
    assert event["source"]["watcher"] == "deliveries"
    # The stream drives the evaluator: deliveries_etl (batch=False) makes one run of this event.
    (run,) = _eventually(lambda: _runs_for(target, event["id"]), what="the run")
    assert run["pipeline"] == "deliveries_etl"


def test_a_malformed_message_is_quarantined_not_lost(target: Target) -> None:
    marker = uuid.uuid4().hex
    target.client("sqs").send_message(
        QueueUrl=target.queue_urls["deliveries"], MessageBody=json.dumps({"delivery_id": marker})
    )

    def quarantined() -> list[dict[str, Any]]:
        return [q for q in target.store.list_quarantine(limit=200).items if marker in str(q.get("body"))]

    (item,) = _eventually(quarantined, what="the quarantined message")
    assert item["watcher"] == "deliveries" and "JSON Schema" in item["reason"]


def test_the_run_succeeds_and_its_outlet_becomes_an_event(target: Target) -> None:
    target.skip_unless_local("emr")
    delivery_id = f"d-{uuid.uuid4().hex[:8]}"
    _delivery(target, delivery_id)
    (event,) = _eventually(lambda: _events_of(target, LANDING, delivery_id), what="the asset event")

    def succeeded() -> list[dict[str, Any]]:
        return [r for r in _runs_for(target, event["id"]) if r["state"] == "success"]

    (run,) = _eventually(succeeded, what="the run's success")
    produced = views.show_run(target.store, run["run_id"], load_catalog(str(ROOT / "pipelines")))
    assert [(uri, len(events)) for uri, events in produced["produced_asset_events"].items()] == [(CURATED, 1)]


def test_kafka_records_become_asset_events(target: Target) -> None:
    target.skip_unless_local("kafka")
    from kafka import KafkaProducer

    sensor = f"s-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=target.kafka, acks="all")
    try:
        reading = {"sensor_id": sensor, "reading_time": "2026-11-21T10:00:00Z", "temperature_c": 21.5}
        producer.send("sensor-readings", key=sensor.encode(), value=json.dumps(reading).encode())
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)

    def found() -> list[dict[str, Any]]:
        items = target.store.list_events("x-iot://sensors/readings", limit=200).items
        return [e for e in items if (e.get("extra") or {}).get("payload", {}).get("sensor_id") == sensor]

    assert _eventually(found, what="the Kafka event")


def test_the_http_api_serves_the_views_and_its_openapi_document(target: Target) -> None:
    target.skip_unless_local("api")
    assert target.api is not None
    request = urllib.request.Request(  # noqa: S310 - the runtime's own loopback URL
        f"{target.api['url']}/openapi.json", headers={"Authorization": f"Bearer {target.api['token']}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        document = json.loads(answer.read())
    assert "/runs" in document["paths"] and "/catalog" in document["paths"]
