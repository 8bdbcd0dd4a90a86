"""Burst benchmark, single asset: one watched queue, one pipeline with ``batch=False``.

One run per event (DESIGN §3.5): a burst of N messages must make exactly N events and exactly N runs,
whatever the batching of the pollers and the evaluator. No outlets, so that every event is a message's.
"""

from __future__ import annotations

from assetflow import Asset, AssetWatcher, Pipeline, SparkJob, SqsQueue

burst_single_asset = Asset(
    "burst_single",
    "x-bench://burst/single",
    watchers=[AssetWatcher("bench-burst-single", SqsQueue("bench-burst-single"))],
)

burst_single = Pipeline(
    "burst_single",
    schedule=burst_single_asset,
    job=SparkJob("benchmarks/pipelines/jobs/first_line.py"),
    batch=False,
)
