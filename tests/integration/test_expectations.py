"""Expected arrivals on DynamoDB Local, driven by the local ticker with the clock as an input (no sleeping).

The ticker is the ``Deadlines`` port as the local runtime wires it; its handler is the tick function's own
``lambda_handler``; misses reach a fallback pipeline through the real evaluator and store.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assetflow import Asset, Catalog, ExpectedArrival, PartitionedAssetSchedule, Pipeline, SparkJob, late
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.core.events import AssetEvent, Run
from assetflow.core.pipeline import Pipeline as PipelineType
from assetflow.functions import handle_schedule_tick
from assetflow.usecases import views
from assetflow.usecases.expectations import Expectations, arrival_of
from assetflow_dev.ticker import ScheduleTicker

JOB = SparkJob("spark_jobs/job.py")
DAILY = ExpectedArrival("0 6 * * *", grace=timedelta(hours=1))
ORDERS = Asset("s3://landing/orders", expect=DAILY)
PER_DAY = ExpectedArrival("0 6 * * *", grace=timedelta(hours=1), key_format="%Y-%m-%d", key_offset=-1)
SALES = Asset("s3://landing/sales", expect=PER_DAY)


def at(hour: int, minute: int = 0, day: int = 21, second: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


class Clock:
    """The time, set by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class RecordingLauncher:
    def __init__(self) -> None:
        self.submitted: list[str] = []
        self._lock = threading.Lock()

    def submit(self, run: Run, pipeline: PipelineType) -> str:
        with self._lock:
            self.submitted.append(run.run_id)
        return f"job-{run.run_id}"


class RecordingBus:
    def __init__(self) -> None:
        self.published: list[tuple[str, Mapping[str, Any]]] = []

    def wants(self, detail_type: str) -> bool:
        return True

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        self.published.append((detail_type, detail))

    def publish_many(self, events: Any) -> None:
        self.published.extend(events)

    def of(self, detail_type: str) -> list[Mapping[str, Any]]:
        return [d for t, d in self.published if t == detail_type]


class Context:
    function_name = "assetflow-local-schedule-tick"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:tick"
    memory_limit_in_mb = 256
    aws_request_id = "test"


class Harness:
    """A catalog on a fresh table: the tick function's dependencies, with the ticker as its deadlines."""

    def __init__(self, dynamodb_client: Any, *definitions: Any, now: datetime) -> None:
        self.clock = Clock(now)
        self.store = DynamoDbStore(dynamodb_client, f"assetflow-{uuid.uuid4().hex[:10]}")
        self.store.create_table()
        self.catalog = Catalog.build(definitions)
        self.bus = RecordingBus()
        self.launcher = RecordingLauncher()
        self.results: list[dict[str, Any]] = []
        self.ticker = ScheduleTicker({}, self._tick, clock=self.clock)
        from assetflow.usecases.evaluate import Evaluator

        self.evaluator = Evaluator(
            catalog=self.catalog, store=self.store, launcher=self.launcher, clock=self.clock, bus=self.bus
        )
        self.expectations = Expectations(
            catalog=self.catalog,
            store=self.store,
            marks=self.store,
            deadlines=self.ticker,
            clock=self.clock,
            bus=self.bus,
            route=self.evaluator.handle_batch,
        )
        deps = Dependencies(Settings(table_name=self.store.table, catalog_path="unused"))
        deps.__dict__["expectations"] = self.expectations
        self.deps = deps

    def _tick(self, event: dict[str, Any]) -> None:
        self.results.append(handle_schedule_tick.lambda_handler(event, Context(), deps=self.deps))

    def advance(self, now: datetime) -> list[dict[str, Any]]:
        """Move the clock and let the ticker handle what is due; the checks' answers."""
        self.clock.now = now
        before = len(self.results)
        self.ticker.tick_once()
        return self.results[before:]

    def emit(self, asset: Asset, when: datetime, key: str | None = None) -> AssetEvent:
        event = AssetEvent(asset.uri, uuid.uuid4().hex, when, {}, {"type": "api"}, key)
        stored, _ = self.store.put_event(event, dedupe_key=f"test:{event.id}")
        self.evaluator.handle_batch([stored])
        return stored

    def health(self, uri: str) -> str:
        listing = views.list_assets(self.store, catalog=self.catalog, now=self.clock.now)
        return next(row["health"] for row in listing["items"] if row["uri"] == uri)


