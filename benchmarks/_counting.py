"""Counting what a workload would be billed for: AWS requests by service and operation, DynamoDB capacity units,
SQS and EventBridge 64 KB chunks, S3 request classes, and Lambda invocations with their GB-seconds.

Attach a ``RequestCounter`` to boto3 clients (``counter.attach(client)``): it registers botocore event hooks
on the client's ``meta.events``, so the code under measurement runs unchanged:

- ``provide-client-params``: asks DynamoDB for ``ReturnConsumedCapacity`` on every operation that takes it
  (``INDEXES``: table and global secondary indexes), and notes what a request's billing depends on (the
  entries of an EventBridge ``PutEvents``, the items of a transaction);
- ``after-call``: one call per operation, whether it failed, the capacity DynamoDB reports, the payload of
  SQS messages received (SQS bills each 64 KB chunk of a request's or response's payload as a request).

DynamoDB Local reports a ``TransactWriteItems`` as if it held one item (2 units for 1 or 5 small items alike),
where AWS bills two write units per KB of every item (prepare and commit) and the index entries the items
write: transactions are priced from their request instead (``transaction_write_units``: each item's size,
rounded up to the KB, twice, plus a unit per index entry an item's keys put or remove: a transaction's changes
reach the global secondary indexes after it completes, as ordinary index writes), and what DynamoDB
Local reported is kept apart as ``reported_write_units``. DynamoDB does not report capacity for a write whose
condition failed (or a cancelled transaction), yet AWS bills those writes. They are estimated instead, at the
minimum of one write unit per item (two in a transaction), and kept apart as ``estimated_write_units``.
Likewise DynamoDB Local reports no units for a read that finds nothing, where AWS bills its minimum (one unit
per request or key, half for an eventually consistent read): the difference is ``estimated_read_units``.
Lambda invocations are not AWS calls here (the runtime, or a benchmark, calls the handlers directly): record
them with ``record_invocation``.

``counts()`` gives the totals in the shape ``benchmarks.cost.cost_per_million`` prices. The burst benchmark
(issue 6, item 2) uses the same counter: attach it to the clients of the runtime's dependencies and read
``counts()`` after the burst.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

#: SQS requests and EventBridge events are billed per 64 KB chunk of payload.
CHUNK_BYTES = 64 * 1024

#: S3 request classes for pricing: PUT, COPY, POST, LIST (and their kin) vs GET, SELECT and the rest of the
#: reads. DELETE and lifecycle transitions to Standard are free.
S3_TIER1 = frozenset(
    {
        "PutObject",
        "CopyObject",
        "PostObject",
        "ListObjects",
        "ListObjectsV2",
        "ListObjectVersions",
        "ListBuckets",
        "ListMultipartUploads",
        "ListParts",
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
        "CreateBucket",
        "PutBucketPolicy",
        "PutBucketVersioning",
        "PutObjectTagging",
    }
)
S3_FREE = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})

#: DynamoDB operations that write (for estimating the units of failed conditional writes).
_DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"})
#: DynamoDB reads and the least AWS bills for each (per request; BatchGetItem per key).
_DYNAMODB_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem"})


@dataclass
class OperationTally:
    """What one service operation cost so far."""

    calls: int = 0
    errors: int = 0
    #: SQS: 64 KB chunks of the larger of request and response; EventBridge PutEvents: entries by 64 KB.
    billed_requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    #: Writes that failed their condition: AWS bills them, DynamoDB does not report them (see the module doc).
    estimated_write_units: float = 0.0
    #: Reads reported below AWS's minimum (DynamoDB Local reports 0 for a miss; AWS bills one unit per
    #: request or key, half for an eventually consistent read).
    estimated_read_units: float = 0.0
    #: What DynamoDB Local reported for transactions (priced from their requests instead).
    reported_write_units: float = 0.0


@dataclass
class WriteTally:
    """What one kind of DynamoDB write cost so far (``write_labels``): items written and their write units."""

    writes: int = 0
    write_units: float = 0.0


@dataclass
class FunctionTally:
    """Invocations of one Lambda function and the duration they would be billed for."""

    invocations: int = 0
    billed_ms: int = 0
    gb_seconds: float = 0.0
    records: int = 0


def _capacities(parsed: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    consumed = parsed.get("ConsumedCapacity")
    if consumed is None:
        return []
    return list(consumed) if isinstance(consumed, list) else [consumed]


def _units(capacity: Mapping[str, Any], key: str) -> float:
    # With INDEXES, DynamoDB reports the table's and each index's units and their sum in CapacityUnits;
    # ReadCapacityUnits/WriteCapacityUnits only split them when the operation both reads and writes.
    value = capacity.get(key)
    return float(value) if isinstance(value, int | float) else 0.0


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    return len(json.dumps(value, default=str).encode())


#: The index key attributes of assetflow's table (``<index>pk`` / ``<index>sk``): an item written with them, or
#: an update that sets or removes them, writes an index entry.
_INDEX_KEYS = frozenset(f"gsi{n}{part}" for n in (1, 2, 3) for part in ("pk", "sk"))


def _attribute_bytes(value: Any) -> int:
    """The size DynamoDB counts for a typed attribute value (close enough: strings and numbers dominate)."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return _size(value)
    ((kind, inner),) = value.items()
    if kind in ("S", "B"):
        return _size(inner)
    if kind == "N":
        return len(str(inner)) // 2 + 2
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _attribute_bytes(v) for v in inner)
    if kind == "M":
        return 3 + sum(len(k) + 1 + _attribute_bytes(v) for k, v in inner.items())
    return _size(inner)


