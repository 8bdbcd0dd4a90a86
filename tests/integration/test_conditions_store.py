"""The event operators on the real store and launcher: where, then, key=, skip_unchanged with versions, failed().

DynamoDB Local holds events, queues, runs and consumed versions; moto's EMR Serverless takes the jobs and S3
the run contexts and outlet metadata, which the job-side helper writes as a job would.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import assetflow_job
from assetflow import Asset, PartitionedAssetSchedule, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.emr import EmrServerlessLauncher, S3RunOutputs
from assetflow.adapters.extras import S3ExtrasStore
from assetflow.core.catalog import Catalog
from assetflow.core.events import AssetEvent, RunState
from assetflow.usecases import views
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.job_state import RunStates
from assetflow.usecases.requests import emit_event, parse_emit_request
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_REGION

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
ROLE = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/assetflow-job"
JOB = SparkJob("spark_jobs/job.py")
ORDERS = Asset("s3://lake/raw/orders")
PAYMENTS = Asset("s3://lake/raw/payments")
CLEAN = Asset("s3://lake/clean/orders")

BIG_ORDERS = Pipeline("big_orders", schedule=ORDERS.where({"amount": [{"numeric": [">=", 100]}]}), job=JOB)
PAID = Pipeline("paid_after_order", schedule=ORDERS.then(PAYMENTS, within=timedelta(minutes=10)), job=JOB)
PER_TENANT = Pipeline(
    "per_tenant", schedule=PartitionedAssetSchedule(ORDERS & PAYMENTS, key="tenant"), job=JOB
)
ETL = Pipeline("etl", schedule=[ORDERS], job=JOB, outlets=[CLEAN], skip_unchanged=True)
REPORT = Pipeline("report", schedule=[CLEAN], job=JOB, skip_unchanged=True)
ALERT = Pipeline("alert_on_failure", schedule=CLEAN.failed(), job=JOB)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Clock:
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
    application_id: str
    evaluator: Evaluator
    states: RunStates
    clock: Clock
    extras: S3ExtrasStore

    def emit(self, asset: Asset, extra: dict[str, Any] | None = None, **fields: Any) -> AssetEvent:
        """An event through the API's use case (as `assetflow events emit` and POST /assets/events make it)."""
        request = parse_emit_request({"uri": asset.uri, "extra": extra or {}, **fields}, by_reference=True)
        result = emit_event(
            self.store,
            self.evaluator.catalog,
            request,
            principal="test",
            request_id=_name("req"),
            now=self.clock(),
            extras=self.extras,
        )
        return result.event

    def deliver(self, *events: AssetEvent) -> Any:
        """The table's stream delivers the events to the evaluator in one batch."""
        return self.evaluator.handle_batch(list(events))

    def runs(self, pipeline: str) -> list[Any]:
        items = sorted(self.store.list_runs(pipeline).items, key=lambda r: r["created_at"])
        return [self.store.get_run(r["run_id"]) for r in items]

    def end(self, run_id: str, emr_state: str) -> Any:
        run = self.store.get_run(run_id)
        return self.states.handle_state_change(run.job_run_id or "", emr_state, self.application_id)

    def succeed_with(self, run_id: str, **outlets: Any) -> Any:
        """The job helper writes outlet metadata as a job would, then EMR says SUCCESS."""
        job = self.emr.get_job_run(
            applicationId=self.application_id, jobRunId=self.store.get_run(run_id).job_run_id
        )["jobRun"]
        with assetflow_job.run(
            job["jobDriver"]["sparkSubmit"]["entryPointArguments"], s3_client=self.s3
        ) as ctx:
            for metadata in outlets.get("metadata", []):
                ctx.emit(metadata)
        return self.end(run_id, "SUCCESS")


@pytest.fixture
def make_world(dynamodb_client: Any, s3_client: Any, emr_serverless_client: Any) -> Iterator[Any]:
    tables: list[str] = []

    def make(*pipelines: Pipeline) -> World:
        store = DynamoDbStore(dynamodb_client, _name("assetflow"))
        store.create_table()
        tables.append(store.table)
        bucket = _name("runs")
        s3_client.create_bucket(Bucket=bucket)
        application_id = emr_serverless_client.create_application(
            name=_name("assetflow"), releaseLabel="emr-7.9.0", type="SPARK", clientToken=_name("app")
        )["applicationId"]
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
        )
        clock = Clock()
        extras = S3ExtrasStore(s3_client, bucket)
        evaluator = Evaluator(
            catalog=Catalog.build(pipelines),
            store=store,
            launcher=launcher,
            clock=clock,
            sleep=lambda _: None,
            extras=extras,
        )
        states = RunStates(
            catalog=evaluator.catalog,
            store=store,
            outputs=S3RunOutputs(s3_client, bucket),
            evaluator=evaluator,
            clock=clock,
            job_lookup=launcher.run_id_of_job,
        )
        return World(
            store, s3_client, emr_serverless_client, application_id, evaluator, states, clock, extras
        )

    yield make
    for table in tables:
        dynamodb_client.delete_table(TableName=table)


