"""The scheduler with the event operators: routing (where, key fields, versions, synthetic entries), windows,
paused queues, new schedules' ticks, and a model comparison of advance with all of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assetflow import (
    Asset,
    AssetAlias,
    AssetAndTimeSchedule,
    AssetOrTimeSchedule,
    CronPartitionTimetable,
    DailyMapper,
    PartitionedAssetSchedule,
    Pipeline,
    SparkJob,
    at_least,
    late,
)
from assetflow.core.conditions import Condition
from assetflow.core.entries import QueueEntry, QueueState, failure_events
from assetflow.core.events import AssetEvent, Run, RunState
from assetflow.core.expectations import ArrivalStatus, late_event
from assetflow.core.scheduler import Transition, advance, explain_skips, route_event
from tests.unit.test_operators import WHERES, model_holds, nodes

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B, C = (Asset(f"x-test://{n}") for n in "abc")
L = AssetAlias("exports")
OK = {"status": ["ok"]}


def event(
    asset: Asset,
    n: int,
    *,
    extra: dict[str, Any] | None = None,
    key: str | None = None,
    version: str | None = None,
    seconds: float | None = None,
    source: dict[str, Any] | None = None,
) -> AssetEvent:
    return AssetEvent(
        asset=asset.uri,
        id=f"e{n:05d}",
        timestamp=T0 + timedelta(seconds=n if seconds is None else seconds),
        extra=extra or {},
        source=source or {"type": "api"},
        partition_key=key,
        version=version,
    )


def q(e: AssetEvent, *aliases: str, wheres: tuple[str, ...] = ()) -> QueueEntry:
    return QueueEntry(e, aliases, wheres)


def ids(run: Run) -> list[str]:
    return [e.id for e in run.triggering_events]


# --- routing ------------------------------------------------------------------------------------------


def test_where_routes_matching_events_and_skips_the_rest_with_the_pattern() -> None:
    where = A.where(OK)
    p = Pipeline("p", where & B, JOB)
    routes, skips = route_event(event(A, 1, extra={"status": "ok"}), [(p, ())])
    assert [(r.pipeline, r.wheres, r.counted) for r in routes] == [("p", (where.where_key,), True)]
    routes, skips = route_event(event(A, 2, extra={"status": "bad"}), [(p, ())])
    assert routes == []
    assert skips[0].pipeline == "p"
    assert '{"status": ["ok"]}' in skips[0].reason and where.where_key in skips[0].reason


def test_explain_skips_name_the_missed_patterns_newest_first() -> None:
    loud, quiet = A.where(OK), A.where({"level": [{"numeric": [">", 3]}]})
    p = Pipeline("p", (loud | quiet) & B, JOB, skip_unchanged=True)
    history = [
        (event(A, 1, extra={"status": "bad", "level": 1}), ()),
        (event(A, 2, extra={"status": "ok"}), ()),  # matches: not a skip
        (event(B, 3, version="v1"), ()),  # consumed already
        (event(A, 4, extra={"level": 2}), ()),
    ]
    skips = explain_skips(p, history, consumed_versions={("p", B.uri, "v1")})
    assert [s["event_id"] for s in skips] == ["e00004", "e00003", "e00001"]
    assert [m["pattern"] for m in skips[0]["missed"]] == [OK, {"level": [{"numeric": [">", 3]}]}]
    assert {m["key"] for m in skips[2]["missed"]} == {loud.where_key, quiet.where_key}
    assert "missed" not in skips[1] and "skip_unchanged" in skips[1]["reason"]
    assert skips[0]["timestamp"] == "2026-11-21T08:00:04.000000Z" and skips[0]["asset"] == A.uri


def test_where_matches_a_watcher_events_payload() -> None:
    p = Pipeline("p", A.where(OK), JOB)
    watcher_event = event(A, 1, extra={"payload": {"status": "ok"}, "message": {"queue": "q"}})
    routes, _ = route_event(watcher_event, [(p, ())])
    assert routes[0].wheres == (A.where(OK).where_key,)


def test_an_event_that_a_plain_leaf_counts_is_queued_whatever_its_extra() -> None:
    p = Pipeline("p", A.where(OK) | (A & B), JOB)
    routes, skips = route_event(event(A, 1, extra={"status": "bad"}), [(p, ())])
    assert [(r.wheres, r.counted) for r in routes] == [((), True)] and not skips


def test_where_on_an_alias_uses_the_aliases_the_event_reached_it_through() -> None:
    where = L.where(OK)
    p = Pipeline("p", where, JOB)
    routes, _ = route_event(event(C, 1, extra={"status": "ok"}), [(p, ("exports",))])
    assert routes[0].aliases == ("exports",) and routes[0].wheres == (where.where_key,)
    routes, skips = route_event(event(C, 2, extra={"status": "no"}), [(p, ("exports",))])
    assert not routes and "matches none" in skips[0].reason


def test_skip_unchanged_skips_a_consumed_version_only() -> None:
    p = Pipeline("p", A, JOB, skip_unchanged=True)
    other = Pipeline("o", A, JOB)
    consumed = {("p", A.uri, "etag-1")}
    routes, skips = route_event(
        event(A, 1, version="etag-1"), [(p, ()), (other, ())], consumed_versions=consumed
    )
    assert [r.pipeline for r in routes] == ["o"]
    assert skips[0].pipeline == "p" and "version 'etag-1'" in skips[0].reason
    routes, _ = route_event(event(A, 2, version="etag-2"), [(p, ())], consumed_versions=consumed)
    assert [r.pipeline for r in routes] == ["p"]
    routes, _ = route_event(event(A, 3), [(p, ())], consumed_versions=consumed)  # no version: never skipped
    assert [r.pipeline for r in routes] == ["p"]


def test_runs_report_the_versions_they_consumed() -> None:
    p = Pipeline("p", A & B, JOB, skip_unchanged=True)
    state = QueueState("p", entries=(q(event(A, 1, version="v1")), q(event(A, 2, version="v2"))))
    t = advance(p, state, active_runs=0, now=T0, entries=[q(event(B, 3))])
    assert len(t.runs) == 1
    assert t.consumed_versions == ((A.uri, "v1"), (A.uri, "v2"))
    plain = Pipeline("p", A & B, JOB)
    assert advance(plain, state, active_runs=0, now=T0, entries=[q(event(B, 3))]).consumed_versions == ()


def test_a_key_field_makes_events_of_two_assets_meet_per_tenant() -> None:
    p = Pipeline("p", PartitionedAssetSchedule(A & B, key="tenant"), JOB)
    routes, _ = route_event(event(A, 1, extra={"payload": {"tenant": "acme"}}), [(p, ())])
    assert routes[0].key == "acme"
    routes, _ = route_event(event(B, 2, extra={"tenant": "acme"}), [(p, ())])
    assert routes[0].key == "acme"
    routes, _ = route_event(event(B, 3, extra={"tenant": 42}), [(p, ())])
    assert routes[0].key == "42"
    for extra, reason in (
        ({}, "no field 'tenant'"),
        ({"tenant": {"id": 1}}, "a queue key is a string or an integer"),
        ({"tenant": "a/b"}, "must not contain '/'"),
        ({"tenant": True}, "a queue key is a string"),
    ):
        routes, skips = route_event(event(A, 4, extra=extra), [(p, ())])
        assert not routes and reason in skips[0].reason


def test_a_key_field_with_a_mapper_and_a_nested_path() -> None:
    p = Pipeline("p", PartitionedAssetSchedule(A, DailyMapper(), key="meta.at"), JOB)
    routes, _ = route_event(event(A, 1, extra={"meta": {"at": "2026-11-21T10:00:00Z"}}), [(p, ())])
    assert routes[0].key == "2026-11-21"


def test_failure_and_late_entries_reach_only_the_pipelines_that_ask_for_them() -> None:
    alert = Pipeline("alert", A.failed(), JOB)
    fallback = Pipeline("fallback", late(A), JOB)
    plain = Pipeline("plain", A, JOB)
    consumers = [(alert, ()), (fallback, ()), (plain, ())]
    run = Run("run-1", "producer", RunState.FAILED, T0, partition_key=None)
    (failure,) = failure_events((A.uri,), run, T0)
    routes, skips = route_event(failure, consumers)
    assert [r.pipeline for r in routes] == ["alert"] and not skips
    lateness = late_event(A.uri, ArrivalStatus(True, T0, None, None, None))
    routes, skips = route_event(lateness, consumers)
    assert [r.pipeline for r in routes] == ["fallback"] and not skips
    # a real event of A is queued for plain, and only resolves for the others
    routes, _ = route_event(event(A, 1), consumers)
    assert [(r.pipeline, r.counted) for r in routes] == [
        ("alert", False),
        ("fallback", False),
        ("plain", True),
    ]


def test_synthetic_entries_of_partitioned_runs_go_to_their_key() -> None:
    p = Pipeline("p", PartitionedAssetSchedule(A.failed(), DailyMapper()), JOB)
    run = Run("r", "producer", RunState.FAILED, T0, partition_key="2026-11-21T10:00:00Z")
    (failure,) = failure_events((A.uri,), run, T0)
    routes, _ = route_event(failure, [(p, ())])
    assert routes[0].key == "2026-11-21"
    (unkeyed,) = failure_events((A.uri,), Run("s", "producer", RunState.FAILED, T0), T0)
    routes, skips = route_event(unkeyed, [(p, ())])
    assert not routes and "without a partition key" in skips[0].reason


def test_failure_events_are_deterministic_and_only_for_failed_runs() -> None:
    run = Run("run-1", "producer", RunState.FAILED, T0)
    first = failure_events((A.uri, B.uri, A.uri), run, T0 + timedelta(minutes=1))
    assert [e.asset for e in first] == [A.uri, B.uri]
    assert first == failure_events((A.uri, B.uri), run, T0 + timedelta(minutes=1))
    assert first[0].source["type"] == "failure" and first[0].source["run_id"] == "run-1"
    with pytest.raises(ValueError, match="only a failed run"):
        failure_events((A.uri,), Run("r", "p", RunState.SUCCESS, T0), T0)


# --- advancing: synthetic entries, paused, ticks --------------------------------------------------------


def failure_of(asset: Asset, run_id: str, at: datetime) -> QueueEntry:
    (e,) = failure_events((asset.uri,), Run(run_id, "producer", RunState.FAILED, at), at)
    return QueueEntry(e)


def test_a_later_event_resolves_a_held_failure() -> None:
    p = Pipeline("cleanup", A.failed() & B, JOB)
    failure = failure_of(A, "r1", T0)
    t = advance(p, QueueState("cleanup"), active_runs=0, now=T0, entries=[failure])
    assert t.added == (failure,) and not t.runs
    # the producer ran again and succeeded: the failure is no longer "the last run"
    resolving = QueueEntry(event(A, 10), counted=False)
    t2 = advance(p, t.after, active_runs=0, now=T0, entries=[resolving])
    assert t2.discarded == (failure,) and t2.after.entries == () and t2.changed
    t3 = advance(p, t2.after, active_runs=0, now=T0, entries=[q(event(B, 11))])
    assert not t3.runs


def test_a_failure_older_than_a_queued_event_is_dropped_on_arrival() -> None:
    p = Pipeline("p", A.failed() | A, JOB, max_active_runs=1)
    state = QueueState("p", entries=(q(event(A, 10)),))
    t = advance(p, state, active_runs=1, now=T0, entries=[failure_of(A, "r0", T0)])
    assert not t.changed and "supersedes it" in t.ignored[0]


def test_a_failure_makes_one_run_and_a_redelivery_while_queued_changes_nothing() -> None:
    p = Pipeline("alert", A.failed(), JOB, max_active_runs=1)
    failure = failure_of(A, "r1", T0)
    held = advance(p, QueueState("alert"), active_runs=1, now=T0, entries=[failure])
    assert held.added == (failure,) and held.blocked_by == "max_active_runs"
    assert not advance(p, held.after, active_runs=1, now=T0, entries=[failure]).changed
    t = advance(p, held.after, active_runs=0, now=T0)
    assert [ids(r) for r in t.runs] == [[failure.event.id]]
    # once consumed, a redelivery is the store's to refuse (its dedupe records, as for events)


def test_late_entries_are_resolved_by_an_answering_event() -> None:
    expect_deadline = T0 + timedelta(hours=1)
    status = ArrivalStatus(True, expect_deadline, T0, None, None)
    late_entry = QueueEntry(late_event(A.uri, status))
    p = Pipeline("fallback", late(A) & B, JOB)
    t = advance(p, QueueState("fallback"), active_runs=0, now=expect_deadline, entries=[late_entry])
    stale = QueueEntry(event(A, 1, seconds=-10), counted=False)  # before `since`: answers nothing
    t2 = advance(p, t.after, active_runs=0, now=expect_deadline, entries=[stale])
    assert not t2.changed
    fresh = QueueEntry(event(A, 2, seconds=30), counted=False)
    t3 = advance(p, t2.after, active_runs=0, now=expect_deadline, entries=[fresh])
    assert t3.discarded == (late_entry,)


def test_a_paused_pipeline_queues_and_runs_nothing_until_unpaused() -> None:
    p = Pipeline("p", A, JOB)
    t = advance(p, QueueState("p"), active_runs=0, now=T0, entries=[q(event(A, 1))], paused=True)
    assert t.added and not t.runs and t.blocked_by == "paused"
    t2 = advance(p, t.after, active_runs=0, now=T0)
    assert [ids(r) for r in t2.runs] == [["e00001"]]


def test_ticks_while_paused_are_dropped_and_not_replayed() -> None:
    p = Pipeline("p", "0 6 * * *", JOB)
    six = datetime(2026, 11, 21, 6, tzinfo=UTC)
    t = advance(p, QueueState("p"), active_runs=0, now=six, ticks=[six], paused=True)
    assert not t.runs and t.after.last_tick == six and "paused" in t.ignored[0]
    assert not advance(p, t.after, active_runs=0, now=six, ticks=[six]).runs
    t2 = advance(p, t.after, active_runs=0, now=six, ticks=[six + timedelta(days=1)])
    assert [r.scheduled_time for r in t2.runs] == [six + timedelta(days=1)]


@pytest.mark.parametrize("schedule", [None, A])
def test_ticks_are_refused_without_a_time_part(schedule: Any) -> None:
    with pytest.raises(ValueError, match="no cron or other time schedule"):
        advance(Pipeline("p", schedule, JOB), QueueState("p"), active_runs=0, now=T0, ticks=[T0])


def test_time_only_and_timedelta_schedules_run_at_ticks() -> None:
    for schedule in ("@hourly", timedelta(minutes=30)):
        p = Pipeline("p", schedule, JOB, max_active_runs=1)
        t = advance(p, QueueState("p"), active_runs=0, now=T0, ticks=[T0, T0 + timedelta(minutes=30)])
        assert [r.scheduled_time for r in t.runs] == [T0]
        assert t.after.pending_ticks == (T0 + timedelta(minutes=30),) and t.blocked_by == "max_active_runs"


def test_asset_and_time_runs_at_a_tick_only_when_the_condition_holds_then() -> None:
    p = Pipeline("p", AssetAndTimeSchedule("0 * * * *", A & B), JOB)
    nine = datetime(2026, 11, 21, 9, tzinfo=UTC)
    t = advance(p, QueueState("p"), active_runs=0, now=nine, entries=[q(event(A, 1)), q(event(B, 2))])
    assert t.added and not t.runs and t.blocked_by == "time"  # events alone never start a run
    t2 = advance(p, QueueState("p", entries=(q(event(A, 1)),)), active_runs=0, now=nine, ticks=[nine])
    assert not t2.runs and "does not hold" in t2.ignored[0] and t2.after.last_tick == nine
    t3 = advance(p, t.after, active_runs=0, now=nine, ticks=[nine])
    assert [(r.scheduled_time, ids(r)) for r in t3.runs] == [(nine, ["e00001", "e00002"])]
    assert t3.after.entries == ()


def test_an_asset_and_time_tick_held_by_max_active_runs_takes_the_queue_later() -> None:
    p = Pipeline("p", AssetAndTimeSchedule("0 * * * *", A), JOB, max_active_runs=1)
    nine = datetime(2026, 11, 21, 9, tzinfo=UTC)
    state = QueueState("p", entries=(q(event(A, 1)),))
    t = advance(p, state, active_runs=1, now=nine, ticks=[nine, nine + timedelta(hours=1)])
    assert t.after.pending_ticks == (nine,)  # the second tick coalesces into the held one
    t2 = advance(p, t.after, active_runs=0, now=nine, entries=[q(event(A, 2))])
    assert [ids(r) for r in t2.runs] == [["e00001", "e00002"]]


def test_cron_partition_runs_carry_the_tick_key() -> None:
    schedule = CronPartitionTimetable(
        "0 1 * * *", timezone="Asia/Tokyo", run_offset=-1, key_format="%Y-%m-%d"
    )
    p = Pipeline("p", schedule, JOB)
    tick = datetime(2026, 11, 20, 16, tzinfo=UTC)  # 01:00 on the 21st in Tokyo
    t = advance(p, QueueState("p"), active_runs=0, now=tick, ticks=[tick])
    assert [(r.partition_key, r.scheduled_time) for r in t.runs] == [("2026-11-20", tick)]


def test_asset_or_time_takes_timedelta_and_timetable_keywords() -> None:
    p = Pipeline("p", AssetOrTimeSchedule(timetable=timedelta(hours=1), assets=[A]), JOB)
    t = advance(p, QueueState("p"), active_runs=0, now=T0, ticks=[T0], entries=[q(event(A, 1))])
    assert [r.scheduled_time for r in t.runs] == [T0, None]


# --- windows ------------------------------------------------------------------------------------------


def test_debounce_waits_for_quiet_and_says_when() -> None:
    p = Pipeline("p", A, JOB, debounce=timedelta(seconds=30))
    state = QueueState("p")
    t = advance(p, state, active_runs=0, now=T0 + timedelta(seconds=1), entries=[q(event(A, 1))])
    assert not t.runs and t.blocked_by == "debounce" and t.wake_at == T0 + timedelta(seconds=31)
    t = advance(p, t.after, active_runs=0, now=T0 + timedelta(seconds=20), entries=[q(event(A, 20))])
    assert not t.runs and t.wake_at == T0 + timedelta(seconds=50)
    early = advance(p, t.after, active_runs=0, now=T0 + timedelta(seconds=49))
    assert not early.runs and early.wake_at == T0 + timedelta(seconds=50)
    on_time = advance(p, t.after, active_runs=0, now=T0 + timedelta(seconds=50))
    assert [ids(r) for r in on_time.runs] == [["e00001", "e00020"]] and on_time.wake_at is None


def test_max_wait_runs_a_steady_stream() -> None:
    p = Pipeline("p", A, JOB, debounce=timedelta(seconds=30), max_wait=timedelta(seconds=60))
    state = QueueState("p")
    for second in range(0, 60, 10):
        t = advance(
            p, state, active_runs=0, now=T0 + timedelta(seconds=second), entries=[q(event(A, second))]
        )
        assert not t.runs
        state = t.after
    assert t.wake_at == T0 + timedelta(seconds=60)  # max_wait comes before the next quiet period
    t = advance(p, state, active_runs=0, now=T0 + timedelta(seconds=60), entries=[q(event(A, 60))])
    assert len(t.runs) == 1 and len(t.runs[0].triggering_events) == 7


def test_within_counts_only_recent_events_and_old_ones_ride_along() -> None:
    p = Pipeline("p", A & B, JOB, within=timedelta(minutes=5))
    state = QueueState("p", entries=(q(event(A, 0)), q(event(B, 1))))
    t = advance(p, state, active_runs=0, now=T0 + timedelta(minutes=10), entries=[q(event(B, 600))])
    assert not t.runs and t.blocked_by == "assets"  # the a is ten minutes old
    t2 = advance(p, t.after, active_runs=0, now=T0 + timedelta(minutes=10), entries=[q(event(A, 601))])
    assert [ids(r) for r in t2.runs] == [["e00000", "e00001", "e00600", "e00601"]]


def test_at_least_and_then_in_advance() -> None:
    p = Pipeline("p", at_least(A, 3) | A.then(B, within=timedelta(seconds=5)), JOB)
    t = advance(p, QueueState("p"), active_runs=0, now=T0, entries=[q(event(A, 1)), q(event(B, 10))])
    assert not t.runs
    t2 = advance(p, t.after, active_runs=0, now=T0, entries=[q(event(B, 12, seconds=3))])
    assert [ids(r) for r in t2.runs] == [["e00001", "e00012", "e00010"]]


# --- the model comparison -------------------------------------------------------------------------------


class Conflict(Exception):
    pass


@dataclass
class Store:
    pipeline: Pipeline
    state: QueueState = field(init=False)
    active: set[str] = field(default_factory=set)
    runs: list[Run] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = QueueState(self.pipeline.id)

    def step(self, now: datetime, entries: list[QueueEntry], paused: bool) -> Transition:
        t = advance(
            self.pipeline, self.state, active_runs=len(self.active), now=now, entries=entries, paused=paused
        )
        last = t
        while True:
            if t.changed:
                limit = self.pipeline.max_active_runs
                assert limit is None or len(self.active) + t.active_runs_added <= limit
                self.state = t.after
                self.runs.extend(t.runs)
                self.active.update(r.run_id for r in t.runs)
                self.discarded.extend(e.event.id for e in t.discarded)
            last = t
            if not t.more:
                return last
            t = advance(self.pipeline, self.state, active_runs=len(self.active), now=now, paused=paused)


@dataclass
class Item:
    id: str
    ts: datetime
    kind: str
    asset: str
    aliases: frozenset[str]
    wheres: frozenset[str]
    since: datetime | None = None

    @property
    def sort(self) -> tuple[datetime, str]:
        return (self.ts, self.id)


@dataclass
class Model:
    cond: Condition
    batch: bool
    limit: int | None
    debounce: timedelta | None
    max_wait: timedelta | None
    within: timedelta | None
    queue: list[Item] = field(default_factory=list)
    active: int = 0
    runs: list[tuple[str, ...]] = field(default_factory=list)
    gone: set[str] = field(default_factory=set)

    def answers(self, real: Item, other: Item) -> bool:
        if other.kind == "event" or real.asset != other.asset:
            return False
        if other.kind == "failure":
            return real.sort > other.sort
        return other.since is None or real.ts > other.since

    def add(self, item: Item, counted: bool) -> None:
        if item.kind == "event":
            for other in [o for o in self.queue if self.answers(item, o)]:
                self.queue.remove(other)
                self.gone.add(other.id)
            if not counted:
                return
        elif any(o.kind == "event" and self.answers(o, item) for o in self.queue):
            self.gone.add(item.id)
            return
        if all(o.id != item.id for o in self.queue):
            self.queue.append(item)

    def release(self, now: datetime, paused: bool) -> None:
        self.queue.sort(key=lambda i: i.sort)
        while not paused and self.queue and (self.limit is None or self.active < self.limit):
            if self.batch:
                cutoff = None if self.within is None else now - self.within
                eligible = [i for i in self.queue if i.kind != "event" or cutoff is None or i.ts >= cutoff]
                if not model_holds(self.cond, eligible):  # type: ignore[arg-type]
                    return
                if self.debounce is not None:
                    quiet = max(i.ts for i in self.queue) + self.debounce
                    forced = None if self.max_wait is None else min(i.ts for i in self.queue) + self.max_wait
                    if now < quiet and (forced is None or now < forced):
                        return
                taken, self.queue = self.queue, []
            else:
                taken, self.queue = self.queue[:1], self.queue[1:]
            self.active += 1
            self.runs.append(tuple(i.id for i in taken))


any_of_leaves = st.sampled_from([A, B | L, A.where(OK) | late(C), A.failed() | B, L])
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("event"), st.sampled_from([A, B, C]), st.integers(0, 3), st.booleans(), st.booleans()
        ),
        st.tuples(
            st.just("failure"), st.sampled_from([A, B]), st.integers(0, 3), st.booleans(), st.booleans()
        ),
        st.tuples(st.just("late"), st.sampled_from([A, C]), st.integers(0, 3), st.booleans(), st.booleans()),
        st.tuples(
            st.just("resolve"), st.sampled_from([A, B, C]), st.integers(0, 3), st.booleans(), st.booleans()
        ),
        st.tuples(st.just("end"), st.just(A), st.integers(0, 9), st.booleans(), st.booleans()),
        st.tuples(st.just("wait"), st.just(A), st.integers(1, 12), st.booleans(), st.booleans()),
        st.tuples(st.just("pause"), st.just(A), st.just(0), st.booleans(), st.booleans()),
    ),
    min_size=8,
    max_size=40,
)
windows = st.sampled_from([None, timedelta(seconds=2), timedelta(seconds=5)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.booleans(),
    batch_cond=nodes(),
    single_cond=any_of_leaves,
    limit=st.one_of(st.none(), st.integers(1, 2)),
    debounce=windows,
    extra_wait=st.sampled_from([None, timedelta(0), timedelta(seconds=3)]),
    within=st.sampled_from([None, timedelta(seconds=3), timedelta(seconds=8)]),
    plan=steps,
)
def test_advance_matches_the_model_with_every_operator(
    batch: bool,
    batch_cond: Condition,
    single_cond: Condition,
    limit: int | None,
    debounce: timedelta | None,
    extra_wait: timedelta | None,
    within: timedelta | None,
    plan: list[Any],
) -> None:
    cond = batch_cond if batch else single_cond
    max_wait = None if debounce is None or extra_wait is None else debounce + extra_wait
    if not batch:
        debounce = max_wait = within = None
    pipeline = Pipeline(
        "p",
        cond,
        JOB,
        batch=batch,
        max_active_runs=limit,
        debounce=debounce,
        max_wait=max_wait,
        within=within,
    )
    store = Store(pipeline)
    model = Model(cond, batch, limit, debounce, max_wait, within)
    now = T0
    paused = False
    sent: list[str] = []
    alias_keys = ("exports",)
    for n, (kind, asset, number, flag, other_flag) in enumerate(plan):
        now += timedelta(seconds=1)
        entries: list[QueueEntry] = []
        if kind in ("event", "resolve"):
            wheres = tuple(
                sorted({w.where_key for w, on in zip(WHERES, (flag, other_flag, flag), strict=True) if on})
            )
            aliases = alias_keys if flag else ()
            ev = AssetEvent(asset.uri, f"e{n:04d}", now - timedelta(seconds=number), source={"type": "api"})
            counted = kind == "event"
            entries.append(QueueEntry(ev, aliases if counted else (), wheres if counted else (), counted))
            model.add(
                Item(
                    ev.id,
                    ev.timestamp,
                    "event",
                    asset.uri,
                    frozenset(entries[0].aliases),
                    frozenset(entries[0].wheres),
                ),
                counted,
            )
            if counted:
                sent.append(ev.id)
        elif kind == "failure":
            at = now - timedelta(seconds=number)
            (ev,) = failure_events((asset.uri,), Run(f"run-{n}", "producer", RunState.FAILED, at), at)
            entries.append(QueueEntry(ev))
            model.add(Item(ev.id, ev.timestamp, "failure", asset.uri, frozenset(), frozenset()), True)
            sent.append(ev.id)
        elif kind == "late":
            since = now - timedelta(seconds=1 + number)
            ev = late_event(asset.uri, ArrivalStatus(True, now, since, None, None))
            entries.append(QueueEntry(ev))
            model.add(Item(ev.id, ev.timestamp, "late", asset.uri, frozenset(), frozenset(), since), True)
            sent.append(ev.id)
        elif kind == "end" and store.active:
            store.active.discard(sorted(store.active)[number % len(store.active)])
            model.active -= 1
        elif kind == "wait":
            now += timedelta(seconds=number)
        elif kind == "pause":
            paused = not paused
        t = store.step(now, entries, paused)
        model.release(now, paused)
        assert [tuple(ids(r)) for r in store.runs] == model.runs
        assert (t.wake_at is not None) == (t.blocked_by == "debounce")
        if t.wake_at is not None:
            assert t.wake_at > now

    consumed = [i for r in store.runs for i in ids(r)]
    queued = [e.event.id for e in store.state.entries]
    assert sorted(queued) == sorted(i.id for i in model.queue)
    # nothing lost, nothing consumed twice: every entry sent is consumed, queued, or superseded
    assert len(consumed) == len(set(consumed))
    assert set(sent) == set(consumed) | set(queued) | model.gone
    assert set(store.discarded) <= model.gone


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cond=st.sampled_from(
        [A, at_least(A, 2), A & B, A.then(B, within=timedelta(seconds=2)), at_least(A, 3) | B]
    ),
    debounce=windows,
    extra_wait=st.sampled_from([None, timedelta(0), timedelta(seconds=1), timedelta(seconds=3)]),
    within=st.sampled_from([None, timedelta(seconds=1), timedelta(seconds=3)]),
    limit=st.one_of(st.none(), st.just(1)),
    plan=st.lists(
        st.tuples(st.sampled_from([A, B, None]), st.integers(0, 3), st.integers(0, 2)),
        min_size=5,
        max_size=30,
    ),
)
def test_windows_match_the_model(
    cond: Condition,
    debounce: timedelta | None,
    extra_wait: timedelta | None,
    within: timedelta | None,
    limit: int | None,
    plan: list[Any],
) -> None:
    """Events at whole seconds, so that every window boundary is hit exactly."""
    max_wait = None if debounce is None or extra_wait is None else debounce + extra_wait
    pipeline = Pipeline(
        "p", cond, JOB, debounce=debounce, max_wait=max_wait, within=within, max_active_runs=limit
    )
    store, model = Store(pipeline), Model(cond, True, limit, debounce, max_wait, within)
    now = T0
    for n, (asset, wait, lag) in enumerate(plan):
        now += timedelta(seconds=wait)
        entries = []
        if asset is None and store.active:
            store.active.pop()
            model.active -= 1
        elif asset is not None:
            ev = AssetEvent(asset.uri, f"e{n:04d}", now - timedelta(seconds=lag), source={"type": "api"})
            entries.append(QueueEntry(ev))
            model.add(Item(ev.id, ev.timestamp, "event", asset.uri, frozenset(), frozenset()), True)
        t = store.step(now, entries, False)
        model.release(now, False)
        assert [tuple(ids(r)) for r in store.runs] == model.runs
        if t.wake_at is not None:
            assert t.blocked_by == "debounce" and t.wake_at > now
            # at the wake-up, with nothing new, the debounce is over
            assert (
                advance(pipeline, store.state, active_runs=len(store.active), now=t.wake_at).blocked_by
                != "debounce"
            )


# --- correlation keys and versions against a model ------------------------------------------------------

tenants = st.sampled_from([None, "acme", "globex", 7])
versions = st.sampled_from([None, "v1", "v2"])


@settings(max_examples=300, deadline=None)
@given(
    arrivals=st.lists(st.tuples(st.sampled_from([A, B]), tenants, versions), min_size=1, max_size=30),
    nested=st.booleans(),
)
def test_key_fields_and_skip_unchanged_match_the_model(
    arrivals: list[tuple[Asset, str | int | None, str | None]], nested: bool
) -> None:
    """route_event + advance per queue key, as the evaluator drives them, against a plain model.

    The model: an event without a tenant is skipped; one whose (asset, version) a run of the pipeline consumed
    is skipped; the rest queue per tenant; a tenant's queue runs, taking all of it, once it holds an event of a
    and one of b; the run's versions are then consumed.
    """
    path = "org.tenant" if nested else "tenant"
    pipeline = Pipeline("p", PartitionedAssetSchedule(A & B, key=path), JOB, skip_unchanged=True)
    queues: dict[str, QueueState] = {}
    consumed: set[tuple[str, str, str]] = set()
    runs: list[tuple[str | None, tuple[str, ...]]] = []
    model_queues: dict[str, list[tuple[str, str, str | None]]] = {}
    model_consumed: set[tuple[str, str]] = set()
    model_runs: list[tuple[str | None, tuple[str, ...]]] = []
    for n, (asset, tenant, version) in enumerate(arrivals):
        fields = {} if tenant is None else {"tenant": tenant}
        extra = {"org": fields} if nested else fields
        e = event(asset, n, extra=extra, version=version)
        # the core, as the evaluator drives it
        routes, skips = route_event(e, [(pipeline, ())], consumed_versions=consumed)
        assert len(routes) + len(skips) == 1
        for route in routes:
            state = queues.get(route.key) or QueueState("p", route.key)
            t = advance(pipeline, state, active_runs=0, now=e.timestamp, entries=[route.entry(e)])
            queues[route.key] = t.after
            consumed |= {("p", a, v) for a, v in t.consumed_versions}
            runs += [(r.partition_key, tuple(ids(r))) for r in t.runs]
        # the model
        if tenant is None or (version is not None and (asset.uri, version) in model_consumed):
            continue
        queue = model_queues.setdefault(str(tenant), [])
        queue.append((e.id, asset.uri, version))
        if {A.uri, B.uri} <= {uri for _, uri, _ in queue}:
            model_runs.append((str(tenant), tuple(i for i, _, _ in queue)))
            model_consumed |= {(uri, v) for _, uri, v in queue if v is not None}
            model_queues[str(tenant)] = []
    assert runs == model_runs
    assert {k: [e.event.id for e in s.entries] for k, s in queues.items() if s.entries} == {
        k: [i for i, _, _ in q] for k, q in model_queues.items() if q
    }
