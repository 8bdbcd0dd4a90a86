"""The scheduling state machine: queued events in, runs out, as pure functions over explicit state.

A pipeline has one queue (one per partition key when it is partition-aware). Every change to a queue
is a :class:`Transition` from one :class:`QueueState` version to the next, so a store can apply it as one
conditional transaction: "the queue is still at ``before.version``; write ``added``, delete ``consumed`` and
``discarded``, create ``runs``, count ``len(runs)`` more active runs only while that stays within
``max_active_runs``". If the condition fails another evaluator got there first: re-read and call again.

Two steps, two functions:

- :func:`route_event` (when an event arrives): which queues it enters, and with what facts decided once
  (the aliases it counts for, the ``where`` patterns its extra matched, the queue key read from its extra),
  or why it does not (:class:`Skip`: a partition rule, a pattern missed, a version already consumed);
- :func:`advance` (when entries arrive, a tick comes, a run ends, or a wake-up is due): queue the entries,
  then make every run :func:`~assetflow.core.decision.decide` allows, and say when to look again.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from assetflow.core.conditions import Asset, AssetAlias, Condition, Failed, Late, Where
from assetflow.core.decision import Decision, decide_on, view_of
from assetflow.core.entries import (
    QueueEntry,
    QueueState,
    entry_kind,
    failed_blocking,
    held_by_check,
    resolves,
)
from assetflow.core.events import AssetEvent, Run, RunState, derive_id, format_timestamp, group_events
from assetflow.core.filters import extract_field, matches
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.limits import LimitError, check_partition_key
from assetflow.core.pipeline import Pipeline
from assetflow.core.schedules import (
    AssetAndTimeSchedule,
    PartitionedAssetSchedule,
    PartitionKeyError,
    Schedule,
    utc,
)

#: Runs one transition may create; a store's transaction holds a few items per run (DynamoDB: 100 in all).
MAX_RUNS_PER_TRANSITION = 25


@dataclass(frozen=True)
class Transition:
    """The change from ``before`` to ``after``; empty (``changed`` false) when nothing happens.

    ``discarded``: queued synthetic entries a new event superseded (delete them, no run takes them).
    ``wake_at``: when to call :func:`advance` again with nothing new (a debounce or max-wait deadline): schedule
    a one-shot re-evaluation. ``blocked_by``: why no (further) run was made. ``consumed_versions``: the
    (asset, version) pairs the runs consumed, for a ``skip_unchanged`` pipeline (the store keeps them and
    passes them back to :func:`route_event`). ``ignored``: why ticks or entries were dropped.
    """

    before: QueueState
    after: QueueState
    added: tuple[QueueEntry, ...] = ()
    consumed: tuple[QueueEntry, ...] = ()
    runs: tuple[Run, ...] = ()
    more: bool = False
    ignored: tuple[str, ...] = field(default=())
    discarded: tuple[QueueEntry, ...] = ()
    wake_at: datetime | None = None
    blocked_by: str | None = None
    consumed_versions: tuple[tuple[str, str], ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the store has anything to write."""
        return self.after.version != self.before.version

    @property
    def active_runs_added(self) -> int:
        """How many active runs this transition adds (the store's counter condition uses it)."""
        return len(self.runs)


