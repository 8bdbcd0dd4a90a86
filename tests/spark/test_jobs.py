"""Every job's ``main()`` in-process on the shared session, chained as the example pipelines chain them."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")

from pyspark.sql import SparkSession

from spark_jobs import (
    daily_report,
    deliveries_etl,
    ops_dashboard,
    partner_exports,
    partner_feed_audit,
    sample_data,
    sensor_check,
    sensor_daily_rollup,
)
from spark_jobs.common import (
    CURATED_DELIVERIES,
    DAILY_REPORT,
    IOT_DAILY,
    IOT_READINGS,
    LANDING_DELIVERIES,
    OPS_DASHBOARD,
    PARTNER_EXPORTS_ALIAS,
    PARTNER_FEED_AUDIT,
    SENSOR_ALERTS,
    SENSOR_ALERTS_ALIAS,
    SENSOR_READINGS,
)
from tests.spark.contexts import BUCKET, alias_outlet, asset_outlet, event, read_metadata, write_context

pytestmark = pytest.mark.spark

DAY = "2026-11-21"


class Demo:
    """A local stand-in for the demo bucket, and the run contexts the scheduler would write."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bucket = root / "assetflow-demo"
        self.runs = root / "runs"
        self.path_map = {BUCKET: str(self.bucket) + "/"}
        self._count = 0

    def local(self, uri: str) -> Path:
        return self.bucket / uri.removeprefix(BUCKET)

    def run(self, job: Any, pipeline: str, *, args: tuple[str, ...] = (), **context: Any) -> dict[str, Any]:
        """Run a job's main() on a fresh context and return its outlet metadata."""
        self._count += 1
        run_id = f"{pipeline}-{self._count}"
        path, metadata = write_context(
            self.runs, run_id, pipeline=pipeline, run_id=run_id, path_map=self.path_map, **context
        )
        job.main(["--assetflow-context", str(path), *args])
        if not metadata.exists():
            # A job with nothing to say beyond "succeeded" writes no metadata: the run-state function emits the
            # declared asset outlets without extras (and nothing through an alias).
            outlets = context.get("outlets", ())
            return {
                "events": [
                    {"asset": o["uri"], "extra": {}, "alias": None} for o in outlets if o["type"] == "asset"
                ]
            }
        return read_metadata(metadata)

    @staticmethod
    def events_from(metadata: dict[str, Any], pipeline: str) -> list[dict[str, Any]]:
        """The asset events the run-state handler makes of a successful run's outlet metadata."""
        return [
            event(
                item["asset"],
                f"{metadata['run_id']}-{n}",
                f"2026-11-21T16:00:{n:02d}.000000Z",
                extra=item["extra"],
                source={"type": "run", "pipeline": pipeline, "run_id": metadata["run_id"]},
            )
            for n, item in enumerate(metadata["events"])
        ]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def delivery_bodies(demo: Demo) -> list[dict[str, Any]]:
    bodies = sample_data.write_delivery_files(demo.local(LANDING_DELIVERIES), deliveries=2, day=DAY)
    return [json.loads(body) for body in bodies]


def _landing_events(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        event(LANDING_DELIVERIES, f"m-{n}", f"2026-11-21T15:00:{n:02d}.000000Z", payload=body)
        for n, body in enumerate(bodies)
    ]


def _reference_orders(demo: Demo, bodies: list[dict[str, Any]]) -> dict[str, tuple[str, int, float]]:
    """The sample files cleaned by plain Python: order_id -> (delivery_id, quantity, unit_price)."""
    latest: dict[str, tuple[datetime, str, int, float]] = {}
    for body in bodies:
        for uri in body["files"]:
            with demo.local(uri).open(newline="") as handle:
                for row in csv.DictReader(handle):
                    cells = {k: (v or "").strip() for k, v in row.items()}
                    try:
                        quantity, price = int(cells["quantity"]), float(cells["unit_price"])
                        when = datetime.fromisoformat(cells["delivered_at"])
                    except ValueError:
                        continue
                    if quantity < 0 or price < 0 or not cells["order_id"] or not cells["sku"]:
                        continue
                    if cells["order_id"] not in latest or when > latest[cells["order_id"]][0]:
                        latest[cells["order_id"]] = (when, body["delivery_id"], quantity, price)
    return {order: (d, q, p) for order, (_, d, q, p) in latest.items()}


@pytest.fixture(scope="module")
def curated_metadata(demo: Demo, delivery_bodies: list[dict[str, Any]]) -> dict[str, Any]:
    return demo.run(
        deliveries_etl,
        "deliveries_etl",
        events=_landing_events(delivery_bodies),
        outlets=[asset_outlet(CURATED_DELIVERIES)],
    )


