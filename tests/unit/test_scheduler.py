"""The scheduling state machine: the documented timeline, each DESIGN §3 rule, and a model comparison."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assetflow import (
    Asset,
    AssetAlias,
    AssetOrTimeSchedule,
    DailyMapper,
    PartitionedAssetSchedule,
    Pipeline,
    SparkJob,
)
from assetflow.core.conditions import AssetAll, AssetAny, Condition
from assetflow.core.events import AssetEvent, RunState
from assetflow.core.scheduler import (
    MAX_RUNS_PER_TRANSITION,
    QueueEntry,
    QueueState,
    Transition,
    advance,
    route_event,
)

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B, C, D = (Asset(f"x-test://{n}") for n in "abcd")


def event(
    asset: Asset, n: int, *, key: str | None = None, source: dict[str, str] | None = None
) -> AssetEvent:
    return AssetEvent(
        asset=asset.uri,
        id=f"e{n:05d}",
        timestamp=T0 + timedelta(seconds=n),
        source=source or {"type": "api"},
        partition_key=key,
    )


class Store:
    """A tiny in-memory store that applies transitions the way DynamoDB will: conditionally."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.queues: dict[str, QueueState] = {}
        self.active: set[str] = set()
        self.runs: list = []

    def queue(self, key: str = "") -> QueueState:
        return self.queues.get(key, QueueState(self.pipeline.id, key))

    def apply(self, t: Transition) -> None:
        current = self.queue(t.before.key)
        if current.version != t.before.version:
            raise Conflict("queue moved on")
        limit = self.pipeline.max_active_runs
        if limit is not None and len(self.active) + t.active_runs_added > limit:
            raise Conflict("too many active runs")
        assert not {r.run_id for r in t.runs} & {r.run_id for r in self.runs}, "run created twice"
        self.queues[t.before.key] = t.after
        self.runs.extend(t.runs)
        self.active.update(r.run_id for r in t.runs)

    def step(self, key: str = "", *, entries=(), ticks=(), now=T0) -> Transition:
        while True:
            t = advance(
                self.pipeline,
                self.queue(key),
                active_runs=len(self.active),
                now=now,
                entries=entries,
                ticks=ticks,
            )
            if t.changed:
                self.apply(t)
            if not t.more:
                return t
            entries, ticks = (), ()

    def end(self, run_id: str) -> None:
        self.active.discard(run_id)
        for key in sorted(self.queues):
            self.step(key)


class Conflict(Exception):
    pass


# ---- the documented timeline --------------------------------------------------------------------------


def test_reference_timeline_runs_at_e7_and_e13_only() -> None:
    # Given the reference docs' timeline: three assets, 13 events, schedule=[a1, a2, a3]
    a1, a2, a3 = (Asset(f"s3://bucket/example_asset_{i}") for i in (1, 2, 3))
    pipeline = Pipeline("multiple_assets_example", schedule=[a1, a2, a3], job=JOB)
    owner = {1: a1, 2: a1, 4: a1, 6: a1, 13: a1, 3: a2, 5: a2, 8: a2, 10: a2, 12: a2, 7: a3, 9: a3, 11: a3}
    store = Store(pipeline)
    runs_at = []
    # When the events arrive in order
    for n in range(1, 14):
        t = store.step(entries=[QueueEntry(event(owner[n], n))])
        if t.runs:
            runs_at.append(n)
    # Then runs are created at e7 and e13 only, each consuming everything queued before it
    assert runs_at == [7, 13]
    first, second = store.runs
    assert [e.id for e in first.triggering_events] == [f"e{n:05d}" for n in range(1, 8)]
    assert [e.id for e in second.triggering_events] == [f"e{n:05d}" for n in range(8, 14)]
    assert list(first.triggering_asset_events) == sorted([a1.uri, a2.uri, a3.uri])
    assert [e.id for e in first.triggering_asset_events[a1.uri]] == ["e00001", "e00002", "e00004", "e00006"]
    assert store.queue().entries == ()


# ---- batching, batch=False, max_active_runs -----------------------------------------------------------


