"""assetflow: data-aware, event-driven scheduling of PySpark pipelines, serverless on AWS.

Declare assets, watchers and pipelines with the names below (they follow Apache Airflow 3's assets).
"""

from __future__ import annotations

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
    KafkaTopic,
    MessageQueueTrigger,
    MskCluster,
    SelfManagedKafka,
    SqsQueue,
)

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
    "ExpectedArrival",
    "HourlyMapper",
    "IdentityMapper",
    "KafkaTopic",
    "MessageQueueTrigger",
    "Metadata",
    "MonthlyMapper",
    "MskCluster",
    "PartitionMapper",
    "PartitionedAssetSchedule",
    "PartitionedAssetTimetable",
    "Pipeline",
    "SelfManagedKafka",
    "SparkJob",
    "SqsQueue",
    "TimeSpec",
    "WeeklyMapper",
    "at_least",
    "late",
]
__version__ = "0.2.0"
