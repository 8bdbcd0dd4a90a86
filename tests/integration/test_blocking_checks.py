"""Blocking checks on DynamoDB Local: a held outlet event satisfies nothing until a later one passes or a release.

The job's outlet metadata (as the job helper writes it) comes from a fake ``RunOutputs``; the run states, the
evaluator, the store and the API handler (``POST /assets/events/{id}/release``) are the real ones.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.core.events import OUTLET_TOKEN_SCHEME, AssetEvent, Run
from assetflow.core.pipeline import Pipeline as PipelineType
from assetflow.functions import handle_api
from assetflow.usecases import views
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.job_state import RunStates
from assetflow_job.outlets import OutletEventAccessors

JOB = SparkJob("spark_jobs/job.py")
RAW, CLEAN = Asset("s3://lake/raw/orders"), Asset("s3://lake/clean/orders")
T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


class Launcher:
    def __init__(self) -> None:
        self.submitted: list[Run] = []

    def submit(self, run: Run, pipeline: PipelineType) -> str:
        self.submitted.append(run)
        return f"job-{run.run_id}"


class JobOutputs:
    """What the job helper wrote for each run: the outlet metadata document of docs/contracts.md."""

    def __init__(self) -> None:
        self.documents: dict[str, dict[str, Any]] = {}

    def write(self, run_id: str, passed: bool) -> None:
        outlets = OutletEventAccessors([CLEAN.uri], [])
        outlets[CLEAN.uri].extra = {"rows": 10 if passed else 0}
        outlets[CLEAN.uri].check("schema", passed=True)
        outlets[CLEAN.uri].check("not_empty", passed=passed, blocking=True)
        self.documents[run_id] = {"run_id": run_id, "events": outlets.events()}

    def outlet_metadata(
        self, pipeline: str, run_id: str, *, token_scheme: int = OUTLET_TOKEN_SCHEME
    ) -> dict[str, Any] | None:
        return self.documents.get(run_id)


class Context:
    function_name = "assetflow-api"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-api"
    aws_request_id = "req"


class World:
    def __init__(self, dynamodb_client: Any, tmp_path: Path) -> None:
        self.store = DynamoDbStore(dynamodb_client, f"checks-{uuid.uuid4().hex[:10]}")
        self.store.create_table()
        self.catalog = Catalog.build(
            [
                Pipeline("clean", schedule=RAW, job=JOB, outlets=[CLEAN]),
                Pipeline("report", schedule=CLEAN, job=JOB),
            ]
        )
        self.clock, self.launcher, self.outputs = Clock(), Launcher(), JobOutputs()
        self.evaluator = Evaluator(
            catalog=self.catalog, store=self.store, launcher=self.launcher, clock=self.clock
        )
        self.run_states = RunStates(
            catalog=self.catalog,
            store=self.store,
            outputs=self.outputs,
            evaluator=self.evaluator,
            clock=self.clock,
            releases=self.store,
        )
        path = tmp_path / "catalog.json"
        path.write_text(json.dumps(self.catalog.to_document()))
        self.deps = Dependencies(Settings(table_name=self.store.table, catalog_path=str(path)))
        self.deps.__dict__.update(store=self.store, evaluator=self.evaluator, catalog=self.catalog)

    def produce(self, *, passed: bool) -> AssetEvent:
        """A raw event, the clean run it makes, the job's checks, its success: the outlet event, evaluated."""
        raw = AssetEvent(RAW.uri, uuid.uuid4().hex, self.clock(), {}, {"type": "api"})
        self.store.put_event(raw, dedupe_key=f"t:{raw.id}")
        (run,) = self.evaluator.handle_batch([raw]).runs
        self.outputs.write(run.run_id, passed)
        change = self.run_states.handle_state_change(
            f"job-{run.run_id}",
            "SUCCESS",
            "app",
            job_run_name=run.run_id,  # EMR names the job after the run
        )
        (event,) = change.emitted
        evaluation = self.evaluator.handle_batch([event])
        self.skips = evaluation.skipped
        return event

    def report_runs(self) -> list[Run]:
        return [r for r in self.launcher.submitted if r.pipeline == "report"]

    def health(self) -> str:
        rows = views.list_assets(self.store, catalog=self.catalog, now=self.clock.now)["items"]
        return next(r["health"] for r in rows if r["uri"] == CLEAN.uri)

    def release(self, event_id: str) -> tuple[int, Any]:
        path = f"/assets/events/{urllib.parse.quote(event_id, safe='')}/release"
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": "",
            "headers": {"content-type": "application/json"},
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "local",
                "http": {"method": "POST", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
                "requestId": uuid.uuid4().hex,
                "routeKey": "$default",
                "stage": "$default",
                "authorizer": {"iam": {"userArn": "arn:aws:iam::123456789012:user/operator"}},
            },
            "isBase64Encoded": False,
        }
        response = handle_api.lambda_handler(event, Context(), deps=self.deps)  # type: ignore[arg-type]
        return response["statusCode"], json.loads(response["body"])


@pytest.fixture
def world(dynamodb_client: Any, tmp_path: Path) -> World:
    return World(dynamodb_client, tmp_path)


def test_a_failed_blocking_check_holds_the_event_until_an_operator_releases_it(world: World) -> None:
    # Given a run whose job reported not_empty failed (blocking) and schema passed (not blocking)
    held = world.produce(passed=False)
    # Then the event is recorded and visible with its checks, but queued for nobody
    assert held.to_json()["source"]["checks"] == [
        {"name": "schema", "passed": True, "blocking": False},
        {"name": "not_empty", "passed": False, "blocking": True},
    ]
    assert [e["id"] for e in world.store.list_events(CLEAN.uri).items] == [held.id]
    assert [(s.pipeline, s.reason) for s in world.skips] == [
        ("report", "held: blocking check(s) not_empty failed")
    ]
    assert world.store.list_queue("report") == [] and world.report_runs() == []
    assert world.health() == "check_failed"

    # When an operator releases it
    status, body = world.release(held.id)
    # Then it counts: the report runs on it, the release is recorded with who did it, the asset is fresh
    assert status == 200, body
    assert body["released"] and body["queued_for"] == ["report"] and len(body["runs"]) == 1
    assert body["event"]["source"]["released"]["by"] == "arn:aws:iam::123456789012:user/operator"
    (run,) = world.report_runs()
    assert [e.id for e in run.triggering_events] == [held.id]
    assert world.health() == "fresh"
    # A repeated release records nothing new and queues nothing twice
    status, again = world.release(held.id)
    assert status == 200 and not again["released"] and again["runs"] == []
    assert len(world.report_runs()) == 1


def test_a_later_event_that_passes_counts_and_the_held_one_never_does(world: World) -> None:
    held = world.produce(passed=False)
    assert world.report_runs() == [] and world.health() == "check_failed"
    # When the next run's data passes its checks
    good = world.produce(passed=True)
    # Then the report runs on the passing event alone, and the asset is healthy again
    (run,) = world.report_runs()
    assert [e.id for e in run.triggering_events] == [good.id]
    assert held.id not in {e.id for e in run.triggering_events}
    assert world.health() == "fresh"


def test_releasing_an_event_that_nothing_holds_or_that_does_not_exist_is_refused(world: World) -> None:
    good = world.produce(passed=True)
    status, body = world.release(good.id)
    assert (status, body["error"]) == (404, "not_found") and "held by a failed blocking check" in body[
        "detail"
    ]
    status, body = world.release("evt-nope")
    assert (status, body["error"]) == (404, "not_found")
    assert len(world.report_runs()) == 1  # nothing changed
