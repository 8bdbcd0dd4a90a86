"""The tick Lambda: EventBridge Scheduler's cron ticks of ``AssetOrTimeSchedule`` pipelines into runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from assetflow.composition import Dependencies, dependencies

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
from assetflow.core.events import parse_timestamp

logger = Logger(service="assetflow-schedule-tick")


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> dict[str, Any]:
    """Handle ``{"pipeline": ID, "scheduled_time": "<aws.scheduler.scheduled-time>"}``; a repeated tick is ignored.

    Raises:
        ValueError: the input is malformed (Scheduler's retries and dead-letter queue keep it).
        NotFoundError: the pipeline is not in the catalog.
        ConflictError, StoreUnavailableError, SubmissionError: transient; the tick is retried.
    """
    pipeline, when = event.get("pipeline"), event.get("scheduled_time")
    if not (isinstance(pipeline, str) and pipeline and isinstance(when, str)):
        raise ValueError(f"a tick needs string 'pipeline' and 'scheduled_time': {event!r}")
    scheduled_time = parse_timestamp(when)
    resolved = deps or dependencies()
    result = resolved.run_states.handle_tick(pipeline, scheduled_time)
    runs = [r.run_id for r in result.runs]
    logger.info("tick handled", extra={"pipeline": pipeline, "scheduled_time": when, "runs": runs})
    return {"pipeline": pipeline, "scheduled_time": when, "runs": runs}
