"""Job-side helper for assetflow's PySpark jobs: run context, triggering/inlet events, outlet metadata."""

from __future__ import annotations

from assetflow_job.context import RunContext, load_context, run
from assetflow_job.errors import (
    AssetflowJobError,
    ExtraReferenceError,
    RunContextError,
    UndeclaredInletError,
    UndeclaredOutletError,
)
from assetflow_job.events import AssetEvent
from assetflow_job.extras import ExtraResolver
from assetflow_job.inlets import DynamoDbEventReader, EventReader, LazyAssetEvents
from assetflow_job.refs import AliasRef, AssetRef, Metadata

__all__ = [
    "AliasRef",
    "AssetEvent",
    "AssetRef",
    "AssetflowJobError",
    "DynamoDbEventReader",
    "EventReader",
    "ExtraReferenceError",
    "ExtraResolver",
    "LazyAssetEvents",
    "Metadata",
    "RunContext",
    "RunContextError",
    "UndeclaredInletError",
    "UndeclaredOutletError",
    "load_context",
    "run",
]
