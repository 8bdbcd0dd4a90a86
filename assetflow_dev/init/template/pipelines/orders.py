"""An SQS queue receives one message per order; each batch of orders becomes a Spark run that sums them."""

from __future__ import annotations

from assetflow import Asset, AssetWatcher, Pipeline, SparkJob, SqsQueue

ORDER_SCHEMA = {
    "type": "object",
    "required": ["order_id", "customer", "amount"],
    "properties": {
        "order_id": {"type": "string", "minLength": 1},
        "customer": {"type": "string", "minLength": 1},
        "amount": {"type": "number", "minimum": 0},
    },
}

# Every message on the `orders` queue becomes an event of this asset (a message that breaks the schema
# is quarantined with its reason, never lost).
orders = Asset(
    "orders",
    "s3://{{bucket}}/landing/orders",
    watchers=[AssetWatcher("orders", SqsQueue("orders", schema=ORDER_SCHEMA))],
)
order_totals = Asset("order_totals", "s3://{{bucket}}/curated/order_totals")

# Runs when orders arrive, at most one at a time: orders that arrive meanwhile wait in the queue and make
# the next run. The job path is relative to this project's root (the folder with cdk.json).
order_totals_job = Pipeline(
    id="order_totals",
    schedule=orders,
    job=SparkJob("jobs/order_totals.py"),
    outlets=[order_totals],
    max_active_runs=1,
)
