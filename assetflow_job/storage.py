"""Reading and writing small text objects at an ``s3://`` URI, a ``file://`` URI or a local path.

A small document can also be read from the URI itself (``data:application/json;base64,...``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import tempfile
from typing import Any
from urllib.parse import unquote, urlsplit

from assetflow_job.contract import INLINE_CONTEXT_PREFIX

logger = logging.getLogger(__name__)


def endpoint_url(service_env_name: str, explicit: str | None = None) -> str | None:
    """Return the endpoint for boto3: explicit, else AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL.

    Recent botocore reads these variables itself; passing them explicitly keeps older boto3 builds
    (such as a release image's) pointed at the same endpoint. ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS``
    turns the variables off, as it does in botocore.
    """
    if explicit:
        return explicit
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    specific = os.environ.get(f"AWS_ENDPOINT_URL_{service_env_name}")
    return specific or os.environ.get("AWS_ENDPOINT_URL") or None


def boto3_client(service: str, *, region: str | None = None, endpoint: str | None = None) -> Any:
    """Create a boto3 client, importing boto3 only now: jobs that touch no AWS API never need it."""
    import boto3  # imported lazily on purpose

    kwargs: dict[str, Any] = {}
    if region:
        kwargs["region_name"] = region
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    return boto3.client(service, **kwargs)


def is_s3_uri(uri: str) -> bool:
    """Whether ``uri`` names an S3 object (``s3://``, ``s3a://`` or ``s3n://``)."""
    return uri.split("://", 1)[0].lower() in ("s3", "s3a", "s3n") and "://" in uri


def split_s3_uri(uri: str) -> tuple[str, str]:
    """Return the bucket and key of an S3 URI.

    Raises:
        ValueError: when the URI has no bucket or no key.

    """
    parts = urlsplit(uri)
    key = parts.path.lstrip("/")
    if not parts.netloc or not key:
        raise ValueError(f"an S3 object URI needs a bucket and a key: {uri!r}")
    return parts.netloc, key


def local_path(uri: str) -> str:
    """Return the filesystem path of a ``file://`` URI or a plain path."""
    if uri.startswith("file://"):
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"only local file URIs are supported: {uri!r}")
        return unquote(parts.path)
    if "://" in uri:
        raise ValueError(f"unsupported URI scheme (expected s3://, file:// or a path): {uri!r}")
    return uri


def read_bytes(uri: str, *, s3_client: Any = None) -> bytes:
    """Read an object's bytes.

    Raises:
        FileNotFoundError: for a missing local file; botocore's ClientError for a missing S3 object.

    """
    if uri.startswith(INLINE_CONTEXT_PREFIX):
        # A document small enough to travel in the job's arguments (base64: no quoting to go wrong).
        try:
            return base64.b64decode(uri[len(INLINE_CONTEXT_PREFIX) :], validate=True)
        except (ValueError, binascii.Error) as exc:
            raise ValueError(f"a data: URI that is not base64: {exc}") from exc
    if is_s3_uri(uri):
        bucket, key = split_s3_uri(uri)
        client = s3_client or boto3_client("s3", endpoint=endpoint_url("S3"))
        body: bytes = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        return body
    with open(local_path(uri), "rb") as handle:
        return handle.read()


def read_text(uri: str, *, s3_client: Any = None) -> str:
    """Read a UTF-8 text object.

    Raises:
        FileNotFoundError: for a missing local file; botocore's ClientError for a missing S3 object.

    """
    return read_bytes(uri, s3_client=s3_client).decode("utf-8")


def write_text(uri: str, text: str, *, s3_client: Any = None, content_type: str = "application/json") -> None:
    """Write a UTF-8 text object; a local file is replaced atomically and its folder created."""
    if is_s3_uri(uri):
        bucket, key = split_s3_uri(uri)
        client = s3_client or boto3_client("s3", endpoint=endpoint_url("S3"))
        client.put_object(Bucket=bucket, Key=key, Body=text.encode("utf-8"), ContentType=content_type)
        return
    path = local_path(uri)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, tmp_path = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise
