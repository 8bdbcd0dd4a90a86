"""Asset events as a job sees them: the triggering events and those read through ``inlet_events``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from assetflow_job import contract


def parse_timestamp(text: str) -> datetime:
    """Parse a document's timestamp into an aware UTC datetime (one without an offset is taken as UTC).

    Raises:
        ValueError: when ``text`` is not ISO-8601.

    """
    return contract.parse_timestamp(text, naive_is_utc=True)


def format_timestamp(value: datetime) -> str:
    """Format a datetime the documents' way: UTC, microseconds, ``Z`` (a naive one is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return contract.format_timestamp(value)


@dataclass(frozen=True)
class AssetEvent:
    """One event of an asset: what changed (``extra``), when, and what produced it (``source``)."""

    asset: str
    id: str
    timestamp: datetime
    extra: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    partition_key: str | None = None

    @property
    def payload(self) -> Any:
        """The message payload of a watcher's event (``extra["payload"]``), or None."""
        return self.extra.get("payload")

    @property
    def sort_key(self) -> tuple[datetime, str]:
        """The order events are listed in: by timestamp, then id."""
        return (self.timestamp, self.id)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, asset: str | None = None) -> AssetEvent:
        """Build an event from its JSON shape; ``asset`` fills in a missing ``asset`` field.

        Raises:
            ValueError: when a required field is missing or malformed.

        """
        if not isinstance(data, Mapping):
            raise ValueError(f"an asset event must be a JSON object, got {type(data).__name__}")
        uri = data.get("asset", asset)
        event_id = data.get("id")
        stamp = data.get("timestamp")
        if not isinstance(uri, str) or not uri:
            raise ValueError("an asset event needs an 'asset' URI")
        if not isinstance(event_id, str) or not event_id:
            raise ValueError(f"an event of {uri!r} needs a string 'id'")
        if not isinstance(stamp, str):
            raise ValueError(f"event {event_id!r} of {uri!r} needs a string 'timestamp'")
        extra = data.get("extra") or {}
        source = data.get("source") or {}
        partition_key = data.get("partition_key")
        if not isinstance(extra, Mapping) or not isinstance(source, Mapping):
            raise ValueError(f"event {event_id!r} of {uri!r}: 'extra' and 'source' must be objects")
        if partition_key is not None and not isinstance(partition_key, str):
            raise ValueError(f"event {event_id!r} of {uri!r}: 'partition_key' must be a string or null")
        return cls(
            asset=uri,
            id=event_id,
            timestamp=parse_timestamp(stamp),
            extra=dict(extra),
            source=dict(source),
            partition_key=partition_key,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the event's JSON shape."""
        return {
            "asset": self.asset,
            "id": self.id,
            "timestamp": format_timestamp(self.timestamp),
            "extra": self.extra,
            "source": self.source,
            "partition_key": self.partition_key,
        }
