"""Operator actions on DynamoDB Local: trigger, pause, cancel, replay, backfill and explain, with real transactions.

The launcher is a recorder (the Spark launcher's cancel is tested in tests/spark and end to end in tests/e2e);
everything else is the real store, evaluator, release path and use cases.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.core.errors import ConflictError, NotFoundError
from assetflow.core.events import OUTLET_TOKEN_SCHEME, AssetEvent, Run, RunState
from assetflow.core.pipeline import Pipeline as PipelineType
from assetflow.ports import JobAlreadyEndedError
from assetflow.usecases import views
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.job_state import RunStates
from assetflow.usecases.operate import Operations, RunStateError, TriggerRequest
from assetflow.usecases.requests import IdempotencyKeyReusedError, RequestError

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B = Asset("x-test://a"), Asset("x-test://b")


class Launcher:
    """Records submissions and cancellations; a job can be marked ended (its cancel is then refused)."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.cancelled: list[str] = []
        self.ended: set[str] = set()
        self._lock = threading.Lock()

    def submit(self, run: Run, pipeline: PipelineType) -> str:
        with self._lock:
            self.submitted.append(run.run_id)
        return f"job-{run.run_id}"

    def cancel(self, run: Run) -> None:
        if run.job_run_id in self.ended:
            raise JobAlreadyEndedError(f"job run {run.job_run_id} has ended (SUCCESS)")
        self.cancelled.append(run.run_id)


class Outputs:
    def outlet_metadata(
        self, pipeline: str, run_id: str, *, token_scheme: int = OUTLET_TOKEN_SCHEME
    ) -> Mapping[str, Any] | None:
        return None


class Clock:
    """Starts at ``now`` and moves a millisecond per reading (each action happens after the previous one)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._ticks = itertools.count()

    def __call__(self) -> datetime:
        return self.now + timedelta(milliseconds=next(self._ticks))


class World:
    """A store, an evaluator, the run-state use case and the operator's actions over one catalog."""

    def __init__(self, store: DynamoDbStore, *pipelines: Pipeline, now: datetime = T0) -> None:
        self.store = store
        self.catalog = Catalog.build(pipelines)
        self.launcher = Launcher()
        self.clock = Clock(now)
        self.evaluator = Evaluator(
            catalog=self.catalog, store=store, launcher=self.launcher, clock=self.clock
        )
        self.ops = Operations(
            catalog=self.catalog,
            store=store,
            submitter=self.evaluator.submitter,
            release=self.evaluator.release,
            clock=self.clock,
        )
        self.states = RunStates(
            catalog=self.catalog,
            store=store,
            outputs=Outputs(),
            evaluator=self.evaluator,
            clock=self.clock,
            admit=self.ops.admit,
        )

    def emit(self, asset: Asset, n: int, *, at: datetime | None = None) -> AssetEvent:
        event = AssetEvent(asset.uri, f"e{n:05d}", at or T0 + timedelta(seconds=n), {"n": n}, {"type": "api"})
        stored, _ = self.store.put_event(event)
        self.evaluator.handle_event(stored)
        return stored

    def trigger(self, pipeline: str, conf: dict[str, Any] | None = None, **kwargs: Any) -> Run:
        request = TriggerRequest(conf=conf)
        return self.ops.trigger(
            pipeline, request, principal="tester", request_id=uuid.uuid4().hex, **kwargs
        ).run

    def end(self, run: Run, state: str = "SUCCESS") -> None:
        job = self.store.get_run(run.run_id).job_run_id
        assert job is not None, "the run was never submitted"
        self.states.handle_state_change(job, state, "app", job_run_name=run.run_id)  # EMR names the job

    def runs(self, pipeline: str) -> list[Run]:
        return [self.store.get_run(r["run_id"]) for r in self.store.list_runs(pipeline, limit=100).items]


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDbStore:
    db = DynamoDbStore(dynamodb_client, f"assetflow-{uuid.uuid4().hex[:10]}")
    db.create_table()
    return db


# ---- trigger and max_active_runs ---------------------------------------------------------------------


