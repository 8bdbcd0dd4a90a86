"""Run-context documents and event dicts for the tests, shaped as docs/contracts.md says."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

BUCKET = "s3://assetflow-demo/"


def event(
    asset: str,
    event_id: str,
    timestamp: str,
    *,
    payload: Any = None,
    extra: Mapping[str, Any] | None = None,
    partition_key: str | None = None,
    source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An asset event dict; ``payload`` makes it a watcher's event."""
    body = dict(extra or {})
    if payload is not None:
        body["payload"] = payload
        body.setdefault("message", {"queue": "q", "message_id": f"m-{event_id}"})
    return {
        "asset": asset,
        "id": event_id,
        "timestamp": timestamp,
        "extra": body,
        "source": dict(source or {"type": "watcher", "watcher": "w", "kind": "sqs"}),
        "partition_key": partition_key,
    }


def asset_outlet(uri: str) -> dict[str, str]:
    return {"type": "asset", "uri": uri}


def alias_outlet(name: str) -> dict[str, str]:
    return {"type": "alias", "name": name}


def context_document(
    *,
    pipeline: str,
    run_id: str,
    outlet_metadata_uri: str,
    events: Sequence[Mapping[str, Any]] = (),
    outlets: Sequence[Mapping[str, str]] = (),
    inlets: Sequence[Mapping[str, str]] = (),
    partition_key: str | None = None,
    path_map: Mapping[str, str] | None = None,
    created_at: str = "2026-11-21T12:00:00.000000Z",
) -> dict[str, Any]:
    """A version-1 run context; ``events`` are grouped by asset as ``triggering_asset_events``."""
    triggering: dict[str, list[Mapping[str, Any]]] = {}
    for item in events:
        triggering.setdefault(item["asset"], []).append(item)
    return {
        "format": "assetflow.run-context",
        "version": 1,
        "run_id": run_id,
        "pipeline": pipeline,
        "partition_key": partition_key,
        "created_at": created_at,
        "triggering_asset_events": triggering,
        "outlets": list(outlets),
        "inlets": list(inlets),
        "outlet_metadata_uri": outlet_metadata_uri,
        "events_table": {"name": "assetflow-events", "region": "us-east-1", "endpoint_url": None},
        "path_map": dict(path_map or {}),
    }


def write_context(folder: Path, name: str, **kwargs: Any) -> tuple[Path, Path]:
    """Write a context whose outlet metadata goes beside it; return (context path, metadata path)."""
    folder.mkdir(parents=True, exist_ok=True)
    metadata = folder / f"{name}-outlets.json"
    context = folder / f"{name}-context.json"
    document = context_document(outlet_metadata_uri=str(metadata), **kwargs)
    context.write_text(json.dumps(document, indent=2))
    return context, metadata


def read_metadata(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document
