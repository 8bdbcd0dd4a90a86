"""The operator's actions on pipelines and runs: trigger, cancel, replay, pause, unpause, backfill.

Runs an operator asks for (manual, replayed, backfilled) respect ``max_active_runs`` as the scheduler's own do:
each is created *held* (queued, not yet counted as active) and admitted, oldest first, while a slot is free and
the pipeline is not paused. Admission is one conditional transaction on the same counter the evaluator's runs
use, so the two can never overshoot the limit together. Every path that frees a slot (a run's end, a cancel,
an unpause) admits held runs before the queues are evaluated again, so a held run is never stranded: a run
held after the last release is admitted at once by the call that held it (it saw the slot free).

Cancelling stops the job (EMR ``CancelJobRun`` through the launcher) and frees the slot. The run's triggering
events are **not** re-queued unless asked (``requeue=True``): by default a cancelled run's events are spent,
as in Airflow, where a failed or cancelled DAG run does not put its asset events back.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from assetflow.core.backfill import BackfillPlan, plan_backfill, rerun_id, stale_runs
from assetflow.core.catalog import Catalog
from assetflow.core.conditions import AssetAlias
from assetflow.core.errors import ConflictError, StoreUnavailableError
from assetflow.core.events import AssetEvent, Run, RunState, derive_id, format_timestamp, group_events
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.pipeline import Pipeline
from assetflow.core.scheduler import QueueEntry, advance, route_event
from assetflow.ports import (
    Clock,
    JobAlreadyEndedError,
    JobServiceUnavailableError,
    Launcher,
    Store,
    SubmissionError,
)
from assetflow.usecases.requests import (
    IdempotencyKeyReusedError,
    RequestError,
    ViewError,
    check_extra,
    check_idempotency_key,
    check_partition_key,
    pipeline_of,
)
from assetflow.usecases.submit import Submitter

logger = logging.getLogger(__name__)

#: Most runs one backfill may create; a wider window is refused (split it).
MAX_BACKFILL_RUNS = 500
_TRIGGER_FIELDS = frozenset({"conf", "partition_key"})
_CANCEL_FIELDS = frozenset({"requeue"})
_BACKFILL_FIELDS = frozenset({"start", "end", "dry_run", "stale"})
#: Runs a stale backfill reads at most (newest first) to find what an older code version produced.
MAX_STALE_SCAN = 10_000


class RunStateError(ViewError):
    """The run is in a state that does not allow the action (cancel a finished run, replay a running one)."""

    status = 409
    code = "invalid_state"


@dataclass(frozen=True)
class TriggerRequest:
    """A validated manual trigger: the run's ``conf`` (a JSON object or None) and partition key."""

    conf: Mapping[str, Any] | None = None
    partition_key: str | None = None


@dataclass(frozen=True)
class Created:
    """A run an operator asked for: as stored now, and whether this request created it (False: a repeat)."""

    run: Run
    created: bool


@dataclass
class BackfillResult:
    """What a backfill planned and, unless a dry run, created."""

    pipeline: str
    start: datetime
    end: datetime
    dry_run: bool
    plan: BackfillPlan
    runs: list[dict[str, Any]] = field(default_factory=list)
    created: int = 0
    existing: int = 0

    def to_json(self) -> dict[str, Any]:
        """``{"pipeline", "start", "end", "dry_run", "events", "ticks", "runs", "created", "existing", "skipped"}``."""
        return {
            "pipeline": self.pipeline,
            "start": format_timestamp(self.start),
            "end": format_timestamp(self.end),
            "dry_run": self.dry_run,
            "events": self.plan.events,
            "ticks": self.plan.ticks,
            "runs": self.runs,
            "created": self.created,
            "existing": self.existing,
            "skipped": [{"pipeline": s.pipeline, "reason": s.reason} for s in self.plan.skipped[:100]],
        }


# ---- request parsing ------------------------------------------------------------------------------------


def _object(doc: object, fields: frozenset[str], example: str) -> dict[str, Any]:
    if doc is None or doc == "":
        return {}
    if not isinstance(doc, dict):
        raise RequestError(f"the body must be a JSON object such as {example}")
    unknown = sorted(set(doc) - fields)
    if unknown:
        raise RequestError(f"unknown fields {unknown}; the fields are {sorted(fields)}")
    return doc