def test_a_manual_run_of_a_manual_only_pipeline_starts_with_its_conf(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("by_hand", schedule=None, job=JOB))
    run = world.trigger("by_hand", {"full_refresh": True, "days": [1, 2]})
    assert run.triggered_by == "manual"
    assert run.to_json()["conf"] == {"full_refresh": True, "days": [1, 2]}
    assert run.to_json()["triggering_asset_events"] == {}
    assert run.job_run_id == f"job-{run.run_id}" and world.launcher.submitted == [run.run_id]
    assert store.pipeline_gate("by_hand").active == 1
    explained = views.explain(store, world.catalog, "by_hand", now=T0)
    assert explained["blocked_by"] == "time" and explained["condition"] is None


def test_an_admitted_run_the_job_service_refused_waits_on_a_pending_item_and_its_marker_is_retired(
    store: DynamoDbStore,
) -> None:
    world = World(store, Pipeline("flaky", schedule=A, job=JOB, max_active_runs=2))
    submit = world.launcher.submit

    def unavailable(run: Run, pipeline: PipelineType) -> str:
        raise RuntimeError("EMR Serverless unavailable")

    world.launcher.submit = unavailable  # type: ignore[method-assign]
    run = world.trigger("flaky")  # held, admitted at once (a slot is free), not submitted

    assert run.job_run_id is None and store.held_runs("flaky") == []
    (marker,) = store._query(
        KeyConditionExpression="pk = :p AND begins_with(sk, :h)",
        ExpressionAttributeValues={":p": {"S": "PIPELINE#flaky"}, ":h": {"S": "HELD#"}},
    )
    assert marker["retired"] == {"BOOL": True} and int(marker["expires_at"]["N"]) > T0.timestamp()
    assert [r.run_id for r in store.unsubmitted_runs("flaky")] == [run.run_id]

    world.launcher.submit = submit  # type: ignore[method-assign]
    world.evaluator.release("flaky")  # the next evaluation of the pipeline retries it

    assert store.get_run(run.run_id).job_run_id == f"job-{run.run_id}"
    assert store.unsubmitted_runs("flaky") == []
    pending = store._query(
        KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "PENDING#flaky"}}
    )
    assert list(pending) == []


def test_manual_runs_wait_queued_for_a_slot_and_the_release_path_submits_them(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("one_at_a_time", schedule=A, job=JOB, max_active_runs=1))
    first = world.trigger("one_at_a_time")
    second = world.trigger("one_at_a_time", {"n": 2})
    third = world.trigger("one_at_a_time", {"n": 3})
    assert first.job_run_id and second.job_run_id is None and third.job_run_id is None
    assert second.state is RunState.QUEUED
    assert store.held_runs("one_at_a_time") == [second.run_id, third.run_id]
    # An asset event meanwhile queues behind the held runs (the pipeline is at its limit).
    world.emit(A, 1)
    assert views.explain(store, world.catalog, "one_at_a_time", now=T0)["blocked_by"] == "max_active_runs"

    world.end(first)  # the run-state function's release path admits the oldest held run first
    assert store.get_run(second.run_id).job_run_id == f"job-{second.run_id}"
    assert store.held_runs("one_at_a_time") == [third.run_id]
    assert store.pipeline_gate("one_at_a_time").active == 1
    world.end(store.get_run(second.run_id))
    world.end(store.get_run(third.run_id))
    # ...and the queued asset event runs once the held runs are done.
    (asset_run,) = [r for r in world.runs("one_at_a_time") if r.triggered_by == "assets"]
    assert [e.id for e in asset_run.triggering_events] == ["e00001"]
    assert world.launcher.submitted == [first.run_id, second.run_id, third.run_id, asset_run.run_id]


def test_a_retried_trigger_with_its_idempotency_key_returns_the_first_run(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("by_hand", schedule=None, job=JOB))
    first = world.ops.trigger(
        "by_hand", TriggerRequest({"a": 1}), principal="p", request_id="r1", idempotency_key="k"
    )
    again = world.ops.trigger(
        "by_hand", TriggerRequest({"a": 1}), principal="p", request_id="r2", idempotency_key="k"
    )
    assert (again.run.run_id, again.created, first.created) == (first.run.run_id, False, True)
    with pytest.raises(IdempotencyKeyReusedError):
        world.ops.trigger(
            "by_hand", TriggerRequest({"a": 2}), principal="p", request_id="r3", idempotency_key="k"
        )
    assert len(world.runs("by_hand")) == 1


