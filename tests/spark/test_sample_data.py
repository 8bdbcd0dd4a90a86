"""The demo's sample data: deterministic files and messages, with the bad rows and anomalies promised."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from spark_jobs import sample_data


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_deliveries_are_deterministic_and_announced_as_s3_uris(tmp_path: Path) -> None:
    first = sample_data.write_delivery_files(tmp_path / "a")
    second = sample_data.write_delivery_files(tmp_path / "b")
    assert first == second
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert sample_data.write_delivery_files(tmp_path / "c", seed=8) != first or _tree(
        tmp_path / "c"
    ) != _tree(tmp_path / "a")
    bodies = [json.loads(body) for body in first]
    assert [(b["delivery_id"], b["supplier"]) for b in bodies] == [
        ("d-001", "acme"),
        ("d-002", "globex"),
        ("d-003", "initech"),
    ]
    assert bodies[0]["files"] == [
        "s3://assetflow-demo/landing/deliveries/d-001/part-0.csv",
        "s3://assetflow-demo/landing/deliveries/d-001/part-1.csv",
    ]
    assert sorted(_tree(tmp_path / "a")) == [f"d-00{d}/part-{p}.csv" for d in (1, 2, 3) for p in (0, 1)]


def test_each_delivery_has_bad_rows_and_a_redelivered_order(tmp_path: Path) -> None:
    sample_data.write_delivery_files(tmp_path, deliveries=1, good_rows=8)
    rows: list[dict[str, str]] = []
    for part in sorted((tmp_path / "d-001").glob("*.csv")):
        with part.open(newline="") as handle:
            reader = csv.DictReader(handle)
            assert tuple(reader.fieldnames or ()) == sample_data.CSV_HEADER
            rows.extend(reader)
    assert len(rows) == 8 + 1 + 4
    order_ids = [r["order_id"].strip() for r in rows]
    assert len(order_ids) - len(set(order_ids)) == 1
    assert {"three", ""} <= {r["quantity"] for r in rows}
    assert "-3.50" in {r["unit_price"] for r in rows}
    assert "not-a-date" in {r["delivered_at"] for r in rows}
    assert rows[0]["order_id"] != rows[0]["order_id"].strip()


def test_sensor_messages_are_deterministic_with_readings_over_the_thresholds() -> None:
    messages = sample_data.sensor_messages(count=24)
    assert messages == sample_data.sensor_messages(count=24)
    readings = [json.loads(m) for m in messages]
    assert set(readings[0]) == {"sensor_id", "reading_time", "temperature_c", "humidity_pct"}
    assert readings[0]["reading_time"] == "2026-11-21T10:00:00Z"
    hot = [r for r in readings if r["temperature_c"] > 30.0]
    assert len(hot) == 3 and len({r["sensor_id"] for r in hot}) == 3
    assert [r["humidity_pct"] for r in readings if not 20 <= r["humidity_pct"] <= 80] == [85.0]
    assert {r["sensor_id"] for r in readings} == set(sample_data.SENSORS)
