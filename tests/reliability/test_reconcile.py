"""The reconciliation sweep repairs stuck runs: the real function and store on DynamoDB Local, moto's EMR.

Each scenario leaves a run or a queue the way a give-up path leaves it (a job state change lost after its
retries, a StartJobRun refused for good, a release that never ran), then invokes the reconcile function as
the schedule does and checks the repair, its report and that a second sweep finds nothing more.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.emr import EmrServerlessLauncher
from assetflow.composition import Settings
from assetflow.core.events import AssetEvent, RunState
from assetflow.functions import handle_reconcile
from assetflow.ports import JobRunStatus
from assetflow.usecases import views
from assetflow.usecases.reconcile import SUBMIT_GRACE
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_REGION, client
from tests.reliability.model import FailingCalls, FaultPlan, LambdaContext, LocalDependencies

pytestmark = pytest.mark.integration

RAW, CLEAN = Asset("s3://lake/raw/orders"), Asset("s3://lake/clean/orders")
ETL = Pipeline(
    "orders_etl", schedule=[RAW], job=SparkJob("spark_jobs/etl.py"), outlets=[CLEAN], max_active_runs=1
)
REPORT = Pipeline("orders_report", schedule=[CLEAN], job=SparkJob("spark_jobs/report.py"))
#: Reacts when the last run that should have produced CLEAN failed (a.failed()).
ALERT = Pipeline("orders_alert", schedule=CLEAN.failed(), job=SparkJob("spark_jobs/alert.py"))
T0 = datetime(2026, 11, 21, 8, tzinfo=UTC)


class Clock:
    """Time as an input, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class World:
    deps: LocalDependencies
    emr: Any
    plan: FaultPlan
    clock: Clock
    application: str

    @property
    def store(self) -> DynamoDbStore:
        return self.deps.store

    def event(self, n: int, asset: Asset = RAW) -> AssetEvent:
        stored, _ = self.store.put_event(AssetEvent(asset.uri, f"e{n:03d}", T0 + timedelta(seconds=n)))
        return stored

    def runs(self, pipeline: str) -> list[dict[str, Any]]:
        return sorted(self.store.list_runs(pipeline).items, key=lambda r: r["created_at"])

    def sweep(self, **event: Any) -> dict[str, Any]:
        return handle_reconcile.lambda_handler(
            event, LambdaContext(function_name="assetflow-reconcile"), deps=self.deps
        )


@pytest.fixture
def world(
    dynamodb_local: Any, moto_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "assetflow")
    table, bucket = f"reconcile-{uuid.uuid4().hex[:10]}", f"runs-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(client("dynamodb", dynamodb_local.endpoint), table).create_table()
    client("s3", moto_server.endpoint).create_bucket(Bucket=bucket)
    emr = client("emr-serverless", moto_server.endpoint)
    application = emr.create_application(name=table, releaseLabel="emr-7.9.0", type="SPARK")["applicationId"]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(Catalog.build([ETL, REPORT, ALERT]).to_document()))
    plan = FaultPlan()
    settings = Settings(
        table_name=table,
        catalog_path=str(path),
        region=LOCAL_REGION,
        runs_bucket=bucket,
        emr_application_id=application,
        emr_job_role_arn=f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/jobs",
    )
    deps = LocalDependencies(
        settings,
        endpoints={
            "dynamodb": dynamodb_local.endpoint,
            "s3": moto_server.endpoint,
            "emr-serverless": moto_server.endpoint,
        },
        wrap={"emr-serverless": lambda real: FailingCalls(real, "start_job_run", plan)},
    )
    clock = Clock()
    deps.evaluator.clock = clock
    deps.evaluator.submitter.clock = clock
    deps.run_states.clock = clock
    deps.reconciler.clock = clock
    yield World(deps, emr, plan, clock, application)
    client("dynamodb", dynamodb_local.endpoint).delete_table(TableName=table)


def test_a_run_whose_success_was_lost_is_finished_with_its_outlets(world: World) -> None:
    # Given a run whose job succeeded (moto's job runs succeed at once) but whose SUCCESS never arrived: the
    # run-state function gave up after its retries
    world.deps.evaluator.handle_event(world.event(1))
    (run,) = world.runs(ETL.id)
    assert run["state"] == "running" and run["job_run_id"]  # from its submission
    assert isinstance(world.deps.launcher, EmrServerlessLauncher)

    # When the sweep runs, twice
    first, second = world.sweep(), world.sweep()

    # Then the run is finished from its job run's state, its outlet emitted (and the next pipeline ran)
    assert (first["finished"], first["repaired"], first["errors"]) == (1, 1, [])
    assert first["runs"]["finished"] == [run["run_id"]]
    assert world.store.get_run(run["run_id"]).state is RunState.SUCCESS
    produced = views.show_run(world.store, run["run_id"], world.deps.catalog)["produced_asset_events"]
    assert list(produced) == [CLEAN.uri] and len(produced[CLEAN.uri]) == 1
    assert (second["repaired"], second["checked"]) == (0, 0)


