"""What the SQS and Kafka ingest handlers share: store one translated message and report it."""

from __future__ import annotations

from datetime import datetime

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from assetflow.ports import Accepted, Outcome
from assetflow.usecases.ingest import Ingest


def store_and_report(
    outcome: Outcome, ingest: Ingest, *, now: datetime, logger: Logger, metrics: Metrics, noun: str
) -> None:
    """Store an event (its extra first, when it goes by reference) or a quarantine record once, and report it.

    Raises:
        StoreUnavailableError, ConflictError, botocore.exceptions.ClientError: the store (or S3, for an
            extra stored by reference) failed; the handler fails the message so that it comes back.
    """
    created = ingest.store_outcome(outcome, now=now)
    if isinstance(outcome, Accepted):
        facts: dict[str, str | int] = {
            "watcher": outcome.watcher,
            "event_id": outcome.event.id,
            "identity": outcome.identity,
        }
        if outcome.detached is not None:
            facts["extra_uri"] = outcome.detached.uri
            facts["extra_bytes"] = outcome.detached.size
        logger.info(
            f"{noun} stored as an event" if created else f"redelivered {noun}: its event exists already",
            extra=facts,
        )
        return
    # The reason may quote the payload; it is kept in the quarantine record, not in the logs.
    logger.warning(
        f"{noun} quarantined" if created else f"redelivered {noun}: quarantined already",
        extra={"watcher": outcome.watcher, "reason_code": outcome.code, "identity": outcome.identity},
    )
    if created:
        metrics.add_metric(name="QuarantinedMessages", unit=MetricUnit.Count, value=1)
