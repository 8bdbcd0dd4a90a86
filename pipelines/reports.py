"""Reports: a dashboard on (deliveries & readings) | a manual refresh, and a daily report on cron or data."""

from __future__ import annotations

from deliveries import curated_deliveries
from sensors import readings_table

from assetflow import Asset, AssetOrTimeSchedule, Pipeline, SparkJob

# Operators refresh the dashboard by emitting this asset: `assetflow events emit x-ops://dashboard/refresh`.
dashboard_refresh = Asset("dashboard_refresh", "x-ops://dashboard/refresh")
ops_dashboard_table = Asset("ops_dashboard", "s3://assetflow-demo/reports/ops_dashboard")
daily_report_table = Asset("daily_report", "s3://assetflow-demo/reports/daily")

ops_dashboard = Pipeline(
    id="ops_dashboard",
    schedule=(curated_deliveries & readings_table) | dashboard_refresh,
    job=SparkJob("spark_jobs/ops_dashboard.py", spark_conf={"spark.sql.shuffle.partitions": "4"}),
    outlets=[ops_dashboard_table],
    max_active_runs=1,
)

daily_report = Pipeline(
    id="daily_report",
    schedule=AssetOrTimeSchedule("0 6 * * *", ops_dashboard_table, timezone="UTC"),
    job=SparkJob("spark_jobs/daily_report.py"),
    outlets=[daily_report_table],
    max_active_runs=1,
)