def _item_bytes(item: Mapping[str, Any]) -> int:
    return sum(len(name) + _attribute_bytes(value) for name, value in item.items())


def transaction_write_units(items: Any) -> float:
    """The write units AWS bills for a TransactWriteItems request, from the request itself.

    Two units per KB of each item (rounded up per item), and one per index entry it writes (a put of an item
    with index keys, an update that sets or removes them): DynamoDB propagates a completed transaction's
    changes to the global secondary indexes afterwards, as ordinary writes of the (keys-only) index entries.
    An update's item size is taken as its key plus the values it sets, at least a KB's worth: AWS bills the
    larger of the item before and after, which the request does not say (assetflow keeps its updated items
    small).
    """
    units = 0.0
    for entry in items or []:
        (action, body), *_ = entry.items()
        if action == "Put":
            item = body.get("Item") or {}
            units += 2 * max(1, math.ceil(_item_bytes(item) / 1024))
            units += len(_INDEX_KEYS & set(item)) // 2
        elif action == "Update":
            size = _item_bytes(body.get("Key") or {}) + sum(
                _attribute_bytes(v) for v in (body.get("ExpressionAttributeValues") or {}).values()
            )
            units += 2 * max(1, math.ceil(size / 1024))
            expression = str(body.get("UpdateExpression") or "")
            touched = {k for k in _INDEX_KEYS if k in expression}
            units += len(touched) // 2
        elif action in ("Delete", "ConditionCheck"):
            units += 2
    return units


#: Item kinds by key prefix (README's data model), the first match winning: (key, prefix, kind).
_KINDS = (
    ("pk", "DEDUPE#", "dedupe"),
    ("sk", "EVENT#", "event"),
    ("sk", "COUNTED#", "counted"),
    ("sk", "SEEN#", "seen"),
    ("sk", "SEENSET#", "seen"),
    ("pk", "QUEUE#", "queue-entry"),
    ("pk", "RUN#", "run"),
    ("pk", "PENDING#", "pending"),
    ("pk", "JOBRUN#", "job-run"),
    ("pk", "ASSET#", "asset"),
    ("pk", "ALIAS#", "asset"),
)


def item_kind(item: Mapping[str, Any]) -> str:
    """What a stored item is, from its keys; "pipeline" for the rest (heads, counters, watermarks)."""
    keys = {"pk": item["pk"]["S"], "sk": item["sk"]["S"]}
    return next((kind for key, prefix, kind in _KINDS if keys[key].startswith(prefix)), "pipeline")


