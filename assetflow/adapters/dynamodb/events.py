"""The events aggregate: asset events written once (deduplicated by a message's identity), assets, aliases."""

from __future__ import annotations

import contextlib
import json
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
from assetflow.core.errors import ConflictError
from assetflow.core.events import AssetEvent, format_timestamp
from assetflow.ports import Page


def dedupe_pk(dedupe_key: str) -> str:
    """The partition of a dedupe record: a message's identity can be longer than a key may be."""
    return partition_key("DEDUPE#", dedupe_key)


class DynamoDbEventStore(DynamoDbTable):
    """Asset events under ``ASSET#<uri>`` sorted by (timestamp, id), assets' summaries, alias resolutions."""

    @staticmethod
    def event_key(event: AssetEvent) -> dict[str, Any]:
        """The key of an event's item: the asset's partition, sorted by (timestamp, id)."""
        return {
            "pk": str_attr(f"ASSET#{event.asset}"),
            "sk": str_attr(f"EVENT#{format_timestamp(event.timestamp)}#{event.id}"),
        }

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ) -> tuple[AssetEvent, bool]:
        """Store an event once; with ``dedupe_key`` (a message's identity) a redelivery stores nothing.

        The dedupe record expires after ``DEDUPE_TTL``, or never with ``lasting`` (a source that can replay any
        old message, such as a Kafka topic read again from an early offset).

        Returns the stored event (the original one on a redelivery) and whether it was new.

        Raises:
            StoreUnavailableError: throttled; the caller should fail the message so it is retried.
        """
        item = {
            **self.event_key(event),
            "event": str_attr(json.dumps(event.to_json(), sort_keys=True)),
            "event_id": str_attr(event.id),
        }
        run_id = event.source.get("run_id")
        if event.source.get("type") == "run" and isinstance(run_id, str):
            item["gsi1pk"] = str_attr(f"PRODUCED#{run_id}")
            item["gsi1sk"] = str_attr(f"{format_timestamp(event.timestamp)}#{event.id}")
        writes: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        ]
        if dedupe_key is not None:
            moment = now or event.timestamp
            dedupe = {
                "pk": str_attr(dedupe_pk(dedupe_key)),
                "sk": str_attr("#DEDUPE"),
                "event": item["event"],
            }
            if not lasting:
                dedupe["expires_at"] = num_attr(epoch_seconds(moment + DEDUPE_TTL))
            writes.insert(
                0,
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": dedupe,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            )
        try:
            self._call("transact_write_items", TransactItems=writes)
        except ConflictError:
            previous = self.find_dedupe(dedupe_key) if dedupe_key else None
            if previous is not None:
                return previous, False
            if self._call(
                "get_item", TableName=self.table, Key=self.event_key(event), ConsistentRead=True
            ).get("Item"):
                return event, False
            raise
        return event, True

    def find_dedupe(self, dedupe_key: str) -> AssetEvent | None:
        """The event a message (by its identity) already produced, if any."""
        found = self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": str_attr(dedupe_pk(dedupe_key)), "sk": str_attr("#DEDUPE")},
            ConsistentRead=True,
        ).get("Item")
        return AssetEvent.from_json(json.loads(found["event"]["S"])) if found else None

    def record_asset(self, event: AssetEvent, *, name: str | None = None) -> bool:
        """Count an event in its asset's summary, once; returns True when this event created the asset.

        Raises:
            StoreUnavailableError: throttled.
        """
        ts = format_timestamp(event.timestamp)
        meta_key = {"pk": str_attr(f"ASSET#{event.asset}"), "sk": str_attr("#META")}
        try:
            self._call(
                "put_item",
                TableName=self.table,
                Item={
                    **meta_key,
                    "uri": str_attr(event.asset),
                    "asset_name": str_attr(name or event.asset),
                    "created_at": str_attr(ts),
                    "last_event_at": str_attr(""),
                    "event_count": num_attr(0),
                    "gsi1pk": str_attr("ASSETS"),
                    # An index's sort key holds 1,024 bytes, a URI 1,500 characters: long ones are cut and hashed.
                    "gsi1sk": str_attr(sort_key("", event.asset)),
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
            created = True
        except ConflictError:
            created = False
        counted = self._write_once(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": str_attr(f"ASSET#{event.asset}"),
                            "sk": str_attr(f"COUNTED#{event.id}"),
                            "expires_at": num_attr(epoch_seconds(event.timestamp + DEDUPE_TTL)),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": meta_key,
                        "UpdateExpression": "ADD event_count :one",
                        "ExpressionAttributeValues": {":one": num_attr(1)},
                    }
                },
            ]
        )
        if not counted:
            return created
        # The newest time only moves forward, whatever order events are counted in.
        with contextlib.suppress(ConflictError):
            self._call(
                "update_item",
                TableName=self.table,
                Key=meta_key,
                UpdateExpression="SET last_event_at = :ts, last_event_id = :id",
                ConditionExpression="last_event_at < :ts",
                ExpressionAttributeValues={":ts": str_attr(ts), ":id": str_attr(event.id)},
            )
        return created

    def list_assets(self, *, limit: int = 100, token: str | None = None) -> Page:
        """Assets with their last event time and event count, by URI."""
        items, nxt = self._page(
            limit,
            token,
            "gsi1",
            KeyConditionExpression="gsi1pk = :p",
            ExpressionAttributeValues={":p": str_attr("ASSETS")},
        )
        rows = []
        for raw in items:
            item = plain_item(raw)
            rows.append(
                {
                    "uri": item["uri"],
                    "name": item.get("asset_name", item["uri"]),
                    "created_at": item.get("created_at"),
                    "last_event_at": item.get("last_event_at") or None,
                    "event_count": int(item.get("event_count", 0)),
                }
            )
        return Page(rows, nxt)

    def list_events(
        self, uri: str, *, limit: int = 100, token: str | None = None, newest_first: bool = True
    ) -> Page:
        """An asset's events, newest first by default (paged)."""
        items, nxt = self._page(
            limit,
            token,
            KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
            ExpressionAttributeValues={":p": str_attr(f"ASSET#{uri}"), ":e": str_attr("EVENT#")},
            ScanIndexForward=not newest_first,
        )
        return Page([json.loads(i["event"]["S"]) for i in items], nxt)

    def events_produced_by(self, run_id: str) -> list[dict[str, Any]]:
        """The events a run's outlets produced, oldest first."""
        return [
            json.loads(i["event"]["S"])
            for i in self._query(
                "gsi1",
                KeyConditionExpression="gsi1pk = :p",
                ExpressionAttributeValues={":p": str_attr(f"PRODUCED#{run_id}")},
            )
        ]

    def add_alias_resolution(self, alias: str, uri: str, *, now: datetime) -> bool:
        """Record that ``alias`` resolves to ``uri``; returns True the first time."""
        created_at = str_attr(format_timestamp(now))
        return self._write_once(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": str_attr(f"ASSET#{uri}"),
                            "sk": str_attr(f"ALIAS#{alias}"),
                            "created_at": created_at,
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": str_attr(f"ALIAS#{alias}"),
                            "sk": str_attr(sort_key("ASSET#", uri)),
                            "uri": str_attr(uri),
                            "created_at": created_at,
                        },
                    }
                },
            ]
        )

    def aliases_of(self, uri: str) -> list[str]:
        """The aliases an asset resolves from."""
        return [
            i["sk"]["S"].removeprefix("ALIAS#")
            for i in self._query(
                KeyConditionExpression="pk = :p AND begins_with(sk, :a)",
                ExpressionAttributeValues={":p": str_attr(f"ASSET#{uri}"), ":a": str_attr("ALIAS#")},
            )
        ]

    def alias_assets(self, alias: str) -> list[str]:
        """The assets an alias resolves to."""
        return [
            i["uri"]["S"] if "uri" in i else i["sk"]["S"].removeprefix("ASSET#")
            for i in self._query(
                KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": str_attr(f"ALIAS#{alias}")}
            )
        ]
