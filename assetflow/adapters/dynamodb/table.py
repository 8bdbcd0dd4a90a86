"""The one DynamoDB table: its definition, attribute codecs, and the calls every aggregate's store makes.

One table with string keys ``pk``/``sk``, three sparse global secondary indexes and a stream. Every state
change is a conditional write or a transaction; SDK errors become the core's errors by their codes here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from assetflow.core.entries import entry_kind
from assetflow.core.errors import ConflictError, StoreUnavailableError
from assetflow.core.events import AssetEvent, Run, format_timestamp
from assetflow.core.scheduler import QueueEntry

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
#: assets, a pipeline's runs and a run's produced events; ``gsi2`` all runs; ``gsi3`` the submitted runs still
#: active (the reconciliation sweep's), and runs made before ``PENDING#`` items that still wait for submission.
INDEXES = ("gsi1", "gsi2", "gsi3")
#: What the indexes project: keys only. A run changes state three or four times and an asset's count with
#: every batch; with the whole item projected each change would be written to every index again (the
#: listings read the items themselves, by key, in batches of 100).
INDEX_PROJECTION = "KEYS_ONLY"
#: BatchGetItem's and TransactWriteItems' limits.
BATCH_GET_MAX = 100
TRANSACTION_MAX = 100


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
                "Projection": {"ProjectionType": INDEX_PROJECTION},
            }
            for index in INDEXES
        ],
        "BillingMode": "PAY_PER_REQUEST",
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    }


def str_attr(value: str) -> dict[str, str]:
    """A string attribute value."""
    return {"S": value}


def num_attr(value: int) -> dict[str, str]:
    """A number attribute value."""
    return {"N": str(value)}


def plain_value(attr: Mapping[str, Any]) -> Any:
    """A typed attribute value as a plain Python value."""
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
        return [plain_value(v) for v in value]
    if kind == "M":
        return {k: plain_value(v) for k, v in value.items()}
    if kind == "SS":
        return sorted(value)
    raise ValueError(f"unexpected DynamoDB attribute type {kind}")


def plain_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item (typed attributes) as plain Python values."""
    return {k: plain_value(v) for k, v in item.items()}


# ---- key layout shared by aggregates (a transition writes queue entries and runs together) ----------


def queue_pk(pipeline: str, key: str) -> str:
    """The partition of a queue's entries and seen markers."""
    return f"QUEUE#{pipeline}#{key}"


#: The sort-key prefix of a queue's seen sets (``seen_set_sks``).
SEEN_SET_PREFIX = "SEENSET#"


def seen_set_sks(event: AssetEvent) -> tuple[str, str, str]:
    """The sort keys of the sets that may mark ``event`` seen in a queue's partition, coarsest first.

    The sets of its second, of its tenth of a second and of its hundredth: a queue fills the coarsest with room,
    so that a slow queue's events of a second share one item and a busy one's still share one per slice.
    """
    at = event.timestamp.astimezone(UTC)
    second = f"{SEEN_SET_PREFIX}{at.strftime('%Y%m%dT%H%M%S')}"
    hundredths = f"{at.microsecond // 10_000:02d}"
    return second, f"{second}.{hundredths[0]}", f"{second}.{hundredths}"


def seen_set_ids(item: Mapping[str, Any] | None) -> frozenset[str]:
    """The event ids a seen set's item holds (none for a missing item, or one whose ids were all taken out)."""
    return frozenset((item or {}).get("ids", {}).get("SS", ()))


def active_key(pipeline: str) -> dict[str, Any]:
    """The key of a pipeline's ``#ACTIVE`` item (its active-run counter and paused flag)."""
    return {"pk": str_attr(f"PIPELINE#{pipeline}"), "sk": str_attr("#ACTIVE")}


def paused_condition() -> str:
    """The condition, on a pipeline's ``#ACTIVE`` item, that it is not paused (``:unpaused`` is false)."""
    return "(attribute_not_exists(paused) OR paused = :unpaused)"


def generation_prefix(generation: int) -> str:
    """The sort-key prefix of a generation's entries (a batch run consumes a generation)."""
    return f"G#{generation:010d}#"


