"""Run states and EMR submission without AWS: state mapping, outlet planning, ids, tokens, the handlers."""

from __future__ import annotations

import base64
import io
import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

import assetflow_job
from assetflow import Asset, AssetAlias, AssetOrTimeSchedule, Pipeline, SparkJob
from assetflow.adapters.emr import (
    CLIENT_TOKEN_MAX,
    EmrServerlessLauncher,
    OutletMetadataError,
    S3RunOutputs,
    SubmissionRejectedError,
    client_token,
    read_outlet_metadata,
    run_context_document,
)
from assetflow.core.catalog import Catalog
from assetflow.core.errors import NotFoundError
from assetflow.core.events import EMR_JOB_STATES, AssetEvent, Run, RunState, can_transition
from assetflow.functions import handle_job_state, handle_schedule_tick
from assetflow.ports import SubmissionError
from assetflow.usecases.evaluate import Evaluation
from assetflow.usecases.job_state import PlannedEvent, RunStates, outlet_event_id, plan_outlet_events
from assetflow_dev import LOCAL_CLIENT_KWARGS

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
RAW = Asset("s3://lake/raw/orders")
CLEAN = Asset("s3://lake/clean/orders")
REPORT = Asset("s3://lake/reports/daily")
BY_REGION = AssetAlias("orders-by-region")
AUDIT = AssetAlias("audit")
BUCKET = "runs-bucket"
APP = "00app0000000001"
ROLE = "arn:aws:iam::123456789012:role/assetflow-job"

ETL = Pipeline(
    "orders_etl",
    schedule=[RAW],
    job=SparkJob("spark_jobs/etl.py", ("--day", "2026-11-21"), {"spark.executor.memory": "2g"}),
    outlets=[CLEAN, REPORT, BY_REGION, AUDIT],
    inlets=[RAW],
)
CATALOG = Catalog.build([ETL])


def raw_event(n: int, *, at: datetime | None = None) -> AssetEvent:
    return AssetEvent(
        asset=RAW.uri,
        id=f"e{n:03d}",
        timestamp=at or T0 + timedelta(seconds=n),
        extra={"payload": {"n": n}},
        source={"type": "api", "principal": "test"},
    )


def a_run(state: RunState = RunState.QUEUED, *, partition_key: str | None = None) -> Run:
    events = (raw_event(2), raw_event(1), raw_event(3, at=T0 + timedelta(seconds=1)))
    return Run(
        run_id="run-0123456789abcdef01234567",
        pipeline=ETL.id,
        state=state,
        created_at=T0 + timedelta(minutes=1),
        partition_key=partition_key,
        triggering_asset_events={RAW.uri: events},
    )


def metadata(run_id: str, *events: dict[str, Any]) -> dict[str, Any]:
    return {"format": "assetflow.outlet-metadata", "version": 1, "run_id": run_id, "events": list(events)}


# ---- fakes -------------------------------------------------------------------------------------------


@dataclass
class FakeStore:
    """The parts of DynamoDbStore that RunStates uses, with the same idempotency rules."""

    runs: dict[str, Run] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)
    events: dict[str, AssetEvent] = field(default_factory=dict)
    dedupe: dict[str, AssetEvent] = field(default_factory=dict)
    resolutions: set[tuple[str, str]] = field(default_factory=set)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def mark_submitted(self, run_id: str, job_run_id: str) -> None:
        run = self.runs[run_id]
        state = RunState.RUNNING if run.state is RunState.QUEUED else run.state  # running from its submission
        self.runs[run_id] = replace(run, job_run_id=job_run_id, state=state)
        self.jobs[job_run_id] = run_id

    def set_run_state(
        self, run_id: str, new: RunState, *, job_run_id: str | None = None, now: datetime | None = None
    ) -> tuple[Run, bool]:
        if run_id not in self.runs:
            raise NotFoundError(run_id)
        run = self.runs[run_id]
        if not can_transition(run.state, new) or (job_run_id and run.job_run_id not in (None, job_run_id)):
            return run, False
        ended = run.ended_at or (now if not new.active else None)
        self.runs[run_id] = replace(run, state=new, ended_at=ended)
        return self.runs[run_id], True

    def add_alias_resolution(self, alias: str, uri: str, *, now: datetime) -> bool:
        self.calls.append(("alias", f"{alias}->{uri}"))
        if (alias, uri) in self.resolutions:
            return False
        self.resolutions.add((alias, uri))
        return True

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ):
        self.calls.append(("event", event.asset))
        # Without a dedupe key, the event's own item (asset, timestamp, id) is its dedupe, as in the table.
        dedupe_key = dedupe_key or f"item:{event.asset}:{event.timestamp.isoformat()}:{event.id}"
        if dedupe_key in self.dedupe:
            return self.dedupe[dedupe_key], False
        self.dedupe[dedupe_key] = event
        self.events[event.id] = event
        return event, True


