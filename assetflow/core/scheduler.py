"""The scheduling state machine: queued events in, runs out, as pure functions over explicit state.

A pipeline has one queue (one per mapped partition key when it is partition-aware). Every change to a queue
is a :class:`Transition` from one :class:`QueueState` version to the next, so a store can apply it as one
conditional transaction: "the queue is still at ``before.version``; write ``added``, mark ``consumed``,
create ``runs``, count ``len(runs)`` more active runs only while that stays within ``max_active_runs``".
If the condition fails another evaluator got there first: re-read and call the function again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from assetflow.core.events import AssetEvent, Run, RunState, derive_id, format_timestamp, group_events
from assetflow.core.pipeline import Pipeline
from assetflow.core.schedules import AssetOrTimeSchedule, PartitionedAssetSchedule, PartitionKeyError, utc

#: Runs one transition may create; a store's transaction holds a few items per run (DynamoDB: 100 in all).
MAX_RUNS_PER_TRANSITION = 25


@dataclass(frozen=True)
class QueueEntry:
    """An event queued for a pipeline; ``aliases`` are the schedule's aliases it counts for."""

    event: AssetEvent
    aliases: tuple[str, ...] = ()

    @property
    def sort_key(self) -> tuple[datetime, str]:
        """Entries are ordered as their events are."""
        return self.event.sort_key


@dataclass(frozen=True)
class QueueState:
    """One queue of one pipeline, as read from the store.

    ``version`` increases with every change; ``last_tick`` is the newest cron tick already handled, so a
    redelivered tick is ignored; ``pending_ticks`` are ticks held back by ``max_active_runs``.
    """

    pipeline: str
    key: str = ""
    version: int = 0
    entries: tuple[QueueEntry, ...] = ()
    pending_ticks: tuple[datetime, ...] = ()
    last_tick: datetime | None = None

    def assets(self) -> frozenset[str]:
        """Assets with at least one queued event."""
        return frozenset(e.event.asset for e in self.entries)

    def aliases(self) -> frozenset[str]:
        """Aliases with at least one queued event."""
        return frozenset(a for e in self.entries for a in e.aliases)


@dataclass(frozen=True)
class Transition:
    """The change from ``before`` to ``after``; empty (``changed`` false) when nothing happens."""

    before: QueueState
    after: QueueState
    added: tuple[QueueEntry, ...] = ()
    consumed: tuple[QueueEntry, ...] = ()
    runs: tuple[Run, ...] = ()
    more: bool = False
    ignored: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        """Whether the store has anything to write."""
        return self.after.version != self.before.version

    @property
    def active_runs_added(self) -> int:
        """How many active runs this transition adds (the store's counter condition uses it)."""
        return len(self.runs)


@dataclass(frozen=True)
class Route:
    """Where one event goes: the queue ``key`` of ``pipeline``, counting for ``aliases``."""

    pipeline: str
    key: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skip:
    """A consumer that the event does not reach, and why (kept for operators, never silent)."""

    pipeline: str
    reason: str


def route_event(
    event: AssetEvent,
    consumers: Sequence[tuple[Pipeline, tuple[str, ...]]],
) -> tuple[list[Route], list[Skip]]:
    """Decide which pipeline queues an event enters, applying the partition rules of DESIGN §3.8.

    ``consumers`` pairs each consuming pipeline with the aliases through which it consumes the event's
    asset (empty for a direct consumer); the catalog computes it.
    """
    routes: list[Route] = []
    skips: list[Skip] = []
    for pipeline, aliases in consumers:
        schedule = pipeline.schedule
        if isinstance(schedule, PartitionedAssetSchedule):
            if event.partition_key is None:
                skips.append(
                    Skip(pipeline.id, "partition-aware pipeline ignores events without a partition key")
                )
                continue
            try:
                key = schedule.mapper.map(event.partition_key)
            except PartitionKeyError as exc:
                skips.append(Skip(pipeline.id, str(exc)))
                continue
            routes.append(Route(pipeline.id, key, aliases))
        elif event.from_partitioned_run:
            skips.append(
                Skip(pipeline.id, "events of partitioned runs only trigger partition-aware pipelines")
            )
        else:
            routes.append(Route(pipeline.id, "", aliases))
    return routes, skips


def run_id_for(pipeline: str, key: str, discriminator: str) -> str:
    """The deterministic id of the run a queue makes at a given version or tick."""
    return derive_id("run", pipeline, key, discriminator)


def advance(
    pipeline: Pipeline,
    state: QueueState,
    *,
    active_runs: int,
    now: datetime,
    entries: Iterable[QueueEntry] = (),
    ticks: Iterable[datetime] = (),
) -> Transition:
    """Queue new entries and ticks, then create every run the schedule and ``max_active_runs`` allow.

    Call it with new ``entries`` when events arrive, with ``ticks`` when cron times pass, and with neither
    when a run of the pipeline ends (a freed slot may release held events).

    Raises:
        ValueError: the state belongs to another pipeline, a tick is given to a pipeline without a cron,
            or a time is naive.

    """
    if state.pipeline != pipeline.id:
        raise ValueError(f"queue of {state.pipeline!r} given to pipeline {pipeline.id!r}")
    queued, added = _queue_entries(state, entries)
    pending, last_tick, ticked = _hold_ticks(pipeline, state, ticks)
    slots = None if pipeline.max_active_runs is None else max(0, pipeline.max_active_runs - active_runs)
    if pipeline.batch and added:
        # Arrivals are judged one at a time, in the order given (the stream's): a run is made the moment
        # its condition holds, so a batch of arrivals makes the same runs as the same arrivals one by one.
        taken = _take_arrivals(
            pipeline, state, sorted(state.entries, key=lambda e: e.sort_key), added, pending, slots, utc(now)
        )
    else:
        taken = _take_runs(
            pipeline, state, sorted(queued.values(), key=lambda e: e.sort_key), pending, slots, utc(now)
        )
    if not (added or taken.consumed or taken.runs or ticked):
        return Transition(before=state, after=state)
    after = replace(
        state,
        version=state.version + 1,
        entries=tuple(taken.remaining),
        pending_ticks=tuple(taken.pending),
        last_tick=last_tick,
    )
    return Transition(
        before=state,
        after=after,
        added=tuple(added),
        consumed=tuple(taken.consumed),
        runs=tuple(taken.runs),
        more=taken.more,
    )