def entry_sk(generation: int, entry: QueueEntry) -> str:
    """The sort key of a queue entry: its generation, then its event's (timestamp, id)."""
    return f"{generation_prefix(generation)}E#{format_timestamp(entry.event.timestamp)}#{entry.event.id}"


def asset_pk(uri: str) -> str:
    """The partition of an asset's summary, alias resolutions and (its first shard of) events."""
    return f"ASSET#{uri}"


def event_pk(uri: str, shard: int = 0) -> str:
    """The partition of one shard of an asset's events: shard 0 is the asset's own, ``ASSET#<uri>``.

    A busy asset's events spread over more partitions (DynamoDB writes at most 1,000 units a second to one
    partition key); the others are ``EVENTS#<n>#<uri>``.
    """
    return asset_pk(uri) if shard == 0 else f"EVENTS#{shard}#{uri}"


def event_shard(event_id: str, shards: int) -> int:
    """Which of ``shards`` partitions an event goes to: fixed by its id, so a retried write lands in the same one."""
    if shards <= 1:
        return 0
    return int(hashlib.sha256(event_id.encode()).hexdigest()[:8], 16) % shards


def event_sk(event: AssetEvent) -> str:
    """The sort key of an event's item: time-ordered, then by id."""
    return f"EVENT#{format_timestamp(event.timestamp)}#{event.id}"


def failed_item(error: BaseException) -> dict[str, Any] | None:
    """The item a failed conditional write found (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), if any."""
    cause = error.__cause__
    if isinstance(cause, ClientError):
        item = cause.response.get("Item")
        return dict(item) if item else None
    return None


def condition_failed(error: BaseException) -> bool:
    """Whether a single-item write was refused by its condition (not a lost race with a transaction)."""
    cause = error.__cause__
    return isinstance(cause, ClientError) and (
        cause.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
    )


def cancellation_reasons(error: BaseException) -> list[dict[str, Any]]:
    """The per-item reasons of a cancelled transaction (empty for any other error)."""
    cause = error.__cause__
    if isinstance(cause, ClientError):
        return [dict(r) for r in cause.response.get("CancellationReasons") or []]
    return []


class InvalidPageTokenError(ValueError):
    """A page token that is not one this store gave out (or names another listing's key)."""


def epoch_seconds(moment: datetime) -> int:
    """Seconds since the epoch, as DynamoDB's TTL attribute takes them."""
    return int(moment.timestamp())


def page_token(key: Mapping[str, Any] | None) -> str | None:
    """The opaque ``next`` token of a page: its ``LastEvaluatedKey``, encoded (None on the last page)."""
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode()


def start_key(token: str | None) -> dict[str, Any] | None:
    """The ``ExclusiveStartKey`` a page token names (None for the first page).

    Raises:
        InvalidPageTokenError: the token does not decode to a key.
    """
    if not token:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError) as exc:
        raise InvalidPageTokenError("invalid page token; use the 'next' value of the previous page") from exc
    if not isinstance(decoded, dict):
        raise InvalidPageTokenError("invalid page token; use the 'next' value of the previous page")
    return decoded


