"""The watermarks aggregate: per source partition, the newest position recorded (``WATERMARK#<source>``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from assetflow.adapters.dynamodb.keys import partition_key
from assetflow.adapters.dynamodb.table import DynamoDbTable, num_attr, plain_item, str_attr
from assetflow.core.errors import ConflictError
from assetflow.core.events import format_timestamp, parse_timestamp
from assetflow.core.watermarks import Watermark, newest


def watermark_pk(source: str) -> str:
    """The partition of a source's watermarks (an SQS queue ARN, a Kafka cluster and topic)."""
    return partition_key("WATERMARK#", source)


class DynamoDbWatermarkStore(DynamoDbTable):
    """One item per source partition (``P#<partition>``), moved forward only (a conditional update each)."""

    def advance_watermarks(self, marks: Sequence[Watermark], *, now: datetime) -> None:
        """Move each source partition's watermark forward to its newest mark; an older mark changes nothing.

        One conditional update per source partition of the batch (not per message).

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        for mark in newest(list(marks)):
            try:
                self._call(
                    "update_item",
                    TableName=self.table,
                    Key={"pk": str_attr(watermark_pk(mark.source)), "sk": str_attr(f"P#{mark.partition}")},
                    UpdateExpression="SET #p = :p, message = :m, #s = :s, #a = :a",
                    ConditionExpression="attribute_not_exists(#p) OR #p < :p",
                    ExpressionAttributeNames={"#p": "position", "#s": "source", "#a": "at"},
                    ExpressionAttributeValues={
                        ":p": num_attr(mark.position),
                        ":m": str_attr(mark.message[:1024]),
                        ":s": str_attr(mark.source),
                        ":a": str_attr(format_timestamp(now)),
                    },
                )
            except ConflictError:
                continue  # a newer message was recorded first: the watermark is past this one

    def watermarks(self, source: str) -> list[Watermark]:
        """The watermarks of one source, by partition."""
        marks = []
        for raw in self._query(
            KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": str_attr(watermark_pk(source)), ":s": str_attr("P#")},
        ):
            item = plain_item(raw)
            marks.append(
                Watermark(
                    source=str(item["source"]),
                    partition=str(item["sk"]).removeprefix("P#"),
                    position=int(item["position"]),
                    message=str(item.get("message", "")),
                    at=parse_timestamp(str(item["at"])) if item.get("at") else None,
                )
            )
        return marks


__all__ = ["DynamoDbWatermarkStore", "watermark_pk"]
