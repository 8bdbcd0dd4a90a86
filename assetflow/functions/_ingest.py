"""What the SQS and Kafka ingest handlers share: store a batch of translated messages and report each."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from assetflow.ports import Accepted, Outcome
from assetflow.usecases.ingest import Ingest


def store_batch(
    outcomes: Sequence[Outcome],
    ingest: Ingest,
    *,
    now: datetime,
    logger: Any,
    metrics: Any,
    noun: str,
    lanes: Sequence[str] | None = None,
) -> list[Exception | None]:
    """Store a batch of outcomes (events batched, quarantine records once) and report each.

    Returns, per outcome, the error that kept it from being written, or None.

    The errors are the store's (or S3's, for an extra stored by reference): the handler fails those messages
    so that they come back.
    """
    answers = ingest.store_outcomes(outcomes, now=now, lanes=lanes)
    errors: list[Exception | None] = []
    for outcome, answer in zip(outcomes, answers, strict=True):
        if isinstance(answer, Exception):
            errors.append(answer)
            logger.warning(
                f"{noun} not stored; it comes back",
                extra={
                    "watcher": outcome.watcher,
                    "identity": outcome.identity,
                    "error": type(answer).__name__,
                },
            )
            continue
        errors.append(None)
        created = answer
        if isinstance(outcome, Accepted):
            facts: dict[str, str | int] = {
                "watcher": outcome.watcher,
                "asset": outcome.event.asset,
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
            continue
        # The reason may quote the payload; it is kept in the quarantine record, not in the logs.
        logger.warning(
            f"{noun} quarantined" if created else f"redelivered {noun}: quarantined already",
            extra={"watcher": outcome.watcher, "reason_code": outcome.code, "identity": outcome.identity},
        )
        if created:
            metrics.add_metric(name="QuarantinedMessages", unit=MetricUnit.Count, value=1)
    stored = sum(1 for o, a in zip(outcomes, answers, strict=True) if isinstance(o, Accepted) and a is True)
    if stored:
        metrics.add_metric(name="EventsStored", unit=MetricUnit.Count, value=stored)
    return errors
