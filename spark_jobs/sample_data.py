"""Deterministic sample data for the demo: delivery CSV files with SQS bodies, and sensor Kafka bodies."""

from __future__ import annotations

import csv
import json
import os
import random
from datetime import datetime, timedelta, timezone

LANDING_URI = "s3://assetflow-demo/landing/deliveries"
SUPPLIERS = ("acme", "globex", "initech")
SKUS = ("sku-100", "sku-200", "sku-300", "sku-400")
SENSORS = ("s-1", "s-2", "s-3", "s-4")
CSV_HEADER = ("order_id", "sku", "quantity", "unit_price", "delivered_at")

# The rows every delivery's file gets besides its good ones, each one a reason to reject or a duplicate.
_BAD_ROW_KINDS = ("non_numeric_quantity", "negative_unit_price", "missing_quantity", "bad_delivered_at")


def _stamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def delivery_rows(delivery_id: str, rng: random.Random, day: str, good_rows: int) -> list[list[str]]:
    """Return the CSV rows of one delivery: ``good_rows`` orders, one re-delivered later, and bad rows."""
    start = datetime.fromisoformat(day).replace(hour=8, tzinfo=timezone.utc)
    rows = []
    for number in range(1, good_rows + 1):
        delivered = start + timedelta(minutes=7 * number)
        rows.append(
            [
                f"{delivery_id}-o{number:03d}",
                rng.choice(SKUS),
                str(rng.randint(1, 20)),
                f"{rng.randint(100, 5000) / 100:.2f}",
                _stamp(delivered),
            ]
        )
    # Padding that cleaning trims away.
    rows[0] = [f"  {rows[0][0]} ", f" {rows[0][1]}", f" {rows[0][2]} ", rows[0][3], rows[0][4]]
    # The first order again, corrected and delivered later: this one must win.
    first = rows[1]
    rows.append([first[0], first[1], str(int(first[2]) + 1), first[3], _stamp(start + timedelta(hours=6))])
    bad = {
        "non_numeric_quantity": [f"{delivery_id}-x01", SKUS[0], "three", "4.50", _stamp(start)],
        "negative_unit_price": [f"{delivery_id}-x02", SKUS[1], "2", "-3.50", _stamp(start)],
        "missing_quantity": [f"{delivery_id}-x03", SKUS[2], "", "1.25", _stamp(start)],
        "bad_delivered_at": [f"{delivery_id}-x04", SKUS[3], "1", "9.99", "not-a-date"],
    }
    rows.extend(bad[kind] for kind in _BAD_ROW_KINDS)
    return rows


def write_delivery_files(
    folder: str | os.PathLike[str],
    *,
    uri_prefix: str = LANDING_URI,
    deliveries: int = 3,
    good_rows: int = 8,
    day: str = "2026-11-21",
    seed: int = 7,
) -> list[str]:
    """Write ``deliveries`` CSV deliveries under ``folder`` and return their SQS message bodies (JSON).

    ``folder`` is where ``uri_prefix`` lives locally: ``<folder>/d-001/part-0.csv`` is announced as
    ``<uri_prefix>/d-001/part-0.csv``. Each delivery has ``good_rows`` orders, one order delivered
    twice (the later one counts) and four bad rows; the same arguments always give the same bytes.
    """
    rng = random.Random(seed)  # noqa: S311 - sample data, not security
    bodies = []
    for index in range(1, deliveries + 1):
        delivery_id = f"d-{index:03d}"
        supplier = SUPPLIERS[(index - 1) % len(SUPPLIERS)]
        rows = delivery_rows(delivery_id, rng, day, good_rows)
        # Two files per delivery, so jobs are shown reading several.
        halves = [rows[: len(rows) // 2], rows[len(rows) // 2 :]]
        files = []
        for part, part_rows in enumerate(halves):
            relative = f"{delivery_id}/part-{part}.csv"
            path = os.path.join(os.fspath(folder), delivery_id, f"part-{part}.csv")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow(CSV_HEADER)
                writer.writerows(part_rows)
            files.append(f"{uri_prefix.rstrip('/')}/{relative}")
        bodies.append(
            json.dumps({"delivery_id": delivery_id, "supplier": supplier, "files": files}, sort_keys=True)
        )
    return bodies


def sensor_messages(*, count: int = 24, day: str = "2026-11-21", seed: int = 7) -> list[str]:
    """Return ``count`` sensor-reading Kafka message bodies (JSON), every 15 minutes from 10:00 UTC.

    Readings are 18-28 °C and 35-65 % humidity, except that every seventh is a heat spike (31-35 °C)
    and the reading at index 5 (when ``count`` > 5) has 85 % humidity: above the jobs' default thresholds.
    """
    rng = random.Random(seed)  # noqa: S311 - sample data, not security
    start = datetime.fromisoformat(day).replace(hour=10, tzinfo=timezone.utc)
    bodies = []
    for index in range(count):
        temperature = round(rng.uniform(18.0, 28.0), 1)
        humidity = round(rng.uniform(35.0, 65.0), 1)
        if index % 7 == 6:
            temperature = round(rng.uniform(31.0, 35.0), 1)
        if index == 5:
            humidity = 85.0
        reading = {
            "sensor_id": SENSORS[index % len(SENSORS)],
            "reading_time": _stamp(start + timedelta(minutes=15 * index)),
            "temperature_c": temperature,
            "humidity_pct": humidity,
        }
        bodies.append(json.dumps(reading, sort_keys=True))
    return bodies