def test_deliveries_etl_curates_the_delivered_files(
    spark: SparkSession, demo: Demo, delivery_bodies: list[dict[str, Any]], curated_metadata: dict[str, Any]
) -> None:
    reference = _reference_orders(demo, delivery_bodies)
    [outlet] = curated_metadata["events"]
    assert outlet == {
        "asset": CURATED_DELIVERIES,
        "alias": None,
        "extra": {
            "row_count": len(reference),
            "rejected_rows": 8,
            "duplicate_rows": 2,
            "delivery_ids": ["d-001", "d-002"],
        },
    }
    curated = spark.read.parquet(str(demo.local(CURATED_DELIVERIES)))
    assert sorted(p.name for p in demo.local(CURATED_DELIVERIES).glob("delivery_id=*")) == [
        "delivery_id=d-001",
        "delivery_id=d-002",
    ]
    totals = curated.groupBy().sum("total_quantity", "order_count").first()
    assert totals is not None
    assert totals[0] == sum(q for _, q, _ in reference.values())
    assert totals[1] == len(reference)
    revenue = sum(r["revenue"] for r in curated.collect())
    assert revenue == pytest.approx(sum(q * p for _, q, p in reference.values()), abs=0.05)


def test_deliveries_etl_rerun_replaces_its_deliveries(
    spark: SparkSession, demo: Demo, delivery_bodies: list[dict[str, Any]], curated_metadata: dict[str, Any]
) -> None:
    before = spark.read.parquet(str(demo.local(CURATED_DELIVERIES))).count()
    again = demo.run(
        deliveries_etl,
        "deliveries_etl",
        events=_landing_events(delivery_bodies[:1]),
        outlets=[asset_outlet(CURATED_DELIVERIES)],
    )
    assert again["events"][0]["extra"]["delivery_ids"] == ["d-001"]
    assert spark.read.parquet(str(demo.local(CURATED_DELIVERIES))).count() == before


def test_deliveries_etl_missing_file_fails_the_run_without_outlets(demo: Demo, tmp_path: Path) -> None:
    body = {"delivery_id": "d-404", "supplier": "acme", "files": [f"{LANDING_DELIVERIES}/d-404/none.csv"]}
    path, metadata = write_context(
        tmp_path,
        "missing",
        pipeline="deliveries_etl",
        run_id="r-missing",
        events=_landing_events([body]),
        outlets=[asset_outlet(CURATED_DELIVERIES)],
        path_map=demo.path_map,
    )
    with pytest.raises(Exception, match=r"PATH_NOT_FOUND|does not exist"):
        deliveries_etl.main(["--assetflow-context", str(path)])
    assert not metadata.exists()


@pytest.fixture(scope="module")
def exports_metadata(demo: Demo, curated_metadata: dict[str, Any]) -> dict[str, Any]:
    return demo.run(
        partner_exports,
        "partner_exports",
        events=demo.events_from(curated_metadata, "deliveries_etl"),
        outlets=[alias_outlet(PARTNER_EXPORTS_ALIAS)],
    )


def test_partner_exports_add_one_export_per_supplier_to_the_alias(
    demo: Demo, curated_metadata: dict[str, Any], exports_metadata: dict[str, Any]
) -> None:
    events = exports_metadata["events"]
    assert [(e["asset"], e["alias"]) for e in events] == [
        ("s3://assetflow-demo/exports/acme", PARTNER_EXPORTS_ALIAS),
        ("s3://assetflow-demo/exports/globex", PARTNER_EXPORTS_ALIAS),
    ]
    for item in events:
        files = list(demo.local(item["asset"]).glob("*.csv"))
        assert len(files) == 1
        with files[0].open(newline="") as handle:
            lines = list(csv.DictReader(handle))
        assert item["extra"] == {"row_count": len(lines), "delivery_ids": ["d-001", "d-002"]}
        assert {line["supplier"] for line in lines} == {item["asset"].rsplit("/", 1)[1]}
        assert list(lines[0]) == list(partner_exports.EXPORT_COLUMNS)


def test_partner_exports_without_delivery_ids_add_nothing(demo: Demo) -> None:
    metadata = demo.run(
        partner_exports,
        "partner_exports",
        events=[event(CURATED_DELIVERIES, "e", "2026-11-21T16:00:00.000000Z", extra={"row_count": 0})],
        outlets=[alias_outlet(PARTNER_EXPORTS_ALIAS)],
    )
    assert metadata["events"] == []


def test_partner_feed_audit_reads_the_triggering_exports(
    spark: SparkSession, demo: Demo, exports_metadata: dict[str, Any]
) -> None:
    triggering = demo.events_from(exports_metadata, "partner_exports")
    triggering.append(event("s3://assetflow-demo/exports/initech", "gone", "2026-11-21T16:01:00.000000Z"))
    metadata = demo.run(
        partner_feed_audit,
        "partner_feed_audit",
        events=triggering,
        outlets=[asset_outlet(PARTNER_FEED_AUDIT)],
    )
    exported = sum(e["extra"]["row_count"] for e in exports_metadata["events"])
    assert metadata["events"][0]["extra"] == {
        "suppliers": ["acme", "globex", "initech"],
        "row_count": 3,
        "exported_rows": exported,
    }
    audit = spark.read.parquet(str(demo.local(PARTNER_FEED_AUDIT)))
    assert sorted((r["supplier"], r["found"]) for r in audit.collect()) == [
        ("acme", True),
        ("globex", True),
        ("initech", False),
    ]


def _reading_events(bodies: list[str], first: int = 0) -> list[dict[str, Any]]:
    return [
        event(
            SENSOR_READINGS,
            f"k-{first + n}",
            f"2026-11-21T16:{n // 60:02d}:{n % 60:02d}.000000Z",
            payload=json.loads(body),
            partition_key=DAY,
            source={"type": "watcher", "watcher": "sensor-readings", "kind": "kafka"},
        )
        for n, body in enumerate(bodies)
    ]


def _expected_alert(readings: list[dict[str, Any]]) -> dict[str, Any]:
    flagged = [r for r in readings if r["temperature_c"] > 30.0 or not 20.0 <= r["humidity_pct"] <= 80.0]
    return {
        "sensor_ids": sorted({r["sensor_id"] for r in flagged}),
        "max_temperature_c": max(r["temperature_c"] for r in flagged),
        "alert_count": len(flagged),
    }


@pytest.fixture(scope="module")
def readings_metadata(demo: Demo) -> dict[str, Any]:
    return demo.run(
        sensor_check,
        "sensor_check",
        events=_reading_events(sample_data.sensor_messages(count=24, day=DAY)),
        outlets=[asset_outlet(IOT_READINGS), alias_outlet(SENSOR_ALERTS_ALIAS)],
    )


def test_sensor_check_stores_readings_and_raises_the_alert_alias(
    spark: SparkSession, demo: Demo, readings_metadata: dict[str, Any]
) -> None:
    readings = [json.loads(body) for body in sample_data.sensor_messages(count=24, day=DAY)]
    assert readings_metadata["events"] == [
        {"asset": IOT_READINGS, "extra": {"row_count": 24}, "alias": None},
        {
            "asset": SENSOR_ALERTS,
            "extra": _expected_alert(readings),
            "alias": SENSOR_ALERTS_ALIAS,
            "aliases": [SENSOR_ALERTS_ALIAS],
        },
    ]
    stored = spark.read.parquet(str(demo.local(IOT_READINGS)))
    assert stored.count() == 24
    assert stored.filter("flagged").count() == _expected_alert(readings)["alert_count"]


def test_sensor_check_without_anomalies_adds_nothing_to_the_alias(tmp_path: Path) -> None:
    calm = [
        json.dumps(
            {
                "sensor_id": "s-9",
                "reading_time": f"{DAY}T20:00:00Z",
                "temperature_c": 21.0,
                "humidity_pct": 50,
            }
        )
    ]
    metadata = Demo(tmp_path).run(
        sensor_check,
        "sensor_check",
        events=_reading_events(calm, first=100),
        outlets=[asset_outlet(IOT_READINGS), alias_outlet(SENSOR_ALERTS_ALIAS)],
        args=("--max-temperature", "25"),
    )
    assert metadata["events"] == [{"asset": IOT_READINGS, "extra": {"row_count": 1}, "alias": None}]


def test_sensor_daily_rollup_writes_the_partition_day(spark: SparkSession, demo: Demo) -> None:
    bodies = sample_data.sensor_messages(count=24, day=DAY)
    metadata = demo.run(
        sensor_daily_rollup,
        "sensor_daily_rollup",
        events=_reading_events(bodies),
        outlets=[asset_outlet(IOT_DAILY)],
        partition_key=DAY,
    )
    assert metadata["events"][0]["extra"] == {"row_count": 4, "day": DAY}
    rollup = spark.read.parquet(str(demo.local(f"{IOT_DAILY}/day={DAY}")))
    assert sorted((r["sensor_id"], r["reading_count"]) for r in rollup.collect()) == [
        ("s-1", 6),
        ("s-2", 6),
        ("s-3", 6),
        ("s-4", 6),
    ]


