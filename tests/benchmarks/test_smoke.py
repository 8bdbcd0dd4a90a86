"""Each benchmark in quick mode, as CI runs it: it finishes, and its JSON has the promised shape and sense."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: Quick mode takes well under a minute on an idle two-core machine; CI machines are busier.
TIMEOUT = 300


def run_quick(name: str, results: Path, *, timeout: float = TIMEOUT) -> tuple[int, dict[str, Any], float]:
    """Run ``python -m benchmarks.<name> --quick`` into ``results``; its exit status, JSON and seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--quick", "--results-dir", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    seconds = time.monotonic() - started
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    path = results / f"{name}-quick.json"
    assert path.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    assert not (results / f"{name}.json").exists(), "a quick run must not overwrite the committed figures"
    return done.returncode, json.loads(path.read_text()), seconds


def assert_common(document: dict[str, Any], name: str) -> None:
    assert document["benchmark"] == name
    assert document["quick"] is True
    assert document["date"].endswith("+00:00")
    assert document["machine"]["cpu_count"] >= 1
    assert set(document["git"]) == {"commit", "dirty"}
    assert document["parameters"]["runs"] >= 1
    assert document["seconds"] > 0


def assert_summary(summary: dict[str, float]) -> None:
    assert set(summary) == {"median", "min", "max", "runs"}
    assert summary["min"] <= summary["median"] <= summary["max"]


def test_evaluator_scale(tmp_path: Path) -> None:
    status, document, _ = run_quick("evaluator_scale", tmp_path)
    assert_common(document, "evaluator_scale")
    sizes = document["results"]["sizes"]
    assert sorted(int(s) for s in sizes) == [10, 1000, 10000]
    for size, figures in sizes.items():
        assert figures["pipelines"] == int(size)
        for path in ("dynamodb_ms_per_event", "core_us_per_event"):
            for q in ("p50", "p95", "p99"):
                assert_summary(figures[path][q])
            assert (
                0
                < figures[path]["p50"]["median"]
                <= figures[path]["p95"]["median"]
                <= figures[path]["p99"]["median"]
            )
        assert figures["catalog"]["document_bytes"]["median"] > 0
        assert figures["catalog"]["from_document_seconds"]["median"] > 0
    # The document grows with the catalog, the per-event work must not: the ratio is computed, not assumed.
    assert (
        sizes["10000"]["catalog"]["document_bytes"]["median"]
        > 100 * sizes["10"]["catalog"]["document_bytes"]["median"]
    )
    growth = document["results"]["build_growth"]
    assert len(growth) >= 2
    for figures in growth.values():
        assert_summary(figures["build_seconds"])
        assert_summary(figures["build_proposed_seconds"])
    targets = document["results"]["targets"]
    for path, key in (("dynamodb", "dynamodb_ms_per_event"), ("core", "core_us_per_event")):
        ratio = sizes["10000"][key]["p50"]["median"] / sizes["10"][key]["p50"]["median"]
        assert targets[path]["ratio"] == pytest.approx(ratio, rel=1e-4)
        assert targets[path]["met"] is (targets[path]["ratio"] <= targets[path]["limit"] == 1.5)
    assert status == (0 if all(t["met"] for t in targets.values()) else 1)


def test_cost(tmp_path: Path) -> None:
    _, document, _ = run_quick("cost", tmp_path)
    assert_common(document, "cost")
    results = document["results"]
    single, both = (results["per_million_messages"][n] for n in ("single", "and"))
    # One run per message on a single-asset pipeline, each run adding an outlet event; fewer for a & b.
    assert single["runs_per_message"] == 1.0
    assert single["events_per_message"] == 2.0
    assert 0 < both["runs_per_message"] < 1
    for scenario in (single, both):
        total = scenario["usd_per_million_messages"]
        assert_summary(total)
        lines = scenario["lines"]
        assert {"Lambda requests", "DynamoDB writes", "SQS requests", "EventBridge events"} <= set(lines)
        assert total["median"] == pytest.approx(
            sum(line["usd_per_million"]["median"] for line in lines.values()), rel=1e-3
        )
        assert lines["DynamoDB writes"]["usd_per_million"]["median"] > 0
        assert scenario["counts_per_message"]["lambda_invocations"] > 0
        assert scenario["storage"]["kept_gb_per_million"] > 0
    # Every run starts a job and delivers its five states to the run-state function.
    assert single["operations_per_message"]["emr-serverless"]["StartJobRun"] == 1.0
    # The states the stack's rule delivers (a job's end: SUCCESS here; a run is running from its submission)
    assert single["functions_per_message"]["assetflow.functions.handle_job_state"]["invocations"] == 1.0
    (idle,) = results["idle_per_day"].values()
    items = {line["item"]: line for line in idle["lines"]}
    assert items["KMS keys"]["count"] >= 1 and items["CloudWatch alarms"]["count"] >= 1
    assert idle["usd_per_day"] == pytest.approx(sum(line["usd_per_day"] for line in idle["lines"]), rel=1e-3)
    assert idle["unpriced"] == []
    assert all(price["source"].startswith("https://") for price in results["prices"].values())


def test_cold_start(tmp_path: Path) -> None:
    _, document, _ = run_quick("cold_start", tmp_path)
    assert_common(document, "cold_start")
    results = document["results"]
    assert_summary(results["interpreter_start_seconds"])
    handlers = results["handlers"]
    assert set(handlers) == {
        "handle_sqs_messages",
        "handle_kafka_records",
        "handle_asset_events",
        "handle_job_state",
        "handle_schedule_tick",
        "handle_api",
    }
    for name, figures in handlers.items():
        assert_summary(figures["import_seconds"])
        assert figures["import_top_packages_ms"], name
        phases = figures["first_event_seconds"]
        assert set(phases) == {
            "import",
            "dependencies",
            "first_event",
            "warm_event",
            "in_process",
            "process_wall",
        }
        assert (
            0 < phases["import"]["median"] < phases["in_process"]["median"] < phases["process_wall"]["median"]
        )
