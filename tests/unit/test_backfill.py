"""The backfill planner: the runs a schedule would have made from stored events and ticks in a past window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assetflow import Asset, AssetAndTimeSchedule, DailyMapper, PartitionedAssetSchedule, Pipeline, SparkJob
from assetflow.core.backfill import backfill_run_id, plan_backfill, rerun_id, stale_runs
from assetflow.core.catalog import Catalog
from assetflow.core.errors import DefinitionError
from assetflow.core.events import AssetEvent, Run, RunState

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


# ---- stale outputs (backfill --stale) ------------------------------------------------------------------


def versioned(code_version: str | None) -> Pipeline:
    return Pipeline(
        "etl", schedule=[Asset("x-a://raw")], job=SparkJob("jobs/etl.py", code_version=code_version)
    )


def run(n: int, state: RunState, version: str | None, rerun_of: str | None = None) -> Run:
    return Run(
        f"r{n}",
        "etl",
        state,
        T0 + timedelta(minutes=n),
        code_version=version,
        rerun_of=rerun_of,
        triggered_by="backfill" if rerun_of else None,
    )


def test_stale_runs_are_the_newest_live_run_of_each_output_made_by_another_version() -> None:
    history = [
        run(1, RunState.SUCCESS, "1"),
        run(2, RunState.FAILED, "1"),  # made nothing
        run(3, RunState.SUCCESS, None),  # before versions were declared: stale too
        run(4, RunState.SUCCESS, "2"),  # current
        run(5, RunState.SUCCESS, "1"),
        run(6, RunState.RUNNING, "2", rerun_of="r5"),  # being made again now
        run(7, RunState.SUCCESS, "1", rerun_of="r1"),  # an older re-run of r1 (still version 1)
        run(8, RunState.FAILED, "2", rerun_of="r3"),  # a failed re-run leaves r3 stale
    ]
    assert [r.run_id for r in stale_runs(versioned("2"), history)] == ["r3", "r7"]
    # r5's re-run is still running: judged once it ends
    assert [r.run_id for r in stale_runs(versioned("3"), history)] == ["r3", "r4", "r7"]
    with pytest.raises(ValueError, match="declares no code_version"):
        stale_runs(versioned(None), history)
    assert rerun_id("etl", "r1", "2") == rerun_id("etl", "r1", "2") != rerun_id("etl", "r1", "3")


def test_code_version_is_validated_and_kept_in_the_catalog_and_on_runs() -> None:
    for bad in ("", " ", 2, "x" * 129):
        with pytest.raises(DefinitionError, match="code_version"):
            SparkJob("jobs/etl.py", code_version=bad)  # type: ignore[arg-type]
    doc = Catalog.build([versioned("7")]).to_document()
    assert doc["pipelines"]["etl"]["job"]["code_version"] == "7"
    assert Catalog.from_document(doc).pipelines["etl"].job.code_version == "7"
    assert "code_version" not in Catalog.build([versioned(None)]).to_document()["pipelines"]["etl"]["job"]
    made = run(9, RunState.SUCCESS, "7", rerun_of="r1")
    assert Run.from_json(made.to_json()) == made
    assert {"code_version", "rerun_of"}.isdisjoint(run(1, RunState.SUCCESS, None).to_json())


def test_backfill_decides_with_the_event_operators_as_live() -> None:
    a, b = Asset("x-a://orders"), Asset("x-a://payments")
    events = [
        AssetEvent(a.uri, "e1", T0 + timedelta(seconds=1), {"amount": 5}, {"type": "api"}, version="v1"),
        AssetEvent(a.uri, "e2", T0 + timedelta(seconds=2), {"amount": 500}, {"type": "api"}, version="v1"),
        AssetEvent(b.uri, "e3", T0 + timedelta(seconds=3), {}, {"type": "api"}),
        AssetEvent(a.uri, "e4", T0 + timedelta(seconds=4), {"amount": 900}, {"type": "api"}, version="v1"),
        AssetEvent(a.uri, "e5", T0 + timedelta(seconds=5), {"amount": 900}, {"type": "api"}, version="v2"),
        AssetEvent(b.uri, "e6", T0 + timedelta(seconds=6), {}, {"type": "api"}),
    ]
    big = a.where({"amount": [{"numeric": [">", 100]}]})
    pipeline = Pipeline("p", big.then(b), SparkJob("jobs/p.py"), skip_unchanged=True)
    plan = plan_backfill(pipeline, [(e, ()) for e in events], start=T0, end=T0 + timedelta(minutes=1))
    assert [[e.id for e in r.events] for r in plan.runs] == [["e2", "e3"], ["e5", "e6"]]
    reasons = [s.reason for s in plan.skipped]
    assert "matches none of the schedule's patterns" in reasons[0]  # e1
    assert "version 'v1'" in reasons[1] and "skip_unchanged" in reasons[1]  # e4
