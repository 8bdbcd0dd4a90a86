"""The local stand-in for EventBridge Scheduler: each cron time once, from the start, retried when it fails."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from assetflow.core.conditions import Asset
from assetflow.core.schedules import AssetOrTimeSchedule
from assetflow_dev.ticker import ScheduleTicker


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_ticks_each_cron_time_once_from_the_start_and_retries_a_failed_one() -> None:
    # Given: a pipeline ticking every 15 minutes, started at 10:07
    clock = Clock(datetime(2026, 11, 21, 10, 7, tzinfo=UTC))
    received: list[dict[str, Any]] = []
    fail_next = [True]

    def handler(event: dict[str, Any]) -> None:
        if fail_next[0]:
            fail_next[0] = False
            raise RuntimeError("throttled")
        received.append(event)

    schedule = AssetOrTimeSchedule("*/15 * * * *", Asset("s3://b/a"))
    ticker = ScheduleTicker({"p": schedule}, handler, clock=clock)
    ticker.start()
    ticker.stop()

    # When: nothing is due, then 10:15 fails once, then 10:15 and 10:30 are due
    assert ticker.tick_once() == 0
    clock.now += timedelta(minutes=10)
    assert ticker.tick_once() == 0
    clock.now += timedelta(minutes=15)
    handled = ticker.tick_once()

    # Then: no backfill before 10:07; 10:15 retried and handled once; 10:30 after it
    assert handled == 2
    assert [e["scheduled_time"][:16] for e in received] == ["2026-11-21T10:15", "2026-11-21T10:30"]
    assert {e["pipeline"] for e in received} == {"p"}
    assert ticker.tick_once() == 0


def test_every_schedule_with_a_time_part_ticks_and_manual_or_asset_only_ones_never_do() -> None:
    from assetflow import AssetAndTimeSchedule, Catalog, CronPartitionTimetable, Pipeline, SparkJob
    from assetflow_dev.ticker import time_schedules

    a = Asset("s3://b/a")
    job = SparkJob("spark_jobs/job.py")
    catalog = Catalog.build(
        [
            Pipeline("manual", schedule=None, job=job),
            Pipeline("assets", schedule=a, job=job),
            Pipeline("cron", schedule="*/15 * * * *", job=job),
            Pipeline("preset", schedule="@hourly", job=job),
            Pipeline("delta", schedule=timedelta(minutes=30), job=job),
            Pipeline("either", schedule=AssetOrTimeSchedule("*/15 * * * *", a), job=job),
            Pipeline("both", schedule=AssetAndTimeSchedule("*/15 * * * *", a), job=job),
            Pipeline(
                "partitions", schedule=CronPartitionTimetable("0 * * * *", key_format="%Y-%m-%dT%H"), job=job
            ),
        ]
    )
    schedules = time_schedules(catalog)
    assert sorted(schedules) == ["both", "cron", "delta", "either", "partitions", "preset"]

    clock = Clock(datetime(2026, 11, 21, 10, 7, tzinfo=UTC))
    received: list[dict[str, Any]] = []
    ticker = ScheduleTicker(schedules, received.append, clock=clock)
    ticker.start()
    ticker.stop()
    clock.now = datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    ticker.tick_once()
    by_pipeline: dict[str, list[str]] = {}
    for event in received:
        by_pipeline.setdefault(event["pipeline"], []).append(event["scheduled_time"][11:16])
    assert by_pipeline == {
        "cron": ["10:15", "10:30", "10:45", "11:00"],
        "preset": ["11:00"],
        "delta": ["10:30", "11:00"],
        "either": ["10:15", "10:30", "10:45", "11:00"],
        "both": ["10:15", "10:30", "10:45", "11:00"],
        "partitions": ["11:00"],
    }


def test_wake_ups_fire_once_at_their_time_and_a_failing_one_is_retried() -> None:
    clock = Clock(datetime(2026, 11, 21, 10, 0, tzinfo=UTC))
    received: list[dict[str, Any]] = []
    failures = [1]

    def handler(event: dict[str, Any]) -> None:
        if failures[0]:
            failures[0] -= 1
            raise RuntimeError("throttled")
        received.append(event)

    ticker = ScheduleTicker({}, handler, clock=clock)
    at = datetime(2026, 11, 21, 10, 5, tzinfo=UTC)
    ticker.wake_at("p", "", at)
    ticker.wake_at("p", "", at)  # the same wake-up asked twice is kept once
    ticker.wake_at("p", "2026-11-21", at + timedelta(minutes=1))
    assert ticker.tick_once() == 0
    clock.now = at
    assert ticker.tick_once() == 0  # failed: kept for the next pass
    assert ticker.tick_once() == 1
    assert received == [{"pipeline": "p", "queue_key": "", "wake_at": "2026-11-21T10:05:00.000000Z"}]
    clock.now = at + timedelta(minutes=2)
    assert ticker.tick_once() == 1
    assert received[-1]["queue_key"] == "2026-11-21"
    assert ticker.pending_wakes() == []


def test_deadline_checks_fire_at_their_deadline_beside_wake_ups_and_are_waited_for_exactly() -> None:
    clock = Clock(datetime(2026, 11, 21, 6, 59, 59, 500000, tzinfo=UTC))
    received: list[dict[str, Any]] = []
    ticker = ScheduleTicker({}, received.append, clock=clock, interval=1.0)
    deadline = datetime(2026, 11, 21, 7, 0, tzinfo=UTC)
    ticker.check_at("s3://landing/orders", deadline)
    ticker.check_at("s3://landing/orders", deadline)  # asked again (a retried check): kept once
    ticker.wake_at("p", "", deadline + timedelta(seconds=1))
    assert ticker.pending_checks() == [(deadline, "s3://landing/orders")]
    # Half a second before it, the ticker waits half a second, not its one-second interval
    assert ticker._until_next() == 0.5
    assert ticker.tick_once() == 0
    clock.now = deadline
    assert ticker.tick_once() == 1
    assert received == [{"expectation": "s3://landing/orders", "deadline": "2026-11-21T07:00:00.000000Z"}]
    assert ticker.checks == 1 and ticker.wakes == 0 and ticker.pending_checks() == []
    assert ticker.pending_wakes() == [(deadline + timedelta(seconds=1), "p", "")]
