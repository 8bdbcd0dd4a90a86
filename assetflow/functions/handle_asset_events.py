"""The evaluator Lambda: the table's stream (new asset events) into queue entries and runs, a batch at a time."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from assetflow.composition import Dependencies, dependencies
from assetflow.core.events import AssetEvent, Run
from assetflow.functions._observe import flush_metrics, log_batch

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from assetflow.usecases.evaluate import Evaluation

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "assetflow-evaluator"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="assetflow", service=SERVICE)


def new_asset_event(record: dict[str, Any]) -> AssetEvent | None:
    """The asset event a stream record inserts; None for any other record.

    The mapping's filter lets only those through on AWS; the local poller hands over every record.

    Raises:
        DocumentError, ValueError, KeyError: the record holds an event item that does not decode.
    """
    if record.get("eventName") != "INSERT":
        return None
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    if not str((image.get("sk") or {}).get("S", "")).startswith("EVENT#"):
        return None
    return AssetEvent.from_json(json.loads(image["event"]["S"]))


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> PartialItemFailureResponse:
    """Evaluate a batch of stream records, all at once; report the records to bring back.

    A record that does not decode fails alone. The evaluator groups the others by queue; a queue that cannot
    be changed fails its events from the first one not applied, and the stream resumes from the earliest
    failed record (records after it that were applied are recognised as seen when they come back).
    """
    resolved = deps or dependencies()
    records = event.get("Records") or []
    failed: list[str] = []
    events: list[tuple[str, AssetEvent]] = []
    for record in records:
        sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
        try:
            found = new_asset_event(record)
        except Exception as exc:  # a record that can never decode: it goes to the failure destination
            logger.error(
                "stream record does not decode", extra={"sequence_number": sequence, "error": str(exc)}
            )
            failed.append(sequence)
            continue
        if found is not None:
            events.append((sequence, found))
    if events:
        began = time.perf_counter()
        _ = resolved.catalog_announced  # the first batch of a container announces a new catalog
        try:
            result = resolved.evaluator.handle_batch([e for _, e in events])
        except Exception as exc:  # what every queue needed could not be read: the whole batch comes back
            logger.warning(
                "batch not evaluated; it comes back", extra={"error": f"{type(exc).__name__}: {exc}"}
            )
            from assetflow.usecases.evaluate import Evaluation

            result = Evaluation(failed={e.id: exc for _, e in events})
        for sequence, found in events:
            error = result.failed.get(found.id)
            if error is not None:
                failed.append(sequence)
                logger.warning(
                    "event not evaluated; it comes back",
                    extra={
                        "event_id": found.id,
                        "asset": found.asset,
                        "error": f"{type(error).__name__}: {error}",
                    },
                )
        runs_of: dict[str, list[str]] = {}
        for run in result.runs:
            for triggering in run.triggering_events:
                runs_of.setdefault(triggering.id, []).append(run.run_id)
        _record_metrics(result.runs, len(result.submitted), events, seconds=time.perf_counter() - began)
        log_batch(
            logger,
            "batch evaluated",
            [_evaluated(found, result, runs_of.get(found.id, [])) for _, found in events],
            shared=("asset",),
            events=len(events),
            routed=len(result.routed),
            runs=len(result.runs),
            submitted=len(result.submitted),
            conflicts=result.conflicts,
            failed=len(result.failed),
        )
    order = {str((r.get("dynamodb") or {}).get("SequenceNumber", "")): n for n, r in enumerate(records)}
    failed.sort(key=lambda s: order.get(s, 0))
    if records and len(failed) == len(records):
        # As Powertools' batch processor does: every record failed, so the invocation fails.
        from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

        raise BatchProcessingError(f"all {len(records)} stream records failed")
    return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}


def _evaluated(event: AssetEvent, result: Evaluation, run_ids: list[str]) -> dict[str, Any]:
    """What the batch's log line says of one event: where it came from, what it routed to, what it started."""
    item: dict[str, Any] = {"event_id": event.id, "asset": event.asset}
    message_id = _message_id(event)
    if message_id is not None:
        item["message_id"] = message_id
    if result.pipelines_of.get(event.id):
        item["pipelines"] = result.pipelines_of[event.id]
    if run_ids:
        item["run_ids"] = run_ids
    if event.id in result.failed:
        item["failed"] = True
    return item


def _message_id(event: AssetEvent) -> str | None:
    """The id of the message an event was made of (SQS message id, Kafka topic-partition@offset), if any."""
    message = event.extra.get("message")
    if not isinstance(message, Mapping):
        return None
    if isinstance(message.get("message_id"), str):
        return str(message["message_id"])
    if message.get("topic") is not None and message.get("offset") is not None:
        return f"{message.get('topic')}-{message.get('partition')}@{message.get('offset')}"
    return None


def _sent_at(event: AssetEvent) -> datetime | None:
    """When the message behind an event was sent (SQS SentTimestamp, a Kafka record's timestamp), if known."""
    message = event.extra.get("message")
    if not isinstance(message, Mapping):
        return None
    attributes = message.get("attributes")
    stamp = attributes.get("SentTimestamp") if isinstance(attributes, Mapping) else message.get("timestamp")
    try:
        return datetime.fromtimestamp(int(stamp) / 1000, UTC) if stamp is not None else None
    except (TypeError, ValueError, OverflowError):
        return None


def _record_metrics(
    runs: list[Run], submitted: int, events: list[tuple[str, AssetEvent]], *, seconds: float
) -> None:
    """The evaluator's stage metrics (EMF, one document per batch).

    EvaluationLatency: the batch's evaluation; EventToRunLatency: from a run's last triggering event being
    stored to the run; MessageToRunLatency: from that event's message being sent, where the source says when.
    """
    metrics.add_metric(name="EventsEvaluated", unit=MetricUnit.Count, value=len(events))
    metrics.add_metric(name="RunsCreated", unit=MetricUnit.Count, value=len(runs))
    metrics.add_metric(name="RunsSubmitted", unit=MetricUnit.Count, value=submitted)
    metrics.add_metric(name="EvaluationLatency", unit=MetricUnit.Milliseconds, value=round(seconds * 1000, 1))
    for run in runs[:90]:  # an EMF document holds at most 100 values a metric
        last = max(run.triggering_events, key=lambda e: e.sort_key, default=None)
        if last is None:
            continue
        waited = (run.created_at - last.timestamp).total_seconds() * 1000
        metrics.add_metric(name="EventToRunLatency", unit=MetricUnit.Milliseconds, value=round(waited, 1))
        sent = _sent_at(last)
        if sent is not None:
            since = (run.created_at - sent).total_seconds() * 1000
            metrics.add_metric(
                name="MessageToRunLatency", unit=MetricUnit.Milliseconds, value=round(since, 1)
            )
    flush_metrics(metrics)
