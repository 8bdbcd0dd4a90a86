"""The events aggregate: asset events written once (deduplicated by a message's identity), assets, aliases."""

from __future__ import annotations

import heapq
import itertools
import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from assetflow.adapters.dynamodb.keys import partition_key, sort_key
from assetflow.adapters.dynamodb.table import (
    DEDUPE_TTL,
    TRANSACTION_MAX,
    DynamoDbTable,
    asset_pk,
    cancellation_reasons,
    epoch_seconds,
    event_pk,
    num_attr,
    page_token,
    plain_item,
    start_key,
    str_attr,
)
from assetflow.core.errors import AssetflowError, ConflictError, StoreUnavailableError
from assetflow.core.events import AssetEvent, format_timestamp
from assetflow.ports import Page, Written

#: One transaction of ingest's batched writes stays under DynamoDB's 4 MB (events are at most ~41 KB each).
_TRANSACTION_BYTES = 3 * 1024 * 1024
_BATCH_ATTEMPTS = 6
#: Items in one BatchWriteItem request.
_BATCH_WRITE_MAX = 25


def dedupe_pk(dedupe_key: str) -> str:
    """The partition of a dedupe record: a message's identity can be longer than a key may be."""
    return partition_key("DEDUPE#", dedupe_key)


#: How far after its run's end a run's outlet events are timestamped: a microsecond apart, in plan order.
RUN_END_SPREAD = timedelta(milliseconds=10)


