"""The DynamoDB store: asset events, queues, runs, alias resolutions, dedupe records and quarantine.

One table with string keys ``pk``/``sk``, two sparse global secondary indexes and a stream. Every state
change is a conditional write or a transaction; see the README's data model for the access patterns.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from assetflow.core.errors import AlreadySubmittedError, ConflictError, NotFoundError, StoreUnavailableError
from assetflow.core.events import (
    AssetEvent,
    Run,
    RunState,
    format_timestamp,
    parse_timestamp,
    previous_states,
)
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.pipeline import Pipeline
from assetflow.core.scheduler import QueueEntry, QueueState, Transition

#: How long dedupe records and "already queued" markers live: longer than SQS's 14-day retention and
#: DynamoDB stream's 24 hours, the windows in which a message or a record can come back.
DEDUPE_TTL = timedelta(days=15)
_RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
    }
)
_PAGE_MAX = 1000


#: The global secondary indexes, all sparse over string keys ``<index>pk`` / ``<index>sk``: ``gsi1`` lists
#: assets, a pipeline's runs and a run's produced events; ``gsi2`` all runs; ``gsi3`` the runs still waiting
#: to be submitted (a key only while they wait, so the evaluator's retry sweep reads nothing else).
INDEXES = ("gsi1", "gsi2", "gsi3")


def table_definition() -> dict[str, Any]:
    """The table's key schema, indexes and stream, for CreateTable (the CDK app declares the same)."""
    string = "S"
    return {
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": string}
            for name in ("pk", "sk", *(f"{index}{part}" for index in INDEXES for part in ("pk", "sk")))
        ],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": f"{index}pk", "KeyType": "HASH"},
                    {"AttributeName": f"{index}sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for index in INDEXES
        ],
        "BillingMode": "PAY_PER_REQUEST",
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    }


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _plain(attr: Mapping[str, Any]) -> Any:
    ((kind, value),) = attr.items()
    if kind == "S":
        return value
    if kind == "N":
        number = Decimal(value)
        return int(number) if number == number.to_integral_value() else float(number)
    if kind == "BOOL":
        return value
    if kind == "NULL":
        return None
    if kind == "L":
        return [_plain(v) for v in value]
    if kind == "M":
        return {k: _plain(v) for k, v in value.items()}
    if kind == "SS":
        return sorted(value)
    raise ValueError(f"unexpected DynamoDB attribute type {kind}")


def plain_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item (typed attributes) as plain Python values."""
    return {k: _plain(v) for k, v in item.items()}


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def _token(key: Mapping[str, Any] | None) -> str | None:
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode()


def _untoken(token: str | None) -> dict[str, Any] | None:
    if not token:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError) as exc:
        raise ValueError("invalid page token; use the 'next' value of the previous page") from exc
    if not isinstance(decoded, dict):
        raise ValueError("invalid page token; use the 'next' value of the previous page")
    return decoded


@dataclass(frozen=True)
class Page:
    """One page of a listing; ``next`` is the token for the following page, None on the last."""

    items: list[dict[str, Any]]
    next: str | None

    def to_json(self) -> dict[str, Any]:
        """DESIGN §5's list shape."""
        return {"items": self.items, "next": self.next}


@dataclass(frozen=True)
class StoredQueue:
    """A queue as read: the core's state plus the store's generation (a batch run consumes a generation)."""

    state: QueueState
    generation: int


#: Entries one append may take: its transaction holds the head and two writes per entry (DynamoDB: 100).
MAX_APPEND = 49