def test_sensor_daily_rollup_needs_a_day(demo: Demo) -> None:
    with pytest.raises(ValueError, match="partition key"):
        demo.run(sensor_daily_rollup, "sensor_daily_rollup", outlets=[asset_outlet(IOT_DAILY)])


def test_ops_dashboard_and_daily_report_summarise_both_sides(
    spark: SparkSession, demo: Demo, curated_metadata: dict[str, Any], readings_metadata: dict[str, Any]
) -> None:
    triggering = demo.events_from(curated_metadata, "deliveries_etl") + demo.events_from(
        readings_metadata, "sensor_check"
    )
    dashboard_metadata = demo.run(
        ops_dashboard, "ops_dashboard", events=triggering, outlets=[asset_outlet(OPS_DASHBOARD)]
    )
    assert dashboard_metadata["events"][0]["extra"] == {
        "row_count": 1,
        "triggered_by": sorted([CURATED_DELIVERIES, IOT_READINGS, SENSOR_ALERTS]),
    }
    [day] = spark.read.parquet(str(demo.local(OPS_DASHBOARD))).collect()
    assert (str(day["day"]), day["orders"], day["readings"]) == (
        DAY,
        curated_metadata["events"][0]["extra"]["row_count"],
        24,
    )
    assert day["alerts"] == readings_metadata["events"][1]["extra"]["alert_count"]

    # A time tick: no triggering events at all.
    report_metadata = demo.run(daily_report, "daily_report", outlets=[asset_outlet(DAILY_REPORT)])
    assert report_metadata["events"][0]["extra"] == {"row_count": 1, "trigger": "time", "report_date": DAY}
    [report_file] = demo.local(DAILY_REPORT).glob("*.json")
    [line] = [json.loads(text) for text in report_file.read_text().splitlines()]
    assert (line["day"], line["readings"], line["trigger"]) == (DAY, 24, "time")


def test_ops_dashboard_with_no_data_yet(tmp_path: Path) -> None:
    empty = Demo(tmp_path)
    metadata = empty.run(
        ops_dashboard,
        "ops_dashboard",
        events=[event("x-ops://dashboard/refresh", "e", "2026-11-21T16:00:00.000000Z")],
        outlets=[asset_outlet(OPS_DASHBOARD)],
    )
    assert metadata["events"][0]["extra"] == {"row_count": 0, "triggered_by": ["x-ops://dashboard/refresh"]}
    report = empty.run(daily_report, "daily_report")
    assert report["events"] == []


def test_inbox_digest_has_a_row_per_file_order_and_click(spark: SparkSession, demo: Demo) -> None:
    from spark_jobs import inbox_digest

    landed, orders, clicks = (
        "s3://assetflow-demo-inbox/incoming",
        "x-shop://orders/placed",
        "x-web://clickstream",
    )
    stamp = "2026-11-26T04:00:0{}.000000Z"
    events = [
        event(
            landed,
            "f-1",
            stamp.format(1),
            extra={"bucket": "assetflow-demo-inbox", "key": "incoming/a.csv", "size": 10},
        ),
        event(
            landed,
            "f-2",
            stamp.format(2),
            extra={"bucket": "assetflow-demo-inbox", "key": "incoming/b.csv", "size": 32},
        ),
        event(
            orders,
            "o-1",
            stamp.format(3),
            extra={"detail-type": "Order Placed", "detail": {"order_id": "o-9"}},
        ),
        event(clicks, "c-1", stamp.format(4), payload={"page": "/home"}),
    ]
    metadata = demo.run(
        inbox_digest, "inbox_digest", events=events, outlets=[asset_outlet(inbox_digest.INBOX_DIGEST)]
    )
    assert metadata["events"][0]["extra"] == {"files": 2, "orders": 1, "clicks": 1, "file_bytes": 42}
    digest = spark.read.parquet(str(demo.local(inbox_digest.INBOX_DIGEST)))
    assert sorted((r["kind"], r["item"]) for r in digest.collect()) == [
        ("click", "/home"),
        ("file", "s3://assetflow-demo-inbox/incoming/a.csv"),
        ("file", "s3://assetflow-demo-inbox/incoming/b.csv"),
        ("order", "o-9"),
    ]
