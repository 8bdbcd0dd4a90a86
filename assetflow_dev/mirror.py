"""Objects landing in a watched bucket, copied to the bucket's local data folder before ingest sees them.

Locally ``s3://`` data paths are folders (local Spark has no ``s3a://``), while objects are put into moto's S3.
A pipeline that an ``S3ObjectCreated`` watcher triggers reads the object it was told about: the runtime copies
each created object into the folder its bucket maps to before the watcher's ingest stores the event, so the
run finds the file where its ``s3://`` path says, as on AWS.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def object_created(body: str) -> tuple[str, str] | None:
    """The (bucket, key) of an S3 ``Object Created`` EventBridge event, or None for anything else."""
    try:
        event = json.loads(body)
        if event.get("source") != "aws.s3" or event.get("detail-type") != "Object Created":
            return None
        detail = event["detail"]
        return str(detail["bucket"]["name"]), str(detail["object"]["key"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def local_path(path_map: Mapping[str, str], bucket: str, key: str) -> Path | None:
    """Where ``s3://bucket/key`` lives locally, or None when the bucket has no data folder (or the key escapes it)."""
    folder = path_map.get(f"s3://{bucket}")
    if folder is None:
        return None
    root = Path(folder).resolve()
    target = (root / key).resolve()
    return target if target.is_relative_to(root) and target != root else None


def mirroring(
    handler: Callable[[dict[str, Any], Any], Any], s3: Any, path_map: Mapping[str, str]
) -> Callable[[dict[str, Any], Any], Any]:
    """``handler`` (an SQS ingest of an S3 watcher) that first copies each created object to its data folder.

    A copy that fails (the object was deleted meanwhile) is logged and the event is ingested all the same: the
    event says what was created, and the run decides what a missing file means.
    """

    def handle(event: dict[str, Any], context: Any) -> Any:
        for record in event.get("Records") or []:
            found = object_created(str(record.get("body") or ""))
            target = local_path(path_map, *found) if found else None
            if found is None or target is None:
                continue
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(found[0], found[1], str(target))
            except Exception as exc:  # any failure: the event still says what was created
                logger.warning(
                    "could not copy a created object to its data folder",
                    extra={"bucket": found[0], "key": found[1], "error": str(exc)},
                )
        return handler(event, context)

    return handle