def test_a_missed_deadline_is_announced_once_runs_the_fallback_and_clears_with_the_next_file(
    dynamodb_client: Any,
) -> None:
    # Given a daily file due by 07:00 (06:00 + 1 h grace) and a fallback pipeline on late(orders)
    fallback = Pipeline("orders_fallback", schedule=late(ORDERS), job=JOB)
    h = Harness(dynamodb_client, Pipeline("orders_etl", schedule=ORDERS, job=JOB), fallback, now=at(5))
    h.emit(ORDERS, at(6, 30, day=20))  # yesterday's file, on time
    assert h.expectations.schedule_all() == {ORDERS.uri: "2026-11-21T07:00:00.000000Z"}
    assert h.ticker.pending_checks() == [(at(7), ORDERS.uri)]
    assert h.health(ORDERS.uri) == "fresh"

    # When the clock passes a second before the deadline, nothing is judged
    assert h.advance(at(6, 59, second=59)) == []
    assert h.health(ORDERS.uri) == "fresh"

    # When it reaches the deadline with no file today
    (answer,) = h.advance(at(7))
    # Then the miss is announced once, the fallback runs, and the next deadline's check is pending
    assert answer["late"] and answer["announced"] and answer["deadline"] == "2026-11-21T07:00:00.000000Z"
    assert answer["queued_for"] == ["orders_fallback"] and len(answer["runs"]) == 1
    assert h.launcher.submitted[1:] == answer["runs"]  # after orders_etl's run of yesterday's file
    (detail,) = h.bus.of("AssetLate")
    assert detail["asset"]["uri"] == ORDERS.uri and detail["deadline"] == "2026-11-21T07:00:00.000000Z"
    assert detail["since"] == "2026-11-20T07:00:00.000000Z" and detail["partition_key"] is None
    assert h.bus.of("AssetChanged") == h.bus.of("AssetChanged")[:1]  # only yesterday's real file
    assert h.ticker.pending_checks() == [(at(7, day=22), ORDERS.uri)]
    assert h.health(ORDERS.uri) == "late"
    assert views.explain(h.store, h.catalog, "orders_etl", now=h.clock.now)["late"] == [
        {"uri": ORDERS.uri, "deadline": "2026-11-21T07:00:00.000000Z", "partition_key": None}
    ]
    assert h.store.late_marks(ORDERS.uri)[0]["deadline"] == "2026-11-21T07:00:00.000000Z"
    run = h.store.get_run(answer["runs"][0])
    assert [e.source["type"] for e in run.triggering_events] == ["late"]

    # A redelivered check (Scheduler retries) announces nothing and runs nothing again
    again = h.expectations.check(ORDERS.uri)
    assert again.status.late and not again.announced and again.runs == []
    assert len(h.bus.of("AssetLate")) == 1 and len(h.launcher.submitted) == 2

    # When today's file comes late, the asset is fresh again, and tomorrow's deadline counts it
    h.advance(at(8))
    h.emit(ORDERS, at(8))
    assert h.health(ORDERS.uri) == "fresh"
    assert views.explain(h.store, h.catalog, "orders_etl", now=h.clock.now)["late"] == []
    (tomorrow,) = h.advance(at(7, day=22))
    assert not tomorrow["late"] and not tomorrow["announced"]
    assert len(h.bus.of("AssetLate")) == 1 and len(h.launcher.submitted) == 3  # + orders_etl's of today's


