"""The queues aggregate: a pipeline's queue head, its entries per generation, and the transitions on them.

A transition (the core's ``advance``) is applied as one transaction, conditional on the head's version and on
the pipeline's active-run counter; it also creates the runs it makes and lists them as waiting for submission
(their items are the runs aggregate's).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from assetflow.adapters.dynamodb.control import consumed_version_puts
from assetflow.adapters.dynamodb.keys import utf8_size
from assetflow.adapters.dynamodb.runs import pending_adds, run_key, run_put
from assetflow.adapters.dynamodb.table import (
    DEDUPE_TTL,
    SEEN_SET_PREFIX,
    TRANSACTION_MAX,
    DynamoDbTable,
    active_key,
    cancellation_reasons,
    entry_sk,
    epoch_seconds,
    generation_prefix,
    num_attr,
    paused_condition,
    plain_item,
    plain_value,
    queue_pk,
    seen_set_ids,
    seen_set_sks,
    str_attr,
)
from assetflow.core.entries import entry_kind
from assetflow.core.errors import ConflictError
from assetflow.core.events import AssetEvent, format_timestamp, parse_timestamp
from assetflow.core.pipeline import Pipeline
from assetflow.core.queues import MAX_APPEND, QueueHead, QueueSummary, StoredQueue
from assetflow.core.scheduler import (
    QueueEntry,
    QueueState,
    Transition,
    event_run_id,
    takes_events_alone,
)
from assetflow.ports import QueueSnapshot, TransitionTooLargeError


def _consumed_at_once(t: Transition) -> bool:
    """Whether a transition's runs take exactly the real events it adds, from an empty queue, leaving none.

    Its runs can then reference their events' items, as a ``batch=False`` run does, and no queue entry is
    written (two write units per event saved, in a burst nearly every event's case). Synthetic entries
    (failures, late arrivals) have no item of their own: a transition with one keeps the generation trigger.
    """
    return (
        bool(t.runs)
        and not t.before.entries
        and not t.after.entries
        and not t.discarded
        and all(entry_kind(e.event) == "event" for e in t.consumed)
        and {e.event.id for e in t.consumed} == {e.event.id for e in t.added if e.counted}
    )


def _seen_marker(pipeline: Pipeline, key: str, entry: QueueEntry, run_ids: Collection[str]) -> bool:
    """Whether an event taken at once needs its seen marker: not when the run that takes it alone is made.

    That run's id derives from the event (``event_run_id``), its put is conditional on the id being new and
    the queue's snapshot reads it beside the seen markers: the run says the queue took the event, for as long
    as the marker would (two write units a run saved). A re-queued event's run has another id: it keeps its
    marker.
    """
    return not takes_events_alone(pipeline) or event_run_id(pipeline.id, key, entry.event.id) not in run_ids


#: A seen set's item stays within one write unit (1 KB): what DynamoDB counts of it, its keys, its expiry and
#: its ids, is kept under this many bytes (``_mark_writes``).
SEEN_SET_BYTES = 1000


def _seen_set_bytes(partition: str, sk: str, ids: Iterable[str]) -> int:
    """What DynamoDB counts of a seen set's item: attribute names and values (a number at most 21 bytes)."""
    return (
        utf8_size("pk" + partition + "sk" + sk + "ids" + "expires_at") + 21 + sum(utf8_size(i) for i in ids)
    )


def _marker_item(partition: str, event: AssetEvent) -> dict[str, Any]:
    """An event's own seen marker in its queue's partition, kept as long as a redelivery may come."""
    return {
        "pk": str_attr(partition),
        "sk": str_attr(f"SEEN#{event.id}"),
        "expires_at": num_attr(epoch_seconds(event.timestamp + DEDUPE_TTL)),
    }


def _seen_in(
    found: Mapping[tuple[str, str], Any], asked: Mapping[str, Sequence[Mapping[str, Any]]]
) -> frozenset[str]:
    """The events (of ``_seen_keys``'s answer) that any of their keys marks: an item found, or a set holding them."""

    def marks(event_id: str, key: Mapping[str, Any]) -> bool:
        item = found.get((key["pk"]["S"], key["sk"]["S"]))
        if item is None:
            return False
        return not key["sk"]["S"].startswith(SEEN_SET_PREFIX) or event_id in seen_set_ids(item)

    return frozenset(event_id for event_id, keys in asked.items() if any(marks(event_id, k) for k in keys))


def _head_condition(version: int) -> str:
    """A queue head's write condition: still at ``version`` (a queue at 0 may have no head item yet)."""
    return "attribute_not_exists(version) OR version = :before" if version == 0 else "version = :before"


class DynamoDbQueueStore(DynamoDbTable):
    """Pipeline queues: heads under ``PIPELINE#<id>``, entries and seen markers under ``QUEUE#<id>#<key>``."""

    def read_queue_head(self, pipeline: str, key: str = "") -> QueueHead:
        """A queue's head item (one consistent read), without its entries."""
        return self._head(pipeline, key, self._get(f"PIPELINE#{pipeline}", f"QUEUE#{key}") or {})

    def read_queue_snapshots(
        self,
        wanted: Sequence[tuple[str, str, Sequence[AssetEvent]]],
        *,
        run_per_event: Collection[str] = (),
    ) -> dict[tuple[str, str], QueueSnapshot]:
        """Heads, active-run counters and seen marks of many queues, batched.

        One consistent BatchGetItem per 100 keys: a queue's head, its pipeline's counter and, per asked-for event,
        its own seen marker and either, for the pipelines in ``run_per_event`` (``takes_events_alone``), the run
        that takes the event alone, which stands for its mark when it took the event at once (``_seen_marker``),
        or, for the others, the seen sets that may hold it (``seen_set_sks``, shared by the events of a second or of
        a slice of it: ``_mark_writes``).
        """
        keys: list[dict[str, Any]] = []
        asked: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
        for pipeline, key, events in wanted:
            keys.append({"pk": str_attr(f"PIPELINE#{pipeline}"), "sk": str_attr(f"QUEUE#{key}")})
            alone = pipeline in run_per_event
            asked[(pipeline, key)] = seen = self._seen_keys(pipeline, key, events, runs=alone, sets=not alone)
            keys += [k for ks in seen.values() for k in ks]
        pipelines = sorted({p for p, _, _ in wanted})
        keys += [active_key(p) for p in pipelines]
        found = self._batch_get(keys)
        answers: dict[tuple[str, str], QueueSnapshot] = {}
        for pipeline, key, _ in wanted:
            head = found.get((f"PIPELINE#{pipeline}", f"QUEUE#{key}"))
            active = found.get((f"PIPELINE#{pipeline}", "#ACTIVE"))
            answers[(pipeline, key)] = QueueSnapshot(
                head=self._head(pipeline, key, plain_item(head) if head else {}),
                active_runs=int(plain_item(active).get("active", 0)) if active else 0,
                paused=bool(plain_item(active).get("paused", False)) if active else False,
                seen=_seen_in(found, asked[(pipeline, key)]),
            )
        return answers

    @staticmethod
    def _seen_keys(
        pipeline: str, key: str, events: Sequence[AssetEvent], *, runs: bool, sets: bool
    ) -> dict[str, list[dict[str, Any]]]:
        """Per event id, the keys that may say a queue took it.

        Its own seen marker, (``sets``) the seen sets of its time and (``runs``) the run that took it alone.
        """
        partition = queue_pk(pipeline, key)
        return {
            e.id: [
                {"pk": str_attr(partition), "sk": str_attr(f"SEEN#{e.id}")},
                *(
                    {"pk": str_attr(partition), "sk": str_attr(sk)}
                    for sk in (seen_set_sks(e) if sets else ())
                ),
                *([run_key(event_run_id(pipeline, key, e.id))] if runs else []),
            ]
            for e in events
        }

    @staticmethod
    def _head(pipeline: str, key: str, head: dict[str, Any]) -> QueueHead:
        version = int(head.get("version", 0))
        last_tick = head.get("last_tick")
        summary = None
        if "summary" in head and int(head.get("summary_version", -1)) == version:
            summary = QueueSummary.from_json(head["summary"])
        elif version == 0:
            summary = QueueSummary(frozenset(), frozenset(), 0)  # a queue never written holds nothing
        return QueueHead(
            pipeline=pipeline,
            key=key,
            version=version,
            generation=int(head.get("generation", 0)),
            pending_ticks=tuple(parse_timestamp(t) for t in head.get("pending_ticks", [])),
            last_tick=parse_timestamp(last_tick) if last_tick else None,
            summary=summary,
        )

    def read_queue(self, pipeline: str, key: str = "", *, head: QueueHead | None = None) -> StoredQueue:
        """A queue's state: its head (version, generation, ticks) and the entries of its current generation.

        ``head``, when given, is the head just read with ``read_queue_head`` (not read again).
        """
        if head is None:
            head = self.read_queue_head(pipeline, key)
        generation = head.generation
        entries = tuple(
            QueueEntry(
                AssetEvent.from_json(json.loads(i["event"]["S"])),
                tuple(plain_value(i["aliases"])),
                tuple(plain_value(i["wheres"])) if "wheres" in i else (),
                requeued_from=i["requeued_from"]["S"] if "requeued_from" in i else None,
            )
            for i in self._query(
                KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                ExpressionAttributeValues={
                    ":p": str_attr(queue_pk(pipeline, key)),
                    ":g": str_attr(generation_prefix(generation)),
                },
                ConsistentRead=True,
            )
        )
        state = QueueState(
            pipeline=pipeline,
            key=key,
            version=head.version,
            entries=entries,
            pending_ticks=head.pending_ticks,
            last_tick=head.last_tick,
        )
        return StoredQueue(state, generation)

    def queue_keys(self, pipeline: str, *, pending_only: bool = True) -> list[str]:
        """The keys of a pipeline's queues (those with queued events or held ticks by default)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :q)",
            "ExpressionAttributeValues": {":p": str_attr(f"PIPELINE#{pipeline}"), ":q": str_attr("QUEUE#")},
            # A run's end releases the queues this finds: one queued a moment ago must not be missed.
            "ConsistentRead": True,
        }
        if pending_only:
            kwargs["FilterExpression"] = "pending > :zero"
            kwargs["ExpressionAttributeValues"][":zero"] = num_attr(0)
        return [i["sk"]["S"].removeprefix("QUEUE#") for i in self._query(**kwargs)]

    def already_queued(self, pipeline: str, key: str, events: Sequence[AssetEvent]) -> set[str]:
        """Which of these events (their ids) this queue has seen before (queued or consumed), so redeliveries skip."""
        asked = self._seen_keys(pipeline, key, events, runs=True, sets=True)
        return set(_seen_in(self._batch_get([k for ks in asked.values() for k in ks]), asked))

    def active_runs(self, pipeline: str) -> int:
        """How many runs of the pipeline are queued or running."""
        item = self._get(f"PIPELINE#{pipeline}", "#ACTIVE") or {}
        return int(item.get("active", 0))

    def apply(self, pipeline: Pipeline, stored: StoredQueue, transition: Transition) -> None:
        """Apply a transition as one transaction, conditional on the queue's version and the run limit.

        Raises:
            ConflictError: another evaluator changed the queue or the active runs first; re-read and retry.
            StoreUnavailableError: throttled.
        """
        t = transition
        if not t.changed:
            return
        partition = queue_pk(pipeline.id, t.before.key)
        # A batch run consumes a generation of the queue: the n-th batch run of a transition consumes
        # generation g + n (the first one also what was queued before), and what stays goes to the next.
        event_runs = [r for r in t.runs if r.scheduled_time is None] if pipeline.batch else []
        generation_of: dict[str, int] = {}
        for n, run in enumerate(event_runs):
            generation_of.update((e.id, stored.generation + n) for e in run.triggering_events)
        generation = stored.after(pipeline, t).generation
        counted = pipeline.max_active_runs is not None
        by_reference = _consumed_at_once(t)
        writes = [self._head_write(pipeline.id, t, generation)]
        writes += self._entry_changes(
            pipeline, partition, stored.generation, t, generation, generation_of, by_reference=by_reference
        )
        for run in t.runs:
            if pipeline.batch and run.scheduled_time is None and not by_reference:
                trigger = {
                    "queue": partition,
                    "prefix": generation_prefix(stored.generation + event_runs.index(run)),
                }
            else:
                trigger = self.trigger_refs(run)
            writes.append({"Put": run_put(self.table, run, trigger, counted=counted)})
        writes += pending_adds(self.table, t.runs)
        # The core's decision after the runs it made: still due but for a free slot (Airflow #56050's case).
        held = t.blocked_by == "max_active_runs"
        if (t.runs and counted) or held:
            writes.append(self._active_runs_write(pipeline, len(t.runs), held=held))
        elif t.runs:
            writes.append(self._unpaused_check(pipeline))
        if pipeline.skip_unchanged:
            writes += consumed_version_puts(self.table, pipeline.id, t.runs, {e.event.id for e in t.added})
        if len(writes) > TRANSACTION_MAX:
            raise TransitionTooLargeError(
                f"a transition of {len(writes)} writes exceeds DynamoDB's {TRANSACTION_MAX}; "
                "feed fewer entries at once"
            )
        self._call("transact_write_items", TransactItems=writes)

    def _head_write(self, pipeline: str, t: Transition, generation: int) -> dict[str, Any]:
        """The head's update: the new version, generation, ticks and summary, if still at ``t.before``."""
        values: dict[str, Any] = {
            ":v": num_attr(t.after.version),
            ":g": num_attr(generation),
            ":ticks": {"L": [str_attr(format_timestamp(x)) for x in t.after.pending_ticks]},
            ":pending": num_attr(len(t.after.entries) + len(t.after.pending_ticks)),
            ":summary": str_attr(QueueSummary.of(t.after.entries).to_json()),
            ":before": num_attr(t.before.version),
        }
        update = (
            "SET version = :v, generation = :g, pending_ticks = :ticks, pending = :pending, "
            "summary = :summary, summary_version = :v"
        )
        if t.after.last_tick is not None:
            update += ", last_tick = :lt"
            values[":lt"] = str_attr(format_timestamp(t.after.last_tick))
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": str_attr(f"PIPELINE#{pipeline}"), "sk": str_attr(f"QUEUE#{t.before.key}")},
                "UpdateExpression": update,
                "ConditionExpression": _head_condition(t.before.version),
                "ExpressionAttributeValues": values,
            }
        }

    def _entry_changes(
        self,
        pipeline: Pipeline,
        partition: str,
        generation: int,
        t: Transition,
        next_generation: int | None = None,
        generation_of: dict[str, int] | None = None,
        *,
        by_reference: bool = False,
    ) -> list[dict[str, Any]]:
        """New entries (with their seen marks) and, for ``batch=False``, the consumed entries' deletes.

        A batch pipeline's new entry goes to the generation of the run that consumes it (``generation_of``),
        else to ``next_generation``. ``by_reference``: the transition's runs reference their events' own items
        (``_consumed_at_once``), so its new entries need only their seen marks.
        """
        writes: list[dict[str, Any]] = []
        consumed_ids = {e.event.id for e in t.consumed}
        where = generation_of or {}
        run_ids = {r.run_id for r in t.runs} if by_reference else set()
        marked: list[AssetEvent] = []
        for entry in t.added:
            # An event consumed at once never needs a queue entry, only its seen mark (a batch run then
            # references its events' items instead of its generation), and not even that when the run that
            # takes it alone is found by the event's id.
            queued = not by_reference and (pipeline.batch or entry.event.id not in consumed_ids)
            at = where.get(entry.event.id, generation if next_generation is None else next_generation)
            if queued:
                writes.append(self._entry_put(partition, at if pipeline.batch else generation, entry))
            if queued or _seen_marker(pipeline, t.before.key, entry, run_ids):
                marked.append(entry.event)
        writes += self._mark_writes(partition, marked, sets=not takes_events_alone(pipeline))
        # Failure or late entries a new event superseded: no run takes them.
        writes += [
            {
                "Delete": {
                    "TableName": self.table,
                    "Key": {"pk": str_attr(partition), "sk": str_attr(entry_sk(generation, entry))},
                }
            }
            for entry in t.discarded
        ]
        if pipeline.batch:
            return (
                writes  # a batch run consumes the whole generation: its entries stay, referenced by the run
            )
        added_ids = {e.event.id for e in t.added}
        writes += [
            {
                "Delete": {
                    "TableName": self.table,
                    "Key": {"pk": str_attr(partition), "sk": str_attr(entry_sk(generation, entry))},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            }
            for entry in t.consumed
            if entry.event.id not in added_ids
        ]
        return writes

    def _unpaused_check(self, pipeline: Pipeline) -> dict[str, Any]:
        """The pause flag, checked where a pipeline keeps no count.

        An evaluator that read "not paused" just before an operator paused the pipeline starts nothing: the
        transaction fails and it decides again.
        """
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": active_key(pipeline.id),
                "ConditionExpression": paused_condition(),
                "ExpressionAttributeValues": {":unpaused": {"BOOL": False}},
            }
        }

    def _active_runs_write(self, pipeline: Pipeline, runs: int, *, held: bool = False) -> dict[str, Any]:
        """Count ``runs`` more active runs, only while that stays within ``max_active_runs`` and not paused.

        ``held``: the transition leaves runnable work queued because no slot was free. It then also requires
        that none has freed since (the count is still at ``max_active_runs - runs`` or more), or a run ending
        between the evaluator's read of the count and this write would leave that work queued with a free slot
        and nothing to release it (Airflow #56050): the transaction fails instead, and the evaluator decides
        again with the new count.

        The pause flag lives on the same item; a pipeline without ``max_active_runs`` keeps no count (nothing
        to release at a run's end) and only checks the flag (``_unpaused_check``).
        """
        key = active_key(pipeline.id)
        limit = pipeline.max_active_runs
        if not runs:  # held, nothing to count: a check of the count alone
            return {
                "ConditionCheck": {
                    "TableName": self.table,
                    "Key": key,
                    "ConditionExpression": "active >= :floor",
                    "ExpressionAttributeValues": {":floor": num_attr(limit or 0)},
                }
            }
        values: dict[str, Any] = {":k": num_attr(runs), ":unpaused": {"BOOL": False}}
        update: dict[str, Any] = {
            "TableName": self.table,
            "Key": key,
            "UpdateExpression": "ADD active :k",
            "ConditionExpression": paused_condition(),
            "ExpressionAttributeValues": values,
        }
        if limit is not None:
            room = limit - runs
            values[":room"] = num_attr(room)
            # A missing count is 0; held, the count read must still be the count now (no slot freed meanwhile).
            compare = "=" if held else "<="
            missing = "attribute_not_exists(active) OR " if room == 0 or not held else ""
            update["ConditionExpression"] += f" AND ({missing}active {compare} :room)"
        return {"Update": update}

    def append_entries(
        self, pipeline: Pipeline, head: QueueHead, entries: Sequence[QueueEntry]
    ) -> QueueSummary:
        """Add entries to a batch queue that they leave waiting, from its head alone (no read of its entries).

        For when the head's summary shows the schedule stays unsatisfied with the entries added and no ticks
        are held: the core's transition is then exactly "queue them". One transaction, conditional on the
        head's version and on each entry being new; returns the new summary.

        Raises:
            ConflictError: the queue changed, or an entry was queued meanwhile; read again.
            ValueError: ``head.appended`` says they cannot be appended from the head alone.
        """
        summary = head.appended(pipeline, entries)
        if summary is None:
            raise ValueError(
                f"queue {pipeline.id}/{head.key or '-'} cannot take entries from its head alone "
                f"({len(entries)} entries; batch queues with a current summary and no held tick take 1 to "
                f"{MAX_APPEND})"
            )
        version = head.version + 1
        partition = queue_pk(pipeline.id, head.key)
        values: dict[str, Any] = {
            ":v": num_attr(version),
            ":g": num_attr(head.generation),
            ":pending": num_attr(summary.entries),
            ":summary": str_attr(summary.to_json()),
            ":before": num_attr(head.version),
        }
        writes: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": str_attr(f"PIPELINE#{pipeline.id}"), "sk": str_attr(f"QUEUE#{head.key}")},
                    "UpdateExpression": (
                        "SET version = :v, generation = :g, pending = :pending, summary = :summary, "
                        "summary_version = :v"
                    ),
                    "ConditionExpression": _head_condition(head.version),
                    "ExpressionAttributeValues": values,
                }
            }
        ]
        writes += [self._entry_put(partition, head.generation, entry, only_new=True) for entry in entries]
        writes += self._mark_writes(
            partition, [entry.event for entry in entries], sets=not takes_events_alone(pipeline)
        )
        try:
            self._call("transact_write_items", TransactItems=writes)
        except ConflictError as exc:
            self._restore_seen_markers(exc, writes)
            raise
        return summary

    def _restore_seen_markers(self, exc: ConflictError, writes: Sequence[dict[str, Any]]) -> None:
        """Put back the seen markers of entries found queued already (their markers expired before they ran).

        An entry outlives its seen marker when its queue waits longer than ``DEDUPE_TTL``; a redelivery of its
        event then passes ``already_queued`` and would be counted in the head's summary a second time. The
        entry's conditional put refuses it instead, and with the marker back the evaluator's retry skips it.
        """
        reasons = cancellation_reasons(exc)
        present = [
            writes[i]["Put"]["Item"]
            for i, reason in enumerate(reasons)
            if reason.get("Code") == "ConditionalCheckFailed"
            and "Put" in writes[i]
            and writes[i]["Put"]["Item"]["sk"]["S"].startswith("G#")
        ]
        for item in present:
            event = AssetEvent.from_json(json.loads(item["event"]["S"]))
            self._call("put_item", TableName=self.table, Item=_marker_item(item["pk"]["S"], event))

    def _mark_writes(
        self, partition: str, events: Sequence[AssetEvent], *, sets: bool
    ) -> list[dict[str, Any]]:
        """The writes that mark events seen by a queue, once, ever: in a seen set of their time, or each its marker.

        Without ``sets`` (a pipeline that takes events alone: the runs it makes at once mark nearly all its
        events, and its snapshot reads those runs, not sets), a marker each. Else a queue's events of one second
        share a set item (``seen_set_sks``): one write unit marks as many as fit in 1 KB (``SEEN_SET_BYTES``),
        where a marker each costs one unit an event (two in a transaction). A full second's set sends its events
        to the set of their tenth of a second, then of their hundredth, and only then to a marker each. The sets
        are read first (one consistent batch): a set's update is conditional on its size as read, and every write
        that marks an event also moves its queue's head, so a set changed since is a conflict. An event a set
        already holds was taken meanwhile: the queue is read again.

        Raises:
            ConflictError: a set already holds one of the events.
        """
        events = list({e.id: e for e in events}.values())
        if not sets:
            return [self._marker_put(partition, event) for event in events]
        if not events:
            return []
        slices = {e.id: seen_set_sks(e) for e in events}
        found = self._batch_get(
            [{"pk": str_attr(partition), "sk": str_attr(sk)} for sks in slices.values() for sk in sks]
        )
        held = {sk: seen_set_ids(found.get((partition, sk))) for sks in slices.values() for sk in sks}
        room = {sk: SEEN_SET_BYTES - _seen_set_bytes(partition, sk, ids) for sk, ids in held.items()}
        added: dict[str, list[AssetEvent]] = {}
        writes: list[dict[str, Any]] = []
        for event in events:
            sks = slices[event.id]
            if any(event.id in held[sk] for sk in sks):
                raise ConflictError(f"queue {partition}: an event was marked seen meanwhile; read it again")
            size = utf8_size(event.id)
            into = next((sk for sk in sks if size <= room[sk]), None)
            if into is None:
                writes.append(self._marker_put(partition, event))
                continue
            room[into] -= size
            added.setdefault(into, []).append(event)
        writes += [
            self._set_add(partition, sk, [e.id for e in members], held=len(held[sk]), second=members[0])
            for sk, members in added.items()
        ]
        return writes

    def _set_add(
        self, partition: str, sk: str, ids: Sequence[str], *, held: int, second: AssetEvent
    ) -> dict[str, Any]:
        """Add ``ids`` to a seen set that held ``held`` ids when read (still so, or the transaction fails).

        The set expires as its ``second``'s last event's marker would: every writer sets the same time.
        """
        values: dict[str, Any] = {
            ":ids": {"SS": list(ids)},
            ":e": num_attr(epoch_seconds(second.timestamp + DEDUPE_TTL) + 1),
        }
        condition = "attribute_not_exists(ids)"
        if held:
            condition = "size(ids) = :held"
            values[":held"] = num_attr(held)
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": str_attr(partition), "sk": str_attr(sk)},
                "UpdateExpression": "ADD ids :ids SET expires_at = :e",
                "ConditionExpression": condition,
                "ExpressionAttributeValues": values,
            }
        }

    def _marker_put(self, partition: str, event: AssetEvent) -> dict[str, Any]:
        """An event's own seen marker, written once."""
        return {
            "Put": {
                "TableName": self.table,
                "Item": _marker_item(partition, event),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _entry_put(
        self, partition: str, generation: int, entry: QueueEntry, *, only_new: bool = False
    ) -> dict[str, Any]:
        """The write that adds an entry to a generation of its queue (``only_new``: if not there yet)."""
        put: dict[str, Any] = {
            "TableName": self.table,
            "Item": {
                "pk": str_attr(partition),
                "sk": str_attr(entry_sk(generation, entry)),
                "event": str_attr(json.dumps(entry.event.to_json(), sort_keys=True)),
                "aliases": {"L": [str_attr(a) for a in entry.aliases]},
                **({"wheres": {"L": [str_attr(w) for w in entry.wheres]}} if entry.wheres else {}),
                **({"requeued_from": str_attr(entry.requeued_from)} if entry.requeued_from else {}),
            },
        }
        if only_new:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        return {"Put": put}

    def list_queue(self, pipeline: str) -> list[dict[str, Any]]:
        """Queued events of a pipeline, per queue key, oldest first."""
        rows = []
        for key in self.queue_keys(pipeline, pending_only=False):
            stored = self.read_queue(pipeline, key)
            for entry in sorted(stored.state.entries, key=lambda e: e.sort_key):
                rows.append(
                    {
                        "pipeline": pipeline,
                        "queue_key": key or None,
                        "aliases": list(entry.aliases),
                        "event": entry.event.to_json(),
                    }
                )
        return rows

    def clear_queue(self, pipeline: Pipeline, uri: str | None = None, *, attempts: int = 20) -> int:
        """Drop queued events of a pipeline (of one asset with ``uri``); returns how many were dropped.

        Raises:
            ConflictError: the queue kept changing under heavy load; try again.
        """
        dropped = 0
        for key in self.queue_keys(pipeline.id, pending_only=False):
            for attempt in range(attempts):
                stored = self.read_queue(pipeline.id, key)
                doomed = [e for e in stored.state.entries if uri is None or e.event.asset == uri]
                if not doomed:
                    break
                state = stored.state
                keep = tuple(e for e in state.entries if e not in doomed)
                after = QueueState(
                    state.pipeline, state.key, state.version + 1, keep, state.pending_ticks, state.last_tick
                )
                writes: list[dict[str, Any]] = [
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {
                                "pk": str_attr(f"PIPELINE#{pipeline.id}"),
                                "sk": str_attr(f"QUEUE#{key}"),
                            },
                            "UpdateExpression": "SET version = :v, pending = :p",
                            "ConditionExpression": "version = :before",
                            "ExpressionAttributeValues": {
                                ":v": num_attr(after.version),
                                ":p": num_attr(len(keep) + len(state.pending_ticks)),
                                ":before": num_attr(state.version),
                            },
                        }
                    }
                ]
                writes += [
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": {
                                "pk": str_attr(queue_pk(pipeline.id, key)),
                                "sk": str_attr(entry_sk(stored.generation, e)),
                            },
                        }
                    }
                    for e in doomed[:99]
                ]
                try:
                    self._call("transact_write_items", TransactItems=writes)
                except ConflictError:
                    time.sleep(min(0.05 * 2**attempt, 1.0))
                    continue
                dropped += len(doomed[:99])
                if len(doomed) <= 99:
                    break
            else:
                raise ConflictError(f"queue {pipeline.id}/{key} kept changing; try again")
        return dropped
