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

A real event can also be **held**: the job that produced it reported a *blocking* check that failed
(``outlet_events[a].check("not_empty", passed=False, blocking=True)``). It is recorded and listed with its
``source.checks``, but it is routed to no queue: it satisfies no condition and resolves nothing. A later event
of the asset that passes counts as usual; or an operator releases the held one (:func:`released`), whose copy,
marked ``source.released``, then routes as any event would.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from assetflow.core.events import AssetEvent, Run, RunState, derive_id, format_timestamp
from assetflow.core.expectations import LATE_SOURCE, late_resolved_by
from assetflow.core.jsonvalue import thaw_json

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
    ``requeued_from`` names the cancelled run that gave the event back (``cancel(requeue=True)``): a run that
    takes it alone then gets an id of its own, not the cancelled run's.
    """

    event: AssetEvent
    aliases: tuple[str, ...] = ()
    wheres: tuple[str, ...] = ()
    counted: bool = True
    requeued_from: str | None = None

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


# ---- checks a job reports on its outlets ----------------------------------------------------------------

#: A check's name: what the job helper accepts (letters, digits, ``_.:-``, at most 64 characters).
MAX_CHECK_NAME = 64
#: The checks one outlet event may carry.
MAX_CHECKS = 50


@dataclass(frozen=True)
class Check:
    """One check a job reported on an outlet: its name, whether it passed, and whether a failure holds the event."""

    name: str
    passed: bool
    blocking: bool = False

    def to_json(self) -> dict[str, Any]:
        """``{"name", "passed", "blocking"}``."""
        return {"name": self.name, "passed": self.passed, "blocking": self.blocking}


def parse_checks(value: object) -> tuple[tuple[Check, ...], list[str]]:
    """The checks of an outlet metadata entry (``[{"name", "passed", "blocking"?}]``), and what was refused.

    A malformed check is refused with the reason, never dropped silently; a refused *blocking* check is kept as
    a failed blocking check (an unreadable verdict must not let data through).
    """
    if value is None:
        return (), []
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return (Check("checks", False, True),), ["checks is not a list; the event is held"]
    checks: dict[str, Check] = {}
    refused: list[str] = []
    for position, raw in enumerate(value):
        if len(checks) >= MAX_CHECKS:
            refused.append(f"more than {MAX_CHECKS} checks; the rest are ignored")
            break
        if not isinstance(raw, Mapping):
            refused.append(f"check {position} is not an object")
            continue
        name, passed, blocking = raw.get("name"), raw.get("passed"), raw.get("blocking", False)
        if not isinstance(blocking, bool):
            refused.append(f"check {position}: blocking is not true or false; the event is held")
            blocking = True
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_CHECK_NAME:
            refused.append(f"check {position}: name is not a string of 1 to {MAX_CHECK_NAME} characters")
            if blocking:
                checks[f"#{position}"] = Check(f"#{position}", False, True)
            continue
        if not isinstance(passed, bool):
            refused.append(f"check {name!r}: passed is not true or false")
            passed = False
        checks[name] = Check(name, passed, blocking)  # a name reported twice: the last verdict stands
    return tuple(checks.values()), refused


def failed_blocking(event: AssetEvent) -> list[str]:
    """The names of the event's failed blocking checks (``source.checks``)."""
    raw = thaw_json(event.source.get("checks")) if event.source.get("checks") is not None else []
    if not isinstance(raw, list):
        return []
    return [
        str(c.get("name"))
        for c in raw
        if isinstance(c, dict) and c.get("blocking") is True and c.get("passed") is not True
    ]


def held_by_check(event: AssetEvent) -> bool:
    """Whether a failed blocking check holds the event back from every condition (and it was not released)."""
    return entry_kind(event) == "event" and "released" not in event.source and bool(failed_blocking(event))


def released(event: AssetEvent, *, by: str, at: datetime) -> AssetEvent:
    """The copy of a held event that an operator released: it counts as any event from now on (same id).

    Raises:
        ValueError: the event is not held by a failed blocking check.
    """
    if not held_by_check(event):
        raise ValueError(f"event {event.id} is not held by a failed blocking check")
    source = {**thaw_json(event.source), "released": {"by": by, "at": format_timestamp(at)}}
    return AssetEvent(event.asset, event.id, event.timestamp, event.extra, source, event.partition_key)


__all__ = [
    "FAILURE_SOURCE",
    "MAX_CHECKS",
    "MAX_CHECK_NAME",
    "Check",
    "EntryKind",
    "QueueEntry",
    "QueueState",
    "entry_kind",
    "failed_blocking",
    "failure_events",
    "held_by_check",
    "parse_checks",
    "released",
    "resolves",
]
