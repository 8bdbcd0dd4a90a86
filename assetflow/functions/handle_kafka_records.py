"""The Kafka ingest Lambda (MSK and self-managed): each record of a watched topic becomes one asset event."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assetflow.adapters.messages import KafkaSource
from assetflow.composition import Dependencies, dependencies
from assetflow.functions._ingest import fail_when_all_failed, ingest_records, logger

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext


class KafkaBatchRetryError(Exception):
    """Some records of the batch failed; the invocation fails so that Lambda retries the batch."""


class PartitionBlockedError(Exception):
    """An earlier record of the same topic partition failed in this batch; this one waits for it."""


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> PartialItemFailureResponse:
    """Ingest a batch of Kafka records, events in batched writes; any failed record fails the invocation.

    Each record is stored once per cluster/topic/partition/offset.

    A Kafka event source mapping reads ``batchItemFailures`` only with ReportBatchItemFailures turned on (a
    provisioned-mode setting); otherwise a partial response counts as success and the failed offsets would be
    committed. Failing the invocation is right under both settings: Lambda retries the batch (bisecting it,
    up to the maximum record age, then the on-failure destination, where those are configured), and the
    records stored meanwhile are not stored again. Within a batch, once a record fails the later records of
    its partition are not stored either, so that a partition's events are never stored out of order.

    Raises:
        KafkaBatchRetryError: some records failed.
        BatchProcessingError: every record failed.
        DefinitionError: a watcher's JSON Schema is invalid.
    """
    resolved = deps or dependencies()
    translator = resolved.messages  # a bad schema fails the batch here, not each record
    source = KafkaSource.from_event(event)
    records = [r for rs in (event.get("records") or {}).values() for r in rs]
    lanes = [f"{r.get('topic')}-{r.get('partition')}" for r in records]
    errors = ingest_records(
        records,
        lambda record, now: translator.from_kafka(record, source=source, now=now, extras=resolved.extras),
        resolved.ingest,
        noun="record",
        lanes=lanes,
    )
    fail_when_all_failed(errors, "record")
    failures = [
        {"itemIdentifier": {"partition": lane, "offset": record.get("offset")}}
        for record, lane, error in zip(records, lanes, errors, strict=True)
        if error is not None
    ]
    if failures:
        raise KafkaBatchRetryError(
            f"{len(failures)} record(s) of the batch failed (first: {failures[0]['itemIdentifier']}); "
            "failing the invocation so that Lambda retries the batch"
        )
    return {"batchItemFailures": []}