class DynamoDbEventStore(DynamoDbTable):
    """Asset events under ``ASSET#<uri>`` sorted by (timestamp, id), assets' summaries, alias resolutions.

    An asset's summary (``#META``: its name, when it was created, by which event, how many events it has)
    is kept by the writes that store events, in the same transaction where there is one (events with dedupe
    records), else right after the events' puts: counted once per event written, and never by the evaluator.
    It is a view: a crash between an event's put and its count leaves the event uncounted. Its newest event
    time is read from the events themselves.
    ``asset_name`` gives the declared name of an asset the summary is created for.
    """

    asset_name: Callable[[str], str | None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Assets known to exist (their summary is written): they never stop existing.
        self._known_assets: set[str] = set()
        # Assets whose first event new_assets has read (this process writing their events tells it nothing).
        self._judged_assets: set[str] = set()

    # ---- writing events ----------------------------------------------------------------------------------

    def _event_item(self, event: AssetEvent, *, at_run_end: bool = False) -> dict[str, Any]:
        """An event's item; a run's event gets a ``PRODUCED#<run id>`` index entry unless it is found without.

        ``at_run_end``: the event is a run's outlet timestamped from the run's recorded end (``_put_own``). Such
        an event of a declared asset outlet is found from that end (``events_produced_by``) and needs no index
        entry (a write unit); an alias addition (its asset is not declared) keeps it.
        """
        item = {
            **self.event_key(event),
            "event": str_attr(json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"))),
            "event_id": str_attr(event.id),
        }
        run_id = event.source.get("run_id")
        found_without = at_run_end and not event.source.get("aliases")
        if event.source.get("type") == "run" and isinstance(run_id, str) and not found_without:
            item["gsi1pk"] = str_attr(f"PRODUCED#{run_id}")
            item["gsi1sk"] = str_attr(f"{format_timestamp(event.timestamp)}#{event.id}")
        return item

    def _dedupe_put(
        self, dedupe_key: str, event: AssetEvent, moment: datetime, *, lasting: bool = False
    ) -> dict[str, Any]:
        """A message's dedupe record: where its event is (small, so that it costs one write unit).

        It expires after ``DEDUPE_TTL``, or never when ``lasting`` (a source that can replay any old message,
        such as a Kafka topic read again from an early offset).
        """
        key = self.event_key(event)
        item = {
            "pk": str_attr(dedupe_pk(dedupe_key)),
            "sk": str_attr("#DEDUPE"),
            "event_key": {"L": [key["pk"], key["sk"]]},
        }
        if not lasting:
            item["expires_at"] = num_attr(epoch_seconds(moment + DEDUPE_TTL))
        return {
            "Put": {
                "TableName": self.table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _count_update(self, uri: str, events: Sequence[AssetEvent]) -> dict[str, Any]:
        """The asset summary's update: created with the first event, counting these (one write per asset).

        Once this store has written an asset's summary, the update only counts: the attributes set at creation
        (and the listing index's keys) are not sent again.
        """
        if uri in self._known_assets:
            return {
                "Update": {
                    "TableName": self.table,
                    "Key": {"pk": str_attr(asset_pk(uri)), "sk": str_attr("#META")},
                    "UpdateExpression": "ADD event_count :k",
                    "ExpressionAttributeValues": {":k": num_attr(len(events))},
                }
            }
        first = min(events, key=lambda e: e.sort_key)
        name = (self.asset_name(uri) if self.asset_name else None) or uri
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": str_attr(asset_pk(uri)), "sk": str_attr("#META")},
                "UpdateExpression": (
                    "SET uri = if_not_exists(uri, :u), asset_name = if_not_exists(asset_name, :n), "
                    "created_at = if_not_exists(created_at, :c), "
                    "first_event_id = if_not_exists(first_event_id, :f), gsi1pk = :assets, gsi1sk = :s "
                    "ADD event_count :k"
                ),
                "ExpressionAttributeValues": {
                    ":u": str_attr(uri),
                    ":n": str_attr(name),
                    ":c": str_attr(format_timestamp(first.timestamp)),
                    ":f": str_attr(first.id),
                    ":assets": str_attr("ASSETS"),
                    # An index's sort key holds 1,024 bytes, a URI 1,500 characters: long ones are cut and hashed.
                    ":s": str_attr(sort_key("", uri)),
                    ":k": num_attr(len(events)),
                },
            }
        }

    def put_event(
        self,
        event: AssetEvent,
        *,
        dedupe_key: str | None = None,
        now: datetime | None = None,
        lasting: bool = False,
    ) -> tuple[AssetEvent, bool]:
        """Store an event once; with ``dedupe_key`` (a message's identity) a redelivery stores nothing.

        The dedupe record expires after ``DEDUPE_TTL``, or never with ``lasting`` (see ``_dedupe_put``).

        Returns the stored event (the original one on a redelivery) and whether it was new.

        Raises:
            StoreUnavailableError: throttled; the caller should fail the message so it is retried.
            ConflictError: a lost race with a concurrent writer of the same asset's summary; retry.
        """
        if dedupe_key is None:
            return self._put_own(event)
        (answer,) = self.put_events([(event, dedupe_key)], now=now or event.timestamp, lasting=lasting)
        if isinstance(answer, AssetflowError):
            raise answer
        return answer.event, answer.created

    def _put_own(self, event: AssetEvent) -> tuple[AssetEvent, bool]:
        """An event that is its own dedupe record (a run's outlet event): a conditional put, then the count.

        Its id follows from its run and its timestamp from the run's recorded end (``RunStates``), so a
        declared outlet's event is found from there, without an index entry (``_event_item``). Two requests
        and two write units, where one transaction of the two bills four: the asset's summary is a view. A
        crash between the two leaves the event stored and uncounted (its retry finds it and counts nothing),
        the count never ahead of the events.
        """
        try:
            self._call(
                "put_item",
                TableName=self.table,
                Item=self._event_item(event, at_run_end=True),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ConflictError:
            return event, False  # stored before: the same event (its key and id follow from what made it)
        self._call("update_item", **self._count_update(event.asset, [event])["Update"])
        self._known_assets.add(event.asset)
        return event, True

    def put_events(
        self,
        events: Sequence[tuple[AssetEvent, str | None]],
        *,
        now: datetime,
        lanes: Sequence[str] | None = None,
        lasting: bool = False,
        blind: bool = False,
    ) -> list[Written | AssetflowError]:
        """Store events once each, batched in transactions; one answer per event, in order.

        ``lasting``: their dedupe records never expire (see ``_dedupe_put``). ``blind``: see ``_put_blind``.

        A transaction holds up to ~30 events: each one's item and dedupe record, and one summary update per
        asset.

        A redelivered message (its dedupe record exists) is taken out of the transaction and answered with
        the event it made before; the rest is written. A chunk that stays contended or throttled answers its
        events with the error; the other chunks are written whatever happens to it, except for the events
        of the same ``lanes`` after it.
        """
        if blind:
            if any(dedupe is not None for _, dedupe in events):
                raise ValueError(
                    "blind writes take events that are their own dedupe records, not dedupe keys"
                )
            return self._put_blind([event for event, _ in events])
        answers: list[Written | AssetflowError | None] = [None] * len(events)
        first_of: dict[str, int] = {}
        todo: list[int] = []
        for n, (event, dedupe) in enumerate(events):
            # One transaction may not touch an item twice: a message twice in a batch is written once.
            identity = f"dedupe:{dedupe}" if dedupe is not None else f"event:{event.asset}:{event.id}"
            if identity in first_of:
                continue
            first_of[identity] = n
            todo.append(n)
        blocked: set[str] = set()
        for chunk in self._chunks([events[n] for n in todo]):
            positions = [todo[i] for i in chunk]
            if lanes is not None:
                for n in [n for n in positions if lanes[n] in blocked]:
                    answers[n] = ConflictError("not written: an earlier event of its lane could not be")
                positions = [n for n in positions if lanes[n] not in blocked]
            if not positions:
                continue
            chunk_lanes = None if lanes is None else [lanes[n] for n in positions]
            for n, answer in zip(
                positions,
                self._write_chunk([events[n] for n in positions], now, chunk_lanes, lasting=lasting),
                strict=True,
            ):
                answers[n] = answer
                if lanes is not None and isinstance(answer, AssetflowError):
                    blocked.add(lanes[n])
        for n, (event, dedupe) in enumerate(events):
            if answers[n] is None:
                identity = f"dedupe:{dedupe}" if dedupe is not None else f"event:{event.asset}:{event.id}"
                earlier = answers[first_of[identity]]
                answers[n] = Written(earlier.event, False) if isinstance(earlier, Written) else earlier
        return [a for a in answers if a is not None]

    def _put_blind(self, events: Sequence[AssetEvent]) -> list[Written | AssetflowError]:
        """Events that are their own dedupe records, not stored yet: batched puts, then a count per asset.

        Up to 25 events a request, without a condition or a transaction: a write unit an event, where a
        transaction bills two for the event and two for its dedupe record. A duplicate delivery puts the same
        item again, which changes nothing (and makes no stream record). Each asset's summary then counts
        the events written, in one update; if it cannot be written, its events are answered with the error
        (their messages come back and find their items written: the count is a view and misses them).
        """
        answers: list[Written | AssetflowError | None] = [None] * len(events)
        keys: dict[int, tuple[str, str]] = {}
        taken: set[tuple[str, str]] = set()
        items: dict[int, dict[str, Any]] = {}
        for n, event in enumerate(events):
            item = self._event_item(event)
            key = (item["pk"]["S"], item["sk"]["S"])
            if key in taken:  # one request may not put an item twice
                answers[n] = Written(event, False)
                continue
            taken.add(key)
            keys[n] = key
            items[n] = item
        positions = list(items)
        by_asset: dict[str, list[int]] = {}
        for start in range(0, len(positions), _BATCH_WRITE_MAX):
            chunk = positions[start : start + _BATCH_WRITE_MAX]
            try:
                left = {(i["pk"]["S"], i["sk"]["S"]) for i in self._put_many([items[n] for n in chunk])}
            except StoreUnavailableError as exc:
                for n in chunk:
                    answers[n] = exc
                continue
            for n in chunk:
                if keys[n] in left:
                    answers[n] = StoreUnavailableError(
                        "batch_write_item: event left unprocessed after retries"
                    )
                    continue
                answers[n] = Written(events[n], True)
                by_asset.setdefault(events[n].asset, []).append(n)
        for uri, written in sorted(by_asset.items()):
            update = self._count_update(uri, [events[n] for n in written])["Update"]
            try:
                self._call("update_item", **update)
            except AssetflowError as exc:
                for n in written:
                    answers[n] = exc
                continue
            self._known_assets.add(uri)
        return [a if a is not None else ConflictError("event not written") for a in answers]

    def _chunks(self, events: Sequence[tuple[AssetEvent, str | None]]) -> list[list[int]]:
        """Positions of ``events`` grouped so that each group fits one transaction (items and bytes)."""
        chunks: list[list[int]] = []
        current: list[int] = []
        assets: set[str] = set()
        size = 0
        for n, (event, dedupe) in enumerate(events):
            items = 1 + (dedupe is not None) + (event.asset not in assets)
            event_bytes = len(json.dumps(event.to_json())) + 512
            used = 2 * len(current) + len(assets)
            if current and (used + items > TRANSACTION_MAX or size + event_bytes > _TRANSACTION_BYTES):
                chunks.append(current)
                current, assets, size = [], set(), 0
            current.append(n)
            assets.add(event.asset)
            size += event_bytes
        if current:
            chunks.append(current)
        return chunks

    def _write_halves(
        self,
        chunk: Sequence[tuple[AssetEvent, str | None]],
        pending: Sequence[int],
        answers: list[Written | AssetflowError | None],
        now: datetime,
        lanes: Sequence[str] | None,
        *,
        lasting: bool,
    ) -> None:
        """Write the pending events of a refused chunk in two halves (in order: a lane stops at a failure)."""
        half = len(pending) // 2
        failed: set[str] = set()
        for part in (list(pending[:half]), list(pending[half:])):
            if lanes is not None:
                for n in part:
                    if lanes[n] in failed:
                        answers[n] = ConflictError("not written: an earlier event of its lane could not be")
                part = [n for n in part if lanes[n] not in failed]
            part_lanes = None if lanes is None else [lanes[n] for n in part]
            for n, answer in zip(
                part,
                self._write_chunk([chunk[n] for n in part], now, part_lanes, lasting=lasting),
                strict=True,
            ):
                answers[n] = answer
                if lanes is not None and isinstance(answer, AssetflowError):
                    failed.add(lanes[n])

    def _write_chunk(
        self,
        chunk: Sequence[tuple[AssetEvent, str | None]],
        now: datetime,
        lanes: Sequence[str] | None = None,
        *,
        lasting: bool = False,
    ) -> list[Written | AssetflowError]:
        answers: list[Written | AssetflowError | None] = [None] * len(chunk)
        pending = list(range(len(chunk)))
        for attempt in range(_BATCH_ATTEMPTS):
            writes: list[dict[str, Any]] = []
            owner: list[tuple[int, str]] = []  # (position in chunk, what the write is) per write
            by_asset: dict[str, list[AssetEvent]] = {}
            for n in pending:
                event, dedupe = chunk[n]
                if dedupe is not None:
                    writes.append(self._dedupe_put(dedupe, event, now, lasting=lasting))
                    owner.append((n, "dedupe"))
                writes.append(
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._event_item(event),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                )
                owner.append((n, "event"))
                by_asset.setdefault(event.asset, []).append(event)
            writes += [self._count_update(uri, found) for uri, found in sorted(by_asset.items())]
            owner += [(-1, "count")] * len(by_asset)
            if not writes:
                break
            try:
                self._call("transact_write_items", TransactItems=writes)
            except ConflictError as exc:
                reasons = cancellation_reasons(exc)
                refused = {
                    owner[i]: reason
                    for i, reason in enumerate(reasons)
                    if reason.get("Code") == "ConditionalCheckFailed" and owner[i][0] >= 0
                }
                if not refused:  # a lost race (TransactionConflict): nothing was written, try again
                    if attempt < _BATCH_ATTEMPTS - 1:
                        time.sleep(min(0.02 * 2**attempt, 0.5))
                        continue
                    for n in pending:
                        answers[n] = ConflictError(f"transact_write_items: still contended ({exc})")
                    break
                for (n, what), reason in refused.items():
                    event, dedupe = chunk[n]
                    answers[n] = Written(self._stored_event(reason.get("Item"), event, what), False)
                pending = [n for n in pending if answers[n] is None]
                continue
            except StoreUnavailableError as exc:
                # Throttled (a hot partition, or the table): halve, so that only the events of the partition
                # that keeps refusing fail and the others are written.
                if len(pending) > 1:
                    self._write_halves(chunk, pending, answers, now, lanes, lasting=lasting)
                else:
                    answers[pending[0]] = exc
                break
            for n in pending:
                answers[n] = Written(chunk[n][0], True)
            self._known_assets.update(by_asset)
            break
        return [a if a is not None else ConflictError("event not written") for a in answers]

    def _stored_event(self, old: Mapping[str, Any] | None, event: AssetEvent, what: str) -> AssetEvent:
        """The event a redelivered message made before (from its dedupe record), else ``event`` itself."""
        if what != "dedupe" or not old:
            return event  # the event's own item exists: it is the same event
        if "event" in old:  # dedupe records written before they referenced their event
            return AssetEvent.from_json(json.loads(old["event"]["S"]))
        pk, sk = (part["S"] for part in old["event_key"]["L"])
        found = self._get(pk, sk)
        return AssetEvent.from_json(json.loads(found["event"])) if found else event

    def find_dedupe(self, dedupe_key: str) -> AssetEvent | None:
        """The event a message (by its identity) already produced, if any."""
        found = self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": str_attr(dedupe_pk(dedupe_key)), "sk": str_attr("#DEDUPE")},
            ConsistentRead=True,
        ).get("Item")
        if not found:
            return None
        if "event" in found:
            return AssetEvent.from_json(json.loads(found["event"]["S"]))
        pk, sk = (part["S"] for part in found["event_key"]["L"])
        event = self._get(pk, sk)
        return AssetEvent.from_json(json.loads(event["event"])) if event else None

    def find_stored(self, event: AssetEvent) -> AssetEvent | None:
        """The event stored under ``event``'s own key (its asset, time and id), if any."""
        key = self.event_key(event)
        found = self._get(key["pk"]["S"], key["sk"]["S"])
        return AssetEvent.from_json(json.loads(found["event"])) if found else None

    # ---- assets ------------------------------------------------------------------------------------------

    def new_assets(self, events: Sequence[AssetEvent]) -> set[str]:
        """The assets whose first stored event is among ``events`` (one batched read of unknown assets)."""
        ids = {e.id for e in events}
        unknown = sorted({e.asset for e in events} - self._judged_assets)
        if not unknown:
            return set()
        found = self._batch_get([{"pk": str_attr(asset_pk(u)), "sk": str_attr("#META")} for u in unknown])
        created: set[str] = set()
        for uri in unknown:
            item = found.get((asset_pk(uri), "#META"))
            if item is None:
                continue  # an event written before summaries were kept with the events themselves
            self._known_assets.add(uri)
            self._judged_assets.add(uri)
            if item.get("first_event_id", {}).get("S") in ids:
                created.add(uri)
        return created

    def record_asset(self, event: AssetEvent, *, name: str | None = None) -> bool:
        """Whether ``event`` created its asset (kept for callers of the old summary path).

        Events are counted in their asset's summary when they are stored; this counts nothing.
        """
        return event.asset in self.new_assets([event])

    def list_assets(self, *, limit: int = 100, token: str | None = None) -> Page:
        """Assets with their last event time and event count, by URI."""
        keys, nxt = self._page(
            limit,
            token,
            "gsi1",
            KeyConditionExpression="gsi1pk = :p",
            ExpressionAttributeValues={":p": str_attr("ASSETS")},
        )
        return Page(self._asset_rows(keys), nxt)

    def assets_after(self, after: str | None, *, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` stored assets with URIs after ``after`` (all with None), by URI."""
        values: dict[str, Any] = {":p": str_attr("ASSETS")}
        condition = "gsi1pk = :p"
        if after is not None:
            condition += " AND gsi1sk > :a"
            values[":a"] = str_attr(sort_key("", after))
        keys = list(
            itertools.islice(
                self._query(
                    "gsi1", KeyConditionExpression=condition, ExpressionAttributeValues=values, Limit=limit
                ),
                limit,
            )
        )
        return self._asset_rows(keys)

    def _asset_rows(self, keys: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The listing rows of the assets index's entries (keys only: each summary read by its key)."""
        rows = []
        for raw in self._items_by_keys(keys):
            item = plain_item(raw)
            rows.append(
                {
                    "uri": item["uri"],
                    "name": item.get("asset_name", item["uri"]),
                    "created_at": item.get("created_at"),
                    "last_event_at": self._last_event_at(item["uri"]),
                    "event_count": int(item.get("event_count", 0)),
                }
            )
        return rows

    def _last_event_at(self, uri: str) -> str | None:
        newest: str | None = None
        for shard in range(self.shards_of(uri)):
            page = self._call(
                "query",
                TableName=self.table,
                KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
                ExpressionAttributeValues={":p": str_attr(event_pk(uri, shard)), ":e": str_attr("EVENT#")},
                ScanIndexForward=False,
                Limit=1,
                ProjectionExpression="sk",
            )
            for item in page.get("Items", []):
                stamp = item["sk"]["S"].split("#")[1]
                newest = max(newest or stamp, stamp)
        return newest

    # ---- reading events ----------------------------------------------------------------------------------

    def list_events(
        self, uri: str, *, limit: int = 100, token: str | None = None, newest_first: bool = True
    ) -> Page:
        """An asset's events, newest first by default (paged; a sharded asset's shards merged)."""
        shards = self.shards_of(uri)
        if not 1 <= limit <= 1000:
            raise ValueError("limit must be between 1 and 1000")
        if shards == 1:
            items, nxt = self._page(
                limit,
                token,
                KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
                ExpressionAttributeValues={":p": str_attr(asset_pk(uri)), ":e": str_attr("EVENT#")},
                ScanIndexForward=not newest_first,
            )
            return Page([json.loads(i["event"]["S"]) for i in items], nxt)
        return self._list_sharded(uri, shards, limit=limit, token=token, newest_first=newest_first)

    def _list_sharded(
        self, uri: str, shards: int, *, limit: int, token: str | None, newest_first: bool
    ) -> Page:
        """One page of a sharded asset's events: each shard read from the token's sort key on, merged.

        Every shard sorts by the same ``EVENT#<timestamp>#<id>``, so the last sort key handed out is the
        whole position of a page.
        """
        after = start_key(token)
        cursor = str(after["sk"]) if after and isinstance(after.get("sk"), str) else None
        low, high = ("EVENT#", cursor or "EVENT$") if newest_first else (cursor or "EVENT#", "EVENT$")
        per_shard: list[list[dict[str, Any]]] = []
        for shard in range(shards):
            answer = self._call(
                "query",
                TableName=self.table,
                KeyConditionExpression="pk = :p AND sk BETWEEN :low AND :high",
                ExpressionAttributeValues={
                    ":p": str_attr(event_pk(uri, shard)),
                    ":low": str_attr(low),
                    ":high": str_attr(high),
                },
                ScanIndexForward=not newest_first,
                Limit=limit + 1,
            )
            per_shard.append([i for i in answer.get("Items", []) if i["sk"]["S"] != cursor])
        merged = list(heapq.merge(*per_shard, key=lambda i: str(i["sk"]["S"]), reverse=newest_first))
        page, more = merged[:limit], len(merged) > limit
        nxt = page_token({"sk": page[-1]["sk"]["S"]}) if more and page else None
        return Page([json.loads(i["event"]["S"]) for i in page], nxt)

    def events_between(self, uri: str, start: datetime, end: datetime) -> list[AssetEvent]:
        """An asset's events with ``start <= timestamp < end``, in (timestamp, id) order (its shards merged)."""
        # Sort keys are EVENT#<timestamp>#<id>: "EVENT#<end>" sorts before every event at exactly <end>.
        low, high = (str_attr(f"EVENT#{format_timestamp(moment)}") for moment in (start, end))
        per_shard = [
            list(
                self._query(
                    KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                    ExpressionAttributeValues={":p": str_attr(event_pk(uri, shard)), ":a": low, ":b": high},
                )
            )
            for shard in range(self.shards_of(uri))
        ]
        merged = heapq.merge(*per_shard, key=lambda i: str(i["sk"]["S"]))
        return [AssetEvent.from_json(json.loads(i["event"]["S"])) for i in merged]

    def events_produced_by(
        self, run_id: str, *, outlets: Collection[str] = (), ended_at: datetime | None = None
    ) -> list[dict[str, Any]]:
        """The events a run's outlets produced, in (timestamp, id) order.

        Those indexed by the run (``_event_item``: alias additions, and events of a run whose end was not
        recorded), and with ``outlets`` (its pipeline's declared asset outlets) and ``ended_at`` (the run's
        recorded end) those of its declared outlets: a run's outlet events are timestamped a microsecond
        apart from its end, so one range query of each outlet's partitions finds them.
        """
        keys = list(
            self._query(
                "gsi1",
                KeyConditionExpression="gsi1pk = :p",
                ExpressionAttributeValues={":p": str_attr(f"PRODUCED#{run_id}")},
            )
        )
        found = {
            (d["asset"], d["id"]): d for d in (json.loads(i["event"]["S"]) for i in self._items_by_keys(keys))
        }
        if ended_at is not None:
            until = ended_at + RUN_END_SPREAD
            for uri in dict.fromkeys(outlets):
                for event in self.events_between(uri, ended_at, until):
                    if event.source.get("type") == "run" and event.source.get("run_id") == run_id:
                        found.setdefault((event.asset, event.id), event.to_json())
        return sorted(found.values(), key=lambda d: (d["timestamp"], d["id"]))

    # ---- aliases -----------------------------------------------------------------------------------------

    def add_alias_resolution(self, alias: str, uri: str, *, now: datetime) -> bool:
        """Record that ``alias`` resolves to ``uri``; returns True the first time."""
        created_at = str_attr(format_timestamp(now))
        return self._write_once(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": str_attr(asset_pk(uri)),
                            "sk": str_attr(f"ALIAS#{alias}"),
                            "created_at": created_at,
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            "pk": str_attr(f"ALIAS#{alias}"),
                            "sk": str_attr(sort_key("ASSET#", uri)),
                            "uri": str_attr(uri),
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
                ExpressionAttributeValues={":p": str_attr(asset_pk(uri)), ":a": str_attr("ALIAS#")},
            )
        ]

    def alias_assets(self, alias: str) -> list[str]:
        """The assets an alias resolves to."""
        return [
            i["uri"]["S"] if "uri" in i else i["sk"]["S"].removeprefix("ASSET#")
            for i in self._query(
                KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": str_attr(f"ALIAS#{alias}")}
            )
        ]
