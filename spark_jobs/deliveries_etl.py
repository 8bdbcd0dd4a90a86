"""Curate supplier deliveries: read the delivered CSV files, clean them, aggregate per supplier, SKU, day."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as sf
from pyspark.sql.types import StringType, StructField, StructType

from assetflow_job import AssetEvent, Metadata, run
from spark_jobs.common import CURATED_DELIVERIES, LANDING_DELIVERIES, configure_logging, spark_session

logger = logging.getLogger(__name__)

CSV_COLUMNS = ("order_id", "sku", "quantity", "unit_price", "delivered_at")
#: Everything is read as text: cleaning decides what is a number, so a bad cell rejects its row only.
CSV_SCHEMA = StructType([StructField(name, StringType()) for name in CSV_COLUMNS])

# Bounded digit counts keep casts in range, so they never fail even with ANSI mode on (Spark 4).
_QUANTITY_PATTERN = r"^-?[0-9]{1,15}$"
_PRICE_PATTERN = r"^-?[0-9]{1,13}(\.[0-9]{1,6})?$"


class DeliveryMessageError(ValueError):
    """A delivery message's payload lacks the delivery id, the supplier or the files."""


@dataclass(frozen=True)
class Delivery:
    """One delivery announced on the landing queue: who delivered which CSV files."""

    delivery_id: str
    supplier: str
    files: tuple[str, ...]


def deliveries_from_events(events: Iterable[AssetEvent]) -> list[Delivery]:
    """Read the deliveries from the landing asset's events (one SQS message each), in event order.

    Raises:
        DeliveryMessageError: when a payload is not a delivery message.

    """
    deliveries = []
    for event in events:
        payload: Any = event.payload
        if not isinstance(payload, dict):
            raise DeliveryMessageError(f"event {event.id}: the payload is not a JSON object")
        delivery_id, supplier, files = (
            payload.get("delivery_id"),
            payload.get("supplier"),
            payload.get("files"),
        )
        if not isinstance(delivery_id, str) or not delivery_id.strip():
            raise DeliveryMessageError(f"event {event.id}: 'delivery_id' must be a non-empty string")
        if not isinstance(supplier, str) or not supplier.strip():
            raise DeliveryMessageError(f"event {event.id}: 'supplier' must be a non-empty string")
        if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
            raise DeliveryMessageError(f"event {event.id}: 'files' must be a non-empty list of URIs")
        deliveries.append(Delivery(delivery_id.strip(), supplier.strip(), tuple(files)))
    return deliveries


def _blank_to_null(name: str) -> Column:
    trimmed = sf.trim(sf.col(name))
    return sf.when(trimmed == "", sf.lit(None)).otherwise(trimmed).alias(name)


def validate_rows(raw: DataFrame) -> DataFrame:
    """Trim every text column and type the values; ``reject_reason`` says why a row is unusable (else null).

    Input: the CSV columns as text plus ``delivery_id`` and ``supplier``. Output adds typed ``quantity``
    (long), ``unit_price`` (double) and ``delivered_at`` (UTC timestamp).
    """
    text = raw.select(*[_blank_to_null(name) for name in raw.columns])
    quantity_ok = sf.col("quantity").rlike(_QUANTITY_PATTERN)
    price_ok = sf.col("unit_price").rlike(_PRICE_PATTERN)
    quantity = sf.when(quantity_ok, sf.col("quantity").cast("long"))
    price = sf.when(price_ok, sf.col("unit_price").cast("double"))
    delivered_at = sf.try_to_timestamp(sf.col("delivered_at"))
    reason = (
        sf.when(sf.col("order_id").isNull(), "missing_order_id")
        .when(sf.col("sku").isNull(), "missing_sku")
        .when(sf.col("quantity").isNull(), "missing_quantity")
        .when(~quantity_ok, "non_numeric_quantity")
        .when(quantity < 0, "negative_quantity")
        .when(sf.col("unit_price").isNull(), "missing_unit_price")
        .when(~price_ok, "non_numeric_unit_price")
        .when(price < 0, "negative_unit_price")
        .when(sf.col("delivered_at").isNull(), "missing_delivered_at")
        .when(delivered_at.isNull(), "bad_delivered_at")
    )
    return text.select(
        "delivery_id",
        "supplier",
        "order_id",
        "sku",
        quantity.alias("quantity"),
        price.alias("unit_price"),
        delivered_at.alias("delivered_at"),
        reason.alias("reject_reason"),
    )


