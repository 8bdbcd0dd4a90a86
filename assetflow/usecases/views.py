"""The operator views and actions of DESIGN §5 over the store, shared by the HTTP API and the CLI."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from assetflow.adapters.dynamodb import DynamoDbStore, Page
from assetflow.adapters.extras import REF_KEY, ExtraTooLargeError, S3ExtrasStore
from assetflow.core.catalog import Catalog
from assetflow.core.errors import AssetflowError, NotFoundError
from assetflow.core.events import AssetEvent, derive_id
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.pipeline import Pipeline
from assetflow.core.uri import AssetUriError, normalize_uri

#: Largest ``extra`` of an API or CLI event without an extras store, as compact UTF-8 JSON. The event is
#: stored whole in a DynamoDB item (400 KB), copied into queue entries and run records, and published to
#: EventBridge (256 KB per entry): 64 KiB keeps an event with its URI and source well inside every one of
#: those limits. With an extras store, extras over ``extras.INLINE_EXTRA_BYTES`` are stored by reference.
MAX_EXTRA_BYTES = 64 * 1024
#: Largest request body the API reads without an extras store; leaves room for a pretty-printed ``extra`` of
#: MAX_EXTRA_BYTES.
MAX_BODY_BYTES = 128 * 1024
#: Largest request body the API reads with an extras store (extras stored by reference): Lambda takes
#: requests of at most 6 MB, and a base64-encoded body grows by a third.
MAX_BODY_BYTES_BY_REFERENCE = 4 * 1024 * 1024
#: Deepest nesting of ``extra``: deeper documents are almost always mistakes and cost recursion.
MAX_EXTRA_DEPTH = 32
#: Partition keys become part of queue keys (DynamoDB sort keys, 1 KB at most).
MAX_PARTITION_KEY_LENGTH = 256
#: Longest ``Idempotency-Key`` (the IETF draft's keys are UUID-sized; this leaves room for others).
MAX_IDEMPOTENCY_KEY_LENGTH = 255
#: Bounds of a page's ``limit``.
MIN_LIMIT, MAX_LIMIT = 1, 1000
DEFAULT_LIMIT = 100
DEFAULT_RUNS_LIMIT = 50

#: A page size as an option gives it (int) or a query parameter does (text); None for the default.
Limit = int | str | None

_EMIT_FIELDS = frozenset({"uri", "extra", "partition_key"})
_RUN_READERS = 8


class ViewError(AssetflowError):
    """A request the views refuse; ``status`` and ``code`` give its HTTP status and error code."""

    status = 400
    code = "bad_request"


class RequestError(ViewError, ValueError):
    """The request is malformed (a bad URI, body, limit or page token); the message says what to fix."""


class PayloadTooLargeError(ViewError):
    """The request body or the event's ``extra`` is over its size limit."""

    status = 413
    code = "payload_too_large"


class IdempotencyKeyReusedError(ViewError):
    """An ``Idempotency-Key`` came back with a different request than the one it first created."""

    status = 422
    code = "idempotency_key_reused"


@dataclass(frozen=True)
class EmitRequest:
    """A validated request to create an asset event (the body of ``POST /assets/events``)."""

    uri: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    partition_key: str | None = None


@dataclass(frozen=True)
class EmitResult:
    """The stored event; ``created`` is False for a replay of an idempotency key; ``warning`` for operators."""

    event: AssetEvent
    created: bool
    warning: str | None = None


# ---- request validation --------------------------------------------------------------------------------


def _refuse_constant(name: str) -> float:
    raise RequestError(f"the body contains {name}, which is not JSON; send numbers as finite values or null")


