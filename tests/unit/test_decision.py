"""The decision and explain: one reason, its precedence, DESIGN §5's JSON, and agreement with advance."""

from __future__ import annotations

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
    DailyMapper,
    PartitionedAssetSchedule,
    Pipeline,
    SparkJob,
    at_least,
    late,
)
from assetflow.core.conditions import Condition
from assetflow.core.decision import (
    PRECEDENCE,
    QueueView,
    decide,
    explain,
    explain_pipeline,
    progress,
    queue_progress,
)
from assetflow.core.entries import QueueEntry, QueueState
from assetflow.core.events import AssetEvent
from assetflow.core.queues import QueueHead, QueueSummary
from assetflow.core.scheduler import advance
from tests.unit.test_operators import WHERES, nodes

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B, C = (Asset(f"x-test://{n}") for n in "abc")
L = AssetAlias("exports")
OK = {"status": ["ok"]}
DESIGN_KEYS = {"pipeline", "due", "blocked_by", "missing", "updated", "required", "condition"}


def q(
    asset: Asset, n: int, *, kind: str = "event", aliases: tuple[str, ...] = (), wheres: tuple[str, ...] = ()
) -> QueueEntry:
    return QueueEntry(
        AssetEvent(
            asset.uri,
            f"{kind[0]}{n:04d}",
            T0 + timedelta(seconds=n),
            source={"type": kind if kind != "event" else "api"},
        ),
        aliases,
        wheres,
    )


def state(*entries: QueueEntry, pending: tuple[datetime, ...] = (), key: str = "") -> QueueState:
    return QueueState("p", key=key, entries=entries, pending_ticks=pending)


# --- the JSON -------------------------------------------------------------------------------------------


def test_explain_has_design_s_keys_and_a_tree() -> None:
    p = Pipeline("p", (A & B) | C, JOB)
    doc = explain(p, state(q(A, 1)), active_runs=0, now=T0)
    assert set(doc) >= DESIGN_KEYS
    assert doc["pipeline"] == "p" and doc["due"] is False and doc["blocked_by"] == "assets"
    assert doc["missing"] == ["x-test://b"]
    assert (doc["updated"], doc["required"]) == (1, 3)
    assert doc["condition"] == {
        "op": "any",
        "value": False,
        "children": [
            {
                "op": "all",
                "value": False,
                "children": [
                    {"op": "asset", "value": True, "uri": "x-test://a", "queued": 1},
                    {"op": "asset", "value": False, "uri": "x-test://b", "queued": 0},
                ],
            },
            {"op": "asset", "value": False, "uri": "x-test://c", "queued": 0},
        ],
    }
    assert (doc["paused"], doc["queued"], doc["key"], doc["wake_at"], doc["next_tick"]) == (
        False,
        1,
        None,
        None,
        None,
    )


def test_a_due_pipeline_has_no_reason_and_nothing_missing() -> None:
    doc = explain(Pipeline("p", A | B, JOB), state(q(A, 1)), active_runs=0, now=T0)
    assert (doc["due"], doc["blocked_by"], doc["missing"], doc["updated"], doc["required"]) == (
        True,
        None,
        [],
        1,
        2,
    )


def test_aliases_and_operators_in_x_of_n() -> None:
    where = B.where(OK)
    p = Pipeline("p", at_least(A, 2) & where & L & A.failed() & late(C), JOB)
    doc = explain(p, state(q(A, 1), q(B, 2), q(C, 3, aliases=("exports",))), active_runs=0, now=T0)
    # a, b, the alias; failed and late are not updates. b is updated though its event missed the pattern
    assert (doc["updated"], doc["required"]) == (3, 3)
    assert doc["missing"] == ["x-test://a", "x-test://b", "x-test://c"]
    where_node = doc["condition"]["children"][1]
    assert (where_node["op"], where_node["queued"], where_node["missed"]) == ("where", 0, 1)


def test_within_shows_in_x_of_n() -> None:
    p = Pipeline("p", A & B, JOB, within=timedelta(seconds=10))
    doc = explain(p, state(q(A, 1), q(B, 30)), active_runs=0, now=T0 + timedelta(seconds=35))
    assert (doc["updated"], doc["missing"]) == (1, ["x-test://a"])


def test_explain_of_time_and_manual_schedules() -> None:
    manual = explain(Pipeline("p", None, JOB), state(), active_runs=0, now=T0)
    assert (manual["blocked_by"], manual["condition"], manual["required"], manual["next_tick"]) == (
        "time",
        None,
        0,
        None,
    )
    daily = explain(Pipeline("p", "@daily", JOB), state(), active_runs=0, now=T0)
    assert (daily["blocked_by"], daily["next_tick"]) == ("time", "2026-11-22T00:00:00.000000Z")


