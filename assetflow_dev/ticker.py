"""The local stand-in for EventBridge Scheduler: ticks of ``AssetOrTimeSchedule`` pipelines, on time."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from assetflow.core.events import format_timestamp
from assetflow.core.schedules import AssetOrTimeSchedule

logger = logging.getLogger(__name__)

#: The tick handler: ``{"pipeline": ID, "scheduled_time": ISO-8601}`` as the stack's schedules send it.
TickHandler = Callable[[dict[str, Any]], Any]


#: How far ahead the ticker looks for the next tick (it sleeps at most this long).
_LOOKAHEAD_SECONDS = 60.0


class ScheduleTicker:
    """Calls the tick handler for each cron time of each time-scheduled pipeline, from its start onwards.

    No backfill: times before `start()` are not ticked (a schedule created now on AWS starts now too). A
    failed tick is retried on the next pass, as Scheduler retries; the handler ignores repeated ticks.
    """

    def __init__(
        self,
        schedules: Mapping[str, AssetOrTimeSchedule],
        handler: TickHandler,
        *,
        interval: float = 1.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._schedules = dict(schedules)
        self._handler = handler
        self._interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._after: dict[str, datetime] = {}
        #: Ticks handled so far.
        self.ticks = 0

    def start(self) -> None:
        """Start ticking in a daemon thread (nothing to do without time schedules)."""
        if self._thread is not None or not self._schedules:
            return
        now = self._clock()
        self._after = dict.fromkeys(self._schedules, now)
        self._thread = threading.Thread(target=self._loop, name="schedule-ticker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop ticking; idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def tick_once(self) -> int:
        """Handle every tick due now; returns how many were handled."""
        handled = 0
        now = self._clock()
        for pipeline, schedule in self._schedules.items():
            for when in schedule.ticks_between(self._after[pipeline], now):
                try:
                    self._handler({"pipeline": pipeline, "scheduled_time": format_timestamp(when)})
                except Exception:
                    logger.exception("tick failed; retried on the next pass", extra={"pipeline": pipeline})
                    break
                self._after[pipeline] = when
                handled += 1
        self.ticks += handled
        return handled

    def _loop(self) -> None:
        while not self._stop.wait(self._until_next()):
            self.tick_once()

    def _until_next(self) -> float:
        """Seconds until the next tick is due, at least ``interval`` and at most a minute.

        An idle runtime wakes when a schedule fires, not every second.
        """
        now = self._clock()
        horizon = now + timedelta(seconds=_LOOKAHEAD_SECONDS)
        upcoming = [
            next(iter(schedule.ticks_between(self._after.get(pipeline, now), horizon)), horizon)
            for pipeline, schedule in self._schedules.items()
        ]
        wait = (min(upcoming, default=horizon) - now).total_seconds()
        return max(self._interval, min(wait, _LOOKAHEAD_SECONDS))
