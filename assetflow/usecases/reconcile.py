"""The reconciliation sweep: what a lost state change, a refused submission or a missed release left behind.

Every other path is event-driven and gives up in the end (a retried invocation goes to its on-failure
destination, a refused submission leaves its run queued). The sweep compares the store with the job service and
the queues with the conditions, and repairs, idempotently, what it finds:

- a submitted run the store still has queued or running whose job run has ended (its state change was lost,
  not merely on its way: ``state_change_grace`` after the job's last change): the job's final state is
  applied as EventBridge would have delivered it (outlets emitted on success);
- a run the job service has not accepted after ``submit_grace``: submitted again; still refused, it fails with
  the refusal's reason and frees its ``max_active_runs`` slot;
- a pipeline whose queue satisfies its condition while a slot is free (a release that never ran): evaluated,
  and its run made.

The report says what it fixed, for metrics and alarms. With ``dry_run`` nothing is written: the report says
what would be.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from assetflow.core.catalog import Catalog
from assetflow.core.errors import AlreadySubmittedError, AssetflowError
from assetflow.core.events import EMR_JOB_STATES, Run, RunState
from assetflow.ports import JobRuns, Launcher, Store, SubmissionError, SubmissionRejectedError
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.job_state import RunStates

logger = logging.getLogger(__name__)

#: How long a run may wait for its submission before the sweep submits it itself: the evaluator's own retries
#: (on the pipeline's next evaluation) come first.
SUBMIT_GRACE = timedelta(minutes=10)
#: How long after a job run's state changed the sweep leaves its delivery to EventBridge: a state change in
#: flight (or in the job-state function's retries) is not a lost one, and repairing it would count it, and
#: alarm, as one.
STATE_CHANGE_GRACE = timedelta(minutes=2)


@dataclass
class ReconcileReport:
    """What one sweep found and fixed (``would_*`` in a dry run)."""

    dry_run: bool = False
    #: Submitted runs compared with the job service.
    checked: int = 0
    #: Runs moved to the final state their job run had reached (their state change was lost).
    finished: int = 0
    #: Runs moved from queued to running (a lost RUNNING).
    started: int = 0
    #: Runs the job service had not accepted, submitted by the sweep.
    resubmitted: int = 0
    #: Runs failed because the job service still refuses them; their slot is free again.
    failed_refused: int = 0
    #: Runs made for queues that could run with a free slot (a release that never came).
    released: int = 0
    #: Submitted runs whose job run the job service does not know (left alone, reported).
    unknown_job_runs: int = 0
    #: Runs whose job changed state within the grace: left to the state change on its way.
    in_flight: int = 0
    #: Per-item failures of the sweep itself (it goes on with the rest; the next sweep tries again).
    errors: list[str] = field(default_factory=list)
    #: The runs touched, by what was done to them.
    runs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def repaired(self) -> int:
        """Runs repaired in all: finished, started, resubmitted, failed for refusal, and made by a release."""
        return self.finished + self.started + self.resubmitted + self.failed_refused + self.released

    def note(self, what: str, run_id: str) -> None:
        """Record that ``what`` was done (or would be) to ``run_id``."""
        self.runs.setdefault(what, []).append(run_id)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON, with ``repaired``."""
        return {**asdict(self), "repaired": self.repaired}


