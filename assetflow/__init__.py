"""assetflow: data-aware, event-driven scheduling of PySpark pipelines, serverless on AWS.

Declare assets, watchers and pipelines with the names below (they follow Apache Airflow 3's assets).
"""

from __future__ import annotations

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
__version__ = "0.2.0"
