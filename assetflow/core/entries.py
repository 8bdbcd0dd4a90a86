"""Queue entries and queue state: what a pipeline's queue holds, and the synthetic entries besides events.

A queue entry references one event. Most are real asset events; two kinds are *synthetic*, made by the
evaluator from facts and carried in the same shape so that they are queued, consumed once and deduplicated
exactly like events (their ids derive from the fact):

- a **failure** entry of asset ``a`` (``source.type == "failure"``): a run of a pipeline with ``a`` among
  its outlets failed (:func:`failure_events`); ``a.failed()`` counts them;
- a **late** entry of ``a`` (``source.type == "late"``): ``a`` missed a deadline of its ``ExpectedArrival``
  (:func:`assetflow.core.expectations.late_event`); ``late(a)`` counts them.

``Asset(a)`` counts only real events. A real event of ``a`` *resolves* the synthetic entries of ``a`` it
supersedes (a failure before it; a late entry it answers), which are then dropped from the queue: the
condition means "the *last* run failed", "``a`` is late *now*".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from assetflow.core.events import AssetEvent, Run, RunState, derive_id, format_timestamp
from assetflow.core.expectations import LATE_SOURCE, late_resolved_by

EntryKind = Literal["event", "failure", "late"]
FAILURE_SOURCE = "failure"


def entry_kind(event: AssetEvent) -> EntryKind:
    """``failure`` or ``late`` for synthetic events, else ``event``."""
    kind = event.source.get("type")
    if kind == FAILURE_SOURCE:
        return "failure"
    if kind == LATE_SOURCE:
        return "late"
    return "event"


@dataclass(frozen=True)
class QueueEntry:
    """An event queued for a pipeline.

    ``aliases`` are the schedule's aliases it counts for and ``wheres`` the where-keys whose patterns its
    extra matched (both decided when it was routed). ``counted=False`` marks a real event that no node of
    the pipeline counts but that resolves synthetic entries of its asset: it is never queued itself.
    """

    event: AssetEvent
    aliases: tuple[str, ...] = ()
    wheres: tuple[str, ...] = ()
    counted: bool = True

    @property
    def sort_key(self) -> tuple[datetime, str]:
        """Entries are ordered as their events are."""
        return self.event.sort_key

    @property
    def kind(self) -> EntryKind:
        """``event``, ``failure`` or ``late``."""
        return entry_kind(self.event)

    def selector_keys(self) -> Iterator[str]:
        """The selector keys this entry counts under (``a:``, ``l:``, ``w:`` for events; ``f:``, ``t:``)."""
        kind = self.kind
        if kind == "failure":
            yield "f:" + self.event.asset
        elif kind == "late":
            yield "t:" + self.event.asset
        else:
            yield "a:" + self.event.asset
            for alias in self.aliases:
                yield "l:" + alias
            for where in self.wheres:
                yield "w:" + where


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
        """Assets with at least one queued entry."""
        return frozenset(e.event.asset for e in self.entries)

    def aliases(self) -> frozenset[str]:
        """Aliases with at least one queued event."""
        return frozenset(a for e in self.entries for a in e.aliases)


def failure_events(outlets: tuple[str, ...], run: Run, failed_at: datetime) -> list[AssetEvent]:
    """The failure entries of a failed run: one per asset it should have produced (its outlet URIs).

    Ids derive from the run and the asset, so a redelivered failure makes no second entry. They carry the
    run's partition key (partition-aware consumers queue them under it).

    Raises:
        ValueError: the run did not fail, or ``failed_at`` is naive.

    """
    if run.state is not RunState.FAILED:
        raise ValueError(f"run {run.run_id} is {run.state.value}; only a failed run makes failure entries")
    return [
        AssetEvent(
            asset=uri,
            id=derive_id("failure", run.run_id, uri),
            timestamp=failed_at,
            source={
                "type": FAILURE_SOURCE,
                "run_id": run.run_id,
                "pipeline": run.pipeline,
                "failed_at": format_timestamp(failed_at),
            },
            partition_key=run.partition_key,
        )
        for uri in dict.fromkeys(outlets)
    ]


def resolves(event: AssetEvent, synthetic: AssetEvent) -> bool:
    """Whether a real event supersedes a synthetic entry of its asset (and so drops it from a queue).

    A failure is superseded by a later event of the asset (a later run produced it); a late entry by an event
    that answers its deadline (same key, or newer than the deadline before).
    """
    if entry_kind(event) != "event" or event.asset != synthetic.asset:
        return False
    kind = entry_kind(synthetic)
    if kind == "failure":
        return event.sort_key > synthetic.sort_key
    if kind == "late":
        return late_resolved_by(synthetic, event)
    return False


__all__ = [
    "FAILURE_SOURCE",
    "EntryKind",
    "QueueEntry",
    "QueueState",
    "entry_kind",
    "failure_events",
    "resolves",
]
