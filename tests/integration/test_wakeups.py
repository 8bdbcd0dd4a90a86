"""One-time wake-ups on EventBridge Scheduler's API (moto's server): one schedule per queue and deadline."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from assetflow.adapters.wakeups import EventBridgeSchedulerWakeUps, wake_schedule_name
from assetflow_dev import MotoServer, client

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:tick"
ROLE = "arn:aws:iam::123456789012:role/schedules"


def test_a_wake_up_is_a_self_deleting_one_time_schedule_created_once(moto_server: MotoServer) -> None:
    scheduler: Any = client("scheduler", moto_server.endpoint)
    group = f"wake-{uuid.uuid4().hex[:8]}"
    scheduler.create_schedule_group(Name=group)
    wakeups = EventBridgeSchedulerWakeUps(
        scheduler,
        group=group,
        role_arn=ROLE,
        target_arn=TARGET,
        dead_letter_arn="arn:aws:sqs:us-east-1:1:dlq",
        clock=lambda: NOW,
    )
    deadline = NOW + timedelta(minutes=5, microseconds=250)
    wakeups.wake_at("orders_etl", "2026-11-21", deadline)
    wakeups.wake_at("orders_etl", "2026-11-21", deadline)  # asked again: the same schedule
    (listed,) = scheduler.list_schedules(GroupName=group)["Schedules"]
    found = scheduler.get_schedule(Name=listed["Name"], GroupName=group)
    assert (
        found["Name"] == wake_schedule_name("orders_etl", "2026-11-21", deadline) and len(found["Name"]) <= 64
    )
    assert found["ScheduleExpression"] == "at(2026-11-21T10:05:01)"  # rounded up: never before the deadline
    assert found["ScheduleExpressionTimezone"] == "UTC"
    assert found["ActionAfterCompletion"] == "DELETE"
    assert found["Target"]["Arn"] == TARGET and found["Target"]["RoleArn"] == ROLE
    assert json.loads(found["Target"]["Input"]) == {
        "pipeline": "orders_etl",
        "queue_key": "2026-11-21",
        "wake_at": "2026-11-21T10:05:00.000250Z",
    }
    # A deadline already past is scheduled a moment from now (Scheduler refuses past times).
    wakeups.wake_at("orders_etl", "", NOW - timedelta(minutes=1))
    expressions = {
        scheduler.get_schedule(Name=s["Name"], GroupName=group)["ScheduleExpression"]
        for s in scheduler.list_schedules(GroupName=group)["Schedules"]
    }
    assert expressions == {"at(2026-11-21T10:05:01)", "at(2026-11-21T10:00:01)"}