#: The clauses of an update expression, each followed by its comma-separated actions.
_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b", re.IGNORECASE)


def _top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses (``if_not_exists(a, :b)`` stays one action)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [p.strip() for p in [*parts, current] if p.strip()]


def updated_attributes(expression: str, names: Mapping[str, str] | None = None) -> list[str]:
    """The attributes an update expression sets, removes, adds to or deletes from, by name, sorted."""
    names = names or {}
    found: set[str] = set()
    pieces = _CLAUSE.split(expression)
    for clause, body in zip(pieces[1::2], pieces[2::2], strict=True):
        for action in _top_level(body):
            target = action.split("=", 1)[0] if clause.upper() == "SET" else action.split()[0]
            found.add(names.get(target.strip(), target.strip()))
    return sorted(found)


def _write_label(action: str, body: Mapping[str, Any]) -> str:
    """One write's label: its action and the kind of item it writes (an update: the attributes it changes)."""
    item = body.get("Item") or body.get("Key") or {}
    kind = item_kind(item) if {"pk", "sk"} <= set(item) else "?"
    if action in ("Update", "UpdateItem"):
        changed = updated_attributes(
            str(body.get("UpdateExpression") or ""), body.get("ExpressionAttributeNames")
        )
        return f"{action} {kind} ({', '.join(changed)})"
    return f"{action} {kind}"


def write_labels(operation: str, params: Mapping[str, Any]) -> list[tuple[str, float | None]]:
    """What a DynamoDB write request writes, as (label, write units) per part; None: the units DynamoDB reports.

    A transaction's items are priced one by one (``transaction_write_units``), labelled "... in a transaction";
    a BatchWriteItem is one part named after the kinds of items it puts or deletes.
    """
    if operation == "TransactWriteItems":
        labels = []
        for entry in params.get("TransactItems") or []:
            (action, body), *_ = entry.items()
            labels.append(
                (f"{_write_label(action, body)} in a transaction", transaction_write_units([entry]))
            )
        return labels
    if operation == "BatchWriteItem":
        kinds: set[str] = set()
        for requests in (params.get("RequestItems") or {}).values():
            for request in requests:
                (action, body), *_ = request.items()
                item = body.get("Item") or body.get("Key") or {}
                kinds.add(f"{action.removesuffix('Request')} {item_kind(item)}")
        return [(f"BatchWriteItem ({', '.join(sorted(kinds))})", None)]
    return [(_write_label(operation, params), None)]


def _sqs_payload(fields: Mapping[str, Any]) -> int:
    """The message payload of an SQS request's parameters or response: bodies and message attributes."""
    messages = [fields, *(fields.get("Entries") or []), *(fields.get("Messages") or [])]
    return sum(
        _size(m.get("MessageBody") or m.get("Body")) + _size(m.get("MessageAttributes")) for m in messages
    )


