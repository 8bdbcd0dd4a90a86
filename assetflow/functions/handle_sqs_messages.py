"""The SQS ingest Lambda: each message of a watched queue becomes one asset event, or is quarantined."""

from __future__ import annotations

import logging
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from assetflow.composition import Dependencies, dependencies, utc_now
from assetflow.functions._ingest import store_and_report

# The stack names the service (POWERTOOLS_SERVICE_NAME); its QuarantinedMessages alarm filters on it.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "assetflow-ingest"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="assetflow", service=SERVICE)
# The batch processor logs each failed record with its traceback through the standard logger underneath the
# Powertools one, so the lines share its JSON format and Lambda context keys.
_failure_log = logging.getLogger(SERVICE)
processor = BatchProcessor(event_type=EventType.SQS, logger=_failure_log)
# FIFO order: after the first failure the rest of the batch fails too, so that no later message of the
# queue is stored before an earlier one that will come back.
fifo_processor = SqsFifoPartialProcessor(logger=_failure_log)


def ingest_message(record: SQSRecord, deps: Dependencies) -> None:
    """Store one message as an event (once per message id) or quarantine it; either way it is acknowledged.

    Raises:
        StoreUnavailableError, ConflictError, botocore.exceptions.ClientError: the store (or S3, for an
            extra stored by reference) failed; only this message fails, and SQS delivers it again after its
            visibility timeout (then to the DLQ).
    """
    now = utc_now()
    outcome = deps.messages.from_sqs(record.raw_event, now=now, extras=deps.extras)
    store_and_report(outcome, deps.ingest, now=now, logger=logger, metrics=metrics, noun="message")


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> PartialItemFailureResponse:
    """Ingest a batch of SQS messages, reporting the failed ones as batch item failures.

    Raises:
        DefinitionError: a watcher's JSON Schema is invalid (the whole batch comes back; fix the definitions).
        BatchProcessingError: every message failed; SQS delivers the whole batch again.
    """
    resolved = deps or dependencies()
    resolved.messages  # noqa: B018  (build the translator first: a bad schema fails the batch, not each message)
    records = event.get("Records") or []
    fifo = any(str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records)
    try:
        return process_partial_response(
            event=event,
            record_handler=lambda record: ingest_message(record, resolved),
            processor=fifo_processor if fifo else processor,
            context=context,
        )
    finally:
        # Flushed only when a message was quarantined: an empty flush warns on every clean batch.
        if metrics.metric_set:
            metrics.flush_metrics()
