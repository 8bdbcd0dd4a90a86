"""Job-side helper for assetflow's PySpark jobs: run context, triggering/inlet events, outlet metadata.

The public names load on first use, so that ``assetflow_job.contract`` (the names the functions share with
this helper) imports nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the names; at run time they load on first use
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

_EXPORTS = {
    "RunContext": "context",
    "load_context": "context",
    "run": "context",
    "AssetflowJobError": "errors",
    "ExtraReferenceError": "errors",
    "RunContextError": "errors",
    "UndeclaredInletError": "errors",
    "UndeclaredOutletError": "errors",
    "AssetEvent": "events",
    "ExtraResolver": "extras",
    "DynamoDbEventReader": "inlets",
    "EventReader": "inlets",
    "LazyAssetEvents": "inlets",
    "AliasRef": "refs",
    "AssetRef": "refs",
    "Metadata": "refs",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'assetflow_job' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"assetflow_job.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
