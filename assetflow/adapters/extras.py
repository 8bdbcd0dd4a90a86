"""Event extras too large to copy around: kept whole in S3, and referenced from the event that carries them.

An event's ``extra`` is copied into DynamoDB items (400 KB each: the event, its dedupe record, queue entries,
inline run triggers) and into EventBridge listener events (256 KB per entry). Above ``INLINE_EXTRA_BYTES`` of
canonical JSON, ingest and the API write the whole extra to ``s3://<runs bucket>/extras/<event id>/<sha256>.json``
and the event carries a reference instead::

    {"extra_ref": {"uri": "s3://...", "bytes": 123456, "sha256": "<hex>"}, "message": FACTS}

``message`` (the source facts of a watcher's event) stays inline, bulky facts summarised; the job-side
helper resolves the reference back to the whole extra, checking its size and SHA-256. Nothing is truncated:
above ``MAX_EXTRA_BYTES_BY_REFERENCE`` a message is quarantined and an API request refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.errors import AssetflowError, StoreUnavailableError
from assetflow.core.jsonvalue import canonical_json
from assetflow.core.limits import (
    FACT_SUMMARY_BYTES,
    INLINE_EXTRA_BYTES,
    MAX_EXTRA_BYTES_BY_REFERENCE,
    MAX_INLINE_FACTS_BYTES,
)
from assetflow.ports import ExtraTooLargeError
from assetflow_job.contract import REF_KEY

#: Where the extras go in the runs bucket.
EXTRAS_PREFIX = "extras/"

_SHA256 = re.compile(r"[0-9a-f]{64}")
# S3 answers these for overload or a transient fault; the message (or request) is retried.
_RETRYABLE_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling", "503", "500"}
)


class ExtrasUnavailableError(StoreUnavailableError):
    """S3 refused or failed to store an extra (throttled, unreachable); retrying later may succeed."""


class ExtraReferenceError(AssetflowError, ValueError):
    """A reference is malformed, or the object it names is missing or not the one it describes."""


@dataclass(frozen=True)
class ExtraRef:
    """Where an extra is kept, with its exact size and SHA-256 (of the object's bytes)."""

    uri: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        """The reference as events carry it: ``{"uri", "bytes", "sha256"}``."""
        return {"uri": self.uri, "bytes": self.size, "sha256": self.sha256}

    @classmethod
    def from_json(cls, doc: object) -> ExtraRef:
        """Read a reference.

        Raises:
            ExtraReferenceError: not ``{"uri": "s3://bucket/key", "bytes": int, "sha256": hex}``.
        """
        if not isinstance(doc, Mapping):
            raise ExtraReferenceError(f"an extra reference must be an object, got {type(doc).__name__}")
        uri, size, digest = doc.get("uri"), doc.get("bytes"), doc.get("sha256")
        if not isinstance(uri, str) or not uri.startswith("s3://") or "/" not in uri[len("s3://") :]:
            raise ExtraReferenceError(f"an extra reference needs an s3://bucket/key uri, got {uri!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ExtraReferenceError(f"an extra reference needs a byte count, got {size!r}")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ExtraReferenceError(f"an extra reference needs a hex SHA-256, got {digest!r}")
        return cls(uri=uri, size=size, sha256=digest)

    @property
    def bucket_and_key(self) -> tuple[str, str]:
        """The S3 bucket and key of the object."""
        bucket, _, key = self.uri[len("s3://") :].partition("/")
        return bucket, key


def reference_of(extra: Mapping[str, Any]) -> ExtraRef | None:
    """The reference an event's extra holds, or None when the extra is inline.

    Raises:
        ExtraReferenceError: the extra has a malformed ``extra_ref``.
    """
    if REF_KEY not in extra:
        return None
    return ExtraRef.from_json(extra[REF_KEY])


@dataclass(frozen=True)
class Detached:
    """An extra that goes by reference: the object to write before its event, and the reference to it."""

    ref: ExtraRef
    data: bytes

    @property
    def uri(self) -> str:
        """Where the extra goes."""
        return self.ref.uri

    @property
    def size(self) -> int:
        """Its size in bytes (canonical JSON)."""
        return self.ref.size


def summarise_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Source facts small enough to keep inline next to a reference (bulky ones become their size)."""
    kept = dict(facts)
    if len(canonical_json(kept)) <= MAX_INLINE_FACTS_BYTES:
        return kept
    for name, value in facts.items():
        size = len(canonical_json(value))
        if size > FACT_SUMMARY_BYTES:
            kept[name] = {"omitted_bytes": size}
    return kept


class S3ExtrasStore:
    """Keeps extras above the inline limit in S3, one object per (event, content).

    The key is ``extras/<event id>/<sha256>.json``: a redelivered message (same event id) with the same
    content writes the same object again, and one whose content differs (SQS's receive count is a fact)
    cannot overwrite the object that its first delivery's event references.
    """

    def __init__(
        self,
        client: Any,
        bucket: str,
        *,
        prefix: str = EXTRAS_PREFIX,
        inline_limit: int = INLINE_EXTRA_BYTES,
        ceiling: int = MAX_EXTRA_BYTES_BY_REFERENCE,
    ) -> None:
        if not bucket:
            raise ValueError("the extras store needs a bucket")
        self._s3 = client
        self.bucket = bucket
        self.prefix = prefix
        self.inline_limit = inline_limit
        self.ceiling = ceiling

    def place(
        self, event_id: str, extra: Mapping[str, Any], *, keep: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], Detached | None]:
        """The extra an event carries, and the object to write first when it goes by reference.

        Within the inline limit the extra is returned as it is (and None). Above it, the reference extra
        (``{"extra_ref": ..., **keep}``) is returned with the detached object; nothing is written yet.

        Raises:
            ExtraTooLargeError: the extra is over the ceiling.
        """
        data = canonical_json(extra).encode("ascii")
        if len(data) <= self.inline_limit:
            return dict(extra), None
        if len(data) > self.ceiling:
            raise ExtraTooLargeError(len(data), self.ceiling)
        digest = hashlib.sha256(data).hexdigest()
        ref = ExtraRef(
            uri=f"s3://{self.bucket}/{self.prefix}{event_id}/{digest}.json", size=len(data), sha256=digest
        )
        return {**(keep or {}), REF_KEY: ref.to_json()}, Detached(ref=ref, data=data)

    def write(self, detached: Detached) -> None:
        """Write a detached extra (again, harmlessly, for a redelivery of the same content).

        Raises:
            ExtrasUnavailableError: S3 throttled or could not be reached; retry the message or request.
            botocore.exceptions.ClientError: S3 refused the write (access, a missing bucket).
        """
        bucket, key = detached.ref.bucket_and_key
        try:
            self._s3.put_object(
                Bucket=bucket,
                Key=key,
                Body=detached.data,
                ContentType="application/json",
                ChecksumSHA256=_base64_sha256(detached.ref.sha256),
            )
        except BotoCoreError as exc:
            raise ExtrasUnavailableError(f"storing the extra at {detached.ref.uri} failed: {exc}") from exc
        except ClientError as exc:
            if _error_code(exc) in _RETRYABLE_CODES:
                raise ExtrasUnavailableError(
                    f"storing the extra at {detached.ref.uri} failed: {_error_code(exc)}"
                ) from exc
            raise

    def read(self, ref: ExtraRef) -> dict[str, Any]:
        """The whole extra a reference names, checked against its size and SHA-256.

        Raises:
            ExtraReferenceError: the object is missing, or its size or digest differ from the reference's.
            ExtrasUnavailableError: S3 throttled or could not be reached.
        """
        bucket, key = ref.bucket_and_key
        try:
            data: bytes = self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except BotoCoreError as exc:
            raise ExtrasUnavailableError(f"reading the extra at {ref.uri} failed: {exc}") from exc
        except ClientError as exc:
            if _error_code(exc) in ("NoSuchKey", "404", "NoSuchBucket"):
                raise ExtraReferenceError(f"the extra at {ref.uri} is missing") from exc
            if _error_code(exc) in _RETRYABLE_CODES:
                raise ExtrasUnavailableError(
                    f"reading the extra at {ref.uri} failed: {_error_code(exc)}"
                ) from exc
            raise
        return verified_extra(ref, data)

    def load(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        """An event's whole extra: read back from S3 when it holds a reference, else a copy of it.

        Raises:
            ExtraReferenceError: the reference is malformed, or its object is missing or altered.
            ExtrasUnavailableError: S3 throttled or could not be reached.
        """
        ref = reference_of(extra)
        return dict(extra) if ref is None else self.read(ref)


def verified_extra(ref: ExtraRef, data: bytes) -> dict[str, Any]:
    """Parse an extra's object after checking it is the one the reference describes.

    Raises:
        ExtraReferenceError: the size or SHA-256 differ, or the object is not a JSON object.
    """
    if len(data) != ref.size:
        raise ExtraReferenceError(
            f"the extra at {ref.uri} is {len(data)} bytes, its reference says {ref.size}"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != ref.sha256:
        raise ExtraReferenceError(
            f"the extra at {ref.uri} has SHA-256 {digest}, its reference says {ref.sha256}"
        )
    extra = json.loads(data)
    if not isinstance(extra, dict):
        raise ExtraReferenceError(f"the extra at {ref.uri} is not a JSON object")
    return extra


def _base64_sha256(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


__all__ = [
    "EXTRAS_PREFIX",
    "Detached",
    "ExtraRef",
    "ExtraReferenceError",
    "ExtrasUnavailableError",
    "S3ExtrasStore",
    "reference_of",
    "summarise_facts",
    "verified_extra",
]
