"""Audit the partner exports that triggered the run (through the alias): rows and totals per supplier."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import DateType, DoubleType, LongType, StringType, StructField, StructType

from assetflow_job import run
from spark_jobs.common import PARTNER_FEED_AUDIT, configure_logging, read_csv_if_exists, spark_session

logger = logging.getLogger(__name__)

#: The columns partner_exports writes.
EXPORT_SCHEMA = StructType(
    [
        StructField("supplier", StringType()),
        StructField("delivery_id", StringType()),
        StructField("delivery_day", DateType()),
        StructField("sku", StringType()),
        StructField("total_quantity", LongType()),
        StructField("revenue", DoubleType()),
        StructField("order_count", LongType()),
    ]
)
EXPECTED_SCHEMA = StructType([StructField("export_uri", StringType()), StructField("supplier", StringType())])


def supplier_of(uri: str) -> str:
    """Return the supplier an export asset belongs to: its URI's last segment."""
    return uri.rstrip("/").rsplit("/", 1)[-1]


def audit_exports(exports: DataFrame, expected: DataFrame) -> DataFrame:
    """Return one audit row per expected export: rows, quantity and revenue found (zero when missing or empty).

    ``exports`` has the export columns plus ``export_uri``; ``expected`` has ``export_uri`` and ``supplier``.
    """
    found = exports.groupBy("export_uri").agg(
        sf.count(sf.lit(1)).alias("row_count"),
        sf.coalesce(sf.sum("total_quantity"), sf.lit(0)).cast("long").alias("total_quantity"),
        sf.round(sf.coalesce(sf.sum("revenue"), sf.lit(0.0)), 2).alias("revenue"),
    )
    return (
        expected.join(found, on="export_uri", how="left")
        .select(
            "supplier",
            "export_uri",
            sf.coalesce("row_count", sf.lit(0)).cast("long").alias("row_count"),
            sf.coalesce("total_quantity", sf.lit(0)).cast("long").alias("total_quantity"),
            sf.coalesce("revenue", sf.lit(0.0)).alias("revenue"),
            sf.col("row_count").isNotNull().alias("found"),
        )
        .orderBy("supplier", "export_uri")
    )


def read_exports(spark: SparkSession, uris: Sequence[str], resolve: Callable[[str], str]) -> DataFrame:
    """Read the CSV files of each export asset that exists, tagged with its ``export_uri``."""
    frames = []
    for uri in uris:
        frame = read_csv_if_exists(spark, resolve(uri), EXPORT_SCHEMA)
        if frame is not None:
            frames.append(frame.withColumn("export_uri", sf.lit(uri)))
    if not frames:
        return spark.createDataFrame(
            [], StructType([*EXPORT_SCHEMA.fields, StructField("export_uri", StringType())])
        )
    combined = frames[0]
    for frame in frames[1:]:
        combined = combined.unionByName(frame)
    return combined


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse the job's own arguments (none yet)."""
    return argparse.ArgumentParser(prog="partner_feed_audit", description=__doc__).parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: audit every triggering export asset and store the audit under this run's id."""
    with run(argv) as ctx:
        parse_args(ctx.args)
        uris = sorted(ctx.triggering_asset_events)
        with spark_session("assetflow-partner-feed-audit") as spark:
            expected = spark.createDataFrame([(uri, supplier_of(uri)) for uri in uris], EXPECTED_SCHEMA)
            audit = audit_exports(read_exports(spark, uris, ctx.path), expected).cache()
            rows = [row.asDict() for row in audit.collect()]
            (
                audit.withColumn("run_id", sf.lit(ctx.run_id))
                .coalesce(1)
                .write.mode("overwrite")
                # One partition per run: a re-run replaces its own audit and keeps the others.
                .option("partitionOverwriteMode", "dynamic")
                .partitionBy("run_id")
                .parquet(ctx.path(PARTNER_FEED_AUDIT))
            )
            audit.unpersist()
        suppliers = sorted({row["supplier"] for row in rows})
        exported_rows = sum(row["row_count"] for row in rows)
        missing = [row["export_uri"] for row in rows if not row["found"]]
        logger.info(
            "partner feeds audited run_id=%s exports=%d rows=%d missing=%s",
            ctx.run_id,
            len(rows),
            exported_rows,
            ",".join(missing) or "-",
        )
        ctx.outlet_events[PARTNER_FEED_AUDIT].extra = {
            "suppliers": suppliers,
            "row_count": len(rows),
            "exported_rows": exported_rows,
        }


if __name__ == "__main__":
    configure_logging()
    main()