@dataclass
class FakeBus:
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        self.published.append((detail_type, dict(detail)))


@dataclass
class FakeEvaluator:
    bus: FakeBus = field(default_factory=FakeBus)
    released: list[str] = field(default_factory=list)
    ticks: list[tuple[str, datetime]] = field(default_factory=list)

    def release(self, pipeline_id: str) -> Evaluation:
        self.released.append(pipeline_id)
        return Evaluation()

    def handle_tick(self, pipeline_id: str, scheduled_time: datetime) -> Evaluation:
        self.ticks.append((pipeline_id, scheduled_time))
        return Evaluation()


class FakeS3:
    def __init__(self, objects: dict[str, Any] | None = None) -> None:
        self.objects = {
            k: v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in (objects or {}).items()
        }
        self.reads = 0

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803  (boto3's names)
        self.reads += 1
        try:
            return {"Body": io.BytesIO(self.objects[f"s3://{Bucket}/{Key}"])}
        except KeyError:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "no"}}, "GetObject") from None


def outlets_uri(run: Run) -> str:
    return f"s3://{BUCKET}/runs/{run.pipeline}/{run.run_id}/outlets.json"


def service(run: Run, *, objects: dict[str, Any] | None = None, job_lookup: Any = None):
    store = FakeStore(runs={run.run_id: replace(run, job_run_id="job1")}, jobs={"job1": run.run_id})
    evaluator = FakeEvaluator()
    states = RunStates(
        catalog=CATALOG,
        store=store,  # type: ignore[arg-type]
        outputs=S3RunOutputs(FakeS3(objects), BUCKET),
        evaluator=evaluator,  # type: ignore[arg-type]
        clock=lambda: T0 + timedelta(hours=1),
        # The jobs' tags (EMR's answer to GetJobRun) name their runs; here, the runs' recorded job run ids.
        job_lookup=job_lookup or store.jobs.get,
    )
    return states, store, evaluator


# ---- state mapping -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("emr_state", "expected"),
    [
        ("SUBMITTED", RunState.QUEUED),
        ("PENDING", RunState.QUEUED),
        ("SCHEDULED", RunState.QUEUED),
        ("QUEUED", RunState.QUEUED),
        ("RUNNING", RunState.RUNNING),
        ("SUCCESS", RunState.SUCCESS),
        ("FAILED", RunState.FAILED),
        ("CANCELLED", RunState.CANCELLED),
    ],
)
def test_each_emr_job_state_maps_to_a_run_state(emr_state: str, expected: RunState) -> None:
    assert EMR_JOB_STATES[emr_state] is expected
    states, store, _ = service(a_run())

    change = states.handle_state_change("job1", emr_state, APP)

    assert change.state is expected
    if expected is RunState.QUEUED:
        # Every run is created queued and never moves back: nothing to read, nothing to write.
        assert change.ignored and not change.moved and change.run_id is None
    else:
        assert store.runs[change.run_id].state is expected  # type: ignore[index]


@pytest.mark.parametrize("emr_state", ["CANCELLING", "EXPLODED", ""])
def test_cancelling_and_unknown_states_change_nothing(emr_state: str) -> None:
    states, store, evaluator = service(a_run(RunState.RUNNING))

    change = states.handle_state_change("job1", emr_state, APP)

    assert change.ignored and not change.moved
    assert next(iter(store.runs.values())).state is RunState.RUNNING
    assert evaluator.released == []


def test_a_job_assetflow_did_not_start_is_ignored() -> None:
    states, store, evaluator = service(a_run())

    change = states.handle_state_change("someone-elses-job", "SUCCESS", APP)

    assert change.ignored == "job run not started by assetflow"
    assert store.events == {} and evaluator.released == []


def test_a_final_state_before_the_job_run_id_was_recorded_is_recovered_from_the_jobs_tags() -> None:
    run = a_run()
    states, store, _ = service(run, job_lookup={"job2": run.run_id}.get)
    store.runs[run.run_id] = replace(run, job_run_id=None)
    store.jobs.clear()

    final = states.handle_state_change("job2", "FAILED", APP)

    assert final.state is RunState.FAILED
    assert store.jobs == {"job2": run.run_id}


def test_an_early_running_state_is_recorded_through_the_jobs_tags() -> None:
    # The job reports RUNNING before the submitter recorded its job run id: the run still moves.
    run = a_run()
    states, store, _ = service(run, job_lookup={"job2": run.run_id}.get)
    store.runs[run.run_id] = replace(run, job_run_id=None)
    store.jobs.clear()

    running = states.handle_state_change("job2", "RUNNING", APP)
    final = states.handle_state_change("job2", "SUCCESS", APP)

    # (recording the job run id found by the tags starts the run: it is running from its submission)
    assert running.state is RunState.RUNNING and running.run_id == run.run_id
    assert final.state is RunState.SUCCESS and final.moved
    assert store.jobs == {"job2": run.run_id}


