"""Export each supplier's newly curated deliveries as CSV; the alias resolves to the exports written."""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Callable, Iterable, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assetflow_job import AliasRef, AssetEvent, run
from spark_jobs.common import (
    CURATED_DELIVERIES,
    EXPORTS_PREFIX,
    PARTNER_EXPORTS_ALIAS,
    configure_logging,
    read_parquet_snapshot,
    spark_session,
)

logger = logging.getLogger(__name__)

EXPORT_COLUMNS = (
    "supplier",
    "delivery_id",
    "delivery_day",
    "sku",
    "total_quantity",
    "revenue",
    "order_count",
)


def delivery_ids_from_events(events: Iterable[AssetEvent]) -> list[str]:
    """Return the delivery ids the curated-deliveries events name in ``extra["delivery_ids"]``, sorted."""
    ids: set[str] = set()
    for event in events:
        named = event.extra.get("delivery_ids") or []
        if isinstance(named, list):
            ids.update(value for value in named if isinstance(value, str) and value)
    return sorted(ids)


def supplier_slug(supplier: str) -> str:
    """Return the URI-safe name of a supplier's export (``Acme Corp`` -> ``acme-corp``)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", supplier.strip().lower()).strip("-.")
    return slug or "unknown"


def export_uri(supplier: str) -> str:
    """Return the export asset of a supplier: ``s3://assetflow-demo/exports/<supplier>``."""
    return f"{EXPORTS_PREFIX}/{supplier_slug(supplier)}"


def export_rows(curated: DataFrame, delivery_ids: Sequence[str]) -> DataFrame:
    """Select the curated rows of the given deliveries, in a stable order, with the export's columns."""
    return (
        curated.filter(sf.col("delivery_id").isin(list(delivery_ids)))
        .select(*EXPORT_COLUMNS)
        .orderBy("supplier", "delivery_id", "delivery_day", "sku")
    )


def write_exports(rows: DataFrame, resolve: Callable[[str], str]) -> dict[str, int]:
    """Write one CSV export per supplier (suppliers with the same slug share one); return rows per export."""
    suppliers = sorted({row["supplier"] for row in rows.select("supplier").distinct().collect()})
    by_slug: dict[str, list[str]] = {}
    for supplier in suppliers:
        by_slug.setdefault(supplier_slug(supplier), []).append(supplier)
    exported = {}
    for slug, names in sorted(by_slug.items()):
        uri = f"{EXPORTS_PREFIX}/{slug}"
        supplier_rows = rows.filter(sf.col("supplier").isin(names))
        # One file, replaced each time: the asset is the supplier's latest export.
        supplier_rows.coalesce(1).write.mode("overwrite").csv(resolve(uri), header=True)
        exported[uri] = supplier_rows.count()
    return exported


def parse_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse the job's own arguments (none yet)."""
    return argparse.ArgumentParser(prog="partner_exports", description=__doc__).parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job: one CSV export per supplier of the triggering deliveries, each added to the alias."""
    with run(argv) as ctx:
        parse_args(ctx.args)
        delivery_ids = delivery_ids_from_events(ctx.triggering_asset_events.get(CURATED_DELIVERIES, []))
        exported: dict[str, int] = {}
        if delivery_ids:
            with spark_session("assetflow-partner-exports") as spark:
                curated = read_parquet_snapshot(spark, ctx.path(CURATED_DELIVERIES))
                if curated is not None:
                    rows = export_rows(curated, delivery_ids).cache()
                    exported = write_exports(rows, ctx.path)
                    rows.unpersist()
        for uri, count in exported.items():
            ctx.outlet_events[AliasRef(PARTNER_EXPORTS_ALIAS)].add(
                uri, extra={"row_count": count, "delivery_ids": delivery_ids}
            )
        logger.info(
            "partner exports written run_id=%s deliveries=%s exports=%s",
            ctx.run_id,
            ",".join(delivery_ids),
            ",".join(f"{uri}:{count}" for uri, count in exported.items()),
        )


if __name__ == "__main__":
    configure_logging()
    main()