def test_where_records_every_event_but_queues_only_matches(make_world: Any) -> None:
    world = make_world(BIG_ORDERS)
    small = world.emit(ORDERS, {"amount": 5})

    evaluation = world.deliver(small)

    assert world.runs(BIG_ORDERS.id) == [] and world.store.list_queue(BIG_ORDERS.id) == []
    assert [e["id"] for e in world.store.list_events(ORDERS.uri).items] == [small.id]  # recorded, listed
    (skip,) = evaluation.skipped
    assert '{"amount": [{"numeric": [">=", 100]}]}' in skip.reason

    big = world.emit(ORDERS, {"amount": 250})
    world.deliver(big)
    (run,) = world.runs(BIG_ORDERS.id)
    assert [e.id for e in run.triggering_events] == [big.id]


def test_then_runs_on_the_sequence_in_its_window_and_consumes_both(make_world: Any) -> None:
    world = make_world(PAID)
    payment_first = world.emit(PAYMENTS, {"id": 0})
    world.deliver(payment_first)
    assert world.runs(PAID.id) == []  # a payment before any order is no sequence

    order = world.emit(ORDERS, {"id": 1})
    world.deliver(order)
    assert world.runs(PAID.id) == []
    world.clock.now += timedelta(
        minutes=11
    )  # past the window: this payment does not follow the order in time
    late_payment = world.emit(PAYMENTS, {"id": 2})
    world.deliver(late_payment)
    assert world.runs(PAID.id) == []

    order2 = world.emit(ORDERS, {"id": 3})
    payment = world.emit(PAYMENTS, {"id": 4})
    world.deliver(order2, payment)

    (run,) = world.runs(PAID.id)
    taken = {e.id for e in run.triggering_events}
    assert {order2.id, payment.id} <= taken
    assert world.store.list_queue(PAID.id) == []  # the run consumed the whole queue


def test_a_key_field_makes_two_assets_meet_per_tenant(make_world: Any) -> None:
    world = make_world(PER_TENANT)
    world.deliver(
        world.emit(ORDERS, {"tenant": "acme", "n": 1}),
        world.emit(PAYMENTS, {"tenant": "globex", "n": 2}),
    )
    assert world.runs(PER_TENANT.id) == []  # one asset per tenant so far

    missing = world.emit(PAYMENTS, {"n": 3})  # no tenant: recorded, skipped with the reason
    evaluation = world.deliver(missing)
    assert "no field 'tenant'" in evaluation.skipped[0].reason

    world.deliver(world.emit(PAYMENTS, {"payload": {"tenant": "acme"}, "n": 4}))  # a watcher's payload
    (run,) = world.runs(PER_TENANT.id)
    assert run.partition_key == "acme"
    assert sorted(e.extra["n"] for e in run.triggering_events) == [1, 4]
    assert {row["queue_key"] for row in world.store.list_queue(PER_TENANT.id)} == {"globex"}


