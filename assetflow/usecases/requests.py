"""The operator's requests (HTTP API and CLI): validated at the door, then carried out.

Validation refuses what the store could not keep (DESIGN §5's shapes, ``core.limits``) with a message that
says what to fix; the actions emit an asset event (Airflow's ``POST /assets/events``) or clear a queue.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from assetflow.core.catalog import Catalog
from assetflow.core.errors import AssetflowError, NotFoundError
from assetflow.core.events import AssetEvent, derive_id
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.limits import (
    MAX_EXTRA_DEPTH,
    MAX_REQUEST_BODY_BYTES,
    MAX_REQUEST_EXTRA_BYTES,
    LimitError,
    nesting_exceeds,
)
from assetflow.core.limits import (
    check_partition_key as check_key_limits,
)
from assetflow.core.pipeline import Pipeline
from assetflow.core.uri import AssetUriError, normalize_uri
from assetflow.ports import EventStore, ExtrasStore, ExtraTooLargeError, QueueStore
from assetflow_job.contract import MAX_VERSION_CHARS, REF_KEY

#: Longest ``Idempotency-Key`` (the IETF draft's keys are UUID-sized; this leaves room for others).
MAX_IDEMPOTENCY_KEY_LENGTH = 255
#: Bounds of a page's ``limit``.
MIN_LIMIT, MAX_LIMIT = 1, 1000
DEFAULT_LIMIT = 100

_EMIT_FIELDS = frozenset({"uri", "extra", "partition_key", "version"})


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
    #: The data version the event stands for (``skip_unchanged`` pipelines run once per version).
    version: str | None = None


@dataclass(frozen=True)
class EmitResult:
    """The stored event; ``created`` is False for a replay of an idempotency key; ``warning`` for operators."""

    event: AssetEvent
    created: bool
    warning: str | None = None


# ---- validation ----------------------------------------------------------------------------------------


def _refuse_constant(name: str) -> float:
    raise RequestError(f"the body contains {name}, which is not JSON; send numbers as finite values or null")


def parse_body(body: bytes | str | None, *, limit: int = MAX_REQUEST_BODY_BYTES) -> Any:
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


def check_extra(extra: object, *, limit: int | None = MAX_REQUEST_EXTRA_BYTES) -> dict[str, Any]:
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
    if nesting_exceeds(extra, MAX_EXTRA_DEPTH):
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
    """Validate a partition key: absent (None) or a key within ``core.limits``' rules.

    Raises:
        RequestError: the key is not a non-empty string, too long, or holds a refused character.
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise RequestError(f"partition_key must be a non-empty string or null, got {_json_type(key)}")
    try:
        return check_key_limits(key)
    except LimitError as exc:
        raise RequestError(str(exc)) from exc


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
    """Validate the body of ``POST /assets/events``: ``{"uri", "extra"?, "partition_key"?, "version"?}``.

    ``by_reference``: an extras store will take large extras (``emit_event``), so ``MAX_REQUEST_EXTRA_BYTES`` does
    not apply.

    Raises:
        RequestError: not an object, unknown fields, or an invalid field (the message names it).
        PayloadTooLargeError: ``extra`` is over ``MAX_REQUEST_EXTRA_BYTES`` (without ``by_reference``).
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
        extra=check_extra(doc.get("extra"), limit=None if by_reference else MAX_REQUEST_EXTRA_BYTES),
        partition_key=check_partition_key(doc.get("partition_key")),
        version=check_version(doc.get("version")),
    )


def check_version(version: object) -> str | None:
    """A data version: None, or a string of 1 to ``MAX_VERSION_CHARS`` characters.

    Raises:
        RequestError: anything else.
    """
    if version is None:
        return None
    if not isinstance(version, str) or not 0 < len(version) <= MAX_VERSION_CHARS:
        raise RequestError(
            f"version must be a string of 1 to {MAX_VERSION_CHARS} characters or null, got {_json_type(version)}"
        )
    return version


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


_ASSUMED_ROLE = re.compile(r"^(arn:[^:]+:sts::\d{12}:assumed-role/[^/]+)/[^/]+$")


def caller_identity(principal: str) -> str:
    """The part of a caller's ARN that stays the same across its sessions: what idempotency keys belong to.

    An assumed role's ARN ends with the session's name (``.../assumed-role/Role/botocore-session-17...``), new
    for every session: a client that retries a request after its credentials were refreshed is still the same
    client. Every other principal (IAM users, federated users, the CLI's ``cli:<user>``) is its own identity.
    """
    found = _ASSUMED_ROLE.match(principal)
    return found.group(1) if found else principal


def pipeline_of(catalog: Catalog, pipeline_id: str) -> Pipeline:
    """The catalog's pipeline of that id.

    Raises:
        NotFoundError: no such pipeline; the message lists some that exist.
    """
    pipeline = catalog.pipelines.get(pipeline_id)
    if pipeline is None:
        known = ", ".join(list(catalog.pipelines)[:20]) or "none"
        raise NotFoundError(f"no pipeline {pipeline_id!r} in the catalog (pipelines: {known})")
    return pipeline


def emit_event(
    store: EventStore,
    catalog: Catalog,
    request: EmitRequest,
    *,
    principal: str,
    request_id: str,
    now: datetime,
    idempotency_key: str | None = None,
    allow_unknown: bool = True,
    extras: ExtrasStore | None = None,
) -> EmitResult:
    """Create an asset event from the API or the CLI (Airflow's ``POST /assets/events``).

    The evaluator picks the event up from the table's stream, as any other event. With an
    ``idempotency_key`` the event id is derived from (the caller's identity, key) and the store keeps a dedupe
    record for 15 days, so a client's retry returns the first event (``created`` False) rather than making a
    second one, also from a new session of the same role (``caller_identity``). Without it the id is derived
    from ``request_id``.

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
        identity = caller_identity(principal)
        event_id = derive_id("api", identity, key)
        dedupe_key: str | None = f"api#{identity}#{key}"
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
        version=request.version,
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
        or stored.version != event.version
    ):
        raise IdempotencyKeyReusedError(
            "this Idempotency-Key already created an event with a different uri, extra or partition_key "
            f"(event {stored.id}); use a new key for a new event"
        )
    return EmitResult(stored, created, warning if created else None)


def clear_queue(
    store: QueueStore, catalog: Catalog, pipeline_id: str, *, uri: str | None = None
) -> dict[str, Any]:
    """Drop a pipeline's queued events (of one asset with ``uri``); returns what was dropped.

    Raises:
        NotFoundError: no such pipeline in the catalog.
        RequestError: ``uri`` is invalid.
        ConflictError: the queue kept changing under load; try again.
    """
    pipeline = pipeline_of(catalog, pipeline_id)
    asset = check_uri(uri) if uri is not None else None
    dropped = store.clear_queue(pipeline, asset)
    return {"pipeline": pipeline.id, "uri": asset, "deleted": dropped}


__all__ = [
    "DEFAULT_LIMIT",
    "EmitRequest",
    "EmitResult",
    "IdempotencyKeyReusedError",
    "PayloadTooLargeError",
    "RequestError",
    "ViewError",
    "caller_identity",
    "check_extra",
    "check_idempotency_key",
    "check_partition_key",
    "check_uri",
    "clear_queue",
    "emit_event",
    "parse_body",
    "parse_emit_request",
    "parse_limit",
    "pipeline_of",
]
