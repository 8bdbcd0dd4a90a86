"""Runs end to end on the emulators: submission to moto's EMR Serverless, state changes, outlets, held runs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

import assetflow_job
from assetflow import Asset, AssetAlias, AssetOrTimeSchedule, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.dynamodb.runs import pending_adds
from assetflow.adapters.emr import EmrServerlessLauncher, S3RunOutputs, client_token
from assetflow.composition import Dependencies, Settings
from assetflow.core.catalog import Catalog
from assetflow.core.errors import ConflictError
from assetflow.core.events import AssetEvent, Run, RunState
from assetflow.functions import handle_job_state, handle_schedule_tick
from assetflow.ports import SubmissionError
from assetflow.usecases import views
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.job_state import RunStates
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_CLIENT_KWARGS, LOCAL_REGION

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
ROLE = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/assetflow-job"
RAW = Asset("s3://lake/raw/orders")
CLEAN = Asset("s3://lake/clean/orders")
BY_REGION = AssetAlias("orders-by-region")

ETL = Pipeline(
    "orders_etl",
    schedule=[RAW],
    job=SparkJob("spark_jobs/etl.py", ("--mode", "full"), {"spark.executor.memory": "2g"}),
    outlets=[CLEAN, BY_REGION],
    inlets=[RAW],
    max_active_runs=1,
)
REGIONAL = Pipeline("regional_report", schedule=[BY_REGION], job=SparkJob("spark_jobs/regional.py"))


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Clock:
    """Time as an input: each reading is a millisecond after the last."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@dataclass
class World:
    store: DynamoDbStore
    s3: Any
    emr: Any
    bucket: str
    application_id: str
    launcher: EmrServerlessLauncher
    evaluator: Evaluator
    states: RunStates
    clock: Clock
    sent: list[dict[str, Any]]

    def event(self, asset: Asset, n: int, **extra: Any) -> AssetEvent:
        stored, _ = self.store.put_event(
            AssetEvent(
                asset=asset.uri,
                id=f"e{n:03d}",
                timestamp=self.clock(),
                extra=extra,
                source={"type": "api", "principal": "test"},
            )
        )
        return stored

    def runs(self, pipeline: str) -> list[dict[str, Any]]:
        return sorted(self.store.list_runs(pipeline).items, key=lambda r: r["created_at"])

    def job(self, job_run_id: str) -> dict[str, Any]:
        return self.emr.get_job_run(applicationId=self.application_id, jobRunId=job_run_id)["jobRun"]

    def state(self, job_run_id: str, emr_state: str) -> Any:
        return self.states.handle_state_change(job_run_id, emr_state, self.application_id)

    def produced(self, run_id: str, catalog: Catalog | None = None) -> list[dict[str, Any]]:
        """A run's outlet events as its view finds them (its pipeline's declared outlets from the catalog)."""
        return _produced(self.store, run_id, catalog or self.evaluator.catalog)


def _event_sk(event: dict[str, Any]) -> str:
    return f"EVENT#{event['timestamp']}#{event['id']}"


def _produced(store: DynamoDbStore, run_id: str, catalog: Catalog) -> list[dict[str, Any]]:
    shown = views.show_run(store, run_id, catalog)["produced_asset_events"]
    return sorted((e for events in shown.values() for e in events), key=lambda e: (e["timestamp"], e["id"]))


