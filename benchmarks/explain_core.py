"""Explain and the event operators in the pure core: time per explain by queue depth, cost per event by operator.

``explain`` reads a pipeline's queue and answers why it runs or waits (DESIGN §5). Issue 17 asks for under
100 ms with 1,000 queued events; this times ``assetflow.core.decision.explain`` in memory (no store: the
store's read of the queue is the evaluator's, measured by ``queue_depth.py``) on conditions that use every
operator. Issue 19 asks for the evaluation cost per event with each operator: ``route_event`` then
``advance`` for one new event on a waiting queue, per operator.

    .venv/bin/python -m benchmarks.explain_core [--quick] [--runs N] [--depths 10 100 1000 10000]

Exits 1 when explain on 1,000 queued events takes 100 ms or more (p50 of the median run).
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from assetflow import Asset, AssetAlias, Pipeline, SparkJob, at_least, late
from assetflow.core.conditions import Condition
from assetflow.core.decision import explain
from assetflow.core.entries import QueueEntry, QueueState, failure_events
from assetflow.core.events import AssetEvent, Run, RunState
from assetflow.core.scheduler import advance, route_event
from benchmarks._common import (
    check,
    parser,
    percentiles,
    print_table,
    progress,
    runs_of,
    summarize,
    summarize_runs,
    write_result,
)

NAME = "explain_core"
T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
JOB = SparkJob("spark_jobs/job.py")
A, B, C, D = (Asset(f"s3://bench/{n}") for n in "abcd")
EXPORTS = AssetAlias("exports")
OK = {"status": ["ok"]}
TARGET_SECONDS = 0.100
TARGET_DEPTH = 1000

#: Conditions explained at each depth; every operator appears, and each waits (the slow path: nothing short-cuts).
EXPLAINED: dict[str, tuple[Condition, dict[str, Any]]] = {
    "all_of_4": (A & B & C & D, {}),
    "operators": (
        (at_least(A, 10_000) & B.where(OK))
        | A.then(B, within=timedelta(milliseconds=1))
        | D.failed()
        | late(D),
        {},
    ),
    "windows": (
        at_least(EXPORTS, 10_000) & B,
        {"within": timedelta(days=1), "debounce": timedelta(minutes=5)},
    ),
}


def queue_of(depth: int) -> tuple[QueueEntry, ...]:
    """``depth`` entries over a, b and the alias, a quarter matching b's pattern, none of c or d."""
    where = B.where(OK).where_key
    entries = []
    for n in range(depth):
        asset = (A, B, A, B)[n % 4]
        entries.append(
            QueueEntry(
                AssetEvent(asset.uri, f"e{n:07d}", T0 + timedelta(seconds=n), source={"type": "api"}),
                aliases=("exports",) if n % 3 == 0 else (),
                wheres=(where,) if n % 4 == 1 else (),
            )
        )
    return tuple(entries)


def time_calls(call: Callable[[], object], calls: int) -> list[float]:
    """Seconds per call, ``calls`` times."""
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return seconds


def explain_run(depths: list[int], calls: int) -> dict[str, dict[str, float]]:
    """One run: per condition and depth, p50/p95 of explain's time."""
    figures: dict[str, dict[str, float]] = {}
    for (name, (condition, windows)), depth in itertools.product(EXPLAINED.items(), depths):
        pipeline = Pipeline("p", condition, JOB, **windows)
        state = QueueState("p", entries=queue_of(depth))
        now = T0 + timedelta(seconds=depth)
        doc = explain(pipeline, state, active_runs=0, now=now)
        check(
            not doc["due"] and doc["queued"] == depth,
            f"{name}@{depth}: the pipeline must wait, with its queue",
        )
        seconds = time_calls(partial(explain, pipeline, state, active_runs=0, now=now), calls)
        figures[f"{name}@{depth}"] = percentiles(seconds, (50, 95))
    return figures


def _failure(asset: Asset, n: int) -> AssetEvent:
    (event,) = failure_events(
        (asset.uri,), Run(f"run-{n}", "producer", RunState.FAILED, T0), T0 + timedelta(seconds=n)
    )
    return event


