"""``blocked_by == "max_active_runs"``: what the store conditions a held transition on (Airflow #56050)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from assetflow import Asset, AssetOrTimeSchedule, Pipeline, SparkJob
from assetflow.core.events import AssetEvent
from assetflow.core.scheduler import QueueEntry, QueueState, advance

T0 = datetime(2026, 11, 21, 8, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B = Asset("x-test://a"), Asset("x-test://b")


def entry(asset: Asset, n: int) -> QueueEntry:
    return QueueEntry(AssetEvent(asset.uri, f"e{n}", T0 + timedelta(seconds=n)))


def test_a_satisfied_queue_at_its_run_limit_is_held() -> None:
    pipeline = Pipeline("p", schedule=[A], job=JOB, max_active_runs=1)

    t = advance(pipeline, QueueState("p"), active_runs=1, now=T0, entries=[entry(A, 1)])

    assert t.changed and t.runs == () and t.blocked_by == "max_active_runs"


def test_runs_up_to_the_limit_with_more_waiting_are_held() -> None:
    pipeline = Pipeline("p", schedule=[A], job=JOB, max_active_runs=2, batch=False)

    t = advance(pipeline, QueueState("p"), active_runs=0, now=T0, entries=[entry(A, n) for n in range(3)])

    assert len(t.runs) == 2 and t.blocked_by == "max_active_runs"


def test_nothing_is_held_when_the_condition_waits_or_there_is_no_limit() -> None:
    both = Pipeline("both", schedule=A & B, job=JOB, max_active_runs=1)
    unlimited = Pipeline("free", schedule=[A], job=JOB)

    waiting = advance(both, QueueState("both"), active_runs=1, now=T0, entries=[entry(A, 1)])
    free = advance(unlimited, QueueState("free"), active_runs=5, now=T0, entries=[entry(A, 1)])
    all_taken = advance(
        Pipeline("p", schedule=[A], job=JOB, max_active_runs=1),
        QueueState("p"),
        active_runs=0,
        now=T0,
        entries=[entry(A, 1)],
    )

    assert waiting.blocked_by != "max_active_runs" and free.blocked_by != "max_active_runs"
    assert len(all_taken.runs) == 1 and all_taken.blocked_by != "max_active_runs"


def test_a_held_tick_is_held() -> None:
    pipeline = Pipeline("t", schedule=AssetOrTimeSchedule("0 * * * *", A), job=JOB, max_active_runs=1)

    t = advance(pipeline, QueueState("t"), active_runs=1, now=T0, ticks=[T0])

    assert t.runs == () and t.after.pending_ticks == (T0,) and t.blocked_by == "max_active_runs"
