"""Listener events on the stack's EventBridge bus (asset created, alias created, asset changed, emitted)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.jsonvalue import thaw_json

logger = logging.getLogger(__name__)

SOURCE = "assetflow"


class EventBridgeBus:
    """Publishes listener events; a failure is logged, never raised, so scheduling never waits on listeners."""

    def __init__(self, client: Any, bus_name: str) -> None:
        self._events = client
        self.bus_name = bus_name

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Put one event with ``source = "assetflow"`` and the given detail type."""
        entry = {
            "Source": SOURCE,
            "DetailType": detail_type,
            "Detail": json.dumps(thaw_json(detail), sort_keys=True, default=str),
            "EventBusName": self.bus_name,
        }
        try:
            answer = self._events.put_events(Entries=[entry])
        except (BotoCoreError, ClientError) as exc:
            logger.warning(
                "listener event not published", extra={"detail_type": detail_type, "error": str(exc)}
            )
            return
        if answer.get("FailedEntryCount"):
            logger.warning(
                "listener event rejected",
                extra={"detail_type": detail_type, "entries": answer.get("Entries")},
            )
