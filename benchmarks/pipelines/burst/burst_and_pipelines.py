"""Burst benchmark, ``a & b``: the burst goes to a's queue; b's queue gets one message before it and one after.

Airflow's all-of semantics (DESIGN §3.2, §3.4): b's first event waits in the queue, so the burst's first
evaluated event of a makes run 1, which consumes b and whatever of a is queued by then; the rest of the burst
queues up on a (repeated events of one asset make no run). b's second message, sent once every event of the
burst has been evaluated, makes run 2, which consumes all the rest. So exactly two runs, whose triggering
events of a are together the whole burst, each event once, whatever the interleaving.
"""

from __future__ import annotations

from assetflow import Asset, AssetWatcher, Pipeline, SparkJob, SqsQueue

burst_a = Asset(
    "burst_a",
    "x-bench://burst/a",
    watchers=[AssetWatcher("bench-burst-a", SqsQueue("bench-burst-a"))],
)
burst_b = Asset(
    "burst_b",
    "x-bench://burst/b",
    watchers=[AssetWatcher("bench-burst-b", SqsQueue("bench-burst-b"))],
)

burst_and = Pipeline(
    "burst_and", schedule=burst_a & burst_b, job=SparkJob("benchmarks/pipelines/jobs/first_line.py")
)
