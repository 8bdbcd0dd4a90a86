"""The expectations aggregate under ``EXPECT#<uri>``: missed deadlines and operators' releases of held events.

Each is recorded once (a conditional put): a missed deadline is announced once, a release is audited once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from assetflow.adapters.dynamodb.keys import partition_key, sort_key
from assetflow.adapters.dynamodb.table import DynamoDbTable, epoch_seconds, num_attr, plain_item, str_attr
from assetflow.core.errors import ConflictError
from assetflow.core.events import AssetEvent, format_timestamp

#: How long a missed deadline's record is kept (operators read the newest; the rest expire).
LATE_MARK_TTL = timedelta(days=90)


def expect_pk(uri: str) -> str:
    """The partition of an asset's expectation records."""
    return partition_key("EXPECT#", uri)


class DynamoDbExpectationStore(DynamoDbTable):
    """Missed deadlines (``LATE#``, the ``LateMarks`` port) and releases (``RELEASED#``, the ``Releases`` port)."""

    def mark_late(self, uri: str, deadline: datetime, key: str | None, *, now: datetime) -> bool:
        """Record that ``uri`` missed ``deadline`` (for ``key``); True the first time (one conditional put).

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        item: dict[str, Any] = {
            "pk": str_attr(expect_pk(uri)),
            "sk": str_attr(sort_key("LATE#", f"{format_timestamp(deadline)}#{key or ''}")),
            "uri": str_attr(uri),
            "deadline": str_attr(format_timestamp(deadline)),
            "at": str_attr(format_timestamp(now)),
            "expires_at": num_attr(epoch_seconds(now + LATE_MARK_TTL)),
        }
        if key is not None:
            item["partition_key"] = str_attr(key)
        try:
            self._call(
                "put_item", TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        except ConflictError:
            return False
        return True

    def late_marks(self, uri: str, *, limit: int = 20) -> list[dict[str, Any]]:
        """The newest recorded misses of ``uri`` (``deadline``, ``partition_key``, ``at``), newest first."""
        answer = self._call(
            "query",
            TableName=self.table,
            KeyConditionExpression="pk = :p AND begins_with(sk, :l)",
            ExpressionAttributeValues={":p": str_attr(expect_pk(uri)), ":l": str_attr("LATE#")},
            ScanIndexForward=False,
            Limit=limit,
        )
        marks = []
        for raw in answer.get("Items", []):
            item = plain_item(raw)
            marks.append(
                {"deadline": item["deadline"], "partition_key": item.get("partition_key"), "at": item["at"]}
            )
        return marks

    def mark_held(self, event: AssetEvent) -> None:
        """Keep a held outlet event findable by its id alone (``HELD#<event id>``, the event itself inside).

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        self._call(
            "put_item",
            TableName=self.table,
            Item={
                "pk": str_attr(partition_key("HELD#", event.id)),
                "sk": str_attr("#HELD"),
                "event": str_attr(json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"))),
            },
        )

    def held_event(self, event_id: str) -> AssetEvent | None:
        """The held outlet event with this id, or None."""
        item = self._get(partition_key("HELD#", event_id), "#HELD")
        return None if item is None else AssetEvent.from_json(json.loads(str(item["event"])))

    def mark_released(self, uri: str, event_id: str, *, by: str, now: datetime) -> bool:
        """Record that ``event_id`` of ``uri`` was released (kept for good: the event is); True the first time.

        Raises:
            StoreUnavailableError: throttled; retry.
        """
        try:
            self._call(
                "put_item",
                TableName=self.table,
                Item={
                    "pk": str_attr(expect_pk(uri)),
                    "sk": str_attr(f"RELEASED#{event_id}"),
                    "event_id": str_attr(event_id),
                    "by": str_attr(by[:2048]),
                    "at": str_attr(format_timestamp(now)),
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ConflictError:
            return False
        return True

    def released_ids(self, uri: str, event_ids: Sequence[str]) -> set[str]:
        """Which of these events of ``uri`` were released (one batched read)."""
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return set()
        keys = [{"pk": str_attr(expect_pk(uri)), "sk": str_attr(f"RELEASED#{i}")} for i in ids]
        found = self._batch_get(keys)
        return {i for i in ids if (expect_pk(uri), f"RELEASED#{i}") in found}


__all__ = ["LATE_MARK_TTL", "DynamoDbExpectationStore", "expect_pk"]
