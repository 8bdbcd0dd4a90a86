"""The evaluator Lambda: the table's stream (new asset events) into queue entries and runs, a batch at a time."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from assetflow.composition import Dependencies, dependencies
from assetflow.core.events import AssetEvent

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger(service="assetflow-evaluator")


def new_asset_event(record: dict[str, Any]) -> AssetEvent | None:
    """The asset event a stream record inserts; None for any other record.

    The mapping's filter lets only those through on AWS; the local poller hands over every record.

    Raises:
        DocumentError, ValueError, KeyError: the record holds an event item that does not decode.
    """
    if record.get("eventName") != "INSERT":
        return None
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    if not str((image.get("sk") or {}).get("S", "")).startswith("EVENT#"):
        return None
    return AssetEvent.from_json(json.loads(image["event"]["S"]))


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> PartialItemFailureResponse:
    """Evaluate a batch of stream records, all at once; report the records to bring back.

    A record that does not decode fails alone. The evaluator groups the others by queue; a queue that cannot
    be changed fails its events from the first one not applied, and the stream resumes from the earliest
    failed record (records after it that were applied are recognised as seen when they come back).
    """
    resolved = deps or dependencies()
    records = event.get("Records") or []
    failed: list[str] = []
    events: list[tuple[str, AssetEvent]] = []
    for record in records:
        sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
        try:
            found = new_asset_event(record)
        except Exception as exc:  # a record that can never decode: it goes to the failure destination
            logger.error(
                "stream record does not decode", extra={"sequence_number": sequence, "error": str(exc)}
            )
            failed.append(sequence)
            continue
        if found is not None:
            events.append((sequence, found))
    if events:
        try:
            result = resolved.evaluator.handle_batch([e for _, e in events])
        except Exception as exc:  # what every queue needed could not be read: the whole batch comes back
            logger.warning(
                "batch not evaluated; it comes back", extra={"error": f"{type(exc).__name__}: {exc}"}
            )
            from assetflow.usecases.evaluate import Evaluation

            result = Evaluation(failed={e.id: exc for _, e in events})
        for sequence, found in events:
            error = result.failed.get(found.id)
            if error is not None:
                failed.append(sequence)
                logger.warning(
                    "event not evaluated; it comes back",
                    extra={
                        "event_id": found.id,
                        "asset": found.asset,
                        "error": f"{type(error).__name__}: {error}",
                    },
                )
        logger.info(
            "batch evaluated",
            extra={
                "events": len(events),
                "routed": len(result.routed),
                "runs": [r.run_id for r in result.runs],
                "conflicts": result.conflicts,
                "failed": len(result.failed),
            },
        )
    order = {str((r.get("dynamodb") or {}).get("SequenceNumber", "")): n for n, r in enumerate(records)}
    failed.sort(key=lambda s: order.get(s, 0))
    if records and len(failed) == len(records):
        # As Powertools' batch processor does: every record failed, so the invocation fails.
        from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

        raise BatchProcessingError(f"all {len(records)} stream records failed")
    return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}
