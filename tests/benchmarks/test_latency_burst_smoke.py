"""The latency and burst benchmarks in quick mode, as CI runs them: they finish, and their JSON makes sense."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest

from tests.benchmarks.test_smoke import assert_common, assert_summary
from tests.benchmarks.test_smoke import run_quick as run_quick_with

pytestmark = pytest.mark.slow

#: Quick mode takes about a minute (latency: two runtimes and two Spark jobs) on a two-core machine; CI is busier.
TIMEOUT = 400
run_quick = partial(run_quick_with, timeout=TIMEOUT)


def assert_percentiles(figure: dict[str, dict[str, float]]) -> None:
    assert set(figure) == {"p50", "p95", "p99"}
    for summary in figure.values():
        assert_summary(summary)
    assert 0 < figure["p50"]["median"] <= figure["p95"]["median"] <= figure["p99"]["median"]


def test_latency_quick(tmp_path: Path) -> None:
    status, document, _ = run_quick("latency", tmp_path)
    assert_common(document, "latency")
    results = document["results"]
    assert set(results["sources"]) == {"sqs", "kafka"}
    for source, stages in results["sources"].items():
        for stage in ("event_stored", "event_readable", "run_created", "run_readable"):
            assert_percentiles(stages[stage])
        p50 = {stage: figure["p50"]["median"] for stage, figure in stages.items() if "p50" in figure}
        # Each step comes after the one before it, and a read never finds an item before its own stamp.
        assert p50["event_stored"] < p50["run_created"], source
        assert p50["event_stored"] <= p50["event_readable"] and p50["run_created"] <= p50["run_readable"]
        if source == "sqs":  # quick mode runs one Spark job, for SQS
            assert_percentiles(stages["first_line"])
            assert stages["spark_run_created"]["p50"]["median"] < p50["first_line"]
            assert stages["run_to_first_line"]["p50"]["median"] > 0
        assert stages["method_gap"]["run_gap_ms_min"]["min"] >= 0
        # Where the time goes: each message's steps are in order, so every segment is positive.
        for segment in (
            "send_to_ingest",
            "ingest_to_event_stamp",
            "event_stamp_to_evaluator",
            "evaluator_to_run_stamp",
        ):
            assert stages[segment]["p50"]["median"] > 0, (source, segment)
    targets = results["targets"]
    assert set(targets) == {f"{s}_{k}" for s in ("sqs", "kafka") for k in ("run_created", "run_readable")}
    for name, target in targets.items():
        source, _, key = name.partition("_")
        measured = results["sources"][source][key]
        assert target["seconds"]["p50"] == pytest.approx(measured["p50"]["median"] / 1000, rel=1e-4)
        assert target["met"] is (target["seconds"]["p50"] <= 0.3 and target["seconds"]["p99"] <= 1.0)
    assert status == (0 if all(t["met"] for t in targets.values()) else 1)
    assert results["settings"]["stream_poll_interval"] > 0


def test_burst_quick(tmp_path: Path) -> None:
    _, document, seconds = run_quick("burst", tmp_path)
    assert_common(document, "burst")
    messages = document["parameters"]["messages"]
    scenarios = document["results"]["scenarios"]
    single, both = scenarios["single"], scenarios["and"]
    # The checks the script asserted, as counted: one event per message, the exact runs.
    assert single["checks"] == {
        "events": messages,
        "dedupe_records": 0,  # a standard queue's events are their own dedupe records
        "runs": messages,
        "consumed": messages,
    }
    assert both["checks"] == {
        "events": messages,
        "dedupe_records": 0,
        "runs": 2,
        "consumed": messages,
    }
    for scenario in (single, both):
        times = {key: figure["median"] for key, figure in scenario["seconds"].items()}
        for figure in scenario["seconds"].values():
            assert_summary(figure)
        assert 0 < times["send"] <= times["events_stored"] <= times["runs_created"] <= times["runs_succeeded"]
        assert times["events_stored"] <= times["events_evaluated"] <= times["runs_created"]
        assert scenario["events_per_second"]["median"] == pytest.approx(
            messages / times["events_stored"], rel=1e-3
        )
        total = scenario["usd_per_million_events"]["median"]
        assert total > 0
        assert total == pytest.approx(
            sum(line["median"] for line in scenario["cost_lines"].values()), rel=1e-3
        )
        assert scenario["operations_per_event"]["sqs"]["SendMessageBatch"] > 0
        assert scenario["timeline"]
    # One run per event makes a job, its context and its states per event; two runs make almost none.
    assert single["operations_per_event"]["emr-serverless"]["StartJobRun"] == 1.0
    assert both["operations_per_event"]["emr-serverless"]["StartJobRun"] < 0.5
    # The run-state function is invoked for each run's end only, as the stack's rule sends it (the launcher
    # reports three states a run).
    assert single["functions"]["assetflow.functions.handle_job_state"]["invocations"] == messages
    # DynamoDB Local's write ceiling, alone: the project's table (a stream, three indexes) takes fewer items a
    # second than a bare one, and bounds each scenario by the items it writes an event.
    ceiling = document["results"]["emulators"]["dynamodb_writes"]
    assert 0 < ceiling["assetflow_table"]["items_per_second"] < ceiling["bare_table"]["items_per_second"]
    assert ceiling["assetflow_table"]["cpu_ms_per_item"] > 0
    assert ceiling["assetflow_table"]["client_cpu_ms_per_item"] > 0
    # An event of the single pipeline is written, makes a run (its item, the queue's head, the pending item)
    # and the run's updates; an event of a & b is written and queued.
    assert single["item_writes_per_event"] > both["item_writes_per_event"] >= 1.5
    through = document["results"]["emulators"]["projected_seconds"][str(messages)]
    for scenario in (single, both):
        assert scenario["dynamodb_local_bound_events_per_second"] == pytest.approx(
            ceiling["assetflow_table"]["items_per_second"] / scenario["item_writes_per_event"], rel=1e-3
        )
        assert scenario["moto_sqs_bound_events_per_second"] == pytest.approx(
            messages / through["moto_cpu_seconds"], rel=1e-3
        )
        # The machine's CPU through the burst, by process: every part worked, and no more than the cores.
        cpu = {name: figure["median"] for name, figure in scenario["cpu_ms_per_event"].items()}
        assert {"runtime", "dynamodb_local", "moto"} <= set(cpu)
        assert cpu["runtime"] > 0 and cpu["dynamodb_local"] > 0
        assert 0 < scenario["cpu_busy_percent"]["median"] <= 105
        assert scenario["cpu_bound_events_per_second"] == pytest.approx(
            (os.cpu_count() or 1) * 1000 / sum(cpu.values()), rel=1e-3
        )
        # The floor: an event's SQS requests and item writes alone, both sides, from the probes. A burst does
        # all that and more (its stream, evaluation, commits, submissions), so it spends more an event.
        table = ceiling["assetflow_table"]
        floor = (through["moto_cpu_seconds"] + through["client_cpu_seconds"]) * 1000 / messages + scenario[
            "item_writes_per_event"
        ] * (table["cpu_ms_per_item"] + table["client_cpu_ms_per_item"])
        assert scenario["floor_cpu_ms_per_event"] == pytest.approx(floor, rel=1e-3)
        assert 0 < scenario["floor_cpu_ms_per_event"] < sum(cpu.values())
        assert scenario["floor_bound_events_per_second"] > scenario["cpu_bound_events_per_second"]
    assert seconds < TIMEOUT


def test_queue_depth_quick(tmp_path: Path) -> None:
    status, document, _ = run_quick("queue_depth", tmp_path)
    assert status == 0
    assert_common(document, "queue_depth")
    results = document["results"]
    depths = document["parameters"]["depths"]
    assert sorted(int(d) for d in results["by_depth"]) == depths
    for figure in results["by_depth"].values():
        assert_percentiles(figure)
    # The run consumed every event of a still queued: warm-up, filled and timed ones.
    assert results["run"]["queued"] == depths[-1] + document["parameters"]["timed_per_depth"]
    assert_summary(results["run"]["create_ms"])
