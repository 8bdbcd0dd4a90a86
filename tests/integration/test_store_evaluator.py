"""The evaluator on DynamoDB Local: the contract of DESIGN §3 with real conditional writes and transactions."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assetflow import Asset, AssetAlias, Catalog, PartitionedAssetSchedule, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.dynamodb.table import SEEN_SET_PREFIX
from assetflow.core.errors import ConflictError
from assetflow.core.events import AssetEvent, Run, RunState
from assetflow.core.pipeline import Pipeline as PipelineType
from assetflow.core.scheduler import QueueEntry
from assetflow.core.schedules import DailyMapper
from assetflow.ports import SubmissionError, SubmissionRejectedError
from assetflow.usecases.evaluate import Evaluator

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B, C = (Asset(f"x-test://{n}") for n in "abc")


class RecordingLauncher:
    """Stands in for EMR Serverless: records submissions, can be told to fail."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.fail = False
        self.reject = False
        self._lock = threading.Lock()

    def submit(self, run: Run, pipeline: PipelineType) -> str:
        if self.fail:
            raise RuntimeError("ThrottlingException: rate exceeded")
        if self.reject:
            raise SubmissionRejectedError("ValidationException: bad entry point")
        with self._lock:
            self.submitted.append(run.run_id)
        return f"job-{run.run_id}"


class Clock:
    def __init__(self) -> None:
        self._ticks = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return T0 + timedelta(milliseconds=next(self._ticks))


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDbStore:
    db = DynamoDbStore(dynamodb_client, f"assetflow-{uuid.uuid4().hex[:10]}")
    db.create_table()
    return db


def evaluator_for(
    store: DynamoDbStore,
    *pipelines: Pipeline,
    launcher: RecordingLauncher | None = None,
    clock: Clock | None = None,
) -> Evaluator:
    return Evaluator(
        catalog=Catalog.build(pipelines),
        store=store,
        launcher=launcher or RecordingLauncher(),
        clock=clock or Clock(),
    )


def emit(
    store: DynamoDbStore, asset: Asset, n: int, *, key: str | None = None, source: dict | None = None
) -> AssetEvent:
    event = AssetEvent(
        asset.uri, f"e{n:05d}", T0 + timedelta(seconds=n), {"n": n}, source or {"type": "api"}, key
    )
    stored, created = store.put_event(event, dedupe_key=f"test:{n}")
    assert created
    return stored


def test_reference_timeline_on_dynamodb(store: DynamoDbStore) -> None:
    a1, a2, a3 = (Asset(f"s3://bucket/example_asset_{i}") for i in (1, 2, 3))
    evaluator = evaluator_for(store, Pipeline("timeline", schedule=[a1, a2, a3], job=JOB))
    owner = {1: a1, 2: a1, 4: a1, 6: a1, 13: a1, 3: a2, 5: a2, 8: a2, 10: a2, 12: a2, 7: a3, 9: a3, 11: a3}
    runs_at = [n for n in range(1, 14) if evaluator.handle_event(emit(store, owner[n], n)).runs]
    assert runs_at == [7, 13]
    page = store.list_runs("timeline").to_json()
    assert len(page["items"]) == 2
    newest = store.get_run(page["items"][0]["run_id"])
    assert [e.id for e in newest.triggering_events] == [f"e{n:05d}" for n in range(8, 14)]
    assert newest.job_run_id == f"job-{newest.run_id}"
    assert store.list_queue("timeline") == []


def test_redelivered_stream_record_is_not_queued_again(store: DynamoDbStore) -> None:
    evaluator = evaluator_for(store, Pipeline("both", schedule=A & B, job=JOB))
    first = emit(store, A, 1)
    evaluator.handle_event(first)
    evaluator.handle_event(first)  # the stream delivers the record again
    evaluator.handle_event(emit(store, B, 2))
    (run,) = (store.get_run(r["run_id"]) for r in store.list_runs("both").items)
    assert [e.id for e in run.triggering_events] == ["e00001", "e00002"]
    # ...also after the event was consumed by a run.
    assert evaluator.handle_event(first).runs == []
    assert store.list_queue("both") == []