# --- precedence -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pipeline", "queue", "active", "paused", "now", "reason"),
    [
        (Pipeline("p", A, JOB), state(q(A, 1)), 0, True, T0, "paused"),
        (Pipeline("p", A & B, JOB, max_active_runs=1), state(q(A, 1)), 1, True, T0, "paused"),
        (
            Pipeline("p", AssetOrTimeSchedule("@hourly", A), JOB, max_active_runs=1),
            state(pending=(T0,)),
            1,
            False,
            T0,
            "max_active_runs",
        ),
        (Pipeline("p", AssetAndTimeSchedule("@hourly", A), JOB), state(q(A, 1)), 0, False, T0, "time"),
        (Pipeline("p", AssetAndTimeSchedule("@hourly", A & B), JOB), state(q(A, 1)), 0, False, T0, "assets"),
        (Pipeline("p", "@hourly", JOB), state(), 0, False, T0, "time"),
        (Pipeline("p", A & B, JOB, max_active_runs=1), state(q(A, 1)), 1, False, T0, "assets"),
        (
            Pipeline("p", A, JOB, debounce=timedelta(minutes=1), max_active_runs=1),
            state(q(A, 1)),
            1,
            False,
            T0,
            "debounce",
        ),
        (Pipeline("p", A, JOB, max_active_runs=1), state(q(A, 1)), 1, False, T0, "max_active_runs"),
        (
            Pipeline("p", A, JOB, batch=False, max_active_runs=1),
            state(q(A, 1)),
            1,
            False,
            T0,
            "max_active_runs",
        ),
        (Pipeline("p", A, JOB, batch=False), state(), 0, False, T0, "assets"),
    ],
)
def test_one_reason_by_precedence(
    pipeline: Pipeline, queue: QueueState, active: int, paused: bool, now: datetime, reason: str
) -> None:
    decision = decide(pipeline, queue, active_runs=active, now=now, paused=paused)
    assert (decision.due, decision.blocked_by) == (False, reason)
    assert explain(pipeline, queue, active_runs=active, now=now, paused=paused)["blocked_by"] == reason
    assert set(PRECEDENCE) == {"paused", "max_active_runs", "time", "assets", "debounce"}


def test_debounce_reports_when_it_ends() -> None:
    p = Pipeline("p", A, JOB, debounce=timedelta(minutes=1), max_wait=timedelta(minutes=5))
    doc = explain(p, state(q(A, 0), q(A, 30)), active_runs=0, now=T0 + timedelta(seconds=40))
    assert (doc["blocked_by"], doc["wake_at"]) == ("debounce", "2026-11-21T08:01:30.000000Z")
    doc = explain(p, state(q(A, 0), q(A, 290)), active_runs=0, now=T0 + timedelta(seconds=295))
    assert doc["wake_at"] == "2026-11-21T08:05:00.000000Z"  # max_wait before the quiet period


def test_explain_refuses_a_foreign_queue_and_naive_now() -> None:
    p = Pipeline("p", A, JOB)
    with pytest.raises(ValueError, match="queue of 'q' given to pipeline 'p'"):
        explain(p, QueueState("q"), active_runs=0, now=T0)
    with pytest.raises(ValueError, match="aware"):
        decide(p, QueueState("p"), active_runs=0, now=datetime(2026, 1, 1))


def test_explain_over_partitions_shows_the_most_advanced_one() -> None:
    p = Pipeline("p", PartitionedAssetSchedule(A & B & C, DailyMapper()), JOB)
    queues = [
        state(q(A, 1), key="2026-11-20"),
        state(q(A, 2), q(B, 3), key="2026-11-21"),
        state(key="2026-11-22"),
    ]
    doc = explain_pipeline(p, queues, active_runs=0, now=T0)
    assert (doc["key"], doc["updated"], doc["missing"]) == ("2026-11-21", 2, ["x-test://c"])
    assert [(x["key"], x["updated"]) for x in doc["partitions"]] == [
        ("2026-11-20", 1),
        ("2026-11-21", 2),
        ("2026-11-22", 0),
    ]
    due = explain_pipeline(
        p, [*queues, state(q(A, 4), q(B, 5), q(C, 6), key="2026-11-23")], active_runs=0, now=T0
    )
    assert (due["key"], due["due"]) == ("2026-11-23", True)
    empty = explain_pipeline(Pipeline("p", A, JOB), [], active_runs=0, now=T0)
    assert (empty["due"], empty["blocked_by"], "partitions" in empty) == (False, "assets", False)


