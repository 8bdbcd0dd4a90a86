"""Data deliveries: an SQS message says a supplier's files landed; an ETL cleans them; exports fan out."""

from __future__ import annotations

from datetime import timedelta

from assetflow import Asset, AssetAlias, AssetWatcher, ExpectedArrival, Pipeline, SparkJob, SqsQueue

DELIVERY_MESSAGE_SCHEMA = {
    "type": "object",
    "required": ["delivery_id", "supplier", "files"],
    "properties": {
        "delivery_id": {"type": "string", "minLength": 1},
        "supplier": {"type": "string", "pattern": "^[a-z0-9-]+$"},
        "files": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^s3://"}},
    },
}

raw_deliveries = Asset(
    "raw_deliveries",
    "s3://assetflow-demo/landing/deliveries",
    extra={"owner": "supply-chain", "format": "csv"},
    watchers=[AssetWatcher("deliveries", SqsQueue("deliveries", schema=DELIVERY_MESSAGE_SCHEMA))],
    # Suppliers deliver every morning by 08:00 UTC; a morning without a delivery shows the asset as late.
    expect=ExpectedArrival("0 6 * * *", grace=timedelta(hours=2)),
)
curated_deliveries = Asset("curated_deliveries", "s3://assetflow-demo/curated/deliveries")
partner_exports = AssetAlias("partner-exports")
partner_feed_audit_table = Asset("partner_feed_audit", "s3://assetflow-demo/audit/partner_feeds")

# One run per delivery message (batch=False), at most two at a time; the rest wait in the queue.
deliveries_etl = Pipeline(
    id="deliveries_etl",
    schedule=raw_deliveries,
    job=SparkJob("spark_jobs/deliveries_etl.py"),
    outlets=[curated_deliveries],
    max_active_runs=2,
    batch=False,
)

# The assets this job updates are named at run time (one per supplier), through an alias.
partner_exports_job = Pipeline(
    id="partner_exports",
    schedule=curated_deliveries,
    job=SparkJob("spark_jobs/partner_exports.py"),
    outlets=[partner_exports],
    max_active_runs=1,
)

partner_feed_audit = Pipeline(
    id="partner_feed_audit",
    schedule=partner_exports,
    job=SparkJob("spark_jobs/partner_feed_audit.py"),
    outlets=[partner_feed_audit_table],
)
