"""assetflow: data-aware, event-driven scheduling of PySpark pipelines, serverless on AWS.

Declare assets, watchers and pipelines with the names below (they follow Apache Airflow 3's assets).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assetflow.core.catalog import Catalog
    from assetflow.core.conditions import Asset, AssetAlias, AssetAll, AssetAny, AssetRef, at_least, late
    from assetflow.core.cron import TimeSpec
    from assetflow.core.errors import AssetflowError, CatalogError, DefinitionError
    from assetflow.core.expectations import ExpectedArrival
    from assetflow.core.metadata import Metadata
    from assetflow.core.pipeline import Pipeline, SparkJob
    from assetflow.core.schedules import (
        AssetAndTimeSchedule,
        AssetOrTimeSchedule,
        CronPartitionTimetable,
        CronTriggerTimetable,
        DailyMapper,
        DeltaTriggerTimetable,
        HourlyMapper,
        IdentityMapper,
        MonthlyMapper,
        PartitionedAssetSchedule,
        PartitionedAssetTimetable,
        PartitionMapper,
        WeeklyMapper,
    )
    from assetflow.core.uri import AssetUriError
    from assetflow.core.watchers import (
        AssetWatcher,
        EventBridgePattern,
        KafkaTopic,
        KinesisStream,
        MessageQueueTrigger,
        MskCluster,
        S3ObjectCreated,
        SelfManagedKafka,
        SqsQueue,
    )

# Where each name lives: imported on first use, so that importing a Lambda handler (``assetflow.functions``)
# does not load every declaration class it may never need (a cold start pays for what it uses).
_EXPORTS = {
    "Asset": "assetflow.core.conditions",
    "AssetAlias": "assetflow.core.conditions",
    "AssetAll": "assetflow.core.conditions",
    "AssetAndTimeSchedule": "assetflow.core.schedules",
    "AssetAny": "assetflow.core.conditions",
    "AssetOrTimeSchedule": "assetflow.core.schedules",
    "AssetRef": "assetflow.core.conditions",
    "AssetUriError": "assetflow.core.uri",
    "AssetWatcher": "assetflow.core.watchers",
    "AssetflowError": "assetflow.core.errors",
    "Catalog": "assetflow.core.catalog",
    "CatalogError": "assetflow.core.errors",
    "CronPartitionTimetable": "assetflow.core.schedules",
    "CronTriggerTimetable": "assetflow.core.schedules",
    "DailyMapper": "assetflow.core.schedules",
    "DefinitionError": "assetflow.core.errors",
    "DeltaTriggerTimetable": "assetflow.core.schedules",
    "ExpectedArrival": "assetflow.core.expectations",
    "HourlyMapper": "assetflow.core.schedules",
    "IdentityMapper": "assetflow.core.schedules",
    "EventBridgePattern": "assetflow.core.watchers",
    "KafkaTopic": "assetflow.core.watchers",
    "KinesisStream": "assetflow.core.watchers",
    "MessageQueueTrigger": "assetflow.core.watchers",
    "Metadata": "assetflow.core.metadata",
    "MonthlyMapper": "assetflow.core.schedules",
    "MskCluster": "assetflow.core.watchers",
    "PartitionMapper": "assetflow.core.schedules",
    "PartitionedAssetSchedule": "assetflow.core.schedules",
    "PartitionedAssetTimetable": "assetflow.core.schedules",
    "Pipeline": "assetflow.core.pipeline",
    "SelfManagedKafka": "assetflow.core.watchers",
    "SparkJob": "assetflow.core.pipeline",
    "S3ObjectCreated": "assetflow.core.watchers",
    "SqsQueue": "assetflow.core.watchers",
    "TimeSpec": "assetflow.core.cron",
    "WeeklyMapper": "assetflow.core.schedules",
    "at_least": "assetflow.core.conditions",
    "late": "assetflow.core.conditions",
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
    "AssetAndTimeSchedule",
    "AssetAny",
    "AssetOrTimeSchedule",
    "AssetRef",
    "AssetUriError",
    "AssetWatcher",
    "AssetflowError",
    "Catalog",
    "CatalogError",
    "CronPartitionTimetable",
    "CronTriggerTimetable",
    "DailyMapper",
    "DefinitionError",
    "DeltaTriggerTimetable",
    "EventBridgePattern",
    "ExpectedArrival",
    "HourlyMapper",
    "IdentityMapper",
    "KafkaTopic",
    "KinesisStream",
    "MessageQueueTrigger",
    "Metadata",
    "MonthlyMapper",
    "MskCluster",
    "PartitionMapper",
    "PartitionedAssetSchedule",
    "PartitionedAssetTimetable",
    "Pipeline",
    "S3ObjectCreated",
    "SelfManagedKafka",
    "SparkJob",
    "SqsQueue",
    "TimeSpec",
    "WeeklyMapper",
    "at_least",
    "late",
]
__version__ = "0.2.0"
