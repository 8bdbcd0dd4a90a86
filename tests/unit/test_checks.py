"""Blocking checks in the core and the job helper: what holds an event, what a release makes, what is refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from assetflow import Asset, Pipeline, SparkJob
from assetflow.core.entries import Check, failed_blocking, held_by_check, parse_checks, released
from assetflow.core.events import AssetEvent
from assetflow.core.scheduler import route_event
from assetflow.usecases.job_state import plan_outlet_events
from assetflow_job.outlets import OutletEventAccessors

T0 = datetime(2026, 11, 21, 9, tzinfo=UTC)
A = Asset("s3://lake/clean/orders")
JOB = SparkJob("spark_jobs/job.py")


def event(checks: object = None, **source: object) -> AssetEvent:
    facts: dict[str, object] = {"type": "run", "pipeline": "clean", "run_id": "r1", **source}
    if checks is not None:
        facts["checks"] = checks
    return AssetEvent(A.uri, "evt-1", T0, {}, facts)


def test_only_a_failed_blocking_check_holds_an_event() -> None:
    assert not held_by_check(event())
    assert not held_by_check(event([{"name": "rows", "passed": False, "blocking": False}]))
    assert not held_by_check(event([{"name": "rows", "passed": True, "blocking": True}]))
    held = event([{"name": "rows", "passed": False, "blocking": True}, {"name": "x", "passed": True}])
    assert held_by_check(held) and failed_blocking(held) == ["rows"]


def test_a_release_is_the_same_event_marked_released_and_only_a_held_event_is_released() -> None:
    held = event([{"name": "rows", "passed": False, "blocking": True}])
    copy = released(held, by="arn:aws:iam::1:user/ops", at=T0)
    assert (copy.id, copy.timestamp, copy.asset) == (held.id, held.timestamp, held.asset)
    assert copy.to_json()["source"]["released"] == {
        "by": "arn:aws:iam::1:user/ops",
        "at": "2026-11-21T09:00:00.000000Z",
    }
    assert not held_by_check(copy)
    with pytest.raises(ValueError, match="not held"):
        released(event(), by="x", at=T0)


def test_a_held_event_is_routed_nowhere_and_its_release_routes_as_any_event() -> None:
    consumers = [(Pipeline("report", schedule=A, job=JOB), ())]
    held = event([{"name": "rows", "passed": False, "blocking": True}])
    routes, skips = route_event(held, consumers)
    assert routes == [] and [(s.pipeline, s.reason) for s in skips] == [
        ("report", "held: blocking check(s) rows failed")
    ]
    routes, skips = route_event(released(held, by="ops", at=T0), consumers)
    assert [r.pipeline for r in routes] == ["report"] and skips == []


def test_malformed_checks_are_refused_with_reasons_and_never_let_data_through() -> None:
    checks, refused = parse_checks(
        [
            {"name": "ok", "passed": True},
            {"name": "rows", "passed": "no", "blocking": True},  # unreadable verdict: failed
            {"name": "", "passed": True, "blocking": True},  # unnamed blocking: kept as failed
            {"name": "flag", "passed": True, "blocking": "yes"},  # unreadable blocking: blocking
            "junk",
            {"name": "ok", "passed": False},  # reported twice: the last verdict stands
        ]
    )
    assert checks == (
        Check("ok", False, False),
        Check("rows", False, True),
        Check("#2", False, True),
        Check("flag", True, True),
    )
    assert len(refused) == 4
    assert parse_checks(None) == ((), [])
    held, reasons = parse_checks("not a list")
    assert held == (Check("checks", False, True),) and reasons


def test_the_job_helper_reports_checks_in_the_outlet_metadata_the_scheduler_reads() -> None:
    outlets = OutletEventAccessors([A.uri], [])
    outlets[A].check("not_empty", passed=False, blocking=True)
    outlets[A].check("schema", True)
    outlets[A].check("not_empty", passed=True, blocking=True)  # a later verdict replaces the first
    (entry,) = outlets.events()
    assert entry["checks"] == [
        {"name": "not_empty", "passed": True, "blocking": True},
        {"name": "schema", "passed": True, "blocking": False},
    ]
    with pytest.raises(ValueError, match="name"):
        outlets[A].check("has space", passed=True)
    with pytest.raises(TypeError):
        outlets[A].check("rows", passed=1)  # type: ignore[arg-type]
    # An outlet without checks keeps the document as it was
    assert "checks" not in OutletEventAccessors([A.uri], []).events()[0]
    # The run-state side plans the checks onto the declared outlet's event
    plan = plan_outlet_events(
        Pipeline("clean", schedule=Asset("s3://lake/raw"), job=JOB, outlets=[A]),
        {"run_id": "r1", "events": outlets.events()},
    )
    (planned,) = plan.events
    assert planned.checks == (Check("not_empty", True, True), Check("schema", True, False))
