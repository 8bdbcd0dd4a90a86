"""The tick Lambda: EventBridge Scheduler's ticks of time-scheduled pipelines into runs, and one-shot wake-ups.

A recurring schedule (any pipeline whose schedule has a time part) sends ``{"pipeline", "scheduled_time"}``; a
one-time ``at(...)`` schedule sends ``{"pipeline", "queue_key", "wake_at"}`` when a debounce or max-wait deadline
is due, and the pipeline's queues are evaluated again with nothing new; or ``{"expectation", "deadline"}`` at an
expected asset's deadline: a miss is announced (``AssetLate``, the ``AssetsLate`` metric) and queued for its
fallback pipelines, and the next deadline's check is scheduled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from assetflow.composition import Dependencies, dependencies

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
from assetflow.core.events import parse_timestamp

logger = Logger(service="assetflow-schedule-tick")
metrics = Metrics(namespace="assetflow", service="assetflow-schedule-tick")

#: Missed deadlines of expected assets (namespace ``assetflow``, dimension ``service``), each counted once; which
#: asset missed which deadline is in the ``AssetLate`` listener event and the function's log.
LATE_METRIC = "AssetsLate"


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
    if "expectation" in event:
        return _check_expectation(event, resolved)
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


def _check_expectation(event: dict[str, Any], deps: Dependencies) -> dict[str, Any]:
    """``{"expectation": URI, "deadline": ISO-8601}``: judge the deadline, announce a miss once, schedule the next.

    Raises:
        ValueError: the input is malformed (Scheduler's retries and dead-letter queue keep it).
        NotFoundError: the catalog declares no expectation for the asset (definitions changed since).
        StoreUnavailableError, ConflictError, SubmissionError: transient; the check is retried.
    """
    uri, deadline = event.get("expectation"), event.get("deadline")
    if not (isinstance(uri, str) and uri and isinstance(deadline, str)):
        raise ValueError(f"a deadline check needs string 'expectation' and 'deadline': {event!r}")
    parse_timestamp(deadline)
    result = deps.expectations.check(uri, deadline)
    if result.announced:
        metrics.add_metric(name=LATE_METRIC, unit=MetricUnit.Count, value=1)
        metrics.flush_metrics()
    return result.to_json()
