"""Check sensor readings from Kafka: store them, and raise an alert through an alias when any is out of range."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from assetflow_job import AliasRef, run
from spark_jobs.common import (
    IOT_READINGS,
    RAW_READING_SCHEMA,
    SENSOR_ALERTS,
    SENSOR_ALERTS_ALIAS,
    SENSOR_READINGS,
    configure_logging,
    parse_readings,
    reading_records,
    spark_session,
)

logger = logging.getLogger(__name__)


def flag_readings(
    readings: DataFrame, max_temperature: float, humidity_min: float, humidity_max: float
) -> DataFrame:
    """Add ``temperature_alert`` (above ``max_temperature``), ``humidity_alert`` (outside the range), ``flagged``.

    A missing measurement raises no alert.
    """
    temperature_alert = sf.coalesce(sf.col("temperature_c") > sf.lit(max_temperature), sf.lit(False))
    humidity_alert = sf.coalesce(
        (sf.col("humidity_pct") < sf.lit(humidity_min)) | (sf.col("humidity_pct") > sf.lit(humidity_max)),
        sf.lit(False),
    )
    return (
        readings.withColumn("temperature_alert", temperature_alert)
        .withColumn("humidity_alert", humidity_alert)
        .withColumn("flagged", sf.col("temperature_alert") | sf.col("humidity_alert"))
    )


def alert_summary(flagged: DataFrame) -> dict[str, Any] | None:
    """Summarise the flagged readings as the alert event's extra, or None when nothing is flagged."""
    row = (
        flagged.filter(sf.col("flagged"))
        .agg(
            sf.count(sf.lit(1)).alias("alert_count"),
            sf.sort_array(sf.collect_set("sensor_id")).alias("sensor_ids"),
            sf.max("temperature_c").alias("max_temperature_c"),
        )
        .first()
    )
    if row is None or row["alert_count"] == 0:
        return None
    return {
        "sensor_ids": list(row["sensor_ids"]),
        "max_temperature_c": row["max_temperature_c"],
        "alert_count": int(row["alert_count"]),
    }


def readings_frame(spark: SparkSession, records: Sequence[tuple[Any, ...]]) -> DataFrame:
    """Make the raw readings DataFrame from ``reading_records`` tuples."""
    return spark.createDataFrame(list(records), schema=RAW_READING_SCHEMA)


def _humidity_range(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH (e.g. 20,80), got {text!r}") from exc
    if low > high:
        raise argparse.ArgumentTypeError(f"the humidity range's low end is above its high end: {text!r}")
    return low, high


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse the thresholds: ``--max-temperature`` (°C) and ``--humidity-range LOW,HIGH`` (%)."""
    parser = argparse.ArgumentParser(prog="sensor_check", description=__doc__)
    parser.add_argument("--max-temperature", type=float, default=30.0)
    parser.add_argument("--humidity-range", type=_humidity_range, default=(20.0, 80.0))
    return parser.parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: readings to Parquet (declared outlet), and the alert alias only when something is flagged."""
    with run(argv) as ctx:
        options = parse_args(ctx.args)
        low, high = options.humidity_range
        records = reading_records(ctx.triggering_asset_events.get(SENSOR_READINGS, []))
        with spark_session("assetflow-sensor-check") as spark:
            flagged = flag_readings(
                parse_readings(readings_frame(spark, records)), options.max_temperature, low, high
            ).cache()
            row_count = flagged.count()
            if row_count:
                flagged.withColumn("run_id", sf.lit(ctx.run_id)).write.mode("append").parquet(
                    ctx.path(IOT_READINGS)
                )
            alert = alert_summary(flagged) if row_count else None
            flagged.unpersist()
        ctx.outlet_events[IOT_READINGS].extra = {"row_count": row_count}
        logger.info(
            "readings checked run_id=%s events=%d readings=%d rejected=%d alerts=%d",
            ctx.run_id,
            len(records),
            row_count,
            len(records) - row_count,
            alert["alert_count"] if alert else 0,
        )
        if alert is not None:
            # Conditional triggering: the alias resolves to the alerts asset only when this run flags something.
            ctx.outlet_events[AliasRef(SENSOR_ALERTS_ALIAS)].add(SENSOR_ALERTS, extra=alert)


if __name__ == "__main__":
    configure_logging()
    main()
