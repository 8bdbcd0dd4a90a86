"""Evaluator time per event as the queue of a waiting ``a & b`` pipeline grows (issue 6, burst follow-up).

An ``a & b`` pipeline whose b has not come keeps every event of a in its queue. The evaluator used to read
the queue's whole current generation for each event (``DynamoDbStore.read_queue``), so its time per event
grew with the backlog and a burst into such a queue cost time quadratic in its size. It now judges from the
queue head's summary (assets, aliases, count) whether the event leaves the queue waiting, and then only
appends (``DynamoDbStore.append_entries``). This measures it: the queue is filled to each depth directly
through the store's transitions (untimed), then ``Evaluator.handle_event`` is timed for further events of a at
that depth; at the deepest, one event of b makes the run that consumes the whole queue (timed once per run).

Run: ``.venv/bin/python -m benchmarks.queue_depth [--quick] [--runs N] [--depths 10 1000 5000 10000]``.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from assetflow.core.catalog import Catalog
from assetflow.core.conditions import Asset
from assetflow.core.events import AssetEvent
from assetflow.core.pipeline import Pipeline, SparkJob
from assetflow.core.scheduler import QueueEntry, advance
from benchmarks._common import (
    check,
    emulators,
    parser,
    percentiles,
    print_table,
    runs_of,
    summarize,
    write_result,
)
from benchmarks.evaluator_scale import Clock, MemoryLauncher

NAME = "queue_depth"
DEPTHS = {"full": (10, 1_000, 5_000, 10_000), "quick": (10, 100)}
#: Events of a timed at each depth.
TIMED = {"full": 20, "quick": 5}
#: Untimed events of a first (they stay queued: the shallowest depth is this).
WARMUP = 3
#: Entries per filling transaction (two writes each; DynamoDB allows 100 per transaction).
FILL_CHUNK = 40
A, B = Asset("x-bench://depth/a"), Asset("x-bench://depth/b")
PIPELINE = Pipeline("depth_and", schedule=A & B, job=SparkJob("spark_jobs/bench.py"))
T0 = datetime(2026, 11, 22, tzinfo=UTC)


def event(asset: Asset, tag: str, n: int) -> AssetEvent:
    """An API-sourced event of ``asset``."""
    return AssetEvent(
        asset.uri,
        f"{tag}-{n:06d}",
        T0 + timedelta(milliseconds=n),
        {"n": n},
        {"type": "api", "principal": "b"},
    )


def one_run(client: Any, depths: Sequence[int], timed: int) -> dict[str, Any]:
    """Fill one fresh table's queue to each depth in turn and time events there; then b's event."""
    from assetflow.adapters.dynamodb import DynamoDbStore, table_definition
    from assetflow.core.queues import StoredQueue
    from assetflow.usecases.evaluate import Evaluator

    store = DynamoDbStore(client, f"bench-depth-{uuid.uuid4().hex[:12]}")
    # Without the stream, as evaluator_scale: DynamoDB Local slows with every stream record it keeps.
    client.create_table(
        TableName=store.table, **{**table_definition(), "StreamSpecification": {"StreamEnabled": False}}
    )
    client.get_waiter("table_exists").wait(
        TableName=store.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
    clock = Clock()
    launcher = MemoryLauncher()
    evaluator = Evaluator(catalog=Catalog.build([PIPELINE]), store=store, launcher=launcher, clock=clock)
    tag = uuid.uuid4().hex[:8]
    serial = 0
    by_depth: dict[str, Any] = {}
    try:
        for _ in range(WARMUP):  # the first calls of a fresh table and client are slower
            warm = event(A, tag, serial)
            serial += 1
            store.put_event(warm, dedupe_key=f"bench:{warm.id}")
            evaluator.handle_event(warm)
        for depth in depths:
            stored = store.read_queue(PIPELINE.id)
            while len(stored.state.entries) < depth:
                count = min(FILL_CHUNK, depth - len(stored.state.entries))
                chunk = [QueueEntry(event(A, tag, serial + n), ()) for n in range(count)]
                serial += count
                transition = advance(PIPELINE, stored.state, active_runs=0, now=clock(), entries=chunk)
                store.apply(PIPELINE, stored, transition)
                stored = StoredQueue(transition.after, stored.generation)
            seconds = []
            for _ in range(timed):
                new = event(A, tag, serial)
                serial += 1
                store.put_event(new, dedupe_key=f"bench:{new.id}")
                started = time.perf_counter()
                result = evaluator.handle_event(new)
                seconds.append(time.perf_counter() - started)
                check(not result.runs, "a run without b")
            by_depth[str(depth)] = {"ms": percentiles([s * 1000 for s in seconds])}
        queued = len(store.read_queue(PIPELINE.id).state.entries)
        trigger = event(B, tag, serial)
        store.put_event(trigger, dedupe_key=f"bench:{trigger.id}")
        started = time.perf_counter()
        result = evaluator.handle_event(trigger)
        run_seconds = time.perf_counter() - started
        check(len(result.runs) == 1, f"{len(result.runs)} runs from b's event")
        (run,) = result.runs
        consumed = len(run.triggering_asset_events[A.uri])
        check(consumed == queued, f"the run consumed {consumed} events of a, {queued} were queued")
        started = time.perf_counter()
        read_back = store.get_run(run.run_id)
        read_seconds = time.perf_counter() - started
        check(len(read_back.triggering_asset_events[A.uri]) == queued, "the run reads back other events")
    finally:
        client.delete_table(TableName=store.table)
    return {
        "by_depth": by_depth,
        "run": {"queued": queued, "create_ms": run_seconds * 1000, "read_ms": read_seconds * 1000},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run, print and write the figures."""
    started_at = time.perf_counter()
    arguments = parser(__doc__.splitlines()[0], default_runs=3, quick_runs=1)
    arguments.add_argument("--depths", type=int, nargs="+", default=None, help="queue depths (ascending)")
    args = arguments.parse_args(argv)
    runs = runs_of(args)
    mode = "quick" if args.quick else "full"
    depths = sorted(args.depths or DEPTHS[mode])
    timed = TIMED[mode]
    results = []
    with emulators(moto=False) as started:
        from assetflow_dev.aws import client as aws_client

        client = aws_client("dynamodb", started["dynamodb"].endpoint)
        for n in range(runs):
            print(f"run {n + 1}/{runs}: depths {', '.join(map(str, depths))}", flush=True)
            results.append(one_run(client, depths, timed))
    figures: dict[str, Any] = {
        "by_depth": {
            str(d): {
                q: summarize([r["by_depth"][str(d)]["ms"][q] for r in results]) for q in ("p50", "p95", "p99")
            }
            for d in depths
        },
        "run": {
            "queued": results[-1]["run"]["queued"],
            "create_ms": summarize([r["run"]["create_ms"] for r in results]),
            "read_ms": summarize([r["run"]["read_ms"] for r in results]),
        },
    }
    base = figures["by_depth"][str(depths[0])]["p50"]["median"]
    print_table(
        f"Evaluator ms per event of a, a & b waiting for b (median of {runs} run(s))",
        ["queued events of a", "p50", "p95", "p50 / shallowest"],
        [
            [d, f["p50"]["median"], f["p95"]["median"], round(f["p50"]["median"] / base, 2)]
            for d, f in ((int(k), v) for k, v in figures["by_depth"].items())
        ],
    )
    run = figures["run"]
    print(
        f"b's event creates the run over {run['queued']:,} queued events in {run['create_ms']['median']:,.0f} ms; "
        f"reading the run back takes {run['read_ms']['median']:,.0f} ms"
    )
    write_result(
        NAME,
        figures,
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={"runs": runs, "depths": depths, "timed_per_depth": timed, "fill_chunk": FILL_CHUNK},
        notes=[
            "The real Evaluator and DynamoDbStore on DynamoDB Local, a fresh table without a stream per run; "
            "the launcher in memory. The queue is filled through the store's own transitions (untimed).",
        ],
        started=started_at,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
