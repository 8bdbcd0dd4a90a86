"""Ingest: a translated message (an event, or a quarantine decision) stored once per message identity."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from assetflow.core.errors import AssetflowError
from assetflow.ports import Accepted, EventStore, ExtrasStore, Outcome, QuarantineStore


class BlockedError(AssetflowError):
    """A message not written because an earlier one of its ordered batch could not be (it comes back too)."""


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
                lasting=outcome.lasting_identity,
            )
        (answer,) = self.store_outcomes([outcome], now=now)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def store_outcomes(
        self, outcomes: Sequence[Outcome], *, now: datetime, lanes: Sequence[str] | None = None
    ) -> list[bool | Exception]:
        """Write a batch of outcomes: the events in batched transactions, quarantine records one by one.

        One answer per outcome, in order: whether it was written (False for a redelivery), or the error that
        kept it from being written (throttled, contended, the extras store failing: fail that message so that
        it comes back). An extra that goes by reference is written to the extras store before its event, so
        that a stored event never references a missing object (only such a message is looked up
        first). With ``lanes`` (one per outcome: a FIFO queue, a Kafka partition), nothing
        after an outcome that cannot be written is written in its lane, and what follows it there is
        answered with ``BlockedError``, so that it comes back after it.
        """
        answers: list[bool | Exception | None] = [None] * len(outcomes)
        failed_lanes: set[str] = set()
        accepted: list[tuple[int, Accepted]] = []
        for n, outcome in enumerate(outcomes):
            if lanes is not None and lanes[n] in failed_lanes:
                answers[n] = BlockedError("an earlier message of its lane could not be written")
                continue
            prepared = self._prepare(outcome, now)
            if isinstance(prepared, Accepted):
                accepted.append((n, prepared))
                continue
            answers[n] = prepared
            if lanes is not None and isinstance(prepared, Exception):
                failed_lanes.add(lanes[n])
        # A keyed message's first delivery goes out in batched puts; the rest in conditional transactions.
        groups: dict[bool, list[tuple[int, Accepted]]] = {True: [], False: []}
        for n, o in accepted:
            groups[lanes is None and o.keyed and o.first_delivery].append((n, o))
        for blind in (True, False):
            if groups[blind]:
                self._write(groups[blind], answers, outcomes, now=now, lanes=lanes, blind=blind)
        if lanes is not None:
            # What follows a failure in its lane comes back with it (written or not: writes are idempotent).
            seen_failure: set[str] = set()
            for n, answer in enumerate(answers):
                if lanes[n] in seen_failure and not isinstance(answer, Exception):
                    answers[n] = BlockedError("an earlier message of its lane could not be written")
                if isinstance(answers[n], Exception):
                    seen_failure.add(lanes[n])
        return [a if a is not None else BlockedError("not written") for a in answers]

    def _write(
        self,
        accepted: Sequence[tuple[int, Accepted]],
        answers: list[bool | Exception | None],
        outcomes: Sequence[Outcome],
        *,
        now: datetime,
        lanes: Sequence[str] | None,
        blind: bool,
    ) -> None:
        """Write the events of ``accepted`` (positions in ``outcomes``) and answer each message."""
        # A message's event, then its events of the watcher's other assets (one source feeding several),
        # each under its own identity: a redelivery after a partial write writes what is missing. A keyed
        # message's items are their own dedupe records.
        rows = [
            (n, event, identity)
            for n, o in accepted
            for event, identity in [(o.event, o.identity), *((e, o.also_identity(e)) for e in o.also)]
        ]
        keyed = {n for n, o in accepted if o.keyed}
        written = self.store.put_events(
            [(event, None if n in keyed else identity) for n, event, identity in rows],
            now=now,
            lanes=None if lanes is None else [lanes[n] for n, _, _ in rows],
            # One source's batch: all lasting or none (a mixed one keeps every record, the safe side).
            lasting=any(o.lasting_identity for _, o in accepted),
            blind=blind,
        )
        for (n, _, identity), result in zip(rows, written, strict=True):
            if isinstance(result, Exception):
                answers[n] = result
            elif identity == outcomes[n].identity and answers[n] is None:
                answers[n] = result.created

    def _prepare(self, outcome: Outcome, now: datetime) -> Accepted | bool | Exception:
        """What must happen before an event is written (its detached extra), or a quarantine record's write."""
        if isinstance(outcome, Accepted):
            if outcome.detached is None:
                return outcome
            if self.extras is None:
                return ValueError(
                    "this outcome's extra goes by reference: give the extras store it was placed by"
                )
            try:
                # Only a message over the inline limit reads first: its redelivery would write another
                # object (its facts differ), which no event would reference. Its last event is written last.
                # A keyed message's own item is what to look for, and only on a redelivery.
                last = outcome.also[-1] if outcome.also else None
                if outcome.keyed:
                    if (
                        not outcome.first_delivery
                        and self.store.find_stored(last or outcome.event) is not None
                    ):
                        return False
                else:
                    done = outcome.identity if last is None else outcome.also_identity(last)
                    if self.store.find_dedupe(done) is not None:
                        return False
                self.extras.write(outcome.detached)
            except Exception as exc:
                return exc
            return outcome
        try:
            return self.store.quarantine(
                watcher=outcome.watcher,
                reason=outcome.reason,
                body=outcome.body,
                facts=outcome.facts,
                identity=outcome.identity,
                now=now,
                lasting=outcome.lasting_identity,
            )
        except Exception as exc:
            return exc


__all__ = ["BlockedError", "Ingest", "IngestStore"]