def test_an_arrival_before_the_fallback_runs_drops_the_late_entry(dynamodb_client: Any) -> None:
    # Given a fallback that needs late(orders) and another asset (it does not run at the miss)
    other = Asset("s3://landing/manual")
    h = Harness(dynamodb_client, Pipeline("fb", schedule=late(ORDERS) & other, job=JOB), now=at(6))
    h.expectations.schedule_all()
    (answer,) = h.advance(at(7))
    assert answer["late"] and answer["queued_for"] == ["fb"] and answer["runs"] == []
    assert [r["event"]["source"]["type"] for r in h.store.list_queue("fb")] == ["late"]
    # When the file arrives, it answers the late entry: the queue drops it, and the other asset runs nothing
    h.emit(ORDERS, at(7, 5))
    assert h.store.list_queue("fb") == []
    h.emit(other, at(7, 6))
    assert h.launcher.submitted == []


def test_per_partition_expectation_waits_for_its_key_and_feeds_a_partitioned_fallback(
    dynamodb_client: Any,
) -> None:
    # Given sales partitions by day, the 20th's expected by 07:00 on the 21st, and a per-key fallback
    fallback = Pipeline("sales_fallback", schedule=PartitionedAssetSchedule(late(SALES)), job=JOB)
    h = Harness(dynamodb_client, fallback, now=at(6))
    h.emit(SALES, at(23, day=19), key="2026-11-19")
    h.emit(SALES, at(5, day=21), key="2026-11-21")  # an early one for the day after: not the awaited key
    h.expectations.schedule_all()
    (answer,) = h.advance(at(7))
    # Then the 20th's partition is late, and the fallback runs for that key
    assert answer["late"] and answer["partition_key"] == "2026-11-20" and answer["announced"]
    (run_id,) = answer["runs"]
    assert h.store.get_run(run_id).partition_key == "2026-11-20"
    assert h.bus.of("AssetLate")[0]["partition_key"] == "2026-11-20"
    assert h.health(SALES.uri) == "late"
    (late_input,) = views.explain(h.store, h.catalog, "sales_fallback", now=h.clock.now)["late"]
    assert late_input["partition_key"] == "2026-11-20"
    # When the 20th arrives (at any time), the asset is fresh; the next deadline waits for the 21st's key
    h.emit(SALES, at(9), key="2026-11-20")
    assert h.health(SALES.uri) == "fresh"
    (tomorrow,) = h.advance(at(7, day=22))
    assert not tomorrow["late"] and tomorrow["partition_key"] == "2026-11-21"


def test_the_keys_of_a_busy_asset_are_read_back_to_the_lookback_only(dynamodb_client: Any) -> None:
    h = Harness(dynamodb_client, Pipeline("p", schedule=SALES, job=JOB), now=at(8))
    h.emit(SALES, at(6, day=20), key="2026-11-20")
    for n in range(30):
        h.emit(SALES, at(6, n, day=21), key=f"noise-{n}")
    assert not arrival_of(h.store, SALES.uri, PER_DAY, now=at(8)).late
    # a scan bounded below the noise does not find it, and says late rather than reading on
    assert arrival_of(h.store, SALES.uri, PER_DAY, now=at(8), max_events=10).late


@pytest.mark.parametrize("bad", [{"expectation": 7, "deadline": "x"}, {"expectation": "u"}])
def test_a_malformed_deadline_check_is_refused(dynamodb_client: Any, bad: dict[str, Any]) -> None:
    h = Harness(dynamodb_client, Pipeline("p", schedule=ORDERS, job=JOB), now=at(8))
    with pytest.raises(ValueError, match="deadline check needs"):
        handle_schedule_tick.lambda_handler(bad, Context(), deps=h.deps)


def test_a_one_run_per_event_fallback_keeps_the_late_entry_that_triggered_it(dynamodb_client: Any) -> None:
    # A late entry has no event item to reference: the run keeps it inline, and shows it
    h = Harness(dynamodb_client, Pipeline("fb", schedule=late(ORDERS), job=JOB, batch=False), now=at(6))
    h.expectations.schedule_all()
    (answer,) = h.advance(at(7))
    (run_id,) = answer["runs"]
    (late_entry,) = h.store.get_run(run_id).triggering_events
    assert late_entry.source["type"] == "late" and late_entry.timestamp == at(7)
    shown = views.show_run(h.store, run_id)["triggering_asset_events"]
    assert [e["source"]["type"] for e in shown[ORDERS.uri]] == ["late"]
