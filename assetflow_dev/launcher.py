"""The local stand-ins for EMR Serverless job runs: spark-submit on this machine, or the EMR API alone.

Both implement the evaluator's ``Launcher`` port over the real ``EmrServerlessLauncher`` (the run context goes
to S3 and ``StartJobRun`` to moto's EMR Serverless, so every run has a real EMR-shaped job run id), and both
hand the job's state changes to a ``StateReporter`` as EventBridge's "EMR Serverless Job Run State Change"
events: on AWS, EventBridge delivers those to the job-state function; locally, the runtime binds the same
function as the reporter. Reports never come from inside ``submit()``: the evaluator calls it, and the
job-state function calls the evaluator back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import logging
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.adapters.emr import JOB_STATE_DETAIL_TYPE, JOB_STATE_SOURCE, EmrServerlessLauncher
from assetflow.core.events import Run
from assetflow.core.pipeline import Pipeline
from assetflow.jobcode import build_py_files_zip
from assetflow.ports import JobAlreadyEndedError, JobRunStatus, SubmissionError
from assetflow.versions import EMR_RELEASE_LABEL
from assetflow_dev import processes
from assetflow_dev.aws import LOCAL_ACCOUNT_ID, LOCAL_REGION
from assetflow_dev.spark_pool import (
    SparkPool,
    WarmDriverLostError,
    WarmJob,
    WarmJobRefusedError,
)
from assetflow_dev.submit import local_spark_submit, local_submit_command
from assetflow_job.contract import CONTEXT_ARGUMENT, PY_FILES_ARCHIVE
from assetflow_job.local import LOCAL_SPARK_CONF

logger = logging.getLogger(__name__)

#: Receives one EventBridge "EMR Serverless Job Run State Change" event; raising makes the launcher retry.
StateReporter = Callable[[dict[str, Any]], Any]

#: The job run states after which EMR Serverless sends no more state changes.
TERMINAL_STATES = frozenset({"SUCCESS", "FAILED", "CANCELLED"})
#: Who "created" the local job runs (EMR names the caller of StartJobRun; moto names nobody).
LOCAL_CREATED_BY = f"arn:aws:sts::{LOCAL_ACCOUNT_ID}:assumed-role/assetflow-local/assetflow-local"
#: The ``--py-files`` zip that LocalSparkLauncher builds in its work folder.
#: How many times a state change is offered to a reporter that raises, with doubling pauses in between.
REPORT_ATTEMPTS = 6
FIRST_REPORT_PAUSE = 0.2
#: stateDetails is a summary, as on EMR; the whole output is in the run's log file.
MAX_STATE_DETAILS = 1000

# Inherited variables that would change what a local job talks to or which Spark runs: the job gets the
# runtime's credentials and endpoints (job_env), the pinned pyspark's Spark and only the --py-files zip.
_NOT_INHERITED = re.compile(r"^(AWS_.*|PYTHONPATH|SPARK_HOME)$")
# Lines of a failed job's output worth quoting in stateDetails (Python tracebacks, Spark's errors).
_ERROR_LINE = re.compile(r"Error|Exception|Traceback|\bERROR\b|error:")
_STATS_OF_STATE = {
    "SUBMITTED": "queued",
    "PENDING": "queued",
    "SCHEDULED": "queued",
    "QUEUED": "queued",
    "RUNNING": "running",
    "CANCELLING": "running",
    "SUCCESS": "succeeded",
    "FAILED": "failed",
    "CANCELLED": "failed",
}


def job_run_with_id(run: Run, job_run_id: str) -> Run:
    """The run as the launcher knows it: with its job run id (the store may not have recorded it yet)."""
    return run if run.job_run_id == job_run_id else dataclasses.replace(run, job_run_id=job_run_id)


def _eventbridge_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _emr_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def job_run_arn(application_id: str, job_run_id: str) -> str:
    """The ARN EMR Serverless gives a job run of the local account and region."""
    return (
        f"arn:aws:emr-serverless:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:/applications/{application_id}"
        f"/jobruns/{job_run_id}"
    )


def job_state_event(
    *,
    application_id: str,
    job_run_id: str,
    state: str,
    previous_state: str | None = None,
    job_run_name: str | None = None,
    release_label: str = EMR_RELEASE_LABEL,
    state_details: str = "",
    now: datetime | None = None,
    created_at: datetime | None = None,
    created_by: str = LOCAL_CREATED_BY,
    arn: str | None = None,
) -> dict[str, Any]:
    """An EventBridge "EMR Serverless Job Run State Change" event, shaped as EMR Serverless sends it.

    The shape is the one in the EMR Serverless User Guide ("Automating EMR Serverless with Amazon
    EventBridge"): ``time`` to the second, ``updatedAt`` / ``createdAt`` with microseconds. ``jobRunName``,
    ``previousState`` and ``stateDetails`` are left out when there is none. ``created_at`` defaults to ``now``.
    """
    moment = now or datetime.now(UTC)
    detail: dict[str, Any] = {"jobRunId": job_run_id}
    if job_run_name:
        detail["jobRunName"] = job_run_name
    detail |= {
        "applicationId": application_id,
        "arn": arn or job_run_arn(application_id, job_run_id),
        "releaseLabel": release_label,
        "state": state,
    }
    if previous_state:
        detail["previousState"] = previous_state
    detail |= {
        "createdBy": created_by,
        "updatedAt": _emr_timestamp(moment),
        "createdAt": _emr_timestamp(created_at or moment),
    }
    if state_details:
        detail["stateDetails"] = state_details
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": JOB_STATE_DETAIL_TYPE,
        "source": JOB_STATE_SOURCE,
        "account": LOCAL_ACCOUNT_ID,
        "time": _eventbridge_time(moment),
        "region": LOCAL_REGION,
        "resources": [],
        "detail": detail,
    }


@dataclass(eq=False)
class _Job:
    """One run's job run, as the launcher follows it."""

    run_id: str
    pipeline: Pipeline
    job_run_id: str
    request: dict[str, Any]
    created_at: datetime
    #: The last state reported (None before the first).
    state: str | None = None
    seen: set[str] = field(default_factory=set)
    #: The last state's details (a failed job's error lines), as EMR's GetJobRun gives ``stateDetails``.
    details: str = ""
    #: Set by ``cancel``: the job is stopped, and its end is reported as CANCELLED.
    cancelled: bool = False
    #: When the state last changed (GetJobRun's ``updatedAt``).
    changed_at: datetime | None = None


class _StateReports:
    """Delivers state changes on reporter threads: in order per job run, retried while the reporter raises.

    Events of one job run always go to the same thread (sharded by job run id), so a run's states arrive in
    the order they happened, while different runs' reports proceed in parallel.
    """

    def __init__(self, reporter: Callable[[], StateReporter | None], *, threads: int, name: str) -> None:
        self._reporter = reporter
        self._stopping = threading.Event()
        self._queues: list[queue.SimpleQueue[dict[str, Any] | None]] = [
            queue.SimpleQueue() for _ in range(threads)
        ]
        self._threads = [
            threading.Thread(target=self._loop, args=(q,), name=f"{name}-reports-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]
        for thread in self._threads:
            thread.start()

    def publish(self, event: dict[str, Any]) -> None:
        """Queue one event for delivery (never blocks)."""
        if self._stopping.is_set():
            return
        shard = zlib.crc32(event["detail"]["jobRunId"].encode()) % len(self._queues)
        self._queues[shard].put(event)

    def stop(self) -> None:
        """Deliver nothing more (a report in progress still returns)."""
        self._stopping.set()
        for q in self._queues:
            q.put(None)

    def join(self, deadline: float) -> None:
        """Wait until ``deadline`` (a ``time.monotonic()`` value) for the reporter threads to end."""
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _loop(self, events: queue.SimpleQueue[dict[str, Any] | None]) -> None:
        while True:
            event = events.get()
            if event is None or self._stopping.is_set():
                return
            self._deliver(event)

    def _deliver(self, event: dict[str, Any]) -> None:
        facts = {"job_run_id": event["detail"]["jobRunId"], "state": event["detail"]["state"]}
        pause = FIRST_REPORT_PAUSE
        for attempt in range(1, REPORT_ATTEMPTS + 1):
            reporter = self._reporter()
            try:
                if reporter is None:
                    raise LookupError("no reporter set yet")
                reporter(event)
            except Exception as exc:  # a failing reporter must not end the thread
                # The type only: messages of the job-state function can quote the event.
                logger.warning(
                    "job state report failed",
                    extra={**facts, "attempt": attempt, "error": type(exc).__name__},
                )
            else:
                logger.debug("job state reported", extra=facts)
                return
            if self._stopping.wait(pause):
                return
            pause *= 2
        logger.error("job state report dropped", extra={**facts, "attempts": REPORT_ATTEMPTS})


_JobT = TypeVar("_JobT", bound=_Job)


class _LauncherBase(Generic[_JobT]):
    """What both local launchers share: one job per run id, state reports, stats, close."""

    _name = "launcher"

    def __init__(
        self, *, emr: EmrServerlessLauncher, report: StateReporter | None, report_threads: int
    ) -> None:
        self.emr = emr
        #: Receives the state changes; settable after construction (the runtime binds its handler later).
        self.report: StateReporter | None = report
        self._lock = threading.Lock()
        self._closed = False
        self._jobs: dict[str, _JobT] = {}
        self._by_job_run: dict[str, _JobT] = {}
        self._gates: dict[str, threading.Lock] = {}
        self._reports = _StateReports(lambda: self.report, threads=report_threads, name=self._name)

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        """Start the run's job run and return its id at once; a repeated run gets the same id, no second job.

        Raises:
            SubmissionError: the launcher is closed, or S3 / EMR Serverless are throttling or failing.
            SubmissionRejectedError: EMR Serverless refused the job run as asked.
        """
        with self._lock:
            self._check_open(run)
            known = self._jobs.get(run.run_id)
            if known is not None:
                return known.job_run_id
            gate = self._gates.setdefault(run.run_id, threading.Lock())
        # One submission per run id at a time, without holding up other runs' submissions.
        with gate:
            with self._lock:
                known = self._jobs.get(run.run_id)
                if known is not None:
                    return known.job_run_id
            job_run_id = self.emr.submit(run, pipeline)
            job = self._new_job(
                run_id=run.run_id,
                pipeline=pipeline,
                job_run_id=job_run_id,
                request=self.emr.job_request(run, pipeline),
                created_at=datetime.now(UTC),
            )
            with self._lock:
                self._check_open(run)
                self._jobs[run.run_id] = job
                self._by_job_run[job_run_id] = job
                self._gates.pop(run.run_id, None)
            self._accepted(job)
        logger.info(
            "local job run accepted",
            extra={"run_id": run.run_id, "pipeline": pipeline.id, "job_run_id": job_run_id},
        )
        return job_run_id

    def cancel(self, run: Run) -> None:
        """Cancel the run's job run: ``CancelJobRun`` on the EMR API, then stop the job here (CANCELLING, CANCELLED).

        Raises:
            JobAlreadyEndedError: the job run has ended already.
            JobServiceUnavailableError: the EMR API is failing; retry.
        """
        with self._lock:
            job = self._jobs.get(run.run_id)
            if job is not None and job.state in TERMINAL_STATES:
                raise JobAlreadyEndedError(f"job run {job.job_run_id} has ended ({job.state})")
        if job is None:  # not this launcher's (a runtime restarted since): EMR's answer is all there is
            self.emr.cancel(run)
            return
        self.emr.cancel(job_run_with_id(run, job.job_run_id))
        with self._lock:
            if job.cancelled or job.state in TERMINAL_STATES:
                return
            job.cancelled = True
        self._publish(job, "CANCELLING")
        self._cancel(job)
        logger.info("local job run cancelled", extra={"run_id": run.run_id, "job_run_id": job.job_run_id})

    def run_id_of_job(self, job_run_id: str) -> str | None:
        """The run a job run belongs to: this launcher's own record, else the job run's tags.

        Raises:
            EmrUnavailableError: EMR Serverless is throttling or failing; retry later.
        """
        with self._lock:
            job = self._by_job_run.get(job_run_id)
        if job is not None:
            return job.run_id
        return self.emr.run_id_of_job(job_run_id)

    def job_run_status(self, job_run_id: str) -> JobRunStatus | None:
        """A job run's state as this launcher ran it (EMR's GetJobRun for a job it does not know).

        The reconciliation sweep asks this, as it asks EMR Serverless on AWS: locally the jobs run here, and
        moto's job runs are SUCCESS from the start whatever Spark does.

        Raises:
            EmrUnavailableError: EMR Serverless (moto) is throttling or failing; retry later.
        """
        with self._lock:
            job = self._by_job_run.get(job_run_id)
            if job is not None:
                return JobRunStatus(
                    state=job.state or "SUBMITTED", details=job.details, changed_at=job.changed_at
                )
        return self.emr.job_run_status(job_run_id)

    def stats(self) -> dict[str, int]:
        """How many job runs are queued, running, succeeded and failed (cancelled counts as failed)."""
        counts = {"queued": 0, "running": 0, "succeeded": 0, "failed": 0}
        with self._lock:
            for job in self._jobs.values():
                counts[_STATS_OF_STATE.get(job.state or "SUBMITTED", "queued")] += 1
        return counts

    def close(self, timeout: float = 10.0) -> None:
        """Stop accepting runs, stop the jobs in progress and report nothing more; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True  # from here on nothing new is queued for the reporters
        deadline = time.monotonic() + timeout
        self._reports.stop()
        self._stop(deadline)
        self._reports.join(deadline)
        logger.info("local launcher closed", extra={"launcher": self._name, **self.stats()})

    # ---- for subclasses ------------------------------------------------------------------------------

    def _new_job(self, **fields: Any) -> _JobT:
        raise NotImplementedError

    def _accepted(self, job: _JobT) -> None:
        raise NotImplementedError

    def _stop(self, deadline: float) -> None:
        raise NotImplementedError

    def _cancel(self, job: _JobT) -> None:
        """Stop a cancelled job; its CANCELLED report follows once it has stopped."""
        raise NotImplementedError

    def _check_open(self, run: Run) -> None:
        if self._closed:
            raise SubmissionError(f"run {run.run_id}: the local launcher is closed")

    def _publish(
        self,
        job: _Job,
        state: str,
        *,
        state_details: str = "",
        release_label: str = EMR_RELEASE_LABEL,
        created_by: str = LOCAL_CREATED_BY,
        created_at: datetime | None = None,
        job_run_name: str | None = None,
    ) -> None:
        # Under the lock: a job's state and the order of its reports change together.
        with self._lock:
            if self._closed:
                return
            previous, job.state = job.state, state
            job.details = state_details
            job.changed_at = datetime.now(UTC)
            job.seen.add(state)
            event = job_state_event(
                application_id=self.emr.application_id,
                job_run_id=job.job_run_id,
                state=state,
                previous_state=previous,
                job_run_name=job_run_name or str(job.request.get("name") or job.run_id),
                release_label=release_label,
                state_details=state_details,
                created_at=created_at or job.created_at,
                created_by=created_by,
            )
            self._reports.publish(event)
        logger.info(
            "local job run state",
            extra={"run_id": job.run_id, "job_run_id": job.job_run_id, "state": state, "previous": previous},
        )


# ---- spark-submit on this machine ----------------------------------------------------------------------


class _LocalJobError(Exception):
    """A job that cannot start here (a missing entry point, an S3 file with no local folder)."""


@dataclass(eq=False)
class _SparkJob(_Job):
    log_path: Path = Path()
    process: subprocess.Popen[bytes] | None = None
    driver: Any = None
    #: Set once the worker has taken the job (before that, a cancel reports CANCELLED itself).
    started: bool = False


@dataclass(frozen=True)
class _JobSpec:
    """What a job run asks for, resolved to this machine's files."""

    entry_point: Path
    #: EMR's entryPointArguments: the job's own, then ``--assetflow-context URI``.
    arguments: list[str]
    spark_conf: dict[str, str]
    #: The helper zip first, then the pipeline's own py-files.
    py_files: list[str]


def _failure_gist(log_path: Path, since: int) -> str:
    """The last error lines of a job's output (else its last lines), as one short line."""
    lines = [line.strip() for line in processes.log_tail(log_path, 80, since=since).splitlines()]
    lines = [line for line in lines if line]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    return " | ".join((errors or lines)[-3:])


class LocalSparkLauncher(_LauncherBase[_SparkJob]):
    """Runs each run's PySpark job with spark-submit on this machine, as EMR Serverless would run it.

    ``submit`` writes the run context and starts a job run on the EMR Serverless API (moto's, through
    ``emr``), then queues the job for one of ``max_concurrent`` worker threads and returns. A worker runs
    the pipeline's entry point (a file under ``repo_root``) with ``--py-files`` the helper zip, the local
    Spark settings and the job's own, and the job's arguments followed by ``--assetflow-context``, in its own
    process group with ``job_env`` as its environment (over this process's, minus AWS_*, PYTHONPATH and
    SPARK_HOME). Its output goes to ``work_dir/logs/<pipeline>/<run_id>.log``, the job run line first. The
    states go to ``report``: SUBMITTED, RUNNING, then SUCCESS (exit 0) or FAILED (any other exit, or
    ``run_timeout`` seconds passed) with the last error lines as stateDetails.

    With ``warm_workers`` > 0 a ``SparkPool`` (``pool``) keeps that many drivers started ahead, their
    SparkSession created with the same master, settings and zip, in ``work_dir/warm/``. A job then runs on
    a ready driver instead of a new spark-submit (the same arguments, environment, log and states; its own
    Spark settings applied at runtime) and the driver exits after it, as spark-submit would. A job whose
    settings Spark only takes at start (``spark.driver.memory``, ``spark.jars``, ``spark.submit.*``, any
    setting that is not a runtime SQL setting) runs with spark-submit, as does every job while no driver
    is ready or starting. Running jobs never exceed ``max_concurrent``; ready drivers wait beside them.
    With ``warm_idle_stop`` (seconds) the ready drivers stop after that long without a run, as EMR
    Serverless stops an idle application, and start again with the next run (which waits for one).
    """

    _name = "local-spark"

    def __init__(
        self,
        *,
        emr: EmrServerlessLauncher,
        repo_root: Path,
        work_dir: Path,
        job_env: Mapping[str, str],
        entry_points: Sequence[str] = (),
        max_concurrent: int = 2,
        master: str = "local[2]",
        report: StateReporter | None = None,
        run_timeout: float = 900.0,
        warm_workers: int = 0,
        warm_idle_stop: float | None = None,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        if warm_workers < 0:
            raise ValueError(f"warm_workers must not be negative, got {warm_workers}")
        try:
            spark_submit = local_spark_submit()
        except ImportError as exc:
            raise ImportError(
                "pyspark is not installed: pip install -r requirements-spark.txt (or use the emr-api launcher)"
            ) from exc
        self.repo_root = Path(repo_root).resolve()
        self.work_dir = Path(work_dir).resolve()
        self.master = master
        self.run_timeout = run_timeout
        self.spark_submit = spark_submit
        # Built once: the same bytes EMR gets from the stack's code bucket.
        self.py_files = build_py_files_zip(self.work_dir / PY_FILES_ARCHIVE, self.repo_root, entry_points)
        inherited = {k: v for k, v in os.environ.items() if not _NOT_INHERITED.match(k)}
        self.job_env: dict[str, str] = inherited | dict(job_env)
        for name, value in (
            ("PYSPARK_PYTHON", sys.executable),
            ("PYSPARK_DRIVER_PYTHON", sys.executable),
            ("SPARK_LOCAL_IP", "127.0.0.1"),
            ("PYTHONUNBUFFERED", "1"),
        ):
            self.job_env.setdefault(name, value)
        self._work: queue.SimpleQueue[_SparkJob | None] = queue.SimpleQueue()
        super().__init__(emr=emr, report=report, report_threads=1)
        # Long-lived threads on purpose: a job's parent-death signal fires when the thread that spawned it ends.
        self._workers = [
            threading.Thread(target=self._work_loop, name=f"local-spark-{i}", daemon=True)
            for i in range(max_concurrent)
        ]
        for worker in self._workers:
            worker.start()
        #: The warm drivers (None without ``warm_workers``).
        self.pool: SparkPool | None = None
        if warm_workers:
            self.pool = SparkPool(
                size=warm_workers,
                python=self.job_env["PYSPARK_DRIVER_PYTHON"],
                master=master,
                spark_conf=LOCAL_SPARK_CONF,
                py_files=[str(self.py_files)],
                env=self.job_env,
                work_dir=self.work_dir / "warm",
                idle_stop=warm_idle_stop,
            )

    def log_path(self, run_id: str) -> Path:
        """The log file of a run's job: ``work_dir/logs/<pipeline>/<run_id>.log``.

        Raises:
            KeyError: the run was never submitted to this launcher and no log file of it exists.
        """
        with self._lock:
            job = self._jobs.get(run_id)
        if job is not None:
            return self._log_path(job.pipeline.id, run_id)
        found = sorted((self.work_dir / "logs").glob(f"*/{run_id}.log"))
        if not found:
            raise KeyError(f"no local job log for run {run_id!r}")
        return found[0]

    def command(self, run: Run, pipeline: Pipeline) -> list[str]:
        """The spark-submit command line that runs a run's job (from the same request EMR gets).

        Raises:
            ValueError: the entry point or a py-file is not available on this machine.
        """
        try:
            return self._command(pipeline, self.emr.job_request(run, pipeline))
        except _LocalJobError as exc:
            raise ValueError(str(exc)) from exc

    # ---- internals -----------------------------------------------------------------------------------

    def _log_path(self, pipeline_id: str, run_id: str) -> Path:
        return self.work_dir / "logs" / pipeline_id / f"{run_id}.log"

    def _new_job(self, **fields: Any) -> _SparkJob:
        return _SparkJob(**fields, log_path=self._log_path(fields["pipeline"].id, fields["run_id"]))

    def _accepted(self, job: _SparkJob) -> None:
        self._publish(job, "SUBMITTED")
        self._work.put(job)

    def _local_file(self, path: str, what: str) -> Path:
        if path.startswith("s3://"):
            prefixes = sorted((p for p in self.emr.path_map if path.startswith(p)), key=len, reverse=True)
            if not prefixes:
                raise _LocalJobError(
                    f"{what} {path} is on S3 and no path_map entry maps it to a local folder"
                )
            local = Path(self.emr.path_map[prefixes[0]]) / path[len(prefixes[0]) :].lstrip("/")
        else:
            local = self.repo_root / path
        if not local.is_file():
            raise _LocalJobError(f"{what} {path} not found at {local}")
        return local

    def _command(self, pipeline: Pipeline, request: Mapping[str, Any]) -> list[str]:
        return self._submit_command(self._spec(pipeline, request))

    def _spec(self, pipeline: Pipeline, request: Mapping[str, Any]) -> _JobSpec:
        driver = request["jobDriver"]["sparkSubmit"]
        arguments = [str(argument) for argument in driver["entryPointArguments"]]
        if arguments[-2:-1] != [CONTEXT_ARGUMENT]:
            raise _LocalJobError(f"the job request does not end with {CONTEXT_ARGUMENT} URI")
        conf: dict[str, str] = {}
        for item in request.get("configurationOverrides", {}).get("applicationConfiguration", []):
            if item.get("classification") == "spark-defaults":
                conf |= item.get("properties", {})
        # EMR's --py-files: the helper zip from the code bucket (ours, built locally), then the pipeline's own.
        parameters = shlex.split(driver.get("sparkSubmitParameters", ""))
        shipped = (
            parameters[parameters.index("--py-files") + 1].split(",") if "--py-files" in parameters else []
        )
        py_files = [str(self.py_files)] + [
            str(self._local_file(p, "py-file")) for p in shipped if p and p != self.emr.py_files_uri
        ]
        return _JobSpec(
            entry_point=self._local_file(pipeline.job.entry_point, "entry point"),
            arguments=arguments,
            spark_conf=conf,
            py_files=py_files,
        )

    def _submit_command(self, spec: _JobSpec) -> list[str]:
        *arguments, _, context = spec.arguments
        return local_submit_command(
            spec.entry_point,
            context,
            arguments=arguments,
            spark_conf=spec.spark_conf,
            master=self.master,
            py_files=",".join(spec.py_files),
            spark_submit=self.spark_submit,
            context_last=True,
        )

    def _work_loop(self) -> None:
        while True:
            job = self._work.get()
            if job is None:
                return
            if self._closed:
                continue
            with self._lock:
                skip, job.started = job.cancelled, True
            if skip:
                continue
            try:
                self._execute(job)
            except Exception:  # the worker must survive anything one job does
                logger.exception("local job crashed the launcher", extra={"run_id": job.run_id})
                self._publish(job, "FAILED", state_details="the local launcher failed to run the job")

    def _execute(self, job: _SparkJob) -> None:
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            spec = self._spec(job.pipeline, job.request)
        except _LocalJobError as exc:
            self._log(job, f"# job run {job.job_run_id} cannot start: {exc}")
            self._publish(job, "FAILED", state_details=str(exc)[:MAX_STATE_DETAILS])
            return
        self._log(job, f"# job run {job.job_run_id} of run {job.run_id}")
        if self.pool is not None and self._execute_warm(job, spec, self.pool):
            return
        command = self._submit_command(spec)
        scratch = self._scratch(job)
        scratch.mkdir(parents=True, exist_ok=True)
        self._log(job, f"$ {shlex.join(command)}")
        since = processes.log_size(job.log_path)
        began = time.monotonic()
        with self._lock:
            stop = self._closed or job.cancelled
            if not stop:
                job.process = processes.spawn(command, log_path=job.log_path, env=self.job_env, cwd=scratch)
            process = job.process
        if stop or process is None:
            if job.cancelled and not self._closed:
                self._log(job, "# not started: the run was cancelled")
                self._publish(job, "CANCELLED", state_details="Job run cancelled by CancelJobRun")
            return
        self._publish(job, "RUNNING")
        try:
            process.wait(timeout=self.run_timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        status = processes.terminate(process, timeout=5.0)
        seconds = time.monotonic() - began
        if self._closed:
            self._log(job, f"# stopped after {seconds:.1f} s: the launcher closed")
            return
        if job.cancelled:
            self._log(job, f"# stopped after {seconds:.1f} s: the run was cancelled")
            self._publish(job, "CANCELLED", state_details="Job run cancelled by CancelJobRun")
            return
        if timed_out:
            self._log(job, f"# killed after {seconds:.1f} s: over the run timeout of {self.run_timeout:g} s")
            self._publish(job, "FAILED", state_details=f"Job run timed out after {self.run_timeout:g} s")
            return
        self._log(job, f"# exit status {status} after {seconds:.1f} s")
        if status == 0:
            self._publish(job, "SUCCESS")
            return
        details = f"spark-submit exited with status {status}: {_failure_gist(job.log_path, since)}"
        self._publish(job, "FAILED", state_details=details[:MAX_STATE_DETAILS])

    def _execute_warm(self, job: _SparkJob, spec: _JobSpec, pool: SparkPool) -> bool:
        """Run the job on a warm driver; False when it must run with spark-submit instead."""
        refused = pool.refused_settings(spec.spark_conf)
        if refused:
            self._log(job, f"# spark-submit: {', '.join(refused)} cannot be set on a warm Spark driver")
            return False
        driver = pool.acquire()
        if driver is None:
            return False
        with self._lock:
            job.driver = driver
            cancelled = job.cancelled
        if cancelled:  # the cold path reports it without starting anything
            pool.release(driver)
            return False
        ready_for = time.monotonic() - (driver.ready_at or time.monotonic())
        conf = " ".join(f"{key}={value}" for key, value in spec.spark_conf.items())
        header = (
            f"# warm Spark driver pid {driver.pid}, master {self.master}, ready {ready_for:.1f} s before"
            f" this job (its own log: {driver.log_path})\n"
            f"# runs {shlex.join([str(spec.entry_point), *spec.arguments])}"
            + (f" with runtime settings {conf}" if conf else "")
            + "\n"
        )
        since = processes.log_size(job.log_path)
        began = time.monotonic()
        try:
            driver.offer(
                WarmJob(
                    entry_point=spec.entry_point,
                    arguments=spec.arguments,
                    env=self.job_env,
                    log_path=job.log_path,
                    spark_conf=spec.spark_conf,
                    py_files=spec.py_files[1:],
                    log_header=header,
                )
            )
        except WarmJobRefusedError as exc:
            self._log(job, f"# spark-submit: {', '.join(exc.keys)} cannot be set on a warm Spark driver")
            return False
        except WarmDriverLostError as exc:
            logger.warning("warm driver lost, running the job cold", extra={"run_id": job.run_id})
            self._log(job, f"# spark-submit: {exc}")
            return False
        # When the launcher is closing, closing the pool stops this driver too.
        if not self._closed:
            scratch = self._scratch(job)
            scratch.parent.mkdir(parents=True, exist_ok=True)
            # The job's folder is the driver's own (its JVM works there); the run's scratch path names it.
            with contextlib.suppress(OSError):
                scratch.symlink_to(driver.folder, target_is_directory=True)
            self._publish(job, "RUNNING")
        outcome = driver.result(self.run_timeout)
        if outcome is None:
            driver.kill(timeout=5.0)
        seconds = time.monotonic() - began
        if self._closed:
            self._log(job, f"# stopped after {seconds:.1f} s: the launcher closed")
            return True
        if job.cancelled:
            self._log(job, f"# stopped after {seconds:.1f} s: the run was cancelled")
            self._publish(job, "CANCELLED", state_details="Job run cancelled by CancelJobRun")
            return True
        if outcome is None:
            self._log(job, f"# killed after {seconds:.1f} s: over the run timeout of {self.run_timeout:g} s")
            self._publish(job, "FAILED", state_details=f"Job run timed out after {self.run_timeout:g} s")
            return True
        self._log(job, f"# exit status {outcome.status} after {seconds:.1f} s")
        if outcome.status == 0:
            self._publish(job, "SUCCESS")
            return True
        gist = outcome.summary or _failure_gist(job.log_path, since)
        details = f"the warm Spark driver exited with status {outcome.status}: {gist}"
        self._publish(job, "FAILED", state_details=details[:MAX_STATE_DETAILS])
        return True

    def _cancel(self, job: _SparkJob) -> None:
        with self._lock:
            started, process, driver = job.started, job.process, job.driver
        if not started:  # still waiting for a worker, which will skip it
            self._publish(job, "CANCELLED", state_details="Job run cancelled by CancelJobRun")
            return
        # The worker that runs it sees the process end and reports CANCELLED.
        if process is not None:
            threading.Thread(target=processes.terminate, args=(process, 5.0), daemon=True).start()
        elif driver is not None:
            threading.Thread(target=driver.kill, args=(5.0,), daemon=True).start()

    def _scratch(self, job: _SparkJob) -> Path:
        # Each job runs in its own working folder: Spark's Derby metastore and warehouse would collide.
        return self.work_dir / "scratch" / job.pipeline.id / job.run_id

    @staticmethod
    def _log(job: _SparkJob, line: str) -> None:
        with job.log_path.open("a", encoding="utf-8") as log:
            log.write(f"{line}\n")

    def _stop(self, deadline: float) -> None:
        if self.pool is not None:
            self.pool.close(timeout=max(0.1, deadline - time.monotonic()))
        with self._lock:
            running = [
                job.process
                for job in self._jobs.values()
                if job.process is not None and job.process.poll() is None
            ]
        for process in running:
            processes.terminate(process, timeout=max(0.1, deadline - time.monotonic()))
        for _ in self._workers:
            self._work.put(None)
        for worker in self._workers:
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))


# ---- the EMR Serverless API alone ------------------------------------------------------------------------


@dataclass(eq=False)
class _PolledJob(_Job):
    failures: int = 0


class EmrApiLauncher(_LauncherBase[_PolledJob]):
    """Only calls the EMR Serverless API (moto's, locally): for load tests where Spark per run would dominate.

    ``submit`` writes the run context and starts the job run through ``emr``; a poller thread then reads the
    job run back with GetJobRun every ``poll_interval`` seconds until it ends and reports each state it sees,
    as EventBridge would: SUBMITTED first (every job run starts there), RUNNING before a SUCCESS that was not
    seen running (moto answers SUCCESS at once), each with its previousState.
    """

    _name = "emr-api"
    #: GetJobRun errors in a row after which a job run is no longer followed.
    MAX_POLL_FAILURES = 20

    def __init__(
        self,
        *,
        emr: EmrServerlessLauncher,
        emr_client: Any,
        report: StateReporter | None = None,
        poll_interval: float = 0.2,
        report_threads: int = 4,
    ) -> None:
        self.emr_client = emr_client
        self.poll_interval = poll_interval
        self._due: list[tuple[float, int, _PolledJob]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        super().__init__(emr=emr, report=report, report_threads=report_threads)
        self._poller = threading.Thread(target=self._poll_loop, name="emr-api-poller", daemon=True)
        self._poller.start()

    def _new_job(self, **fields: Any) -> _PolledJob:
        return _PolledJob(**fields)

    def _accepted(self, job: _PolledJob) -> None:
        self._schedule(job, 0.0)

    def _schedule(self, job: _PolledJob, delay: float) -> None:
        with self._wake:
            heapq.heappush(self._due, (time.monotonic() + delay, next(self._order), job))
            self._wake.notify()

    def _poll_loop(self) -> None:
        while True:
            with self._wake:
                while not self._closed and (not self._due or self._due[0][0] > time.monotonic()):
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                if self._closed:
                    return
                _, _, job = heapq.heappop(self._due)
            try:
                self._poll(job)
            except Exception:  # the poller must survive anything one job run does
                logger.exception("job run poll crashed", extra={"job_run_id": job.job_run_id})
                self._schedule(job, self.poll_interval)

    def _poll(self, job: _PolledJob) -> None:
        try:
            answer = self.emr_client.get_job_run(
                applicationId=self.emr.application_id, jobRunId=job.job_run_id
            )
        except (ClientError, BotoCoreError) as exc:
            job.failures += 1
            code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None
            facts = {
                "job_run_id": job.job_run_id,
                "error": code or type(exc).__name__,
                "failures": job.failures,
            }
            if job.failures >= self.MAX_POLL_FAILURES:
                logger.error("job run no longer followed", extra=facts)
                return
            logger.warning("job run poll failed", extra=facts)
            self._schedule(job, min(self.poll_interval * 2**job.failures, 5.0))
            return
        job.failures = 0
        found = answer["jobRun"]
        state = str(found["state"])
        states = [] if job.state is not None else ["SUBMITTED"]
        if state == "SUCCESS" and "RUNNING" not in job.seen:
            states.append("RUNNING")
        states.append(state)
        for step in states:
            if step != job.state and step not in job.seen:
                self._publish(
                    job,
                    step,
                    state_details=str(found.get("stateDetails") or "") if step == state else "",
                    release_label=str(found.get("releaseLabel") or EMR_RELEASE_LABEL),
                    created_by=str(found.get("createdBy") or LOCAL_CREATED_BY),
                    created_at=found.get("createdAt")
                    if isinstance(found.get("createdAt"), datetime)
                    else None,
                    job_run_name=found.get("name"),
                )
        if state not in TERMINAL_STATES:
            self._schedule(job, self.poll_interval)

    def _cancel(self, job: _PolledJob) -> None:
        self._schedule(job, 0.0)  # GetJobRun now says CANCELLED; the poller reports it

    def _stop(self, deadline: float) -> None:
        with self._wake:
            self._wake.notify_all()
        if self._poller is not threading.current_thread():
            self._poller.join(max(0.0, deadline - time.monotonic()))


__all__ = [
    "JOB_STATE_DETAIL_TYPE",
    "JOB_STATE_SOURCE",
    "LOCAL_CREATED_BY",
    "TERMINAL_STATES",
    "EmrApiLauncher",
    "LocalSparkLauncher",
    "StateReporter",
    "job_run_arn",
    "job_state_event",
]