def test_single_asset_batches_what_is_queued_while_held() -> None:
    pipeline = Pipeline("p", schedule=A, job=JOB, max_active_runs=1)
    store = Store(pipeline)
    store.step(entries=[QueueEntry(event(A, 1))])
    store.step(entries=[QueueEntry(event(A, 2))])
    store.step(entries=[QueueEntry(event(A, 3))])
    assert len(store.runs) == 1
    assert [e.event.id for e in store.queue().entries] == ["e00002", "e00003"]
    # When the run ends, the held events go into one run (Airflow #56050 would strand them).
    store.end(store.runs[0].run_id)
    assert len(store.runs) == 2
    assert [e.id for e in store.runs[1].triggering_events] == ["e00002", "e00003"]


def test_batch_false_makes_one_run_per_event_in_order_within_the_limit() -> None:
    pipeline = Pipeline("p", schedule=A | B, job=JOB, batch=False, max_active_runs=2)
    store = Store(pipeline)
    store.step(entries=[QueueEntry(event(B, 3)), QueueEntry(event(A, 1)), QueueEntry(event(A, 2))])
    assert [[e.id for e in r.triggering_events] for r in store.runs] == [["e00001"], ["e00002"]]
    store.end(store.runs[0].run_id)
    assert [e.id for e in store.runs[2].triggering_events] == ["e00003"]
    assert store.queue().entries == ()


def test_redelivered_event_is_queued_once() -> None:
    store = Store(Pipeline("p", schedule=A & B, job=JOB))
    store.step(entries=[QueueEntry(event(A, 1))])
    t = store.step(entries=[QueueEntry(event(A, 1))])
    assert not t.changed
    store.step(entries=[QueueEntry(event(B, 2))])
    assert [e.id for e in store.runs[0].triggering_events] == ["e00001", "e00002"]


def test_or_and_nesting() -> None:
    store = Store(Pipeline("p", schedule=(A & B) | C, job=JOB))
    store.step(entries=[QueueEntry(event(A, 1))])
    assert not store.runs
    store.step(entries=[QueueEntry(event(C, 2))])
    assert [e.id for e in store.runs[0].triggering_events] == ["e00001", "e00002"]


def test_run_ids_are_deterministic_and_distinct() -> None:
    pipeline = Pipeline("p", schedule=A, job=JOB)
    s1, s2 = Store(pipeline), Store(pipeline)
    for store in (s1, s2):
        for n in range(3):
            store.step(entries=[QueueEntry(event(A, n))])
    assert [r.run_id for r in s1.runs] == [r.run_id for r in s2.runs]
    assert len({r.run_id for r in s1.runs}) == 3
    assert all(r.state is RunState.QUEUED and r.created_at == T0 for r in s1.runs)


def test_a_transition_caps_its_runs_and_says_there_is_more() -> None:
    pipeline = Pipeline("p", schedule=A, job=JOB, batch=False)
    entries = [QueueEntry(event(A, n)) for n in range(MAX_RUNS_PER_TRANSITION + 5)]
    t = advance(pipeline, QueueState("p"), active_runs=0, now=T0, entries=entries)
    assert len(t.runs) == MAX_RUNS_PER_TRANSITION
    assert t.more
    assert len(t.after.entries) == 5


def test_stale_transition_is_rejected_by_the_version_condition() -> None:
    pipeline = Pipeline("p", schedule=A & B, job=JOB)
    store = Store(pipeline)
    stale = store.queue()
    store.step(entries=[QueueEntry(event(A, 1))])
    late = advance(pipeline, stale, active_runs=0, now=T0, entries=[QueueEntry(event(B, 2))])
    with pytest.raises(Conflict):
        store.apply(late)
    store.step(entries=[QueueEntry(event(B, 2))])
    assert [e.id for e in store.runs[0].triggering_events] == ["e00001", "e00002"]


# ---- aliases --------------------------------------------------------------------------------------------


