"""The ports: what the use cases need from the outside world, named by role, in the core's terms.

Adapters implement them (``DynamoDbStore``, ``EmrServerlessLauncher``, ``EventBridgeBus``,
``S3RunOutputs``, ``S3ExtrasStore``); the composition root wires them; tests use fakes. A use case imports
this module and the core, never an adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from assetflow.core.errors import AssetflowError, DocumentError, StoreUnavailableError
from assetflow.core.events import OUTLET_TOKEN_SCHEME, AssetEvent, Run, RunState
from assetflow.core.pipeline import Pipeline
from assetflow.core.queues import QueueHead, QueueSummary, StoredQueue
from assetflow.core.scheduler import QueueEntry, Transition
from assetflow.core.watermarks import Watermark

#: The time now (UTC, aware). The core never reads the clock; the use cases ask this port.
Clock = Callable[[], datetime]


# ---- errors the ports raise (beside the core's ConflictError, NotFoundError, StoreUnavailableError) -----


class SubmissionError(AssetflowError):
    """A run could not be submitted now (throttled, a quota, a service error); it stays queued and is retried."""


class SubmissionRejectedError(AssetflowError):
    """The job service refused the run as asked (validation, access, a missing resource).

    Retrying the same request cannot help until the deployment changes; the run stays queued with the
    reason for operators and is tried again with the pipeline's next evaluation.
    """


class TransitionTooLargeError(AssetflowError, ValueError):
    """A transition needs more writes than one transaction holds; feed it fewer entries at once."""


class JobServiceUnavailableError(StoreUnavailableError):
    """The job service (EMR Serverless) is throttling or failing a call other than a submission; retry later."""


class JobAlreadyEndedError(AssetflowError):
    """The job service says the job run has ended already, so there is nothing to cancel."""


class OutletMetadataError(DocumentError):
    """The outlet metadata a job wrote is not a version-1 ``assetflow.outlet-metadata`` document."""


class ExtraTooLargeError(AssetflowError, ValueError):
    """An extra is over the ceiling of extras stored by reference."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"the extra is {size} bytes of JSON, over the {limit}-byte ceiling of extras stored by reference"
        )


# ---- what the store returns ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One page of a listing; ``next`` is the token for the following page, None on the last."""

    items: list[dict[str, Any]]
    next: str | None

    def to_json(self) -> dict[str, Any]:
        """DESIGN §5's list shape."""
        return {"items": self.items, "next": self.next}


# ---- what ingest hands the store: a message's outcome -------------------------------------------------

ReasonCode = Literal[
    "unknown-source",
    "malformed-record",
    "not-base64",
    "not-utf8",
    "too-deep",
    "filter",
    "schema",
    "schema-unusable",
    "partition-key",
    "too-large",
]


@dataclass(frozen=True)
class Accepted:
    """A message that becomes one asset event; ``identity`` (the message's identity) is its dedupe key.

    ``detached`` is the whole extra to write to the extras store before the event, whose extra then
    references it; None when the extra is inline.
    """

    event: AssetEvent
    identity: str
    watcher: str
    detached: Detached | None = None
    #: The source can deliver the message again at any age (a Kafka topic read again from an old offset), not
    #: only within SQS's or a stream's retention: its dedupe record is kept for good.
    lasting_identity: bool = False
    #: The same message's events of the watcher's other assets (one source feeding several assets), each
    #: stored once under ``also_identity``; they share ``event``'s extra (and its detached copy).
    also: tuple[AssetEvent, ...] = ()
    #: Its events' items follow from the message alone (ids from its identity, the time from the transport's
    #: own record of the message, which every delivery carries): a redelivery makes the very same items, so
    #: each item is its own dedupe record and none is written apart.
    keyed: bool = False
    #: The transport says this is the message's first delivery (an SQS receive count of 1): nothing of it
    #: can be stored yet, so a ``keyed`` message's items go out in batched puts without a condition (a rare
    #: duplicate delivery writes the same items again, which changes nothing).
    first_delivery: bool = False

    def also_identity(self, event: AssetEvent) -> str:
        """The dedupe key of one of the ``also`` events: the message's identity and the event's asset."""
        return f"{self.identity}#{event.asset}"