def test_a_refused_submission_fails_its_run_with_the_reason_and_frees_the_slot(world: World) -> None:
    # Given StartJobRun refused (a bad configuration) for the first run four times (at its creation, at the
    # pipeline's next evaluation, at the early sweep's evaluation, at the late sweep), then working
    world.plan.add(*["ValidationException"] * 4)
    world.deps.evaluator.handle_event(world.event(1))
    (refused,) = world.runs(ETL.id)
    # ...which holds the pipeline's only slot: the next event waits behind it, for ever until now
    world.clock.now += timedelta(seconds=1)
    world.deps.evaluator.handle_event(world.event(2))
    assert refused["state"] == "queued" and refused["job_run_id"] is None
    assert [q["event"]["id"] for q in world.store.list_queue(ETL.id)] == ["e002"]

    # When the sweep runs within the grace (the evaluator's own retries come first), then after it
    early = world.sweep()
    world.clock.now += SUBMIT_GRACE + timedelta(seconds=1)
    late = world.sweep()

    # Then the run failed with the refusal's reason (in the views), and the waiting event got its run
    assert early["repaired"] == 0
    assert (late["failed_refused"], late["released"], late["errors"]) == (1, 1, [])
    shown = views.show_run(world.store, refused["run_id"])
    assert shown["state"] == "failed"
    assert (
        "ValidationException" in shown["submission_error"]
        and "refused, run failed" in shown["submission_error"]
    )
    # ...and the pipeline that reacts to CLEAN's producer failing ran on the failure
    (alert,) = world.runs(ALERT.id)
    failure = views.show_run(world.store, alert["run_id"])["triggering_asset_events"][CLEAN.uri][0]
    assert failure["source"]["type"] == "failure" and failure["source"]["run_id"] == refused["run_id"]
    runs = world.runs(ETL.id)
    assert [r["state"] for r in runs] == ["failed", "running"] and runs[1]["job_run_id"]
    assert world.store.active_runs(ETL.id) == 1
    assert world.plan.injected == {"ValidationException": 4}


def test_a_queue_left_satisfied_with_a_free_slot_gets_its_run(world: World) -> None:
    # Given an event held behind a run, and the run's end recorded without its release (a crash between)
    world.deps.evaluator.handle_event(world.event(1))
    (first,) = world.runs(ETL.id)
    world.clock.now += timedelta(seconds=1)
    world.deps.evaluator.handle_event(world.event(2))
    world.store.set_run_state(first["run_id"], RunState.FAILED)
    assert world.store.active_runs(ETL.id) == 0 and len(world.store.list_queue(ETL.id)) == 1

    # When the sweep runs (a dry run first)
    dry = world.sweep(dry_run=True)
    assert dry["runs"] == {"would_release": [ETL.id]} and len(world.runs(ETL.id)) == 1
    report = world.sweep()

    # Then the held event has its run
    assert report["released"] == 1
    assert [r["state"] for r in world.runs(ETL.id)] == ["failed", "running"]
    assert world.store.list_queue(ETL.id) == []


def test_a_lost_running_is_recorded_and_an_unknown_job_run_reported(world: World) -> None:
    world.deps.evaluator.handle_event(world.event(1))
    (run,) = world.runs(ETL.id)
    # A submitted run still queued, as runs were kept before their submission started them (their job's
    # RUNNING did), whose RUNNING was lost
    world.store._call(
        "update_item",
        TableName=world.store.table,
        Key={"pk": {"S": f"RUN#{run['run_id']}"}, "sk": {"S": "#RUN"}},
        UpdateExpression="SET #s = :q",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":q": {"S": "queued"}},
    )
    states = {run["job_run_id"]: JobRunStatus("RUNNING")}

    class JobRuns:
        def job_run_status(self, job_run_id: str) -> JobRunStatus | None:
            return states.get(job_run_id)

    world.deps.reconciler.job_runs = JobRuns()
    started = world.sweep()
    states.clear()
    unknown = world.sweep()

    assert (started["started"], world.store.get_run(run["run_id"]).state) == (1, RunState.RUNNING)
    assert (unknown["unknown_job_runs"], unknown["repaired"]) == (1, 0)


def test_a_dry_run_must_be_a_boolean() -> None:
    with pytest.raises(ValueError, match="dry_run"):
        handle_reconcile.lambda_handler({"dry_run": "yes"}, LambdaContext(), deps=None)  # type: ignore[arg-type]