class DynamoDbTable:
    """The table and the calls on it; each aggregate's store (events, queues, runs, quarantine) extends it.

    ``event_shards`` spreads the events of busy assets over that many partitions (``{uri: n}``; an asset not
    named keeps one). Every function and job of a deployment must be given the same value.
    """

    def __init__(
        self, client: Any, table_name: str, *, event_shards: Mapping[str, int] | None = None
    ) -> None:
        self._db = client
        self.table = table_name
        self.event_shards = {uri: int(n) for uri, n in (event_shards or {}).items() if int(n) > 1}

    def shards_of(self, uri: str) -> int:
        """How many partitions an asset's events are spread over."""
        return self.event_shards.get(uri, 1)

    def event_key(self, event: AssetEvent) -> dict[str, Any]:
        """The key of an event's item: its asset's shard, sorted by (timestamp, id)."""
        return {
            "pk": str_attr(event_pk(event.asset, event_shard(event.id, self.shards_of(event.asset)))),
            "sk": str_attr(event_sk(event)),
        }

    def trigger_refs(self, run: Run) -> dict[str, Any]:
        """A run's trigger as references to its events' items.

        The run item stays small: it changes state three or four times, and each change is billed by the
        item's size. A missed deadline or a failed run (a synthetic entry) has no item to reference: a run
        with one keeps its (few) triggering events inline.
        """
        if any(entry_kind(e) != "event" for e in run.triggering_events):
            grouped = sorted(run.triggering_asset_events.items())
            return {"inline": {uri: [e.to_json() for e in events] for uri, events in grouped}}
        return {"events": [[k["pk"]["S"], k["sk"]["S"]] for k in map(self.event_key, run.triggering_events)]}

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
        start = start_key(token)
        if start:
            args["ExclusiveStartKey"] = start
        try:
            page = self._call("query", **args)
        except ClientError as exc:
            # A token that decodes but names another listing's key reaches DynamoDB, which refuses it.
            if start and exc.response.get("Error", {}).get("Code") == "ValidationException":
                raise InvalidPageTokenError(
                    "invalid page token; use the 'next' value of the previous page"
                ) from exc
            raise
        return page.get("Items", []), page_token(page.get("LastEvaluatedKey"))

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

    def _batch_get(
        self, keys: Sequence[Mapping[str, Any]], *, consistent: bool = True
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Items by key (typed attributes), ``BATCH_GET_MAX`` keys a request; missing keys are left out.

        Raises:
            StoreUnavailableError: throttled, or keys stayed unprocessed after every retry.
        """
        found: dict[tuple[str, str], dict[str, Any]] = {}
        unique = list({(k["pk"]["S"], k["sk"]["S"]): k for k in keys}.values())
        for start in range(0, len(unique), BATCH_GET_MAX):
            request: dict[str, Any] = {
                self.table: {"Keys": unique[start : start + BATCH_GET_MAX], "ConsistentRead": consistent}
            }
            for attempt in range(8):
                answer = self._call("batch_get_item", RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table, []):
                    found[(item["pk"]["S"], item["sk"]["S"])] = item
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
                time.sleep(
                    min(0.05 * 2**attempt, 1.0)
                )  # DynamoDB hands back what it could not read: throttled
            else:
                raise StoreUnavailableError("batch_get_item: keys left unprocessed after retries")
        return found

    def _items_by_keys(self, index_items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The base items of index entries (keys only), in the entries' order; entries without an item are left out."""
        found = self._batch_get([{"pk": i["pk"], "sk": i["sk"]} for i in index_items])
        return [found[key] for key in ((i["pk"]["S"], i["sk"]["S"]) for i in index_items) if key in found]

    def _put_all(self, items: Sequence[Mapping[str, Any]]) -> None:
        """Unconditional puts of up to 25 items in one BatchWriteItem (what it hands back is written again).

        Raises:
            StoreUnavailableError: throttled, or items stayed unprocessed after every retry.
        """
        if self._put_many(items):
            raise StoreUnavailableError("batch_write_item: items left unprocessed after retries")

    def _put_many(self, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Unconditional puts of up to 25 items in one BatchWriteItem; the items still unwritten after retries.

        DynamoDB hands back what a throttled partition refused; it is put again, with a growing pause.

        Raises:
            StoreUnavailableError: the whole request throttled every time.
        """
        request: dict[str, Any] = {self.table: [{"PutRequest": {"Item": dict(i)}} for i in items]}
        for attempt in range(8):
            if not request:
                return []
            answer = self._call("batch_write_item", RequestItems=request)
            request = answer.get("UnprocessedItems") or {}
            if request:
                time.sleep(min(0.05 * 2**attempt, 1.0))
        return [w["PutRequest"]["Item"] for w in request.get(self.table, [])]

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        found = self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": str_attr(pk), "sk": str_attr(sk)},
            ConsistentRead=True,
        )
        return plain_item(found["Item"]) if "Item" in found else None