def test_trigger_refuses_an_unknown_pipeline_and_changes_nothing(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("by_hand", schedule=None, job=JOB))
    with pytest.raises(NotFoundError, match="no pipeline 'nope'"):
        world.trigger("nope")
    assert store.list_runs(limit=10).items == []


# ---- pause ----------------------------------------------------------------------------------------------


def test_a_paused_pipeline_queues_events_starts_nothing_and_unpausing_runs_what_is_due(
    store: DynamoDbStore,
) -> None:
    world = World(store, Pipeline("pausable", schedule=A & B, job=JOB))
    assert world.ops.pause("pausable", principal="ops")["changed"] is True
    assert world.ops.pause("pausable", principal="ops")["changed"] is False
    world.emit(A, 1)
    world.emit(B, 2)
    manual = world.trigger("pausable")
    assert world.runs("pausable") == [store.get_run(manual.run_id)]  # no asset run, the manual one held
    assert manual.job_run_id is None and world.launcher.submitted == []
    explained = views.explain(store, world.catalog, "pausable", now=T0 + timedelta(seconds=3))
    assert (explained["blocked_by"], explained["paused"], explained["updated"], explained["required"]) == (
        "paused",
        True,
        2,
        2,
    )
    assert [row["event"]["id"] for row in views.list_queue(store, world.catalog, "pausable")["items"]] == [
        "e00001",
        "e00002",
    ]

    result = world.ops.unpause("pausable", principal="ops")
    assert result["paused"] is False and len(result["runs"]) == 2
    kinds = sorted(r.triggered_by or "" for r in world.runs("pausable"))
    assert kinds == ["assets", "manual"]
    assert len(world.launcher.submitted) == 2


def test_the_evaluators_transaction_refuses_a_run_once_paused(store: DynamoDbStore) -> None:
    # The flag lives on the counter's item, so even an evaluator that read "not paused" cannot start a run.
    world = World(store, Pipeline("racy", schedule=A, job=JOB))
    head = store.read_queue("racy")
    gate = store.pipeline_gate("racy")
    assert not gate.paused
    world.ops.pause("racy", principal="ops")
    from assetflow.core.scheduler import QueueEntry, advance

    event = AssetEvent(A.uri, "e1", T0, {}, {"type": "api"})
    transition = advance(
        world.catalog.pipelines["racy"], head.state, active_runs=0, now=T0, entries=[QueueEntry(event)]
    )
    assert transition.runs
    from assetflow.core.errors import ConflictError

    with pytest.raises(ConflictError):
        store.apply(world.catalog.pipelines["racy"], head, transition)
    assert store.list_runs("racy", limit=5).items == []


# ---- cancel -----------------------------------------------------------------------------------------------


def test_cancel_stops_the_job_frees_the_slot_and_spends_the_events(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("slow", schedule=A, job=JOB, max_active_runs=1))
    world.emit(A, 1)
    (running,) = world.runs("slow")
    waiting = world.trigger("slow")
    cancelled = world.ops.cancel(running.run_id, principal="ops")
    assert cancelled.state is RunState.CANCELLED
    assert world.launcher.cancelled == [running.run_id]
    assert store.get_run(waiting.run_id).job_run_id  # the freed slot went to the held run
    assert views.list_queue(store, world.catalog, "slow")["items"] == []  # not re-queued
    # EMR's CANCELLED event arrives later and changes nothing.
    world.end(running, "CANCELLED")
    assert store.pipeline_gate("slow").active == 1


def test_cancel_with_requeue_puts_the_events_back_and_they_ride_with_the_next_run(
    store: DynamoDbStore,
) -> None:
    world = World(store, Pipeline("both", schedule=A & B, job=JOB, max_active_runs=1))
    a1, b2 = world.emit(A, 1), world.emit(B, 2)
    (first,) = world.runs("both")
    world.emit(A, 3)  # queued behind the running run
    world.ops.cancel(first.run_id, requeue=True, principal="ops")
    # The re-queued events complete the condition with the queued one: a new run takes all three.
    second = next(r for r in world.runs("both") if r.run_id != first.run_id)
    assert [e.id for e in second.triggering_events] == ["e00001", "e00002", "e00003"]
    assert views.list_queue(store, world.catalog, "both")["items"] == []
    # The queue marked them seen again (their ids went out of its seen sets and back): a late redelivery of
    # the stream's records queues nothing
    assert store.already_queued("both", "", [a1, b2]) == {a1.id, b2.id}
    world.evaluator.handle_batch([a1, b2])
    assert views.list_queue(store, world.catalog, "both")["items"] == []
    assert len(world.runs("both")) == 2


