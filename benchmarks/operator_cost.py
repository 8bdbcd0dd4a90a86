"""Evaluation cost per event with each condition operator, on the real evaluator and DynamoDB Local.

Issue 19 asks for "a benchmark line: evaluation cost per event with each operator". ``explain_core`` times the
pure core per operator; this measures what a user pays for: the real ``Evaluator`` (``handle_batch`` of one
stream record, as the evaluator Lambda runs it) over the real ``DynamoDbStore`` on DynamoDB Local, with every
DynamoDB request counted and its capacity units priced as AWS bills them (``benchmarks/_counting.py``).

Each operator has a pipeline and a cycle of events that makes one run (the event is stored first, untimed and
uncounted, as ingest does):

- ``asset``: ``[a, b]``; cycle a, b;
- ``where``: ``a.where(amount > 100) & b``; cycle a (amount 5: recorded, skipped), a (amount 500), b;
- ``then``: ``a.then(b, within=10 min)``; cycle a, b;
- ``key``: ``PartitionedAssetSchedule(a & b, key="tenant")``; cycle a, b of one of 4 tenants;
- ``skip_unchanged``: ``[a]`` with ``skip_unchanged=True``; cycle a (version v), a (version v: skipped);
- ``failed``: ``a.failed()``; cycle one failure entry (a producer's run failed), routed as the run-state
  function routes it.

    .venv/bin/python -m benchmarks.operator_cost [--quick] [--runs N]

Figures per event: DynamoDB requests, read and write units (estimated where DynamoDB Local reports none),
evaluator milliseconds (median per run; the median, min and max over runs). Exits 1 if an operator's pipeline
did not make the runs its events call for.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from assetflow import Asset, PartitionedAssetSchedule, Pipeline, SparkJob
from assetflow.core.catalog import Catalog
from assetflow.core.entries import failure_events
from assetflow.core.events import AssetEvent, Run, RunState
from benchmarks._common import (
    check,
    emulators,
    parser,
    print_table,
    progress,
    runs_of,
    summarize,
    write_result,
)
from benchmarks._counting import RequestCounter

NAME = "operator_cost"
T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B, OUT = Asset("s3://bench/a"), Asset("s3://bench/b"), Asset("s3://bench/out")
CYCLES = {"full": 40, "quick": 4}
TENANTS = 4


class MemoryLauncher:
    """Stands in for EMR Serverless: accepts every run (the evaluator's own work is what is measured)."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        """Return a job run id for the run."""
        self.submitted += 1
        return f"job-{run.run_id}"


class Clock:
    """Ten milliseconds per reading, from T0 (events carry the same kind of times)."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> datetime:
        return T0 + timedelta(milliseconds=10 * next(self._ticks))


@dataclass(frozen=True)
class Scenario:
    """An operator's pipelines (the measured one first) and the events of its n-th cycle."""

    pipelines: tuple[Pipeline, ...]
    cycle: Callable[[int, datetime], list[AssetEvent]]
    runs_per_cycle: int = 1


def _event(
    asset: Asset, ident: str, at: datetime, extra: dict[str, Any], version: str | None = None
) -> AssetEvent:
    return AssetEvent(asset.uri, ident, at, extra, {"type": "api"}, version=version)


def _failure(n: int, at: datetime) -> list[AssetEvent]:
    failed = Run(f"producer-{n}", "producer", RunState.FAILED, at)
    return failure_events((A.uri,), failed, at)


SCENARIOS: dict[str, Scenario] = {
    "asset": Scenario(
        (Pipeline("asset", [A, B], JOB),),
        lambda n, at: [_event(A, f"a{n}", at, {}), _event(B, f"b{n}", at, {})],
    ),
    "where": Scenario(
        (Pipeline("where", A.where({"amount": [{"numeric": [">", 100]}]}) & B, JOB),),
        lambda n, at: [
            _event(A, f"s{n}", at, {"amount": 5}),
            _event(A, f"a{n}", at, {"amount": 500}),
            _event(B, f"b{n}", at, {}),
        ],
    ),
    "then": Scenario(
        (Pipeline("then", A.then(B, within=timedelta(minutes=10)), JOB),),
        lambda n, at: [_event(A, f"a{n}", at, {}), _event(B, f"b{n}", at + timedelta(milliseconds=1), {})],
    ),
    "key": Scenario(
        (Pipeline("key", PartitionedAssetSchedule(A & B, key="tenant"), JOB),),
        lambda n, at: [
            _event(A, f"a{n}", at, {"tenant": f"t{n % TENANTS}"}),
            _event(B, f"b{n}", at, {"tenant": f"t{n % TENANTS}"}),
        ],
    ),
    "skip_unchanged": Scenario(
        (Pipeline("skip_unchanged", [A], JOB, skip_unchanged=True),),
        lambda n, at: [_event(A, f"a{n}", at, {}, f"v{n}"), _event(A, f"r{n}", at, {}, f"v{n}")],
    ),
    "failed": Scenario(
        (Pipeline("failed", A.failed(), JOB), Pipeline("producer", [B], JOB, outlets=[A])),
        _failure,
    ),
}


def measure(client: Any, scenario: Scenario, cycles: int) -> dict[str, Any]:
    """One run of one operator on a fresh table: per-event counts and evaluator seconds.

    Raises:
        BenchmarkCheckError: the pipeline did not make one run per cycle.
    """
    from assetflow.adapters.dynamodb import DynamoDbStore, table_definition
    from assetflow.usecases.evaluate import Evaluator

    store = DynamoDbStore(client, f"bench-ops-{uuid.uuid4().hex[:12]}")
    definition = {**table_definition(), "StreamSpecification": {"StreamEnabled": False}}
    client.create_table(TableName=store.table, **definition)
    client.get_waiter("table_exists").wait(
        TableName=store.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
    counter = RequestCounter()
    counter.attach(client)
    launcher = MemoryLauncher()
    evaluator = Evaluator(
        catalog=Catalog.build(scenario.pipelines), store=store, launcher=launcher, clock=Clock()
    )
    measured = scenario.pipelines[0].id
    seconds: list[float] = []
    runs = 0
    try:
        with counter.paused():  # the table's first reads and writes are set-up, not evaluation
            evaluator.handle_batch([_event(B, "warm", T0 - timedelta(days=1), {})])
        for n in range(cycles):
            for event in scenario.cycle(n, T0 + timedelta(seconds=n)):
                synthetic = event.source.get("type") == "failure"
                if not synthetic:
                    with counter.paused():
                        store.put_event(event, dedupe_key=f"bench:{event.id}")
                started = time.perf_counter()
                result = evaluator.handle_batch([event], announce=not synthetic)
                seconds.append(time.perf_counter() - started)
                runs += sum(1 for r in result.runs if r.pipeline == measured)
    finally:
        # one client serves every measurement: this one's counter stops here
        client.meta.events.unregister("provide-client-params", unique_id=f"count-params-{id(counter)}")
        client.meta.events.unregister("after-call", unique_id=f"count-after-{id(counter)}")
        client.delete_table(TableName=store.table)
    check(
        runs == cycles * scenario.runs_per_cycle,
        f"{measured}: {runs} runs from {cycles} cycles, expected {cycles * scenario.runs_per_cycle}",
    )
    counts = counter.counts()
    events = len(seconds)
    return {
        "events": events,
        "runs": runs,
        "requests_per_event": counts["dynamodb_requests"] / events,
        "read_units_per_event": counts["dynamodb_read_units"] / events,
        "write_units_per_event": counts["dynamodb_write_units"] / events,
        "evaluator_ms_per_event": statistics.median(seconds) * 1000,
        "operations": counter.operations().get("dynamodb", {}),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every operator, print the table and write the JSON."""
    args = parser(__doc__ or NAME, default_runs=3, quick_runs=1).parse_args(argv)
    runs = runs_of(args)
    cycles = CYCLES["quick" if args.quick else "full"]
    began = time.perf_counter()
    from assetflow_dev import client as local_client

    per_run: dict[str, list[dict[str, Any]]] = {name: [] for name in SCENARIOS}
    with emulators(dynamodb=True, moto=False) as started:
        client = local_client("dynamodb", started["dynamodb"].endpoint)
        for run in range(runs):
            for name, scenario in SCENARIOS.items():
                progress(f"run {run + 1}/{runs}: {name}, {cycles} cycles")
                per_run[name].append(measure(client, scenario, cycles))
    fields = ("requests_per_event", "read_units_per_event", "write_units_per_event", "evaluator_ms_per_event")
    results: dict[str, Any] = {"operators": {}}
    rows = []
    for name, measured in per_run.items():
        figures = {field: summarize([m[field] for m in measured]) for field in fields}
        figures["events_per_run"] = measured[0]["events"]
        figures["runs_per_run"] = measured[0]["runs"]
        figures["dynamodb_operations_last_run"] = measured[-1]["operations"]
        results["operators"][name] = figures
        rows.append([name, *(figures[f]["median"] for f in fields)])
    print_table(
        "Evaluation cost per event, by operator (real Evaluator on DynamoDB Local; medians over runs)",
        ["operator", "DynamoDB requests", "read units", "write units", "evaluator ms"],
        rows,
    )
    write_result(
        NAME,
        results,
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={"runs": runs, "cycles": cycles, "tenants": TENANTS},
        notes=[
            "per event: one handle_batch of one stream record (the evaluator Lambda's unit of work is a batch "
            "of up to 100; batches share their reads, so these are the worst case per event)",
            "write units price transactions as AWS bills them (2 per KB per item plus index entries); reads "
            "that find nothing at AWS's minimum; see benchmarks/_counting.py",
            "skip_unchanged adds one BatchGetItem of the consumed-version facts per batch with versioned events, "
            "and one conditional put per version a run consumes, inside the run's transaction",
        ],
        started=began,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