def test_explain_on_a_thousand_entries_is_linear() -> None:
    p = Pipeline("p", (at_least(A, 2000) & B.where(OK)) | A.then(C, within=timedelta(seconds=1)), JOB)
    entries = tuple(
        q((A, B)[n % 2], n, wheres=(B.where(OK).where_key,) if n % 4 == 1 else ()) for n in range(1000)
    )
    doc = explain(p, QueueState("p", entries=entries), active_runs=0, now=T0)
    assert doc["queued"] == 1000 and doc["condition"]["children"][0]["children"][0]["queued"] == 500


def test_progress_counts_subjects_once() -> None:
    p = Pipeline("p", A & A.where(OK) & at_least(A, 3) & A.then(B), JOB)
    assert progress(p, QueueView([q(A, 1)], now=T0)) == (1, 2)
    assert queue_progress(p, [q(A, 1), q(B, 2)], now=T0) == (2, 2)
    windowed = Pipeline("w", A & B, JOB, within=timedelta(seconds=5))
    assert queue_progress(windowed, [q(A, 1), q(B, 20)], now=T0 + timedelta(seconds=21)) == (1, 2)


# --- agreement with advance, and with the head --------------------------------------------------------


def schedules(cond: Condition) -> st.SearchStrategy[Any]:
    return st.sampled_from(
        [cond, AssetOrTimeSchedule("@hourly", cond), AssetAndTimeSchedule("@hourly", cond), "@hourly", None]
    )


queue_entries = st.lists(
    st.tuples(
        st.sampled_from(["event", "event", "event", "failure", "late"]),
        st.sampled_from([A, B, C]),
        st.integers(0, 20),
        st.booleans(),
        st.sets(st.sampled_from([w.where_key for w in WHERES])),
    ),
    max_size=10,
    unique_by=lambda t: (t[0], t[2]),
)