# ---- routing -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """Where one event goes: the queue ``key`` of ``pipeline``, counting for ``aliases`` and ``wheres``.

    ``counted=False``: no node of the pipeline counts the event, but it supersedes failure or late entries of
    its asset there (``a.failed()``, ``late(a)``); it is not queued.
    """

    pipeline: str
    key: str
    aliases: tuple[str, ...] = ()
    wheres: tuple[str, ...] = ()
    counted: bool = True

    def entry(self, event: AssetEvent) -> QueueEntry:
        """The queue entry this route makes of ``event``."""
        return QueueEntry(event, self.aliases, self.wheres, self.counted)


@dataclass(frozen=True)
class Skip:
    """A consumer that the event does not reach, and why (kept for operators, never silent).

    ``missed``: the where-nodes whose patterns the event's extra did not match, when that is why.
    """

    pipeline: str
    reason: str
    missed: tuple[Where, ...] = ()

    def to_json(self, event: AssetEvent) -> dict[str, Any]:
        """``{"event_id", "asset", "timestamp", "reason"}``, with ``"missed": [{"key", "pattern"}]`` for patterns."""
        doc: dict[str, Any] = {
            "event_id": event.id,
            "asset": event.asset,
            "timestamp": format_timestamp(event.timestamp),
            "reason": self.reason,
        }
        if self.missed:
            doc["missed"] = [{"key": w.where_key, "pattern": thaw_json(w.pattern)} for w in self.missed]
        return doc


@dataclass(frozen=True)
class _Plan:
    """What a condition counts, by asset and alias: plain leaves, where-nodes, failures, lateness."""

    assets: frozenset[str]
    aliases: frozenset[str]
    wheres_of_asset: Mapping[str, tuple[Where, ...]]
    wheres_of_alias: Mapping[str, tuple[Where, ...]]
    failed: frozenset[str]
    late: frozenset[str]


@lru_cache(maxsize=4096)
def _plan(condition: Condition) -> _Plan:
    assets: set[str] = set()
    aliases: set[str] = set()
    of_asset: dict[str, list[Where]] = {}
    of_alias: dict[str, list[Where]] = {}
    failed: set[str] = set()
    late: set[str] = set()

    def walk(node: Condition) -> None:
        if isinstance(node, Where):
            target = node.of
            if isinstance(target, AssetAlias):
                of_alias.setdefault(target.name, []).append(node)
            elif isinstance(target, Asset):
                of_asset.setdefault(target.uri, []).append(node)
            return
        if isinstance(node, Asset):
            assets.add(node.uri)
        elif isinstance(node, AssetAlias):
            aliases.add(node.name)
        elif isinstance(node, Failed):
            failed.add(node.uri)
        elif isinstance(node, Late):
            late.add(node.uri)
        for child in node.children_nodes():
            walk(child)

    walk(condition)
    return _Plan(
        frozenset(assets),
        frozenset(aliases),
        {k: tuple(v) for k, v in of_asset.items()},
        {k: tuple(v) for k, v in of_alias.items()},
        frozenset(failed),
        frozenset(late),
    )


def routes_on_content(pipeline: Pipeline) -> bool:
    """Whether routing reads an event's extra for this pipeline (a where-node, or a queue key read from it)."""
    schedule = pipeline.schedule
    if isinstance(schedule, PartitionedAssetSchedule) and schedule.key_field is not None:
        return True
    plan = _plan(pipeline.condition)
    return bool(plan.wheres_of_asset or plan.wheres_of_alias)