#: Per operator: the pipeline, and the n-th new event. Each queue waits with ``QUEUED`` entries first.
OPERATORS: dict[str, tuple[Pipeline, Callable[[int], AssetEvent]]] = {
    "asset (a & b)": (
        Pipeline("p", A & C, JOB),
        lambda n: AssetEvent(A.uri, f"n{n}", T0, source={"type": "api"}),
    ),
    "at_least": (
        Pipeline("p", at_least(A, 10_000), JOB),
        lambda n: AssetEvent(A.uri, f"n{n}", T0, source={}),
    ),
    "where": (
        Pipeline("p", A.where(OK) & C, JOB),
        lambda n: AssetEvent(A.uri, f"n{n}", T0, extra={"payload": {"status": "ok"}}, source={}),
    ),
    "then": (
        Pipeline("p", C.then(A, within=timedelta(seconds=1)), JOB),
        lambda n: AssetEvent(A.uri, f"n{n}", T0 + timedelta(hours=1), source={}),
    ),
    "failed": (Pipeline("p", A.failed() & C, JOB), lambda n: _failure(A, n)),
    "late": (
        Pipeline("p", late(A) & C, JOB),
        lambda n: AssetEvent(A.uri, f"late-{n}", T0, source={"type": "late", "deadline": "x", "since": None}),
    ),
    "debounce + within": (
        Pipeline("p", A & C, JOB, debounce=timedelta(minutes=5), within=timedelta(days=1)),
        lambda n: AssetEvent(A.uri, f"n{n}", T0, source={}),
    ),
}
QUEUED = 100


def operator_run(calls: int) -> dict[str, dict[str, float]]:
    """One run: per operator, p50/p95 of route_event + advance for one new event on a waiting queue."""
    figures: dict[str, dict[str, float]] = {}
    for name, (pipeline, make) in OPERATORS.items():
        first = make(0)
        routes, skips = route_event(first, [(pipeline, ())])
        check(routes and not skips, f"{name}: the event must reach the pipeline")
        queued = tuple(routes[0].entry(make(n)) for n in range(1, QUEUED + 1))
        state = QueueState("p", entries=queued)
        counter = itertools.count(QUEUED + 1)

        def step(
            p: Pipeline = pipeline,
            s: QueueState = state,
            m: Callable[[int], AssetEvent] = make,
            numbers: itertools.count[int] = counter,
        ) -> None:
            event = m(next(numbers))
            (route,), _ = route_event(event, [(p, ())])
            t = advance(p, s, active_runs=0, now=T0 + timedelta(seconds=1), entries=[route.entry(event)])
            check(t.added and not t.runs, "one new event on a waiting queue queues and runs nothing")

        seconds = time_calls(step, calls)
        figures[name] = percentiles(seconds, (50, 95))
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when explain on 1,000 queued events stays under 100 ms, else 1."""
    args_parser = parser(__doc__.splitlines()[0], default_runs=5, quick_runs=2)
    args_parser.add_argument("--depths", type=int, nargs="+", default=None, help="queue depths to explain")
    args = args_parser.parse_args(argv)
    started = time.perf_counter()
    runs = runs_of(args)
    depths = args.depths or ([10, 1000] if args.quick else [10, 100, 1000, 10000])
    if TARGET_DEPTH not in depths:
        depths.append(TARGET_DEPTH)
    calls = 10 if args.quick else 30
    explain_runs, operator_runs = [], []
    for run in range(runs):
        progress(f"run {run + 1}/{runs}: explain at depths {depths}")
        explain_runs.append({k: v["p50"] for k, v in explain_run(depths, calls).items()})
        progress(f"run {run + 1}/{runs}: one event per operator on a queue of {QUEUED}")
        operator_runs.append({k: v["p50"] for k, v in operator_run(calls * 10).items()})
    explained = summarize_runs(explain_runs)
    operators = summarize_runs(operator_runs)
    print_table(
        "explain (ms, p50 per run: median [min, max] over runs)",
        ["condition@depth", "median", "min", "max"],
        [[k, v["median"] * 1e3, v["min"] * 1e3, v["max"] * 1e3] for k, v in explained.items()],
    )
    print_table(
        f"route_event + advance of one event on a waiting queue of {QUEUED} (µs)",
        ["operator", "median", "min", "max"],
        [[k, v["median"] * 1e6, v["min"] * 1e6, v["max"] * 1e6] for k, v in operators.items()],
    )
    worst = max(v["median"] for k, v in explained.items() if k.endswith(f"@{TARGET_DEPTH}"))
    met = worst < TARGET_SECONDS
    verdict = "met" if met else "MISSED"
    print(
        f"\nexplain at {TARGET_DEPTH} queued events: worst median {worst * 1e3:.2f} ms (target < 100 ms): {verdict}"
    )
    write_result(
        NAME,
        {
            "explain_seconds": explained,
            "operator_event_seconds": operators,
            "target": {"depth": TARGET_DEPTH, "seconds": TARGET_SECONDS, "worst_median": worst, "met": met},
            "overall": summarize([v["median"] for v in explained.values()]),
        },
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={
            "runs": runs,
            "depths": depths,
            "calls_per_figure": calls,
            "queued_for_operators": QUEUED,
        },
        notes=[
            "pure core in memory: explain's read of the queue from DynamoDB is not included (see queue_depth)",
            "each figure: the p50 of calls within a run; median, min and max over runs",
        ],
        started=started,
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
