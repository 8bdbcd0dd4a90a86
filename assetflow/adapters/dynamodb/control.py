"""The pipeline-control aggregate: the paused flag, runs held for a free slot, and history reads for backfills.

Items (beside the queues' ``PIPELINE#<id>`` heads):

- ``PIPELINE#<id>`` / ``#ACTIVE``: the active-run counter the evaluator keeps, and ``paused`` (with who and
  when). Keeping the flag on the counter's item lets every transaction that counts a run also check the flag,
  so a run can never start on a paused pipeline, whatever the race.
- ``PIPELINE#<id>`` / ``HELD#<created_at>#<run_id>``: a run that waits for a slot (manual, replayed and
  backfilled runs). The run item carries ``held`` (the marker's sort key) and is on no pending item, so the
  submitter's retry sweep never sees it. Admission is one transaction: count it as active (on the same
  conditions as the evaluator: a free slot, not paused), list it as pending, retire the marker (``retired``,
  deleted by TTL a day later: nothing may delete in the partition of the heads and the counter).
- ``PIPELINE#<id>`` / ``VERSION#<asset>`` + US + ``<version>``: a data version a ``skip_unchanged`` pipeline's run
  consumed (with the run and when), so a later event of that (asset, version) is recorded but not queued.
- ``TRIGGER#<run_id>`` / ``E#<timestamp>#<event id>``: the triggering events of a run too large to carry them
  inline (a long backfill window); the run's ``trigger`` references them as a batch run references its queue
  generation.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from assetflow.adapters.dynamodb.keys import sort_key
from assetflow.adapters.dynamodb.runs import DynamoDbRunStore, pending_add, run_key, run_put
from assetflow.adapters.dynamodb.table import (
    active_key,
    asset_pk,
    epoch_seconds,
    generation_prefix,
    num_attr,
    paused_condition,
    queue_pk,
    seen_set_ids,
    seen_set_sks,
    str_attr,
)
from assetflow.core.entries import QueueEntry, entry_kind
from assetflow.core.errors import ConflictError, NotFoundError
from assetflow.core.events import AssetEvent, Run, RunState, format_timestamp, parse_timestamp
from assetflow.core.pipeline import Pipeline
from assetflow.ports import PipelineGate

#: Triggering events kept inline on the run item up to this size of JSON (DynamoDB's items stop at 400 KB).
MAX_INLINE_TRIGGER_BYTES = 200_000
_BATCH_WRITE = 25
#: How long a held run's marker stays, out of the listing, after its run was admitted or cancelled.
RETIRED_MARKER_TTL = timedelta(days=1)


def version_key(pipeline: str, asset: str, version: str) -> dict[str, Any]:
    """The key of the fact that a ``skip_unchanged`` pipeline's run consumed ``version`` of ``asset``."""
    return {
        "pk": str_attr(f"PIPELINE#{pipeline}"),
        "sk": str_attr(sort_key("VERSION#", f"{asset}\x1f{version}")),
    }


def consumed_version_puts(
    table: str, pipeline: str, runs: Sequence[Run], added: Collection[str]
) -> list[dict[str, Any]]:
    """The transaction items that record the data versions new runs consume.

    Part of the transaction that creates the runs. A version that an event arriving now (``added``: event ids)
    brings is recorded only if no run consumed it yet: two evaluators racing with events of one version cannot
    both make a run of it (the second transaction is cancelled; its evaluator re-reads and skips the event).
    A version only entries queued earlier bring is recorded as it is: they were judged when they arrived, and a
    condition on them could never pass again (their queue would be stuck).
    """
    puts: list[dict[str, Any]] = []
    for run in runs:
        taken: dict[tuple[str, str], list[str]] = {}
        for event in run.triggering_events:
            if event.version is not None and entry_kind(event) == "event":
                taken.setdefault((event.asset, event.version), []).append(event.id)
        for (asset, version), event_ids in taken.items():
            item = {
                **version_key(pipeline, asset, version),
                "asset": str_attr(asset),
                "version": str_attr(version),
                "run_id": str_attr(run.run_id),
                "event_ids": {"L": [str_attr(i) for i in event_ids[:100]]},
                "at": str_attr(format_timestamp(run.created_at)),
            }
            put: dict[str, Any] = {"TableName": table, "Item": item}
            if any(i in added for i in event_ids):
                put["ConditionExpression"] = "attribute_not_exists(pk)"
            puts.append({"Put": put})
    return puts


