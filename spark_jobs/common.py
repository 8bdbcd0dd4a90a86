"""What the jobs share: the Spark session, reads that tolerate missing data, asset URIs, reading parsing."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from assetflow_job.local import LOCAL_SPARK_CONF

logger = logging.getLogger(__name__)

#: Every session computes days and parses timestamps in UTC, as the events' timestamps are.
SESSION_CONF: Mapping[str, str] = {"spark.sql.session.timeZone": "UTC"}

# What Spark says when a path holds no data yet: a missing folder, or one with no data files.
_NO_DATA_ERRORS = frozenset({"PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA"})


def configure_logging(level: int = logging.INFO) -> None:
    """Send the jobs' and the helper's logs to stderr as ``LEVEL logger message key=value ...``."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")


@contextmanager
def spark_session(
    app_name: str, *, master: str | None = None, conf: Mapping[str, str] | None = None
) -> Iterator[SparkSession]:
    """Yield the active Spark session, or build one and stop it afterwards.

    Under spark-submit the master and settings come from its command line (see
    ``assetflow_dev.submit.local_submit_command``); ``master`` is for building a session in-process, and a
    ``local`` master gets the local-friendly settings. A session that already exists (a test's) is
    reused and left running.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in SESSION_CONF.items():
            active.conf.set(key, value)
        yield active
        return
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, str] = {}
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            settings.update(LOCAL_SPARK_CONF)
    settings.update(SESSION_CONF)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    logger.info("spark session started app=%s master=%s", app_name, spark.sparkContext.master)
    try:
        yield spark
    finally:
        spark.stop()


def read_parquet_if_exists(spark: SparkSession, path: str) -> DataFrame | None:
    """Read a Parquet dataset, or return None when nothing has been written at ``path`` yet."""
    try:
        return spark.read.parquet(path)
    except AnalysisException as exc:
        if exc.getErrorClass() in _NO_DATA_ERRORS:
            logger.info("no parquet data yet path=%s", path)
            return None
        raise


def read_parquet_snapshot(
    spark: SparkSession, path: str, *, attempts: int = 4, wait_seconds: float = 2.0
) -> DataFrame | None:
    """Read another pipeline's Parquet output as a snapshot taken now (None when nothing is written yet).

    The producing pipeline may be overwriting the dataset while this job runs (its next run started after
    the event that triggered this one): reading lazily could then meet files that are gone. The rows are
    materialised at once, and a read that races with an overwrite is tried again after the writer is done.

    Raises:
        Exception: the last read failure when every attempt met a dataset being rewritten.
    """
    for attempt in range(1, attempts + 1):
        try:
            frame = read_parquet_if_exists(spark, path)
            return None if frame is None else frame.localCheckpoint(eager=True)
        except Exception as exc:  # Py4J wraps the JVM's FileNotFoundException in several ways
            if attempt == attempts or "FileNotFound" not in f"{type(exc).__name__} {exc}":
                raise
            logger.info("dataset rewritten while read, trying again path=%s attempt=%d", path, attempt)
            time.sleep(wait_seconds * attempt)
    return None


def read_csv_if_exists(spark: SparkSession, path: str, schema: StructType) -> DataFrame | None:
    """Read CSV files with a header and the given schema, or return None when ``path`` does not exist."""
    try:
        return spark.read.csv(path, header=True, schema=schema, mode="PERMISSIVE")
    except AnalysisException as exc:
        if exc.getErrorClass() in _NO_DATA_ERRORS:
            logger.info("no csv data yet path=%s", path)
            return None
        raise


def rows_as_dicts(frame: DataFrame) -> list[dict[str, Any]]:
    """Collect a small DataFrame as plain dicts (for extras and reports; never for big data)."""
    return [row.asDict(recursive=True) for row in frame.collect()]


# --- The example pipelines' assets -------------------------------------------------------------------

LANDING_DELIVERIES = "s3://assetflow-demo/landing/deliveries"
CURATED_DELIVERIES = "s3://assetflow-demo/curated/deliveries"
SENSOR_READINGS = "x-iot://sensors/readings"
SENSOR_ALERTS = "x-iot://sensors/alerts"
SENSOR_ALERTS_ALIAS = "sensor-alerts"
IOT_READINGS = "s3://assetflow-demo/iot/readings"
IOT_DAILY = "s3://assetflow-demo/iot/daily"
OPS_DASHBOARD = "s3://assetflow-demo/reports/ops_dashboard"
DASHBOARD_REFRESH = "x-ops://dashboard/refresh"
DAILY_REPORT = "s3://assetflow-demo/reports/daily"
EXPORTS_PREFIX = "s3://assetflow-demo/exports"
PARTNER_EXPORTS_ALIAS = "partner-exports"
PARTNER_FEED_AUDIT = "s3://assetflow-demo/audit/partner_feeds"


# --- Sensor readings (Kafka payloads), shared by the sensor jobs ------------------------------------

#: One row per triggering reading event, before parsing.
RAW_READING_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("sensor_id", StringType()),
        StructField("reading_time", StringType()),
        StructField("temperature_c", DoubleType()),
        StructField("humidity_pct", DoubleType()),
    ]
)


def _number(value: Any) -> float | None:
    # bool is an int in Python, but true is not a temperature.
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def reading_records(events: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Turn reading events (``extra["payload"]`` = one Kafka message) into RAW_READING_SCHEMA tuples.

    Malformed payloads become rows with nulls, which ``parse_readings`` rejects and counts.
    """
    records = []
    for event in events:
        payload = event.payload if isinstance(event.payload, Mapping) else {}
        records.append(
            (
                event.id,
                _text(payload.get("sensor_id")),
                _text(payload.get("reading_time")),
                _number(payload.get("temperature_c")),
                _number(payload.get("humidity_pct")),
            )
        )
    return records


def parse_readings(raw: DataFrame) -> DataFrame:
    """Parse raw readings: ``reading_time`` to a UTC timestamp, ``reading_date``; drop unusable rows.

    A reading needs a sensor id and a parseable time; the measurements may be missing.
    """
    parsed = raw.select(
        sf.col("event_id"),
        sf.col("sensor_id"),
        sf.try_to_timestamp(sf.col("reading_time")).alias("reading_time"),
        sf.col("temperature_c"),
        sf.col("humidity_pct"),
    )
    return parsed.filter(sf.col("sensor_id").isNotNull() & sf.col("reading_time").isNotNull()).withColumn(
        "reading_date", sf.to_date("reading_time")
    )
