"""The quarantine aggregate: messages refused by ingest, kept once per message identity with the reason."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from assetflow.adapters.dynamodb.keys import partition_key, sort_key
from assetflow.adapters.dynamodb.table import (
    DEDUPE_TTL,
    DynamoDbTable,
    epoch_seconds,
    num_attr,
    plain_item,
    str_attr,
)
from assetflow.core.events import format_timestamp
from assetflow.core.jsonvalue import thaw_json
from assetflow.ports import Page


class DynamoDbQuarantineStore(DynamoDbTable):
    """Quarantined messages under ``QUARANTINE``, newest last; a dedupe record per message identity."""

    def quarantine(
        self,
        *,
        watcher: str,
        reason: str,
        body: str,
        facts: Mapping[str, Any],
        identity: str,
        now: datetime,
        lasting: bool = False,
    ) -> bool:
        """Keep a rejected message with its reason (once per message identity); returns True when new.

        The dedupe record expires after ``DEDUPE_TTL``, or never with ``lasting``.
        """
        dedupe = {"pk": str_attr(partition_key("DEDUPE#quarantine#", identity)), "sk": str_attr("#DEDUPE")}
        if not lasting:
            dedupe["expires_at"] = num_attr(epoch_seconds(now + DEDUPE_TTL))
        item = {
            "pk": str_attr("QUARANTINE"),
            "sk": str_attr(sort_key(f"{format_timestamp(now)}#", identity)),
            "watcher": str_attr(watcher),
            "reason": str_attr(reason[:2000]),
            "body": str_attr(body),
            "facts": str_attr(json.dumps(thaw_json(facts), sort_keys=True, default=str)),
            "identity": str_attr(identity),
        }
        return self._write_once(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": dedupe,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {"Put": {"TableName": self.table, "Item": item}},
            ]
        )

    def list_quarantine(self, *, limit: int = 100, token: str | None = None) -> Page:
        """Rejected messages, newest first."""
        items, nxt = self._page(
            limit,
            token,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": str_attr("QUARANTINE")},
            ScanIndexForward=False,
        )
        rows = []
        for raw in items:
            item = plain_item(raw)
            rows.append(
                {
                    "at": item["sk"].split("#", 1)[0],
                    "watcher": item["watcher"],
                    "reason": item["reason"],
                    "body": item["body"],
                    "facts": json.loads(item["facts"]),
                    "identity": item["identity"],
                }
            )
        return Page(rows, nxt)