def test_alias_holds_when_a_resolved_asset_has_an_event() -> None:
    alias = AssetAlias("exports")
    pipeline = Pipeline("p", schedule=alias & A, job=JOB)
    store = Store(pipeline)
    store.step(entries=[QueueEntry(event(D, 1), aliases=("exports",))])
    assert not store.runs
    store.step(entries=[QueueEntry(event(A, 2))])
    assert store.runs[0].triggering_asset_events.keys() == {A.uri, D.uri}


# ---- partitions -----------------------------------------------------------------------------------------


def test_routing_follows_the_partition_rules() -> None:
    plain = Pipeline("plain", schedule=A, job=JOB)
    daily = Pipeline("daily", schedule=PartitionedAssetSchedule(A, DailyMapper()), job=JOB)
    consumers = [(plain, ()), (daily, ())]

    routes, skips = route_event(event(A, 1), consumers)
    assert [r.pipeline for r in routes] == ["plain"]
    assert skips[0].pipeline == "daily"

    routes, skips = route_event(event(A, 2, key="2026-11-21T10:15:00Z"), consumers)
    assert [(r.pipeline, r.key) for r in routes] == [("plain", ""), ("daily", "2026-11-21")]

    produced = event(A, 3, key="2026-11-21", source={"type": "run", "run_id": "r", "pipeline": "x"})
    routes, skips = route_event(produced, consumers)
    assert [r.pipeline for r in routes] == ["daily"]
    assert skips[0].pipeline == "plain"

    routes, skips = route_event(event(A, 4, key="not-a-date"), consumers)
    assert [r.pipeline for r in routes] == ["plain"]
    assert "ISO-8601" in skips[0].reason


def test_partitioned_queues_are_separate_and_runs_carry_the_key() -> None:
    pipeline = Pipeline("p", schedule=PartitionedAssetSchedule(A & B, DailyMapper()), job=JOB)
    store = Store(pipeline)
    store.step("2026-11-21", entries=[QueueEntry(event(A, 1, key="2026-11-21T01:00:00Z"))])
    store.step("2026-11-22", entries=[QueueEntry(event(B, 2, key="2026-11-22T01:00:00Z"))])
    assert not store.runs
    store.step("2026-11-21", entries=[QueueEntry(event(B, 3, key="2026-11-21T02:00:00Z"))])
    assert [(r.partition_key, [e.id for e in r.triggering_events]) for r in store.runs] == [
        ("2026-11-21", ["e00001", "e00003"])
    ]
    assert [e.event.id for e in store.queue("2026-11-22").entries] == ["e00002"]


# ---- time ticks -----------------------------------------------------------------------------------------


def test_ticks_create_runs_once_and_wait_for_a_free_slot() -> None:
    pipeline = Pipeline("p", schedule=AssetOrTimeSchedule("0 6 * * *", A), job=JOB, max_active_runs=1)
    store = Store(pipeline)
    six = datetime(2026, 11, 21, 6, tzinfo=UTC)
    store.step(ticks=[six])
    store.step(ticks=[six])  # a redelivered tick is ignored
    assert [r.scheduled_time for r in store.runs] == [six]
    assert store.runs[0].triggering_asset_events == {}
    store.step(ticks=[six + timedelta(days=1)])
    store.step(entries=[QueueEntry(event(A, 1))])
    assert len(store.runs) == 1
    # When the tick's run ends, the held tick runs first, then the held asset event.
    store.end(store.runs[0].run_id)
    assert store.runs[1].scheduled_time == six + timedelta(days=1)
    store.end(store.runs[1].run_id)
    assert [e.id for e in store.runs[2].triggering_events] == ["e00001"]


def test_ticks_are_refused_for_a_pipeline_without_cron() -> None:
    with pytest.raises(ValueError, match="no cron"):
        advance(Pipeline("p", schedule=A, job=JOB), QueueState("p"), active_runs=0, now=T0, ticks=[T0])


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        advance(Pipeline("p", schedule=A, job=JOB), QueueState("p"), active_runs=0, now=datetime(2026, 1, 1))


# ---- the model comparison -------------------------------------------------------------------------------

POOL_ASSETS = (A, B, C)
ALIAS = AssetAlias("x")  # resolves to D


