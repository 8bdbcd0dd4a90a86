"""The run-state Lambda: EventBridge "EMR Serverless Job Run State Change" events into run states and outlets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from assetflow.adapters.emr import JOB_STATE_DETAIL_TYPE, JOB_STATE_SOURCE
from assetflow.composition import Dependencies, dependencies

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger(service="assetflow-run-state")


@logger.inject_lambda_context
def lambda_handler(
    raw_event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> dict[str, Any]:
    """Record one job state change; raising makes Lambda retry the event (every step is idempotent).

    Raises:
        ValueError: the event lacks the job run id or state (retries then the dead-letter queue keep it).
        ConflictError, StoreUnavailableError, SubmissionError, EmrUnavailableError: transient; retried.
    """
    source, detail_type = raw_event.get("source"), raw_event.get("detail-type")
    resolved = deps or dependencies()
    if source != JOB_STATE_SOURCE or detail_type != JOB_STATE_DETAIL_TYPE:
        logger.warning(
            "event ignored: not a job run state change",
            extra={"source": source, "detail_type": detail_type},
        )
        return {"status": "ignored", "reason": "not a job run state change"}
    detail = raw_event.get("detail") or {}
    application_id, job_run_id, state = (
        detail.get("applicationId"),
        detail.get("jobRunId"),
        detail.get("state"),
    )
    if not (isinstance(job_run_id, str) and job_run_id and isinstance(state, str) and state):
        keys = sorted(detail) if isinstance(detail, dict) else type(detail).__name__
        # The keys only: Lambda logs an uncaught error's message, and the detail is not ours to log.
        raise ValueError(f"job run state change without jobRunId or state (detail keys: {keys})")
    expected = resolved.settings.emr_application_id
    if expected and application_id != expected:
        logger.info(
            "event ignored: another application",
            extra={"application_id": application_id, "job_run_id": job_run_id},
        )
        return {"status": "ignored", "reason": "another application"}
    name = detail.get("jobRunName")
    change = resolved.run_states.handle_state_change(
        job_run_id, state, str(application_id or ""), job_run_name=name if isinstance(name, str) else None
    )
    return {
        "status": "ignored" if change.ignored else "recorded",
        "reason": change.ignored,
        "job_run_id": job_run_id,
        "run_id": change.run_id,
        "state": change.state.value if change.state else None,
        "moved": change.moved,
        "emitted": [e.id for e in change.emitted],
        "refused": change.refused,
        "released": [r.run_id for r in change.released.runs] if change.released else [],
    }
