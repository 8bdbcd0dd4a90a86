"""Backfill: the runs a pipeline's schedule would have made from stored events and ticks in a past window.

A replay of history through the same :func:`~assetflow.core.scheduler.route_event` and
:func:`~assetflow.core.scheduler.advance` the evaluator uses, on a fresh queue per key: every event with a
timestamp in ``[start, end)`` arrives at its own timestamp, every tick of the time part in the window fires at
its time, and a debounce or max-wait deadline inside the window wakes the queue as a wake-up would. Capacity is
not simulated (``max_active_runs`` applies when the runs are created: they wait queued for a slot), nor are
pauses; failure and late entries are not stored events, so ``a.failed()`` and ``late(a)`` never hold here.
``where``, ``then``, ``key=`` and ``skip_unchanged`` decide as they do live (a version a planned run consumed is
skipped later in the window).

Run ids derive from what a run holds (its queue key, tick and events), so backfilling the same window twice
plans the same runs, and a store that creates each run once makes no duplicates.

A *stale* backfill (:func:`stale_runs`) re-runs what a job's older code produced: when a ``SparkJob``'s
``code_version`` changes, each successful run made with another version is run again with the same triggering
events, once per (original run, new version).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from assetflow.core.entries import QueueEntry, QueueState
from assetflow.core.events import AssetEvent, Run, RunState, derive_id, format_timestamp
from assetflow.core.pipeline import Pipeline
from assetflow.core.scheduler import Skip, Transition, advance, route_event
from assetflow.core.schedules import utc

_EPSILON = timedelta(microseconds=1)


@dataclass(frozen=True)
class PlannedRun:
    """One run a backfill makes: its id, queue key and partition key, the events it takes, and when it is due."""

    run_id: str
    key: str
    partition_key: str | None
    events: tuple[AssetEvent, ...]
    scheduled_time: datetime | None
    #: The moment in the window at which the schedule would have made it.
    at: datetime


@dataclass(frozen=True)
class BackfillPlan:
    """The planned runs in order, and the events that reached no queue (with why)."""

    runs: tuple[PlannedRun, ...]
    skipped: tuple[Skip, ...]
    events: int
    ticks: int


def backfill_run_id(pipeline: str, key: str, tick: datetime | None, events: Sequence[AssetEvent]) -> str:
    """A backfilled run's id: the same for the same queue key, tick and events, whenever it is planned."""
    ids = sorted(e.id for e in events)
    return derive_id("run", pipeline, "backfill", key, format_timestamp(tick) if tick else "", *ids)