def queue_partition(store: DynamoDbStore, pipeline: str, prefix: str = "") -> list[dict[str, Any]]:
    """The items under a pipeline's (unkeyed) queue partition whose sort keys start with ``prefix``."""
    values = {":p": {"S": f"QUEUE#{pipeline}#"}} | ({":s": {"S": prefix}} if prefix else {})
    answer = store._db.query(
        TableName=store.table,
        KeyConditionExpression="pk = :p" + (" AND begins_with(sk, :s)" if prefix else ""),
        ExpressionAttributeValues=values,
        ConsistentRead=True,
    )
    return list(answer["Items"])


def queue_items(store: DynamoDbStore, pipeline: str) -> list[str]:
    """The sort keys under a pipeline's (unkeyed) queue partition: its entries and seen marks."""
    return sorted(item["sk"]["S"] for item in queue_partition(store, pipeline))


def seen_marks(store: DynamoDbStore, pipeline: str) -> dict[str, str]:
    """The events an (unkeyed) queue marked seen, each with where: in a seen set ("set") or its own marker."""
    marks: dict[str, str] = {}
    for item in queue_partition(store, pipeline, "SEEN"):
        if item["sk"]["S"].startswith("SEEN#"):
            marks[item["sk"]["S"].removeprefix("SEEN#")] = "marker"
        for event_id in item.get("ids", {}).get("SS", []):
            marks[event_id] = "set"
    return marks


def test_an_event_consumed_at_once_writes_no_queue_entry_and_its_run_still_has_it(
    store: DynamoDbStore,
) -> None:
    # Given a batch pipeline on a, and an a & b one that must wait for b
    evaluator = evaluator_for(
        store, Pipeline("on_a", schedule=A, job=JOB), Pipeline("both", schedule=A & B, job=JOB)
    )
    # When an event of a arrives, and is delivered again
    first = emit(store, A, 1)
    (run,) = evaluator.handle_event(first).runs
    assert evaluator.handle_event(first).runs == []
    # Then on_a's run took it without a queue entry or seen marker (the run, named by the event, says the
    # queue took it), and reads it back by reference
    assert queue_items(store, "on_a") == []
    assert [e.id for e in store.get_run(run.run_id).triggering_events] == ["e00001"]
    # and the waiting pipeline queued it as an entry, which the run that b completes then takes
    assert [row["event"]["id"] for row in store.list_queue("both")] == ["e00001"]
    (both,) = evaluator.handle_event(emit(store, B, 2)).runs
    assert [e.id for e in store.get_run(both.run_id).triggering_events] == ["e00001", "e00002"]
    assert any(sk.startswith("G#") for sk in queue_items(store, "both"))


def test_an_event_a_run_takes_alone_at_once_leaves_no_seen_marker_and_is_still_taken_once(
    store: DynamoDbStore,
) -> None:
    # Given a pipeline that makes a run per event, a batch one on the same asset (its arrivals judged one at
    # a time), and one that holds its second event for a free slot
    evaluator = evaluator_for(
        store,
        Pipeline("each", schedule=A, job=JOB, batch=False),
        Pipeline("batched", schedule=A, job=JOB),
        Pipeline("held", schedule=A, job=JOB, batch=False, max_active_runs=1),
    )
    first, second = emit(store, A, 1), emit(store, A, 2)
    made = evaluator.handle_batch([first, second]).runs
    assert len(made) == 5  # each and batched: two runs; held: one, the second event queued
    # Then the runs stand for their seen marks (none written), the held events have a marker each, one queued
    assert queue_items(store, "each") == queue_items(store, "batched") == []
    assert seen_marks(store, "held") == {"e00001": "marker", "e00002": "marker"}
    third = AssetEvent(A.uri, "e00003", T0 + timedelta(seconds=3))
    assert store.already_queued("each", "", [first, second, third]) == {"e00001", "e00002"}
    # When the stream delivers both again, nothing new is made, in one batch or one by one
    assert evaluator.handle_batch([first, second]).runs == []
    assert evaluator.handle_event(second).runs == []
    assert len(store.list_runs("each").items) == len(store.list_runs("batched").items) == 2
    assert len(store.list_runs("held").items) == 1
    assert [row["event"]["id"] for row in store.list_queue("held")] == ["e00002"]


