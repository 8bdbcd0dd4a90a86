"""The Kinesis ingest Lambda: each record of a watched data stream becomes one asset event, or is quarantined."""

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
    now = utc_now()
    try:
        # A microsecond apart, so that (timestamp, id) order is the batch's order.
        outcomes = [
            translator.from_kinesis(record, now=now + timedelta(microseconds=n), extras=resolved.extras)
            for n, record in enumerate(records)
        ]
        errors = store_batch(
            outcomes, resolved.ingest, now=now, logger=logger, metrics=metrics, noun="record", lanes=lanes
        )
    finally:
        flush_metrics(metrics)
    failed = [
        str((r.get("kinesis") or {}).get("sequenceNumber"))
        for r, error in zip(records, errors, strict=True)
        if error is not None
    ]
    if records and len(failed) == len(records):
        from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

        raise BatchProcessingError(
            f"all {len(records)} records failed (first: {errors[0]!r})",
            [(type(e), e, None) for e in errors if e is not None],
        )
    # Lambda retries from the lowest sequence number reported; the records after it come back with it.
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed[:1]]}