def test_skip_unchanged_runs_once_per_version_from_the_api_and_from_the_job(make_world: Any) -> None:
    world = make_world(ETL, REPORT)

    first = world.emit(ORDERS, {"n": 1}, version="etag-1")
    again = world.emit(ORDERS, {"n": 2}, version="etag-1")
    world.deliver(first, again)  # one batch: the second is the same data
    assert len(world.runs(ETL.id)) == 1
    (etl_run,) = world.runs(ETL.id)

    # The job names the data version it wrote; its outlet event carries it.
    change = world.succeed_with(
        etl_run.run_id, metadata=[assetflow_job.Metadata(CLEAN.uri, {"rows": 3}, version="snap-7")]
    )
    (outlet,) = change.emitted
    assert outlet.version == "snap-7" and outlet.to_json()["version"] == "snap-7"
    world.deliver(outlet)
    (report_run,) = world.runs(REPORT.id)
    world.end(report_run.run_id, "SUCCESS")

    # A later batch: the consumed version is read from the store and skipped; a new version runs.
    repeated = world.emit(ORDERS, {"n": 3}, version="etag-1")
    evaluation = world.deliver(repeated)
    assert len(world.runs(ETL.id)) == 1
    assert any("version 'etag-1'" in s.reason and "skip_unchanged" in s.reason for s in evaluation.skipped)
    assert world.store.list_events(ORDERS.uri).items[0]["id"] == repeated.id  # still recorded
    # explain lists the two events of etag-1 that were skipped, not the one the run took
    explained = views.explain(world.store, world.evaluator.catalog, ETL.id, now=world.clock())
    assert [s["event_id"] for s in explained["skipped"]] == [repeated.id, again.id]
    assert all("version 'etag-1'" in s["reason"] for s in explained["skipped"])

    world.deliver(world.emit(ORDERS, {"n": 4}, version="etag-2"))
    assert len(world.runs(ETL.id)) == 2
    unversioned = world.emit(ORDERS, {"n": 5})
    world.end(world.runs(ETL.id)[1].run_id, "SUCCESS")
    world.deliver(unversioned)
    assert len(world.runs(ETL.id)) == 3  # an event without a version always counts


def test_a_failed_producer_triggers_failed_once_and_a_redelivery_makes_no_second_run(make_world: Any) -> None:
    world = make_world(ETL, ALERT)
    world.deliver(world.emit(ORDERS, {"n": 1}, version="v1"))
    (etl_run,) = world.runs(ETL.id)

    change = world.end(etl_run.run_id, "FAILED")

    assert change.moved and change.state is RunState.FAILED and change.emitted == []
    assert world.store.list_events(CLEAN.uri).items == []  # a failure is no event of the asset
    (alert,) = world.runs(ALERT.id)
    (failure,) = alert.triggering_events
    assert failure.asset == CLEAN.uri and failure.source["type"] == "failure"
    assert failure.source["run_id"] == etl_run.run_id

    redelivered = world.end(etl_run.run_id, "FAILED")
    assert not redelivered.moved
    assert len(world.runs(ALERT.id)) == 1  # the same failure makes no second run


def test_explain_names_the_pattern_a_recorded_event_missed(make_world: Any) -> None:
    world = make_world(BIG_ORDERS, PER_TENANT)
    small = world.emit(ORDERS, {"amount": 5})
    big = world.emit(ORDERS, {"amount": 500})
    world.deliver(small)

    explained = views.explain(world.store, world.evaluator.catalog, BIG_ORDERS.id, now=world.clock())

    assert (explained["due"], explained["blocked_by"]) == (False, "assets")
    (skip,) = explained["skipped"]
    assert (skip["event_id"], skip["asset"]) == (small.id, ORDERS.uri)
    (missed,) = skip["missed"]
    assert missed["pattern"] == {"amount": [{"numeric": [">=", 100]}]}
    assert missed["key"] == explained["condition"]["key"]
    assert explained["condition"]["recent_misses"] == [small.id]
    # big was recorded but not delivered yet: it matches, so explain does not list it
    assert big.id not in [s["event_id"] for s in explained["skipped"]]

    keyed = views.explain(world.store, world.evaluator.catalog, PER_TENANT.id, now=world.clock())
    assert {s["event_id"] for s in keyed["skipped"]} == {small.id, big.id}
    assert all("no field 'tenant'" in s["reason"] and "missed" not in s for s in keyed["skipped"])


def test_explain_of_a_plain_pipeline_reads_no_events(make_world: Any) -> None:
    world = make_world(Pipeline("plain", schedule=[ORDERS, PAYMENTS], job=JOB))
    world.deliver(world.emit(ORDERS, {"amount": 5}))
    explained = views.explain(world.store, world.evaluator.catalog, "plain", now=world.clock())
    assert "skipped" not in explained and explained["missing"] == [PAYMENTS.uri]


