"""Digest what arrived in the inbox: files landed in S3, orders placed, clicks streamed, one row per event."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf
from pyspark.sql.types import LongType, StringType, StructField, StructType

from assetflow_job import run
from spark_jobs.common import configure_logging, spark_session

logger = logging.getLogger(__name__)

INBOX_DIGEST = "s3://assetflow-demo/inbox/digest"
ROW_SCHEMA = StructType(
    [
        StructField("asset", StringType()),
        StructField("event_id", StringType()),
        StructField("kind", StringType()),
        StructField("item", StringType()),
        StructField("size", LongType()),
    ]
)


def digest_rows(events_by_asset: Mapping[str, Iterable[Any]]) -> list[tuple[Any, ...]]:
    """One row per triggering event: the S3 object (key, size), the order (id) or the click (page)."""
    rows = []
    for asset, events in sorted(events_by_asset.items()):
        for event in events:
            extra = event.extra if isinstance(event.extra, Mapping) else {}
            if "key" in extra and "bucket" in extra:
                rows.append(
                    (asset, event.id, "file", f"s3://{extra['bucket']}/{extra['key']}", extra.get("size"))
                )
            elif "detail" in extra:
                detail = extra["detail"] if isinstance(extra["detail"], Mapping) else {}
                rows.append((asset, event.id, "order", str(detail.get("order_id")), None))
            else:
                payload = event.payload if isinstance(event.payload, Mapping) else {}
                rows.append((asset, event.id, "click", str(payload.get("page")), None))
    return rows


def summarise(digest: DataFrame) -> dict[str, int]:
    """Events per kind, and the bytes of the files."""
    counts = {
        row["kind"]: row["n"] for row in digest.groupBy("kind").agg(sf.count(sf.lit(1)).alias("n")).collect()
    }
    total = digest.agg(sf.coalesce(sf.sum("size"), sf.lit(0)).alias("bytes")).first()
    return {
        "files": int(counts.get("file", 0)),
        "orders": int(counts.get("order", 0)),
        "clicks": int(counts.get("click", 0)),
        "file_bytes": int(total["bytes"] if total is not None else 0),
    }


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse the job's own arguments (none yet)."""
    return argparse.ArgumentParser(prog="inbox_digest", description=__doc__).parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: one digest row per triggering event, stored under this run's id; counts as metadata."""
    with run(argv) as ctx:
        parse_args(ctx.args)
        rows = digest_rows(ctx.triggering_asset_events)
        with spark_session("assetflow-inbox-digest") as spark:
            digest = spark.createDataFrame(rows, ROW_SCHEMA).cache()
            summary = summarise(digest)
            (
                digest.withColumn("run_id", sf.lit(ctx.run_id))
                .coalesce(1)
                .write.mode("overwrite")
                .option("partitionOverwriteMode", "dynamic")
                .partitionBy("run_id")
                .parquet(ctx.path(INBOX_DIGEST))
            )
            digest.unpersist()
        logger.info(
            "inbox digested run_id=%s %s", ctx.run_id, " ".join(f"{k}={v}" for k, v in summary.items())
        )
        ctx.outlet_events[INBOX_DIGEST].extra = summary


if __name__ == "__main__":
    configure_logging()
    main()
