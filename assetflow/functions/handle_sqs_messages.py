"""The SQS ingest Lambda: each message of a watched queue becomes one asset event, or is quarantined."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assetflow.composition import Dependencies, dependencies
from assetflow.functions._ingest import fail_when_all_failed, ingest_records, logger

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext


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
    errors = ingest_records(
        records,
        lambda record, now: translator.from_sqs(record, now=now, extras=resolved.extras),
        resolved.ingest,
        noun="message",
        lanes=[""] * len(records) if fifo else None,
    )
    fail_when_all_failed(errors, "message")
    failed = [str(r.get("messageId")) for r, error in zip(records, errors, strict=True) if error is not None]
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
