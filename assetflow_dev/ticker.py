"""The local stand-in for EventBridge Scheduler: each time-scheduled pipeline's ticks, and one-shot wake-ups.

Every pipeline whose schedule has a time part ticks: time-only schedules (cron strings, presets, timedeltas),
``AssetOrTimeSchedule``, ``AssetAndTimeSchedule`` and ``CronPartitionTimetable``; manual (``schedule=None``)
and asset-only pipelines never do. A tick is ``{"pipeline", "scheduled_time"}``, as the stack's recurring
schedules send it. A wake-up (a debounce or max-wait deadline) is ``{"pipeline", "queue_key", "wake_at"}``,
as the stack's one-time ``at(...)`` schedules send it; a repeated wake-up of one queue at one time is kept
once. A deadline check of an expected asset is ``{"expectation", "deadline"}``, as the stack's one-time
schedules send it too (the ``Deadlines`` port); it is handled within milliseconds of its deadline.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from assetflow.core.catalog import Catalog
from assetflow.core.events import format_timestamp
from assetflow.core.schedules import Schedule

logger = logging.getLogger(__name__)

#: The tick handler: ``{"pipeline": ID, "scheduled_time": ISO-8601}`` as the stack's schedules send it.
TickHandler = Callable[[dict[str, Any]], Any]
#: How many times a failing wake-up is tried again (once per pass), as Scheduler retries a target.
WAKE_ATTEMPTS = 5


def time_schedules(catalog: Catalog) -> dict[str, Schedule]:
    """The schedules with a time part, by pipeline id (what EventBridge Scheduler ticks)."""
    return {pid: p.schedule for pid, p in catalog.pipelines.items() if p.schedule.time is not None}


def wake_event(pipeline: str, key: str, when: datetime) -> dict[str, Any]:
    """The input of a one-shot re-evaluation of a queue."""
    return {"pipeline": pipeline, "queue_key": key, "wake_at": format_timestamp(when)}


def deadline_event(uri: str, when: datetime) -> dict[str, Any]:
    """The input of a one-shot check of an expected asset at its deadline."""
    return {"expectation": uri, "deadline": format_timestamp(when)}


#: The kinds of one-shots: a queue's wake-up (pipeline, queue key) or an asset's deadline check (uri, "").
_WAKE, _CHECK = "wake", "check"
#: A one-shot due sooner than ``interval`` is waited for this long at least (not a whole interval).
_ONE_SHOT_FLOOR = 0.005


def _one_shot_event(kind: str, first: str, second: str, at: datetime) -> dict[str, Any]:
    return wake_event(first, second, at) if kind == _WAKE else deadline_event(first, at)


#: How far ahead the ticker looks for the next tick (it sleeps at most this long).
_LOOKAHEAD_SECONDS = 60.0


class ScheduleTicker:
    """Calls the tick handler for each fire time of each time-scheduled pipeline, from its start onwards.

    No backfill: times before ``start()`` are not ticked (a schedule created now on AWS starts now too). A
    failed tick is retried on the next pass, as Scheduler retries; the handler ignores repeated ticks. It is
    also the local ``WakeUps``: :meth:`wake_at` queues a one-shot call of the handler.
    """

    def __init__(
        self,
        schedules: Mapping[str, Schedule],
        handler: TickHandler,
        *,
        interval: float = 1.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._schedules = {pid: s for pid, s in schedules.items() if s.time is not None}
        self._handler = handler
        self._interval = interval
        self._clock = clock
        self._stop = threading.Event()
        # Set by a wake-up request (and by stop): the loop looks at its next moment again.
        self._nudge = threading.Event()
        self._thread: threading.Thread | None = None
        self._after: dict[str, datetime] = {}
        self._lock = threading.Lock()
        # One-shots: (when, kind, pipeline or uri, queue key or "", attempts).
        self._wakes: list[tuple[datetime, str, str, str, int]] = []
        self._queued: set[tuple[datetime, str, str, str]] = set()
        #: Ticks handled so far.
        self.ticks = 0
        #: Wake-ups handled so far.
        self.wakes = 0
        #: Deadline checks handled so far.
        self.checks = 0

    def start(self) -> None:
        """Start ticking in a daemon thread."""
        if self._thread is not None:
            return
        now = self._clock()
        self._after = dict.fromkeys(self._schedules, now)
        self._thread = threading.Thread(target=self._loop, name="schedule-ticker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop ticking; idempotent."""
        self._stop.set()
        self._nudge.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wake_at(self, pipeline: str, key: str, when: datetime) -> None:
        """Re-evaluate ``(pipeline, key)`` at ``when`` (the ``WakeUps`` port); a repeat is kept once."""
        self._push(when, _WAKE, pipeline, key)

    def check_at(self, uri: str, when: datetime) -> None:
        """Check ``uri``'s expected arrival at ``when`` (the ``Deadlines`` port); a repeat is kept once."""
        self._push(when, _CHECK, uri, "")

    def _push(self, when: datetime, kind: str, first: str, second: str) -> None:
        moment = when.astimezone(UTC)
        with self._lock:
            if (moment, kind, first, second) in self._queued:
                return
            self._queued.add((moment, kind, first, second))
            heapq.heappush(self._wakes, (moment, kind, first, second, 0))
        self._nudge.set()

    def pending_wakes(self) -> list[tuple[datetime, str, str]]:
        """The wake-ups not yet handled, soonest first."""
        with self._lock:
            return [(at, a, b) for at, kind, a, b, _ in sorted(self._wakes) if kind == _WAKE]

    def pending_checks(self) -> list[tuple[datetime, str]]:
        """The deadline checks not yet handled, soonest first: ``(deadline, uri)``."""
        with self._lock:
            return [(at, a) for at, kind, a, _b, _ in sorted(self._wakes) if kind == _CHECK]

    def tick_once(self) -> int:
        """Handle every tick and wake-up due now; returns how many were handled."""
        handled = 0
        now = self._clock()
        for pipeline, schedule in self._schedules.items():
            after = self._after.setdefault(pipeline, now)
            for when in schedule.ticks_between(after, now):
                try:
                    self._handler({"pipeline": pipeline, "scheduled_time": format_timestamp(when)})
                except Exception:
                    logger.exception("tick failed; retried on the next pass", extra={"pipeline": pipeline})
                    break
                self._after[pipeline] = when
                handled += 1
        self.ticks += handled
        return handled + self._wake_due(now)

    def _wake_due(self, now: datetime) -> int:
        handled = 0
        while True:
            with self._lock:
                if not self._wakes or self._wakes[0][0] > now:
                    return handled
                at, kind, first, second, attempts = heapq.heappop(self._wakes)
            try:
                self._handler(_one_shot_event(kind, first, second, at))
            except Exception:
                if attempts + 1 < WAKE_ATTEMPTS:
                    logger.exception(
                        "one-shot failed; retried on the next pass", extra={"kind": kind, "target": first}
                    )
                    with self._lock:
                        heapq.heappush(self._wakes, (at, kind, first, second, attempts + 1))
                    return handled
                # As Scheduler's dead-letter queue would keep it; the sweep schedules a deadline check again.
                logger.exception(
                    "one-shot dropped after its retries", extra={"kind": kind, "target": first, "key": second}
                )
            with self._lock:
                self._queued.discard((at, kind, first, second))
            handled += 1
            if kind == _WAKE:
                self.wakes += 1
            else:
                self.checks += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._nudge.wait(self._until_next())
            self._nudge.clear()
            if self._stop.is_set():
                return
            self.tick_once()

    def _until_next(self) -> float:
        """Seconds until the next tick or wake-up is due, at least ``interval`` and at most a minute.

        An idle runtime wakes when a schedule fires or a wake-up is due, not every second.
        """
        now = self._clock()
        horizon = now + timedelta(seconds=_LOOKAHEAD_SECONDS)
        upcoming = [
            next(iter(schedule.ticks_between(self._after.get(pipeline, now), horizon)), horizon)
            for pipeline, schedule in self._schedules.items()
        ]
        one_shot = None
        with self._lock:
            if self._wakes:
                one_shot = self._wakes[0][0]
                upcoming.append(one_shot)
        soonest = min(upcoming, default=horizon)
        wait = (soonest - now).total_seconds()
        # A one-shot (a deadline check, a debounce) is handled at its time, not up to an interval after it.
        floor = _ONE_SHOT_FLOOR if one_shot is not None and soonest == one_shot else self._interval
        return max(floor, min(wait, _LOOKAHEAD_SECONDS))


__all__ = ["WAKE_ATTEMPTS", "ScheduleTicker", "TickHandler", "deadline_event", "time_schedules", "wake_event"]
