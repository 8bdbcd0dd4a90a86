"""Each job's pure transforms on small hand-made DataFrames, with exact expected results."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    BooleanType,
    DateType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from assetflow_job import AssetEvent
from spark_jobs import (
    daily_report,
    deliveries_etl,
    ops_dashboard,
    partner_exports,
    partner_feed_audit,
    sensor_check,
    sensor_daily_rollup,
)
from spark_jobs.common import parse_readings, read_parquet_if_exists, reading_records
from tests.spark.contexts import event

pytestmark = pytest.mark.spark

RAW_DELIVERY = StructType(
    [StructField(n, StringType()) for n in ("delivery_id", "supplier", *deliveries_etl.CSV_COLUMNS)]
)
T0 = "2026-11-21T08:00:00Z"


def rows(frame: DataFrame, *columns: str) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in columns) for r in frame.collect()]


def types_of(schema: StructType) -> list[tuple[str, Any]]:
    return [(f.name, f.dataType) for f in schema.fields]


def types(frame: DataFrame) -> list[tuple[str, Any]]:
    return types_of(frame.schema)


# --- deliveries_etl -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw_deliveries(spark: SparkSession) -> DataFrame:
    data = [
        ("d-1", " acme ", "  o1 ", " sku-a", " 2 ", "10.00", T0),
        ("d-1", "acme", "o2", "sku-a", "three", "1.00", T0),
        ("d-1", "acme", "o3", "sku-a", "-1", "1.00", T0),
        ("d-1", "acme", "o4", "sku-a", "1", "-2.5", T0),
        ("d-1", "acme", "o5", "sku-a", "  ", "1.0", T0),
        ("d-1", "acme", "o6", "sku-a", "1", "abc", T0),
        ("d-1", "acme", "o7", "sku-a", "1", "1.0", "not-a-date"),
        ("d-1", "acme", None, "sku-a", "1", "1.0", T0),
        ("d-1", "acme", "o8", "sku-b", "1.5", "1.0", T0),
        ("d-1", "acme", "o12", None, "1", "1.0", T0),
        ("d-1", "acme", "o13", "sku-a", "1", None, T0),
        ("d-1", "acme", "o14", "sku-a", "1", "1.0", None),
        ("d-1", "acme", "o15", "sku-a", "99999999999999999999", "1.0", T0),
        ("d-1", "acme", "o9", "sku-b", "3", "2.50", "2026-11-21T09:00:00Z"),
        ("d-1", "acme", "o9", "sku-b", "4", "2.50", "2026-11-21T10:00:00Z"),
        ("d-1", "acme", "o10", "sku-a", "1", "5", "2026-11-22T00:30:00+00:00"),
        ("d-1", "acme", "o11", "sku-a", "3", "1.10", "2026-11-21 23:59:59"),
    ]
    return spark.createDataFrame(data, RAW_DELIVERY)


def test_validation_trims_types_and_gives_each_bad_row_its_reason(raw_deliveries: DataFrame) -> None:
    validated = deliveries_etl.validate_rows(raw_deliveries)
    reasons = dict(rows(validated.filter("order_id is not null"), "order_id", "reject_reason"))
    assert reasons == {
        "o1": None,
        "o2": "non_numeric_quantity",
        "o3": "negative_quantity",
        "o4": "negative_unit_price",
        "o5": "missing_quantity",
        "o6": "non_numeric_unit_price",
        "o7": "bad_delivered_at",
        "o8": "non_numeric_quantity",
        "o9": None,
        "o10": None,
        "o11": None,
        "o12": "missing_sku",
        "o13": "missing_unit_price",
        "o14": "missing_delivered_at",
        "o15": "non_numeric_quantity",
    }
    assert rows(validated.filter("order_id is null"), "reject_reason") == [("missing_order_id",)]
    first = validated.filter("order_id = 'o1'").first()
    assert first is not None
    assert (first["supplier"], first["sku"], first["quantity"], first["unit_price"]) == (
        "acme",
        "sku-a",
        2,
        10.0,
    )
    assert first["delivered_at"] == datetime(2026, 11, 21, 8, 0)
    assert dict(validated.dtypes)["quantity"] == "bigint" and dict(validated.dtypes)["unit_price"] == "double"


def test_clean_and_rejected_split_the_rows(raw_deliveries: DataFrame) -> None:
    validated = deliveries_etl.validate_rows(raw_deliveries)
    assert deliveries_etl.clean_rows(validated).count() == 5
    assert deliveries_etl.rejected_rows(validated).count() == 12
    assert "reject_reason" not in deliveries_etl.clean_rows(validated).columns


def test_duplicates_keep_the_latest_delivery_of_an_order(raw_deliveries: DataFrame) -> None:
    clean = deliveries_etl.clean_rows(deliveries_etl.validate_rows(raw_deliveries))
    latest = deliveries_etl.latest_per_order(clean).orderBy("order_id")
    assert rows(latest, "order_id", "quantity") == [("o1", 2), ("o10", 1), ("o11", 3), ("o9", 4)]


def test_dedupe_ties_are_broken_the_same_way_every_time(spark: SparkSession) -> None:
    same_time = datetime(2026, 11, 21, 8)
    frame = spark.createDataFrame(
        [
            ("d-1", "acme", "o1", "sku-a", 1, 1.0, same_time),
            ("d-2", "acme", "o1", "sku-a", 5, 1.0, same_time),
        ],
        "delivery_id string, supplier string, order_id string, sku string, quantity long, "
        "unit_price double, delivered_at timestamp",
    )
    assert rows(deliveries_etl.latest_per_order(frame), "delivery_id", "quantity") == [("d-2", 5)]


def test_aggregates_per_supplier_sku_and_utc_day(raw_deliveries: DataFrame) -> None:
    orders = deliveries_etl.latest_per_order(
        deliveries_etl.clean_rows(deliveries_etl.validate_rows(raw_deliveries))
    )
    aggregated = deliveries_etl.aggregate_deliveries(orders).orderBy("delivery_day", "sku")
    assert aggregated.columns == [
        "supplier",
        "sku",
        "delivery_day",
        "total_quantity",
        "revenue",
        "order_count",
        "delivery_id",
    ]
    assert rows(aggregated, *aggregated.columns) == [
        ("acme", "sku-a", date(2026, 11, 21), 5, 23.3, 2, "d-1"),
        ("acme", "sku-b", date(2026, 11, 21), 4, 10.0, 1, "d-1"),
        ("acme", "sku-a", date(2026, 11, 22), 1, 5.0, 1, "d-1"),
    ]


def test_delivery_messages_are_read_from_payloads_and_checked() -> None:
    good = AssetEvent.from_dict(
        event(
            deliveries_etl.LANDING_DELIVERIES,
            "e1",
            "2026-11-21T10:00:00.000000Z",
            payload={"delivery_id": "d-001", "supplier": "acme", "files": ["s3://b/a.csv", "s3://b/b.csv"]},
        )
    )
    assert deliveries_etl.deliveries_from_events([good]) == [
        deliveries_etl.Delivery("d-001", "acme", ("s3://b/a.csv", "s3://b/b.csv"))
    ]
    bad = AssetEvent.from_dict(
        event(
            "x",
            "e2",
            "2026-11-21T10:00:00.000000Z",
            payload={"delivery_id": "d-2", "supplier": "a", "files": []},
        )
    )
    with pytest.raises(deliveries_etl.DeliveryMessageError, match="'files' must be a non-empty list"):
        deliveries_etl.deliveries_from_events([bad])


# --- sensors --------------------------------------------------------------------------------------


def _reading_events(payloads: list[Any]) -> list[AssetEvent]:
    return [
        AssetEvent.from_dict(
            event("x-iot://sensors/readings", f"e{i}", f"2026-11-21T10:{i:02d}:00.000000Z", payload=p)
        )
        for i, p in enumerate(payloads)
    ]


def _readings(spark: SparkSession, payloads: list[Any]) -> DataFrame:
    return parse_readings(sensor_check.readings_frame(spark, reading_records(_reading_events(payloads))))


def r(sensor: str, time: str, temperature: Any, humidity: Any = 50.0) -> dict[str, Any]:
    return {"sensor_id": sensor, "reading_time": time, "temperature_c": temperature, "humidity_pct": humidity}


def test_reading_payloads_are_coerced_and_unusable_ones_dropped(spark: SparkSession) -> None:
    payloads = [
        r("s-1", "2026-11-21T10:15:00Z", 21.5, 40.0),
        r("s-2", "2026-11-21T10:15:00Z", "22.5", "41"),
        r("s-3", "2026-11-21T10:15:00Z", True, None),
        r(None, "2026-11-21T10:15:00Z", 20.0),
        r("s-4", "yesterday", 20.0),
        "not an object",
        r("s-5", "2026-11-21T10:15:00Z", float("inf"), 10),
    ]
    parsed = _readings(spark, payloads).orderBy("sensor_id")
    assert rows(parsed, "event_id", "sensor_id", "temperature_c", "humidity_pct", "reading_date") == [
        ("e0", "s-1", 21.5, 40.0, date(2026, 11, 21)),
        ("e1", "s-2", 22.5, 41.0, date(2026, 11, 21)),
        ("e2", "s-3", None, None, date(2026, 11, 21)),
        ("e6", "s-5", None, 10.0, date(2026, 11, 21)),
    ]


def test_readings_are_flagged_strictly_outside_the_thresholds(spark: SparkSession) -> None:
    payloads = [
        r("s-1", "2026-11-21T10:00:00Z", 30.0, 20.0),
        r("s-2", "2026-11-21T10:00:00Z", 30.1, 50.0),
        r("s-3", "2026-11-21T10:00:00Z", 25.0, 19.9),
        r("s-4", "2026-11-21T10:00:00Z", 25.0, 80.1),
        r("s-5", "2026-11-21T10:00:00Z", None, None),
        r("s-6", "2026-11-21T10:00:00Z", 35.5, 90.0),
    ]
    flagged = sensor_check.flag_readings(_readings(spark, payloads), 30.0, 20.0, 80.0).orderBy("sensor_id")
    assert rows(flagged, "sensor_id", "temperature_alert", "humidity_alert", "flagged") == [
        ("s-1", False, False, False),
        ("s-2", True, False, True),
        ("s-3", False, True, True),
        ("s-4", False, True, True),
        ("s-5", False, False, False),
        ("s-6", True, True, True),
    ]
    assert sensor_check.alert_summary(flagged) == {
        "sensor_ids": ["s-2", "s-3", "s-4", "s-6"],
        "max_temperature_c": 35.5,
        "alert_count": 4,
    }


def test_no_flagged_reading_means_no_alert(spark: SparkSession) -> None:
    readings = _readings(spark, [r("s-1", "2026-11-21T10:00:00Z", 21.0)])
    assert sensor_check.alert_summary(sensor_check.flag_readings(readings, 30.0, 20.0, 80.0)) is None


def test_threshold_arguments_are_parsed_and_checked() -> None:
    options = sensor_check.parse_args(["--max-temperature", "25", "--humidity-range", "30,70"])
    assert (options.max_temperature, options.humidity_range) == (25.0, (30.0, 70.0))
    assert sensor_check.parse_args([]).humidity_range == (20.0, 80.0)
    with pytest.raises(SystemExit):
        sensor_check.parse_args(["--humidity-range", "80,20"])


def test_daily_rollup_aggregates_the_day_per_sensor(spark: SparkSession) -> None:
    payloads = [
        r("s-1", "2026-11-21T00:00:00Z", 20.0),
        r("s-1", "2026-11-21T12:00:00Z", 25.0),
        r("s-1", "2026-11-21T23:59:59Z", 22.0),
        r("s-2", "2026-11-21T10:00:00Z", None),
        r("s-2", "2026-11-21T11:00:00Z", 30.5),
        r("s-1", "2026-11-22T00:00:00Z", 99.0),
        r("s-3", "2026-11-20T23:59:59Z", 10.0),
    ]
    rollup = sensor_daily_rollup.rollup_day(_readings(spark, payloads), date(2026, 11, 21))
    assert rows(rollup, *rollup.columns) == [
        ("s-1", 20.0, 25.0, 22.33, 3),
        ("s-2", 30.5, 30.5, 30.5, 2),
    ]
    assert sensor_daily_rollup.parse_day("2026-11-21") == date(2026, 11, 21)
    with pytest.raises(ValueError, match="partition key"):
        sensor_daily_rollup.parse_day(None)
    assert sensor_daily_rollup.daily_uri(date(2026, 11, 21)) == "s3://assetflow-demo/iot/daily/day=2026-11-21"


# --- ops_dashboard --------------------------------------------------------------------------------

CURATED_SCHEMA = StructType(
    [
        StructField("supplier", StringType()),
        StructField("sku", StringType()),
        StructField("delivery_day", DateType()),
        StructField("total_quantity", LongType()),
        StructField("revenue", DoubleType()),
        StructField("order_count", LongType()),
        StructField("delivery_id", StringType()),
    ]
)
READINGS_SCHEMA = StructType(
    [
        StructField("sensor_id", StringType()),
        StructField("reading_time", TimestampType()),
        StructField("flagged", BooleanType()),
    ]
)


@pytest.fixture(scope="module")
def curated(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [
            ("acme", "sku-a", date(2026, 11, 20), 5, 10.1, 2, "d-1"),
            ("globex", "sku-b", date(2026, 11, 20), 1, 0.2, 1, "d-2"),
            ("acme", "sku-a", date(2026, 11, 21), 3, 7.5, 3, "d-3"),
        ],
        CURATED_SCHEMA,
    )


@pytest.fixture(scope="module")
def stored_readings(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [
            ("s-1", datetime(2026, 11, 21, 10), False),
            ("s-1", datetime(2026, 11, 21, 10), False),  # stored twice by a retried run
            ("s-2", datetime(2026, 11, 21, 11), True),
            ("s-2", datetime(2026, 11, 22, 9), None),
        ],
        READINGS_SCHEMA,
    )


def test_dashboard_joins_both_sides_per_day(
    spark: SparkSession, curated: DataFrame, stored_readings: DataFrame
) -> None:
    dashboard = ops_dashboard.build_dashboard(spark, curated, stored_readings)
    assert types(dashboard) == types_of(ops_dashboard.DASHBOARD_SCHEMA)
    assert rows(dashboard, *dashboard.columns) == [
        (date(2026, 11, 20), 10.3, 3, 0, 0),
        (date(2026, 11, 21), 7.5, 3, 2, 1),
        (date(2026, 11, 22), 0.0, 0, 1, 0),
    ]


def test_dashboard_with_one_side_or_none(
    spark: SparkSession, curated: DataFrame, stored_readings: DataFrame
) -> None:
    only_deliveries = ops_dashboard.build_dashboard(spark, curated, None)
    assert rows(only_deliveries, "day", "orders", "readings") == [
        (date(2026, 11, 20), 3, 0),
        (date(2026, 11, 21), 3, 0),
    ]
    only_readings = ops_dashboard.build_dashboard(spark, None, stored_readings.drop("flagged"))
    assert rows(only_readings, "day", "revenue", "readings", "alerts") == [
        (date(2026, 11, 21), 0.0, 2, 0),
        (date(2026, 11, 22), 0.0, 1, 0),
    ]
    empty = ops_dashboard.build_dashboard(spark, None, None)
    assert empty.count() == 0 and types(empty) == types_of(ops_dashboard.DASHBOARD_SCHEMA)


def test_reading_parquet_that_does_not_exist_gives_none(spark: SparkSession, tmp_path: Any) -> None:
    assert read_parquet_if_exists(spark, str(tmp_path / "absent")) is None
    (tmp_path / "empty").mkdir()
    assert read_parquet_if_exists(spark, str(tmp_path / "empty")) is None


# --- partner exports and their audit ---------------------------------------------------------------


def test_exports_select_the_triggering_deliveries(curated: DataFrame) -> None:
    events = [
        AssetEvent.from_dict(
            event("c", "e1", "2026-11-21T10:00:00.000000Z", extra={"delivery_ids": ["d-3", "d-1"]})
        ),
        AssetEvent.from_dict(
            event("c", "e2", "2026-11-21T11:00:00.000000Z", extra={"delivery_ids": ["d-1"]})
        ),
        AssetEvent.from_dict(event("c", "e3", "2026-11-21T12:00:00.000000Z", extra={"row_count": 0})),
    ]
    ids = partner_exports.delivery_ids_from_events(events)
    assert ids == ["d-1", "d-3"]
    exported = partner_exports.export_rows(curated, ids)
    assert exported.columns == list(partner_exports.EXPORT_COLUMNS)
    assert rows(exported, "supplier", "delivery_id", "revenue") == [
        ("acme", "d-1", 10.1),
        ("acme", "d-3", 7.5),
    ]


def test_supplier_names_become_uri_safe_export_assets() -> None:
    assert partner_exports.supplier_slug("acme") == "acme"
    assert partner_exports.supplier_slug("  Acme Corp / EU ") == "acme-corp-eu"
    assert partner_exports.supplier_slug("///") == "unknown"
    assert partner_exports.export_uri("Globex") == "s3://assetflow-demo/exports/globex"


def test_audit_counts_each_expected_export_and_notes_missing_ones(
    spark: SparkSession, curated: DataFrame
) -> None:
    acme = "s3://assetflow-demo/exports/acme"
    initech = "s3://assetflow-demo/exports/initech"
    exports = partner_exports.export_rows(curated, ["d-1", "d-3"]).withColumn("export_uri", sf.lit(acme))
    expected = spark.createDataFrame(
        [(acme, "acme"), (initech, "initech")], partner_feed_audit.EXPECTED_SCHEMA
    )
    audit = partner_feed_audit.audit_exports(exports, expected)
    assert rows(audit, *audit.columns) == [
        ("acme", acme, 2, 8, 17.6, True),
        ("initech", initech, 0, 0, 0.0, False),
    ]
    assert partner_feed_audit.supplier_of(acme + "/") == "acme"


# --- daily_report ---------------------------------------------------------------------------------


def test_report_keeps_the_latest_days_oldest_first(spark: SparkSession) -> None:
    dashboard = spark.createDataFrame(
        [(date(2026, 11, d), float(d), d, 0, 0) for d in range(10, 22)], ops_dashboard.DASHBOARD_SCHEMA
    )
    latest = daily_report.latest_days(dashboard, 3)
    assert rows(latest, "day") == [(date(2026, 11, 19),), (date(2026, 11, 20),), (date(2026, 11, 21),)]
    until = daily_report.latest_days(dashboard, 2, until=date(2026, 11, 15))
    assert rows(until, "day") == [(date(2026, 11, 14),), (date(2026, 11, 15),)]
    shaped = daily_report.report_frame(latest, report_date=date(2026, 11, 22), trigger="time", run_id="r")
    first = shaped.first()
    assert first is not None and first.asDict() == {
        "day": "2026-11-19",
        "revenue": 19.0,
        "orders": 19,
        "readings": 0,
        "alerts": 0,
        "report_date": "2026-11-22",
        "trigger": "time",
        "run_id": "r",
    }
