"""``inlet_events``: the lazy, time-ordered history of each inlet asset or alias, read from the events table.

As in Airflow 3, ``inlet_events[alias]`` is the history of the events emitted *through* the alias: the events
whose producing run added their asset to that alias (their ``source.aliases`` name it), of every asset the alias
has resolved to, merged in (timestamp, id) order.
"""

from __future__ import annotations

import heapq
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, Protocol, overload

from assetflow_job.errors import UndeclaredInletError
from assetflow_job.events import AssetEvent
from assetflow_job.refs import AliasRef, match_key, resolve_key
from assetflow_job.storage import boto3_client, endpoint_url

logger = logging.getLogger(__name__)


class EventReader(Protocol):
    """Reads one asset's events, oldest first, a page at a time (tests pass a fake)."""

    def read_page(self, uri: str, cursor: Any) -> tuple[list[AssetEvent], Any]:
        """Return the events after ``cursor`` (None: from the start) and the next cursor (None: no more)."""
        ...

    def alias_assets(self, alias: str) -> list[str]:
        """The assets an alias has resolved to (a run's alias outlet added them), by URI."""
        ...


def event_partition(uri: str, shard: int) -> str:
    """The partition of one shard of an asset's events (``assetflow.adapters.dynamodb.table.event_pk``)."""
    return f"ASSET#{uri}" if shard == 0 else f"EVENTS#{shard}#{uri}"


