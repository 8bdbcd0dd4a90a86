"""The order_totals job: sum the triggering orders per customer and write them as Parquet.

`main()` does the I/O; `totals_per_customer` is a pure DataFrame -> DataFrame transform tests call directly.
It runs on EMR Serverless (Python 3.9) and locally under `assetflow dev up` the same way.
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from assetflow_job import Metadata, run

ORDERS = "s3://{{bucket}}/landing/orders"
ORDER_TOTALS = "s3://{{bucket}}/curated/order_totals"


def orders_from_events(events: list[Any]) -> list[dict[str, Any]]:
    """The order payloads of the triggering events (one SQS message each)."""
    return [dict(e.payload) for e in events if isinstance(e.payload, dict)]


def totals_per_customer(orders: DataFrame) -> DataFrame:
    """One row per customer: how many orders and their total amount."""
    return (
        orders.groupBy("customer")
        .agg(sf.count("order_id").alias("orders"), sf.round(sf.sum("amount"), 2).alias("total"))
        .orderBy("customer")
    )


def main(argv: list[str] | None = None) -> None:
    """Read the triggering orders, write the totals, report the counts as the outlet's extra."""
    with run(argv) as ctx:
        orders = orders_from_events(ctx.triggering_asset_events.get(ORDERS, []))
        spark = SparkSession.builder.appName("order_totals").getOrCreate()
        frame = spark.createDataFrame(orders, "order_id string, customer string, amount double")
        totals = totals_per_customer(frame)
        totals.write.mode("append").parquet(ctx.path(ORDER_TOTALS))
        ctx.emit(Metadata(ORDER_TOTALS, {"orders": len(orders), "customers": totals.count()}))


if __name__ == "__main__":
    main(sys.argv[1:])
