"""The watermarks aggregate: per source partition, the newest position recorded (``WATERMARK#<source>``)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from assetflow.adapters.dynamodb.keys import partition_key
from assetflow.adapters.dynamodb.table import DynamoDbTable, num_attr, plain_item, str_attr
from assetflow.core.errors import ConflictError
from assetflow.core.events import format_timestamp, parse_timestamp
from assetflow.core.watermarks import Watermark, newest


def watermark_pk(source: str) -> str:
    """The partition of a source's watermarks (an SQS queue ARN, a Kafka cluster and topic)."""
    return partition_key("WATERMARK#", source)


#: How often one function instance writes an SQS queue's watermark (the newest sent time recorded, a hint for
#: reconciliation that no gap check reads): every batch would make it one hot item, updated by every
#: concurrent poller, over DynamoDB's 1,000 writes a second per key at 10,000 messages a second.
SQS_WATERMARK_SECONDS = 1.0


class DynamoDbWatermarkStore(DynamoDbTable):
    """One item per source partition (``P#<partition>``), moved forward only (conditional updates)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: When this instance last wrote each SQS queue's watermark (``time.monotonic()``).
        self._sqs_written: dict[str, float] = {}
        self.sqs_watermark_seconds = SQS_WATERMARK_SECONDS

    def advance_watermarks(self, marks: Sequence[Watermark], *, now: datetime) -> None:
        """Move each source partition's watermark forward to its newest mark; an older mark changes nothing.

        One conditional update per source partition of the batch (not per message); a Kafka partition's
        ``contiguous`` mark a second one, which follows only a batch that starts where it stands. An SQS
        queue's (no partition) at most once every ``sqs_watermark_seconds`` from this instance: it may lag
        the last second of a burst until the queue's next batch.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        for mark in newest(list(marks)):
            if not mark.partition:
                moment = time.monotonic()
                if moment - self._sqs_written.get(mark.source, -math.inf) < self.sqs_watermark_seconds:
                    continue
                self._sqs_written[mark.source] = moment
            # A condition that fails means a newer message was recorded first: the watermark is past this one.
            with contextlib.suppress(ConflictError):
                self._update(
                    mark.source,
                    mark.partition,
                    "SET #p = :p, message = :m, #a = :a",
                    "attribute_not_exists(#p) OR #p < :p",
                    {"#p": "position", "#a": "at"},
                    {
                        ":p": num_attr(mark.position),
                        # The message's identity, cut: a source name can be longer than any attribute needs.
                        ":m": str_attr(mark.message[:1024]),
                        ":a": str_attr(format_timestamp(now)),
                    },
                )
            if mark.partition and mark.first is not None:
                with contextlib.suppress(ConflictError):  # behind a gap, or already past this batch
                    self._update(
                        mark.source,
                        mark.partition,
                        "SET contiguous = :t",
                        "attribute_not_exists(contiguous) OR (contiguous >= :f AND contiguous < :t)",
                        {},
                        {":t": num_attr(mark.position), ":f": num_attr(mark.first - 1)},
                    )

    def close_gap(self, source: str, partition: str, through: int) -> None:
        """Everything of the partition through ``through`` went through ingest again: ``contiguous`` moves there.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        with contextlib.suppress(ConflictError):  # already past it
            self._update(
                source,
                partition,
                "SET contiguous = :t",
                "attribute_not_exists(contiguous) OR contiguous < :t",
                {},
                {":t": num_attr(through)},
            )

    def _update(
        self,
        source: str,
        partition: str,
        expression: str,
        condition: str,
        names: Mapping[str, str],
        values: Mapping[str, Any],
    ) -> None:
        args: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"pk": str_attr(watermark_pk(source)), "sk": str_attr(f"P#{partition}")},
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": dict(values),
        }
        if names:
            args["ExpressionAttributeNames"] = dict(names)
        self._call("update_item", **args)

    def watermarks(self, source: str) -> list[Watermark]:
        """The watermarks of one source, by partition."""
        marks = []
        for raw in self._query(
            KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": str_attr(watermark_pk(source)), ":s": str_attr("P#")},
        ):
            item = plain_item(raw)
            # A gap closed before anything of the partition was recorded has only its contiguous mark.
            position = item["position"] if "position" in item else item["contiguous"]
            marks.append(
                Watermark(
                    source=source,
                    partition=str(item["sk"]).removeprefix("P#"),
                    position=int(position),
                    message=str(item.get("message", "")),
                    at=parse_timestamp(str(item["at"])) if item.get("at") else None,
                    contiguous=int(item["contiguous"]) if "contiguous" in item else None,
                )
            )
        return marks


__all__ = ["DynamoDbWatermarkStore", "watermark_pk"]
