"""Settings for a Spark driver on one machine (the local runtime, tests): loopback, small, quick to start."""

from __future__ import annotations

from collections.abc import Mapping

#: No UI, loopback only, few shuffle partitions, a quicker JVM start.
LOCAL_SPARK_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