class RequestCounter:
    """Tallies requests per (service, operation), DynamoDB capacity, chunks and Lambda invocations.

    Thread-safe: clients shared by threads, or several clients, may report to one counter.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._operations: dict[tuple[str, str], OperationTally] = {}
        self._functions: dict[str, FunctionTally] = {}
        self._writes: dict[str, WriteTally] = {}
        self._log_bytes = 0
        self._paused = 0

    # ---- wiring ----------------------------------------------------------------------------------------

    def attach(self, client: Any) -> Any:
        """Count every call ``client`` makes from now on; returns the client (``counter.attach(boto3...)``)."""
        events = client.meta.events
        events.register("provide-client-params", self._on_params, unique_id=f"count-params-{id(self)}")
        events.register("after-call", self._on_after_call, unique_id=f"count-after-{id(self)}")
        return client

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Calls made inside the block are not counted (set-up and checks around the measured work)."""
        with self._lock:
            self._paused += 1
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1

    def _on_params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        service = model.service_model.service_name
        if service == "dynamodb":
            if "ReturnConsumedCapacity" in model.input_shape.members:
                params.setdefault("ReturnConsumedCapacity", "INDEXES")
            if model.name in _DYNAMODB_WRITES or model.name == "TransactWriteItems":
                context["count_write_labels"] = write_labels(model.name, params)
            if model.name == "TransactWriteItems":
                context["count_items"] = len(params.get("TransactItems") or [])
                # Its items priced one by one for their labels: the transaction's price is their sum.
                context["count_transaction_units"] = sum(
                    units or 0.0 for _, units in context["count_write_labels"]
                )
            elif model.name == "BatchWriteItem":
                context["count_items"] = sum(len(v) for v in (params.get("RequestItems") or {}).values())
            elif model.name == "BatchGetItem":
                requests = (params.get("RequestItems") or {}).values()
                context["count_min_read_units"] = sum(
                    len(r.get("Keys") or []) * (1.0 if r.get("ConsistentRead") else 0.5) for r in requests
                )
            elif model.name in _DYNAMODB_READS:
                context["count_min_read_units"] = 1.0 if params.get("ConsistentRead") else 0.5
        elif service == "sqs":
            context["count_payload_bytes"] = _sqs_payload(params)
        elif service == "events" and model.name == "PutEvents":
            context["count_chunks"] = sum(
                max(1, math.ceil(_size(entry) / CHUNK_BYTES)) for entry in params.get("Entries") or []
            )

    def _on_after_call(
        self, http_response: Any, parsed: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        service, operation = model.service_model.service_name, model.name
        failed = "Error" in parsed or getattr(http_response, "status_code", 200) >= 300
        with self._lock:
            if self._paused:
                return
            tally = self._operations.setdefault((service, operation), OperationTally())
            tally.calls += 1
            tally.errors += int(failed)
            if service == "sqs":
                biggest = max(int(context.get("count_payload_bytes", 0)), _sqs_payload(parsed))
                tally.billed_requests += max(1, math.ceil(biggest / CHUNK_BYTES))
            elif service == "events":
                tally.billed_requests += int(context.get("count_chunks", 1))
            else:
                tally.billed_requests += 1
            if service != "dynamodb":
                return
            capacities = _capacities(parsed)
            read = write = 0.0
            for capacity in capacities:
                if "ReadCapacityUnits" in capacity or "WriteCapacityUnits" in capacity:
                    read += _units(capacity, "ReadCapacityUnits")
                    write += _units(capacity, "WriteCapacityUnits")
                elif operation in _DYNAMODB_WRITES or operation == "TransactWriteItems":
                    write += _units(capacity, "CapacityUnits")
                else:
                    read += _units(capacity, "CapacityUnits")
            if operation == "TransactWriteItems" and not failed:
                tally.reported_write_units += write
                write = float(context.get("count_transaction_units", write))
            tally.read_units += read
            tally.write_units += write
            minimum = float(context.get("count_min_read_units", 0.0))
            if operation in _DYNAMODB_READS and read < minimum:
                tally.estimated_read_units += minimum - read
            estimated = 0.0
            if failed and not capacities:
                if operation == "TransactWriteItems":
                    estimated = 2.0 * int(context.get("count_items", 1))
                elif operation in _DYNAMODB_WRITES:
                    estimated = float(context.get("count_items", 1))
                tally.estimated_write_units += estimated
            labels = context.get("count_write_labels")
            if labels:
                self._tally_writes(labels, write + estimated)

    def _tally_writes(self, labels: list[tuple[str, float | None]], billed: float) -> None:
        """Split a write request's units, as its operation's tally counted them, over what it wrote.

        A request priced from its parts (a transaction) gives each part its own price; otherwise (one item, a
        batch, a failed transaction's per-item estimate) the parts share the units evenly.
        """
        priced = sum(units or 0.0 for _, units in labels)
        by_part = priced > 0 and math.isclose(priced, billed)
        for label, units in labels:
            tally = self._writes.setdefault(label, WriteTally())
            tally.writes += 1
            tally.write_units += (units or 0.0) if by_part else billed / len(labels)

    # ---- what is not an AWS call here ------------------------------------------------------------------

    def record_invocation(self, function: str, *, memory_mb: int, seconds: float, records: int = 0) -> None:
        """Count one Lambda invocation of ``function`` that ran ``seconds`` (billed per started millisecond)."""
        billed_ms = max(1, math.ceil(seconds * 1000))
        with self._lock:
            if self._paused:
                return
            tally = self._functions.setdefault(function, FunctionTally())
            tally.invocations += 1
            tally.billed_ms += billed_ms
            tally.gb_seconds += memory_mb / 1024 * billed_ms / 1000
            tally.records += records

    def record_log_bytes(self, count: int) -> None:
        """Count bytes the functions logged (CloudWatch Logs ingestion is billed per GB)."""
        with self._lock:
            if not self._paused:
                self._log_bytes += count

    # ---- reading ---------------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything counted so far."""
        with self._lock:
            self._operations.clear()
            self._functions.clear()
            self._writes.clear()
            self._log_bytes = 0

    def operations(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{service: {operation: tally}}``, sorted, as plain JSON."""
        with self._lock:
            found: dict[str, dict[str, dict[str, float]]] = {}
            for (service, operation), tally in sorted(self._operations.items()):
                found.setdefault(service, {})[operation] = asdict(tally)
            return found

    def writes(self) -> dict[str, dict[str, float]]:
        """``{label: {"writes", "write_units"}}`` for every kind of DynamoDB write (``write_labels``), by units."""
        with self._lock:
            ranked = sorted(self._writes.items(), key=lambda pair: (-pair[1].write_units, pair[0]))
            return {label: asdict(tally) for label, tally in ranked}

    def functions(self) -> dict[str, dict[str, float]]:
        """``{function: {"invocations", "billed_ms", "gb_seconds", "records"}}``."""
        with self._lock:
            return {name: asdict(tally) for name, tally in sorted(self._functions.items())}

    def counts(self) -> dict[str, float]:
        """The totals that ``benchmarks.cost.cost_per_million`` prices (see ``cost.COUNT_KEYS``)."""
        with self._lock:
            operations = dict(self._operations)
            functions = dict(self._functions)
            log_bytes = self._log_bytes

        def total(service: str, field: str, only: frozenset[str] | None = None) -> float:
            return float(
                sum(
                    getattr(tally, field)
                    for (svc, op), tally in operations.items()
                    if svc == service and (only is None or op in only)
                )
            )

        s3_all = total("s3", "calls")
        s3_tier1 = total("s3", "calls", S3_TIER1)
        s3_free = total("s3", "calls", S3_FREE)
        return {
            "lambda_invocations": float(sum(f.invocations for f in functions.values())),
            "lambda_gb_seconds": float(sum(f.gb_seconds for f in functions.values())),
            "dynamodb_read_units": total("dynamodb", "read_units")
            + total("dynamodb", "estimated_read_units"),
            "dynamodb_write_units": total("dynamodb", "write_units")
            + total("dynamodb", "estimated_write_units"),
            "dynamodb_requests": total("dynamodb", "calls"),
            "sqs_requests": total("sqs", "billed_requests"),
            "s3_tier1_requests": s3_tier1,
            "s3_tier2_requests": s3_all - s3_tier1 - s3_free,
            "eventbridge_events": total("events", "billed_requests", frozenset({"PutEvents"})),
            "emr_api_requests": total("emr-serverless", "calls"),
            "kms_requests": total("kms", "calls"),
            "log_bytes": float(log_bytes),
        }

    def snapshot(self) -> dict[str, Any]:
        """Everything counted: the priced totals, per operation and per function (for a benchmark's JSON)."""
        return {
            "counts": self.counts(),
            "operations": self.operations(),
            "writes": self.writes(),
            "functions": self.functions(),
        }


__all__ = [
    "CHUNK_BYTES",
    "FunctionTally",
    "OperationTally",
    "RequestCounter",
    "WriteTally",
    "item_kind",
    "transaction_write_units",
    "updated_attributes",
    "write_labels",
]
