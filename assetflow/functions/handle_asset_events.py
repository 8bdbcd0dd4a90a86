"""The evaluator Lambda: the table's stream (new asset events) into queue entries and runs."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from assetflow.composition import Dependencies, dependencies
from assetflow.core.events import AssetEvent

logger = Logger(service="assetflow-evaluator")
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def evaluate_record(record: DynamoDBRecord, deps: Dependencies) -> None:
    """Evaluate one stream record; raising fails it, so the stream retries from this record.

    Raises:
        ConflictError, StoreUnavailableError, SubmissionError: transient; the record is retried
            (with bisection and a maximum record age, then the on-failure destination).
    """
    if record.event_name is not DynamoDBRecordEventName.INSERT:
        return
    image = record.dynamodb.new_image if record.dynamodb else {}
    if not str(image.get("sk", "")).startswith("EVENT#"):
        return
    event = AssetEvent.from_json(json.loads(image["event"]))
    result = deps.evaluator.handle_event(event)
    logger.info(
        "event evaluated",
        extra={
            "event_id": event.id,
            "asset": event.asset,
            "routed": result.routed,
            "runs": [r.run_id for r in result.runs],
        },
    )


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> PartialItemFailureResponse:
    """Process a batch of stream records with partial batch failures."""
    resolved = deps or dependencies()
    return process_partial_response(
        event=event,
        record_handler=lambda record: evaluate_record(record, resolved),
        processor=processor,
        context=context,
    )
