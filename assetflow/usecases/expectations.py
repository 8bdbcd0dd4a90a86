"""Expected arrivals: each expected asset checked at its deadlines, a miss announced once and queued for ``late(a)``.

An asset declared with ``expect=ExpectedArrival(cron, grace=...)`` has one pending one-shot check, at its next
deadline (``Deadlines.check_at``: an EventBridge Scheduler ``at()`` schedule on AWS, the ticker locally). The
check reads the asset's facts from the store (its newest event; for a per-partition expectation, the keys of
its recent events) and judges the deadline with the core's :func:`arrival_status`. A miss is:

- recorded once (``LateMarks``), and only then announced: an ``AssetLate`` listener event and the
  ``AssetsLate`` metric (the tick function publishes it from :attr:`LateCheck.announced`);
- queued, as the synthetic late entry of :func:`late_event`, for every pipeline whose schedule has ``late(a)``
  (a fallback pipeline); its id derives from the asset, key and deadline, so a check that is retried queues it
  once.

Then the check schedules the next deadline's check: one pending schedule per expectation, and no polling.
The reconciliation sweep calls :meth:`Expectations.schedule_all`, which re-creates a lost one (a check that
gave up after its retries): creating a schedule that exists is harmless.

An arrival after a miss clears it without any write: health and explain judge lateness at read time from the
same facts, and a real event of ``a`` resolves its late entries in the fallback's queue (``core.entries``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from assetflow.core import listeners
from assetflow.core.catalog import Catalog
from assetflow.core.entries import entry_kind
from assetflow.core.errors import NotFoundError
from assetflow.core.events import AssetEvent, Run, format_timestamp, parse_timestamp
from assetflow.core.expectations import (
    ArrivalStatus,
    ExpectedArrival,
    arrival_status,
    keys_lookback,
    late_event,
)
from assetflow.ports import Clock, Deadlines, EventStore, LateMarks, ListenerBus, NullBus

logger = logging.getLogger(__name__)

#: The most events a per-partition check reads to find the keys that arrived (ten pages of 1,000).
MAX_KEY_SCAN = 10_000
_PAGE = 1000


@dataclass
class LateCheck:
    """What one check of an asset's expectation found and did."""

    uri: str
    status: ArrivalStatus
    #: This check recorded the miss first (so it announced it: ``AssetLate``, the metric).
    announced: bool = False
    #: The fallback runs the late entry made (``late(a)`` pipelines).
    runs: list[Run] = field(default_factory=list)
    #: Fallback pipelines the late entry was queued for.
    queued_for: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"uri", "late", "deadline", "partition_key", "announced", "next_deadline", "runs", "queued_for"}``."""
        s = self.status
        return {
            "uri": self.uri,
            "late": s.late,
            "deadline": None if s.deadline is None else format_timestamp(s.deadline),
            "partition_key": s.key,
            "announced": self.announced,
            "next_deadline": None if s.next_deadline is None else format_timestamp(s.next_deadline),
            "runs": [r.run_id for r in self.runs],
            "queued_for": self.queued_for,
        }


def real_events(page: Sequence[dict[str, Any]]) -> list[AssetEvent]:
    """The real events of a listing page (synthetic entries, if a store lists any, are no arrivals)."""
    events = [AssetEvent.from_json(doc) for doc in page]
    return [e for e in events if entry_kind(e) == "event"]


def arrival_of(
    store: EventStore, uri: str, expect: ExpectedArrival, *, now: datetime, max_events: int = MAX_KEY_SCAN
) -> ArrivalStatus:
    """An asset's arrival status at ``now``, from the facts in the store.

    One read of its newest event; or, per partition, the keys of its events back to :func:`keys_lookback` (at
    most ``max_events`` of them).

    Raises:
        StoreUnavailableError: throttled; retry.
    """
    if not expect.keyed:
        newest = real_events(store.list_events(uri, limit=1).items)
        last = newest[0].timestamp if newest else None
        return arrival_status(expect, now=now, last_event_at=last)
    status = arrival_status(expect, now=now)
    if status.key is None:
        return status
    start = keys_lookback(status)
    keys: set[str] = set()
    token: str | None = None
    read = 0
    while read < max_events:
        page = store.list_events(uri, limit=min(_PAGE, max_events - read), token=token)
        read += len(page.items)
        events = real_events(page.items)
        keys.update(e.partition_key for e in events if e.partition_key is not None)
        if status.key in keys or page.next is None:
            break
        if start is not None and events and events[-1].timestamp < start:
            break
        token = page.next
    return arrival_status(expect, now=now, arrived_keys=keys)


def _stamp(moment: datetime | str | None) -> str | None:
    if isinstance(moment, str):
        return format_timestamp(parse_timestamp(moment))
    return None if moment is None else format_timestamp(moment)


class Expectations:
    """Checks expected assets at their deadlines; announces and queues misses; keeps one check scheduled each."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: EventStore,
        marks: LateMarks,
        deadlines: Deadlines,
        clock: Clock,
        bus: ListenerBus | None = None,
        route: Callable[[Sequence[AssetEvent]], Any] | None = None,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.marks = marks
        self.deadlines = deadlines
        self.clock = clock
        self.bus = bus or NullBus()
        #: Routes late entries to the fallback pipelines (the evaluator's ``handle_batch``); None: nowhere.
        self.route = route

    def expected(self) -> dict[str, ExpectedArrival]:
        """The expected assets of the catalog, by URI."""
        return {uri: a.expect for uri, a in self.catalog.assets.items() if a.expect is not None}

    def fallbacks(self, uri: str) -> list[str]:
        """The pipelines whose schedule has ``late(uri)``."""
        from assetflow.core.conditions import Late

        return [
            pid
            for pid, pipeline in self.catalog.pipelines.items()
            if any(isinstance(n, Late) and n.uri == uri for n in pipeline.condition.iter_nodes())
        ]

    def schedule_all(self) -> dict[str, str]:
        """Ask for each expected asset's check at its next deadline; returns ``{uri: deadline}``.

        Raises:
            StoreUnavailableError: the scheduler is throttling or failing; retry.
        """
        now = self.clock()
        scheduled: dict[str, str] = {}
        for uri, expect in self.expected().items():
            upcoming = arrival_status(expect, now=now).next_deadline
            if upcoming is not None:
                self.deadlines.check_at(uri, upcoming)
                scheduled[uri] = format_timestamp(upcoming)
        return scheduled

    def status(self, uri: str, *, now: datetime | None = None) -> ArrivalStatus:
        """An expected asset's arrival status now (or at ``now``).

        Raises:
            NotFoundError: the catalog declares no expectation for ``uri``.
        """
        return arrival_of(self.store, uri, self._expect(uri), now=now or self.clock())

    def check(self, uri: str, deadline: datetime | str | None = None) -> LateCheck:
        """Judge ``uri``'s last deadline now; announce and queue a miss; schedule the next check.

        ``deadline`` is the one the schedule was made for (logged only: a check that runs late judges the
        newest deadline passed, and one that runs early the one before, whose miss was judged already).

        Raises:
            NotFoundError: the catalog declares no expectation for ``uri`` (the definitions changed).
            StoreUnavailableError, ConflictError: the store or scheduler is throttled or contended; retry
                (a miss already recorded is not announced twice, a late entry already queued not queued again).
        """
        expect = self._expect(uri)
        now = self.clock()
        status = arrival_of(self.store, uri, expect, now=now)
        result = LateCheck(uri, status)
        if status.late and status.deadline is not None:
            result.announced = self.marks.mark_late(uri, status.deadline, status.key, now=now)
            if result.announced:
                declared = self.catalog.assets.get(uri)
                self.bus.publish(listeners.ASSET_LATE, listeners.asset_late(uri, declared, status))
            if self.route is not None and self.fallbacks(uri):
                evaluation = self.route([late_event(uri, status)])
                failed = getattr(evaluation, "failed", {})
                if failed:
                    raise next(iter(failed.values()))
                result.runs = list(getattr(evaluation, "runs", []))
                result.queued_for = sorted({p for p, _key in getattr(evaluation, "routed", [])})
        if status.next_deadline is not None:
            self.deadlines.check_at(uri, status.next_deadline)
        logger.info(
            "expected arrival checked",
            extra={
                "asset": uri,
                "late": status.late,
                "deadline": None if status.deadline is None else format_timestamp(status.deadline),
                "partition_key": status.key,
                "scheduled_for": _stamp(deadline),
                "announced": result.announced,
                "runs": [r.run_id for r in result.runs],
            },
        )
        return result

    def _expect(self, uri: str) -> ExpectedArrival:
        declared = self.catalog.assets.get(uri)
        if declared is None or declared.expect is None:
            raise NotFoundError(f"no expectation declared for asset {uri!r}")
        return declared.expect


__all__ = ["MAX_KEY_SCAN", "Expectations", "LateCheck", "arrival_of", "real_events"]
