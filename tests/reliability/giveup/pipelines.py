"""The definitions the give-up suite runs the local runtime with: an SQS watcher, a Kafka watcher, a cron."""

from __future__ import annotations

from assetflow import Asset, AssetOrTimeSchedule, AssetWatcher, KafkaTopic, Pipeline, SparkJob, SqsQueue

orders = Asset("s3://shop/orders", watchers=[AssetWatcher("orders", SqsQueue("giveup-orders"))])
readings = Asset("x-test://readings", watchers=[AssetWatcher("readings", KafkaTopic("giveup-readings"))])
clean = Asset("s3://shop/clean-orders")
emitted = Asset("x-test://emitted")
never = Asset("x-test://never")

etl = Pipeline(
    "etl", schedule=[orders], job=SparkJob("spark_jobs/deliveries_etl.py"), outlets=[clean], max_active_runs=1
)
report = Pipeline("report", schedule=[clean], job=SparkJob("spark_jobs/daily_report.py"))
check = Pipeline("check", schedule=[readings], job=SparkJob("spark_jobs/sensor_check.py"))
on_demand = Pipeline(
    "on_demand", schedule=[emitted], job=SparkJob("spark_jobs/ops_dashboard.py"), max_active_runs=1
)
nightly = Pipeline(
    "nightly", schedule=AssetOrTimeSchedule("0 6 * * *", never), job=SparkJob("spark_jobs/partner_exports.py")
)