@dataclass(frozen=True)
class Quarantined:
    """A message that is kept aside with the reason; ``code`` names the kind of reason for logs and metrics."""

    watcher: str
    code: ReasonCode
    reason: str
    body: str
    facts: Mapping[str, Any]
    identity: str
    #: As ``Accepted.lasting_identity``: the quarantine's dedupe record is kept for good.
    lasting_identity: bool = False


Outcome = Accepted | Quarantined


@dataclass(frozen=True)
class Written:
    """An event as a batched write left it: the stored one (the first on a redelivery) and whether it is new."""

    event: AssetEvent
    created: bool


@dataclass(frozen=True)
class QueueSnapshot:
    """What the evaluator needs of one queue before it changes it, read in one batch with other queues'.

    ``seen`` are the asked-for events that this queue has seen before (queued or consumed);
    ``active_runs`` is the pipeline's counter of active runs (kept for pipelines with ``max_active_runs``),
    on the same item as its ``paused`` flag.
    """

    head: QueueHead
    active_runs: int
    seen: frozenset[str]
    #: An operator paused the pipeline (its events queue, no run is made).
    paused: bool = False


# ---- the store, one port per aggregate -------------------------------------------------------------------


class EventStore(Protocol):
    """Asset events (written once, deduplicated by a message's identity), assets and alias resolutions."""

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ) -> tuple[AssetEvent, bool]:
        """Store an event once; returns the stored event (the first one on a redelivery) and whether it is new.

        The dedupe record lives as long as a message can be redelivered (15 days), or for good with ``lasting``.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        ...

    def put_events(
        self,
        events: Sequence[tuple[AssetEvent, str | None]],
        *,
        now: datetime,
        lanes: Sequence[str] | None = None,
        lasting: bool = False,
        blind: bool = False,
    ) -> list[Written | AssetflowError]:
        """Store events once each (``(event, dedupe_key)``), batched; one answer per event, in order.

        ``lasting``: their dedupe records are kept for good (as ``put_event``'s). ``blind``: the events are
        their own dedupe records (no dedupe keys) and known not to be stored yet (``Accepted.first_delivery``):
        they are written without a condition, each answered as new.

        An answer is the written event, or the error that kept it from being written (a throttled or
        contended write: retry that event); the other events are written whatever happens to it, except that
        with ``lanes`` (one per event: a FIFO queue, a Kafka partition) nothing after an event that cannot be
        written is written in its lane.
        """
        ...

    def find_dedupe(self, dedupe_key: str) -> AssetEvent | None:
        """The event a message (by its identity) already produced, if any."""
        ...

    def find_stored(self, event: AssetEvent) -> AssetEvent | None:
        """The event stored under ``event``'s own key (its asset, time and id), if any."""
        ...

    def new_assets(self, events: Sequence[AssetEvent]) -> set[str]:
        """The assets whose first stored event is among ``events`` (they were created by them)."""
        ...

    def record_asset(self, event: AssetEvent, *, name: str | None = None) -> bool:
        """Count an event in its asset's summary, once; True when this event created the asset."""
        ...

    def list_assets(self, *, limit: int = 100, token: str | None = None) -> Page:
        """Assets with their last event time and event count, by URI."""
        ...

    def list_events(
        self, uri: str, *, limit: int = 100, token: str | None = None, newest_first: bool = True
    ) -> Page:
        """An asset's events, newest first by default."""
        ...

    def events_produced_by(
        self, run_id: str, *, outlets: Collection[str] = (), ended_at: datetime | None = None
    ) -> list[dict[str, Any]]:
        """The events a run's outlets produced, oldest first.

        ``outlets`` (the run's pipeline's declared asset outlets) and ``ended_at`` (the run's recorded end)
        find its declared outlets' events, which carry no index entry of their own; without them only the
        alias additions (and events of runs whose end was not recorded) are found.
        """
        ...

    def add_alias_resolution(self, alias: str, uri: str, *, now: datetime) -> bool:
        """Record that ``alias`` resolves to ``uri``; True the first time."""
        ...

    def aliases_of(self, uri: str) -> list[str]:
        """The aliases an asset resolves from."""
        ...


class QueueStore(Protocol):
    """Pipeline queues: read a queue, apply the core's transitions to it conditionally."""

    def read_queue_head(self, pipeline: str, key: str = "") -> QueueHead:
        """A queue's head alone (one consistent read)."""
        ...

    def read_queue(self, pipeline: str, key: str = "", *, head: QueueHead | None = None) -> StoredQueue:
        """A queue's state: its head and the entries of its current generation."""
        ...

    def queue_keys(self, pipeline: str, *, pending_only: bool = True) -> list[str]:
        """The keys of a pipeline's queues (those with queued events or held ticks by default)."""
        ...

    def read_queue_snapshots(
        self,
        wanted: Sequence[tuple[str, str, Sequence[AssetEvent]]],
        *,
        run_per_event: Collection[str] = (),
    ) -> dict[tuple[str, str], QueueSnapshot]:
        """Many queues' heads, active-run counters and seen events in one batched read.

        ``wanted`` lists ``(pipeline, key, events)``; the answer is keyed by ``(pipeline, key)``.
        ``run_per_event`` names the pipelines whose runs may take an event alone (``takes_events_alone``): a
        store may let the run that takes an event alone (``event_run_id``) say that the queue saw it.
        """
        ...

    def already_queued(self, pipeline: str, key: str, events: Sequence[AssetEvent]) -> set[str]:
        """Which of these events (their ids) this queue has seen before (queued or consumed)."""
        ...

    def active_runs(self, pipeline: str) -> int:
        """How many runs of the pipeline are queued or running."""
        ...

    def apply(self, pipeline: Pipeline, stored: StoredQueue, transition: Transition) -> None:
        """Apply a transition atomically, conditional on the queue's version and the run limit.

        Raises:
            ConflictError: another evaluator changed the queue or the active runs first; re-read and retry.
            TransitionTooLargeError: more writes than one transaction holds; feed fewer entries at once.
        """
        ...

    def append_entries(
        self, pipeline: Pipeline, head: QueueHead, entries: Sequence[QueueEntry]
    ) -> QueueSummary:
        """Add entries that leave a batch queue waiting, from its head alone.

        Raises:
            ConflictError: the queue changed, or an entry was queued meanwhile; read again.
        """
        ...

    def list_queue(self, pipeline: str) -> list[dict[str, Any]]:
        """Queued events of a pipeline, per queue key, oldest first."""
        ...

    def clear_queue(self, pipeline: Pipeline, uri: str | None = None) -> int:
        """Drop queued events of a pipeline (of one asset with ``uri``); returns how many were dropped."""
        ...


class RunStore(Protocol):
    """Runs: their states, their job run ids, and the way back from a job run to its run."""

    def get_run(self, run_id: str, *, with_events: bool = True) -> Run:
        """A run, with its triggering events by default.

        Raises:
            NotFoundError: no such run.
        """
        ...

    def list_runs(self, pipeline: str | None = None, *, limit: int = 50, token: str | None = None) -> Page:
        """Runs, newest first, of one pipeline or of all (without their triggering events)."""
        ...

    def unsubmitted_runs(self, pipeline: str) -> list[Run]:
        """Runs created but not yet accepted by the job service, oldest first."""
        ...

    def forget_pending(self, runs: Sequence[Run]) -> None:
        """Runs whose job run ids are recorded no longer wait: take them off what ``unsubmitted_runs`` reads."""
        ...

    def submitted_active_runs(self) -> list[Run]:
        """Runs the job service accepted that are still queued or running here, oldest first."""
        ...

    def mark_submitted(self, run_id: str, job_run_id: str) -> None:
        """Record the job run id, and start a queued run (it is running from its submission); harmless again.

        Raises:
            AlreadySubmittedError: the run has another job run id.
            ConflictError: a lost race with another writer of the run; retry.
        """
        ...

    def mark_submitted_many(self, submitted: Mapping[str, str]) -> dict[str, AssetflowError]:
        """Record many runs' job run ids (``run id -> job run id``) at once; returns the runs that failed.

        Each as ``mark_submitted`` records one (a queued run starts).

        A failure is an ``AlreadySubmittedError`` (the run has another job run id) or a ``ConflictError``
        (a lost race: retry that run alone).
        """
        ...

    def record_submission_failure(self, run_id: str, reason: str, *, now: datetime) -> None:
        """Keep the last submission error on the run for operators."""
        ...

    def set_run_state(
        self, run_id: str, new: RunState, *, job_run_id: str | None = None, now: datetime | None = None
    ) -> tuple[Run, bool]:
        """Move a run to ``new`` if the state table allows it; returns the run and whether it moved.

        ``now``: a final state records it as the run's ``ended_at``, the first time only.

        Raises:
            NotFoundError: no such run.
            ConflictError: the run kept changing under concurrent state events.
        """
        ...


class QuarantineStore(Protocol):
    """Messages kept aside with the reason they were refused."""

    def quarantine(
        self,
        *,
        watcher: str,
        reason: str,
        body: str,
        facts: Mapping[str, Any],
        identity: str,
        now: datetime,
        lasting: bool = False,
    ) -> bool:
        """Keep a rejected message with its reason, once per message identity (for good with ``lasting``)."""
        ...

    def list_quarantine(self, *, limit: int = 100, token: str | None = None) -> Page:
        """Rejected messages, newest first."""
        ...


@dataclass(frozen=True)
class PipelineGate:
    """A pipeline's run gate: how many of its runs are active, and whether an operator paused it."""

    active: int
    paused: bool


class PipelineStore(Protocol):
    """Pipeline control: the paused flag, runs held for a free slot, and the history backfills read."""

    def pipeline_gate(self, pipeline: str) -> PipelineGate:
        """The pipeline's active runs and paused flag (one consistent read)."""
        ...

    def set_paused(self, pipeline: str, paused: bool, *, now: datetime, principal: str) -> bool:
        """Pause or unpause; True when that changed the flag."""
        ...

    def hold_run(self, run: Run, *, trigger_from: str | None = None) -> tuple[Run, bool]:
        """Create a queued run that waits for a slot (it counts as active once admitted); once per run id.

        ``trigger_from``: a run whose stored triggering events this run shares (a replay), instead of its own.
        Returns the stored run and whether this call created it.

        Raises:
            NotFoundError: ``trigger_from`` names no run.
        """
        ...

    def held_runs(self, pipeline: str) -> list[str]:
        """The ids of the runs held for a slot, in the order they will be admitted."""
        ...

    def is_held(self, run_id: str) -> bool:
        """Whether the run is held for a slot (created, not yet counted as active)."""
        ...

    def admit_held(self, pipeline: Pipeline, *, limit: int = 25) -> list[Run]:
        """Count held runs as active, oldest first, while a slot is free and the pipeline is not paused.

        Returns the admitted runs (to submit).

        Raises:
            ConflictError: a lost race with another writer; retry.
        """
        ...

    def cancel_held(self, run_id: str) -> Run | None:
        """Cancel a held run; None when it is no longer held (admitted or ended meanwhile)."""
        ...

    def events_between(self, uri: str, start: datetime, end: datetime) -> list[AssetEvent]:
        """An asset's events with ``start <= timestamp < end``, in (timestamp, id) order."""
        ...

    def alias_assets(self, alias: str) -> list[str]:
        """The assets an alias resolves to."""
        ...

    def assets_after(self, after: str | None, *, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` stored assets with URIs after ``after`` (all with None), by URI, as ``list_assets`` rows."""
        ...

    def decision_entries(
        self, pipeline: str, key: str, generation: int, *, aliases: bool = True, wheres: bool = True
    ) -> tuple[QueueEntry, ...]:
        """A queue generation's entries with what a decision reads (selector keys, kinds, times), no extras.

        ``aliases``/``wheres`` False skip those attributes (the condition names no alias / no where-node).
        """
        ...

    def declare_asset(self, uri: str, *, name: str, now: datetime) -> bool:
        """Register a declared asset (no events yet) unless it is registered; True when this call did."""
        ...

    def declare_alias(self, name: str, *, now: datetime) -> bool:
        """Register a declared alias unless it is registered; True when this call did."""
        ...

    def catalog_announced(self, digest: str) -> bool:
        """Whether a catalog with this digest was announced."""
        ...

    def mark_catalog_announced(self, digest: str, *, now: datetime) -> None:
        """Remember that a catalog with this digest was announced."""
        ...

    def consumed_versions(
        self, triples: Sequence[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], frozenset[str]]:
        """Which of these (pipeline, asset, version) triples a run consumed already, with the event ids it took.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        ...

    def forget_seen(self, pipeline: str, key: str, events: Sequence[AssetEvent]) -> None:
        """Let a queue take these events again (a cancelled run's events, re-queued on request)."""
        ...


class Store(EventStore, QueueStore, RunStore, QuarantineStore, PipelineStore, Protocol):
    """Every aggregate's store in one (one table on AWS)."""


# ---- the other services ----------------------------------------------------------------------------------


class Launcher(Protocol):
    """Starts a run's Spark job; idempotent on the run id (EMR's ``clientToken``). Cancels it."""

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        """Start the job; returns the job run id.

        Raises:
            SubmissionError: the job could not be started now (throttled); the run is retried.
            SubmissionRejectedError: the job service refused the request as made.
        """
        ...

    def cancel(self, run: Run) -> None:
        """Stop the run's job run (EMR ``CancelJobRun``); harmless when repeated.

        Raises:
            JobAlreadyEndedError: the job run has ended already.
            JobServiceUnavailableError: throttled or failing; retry.
        """
        ...


class WakeUps(Protocol):
    """One-shot re-evaluations of a queue at a given time (a debounce or max-wait deadline)."""

    def wake_at(self, pipeline: str, key: str, when: datetime) -> None:
        """Re-evaluate the queue ``(pipeline, key)`` at ``when`` (once; repeated requests are harmless).

        Raises:
            StoreUnavailableError: the scheduler is throttling or failing; retry.
        """
        ...


class NoWakeUps:
    """Wake-ups dropped (tests, and runtimes where a run's end or the next event re-evaluates anyway)."""

    def wake_at(self, pipeline: str, key: str, when: datetime) -> None:
        """Drop the wake-up."""


class Deadlines(Protocol):
    """One-shot checks of an asset's expected arrival at its next deadline (EventBridge Scheduler's ``at()``)."""

    def check_at(self, uri: str, when: datetime) -> None:
        """Check ``uri``'s ``ExpectedArrival`` at ``when`` (once; repeated requests are harmless).

        Raises:
            StoreUnavailableError: the scheduler is throttling or failing; retry.
        """
        ...


class NoDeadlines:
    """Deadline checks dropped (a runtime without schedules)."""

    def check_at(self, uri: str, when: datetime) -> None:
        """Drop the check."""


class LateMarks(Protocol):
    """The missed deadlines of expected assets: each recorded once, so each is announced once."""

    def mark_late(self, uri: str, deadline: datetime, key: str | None, *, now: datetime) -> bool:
        """Record that ``uri`` missed ``deadline`` (for ``key``); True the first time.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        ...

    def late_marks(self, uri: str, *, limit: int = 20) -> list[dict[str, Any]]:
        """The newest recorded misses of ``uri`` (``deadline``, ``partition_key``, ``at``), newest first."""
        ...


class Releases(Protocol):
    """Operators' releases of events held by a failed blocking check: each recorded once, with who and when."""

    def mark_released(self, uri: str, event_id: str, *, by: str, now: datetime) -> bool:
        """Record that ``event_id`` of ``uri`` was released; True the first time.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        ...

    def released_ids(self, uri: str, event_ids: Sequence[str]) -> set[str]:
        """Which of these events of ``uri`` an operator released."""
        ...

    def mark_held(self, event: AssetEvent) -> None:
        """Keep an event held by a failed blocking check findable by its id.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        ...

    def held_event(self, event_id: str) -> AssetEvent | None:
        """The held event with this id (as :meth:`mark_held` kept it), or None."""
        ...


class WatermarkStore(Protocol):
    """Per source partition, the newest position recorded (ingest advances it; reconciliation reads it)."""

    def advance_watermarks(self, marks: Sequence[Watermark], *, now: datetime) -> None:
        """Move each source partition's watermark forward to its mark (never back).

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        ...

    def watermarks(self, source: str) -> list[Watermark]:
        """The watermarks of one source, by partition."""
        ...

    def close_gap(self, source: str, partition: str, through: int) -> None:
        """Everything of the partition through ``through`` was handed to ingest again (a replayed gap).

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        ...


class SourceProbe(Protocol):
    """One source kind's side of reconciliation: what it delivered that was not recorded, and its replay.

    A new source kind (S3 prefixes, Kinesis shards) plugs in as one more probe.
    """

    #: The watcher this probe reconciles, its kind (``kafka``, ``sqs``, ...) and the source name its watermarks
    #: are kept under (``kafka:<cluster>:<topic>``, ``sqs:<queue ARN>``).
    watcher: str
    kind: str
    source: str

    def findings(self, recorded: Sequence[Watermark]) -> list[dict[str, Any]]:
        """What the source holds that was not recorded: ``{"kind", "what", "count", ...}`` each, JSON-ready."""
        ...

    def replay(self, finding: Mapping[str, Any]) -> int:
        """Hand one finding's messages to the watcher's ingest (idempotent); how many went through.

        Raises:
            StoreUnavailableError: the source or the ingest function failed; the finding stays for next time.
        """
        ...


@dataclass(frozen=True)
class JobRunStatus:
    """What the job service says of a job run: its state (EMR Serverless's names) and why, when it ended."""

    state: str
    details: str = ""
    #: When the job service last changed the state (EMR's ``updatedAt``); None when it does not say.
    changed_at: datetime | None = None


class JobRuns(Protocol):
    """The job service's own view of the job runs: what the reconciliation sweep compares the runs with."""

    def job_run_status(self, job_run_id: str) -> JobRunStatus | None:
        """The job run's state, or None when the service does not know it.

        Raises:
            JobServiceUnavailableError: throttled or failing; try again later.
        """
        ...


class ListenerBus(Protocol):
    """Publishes listener events (asset created, alias created, asset changed, event emitted).

    Only the detail types an environment subscribes to go out (EventBridge bills every entry): ``wants``
    says which, so that callers build no detail nobody will read.
    """

    def wants(self, detail_type: str) -> bool:
        """Whether events of this detail type are published at all."""
        ...

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Put one event on the bus; failures are logged, never raised (listeners are best effort)."""
        ...

    def publish_many(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Put events on the bus, batched (``(detail type, detail)``); failures are logged, never raised."""
        ...


class NullBus:
    """A bus that drops every event (for tests and runtimes without listeners)."""

    def wants(self, detail_type: str) -> bool:
        """No type is wanted."""
        return False

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Drop the event."""

    def publish_many(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Drop the events."""


class RunOutputs(Protocol):
    """The blob store of runs: what a succeeded job wrote about its outlets."""

    def outlet_metadata(
        self, pipeline: str, run_id: str, *, token_scheme: int = OUTLET_TOKEN_SCHEME
    ) -> Mapping[str, Any] | None:
        """The outlet metadata the run's job wrote, or None when it wrote none.

        ``token_scheme``: the run's ``outlet_token_scheme`` (where a store keeps the metadata under a secret token).

        Raises:
            OutletMetadataError: the document is not version-1 outlet metadata.
            StoreUnavailableError: the blob store is throttling or failing; retry later.
        """
        ...


class Detached(Protocol):
    """An extra set aside to be written to the extras store before the event that references it."""

    @property
    def uri(self) -> str:
        """Where the extra goes."""
        ...

    @property
    def size(self) -> int:
        """Its size in bytes (canonical JSON)."""
        ...


class ExtrasStore(Protocol):
    """Where extras too large to copy around are kept whole, referenced from their events."""

    def place(
        self, event_id: str, extra: Mapping[str, Any], *, keep: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], Detached | None]:
        """The extra an event carries (inline, or a reference plus ``keep``) and what to write first (or None).

        Raises:
            ExtraTooLargeError: over the ceiling of extras stored by reference.
        """
        ...

    def write(self, detached: Any) -> None:
        """Write a detached extra, as ``place`` returned it (harmless when repeated).

        Raises:
            StoreUnavailableError: throttled or unreachable; retry.
        """
        ...

    def load(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        """An event's whole extra: the one it references, read back, or itself when it is inline.

        Raises:
            StoreUnavailableError: throttled or unreachable; retry.
            AssetflowError: the reference is malformed, or its object is missing or altered.
        """
        ...


__all__ = [
    "Accepted",
    "Clock",
    "Deadlines",
    "Detached",
    "EventStore",
    "ExtraTooLargeError",
    "ExtrasStore",
    "JobAlreadyEndedError",
    "JobRunStatus",
    "JobRuns",
    "JobServiceUnavailableError",
    "LateMarks",
    "Launcher",
    "ListenerBus",
    "NoDeadlines",
    "NoWakeUps",
    "NullBus",
    "Outcome",
    "OutletMetadataError",
    "Page",
    "PipelineGate",
    "PipelineStore",
    "QuarantineStore",
    "Quarantined",
    "QueueSnapshot",
    "QueueStore",
    "ReasonCode",
    "Releases",
    "RunOutputs",
    "RunStore",
    "SourceProbe",
    "Store",
    "SubmissionError",
    "SubmissionRejectedError",
    "WatermarkStore",
]