def conditions() -> st.SearchStrategy[Condition]:
    leaves = st.sampled_from([*POOL_ASSETS, ALIAS])
    return st.recursive(
        leaves,
        lambda children: (
            st.builds(lambda xs: AssetAll(*xs), st.lists(children, min_size=1, max_size=3))
            | st.builds(lambda xs: AssetAny(*xs), st.lists(children, min_size=1, max_size=3))
        ),
        max_leaves=6,
    )


def holds(cond: Condition, assets: set[str], aliases: set[str]) -> bool:
    """An evaluator written independently of the core's."""
    if isinstance(cond, Asset):
        return cond.uri in assets
    if isinstance(cond, AssetAlias):
        return cond.name in aliases
    results = [holds(c, assets, aliases) for c in cond.children]
    return all(results) if isinstance(cond, AssetAll) else any(results)


@dataclass
class Model:
    """The contract in the most direct form: per key a list of queued events; runs take them."""

    cond: Condition
    batch: bool
    limit: int | None
    queues: dict[str, list[tuple[AssetEvent, tuple[str, ...]]]] = field(default_factory=dict)
    active: int = 0
    runs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def add(self, key: str, ev: AssetEvent, aliases: tuple[str, ...]) -> None:
        queue = self.queues.setdefault(key, [])
        if all(e.id != ev.id for e, _ in queue):
            queue.append((ev, aliases))
        self.release(key)

    def release(self, key: str) -> None:
        queue = self.queues.get(key, [])
        queue.sort(key=lambda item: (item[0].timestamp, item[0].id))
        while queue and (self.limit is None or self.active < self.limit):
            if self.batch:
                assets = {e.asset for e, _ in queue}
                aliases = {a for _, al in queue for a in al}
                if not holds(self.cond, assets, aliases):
                    return
                taken, queue[:] = list(queue), []
            else:
                taken = [queue.pop(0)]
            self.active += 1
            self.runs.append((key, tuple(e.id for e, _ in taken)))

    def end(self) -> None:
        self.active -= 1
        for key in sorted(self.queues):
            self.release(key)


