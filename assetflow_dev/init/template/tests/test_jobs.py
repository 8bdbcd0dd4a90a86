"""The job's transform on a real local Spark session (Java 17; pyspark comes with assetflow[local])."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from jobs.order_totals import orders_from_events, totals_per_customer


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[1]")
        .appName("tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    yield session
    session.stop()


class Event:
    def __init__(self, payload: object) -> None:
        self.payload = payload


def test_orders_are_summed_per_customer(spark: SparkSession) -> None:
    orders = orders_from_events(
        [
            Event({"order_id": "o-1", "customer": "acme", "amount": 10.5}),
            Event({"order_id": "o-2", "customer": "acme", "amount": 4.5}),
            Event({"order_id": "o-3", "customer": "globex", "amount": 7.0}),
            Event("not an order"),
        ]
    )
    frame = spark.createDataFrame(orders, "order_id string, customer string, amount double")
    rows = [r.asDict() for r in totals_per_customer(frame).collect()]
    assert rows == [
        {"customer": "acme", "orders": 2, "total": 15.0},
        {"customer": "globex", "orders": 1, "total": 7.0},
    ]