def same_second(
    store: DynamoDbStore,
    asset: Asset,
    count: int,
    *,
    start: int = 0,
    apart: timedelta = timedelta(milliseconds=1),
) -> list[AssetEvent]:
    """``count`` stored events of ``asset`` ``apart`` from each other, with ids as long as an SQS message's."""
    events = []
    for n in range(start, start + count):
        event = AssetEvent(asset.uri, f"sqs-{n:024x}", T0 + n * apart, {"n": n}, {"type": "api"})
        stored, _ = store.put_event(event, dedupe_key=f"test:{asset.uri}:{n}")
        events.append(stored)
    return events


def seen_sets(store: DynamoDbStore, pipeline: str) -> dict[str, dict[str, Any]]:
    """An (unkeyed) queue's seen set items by sort key."""
    return {item["sk"]["S"]: item for item in queue_partition(store, pipeline, SEEN_SET_PREFIX)}


def test_a_waiting_queue_marks_a_seconds_events_in_one_set_and_takes_each_once(store: DynamoDbStore) -> None:
    # Given an a & b pipeline and 60 events of a within a tenth of a second, more than one set item holds
    launcher = RecordingLauncher()
    pipeline = Pipeline("both", schedule=A & B, job=JOB)
    evaluator = evaluator_for(store, pipeline, launcher=launcher)
    events = same_second(store, A, 60)
    # When they come in one batch
    assert evaluator.handle_batch(events).runs == []
    # Then the second's set marks the first of them (one write unit, under 1 KB), the tenth's set the rest
    marks = seen_marks(store, "both")
    assert marks == {e.id: "set" for e in events}
    sets = seen_sets(store, "both")
    assert len(sets) == 2 and all(stored_size(item) <= 1024 for item in sets.values())
    second, tenth = sorted(sets)
    assert tenth == f"{second}.0"
    assert len(sets[second]["ids"]["SS"]) >= 30
    # When the stream delivers them again, together, one by one, and mixed with new ones of the same second
    more = same_second(store, A, 5, start=60)
    assert evaluator.handle_batch(events).runs == []
    assert all(evaluator.handle_event(e).runs == [] for e in events[::7])
    assert evaluator.handle_batch([*events[50:], *more]).runs == []
    # Then each is queued once, and b's event makes one run with every one of them once
    queued = [row["event"]["id"] for row in store.list_queue("both")]
    assert sorted(queued) == sorted(e.id for e in [*events, *more])
    (run,) = evaluator.handle_event(emit(store, B, 1)).runs
    taken = [e.id for e in store.get_run(run.run_id).triggering_events]
    assert sorted(taken) == sorted([*queued, "e00001"])
    assert store.already_queued("both", "", [*events, *more]) == {e.id for e in [*events, *more]}
    assert evaluator.handle_batch(events).runs == [] and store.list_queue("both") == []