# ---- outlet planning ---------------------------------------------------------------------------------


def test_every_declared_asset_outlet_gets_an_event_with_the_jobs_extra_or_an_empty_one() -> None:
    plan = plan_outlet_events(ETL, metadata("r", {"asset": CLEAN.uri, "extra": {"rows": 10}, "alias": None}))

    assert plan.events == (PlannedEvent(CLEAN.uri, {"rows": 10}), PlannedEvent(REPORT.uri, {}))
    assert plan.refused == ()


def test_without_metadata_the_declared_outlets_get_empty_extras() -> None:
    plan = plan_outlet_events(ETL, None)

    assert [(e.asset, dict(e.extra), e.kind) for e in plan.events] == [
        (CLEAN.uri, {}, "outlet"),
        (REPORT.uri, {}, "outlet"),
    ]


def test_an_outlet_uri_is_matched_after_normalisation() -> None:
    plan = plan_outlet_events(ETL, metadata("r", {"asset": "S3://lake/clean/orders/", "extra": {"k": 1}}))

    assert plan.events[0] == PlannedEvent(CLEAN.uri, {"k": 1})


def test_the_same_asset_and_extra_added_to_several_aliases_is_one_event() -> None:
    plan = plan_outlet_events(
        ETL,
        metadata(
            "r",
            {"asset": "s3://lake/regions/eu", "extra": {"r": "eu"}, "alias": BY_REGION.name},
            {"asset": "s3://lake/regions/eu", "extra": {"r": "eu"}, "alias": AUDIT.name},
            {"asset": "s3://lake/regions/eu", "extra": {"r": "eu", "v": 2}, "alias": BY_REGION.name},
            {
                "asset": "s3://lake/regions/us",
                "extra": {},
                "alias": BY_REGION.name,
                "aliases": [BY_REGION.name, AUDIT.name],
            },
        ),
    )

    additions = [e for e in plan.events if e.kind == "alias"]
    assert additions == [
        PlannedEvent("s3://lake/regions/eu", {"r": "eu"}, (BY_REGION.name, AUDIT.name)),
        PlannedEvent("s3://lake/regions/eu", {"r": "eu", "v": 2}, (BY_REGION.name,)),
        PlannedEvent("s3://lake/regions/us", {}, (BY_REGION.name, AUDIT.name)),
    ]


def test_extra_key_order_does_not_split_an_alias_addition() -> None:
    plan = plan_outlet_events(
        ETL,
        metadata(
            "r",
            {"asset": "s3://lake/x", "extra": {"a": 1, "b": 2}, "alias": BY_REGION.name},
            {"asset": "s3://lake/x", "extra": {"b": 2, "a": 1}, "alias": AUDIT.name},
        ),
    )

    assert [e.aliases for e in plan.events if e.kind == "alias"] == [(BY_REGION.name, AUDIT.name)]


def test_undeclared_outlets_aliases_and_invalid_entries_are_refused() -> None:
    plan = plan_outlet_events(
        ETL,
        metadata(
            "r",
            {"asset": "s3://lake/not/declared", "extra": {}, "alias": None},
            {"asset": "s3://lake/x", "extra": {}, "alias": "not-an-outlet"},
            {"asset": "airflow://reserved", "extra": {}, "alias": None},
            {"asset": CLEAN.uri, "extra": ["not", "an", "object"]},
            "not an entry",
        ),
    )

    assert len(plan.refused) == 5
    assert [e.asset for e in plan.events] == [CLEAN.uri, REPORT.uri]
    assert "not a declared asset outlet" in plan.refused[0]
    assert "not declared alias outlets" in plan.refused[1]


def test_outlet_event_ids_are_deterministic_and_tell_outlets_from_alias_additions() -> None:
    one = outlet_event_id("run-1", "outlet", CLEAN.uri, {"a": 1, "b": [1, 2]})

    assert one == outlet_event_id("run-1", "outlet", CLEAN.uri, {"b": [1, 2], "a": 1})
    assert one != outlet_event_id("run-1", "alias", CLEAN.uri, {"a": 1, "b": [1, 2]})
    assert one != outlet_event_id("run-2", "outlet", CLEAN.uri, {"a": 1, "b": [1, 2]})
    assert one != outlet_event_id("run-1", "outlet", CLEAN.uri, {"a": 2, "b": [1, 2]})


# ---- RunStates over fakes ----------------------------------------------------------------------------


