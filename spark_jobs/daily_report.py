"""Write the daily operations report from the dashboard; runs on dashboard updates and on a daily schedule."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from datetime import date, datetime, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assetflow_job import RunContext, run
from spark_jobs.common import (
    DAILY_REPORT,
    OPS_DASHBOARD,
    configure_logging,
    read_parquet_snapshot,
    spark_session,
)

logger = logging.getLogger(__name__)

REPORT_COLUMNS = ("day", "revenue", "orders", "readings", "alerts")


def latest_days(dashboard: DataFrame, days: int, until: date | None = None) -> DataFrame:
    """Keep the dashboard's ``days`` most recent days (on or before ``until``, when given), oldest first."""
    rows = dashboard if until is None else dashboard.filter(sf.col("day") <= sf.lit(until))
    return rows.orderBy(sf.col("day").desc()).limit(days).orderBy("day").select(*REPORT_COLUMNS)


def report_frame(rows: DataFrame, *, report_date: date, trigger: str, run_id: str) -> DataFrame:
    """Shape report rows for JSON: the day as text, and what produced the report."""
    return rows.select(
        sf.date_format("day", "yyyy-MM-dd").alias("day"),
        *REPORT_COLUMNS[1:],
        sf.lit(report_date.isoformat()).alias("report_date"),
        sf.lit(trigger).alias("trigger"),
        sf.lit(run_id).alias("run_id"),
    )


def trigger_of(ctx: RunContext) -> str:
    """Return ``assets`` when events triggered the run, ``time`` for a schedule tick."""
    return "assets" if any(ctx.triggering_asset_events.values()) else "time"


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse ``--days`` (how many dashboard days the report shows) and ``--until`` (last day, optional)."""
    parser = argparse.ArgumentParser(prog="daily_report", description=__doc__)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--until", type=date.fromisoformat, default=None, help="YYYY-MM-DD")
    options = parser.parse_args(list(args))
    if options.days < 1:
        parser.error("--days must be at least 1")
    return options


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: the latest dashboard days as one JSON-lines file, whether or not events triggered it."""
    with run(argv) as ctx:
        options = parse_args(ctx.args)
        created = ctx.created_at or datetime.now(timezone.utc)
        trigger = trigger_of(ctx)
        with spark_session("assetflow-daily-report") as spark:
            dashboard = read_parquet_snapshot(spark, ctx.path(OPS_DASHBOARD))
            row_count = 0
            if dashboard is not None:
                report = report_frame(
                    latest_days(dashboard, options.days, options.until),
                    report_date=created.date(),
                    trigger=trigger,
                    run_id=ctx.run_id,
                ).cache()
                row_count = report.count()
                report.coalesce(1).write.mode("overwrite").json(ctx.path(DAILY_REPORT))
                report.unpersist()
        logger.info(
            "daily report written run_id=%s trigger=%s days=%d dashboard=%s",
            ctx.run_id,
            trigger,
            row_count,
            dashboard is not None,
        )
        # The report is an outlet only if the pipeline declares it; the job works either way.
        if DAILY_REPORT in ctx.outlet_events:
            ctx.outlet_events[DAILY_REPORT].extra = {
                "row_count": row_count,
                "trigger": trigger,
                "report_date": created.date().isoformat(),
            }


if __name__ == "__main__":
    configure_logging()
    main()
