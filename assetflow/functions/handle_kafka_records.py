"""The Kafka ingest Lambda (MSK and self-managed): each record of a watched topic becomes one asset event."""

from __future__ import annotations

import logging
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.kafka_event import KafkaEventRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from assetflow.adapters.messages import KafkaSource
from assetflow.composition import Dependencies, dependencies, utc_now
from assetflow.functions._ingest import store_and_report

# The stack names the service (POWERTOOLS_SERVICE_NAME); its QuarantinedMessages alarm filters on it.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "assetflow-ingest"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="assetflow", service=SERVICE)
# The batch processor logs each failed record with its traceback through the standard logger underneath the
# Powertools one, so the lines share its JSON format and Lambda context keys.
_failure_log = logging.getLogger(SERVICE)
processor = BatchProcessor(event_type=EventType.Kafka, logger=_failure_log)


class KafkaBatchRetryError(Exception):
    """Some records of the batch failed; the invocation fails so that Lambda retries the batch."""


class PartitionBlockedError(Exception):
    """An earlier record of the same topic partition failed in this batch; this one waits for it."""


def ingest_record(record: KafkaEventRecord, source: KafkaSource, deps: Dependencies) -> None:
    """Store one record as an event (once per cluster/topic/partition/offset) or quarantine it.

    Raises:
        StoreUnavailableError, ConflictError, botocore.exceptions.ClientError: the store (or S3, for an
            extra stored by reference) failed; the batch is retried (records already stored are recognised
            by their identity and not stored twice).
    """
    now = utc_now()
    outcome = deps.messages.from_kafka(record.raw_event, source=source, now=now, extras=deps.extras)
    store_and_report(outcome, deps.ingest, now=now, logger=logger, metrics=metrics, noun="record")


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> PartialItemFailureResponse:
    """Ingest a batch of Kafka records; any failed record fails the invocation.

    A Kafka event source mapping reads ``batchItemFailures`` only with ReportBatchItemFailures turned on (a
    provisioned-mode setting); otherwise a partial response counts as success and the failed offsets would be
    committed. Failing the invocation is right under both settings: Lambda retries the batch (bisecting it,
    up to the maximum record age, then the on-failure destination), and the records stored meanwhile are
    not stored again. Within a batch, once a record fails the later records of its partition are not
    stored either, so that a partition's events are never stored out of order.

    Raises:
        KafkaBatchRetryError: some records failed.
        BatchProcessingError: every record failed.
        DefinitionError: a watcher's JSON Schema is invalid.
    """
    resolved = deps or dependencies()
    resolved.messages  # noqa: B018  (build the translator first: a bad schema fails the batch, not each record)
    source = KafkaSource.from_event(event)
    blocked: set[tuple[str, str]] = set()

    def handle(record: KafkaEventRecord) -> None:
        partition = (str(record.raw_event.get("topic")), str(record.raw_event.get("partition")))
        if partition in blocked:
            raise PartitionBlockedError(f"an earlier record of {partition[0]}-{partition[1]} failed")
        try:
            ingest_record(record, source, resolved)
        except Exception:
            blocked.add(partition)
            raise

    try:
        response = process_partial_response(
            event=event, record_handler=handle, processor=processor, context=context
        )
    finally:
        # Flushed only when a record was quarantined: an empty flush warns on every clean batch.
        if metrics.metric_set:
            metrics.flush_metrics()
    failures = response.get("batchItemFailures") or []
    if failures:
        raise KafkaBatchRetryError(
            f"{len(failures)} record(s) of the batch failed (first: {failures[0]['itemIdentifier']}); "
            "failing the invocation so that Lambda retries the batch"
        )
    return response
