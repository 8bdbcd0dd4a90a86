"""assetflow: data-aware, event-driven scheduling of PySpark pipelines, serverless on AWS.

Declare assets, watchers and pipelines with the names below (they follow Apache Airflow 3's assets).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assetflow.core.catalog import Catalog
    from assetflow.core.conditions import Asset, AssetAlias, AssetAll, AssetAny
    from assetflow.core.errors import AssetflowError, CatalogError, DefinitionError
    from assetflow.core.metadata import Metadata
    from assetflow.core.pipeline import Pipeline, SparkJob
    from assetflow.core.schedules import (
        AssetOrTimeSchedule,
        DailyMapper,
        HourlyMapper,
        IdentityMapper,
        MonthlyMapper,
        PartitionedAssetSchedule,
        PartitionMapper,
        WeeklyMapper,
    )
    from assetflow.core.uri import AssetUriError
    from assetflow.core.watchers import AssetWatcher, KafkaTopic, MskCluster, SelfManagedKafka, SqsQueue

# Where each name lives: imported on first use, so that importing a Lambda handler (``assetflow.functions``)
# does not load every declaration class it may never need (a cold start pays for what it uses).
_EXPORTS = {
    "Catalog": "assetflow.core.catalog",
    **dict.fromkeys(("Asset", "AssetAlias", "AssetAll", "AssetAny"), "assetflow.core.conditions"),
    **dict.fromkeys(("AssetflowError", "CatalogError", "DefinitionError"), "assetflow.core.errors"),
    "Metadata": "assetflow.core.metadata",
    **dict.fromkeys(("Pipeline", "SparkJob"), "assetflow.core.pipeline"),
    **dict.fromkeys(
        (
            "AssetOrTimeSchedule",
            "DailyMapper",
            "HourlyMapper",
            "IdentityMapper",
            "MonthlyMapper",
            "PartitionedAssetSchedule",
            "PartitionMapper",
            "WeeklyMapper",
        ),
        "assetflow.core.schedules",
    ),
    "AssetUriError": "assetflow.core.uri",
    **dict.fromkeys(
        ("AssetWatcher", "KafkaTopic", "MskCluster", "SelfManagedKafka", "SqsQueue"),
        "assetflow.core.watchers",
    ),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'assetflow' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "Asset",
    "AssetAlias",
    "AssetAll",
    "AssetAny",
    "AssetOrTimeSchedule",
    "AssetUriError",
    "AssetWatcher",
    "AssetflowError",
    "Catalog",
    "CatalogError",
    "DailyMapper",
    "DefinitionError",
    "HourlyMapper",
    "IdentityMapper",
    "KafkaTopic",
    "Metadata",
    "MonthlyMapper",
    "MskCluster",
    "PartitionMapper",
    "PartitionedAssetSchedule",
    "Pipeline",
    "SelfManagedKafka",
    "SparkJob",
    "SqsQueue",
    "WeeklyMapper",
]
__version__ = "0.1.0"
