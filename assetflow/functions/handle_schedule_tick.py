"""The tick Lambda: EventBridge Scheduler's ticks of time-scheduled pipelines into runs, and one-shot wake-ups.

A recurring schedule (any pipeline whose schedule has a time part) sends ``{"pipeline", "scheduled_time"}``; a
one-time ``at(...)`` schedule sends ``{"pipeline", "queue_key", "wake_at"}`` when a debounce or max-wait deadline
is due, and the pipeline's queues are evaluated again with nothing new.
"""

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
    event = event or {}
    pipeline, when = event.get("pipeline"), event.get("scheduled_time")
    resolved = deps or dependencies()
    bind = getattr(getattr(resolved, "wakeups", None), "bind_target", None)
    if bind is not None and getattr(context, "invoked_function_arn", None):
        bind(context.invoked_function_arn)  # its wake-ups invoke this function: no variable can name itself
    if isinstance(pipeline, str) and pipeline and isinstance(event.get("wake_at"), str) and when is None:
        parse_timestamp(event["wake_at"])  # a malformed wake-up goes to the dead-letter queue
        woken = resolved.run_states.evaluator.release(pipeline)
        runs = [r.run_id for r in woken.runs]
        logger.info(
            "wake-up handled",
            extra={
                "pipeline": pipeline,
                "queue_key": event.get("queue_key"),
                "wake_at": event["wake_at"],
                "runs": runs,
            },
        )
        return {"pipeline": pipeline, "wake_at": event["wake_at"], "runs": runs}
    if not (isinstance(pipeline, str) and pipeline and isinstance(when, str)):
        raise ValueError(f"a tick needs string 'pipeline' and 'scheduled_time': {event!r}")
    scheduled_time = parse_timestamp(when)
    result = resolved.run_states.handle_tick(pipeline, scheduled_time)
    runs = [r.run_id for r in result.runs]
    logger.info("tick handled", extra={"pipeline": pipeline, "scheduled_time": when, "runs": runs})
    return {"pipeline": pipeline, "scheduled_time": when, "runs": runs}
