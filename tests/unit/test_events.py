"""Asset events and runs: timestamps, ids, JSON shapes (DESIGN §5), ordering and run states."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assetflow.core.errors import DocumentError
from assetflow.core.events import (
    EMR_JOB_STATES,
    AssetEvent,
    Run,
    RunState,
    can_transition,
    derive_id,
    format_timestamp,
    group_events,
    parse_timestamp,
    previous_states,
)

T0 = datetime(2026, 11, 21, 10, 15, tzinfo=UTC)
EVENT_KEYS = {"asset", "id", "timestamp", "extra", "source", "partition_key"}
RUN_KEYS = {
    "run_id",
    "pipeline",
    "state",
    "created_at",
    "partition_key",
    "job_run_id",
    "triggering_asset_events",
}


def event(asset: str = "s3://b/a", eid: str = "e1", at: datetime = T0, **kwargs: Any) -> AssetEvent:
    return AssetEvent(asset=asset, id=eid, timestamp=at, **kwargs)


# --- timestamps -------------------------------------------------------------------------------


def test_timestamp_format() -> None:
    assert (
        format_timestamp(datetime(2026, 11, 21, 10, 15, 0, 123456, tzinfo=UTC))
        == "2026-11-21T10:15:00.123456Z"
    )
    assert format_timestamp(T0) == "2026-11-21T10:15:00.000000Z"


def test_timestamp_is_converted_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert format_timestamp(datetime(2026, 1, 1, 1, 0, tzinfo=plus_two)) == "2025-12-31T23:00:00.000000Z"


def test_naive_timestamps_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        format_timestamp(datetime(2026, 11, 21))
    with pytest.raises(ValueError, match="timezone-aware"):
        event(at=datetime(2026, 11, 21))


aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=5, minutes=30))]),
)


@settings(max_examples=200, deadline=None)
@given(first=aware_datetimes, second=aware_datetimes)
def test_timestamps_are_fixed_width_and_sort_as_times(first: datetime, second: datetime) -> None:
    a, b = format_timestamp(first), format_timestamp(second)
    assert len(a) == len(b) == 27
    assert (a < b) == (first < second)
    assert parse_timestamp(a) == first


def test_timestamps_before_year_1000_keep_the_width() -> None:
    assert format_timestamp(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000000Z"


def test_parse_timestamp_accepts_offsets_and_returns_utc() -> None:
    assert parse_timestamp("2026-11-21T12:15:00+02:00") == T0
    assert parse_timestamp("2026-11-21T10:15:00Z").tzinfo is UTC


@pytest.mark.parametrize("text", ["2026-11-21T10:15:00", "yesterday", "", None, 1700000000])
def test_parse_timestamp_refuses_naive_or_garbage(text: Any) -> None:
    with pytest.raises(DocumentError):
        parse_timestamp(text)


# --- ids --------------------------------------------------------------------------------------


def test_derive_id_is_deterministic_and_prefixed() -> None:
    first = derive_id("evt", "sqs", "deliveries", "msg-1")
    assert first == derive_id("evt", "sqs", "deliveries", "msg-1")
    assert first.startswith("evt-")
    assert len(first) == len("evt-") + 24
    assert all(c in "0123456789abcdef" for c in first[4:])


def test_derive_id_depends_on_every_part_and_their_boundaries() -> None:
    base = derive_id("evt", "a", "b")
    assert derive_id("evt", "a", "c") != base
    assert derive_id("evt", "ab") != base
    assert derive_id("evt", "a", "b", "") != base
    assert derive_id("run", "a", "b") != base
    assert derive_id("evt", "a", "b").split("-", 1)[1] == derive_id("run", "a", "b").split("-", 1)[1]


def test_derive_id_is_stable_across_releases() -> None:
    # ids are persisted and used as idempotency tokens, so the derivation must never change:
    # sha256 of the parts joined by the unit separator, first 24 hex digits
    expected = "run-" + hashlib.sha256(b"p\x1f1").hexdigest()[:24]
    assert derive_id("run", "p", 1) == expected == "run-99b5a616d83d411aab1a7885"
    assert derive_id("run", "p", "1") == expected


# --- AssetEvent ---------------------------------------------------------------------------------


def test_event_needs_asset_and_id() -> None:
    with pytest.raises(ValueError, match="needs an asset URI and an id"):
        event(asset="")
    with pytest.raises(ValueError, match="needs an asset URI and an id"):
        event(eid="")


def test_event_timestamp_is_normalised_to_utc_microseconds() -> None:
    plus_two = timezone(timedelta(hours=2))
    e = event(at=datetime(2026, 11, 21, 12, 15, 0, 5, tzinfo=plus_two))
    assert e.timestamp == datetime(2026, 11, 21, 10, 15, 0, 5, tzinfo=UTC)
    assert e.timestamp.tzinfo is UTC


def test_event_extra_and_source_are_frozen_copies() -> None:
    extra = {"payload": {"rows": [1]}}
    e = event(extra=extra, source={"type": "api", "principal": "me"})
    extra["payload"]["rows"].append(2)
    assert e.to_json()["extra"] == {"payload": {"rows": [1]}}
    with pytest.raises(TypeError):
        e.extra["x"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        e.id = "other"  # type: ignore[misc]


def test_event_document_shape() -> None:
    e = event(
        extra={"k": "v"},
        source={"type": "watcher", "watcher": "w", "kind": "sqs"},
        partition_key="2026-11-21",
    )
    doc = e.to_json()
    assert set(doc) == EVENT_KEYS
    assert doc == {
        "asset": "s3://b/a",
        "id": "e1",
        "timestamp": "2026-11-21T10:15:00.000000Z",
        "extra": {"k": "v"},
        "source": {"type": "watcher", "watcher": "w", "kind": "sqs"},
        "partition_key": "2026-11-21",
    }
    assert json.loads(json.dumps(doc)) == doc


@pytest.mark.parametrize(
    "e",
    [
        event(),
        event(extra={"payload": "text", "message": {"offset": 42, "headers": {}}}, partition_key="k"),
        event(source={"type": "run", "pipeline": "p", "run_id": "r"}, at=T0 + timedelta(microseconds=7)),
    ],
)
def test_event_round_trip(e: AssetEvent) -> None:
    assert AssetEvent.from_json(e.to_json()) == e
    assert AssetEvent.from_json(json.loads(json.dumps(e.to_json()))) == e


def test_event_from_json_tolerates_missing_optional_keys() -> None:
    e = AssetEvent.from_json({"asset": "s3://b/a", "id": "e1", "timestamp": "2026-11-21T10:15:00Z"})
    assert (dict(e.extra), dict(e.source), e.partition_key) == ({}, {}, None)


@pytest.mark.parametrize(
    "doc",
    [
        {"id": "e1", "timestamp": "2026-11-21T10:15:00Z"},
        {"asset": "s3://b/a", "timestamp": "2026-11-21T10:15:00Z"},
        {"asset": "s3://b/a", "id": "e1"},
        {"asset": "s3://b/a", "id": "e1", "timestamp": "2026-11-21T10:15:00"},
        {"asset": "s3://b/a", "id": "", "timestamp": "2026-11-21T10:15:00Z"},
        {"asset": "s3://b/a", "id": "e1", "timestamp": "2026-11-21T10:15:00Z", "extra": ["x"]},
    ],
)
def test_event_from_json_refuses_bad_documents(doc: dict[str, Any]) -> None:
    with pytest.raises(DocumentError, match="invalid asset event document"):
        AssetEvent.from_json(doc)


def test_event_hash_and_equality() -> None:
    assert hash(event()) == hash(event(extra={"x": 1}))
    assert event() == event()
    assert event() != event(eid="e2")


def test_from_partitioned_run() -> None:
    run_source = {"type": "run", "pipeline": "p", "run_id": "r"}
    assert event(source=run_source, partition_key="2026-11-21").from_partitioned_run is True
    assert event(source=run_source).from_partitioned_run is False
    assert (
        event(
            source={"type": "watcher", "watcher": "w", "kind": "kafka"}, partition_key="k"
        ).from_partitioned_run
        is False
    )


# --- grouping ---------------------------------------------------------------------------------


def test_group_events_orders_by_timestamp_then_id() -> None:
    e1 = event("s3://b/a", "b", T0)
    e2 = event("s3://b/a", "a", T0)  # same time: the id breaks the tie
    e3 = event("s3://b/a", "0", T0 + timedelta(microseconds=1))
    e4 = event("s3://b/a", "z", T0 - timedelta(seconds=1))
    f1 = event("s3://b/0", "x", T0)

    grouped = group_events([e1, e3, f1, e2, e4])

    assert list(grouped) == ["s3://b/0", "s3://b/a"]
    assert [e.id for e in grouped["s3://b/a"]] == ["z", "a", "b", "0"]
    assert grouped["s3://b/0"] == (f1,)


def test_group_events_does_not_depend_on_input_order() -> None:
    events = [event(f"s3://b/{i % 3}", f"e{i:02d}", T0 + timedelta(seconds=i % 4)) for i in range(24)]
    expected = group_events(events)
    shuffled = events[:]
    random.Random(7).shuffle(shuffled)
    assert group_events(shuffled) == expected
    assert group_events([]) == {}


def test_sort_key() -> None:
    assert event().sort_key == (T0, "e1")


# --- run states ---------------------------------------------------------------------------------

ORDER = [RunState.QUEUED, RunState.RUNNING, RunState.SUCCESS]
FINAL = [RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED]


@pytest.mark.parametrize(
    ("current", "allowed"),
    [
        (RunState.QUEUED, {RunState.RUNNING, RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED}),
        (RunState.RUNNING, {RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED}),
        (RunState.SUCCESS, set()),
        (RunState.FAILED, set()),
        (RunState.CANCELLED, set()),
    ],
)
def test_transition_table(current: RunState, allowed: set[RunState]) -> None:
    assert {new for new in RunState if can_transition(current, new)} == allowed


def test_no_state_moves_to_itself_or_backwards() -> None:
    for state in RunState:
        assert can_transition(state, state) is False
    assert can_transition(RunState.RUNNING, RunState.QUEUED) is False
    for final in FINAL:
        assert not any(can_transition(final, new) for new in RunState)


def test_previous_states_is_the_inverse_of_the_table() -> None:
    for new in RunState:
        assert previous_states(new) == frozenset(s for s in RunState if can_transition(s, new))
    assert previous_states(RunState.QUEUED) == frozenset()
    assert previous_states(RunState.RUNNING) == frozenset({RunState.QUEUED})


def test_active_states() -> None:
    assert [s for s in RunState if s.active] == [RunState.QUEUED, RunState.RUNNING]
    assert [s.value for s in RunState] == ["queued", "running", "success", "failed", "cancelled"]


def test_emr_job_states() -> None:
    assert EMR_JOB_STATES == {
        "SUBMITTED": RunState.QUEUED,
        "PENDING": RunState.QUEUED,
        "SCHEDULED": RunState.QUEUED,
        "QUEUED": RunState.QUEUED,
        "RUNNING": RunState.RUNNING,
        "SUCCESS": RunState.SUCCESS,
        "FAILED": RunState.FAILED,
        "CANCELLING": None,
        "CANCELLED": RunState.CANCELLED,
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(sorted(EMR_JOB_STATES)), max_size=12))
def test_any_emr_state_sequence_applied_with_the_table_never_leaves_a_final_state(
    sequence: list[str],
) -> None:
    state = RunState.QUEUED
    history = [state]
    for emr_state in sequence:
        new = EMR_JOB_STATES[emr_state]
        if new is not None and can_transition(state, new):
            state = new
            history.append(state)
    # states only move forward, at most one final state, and it is the last
    rank = {
        RunState.QUEUED: 0,
        RunState.RUNNING: 1,
        RunState.SUCCESS: 2,
        RunState.FAILED: 2,
        RunState.CANCELLED: 2,
    }
    assert [rank[s] for s in history] == sorted({rank[s] for s in history})
    assert sum(1 for s in history if s in FINAL) <= 1


# --- Run --------------------------------------------------------------------------------------


def make_run(**kwargs: Any) -> Run:
    base: dict[str, Any] = {
        "run_id": "run-1",
        "pipeline": "p",
        "state": RunState.RUNNING,
        "created_at": T0,
        "partition_key": "2026-11-21",
        "job_run_id": "00f1",
        "triggering_asset_events": group_events(
            [
                event("s3://b/a", "e2", T0),
                event("s3://b/a", "e1", T0),
                event("s3://b/b", "e3", T0 - timedelta(1)),
            ]
        ),
    }
    return Run(**{**base, **kwargs})


def test_run_document_shape() -> None:
    doc = make_run().to_json()
    assert set(doc) == RUN_KEYS | {"scheduled_time", "submission_error", "triggered_by", "conf", "ended_at"}
    assert doc["ended_at"] is None  # still running
    assert doc["triggered_by"] == "assets"
    assert doc["conf"] is None
    assert doc["state"] == "running"
    assert doc["created_at"] == "2026-11-21T10:15:00.000000Z"
    assert doc["scheduled_time"] is None
    assert [e["id"] for e in doc["triggering_asset_events"]["s3://b/a"]] == ["e1", "e2"]
    assert all(set(e) == EVENT_KEYS for events in doc["triggering_asset_events"].values() for e in events)


@pytest.mark.parametrize(
    "run",
    [
        make_run(),
        make_run(state=RunState.QUEUED, partition_key=None, job_run_id=None, triggering_asset_events={}),
        make_run(triggering_asset_events={}, scheduled_time=datetime(2026, 11, 21, 6, tzinfo=UTC)),
        make_run(triggering_asset_events={}, triggered_by="manual", conf={"full": True, "days": [1, 2]}),
        make_run(triggered_by="replay", replay_of="run-1", conf={"a": {"b": None}}),
        make_run(triggered_by="backfill"),
        make_run(state=RunState.SUCCESS, ended_at=datetime(2026, 11, 21, 10, 20, tzinfo=UTC)),
    ],
)
def test_run_round_trip(run: Run) -> None:
    assert Run.from_json(run.to_json()) == run
    assert Run.from_json(json.loads(json.dumps(run.to_json()))) == run


def test_triggered_by_defaults_from_the_scheduler_kinds_and_replays_name_their_run() -> None:
    assert make_run().triggered_by == "assets"
    assert make_run(scheduled_time=datetime(2026, 11, 21, 6, tzinfo=UTC)).triggered_by == "time"
    replay = make_run(triggered_by="replay", replay_of="run-1").to_json()
    assert replay["replay_of"] == "run-1"
    assert "replay_of" not in make_run().to_json()
    # A run stored before these fields existed reads as the scheduler made it.
    old = make_run().to_json()
    del old["triggered_by"], old["conf"]
    assert Run.from_json(old).triggered_by == "assets"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"triggered_by": "cron"}, "triggered_by is one of"),
        ({"triggered_by": "replay"}, "replay_of exactly when"),
        ({"replay_of": "run-1"}, "replay_of exactly when"),
        ({"conf": ["not", "an", "object"]}, "conf is a JSON object"),
    ],
)
def test_runs_refuse_unknown_triggers_and_bad_conf(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_run(**fields)


@pytest.mark.parametrize(
    ("field", "value"),
    [("created_at", datetime(2026, 11, 21, 10, 15)), ("scheduled_time", datetime(2026, 11, 21, 6))],
)
def test_runs_refuse_naive_datetimes(field: str, value: datetime) -> None:
    with pytest.raises(ValueError, match=f"{field} must be timezone-aware"):
        make_run(**{field: value})


def test_triggering_events_are_all_events_in_order() -> None:
    assert [e.id for e in make_run().triggering_events] == ["e3", "e1", "e2"]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda d: d.update({"state": "paused"}),
        lambda d: d.update({"created_at": "yesterday"}),
        lambda d: d.pop("run_id"),
        lambda d: d.update({"triggering_asset_events": {"s3://b/a": [{}]}}),
    ],
)
def test_run_from_json_refuses_bad_documents(tamper: Any) -> None:
    doc = make_run().to_json()
    tamper(doc)
    with pytest.raises(DocumentError, match="invalid run document"):
        Run.from_json(doc)


def test_an_event_may_carry_a_data_version() -> None:
    at = datetime(2026, 11, 21, tzinfo=UTC)
    plain = AssetEvent("s3://b/k", "e1", at)
    versioned = AssetEvent("s3://b/k", "e2", at, version='"9bb58f26192e4ba00f01e2e7b136bbd8"')
    assert set(plain.to_json()) == EVENT_KEYS  # DESIGN §5's shape is unchanged without a version
    assert versioned.to_json()["version"] == '"9bb58f26192e4ba00f01e2e7b136bbd8"'
    assert AssetEvent.from_json(versioned.to_json()) == versioned
    assert AssetEvent.from_json(plain.to_json()).version is None
    with pytest.raises(ValueError, match="version is a non-empty string"):
        AssetEvent("s3://b/k", "e3", at, version="")