def test_a_large_extra_stored_by_reference_is_routed_on_its_whole_content(make_world: Any) -> None:
    world = make_world(BIG_ORDERS, PER_TENANT)
    padding = "x" * 40_000  # over the 32 KiB kept inline: the extra goes to S3, the event holds a reference
    small = world.emit(ORDERS, {"amount": 5, "tenant": "acme", "notes": padding})
    big = world.emit(ORDERS, {"amount": 500, "tenant": "acme", "notes": padding})
    assert "extra_ref" in small.extra and "amount" not in small.extra

    world.deliver(small, big)

    (run,) = world.runs(BIG_ORDERS.id)
    (taken,) = run.triggering_events
    assert taken.id == big.id and "extra_ref" in taken.extra  # the run carries the reference, as stored
    queued = world.store.list_queue(PER_TENANT.id)
    assert [row["queue_key"] for row in queued] == ["acme", "acme"]  # key= read from the whole extra
    explained = views.explain(
        world.store, world.evaluator.catalog, BIG_ORDERS.id, now=world.clock(), extras=world.extras
    )
    assert [s["event_id"] for s in explained["skipped"]] == [small.id]
    unread = views.explain(world.store, world.evaluator.catalog, BIG_ORDERS.id, now=world.clock())
    assert unread["skipped"] == []  # without the extras store it does not guess


class _MeetAfterReading:
    """The store, but every evaluator waits for the other after reading its queues: both judge the same state."""

    def __init__(self, store: DynamoDbStore, barrier: threading.Barrier) -> None:
        self._store, self._barrier, self._met = store, barrier, False

    def read_queue_snapshots(self, *args: Any, **kwargs: Any) -> Any:
        found = self._store.read_queue_snapshots(*args, **kwargs)
        if not self._met:  # the first read only: a retry's read comes after the other has written
            self._met = True
            with contextlib.suppress(threading.BrokenBarrierError):
                self._barrier.wait(timeout=10)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


KEYED = Pipeline(
    "keyed_versions", schedule=PartitionedAssetSchedule(ORDERS, key="tenant"), job=JOB, skip_unchanged=True
)


@pytest.mark.parametrize(
    ("pipeline", "tenants"),
    [(ETL, ("x", "x")), (KEYED, ("x", "y"))],
    ids=["one queue", "two queues of one pipeline"],
)
def test_racing_evaluators_make_one_run_per_version(
    make_world: Any, pipeline: Pipeline, tenants: tuple[str, str]
) -> None:
    # Two evaluators judge two events of one version at once; on one queue the head's version makes one lose,
    # on two queues (tenants) only the consumed-version fact's condition in the run's transaction does.
    world = make_world(pipeline)
    for round_ in range(3):
        version = f"snap-{round_}"
        one = world.emit(ORDERS, {"n": 1, "tenant": tenants[0]}, version=version)
        other = world.emit(ORDERS, {"n": 2, "tenant": tenants[1]}, version=version)
        barrier = threading.Barrier(2)
        evaluators = [
            Evaluator(
                catalog=world.evaluator.catalog,
                store=_MeetAfterReading(world.store, barrier),  # type: ignore[arg-type]
                launcher=world.evaluator.launcher,
                clock=world.clock,
                sleep=lambda _: None,
            )
            for _ in range(2)
        ]
        results: list[Any] = [None, None]

        def handle(
            i: int, event: AssetEvent, evaluators: list[Evaluator] = evaluators, results: list[Any] = results
        ) -> None:
            results[i] = evaluators[i].handle_batch([event])

        threads = [threading.Thread(target=handle, args=(i, e)) for i, e in enumerate((one, other))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

        assert all(r is not None and not r.failed for r in results)
        made = [r for r in world.runs(pipeline.id) if r.triggering_events[0].version == version]
        assert len(made) == 1, f"round {round_}: {len(made)} runs of {version}"
        assert sum(any("skip_unchanged" in s.reason for s in r.skipped) for r in results) == 1
        world.end(made[0].run_id, "SUCCESS")


def test_a_version_consumed_elsewhere_never_blocks_an_entry_queued_before(make_world: Any) -> None:
    both = Pipeline(
        "both_versions",
        schedule=PartitionedAssetSchedule(ORDERS & PAYMENTS, key="tenant"),
        job=JOB,
        skip_unchanged=True,
    )
    world = make_world(both)
    world.deliver(world.emit(ORDERS, {"tenant": "x"}, version="v1"))  # x waits for a payment
    world.deliver(world.emit(ORDERS, {"tenant": "y"}, version="v1"))  # judged before any run took v1: queued
    world.deliver(world.emit(PAYMENTS, {"tenant": "y"}))
    assert [r.partition_key for r in world.runs(both.id)] == ["y"]  # y's run consumed v1

    evaluation = world.deliver(world.emit(PAYMENTS, {"tenant": "x"}))

    assert not evaluation.failed
    assert sorted(r.partition_key for r in world.runs(both.id)) == ["x", "y"]  # x's queue is not stuck
    assert world.store.list_queue(both.id) == []