def test_success_emits_the_outlets_with_the_runs_source_and_partition_key() -> None:
    run = a_run(partition_key="2026-11-21")
    doc = metadata(
        run.run_id,
        {"asset": CLEAN.uri, "extra": {"rows": 10}, "alias": None},
        {
            "asset": "s3://lake/regions/eu",
            "extra": {"r": "eu"},
            "alias": BY_REGION.name,
            "aliases": [BY_REGION.name, AUDIT.name],
        },
    )
    states, _, evaluator = service(run, objects={outlets_uri(run): doc})

    change = states.handle_state_change("job1", "SUCCESS", APP)

    assert change.moved and change.state is RunState.SUCCESS
    by_asset = {e.asset: e for e in change.emitted}
    assert set(by_asset) == {CLEAN.uri, REPORT.uri, "s3://lake/regions/eu"}
    assert dict(by_asset[CLEAN.uri].extra) == {"rows": 10}
    assert dict(by_asset[REPORT.uri].extra) == {}
    base = {"type": "run", "pipeline": ETL.id, "run_id": run.run_id}
    assert dict(by_asset[CLEAN.uri].source) == base
    assert json.loads(json.dumps(by_asset["s3://lake/regions/eu"].to_json()["source"])) == {
        **base,
        "aliases": [BY_REGION.name, AUDIT.name],
    }
    assert {e.partition_key for e in change.emitted} == {"2026-11-21"}
    assert [e.sort_key for e in change.emitted] == sorted(e.sort_key for e in change.emitted)
    assert evaluator.released == []  # no max_active_runs: nothing waits for a slot
    eu = {"name": "s3://lake/regions/eu", "uri": "s3://lake/regions/eu", "group": "asset", "extra": {}}
    assert evaluator.bus.published == [
        (
            "AssetAliasResolved",
            {
                "kind": "asset_alias_resolved",
                "asset_alias": {"name": alias.name, "group": alias.group},
                "asset": eu,
                "run_id": run.run_id,
            },
        )
        for alias in (BY_REGION, AUDIT)
    ]


def test_alias_resolutions_are_recorded_before_the_alias_event_is_put() -> None:
    run = a_run()
    doc = metadata(run.run_id, {"asset": "s3://lake/x", "extra": {}, "alias": BY_REGION.name})
    states, store, _ = service(run, objects={outlets_uri(run): doc})

    states.handle_state_change("job1", "SUCCESS", APP)

    assert store.calls.index(("alias", f"{BY_REGION.name}->s3://lake/x")) < store.calls.index(
        ("event", "s3://lake/x")
    )


def test_a_redelivered_success_emits_nothing_twice_and_publishes_no_second_alias_created() -> None:
    run = a_run()
    doc = metadata(run.run_id, {"asset": "s3://lake/x", "extra": {}, "alias": BY_REGION.name})
    states, store, evaluator = service(run, objects={outlets_uri(run): doc})

    first = states.handle_state_change("job1", "SUCCESS", APP)
    again = states.handle_state_change("job1", "SUCCESS", APP)

    assert len(first.emitted) == 3 and again.emitted == [] and not again.moved
    assert len(store.events) == 3
    assert len(evaluator.bus.published) == 1


def test_a_late_running_after_success_changes_nothing_and_releases_nothing() -> None:
    run = a_run()
    states, store, evaluator = service(run)
    states.handle_state_change("job1", "SUCCESS", APP)
    released, emitted = list(evaluator.released), dict(store.events)

    late = states.handle_state_change("job1", "RUNNING", APP)

    assert not late.moved and late.state is RunState.SUCCESS and late.emitted == []
    assert evaluator.released == released and store.events == emitted


def test_a_pipeline_without_outlets_succeeds_without_reading_outlet_metadata() -> None:
    # Given a pipeline that declares no outlet (its job wrote metadata all the same)
    bare = Pipeline("orders_etl", schedule=[RAW], job=SparkJob("spark_jobs/etl.py"), inlets=[RAW])
    run = a_run(RunState.RUNNING)
    doc = metadata(run.run_id, {"asset": CLEAN.uri, "extra": {"rows": 1}, "alias": None})
    states, store, _ = service(run, objects={outlets_uri(run): doc})
    states.catalog = Catalog.build([bare])

    # When it succeeds
    change = states.handle_state_change("job1", "SUCCESS", APP)

    # Then nothing could be emitted, so nothing was read
    assert change.moved and change.state is RunState.SUCCESS
    assert change.emitted == [] and change.refused == [] and store.events == {}
    assert states.outputs._s3.reads == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("emr_state", ["FAILED", "CANCELLED"])
def test_a_failed_or_cancelled_run_emits_nothing_but_frees_its_slot(emr_state: str) -> None:
    run = a_run(RunState.RUNNING)
    doc = metadata(run.run_id, {"asset": CLEAN.uri, "extra": {"rows": 1}, "alias": None})
    states, store, evaluator = service(run, objects={outlets_uri(run): doc})

    change = states.handle_state_change("job1", emr_state, APP)

    assert change.moved and change.emitted == [] and store.events == {}
    assert states.outputs._s3.reads == 0  # type: ignore[attr-defined]
    assert evaluator.released == []  # no max_active_runs: nothing waits for a slot