@dataclass(frozen=True)
class QueueSummary:
    """What a queue holds, kept on its head so that adding to a waiting queue needs no read of its entries."""

    assets: frozenset[str]
    aliases: frozenset[str]
    entries: int

    @classmethod
    def of(cls, entries: Sequence[QueueEntry]) -> QueueSummary:
        """The summary of these entries."""
        state = QueueState("", entries=tuple(entries))
        return cls(state.assets(), state.aliases(), len(entries))

    def with_entries(self, entries: Sequence[QueueEntry]) -> QueueSummary:
        """The summary once these entries are added."""
        added = QueueSummary.of(entries)
        return QueueSummary(
            self.assets | added.assets, self.aliases | added.aliases, self.entries + added.entries
        )

    def to_json(self) -> str:
        """The head attribute's value."""
        return json.dumps(
            {"assets": sorted(self.assets), "aliases": sorted(self.aliases), "entries": self.entries}
        )

    @classmethod
    def from_json(cls, text: str) -> QueueSummary:
        """Read a head attribute's value."""
        doc = json.loads(text)
        return cls(frozenset(doc["assets"]), frozenset(doc["aliases"]), int(doc["entries"]))


@dataclass(frozen=True)
class QueueHead:
    """A queue's head item alone: its version, generation, held ticks and summary.

    ``summary`` is None when the head's summary is not of its current version (a queue written before summaries
    were kept, or changed by a writer that does not keep them, such as ``clear_queue``): read the entries.
    """

    pipeline: str
    key: str
    version: int
    generation: int
    pending_ticks: tuple[datetime, ...]
    last_tick: datetime | None
    summary: QueueSummary | None

    def appended(self, pipeline: Pipeline, entries: Sequence[QueueEntry]) -> QueueSummary | None:
        """The summary once ``entries`` are appended from this head alone, or None when they cannot be.

        They can be for a batch queue whose summary is of this version, with no tick held, and 1 to
        ``MAX_APPEND`` entries (the head and two writes per entry in one transaction).
        """
        if not pipeline.batch or self.summary is None or self.pending_ticks:
            return None
        if not 0 < len(entries) <= MAX_APPEND:
            return None
        return self.summary.with_entries(entries)


