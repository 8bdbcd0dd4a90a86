"""Submit: start the jobs of created runs, record their job run ids, keep what could not start for a retry."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from assetflow.core.catalog import Catalog
from assetflow.core.errors import AlreadySubmittedError, ConflictError
from assetflow.core.events import Run
from assetflow.ports import Clock, Launcher, RunStore, SubmissionError, SubmissionRejectedError

logger = logging.getLogger(__name__)


class Submitter:
    """Submits runs to the job service, idempotently (the launcher's token is derived from the run id)."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: RunStore,
        launcher: Launcher,
        clock: Clock,
        max_attempts: int,
        backoff: Callable[[int], None],
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.launcher = launcher
        self.clock = clock
        self.max_attempts = max_attempts
        self._backoff = backoff

    def submit(self, runs: Sequence[Run], *, also_retry: set[str]) -> None:
        """Submit ``runs``, and the runs of the ``also_retry`` pipelines that an earlier attempt left unsubmitted.

        A run the job service refuses stays queued with the reason (retrying the record cannot help); any
        other failure is recorded on the run and raised, so that the stream record comes back.

        Raises:
            SubmissionError: some runs were not submitted (kept, retried).
        """
        failures: list[str] = []
        todo = {run.run_id: run for run in runs}
        # Runs an earlier invocation created but could not submit (a crash, a throttled StartJobRun).
        for pipeline_id in sorted(also_retry):
            for run in self.store.unsubmitted_runs(pipeline_id):
                todo.setdefault(run.run_id, run)
        for run in todo.values():
            if run.job_run_id:
                continue
            failure = self._submit_one(run)
            if failure is not None:
                failures.append(f"{run.run_id}: {failure}")
        if failures:
            raise SubmissionError("runs not submitted (kept, retried): " + "; ".join(failures))

    def _submit_one(self, run: Run) -> str | None:
        """Submit one run; returns why it must be retried, or None."""
        pipeline = self.catalog.pipelines.get(run.pipeline)
        if pipeline is None:
            return f"pipeline {run.pipeline!r} is no longer in the catalog"
        try:
            job_run_id = self.launcher.submit(run, pipeline)
        except SubmissionRejectedError as exc:
            # Retrying the stream record cannot help; keep the run visible and try again next time.
            self.store.record_submission_failure(run.run_id, str(exc), now=self.clock())
            logger.error("run submission rejected", extra={"run_id": run.run_id, "error": str(exc)})
            return None
        except Exception as exc:  # any other failure leaves the run queued for a retry
            self.store.record_submission_failure(run.run_id, f"{type(exc).__name__}: {exc}", now=self.clock())
            logger.warning("run submission failed", extra={"run_id": run.run_id, "error": str(exc)})
            return str(exc)
        try:
            self.mark_submitted(run.run_id, job_run_id)
        except AlreadySubmittedError as exc:
            logger.warning("run already submitted", extra={"run_id": run.run_id, "error": str(exc)})
        except ConflictError as exc:  # still contended: retried later (the token keeps one job run)
            return str(exc)
        return None

    def mark_submitted(self, run_id: str, job_run_id: str) -> None:
        """Record the job run id, retrying lost races (another writer touched the run at the same time).

        Raises:
            AlreadySubmittedError: the run has another job run id.
            ConflictError: still contended after every attempt.
        """
        for attempt in range(self.max_attempts):
            try:
                self.store.mark_submitted(run_id, job_run_id)
                return
            except AlreadySubmittedError:
                raise
            except ConflictError:
                if attempt == self.max_attempts - 1:
                    raise
                self._backoff(attempt)


__all__ = ["Submitter"]