@pytest.mark.parametrize("emr_state", ["SUCCESS", "FAILED", "CANCELLED"])
def test_the_end_of_a_run_releases_a_pipeline_held_at_its_max_active_runs(emr_state: str) -> None:
    held = Pipeline("held", schedule=[RAW], job=SparkJob("spark_jobs/etl.py"), max_active_runs=1)
    run = replace(a_run(RunState.RUNNING), pipeline=held.id)
    states, _, evaluator = service(run)
    states.catalog = Catalog.build([ETL, held])

    change = states.handle_state_change("job1", emr_state, APP)

    assert change.moved and evaluator.released == [held.id]


def test_a_job_named_after_its_run_is_found_without_a_lookup() -> None:
    run = a_run()
    states, store, _ = service(run)
    store.jobs.clear()  # no way back from the job run id: the name must do

    change = states.handle_state_change("job1", "RUNNING", APP, job_run_name=run.run_id)

    assert change.moved and change.run_id == run.run_id and store.runs[run.run_id].state is RunState.RUNNING


def test_a_job_named_after_a_run_that_is_not_its_own_moves_nothing() -> None:
    run = a_run()
    states, store, _ = service(run)  # the run's job is job1

    change = states.handle_state_change("stray", "SUCCESS", APP, job_run_name=run.run_id)

    assert change.ignored == "job run not started by assetflow" and not change.moved
    assert store.runs[run.run_id].state is RunState.QUEUED


def test_metadata_of_another_run_or_version_is_refused_and_the_declared_outlets_still_emit() -> None:
    run = a_run()
    wrong_run = metadata("run-other", {"asset": CLEAN.uri, "extra": {"rows": 1}, "alias": None})
    states, _, _ = service(run, objects={outlets_uri(run): wrong_run})

    change = states.handle_state_change("job1", "SUCCESS", APP)

    assert change.refused and "run-other" in change.refused[0]
    assert {(e.asset, json.dumps(dict(e.extra))) for e in change.emitted} == {
        (CLEAN.uri, "{}"),
        (REPORT.uri, "{}"),
    }


def test_handle_tick_delegates_to_the_evaluator() -> None:
    states, _, evaluator = service(a_run())

    states.handle_tick(ETL.id, T0)

    assert evaluator.ticks == [(ETL.id, T0)]


# ---- outlet metadata reading -------------------------------------------------------------------------


def test_read_outlet_metadata_returns_none_when_the_job_wrote_none() -> None:
    assert read_outlet_metadata(FakeS3(), "s3://b/runs/p/r/outlets.json") is None


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        json.dumps({"format": "something-else", "version": 1, "events": []}).encode(),
        json.dumps({"format": "assetflow.outlet-metadata", "version": 2, "events": []}).encode(),
        json.dumps({"format": "assetflow.outlet-metadata", "version": 1, "events": {}}).encode(),
    ],
)
def test_read_outlet_metadata_refuses_documents_it_does_not_understand(body: bytes) -> None:
    with pytest.raises(OutletMetadataError):
        read_outlet_metadata(FakeS3({"s3://b/k.json": body}), "s3://b/k.json")


# ---- the launcher's request --------------------------------------------------------------------------


def launcher(emr: Any = None, s3: Any = None, **kwargs: Any) -> EmrServerlessLauncher:
    return EmrServerlessLauncher(
        emr_client=emr,
        s3_client=s3,
        application_id=APP,
        execution_role_arn=ROLE,
        runs_bucket=BUCKET,
        code_prefix=kwargs.pop("code_prefix", "code/"),
        events_table="events",
        region="eu-west-1",
        **kwargs,
    )


@pytest.mark.parametrize("run_id", ["run-0123456789abcdef01234567", "r", "x" * 500, "run id/with spaces"])
def test_the_client_token_is_deterministic_and_fits_emrs_limits(run_id: str) -> None:
    token = client_token(run_id)

    assert token == client_token(run_id)
    assert 1 <= len(token) <= CLIENT_TOKEN_MAX
    assert re.fullmatch(r"[A-Za-z0-9._-]+", token)
    assert token != client_token(run_id + "2")


def test_the_job_request_names_the_run_resolves_code_and_appends_the_context_argument() -> None:
    run = a_run()

    request = launcher(inline_contexts=False).job_request(run, ETL)

    context = f"s3://{BUCKET}/runs/{ETL.id}/{run.run_id}/context.json"
    assert request["clientToken"] == client_token(run.run_id)
    assert request["name"] == run.run_id
    assert request["tags"] == {"assetflow:run-id": run.run_id, "assetflow:pipeline": ETL.id}
    assert request["executionRoleArn"] == ROLE and request["applicationId"] == APP
    driver = request["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == f"s3://{BUCKET}/code/spark_jobs/etl.py"
    assert driver["entryPointArguments"] == ["--day", "2026-11-21", "--assetflow-context", context]
    assert driver["sparkSubmitParameters"] == f"--py-files s3://{BUCKET}/code/assetflow_jobs.zip"
    assert request["configurationOverrides"]["applicationConfiguration"] == [
        {"classification": "spark-defaults", "properties": {"spark.executor.memory": "2g"}}
    ]
    assert request == launcher(inline_contexts=False).job_request(run, ETL)  # every attempt: the same request


class CountingS3:
    def __init__(self) -> None:
        self.puts: list[str] = []

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, ContentType: str) -> dict[str, Any]:  # noqa: N803
        self.puts.append(f"s3://{Bucket}/{Key}")
        return {}


