"""EMR Serverless: the run context and outlet metadata in S3, and ``StartJobRun`` with an idempotency token."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.errors import AssetflowError, StoreUnavailableError
from assetflow.core.events import OUTLET_TOKEN_SCHEME, Run, format_timestamp
from assetflow.core.jsonvalue import canonical_json, thaw_json
from assetflow.core.pipeline import Pipeline
from assetflow.ports import (
    JobAlreadyEndedError,
    JobRunStatus,
    JobServiceUnavailableError,
    OutletMetadataError,
    SubmissionError,
    SubmissionRejectedError,
)
from assetflow_job.contract import (
    CONTEXT_ARGUMENT,
    CONTEXT_FILE,
    CONTEXT_FORMAT,
    DOCUMENT_VERSION,
    INLINE_CONTEXT_MAX_CHARS,
    INLINE_CONTEXT_PREFIX,
    OUTLET_METADATA_FILE,
    OUTLET_METADATA_FORMAT,
    OUTLETS_ARGUMENT,
    PY_FILES_ARCHIVE,
    RUNS_PREFIX,
)

logger = logging.getLogger(__name__)

#: The EventBridge event EMR Serverless sends when a job run changes state (its source and detail type).
JOB_STATE_SOURCE = "aws.emr-serverless"
JOB_STATE_DETAIL_TYPE = "EMR Serverless Job Run State Change"
#: The job states that move a run, which the stack's rule sends to the run-state function: its ends. A run is
#: created queued and is running from its submission (the write that records its job run id), so SUBMITTED,
#: PENDING, SCHEDULED and RUNNING would change nothing (an invocation a run, and a write unit for RUNNING).
RUN_MOVING_STATES = ("SUCCESS", "FAILED", "CANCELLED")
#: Tag keys on every job run, so a job run leads back to its run (also without the store).
RUN_ID_TAG = "assetflow:run-id"
PIPELINE_TAG = "assetflow:pipeline"
CLIENT_TOKEN_MAX = 64  # StartJobRun: 1-64 characters of [A-Za-z0-9._-]

# Worth retrying later: the service is busy or failing, not refusing this request.
_RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ServiceQuotaExceededException",
        "InternalServerException",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_ENDED_STATES = frozenset({"SUCCESS", "FAILED", "CANCELLED"})
_MEMO_SIZE = 1024


class EmrUnavailableError(JobServiceUnavailableError):
    """EMR Serverless is throttling or failing a read; retrying later may succeed."""


def client_token(run_id: str) -> str:
    """StartJobRun's idempotency token for a run: the same for every attempt, within EMR's 64 characters."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:48]
    return f"assetflow-{digest}"


def run_prefix(runs_bucket: str, pipeline: str, run_id: str) -> str:
    """``s3://<bucket>/runs/<pipeline>/<run_id>/``: where a run's context and outlet metadata live."""
    return f"s3://{runs_bucket}/{RUNS_PREFIX}{pipeline}/{run_id}/"


def context_uri(runs_bucket: str, pipeline: str, run_id: str) -> str:
    """The S3 URI of a run's context document."""
    return run_prefix(runs_bucket, pipeline, run_id) + CONTEXT_FILE


def outlet_metadata_uri(runs_bucket: str, pipeline: str, run_id: str) -> str:
    """The S3 URI the job writes its outlet metadata to when it succeeds."""
    return run_prefix(runs_bucket, pipeline, run_id) + OUTLET_METADATA_FILE


def run_outlet_metadata_uri(
    runs_bucket: str, pipeline: str, run_id: str, tokens: Any | None, *, scheme: int = OUTLET_TOKEN_SCHEME
) -> str:
    """Where a run's outlet metadata is written and read: under the run's token (of its scheme), if any."""
    if tokens is None:
        return outlet_metadata_uri(runs_bucket, pipeline, run_id)
    token = tokens.token(run_id, scheme=scheme)
    return run_prefix(runs_bucket, pipeline, run_id) + f"{token}/{OUTLET_METADATA_FILE}"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """The bucket and key of an ``s3://bucket/key`` URI.

    Raises:
        ValueError: the URI is not an S3 object URI.
    """
    parts = urlsplit(uri)
    key = parts.path.lstrip("/")
    if parts.scheme != "s3" or not parts.netloc or not key:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    return parts.netloc, key


