"""Lateness benchmark: an asset due every minute (grace 0) and a fallback pipeline on ``late(feed)``.

The benchmark keeps the asset fresh for one minute and lets it miss the next, so every other minute's deadline
is a miss the local runtime must show (health, AssetLate, the fallback's run).
"""

from __future__ import annotations

from assetflow import Asset, ExpectedArrival, Pipeline, SparkJob, late

feed = Asset("lateness_feed", "x-bench://lateness/feed", expect=ExpectedArrival("* * * * *"))

# A pipeline that consumes the feed (so that it is an ordinary input), and the fallback when it is late.
lateness_consumer = Pipeline(
    "lateness_consumer", schedule=feed, job=SparkJob("benchmarks/pipelines/jobs/first_line.py")
)
lateness_fallback = Pipeline(
    "lateness_fallback", schedule=late(feed), job=SparkJob("benchmarks/pipelines/jobs/first_line.py")
)
