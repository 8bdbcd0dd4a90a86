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