def build_entries(raw: list[Any]) -> tuple[QueueEntry, ...]:
    return tuple(
        q(
            asset,
            n,
            kind=kind,
            aliases=("exports",) if alias and kind == "event" else (),
            wheres=tuple(sorted(w)) if kind == "event" else (),
        )
        for kind, asset, n, alias, w in raw
    )


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    cond=nodes(),
    raw=queue_entries,
    new=queue_entries,
    limit=st.one_of(st.none(), st.integers(1, 2)),
    active=st.integers(0, 2),
    paused=st.booleans(),
    ticks=st.booleans(),
    now_s=st.integers(0, 40),
    debounce=st.sampled_from([None, timedelta(seconds=3), timedelta(seconds=10)]),
    within=st.sampled_from([None, timedelta(seconds=5), timedelta(seconds=30)]),
)
def test_explain_and_advance_never_disagree(
    data: st.DataObject,
    cond: Condition,
    raw: list[Any],
    new: list[Any],
    limit: int | None,
    active: int,
    paused: bool,
    ticks: bool,
    now_s: int,
    debounce: timedelta | None,
    within: timedelta | None,
) -> None:
    schedule = data.draw(schedules(cond))
    kwargs: dict[str, Any] = {}
    timed_only = schedule is None or isinstance(schedule, str)
    if not timed_only:
        kwargs["within"] = within
        if not isinstance(schedule, AssetAndTimeSchedule):
            kwargs["debounce"] = debounce
    pipeline = Pipeline("p", schedule, JOB, max_active_runs=limit, **kwargs)
    now = T0 + timedelta(seconds=now_s)
    entries = () if timed_only else build_entries(raw)
    has_time = pipeline.schedule.time is not None
    pending = (T0,) if ticks and has_time else ()
    queue = QueueState("p", entries=entries, pending_ticks=pending)

    decision = decide(pipeline, queue, active_runs=active, now=now, paused=paused)
    doc = explain(pipeline, queue, active_runs=active, now=now, paused=paused)
    t = advance(pipeline, queue, active_runs=active, now=now, paused=paused)
    assert doc["due"] is decision.due is bool(t.runs)
    assert doc["blocked_by"] == decision.blocked_by
    assert (doc["blocked_by"] is None) is doc["due"]
    if not decision.due:
        assert (t.blocked_by, t.wake_at) == (decision.blocked_by, decision.wake_at)
    if doc["condition"] is not None and doc["condition"]["value"]:
        assert doc["missing"] == []
    assert 0 <= doc["updated"] <= doc["required"]

    # the head's fast path: when it says the new entries only queue, advance agrees to the letter
    if timed_only or not new or pending:
        return
    added = build_entries([(k, a, n + 100, al, w) for k, a, n, al, w in new])
    head = QueueHead("p", "", 0, 0, (), None, QueueSummary.of(entries))
    wait = head.waits(pipeline, added, now=now, paused=paused)
    full = advance(pipeline, queue, active_runs=0, now=now, entries=added, paused=paused)
    if wait is not None:
        assert not full.runs and not full.discarded
        assert (wait.wake_at, wait.blocked_by) == (full.wake_at, full.blocked_by)
        assert wait.summary == QueueSummary.of(full.after.entries)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cond=st.sampled_from(
        [
            A & B,
            at_least(A, 3),
            A.where(OK) & B,
            (A | B) & C,
            A.then(B),
            at_least(L, 2) & C,
            late(A) & B,
            A.failed(),
        ]
    ),
    raw=queue_entries,
    new=queue_entries.filter(bool),
    now_s=st.integers(0, 40),
    debounce=st.sampled_from([None, timedelta(seconds=3), timedelta(seconds=10)]),
    max_wait=st.sampled_from([None, timedelta(seconds=12)]),
    within=st.sampled_from([None, timedelta(seconds=5), timedelta(seconds=30)]),
    paused=st.booleans(),
    legacy=st.booleans(),
)
def test_the_head_fast_path_agrees_with_advance(
    cond: Condition,
    raw: list[Any],
    new: list[Any],
    now_s: int,
    debounce: timedelta | None,
    max_wait: timedelta | None,
    within: timedelta | None,
    paused: bool,
    legacy: bool,
) -> None:
    pipeline = Pipeline(
        "p", cond, JOB, debounce=debounce, max_wait=max_wait if debounce else None, within=within
    )
    now = T0 + timedelta(seconds=now_s)
    entries = build_entries(raw)
    added = build_entries([(k, a, n + 100, al, w) for k, a, n, al, w in new])
    summary = QueueSummary.of(entries)
    if legacy:  # a head written before per-key stats were kept
        summary = QueueSummary(summary.assets, summary.aliases, summary.entries)
        entries = tuple(e for e in entries if e.kind == "event")
    assert QueueSummary.from_json(summary.to_json()) == summary
    head = QueueHead("p", "", 3, 1, (), None, summary)
    wait = head.waits(pipeline, added, now=now, paused=paused)
    full = advance(
        pipeline,
        QueueState("p", version=3, entries=entries),
        active_runs=0,
        now=now,
        entries=added,
        paused=paused,
    )
    if wait is not None:
        assert not full.runs and not full.discarded and len(full.added) == len(added)
        assert (wait.wake_at, wait.blocked_by) == (full.wake_at, full.blocked_by)
        if not legacy:
            assert wait.summary == QueueSummary.of(full.after.entries)
    elif added and not full.runs and not legacy and not paused and "then" not in repr(cond):
        # the head declines only when it must: an order, a window through a key, or kinds that meet
        assert (
            full.discarded
            or len(full.added) != len(added)
            or within is not None
            or any(e.kind != "event" for e in (*entries, *added))
            or len(added) > 49
        )


def test_head_waits_refuses_what_it_cannot_take() -> None:
    p = Pipeline("p", A & B, JOB)
    summary = QueueSummary.of([q(A, 1)])
    head = QueueHead("p", "", 1, 0, (), None, summary)
    assert head.waits(p, [q(A, 2)], now=T0) is not None
    assert head.waits(p, [q(B, 2)], now=T0) is None  # a run is due: read the queue
    assert head.waits(p, [], now=T0) is None
    assert head.waits(p, [q(A, n) for n in range(2, 60)], now=T0) is None  # over MAX_APPEND
    assert QueueHead("p", "", 1, 0, (T0,), None, summary).waits(p, [q(A, 2)], now=T0) is None  # a held tick
    assert QueueHead("p", "", 1, 0, (), None, None).waits(p, [q(A, 2)], now=T0) is None  # no current summary
    assert head.waits(Pipeline("p", A.then(B), JOB), [q(A, 2)], now=T0) is None  # an order
    resolving = QueueEntry(q(A, 2).event, counted=False)
    assert head.appended(p, [resolving]) is None
    single = Pipeline("p", A | B, JOB, batch=False)
    assert head.appended(single, [q(A, 2)]) is None
    # paused: whatever the condition, entries only queue
    assert head.waits(p, [q(B, 2)], now=T0, paused=True) is not None
    # a within window that cuts through a key's entries: the summary cannot count, so the queue is read
    windowed = Pipeline(
        "w", at_least(A, 2), JOB, within=timedelta(seconds=10), debounce=timedelta(seconds=30)
    )
    cut = QueueHead("w", "", 1, 0, (), None, QueueSummary.of([q(A, 0), q(A, 1)]))
    assert cut.waits(windowed, [q(A, 19)], now=T0 + timedelta(seconds=20)) is None
    old = QueueHead("w", "", 1, 0, (), None, QueueSummary.of([q(A, 0), q(A, 1)]))
    assert old.waits(windowed, [q(B, 19)], now=T0 + timedelta(seconds=20)) is not None  # a's are all too old