class StartedEmr:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def start_job_run(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        return {"jobRunId": f"job-{len(self.requests)}"}


def test_a_small_context_travels_in_the_job_arguments_and_a_large_one_through_s3() -> None:
    # Given a launcher, a run of one small event and a run of events too large for an argument
    s3, emr = CountingS3(), StartedEmr()
    submitter = launcher(emr, s3)
    small = a_run()
    large = replace(
        a_run(),
        run_id="run-large",
        triggering_asset_events={
            RAW.uri: tuple(raw_event(n, at=T0 + timedelta(seconds=n)) for n in range(60))
        },
    )
    large = replace(
        large,
        triggering_asset_events={
            RAW.uri: tuple(
                replace(e, extra={"blob": "x" * 200}) for e in large.triggering_asset_events[RAW.uri]
            )
        },
    )

    # When both are submitted
    submitter.submit(small, ETL)
    submitter.submit(large, ETL)

    # Then the small one's context is the argument itself (no S3 PUT), readable by the job as it is,
    # and the large one's is an S3 object
    small_args = emr.requests[0]["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    assert small_args[-1].startswith("data:application/json;base64,")
    assert len(small_args[-1]) <= 10_000
    loaded = assetflow_job.load_context(small_args[-1])
    assert loaded.run_id == small.run_id and [e.id for e in loaded.triggering_asset_events[RAW.uri]] == [
        e.id for e in sorted(small.triggering_asset_events[RAW.uri], key=lambda e: e.sort_key)
    ]
    large_args = emr.requests[1]["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    assert large_args[-1] == f"s3://{BUCKET}/runs/{ETL.id}/run-large/context.json"
    assert s3.puts == [large_args[-1]]


def test_the_context_tells_the_job_how_sharded_assets_spread_their_events() -> None:
    # Given a deployment that spreads a hot asset's events over four partitions
    emr = StartedEmr()
    launcher(emr, CountingS3(), event_shards={RAW.uri: 4, "s3://lake/cold": 1}).submit(a_run(), ETL)

    # Then the job's reader is told (an unsharded asset is not mentioned), and reads each partition
    argument = emr.requests[0]["jobDriver"]["sparkSubmit"]["entryPointArguments"][-1]
    document = json.loads(base64.b64decode(argument.split("base64,", 1)[1]))
    assert document["events_table"]["shards"] == {RAW.uri: 4}
    assert assetflow_job.load_context(argument).run_id == a_run().run_id


def test_s3_entry_points_pass_as_they_are_and_own_py_files_are_kept() -> None:
    pipeline = Pipeline(
        "shared",
        schedule=[RAW],
        job=SparkJob(
            "s3://other-bucket/jobs/x.py", spark_conf={"spark.submit.pyFiles": "s3://other-bucket/lib.zip"}
        ),
    )
    run = replace(a_run(), pipeline="shared")

    request = launcher(code_prefix="deploy/v2").job_request(run, pipeline)

    driver = request["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == "s3://other-bucket/jobs/x.py"
    assert driver["sparkSubmitParameters"] == (
        f"--py-files s3://{BUCKET}/deploy/v2/assetflow_jobs.zip,s3://other-bucket/lib.zip"
    )
    assert "configurationOverrides" not in request


def test_the_run_context_follows_the_contract() -> None:
    run = a_run(partition_key="2026-11-21")

    doc = run_context_document(
        run,
        ETL,
        metadata_uri="s3://b/runs/p/r/outlets.json",
        events_table={"name": "events", "region": "eu-west-1", "endpoint_url": None},
        path_map=None,
    )

    assert doc["format"] == "assetflow.run-context" and doc["version"] == 1
    assert (doc["run_id"], doc["pipeline"], doc["partition_key"]) == (run.run_id, ETL.id, "2026-11-21")
    assert doc["created_at"] == "2026-11-21T08:01:00.000000Z"
    assert [e["id"] for e in doc["triggering_asset_events"][RAW.uri]] == ["e001", "e003", "e002"]
    assert doc["triggering_asset_events"][RAW.uri][0]["extra"] == {"payload": {"n": 1}}
    assert doc["outlets"] == [
        {"type": "asset", "uri": CLEAN.uri},
        {"type": "asset", "uri": REPORT.uri},
        {"type": "alias", "name": BY_REGION.name},
        {"type": "alias", "name": AUDIT.name},
    ]
    assert doc["inlets"] == [{"type": "asset", "uri": RAW.uri}]
    assert doc["outlet_metadata_uri"] == "s3://b/runs/p/r/outlets.json"
    assert doc["events_table"] == {"name": "events", "region": "eu-west-1", "endpoint_url": None}
    assert doc["path_map"] == {}


def test_the_job_side_helper_reads_the_context_the_launcher_writes() -> None:
    from assetflow_job.context import RunContext

    run = a_run(partition_key="k")
    doc = run_context_document(
        run,
        ETL,
        metadata_uri="s3://b/o.json",
        events_table={"name": "t"},
        path_map={"s3://lake/": "/tmp/lake/"},
    )

    ctx = RunContext(json.loads(json.dumps(doc)), args=["--day", "x"])

    assert (ctx.run_id, ctx.pipeline, ctx.partition_key) == (run.run_id, ETL.id, "k")
    assert (ctx.triggered_by, ctx.conf, ctx.replay_of) == ("assets", None, None)
    replayed = replace(run, triggered_by="replay", conf={"full_refresh": True}, replay_of="run-0")
    doc = run_context_document(
        replayed, ETL, metadata_uri="s3://b/o.json", events_table={"name": "t"}, path_map=None
    )
    again = RunContext(json.loads(json.dumps(doc)))
    assert (again.triggered_by, again.conf, again.replay_of) == ("replay", {"full_refresh": True}, "run-0")
    assert [e.id for e in ctx.triggering_asset_events[RAW.uri]] == ["e001", "e003", "e002"]
    assert ctx.path("s3://lake/clean/orders") == "/tmp/lake/clean/orders"
    ctx.outlet_events[CLEAN.uri].extra = {"rows": 3}
    ctx.outlet_events[BY_REGION].add("s3://lake/regions/eu", extra={"r": "eu"})
    plan = plan_outlet_events(ETL, ctx.outlet_metadata())
    assert plan.refused == ()
    assert PlannedEvent(CLEAN.uri, {"rows": 3}) in plan.events
    assert PlannedEvent("s3://lake/regions/eu", {"r": "eu"}, (BY_REGION.name,)) in plan.events


# ---- the launcher's failure semantics (Stubber: failure shapes moto cannot produce) -----------------


def stubbed(service_name: str) -> tuple[Any, Stubber]:
    client = boto3.client(service_name, **LOCAL_CLIENT_KWARGS)
    return client, Stubber(client)


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ThrottlingException", 429, SubmissionError),
        ("ServiceQuotaExceededException", 402, SubmissionError),
        ("InternalServerException", 500, SubmissionError),
        ("ValidationException", 400, SubmissionRejectedError),
        ("ConflictException", 409, SubmissionRejectedError),
        ("ResourceNotFoundException", 404, SubmissionRejectedError),
    ],
)
def test_start_job_run_errors_are_translated_by_code(code: str, status: int, error: type[Exception]) -> None:
    emr, emr_stub = stubbed("emr-serverless")
    s3, s3_stub = stubbed("s3")
    s3_stub.add_response("put_object", {})
    emr_stub.add_client_error("start_job_run", service_error_code=code, http_status_code=status)

    with emr_stub, s3_stub, pytest.raises(error, match=code) as caught:
        launcher(emr, s3).submit(a_run(), ETL)

    assert isinstance(caught.value.__cause__, ClientError)


def test_a_refused_context_upload_is_a_rejected_submission_and_no_job_starts() -> None:
    emr, emr_stub = stubbed("emr-serverless")
    s3, s3_stub = stubbed("s3")
    s3_stub.add_client_error("put_object", service_error_code="NoSuchBucket", http_status_code=404)

    with emr_stub, s3_stub, pytest.raises(SubmissionRejectedError, match="PutObject"):
        launcher(emr, s3, inline_contexts=False).submit(a_run(), ETL)
    emr_stub.assert_no_pending_responses()


def test_a_second_submit_of_a_run_returns_the_same_job_run_without_a_second_call() -> None:
    emr, emr_stub = stubbed("emr-serverless")
    s3, s3_stub = stubbed("s3")
    s3_stub.add_response("put_object", {})
    emr_stub.add_response(
        "start_job_run",
        {
            "applicationId": APP,
            "jobRunId": "job123",
            "arn": "arn:aws:emr-serverless:us-east-1:123456789012:/applications/x/jobruns/job123",
        },
    )
    subject = launcher(emr, s3)

    with emr_stub, s3_stub:
        first = subject.submit(a_run(), ETL)
        second = subject.submit(a_run(), ETL)

    assert first == second == "job123"


def test_a_run_of_another_pipeline_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="belongs to"):
        launcher().submit(replace(a_run(), pipeline="other"), ETL)


# ---- the handlers ------------------------------------------------------------------------------------


@dataclass
class LambdaContext:
    function_name: str = "assetflow-test"
    memory_limit_in_mb: int = 128
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-test"
    aws_request_id: str = "req-1"


@dataclass
class Settings:
    emr_application_id: str | None = APP


@dataclass
class FakeDeps:
    run_states: Any
    settings: Settings = field(default_factory=Settings)


def job_state_event(state: str, *, application_id: str = APP, job_run_id: str = "job1") -> dict[str, Any]:
    return {
        "version": "0",
        "id": "9fd3cf79-1ff1-b633-4dd9-34508dc1e660",
        "detail-type": "EMR Serverless Job Run State Change",
        "source": "aws.emr-serverless",
        "account": "123456789012",
        "time": "2026-11-21T08:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "jobRunId": job_run_id,
            "applicationId": application_id,
            "arn": f"arn:aws:emr-serverless:us-east-1:123456789012:/applications/{application_id}/jobruns/{job_run_id}",
            "releaseLabel": "emr-7.9.0",
            "state": state,
            "previousState": "RUNNING",
            "createdBy": "arn:aws:sts::123456789012:assumed-role/assetflow/evaluator",
            "updatedAt": "2026-11-21T08:00:00.000000Z",
            "createdAt": "2026-11-21T07:59:00.000000Z",
        },
    }


