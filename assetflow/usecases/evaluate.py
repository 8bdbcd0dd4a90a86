"""The evaluator: turns a batch of new asset events into queue entries and runs, safely under concurrency.

A stream batch is the unit of work. Its events are routed to their consumers' queues and grouped by queue
(pipeline and partition key), in stream order; every queue of the batch is read in one batched read (its
head, its pipeline's active-run counter, which of the events it has seen), and each queue's change is one
conditional transaction (split where DynamoDB's limits say so). A queue that fails (contended past every
retry, throttled) fails only its own events: the other queues' changes stand, and their events, when the
stream brings them back, are recognised as seen. The runs of the batch are then submitted in parallel.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from assetflow.core import listeners
from assetflow.core.catalog import Catalog
from assetflow.core.entries import entry_kind
from assetflow.core.errors import ConflictError, NotFoundError
from assetflow.core.events import AssetEvent, Run
from assetflow.core.pipeline import Pipeline
from assetflow.core.queues import QueueHead, StoredQueue
from assetflow.core.scheduler import (
    QueueEntry,
    QueueState,
    Skip,
    advance,
    route_event,
    routes_on_content,
    takes_events_alone,
)
from assetflow.ports import (
    Clock,
    ExtrasStore,
    Launcher,
    ListenerBus,
    NoWakeUps,
    NullBus,
    QueueSnapshot,
    Store,
    TransitionTooLargeError,
    WakeUps,
)
from assetflow.usecases.submit import Submitter
from assetflow_job.contract import REF_KEY

logger = logging.getLogger(__name__)

#: Events one transition takes at most (fewer when DynamoDB's 100 writes a transaction say so).
ENTRIES_PER_TRANSITION = 25

ASSET_CREATED = listeners.ASSET_CREATED
ASSET_CHANGED = listeners.ASSET_CHANGED
ASSET_EVENT_EMITTED = listeners.ASSET_EVENT_EMITTED


@dataclass
class Evaluation:
    """What handling a batch of events (or one event, a tick, a run's end) did.

    ``failed`` maps the id of each event that could not be handled to why: its queue's change could not be
    applied (that event and the queue's later ones), or a run it made could not be submitted. The stream
    must bring those back; every other event is done.
    """

    routed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    conflicts: int = 0
    failed: dict[str, Exception] = field(default_factory=dict)
    #: The job run id of each run started by this evaluation (its new runs and unsubmitted older ones).
    submitted: dict[str, str] = field(default_factory=dict)
    #: The pipelines each event was routed to.
    pipelines_of: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class _Group:
    """One queue of the batch: its entries in stream order."""

    pipeline: Pipeline
    key: str
    entries: list[QueueEntry] = field(default_factory=list)


class _GroupFailedError(Exception):
    """A queue's change failed after ``applied`` of its entries were applied."""

    def __init__(self, applied: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.applied = applied
        self.cause = cause


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
        submit_workers: int = 8,
        sweep_seconds: float = 60.0,
        extras: ExtrasStore | None = None,
    ) -> None:
        self.catalog = catalog
        #: Reads back extras stored by reference, for consumers that route on content (where, key=).
        self.extras = extras
        self.store = store
        self.bus = bus or NullBus()
        #: One-shot re-evaluations at a debounce or max-wait deadline (``Transition.wake_at``).
        self.wakeups = wakeups or NoWakeUps()
        self.clock = clock
        self.max_attempts = max_attempts
        self._sleep = sleep
        self._rng = rng or random.Random()  # noqa: S311  (jitter, not security)
        # Alias resolutions are read only when some schedule consumes an alias.
        self._alias_routing = bool(catalog.alias_consumers)
        self.submitter = Submitter(
            catalog=catalog,
            store=store,
            launcher=launcher,
            clock=clock,
            max_attempts=max_attempts,
            backoff=self._backoff,
            workers=submit_workers,
            sweep_seconds=sweep_seconds,
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
        """Handle one new asset event from the table's stream (a batch of one).

        Raises:
            ConflictError: the queue stayed contended past every retry; fail the record so it comes back.
            StoreUnavailableError: throttled; fail the record so it comes back.
            SubmissionError: a created run could not be submitted; it is kept and retried.
        """
        result = self.handle_batch([event])
        if result.failed:
            raise next(iter(result.failed.values()))
        return result

    def handle_batch(self, events: Sequence[AssetEvent], *, announce: bool = True) -> Evaluation:
        """Handle a batch of new asset events from the table's stream, in stream order.

        Never raises for one queue's failure: ``failed`` names the events to bring back. ``announce=False``
        for synthetic entries (a failed run's), which are no asset change to tell listeners about.

        Raises:
            StoreUnavailableError: the batched reads every queue needs were throttled; fail the whole batch.
        """
        result = Evaluation()
        unique = list({e.id: e for e in reversed(events)}.values())[::-1]
        if not unique:
            return result
        if announce:
            self._announce(unique)
        groups, first_routed = self._route(unique, result)
        swept = self.submitter.sweep({g.pipeline.id for g in groups.values()})
        self._advance_groups(groups, result)
        failures = self.submitter.submit_all(result.runs, swept=swept, started=result.submitted)
        for pipeline_id, error in failures.items():
            event_id = first_routed.get(pipeline_id)
            if event_id is not None:
                result.failed.setdefault(event_id, error)
        return result

    def handle_tick(self, pipeline_id: str, scheduled_time: datetime) -> Evaluation:
        """Handle a cron tick of an ``AssetOrTimeSchedule`` pipeline (redelivered ticks are ignored).

        Raises:
            NotFoundError: no such pipeline in the catalog.
            ConflictError, StoreUnavailableError: the queue could not be changed; retry the tick.
            SubmissionError: the tick's run could not be submitted (it is kept and retried).
        """
        pipeline = self._pipeline(pipeline_id)
        result = Evaluation()
        swept = self.submitter.sweep({pipeline_id}, always={pipeline_id})
        result.runs = self._advance_one(pipeline, "", ticks=[scheduled_time], result=result)
        self.submitter.submit(result.runs, also_retry={pipeline_id}, swept=swept)
        return result

    def release(self, pipeline_id: str) -> Evaluation:
        """Re-evaluate a pipeline's queues after one of its runs ended (held events may now run).

        Raises:
            ConflictError, StoreUnavailableError: a queue could not be changed; retry.
            SubmissionError: a released run could not be submitted (it is kept and retried).
        """
        pipeline = self._pipeline(pipeline_id)
        result = Evaluation()
        swept = self.submitter.sweep({pipeline_id}, always={pipeline_id})
        for key in self.store.queue_keys(pipeline_id):
            result.runs += self._advance_one(pipeline, key, result=result)
        self.submitter.submit(result.runs, also_retry={pipeline_id}, swept=swept)
        return result

    # ---- the steps of a batch ------------------------------------------------------------------------

    def _announce(self, events: Sequence[AssetEvent]) -> None:
        """Listener events of the batch, only of the types the environment subscribes to.

        Synthetic entries (a missed deadline, a failed run) are no asset changes: their own use cases announce.
        Neither is a held event an operator released: it was announced when it was recorded.
        """
        events = [e for e in events if entry_kind(e) == "event" and "released" not in e.source]
        bus = self.bus
        entries: list[tuple[str, Mapping[str, Any]]] = []
        assets = self.catalog.assets
        if bus.wants(ASSET_CREATED):
            for uri in sorted(self.store.new_assets(events)):
                entries.append((ASSET_CREATED, listeners.asset_created(uri, assets.get(uri))))
        changed, emitted = bus.wants(ASSET_CHANGED), bus.wants(ASSET_EVENT_EMITTED)
        for event in events:
            known = assets.get(event.asset)
            # Airflow's on_asset_changed, then on_asset_event_emitted, when the event is recorded.
            if changed:
                entries.append((ASSET_CHANGED, listeners.asset_changed(event.asset, known)))
            if emitted:
                entries.append(
                    (
                        ASSET_EVENT_EMITTED,
                        listeners.asset_event_emitted(event, known, known_aliases=self.catalog.aliases),
                    )
                )
        if entries:
            bus.publish_many(entries)

    def _route(
        self, events: Sequence[AssetEvent], result: Evaluation
    ) -> tuple[dict[tuple[str, str], _Group], dict[str, str]]:
        """Each event's queues, as groups in stream order; and the first event routed to each pipeline."""
        aliases: dict[str, list[str]] = {}
        if self._alias_routing:
            for uri in dict.fromkeys(e.asset for e in events):
                aliases[uri] = self.store.aliases_of(uri)
        groups: dict[tuple[str, str], _Group] = {}
        first_routed: dict[str, str] = {}
        consumed = self._consumed_versions(events, aliases)
        for event in events:
            consumers = self.catalog.consumers(event.asset, aliases.get(event.asset, []))
            routes, skips = route_event(
                self._content(event, consumers), consumers, consumed_versions=consumed
            )
            if event.version is not None:
                # A second event of this version in the batch is the same data: the first one's run takes it.
                consumed |= {(r.pipeline, event.asset, event.version) for r in routes if r.counted}
            result.skipped += skips
            for skip in skips:
                logger.info(
                    "event not routed",
                    extra={
                        "event_id": event.id,
                        "asset": event.asset,
                        "pipeline": skip.pipeline,
                        "reason": skip.reason,
                    },
                )
            for route in routes:  # entries of the stored event (a reference stays a reference)
                group = groups.setdefault(
                    (route.pipeline, route.key), _Group(self.catalog.pipelines[route.pipeline], route.key)
                )
                group.entries.append(route.entry(event))
                result.routed.append((route.pipeline, route.key))
                result.pipelines_of.setdefault(event.id, []).append(route.pipeline)
                first_routed.setdefault(route.pipeline, event.id)
        return groups, first_routed

    def _content(
        self, event: AssetEvent, consumers: Sequence[tuple[Pipeline, tuple[str, ...]]]
    ) -> AssetEvent:
        """The event with its whole extra when a consumer routes on content and the extra is stored by reference.

        Routing decides with it; the queue entries keep the stored event (its reference), as every view shows it.

        Raises:
            StoreUnavailableError: the extra could not be read now; the record comes back.
        """
        if self.extras is None or REF_KEY not in event.extra:
            return event
        if not any(routes_on_content(pipeline) for pipeline, _ in consumers):
            return event
        return replace(event, extra=self.extras.load(event.extra))

    def _consumed_versions(
        self, events: Sequence[AssetEvent], aliases: Mapping[str, list[str]]
    ) -> set[tuple[str, str, str]]:
        """The (pipeline, asset, version) triples of the batch that ``skip_unchanged`` pipelines consumed already."""
        triples = [
            (pipeline.id, event.asset, event.version)
            for event in events
            if event.version is not None
            for pipeline, _ in self.catalog.consumers(event.asset, aliases.get(event.asset, []))
            if pipeline.skip_unchanged
        ]
        return set(self.store.consumed_versions(triples)) if triples else set()

    def _advance_groups(self, groups: Mapping[tuple[str, str], _Group], result: Evaluation) -> None:
        if not groups:
            return
        snapshots = self.store.read_queue_snapshots(
            [(g.pipeline.id, g.key, [e.event for e in g.entries]) for g in groups.values()],
            run_per_event={g.pipeline.id for g in groups.values() if takes_events_alone(g.pipeline)},
        )
        for (pipeline_id, key), group in groups.items():
            try:
                result.runs += self._advance(
                    group.pipeline, key, group.entries, snapshots[(pipeline_id, key)], result
                )
            except _GroupFailedError as failure:
                for entry in group.entries[failure.applied :]:
                    result.failed.setdefault(entry.event.id, failure.cause)
                logger.warning(
                    "queue change failed; its events come back",
                    extra={
                        "pipeline": pipeline_id,
                        "partition_key": key or None,
                        "events": len(group.entries) - failure.applied,
                        "error": type(failure.cause).__name__,
                    },
                )

    def _advance_one(
        self, pipeline: Pipeline, key: str, *, ticks: Iterable[datetime] = (), result: Evaluation
    ) -> list[Run]:
        snapshot = self.store.read_queue_snapshots([(pipeline.id, key, [])])[(pipeline.id, key)]
        try:
            return self._advance(pipeline, key, [], snapshot, result, ticks=list(ticks))
        except _GroupFailedError as failure:
            raise failure.cause from None

    # ---- one queue -----------------------------------------------------------------------------------

    def _advance(
        self,
        pipeline: Pipeline,
        key: str,
        entries: Sequence[QueueEntry],
        snapshot: QueueSnapshot,
        result: Evaluation,
        *,
        ticks: list[datetime] | None = None,
    ) -> list[Run]:
        """Apply a queue's arrivals (and ticks), as few transactions as DynamoDB's limits allow.

        Raises:
            _GroupFailedError: a change failed for good; ``applied`` entries were applied before it.
        """
        created: list[Run] = []
        pending = [e for e in entries if e.event.id not in snapshot.seen]
        applied = len(entries) - len(pending)
        pending_ticks = list(ticks or [])
        head, active = snapshot.head, snapshot.active_runs
        known = self._known(pipeline, key, head)
        size, attempt, more = ENTRIES_PER_TRANSITION, 0, False
        # With no entries (a tick, a run's end) the queue is still judged once: a freed slot may release it.
        judged = bool(entries)
        while pending or pending_ticks or more or not judged:
            part = pending[:size]
            try:
                wait = (
                    head.waits(pipeline, part, now=self.clock(), paused=snapshot.paused)
                    if part and not pending_ticks and known is None
                    else None
                )
                if wait is not None:
                    if wait.wake_at is not None:  # nothing new may come before the deadline: look again then
                        self.wakeups.wake_at(pipeline.id, key, wait.wake_at)
                    # The core would only queue them: add them from the head alone, without reading the
                    # queue, so an event of a long-waiting queue (a & b, b not yet come) costs as any other.
                    summary = self.store.append_entries(pipeline, head, part)
                    head = QueueHead(
                        head.pipeline, key, head.version + 1, head.generation, (), head.last_tick, summary
                    )
                    more = False
                else:
                    stored = known or self.store.read_queue(pipeline.id, key, head=head)
                    transition = advance(
                        pipeline,
                        stored.state,
                        active_runs=active,
                        now=self.clock(),
                        entries=part,
                        ticks=pending_ticks,
                        paused=snapshot.paused,
                    )
                    if transition.wake_at is not None:
                        self.wakeups.wake_at(pipeline.id, key, transition.wake_at)
                    if transition.changed:
                        self.store.apply(pipeline, stored, transition)
                    known = stored.after(pipeline, transition)
                    head = known.head()
                    active += len(transition.runs)
                    created += transition.runs
                    self._log_runs(pipeline, transition.runs)
                    more = transition.more
                    pending_ticks = []
            except TransitionTooLargeError as exc:
                if len(part) <= 1:
                    raise _GroupFailedError(applied, exc) from exc
                size = max(1, len(part) // 2)
                continue
            except ConflictError as exc:
                result.conflicts += 1
                attempt += 1
                if attempt >= self.max_attempts:
                    raise _GroupFailedError(
                        applied,
                        ConflictError(
                            f"queue {pipeline.id}/{key or '-'} stayed contended after {self.max_attempts} attempts"
                        ),
                    ) from exc
                self._backoff(attempt - 1)
                snapshot = self.store.read_queue_snapshots(
                    [(pipeline.id, key, [e.event for e in pending])],
                    run_per_event=(pipeline.id,) if takes_events_alone(pipeline) else (),
                )[(pipeline.id, key)]
                still = [e for e in pending if e.event.id not in snapshot.seen]
                still = self._unconsumed(pipeline, still, result)
                applied += len(pending) - len(still)
                pending, head, active = still, snapshot.head, snapshot.active_runs
                known = self._known(pipeline, key, head)
                continue
            except Exception as exc:  # throttled or failing: this queue's remaining events come back
                raise _GroupFailedError(applied, exc) from exc
            judged = True
            pending = pending[len(part) :]
            applied += len(part)
        return created

    def _unconsumed(
        self, pipeline: Pipeline, entries: list[QueueEntry], result: Evaluation
    ) -> list[QueueEntry]:
        """After a lost race, the entries whose data version no run of a ``skip_unchanged`` pipeline took meanwhile.

        The run-creating transaction records each version it consumes only if no run took it yet, so a racing
        evaluator's run of the same version cancels this one's transaction: its entries of that version are
        skipped now (one batched read, only for versioned entries of such pipelines).
        """
        if not pipeline.skip_unchanged:
            return entries
        versioned = [e for e in entries if e.event.version is not None and e.kind == "event"]
        if not versioned:
            return entries
        taken = self.store.consumed_versions(
            [(pipeline.id, e.event.asset, e.event.version or "") for e in versioned]
        )
        kept: list[QueueEntry] = []
        for entry in entries:
            if (pipeline.id, entry.event.asset, entry.event.version) in taken:
                result.skipped.append(
                    Skip(
                        pipeline.id,
                        f"version {entry.event.version!r} of {entry.event.asset} was consumed already "
                        "(skip_unchanged)",
                    )
                )
            else:
                kept.append(entry)
        return kept

    @staticmethod
    def _known(pipeline: Pipeline, key: str, head: QueueHead) -> StoredQueue | None:
        """The queue's whole state when its head shows it empty (nothing to read), else None."""
        if head.summary is None or head.summary.entries:
            return None
        state = QueueState(pipeline.id, key, head.version, (), head.pending_ticks, head.last_tick)
        return StoredQueue(state, head.generation)

    @staticmethod
    def _log_runs(pipeline: Pipeline, runs: Iterable[Run]) -> None:
        for run in runs:
            logger.info(
                "run created",
                extra={
                    "run_id": run.run_id,
                    "pipeline": pipeline.id,
                    "partition_key": run.partition_key,
                    "events": len(run.triggering_events),
                },
            )

    # ---- internals -----------------------------------------------------------------------------------

    def _pipeline(self, pipeline_id: str) -> Pipeline:
        try:
            return self.catalog.pipelines[pipeline_id]
        except KeyError:
            raise NotFoundError(f"no pipeline {pipeline_id!r} in the catalog") from None

    def _backoff(self, attempt: int) -> None:
        # Full jitter keeps racing evaluators from retrying in lockstep.
        self._sleep(min(1.0, 0.01 * 2**attempt) * (0.5 + self._rng.random()))


__all__ = [
    "ASSET_CHANGED",
    "ASSET_CREATED",
    "ASSET_EVENT_EMITTED",
    "ENTRIES_PER_TRANSITION",
    "Evaluation",
    "Evaluator",
]
