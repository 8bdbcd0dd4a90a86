"""The inbox: partner files land in S3, the shop announces orders on EventBridge, clicks stream on Kinesis."""

from __future__ import annotations

from assetflow import (
    Asset,
    AssetWatcher,
    EventBridgePattern,
    KinesisStream,
    Pipeline,
    S3ObjectCreated,
    SparkJob,
)

#: The bucket partners upload to; only CSV files under incoming/ count (their _SUCCESS markers do not).
INBOX_BUCKET = "assetflow-demo-inbox"

# One watcher, two assets: each file is an event of the landed files and of the intake audit trail.
inbox_files = AssetWatcher("inbox-files", S3ObjectCreated(INBOX_BUCKET, prefix="incoming/", suffix=".csv"))
landed_files = Asset("landed_files", f"s3://{INBOX_BUCKET}/incoming", watchers=[inbox_files])
intake_audit = Asset("intake_audit", "x-audit://inbox/intake", watchers=[inbox_files])

shop_orders = Asset(
    "shop_orders",
    "x-shop://orders/placed",
    watchers=[
        AssetWatcher(
            "shop-orders",
            EventBridgePattern(
                {"source": ["assetflow.demo.shop"], "detail-type": ["Order Placed"]},
                schema={
                    "type": "object",
                    "required": ["order_id", "amount"],
                    "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
                },
            ),
        )
    ],
)

web_clicks = Asset(
    "web_clicks",
    "x-web://clickstream",
    watchers=[
        AssetWatcher(
            "web-clicks",
            KinesisStream("assetflow-demo-clicks", filter={"page": [{"prefix": "/"}]}),
        )
    ],
)

inbox_digest_table = Asset("inbox_digest", "s3://assetflow-demo/inbox/digest")

# A digest once files, orders and clicks have all arrived since the last one.
inbox_digest = Pipeline(
    id="inbox_digest",
    schedule=landed_files & shop_orders & web_clicks,
    job=SparkJob("spark_jobs/inbox_digest.py"),
    outlets=[inbox_digest_table],
    max_active_runs=1,
)