def parse_body(body: bytes | str | None, *, limit: int = MAX_BODY_BYTES) -> Any:
    """Parse a request body as strict JSON (no NaN or Infinity), within ``limit`` bytes.

    Raises:
        PayloadTooLargeError: the body is over ``limit``.
        RequestError: the body is empty, not UTF-8 or not JSON.
    """
    try:
        raw = body.encode() if isinstance(body, str) else (body or b"")
    except UnicodeEncodeError as exc:
        raise RequestError(
            f"the body is not valid Unicode text (an unpaired surrogate at {exc.start})"
        ) from exc
    if len(raw) > limit:
        raise PayloadTooLargeError(f"the body is {len(raw)} bytes, over the limit of {limit}")
    if not raw.strip():
        raise RequestError('the body is empty; send a JSON object such as {"uri": "s3://bucket/key"}')
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as exc:
        raise RequestError(f"the body is not UTF-8: {exc.reason} at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise RequestError(
            f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError as exc:
        raise RequestError("the body is nested too deeply") from exc


def check_uri(uri: object, *, what: str = "uri") -> str:
    """Validate an asset URI with the core's rules and return its normalised form.

    Raises:
        RequestError: the URI is missing or invalid; the message is the rule's own.
    """
    if uri is None or uri == "":
        raise RequestError(f"{what} is required: the asset's URI, e.g. 's3://bucket/key'")
    try:
        return normalize_uri(uri)  # type: ignore[arg-type]  # non-str values get the rule's own message
    except AssetUriError as exc:
        raise RequestError(str(exc)) from exc


def _depth(value: Any) -> int:
    # Iterative, so a hostile document cannot exhaust the interpreter's stack here.
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_EXTRA_DEPTH:
                stack.extend(
                    (child, level + 1) for child in (node.values() if isinstance(node, dict) else node)
                )
    return deepest


def check_extra(extra: object, *, limit: int | None = MAX_EXTRA_BYTES) -> dict[str, Any]:
    """Validate an event's ``extra``: a JSON object within ``limit`` bytes and ``MAX_EXTRA_DEPTH`` levels.

    ``limit`` None leaves the size to the extras store (``emit_event`` with ``extras``).

    Raises:
        RequestError: not an object, not plain JSON or not Unicode, nested too deeply, or with the key
            reserved for references (``extra_ref``).
        PayloadTooLargeError: over ``limit``.
    """
    if extra is None:
        return {}
    if not isinstance(extra, dict):
        raise RequestError(f"extra must be a JSON object, got {_json_type(extra)}")
    if REF_KEY in extra:
        raise RequestError(f"extra must not have the key {REF_KEY!r}: it marks extras stored by reference")
    if _depth(extra) > MAX_EXTRA_DEPTH:
        raise RequestError(f"extra is nested more than {MAX_EXTRA_DEPTH} levels deep")
    try:
        encoded = json.dumps(extra, allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:
        raise RequestError(
            "extra holds text that is not valid Unicode (an unpaired surrogate escape such as \\ud800)"
        ) from exc
    except (TypeError, ValueError) as exc:
        raise RequestError(
            f"extra must be plain JSON (objects, arrays, strings, finite numbers): {exc}"
        ) from exc
    if limit is not None and len(encoded) > limit:
        raise PayloadTooLargeError(f"extra is {len(encoded)} bytes as JSON, over the limit of {limit}")
    return extra


def check_partition_key(key: object) -> str | None:
    """Validate a partition key: absent (None) or a non-empty string of at most 256 characters.

    Raises:
        RequestError: the key is not a non-empty string, or too long.
    """
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip():
        raise RequestError(f"partition_key must be a non-empty string or null, got {_json_type(key)}")
    if len(key) > MAX_PARTITION_KEY_LENGTH:
        raise RequestError(
            f"partition_key is {len(key)} characters, over the limit of {MAX_PARTITION_KEY_LENGTH}"
        )
    try:
        key.encode()
    except UnicodeEncodeError as exc:
        raise RequestError("partition_key is not valid Unicode text (an unpaired surrogate escape)") from exc
    return key


def check_idempotency_key(key: str | None) -> str | None:
    """Validate an ``Idempotency-Key``: printable ASCII, 1 to 255 characters (None when not given).

    Raises:
        RequestError: empty, too long, or with characters outside printable ASCII.
    """
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY_LENGTH or not all(" " <= c <= "~" for c in key):
        raise RequestError(
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, e.g. a UUID"
        )
    return key


def parse_emit_request(doc: object, *, by_reference: bool = False) -> EmitRequest:
    """Validate the body of ``POST /assets/events``: ``{"uri", "extra"?, "partition_key"?}``.

    ``by_reference``: an extras store will take large extras (``emit_event``), so ``MAX_EXTRA_BYTES`` does
    not apply.

    Raises:
        RequestError: not an object, unknown fields, or an invalid field (the message names it).
        PayloadTooLargeError: ``extra`` is over ``MAX_EXTRA_BYTES`` (without ``by_reference``).
    """
    if not isinstance(doc, dict):
        raise RequestError(
            f'the body must be a JSON object such as {{"uri": "s3://bucket/key"}}, got {_json_type(doc)}'
        )
    unknown = sorted(set(doc) - _EMIT_FIELDS)
    if unknown:
        raise RequestError(f"unknown fields {unknown}; the fields are {sorted(_EMIT_FIELDS)}")
    return EmitRequest(
        uri=check_uri(doc.get("uri")),
        extra=check_extra(doc.get("extra"), limit=None if by_reference else MAX_EXTRA_BYTES),
        partition_key=check_partition_key(doc.get("partition_key")),
    )


def parse_limit(value: object, default: int = DEFAULT_LIMIT) -> int:
    """A page size from a query parameter or option: an integer from 1 to 1000 (``default`` when absent).

    Raises:
        RequestError: not an integer in range.
    """
    if value is None or value == "":
        return default
    try:
        limit = int(str(value).strip())
    except ValueError:
        limit = 0
    if isinstance(value, bool) or not MIN_LIMIT <= limit <= MAX_LIMIT or str(limit) != str(value).strip():
        raise RequestError(f"limit must be an integer from {MIN_LIMIT} to {MAX_LIMIT}, got {value!r}")
    return limit


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, float) and not math.isfinite(value):
        return "a non-finite number"
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


@contextlib.contextmanager
def _paging(token: str | None) -> Iterator[None]:
    # A token that decodes but names another listing's key reaches DynamoDB, which refuses it.
    try:
        yield
    except ValueError as exc:
        raise RequestError(str(exc)) from exc
    except ClientError as exc:
        if token and exc.response.get("Error", {}).get("Code") == "ValidationException":
            raise RequestError("invalid page token; use the 'next' value of the previous page") from exc
        raise


def _pipeline(catalog: Catalog, pipeline_id: str) -> Pipeline:
    pipeline = catalog.pipelines.get(pipeline_id)
    if pipeline is None:
        known = ", ".join(list(catalog.pipelines)[:20]) or "none"
        raise NotFoundError(f"no pipeline {pipeline_id!r} in the catalog (pipelines: {known})")
    return pipeline


# ---- actions -------------------------------------------------------------------------------------------


def emit_event(
    store: DynamoDbStore,
    catalog: Catalog,
    request: EmitRequest,
    *,
    principal: str,
    request_id: str,
    now: datetime,
    idempotency_key: str | None = None,
    allow_unknown: bool = True,
    extras: S3ExtrasStore | None = None,
) -> EmitResult:
    """Create an asset event from the API or the CLI (Airflow's ``POST /assets/events``).

    The evaluator picks the event up from the table's stream, as any other event. With an
    ``idempotency_key`` the event id is derived from (principal, key) and the store keeps a dedupe record
    for 15 days, so a client's retry returns the first event (``created`` False) rather than making a
    second one. Without it the id is derived from ``request_id``.

    An asset neither in the catalog nor seen before is accepted with a warning, as Airflow creates unknown
    assets with a warning (no pipeline can consume it until one schedules on it or an alias resolves to it);
    ``allow_unknown=False`` refuses it instead.

    With ``extras``, an extra over its inline limit is written there first and the event carries a reference
    (``{"extra_ref": {"uri", "bytes", "sha256"}}``); a replayed idempotency key writes nothing.

    Raises:
        NotFoundError: the asset is unknown and ``allow_unknown`` is False.
        IdempotencyKeyReusedError: the key already created an event with another URI, extra or partition key.
        PayloadTooLargeError: the extra is over the extras store's ceiling.
        StoreUnavailableError: throttled (the store, or S3: ExtrasUnavailableError); retry (with the same
            idempotency key).
    """
    key = check_idempotency_key(idempotency_key)
    warning = None
    if request.uri not in catalog.assets and not store.list_events(request.uri, limit=1).items:
        if not allow_unknown:
            raise NotFoundError(f"asset {request.uri!r} is not in the catalog and has no events")
        warning = (
            f"asset {request.uri!r} is not declared in the catalog and had no events: it was created; "
            "no pipeline schedules on it directly (check the URI for typos)"
        )
    if key is not None:
        event_id = derive_id("api", principal, key)
        dedupe_key: str | None = f"api#{principal}#{key}"
    else:
        event_id = derive_id("api", request_id)
        dedupe_key = None
    extra, detached = dict(request.extra), None
    if extras is not None:
        try:
            extra, detached = extras.place(event_id, request.extra)
        except ExtraTooLargeError as exc:
            raise PayloadTooLargeError(str(exc)) from exc
    event = AssetEvent(
        asset=request.uri,
        id=event_id,
        timestamp=now,
        extra=extra,
        source={"type": "api", "principal": principal},
        partition_key=request.partition_key,
    )
    previous = store.find_dedupe(dedupe_key) if detached is not None and dedupe_key is not None else None
    if previous is not None:
        stored, created = previous, False
    else:
        if extras is not None and detached is not None:
            extras.write(detached)
        stored, created = store.put_event(event, dedupe_key=dedupe_key, now=now)
    if not created and (
        stored.asset != event.asset
        or thaw_json(stored.extra) != thaw_json(event.extra)
        or stored.partition_key != event.partition_key
    ):
        raise IdempotencyKeyReusedError(
            "this Idempotency-Key already created an event with a different uri, extra or partition_key "
            f"(event {stored.id}); use a new key for a new event"
        )
    return EmitResult(stored, created, warning if created else None)


def clear_queue(
    store: DynamoDbStore, catalog: Catalog, pipeline_id: str, *, uri: str | None = None
) -> dict[str, Any]:
    """Drop a pipeline's queued events (of one asset with ``uri``); returns what was dropped.

    Raises:
        NotFoundError: no such pipeline in the catalog.
        RequestError: ``uri`` is invalid.
        ConflictError: the queue kept changing under load; try again.
    """
    pipeline = _pipeline(catalog, pipeline_id)
    asset = check_uri(uri) if uri is not None else None
    dropped = store.clear_queue(pipeline, asset)
    return {"pipeline": pipeline.id, "uri": asset, "deleted": dropped}


# ---- views ---------------------------------------------------------------------------------------------


def list_assets(
    store: DynamoDbStore, *, limit: Limit = DEFAULT_LIMIT, token: str | None = None
) -> dict[str, Any]:
    """Assets (``uri``, ``name``, ``created_at``, ``last_event_at``, ``event_count``), by URI, paged.

    Raises:
        RequestError: a bad limit or page token.
    """
    size = parse_limit(limit)
    with _paging(token):
        return store.list_assets(limit=size, token=token or None).to_json()


def list_events(
    store: DynamoDbStore, uri: object, *, limit: Limit = DEFAULT_LIMIT, token: str | None = None
) -> dict[str, Any]:
    """An asset's events, newest first, paged (an asset without events gives an empty page).

    Raises:
        RequestError: a bad URI, limit or page token.
    """
    asset, size = check_uri(uri), parse_limit(limit)
    with _paging(token):
        return store.list_events(asset, limit=size, token=token or None).to_json()


def list_queue(store: DynamoDbStore, catalog: Catalog, pipeline_id: str) -> dict[str, Any]:
    """A pipeline's queued events (``pipeline``, ``queue_key``, ``aliases``, ``event``), oldest first.

    Raises:
        NotFoundError: no such pipeline in the catalog.
    """
    pipeline = _pipeline(catalog, pipeline_id)
    return Page(store.list_queue(pipeline.id), None).to_json()


def list_runs(
    store: DynamoDbStore,
    catalog: Catalog | None,
    pipeline_id: str | None = None,
    *,
    limit: Limit = DEFAULT_RUNS_LIMIT,
    token: str | None = None,
) -> dict[str, Any]:
    """Runs, newest first, of one pipeline (checked against the catalog when given) or of all, paged.

    Each run carries its ``triggering_asset_events``, so that list items have the shape of DESIGN §5.

    Raises:
        NotFoundError: no such pipeline in the catalog.
        RequestError: a bad limit or page token.
    """
    if pipeline_id is not None and catalog is not None:
        _pipeline(catalog, pipeline_id)
    size = parse_limit(limit, DEFAULT_RUNS_LIMIT)
    with _paging(token):
        page = store.list_runs(pipeline_id, limit=size, token=token or None)
    ids = [item["run_id"] for item in page.items]
    # One read per run for its triggering events; a few at a time keeps a page of 1000 in seconds.
    with ThreadPoolExecutor(max_workers=_RUN_READERS) as pool:
        runs = list(pool.map(lambda run_id: store.get_run(run_id).to_json(), ids))
    return Page(runs, page.next).to_json()


def show_run(store: DynamoDbStore, run_id: str) -> dict[str, Any]:
    """A run with its ``triggering_asset_events`` and the ``produced_asset_events`` of its outlets.

    ``produced_asset_events`` maps each asset URI to the events the run produced, in (timestamp, id)
    order (empty until the run succeeds): lineage both ways (DESIGN §3.9).

    Raises:
        NotFoundError: no such run.
    """
    doc = store.get_run(run_id).to_json()
    produced: dict[str, list[dict[str, Any]]] = {}
    for event in store.events_produced_by(run_id):
        produced.setdefault(event["asset"], []).append(event)
    doc["produced_asset_events"] = {
        uri: sorted(events, key=lambda e: (e["timestamp"], e["id"]))
        for uri, events in sorted(produced.items())
    }
    return doc


def list_quarantine(
    store: DynamoDbStore, *, limit: Limit = DEFAULT_LIMIT, token: str | None = None
) -> dict[str, Any]:
    """Rejected messages (``at``, ``watcher``, ``reason``, ``body``, ``facts``, ``identity``), newest first.

    Raises:
        RequestError: a bad limit or page token.
    """
    size = parse_limit(limit)
    with _paging(token):
        return store.list_quarantine(limit=size, token=token or None).to_json()


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_BODY_BYTES_BY_REFERENCE",
    "MAX_EXTRA_BYTES",
    "EmitRequest",
    "EmitResult",
    "IdempotencyKeyReusedError",
    "PayloadTooLargeError",
    "RequestError",
    "ViewError",
    "check_extra",
    "check_idempotency_key",
    "check_partition_key",
    "check_uri",
    "clear_queue",
    "emit_event",
    "list_assets",
    "list_events",
    "list_quarantine",
    "list_queue",
    "list_runs",
    "parse_body",
    "parse_emit_request",
    "parse_limit",
    "show_run",
]