def extra_value(extra: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path of an event's extra, else of its message payload (``extra["payload"]``)."""
    value = extract_field(extra, path)
    if value is None and isinstance(extra.get("payload"), Mapping):
        value = extract_field(extra["payload"], path)
    return value


def extra_matches(pattern: Mapping[str, Any], extra: Mapping[str, Any]) -> bool:
    """Whether a where-pattern matches an event's extra, or the message payload a watcher event carries."""
    if matches(pattern, extra):
        return True
    payload = extra.get("payload")
    return isinstance(payload, Mapping) and matches(pattern, payload)


def _queue_key(schedule: Schedule, event: AssetEvent) -> tuple[str | None, str | None]:
    """The queue key of a real event (``""`` when not partition-aware), or None and why it is skipped."""
    if isinstance(schedule, PartitionedAssetSchedule):
        path = schedule.key_field
        if path is not None:
            value = extra_value(event.extra, path)
            if value is None:
                return (
                    None,
                    f"no field {path!r} in the event's extra (nor in its payload) to key the queue by",
                )
            if isinstance(value, bool) or not isinstance(value, str | int):
                return (
                    None,
                    f"field {path!r} is a {type(value).__name__}; a queue key is a string or an integer",
                )
            raw = str(value)
        elif event.partition_key is None:
            return None, "partition-aware pipeline ignores events without a partition key"
        else:
            raw = event.partition_key
        try:
            return check_partition_key(schedule.mapper.map(raw), what=f"queue key {raw!r}"), None
        except (PartitionKeyError, LimitError) as exc:
            return None, str(exc)
    if event.from_partitioned_run:
        return None, "events of partitioned runs only trigger partition-aware pipelines"
    return "", None


def _synthetic_key(schedule: Schedule, event: AssetEvent) -> tuple[str | None, str | None]:
    """The queue key of a failure or late entry: its partition key for partition-aware pipelines."""
    if not isinstance(schedule, PartitionedAssetSchedule):
        return "", None
    if event.partition_key is None:
        return None, f"partition-aware pipeline ignores {entry_kind(event)} entries without a partition key"
    try:
        return schedule.mapper.map(event.partition_key), None
    except PartitionKeyError as exc:
        return None, str(exc)


def _missed_reason(asset: str, missed: Sequence[Where]) -> str:
    patterns = "; ".join(
        f"{json.dumps(thaw_json(w.pattern), sort_keys=True)} (where {w.where_key})" for w in missed
    )
    return f"the extra of this event of {asset} matches none of the schedule's patterns for it: {patterns}"


def route_event(
    event: AssetEvent,
    consumers: Sequence[tuple[Pipeline, tuple[str, ...]]],
    *,
    consumed_versions: Collection[tuple[str, str, str]] = frozenset(),
) -> tuple[list[Route], list[Skip]]:
    """Decide which pipeline queues an event enters (DESIGN §3.8's partition rules and the event operators).

    ``consumers`` pairs each pipeline whose schedule names the event's asset with the aliases through which it
    consumes it (the catalog computes it). ``consumed_versions`` holds the (pipeline, asset, version) triples
    already consumed, as far as the store knows them for this event (``skip_unchanged`` pipelines).

    A real event held by a failed blocking check (``core.entries.held_by_check``) is skipped for every consumer.
    A real event is skipped, with the reason, when a partition rule refuses it, its version was consumed, or
    its extra matches none of the patterns of the nodes that would count it. A failure or late entry reaches
    only the pipelines whose schedule has ``a.failed()`` / ``late(a)`` for its asset (no skip for the others:
    it is not an event of theirs).
    """
    kind = entry_kind(event)
    routes: list[Route] = []
    skips: list[Skip] = []
    if held_by_check(event):  # recorded, but counts for no condition until released or superseded
        held = f"held: blocking check(s) {', '.join(failed_blocking(event))} failed"
        return [], [Skip(pipeline.id, held) for pipeline, _aliases in consumers]
    for pipeline, aliases in consumers:
        schedule = pipeline.schedule
        plan = _plan(pipeline.condition)
        if kind != "event":
            if event.asset not in (plan.failed if kind == "failure" else plan.late):
                continue
            key, reason = _synthetic_key(schedule, event)
            if key is None:
                skips.append(Skip(pipeline.id, reason or "not routed"))
            else:
                routes.append(Route(pipeline.id, key))
            continue
        key, reason = _queue_key(schedule, event)
        if key is None:
            skips.append(Skip(pipeline.id, reason or "not routed"))
            continue
        if (
            pipeline.skip_unchanged
            and event.version is not None
            and (pipeline.id, event.asset, event.version) in consumed_versions
        ):
            skips.append(
                Skip(
                    pipeline.id,
                    f"version {event.version!r} of {event.asset} was consumed already (skip_unchanged)",
                )
            )
            continue
        wheres = [*plan.wheres_of_asset.get(event.asset, ())]
        wheres += [w for alias in aliases for w in plan.wheres_of_alias.get(alias, ())]
        matched = sorted({w.where_key for w in wheres if extra_matches(w.pattern, event.extra)})
        counted = event.asset in plan.assets or any(alias in plan.aliases for alias in aliases)
        if counted or matched:
            routes.append(Route(pipeline.id, key, aliases, tuple(matched)))
        elif event.asset in plan.failed or event.asset in plan.late:
            routes.append(Route(pipeline.id, key, aliases, counted=False))
        elif wheres:
            skips.append(Skip(pipeline.id, _missed_reason(event.asset, wheres), tuple(wheres)))
        else:
            skips.append(Skip(pipeline.id, f"no node of the schedule counts events of {event.asset}"))
    return routes, skips


def explain_skips(
    pipeline: Pipeline,
    events: Sequence[tuple[AssetEvent, tuple[str, ...]]],
    *,
    consumed_versions: Collection[tuple[str, str, str]] = frozenset(),
) -> list[dict[str, Any]]:
    """Why recent events of the assets a pipeline counts did not reach it (explain's ``skipped``), newest first.

    ``events`` pairs each event with the pipeline's aliases it counts for. Each skip says the reason and, when
    the event's extra missed the where-patterns, which ones (``missed``: their keys and patterns).
    """
    found: list[tuple[AssetEvent, Skip]] = []
    for event, aliases in events:
        _, skips = route_event(event, [(pipeline, aliases)], consumed_versions=consumed_versions)
        found += [(event, skip) for skip in skips]
    found.sort(key=lambda pair: pair[0].sort_key, reverse=True)
    return [skip.to_json(event) for event, skip in found]


# ---- advancing ---------------------------------------------------------------------------------------


def run_id_for(pipeline: str, key: str, discriminator: str) -> str:
    """The deterministic id of the run a queue makes at a given version or tick."""
    return derive_id("run", pipeline, key, discriminator)


def event_run_id(pipeline: str, key: str, event_id: str) -> str:
    """The id of the run that takes one event alone, unless the event was re-queued.

    A store may let such a run stand for "this queue took the event": it exists once the event is taken.
    """
    return run_id_for(pipeline, key, f"event:{event_id}")


def takes_events_alone(pipeline: Pipeline) -> bool:
    """Whether a run of the pipeline may take a single event alone (its id then ``event_run_id``).

    A run per event (``batch=False``), or a batch pipeline whose schedule any single event satisfies (an
    asset, an alias, assets joined with ``|``): each event that finds its queue empty is taken at once.
    """
    schedule = pipeline.schedule
    return schedule.runs_on_assets and schedule.condition.is_any_of_leaves()


def _single_run_discriminator(entry: QueueEntry) -> str:
    if entry.requeued_from is None:
        return f"event:{entry.event.id}"
    return f"event:{entry.event.id}:requeued-from:{entry.requeued_from}"


def advance(
    pipeline: Pipeline,
    state: QueueState,
    *,
    active_runs: int,
    now: datetime,
    entries: Iterable[QueueEntry] = (),
    ticks: Iterable[datetime] = (),
    paused: bool = False,
) -> Transition:
    """Queue new entries and ticks, then create every run the decision allows (see ``core/decision.py``).

    Call it with new ``entries`` when events arrive (``Route.entry``), with ``ticks`` when the time part
    fires, with neither when a run of the pipeline ends (a freed slot may release held events) or at a
    ``wake_at``. ``paused``: entries still queue and resolve, new ticks are dropped, no run starts.

    Raises:
        ValueError: the state belongs to another pipeline, a tick is given to a pipeline without a time
            part, or a time is naive.

    """
    if state.pipeline != pipeline.id:
        raise ValueError(f"queue of {state.pipeline!r} given to pipeline {pipeline.id!r}")
    now = utc(now)
    queued, added, discarded, ignored = _queue_entries(state, entries)
    pending, last_tick, ticked = _hold_ticks(
        pipeline, state, ticks, list(queued.values()), now, paused, ignored
    )
    slots = None if pipeline.max_active_runs is None else max(0, pipeline.max_active_runs - active_runs)
    if pipeline.batch and len(added) > 1 and not (pipeline.debounce or pipeline.max_wait or pipeline.within):
        # A stream batch's arrivals are judged one at a time, in the order given (the stream's): a run is
        # made the moment the decision says due, so they make the runs they make one by one. (With a window
        # the decision reads the newest entry's age: the arrivals are judged together, as the head's fast
        # path judges them.)
        fresh = {e.event.id for e in added}
        queued_before = [e for e in queued.values() if e.event.id not in fresh]
        taken = _take_runs(
            pipeline,
            state,
            sorted([*queued_before, added[0]], key=lambda e: e.sort_key),
            pending,
            slots,
            now,
            paused,
        )
        for arrival in added[1:]:
            remaining = sorted([*taken.remaining, arrival], key=lambda e: e.sort_key)
            _take_runs(pipeline, state, remaining, taken.pending, slots, now, paused, taken=taken)
    else:
        taken = _take_runs(
            pipeline, state, sorted(queued.values(), key=lambda e: e.sort_key), pending, slots, now, paused
        )
    decision = taken.decision
    if not (added or discarded or taken.consumed or taken.runs or ticked):
        return Transition(
            before=state,
            after=state,
            ignored=tuple(ignored),
            wake_at=decision.wake_at,
            blocked_by=decision.blocked_by,
        )
    after = replace(
        state,
        version=state.version + 1,
        entries=tuple(taken.remaining),
        pending_ticks=tuple(taken.pending),
        last_tick=last_tick,
    )
    versions: tuple[tuple[str, str], ...] = ()
    if pipeline.skip_unchanged:
        versions = tuple(
            sorted(
                {
                    (e.event.asset, e.event.version)
                    for e in taken.consumed
                    if e.event.version and e.kind == "event"
                }
            )
        )
    return Transition(
        before=state,
        after=after,
        added=tuple(added),
        consumed=tuple(taken.consumed),
        runs=tuple(taken.runs),
        more=taken.more,
        ignored=tuple(ignored),
        discarded=tuple(discarded),
        wake_at=decision.wake_at,
        blocked_by=decision.blocked_by,
        consumed_versions=versions,
    )


def _queue_entries(
    state: QueueState, entries: Iterable[QueueEntry]
) -> tuple[dict[str, QueueEntry], list[QueueEntry], list[QueueEntry], list[str]]:
    """The queue with ``entries`` added (by event id) and superseded synthetic entries removed.

    Returns the queue, the entries that were new, the queued entries that were dropped, and notes.
    """
    queued = {e.event.id: e for e in state.entries}
    synthetic = any(e.kind != "event" for e in state.entries)
    added: list[QueueEntry] = []
    discarded: list[QueueEntry] = []
    notes: list[str] = []
    for entry in entries:
        if entry.kind == "event":
            if synthetic:
                for sid, other in list(queued.items()):
                    if other.kind != "event" and resolves(entry.event, other.event):
                        del queued[sid]
                        if other in added:
                            added.remove(other)
                        else:
                            discarded.append(other)
            if not entry.counted:
                continue
        elif entry.event.id not in queued:
            if any(q.kind == "event" and resolves(q.event, entry.event) for q in queued.values()):
                notes.append(
                    f"{entry.kind} entry {entry.event.id}: a queued event of {entry.event.asset} supersedes it"
                )
                continue
            synthetic = True
        if entry.event.id in queued:
            continue  # a redelivered event is queued once
        queued[entry.event.id] = entry
        added.append(entry)
    return queued, added, discarded, notes


def _hold_ticks(
    pipeline: Pipeline,
    state: QueueState,
    ticks: Iterable[datetime],
    queued: list[QueueEntry],
    now: datetime,
    paused: bool,
    ignored: list[str],
) -> tuple[list[datetime], datetime | None, bool]:
    """The held ticks with the new ones after the newest handled, that newest tick, and whether it moved.

    A tick while paused is dropped. An ``AssetAndTimeSchedule`` tick is held only when the condition holds
    then and no tick is held already (one held tick takes the queue).
    """
    new_ticks = sorted({utc(t) for t in ticks})
    schedule = pipeline.schedule
    if new_ticks and schedule.time is None:
        raise ValueError(f"pipeline {pipeline.id!r} has no cron or other time schedule; it takes no ticks")
    last_tick = state.last_tick
    pending = list(state.pending_ticks)
    gate = isinstance(schedule, AssetAndTimeSchedule)
    for tick in new_ticks:
        if last_tick is not None and tick <= last_tick:
            continue
        last_tick = tick
        if paused:
            ignored.append(f"tick {format_timestamp(tick)}: the pipeline is paused")
        elif gate and pending:
            ignored.append(f"tick {format_timestamp(tick)}: a held tick will take the queue")
        elif gate and not schedule.condition.holds(view_of(pipeline, queued, now)):
            ignored.append(f"tick {format_timestamp(tick)}: the asset condition does not hold")
        else:
            pending.append(tick)
    return pending, last_tick, bool(new_ticks) and last_tick != state.last_tick


@dataclass
class _Taken:
    """What one transition takes from a queue: the runs it makes and the entries and ticks they consume."""

    remaining: list[QueueEntry]
    pending: list[datetime]
    decision: Decision
    consumed: list[QueueEntry] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    more: bool = False


def _take_runs(
    pipeline: Pipeline,
    state: QueueState,
    remaining: list[QueueEntry],
    pending: list[datetime],
    slots: int | None,
    now: datetime,
    paused: bool,
    *,
    taken: _Taken | None = None,
) -> _Taken:
    """Make runs, held ticks first, while the decision says due (at most a transition's worth).

    ``taken``: go on with what earlier calls of this transition took (its runs count against the slots and
    the transition's runs; a batch run after the first is ``v<version>.<n>``).
    """
    version = state.version + 1
    schedule = pipeline.schedule

    def make_run(discriminator: str, events: Sequence[QueueEntry], scheduled: datetime | None) -> Run:
        key = schedule.partition_key_for(scheduled) if scheduled is not None else None
        return Run(
            run_id=run_id_for(pipeline.id, state.key, discriminator),
            pipeline=pipeline.id,
            state=RunState.QUEUED,
            created_at=now,
            partition_key=key or state.key or None,
            triggering_asset_events=group_events(e.event for e in events),
            scheduled_time=scheduled,
            code_version=pipeline.job.code_version,
        )

    if taken is None:
        taken = _Taken(remaining=remaining, pending=pending, decision=Decision(pipeline.id, False, None))
    else:
        taken.remaining, taken.pending = remaining, pending
    current = taken

    def next_decision(runs: int) -> Decision:
        return decide_on(
            pipeline,
            view_of(pipeline, current.remaining, now),
            pending_ticks=bool(current.pending),
            slot_free=slots is None or runs < slots,
            paused=paused,
            now=now,
        )

    while True:
        taken.decision = next_decision(len(taken.runs))
        if not taken.decision.due:
            break
        if len(taken.runs) >= MAX_RUNS_PER_TRANSITION:
            taken.more = True
            break
        events: list[QueueEntry]
        if taken.decision.action == "tick":
            tick = taken.pending.pop(0)
            events = []
            if isinstance(schedule, AssetAndTimeSchedule):
                events, taken.remaining = taken.remaining, []
            taken.runs.append(make_run(f"tick:{format_timestamp(tick)}", events, tick))
        elif taken.decision.action == "batch":
            events, taken.remaining = taken.remaining, []
            earlier = sum(1 for r in taken.runs if r.scheduled_time is None)
            # A batch of one event is named by it, as a run per event is (``event_run_id``).
            discriminator = (
                _single_run_discriminator(events[0])
                if len(events) == 1
                else f"v{version}" + (f".{earlier}" if earlier else "")
            )
            taken.runs.append(make_run(discriminator, events, None))
        else:
            events, taken.remaining = taken.remaining[:1], taken.remaining[1:]
            taken.runs.append(make_run(_single_run_discriminator(events[0]), events, None))
        taken.consumed.extend(events)
    return taken


__all__ = [
    "MAX_RUNS_PER_TRANSITION",
    "QueueEntry",
    "QueueState",
    "Route",
    "Skip",
    "Transition",
    "advance",
    "event_run_id",
    "explain_skips",
    "extra_matches",
    "extra_value",
    "route_event",
    "routes_on_content",
    "run_id_for",
    "takes_events_alone",
]