@pytest.mark.parametrize("batch", [False, True])
def test_a_run_of_one_event_cancelled_with_requeue_is_made_again_under_a_new_id_and_once(
    store: DynamoDbStore, batch: bool
) -> None:
    # The id of a run that takes one event alone derives from the event: the run made again of the re-queued
    # event needs its own (before, its put was refused as a conflict until the action gave up and said 409).
    world = World(store, Pipeline("one", schedule=A, job=JOB, batch=batch))
    event = world.emit(A, 1)
    (first,) = world.runs("one")
    world.ops.cancel(first.run_id, requeue=True, principal="ops")
    again = next(r for r in world.runs("one") if r.run_id != first.run_id)
    assert [e.id for e in again.triggering_events] == [event.id]
    assert again.job_run_id  # submitted
    assert store.get_run(first.run_id).state is RunState.CANCELLED
    # A late redelivery of the event (the stream's retry) makes no third run, and cancelling the second
    # with requeue makes a third of its own.
    world.evaluator.handle_event(event)
    assert len(world.runs("one")) == 2
    world.ops.cancel(again.run_id, requeue=True, principal="ops")
    assert {r.state for r in world.runs("one")} == {RunState.CANCELLED, RunState.RUNNING}  # submitted
    assert len(world.runs("one")) == 3
    assert views.list_queue(store, world.catalog, "one")["items"] == []


