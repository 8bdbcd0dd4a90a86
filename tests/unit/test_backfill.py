"""The backfill planner: the runs a schedule would have made from stored events and ticks in a past window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assetflow import Asset, AssetAndTimeSchedule, DailyMapper, PartitionedAssetSchedule, Pipeline, SparkJob
from assetflow.core.backfill import backfill_run_id, plan_backfill
from assetflow.core.events import AssetEvent

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("jobs/job.py")
A, B = Asset("x-test://a"), Asset("x-test://b")


def ev(
    asset: Asset, n: int, *, key: str | None = None, at: datetime | None = None
) -> tuple[AssetEvent, tuple[str, ...]]:
    event = AssetEvent(
        asset.uri, f"e{n:03d}", at or T0 + timedelta(minutes=n), source={"type": "api"}, partition_key=key
    )
    return event, ()


def test_the_reference_timeline_makes_the_runs_airflow_makes() -> None:
    a1, a2, a3 = (Asset(f"s3://bucket/example_asset_{i}") for i in (1, 2, 3))
    owner = {1: a1, 2: a1, 4: a1, 6: a1, 13: a1, 3: a2, 5: a2, 8: a2, 10: a2, 12: a2, 7: a3, 9: a3, 11: a3}
    events = [ev(owner[n], n) for n in range(1, 14)]
    pipeline = Pipeline("timeline", schedule=[a1, a2, a3], job=JOB)
    plan = plan_backfill(pipeline, events, start=T0, end=T0 + timedelta(hours=1))
    assert [[e.id for e in r.events] for r in plan.runs] == [
        [f"e{n:03d}" for n in range(1, 8)],
        [f"e{n:03d}" for n in range(8, 14)],
    ]
    assert [r.at for r in plan.runs] == [T0 + timedelta(minutes=7), T0 + timedelta(minutes=13)]
    again = plan_backfill(pipeline, list(reversed(events)), start=T0, end=T0 + timedelta(hours=1))
    assert [r.run_id for r in again.runs] == [r.run_id for r in plan.runs]  # deterministic, order-free
    assert plan.runs[0].run_id == backfill_run_id("timeline", "", None, plan.runs[0].events)


def test_the_window_is_start_inclusive_end_exclusive() -> None:
    pipeline = Pipeline("each", schedule=A, job=JOB, batch=False)
    events = [ev(A, 0), ev(A, 30), ev(A, 60)]
    plan = plan_backfill(pipeline, events, start=T0, end=T0 + timedelta(minutes=60))
    assert [r.events[0].id for r in plan.runs] == ["e000", "e030"]
    with pytest.raises(ValueError, match="start before end"):
        plan_backfill(pipeline, events, start=T0, end=T0)


def test_a_debounce_deadline_inside_the_window_makes_its_run() -> None:
    pipeline = Pipeline("quiet", schedule=A, job=JOB, debounce=timedelta(minutes=10))
    events = [ev(A, 0), ev(A, 5), ev(A, 30)]
    plan = plan_backfill(pipeline, events, start=T0, end=T0 + timedelta(minutes=35))
    # 0 and 5 run together once quiet for 10 minutes (at 15); 30's deadline (40) is after the window.
    assert [[e.id for e in r.events] for r in plan.runs] == [["e000", "e005"]]
    assert plan.runs[0].at == T0 + timedelta(minutes=15)


def test_ticks_and_asset_and_time_schedules() -> None:
    hourly = Pipeline("hourly", schedule="@hourly", job=JOB)
    plan = plan_backfill(hourly, [], start=T0, end=T0 + timedelta(hours=3))
    assert [r.scheduled_time for r in plan.runs] == [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    gated = Pipeline("gated", schedule=AssetAndTimeSchedule("@hourly", A & B), job=JOB)
    plan = plan_backfill(gated, [ev(A, 10), ev(B, 70)], start=T0, end=T0 + timedelta(hours=3))
    # Only the 10:00 tick sees both; it takes the queue.
    assert [(r.scheduled_time, [e.id for e in r.events]) for r in plan.runs] == [
        (T0 + timedelta(hours=2), ["e010", "e070"])
    ]


def test_partition_aware_pipelines_plan_one_queue_per_key() -> None:
    pipeline = Pipeline("daily", schedule=PartitionedAssetSchedule(A & B, DailyMapper()), job=JOB)
    events = [
        ev(A, 1, key="2026-11-20T10:00:00Z"),
        ev(A, 2, key="2026-11-21T10:00:00Z"),
        ev(B, 3, key="2026-11-21T11:00:00Z"),
        ev(B, 4),  # no partition key: never reaches a partition-aware pipeline
    ]
    plan = plan_backfill(pipeline, events, start=T0, end=T0 + timedelta(hours=1))
    assert [(r.partition_key, [e.id for e in r.events]) for r in plan.runs] == [
        ("2026-11-21", ["e002", "e003"])
    ]
    assert [s.reason for s in plan.skipped] == [
        "partition-aware pipeline ignores events without a partition key"
    ]
