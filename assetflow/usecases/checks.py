"""Blocking checks: releasing an event that a failed blocking check holds, and the ``check_failed`` health fact.

A job reports checks on its outlets (``outlet_events[a].check("not_empty", passed=False, blocking=True)``); the
run's outlet event carries them in ``source.checks``. One with a failed blocking check is recorded and listed,
but routed to no queue (``core.entries.held_by_check``): it satisfies no downstream condition. Either a later
event of the asset passes (it counts as usual, and the asset is healthy again), or an operator releases the
held one: ``assetflow events release EVENT_ID`` / ``POST /assets/events/{id}/release``. The release is recorded
once (who, when), and the event, marked released, goes through the evaluator as a new event would: its queue
has never seen it, so it is queued once, and a repeated release queues nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from assetflow.core.entries import failed_blocking, held_by_check, released
from assetflow.core.errors import NotFoundError
from assetflow.core.events import AssetEvent
from assetflow.ports import EventStore, Releases
from assetflow.usecases.requests import RequestError

logger = logging.getLogger(__name__)


@dataclass
class Release:
    """What releasing a held event did."""

    event: AssetEvent
    #: This call recorded the release (False: it was released before; routed again, queued nowhere twice).
    released: bool
    queued_for: list[str]
    runs: list[str]

    def to_json(self) -> dict[str, Any]:
        """``{"event", "released", "queued_for", "runs"}``."""
        return {
            "event": self.event.to_json(),
            "released": self.released,
            "queued_for": self.queued_for,
            "runs": self.runs,
        }


def find_held(releases: Releases, event_id: object) -> AssetEvent:
    """The event with this id that a failed blocking check holds (run state keeps each one findable by id).

    Raises:
        RequestError: the id is not a short string.
        NotFoundError: no held event has this id.
    """
    if not isinstance(event_id, str) or not 1 <= len(event_id) <= 128:
        raise RequestError("an event id is a string of 1 to 128 characters")
    event = releases.held_event(event_id)
    if event is None or event.id != event_id:
        raise NotFoundError(
            f"no event {event_id!r} held by a failed blocking check (only runs' outlet events carry checks)"
        )
    return event


def release_event(
    *,
    releases: Releases,
    route: Callable[[Sequence[AssetEvent]], Any],
    event_id: object,
    principal: str,
    now: datetime,
) -> Release:
    """Let an event held by a failed blocking check count again: record who released it, then route it.

    Raises:
        RequestError: a malformed id.
        NotFoundError: no event with this id is held by a failed blocking check.
        StoreUnavailableError, ConflictError: retry (the release is recorded once, the event queued once).
    """
    event = find_held(releases, event_id)
    first = releases.mark_released(event.asset, event.id, by=principal, now=now)
    copy = released(event, by=principal, at=now)
    evaluation = route([copy])
    failed = getattr(evaluation, "failed", {})
    if failed:
        raise next(iter(failed.values()))
    result = Release(
        copy,
        first,
        sorted({p for p, _key in getattr(evaluation, "routed", [])}),
        [r.run_id for r in getattr(evaluation, "runs", [])],
    )
    logger.info(
        "held event released",
        extra={
            "event_id": event.id,
            "asset": event.asset,
            "checks": failed_blocking(event),
            "by": principal,
            "first": first,
            "queued_for": result.queued_for,
        },
    )
    return result


def newest_check_failed(store: EventStore, releases: Releases, uri: str) -> bool:
    """Whether the asset's newest event is held by a failed blocking check that no operator released."""
    page = store.list_events(uri, limit=1).items
    if not page:
        return False
    newest = AssetEvent.from_json(page[0])
    if not held_by_check(newest):
        return False
    return newest.id not in releases.released_ids(uri, [newest.id])


__all__ = [
    "Release",
    "find_held",
    "newest_check_failed",
    "release_event",
]
