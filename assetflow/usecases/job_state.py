"""Run states: EMR Serverless job state changes move runs; a successful run's outlets become asset events."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from assetflow.core.catalog import Catalog
from assetflow.core.conditions import Asset, AssetAlias
from assetflow.core.entries import Check, failure_events, held_by_check, parse_checks
from assetflow.core.errors import AlreadySubmittedError, AssetflowError, NotFoundError
from assetflow.core.events import EMR_JOB_STATES, AssetEvent, Run, RunState, derive_id
from assetflow.core.jsonvalue import canonical_json
from assetflow.core.limits import MAX_MESSAGE_EXTRA_BYTES, MAX_PAYLOAD_DEPTH, nesting_exceeds
from assetflow.core.listeners import alias_json, asset_json
from assetflow.core.pipeline import Pipeline
from assetflow.ports import (
    Detached,
    ExtrasStore,
    ExtraTooLargeError,
    OutletMetadataError,
    Releases,
    RunOutputs,
    Store,
)
from assetflow.usecases.evaluate import Evaluation, Evaluator
from assetflow_job.contract import MAX_VERSION_CHARS, REF_KEY

logger = logging.getLogger(__name__)

#: An asset joined an alias (a run's alias outlet named it for the first time). Airflow has no hook for this
#: association; its ``on_asset_alias_created`` is the alias's own creation (``listeners.ASSET_ALIAS_CREATED``).
ALIAS_RESOLVED = "AssetAliasResolved"


@dataclass(frozen=True)
class PlannedEvent:
    """One outlet event a successful run emits: a declared asset outlet, or an asset added to aliases."""

    asset: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    #: The data version the job wrote (``Metadata(..., version=)``), None when it named none.
    version: str | None = None
    #: The checks the job reported on a declared asset outlet (``outlet_events[a].check(...)``).
    checks: tuple[Check, ...] = ()

    @property
    def kind(self) -> str:
        """``outlet`` for a declared asset outlet, ``alias`` for an alias addition."""
        return "alias" if self.aliases else "outlet"


@dataclass(frozen=True)
class OutletPlan:
    """The events to emit for a successful run, and the metadata entries refused (with reasons)."""

    events: tuple[PlannedEvent, ...]
    refused: tuple[str, ...] = ()


@dataclass
class StateChange:
    """What handling one job state change did."""

    job_run_id: str
    emr_state: str
    run_id: str | None = None
    state: RunState | None = None
    moved: bool = False
    emitted: list[AssetEvent] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    released: Evaluation | None = None
    ignored: str | None = None
    #: What routing the failure entries of a failed run did (``a.failed()`` consumers), if it had outlets.
    failures: Evaluation | None = None


def outlet_event_id(run_id: str, kind: str, asset: str, extra: Mapping[str, Any]) -> str:
    """The id of a run's outlet event: the same on every delivery of the run's SUCCESS.

    ``kind`` keeps a declared outlet's event and an alias addition of the same (asset, extra) apart: Airflow
    emits both.
    """
    return derive_id("evt", run_id, kind, asset, canonical_json(extra))


def _normalised(uri: object) -> str:
    if not isinstance(uri, str):
        raise TypeError(f"an asset URI must be a string, not {type(uri).__name__}")
    return Asset(uri).uri


def plan_outlet_events(pipeline: Pipeline, metadata: Mapping[str, Any] | None) -> OutletPlan:
    """Decide a successful run's outlet events from its declared outlets and the job's outlet metadata.

    Every declared asset outlet gets one event, with the job's extra or ``{}``. Each distinct (asset, extra)
    the job added to declared alias outlets gets one event naming all those aliases (Airflow's rule).
    Entries naming undeclared assets or aliases, or invalid URIs or extras, are refused, not emitted.
    """
    declared_assets = pipeline.asset_outlets
    declared_aliases = {o.name for o in pipeline.outlets if isinstance(o, AssetAlias)}
    extras: dict[str, Mapping[str, Any]] = {}
    checks: dict[str, tuple[Check, ...]] = {}
    additions: dict[tuple[str, str], tuple[str, Mapping[str, Any], list[str]]] = {}
    refused: list[str] = []
    versions: dict[str, str] = {}
    entries = metadata.get("events", []) if metadata else []
    for position, entry in enumerate(entries):
        where = f"outlet metadata entry {position}"
        if not isinstance(entry, Mapping):
            refused.append(f"{where}: not an object")
            continue
        try:
            uri = _normalised(entry.get("asset"))
        except (AssetflowError, TypeError, ValueError) as exc:
            refused.append(f"{where}: invalid asset: {exc}")
            continue
        extra = entry.get("extra") or {}
        if not isinstance(extra, Mapping):
            refused.append(f"{where}: extra of {uri!r} is not an object")
            continue
        if REF_KEY in extra:
            refused.append(
                f"{where}: extra of {uri!r} has the key {REF_KEY!r}, which marks extras stored by reference"
            )
            continue
        if nesting_exceeds(extra, MAX_PAYLOAD_DEPTH):
            refused.append(f"{where}: extra of {uri!r} is nested more than {MAX_PAYLOAD_DEPTH} levels deep")
            continue
        named = [entry.get("alias"), *(entry.get("aliases") or [])]
        aliases = list(dict.fromkeys(a for a in named if a is not None))
        version = entry.get("version")
        if version is not None and (
            not isinstance(version, str) or not 0 < len(version) <= MAX_VERSION_CHARS or aliases
        ):
            refused.append(
                f"{where}: version of {uri!r} must be a string of 1 to {MAX_VERSION_CHARS} characters, "
                "on a declared asset outlet"
            )
            continue
        if not aliases:
            if uri not in declared_assets:
                refused.append(f"{where}: {uri!r} is not a declared asset outlet of {pipeline.id!r}")
            elif uri not in extras:
                extras[uri] = extra
                if version is not None:
                    versions[uri] = version
                checks[uri], bad = parse_checks(entry.get("checks"))
                refused += [f"{where}: {reason}" for reason in bad]
            elif canonical_json(extras[uri]) != canonical_json(extra):
                refused.append(f"{where}: a second, different extra for the outlet {uri!r}")
            continue
        undeclared = [a for a in aliases if a not in declared_aliases]
        if undeclared:
            refused.append(f"{where}: {undeclared!r} are not declared alias outlets of {pipeline.id!r}")
        kept = [a for a in aliases if a in declared_aliases]
        if not kept:
            continue
        key = (uri, canonical_json(extra))
        _, _, grouped = additions.setdefault(key, (uri, extra, []))
        grouped.extend(a for a in kept if a not in grouped)
    events = [
        PlannedEvent(uri, extras.get(uri, {}), version=versions.get(uri), checks=checks.get(uri, ()))
        for uri in declared_assets
    ]
    events += [PlannedEvent(uri, extra, tuple(aliases)) for uri, extra, aliases in additions.values()]
    return OutletPlan(tuple(events), tuple(refused))


class RunStates:
    """Applies EMR Serverless job state changes to runs, emits a successful run's outlets, releases held runs.

    Every step is idempotent, so EventBridge's redeliveries and out-of-order events are harmless: the store
    refuses backward moves, and outlet events carry deterministic ids and dedupe keys.
    """

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: Store,
        outputs: RunOutputs,
        evaluator: Evaluator,
        clock: Callable[[], datetime],
        job_lookup: Callable[[str], str | None] | None = None,
        extras: ExtrasStore | None = None,
        admit: Callable[[str], list[Run]] | None = None,
        releases: Releases | None = None,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.evaluator = evaluator
        self.clock = clock
        self.outputs = outputs
        self.extras = extras
        self._job_lookup = job_lookup
        #: Admits a pipeline's held runs (manual, replayed, backfilled) when a slot frees; returns them.
        self._admit = admit
        #: Where an outlet event a blocking check holds is kept findable by its id (for its release).
        self.releases = releases

    def handle_state_change(
        self, job_run_id: str, emr_state: str, application_id: str, *, job_run_name: str | None = None
    ) -> StateChange:
        """Record one job run state change; on SUCCESS emit the run's outlets; when it ends, release held runs.

        A queued state (SUBMITTED, PENDING, SCHEDULED, QUEUED) changes no run: nothing is read. ``job_run_name``
        (the event's ``jobRunName``: assetflow names a job after its run) finds the run without a lookup, if
        the run has no other job run id; otherwise the job run id is looked up.

        Raises:
            ConflictError: the run kept changing under concurrent state events; retry the event.
            StoreUnavailableError: DynamoDB or S3 throttled; retry the event.
            SubmissionError: a run released by this one could not be submitted (it is kept and retried).
        """
        result = StateChange(job_run_id=job_run_id, emr_state=emr_state)
        context = {"job_run_id": job_run_id, "emr_state": emr_state, "application_id": application_id}
        if emr_state not in EMR_JOB_STATES:
            result.ignored = "unknown EMR Serverless job state"
            logger.warning("job state ignored", extra={**context, "reason": result.ignored})
            return result
        new = EMR_JOB_STATES[emr_state]
        if new is None:
            result.ignored = "no run state for this job state"
            return result
        if new is RunState.QUEUED:
            # Every run is created queued and never moves back: such a state changes nothing.
            result.state, result.ignored = new, "a queued job state changes no run"
            return result
        moved = self._by_name(job_run_name, job_run_id, new) if job_run_name else None
        if moved is not None:
            run_id, (run, result.moved) = moved
        else:
            found = self._run_id(job_run_id, new, context)
            if found is None:
                result.ignored = "job run not started by assetflow"
                logger.info("job state ignored", extra={**context, "reason": result.ignored})
                return result
            run_id = found
            try:
                run, result.moved = self.store.set_run_state(
                    run_id, new, job_run_id=job_run_id, now=self.clock()
                )
            except NotFoundError:
                result.ignored = "run not found"
                logger.warning(
                    "job state ignored", extra={**context, "run_id": run_id, "reason": result.ignored}
                )
                return result
        result.run_id = run_id
        result.state = run.state
        logger.info(
            "job state recorded",
            extra={**context, "run_id": run_id, "state": run.state.value, "moved": result.moved},
        )
        # Also on a redelivered SUCCESS: if an earlier delivery died after moving the run, this one emits
        # what is missing, and the dedupe keys keep what was emitted from being emitted twice.
        if new is RunState.SUCCESS and run.state is RunState.SUCCESS:
            self._emit_outlets(run, result)
        if new is RunState.FAILED and run.state is RunState.FAILED:
            result.failures = self.route_failures(run)
        if not new.active and not run.state.active:
            result.released = self._release(run)
        return result

    def _by_name(self, name: str, job_run_id: str, new: RunState) -> tuple[str, tuple[Run, bool]] | None:
        """Move the run a job is named after, if it is that job's run; None when it is not (look it up)."""
        if not name.startswith("run-"):
            return None
        try:
            run, moved = self.store.set_run_state(name, new, job_run_id=job_run_id, now=self.clock())
        except NotFoundError:
            return None
        if run.job_run_id not in (None, job_run_id):
            return None  # a job of the run's name that is not its job: the lookup decides
        return name, (run, moved)

    def handle_tick(self, pipeline_id: str, scheduled_time: datetime) -> Evaluation:
        """Handle a cron tick of an ``AssetOrTimeSchedule`` pipeline.

        Raises:
            NotFoundError: no such pipeline in the catalog.
            SubmissionError: the tick's run could not be submitted (it is kept and retried).
        """
        return self.evaluator.handle_tick(pipeline_id, scheduled_time)

    # ---- internals -----------------------------------------------------------------------------------

    def _run_id(self, job_run_id: str, new: RunState, context: Mapping[str, Any]) -> str | None:
        if self._job_lookup is None:
            return None
        # A state change that does not name the job's run (or names a run with another job): the job's tags
        # name its run. The submitter may have died between StartJobRun and recording the job run id (a final
        # state would then never end the run), or it is still about to record it (an early RUNNING would be
        # lost): recording it here is harmless when repeated.
        run_id = self._job_lookup(job_run_id)
        if run_id is None:
            return None
        try:
            self.store.mark_submitted(run_id, job_run_id)
        except AlreadySubmittedError:
            logger.error("job run is not its run's job", extra={**context, "run_id": run_id})
            return None
        except NotFoundError:
            return None
        logger.info("job's run found by the job's tags", extra={**context, "run_id": run_id})
        return run_id

    def _emit_outlets(self, run: Run, result: StateChange) -> None:
        pipeline = self.catalog.pipelines.get(run.pipeline)
        context = {"run_id": run.run_id, "pipeline": run.pipeline}
        if pipeline is None:
            result.refused.append(f"pipeline {run.pipeline!r} is no longer in the catalog; outlets unknown")
            logger.error("outlets not emitted", extra={**context, "reason": result.refused[-1]})
            return
        if not pipeline.outlets:
            return  # no outlet can come of it: the job's outlet metadata is not read (an S3 request a run)
        metadata: Mapping[str, Any] | None
        try:
            metadata = self.outputs.outlet_metadata(
                run.pipeline, run.run_id, token_scheme=run.outlet_token_scheme
            )
        except OutletMetadataError as exc:
            # The job succeeded, so its data exists: emit the declared outlets without extras.
            result.refused.append(str(exc))
            metadata = None
        if metadata is not None and metadata.get("run_id") != run.run_id:
            result.refused.append(f"the outlet metadata belongs to run {metadata.get('run_id')!r}")
            metadata = None
        plan = plan_outlet_events(pipeline, metadata)
        result.refused += plan.refused
        for reason in result.refused:
            logger.error("outlet metadata refused", extra={**context, "reason": reason})
        now = self.clock()
        # The events' moment: when the run ended, as first recorded, so that every delivery of its SUCCESS makes
        # the same events (their own items are their dedupe). A run that ended before runs recorded it
        # (``ended_at`` is None) keeps a dedupe record per event instead.
        ended = run.ended_at
        for position, planned in enumerate(plan.events):
            source: dict[str, Any] = {"type": "run", "pipeline": run.pipeline, "run_id": run.run_id}
            if planned.checks:
                # Recorded and visible; a failed blocking one holds the event from every condition.
                source["checks"] = [c.to_json() for c in planned.checks]
            if planned.aliases:
                source["aliases"] = list(planned.aliases)
                # Resolutions first: the evaluator routes the event to alias consumers by what is stored.
                for alias in planned.aliases:
                    if self.store.add_alias_resolution(alias, planned.asset, now=now):
                        self.evaluator.bus.publish(
                            ALIAS_RESOLVED,
                            {
                                "kind": "asset_alias_resolved",
                                "asset_alias": alias_json(self.catalog.aliases.get(alias) or alias),
                                "asset": asset_json(planned.asset, self.catalog.assets.get(planned.asset)),
                                "run_id": run.run_id,
                            },
                        )
            event_id = outlet_event_id(run.run_id, planned.kind, planned.asset, planned.extra)
            extra, detached = self._place(event_id, planned, result)
            event = AssetEvent(
                asset=planned.asset,
                id=event_id,
                # A microsecond apart, so (timestamp, id) order is the job's order.
                timestamp=(ended or now) + timedelta(microseconds=position),
                extra=extra,
                source=source,
                partition_key=run.partition_key,
                version=planned.version,
            )
            dedupe_key = None if ended is not None else f"outlet#{event.id}"
            if (
                detached is not None
                and self.extras is not None
                and (dedupe_key is None or self.store.find_dedupe(dedupe_key) is None)
            ):
                # Written before the event that references it, as ingest does: no event points at nothing (a
                # repeated delivery writes the same object again).
                self.extras.write(detached)
            stored, new = self.store.put_event(event, dedupe_key=dedupe_key, now=now)
            if held_by_check(stored) and self.releases is not None:
                # `assetflow events release EVENT_ID` finds it by its id (every delivery: a put)
                self.releases.mark_held(stored)
            if new:
                result.emitted.append(stored)
        logger.info(
            "outlets emitted",
            extra={**context, "emitted": [e.id for e in result.emitted], "planned": len(plan.events)},
        )

    def _place(
        self, event_id: str, planned: PlannedEvent, result: StateChange
    ) -> tuple[Mapping[str, Any], Detached | None]:
        """The extra an outlet event carries: inline, by reference when large, ``{}`` with a reason when refused.

        An extra too large for the event's item is never dropped silently: it goes to the extras store (as
        ingest's do), and only one over that store's ceiling (or, without a store, over the inline limit) is
        refused, the event still emitted.
        """
        reason: str | None = None
        if self.extras is not None:
            try:
                return self.extras.place(event_id, planned.extra)
            except ExtraTooLargeError as exc:
                reason = f"outlet {planned.asset!r}: {exc}; the event is emitted without it"
        else:
            size = len(canonical_json(planned.extra).encode())
            if size <= MAX_MESSAGE_EXTRA_BYTES:
                return planned.extra, None
            reason = (
                f"outlet {planned.asset!r}: the extra is {size} bytes of JSON, over the {MAX_MESSAGE_EXTRA_BYTES}-byte "
                "limit of extras kept inline (no extras store is configured); the event is emitted without it"
            )
        result.refused.append(reason)
        logger.error("outlet extra refused", extra={"event_id": event_id, "reason": reason})
        return {}, None

    def route_failures(self, run: Run) -> Evaluation | None:
        """Route a failed run's failure entries to the pipelines that ask for ``a.failed()`` of its outlets.

        Also on a redelivered FAILED: the entries' ids derive from (run, asset), so a queue that has them
        already skips them, and one that missed them (an earlier delivery died) gets them now.

        Raises:
            ConflictError, StoreUnavailableError: a queue could not be changed; retry the state event.
        """
        pipeline = self.catalog.pipelines.get(run.pipeline)
        if pipeline is None:
            return None
        outlets = pipeline.asset_outlets
        if not any(self.catalog.failure_consumers(uri) for uri in outlets):
            return None  # nobody reacts to this run's failure: nothing to read or write
        events = failure_events(outlets, run, self.clock())
        evaluation = self.evaluator.handle_batch(events, announce=False)
        if evaluation.failed:
            raise next(iter(evaluation.failed.values()))
        logger.info(
            "failure entries routed",
            extra={"run_id": run.run_id, "pipeline": run.pipeline, "routed": len(evaluation.routed)},
        )
        return evaluation

    def _release(self, run: Run) -> Evaluation | None:
        pipeline = self.catalog.pipelines.get(run.pipeline)
        if pipeline is None:
            logger.warning(
                "run's pipeline not in the catalog; nothing to release", extra={"run_id": run.run_id}
            )
            return None
        if pipeline.max_active_runs is None:
            return None  # nothing waits for a slot: the queue runs as soon as its condition holds
        # Runs an operator asked for (manual, replayed, backfilled) wait held for a slot: they go first.
        admitted = self._admit(run.pipeline) if self._admit is not None else []
        released = self.evaluator.release(run.pipeline)
        released.runs[:0] = admitted
        if released.runs:
            logger.info(
                "held runs released",
                extra={"pipeline": run.pipeline, "runs": [r.run_id for r in released.runs]},
            )
        return released


__all__ = ["OutletPlan", "PlannedEvent", "RunStates", "StateChange", "outlet_event_id", "plan_outlet_events"]