def test_events_of_one_instant_fill_their_seconds_sets_then_get_a_marker_each(store: DynamoDbStore) -> None:
    # Given an a & b pipeline and 150 events of a stamped with the same instant (a Kafka batch's append time)
    pipeline = Pipeline("both", schedule=A & B, job=JOB)
    evaluator = evaluator_for(store, pipeline)
    events = same_second(store, A, 150, apart=timedelta(0))
    # When they come in one batch
    assert evaluator.handle_batch(events).runs == []
    # Then the sets of their second, tenth and hundredth are full and the rest have a marker each
    sets = seen_sets(store, "both")
    assert len(sets) == 3 and all(1000 - 40 < stored_size(item) <= 1024 for item in sets.values())
    marks = seen_marks(store, "both")
    assert marks.keys() == {e.id for e in events}
    assert sum(1 for m in marks.values() if m == "set") == sum(len(i["ids"]["SS"]) for i in sets.values())
    assert 0 < sum(1 for m in marks.values() if m == "marker") < 60
    # and a redelivery queues none again
    assert evaluator.handle_batch(events[::-1]).runs == []
    assert len(store.list_queue("both")) == 150


def stored_size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it (names and values; a number at most 21 bytes)."""
    size = 0
    for name, value in item.items():
        (kind, raw), size = next(iter(value.items())), size + len(name.encode())
        size += (
            sum(len(v.encode()) for v in raw) if kind == "SS" else 21 if kind == "N" else len(raw.encode())
        )
    return size


def test_evaluators_racing_over_one_seconds_events_queue_each_once(store: DynamoDbStore) -> None:
    # Given an a & b pipeline and two evaluators handed the same 60 events of a, of one second, at once
    launcher = RecordingLauncher()
    pipeline = Pipeline("race", schedule=A & B, job=JOB)
    evaluators = [evaluator_for(store, pipeline, launcher=launcher) for _ in range(2)]
    events = same_second(store, A, 60)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def handle(evaluator: Evaluator, batch: list[AssetEvent]) -> None:
        try:
            start.wait()
            for _ in range(5):  # the stream hands a failed batch back
                result = evaluator.handle_batch(batch)
                if not result.failed:
                    return
            raise AssertionError("the batch kept failing")
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=handle, args=(evaluators[0], events)),
        threading.Thread(target=handle, args=(evaluators[1], events[::-1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    # Then every event is queued once, marked once, and b's event takes them all in one run (the reference
    # model: one a & b run with every queued event)
    assert sorted(row["event"]["id"] for row in store.list_queue("race")) == sorted(e.id for e in events)
    assert seen_marks(store, "race").keys() == {e.id for e in events}
    (run,) = evaluators[1].handle_event(emit(store, B, 1)).runs
    assert len(store.get_run(run.run_id).triggering_events) == 61


def test_max_active_runs_holds_the_queue_until_a_run_ends(store: DynamoDbStore) -> None:
    evaluator = evaluator_for(store, Pipeline("held", schedule=A, job=JOB, max_active_runs=1))
    (first,) = evaluator.handle_event(emit(store, A, 1)).runs
    assert evaluator.handle_event(emit(store, A, 2)).runs == []
    assert evaluator.handle_event(emit(store, A, 3)).runs == []
    assert [row["event"]["id"] for row in store.list_queue("held")] == ["e00002", "e00003"]
    assert store.active_runs("held") == 1

    run, moved = store.set_run_state(first.run_id, RunState.SUCCESS)
    assert moved and run.state is RunState.SUCCESS
    assert store.set_run_state(first.run_id, RunState.RUNNING) == (run, False)  # late, out of order
    assert store.active_runs("held") == 0
    (second,) = evaluator.release("held").runs
    assert [e.id for e in store.get_run(second.run_id).triggering_events] == ["e00002", "e00003"]
    assert store.active_runs("held") == 1


def test_batch_false_makes_one_run_per_event(store: DynamoDbStore) -> None:
    evaluator = evaluator_for(
        store, Pipeline("each", schedule=A | B, job=JOB, batch=False, max_active_runs=2)
    )
    for n, asset in enumerate([A, B, A], start=1):
        evaluator.handle_event(emit(store, asset, n))
    runs = [store.get_run(r["run_id"]) for r in store.list_runs("each").items]
    assert sorted(e.id for r in runs for e in r.triggering_events) == ["e00001", "e00002"]
    assert [row["event"]["id"] for row in store.list_queue("each")] == ["e00003"]
    store.set_run_state(runs[0].run_id, RunState.FAILED)
    (third,) = evaluator.release("each").runs
    assert [e.id for e in store.get_run(third.run_id).triggering_events] == ["e00003"]


def test_partitioned_pipeline_keeps_a_queue_per_day(store: DynamoDbStore) -> None:
    daily = Pipeline("daily", schedule=PartitionedAssetSchedule(A & B, DailyMapper()), job=JOB)
    plain = Pipeline("plain", schedule=A, job=JOB)
    evaluator = evaluator_for(store, daily, plain)
    evaluator.handle_event(emit(store, A, 1, key="2026-11-21T01:00:00Z"))
    evaluator.handle_event(emit(store, B, 2, key="2026-11-22T01:00:00Z"))
    result = evaluator.handle_event(emit(store, B, 3, key="2026-11-21T09:00:00Z"))
    assert [(r.pipeline, r.partition_key) for r in result.runs] == [("daily", "2026-11-21")]
    assert sorted(store.queue_keys("daily")) == ["2026-11-22"]
    # An event a partitioned run produced reaches only partition-aware pipelines.
    produced = emit(store, A, 4, key="2026-11-22", source={"type": "run", "run_id": "r1", "pipeline": "x"})
    outcome = evaluator.handle_event(produced)
    assert [p for p, _ in outcome.routed] == ["daily"]
    assert [s.pipeline for s in outcome.skipped] == ["plain"]


def test_alias_consumers_see_resolved_assets(store: DynamoDbStore) -> None:
    producer = Pipeline("producer", schedule=C, job=JOB, outlets=[AssetAlias("exports")])
    consumer = Pipeline("consumer", schedule=AssetAlias("exports"), job=JOB)
    evaluator = evaluator_for(store, producer, consumer)
    target = Asset("s3://bucket/exports/acme")
    assert store.add_alias_resolution("exports", target.uri, now=T0)
    assert not store.add_alias_resolution("exports", target.uri, now=T0)
    result = evaluator.handle_event(emit(store, target, 1))
    assert [r.pipeline for r in result.runs] == ["consumer"]


def test_failed_submission_keeps_the_run_and_a_later_invocation_submits_it(store: DynamoDbStore) -> None:
    launcher = RecordingLauncher()
    evaluator = evaluator_for(store, Pipeline("flaky", schedule=A, job=JOB), launcher=launcher)
    launcher.fail = True
    with pytest.raises(SubmissionError):
        evaluator.handle_event(emit(store, A, 1))
    (row,) = store.list_runs("flaky").items
    assert row["state"] == "queued" and row["job_run_id"] is None
    launcher.fail = False
    evaluator.handle_event(emit(store, A, 2))
    runs = {r["run_id"]: r for r in store.list_runs("flaky").items}
    assert set(launcher.submitted) == set(runs)
    assert all(r["job_run_id"] for r in runs.values())


def test_rejected_submission_does_not_fail_the_record_and_is_retried_later(store: DynamoDbStore) -> None:
    launcher = RecordingLauncher()
    evaluator = evaluator_for(store, Pipeline("rejected", schedule=A, job=JOB), launcher=launcher)
    launcher.reject = True
    evaluator.handle_event(emit(store, A, 1))  # no exception: retrying the record cannot help
    (row,) = store.list_runs("rejected").items
    assert row["state"] == "queued" and row["job_run_id"] is None
    launcher.reject = False
    evaluator.handle_event(emit(store, A, 2))
    assert all(r["job_run_id"] for r in store.list_runs("rejected").items)
    assert len(launcher.submitted) == 2


@pytest.mark.slow
def test_racing_evaluators_make_exactly_one_run_per_satisfied_condition(store: DynamoDbStore) -> None:
    # Given an a & b pipeline and 4 evaluator threads that each drain a share of 160 events
    launcher = RecordingLauncher()
    pipeline = Pipeline("race", schedule=A & B, job=JOB)
    clock = Clock()
    evaluators = [evaluator_for(store, pipeline, launcher=launcher, clock=clock) for _ in range(4)]
    events = [emit(store, A if n % 2 else B, n) for n in range(160)]
    errors: list[BaseException] = []
    conflicts: list[int] = []
    redelivered: list[str] = []

    def drain(worker: int) -> None:
        try:
            for event in events[worker::4]:
                # A queue still contended after every attempt fails the record; the stream mapping hands the
                # same record back, as here.
                for _ in range(5):
                    try:
                        conflicts.append(evaluators[worker].handle_event(event).conflicts)
                        break
                    except ConflictError:
                        redelivered.append(event.id)
                else:
                    raise AssertionError(f"event {event.id} stayed contended through 5 deliveries")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=drain, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    # Then no event is lost or consumed twice, and every run had both assets
    runs = [store.get_run(r["run_id"]) for r in _all_runs(store, "race")]
    consumed = [e.id for r in runs for e in r.triggering_events]
    queued = [row["event"]["id"] for row in store.list_queue("race")]
    assert len(consumed) == len(set(consumed))
    assert sorted(consumed + queued) == sorted(e.id for e in events)
    assert all(r.triggering_asset_events.keys() == {A.uri, B.uri} for r in runs)
    # Every run was submitted; a run two evaluators submitted at once (one's retry sweep racing the other's
    # submission) is one job on EMR, whose clientToken answers the repeat with the same job run.
    assert set(launcher.submitted) == {r.run_id for r in runs}
    assert all(r.job_run_id == f"job-{r.run_id}" for r in runs)
    assert len(runs) >= 1
    repeats = len(launcher.submitted) - len(runs)
    print(
        f"racing evaluators: {len(runs)} runs, {sum(conflicts)} lost races retried, {repeats} repeated submits,"
        f" {len(redelivered)} records handed back"
    )


def _all_runs(store: DynamoDbStore, pipeline: str) -> list[dict]:
    rows, token = [], None
    while True:
        page = store.list_runs(pipeline, limit=100, token=token)
        rows += page.items
        if not page.next:
            return rows
        token = page.next


class ConflictOnce:
    """A DynamoDB client whose first transaction loses a race (TransactionConflict), as under load."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.conflicts = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self.conflicts:
            self.conflicts -= 1
            from botocore.exceptions import ClientError

            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                    "CancellationReasons": [{"Code": "TransactionConflict"}, {"Code": "None"}],
                },
                "TransactWriteItems",
            )
        return self._client.transact_write_items(**kwargs)


