"""IoT sensors: readings arrive on a Kafka topic; a check raises alerts; a partitioned job rolls up days."""

from __future__ import annotations

from assetflow import (
    Asset,
    AssetAlias,
    AssetWatcher,
    DailyMapper,
    KafkaTopic,
    PartitionedAssetSchedule,
    Pipeline,
    SparkJob,
)

READING_SCHEMA = {
    "type": "object",
    "required": ["sensor_id", "reading_time", "temperature_c"],
    "properties": {
        "sensor_id": {"type": "string"},
        "reading_time": {"type": "string"},
        "temperature_c": {"type": "number"},
        "humidity_pct": {"type": "number"},
    },
}

# Each reading's time becomes its event's partition key, so the daily rollup can group by day.
sensor_readings = Asset(
    "sensor_readings",
    "x-iot://sensors/readings",
    watchers=[
        AssetWatcher(
            "sensor-readings",
            KafkaTopic(
                "sensor-readings",
                filter={"sensor_id": [{"prefix": "s-"}]},
                schema=READING_SCHEMA,
                partition_key_field="reading_time",
            ),
        )
    ],
)
readings_table = Asset("iot_readings", "s3://assetflow-demo/iot/readings")
sensor_alerts = AssetAlias("sensor-alerts")
daily_readings = Asset("iot_daily", "s3://assetflow-demo/iot/daily")

# The alert asset is added to the alias only when a reading crosses a threshold: conditional triggering.
# One check at a time: readings that arrive meanwhile queue up and the next run takes them all together.
sensor_check = Pipeline(
    id="sensor_check",
    schedule=sensor_readings,
    job=SparkJob("spark_jobs/sensor_check.py", arguments=["--max-temperature", "30"]),
    outlets=[readings_table, sensor_alerts],
    max_active_runs=1,
)

sensor_daily_rollup = Pipeline(
    id="sensor_daily_rollup",
    schedule=PartitionedAssetSchedule(sensor_readings, mapper=DailyMapper()),
    job=SparkJob("spark_jobs/sensor_daily_rollup.py"),
    outlets=[daily_readings],
    max_active_runs=1,
)
