"""The SQS ingest Lambda: each message of a watched queue becomes one asset event, or is quarantined."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics

from assetflow.composition import Dependencies, dependencies, utc_now
from assetflow.functions._ingest import store_batch
from assetflow.functions._observe import flush_metrics

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext

# The stack names the service (POWERTOOLS_SERVICE_NAME); its QuarantinedMessages alarm filters on it.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "assetflow-ingest"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="assetflow", service=SERVICE)


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> PartialItemFailureResponse:
    """Ingest a batch of SQS messages: events in batched writes, once per message id; report the failed ones.

    A FIFO queue's batch stops at its first failure: no later message of the queue is stored before an
    earlier one that will come back.

    Raises:
        DefinitionError: a watcher's JSON Schema is invalid (the whole batch comes back; fix the definitions).
        BatchProcessingError: every message failed; SQS delivers the whole batch again.
    """
    resolved = deps or dependencies()
    translator = resolved.messages  # a bad schema fails the batch here, not each message
    records = event.get("Records") or []
    fifo = any(str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records)
    now = utc_now()
    try:
        # A microsecond apart, so that (timestamp, id) order is the batch's order.
        outcomes = [
            translator.from_sqs(record, now=now + timedelta(microseconds=n), extras=resolved.extras)
            for n, record in enumerate(records)
        ]
        errors = store_batch(
            outcomes,
            resolved.ingest,
            now=now,
            logger=logger,
            metrics=metrics,
            noun="message",
            lanes=[""] * len(outcomes) if fifo else None,
        )
    finally:
        flush_metrics(metrics)
    failed = [str(r.get("messageId")) for r, error in zip(records, errors, strict=True) if error is not None]
    if records and len(failed) == len(records):
        from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

        raise BatchProcessingError(
            f"all {len(records)} messages failed (first: {errors[0]!r})",
            [(type(e), e, None) for e in errors if e is not None],
        )
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
