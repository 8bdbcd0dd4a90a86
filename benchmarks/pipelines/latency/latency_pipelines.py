"""Latency benchmark: one SQS watcher and one Kafka watcher, each feeding a single-asset pipeline.

``batch=False`` makes exactly one run per event, so every message sent maps to one run. The job records when
its first line of user code runs (measured with the ``spark`` launcher; the ``emr-api`` launcher never runs it).
"""

from __future__ import annotations

from assetflow import Asset, AssetWatcher, KafkaTopic, Pipeline, SparkJob, SqsQueue

FIRST_LINE_JOB = SparkJob("benchmarks/pipelines/jobs/first_line.py")

latency_sqs = Asset(
    "latency_sqs",
    "x-bench://latency/sqs",
    watchers=[AssetWatcher("bench-latency-sqs", SqsQueue("bench-latency-sqs"))],
)
latency_kafka = Asset(
    "latency_kafka",
    "x-bench://latency/kafka",
    watchers=[AssetWatcher("bench-latency-kafka", KafkaTopic("bench-latency-kafka"))],
)

latency_sqs_pipeline = Pipeline("latency_sqs", schedule=latency_sqs, job=FIRST_LINE_JOB, batch=False)
latency_kafka_pipeline = Pipeline("latency_kafka", schedule=latency_kafka, job=FIRST_LINE_JOB, batch=False)