def run_context_document(
    run: Run,
    pipeline: Pipeline,
    *,
    metadata_uri: str,
    events_table: Mapping[str, Any],
    path_map: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The run context (docs/contracts.md) the job reads through ``--assetflow-context``."""
    return {
        "format": CONTEXT_FORMAT,
        "version": DOCUMENT_VERSION,
        "run_id": run.run_id,
        "pipeline": run.pipeline,
        "partition_key": run.partition_key,
        "created_at": format_timestamp(run.created_at),
        "triggering_asset_events": {
            uri: [e.to_json() for e in sorted(events, key=lambda e: e.sort_key)]
            for uri, events in sorted(run.triggering_asset_events.items())
        },
        "outlets": [o.to_json() for o in pipeline.outlets],
        "inlets": [i.to_json() for i in pipeline.inlets],
        "outlet_metadata_uri": metadata_uri,
        "events_table": dict(events_table),
        "path_map": dict(path_map or {}),
        # What started the run and its conf (Airflow's dag_run.conf); a replay names the run it repeats.
        "triggered_by": run.triggered_by,
        "conf": None if run.conf is None else thaw_json(run.conf),
        **({"replay_of": run.replay_of} if run.replay_of else {}),
    }


def _code_uri(runs_bucket: str, code_prefix: str, path: str) -> str:
    if path.startswith("s3://"):
        return path
    prefix = code_prefix.strip("/")
    return f"s3://{runs_bucket}/{prefix + '/' if prefix else ''}{path}"


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _is_retryable(exc: ClientError) -> bool:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return _error_code(exc) in _RETRYABLE_CODES or (isinstance(status, int) and status >= 500)


class EmrServerlessLauncher:
    """Starts a run's PySpark job on EMR Serverless (the ``Launcher`` port).

    ``submit`` passes the run context in the job's arguments when it is small (``inline_contexts``), else
    first writes it to ``s3://<runs_bucket>/runs/<pipeline>/<run_id>/context.json`` (the same bytes on every
    attempt); then it calls ``StartJobRun`` with a ``clientToken`` derived from the run id, so EMR answers a
    repeated submission with the job run it already started. moto ignores the token, so a repeated ``submit``
    in one process also returns the job run id it remembers.
    """

    def __init__(
        self,
        *,
        emr_client: Any,
        s3_client: Any,
        application_id: str,
        execution_role_arn: str,
        runs_bucket: str,
        code_prefix: str = "code/",
        events_table: str,
        region: str | None = None,
        path_map: Mapping[str, str] | None = None,
        events_endpoint_url: str | None = None,
        py_files_archive: str = PY_FILES_ARCHIVE,
        run_tokens: Any | None = None,
        inline_contexts: bool = True,
        event_shards: Mapping[str, int] | None = None,
    ) -> None:
        self._emr = emr_client
        self._s3 = s3_client
        self.application_id = application_id
        self.execution_role_arn = execution_role_arn
        self.runs_bucket = runs_bucket
        self.code_prefix = code_prefix
        self.events_table = {"name": events_table, "region": region, "endpoint_url": events_endpoint_url}
        #: Assets whose events are spread over several partitions: a job reading their inlet events merges them.
        self.event_shards = {uri: n for uri, n in (event_shards or {}).items() if n > 1}
        self.path_map = dict(path_map or {})
        self.py_files_uri = _code_uri(runs_bucket, code_prefix, py_files_archive)
        #: Per-run secrets (``KmsRunTokens``): with them, a run's outlet metadata goes under its token, named in
        #: its job's arguments only.
        self.run_tokens = run_tokens
        self.inline_contexts = inline_contexts
        self._submitted: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    # ---- the port ------------------------------------------------------------------------------------

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        """Write the run context and start the job; returns the job run id (the same one on a repeat).

        Raises:
            SubmissionError: throttled, over a quota or a service error; retry later.
            SubmissionRejectedError: the request was refused as made (validation, conflict, access).
        """
        if run.pipeline != pipeline.id:
            raise ValueError(f"run {run.run_id} belongs to {run.pipeline!r}, not {pipeline.id!r}")
        with self._lock:
            known = self._submitted.get(run.run_id)
        if known is not None:
            return known
        uri = self.context_argument(run, pipeline)
        if not uri.startswith(INLINE_CONTEXT_PREFIX):
            bucket, key = split_s3_uri(uri)
            self._call(
                "PutObject",
                run.run_id,
                self._s3.put_object,
                Bucket=bucket,
                Key=key,
                Body=self._document(run, pipeline),
                ContentType="application/json",
            )
        request = self._call("GenerateMac", run.run_id, lambda: self.job_request(run, pipeline, context=uri))
        answer = self._call("StartJobRun", run.run_id, self._emr.start_job_run, **request)
        job_run_id = str(answer["jobRunId"])
        self._remember(run.run_id, job_run_id)
        logger.info(
            "job run started",
            extra={
                "run_id": run.run_id,
                "pipeline": pipeline.id,
                "job_run_id": job_run_id,
                "context": "inline" if uri.startswith(INLINE_CONTEXT_PREFIX) else uri,
            },
        )
        return job_run_id

    def cancel(self, run: Run) -> None:
        """Cancel the run's job run (``CancelJobRun``); harmless when repeated while it is cancelling.

        Raises:
            JobAlreadyEndedError: the job run has ended (or no longer exists): nothing to cancel.
            JobServiceUnavailableError: EMR Serverless is throttling or failing; retry later.
            ValueError: the run was never submitted (no job run id).
        """
        if not run.job_run_id:
            raise ValueError(f"run {run.run_id} has no job run to cancel")
        job_run_id = run.job_run_id
        try:
            self._emr.cancel_job_run(applicationId=self.application_id, jobRunId=job_run_id)
        except ClientError as exc:
            code = _error_code(exc)
            if _is_retryable(exc):
                raise JobServiceUnavailableError(f"CancelJobRun {job_run_id}: {code}") from exc
            if code == "ResourceNotFoundException":
                raise JobAlreadyEndedError(f"job run {job_run_id} no longer exists") from exc
            state = self.job_state(job_run_id)
            if state in _ENDED_STATES:
                raise JobAlreadyEndedError(f"job run {job_run_id} has ended ({state})") from exc
            if state == "CANCELLING":
                return  # cancelled already: a repeated cancel is harmless
            raise
        except BotoCoreError as exc:
            raise JobServiceUnavailableError(f"CancelJobRun {job_run_id}: {exc}") from exc
        logger.info("job run cancelled", extra={"run_id": run.run_id, "job_run_id": job_run_id})

    def job_state(self, job_run_id: str) -> str | None:
        """The job run's state as EMR Serverless reports it (None when it does not exist).

        Raises:
            JobServiceUnavailableError: EMR Serverless is throttling or failing; retry later.
        """
        status = self.job_run_status(job_run_id)
        return None if status is None else status.state

    # ---- helpers -------------------------------------------------------------------------------------

    def _document(self, run: Run, pipeline: Pipeline) -> bytes:
        document = run_context_document(
            run,
            pipeline,
            metadata_uri=outlet_metadata_uri(self.runs_bucket, pipeline.id, run.run_id),
            events_table=self._events_table_for(),
            path_map=self.path_map,
        )
        return canonical_json(document).encode()

    def _events_table_for(self) -> dict[str, Any]:
        """The events table as the job reads it, with the shard counts of the sharded assets.

        All of them: an inlet may be an alias, and whichever asset it resolves to, the job must know how its
        events are spread.
        """
        if not self.event_shards:
            return dict(self.events_table)
        return {**self.events_table, "shards": dict(sorted(self.event_shards.items()))}

    def context_argument(self, run: Run, pipeline: Pipeline) -> str:
        """What ``--assetflow-context`` names: the context itself when small enough, else its S3 object.

        Inline, the context costs no S3 PUT (by the launcher) and no GET (by the job); a run of many or large
        events goes through S3, as the job argument's length is limited.
        """
        if self.inline_contexts:
            inline = INLINE_CONTEXT_PREFIX + base64.b64encode(self._document(run, pipeline)).decode("ascii")
            if len(inline) <= INLINE_CONTEXT_MAX_CHARS:
                return inline
        return context_uri(self.runs_bucket, pipeline.id, run.run_id)

    def job_request(self, run: Run, pipeline: Pipeline, *, context: str | None = None) -> dict[str, Any]:
        """The ``StartJobRun`` parameters of a run (deterministic: every attempt sends the same request).

        ``context`` is the context argument, when the caller has it already (``context_argument``).
        """
        job = pipeline.job
        conf = dict(job.spark_conf)
        # --py-files would replace a pipeline's own spark.submit.pyFiles: ship both.
        py_files = [self.py_files_uri, *(p for p in conf.pop("spark.submit.pyFiles", "").split(",") if p)]
        arguments = list(job.arguments)
        if self.run_tokens is not None:
            arguments += [
                OUTLETS_ARGUMENT,
                run_outlet_metadata_uri(
                    self.runs_bucket, pipeline.id, run.run_id, self.run_tokens, scheme=run.outlet_token_scheme
                ),
            ]
        # The context last, as the runs' arguments always end (the local launchers rely on it).
        arguments += [CONTEXT_ARGUMENT, context or self.context_argument(run, pipeline)]
        driver: dict[str, Any] = {
            "entryPoint": _code_uri(self.runs_bucket, self.code_prefix, job.entry_point),
            "entryPointArguments": arguments,
            "sparkSubmitParameters": "--py-files " + ",".join(dict.fromkeys(py_files)),
        }
        request: dict[str, Any] = {
            "applicationId": self.application_id,
            "clientToken": client_token(run.run_id),
            "executionRoleArn": self.execution_role_arn,
            "name": run.run_id,
            "jobDriver": {"sparkSubmit": driver},
            "tags": {RUN_ID_TAG: run.run_id, PIPELINE_TAG: pipeline.id},
        }
        if conf:
            # spark-defaults rather than "--conf k=v" in sparkSubmitParameters: values may hold spaces
            # (extraJavaOptions), which a single parameters string cannot quote reliably.
            request["configurationOverrides"] = {
                "applicationConfiguration": [{"classification": "spark-defaults", "properties": conf}]
            }
        return request

    def run_id_of_job(self, job_run_id: str) -> str | None:
        """The run a job run was started for, from its tags (None for a job assetflow did not start).

        Closes the window where a job's state change arrives before its run recorded the job run id (a crash
        between ``StartJobRun`` and the store's write). Best effort: a refused lookup counts as unknown.

        Raises:
            EmrUnavailableError: EMR Serverless is throttling or failing; retry later.
        """
        try:
            job = self._emr.get_job_run(applicationId=self.application_id, jobRunId=job_run_id)["jobRun"]
        except ClientError as exc:
            if _is_retryable(exc):
                raise EmrUnavailableError(f"GetJobRun {job_run_id}: {_error_code(exc)}") from exc
            if _error_code(exc) != "ResourceNotFoundException":
                logger.warning(
                    "job run lookup refused", extra={"job_run_id": job_run_id, "error": _error_code(exc)}
                )
            return None
        except BotoCoreError as exc:
            raise EmrUnavailableError(f"GetJobRun {job_run_id}: {exc}") from exc
        run_id = (job.get("tags") or {}).get(RUN_ID_TAG)
        return str(run_id) if run_id else None

    def job_run_status(self, job_run_id: str) -> JobRunStatus | None:
        """The job run's state by EMR Serverless (``GetJobRun``), or None when EMR does not know it.

        Raises:
            EmrUnavailableError: EMR Serverless is throttling or failing; retry later.
        """
        try:
            job = self._emr.get_job_run(applicationId=self.application_id, jobRunId=job_run_id)["jobRun"]
        except ClientError as exc:
            if _error_code(exc) == "ResourceNotFoundException":
                return None
            if _is_retryable(exc):
                raise EmrUnavailableError(f"GetJobRun {job_run_id}: {_error_code(exc)}") from exc
            raise
        except BotoCoreError as exc:
            raise EmrUnavailableError(f"GetJobRun {job_run_id}: {exc}") from exc
        changed = job.get("updatedAt")
        return JobRunStatus(
            state=str(job.get("state", "")),
            details=str(job.get("stateDetails") or ""),
            changed_at=changed if isinstance(changed, datetime) and changed.tzinfo is not None else None,
        )

    def _remember(self, run_id: str, job_run_id: str) -> None:
        with self._lock:  # runs of a batch are submitted from several threads
            self._submitted[run_id] = job_run_id
            while len(self._submitted) > _MEMO_SIZE:
                self._submitted.popitem(last=False)

    @staticmethod
    def _call(operation: str, run_id: str, method: Any, **kwargs: Any) -> Any:
        try:
            return method(**kwargs)
        except AssetflowError as exc:  # a run token KMS could not make now (RunTokenUnavailableError)
            raise SubmissionError(f"{operation} for run {run_id}: {exc}") from exc
        except ClientError as exc:
            code = _error_code(exc) or "unknown"
            if _is_retryable(exc):
                raise SubmissionError(f"{operation} for run {run_id}: {code}") from exc
            message = exc.response.get("Error", {}).get("Message", "")
            raise SubmissionRejectedError(f"{operation} for run {run_id} refused: {code}: {message}") from exc
        except BotoCoreError as exc:  # connection errors and timeouts: nothing was refused
            raise SubmissionError(f"{operation} for run {run_id}: {exc}") from exc


def read_outlet_metadata(s3_client: Any, uri: str) -> dict[str, Any] | None:
    """The outlet metadata a job wrote at ``uri``, or None when it wrote none (no such object).

    Raises:
        OutletMetadataError: the object is not a version-1 outlet metadata document.
        StoreUnavailableError: S3 is throttling or failing; retry later.
    """
    bucket, key = split_s3_uri(uri)
    try:
        body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if _error_code(exc) in _NOT_FOUND_CODES:
            return None
        if _is_retryable(exc):
            raise StoreUnavailableError(f"GetObject {uri}: {_error_code(exc)}") from exc
        raise
    except BotoCoreError as exc:
        raise StoreUnavailableError(f"GetObject {uri}: {exc}") from exc
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise OutletMetadataError(f"outlet metadata at {uri} is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise OutletMetadataError(f"outlet metadata at {uri} is not a JSON object")
    if document.get("format") != OUTLET_METADATA_FORMAT:
        raise OutletMetadataError(
            f"outlet metadata at {uri}: format is {document.get('format')!r}, not {OUTLET_METADATA_FORMAT!r}"
        )
    if document.get("version") != DOCUMENT_VERSION:
        raise OutletMetadataError(
            f"outlet metadata at {uri}: version {document.get('version')!r} is not supported (1 is)"
        )
    if not isinstance(document.get("events"), list):
        raise OutletMetadataError(f"outlet metadata at {uri}: 'events' must be a list")
    return document


class S3RunOutputs:
    """What succeeded jobs wrote about their outlets, in the runs bucket (the ``RunOutputs`` port).

    With ``run_tokens``, only from the place under the run's token (what another job could write elsewhere,
    at the run's ``outlets.json`` next to its context for one, is never read).
    """

    def __init__(self, s3_client: Any, runs_bucket: str, *, run_tokens: Any | None = None) -> None:
        self._s3 = s3_client
        self.runs_bucket = runs_bucket
        self.run_tokens = run_tokens

    def outlet_metadata(
        self, pipeline: str, run_id: str, *, token_scheme: int = OUTLET_TOKEN_SCHEME
    ) -> dict[str, Any] | None:
        """The outlet metadata of a run (whose token is of ``token_scheme``), or None when its job wrote none.

        Raises:
            OutletMetadataError: the object is not a version-1 outlet metadata document.
            StoreUnavailableError: S3 (or KMS, for the run's token) is throttling or failing; retry later.
        """
        try:
            uri = run_outlet_metadata_uri(
                self.runs_bucket, pipeline, run_id, self.run_tokens, scheme=token_scheme
            )
        except AssetflowError as exc:  # RunTokenUnavailableError
            raise StoreUnavailableError(str(exc)) from exc
        return read_outlet_metadata(self._s3, uri)


__all__ = [
    "JOB_STATE_DETAIL_TYPE",
    "JOB_STATE_SOURCE",
    "PY_FILES_ARCHIVE",
    "RUN_MOVING_STATES",
    "EmrServerlessLauncher",
    "EmrUnavailableError",
    "S3RunOutputs",
    "client_token",
    "context_uri",
    "outlet_metadata_uri",
    "read_outlet_metadata",
    "run_context_document",
    "run_outlet_metadata_uri",
]
