"""Several evaluator Lambdas drain one DynamoDB stream of a thousand events: the contract holds at scale.

Four worker processes (each one Lambda container with its own clients) run the real evaluator handler on
batches of real stream records read from DynamoDB Local, while two writers store the events as ingest does.
Every batch is delivered at least once: failed records come back, and a share of the batches is delivered
twice, some of them to two workers at once. A share of the workers' transactions is cancelled with
TransactionConflict, as DynamoDB does under contention (DynamoDB Local never does).

The run count of an ``a & b`` pipeline depends on how evaluations interleave, so what is asserted is what the
contract fixes whatever the interleaving (``model.check_store``), plus an exact comparison with the reference
model replaying the serial history that the store's version conditions produced (``model.replay``).

Scale: the full evaluator path costs ≈ 100-140 ms of CPU per event here (≈ 13 DynamoDB requests; DynamoDB
Local spends ≈ 10 ms of CPU on a TransactWriteItems and 2-4 ms on a read, boto3 ≈ 2 ms a request), so two
cores evaluate at most ≈ 15-20 events/s: the issue's 5,000 events take ≥ 5 minutes whatever the harness.
CI runs 1,000 (≈ 1-1.5 min on two idle cores); ``ASSETFLOW_RELIABILITY_EVENTS=5000`` runs the full burst.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from assetflow import Asset, AssetAlias, Catalog, PartitionedAssetSchedule, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.core.events import AssetEvent
from assetflow.core.queues import StoredQueue
from assetflow.core.scheduler import QueueEntry, QueueState, advance
from assetflow.core.schedules import DailyMapper
from assetflow.usecases.evaluate import Evaluator
from assetflow_dev import DynamoDbLocal, client
from tests.reliability.model import (
    STREAM_RETRY_ATTEMPTS,
    T0,
    Applied,
    EvaluatorPool,
    RecordingLauncher,
    SentEvent,
    StreamTail,
    WorkerConfig,
    check_store,
    cpu_seconds,
    drain,
    replay,
    spread,
)

EVENTS = int(os.environ.get("ASSETFLOW_RELIABILITY_EVENTS", "1000"))
WORKERS = 4
WRITERS = 2
REDELIVER = 0.10  # share of stream batches delivered twice
REINGEST = 0.02  # share of messages ingested twice (must not make a second event)
CONFLICTS = 0.02  # share of the workers' transactions cancelled with TransactionConflict (see model.InjectedConflicts)
SEED = 7

A, B, C = (Asset(f"x-test://{n}") for n in "abc")
X1, X2 = Asset("s3://exports/acme"), Asset("s3://exports/globex")
P, Q = Asset("x-test://p"), Asset("x-test://q")
NEVER = Asset("x-test://never")
EXPORTS = AssetAlias("exports")
JOB = SparkJob("spark_jobs/job.py")
PIPELINES = [
    Pipeline("both", schedule=A & B, job=JOB),
    Pipeline("either", schedule=A | B, job=JOB, batch=False),
    Pipeline("aliased", schedule=EXPORTS & C, job=JOB),
    Pipeline("daily", schedule=PartitionedAssetSchedule(P & Q, DailyMapper()), job=JOB),
    # Declares the alias (the catalog refuses an alias nobody produces); its own asset never gets events.
    Pipeline("exporter", schedule=NEVER, job=JOB, outlets=[EXPORTS]),
]
WEIGHTS = {A.uri: 0.15, B.uri: 0.15, X1.uri: 0.10, X2.uri: 0.10, C.uri: 0.15, P.uri: 0.175, Q.uri: 0.175}
HOURS = [f"2026-11-{day}T{hour:02d}:30:00Z" for day in (20, 21, 22) for hour in (1, 13)]
RESOLUTIONS = {EXPORTS.name: [X1.uri, X2.uri]}


@pytest.fixture
def table(dynamodb_client: Any) -> Iterator[DynamoDbStore]:
    store = DynamoDbStore(dynamodb_client, f"reliability-{uuid.uuid4().hex[:10]}")
    store.create_table()
    yield store
    dynamodb_client.delete_table(TableName=store.table)


def asset_event(sent: SentEvent) -> AssetEvent:
    """The event a watcher would make of the message behind ``sent``."""
    return AssetEvent(
        sent.asset,
        sent.id,
        sent.timestamp,
        {"payload": {"id": sent.id}},
        {"type": "watcher", "watcher": "burst", "kind": "sqs"},
        sent.partition_key,
    )


def write_events(endpoint: str, table: str, events: Sequence[SentEvent], reingest: set[str]) -> list[str]:
    """Store the events as ingest does (one transaction with the message's dedupe record); returns problems."""
    store = DynamoDbStore(client("dynamodb", endpoint), table)
    problems = []
    for sent in events:
        event = asset_event(sent)
        for attempt in range(2 if sent.id in reingest else 1):
            stored, created = store.put_event(event, dedupe_key=f"sqs:burst:{sent.id}", now=T0)
            if created != (attempt == 0) or stored.id != sent.id:
                problems.append(f"{sent.id}: attempt {attempt} created={created}")
    return problems


@pytest.mark.slow
def test_workers_draining_one_stream_make_exactly_the_runs_of_the_reference_model(
    dynamodb_local: DynamoDbLocal, table: DynamoDbStore, tmp_path: Path
) -> None:
    # Given the pipelines, the alias resolved to two assets, and a plan of events over seven assets
    catalog = Catalog.build(PIPELINES).to_document()
    catalog_path = tmp_path / "catalog.json"
    catalog_path.write_text(json.dumps(catalog))
    for alias, uris in RESOLUTIONS.items():
        for uri in uris:
            table.add_alias_resolution(alias, uri, now=T0)
    events = spread(EVENTS, WEIGHTS, seed=SEED, partition_keys={P.uri: HOURS, Q.uri: HOURS})
    reingest = {e.id for e in events[:: round(1 / REINGEST)]}
    config = WorkerConfig(table.table, str(catalog_path), dynamodb_local.endpoint, conflict_rate=CONFLICTS)
    pool = EvaluatorPool(config, workers=WORKERS, redeliver=REDELIVER, seed=SEED)
    tail = StreamTail(client("dynamodbstreams", dynamodb_local.endpoint), table.stream_arn())

    # When writers store the events while the workers drain the stream
    began, cpu_before = time.monotonic(), os.times()
    java_before = cpu_seconds(dynamodb_local.pid or 0)
    problems: list[str] = []

    def write(part: Sequence[SentEvent]) -> None:
        try:
            problems.extend(write_events(dynamodb_local.endpoint, table.table, part, reingest))
        except Exception as exc:
            problems.append(f"writer failed: {exc!r}")

    writers = [threading.Thread(target=write, args=(events[n::WRITERS],)) for n in range(WRITERS)]
    for writer in writers:
        writer.start()
    try:
        figures = drain(
            tail,
            pool,
            expected_records=len(events),
            writers_done=lambda: not any(w.is_alive() for w in writers),
            deadline=began + 300 + 0.5 * len(events),  # a guard against a hang, not a benchmark
            abort=lambda: "; ".join(problems[:3]),
        )
    finally:
        pool.close()
        for writer in writers:
            writer.join(timeout=60)
    seconds = time.monotonic() - began
    cpu_after = os.times()  # the workers were joined: their time is in the children's
    cpu = sum(cpu_after[:4]) - sum(cpu_before[:4]) + cpu_seconds(dynamodb_local.pid or 0) - java_before

    # Then every message made one event, and the store holds exactly what the contract allows
    assert problems == []
    assert figures.records == len(events)  # the stream had each event once (a re-ingested message adds none)
    # (accepted: the launcher saw the run. A TransactionConflict while recording its job run id is taken for
    # "already submitted" and acknowledged (DynamoDbStore.mark_submitted); the pipeline's next sweep or the
    # job's state change records it later, so a run may lack it here: counted as submissions_not_recorded)
    check = check_store(table, catalog, events, RESOLUTIONS, accepted=lambda r: r.run_id in figures.submitted)
    assert check.violations == []
    # ...which is exactly what the reference model makes of the serial history the store committed
    assert replay(catalog, figures.applied) == []
    logged = sorted(run for a in figures.applied for run in a.runs)
    stored = sorted((r.run_id, tuple(sorted(e.id for e in r.triggering_events))) for r in check.runs)
    assert logged == stored
    # Every run reached the launcher (and nothing else did); no record failed more often than the production
    # retry budget
    assert set(figures.submitted) == {r.run_id for r in check.runs}
    unrecorded = sum(1 for r in check.runs if not r.job_run_id)
    assert figures.max_failures_per_record <= STREAM_RETRY_ATTEMPTS, figures.max_failures_per_record

    per_pipeline = ", ".join(f"{p.pipeline} {p.runs}" for p in check.pipelines.values())
    lost_races = figures.conflicts
    cancelled = {
        k.removeprefix("cancelled:"): v for k, v in figures.codes.items() if k.startswith("cancelled:")
    }
    print(
        f"\nconcurrency: events={len(events)} workers={WORKERS} seconds={seconds:.1f} "
        f"events/s={len(events) / seconds:.1f} deliveries={figures.deliveries} "
        f"redelivered_batches={figures.redelivered_batches} retried_batches={figures.retried_batches} "
        f"failed_records={figures.failed_records} max_failures_per_record={figures.max_failures_per_record} "
        f"runs={check.total_runs} ({per_pipeline}) queue_conflicts_retried={lost_races} "
        f"cancellation_reasons={cancelled} reingested={len(reingest)} submissions_not_recorded={unrecorded} "
        "lost=0 duplicated=0 "
        f"cpu_ms_per_event={1000 * cpu / len(events):.0f} (python+java) busy_worker_seconds={figures.busy_seconds:.0f}"
    )


LARGE_BATCH = 1000  # the most a DynamoDB event source mapping hands one invocation (CDK's limit)


@pytest.mark.slow
def test_two_evaluators_on_the_same_large_batch_make_exactly_the_runs_of_the_reference_model(
    dynamodb_local: DynamoDbLocal, table: DynamoDbStore, tmp_path: Path
) -> None:
    """Two invocations get the same 1,000 records at the same moment (a redelivery racing the first delivery).

    Each groups the batch by pipeline and queue key and commits one transaction per group chunk; the two race
    on every queue, lose version conditions, read again and retry (and a share of their transactions is
    cancelled as under contention), and partial batch responses bring failed records back. Whatever the interleaving, the store must hold what the contract allows and exactly what
    the reference model makes of the committed history: no run twice, no event consumed twice or lost.
    """
    catalog = Catalog.build(PIPELINES).to_document()
    catalog_path = tmp_path / "catalog.json"
    catalog_path.write_text(json.dumps(catalog))
    for alias, uris in RESOLUTIONS.items():
        for uri in uris:
            table.add_alias_resolution(alias, uri, now=T0)
    events = spread(LARGE_BATCH, WEIGHTS, seed=SEED + 1, partition_keys={P.uri: HOURS, Q.uri: HOURS})
    assert write_events(dynamodb_local.endpoint, table.table, events, reingest=set()) == []
    tail = StreamTail(client("dynamodbstreams", dynamodb_local.endpoint), table.stream_arn())
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while len(records) < len(events) and time.monotonic() < deadline:
        records += tail.poll()
    assert len(records) == len(events)

    config = WorkerConfig(table.table, str(catalog_path), dynamodb_local.endpoint, conflict_rate=CONFLICTS)
    pool = EvaluatorPool(config, workers=2, redeliver=0.0, seed=SEED)
    try:
        pool.deliver_at_once(records, copies=2, batch_size=LARGE_BATCH)
        deadline = time.monotonic() + 300 + 0.5 * len(events)  # a guard against a hang, not a benchmark
        while not pool.idle:
            pool.collect(timeout=0.5)
            assert time.monotonic() < deadline, f"not drained: {pool.in_flight} in flight"
        figures = pool.figures
    finally:
        pool.close()

    check = check_store(table, catalog, events, RESOLUTIONS, accepted=lambda r: r.run_id in figures.submitted)
    assert check.violations == []
    assert replay(catalog, figures.applied) == []
    logged = sorted(run for a in figures.applied for run in a.runs)
    stored = sorted((r.run_id, tuple(sorted(e.id for e in r.triggering_events))) for r in check.runs)
    assert logged == stored
    assert set(figures.submitted) == {r.run_id for r in check.runs}
    assert check.total_runs > 0
    print(
        f"\ntwo evaluators, one batch of {len(records)}: deliveries={figures.deliveries} "
        f"retried_batches={figures.retried_batches} failed_records={figures.failed_records} "
        f"queue_conflicts_retried={figures.conflicts} runs={check.total_runs} lost=0 duplicated=0"
    )


# ---- the checks themselves can fail ------------------------------------------------------------------------


def test_the_replay_flags_a_missing_run_a_version_committed_twice_and_an_event_queued_twice() -> None:
    catalog = Catalog.build(PIPELINES).to_document()
    a1 = ("a1", A.uri, (), "2026-11-21T08:00:00.000000Z")
    b1 = ("b1", B.uri, (), "2026-11-21T08:00:01.000000Z")
    good = [Applied("both", "", 0, (a1,), ()), Applied("both", "", 1, (b1,), (("r1", ("a1", "b1")),))]
    assert replay(catalog, good) == []

    missing_run = [good[0], Applied("both", "", 1, (b1,), ())]
    twice = [*good, Applied("both", "", 1, (b1,), ())]
    requeued = [*good, Applied("both", "", 2, (a1,), ())]
    late_single = [Applied("either", "", 0, (a1,), ())]
    for history in (missing_run, twice, requeued, late_single):
        assert replay(catalog, history), history


def test_the_store_check_flags_an_event_consumed_twice_and_an_event_lost(
    table: DynamoDbStore, dynamodb_client: Any
) -> None:
    # Given a store in which the evaluator handled a, b (one run of both) and another a
    catalog = Catalog.build(PIPELINES)
    document = catalog.to_document()
    evaluator = Evaluator(catalog=catalog, store=table, launcher=RecordingLauncher(), clock=lambda: T0)
    sent = spread(3, {A.uri: 1.0}, seed=1, partition_keys={})
    sent = [sent[0], SentEvent("b1", B.uri, sent[1].timestamp), sent[2]]
    for one in sent:
        table.put_event(asset_event(one), dedupe_key=one.id)
        evaluator.handle_event(asset_event(one))
    assert check_store(table, document, sent, RESOLUTIONS).violations == []

    # When a stale transition slips past the version condition and runs the first run's events again, and the
    # queued a is deleted
    both = catalog.pipelines["both"]
    head = table.read_queue("both")
    stale = QueueState(
        "both", "", head.state.version, (QueueEntry(asset_event(sent[0])), QueueEntry(asset_event(sent[1])))
    )
    table.apply(
        both, StoredQueue(stale, generation=head.generation - 1), advance(both, stale, active_runs=1, now=T0)
    )
    queue_pk = {":p": {"S": "QUEUE#both#"}, ":g": {"S": f"G#{head.generation:010d}#"}}
    for item in dynamodb_client.query(
        TableName=table.table,
        KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
        ExpressionAttributeValues=queue_pk,
    )["Items"]:
        dynamodb_client.delete_item(TableName=table.table, Key={"pk": item["pk"], "sk": item["sk"]})

    # Then the check names both
    violations = " | ".join(check_store(table, document, sent, RESOLUTIONS).violations)
    assert "consumed twice" in violations and "lost" in violations, violations
