"""A queue's pending count stays true when an event older than its seen marker comes back (DynamoDB Local).

A queue's seen markers live ``DEDUPE_TTL`` (15 days, DynamoDB's TTL deletes them); a batch queue can wait
longer. An event redelivered after its marker is gone (a failure replayed late, a stream record re-read) used
to be appended again: its entry overwritten in place, but the head's summary and ``pending`` counted one more.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.dynamodb.table import queue_pk, seen_set_sks
from assetflow.core.events import AssetEvent, Run
from assetflow.usecases.evaluate import Evaluator
from assetflow_dev import client

pytestmark = pytest.mark.integration

A, B = Asset("x-test://drift/a"), Asset("x-test://drift/b")
BOTH = Pipeline("both", schedule=A & B, job=SparkJob("spark_jobs/job.py"))
T0 = datetime(2026, 10, 1, 8, tzinfo=UTC)  # weeks before "now": older than a seen marker lives


class Launcher:
    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        self.runs.setdefault(run.run_id, run)
        return f"job-{run.run_id}"


@pytest.fixture
def store(dynamodb_local: Any) -> Iterator[DynamoDbStore]:
    dynamodb = client("dynamodb", dynamodb_local.endpoint)
    store = DynamoDbStore(dynamodb, f"drift-{uuid.uuid4().hex[:10]}")
    store.create_table()
    yield store
    dynamodb.delete_table(TableName=store.table)


def head(store: DynamoDbStore) -> dict[str, Any]:
    item = store._get(f"PIPELINE#{BOTH.id}", "QUEUE#") or {}
    return {"pending": int(item.get("pending", 0)), "summary": store.read_queue_head(BOTH.id).summary}


def test_an_event_redelivered_after_its_seen_marker_expired_is_counted_once(store: DynamoDbStore) -> None:
    # Given an event waiting in a batch queue (its pair has not come), past its seen marker's life
    launcher = Launcher()
    evaluator = Evaluator(
        catalog=Catalog.build([BOTH]), store=store, launcher=launcher, clock=lambda: datetime.now(UTC)
    )
    a1 = AssetEvent(A.uri, "a1", T0)
    evaluator.handle_event(a1)
    assert head(store)["pending"] == 1
    store._call(
        "delete_item",
        TableName=store.table,
        Key={"pk": {"S": queue_pk(BOTH.id, "")}, "sk": {"S": seen_set_sks(a1)[0]}},
    )

    # When it is delivered again (twice)
    evaluator.handle_event(a1)
    evaluator.handle_event(a1)

    # Then it is queued once, counted once, and its marker is back
    after = head(store)
    assert after["pending"] == 1 and after["summary"].entries == 1
    assert [q["event"]["id"] for q in store.list_queue(BOTH.id)] == ["a1"]
    assert store.already_queued(BOTH.id, "", [a1]) == {"a1"}
    # And its pair makes the one run, with it once
    evaluator.handle_event(AssetEvent(B.uri, "b1", T0 + timedelta(seconds=1)))
    (run,) = launcher.runs.values()
    assert [e.id for e in run.triggering_events] == ["a1", "b1"]
    assert head(store)["pending"] == 0