actions = st.lists(
    st.one_of(
        st.tuples(st.just("event"), st.integers(0, 3), st.sampled_from(["", "k1", "k2"])),
        st.tuples(st.just("redeliver"), st.integers(0, 1000), st.just("")),
        st.tuples(st.just("end"), st.integers(0, 1000), st.just("")),
        st.tuples(st.just("stale"), st.integers(0, 3), st.sampled_from(["", "k1", "k2"])),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cond=conditions(), batch=st.booleans(), limit=st.one_of(st.none(), st.integers(1, 3)), steps=actions)
def test_state_machine_matches_the_reference_model(
    cond: Condition, batch: bool, limit: int | None, steps
) -> None:
    if not batch and not cond.is_any_of_leaves():
        batch = True
    pipeline = Pipeline("p", schedule=cond, job=JOB, batch=batch, max_active_runs=limit)
    store, model = Store(pipeline), Model(cond, batch, limit)
    sent: list[tuple[str, AssetEvent, tuple[str, ...]]] = []
    run_keys: list[str] = []
    uses_alias = any(True for _ in cond.iter_aliases())
    for n, (kind, pick, key) in enumerate(steps):
        if kind in ("event", "stale"):
            asset = (*POOL_ASSETS, Asset("x-test://d"))[pick]
            aliases = ("x",) if asset.uri.endswith("//d") and uses_alias else ()
            ev = event(asset, n)
            if kind == "stale":
                # Two evaluators read the same queue; the first write wins, the second must be refused
                # by the version condition and then retry from what it reads again.
                first = event(A, 10_000 + n)
                before = store.queue(key)
                late = advance(
                    pipeline, before, active_runs=len(store.active), now=T0, entries=[QueueEntry(ev, aliases)]
                )
                store.step(key, entries=[QueueEntry(first)])
                model.add(key, first, ())
                sent.append((key, first, ()))
                with pytest.raises(Conflict):
                    store.apply(late)
            sent.append((key, ev, aliases))
            store.step(key, entries=[QueueEntry(ev, aliases)])
            model.add(key, ev, aliases)
        elif kind == "redeliver" and sent:
            key, ev, aliases = sent[pick % len(sent)]
            still_queued = any(e.event.id == ev.id for e in store.queue(key).entries)
            if still_queued:
                store.step(key, entries=[QueueEntry(ev, aliases)])
                model.add(key, ev, aliases)
        elif kind == "end" and store.active:
            run_id = sorted(store.active)[pick % len(store.active)]
            store.end(run_id)
            model.end()
        run_keys = [r.partition_key or "" for r in store.runs]

    got = [(k, tuple(e.id for e in r.triggering_events)) for k, r in zip(run_keys, store.runs, strict=True)]
    assert got == model.runs
    # Nothing lost, nothing consumed twice: every event is in exactly one run or still queued.
    consumed = [i for _, ids in got for i in ids]
    queued = [e.event.id for q in store.queues.values() for e in q.entries]
    assert len(consumed) == len(set(consumed))
    assert sorted(consumed + queued) == sorted({ev.id for _, ev, _ in sent})
    if limit is not None:
        assert len(store.active) <= limit


# ---- a stream batch of arrivals in one transition --------------------------------------------------------


def test_arrivals_in_one_transition_make_the_runs_they_make_one_by_one() -> None:
    pipeline = Pipeline("both", schedule=A & B, job=JOB)
    arrivals = [QueueEntry(event(asset, n)) for n, asset in enumerate([A, B, A, A, B, A], start=1)]
    t = advance(pipeline, QueueState("both"), active_runs=0, now=T0, entries=arrivals)
    assert [[e.id for e in r.triggering_events] for r in t.runs] == [
        ["e00001", "e00002"],
        ["e00003", "e00004", "e00005"],
    ]
    assert [e.event.id for e in t.after.entries] == ["e00006"]
    assert len({r.run_id for r in t.runs}) == 2
    assert t.after.version == 1


def test_arrivals_wait_together_while_no_slot_is_free() -> None:
    pipeline = Pipeline("both", schedule=A & B, job=JOB, max_active_runs=1)
    arrivals = [QueueEntry(event(asset, n)) for n, asset in enumerate([A, B, A, B], start=1)]
    t = advance(pipeline, QueueState("both"), active_runs=0, now=T0, entries=arrivals)
    assert [[e.id for e in r.triggering_events] for r in t.runs] == [["e00001", "e00002"]]
    assert [e.event.id for e in t.after.entries] == ["e00003", "e00004"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cond=conditions(),
    batch=st.booleans(),
    picks=st.lists(st.integers(0, 3), max_size=40),
    cuts=st.lists(st.integers(1, 8), min_size=1, max_size=40),
)
def test_chunked_arrivals_make_the_same_runs_as_single_arrivals(
    cond: Condition, batch: bool, picks: list[int], cuts: list[int]
) -> None:
    if not batch and not cond.is_any_of_leaves():
        batch = True
    pipeline = Pipeline("p", schedule=cond, job=JOB, batch=batch)
    uses_alias = any(True for _ in cond.iter_aliases())
    entries = []
    for n, pick in enumerate(picks):
        asset = (*POOL_ASSETS, Asset("x-test://d"))[pick]
        aliases = ("x",) if asset.uri.endswith("//d") and uses_alias else ()
        entries.append(QueueEntry(event(asset, n), aliases))
    one_by_one, chunked = Store(pipeline), Store(pipeline)
    for entry in entries:
        one_by_one.step(entries=[entry])
    start, sizes = 0, iter(cuts * 40)
    while start < len(entries):
        size = next(sizes)
        chunked.step(entries=entries[start : start + size])
        start += size

    def runs(store: Store) -> list[tuple[str, ...]]:
        return [tuple(e.id for e in r.triggering_events) for r in store.runs]

    assert runs(chunked) == runs(one_by_one)
    assert [e.event.id for e in chunked.queue().entries] == [e.event.id for e in one_by_one.queue().entries]