class DynamoDbPipelineStore(DynamoDbRunStore):
    """Pause flags, held runs and the reads of operator actions (the ``PipelineStore`` port)."""

    # ---- pause -------------------------------------------------------------------------------------

    def pipeline_gate(self, pipeline: str) -> PipelineGate:
        """The pipeline's active runs and paused flag (one consistent read)."""
        item = self._get(f"PIPELINE#{pipeline}", "#ACTIVE") or {}
        return PipelineGate(active=int(item.get("active", 0)), paused=bool(item.get("paused", False)))

    def set_paused(self, pipeline: str, paused: bool, *, now: datetime, principal: str) -> bool:
        """Pause or unpause a pipeline; True when that changed the flag (False: it already was)."""
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=active_key(pipeline),
                UpdateExpression="SET paused = :p, paused_changed_at = :t, paused_changed_by = :who",
                ConditionExpression=(
                    "attribute_not_exists(paused) OR paused = :was" if paused else "paused = :was"
                ),
                ExpressionAttributeValues={
                    ":p": {"BOOL": paused},
                    ":was": {"BOOL": not paused},
                    ":t": str_attr(format_timestamp(now)),
                    ":who": str_attr(principal),
                },
            )
        except ConflictError:
            return False
        return True

    # ---- held runs ---------------------------------------------------------------------------------

    def hold_run(self, run: Run, *, trigger_from: str | None = None) -> tuple[Run, bool]:
        """Create a queued run held for a slot; once per run id (a repeat returns the stored run).

        ``trigger_from``: a run whose stored triggering events this one shares (a replay); its events are
        then referenced, never copied, however many they are.

        Raises:
            NotFoundError: ``trigger_from`` names no run.
            ConflictError: the run id exists with another pipeline.
        """
        # Counted: its admission adds it to the pipeline's active runs, so its end takes it off again.
        item = run_put(self.table, run, {}, counted=True)["Item"]
        if trigger_from is not None:
            original = self._get(f"RUN#{trigger_from}", "#RUN")
            if original is None:
                raise NotFoundError(f"no run {trigger_from!r}")
            item["trigger"] = str_attr(str(original["trigger"]))
        else:
            item["trigger"] = str_attr(self._trigger_of(run))
        marker = f"HELD#{format_timestamp(run.created_at)}#{run.run_id}"
        item["held"] = str_attr(marker)
        writes = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {
                        "pk": str_attr(f"PIPELINE#{run.pipeline}"),
                        "sk": str_attr(marker),
                        "run_id": str_attr(run.run_id),
                    },
                }
            },
        ]
        try:
            self._call("transact_write_items", TransactItems=writes)
        except ConflictError:
            existing = self._get(f"RUN#{run.run_id}", "#RUN")
            if existing is None:
                raise  # a lost race, not a repeat: the caller retries
            stored = self.get_run(run.run_id)
            if stored.pipeline != run.pipeline:
                raise ConflictError(f"run id {run.run_id} belongs to pipeline {stored.pipeline!r}") from None
            return stored, False
        return self.get_run(run.run_id), True

    def _trigger_of(self, run: Run) -> str:
        """The run's ``trigger`` attribute: its events inline, or (too many) written apart and referenced."""
        inline = {
            uri: [e.to_json() for e in events] for uri, events in sorted(run.triggering_asset_events.items())
        }
        text = json.dumps({"inline": inline}, sort_keys=True)
        if len(text.encode()) <= MAX_INLINE_TRIGGER_BYTES:
            return text
        partition = f"TRIGGER#{run.run_id}"
        items = [
            {
                "pk": str_attr(partition),
                "sk": str_attr(f"E#{format_timestamp(e.timestamp)}#{e.id}"),
                "event": str_attr(json.dumps(e.to_json(), sort_keys=True)),
            }
            for e in run.triggering_events
        ]
        for start in range(0, len(items), _BATCH_WRITE):
            request = {self.table: [{"PutRequest": {"Item": i}} for i in items[start : start + _BATCH_WRITE]]}
            while request:
                answer = self._call("batch_write_item", RequestItems=request)
                request = answer.get("UnprocessedItems") or {}
        return json.dumps({"queue": partition, "prefix": "E#"}, sort_keys=True)

    def held_runs(self, pipeline: str) -> list[str]:
        """The ids of the runs held for a slot, oldest first (the order they are admitted in)."""
        return [str(i["run_id"]["S"]) for i in self._held_markers(pipeline)]

    def _held_markers(self, pipeline: str) -> list[dict[str, Any]]:
        return list(
            self._query(
                KeyConditionExpression="pk = :p AND begins_with(sk, :h)",
                FilterExpression="attribute_not_exists(retired)",
                ExpressionAttributeValues={":p": str_attr(f"PIPELINE#{pipeline}"), ":h": str_attr("HELD#")},
                ConsistentRead=True,
            )
        )

    def is_held(self, run_id: str) -> bool:
        """Whether the run waits for a slot (created, not yet counted as active)."""
        item = self._get(f"RUN#{run_id}", "#RUN")
        return item is not None and "held" in item

    def admit_held(self, pipeline: Pipeline, *, limit: int = 25) -> list[Run]:
        """Count held runs as active, oldest first, while a slot is free and the pipeline is not paused.

        Raises:
            ConflictError: a lost race with another writer of the counter or the run; retry.
        """
        admitted: list[Run] = []
        for marker in self._held_markers(pipeline.id):
            if len(admitted) >= limit:
                break
            run_id = marker["run_id"]["S"]
            try:
                self._admit(pipeline, run_id, marker["sk"]["S"])
            except ConflictError:
                gate = self.pipeline_gate(pipeline.id)
                full = pipeline.max_active_runs is not None and gate.active >= pipeline.max_active_runs
                if gate.paused or full:
                    break
                if self.is_held(run_id):
                    raise  # a lost race on the counter: the caller retries
                # admitted or cancelled by another writer
                self._call("update_item", **self._retire_marker(pipeline.id, marker["sk"]["S"]))
                continue
            admitted.append(self.get_run(run_id))
        return admitted

    def _admit(self, pipeline: Pipeline, run_id: str, marker: str) -> None:
        values: dict[str, Any] = {":one": num_attr(1), ":unpaused": {"BOOL": False}}
        condition = paused_condition()
        if pipeline.max_active_runs is not None:
            condition += " AND (attribute_not_exists(active) OR active < :limit)"
            values[":limit"] = num_attr(pipeline.max_active_runs)
        created = marker.removeprefix("HELD#")
        self._call(
            "transact_write_items",
            TransactItems=[
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": active_key(pipeline.id),
                        "UpdateExpression": "ADD active :one",
                        "ConditionExpression": condition,
                        "ExpressionAttributeValues": values,
                    }
                },
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": run_key(run_id),
                        "UpdateExpression": "REMOVE held",
                        "ConditionExpression": "attribute_exists(held) AND #s = :queued",
                        "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": {":queued": str_attr(RunState.QUEUED.value)},
                    }
                },
                pending_add(self.table, pipeline.id, created, [run_id]),
                {"Update": self._retire_marker(pipeline.id, marker)},
            ],
        )

    def _retire_marker(self, pipeline: str, marker: str) -> dict[str, Any]:
        """The update that takes a held run's marker out of the listing (TTL deletes it a day later).

        An update, not a delete: the marker shares its partition with the queue heads and the run counter, which
        no function may delete (IAM cannot tell the items of one partition apart).
        """
        return {
            "TableName": self.table,
            "Key": {"pk": str_attr(f"PIPELINE#{pipeline}"), "sk": str_attr(marker)},
            "UpdateExpression": "SET retired = :yes, expires_at = :gone",
            "ExpressionAttributeValues": {
                ":yes": {"BOOL": True},
                ":gone": num_attr(epoch_seconds(datetime.now(UTC) + RETIRED_MARKER_TTL)),
            },
        }

    def cancel_held(self, run_id: str) -> Run | None:
        """Cancel a held run (it never counted as active); None when it is no longer held."""
        item = self._get(f"RUN#{run_id}", "#RUN")
        if item is None or "held" not in item:
            return None
        try:
            self._call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": run_key(run_id),
                            "UpdateExpression": "SET #s = :cancelled REMOVE held",
                            "ConditionExpression": "attribute_exists(held) AND #s = :queued",
                            "ExpressionAttributeNames": {"#s": "state"},
                            "ExpressionAttributeValues": {
                                ":cancelled": str_attr(RunState.CANCELLED.value),
                                ":queued": str_attr(RunState.QUEUED.value),
                            },
                        }
                    },
                    {"Update": self._retire_marker(str(item["pipeline"]), str(item["held"]))},
                ],
            )
        except ConflictError:
            return None
        return self.get_run(run_id)

    # ---- reads and repairs of operator actions -----------------------------------------------------

    def decision_entries(
        self, pipeline: str, key: str, generation: int, *, aliases: bool = True, wheres: bool = True
    ) -> tuple[QueueEntry, ...]:
        """A queue generation's entries with what a decision reads of them, and no extras.

        Explain judges entries by their selector keys (asset, aliases, where-keys decided at routing), kinds
        and (timestamp, id): the extras and sources are never read again, so they are not parsed. ``aliases``
        and ``wheres`` False leave those attributes unread (a condition without aliases or where-nodes).
        """
        projection = ", ".join(["#e", *(["aliases"] if aliases else []), *(["wheres"] if wheres else [])])
        entries = []
        for item in self._query(
            KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
            ExpressionAttributeValues={
                ":p": str_attr(queue_pk(pipeline, key)),
                ":g": str_attr(generation_prefix(generation)),
            },
            ProjectionExpression=projection,
            ExpressionAttributeNames={"#e": "event"},
            ConsistentRead=True,
        ):
            doc = json.loads(item["event"]["S"])
            source = doc.get("source") or {}
            event = AssetEvent(
                asset=doc["asset"],
                id=doc["id"],
                timestamp=parse_timestamp(doc["timestamp"]),
                source={"type": source["type"]} if "type" in source else {},
                partition_key=doc.get("partition_key"),
            )
            counted_for = tuple(a["S"] for a in item.get("aliases", {}).get("L", []))
            matched = tuple(w["S"] for w in item.get("wheres", {}).get("L", []))
            entries.append(QueueEntry(event, counted_for, matched))
        return tuple(entries)

    def declare_asset(self, uri: str, *, name: str, now: datetime) -> bool:
        """Register a declared asset as its first event would (``#META``, no events); True when this call did."""
        try:
            self._call(
                "put_item",
                TableName=self.table,
                Item={
                    "pk": str_attr(asset_pk(uri)),
                    "sk": str_attr("#META"),
                    "uri": str_attr(uri),
                    "asset_name": str_attr(name),
                    "created_at": str_attr(format_timestamp(now)),
                    "last_event_at": str_attr(""),
                    "event_count": num_attr(0),
                    # Created now, by its declaration: its first event does not create it again (new_assets).
                    "first_event_id": str_attr(""),
                    "gsi1pk": str_attr("ASSETS"),
                    "gsi1sk": str_attr(sort_key("", uri)),
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ConflictError:
            return False
        return True

    def declare_alias(self, name: str, *, now: datetime) -> bool:
        """Register a declared alias (``ALIASMETA#<name>``); True when this call did."""
        try:
            self._call(
                "put_item",
                TableName=self.table,
                Item={
                    "pk": str_attr(f"ALIASMETA#{name}"),
                    "sk": str_attr("#META"),
                    "created_at": str_attr(format_timestamp(now)),
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ConflictError:
            return False
        return True

    def catalog_announced(self, digest: str) -> bool:
        """Whether a catalog with this digest was announced (``CATALOG#<digest>``)."""
        return self._get(f"CATALOG#{digest}", "#ANNOUNCED") is not None

    def mark_catalog_announced(self, digest: str, *, now: datetime) -> None:
        """Remember that a catalog with this digest was announced."""
        self._call(
            "put_item",
            TableName=self.table,
            Item={
                "pk": str_attr(f"CATALOG#{digest}"),
                "sk": str_attr("#ANNOUNCED"),
                "at": str_attr(format_timestamp(now)),
            },
        )

    # ---- consumed data versions (skip_unchanged) ---------------------------------------------------------

    def consumed_versions(
        self, triples: Sequence[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], frozenset[str]]:
        """Which (pipeline, asset, version) triples a run consumed already, each with the events it took: one read."""
        unique = list(dict.fromkeys(triples))
        if not unique:
            return {}
        keys = {t: version_key(*t) for t in unique}
        found = self._batch_get(list(keys.values()))
        consumed: dict[tuple[str, str, str], frozenset[str]] = {}
        for triple, key in keys.items():
            item = found.get((key["pk"]["S"], key["sk"]["S"]))
            if item is not None:
                consumed[triple] = frozenset(i["S"] for i in item.get("event_ids", {}).get("L", []))
        return consumed

    def forget_seen(self, pipeline: str, key: str, events: Sequence[AssetEvent]) -> None:
        """Take these events out of a queue's seen marks (sets and markers), so that it takes them again."""
        partition = queue_pk(pipeline, key)
        unique = list({e.id: e for e in events}.values())
        for start in range(0, len(unique), _BATCH_WRITE):
            request = {
                self.table: [
                    {"DeleteRequest": {"Key": {"pk": str_attr(partition), "sk": str_attr(f"SEEN#{e.id}")}}}
                    for e in unique[start : start + _BATCH_WRITE]
                ]
            }
            while request:
                answer = self._call("batch_write_item", RequestItems=request)
                request = answer.get("UnprocessedItems") or {}
        by_set: dict[str, set[str]] = {}
        for event in unique:
            for sk in seen_set_sks(event):
                by_set.setdefault(sk, set()).add(event.id)
        found = self._batch_get([{"pk": str_attr(partition), "sk": str_attr(sk)} for sk in by_set])
        for sk, ids in by_set.items():
            held = ids & seen_set_ids(found.get((partition, sk)))
            if held:
                self._call(
                    "update_item",
                    TableName=self.table,
                    Key={"pk": str_attr(partition), "sk": str_attr(sk)},
                    UpdateExpression="DELETE ids :ids",
                    ExpressionAttributeValues={":ids": {"SS": sorted(held)}},
                )


__all__ = ["MAX_INLINE_TRIGGER_BYTES", "DynamoDbPipelineStore"]