def parse_trigger_request(doc: object) -> TriggerRequest:
    """Validate the body of ``POST /pipelines/{id}/runs``: ``{"conf"?: object, "partition_key"?: str}``.

    Raises:
        RequestError: not an object, unknown fields, a conf that is not a JSON object, a bad partition key.
        PayloadTooLargeError: the conf is over the size limit of an extra.
    """
    body = _object(doc, _TRIGGER_FIELDS, '{"conf": {"full_refresh": true}}')
    conf = body.get("conf")
    if conf is not None:
        if not isinstance(conf, dict):
            raise RequestError("conf must be a JSON object (or null)")
        try:
            conf = check_extra(conf)
        except RequestError as exc:
            raise RequestError(str(exc).replace("extra", "conf", 1)) from exc
    return TriggerRequest(conf=conf, partition_key=check_partition_key(body.get("partition_key")))


def parse_cancel_request(doc: object) -> bool:
    """Validate the body of ``POST /runs/{run_id}/cancel``: ``{"requeue"?: bool}``; returns ``requeue``.

    Raises:
        RequestError: not an object, unknown fields, a requeue that is not a boolean.
    """
    requeue = _object(doc, _CANCEL_FIELDS, '{"requeue": true}').get("requeue", False)
    if not isinstance(requeue, bool):
        raise RequestError("requeue must be true or false")
    return requeue


def parse_time(value: object, name: str) -> datetime:
    """An aware ISO-8601 time (``Z`` or an offset; a date alone is midnight UTC).

    Raises:
        RequestError: missing, not ISO-8601, or without a time zone.
    """
    if not isinstance(value, str) or not value:
        raise RequestError(f"{name} is required: an ISO-8601 time such as 2026-11-21T00:00:00Z")
    text = value.strip()
    try:
        if len(text) == 10:
            moment = datetime.fromisoformat(text + "T00:00:00+00:00")
        else:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError as exc:
        raise RequestError(f"{name} {value!r} is not an ISO-8601 time such as 2026-11-21T00:00:00Z") from exc
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise RequestError(f"{name} {value!r} has no time zone; add Z (UTC) or an offset such as +02:00")
    return moment


def parse_backfill_request(doc: object) -> tuple[datetime, datetime, bool]:
    """Validate the body of ``POST /pipelines/{id}/backfill``: ``{"start", "end", "dry_run"?}``.

    Raises:
        RequestError: not an object, unknown fields, a bad time, ``dry_run`` not a boolean.
    """
    body = _object(doc, _BACKFILL_FIELDS, '{"start": "2026-11-20T00:00:00Z", "end": "2026-11-21T00:00:00Z"}')
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise RequestError("dry_run must be true or false")
    return parse_time(body.get("start"), "start"), parse_time(body.get("end"), "end"), dry_run


def parse_stale_backfill_request(doc: object) -> tuple[datetime | None, datetime | None, bool] | None:
    """The ``{"stale": true, "start"?, "end"?, "dry_run"?}`` body of a stale backfill; None for another body.

    ``start`` and ``end`` (optional) bound the original runs' ``created_at``.

    Raises:
        RequestError: not an object, unknown fields, a bad time, ``stale`` or ``dry_run`` not a boolean.
    """
    body = _object(doc, _BACKFILL_FIELDS, '{"stale": true}')
    stale = body.get("stale", False)
    if not isinstance(stale, bool):
        raise RequestError("stale must be true or false")
    if not stale:
        return None
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise RequestError("dry_run must be true or false")
    start = parse_time(body["start"], "start") if body.get("start") is not None else None
    end = parse_time(body["end"], "end") if body.get("end") is not None else None
    if start is not None and end is not None and start >= end:
        raise RequestError(
            f"the window is empty: start {format_timestamp(start)} is not before end {format_timestamp(end)}"
        )
    return start, end, dry_run


# ---- the actions ----------------------------------------------------------------------------------------


