"""The end-of-run race (Airflow #56050): an event queued while the pipeline's only active run ends.

The evaluator decides on a queue from two reads: the queue, and the pipeline's active-run count. If the run
ends between the count's read and the evaluator's commit, the run's end finds nothing to release (the event is
not queued yet) and the evaluator commits "queued, held by max_active_runs" against a count that is no longer
true: the event waits with no run until another event comes. The interleaving is pinned here at the store's
seam (the evaluator is paused right after it read the count), against DynamoDB Local; then many runs end
while events arrive from several evaluators at once, and no queue is left waiting with a free slot.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.core.events import OUTLET_TOKEN_SCHEME, AssetEvent, Run
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.job_state import RunStates
from assetflow_dev import client

pytestmark = pytest.mark.integration

A = Asset("x-test://race/a")
ONE_AT_A_TIME = Pipeline("one_at_a_time", schedule=[A], job=SparkJob("spark_jobs/job.py"), max_active_runs=1)
T0 = datetime(2026, 11, 21, 8, tzinfo=UTC)


class PausingStore(DynamoDbStore):
    """The real store; a thread that sets ``pause_after_count`` stops right after reading the active-run count."""

    def __init__(self, client_: Any, table: str) -> None:
        super().__init__(client_, table)
        self.pause_after_count = threading.local()
        self.counted = threading.Event()
        self.resume = threading.Event()
        #: Up to this many seconds between reading the count and going on (a slow network, a busy container).
        self.jitter = 0.0
        self._rng = random.Random(56050)

    def read_queue_snapshots(self, wanted: Any, **kwargs: Any) -> Any:
        # The evaluator's one read of a batch's queues: their heads and their pipelines' active-run counts.
        seen = super().read_queue_snapshots(wanted, **kwargs)
        if self.jitter:
            time.sleep(self._rng.random() * self.jitter)
        if getattr(self.pause_after_count, "on", False):
            self.pause_after_count.on = False
            self.counted.set()
            assert self.resume.wait(30), "the test never resumed the evaluator"
        return seen


class Launcher:
    """The launcher port: every run gets a job run id at once; idempotent on the run id, as EMR's token is."""

    def __init__(self) -> None:
        self.started: dict[str, Run] = {}
        self._lock = threading.Lock()

    @property
    def runs(self) -> list[Run]:
        return list(self.started.values())

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        with self._lock:
            self.started.setdefault(run.run_id, run)
        return f"job-{run.run_id}"


class NoOutputs:
    def outlet_metadata(self, pipeline: str, run_id: str, *, token_scheme: int = OUTLET_TOKEN_SCHEME) -> None:
        return None


@dataclass
class World:
    store: PausingStore
    evaluator: Evaluator
    states: RunStates
    launcher: Launcher
    sequence: list[int] = field(default_factory=lambda: [0])

    def event(self) -> AssetEvent:
        self.sequence[0] += 1
        n = self.sequence[0]
        stored, _ = self.store.put_event(AssetEvent(A.uri, f"e{n:05d}", T0 + timedelta(milliseconds=n)))
        return stored

    def active(self) -> list[dict[str, Any]]:
        return [
            r
            for r in self.store.list_runs(ONE_AT_A_TIME.id, limit=1000).items
            if r["state"] in ("queued", "running")
        ]

    def end(self, run_id: str) -> None:
        # EMR names the job in its state change: assetflow names a job after its run
        self.states.handle_state_change(f"job-{run_id}", "SUCCESS", "app", job_run_name=run_id)

    def stranded(self) -> list[str]:
        """Queued events of a pipeline with a free slot and a satisfied condition: nothing will run them."""
        queued = self.store.list_queue(ONE_AT_A_TIME.id)
        if queued and not self.active():
            return [q["event"]["id"] for q in queued]
        return []


@pytest.fixture
def world(dynamodb_local: Any) -> Iterator[World]:
    dynamodb = client("dynamodb", dynamodb_local.endpoint)
    store = PausingStore(dynamodb, f"race-{uuid.uuid4().hex[:10]}")
    store.create_table()
    launcher = Launcher()
    clock = lambda: datetime.now(UTC)  # noqa: E731
    catalog = Catalog.build([ONE_AT_A_TIME])
    evaluator = Evaluator(catalog=catalog, store=store, launcher=launcher, clock=clock, sleep=lambda _: None)
    states = RunStates(catalog=catalog, store=store, outputs=NoOutputs(), evaluator=evaluator, clock=clock)
    yield World(store, evaluator, states, launcher)
    dynamodb.delete_table(TableName=store.table)


def test_an_event_queued_while_the_only_active_run_ends_is_not_stranded(world: World) -> None:
    # Given a run of the pipeline, holding its only slot
    world.evaluator.handle_event(world.event())
    (running,) = world.active()

    # When a new event's evaluation reads the count (1: no slot) and pauses there...
    late = world.event()

    def evaluate() -> None:
        world.store.pause_after_count.on = True
        world.evaluator.handle_event(late)

    evaluator = threading.Thread(target=evaluate)
    evaluator.start()
    assert world.store.counted.wait(30)
    # ...while the run ends (the slot frees, and the run's release finds no queued event yet)...
    world.end(running["run_id"])
    assert world.active() == []
    # ...and then commits
    world.store.resume.set()
    evaluator.join(30)

    # Then the event did not stay queued with a free slot: it has its run
    assert world.stranded() == []
    (run,) = world.active()
    assert [
        e["id"] for e in world.store.get_run(run["run_id"]).to_json()["triggering_asset_events"][A.uri]
    ] == [late.id]


ROUNDS = 60


@pytest.mark.slow
def test_events_arriving_as_runs_end_are_never_stranded_in_many_rounds(world: World) -> None:
    # Given a run holding the pipeline's only slot in every round, and reads of the count that take a while
    world.store.jitter = 0.03
    stranded_rounds = []
    errors: list[BaseException] = []
    world.evaluator.handle_event(world.event())
    for round_ in range(ROUNDS):
        (running,) = world.active()
        event = world.event()
        start = threading.Barrier(2)

        def at_once(action: Any, start: threading.Barrier = start) -> None:
            try:
                start.wait(10)
                action()
            except BaseException as exc:
                errors.append(exc)

        # When, at the same moment, the evaluator receives the new event and the run ends
        threads = [
            threading.Thread(target=at_once, args=(lambda e=event: world.evaluator.handle_event(e),)),
            threading.Thread(target=at_once, args=(lambda r=running["run_id"]: world.end(r),)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

        # Then the event is never left queued with the slot free: it has its run
        assert errors == []
        if world.stranded():
            stranded_rounds.append(round_)
            world.evaluator.release(ONE_AT_A_TIME.id)  # unstick it, and go on counting
    assert stranded_rounds == []
    (last,) = world.active()
    world.end(last["run_id"])
    consumed = [e.id for run in world.launcher.runs for e in run.triggering_events]
    assert sorted(consumed) == [f"e{n:05d}" for n in range(1, ROUNDS + 2)]
    assert world.store.active_runs(ONE_AT_A_TIME.id) == 0