class DynamoDbStore:
    """Reads and writes every record of assetflow in one DynamoDB table."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._db = client
        self.table = table_name

    # ---- plumbing ------------------------------------------------------------------------------------

    def _call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._db, operation)(**kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ConditionalCheckFailedException":
                raise ConflictError(f"{operation}: condition failed") from exc
            if code == "TransactionCanceledException":
                reasons = [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]
                if any(r in ("ThrottlingError", "ProvisionedThroughputExceeded") for r in reasons):
                    raise StoreUnavailableError(f"{operation}: throttled ({reasons})") from exc
                raise ConflictError(f"{operation}: transaction cancelled ({reasons})") from exc
            if code in ("TransactionConflictException", "TransactionInProgressException"):
                raise ConflictError(f"{operation}: {code}") from exc
            if code in _RETRYABLE_CODES:
                raise StoreUnavailableError(f"{operation}: {code}") from exc
            raise

    def _query(self, index: str | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        args = {"TableName": self.table, **kwargs}
        if index:
            args["IndexName"] = index
        while True:
            page = self._call("query", **args)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _page(
        self, limit: int, token: str | None, index: str | None = None, **kwargs: Any
    ) -> tuple[list[Any], str | None]:
        if not 1 <= limit <= _PAGE_MAX:
            raise ValueError(f"limit must be between 1 and {_PAGE_MAX}")
        args: dict[str, Any] = {"TableName": self.table, "Limit": limit, **kwargs}
        if index:
            args["IndexName"] = index
        start = _untoken(token)
        if start:
            args["ExclusiveStartKey"] = start
        page = self._call("query", **args)
        return page.get("Items", []), _token(page.get("LastEvaluatedKey"))

    def create_table(self) -> None:
        """Create the table (local runtime and tests; the CDK app creates it on AWS) and wait for it."""
        try:
            self._call("create_table", TableName=self.table, **table_definition())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
                raise
        self._db.get_waiter("table_exists").wait(
            TableName=self.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        try:
            self._call(
                "update_time_to_live",
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
            )
        except ClientError as exc:  # already enabled
            if exc.response.get("Error", {}).get("Code") != "ValidationException":
                raise

    def stream_arn(self) -> str:
        """The ARN of the table's stream."""
        return str(self._call("describe_table", TableName=self.table)["Table"]["LatestStreamArn"])

    # ---- asset events --------------------------------------------------------------------------------

    @staticmethod
    def event_key(event: AssetEvent) -> dict[str, Any]:
        """The key of an event's item: the asset's partition, sorted by (timestamp, id)."""
        return {
            "pk": _s(f"ASSET#{event.asset}"),
            "sk": _s(f"EVENT#{format_timestamp(event.timestamp)}#{event.id}"),
        }

    def put_event(
        self, event: AssetEvent, *, dedupe_key: str | None = None, now: datetime | None = None
    ) -> tuple[AssetEvent, bool]:
        """Store an event once; with ``dedupe_key`` (a message's identity) a redelivery stores nothing.

        Returns the stored event (the original one on a redelivery) and whether it was new.

        Raises:
            StoreUnavailableError: throttled; the caller should fail the message so it is retried.
        """
        item = {
            **self.event_key(event),
            "event": _s(json.dumps(event.to_json(), sort_keys=True)),
            "event_id": _s(event.id),
        }
        run_id = event.source.get("run_id")
        if event.source.get("type") == "run" and isinstance(run_id, str):
            item["gsi1pk"] = _s(f"PRODUCED#{run_id}")
            item["gsi1sk"] = _s(f"{format_timestamp(event.timestamp)}#{event.id}")
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
            writes.insert(
                0,
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": _s(f"DEDUPE#{dedupe_key}"),
                            "sk": _s("#DEDUPE"),
                            "event": item["event"],
                            "expires_at": _n(_epoch(moment + DEDUPE_TTL)),
                        },
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
            Key={"pk": _s(f"DEDUPE#{dedupe_key}"), "sk": _s("#DEDUPE")},
            ConsistentRead=True,
        ).get("Item")
        return AssetEvent.from_json(json.loads(found["event"]["S"])) if found else None

    def record_asset(self, event: AssetEvent, *, name: str | None = None) -> bool:
        """Count an event in its asset's summary, once; returns True when this event created the asset.

        Raises:
            StoreUnavailableError: throttled.
        """
        ts = format_timestamp(event.timestamp)
        meta_key = {"pk": _s(f"ASSET#{event.asset}"), "sk": _s("#META")}
        try:
            self._call(
                "put_item",
                TableName=self.table,
                Item={
                    **meta_key,
                    "uri": _s(event.asset),
                    "asset_name": _s(name or event.asset),
                    "created_at": _s(ts),
                    "last_event_at": _s(""),
                    "event_count": _n(0),
                    "gsi1pk": _s("ASSETS"),
                    "gsi1sk": _s(event.asset),
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
                            "pk": _s(f"ASSET#{event.asset}"),
                            "sk": _s(f"COUNTED#{event.id}"),
                            "expires_at": _n(_epoch(event.timestamp + DEDUPE_TTL)),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": meta_key,
                        "UpdateExpression": "ADD event_count :one",
                        "ExpressionAttributeValues": {":one": _n(1)},
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
                ExpressionAttributeValues={":ts": _s(ts), ":id": _s(event.id)},
            )
        return created

    def _write_once(self, writes: list[dict[str, Any]]) -> bool:
        """Run a transaction whose first write is a conditional put of a marker; False when it exists.

        A cancelled transaction means "already written" only if the marker is there: a lost race
        (TransactionConflict) is raised, so the caller retries instead of taking it for a duplicate.

        Raises:
            ConflictError: the transaction was cancelled for another reason; retry.
        """
        marker = writes[0]["Put"]["Item"]
        try:
            self._call("transact_write_items", TransactItems=writes)
        except ConflictError:
            if self._get(marker["pk"]["S"], marker["sk"]["S"]) is not None:
                return False
            raise
        return True

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        found = self._call(
            "get_item", TableName=self.table, Key={"pk": _s(pk), "sk": _s(sk)}, ConsistentRead=True
        )
        return plain_item(found["Item"]) if "Item" in found else None

    def list_assets(self, *, limit: int = 100, token: str | None = None) -> Page:
        """Assets with their last event time and event count, by URI."""
        items, nxt = self._page(
            limit,
            token,
            "gsi1",
            KeyConditionExpression="gsi1pk = :p",
            ExpressionAttributeValues={":p": _s("ASSETS")},
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
            ExpressionAttributeValues={":p": _s(f"ASSET#{uri}"), ":e": _s("EVENT#")},
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
                ExpressionAttributeValues={":p": _s(f"PRODUCED#{run_id}")},
            )
        ]

    # ---- aliases -------------------------------------------------------------------------------------

    def add_alias_resolution(self, alias: str, uri: str, *, now: datetime) -> bool:
        """Record that ``alias`` resolves to ``uri``; returns True the first time."""
        created_at = _s(format_timestamp(now))
        return self._write_once(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": _s(f"ASSET#{uri}"),
                            "sk": _s(f"ALIAS#{alias}"),
                            "created_at": created_at,
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": _s(f"ALIAS#{alias}"),
                            "sk": _s(f"ASSET#{uri}"),
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
                ExpressionAttributeValues={":p": _s(f"ASSET#{uri}"), ":a": _s("ALIAS#")},
            )
        ]

    def alias_assets(self, alias: str) -> list[str]:
        """The assets an alias resolves to."""
        return [
            i["sk"]["S"].removeprefix("ASSET#")
            for i in self._query(
                KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": _s(f"ALIAS#{alias}")}
            )
        ]

    # ---- queues and runs -----------------------------------------------------------------------------

    @staticmethod
    def _queue_pk(pipeline: str, key: str) -> str:
        return f"QUEUE#{pipeline}#{key}"

    @staticmethod
    def _entry_sk(generation: int, entry: QueueEntry) -> str:
        return f"G#{generation:010d}#E#{format_timestamp(entry.event.timestamp)}#{entry.event.id}"

    def read_queue_head(self, pipeline: str, key: str = "") -> QueueHead:
        """A queue's head item (one consistent read), without its entries."""
        head = self._get(f"PIPELINE#{pipeline}", f"QUEUE#{key}") or {}
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
            QueueEntry(AssetEvent.from_json(json.loads(i["event"]["S"])), tuple(_plain(i["aliases"])))
            for i in self._query(
                KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                ExpressionAttributeValues={
                    ":p": _s(self._queue_pk(pipeline, key)),
                    ":g": _s(f"G#{generation:010d}#"),
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
            "ExpressionAttributeValues": {":p": _s(f"PIPELINE#{pipeline}"), ":q": _s("QUEUE#")},
        }
        if pending_only:
            kwargs["FilterExpression"] = "pending > :zero"
            kwargs["ExpressionAttributeValues"][":zero"] = _n(0)
        return [i["sk"]["S"].removeprefix("QUEUE#") for i in self._query(**kwargs)]

    def already_queued(self, pipeline: str, key: str, event_ids: Sequence[str]) -> set[str]:
        """Which of these events this queue has seen before (queued or consumed), so redeliveries skip."""
        seen: set[str] = set()
        pk = self._queue_pk(pipeline, key)
        ids = list(dict.fromkeys(event_ids))
        for start in range(0, len(ids), 100):
            keys = [{"pk": _s(pk), "sk": _s(f"SEEN#{i}")} for i in ids[start : start + 100]]
            request = {self.table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                answer = self._call("batch_get_item", RequestItems=request)
                seen.update(
                    i["sk"]["S"].removeprefix("SEEN#") for i in answer["Responses"].get(self.table, [])
                )
                request = answer.get("UnprocessedKeys") or {}
        return seen

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
        key = t.before.key
        queue_pk = self._queue_pk(pipeline.id, key)
        batch_consumed = pipeline.batch and bool(t.consumed)
        generation = stored.generation + 1 if batch_consumed else stored.generation
        writes: list[dict[str, Any]] = []

        head_values: dict[str, Any] = {
            ":v": _n(t.after.version),
            ":g": _n(generation),
            ":ticks": {"L": [_s(format_timestamp(x)) for x in t.after.pending_ticks]},
            ":pending": _n(len(t.after.entries) + len(t.after.pending_ticks)),
            ":summary": _s(QueueSummary.of(t.after.entries).to_json()),
        }
        head_update = (
            "SET version = :v, generation = :g, pending_ticks = :ticks, pending = :pending, "
            "summary = :summary, summary_version = :v"
        )
        if t.after.last_tick is not None:
            head_update += ", last_tick = :lt"
            head_values[":lt"] = _s(format_timestamp(t.after.last_tick))
        if t.before.version == 0:
            condition = "attribute_not_exists(version) OR version = :before"
        else:
            condition = "version = :before"
        head_values[":before"] = _n(t.before.version)
        writes.append(
            {
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": _s(f"PIPELINE#{pipeline.id}"), "sk": _s(f"QUEUE#{key}")},
                    "UpdateExpression": head_update,
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": head_values,
                }
            }
        )
        consumed_ids = {e.event.id for e in t.consumed}
        for entry in t.added:
            # A batch=False event consumed at once never needs a queue entry, only its seen marker.
            queued = pipeline.batch or entry.event.id not in consumed_ids
            writes += self._entry_writes(queue_pk, stored.generation, entry, queued=queued)
        if not pipeline.batch:
            added_ids = {e.event.id for e in t.added}
            for entry in t.consumed:
                if entry.event.id not in added_ids:
                    writes.append(
                        {
                            "Delete": {
                                "TableName": self.table,
                                "Key": {
                                    "pk": _s(queue_pk),
                                    "sk": _s(self._entry_sk(stored.generation, entry)),
                                },
                                "ConditionExpression": "attribute_exists(pk)",
                            }
                        }
                    )
        for run in t.runs:
            writes.append({"Put": self._run_put(run, queue_pk, stored.generation, pipeline.batch)})
        if t.runs:
            values: dict[str, Any] = {":k": _n(len(t.runs))}
            update: dict[str, Any] = {
                "TableName": self.table,
                "Key": {"pk": _s(f"PIPELINE#{pipeline.id}"), "sk": _s("#ACTIVE")},
                "UpdateExpression": "ADD active :k",
                "ExpressionAttributeValues": values,
            }
            if pipeline.max_active_runs is not None:
                update["ConditionExpression"] = "attribute_not_exists(active) OR active <= :room"
                values[":room"] = _n(pipeline.max_active_runs - len(t.runs))
            writes.append({"Update": update})
        if len(writes) > 100:
            raise ValueError(
                f"a transition of {len(writes)} writes exceeds DynamoDB's 100; feed fewer entries at once"
            )
        self._call("transact_write_items", TransactItems=writes)

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
        queue_pk = self._queue_pk(pipeline.id, head.key)
        values: dict[str, Any] = {
            ":v": _n(version),
            ":g": _n(head.generation),
            ":pending": _n(summary.entries),
            ":summary": _s(summary.to_json()),
            ":before": _n(head.version),
        }
        writes: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": _s(f"PIPELINE#{pipeline.id}"), "sk": _s(f"QUEUE#{head.key}")},
                    "UpdateExpression": (
                        "SET version = :v, generation = :g, pending = :pending, summary = :summary, "
                        "summary_version = :v"
                    ),
                    "ConditionExpression": (
                        "attribute_not_exists(version) OR version = :before"
                        if head.version == 0
                        else "version = :before"
                    ),
                    "ExpressionAttributeValues": values,
                }
            }
        ]
        for entry in entries:
            writes += self._entry_writes(queue_pk, head.generation, entry, queued=True)
        self._call("transact_write_items", TransactItems=writes)
        return summary

    def _entry_writes(
        self, queue_pk: str, generation: int, entry: QueueEntry, *, queued: bool
    ) -> list[dict[str, Any]]:
        """The writes that add an entry: its seen marker (once per queue, ever) and, when queued, the entry."""
        writes: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {
                        "pk": _s(queue_pk),
                        "sk": _s(f"SEEN#{entry.event.id}"),
                        "expires_at": _n(_epoch(entry.event.timestamp + DEDUPE_TTL)),
                    },
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        ]
        if queued:
            writes.append(
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": _s(queue_pk),
                            "sk": _s(self._entry_sk(generation, entry)),
                            "event": _s(json.dumps(entry.event.to_json(), sort_keys=True)),
                            "aliases": {"L": [_s(a) for a in entry.aliases]},
                        },
                    }
                }
            )
        return writes

    def _run_put(self, run: Run, queue_pk: str, generation: int, batch: bool) -> dict[str, Any]:
        created = format_timestamp(run.created_at)
        doc = run.to_json()
        triggers = doc.pop("triggering_asset_events")
        trigger = (
            {"queue": queue_pk, "prefix": f"G#{generation:010d}#"}
            if batch and triggers
            else {"inline": triggers}
        )
        item: dict[str, Any] = {
            "pk": _s(f"RUN#{run.run_id}"),
            "sk": _s("#RUN"),
            "run": _s(json.dumps(doc, sort_keys=True)),
            "state": _s(run.state.value),
            "pipeline": _s(run.pipeline),
            "trigger": _s(json.dumps(trigger, sort_keys=True)),
            "gsi3pk": _s(f"UNSUBMITTED#{run.pipeline}"),
            "gsi3sk": _s(f"{created}#{run.run_id}"),
            "gsi1pk": _s(f"RUNS#{run.pipeline}"),
            "gsi1sk": _s(f"{created}#{run.run_id}"),
            "gsi2pk": _s("RUNS"),
            "gsi2sk": _s(f"{created}#{run.run_id}"),
        }
        return {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}

    def _run_from_item(self, raw: Mapping[str, Any], *, with_events: bool) -> Run:
        doc = json.loads(raw["run"]["S"])
        doc["state"] = raw["state"]["S"]
        if "job_run_id" in raw:
            doc["job_run_id"] = raw["job_run_id"]["S"]
        doc["triggering_asset_events"] = {}
        if with_events:
            trigger = json.loads(raw["trigger"]["S"])
            if "inline" in trigger:
                doc["triggering_asset_events"] = trigger["inline"]
            else:
                grouped: dict[str, list[dict[str, Any]]] = {}
                for item in self._query(
                    KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                    ExpressionAttributeValues={":p": _s(trigger["queue"]), ":g": _s(trigger["prefix"])},
                ):
                    event = json.loads(item["event"]["S"])
                    grouped.setdefault(event["asset"], []).append(event)
                doc["triggering_asset_events"] = {
                    uri: sorted(events, key=lambda e: (e["timestamp"], e["id"]))
                    for uri, events in sorted(grouped.items())
                }
        return Run.from_json(doc)

    def get_run(self, run_id: str, *, with_events: bool = True) -> Run:
        """A run, with its triggering events by default.

        Raises:
            NotFoundError: no such run.
        """
        found = self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": _s(f"RUN#{run_id}"), "sk": _s("#RUN")},
            ConsistentRead=True,
        )
        if "Item" not in found:
            raise NotFoundError(f"no run {run_id!r}")
        return self._run_from_item(found["Item"], with_events=with_events)

    def list_runs(self, pipeline: str | None = None, *, limit: int = 50, token: str | None = None) -> Page:
        """Runs, newest first, of one pipeline or of all (without their triggering events)."""
        if pipeline:
            items, nxt = self._page(
                limit,
                token,
                "gsi1",
                KeyConditionExpression="gsi1pk = :p",
                ExpressionAttributeValues={":p": _s(f"RUNS#{pipeline}")},
                ScanIndexForward=False,
            )
        else:
            items, nxt = self._page(
                limit,
                token,
                "gsi2",
                KeyConditionExpression="gsi2pk = :p",
                ExpressionAttributeValues={":p": _s("RUNS")},
                ScanIndexForward=False,
            )
        return Page([self._run_from_item(i, with_events=False).to_json() for i in items], nxt)

    def unsubmitted_runs(self, pipeline: str) -> list[Run]:
        """Runs created but not yet accepted by EMR Serverless (a crash or a failed StartJobRun), oldest first."""
        found = [
            self._run_from_item(i, with_events=True)
            for i in self._query(
                "gsi3",
                KeyConditionExpression="gsi3pk = :p",
                FilterExpression="#s = :q",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={
                    ":p": _s(f"UNSUBMITTED#{pipeline}"),
                    ":q": _s(RunState.QUEUED.value),
                },
            )
        ]
        return sorted(found, key=lambda r: (r.created_at, r.run_id))

    def mark_submitted(self, run_id: str, job_run_id: str) -> None:
        """Record EMR Serverless's job run id (and the way back from it); harmless when repeated.

        Raises:
            AlreadySubmittedError: the run was already submitted under another job run id.
            ConflictError: the write lost a race with another writer of the run; retry.
        """
        try:
            self._call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {"pk": _s(f"RUN#{run_id}"), "sk": _s("#RUN")},
                            "UpdateExpression": "SET job_run_id = :j REMOVE gsi3pk, gsi3sk",
                            "ConditionExpression": (
                                "attribute_exists(pk) AND (attribute_not_exists(job_run_id) OR job_run_id = :j)"
                            ),
                            "ExpressionAttributeValues": {":j": _s(job_run_id)},
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": {
                                "pk": _s(f"JOBRUN#{job_run_id}"),
                                "sk": _s("#JOBRUN"),
                                "run_id": _s(run_id),
                            },
                        }
                    },
                ],
            )
        except ConflictError:
            run = self.get_run(run_id, with_events=False)
            if run.job_run_id == job_run_id:
                return
            if run.job_run_id is None:
                raise  # a lost race (TransactionConflict), not a second job run: the caller retries
            raise AlreadySubmittedError(f"run {run_id} was already submitted as {run.job_run_id}") from None

    def run_id_for_job(self, job_run_id: str) -> str | None:
        """The run an EMR Serverless job run belongs to, if assetflow submitted it."""
        item = self._get(f"JOBRUN#{job_run_id}", "#JOBRUN")
        return str(item["run_id"]) if item else None

    def record_submission_failure(self, run_id: str, reason: str, *, now: datetime) -> None:
        """Keep the last submission error on the run for operators (the run stays queued and is retried)."""
        self._call(
            "update_item",
            TableName=self.table,
            Key={"pk": _s(f"RUN#{run_id}"), "sk": _s("#RUN")},
            UpdateExpression="SET submission_error = :r, submission_failed_at = :t ADD submission_attempts :one",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={
                ":r": _s(reason[:1000]),
                ":t": _s(format_timestamp(now)),
                ":one": _n(1),
            },
        )

    def set_run_state(
        self, run_id: str, new: RunState, *, job_run_id: str | None = None, attempts: int = 5
    ) -> tuple[Run, bool]:
        """Move a run to ``new`` if the state table allows it; a move out of an active state frees a slot.

        Returns the run as stored afterwards and whether this call moved it (False for a duplicate or a
        late, out-of-order state event, which change nothing).

        Raises:
            NotFoundError: no such run.
            ConflictError: the run kept changing under concurrent state events.
        """
        for _ in range(attempts):
            run = self.get_run(run_id, with_events=False)
            if run.state not in previous_states(new):
                return run, False
            values: dict[str, Any] = {":new": _s(new.value), ":cur": _s(run.state.value)}
            update = "SET #s = :new"
            if job_run_id:
                update += ", job_run_id = if_not_exists(job_run_id, :j)"
                values[":j"] = _s(job_run_id)
            if not new.active:
                update += " REMOVE gsi3pk, gsi3sk"  # a finished run never waits for submission again
            writes: list[dict[str, Any]] = [
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {"pk": _s(f"RUN#{run_id}"), "sk": _s("#RUN")},
                        "UpdateExpression": update,
                        "ConditionExpression": "#s = :cur",
                        "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": values,
                    }
                }
            ]
            if run.state.active and not new.active:
                # Exactly once per run: the condition on the run's state guards the decrement.
                writes.append(
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {"pk": _s(f"PIPELINE#{run.pipeline}"), "sk": _s("#ACTIVE")},
                            "UpdateExpression": "ADD active :minus",
                            "ExpressionAttributeValues": {":minus": _n(-1)},
                        }
                    }
                )
            try:
                self._call("transact_write_items", TransactItems=writes)
            except ConflictError:
                continue  # another state event moved the run meanwhile: read again and decide again
            return self.get_run(run_id, with_events=False), True
        raise ConflictError(f"run {run_id} kept changing; try again")

    # ---- queue views ---------------------------------------------------------------------------------

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
                            "Key": {"pk": _s(f"PIPELINE#{pipeline.id}"), "sk": _s(f"QUEUE#{key}")},
                            "UpdateExpression": "SET version = :v, pending = :p",
                            "ConditionExpression": "version = :before",
                            "ExpressionAttributeValues": {
                                ":v": _n(after.version),
                                ":p": _n(len(keep) + len(state.pending_ticks)),
                                ":before": _n(state.version),
                            },
                        }
                    }
                ]
                writes += [
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": {
                                "pk": _s(self._queue_pk(pipeline.id, key)),
                                "sk": _s(self._entry_sk(stored.generation, e)),
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

    # ---- quarantine ----------------------------------------------------------------------------------

    def quarantine(
        self,
        *,
        watcher: str,
        reason: str,
        body: str,
        facts: Mapping[str, Any],
        identity: str,
        now: datetime,
    ) -> bool:
        """Keep a rejected message with its reason (once per message identity); returns True when new."""
        item = {
            "pk": _s("QUARANTINE"),
            "sk": _s(f"{format_timestamp(now)}#{identity}"),
            "watcher": _s(watcher),
            "reason": _s(reason[:2000]),
            "body": _s(body),
            "facts": _s(json.dumps(thaw_json(facts), sort_keys=True, default=str)),
            "identity": _s(identity),
        }
        return self._write_once(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": _s(f"DEDUPE#quarantine#{identity}"),
                            "sk": _s("#DEDUPE"),
                            "expires_at": _n(_epoch(now + DEDUPE_TTL)),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {"Put": {"TableName": self.table, "Item": item}},
            ]
        )

    def list_quarantine(self, *, limit: int = 100, token: str | None = None) -> Page:
        """Rejected messages, newest first."""
        items, nxt = self._page(
            limit,
            token,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": _s("QUARANTINE")},
            ScanIndexForward=False,
        )
        rows = []
        for raw in items:
            item = plain_item(raw)
            rows.append(
                {
                    "at": item["sk"].split("#", 1)[0],
                    "watcher": item["watcher"],
                    "reason": item["reason"],
                    "body": item["body"],
                    "facts": json.loads(item["facts"]),
                    "identity": item["identity"],
                }
            )
        return Page(rows, nxt)


__all__ = ["DynamoDbStore", "Page", "StoredQueue", "table_definition"]
