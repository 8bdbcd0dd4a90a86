"""Roll up one day's sensor readings per sensor: the partitioned run's key is the day."""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Sequence
from datetime import date

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assetflow_job import run
from spark_jobs.common import (
    IOT_DAILY,
    RAW_READING_SCHEMA,
    SENSOR_READINGS,
    configure_logging,
    parse_readings,
    reading_records,
    spark_session,
)

logger = logging.getLogger(__name__)

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_day(key: str | None) -> date:
    """Parse the partition key as a day (``2026-11-21``).

    Raises:
        ValueError: when the key is missing or not a date.

    """
    if not key or not _DAY.match(key):
        raise ValueError(f"this job needs a day (YYYY-MM-DD) as its partition key, got {key!r}")
    return date.fromisoformat(key)


def rollup_day(readings: DataFrame, day: date) -> DataFrame:
    """Return min, max and mean temperature and the reading count per sensor, for readings taken on ``day``."""
    return (
        readings.filter(sf.col("reading_date") == sf.lit(day))
        .groupBy("sensor_id")
        .agg(
            sf.min("temperature_c").alias("min_temperature_c"),
            sf.max("temperature_c").alias("max_temperature_c"),
            sf.round(sf.avg("temperature_c"), 2).alias("avg_temperature_c"),
            sf.count(sf.lit(1)).alias("reading_count"),
        )
        .orderBy("sensor_id")
    )


def daily_uri(day: date) -> str:
    """Return where a day's rollup is written: ``<daily asset>/day=<day>/``."""
    return f"{IOT_DAILY}/day={day.isoformat()}"


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse ``--day`` (overrides the partition key, for a manual re-run)."""
    parser = argparse.ArgumentParser(prog="sensor_daily_rollup", description=__doc__)
    parser.add_argument("--day", default=None, help="YYYY-MM-DD; defaults to the run's partition key")
    return parser.parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: aggregate the triggering readings of the run's day and replace that day's rollup."""
    with run(argv) as ctx:
        options = parse_args(ctx.args)
        day = parse_day(options.day or ctx.partition_key)
        records = reading_records(ctx.triggering_asset_events.get(SENSOR_READINGS, []))
        with spark_session("assetflow-sensor-daily-rollup") as spark:
            readings = parse_readings(spark.createDataFrame(records, schema=RAW_READING_SCHEMA))
            rollup = rollup_day(readings, day).cache()
            row_count = rollup.count()
            # Overwriting the day's folder makes a re-run of the same partition replace, not add.
            rollup.coalesce(1).write.mode("overwrite").parquet(ctx.path(daily_uri(day)))
            rollup.unpersist()
        logger.info(
            "daily rollup written run_id=%s day=%s events=%d sensors=%d",
            ctx.run_id,
            day,
            len(records),
            row_count,
        )
        ctx.outlet_events[IOT_DAILY].extra = {"row_count": row_count, "day": day.isoformat()}


if __name__ == "__main__":
    configure_logging()
    main()
