"""Ingest: a translated message (an event, or a quarantine decision) stored once per message identity."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from assetflow.ports import Accepted, EventStore, ExtrasStore, Outcome, QuarantineStore


class IngestStore(EventStore, QuarantineStore, Protocol):
    """What ingest writes: events and quarantine records."""


class Ingest:
    """Stores what ingest translated from a message (SQS, Kafka, ...), once per message identity."""

    def __init__(self, *, store: IngestStore, extras: ExtrasStore | None = None) -> None:
        self.store = store
        self.extras = extras

    def store_outcome(self, outcome: Outcome, *, now: datetime) -> bool:
        """Write an outcome: the event, or the quarantine record, once per message identity.

        An extra that goes by reference is written to the extras store first, so that a stored event never
        references a missing object; a redelivery of a stored message writes nothing (at worst, a crash
        between the two writes leaves an object that no event references).

        Returns whether this call wrote it (False for a redelivery, including one after a crash between the
        write and the acknowledgement).

        Raises:
            StoreUnavailableError: the store (or the extras store) is throttled or unavailable; fail the
                message so it is retried.
            ConflictError: a concurrent writer of the same message left the store undecided; retry.
            ValueError: the outcome detaches its extra but there is no extras store.
        """
        if not isinstance(outcome, Accepted):
            return self.store.quarantine(
                watcher=outcome.watcher,
                reason=outcome.reason,
                body=outcome.body,
                facts=outcome.facts,
                identity=outcome.identity,
                now=now,
            )
        if outcome.detached is not None:
            if self.extras is None:
                raise ValueError(
                    "this outcome's extra goes by reference: give the extras store it was placed by"
                )
            last = outcome.also[-1] if outcome.also else None
            done = outcome.identity if last is None else outcome.also_identity(last)
            if self.store.find_dedupe(done) is not None:
                return False
            self.extras.write(outcome.detached)
        _, created = self.store.put_event(outcome.event, dedupe_key=outcome.identity, now=now)
        # The watcher's other assets, in order: a redelivery after a crash writes what is missing.
        for event in outcome.also:
            self.store.put_event(event, dedupe_key=outcome.also_identity(event), now=now)
        return created


__all__ = ["Ingest", "IngestStore"]
