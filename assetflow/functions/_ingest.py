"""What the ingest handlers (SQS, Kafka, Kinesis) share: logger, metrics, storing a batch, failing a lost one.

A batch's records are translated and stored together and each is reported; when every record failed, the
invocation fails so that the whole batch comes back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from assetflow.composition import utc_now
from assetflow.core.watermarks import position_of
from assetflow.functions._observe import flush_metrics, log_batch
from assetflow.ports import Accepted, Outcome, Quarantined
from assetflow.usecases.ingest import Ingest

# The stack names the service (POWERTOOLS_SERVICE_NAME); its QuarantinedMessages alarm filters on it.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "assetflow-ingest"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="assetflow", service=SERVICE)

#: What the messages of one batch usually have in common, said once in its log line.
_SHARED_FACTS = ("watcher", "asset")


def ingest_records(
    records: Sequence[Any],
    translate: Callable[[Any, datetime], Outcome],
    ingest: Ingest,
    *,
    noun: str,
    lanes: Sequence[str] | None = None,
) -> list[Exception | None]:
    """Translate each record and store the batch (``store_batch``); returns each record's error, or None.

    The records get moments a microsecond apart, so that (timestamp, id) order is the batch's order. The
    batch's metrics are written whatever happens.
    """
    now = utc_now()
    try:
        outcomes = [translate(record, now + timedelta(microseconds=n)) for n, record in enumerate(records)]
        return store_batch(outcomes, ingest, now=now, logger=logger, metrics=metrics, noun=noun, lanes=lanes)
    finally:
        flush_metrics(metrics)


def fail_when_all_failed(errors: Sequence[Exception | None], noun: str) -> None:
    """Fail the invocation when every record of a batch failed, so that the whole batch comes back.

    Raises:
        BatchProcessingError: every record failed.
    """
    if not errors or any(error is None for error in errors):
        return
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    raise BatchProcessingError(
        f"all {len(errors)} {noun}s failed (first: {errors[0]!r})",
        [(type(e), e, None) for e in errors if e is not None],
    )


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
    stored: list[dict[str, Any]] = []
    redelivered: list[dict[str, Any]] = []
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
            (stored if created else redelivered).append(facts)
            continue
        # The reason may quote the payload; it is kept in the quarantine record, not in the logs.
        logger.warning(
            f"{noun} quarantined" if created else f"redelivered {noun}: quarantined already",
            extra={"watcher": outcome.watcher, "reason_code": outcome.code, "identity": outcome.identity},
        )
        if created:
            metrics.add_metric(name="QuarantinedMessages", unit=MetricUnit.Count, value=1)
    log_batch(logger, f"{noun}s stored as events", stored, shared=_SHARED_FACTS, count=len(stored))
    log_batch(
        logger,
        f"redelivered {noun}s: their events exist already",
        redelivered,
        shared=_SHARED_FACTS,
        count=len(redelivered),
    )
    if stored:
        metrics.add_metric(name="EventsStored", unit=MetricUnit.Count, value=len(stored))
    _advance_watermarks(outcomes, errors, ingest, now=now, logger=logger)
    return errors


def _advance_watermarks(
    outcomes: Sequence[Outcome],
    errors: Sequence[Exception | None],
    ingest: Ingest,
    *,
    now: datetime,
    logger: Any,
) -> None:
    """Move the sources' watermarks to the newest message recorded (events and quarantine alike).

    One conditional update per source partition of the batch. Best effort: the batch is stored whatever
    happens here, and reconciliation reads a lagging watermark as a gap whose replay finds every message
    recorded already.
    """
    advance = getattr(ingest.store, "advance_watermarks", None)
    if advance is None:
        return
    marks = []
    for outcome, error in zip(outcomes, errors, strict=True):
        if error is not None:
            continue
        facts = outcome.facts if isinstance(outcome, Quarantined) else outcome.event.extra.get("message")
        mark = position_of(outcome.identity, facts if isinstance(facts, Mapping) else None)
        if mark is not None:
            marks.append(mark)
    if not marks:
        return
    try:
        advance(marks, now=now)
    except Exception as exc:  # the messages are stored; only the watermark lags
        logger.warning("watermarks not advanced", extra={"error": type(exc).__name__, "marks": len(marks)})