def clean_rows(validated: DataFrame) -> DataFrame:
    """Keep the rows ``validate_rows`` accepted."""
    return validated.filter(sf.col("reject_reason").isNull()).drop("reject_reason")


def rejected_rows(validated: DataFrame) -> DataFrame:
    """Keep the rows ``validate_rows`` rejected, with their reason."""
    return validated.filter(sf.col("reject_reason").isNotNull())


def latest_per_order(clean: DataFrame) -> DataFrame:
    """Keep one row per ``order_id``: the latest ``delivered_at`` (ties broken deterministically)."""
    order = Window.partitionBy("order_id").orderBy(
        sf.col("delivered_at").desc(),
        sf.col("delivery_id").desc(),
        sf.col("sku").asc(),
        sf.col("quantity").desc(),
        sf.col("unit_price").desc(),
    )
    return clean.withColumn("_rank", sf.row_number().over(order)).filter(sf.col("_rank") == 1).drop("_rank")


def aggregate_deliveries(orders: DataFrame) -> DataFrame:
    """Sum quantity, revenue and orders per delivery, supplier, SKU and delivery day (UTC)."""
    return (
        orders.withColumn("delivery_day", sf.to_date("delivered_at"))
        .groupBy("delivery_id", "supplier", "sku", "delivery_day")
        .agg(
            sf.sum("quantity").alias("total_quantity"),
            sf.round(sf.sum(sf.col("quantity") * sf.col("unit_price")), 2).alias("revenue"),
            sf.count("order_id").alias("order_count"),
        )
        .select("supplier", "sku", "delivery_day", "total_quantity", "revenue", "order_count", "delivery_id")
    )


def read_deliveries(
    spark: SparkSession, deliveries: Sequence[Delivery], resolve: Callable[[str], str]
) -> DataFrame:
    """Read every delivery's CSV files (through ``resolve``, the context's path mapping) as text."""
    frames = [
        spark.read.csv([resolve(uri) for uri in delivery.files], header=True, schema=CSV_SCHEMA)
        .withColumn("delivery_id", sf.lit(delivery.delivery_id))
        .withColumn("supplier", sf.lit(delivery.supplier))
        for delivery in deliveries
    ]
    combined = frames[0]
    for frame in frames[1:]:
        combined = combined.unionByName(frame)
    return combined


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse the job's own arguments (it has none yet, but rejects unknown ones)."""
    parser = argparse.ArgumentParser(prog="deliveries_etl", description=__doc__)
    return parser.parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: read the triggering deliveries, write curated Parquet, report counts as outlet extra."""
    with run(argv) as ctx:
        parse_args(ctx.args)
        deliveries = deliveries_from_events(ctx.triggering_asset_events.get(LANDING_DELIVERIES, []))
        delivery_ids = sorted({d.delivery_id for d in deliveries})
        if not deliveries:
            logger.warning("no delivery events run_id=%s", ctx.run_id)
            empty = {"row_count": 0, "rejected_rows": 0, "duplicate_rows": 0, "delivery_ids": []}
            ctx.emit(Metadata(CURATED_DELIVERIES, empty))
            return
        with spark_session("assetflow-deliveries-etl") as spark:
            validated = validate_rows(read_deliveries(spark, deliveries, ctx.path)).cache()
            try:
                reasons = {
                    r["reject_reason"]: r["count"]
                    for r in rejected_rows(validated).groupBy("reject_reason").count().collect()
                }
                orders = latest_per_order(clean_rows(validated)).cache()
                row_count = orders.count()
                accepted = validated.count() - sum(reasons.values())
                (
                    aggregate_deliveries(orders)
                    .write.mode("overwrite")
                    # Only this run's delivery_id partitions are replaced: new deliveries append, and a
                    # re-run of the same delivery does not duplicate it.
                    .option("partitionOverwriteMode", "dynamic")
                    .partitionBy("delivery_id")
                    .parquet(ctx.path(CURATED_DELIVERIES))
                )
            finally:
                validated.unpersist()
        logger.info(
            "deliveries curated run_id=%s deliveries=%s rows=%d rejected=%d duplicates=%d reasons=%s",
            ctx.run_id,
            ",".join(delivery_ids),
            row_count,
            sum(reasons.values()),
            accepted - row_count,
            reasons,
        )
        ctx.emit(
            Metadata(
                CURATED_DELIVERIES,
                {
                    "row_count": row_count,
                    "rejected_rows": sum(reasons.values()),
                    "duplicate_rows": accepted - row_count,
                    "delivery_ids": delivery_ids,
                },
            )
        )


if __name__ == "__main__":
    configure_logging()
    main()