def _queue_entries(
    state: QueueState, entries: Iterable[QueueEntry]
) -> tuple[dict[str, QueueEntry], list[QueueEntry]]:
    """The queue with ``entries`` added (by event id), and those that were new."""
    queued = {e.event.id: e for e in state.entries}
    added: list[QueueEntry] = []
    for entry in entries:
        if entry.event.id in queued:
            continue  # a redelivered event is queued once
        queued[entry.event.id] = entry
        added.append(entry)
    return queued, added


def _hold_ticks(
    pipeline: Pipeline, state: QueueState, ticks: Iterable[datetime]
) -> tuple[list[datetime], datetime | None, bool]:
    """The held ticks with the new ones after the newest handled, that newest tick, and whether it moved."""
    new_ticks = sorted({utc(t) for t in ticks})
    if new_ticks and not isinstance(pipeline.schedule, AssetOrTimeSchedule):
        raise ValueError(f"pipeline {pipeline.id!r} has no cron schedule; it takes no ticks")
    last_tick = state.last_tick
    pending = list(state.pending_ticks)
    for tick in new_ticks:
        if last_tick is None or tick > last_tick:
            pending.append(tick)
            last_tick = tick
    return pending, last_tick, bool(new_ticks) and last_tick != state.last_tick


@dataclass
class _Taken:
    """What one transition takes from a queue: the runs it makes and the entries and ticks they consume."""

    remaining: list[QueueEntry]
    pending: list[datetime]
    consumed: list[QueueEntry] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    more: bool = False


def _run_maker(
    pipeline: Pipeline, state: QueueState, now: datetime
) -> Callable[[str, Sequence[QueueEntry], datetime | None], Run]:
    def make_run(discriminator: str, events: Sequence[QueueEntry], scheduled: datetime | None) -> Run:
        return Run(
            run_id=run_id_for(pipeline.id, state.key, discriminator),
            pipeline=pipeline.id,
            state=RunState.QUEUED,
            created_at=now,
            partition_key=state.key or None,
            triggering_asset_events=group_events(e.event for e in events),
            scheduled_time=scheduled,
        )

    return make_run


def _take_arrivals(
    pipeline: Pipeline,
    state: QueueState,
    queued: list[QueueEntry],
    arrivals: Sequence[QueueEntry],
    pending: list[datetime],
    slots: int | None,
    now: datetime,
) -> _Taken:
    """A batch pipeline's runs when ``arrivals`` join ``queued`` one after the other.

    Held ticks and what is already queued go first (as in :func:`_take_runs`); then each arrival is queued
    and, while a slot is free, a run is made as soon as the condition holds over the queue. The first batch
    run of a transition is ``v<version>``, the next ``v<version>.<n>``.
    """
    taken = _take_runs(pipeline, state, queued, pending, slots, now)
    make_run = _run_maker(pipeline, state, now)
    version = state.version + 1
    current = list(taken.remaining)
    batch_runs = sum(1 for run in taken.runs if run.scheduled_time is None)
    for arrival in arrivals:
        current.append(arrival)
        if taken.more or (slots is not None and len(taken.runs) >= slots):
            continue
        if len(taken.runs) >= MAX_RUNS_PER_TRANSITION:
            taken.more = True
            continue
        present = QueueState(pipeline.id, entries=tuple(current))
        if not pipeline.condition.evaluate(present.assets(), present.aliases()):
            continue
        discriminator = f"v{version}" if batch_runs == 0 else f"v{version}.{batch_runs}"
        taken.runs.append(make_run(discriminator, sorted(current, key=lambda e: e.sort_key), None))
        taken.consumed.extend(current)
        batch_runs += 1
        current = []
    taken.remaining = sorted(current, key=lambda e: e.sort_key)
    return taken


def _take_runs(
    pipeline: Pipeline,
    state: QueueState,
    remaining: list[QueueEntry],
    pending: list[datetime],
    slots: int | None,
    now: datetime,
) -> _Taken:
    """Make runs, held ticks first, while the schedule holds and a slot is free (at most a transition's)."""
    taken = _Taken(remaining=remaining, pending=pending)
    version = state.version + 1
    make_run = _run_maker(pipeline, state, now)

    while slots is None or len(taken.runs) < slots:
        if len(taken.runs) >= MAX_RUNS_PER_TRANSITION:
            taken.more = True
            break
        if taken.pending:
            tick = taken.pending.pop(0)
            taken.runs.append(make_run(f"tick:{format_timestamp(tick)}", (), tick))
            continue
        if not taken.remaining:
            break
        if pipeline.batch:
            present = QueueState(pipeline.id, entries=tuple(taken.remaining))
            if not pipeline.condition.evaluate(present.assets(), present.aliases()):
                break
            events, taken.remaining = taken.remaining, []
            taken.runs.append(make_run(f"v{version}", events, None))
        else:
            # Any single event satisfies a batch=False schedule (checked when the pipeline is declared).
            events, taken.remaining = taken.remaining[:1], taken.remaining[1:]
            taken.runs.append(make_run(f"event:{events[0].event.id}", events, None))
        taken.consumed.extend(events)
    return taken