def plan_backfill(
    pipeline: Pipeline,
    events: Sequence[tuple[AssetEvent, tuple[str, ...]]],
    *,
    start: datetime,
    end: datetime,
) -> BackfillPlan:
    """The runs ``pipeline``'s schedule would have made from ``events`` and its ticks in ``[start, end)``.

    ``events`` pairs each stored event with the pipeline's aliases it counts for (as ``catalog.consumers``
    gives them); events outside the window are ignored.

    Raises:
        ValueError: ``start`` is not before ``end``, or a time is naive.

    """
    start, end = utc(start), utc(end)
    if start >= end:
        raise ValueError("a backfill window needs start before end")
    ticks = pipeline.schedule.ticks_between(start, end) if pipeline.schedule.time is not None else []
    # ticks_between gives (start, end]: a tick exactly at start belongs to the window, one at end does not
    if pipeline.schedule.time is not None and pipeline.schedule.time.ticks_between(start - _EPSILON, start):
        ticks.insert(0, start)
    ticks = [t for t in ticks if t < end]
    timeline: list[tuple[datetime, int, str, AssetEvent | None, tuple[str, ...]]] = []
    for tick in ticks:
        timeline.append((tick, 0, "", None, ()))
    kept = sorted(
        ((e, a) for e, a in events if start <= e.timestamp < end), key=lambda pair: pair[0].sort_key
    )
    for event, aliases in kept:
        timeline.append((event.timestamp, 1, event.id, event, aliases))
    timeline.sort(key=lambda item: item[:3])

    states: dict[str, QueueState] = {}
    wakes: list[tuple[datetime, str]] = []
    runs: list[PlannedRun] = []
    skipped: list[Skip] = []

    consumed: set[tuple[str, str, str]] = set()

    def step(key: str, at: datetime, transition: Transition) -> None:
        states[key] = transition.after
        # skip_unchanged: a version a planned run consumed is not run again later in the window
        consumed.update((pipeline.id, asset, version) for asset, version in transition.consumed_versions)
        for run in transition.runs:
            planned_events = run.triggering_events
            runs.append(
                PlannedRun(
                    run_id=backfill_run_id(pipeline.id, key, run.scheduled_time, planned_events),
                    key=key,
                    partition_key=run.partition_key,
                    events=planned_events,
                    scheduled_time=run.scheduled_time,
                    at=at,
                )
            )
        if transition.wake_at is not None and transition.wake_at < end:
            heapq.heappush(wakes, (transition.wake_at, key))

    def feed(
        key: str, at: datetime, *, entries: Sequence[QueueEntry] = (), tick: datetime | None = None
    ) -> None:
        state = states.get(key) or QueueState(pipeline.id, key)
        ticks = [tick] if tick is not None else []
        transition = advance(pipeline, state, active_runs=0, now=at, entries=entries, ticks=ticks)
        step(key, at, transition)
        while transition.more:
            transition = advance(pipeline, states[key], active_runs=0, now=at)
            step(key, at, transition)

    def wake_until(moment: datetime) -> None:
        while wakes and wakes[0][0] <= moment:
            at, key = heapq.heappop(wakes)
            feed(key, at)

    for at, _, _, arrived, aliases in timeline:
        wake_until(at)
        if arrived is None:
            feed("", at, tick=at)
            continue
        routes, skips = route_event(arrived, [(pipeline, aliases)], consumed_versions=consumed)
        skipped.extend(skips)
        for route in routes:
            feed(route.key, at, entries=[route.entry(arrived)])
    wake_until(end - _EPSILON)
    return BackfillPlan(tuple(runs), tuple(skipped), len(kept), len(ticks))


def rerun_id(pipeline: str, original: str, code_version: str) -> str:
    """The id of the run that makes ``original``'s outputs again with ``code_version``: one per pair, ever."""
    return derive_id("run", pipeline, "rerun", original, code_version)


def stale_runs(pipeline: Pipeline, runs: Iterable[Run]) -> list[Run]:
    """The successful runs whose outputs the job's current ``code_version`` should make again, oldest first.

    Runs are grouped by what they made (a run and its re-runs, ``rerun_of``); a group is stale when its newest
    run that did not fail or get cancelled succeeded with another code version (or none). A group whose newest
    run is queued or running, or succeeded with the current version, is up to date.

    Raises:
        ValueError: the job declares no ``code_version`` (nothing can be stale).

    """
    current = pipeline.job.code_version
    if current is None:
        raise ValueError(
            f"pipeline {pipeline.id}'s job declares no code_version: give SparkJob(..., code_version='2') and "
            "bump it when the job's logic changes"
        )
    newest: dict[str, Run] = {}
    for run in runs:
        if run.pipeline != pipeline.id or run.state in (RunState.FAILED, RunState.CANCELLED):
            continue
        root = run.rerun_of or run.run_id
        kept = newest.get(root)
        if kept is None or (run.created_at, run.run_id) > (kept.created_at, kept.run_id):
            newest[root] = run
    stale = [run for run in newest.values() if run.state is RunState.SUCCESS and run.code_version != current]
    return sorted(stale, key=lambda r: (r.created_at, r.run_id))


__all__ = ["BackfillPlan", "PlannedRun", "backfill_run_id", "plan_backfill", "rerun_id", "stale_runs"]