class Reconciler:
    """Compares runs with the job service and queues with their conditions, and repairs the differences."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: Store,
        job_runs: JobRuns,
        launcher: Launcher,
        run_states: RunStates,
        evaluator: Evaluator,
        clock: Callable[[], datetime],
        submit_grace: timedelta = SUBMIT_GRACE,
        state_change_grace: timedelta = STATE_CHANGE_GRACE,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.job_runs = job_runs
        self.launcher = launcher
        self.run_states = run_states
        self.evaluator = evaluator
        self.clock = clock
        self.submit_grace = submit_grace
        self.state_change_grace = state_change_grace

    def sweep(self, *, dry_run: bool = False) -> ReconcileReport:
        """One pass over the submitted runs, the runs waiting for submission and every pipeline's queues.

        Never raises for one run or pipeline: its failure is in ``errors`` and the sweep goes on.
        """
        report = ReconcileReport(dry_run=dry_run)
        self._follow_submitted(report)
        for pipeline_id in sorted(self.catalog.pipelines):
            self._submit_waiting(pipeline_id, report)
        for pipeline_id in sorted(self.catalog.pipelines):
            self._release(pipeline_id, report)
        level = logging.WARNING if report.repaired or report.errors else logging.INFO
        logger.log(
            level, "reconciliation sweep", extra={k: v for k, v in report.to_json().items() if k != "runs"}
        )
        return report

    # ---- submitted runs whose state change was lost ------------------------------------------------------

    def _follow_submitted(self, report: ReconcileReport) -> None:
        try:
            runs = self.store.submitted_active_runs()
        except AssetflowError as exc:
            report.errors.append(f"listing the submitted runs: {exc}")
            return
        for run in runs:
            if not run.state.active or run.job_run_id is None:
                continue  # ended since it was listed
            report.checked += 1
            try:
                self._follow(run, run.job_run_id, report)
            except Exception as exc:  # one run's failure must not stop the sweep
                report.errors.append(f"run {run.run_id}: {type(exc).__name__}: {exc}")
                logger.warning("reconciling a run failed", extra={"run_id": run.run_id, "error": str(exc)})

    def _follow(self, run: Run, job_run_id: str, report: ReconcileReport) -> None:
        status = self.job_runs.job_run_status(job_run_id)
        if status is None:
            report.unknown_job_runs += 1
            report.note("unknown_job_run", run.run_id)
            return
        target = EMR_JOB_STATES.get(status.state)
        if target is None or target is run.state or target is RunState.QUEUED:
            return
        if status.changed_at is not None and self.clock() - status.changed_at < self.state_change_grace:
            report.in_flight += 1  # its state change is most likely on its way
            return
        what = "started" if target is RunState.RUNNING else "finished"
        if not report.dry_run:
            change = self.run_states.handle_state_change(
                job_run_id, status.state, "", job_run_name=run.run_id
            )
            if not change.moved:
                return  # its state change came meanwhile
            logger.warning(
                "run state repaired from the job service",
                extra={"run_id": run.run_id, "job_run_id": job_run_id, "state": status.state},
            )
        setattr(report, what, getattr(report, what) + 1)
        report.note(what, run.run_id)

    # ---- runs the job service never accepted ---------------------------------------------------------

    def _submit_waiting(self, pipeline_id: str, report: ReconcileReport) -> None:
        try:
            waiting = self.store.unsubmitted_runs(pipeline_id)
        except AssetflowError as exc:
            report.errors.append(f"listing {pipeline_id}'s runs waiting for submission: {exc}")
            return
        pipeline = self.catalog.pipelines[pipeline_id]
        now = self.clock()
        for run in waiting:
            if run.job_run_id or now - run.created_at < self.submit_grace:
                continue
            if report.dry_run:
                report.note("would_submit", run.run_id)
                continue
            try:
                job_run_id = self.launcher.submit(run, pipeline)
            except SubmissionRejectedError as exc:
                self._fail_refused(run, str(exc), report)
                continue
            except SubmissionError as exc:
                self.store.record_submission_failure(run.run_id, str(exc), now=now)
                report.errors.append(f"run {run.run_id}: submission failed again: {exc}")
                continue
            except Exception as exc:
                report.errors.append(f"run {run.run_id}: {type(exc).__name__}: {exc}")
                continue
            try:
                self.store.mark_submitted(run.run_id, job_run_id)
            except AlreadySubmittedError:
                continue
            except AssetflowError as exc:
                report.errors.append(f"run {run.run_id}: recording its job run {job_run_id}: {exc}")
                continue
            report.resubmitted += 1
            report.note("resubmitted", run.run_id)

    def _fail_refused(self, run: Run, reason: str, report: ReconcileReport) -> None:
        """Fail a run the job service keeps refusing, with the reason, and let its pipeline's queue go on."""
        now = self.clock()
        try:
            self.store.record_submission_failure(run.run_id, f"refused, run failed: {reason}", now=now)
            _, moved = self.store.set_run_state(run.run_id, RunState.FAILED)
        except AssetflowError as exc:
            report.errors.append(f"run {run.run_id}: failing it: {exc}")
            return
        if not moved:
            return
        logger.error("run failed: its submission is refused", extra={"run_id": run.run_id, "reason": reason})
        report.failed_refused += 1
        report.note("failed_refused", run.run_id)
        self._release(run.pipeline, report)

    # ---- queues that could run with a slot free ------------------------------------------------------

    def _release(self, pipeline_id: str, report: ReconcileReport) -> None:
        if pipeline_id not in self.catalog.pipelines:
            return
        try:
            if report.dry_run:
                if self._would_release(pipeline_id):
                    report.note("would_release", pipeline_id)
                return
            made = self.evaluator.release(pipeline_id).runs
        except Exception as exc:
            report.errors.append(
                f"pipeline {pipeline_id}: evaluating its queues: {type(exc).__name__}: {exc}"
            )
            return
        if made:
            logger.warning(
                "queued events released by the sweep",
                extra={"pipeline": pipeline_id, "runs": [r.run_id for r in made]},
            )
        report.released += len(made)
        for run in made:
            report.note("released", run.run_id)

    def _would_release(self, pipeline_id: str) -> bool:
        pipeline = self.catalog.pipelines[pipeline_id]
        if not self.store.queue_keys(pipeline_id):
            return False
        limit = pipeline.max_active_runs
        return limit is None or self.store.active_runs(pipeline_id) < limit


__all__ = ["STATE_CHANGE_GRACE", "SUBMIT_GRACE", "ReconcileReport", "Reconciler"]
