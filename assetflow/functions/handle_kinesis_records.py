"""The Kinesis ingest Lambda: each record of a watched data stream becomes one asset event, or is quarantined."""

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
    """Ingest a batch of Kinesis records (one shard's), events in batched writes; report the first failed one.

    Each record is stored once per stream/shard/sequence number. A stream is read in order: once a record
    fails, the later records of its shard are not stored, and the response names the failed record's sequence
    number, from which Lambda retries (checkpointing what came before). When every record fails, the
    invocation fails, so that Lambda bisects the batch (BisectBatchOnFunctionError) before its retries run out
    and the batch goes to the on-failure destination.

    Raises:
        BatchProcessingError: every record failed.
        DefinitionError: a watcher's JSON Schema is invalid (the whole batch comes back; fix the definitions).
    """
    resolved = deps or dependencies()
    translator = resolved.messages  # a bad schema fails the batch here, not each record
    records = event.get("Records") or []
    lanes = [str(r.get("eventID") or "").split(":", 1)[0] for r in records]
    errors = ingest_records(
        records,
        lambda record, now: translator.from_kinesis(record, now=now, extras=resolved.extras),
        resolved.ingest,
        noun="record",
        lanes=lanes,
    )
    fail_when_all_failed(errors, "record")
    failed = [
        str((r.get("kinesis") or {}).get("sequenceNumber"))
        for r, error in zip(records, errors, strict=True)
        if error is not None
    ]
    # Lambda retries from the lowest sequence number reported; the records after it come back with it.
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed[:1]]}