def test_summary_json_keeps_counts_and_times_per_key() -> None:
    where = A.where(OK).where_key
    summary = QueueSummary.of(
        [q(A, 1, wheres=(where,)), q(A, 5), q(B, 3, kind="failure"), q(C, 2, aliases=("exports",))]
    )
    keys = summary.keys
    assert keys is not None
    assert (keys["a:x-test://a"].count, keys["a:x-test://a"].oldest, keys["a:x-test://a"].newest) == (
        2,
        T0 + timedelta(seconds=1),
        T0 + timedelta(seconds=5),
    )
    assert keys["w:" + where].count == 1 and keys["f:x-test://b"].count == 1 and keys["l:exports"].count == 1
    assert (summary.oldest, summary.newest) == (T0 + timedelta(seconds=1), T0 + timedelta(seconds=5))
    assert QueueSummary.from_json(summary.to_json()) == summary
    legacy = QueueSummary.from_json('{"assets": ["x-test://a"], "aliases": [], "entries": 1}')
    assert legacy.keys is None and legacy.oldest is None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    cond=nodes(),
    raw=queue_entries,
    limit=st.one_of(st.none(), st.integers(1, 2)),
    active=st.integers(0, 2),
    paused=st.booleans(),
    ticks=st.booleans(),
    now_s=st.integers(0, 40),
    debounce=st.sampled_from([None, timedelta(seconds=3), timedelta(seconds=10)]),
    within=st.sampled_from([None, timedelta(seconds=5), timedelta(seconds=30)]),
)
def test_explain_from_the_head_alone_is_explain_over_the_entries_whenever_it_answers(
    data: st.DataObject,
    cond: Condition,
    raw: list[Any],
    limit: int | None,
    active: int,
    paused: bool,
    ticks: bool,
    now_s: int,
    debounce: timedelta | None,
    within: timedelta | None,
) -> None:
    from assetflow.core.queues import explain_from_head

    schedule = data.draw(schedules(cond))
    kwargs: dict[str, Any] = {}
    timed_only = schedule is None or isinstance(schedule, str)
    if not timed_only:
        kwargs["within"] = within
        if not isinstance(schedule, AssetAndTimeSchedule):
            kwargs["debounce"] = debounce
    pipeline = Pipeline("p", schedule, JOB, max_active_runs=limit, **kwargs)
    now = T0 + timedelta(seconds=now_s)
    entries = () if timed_only else build_entries(raw)
    pending = (T0,) if ticks and pipeline.schedule.time is not None else ()
    head = QueueHead("p", "", 4, 2, pending, None, QueueSummary.of(entries))
    queue = QueueState("p", version=4, entries=entries, pending_ticks=pending)

    fast = explain_from_head(pipeline, head, active_runs=active, now=now, paused=paused)
    if fast is not None:
        assert fast == explain(pipeline, queue, active_runs=active, now=now, paused=paused)
    # A summary of an older version, or without per-key stats, never answers.
    stale = QueueHead("p", "", 4, 2, pending, None, None)
    assert explain_from_head(pipeline, stale, active_runs=active, now=now, paused=paused) is None


def test_explain_from_the_head_answers_plain_trees_and_declines_an_order() -> None:
    from assetflow.core.queues import explain_from_head

    entries = tuple(q(A, n) for n in range(1000))
    head = QueueHead("p", "", 7, 0, (), None, QueueSummary.of(entries))
    plain = Pipeline("p", A & B, JOB)
    doc = explain_from_head(plain, head, active_runs=0, now=T0)
    assert doc is not None and (doc["queued"], doc["updated"], doc["missing"]) == (1000, 1, [B.uri])
    assert explain_from_head(Pipeline("p", A.then(B), JOB), head, active_runs=0, now=T0) is None