def test_a_lost_race_is_not_taken_for_a_duplicate(store: DynamoDbStore, dynamodb_client: Any) -> None:
    racy = DynamoDbStore(ConflictOnce(dynamodb_client), store.table)
    kwargs = {"watcher": "w", "reason": "schema", "body": "{}", "facts": {}, "identity": "sqs:q:1", "now": T0}
    with pytest.raises(ConflictError):
        racy.quarantine(**kwargs)  # a transient conflict must fail the message, not acknowledge it
    assert racy.quarantine(**kwargs) is True
    assert racy.quarantine(**kwargs) is False
    assert len(store.list_quarantine().items) == 1
    racy._db.conflicts = 1
    with pytest.raises(ConflictError):
        racy.add_alias_resolution("x", A.uri, now=T0)
    assert racy.add_alias_resolution("x", A.uri, now=T0) is True


class QueryCounter:
    """Wraps a DynamoDB client and counts the Query calls that read a queue's entries, by queue."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.entry_reads: Counter[str] = Counter()

    def query(self, **kwargs: Any) -> Any:
        values = kwargs.get("ExpressionAttributeValues", {})
        queue = values.get(":p", {}).get("S", "")
        if queue.startswith("QUEUE#") and values.get(":g", {}).get("S", "").startswith("G#"):
            self.entry_reads[queue] += 1
        return self._client.query(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_waiting_queue_takes_events_without_being_read(store: DynamoDbStore, dynamodb_client: Any) -> None:
    # Given an a & b pipeline (and a plain pipeline on a) on a store whose queue reads are counted
    counted = QueryCounter(dynamodb_client)
    watched = DynamoDbStore(counted, store.table)
    both = Pipeline("both", schedule=A & B, job=JOB)
    evaluator = evaluator_for(watched, both, Pipeline("just_a", schedule=A, job=JOB))
    # When 30 events of a arrive (one redelivered), then one of b
    events = [emit(store, A, n) for n in range(30)]
    for event in events:
        assert [r.pipeline for r in evaluator.handle_event(event).runs] == ["just_a"]
    evaluator.handle_event(events[7])
    waiting_reads = dict(counted.entry_reads)
    run = evaluator.handle_event(emit(store, B, 99)).runs
    # Then neither queue was read for its events: the waiting one takes them from its head alone, just_a's
    # head shows it empty each time (and the redelivered event is known as seen before anything is read);
    # and b's event made one run of every event of a, once
    head = store.read_queue_head("both")
    assert head.summary is None or head.summary.entries == 0
    assert waiting_reads == {}, waiting_reads
    assert [r.pipeline for r in run] == ["both"]
    full = store.get_run(run[0].run_id)
    assert [e.id for e in full.triggering_asset_events[A.uri]] == [e.id for e in events]
    assert store.list_queue("both") == []


def test_a_queue_changed_without_its_summary_is_read_again(store: DynamoDbStore) -> None:
    both = Pipeline("both", schedule=A & B, job=JOB)
    evaluator = evaluator_for(store, both)
    for n in range(3):
        evaluator.handle_event(emit(store, A, n))
    head = store.read_queue_head("both")
    assert head.summary is not None and head.summary.entries == 3 and head.summary.assets == {A.uri}
    # clear_queue does not keep the summary: its version moves on, the summary no longer counts
    assert store.clear_queue(both, A.uri) == 3
    assert store.read_queue_head("both").summary is None
    evaluator.handle_event(emit(store, A, 3))  # read whole, and the summary written again
    head = store.read_queue_head("both")
    assert head.summary is not None and head.summary.entries == 1
    run = evaluator.handle_event(emit(store, B, 4)).runs
    assert [e.id for e in store.get_run(run[0].run_id).triggering_events] == ["e00003", "e00004"]


def test_appending_from_a_stale_head_loses_the_race(store: DynamoDbStore) -> None:
    both = Pipeline("both", schedule=A & B, job=JOB)
    evaluator = evaluator_for(store, both)
    evaluator.handle_event(emit(store, A, 0))
    stale = store.read_queue_head("both")
    evaluator.handle_event(emit(store, A, 1))
    with pytest.raises(ConflictError):
        store.append_entries(both, stale, [QueueEntry(emit(store, A, 2))])
    with pytest.raises(ValueError, match="cannot take entries"):
        store.append_entries(Pipeline("one", schedule=A, job=JOB, batch=False), stale, [])
    assert store.read_queue_head("both").summary.entries == 2  # type: ignore[union-attr]


def test_an_event_that_is_its_own_dedupe_record_is_stored_and_counted_once(store: DynamoDbStore) -> None:
    # A run's outlet event (its key follows from the run): every delivery of the run's success puts it again.
    event = AssetEvent("s3://lake/own", "ev-own", T0, {"rows": 3}, {"type": "run", "run_id": "r-1"})
    assert store.put_event(event) == (event, True)
    assert store.put_event(event) == (event, False)
    (stored,) = store.list_events("s3://lake/own", limit=10).items
    assert stored["id"] == "ev-own"
    (summary,) = [a for a in store.list_assets().items if a["uri"] == "s3://lake/own"]
    assert summary["event_count"] == 1
    assert store.find_stored(event) == event
    assert store.find_stored(AssetEvent("s3://lake/own", "ev-other", T0)) is None