def test_a_cancelled_run_whose_events_cannot_be_requeued_says_to_replay_it_and_its_slot_still_frees(
    store: DynamoDbStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(store, Pipeline("one", schedule=A, job=JOB, max_active_runs=1))
    world.ops._sleep = lambda _: None
    world.emit(A, 1)
    (first,) = world.runs("one")
    waiting = world.trigger("one")  # held for the slot
    applied = store.apply

    def contended(pipeline: PipelineType, stored: Any, transition: Any) -> None:
        if any(e.requeued_from for e in transition.added):  # the re-queue's own transitions only
            raise ConflictError("the queue changed")
        applied(pipeline, stored, transition)

    monkeypatch.setattr(store, "apply", contended)
    with pytest.raises(
        ConflictError, match=f"is cancelled, but its events could not be re-queued.*replay {first.run_id}"
    ):
        world.ops.cancel(first.run_id, requeue=True, principal="ops")
    assert store.get_run(first.run_id).state is RunState.CANCELLED
    assert store.get_run(waiting.run_id).job_run_id  # the freed slot went to the held run all the same
    monkeypatch.undo()
    # The remedy the message names runs the events again
    replayed = world.ops.replay(first.run_id, principal="ops", request_id="r-1").run
    assert [e.id for e in replayed.triggering_events] == ["e00001"]


def test_cancel_refuses_finished_unknown_and_ended_job_runs_changing_nothing(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("etl", schedule=A, job=JOB))
    world.emit(A, 1)
    (run,) = world.runs("etl")
    world.launcher.ended.add(run.job_run_id or "")
    with pytest.raises(RunStateError, match="has already ended"):
        world.ops.cancel(run.run_id)
    assert store.get_run(run.run_id).state is RunState.RUNNING  # as its submission left it
    world.end(run)
    with pytest.raises(RunStateError, match="already success"):
        world.ops.cancel(run.run_id)
    with pytest.raises(NotFoundError):
        world.ops.cancel("run-nope")
    manual = world.trigger("etl")
    with pytest.raises(RunStateError, match="nothing to re-queue"):
        world.ops.cancel(manual.run_id, requeue=True)
    assert store.get_run(run.run_id).state is RunState.SUCCESS
    assert world.launcher.cancelled == []


def test_a_held_run_is_cancelled_without_touching_the_slots(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("one", schedule=None, job=JOB, max_active_runs=1))
    first = world.trigger("one")
    held = world.trigger("one")
    cancelled = world.ops.cancel(held.run_id)
    assert cancelled.state is RunState.CANCELLED and cancelled.job_run_id is None
    assert store.held_runs("one") == [] and store.pipeline_gate("one").active == 1
    world.end(first)
    assert world.launcher.submitted == [first.run_id]


# ---- replay ---------------------------------------------------------------------------------------------


def test_replay_makes_a_new_run_with_the_same_events_and_conf(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("both", schedule=A & B, job=JOB))
    world.emit(A, 1)
    world.emit(B, 2)
    (original,) = world.runs("both")
    with pytest.raises(RunStateError, match="still running"):
        world.ops.replay(original.run_id, principal="ops", request_id="r0")
    world.end(original, "FAILED")
    replay = world.ops.replay(original.run_id, principal="ops", request_id="r1").run
    assert replay.run_id != original.run_id
    assert (replay.triggered_by, replay.replay_of) == ("replay", original.run_id)
    assert (
        replay.to_json()["triggering_asset_events"]
        == store.get_run(original.run_id).to_json()["triggering_asset_events"]
    )
    assert replay.job_run_id == f"job-{replay.run_id}"
    manual = world.trigger("both", {"x": 1})
    world.end(manual)
    assert world.ops.replay(manual.run_id, principal="ops", request_id="r2").run.to_json()["conf"] == {"x": 1}
    with pytest.raises(NotFoundError):
        world.ops.replay("run-nope", principal="ops", request_id="r3")


# ---- backfill -------------------------------------------------------------------------------------------


def test_backfill_replays_the_reference_timeline_and_is_safe_to_run_twice(store: DynamoDbStore) -> None:
    a1, a2, a3 = (Asset(f"s3://bucket/example_asset_{i}") for i in (1, 2, 3))
    pipeline = Pipeline("timeline", schedule=[a1, a2, a3], job=JOB)
    world = World(store, pipeline, now=T0 + timedelta(days=1))
    owner = {1: a1, 2: a1, 4: a1, 6: a1, 13: a1, 3: a2, 5: a2, 8: a2, 10: a2, 12: a2, 7: a3, 9: a3, 11: a3}
    for n in range(1, 14):  # stored only: the evaluator never saw them (a pipeline added later, say)
        store.put_event(AssetEvent(owner[n].uri, f"e{n:05d}", T0 + timedelta(seconds=n), {}, {"type": "api"}))
    start, end = T0, T0 + timedelta(minutes=1)

    dry = world.ops.backfill("timeline", start, end, dry_run=True)
    assert [len(r["triggering_asset_events"]) for r in dry.runs] == [3, 3]
    assert [r["state"] for r in dry.runs] == ["planned", "planned"] and world.runs("timeline") == []

    result = world.ops.backfill("timeline", start, end)
    assert (result.created, result.existing) == (2, 0)
    runs = sorted(world.runs("timeline"), key=lambda r: r.created_at)
    assert [r.triggered_by for r in runs] == ["backfill", "backfill"]
    assert [[e.id for e in r.triggering_events] for r in runs] == [
        [f"e{n:05d}" for n in range(1, 8)],
        [f"e{n:05d}" for n in range(8, 14)],
    ]
    assert [r.run_id for r in runs] == [r["run_id"] for r in dry.runs]
    again = world.ops.backfill("timeline", start, end)
    assert (again.created, again.existing) == (0, 2) and len(world.runs("timeline")) == 2


def test_backfill_refuses_bad_windows_and_manual_pipelines(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("etl", schedule=A, job=JOB), Pipeline("by_hand", schedule=None, job=JOB))
    now = world.clock.now
    with pytest.raises(RequestError, match="reaches into the future"):
        world.ops.backfill("etl", now - timedelta(hours=1), now + timedelta(hours=1))
    with pytest.raises(RequestError, match="empty"):
        world.ops.backfill("etl", now - timedelta(hours=1), now - timedelta(hours=2))
    with pytest.raises(RequestError, match="manual only"):
        world.ops.backfill("by_hand", now - timedelta(hours=2), now - timedelta(hours=1))
    with pytest.raises(NotFoundError):
        world.ops.backfill("nope", now - timedelta(hours=2), now - timedelta(hours=1))
    assert store.list_runs(limit=10).items == []


def test_backfill_of_a_time_schedule_makes_one_run_per_tick_in_the_window(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("hourly", schedule="@hourly", job=JOB), now=T0 + timedelta(days=1))
    result = world.ops.backfill("hourly", T0, T0 + timedelta(hours=3))
    assert [r["scheduled_time"] for r in result.runs] == [
        "2026-11-21T08:00:00.000000Z",
        "2026-11-21T09:00:00.000000Z",
        "2026-11-21T10:00:00.000000Z",
    ]
    assert {r["triggered_by"] for r in result.runs} == {"backfill"}


# ---- explain and the queue's x of N ----------------------------------------------------------------------


def test_explain_and_queue_list_say_x_of_n_and_what_is_missing(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("both", schedule=A & B, job=JOB))
    world.emit(A, 1)
    explained = views.explain(store, world.catalog, "both", now=T0 + timedelta(seconds=2))
    assert (explained["due"], explained["blocked_by"], explained["missing"]) == (False, "assets", [B.uri])
    assert (explained["updated"], explained["required"]) == (1, 2)
    assert explained["condition"]["children"][0] == {"op": "asset", "value": True, "uri": A.uri, "queued": 1}
    queue = views.list_queue(store, world.catalog, "both")
    assert (queue["updated"], queue["required"]) == (1, 2)
    with pytest.raises(NotFoundError):
        views.explain(store, world.catalog, "nope")


def test_assets_list_names_every_declared_asset_with_its_health(store: DynamoDbStore) -> None:
    world = World(store, Pipeline("both", schedule=A & B, job=JOB))
    world.emit(A, 1)
    page = views.list_assets(store, catalog=world.catalog, now=T0)
    rows = {row["uri"]: row for row in page["items"]}
    assert set(rows) == {A.uri, B.uri}
    assert rows[A.uri]["event_count"] == 1 and rows[B.uri]["event_count"] == 0
    assert {row["health"] for row in rows.values()} == {"fresh"}
    first = views.list_assets(store, catalog=world.catalog, now=T0, limit=1)
    second = views.list_assets(store, catalog=world.catalog, now=T0, limit=1, token=first["next"])
    assert [r["uri"] for r in first["items"] + second["items"]] == sorted([A.uri, B.uri])
    assert second["next"] is None


# ---- ticks of every schedule kind --------------------------------------------------------------------------


def test_ticks_of_time_only_partitioned_and_asset_and_time_schedules(store: DynamoDbStore) -> None:
    from assetflow import AssetAndTimeSchedule, CronPartitionTimetable

    world = World(
        store,
        Pipeline("hourly", schedule="@hourly", job=JOB),
        Pipeline(
            "daily_partitions", schedule=CronPartitionTimetable("0 6 * * *", key_format="%Y-%m-%d"), job=JOB
        ),
        Pipeline("gated", schedule=AssetAndTimeSchedule("@hourly", A), job=JOB),
    )
    tick = T0 + timedelta(hours=1)
    (hourly,) = world.evaluator.handle_tick("hourly", tick).runs
    assert (hourly.triggered_by, hourly.scheduled_time, hourly.to_json()["triggering_asset_events"]) == (
        "time",
        tick,
        {},
    )
    assert world.evaluator.handle_tick("hourly", tick).runs == []  # a redelivered tick is ignored
    (partition,) = world.evaluator.handle_tick("daily_partitions", T0.replace(hour=6)).runs
    assert partition.partition_key == "2026-11-21"
    # AssetAndTimeSchedule: a tick runs only when the condition holds then, and the run takes the queue.
    assert world.evaluator.handle_tick("gated", tick).runs == []
    world.emit(A, 1)
    assert world.runs("gated") == []  # events alone never start it
    (gated,) = world.evaluator.handle_tick("gated", tick + timedelta(hours=1)).runs
    assert [e.id for e in store.get_run(gated.run_id).triggering_events] == ["e00001"]
    # Paused: ticks are dropped (Airflow creates no run for a paused DAG's ticks either).
    world.ops.pause("hourly", principal="ops")
    assert world.evaluator.handle_tick("hourly", tick + timedelta(hours=1)).runs == []
    assert views.explain(store, world.catalog, "hourly", now=tick)["blocked_by"] == "paused"