def admit_and_submit(store: Store, submitter: Submitter, pipeline: Pipeline) -> list[Run]:
    """Admit the pipeline's held runs while slots are free (and it is not paused), and submit them.

    The release path of every run's end calls this before the queues are evaluated again.

    Raises:
        ConflictError: the counter kept changing under concurrent writers; the caller retries.
    """
    admitted: list[Run] = []
    for attempt in range(8):
        try:
            admitted = store.admit_held(pipeline)
            break
        except ConflictError:
            if attempt == 7:
                raise
            time.sleep(min(0.5, 0.01 * 2**attempt) * (0.5 + random.random()))  # noqa: S311 (jitter)
    if admitted:
        logger.info(
            "held runs admitted", extra={"pipeline": pipeline.id, "runs": [r.run_id for r in admitted]}
        )
        try:
            submitter.submit(admitted, also_retry=set())
        except SubmissionError as exc:  # kept queued and retried with the pipeline's next evaluation
            logger.warning(
                "admitted runs not submitted yet", extra={"pipeline": pipeline.id, "error": str(exc)}
            )
    return admitted


class Operations:
    """Trigger, cancel, replay, pause, unpause and backfill, over the store, the launcher and the evaluator."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: Store,
        submitter: Submitter,
        release: Callable[[str], Any],
        clock: Clock,
        max_attempts: int = 8,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.submitter = submitter
        self._release = release
        self.clock = clock
        self.max_attempts = max_attempts
        self._sleep = sleep

    def admit(self, pipeline_id: str) -> list[Run]:
        """Admit and submit a pipeline's held runs while slots are free (the release path of a run's end)."""
        pipeline = self.catalog.pipelines.get(pipeline_id)
        return [] if pipeline is None else admit_and_submit(self.store, self.submitter, pipeline)

    @property
    def launcher(self) -> Launcher:
        """The launcher runs are submitted and cancelled with."""
        return self.submitter.launcher

    # ---- runs an operator asks for -------------------------------------------------------------------

    def trigger(
        self,
        pipeline_id: str,
        request: TriggerRequest,
        *,
        principal: str,
        request_id: str,
        idempotency_key: str | None = None,
    ) -> Created:
        """Start a manual run of any pipeline (``schedule=None`` too): ``triggered_by: "manual"`` with ``conf``.

        It waits queued while the pipeline is at ``max_active_runs`` or paused. With an ``idempotency_key`` a
        retried request returns the run the first one created.

        Raises:
            NotFoundError: no such pipeline.
            IdempotencyKeyReusedError: the key created a run with another conf or partition key.
        """
        pipeline = pipeline_of(self.catalog, pipeline_id)
        key = check_idempotency_key(idempotency_key)
        discriminator = ("key", principal, key) if key is not None else ("request", request_id)
        run = Run(
            run_id=derive_id("run", pipeline.id, "manual", *discriminator),
            pipeline=pipeline.id,
            state=RunState.QUEUED,
            created_at=self.clock(),
            partition_key=request.partition_key,
            triggered_by="manual",
            code_version=pipeline.job.code_version,
            conf=request.conf,
        )
        stored, created = self.store.hold_run(run)
        if not created and (
            stored.triggered_by != "manual"
            or thaw_json(stored.conf) != thaw_json(run.conf)
            or stored.partition_key != run.partition_key
        ):
            raise IdempotencyKeyReusedError(
                f"this Idempotency-Key already triggered run {stored.run_id} with a different conf or "
                "partition_key; use a new key for a new run"
            )
        logger.info(
            "manual run triggered" if created else "manual run repeated",
            extra={"run_id": run.run_id, "pipeline": pipeline.id, "principal": principal},
        )
        return Created(self._admitted(pipeline, stored), created)

    def replay(
        self,
        run_id: str,
        *,
        principal: str,
        request_id: str,
        idempotency_key: str | None = None,
    ) -> Created:
        """A new run with exactly the same triggering events, partition key and conf; ``replay_of`` names the original.

        Raises:
            NotFoundError: no such run, or its pipeline is no longer in the catalog.
            RunStateError: the run is still queued or running (cancel it first, or wait for its end).
        """
        original = self.store.get_run(run_id)
        if original.state.active:
            raise RunStateError(
                f"run {run_id} is still {original.state.value}; replay it once it has ended (or cancel it first)"
            )
        pipeline = pipeline_of(self.catalog, original.pipeline)
        key = check_idempotency_key(idempotency_key)
        discriminator = ("key", principal, key) if key is not None else ("request", request_id)
        run = Run(
            run_id=derive_id("run", pipeline.id, "replay", run_id, *discriminator),
            pipeline=pipeline.id,
            state=RunState.QUEUED,
            created_at=self.clock(),
            partition_key=original.partition_key,
            triggering_asset_events=original.triggering_asset_events,
            scheduled_time=original.scheduled_time,
            triggered_by="replay",
            conf=original.conf,
            replay_of=original.run_id,
            code_version=pipeline.job.code_version,
        )
        stored, created = self.store.hold_run(run, trigger_from=original.run_id)
        if not created and stored.replay_of != run_id:
            raise IdempotencyKeyReusedError(
                f"this Idempotency-Key already created run {stored.run_id}, not a replay of {run_id}; use a new key"
            )
        logger.info(
            "run replayed",
            extra={
                "run_id": run.run_id,
                "replay_of": run_id,
                "pipeline": pipeline.id,
                "principal": principal,
            },
        )
        return Created(self._admitted(pipeline, stored), created)

    def _admitted(self, pipeline: Pipeline, run: Run) -> Run:
        """Admit held runs now (this one, if a slot is free) and return ``run`` as stored afterwards."""
        admit_and_submit(self.store, self.submitter, pipeline)
        return self.store.get_run(run.run_id)

    # ---- cancel -------------------------------------------------------------------------------------------

    def cancel(self, run_id: str, *, requeue: bool = False, principal: str = "") -> Run:
        """Cancel a queued or running run: stop its job (EMR ``CancelJobRun``) and free its slot.

        The run's triggering events are spent unless ``requeue``: then they go back to the pipeline's queue
        (as the events they are) and ride along with its next run.

        Raises:
            NotFoundError: no such run.
            RunStateError: the run has ended (or its job ended before it could be cancelled), or ``requeue``
                was asked for a run that took no events from a queue.
            JobServiceUnavailableError: the job service is failing; nothing changed, retry.
            ConflictError: the run kept changing (retry), or it is cancelled but its events could not be
                re-queued (replay it).
        """
        run = self.store.get_run(run_id)
        if requeue and run.triggered_by not in ("assets", "time"):
            raise RunStateError(
                f"run {run_id} was triggered by {run.triggered_by}: it took no events from a queue, so there is "
                "nothing to re-queue (cancel it without requeue)"
            )
        for _ in range(self.max_attempts):
            if not run.state.active:
                raise RunStateError(
                    f"run {run_id} is already {run.state.value}; only queued or running runs can be cancelled"
                )
            if self.store.is_held(run_id):
                cancelled = self.store.cancel_held(run_id)
                if cancelled is not None:  # it never held a slot: nothing to free
                    logger.info("held run cancelled", extra={"run_id": run_id, "principal": principal})
                    return self._after_cancel(cancelled, requeue=requeue, freed=False)
            else:
                if run.job_run_id:
                    try:
                        self.launcher.cancel(run)
                    except JobAlreadyEndedError as exc:
                        raise RunStateError(
                            f"run {run_id}'s job has already ended ({exc}); its final state follows shortly"
                        ) from exc
                moved_to, moved = self.store.set_run_state(run_id, RunState.CANCELLED)
                if moved:
                    if not run.job_run_id and moved_to.job_run_id:  # a submitter started it meanwhile
                        self._cancel_quietly(moved_to)
                    logger.info(
                        "run cancelled",
                        extra={"run_id": run_id, "job_run_id": moved_to.job_run_id, "principal": principal},
                    )
                    return self._after_cancel(moved_to, requeue=requeue, freed=True)
            run = self.store.get_run(run_id)
        raise ConflictError(f"run {run_id} kept changing while it was being cancelled; try again")

    def _cancel_quietly(self, run: Run) -> None:
        try:
            self.launcher.cancel(run)
        except (JobAlreadyEndedError, JobServiceUnavailableError) as exc:
            logger.warning(
                "job of a cancelled run not cancelled", extra={"run_id": run.run_id, "error": str(exc)}
            )

    def _after_cancel(self, run: Run, *, requeue: bool, freed: bool) -> Run:
        """Re-queue a cancelled run's events if asked, then let the freed slot go to what waits.

        Raises:
            ConflictError: the run is cancelled but its events could not be re-queued (its queue stayed
                contended, or the store failed): the message says to replay the run, which runs them again.
        """
        pipeline = self.catalog.pipelines.get(run.pipeline)
        if pipeline is None:
            return run
        unqueued: Exception | None = None
        if requeue:
            try:
                self._requeue(pipeline, self.store.get_run(run.run_id))
            except (ConflictError, StoreUnavailableError) as exc:
                unqueued = exc
                logger.error(
                    "cancelled run's events not re-queued", extra={"run_id": run.run_id, "error": str(exc)}
                )
        if freed or requeue:
            admit_and_submit(self.store, self.submitter, pipeline)
            self._reevaluate(pipeline.id)
        if unqueued is not None:
            raise ConflictError(
                f"run {run.run_id} is cancelled, but its events could not be re-queued ({unqueued}); "
                f"replay the run to run them again (assetflow runs replay {run.run_id})"
            ) from unqueued
        return self.store.get_run(run.run_id)

    def _reevaluate(self, pipeline_id: str) -> list[Run]:
        """Evaluate the pipeline's queues again (a slot freed, or it was unpaused); returns the runs made.

        A run made but not yet submitted stays queued and is retried with the pipeline's next evaluation: the
        operator's action succeeded all the same.
        """
        try:
            released = self._release(pipeline_id)
        except SubmissionError as exc:
            logger.warning(
                "runs made but not submitted yet", extra={"pipeline": pipeline_id, "error": str(exc)}
            )
            return []
        return list(getattr(released, "runs", []))

    def _requeue(self, pipeline: Pipeline, run: Run) -> None:
        """Put a cancelled run's events back in the pipeline's queues (routed again, as the evaluator would)."""
        by_key: dict[str, list[QueueEntry]] = {}
        for event in run.triggering_events:
            aliases = self._aliases_for(pipeline, event.asset) or ()
            routes, _ = route_event(event, [(pipeline, aliases)])
            for route in routes:
                # A run that takes the event alone gets an id of its own, not the cancelled run's.
                entry = replace(route.entry(event), requeued_from=run.run_id)
                by_key.setdefault(route.key, []).append(entry)
        created: list[Run] = []
        for key, entries in sorted(by_key.items()):
            self.store.forget_seen(pipeline.id, key, [e.event for e in entries])
            created += self._queue(pipeline, key, entries)
        logger.info(
            "cancelled run's events re-queued",
            extra={
                "run_id": run.run_id,
                "events": sum(len(e) for e in by_key.values()),
                "runs": len(created),
            },
        )
        if created:
            try:
                self.submitter.submit(created, also_retry=set())
            except SubmissionError as exc:
                logger.warning("re-queued runs not submitted yet", extra={"error": str(exc)})

    def _queue(self, pipeline: Pipeline, key: str, entries: list[QueueEntry]) -> list[Run]:
        created: list[Run] = []
        pending = list(entries)
        for attempt in range(self.max_attempts * 2):
            stored = self.store.read_queue(pipeline.id, key)
            gate = self.store.pipeline_gate(pipeline.id)
            transition = advance(
                pipeline,
                stored.state,
                active_runs=gate.active,
                now=self.clock(),
                entries=pending,
                paused=gate.paused,
            )
            if not transition.changed:
                return created
            try:
                self.store.apply(pipeline, stored, transition)
            except ConflictError:
                self._sleep(min(1.0, 0.01 * 2**attempt))
                continue
            created += transition.runs
            if not transition.more:
                return created
            pending = []
        raise ConflictError(f"queue {pipeline.id}/{key or '-'} stayed contended; try again")

    # ---- pause ------------------------------------------------------------------------------------------

    def pause(self, pipeline_id: str, *, principal: str) -> dict[str, Any]:
        """Pause a pipeline: its events keep queueing, no run of it starts (explain says ``paused``).

        Raises:
            NotFoundError: no such pipeline.
        """
        pipeline = pipeline_of(self.catalog, pipeline_id)
        changed = self.store.set_paused(pipeline.id, True, now=self.clock(), principal=principal)
        logger.info(
            "pipeline paused", extra={"pipeline": pipeline.id, "changed": changed, "principal": principal}
        )
        return {"pipeline": pipeline.id, "paused": True, "changed": changed}

    def unpause(self, pipeline_id: str, *, principal: str) -> dict[str, Any]:
        """Unpause a pipeline, then admit its held runs and evaluate its queues again (runs may start at once).

        Raises:
            NotFoundError: no such pipeline.
        """
        pipeline = pipeline_of(self.catalog, pipeline_id)
        changed = self.store.set_paused(pipeline.id, False, now=self.clock(), principal=principal)
        admitted = admit_and_submit(self.store, self.submitter, pipeline)
        released = self._reevaluate(pipeline.id)
        runs = [r.run_id for r in admitted] + [r.run_id for r in released]
        facts = {"pipeline": pipeline.id, "changed": changed, "runs": runs, "principal": principal}
        logger.info("pipeline unpaused", extra=facts)
        return {"pipeline": pipeline.id, "paused": False, "changed": changed, "runs": runs}

    # ---- backfill ---------------------------------------------------------------------------------------

    def backfill(
        self,
        pipeline_id: str,
        start: datetime,
        end: datetime,
        *,
        dry_run: bool = False,
        principal: str = "",
        progress: Callable[[int, int], None] | None = None,
    ) -> BackfillResult:
        """The runs the schedule would have made from the stored events (and ticks) in ``[start, end)``, in order.

        Each is created as a held run with ``triggered_by: "backfill"`` and a run id derived from what it holds,
        so running the same backfill twice creates nothing the second time. ``dry_run`` plans only.

        Raises:
            NotFoundError: no such pipeline.
            RequestError: the window is empty, reaches into the future, or would make too many runs; the
                pipeline is manual only.
        """
        pipeline = pipeline_of(self.catalog, pipeline_id)
        now = self.clock()
        if start >= end:
            raise RequestError(
                f"the window is empty: start {format_timestamp(start)} is not before end {format_timestamp(end)}"
            )
        if end > now + timedelta(seconds=1):
            raise RequestError(
                f"the window reaches into the future (end {format_timestamp(end)}, now {format_timestamp(now)}); "
                "backfill the past only"
            )
        schedule = pipeline.schedule
        if not schedule.has_assets and schedule.time is None:
            raise RequestError(
                f"pipeline {pipeline.id} is manual only (schedule=None): its schedule makes no runs to backfill; "
                "trigger runs with `assetflow runs trigger` instead"
            )
        plan = plan_backfill(pipeline, self._history(pipeline, start, end), start=start, end=end)
        if len(plan.runs) > MAX_BACKFILL_RUNS:
            raise RequestError(
                f"the window would make {len(plan.runs)} runs, over the limit of {MAX_BACKFILL_RUNS} per backfill; "
                "split it into shorter windows"
            )
        result = BackfillResult(pipeline.id, start, end, dry_run, plan)
        for position, planned in enumerate(plan.runs):
            run = Run(
                run_id=planned.run_id,
                pipeline=pipeline.id,
                state=RunState.QUEUED,
                # a microsecond apart: held runs are admitted in the order the schedule would have made them
                created_at=now + timedelta(microseconds=position),
                partition_key=planned.partition_key,
                triggering_asset_events=group_events(planned.events),
                scheduled_time=planned.scheduled_time,
                triggered_by="backfill",
                code_version=pipeline.job.code_version,
            )
            if dry_run:
                doc = run.to_json()
                doc["state"] = "planned"
            else:
                stored, created = self.store.hold_run(run)
                result.created += created
                result.existing += not created
                doc = stored.to_json()
            doc["due_at"] = format_timestamp(planned.at)
            result.runs.append(doc)
            if progress is not None:
                progress(position + 1, len(plan.runs))
        if not dry_run and plan.runs:
            admit_and_submit(self.store, self.submitter, pipeline)
        logger.info(
            "backfill planned" if dry_run else "backfill created",
            extra={
                "pipeline": pipeline.id,
                "runs": len(plan.runs),
                "created": result.created,
                "existing": result.existing,
                "principal": principal,
            },
        )
        return result

    def backfill_stale(
        self,
        pipeline_id: str,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        dry_run: bool = False,
        principal: str = "",
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Run again, with the job's current ``code_version``, every successful run another version made.

        Each re-run has the original's triggering events, partition key, tick and conf, ``triggered_by:
        "backfill"`` and ``rerun_of`` (the run whose outputs it replaces); its id derives from the original and
        the version, so a repeated stale backfill creates nothing new. ``start``/``end`` bound the originals'
        ``created_at``. Re-runs are held runs: they respect ``max_active_runs``.

        Raises:
            NotFoundError: no such pipeline.
            RequestError: the job declares no ``code_version``, or there are too many stale runs (narrow the window).
        """
        pipeline = pipeline_of(self.catalog, pipeline_id)
        current = pipeline.job.code_version
        if current is None:
            raise RequestError(
                f"pipeline {pipeline.id}'s job declares no code_version, so none of its outputs can be stale: "
                "give it SparkJob(..., code_version='2') and bump it when the job's logic changes"
            )
        history: list[Run] = []
        token: str | None = None
        while len(history) < MAX_STALE_SCAN:
            page = self.store.list_runs(pipeline.id, limit=100, token=token)
            history += [Run.from_json(doc) for doc in page.items]
            token = page.next
            if token is None:
                break
        in_window = [
            r
            for r in history
            if (start is None or r.created_at >= start) and (end is None or r.created_at < end)
        ]
        stale = stale_runs(pipeline, in_window)
        if len(stale) > MAX_BACKFILL_RUNS:
            raise RequestError(
                f"{len(stale)} runs are stale, over the limit of {MAX_BACKFILL_RUNS} per backfill; "
                "give --start and --end to re-run them window by window"
            )
        now = self.clock()
        docs: list[dict[str, Any]] = []
        created = existing = 0
        for position, original in enumerate(stale):
            root = original.rerun_of or original.run_id
            run = Run(
                run_id=rerun_id(pipeline.id, root, current),
                pipeline=pipeline.id,
                state=RunState.QUEUED,
                created_at=now + timedelta(microseconds=position),
                partition_key=original.partition_key,
                scheduled_time=original.scheduled_time,
                triggered_by="backfill",
                conf=original.conf,
                code_version=current,
                rerun_of=root,
            )
            if dry_run:
                with_events = self.store.get_run(original.run_id)
                doc = replace(run, triggering_asset_events=with_events.triggering_asset_events).to_json()
                doc["state"] = "planned"
            else:
                stored, new = self.store.hold_run(run, trigger_from=original.run_id)
                created += new
                existing += not new
                doc = stored.to_json()
            doc["due_at"] = format_timestamp(original.created_at)
            doc["stale_code_version"] = original.code_version
            docs.append(doc)
            if progress is not None:
                progress(position + 1, len(stale))
        if not dry_run and stale:
            admit_and_submit(self.store, self.submitter, pipeline)
        logger.info(
            "stale backfill planned" if dry_run else "stale backfill created",
            extra={"pipeline": pipeline.id, "runs": len(stale), "created": created, "principal": principal},
        )
        return {
            "pipeline": pipeline.id,
            "stale": True,
            "code_version": current,
            "start": format_timestamp(start) if start else None,
            "end": format_timestamp(end) if end else None,
            "dry_run": dry_run,
            "scanned": len(in_window),
            "events": sum(len(v) for d in docs for v in d["triggering_asset_events"].values()),
            "ticks": 0,
            "runs": docs,
            "created": created,
            "existing": existing,
            "skipped": [],
        }

    def _aliases_for(self, pipeline: Pipeline, uri: str) -> tuple[str, ...] | None:
        """The pipeline's aliases an asset's events count for (None: the pipeline does not consume the asset)."""
        consumers = self.catalog.consumers(uri, self.store.aliases_of(uri))
        return next((aliases for p, aliases in consumers if p.id == pipeline.id), None)

    def _history(
        self, pipeline: Pipeline, start: datetime, end: datetime
    ) -> list[tuple[AssetEvent, tuple[str, ...]]]:
        """The stored events in the window of every asset the schedule counts (directly or through aliases)."""
        uris: set[str] = set()
        for node in pipeline.condition.iter_nodes():
            if isinstance(node, AssetAlias):
                uris.update(self.store.alias_assets(node.name))
        uris.update(a.uri for a in pipeline.condition.iter_assets())
        found: dict[str, tuple[AssetEvent, tuple[str, ...]]] = {}
        for uri in sorted(uris):
            aliases = self._aliases_for(pipeline, uri)
            if aliases is None:
                continue
            for event in self.store.events_between(uri, start, end):
                found.setdefault(event.id, (event, aliases))
        return sorted(found.values(), key=lambda pair: pair[0].sort_key)


__all__ = [
    "MAX_BACKFILL_RUNS",
    "BackfillResult",
    "Created",
    "Operations",
    "RunStateError",
    "TriggerRequest",
    "admit_and_submit",
    "parse_backfill_request",
    "parse_cancel_request",
    "parse_stale_backfill_request",
    "parse_time",
    "parse_trigger_request",
]
