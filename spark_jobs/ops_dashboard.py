"""Refresh the operations dashboard: revenue and orders from deliveries, readings and alerts from sensors, per day."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import DateType, DoubleType, LongType, StructField, StructType

from assetflow_job import run
from spark_jobs.common import (
    CURATED_DELIVERIES,
    IOT_READINGS,
    OPS_DASHBOARD,
    configure_logging,
    read_parquet_snapshot,
    spark_session,
)

logger = logging.getLogger(__name__)

DASHBOARD_SCHEMA = StructType(
    [
        StructField("day", DateType()),
        StructField("revenue", DoubleType()),
        StructField("orders", LongType()),
        StructField("readings", LongType()),
        StructField("alerts", LongType()),
    ]
)


def deliveries_by_day(curated: DataFrame) -> DataFrame:
    """Sum the curated deliveries' revenue and orders per delivery day."""
    return curated.groupBy(sf.col("delivery_day").alias("day")).agg(
        sf.round(sf.sum("revenue"), 2).alias("revenue"),
        sf.sum("order_count").cast("long").alias("orders"),
    )


def readings_by_day(readings: DataFrame) -> DataFrame:
    """Count readings and flagged readings per day; a reading stored twice counts once."""
    flagged = sf.col("flagged") if "flagged" in readings.columns else sf.lit(False)
    return (
        readings.withColumn("_flagged", sf.coalesce(flagged, sf.lit(False)))
        .dropDuplicates(["sensor_id", "reading_time"])
        .groupBy(sf.to_date("reading_time").alias("day"))
        .agg(
            sf.count(sf.lit(1)).alias("readings"),
            sf.sum(sf.when(sf.col("_flagged"), 1).otherwise(0)).cast("long").alias("alerts"),
        )
    )


def build_dashboard(spark: SparkSession, curated: DataFrame | None, readings: DataFrame | None) -> DataFrame:
    """Join what exists of the two sides into one row per day (zeros where a side has nothing)."""
    sides = []
    if curated is not None:
        sides.append(deliveries_by_day(curated))
    if readings is not None:
        sides.append(readings_by_day(readings))
    if not sides:
        return spark.createDataFrame([], DASHBOARD_SCHEMA)
    joined = sides[0]
    for side in sides[1:]:
        joined = joined.join(side, on="day", how="full_outer")
    for column in ("revenue", "orders", "readings", "alerts"):
        if column not in joined.columns:
            joined = joined.withColumn(column, sf.lit(None))
    zero: dict[str, bool | float | int | str] = {"revenue": 0.0, "orders": 0, "readings": 0, "alerts": 0}
    return (
        joined.select(*[sf.col(f.name).cast(f.dataType).alias(f.name) for f in DASHBOARD_SCHEMA.fields])
        .fillna(zero)
        .filter(sf.col("day").isNotNull())
        .orderBy("day")
    )


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse the job's own arguments (none yet)."""
    return argparse.ArgumentParser(prog="ops_dashboard", description=__doc__).parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: rebuild the whole dashboard from the curated deliveries and the stored readings."""
    with run(argv) as ctx:
        parse_args(ctx.args)
        with spark_session("assetflow-ops-dashboard") as spark:
            curated = read_parquet_snapshot(spark, ctx.path(CURATED_DELIVERIES))
            readings = read_parquet_snapshot(spark, ctx.path(IOT_READINGS))
            dashboard = build_dashboard(spark, curated, readings).cache()
            row_count = dashboard.count()
            dashboard.coalesce(1).write.mode("overwrite").parquet(ctx.path(OPS_DASHBOARD))
            dashboard.unpersist()
        triggered_by = sorted(ctx.triggering_asset_events)
        logger.info(
            "dashboard refreshed run_id=%s days=%d deliveries=%s readings=%s triggered_by=%s",
            ctx.run_id,
            row_count,
            curated is not None,
            readings is not None,
            ",".join(triggered_by),
        )
        ctx.outlet_events[OPS_DASHBOARD].extra = {"row_count": row_count, "triggered_by": triggered_by}


if __name__ == "__main__":
    configure_logging()
    main()