@pytest.fixture
def world(dynamodb_client: Any, s3_client: Any, emr_serverless_client: Any) -> Iterator[World]:
    store = DynamoDbStore(dynamodb_client, _name("assetflow"))
    store.create_table()
    bucket = _name("runs")
    s3_client.create_bucket(Bucket=bucket)
    application_id = emr_serverless_client.create_application(
        name=_name("assetflow"), releaseLabel="emr-7.9.0", type="SPARK", clientToken=_name("app")
    )["applicationId"]
    sent: list[dict[str, Any]] = []

    # GetJobRun does not return the clientToken: read it from the request as sent.
    def capture(params: dict[str, Any], **_: Any) -> None:
        sent.append(dict(params))

    emr_serverless_client.meta.events.register("provide-client-params.emr-serverless.StartJobRun", capture)
    launcher = EmrServerlessLauncher(
        emr_client=emr_serverless_client,
        s3_client=s3_client,
        application_id=application_id,
        execution_role_arn=ROLE,
        runs_bucket=bucket,
        code_prefix="code/",
        events_table=store.table,
        region=LOCAL_REGION,
        path_map={"s3://lake/": "/tmp/lake/"},
        inline_contexts=False,  # these tests read the context from S3 (small ones travel inline otherwise)
    )
    clock = Clock()
    evaluator = Evaluator(
        catalog=Catalog.build([ETL, REGIONAL]),
        store=store,
        launcher=launcher,
        clock=clock,
        sleep=lambda _: None,
    )
    states = RunStates(
        catalog=evaluator.catalog,
        store=store,
        outputs=S3RunOutputs(s3_client, bucket),
        evaluator=evaluator,
        clock=clock,
        job_lookup=launcher.run_id_of_job,
    )
    yield World(
        store,
        s3_client,
        emr_serverless_client,
        bucket,
        application_id,
        launcher,
        evaluator,
        states,
        clock,
        sent,
    )
    emr_serverless_client.meta.events.unregister("provide-client-params.emr-serverless.StartJobRun", capture)
    dynamodb_client.delete_table(TableName=store.table)


