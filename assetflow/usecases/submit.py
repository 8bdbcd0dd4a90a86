"""Submit: start the jobs of created runs, record their job run ids, keep what could not start for a retry."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

from assetflow.core.catalog import Catalog
from assetflow.core.errors import AlreadySubmittedError, AssetflowError, ConflictError, NotFoundError
from assetflow.core.events import Run
from assetflow.ports import Clock, Launcher, RunStore, SubmissionError, SubmissionRejectedError

logger = logging.getLogger(__name__)


class Submitter:
    """Submits runs to the job service, idempotently (the launcher's token is derived from the run id).

    A batch's runs are submitted in parallel (``workers`` at a time) and their job run ids recorded in one
    batched write. Runs that an earlier attempt left unsubmitted (a crash, a throttled ``StartJobRun``) are
    looked for per pipeline: always where this container saw a failure, otherwise at most every
    ``sweep_seconds`` (a new container looks at once).
    """

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: RunStore,
        launcher: Launcher,
        clock: Clock,
        max_attempts: int,
        backoff: Callable[[int], None],
        workers: int = 8,
        sweep_seconds: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.launcher = launcher
        self.clock = clock
        self.max_attempts = max_attempts
        self._backoff = backoff
        self.workers = max(1, workers)
        self.sweep_seconds = sweep_seconds
        self._monotonic = monotonic
        self._swept: dict[str, float] = {}
        self._failed: set[str] = set()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def submit(
        self, runs: Sequence[Run], *, also_retry: Collection[str], swept: Sequence[Run] | None = None
    ) -> None:
        """Submit ``runs``, and the runs of the ``also_retry`` pipelines that an earlier attempt left unsubmitted.

        ``swept``: those unsubmitted runs, when the caller looked for them already (before it made ``runs``).
        A run the job service refuses stays queued with the reason (retrying the record cannot help); any
        other failure is recorded on the run and raised, so that the event comes back.

        Raises:
            SubmissionError: some runs were not submitted (kept, retried).
        """
        if swept is None:
            swept = self.sweep(also_retry, always=also_retry)
        failures = self.submit_all(runs, swept=swept)
        if failures:
            raise SubmissionError(
                "runs not submitted (kept, retried): " + "; ".join(map(str, failures.values()))
            )

    def sweep(self, routed: Collection[str], *, always: Collection[str] = ()) -> list[Run]:
        """The unsubmitted runs of the ``routed`` pipelines due a look (``always``: whatever their last one).

        Runs an earlier invocation created but could not submit (a crash, a throttled ``StartJobRun``). Look
        before making new runs: the new ones are submitted anyway, and need no reading back.
        """
        found: list[Run] = []
        for pipeline_id in sorted(self._due(routed, always=always)):
            found += self.store.unsubmitted_runs(pipeline_id)
        return found

    def submit_all(
        self, runs: Sequence[Run], *, swept: Sequence[Run] = (), started: dict[str, str] | None = None
    ) -> dict[str, SubmissionError]:
        """Submit ``runs`` and ``swept`` in parallel, record their job run ids; returns the failures per pipeline.

        ``started`` (when given) receives the job run id of each run started now.
        """
        todo = {run.run_id: run for run in runs}
        for run in swept:
            todo.setdefault(run.run_id, run)
        waiting = [run for run in todo.values() if not run.job_run_id]
        if not waiting:
            return {}
        # One run needs no thread; more start together, a few at a time.
        outcomes = (
            [self._start(waiting[0])]
            if len(waiting) == 1
            else list(self._executor().map(self._start, waiting))
        )
        failures: dict[str, list[str]] = {}
        started = {} if started is None else started
        refused: set[str] = set()
        for run, (job_run_id, failure) in zip(waiting, outcomes, strict=True):
            if failure is not None:
                failures.setdefault(run.pipeline, []).append(f"{run.run_id}: {failure}")
            elif job_run_id is not None:
                started[run.run_id] = job_run_id
            else:
                refused.add(run.pipeline)  # refused as asked: tried again with the pipeline's next evaluation
        recorded = set(started)  # unless its record fails below: then it still waits
        for run_id, error in self.store.mark_submitted_many(started).items() if started else ():
            if isinstance(error, AlreadySubmittedError | NotFoundError):
                logger.warning("run already submitted", extra={"run_id": run_id, "error": str(error)})
                continue
            try:
                self.mark_submitted(run_id, started[run_id])
            except AlreadySubmittedError as exc:
                logger.warning("run already submitted", extra={"run_id": run_id, "error": str(exc)})
            except ConflictError as exc:  # still contended: retried later (the token keeps one job run)
                failures.setdefault(todo[run_id].pipeline, []).append(f"{run_id}: {exc}")
                recorded.discard(run_id)
        self._forget_pending([todo[run_id] for run_id in sorted(recorded)])
        with self._lock:
            retry = set(failures) | refused
            self._failed.difference_update({r.pipeline for r in waiting} - retry)
            self._failed.update(retry)
        return {
            pipeline: SubmissionError("runs not submitted (kept, retried): " + "; ".join(reasons))
            for pipeline, reasons in failures.items()
        }

    def _forget_pending(self, runs: Sequence[Run]) -> None:
        """Take submitted runs off the retry sweep's list; if that fails, the next sweep does it."""
        if not runs:
            return
        try:
            self.store.forget_pending(runs)
        except AssetflowError as exc:
            logger.warning(
                "submitted runs left on the retry list", extra={"runs": len(runs), "error": str(exc)}
            )

    def _due(self, routed: Collection[str], *, always: Collection[str]) -> set[str]:
        """The pipelines whose unsubmitted runs are looked for now (and noted as swept)."""
        now = self._monotonic()
        with self._lock:
            due = {
                p
                for p in routed
                if p in always
                or p in self._failed
                or p not in self._swept
                or now - self._swept[p] >= self.sweep_seconds
            }
            self._swept.update(dict.fromkeys(due, now))
        return due

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.workers, thread_name_prefix="assetflow-submit"
                )
            return self._pool

    def _start(self, run: Run) -> tuple[str | None, str | None]:
        """Start one run's job; returns its job run id, or why it must be retried (or neither when refused)."""
        pipeline = self.catalog.pipelines.get(run.pipeline)
        if pipeline is None:
            return None, f"pipeline {run.pipeline!r} is no longer in the catalog"
        try:
            return self.launcher.submit(run, pipeline), None
        except SubmissionRejectedError as exc:
            # Retrying the stream record cannot help; keep the run visible and try again next time.
            self.store.record_submission_failure(run.run_id, str(exc), now=self.clock())
            logger.error(
                "run submission rejected",
                extra={"run_id": run.run_id, "pipeline": run.pipeline, "error": str(exc)},
            )
            return None, None
        except Exception as exc:  # any other failure leaves the run queued for a retry
            self.store.record_submission_failure(run.run_id, f"{type(exc).__name__}: {exc}", now=self.clock())
            logger.warning(
                "run submission failed",
                extra={"run_id": run.run_id, "pipeline": run.pipeline, "error": str(exc)},
            )
            return None, str(exc)

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