class DynamoDbEventReader:
    """Reads an asset's events from the single table: ``pk = ASSET#<uri>``, ``sk`` beginning ``EVENT#``.

    An asset whose events are spread over several partitions (``shards``: ``{uri: n}``, as the deployment
    writes them) is read from each, merged in sort-key order: every shard sorts by ``EVENT#<time>#<id>``, so
    the last sort key handed out is the whole position.
    """

    def __init__(
        self,
        table_name: str,
        *,
        region: str | None = None,
        endpoint: str | None = None,
        page_size: int = 100,
        client: Any = None,
        shards: Mapping[str, int] | None = None,
    ) -> None:
        if not table_name:
            raise ValueError("the events table needs a name")
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self._table_name = table_name
        self._region = region
        self._endpoint = endpoint
        self._page_size = page_size
        self._client = client
        self._shards = {uri: int(n) for uri, n in (shards or {}).items() if int(n) > 1}

    def _query(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            self._client = boto3_client(
                "dynamodb", region=self._region, endpoint=endpoint_url("DYNAMODB", self._endpoint)
            )
        response: dict[str, Any] = self._client.query(**request)
        return response

    def read_page(self, uri: str, cursor: Any) -> tuple[list[AssetEvent], Any]:
        """Query one page of the asset's events in sort-key order, which is (timestamp, id) order."""
        shards = self._shards.get(uri, 1)
        if shards > 1:
            return self._read_sharded(uri, shards, cursor)
        request: dict[str, Any] = {
            "TableName": self._table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": f"ASSET#{uri}"}, ":prefix": {"S": "EVENT#"}},
            "ExpressionAttributeNames": {"#event": "event"},
            "ProjectionExpression": "#event",
            "ScanIndexForward": True,
            "Limit": self._page_size,
        }
        if cursor is not None:
            request["ExclusiveStartKey"] = cursor
        response = self._query(request)
        events = [
            AssetEvent.from_dict(json.loads(item["event"]["S"]), asset=uri)
            for item in response.get("Items", [])
        ]
        logger.debug(
            "events page read uri=%s count=%d more=%s", uri, len(events), "LastEvaluatedKey" in response
        )
        return events, response.get("LastEvaluatedKey")

    def _read_sharded(self, uri: str, shards: int, cursor: Any) -> tuple[list[AssetEvent], Any]:
        """A page of a sharded asset's events: each shard read after the cursor's sort key, merged."""
        after = cursor if isinstance(cursor, str) else None
        per_shard: list[list[dict[str, Any]]] = []
        for shard in range(shards):
            response = self._query(
                {
                    "TableName": self._table_name,
                    "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
                    "ExpressionAttributeValues": {
                        ":pk": {"S": event_partition(uri, shard)},
                        ":low": {"S": after or "EVENT#"},
                        ":high": {"S": "EVENT$"},
                    },
                    "ExpressionAttributeNames": {"#event": "event"},
                    "ProjectionExpression": "sk, #event",
                    "ScanIndexForward": True,
                    "Limit": self._page_size + 1,
                }
            )
            per_shard.append([i for i in response.get("Items", []) if i["sk"]["S"] != after])
        merged = list(heapq.merge(*per_shard, key=lambda item: str(item["sk"]["S"])))
        page = merged[: self._page_size]
        events = [AssetEvent.from_dict(json.loads(item["event"]["S"]), asset=uri) for item in page]
        more = len(merged) > self._page_size
        logger.debug("events page read uri=%s shards=%d count=%d more=%s", uri, shards, len(events), more)
        return events, (str(page[-1]["sk"]["S"]) if more and page else None)

    def alias_assets(self, alias: str) -> list[str]:
        """The assets an alias resolved to: the items ``pk = ALIAS#<name>``, ``sk = ASSET#<uri>``.

        A long URI's sort key is cut and hashed; the item's ``uri`` holds it whole.
        """
        request: dict[str, Any] = {
            "TableName": self._table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": f"ALIAS#{alias}"}, ":prefix": {"S": "ASSET#"}},
        }
        uris: list[str] = []
        while True:
            response = self._query(request)
            uris += [
                item["uri"]["S"] if "uri" in item else item["sk"]["S"][len("ASSET#") :]
                for item in response.get("Items", [])
            ]
            if "LastEvaluatedKey" not in response:
                return sorted(uris)
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


class LazyAssetEvents(Sequence[AssetEvent]):
    """An asset's events, earliest first, fetched only as far as the job looks.

    Indexing from the front, iterating and ``bool()`` read pages as needed; ``len()``, negative
    indexes and open-ended slices read to the end. Pages are kept, so nothing is read twice.
    """

    def __init__(self, uri: str, reader: EventReader) -> None:
        self.uri = uri
        self._reader = reader
        self._events: list[AssetEvent] = []
        self._cursor: Any = None
        self._exhausted = False

    def _fetch_page(self) -> bool:
        if self._exhausted:
            return False
        page, cursor = self._reader.read_page(self.uri, self._cursor)
        self._events.extend(page)
        self._cursor = cursor
        self._exhausted = cursor is None
        return True

    def _fill_to(self, count: int) -> None:
        while len(self._events) < count and self._fetch_page():
            pass

    def _fill_all(self) -> None:
        while self._fetch_page():
            pass

    def __len__(self) -> int:
        self._fill_all()
        return len(self._events)

    def __bool__(self) -> bool:
        self._fill_to(1)
        return bool(self._events)

    @overload
    def __getitem__(self, index: int) -> AssetEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[AssetEvent]: ...

    def __getitem__(self, index: int | slice) -> AssetEvent | list[AssetEvent]:
        if isinstance(index, slice):
            start, stop, step = index.start, index.stop, index.step
            bounded = stop is not None and stop >= 0 and (start is None or start >= 0) and (step or 1) > 0
            if bounded:
                self._fill_to(stop)
            else:
                self._fill_all()
            return self._events[index]
        if index < 0:
            self._fill_all()
        else:
            self._fill_to(index + 1)
        return self._events[index]

    def __iter__(self) -> Iterator[AssetEvent]:
        position = 0
        while True:
            self._fill_to(position + 1)
            if position >= len(self._events):
                return
            yield self._events[position]
            position += 1

    def __repr__(self) -> str:
        state = "complete" if self._exhausted else "partial"
        return f"<LazyAssetEvents {self.uri!r} {len(self._events)} loaded, {state}>"


class AliasEvents(Sequence[AssetEvent]):
    """The events emitted through an alias, of every asset it resolved to, earliest first, read lazily.

    The alias's assets are looked up on first use; their histories are merged as they are read, keeping only the
    events whose source names the alias (``source.aliases``). Iteration reads only as far as it goes; ``len()``
    and negative indexes read to the end.
    """

    def __init__(self, alias: str, reader: EventReader) -> None:
        self.alias = alias
        self._reader = reader
        self._events: list[AssetEvent] = []
        self._merged: Iterator[AssetEvent] | None = None
        self._exhausted = False
        self.assets: list[str] | None = None

    def _source(self) -> Iterator[AssetEvent]:
        if self._merged is None:
            self.assets = self._reader.alias_assets(self.alias)
            histories: Iterable[Iterable[AssetEvent]] = [
                LazyAssetEvents(u, self._reader) for u in self.assets
            ]
            merged = heapq.merge(*histories, key=lambda e: e.sort_key)
            self._merged = (e for e in merged if self.alias in (e.source.get("aliases") or ()))
        return self._merged

    def _fill_to(self, count: int) -> None:
        while not self._exhausted and len(self._events) < count:
            try:
                self._events.append(next(self._source()))
            except StopIteration:
                self._exhausted = True

    def _fill_all(self) -> None:
        self._fill_to(2**62)

    def __len__(self) -> int:
        self._fill_all()
        return len(self._events)

    def __bool__(self) -> bool:
        self._fill_to(1)
        return bool(self._events)

    @overload
    def __getitem__(self, index: int) -> AssetEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[AssetEvent]: ...

    def __getitem__(self, index: int | slice) -> AssetEvent | list[AssetEvent]:
        if isinstance(index, slice):
            bounded = index.stop is not None and index.stop >= 0 and (index.start or 0) >= 0
            if bounded and (index.step or 1) > 0:
                self._fill_to(index.stop)
            else:
                self._fill_all()
            return self._events[index]
        if index < 0:
            self._fill_all()
        else:
            self._fill_to(index + 1)
        return self._events[index]

    def __iter__(self) -> Iterator[AssetEvent]:
        position = 0
        while True:
            self._fill_to(position + 1)
            if position >= len(self._events):
                return
            yield self._events[position]
            position += 1

    def __repr__(self) -> str:
        state = "complete" if self._exhausted else "partial"
        return f"<AliasEvents {self.alias!r} {len(self._events)} loaded, {state}>"


class InletEventAccessors:
    """``ctx.inlet_events[asset or alias]``: the event history of each inlet the pipeline declares."""

    def __init__(
        self,
        inlets: Sequence[str],
        reader_factory: Callable[[], EventReader],
        aliases: Sequence[str] = (),
    ) -> None:
        self._inlets = {match_key(uri): uri for uri in inlets}
        self._aliases = list(dict.fromkeys(aliases))
        self._reader_factory = reader_factory
        self._reader: EventReader | None = None
        self._accessors: dict[str, LazyAssetEvents] = {}
        self._alias_accessors: dict[str, AliasEvents] = {}

    def _read(self) -> EventReader:
        if self._reader is None:
            self._reader = self._reader_factory()
        return self._reader

    def __getitem__(self, key: object) -> Any:
        ref = resolve_key(key)
        if isinstance(ref, AliasRef):
            if ref.name not in self._aliases:
                declared = ", ".join(self._aliases) or "none"
                raise UndeclaredInletError(
                    f"the alias {ref.name!r} is not an inlet of this pipeline (declared inlet aliases: {declared}); "
                    "add AssetAlias(...) to the pipeline's inlets to read the events emitted through it"
                )
            if ref.name not in self._alias_accessors:
                self._alias_accessors[ref.name] = AliasEvents(ref.name, self._read())
            return self._alias_accessors[ref.name]
        uri = self._inlets.get(match_key(ref.uri))
        if uri is None:
            declared = ", ".join(sorted(self._inlets.values())) or "none"
            raise UndeclaredInletError(
                f"{ref.uri!r} is not an inlet of this pipeline (declared inlets: {declared}); "
                "add it to the pipeline's inlets to read its events"
            )
        if uri not in self._accessors:
            self._accessors[uri] = LazyAssetEvents(uri, self._read())
        return self._accessors[uri]

    def __contains__(self, key: object) -> bool:
        try:
            ref = resolve_key(key)
        except TypeError:
            return False
        if isinstance(ref, AliasRef):
            return ref.name in self._aliases
        return match_key(ref.uri) in self._inlets

    def __iter__(self) -> Iterator[str]:
        return iter(self._inlets.values())

    def __len__(self) -> int:
        return len(self._inlets)
