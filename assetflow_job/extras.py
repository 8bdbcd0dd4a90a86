"""Extras stored by reference: an event's whole extra, read back from S3 and checked, so jobs never see refs.

Ingest and the API keep an extra larger than the inline limit in S3 and give the event
``{"extra_ref": {"uri": "s3://...", "bytes": n, "sha256": hex}, ...}`` instead (docs/contracts.md). The
helper replaces such an extra by the object's content once its size and SHA-256 match the reference.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from assetflow_job.contract import REF_KEY
from assetflow_job.errors import ExtraReferenceError
from assetflow_job.events import AssetEvent
from assetflow_job.storage import boto3_client, endpoint_url, is_s3_uri, read_bytes

logger = logging.getLogger(__name__)

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _reference(extra: Mapping[str, Any]) -> tuple[str, int, str] | None:
    ref = extra.get(REF_KEY)
    if ref is None:
        return None
    uri = ref.get("uri") if isinstance(ref, Mapping) else None
    size = ref.get("bytes") if isinstance(ref, Mapping) else None
    digest = ref.get("sha256") if isinstance(ref, Mapping) else None
    if (
        not isinstance(uri, str)
        or not uri
        or not isinstance(size, int)
        or isinstance(size, bool)
        or not isinstance(digest, str)
        or not _SHA256.fullmatch(digest)
    ):
        raise ExtraReferenceError(f"malformed extra reference {ref!r}: needs 'uri', 'bytes' and 'sha256'")
    return uri, size, digest


class ExtraResolver:
    """Resolves events whose extra is stored by reference, reading S3 (``AWS_ENDPOINT_URL_S3`` honoured)."""

    def __init__(self, s3_client: Any = None) -> None:
        self._s3_client = s3_client

    def resolve_extra(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        """Return the whole extra: ``extra`` itself when inline, else the referenced object's content.

        Raises:
            ExtraReferenceError: the reference is malformed, or its object is missing, of another size or
                SHA-256, or not a JSON object.

        """
        ref = _reference(extra)
        if ref is None:
            return dict(extra)
        return self._read(*ref)

    def event(self, event: AssetEvent) -> AssetEvent:
        """Return ``event`` with its whole extra (the same event when its extra is inline).

        Raises:
            ExtraReferenceError: see ``resolve_extra``.

        """
        if REF_KEY not in event.extra:
            return event
        return dataclasses.replace(event, extra=self.resolve_extra(event.extra))

    def _read(self, uri: str, size: int, digest: str) -> dict[str, Any]:
        if self._s3_client is None and is_s3_uri(uri):
            self._s3_client = boto3_client("s3", endpoint=endpoint_url("S3"))
        try:
            data = read_bytes(uri, s3_client=self._s3_client)
        except FileNotFoundError as exc:
            raise ExtraReferenceError(f"the extra at {uri} is missing") from exc
        except Exception as exc:
            # botocore's ClientError (NoSuchKey, AccessDenied) without importing botocore here.
            raise ExtraReferenceError(f"the extra at {uri} cannot be read: {exc}") from exc
        if len(data) != size:
            raise ExtraReferenceError(f"the extra at {uri} is {len(data)} bytes; its reference says {size}")
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise ExtraReferenceError(f"the extra at {uri} has SHA-256 {actual}; its reference says {digest}")
        try:
            document = json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise ExtraReferenceError(f"the extra at {uri} is not JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise ExtraReferenceError(f"the extra at {uri} is not a JSON object")
        logger.info("extra read by reference uri=%s bytes=%d", uri, size)
        return document


class ResolvingEventReader:
    """An EventReader whose events come with their whole extras (``inlet_events``)."""

    def __init__(self, reader: Any, resolver: ExtraResolver) -> None:
        self._reader = reader
        self._resolver = resolver

    def read_page(self, uri: str, cursor: Any) -> tuple[list[AssetEvent], Any]:
        """Read a page from the wrapped reader and resolve its events' extras.

        Raises:
            ExtraReferenceError: an event's extra cannot be resolved.

        """
        events, following = self._reader.read_page(uri, cursor)
        return [self._resolver.event(event) for event in events], following

    def alias_assets(self, alias: str) -> list[str]:
        """The assets an alias resolved to (the wrapped reader's answer)."""
        return list(self._reader.alias_assets(alias))
