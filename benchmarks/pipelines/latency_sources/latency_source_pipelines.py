"""Latency of the S3, EventBridge and Kinesis sources: each watcher feeds a single-asset, one-run-per-event pipeline.

An SQS watcher runs beside them as the baseline measured in the same runtime.
"""

from __future__ import annotations

from assetflow import (
    Asset,
    AssetWatcher,
    EventBridgePattern,
    KinesisStream,
    Pipeline,
    S3ObjectCreated,
    SparkJob,
    SqsQueue,
)

JOB = SparkJob("benchmarks/pipelines/jobs/first_line.py")

sources = {
    "sqs": SqsQueue("bench-sources-sqs"),
    "s3": S3ObjectCreated("bench-sources-landing", prefix="bench/", suffix=".csv"),
    "eventbridge": EventBridgePattern({"source": ["assetflow.bench"], "detail-type": ["Latency Probe"]}),
    "kinesis": KinesisStream("bench-sources-stream"),
}
assets = {
    kind: Asset(
        f"latency_{kind}", f"x-bench://latency-sources/{kind}", watchers=[AssetWatcher(f"bench-{kind}", s)]
    )
    for kind, s in sources.items()
}
latency_sqs = Pipeline("latency_src_sqs", schedule=assets["sqs"], job=JOB, batch=False)
latency_s3 = Pipeline("latency_src_s3", schedule=assets["s3"], job=JOB, batch=False)
latency_eventbridge = Pipeline(
    "latency_src_eventbridge", schedule=assets["eventbridge"], job=JOB, batch=False
)
latency_kinesis = Pipeline("latency_src_kinesis", schedule=assets["kinesis"], job=JOB, batch=False)
