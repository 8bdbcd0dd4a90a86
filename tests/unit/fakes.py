"""What the unit tests' fake stores share: the batched event write, in terms of a fake's own ``put_event``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from assetflow.core.errors import AssetflowError
from assetflow.core.events import AssetEvent, format_timestamp
from assetflow.ports import Written


def own_key(event: AssetEvent) -> str:
    """What a keyed event's item is found by, in a fake: its asset, time and id (its key in the table)."""
    return f"{event.asset}@{format_timestamp(event.timestamp)}#{event.id}"


def put_events_one_by_one(
    store: Any,
    events: Sequence[tuple[AssetEvent, str | None]],
    *,
    now: datetime,
    lanes: Sequence[str] | None = None,
    lasting: bool = False,
    blind: bool = False,
) -> list[Written | AssetflowError]:
    """``EventStore.put_events`` over a fake's ``put_event``: an error answers its event, and blocks the rest
    of its lane, as the DynamoDB store does; ``blind`` writes answer every event as new, as its unconditional
    puts do."""
    answers: list[Written | AssetflowError] = []
    blocked: set[str] = set()
    for n, (event, dedupe_key) in enumerate(events):
        lane = lanes[n] if lanes is not None else None
        if lane is not None and lane in blocked:
            answers.append(AssetflowError("an earlier event of its lane was not written"))
            continue
        try:
            more = {"lasting": True} if lasting else {}
            stored, created = store.put_event(event, dedupe_key=dedupe_key, now=now, **more)
        except AssetflowError as exc:
            answers.append(exc)
            if lane is not None:
                blocked.add(lane)
            continue
        answers.append(Written(stored, created or blind))
    return answers
