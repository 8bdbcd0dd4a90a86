"""Listener events on the stack's EventBridge bus (asset created, alias created, asset changed, emitted)."""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.jsonvalue import thaw_json

logger = logging.getLogger(__name__)

SOURCE = "assetflow"
#: Every listener event type (DESIGN §1's listeners).
DETAIL_TYPES = ("AssetCreated", "AssetAliasCreated", "AssetChanged", "AssetEventEmitted", "AssetLate")
#: PutEvents takes at most this many entries a call.
PUT_EVENTS_MAX = 10


def parse_detail_types(text: str | None) -> frozenset[str] | None:
    """The ``LISTENER_EVENTS`` setting: a comma-separated list of detail types ("" for none, "*" for all).

    None (the setting absent) means every type.

    Raises:
        ValueError: a name that is not a listener event type.
    """
    if text is None or text.strip() == "*":
        return None
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    unknown = sorted(names - set(DETAIL_TYPES))
    if unknown:
        raise ValueError(f"unknown listener event types {unknown}; known: {', '.join(DETAIL_TYPES)}")
    return names


class EventBridgeBus:
    """Publishes listener events; a failure is logged, never raised, so scheduling never waits on listeners.

    EventBridge bills every entry: only the ``detail_types`` the environment subscribes to are sent (None:
    all), ten entries a call.
    """

    def __init__(self, client: Any, bus_name: str, *, detail_types: Collection[str] | None = None) -> None:
        self._events = client
        self.bus_name = bus_name
        self.detail_types = None if detail_types is None else frozenset(detail_types)

    def wants(self, detail_type: str) -> bool:
        """Whether this detail type is published."""
        return self.detail_types is None or detail_type in self.detail_types

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Put one event with ``source = "assetflow"`` and the given detail type."""
        self.publish_many([(detail_type, detail)])

    def publish_many(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Put events, ten a call, in order; those of unsubscribed types are dropped."""
        entries = [
            {
                "Source": SOURCE,
                "DetailType": detail_type,
                "Detail": json.dumps(thaw_json(detail), sort_keys=True, default=str),
                "EventBusName": self.bus_name,
            }
            for detail_type, detail in events
            if self.wants(detail_type)
        ]
        for start in range(0, len(entries), PUT_EVENTS_MAX):
            chunk = entries[start : start + PUT_EVENTS_MAX]
            types = sorted({e["DetailType"] for e in chunk})
            try:
                answer = self._events.put_events(Entries=chunk)
            except (BotoCoreError, ClientError) as exc:
                logger.warning(
                    "listener events not published",
                    extra={"detail_types": types, "entries": len(chunk), "error": str(exc)},
                )
                continue
            if answer.get("FailedEntryCount"):
                logger.warning(
                    "listener events rejected",
                    extra={
                        "detail_types": types,
                        "failed": answer.get("FailedEntryCount"),
                        "entries": [e for e in answer.get("Entries") or [] if e.get("ErrorCode")],
                    },
                )