def test_the_job_state_handler_records_a_state_change() -> None:
    states, store, _ = service(a_run(RunState.RUNNING))

    answer = handle_job_state.lambda_handler(
        job_state_event("FAILED"), LambdaContext(), deps=FakeDeps(states)
    )

    assert answer["status"] == "recorded" and answer["state"] == "failed" and answer["moved"] is True
    assert next(iter(store.runs.values())).state is RunState.FAILED


def test_the_job_state_handler_ignores_other_applications_and_event_types() -> None:
    states, store, _ = service(a_run(RunState.RUNNING))
    deps = FakeDeps(states)
    other_type = {**job_state_event("FAILED"), "detail-type": "EMR Serverless Job Run Retry"}

    answers = [
        handle_job_state.lambda_handler(
            job_state_event("FAILED", application_id="00other"), LambdaContext(), deps=deps
        ),
        handle_job_state.lambda_handler(other_type, LambdaContext(), deps=deps),
    ]

    assert [a["status"] for a in answers] == ["ignored", "ignored"]
    assert next(iter(store.runs.values())).state is RunState.RUNNING


def test_the_job_state_handler_raises_on_a_malformed_event() -> None:
    states, _, _ = service(a_run())
    event = job_state_event("FAILED")
    del event["detail"]["jobRunId"]

    with pytest.raises(ValueError, match="jobRunId"):
        handle_job_state.lambda_handler(event, LambdaContext(), deps=FakeDeps(states))