def _read_json(s3: Any, uri: str) -> dict[str, Any]:
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def _succeed_as_the_job_helper_would(
    world: World, run_id: str, extras: dict[str, Any], additions: list[tuple[str, dict[str, Any]]]
) -> None:
    job = world.job(world.store.get_run(run_id).job_run_id or "")
    arguments = job["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    with assetflow_job.run(arguments, s3_client=world.s3) as ctx:
        ctx.outlet_events[CLEAN.uri].extra = extras
        for uri, extra in additions:
            ctx.outlet_events[assetflow_job.AliasRef(BY_REGION.name)].add(uri, extra=extra)


# ---- submission ----------------------------------------------------------------------------------------


def test_a_new_run_writes_its_context_and_starts_its_job(world: World) -> None:
    first, second = world.event(RAW, 1, count=1), world.event(RAW, 2, count=2)

    world.evaluator.handle_event(second)
    world.evaluator.handle_event(first)  # arrives late; a run was already made from the second one

    (run,) = world.runs(ETL.id)
    job_run_id = run["job_run_id"]
    assert job_run_id and world.store.get_run(run["run_id"]).job_run_id == job_run_id
    job = world.job(job_run_id)
    context_uri = f"s3://{world.bucket}/runs/{ETL.id}/{run['run_id']}/context.json"
    driver = job["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == f"s3://{world.bucket}/code/spark_jobs/etl.py"
    assert driver["entryPointArguments"] == ["--mode", "full", "--assetflow-context", context_uri]
    assert driver["sparkSubmitParameters"] == f"--py-files s3://{world.bucket}/code/assetflow_jobs.zip"
    assert job["name"] == run["run_id"] and job["executionRole"] == ROLE
    assert job["tags"] == {"assetflow:run-id": run["run_id"], "assetflow:pipeline": ETL.id}
    assert job["configurationOverrides"]["applicationConfiguration"][0]["properties"] == {
        "spark.executor.memory": "2g"
    }
    assert [p["clientToken"] for p in world.sent] == [client_token(run["run_id"])]

    context = _read_json(world.s3, context_uri)
    assert context["run_id"] == run["run_id"] and context["pipeline"] == ETL.id
    assert [e["id"] for e in context["triggering_asset_events"][RAW.uri]] == ["e002"]
    assert context["triggering_asset_events"][RAW.uri][0]["extra"] == {"count": 2}
    assert context["outlet_metadata_uri"] == f"s3://{world.bucket}/runs/{ETL.id}/{run['run_id']}/outlets.json"
    assert context["events_table"] == {
        "name": world.store.table,
        "region": LOCAL_REGION,
        "endpoint_url": None,
    }
    assert context["path_map"] == {"s3://lake/": "/tmp/lake/"}
    loaded = assetflow_job.load_context(context_uri, s3_client=world.s3)
    assert loaded.run_id == run["run_id"] and [e.id for e in loaded.triggering_asset_events[RAW.uri]] == [
        "e002"
    ]


def test_a_repeated_submit_returns_the_same_job_run_and_moto_ignores_the_client_token(world: World) -> None:
    world.evaluator.handle_event(world.event(RAW, 1))
    run = world.store.get_run(world.runs(ETL.id)[0]["run_id"])

    again = world.launcher.submit(run, ETL)
    # A fresh launcher (another container) has no memory: moto 5.2.5 starts a second job for the same token
    # (AWS would answer with the first). The store keeps the run's first job and refuses the second.
    fresh = EmrServerlessLauncher(
        emr_client=world.emr,
        s3_client=world.s3,
        application_id=world.application_id,
        execution_role_arn=ROLE,
        runs_bucket=world.bucket,
        events_table=world.store.table,
    )
    stray = fresh.submit(run, ETL)

    assert again == run.job_run_id
    assert stray != run.job_run_id
    assert world.sent[0]["clientToken"] == world.sent[-1]["clientToken"] == client_token(run.run_id)
    with pytest.raises(ConflictError):
        world.store.mark_submitted(run.run_id, stray)
    stray_state = world.state(stray, "SUCCESS")
    assert stray_state.ignored and world.store.get_run(run.run_id).state is RunState.RUNNING


def test_a_throttled_start_job_run_leaves_the_run_queued_and_a_later_retry_submits_it(world: World) -> None:
    stub = Stubber(world.emr)  # moto cannot throttle; the stub answers before the client's retries apply
    stub.add_client_error("start_job_run", service_error_code="ThrottlingException", http_status_code=400)

    with stub, pytest.raises(SubmissionError, match="ThrottlingException"):
        world.evaluator.handle_event(world.event(RAW, 1))
    stub.assert_no_pending_responses()

    (run,) = world.runs(ETL.id)
    assert run["state"] == "queued" and run["job_run_id"] is None
    item = world.store._get(f"RUN#{run['run_id']}", "#RUN")
    assert "ThrottlingException" in item["submission_error"] and item["submission_attempts"] == 1

    world.evaluator.release(ETL.id)  # the next evaluation of the pipeline retries unsubmitted runs

    retried = world.store.get_run(run["run_id"])
    assert retried.job_run_id and world.job(retried.job_run_id)["name"] == run["run_id"]
    assert len(world.runs(ETL.id)) == 1


def _pending(world: World, pipeline: str) -> dict[str, set[str]]:
    """The pipeline's pending items: creation moment -> the run ids listed."""
    found = world.store._query(
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": f"PENDING#{pipeline}"}},
        ConsistentRead=True,
    )
    return {i["sk"]["S"]: set(i.get("runs", {}).get("SS", [])) for i in found}


def test_a_submitted_run_is_listed_as_active_and_nothing_stays_pending(world: World) -> None:
    world.evaluator.handle_event(world.event(RAW, 1))

    (run,) = world.runs(ETL.id)
    item = world.store._get(f"RUN#{run['run_id']}", "#RUN")
    assert item["gsi3pk"].startswith("ACTIVE#") and item["gsi3sk"] == item["gsi1sk"]
    assert _pending(world, ETL.id) == {}
    assert [r.run_id for r in world.store.submitted_active_runs()] == [run["run_id"]]


def _throttled(world: World, n: int) -> None:
    """An event whose run's StartJobRun is throttled: the run is made and left waiting for submission."""
    stub = Stubber(world.emr)
    stub.add_client_error("start_job_run", service_error_code="ThrottlingException", http_status_code=400)
    with stub, pytest.raises(SubmissionError):
        world.evaluator.handle_event(world.event(RAW, n))


def test_a_run_left_unsubmitted_stays_pending_until_a_sweep_submits_it(world: World) -> None:
    _throttled(world, 1)

    (run,) = world.runs(ETL.id)
    assert "gsi3pk" not in world.store._get(f"RUN#{run['run_id']}", "#RUN")
    assert list(_pending(world, ETL.id).values()) == [{run["run_id"]}]
    assert [r.run_id for r in world.store.unsubmitted_runs(ETL.id)] == [run["run_id"]]

    world.evaluator.release(ETL.id)

    assert world.store.get_run(run["run_id"]).job_run_id
    assert world.store.unsubmitted_runs(ETL.id) == [] and _pending(world, ETL.id) == {}


def test_a_run_whose_job_run_id_was_recorded_by_a_process_that_died_is_taken_off_by_the_sweep(
    world: World,
) -> None:
    def die(_: Any) -> None:
        raise SystemExit("killed between StartJobRun and recording its id")

    world.store.mark_submitted_many = die  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        world.evaluator.handle_event(world.event(RAW, 1))
    del world.store.mark_submitted_many
    (run,) = world.runs(ETL.id)
    (waiting,) = world.store.unsubmitted_runs(ETL.id)  # started, but its id never recorded: still waiting
    assert waiting.run_id == run["run_id"] and not waiting.job_run_id

    # Another process submits it again (the client token makes it the same job on AWS) and records the id;
    # it dies before taking the run off the pending item.
    job_run_id = world.launcher.submit(waiting, ETL)
    world.store.mark_submitted(run["run_id"], job_run_id)
    assert _pending(world, ETL.id) != {}

    assert world.store.unsubmitted_runs(ETL.id) == []
    assert _pending(world, ETL.id) == {}  # the sweep took the submitted run off


def test_pending_items_made_at_one_moment_keep_every_run_and_lose_only_the_submitted(world: World) -> None:
    made = [Run(f"r{n}", ETL.id, RunState.QUEUED, T0) for n in range(3)]
    for part in (made[:2], made[2:]):  # two transitions of the same pipeline at the same microsecond
        world.store._call("transact_write_items", TransactItems=pending_adds(world.store.table, part))
    assert list(_pending(world, ETL.id).values()) == [{"r0", "r1", "r2"}]

    world.store.forget_pending(made[:2])
    assert list(_pending(world, ETL.id).values()) == [{"r2"}]
    world.store.forget_pending(made[:2])  # repeated: nothing changes
    assert list(_pending(world, ETL.id).values()) == [{"r2"}]
    world.store.forget_pending(made[2:])
    assert _pending(world, ETL.id) == {}
    world.store.forget_pending(made)  # the item is gone: nothing is recreated
    assert _pending(world, ETL.id) == {}


def test_a_run_made_before_pending_items_is_still_found_and_moves_to_the_active_runs(world: World) -> None:
    world.evaluator.handle_event(world.event(RAW, 1))
    (run,) = world.runs(ETL.id)
    key = {"pk": {"S": f"RUN#{run['run_id']}"}, "sk": {"S": "#RUN"}}
    created = world.store._get(f"RUN#{run['run_id']}", "#RUN")["gsi1sk"]
    # As the store wrote runs before: an UNSUBMITTED#<pipeline> index key, no job run id, no pending item.
    world.store._call(
        "update_item",
        TableName=world.store.table,
        Key=key,
        UpdateExpression="SET gsi3pk = :u, gsi3sk = :c, #s = :q REMOVE job_run_id",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={
            ":u": {"S": f"UNSUBMITTED#{ETL.id}"},
            ":c": {"S": created},
            ":q": {"S": "queued"},
        },
    )

    (waiting,) = world.store.unsubmitted_runs(ETL.id)
    assert waiting.run_id == run["run_id"]
    world.store.mark_submitted(run["run_id"], "job-1")

    item = world.store._get(f"RUN#{run['run_id']}", "#RUN")
    assert item["gsi3pk"].startswith("ACTIVE#") and item["gsi3sk"] == created
    assert world.store.unsubmitted_runs(ETL.id) == []


def test_a_run_is_running_from_its_submission_and_a_run_ended_first_keeps_its_end(world: World) -> None:
    # Given a run whose submission was throttled, then cancelled while it waited
    _throttled(world, 1)
    (waiting,) = world.runs(ETL.id)
    assert waiting["state"] == "queued"
    world.store.set_run_state(waiting["run_id"], RunState.CANCELLED, now=world.clock())

    # When a late record of a job run id comes for it
    world.store.mark_submitted(waiting["run_id"], "job-late")

    # Then it is recorded, the run stays cancelled and is not listed among the submitted active runs (which the
    # sweep reads on every pass)
    late = world.store.get_run(waiting["run_id"])
    assert late.state is RunState.CANCELLED and late.job_run_id == "job-late"
    item = world.store._get(f"RUN#{waiting['run_id']}", "#RUN") or {}
    assert item and "gsi3pk" not in item
    assert waiting["run_id"] not in {r.run_id for r in world.store.submitted_active_runs()}

    # Given a run the evaluator submitted
    world.evaluator.handle_event(world.event(RAW, 2))
    (run,) = [r for r in world.runs(ETL.id) if r["run_id"] != waiting["run_id"]]

    # Then recording its job run id started it: the job's own RUNNING (which the stack's rule no longer
    # forwards) moves nothing
    assert run["state"] == "running" and run["job_run_id"]
    running = world.state(run["job_run_id"], "RUNNING")
    assert running.state is RunState.RUNNING and not running.moved


# ---- state changes -------------------------------------------------------------------------------------


def test_a_failed_job_updates_no_outlet(world: World) -> None:
    world.evaluator.handle_event(world.event(RAW, 1))
    (run,) = world.runs(ETL.id)
    world.state(run["job_run_id"], "RUNNING")
    # Even metadata left behind (a job that wrote it and then failed) must not become events.
    _succeed_as_the_job_helper_would(world, run["run_id"], {"rows": 1}, [("s3://lake/regions/eu", {})])

    change = world.state(run["job_run_id"], "FAILED")

    assert change.moved and change.state is RunState.FAILED and change.emitted == []
    assert world.produced(run["run_id"]) == []
    assert world.store.list_events(CLEAN.uri).items == []
    assert world.store.aliases_of("s3://lake/regions/eu") == []
    assert world.store.active_runs(ETL.id) == 0


def test_a_successful_job_emits_its_outlets_with_the_jobs_extras_and_alias_resolutions(world: World) -> None:
    world.evaluator.handle_event(world.event(RAW, 1))
    (run,) = world.runs(ETL.id)
    _succeed_as_the_job_helper_would(
        world,
        run["run_id"],
        {"rows": 42},
        [("s3://lake/regions/eu", {"region": "eu"}), ("s3://lake/regions/us", {"region": "us"})],
    )

    change = world.state(run["job_run_id"], "SUCCESS")

    assert change.moved and change.refused == []
    produced = world.produced(run["run_id"])
    assert sorted((e["asset"], json.dumps(e["extra"])) for e in produced) == [
        (CLEAN.uri, '{"rows": 42}'),
        ("s3://lake/regions/eu", '{"region": "eu"}'),
        ("s3://lake/regions/us", '{"region": "us"}'),
    ]
    source = {"type": "run", "pipeline": ETL.id, "run_id": run["run_id"]}
    assert {json.dumps(e["source"], sort_keys=True) for e in produced} == {
        json.dumps(source, sort_keys=True),
        json.dumps({**source, "aliases": [BY_REGION.name]}, sort_keys=True),
    }
    # Only the alias additions carry the run's index entry: the declared outlet's event is found from the
    # run's end (a write unit less a run), and the view without the catalog finds only the indexed ones.
    indexed = {
        e["asset"]: "gsi1pk" in (world.store._get(f"ASSET#{e['asset']}", _event_sk(e)) or {})
        for e in produced
    }
    assert indexed == {CLEAN.uri: False, "s3://lake/regions/eu": True, "s3://lake/regions/us": True}
    assert sorted(e["asset"] for e in world.store.events_produced_by(run["run_id"])) == [
        "s3://lake/regions/eu",
        "s3://lake/regions/us",
    ]
    assert world.store.aliases_of("s3://lake/regions/eu") == [BY_REGION.name]
    assert sorted(world.store.alias_assets(BY_REGION.name)) == [
        "s3://lake/regions/eu",
        "s3://lake/regions/us",
    ]

    # The outlet events flow into the evaluator again: the alias's consumer runs on them (one run each, as
    # every event satisfies an alias schedule on arrival).
    for event in change.emitted:
        world.evaluator.handle_event(event)
    triggered = [world.store.get_run(r["run_id"]).triggering_asset_events for r in world.runs(REGIONAL.id)]
    assert sorted(uri for t in triggered for uri in t) == ["s3://lake/regions/eu", "s3://lake/regions/us"]


def test_a_duplicate_success_and_a_late_running_change_nothing(world: World) -> None:
    world.evaluator.handle_event(world.event(RAW, 1))
    (run,) = world.runs(ETL.id)
    _succeed_as_the_job_helper_would(world, run["run_id"], {"rows": 1}, [("s3://lake/regions/eu", {})])
    world.state(run["job_run_id"], "SUCCESS")
    before = world.produced(run["run_id"])

    duplicate = world.state(run["job_run_id"], "SUCCESS")
    late = world.state(run["job_run_id"], "RUNNING")

    assert not duplicate.moved and duplicate.emitted == []
    assert not late.moved and late.emitted == [] and late.released is None
    assert world.produced(run["run_id"]) == before and len(before) == 2
    ended = world.store.get_run(run["run_id"])
    assert ended.state is RunState.SUCCESS
    assert world.store.active_runs(ETL.id) == 0
    # The outlet events are keyed on the run's recorded end (kept by the repeats, though the clock moved on),
    # so they need no dedupe records of their own
    assert ended.ended_at is not None and ended.ended_at < world.clock.now
    assert {e["timestamp"][:23] for e in before} == {ended.to_json()["ended_at"][:23]}
    dedupe = world.store._db.scan(
        TableName=world.store.table,
        FilterExpression="begins_with(pk, :d)",
        ExpressionAttributeValues={":d": {"S": "DEDUPE#outlet#"}},
    )
    assert dedupe["Items"] == []


def test_a_final_state_of_a_job_whose_id_was_never_recorded_is_recovered_from_its_tags(world: World) -> None:
    world.evaluator.launcher = _Crashing(world.launcher)  # StartJobRun succeeds, then the submitter dies
    with pytest.raises(SubmissionError):
        world.evaluator.handle_event(world.event(RAW, 1))
    (run,) = world.runs(ETL.id)
    assert run["job_run_id"] is None
    job_run_id = world.launcher.submit(world.store.get_run(run["run_id"]), ETL)  # the job it had started

    change = world.state(job_run_id, "SUCCESS")

    assert change.run_id == run["run_id"] and change.moved
    assert world.store.get_run(run["run_id"]).job_run_id == job_run_id


class _Crashing:
    def __init__(self, inner: EmrServerlessLauncher) -> None:
        self.inner = inner

    def submit(self, run: Any, pipeline: Pipeline) -> str:
        self.inner.submit(run, pipeline)
        raise RuntimeError("crashed before recording the job run id")


def test_a_run_held_by_max_active_runs_starts_when_the_previous_one_ends(world: World) -> None:
    world.evaluator.handle_event(world.event(RAW, 1))
    held = world.evaluator.handle_event(world.event(RAW, 2))
    (first,) = world.runs(ETL.id)
    assert held.runs == [] and [q["event"]["id"] for q in world.store.list_queue(ETL.id)] == ["e002"]

    world.state(first["job_run_id"], "RUNNING")
    change = world.state(first["job_run_id"], "FAILED")

    assert change.released is not None and len(change.released.runs) == 1
    first_run, second_run = world.runs(ETL.id)
    assert first_run["run_id"] == first["run_id"] and first_run["state"] == "failed"
    assert second_run["state"] == "running" and second_run["job_run_id"]  # submitted
    triggered = world.store.get_run(second_run["run_id"]).triggering_asset_events
    assert [e.id for e in triggered[RAW.uri]] == ["e002"]
    assert world.store.active_runs(ETL.id) == 1


# ---- the Lambda handlers, wired by the composition root ----------------------------------------------

NIGHTLY = Pipeline(
    "nightly",
    schedule=AssetOrTimeSchedule("0 6 * * *", [CLEAN]),
    job=SparkJob("spark_jobs/nightly.py"),
    outlets=[Asset("s3://lake/reports/nightly")],
)


def test_the_handlers_wired_by_the_composition_tick_record_states_and_emit(
    world: World,
    moto_server: Any,
    dynamodb_local: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the functions' composition root configured as the stack configures it, on the emulators
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(Catalog.build([ETL, REGIONAL, NIGHTLY]).to_document()))
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_EMR_SERVERLESS", moto_server.endpoint)
    settings = Settings(
        table_name=world.store.table,
        catalog_path=str(catalog),
        runs_bucket=world.bucket,
        emr_application_id=world.application_id,
        emr_job_role_arn=ROLE,
        region=LOCAL_REGION,
    )
    deps = Dependencies(settings, session=boto3.session.Session(**LOCAL_CLIENT_KWARGS))

    # When the Scheduler ticks, the job succeeds, and EventBridge delivers its state change twice
    tick = handle_schedule_tick.lambda_handler(
        {"pipeline": NIGHTLY.id, "scheduled_time": "2026-11-21T06:00:00Z"}, FakeLambdaContext(), deps=deps
    )
    (run_id,) = tick["runs"]
    job_run_id = world.store.get_run(run_id).job_run_id
    assert job_run_id is not None
    answers = [
        handle_job_state.lambda_handler(
            _job_state_event(world.application_id, job_run_id, "SUCCESS"), FakeLambdaContext(), deps=deps
        )
        for _ in range(2)
    ]
    other = handle_job_state.lambda_handler(
        _job_state_event("00someoneelse", job_run_id, "FAILED"), FakeLambdaContext(), deps=deps
    )

    # Then the run succeeded once and its declared outlet has one event (no metadata: an empty extra)
    assert [a["moved"] for a in answers] == [True, False]
    assert len(answers[0]["emitted"]) == 1 and answers[1]["emitted"] == []
    assert other["status"] == "ignored"
    assert world.store.get_run(run_id).state is RunState.SUCCESS
    (event,) = world.produced(run_id, deps.catalog)
    assert event["asset"] == "s3://lake/reports/nightly" and event["extra"] == {}


@dataclass
class FakeLambdaContext:
    function_name: str = "assetflow-run-state"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = (
        f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:assetflow-run-state"
    )
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"


def _job_state_event(application_id: str, job_run_id: str, state: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "EMR Serverless Job Run State Change",
        "source": "aws.emr-serverless",
        "account": LOCAL_ACCOUNT_ID,
        "time": "2026-11-21T06:05:00Z",
        "region": LOCAL_REGION,
        "resources": [],
        "detail": {
            "jobRunId": job_run_id,
            "applicationId": application_id,
            "arn": f"arn:aws:emr-serverless:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:/applications/{application_id}/jobruns/{job_run_id}",
            "releaseLabel": "emr-7.9.0",
            "state": state,
            "previousState": "RUNNING",
            "createdBy": f"arn:aws:sts::{LOCAL_ACCOUNT_ID}:assumed-role/assetflow/evaluator",
            "updatedAt": "2026-11-21T06:05:00.000000Z",
            "createdAt": "2026-11-21T06:00:01.000000Z",
        },
    }
