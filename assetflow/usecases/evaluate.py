"""The evaluator: turns each new asset event into queue entries and runs, safely under concurrency."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from assetflow.core import listeners
from assetflow.core.catalog import Catalog
from assetflow.core.errors import ConflictError, NotFoundError
from assetflow.core.events import AssetEvent, Run
from assetflow.core.pipeline import Pipeline
from assetflow.core.queues import QueueHead
from assetflow.core.scheduler import QueueEntry, Skip, advance, route_event
from assetflow.ports import Clock, Launcher, ListenerBus, NoWakeUps, NullBus, Store, WakeUps
from assetflow.usecases.submit import Submitter

logger = logging.getLogger(__name__)


@dataclass
class Evaluation:
    """What handling one event (or tick, or run end) did."""

    routed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    conflicts: int = 0


class Evaluator:
    """Routes events to pipeline queues, applies the core's transitions conditionally, submits new runs."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: Store,
        launcher: Launcher,
        clock: Clock,
        bus: ListenerBus | None = None,
        wakeups: WakeUps | None = None,
        max_attempts: int = 12,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.bus = bus or NullBus()
        #: One-shot re-evaluations at a debounce or max-wait deadline (``Transition.wake_at``).
        self.wakeups = wakeups or NoWakeUps()
        self.clock = clock
        self.max_attempts = max_attempts
        self._sleep = sleep
        self._rng = rng or random.Random()  # noqa: S311  (jitter, not security)
        self.submitter = Submitter(
            catalog=catalog,
            store=store,
            launcher=launcher,
            clock=clock,
            max_attempts=max_attempts,
            backoff=self._backoff,
        )

    @property
    def launcher(self) -> Launcher:
        """The launcher runs are submitted with."""
        return self.submitter.launcher

    @launcher.setter
    def launcher(self, launcher: Launcher) -> None:
        self.submitter.launcher = launcher

    # ---- entry points --------------------------------------------------------------------------------

    def handle_event(self, event: AssetEvent) -> Evaluation:
        """Handle one new asset event from the table's stream.

        Raises:
            ConflictError: the queue stayed contended past every retry; fail the record so it comes back.
            StoreUnavailableError: throttled; fail the record so it comes back.
            SubmissionError: a created run could not be submitted; it is kept and retried.
        """
        known = self.catalog.assets.get(event.asset)
        if self._retrying(lambda: self.store.record_asset(event, name=known.name if known else None)):
            self.bus.publish(listeners.ASSET_CREATED, listeners.asset_created(event.asset, known))
        # Airflow's on_asset_changed, then on_asset_event_emitted, when the event is recorded.
        self.bus.publish(listeners.ASSET_CHANGED, listeners.asset_changed(event.asset, known))
        emitted = listeners.asset_event_emitted(event, known, known_aliases=self.catalog.aliases)
        self.bus.publish(listeners.ASSET_EVENT_EMITTED, emitted)

        result = Evaluation()
        aliases = self.store.aliases_of(event.asset)
        routes, skips = route_event(event, self.catalog.consumers(event.asset, aliases))
        result.skipped = skips
        for skip in skips:
            logger.info(
                "event not routed",
                extra={"event_id": event.id, "pipeline": skip.pipeline, "reason": skip.reason},
            )
        for route in routes:
            pipeline = self.catalog.pipelines[route.pipeline]
            result.routed.append((route.pipeline, route.key))
            result.runs += self._advance(
                pipeline, route.key, [QueueEntry(event, route.aliases)], result=result
            )
        self.submitter.submit(result.runs, also_retry={r for r, _ in result.routed})
        return result

    def handle_tick(self, pipeline_id: str, scheduled_time: datetime) -> Evaluation:
        """Handle a cron tick of an ``AssetOrTimeSchedule`` pipeline (redelivered ticks are ignored).

        Raises:
            NotFoundError: no such pipeline in the catalog.
        """
        pipeline = self._pipeline(pipeline_id)
        result = Evaluation()
        result.runs = self._advance(pipeline, "", (), ticks=[scheduled_time], result=result)
        self.submitter.submit(result.runs, also_retry={pipeline_id})
        return result

    def release(self, pipeline_id: str) -> Evaluation:
        """Re-evaluate a pipeline's queues after one of its runs ended (held events may now run)."""
        pipeline = self._pipeline(pipeline_id)
        result = Evaluation()
        for key in self.store.queue_keys(pipeline_id):
            result.runs += self._advance(pipeline, key, (), result=result)
        self.submitter.submit(result.runs, also_retry={pipeline_id})
        return result

    # ---- internals -----------------------------------------------------------------------------------

    def _pipeline(self, pipeline_id: str) -> Pipeline:
        try:
            return self.catalog.pipelines[pipeline_id]
        except KeyError:
            raise NotFoundError(f"no pipeline {pipeline_id!r} in the catalog") from None

    def _retrying(self, operation: Callable[[], bool]) -> bool:
        for attempt in range(self.max_attempts):
            try:
                return operation()
            except ConflictError:
                self._backoff(attempt)
        return operation()

    def _backoff(self, attempt: int) -> None:
        # Full jitter keeps racing evaluators from retrying in lockstep.
        self._sleep(min(1.0, 0.01 * 2**attempt) * (0.5 + self._rng.random()))

    def _advance(
        self,
        pipeline: Pipeline,
        key: str,
        entries: Sequence[QueueEntry],
        *,
        ticks: Iterable[datetime] = (),
        result: Evaluation,
    ) -> list[Run]:
        created: list[Run] = []
        pending_entries = list(entries)
        pending_ticks = list(ticks)
        for attempt in range(self.max_attempts):
            head = self.store.read_queue_head(pipeline.id, key)
            if pending_entries:
                seen = self.store.already_queued(pipeline.id, key, [e.event.id for e in pending_entries])
                pending_entries = [e for e in pending_entries if e.event.id not in seen]
            if pending_entries and not pending_ticks and self._stays_waiting(pipeline, head, pending_entries):
                # The core would only queue them: add them from the head alone, without reading the queue,
                # so an event of a long-waiting queue (a & b, b not yet come) costs the same as any other.
                try:
                    self.store.append_entries(pipeline, head, pending_entries)
                except ConflictError:
                    result.conflicts += 1
                    self._backoff(attempt)
                    continue
                return created
            stored = self.store.read_queue(pipeline.id, key, head=head)
            gate = self.store.pipeline_gate(pipeline.id)
            transition = advance(
                pipeline,
                stored.state,
                active_runs=gate.active,
                now=self.clock(),
                entries=pending_entries,
                ticks=pending_ticks,
                paused=gate.paused,
            )
            if transition.wake_at is not None:
                # Nothing new may come before the deadline: look at the queue again then.
                self.wakeups.wake_at(pipeline.id, key, transition.wake_at)
            if not transition.changed:
                return created
            try:
                self.store.apply(pipeline, stored, transition)
            except ConflictError:
                result.conflicts += 1
                self._backoff(attempt)
                continue
            created += transition.runs
            for run in transition.runs:
                logger.info(
                    "run created",
                    extra={
                        "run_id": run.run_id,
                        "pipeline": pipeline.id,
                        "partition_key": run.partition_key,
                        "events": len(run.triggering_events),
                    },
                )
            if not transition.more:
                return created
            pending_entries, pending_ticks = [], []
        raise ConflictError(
            f"queue {pipeline.id}/{key or '-'} stayed contended after {self.max_attempts} attempts"
        )

    @staticmethod
    def _stays_waiting(pipeline: Pipeline, head: QueueHead, entries: Sequence[QueueEntry]) -> bool:
        """Whether adding ``entries`` to this batch queue makes no run, judged from the head's summary.

        True only when the head can take them alone (``QueueHead.appended``) and the schedule's condition
        stays unsatisfied with them; otherwise the queue is read and the core decides.
        """
        summary = head.appended(pipeline, entries)
        return summary is not None and not pipeline.condition.evaluate(summary.assets, summary.aliases)