def test_the_tick_handler_parses_the_schedulers_input() -> None:
    schedule = Pipeline(
        "nightly", schedule=AssetOrTimeSchedule("0 6 * * *", [RAW]), job=SparkJob("spark_jobs/x.py")
    )
    evaluator = FakeEvaluator()
    states = RunStates(
        catalog=Catalog.build([schedule]),
        store=FakeStore(),  # type: ignore[arg-type]
        outputs=S3RunOutputs(FakeS3(), BUCKET),
        evaluator=evaluator,  # type: ignore[arg-type]
        clock=lambda: T0,
    )

    answer = handle_schedule_tick.lambda_handler(
        {"pipeline": "nightly", "scheduled_time": "2026-11-21T06:00:00Z"},
        LambdaContext(),
        deps=FakeDeps(states),
    )

    assert evaluator.ticks == [("nightly", datetime(2026, 11, 21, 6, 0, tzinfo=UTC))]
    assert answer == {"pipeline": "nightly", "scheduled_time": "2026-11-21T06:00:00Z", "runs": []}


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"pipeline": "nightly"},
        {"pipeline": "nightly", "scheduled_time": "<aws.scheduler.scheduled-time>"},
    ],
)
def test_the_tick_handler_raises_on_malformed_input(event: dict[str, Any]) -> None:
    states, _, _ = service(a_run())

    with pytest.raises(ValueError, match=r"scheduled_time|timestamp"):
        handle_schedule_tick.lambda_handler(event, LambdaContext(), deps=FakeDeps(states))


def test_an_outlets_data_version_comes_from_the_jobs_metadata() -> None:
    plan = plan_outlet_events(
        ETL, metadata("r", {"asset": CLEAN.uri, "extra": {}, "alias": None, "version": "snap-1"})
    )
    assert plan.events[0] == PlannedEvent(CLEAN.uri, {}, version="snap-1")
    assert plan.events[1].version is None and plan.refused == ()


@pytest.mark.parametrize("version", ["", 7, "x" * 257])
def test_a_bad_data_version_is_refused_with_the_reason(version: object) -> None:
    plan = plan_outlet_events(ETL, metadata("r", {"asset": CLEAN.uri, "extra": {"k": 1}, "version": version}))
    assert plan.events[0] == PlannedEvent(CLEAN.uri, {})
    assert "version of 's3://lake/clean/orders' must be a string of 1 to 256" in plan.refused[0]
