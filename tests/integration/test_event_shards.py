"""A hot asset's events spread over write shards where the load model says so (issue 13).

DynamoDB writes at most 1,000 units a second to one partition key. The load model
(``benchmarks/load_model.py``) says how many shards an asset needs at a rate; with that many, the store spreads
the asset's events over ``ASSET#<uri>`` and ``EVENTS#<n>#<uri>`` by a hash of each event's id, so the busiest key
takes its share, while every reader sees one time-ordered history: the events listing (views, API), the
summary's count, the evaluator (one run per event of a ``batch=False`` pipeline) and the job's ``inlet_events``.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.dynamodb.table import event_pk
from assetflow.core.events import AssetEvent, Run
from assetflow.core.pipeline import Pipeline as PipelineType
from assetflow.usecases.evaluate import Evaluator
from assetflow_job.inlets import DynamoDbEventReader, LazyAssetEvents, event_partition
from benchmarks import load_model

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
HOT = Asset("s3://lake/clicks")
RATE = 2_000.0  # events a second on one asset: four times what one partition key takes at 2.2 units an event
EVENTS = 700


class Launcher:
    def __init__(self) -> None:
        self.submitted: list[str] = []
        self._lock = threading.Lock()

    def submit(self, run: Run, pipeline: PipelineType) -> str:
        with self._lock:
            self.submitted.append(run.run_id)
        return f"job-{run.run_id}"


def test_the_load_model_shards_a_hot_asset_and_every_reader_sees_one_history(dynamodb_client: Any) -> None:
    # Given the shards the load model asks for at 2,000 events/s on one asset
    shards = load_model.asset_shards_needed(RATE)
    assert shards is not None and shards > 1
    store = DynamoDbStore(dynamodb_client, f"shards-{uuid.uuid4().hex[:10]}", event_shards={HOT.uri: shards})
    store.create_table()
    events = [
        AssetEvent(HOT.uri, f"ev-{n:04d}", T0 + timedelta(milliseconds=n), {"n": n}, {"type": "api"})
        for n in range(EVENTS)
    ]

    # When ingest stores them (batched transactions), and a redelivery of every message comes after
    written = store.put_events([(e, f"msg-{e.id}") for e in events], now=T0)
    again = store.put_events([(e, f"msg-{e.id}") for e in events], now=T0)

    # Then each is stored once, in the shard its id hashes to, and the shards share the load
    assert [getattr(w, "created", w) for w in written] == [True] * EVENTS
    assert [getattr(w, "created", w) for w in again] == [False] * EVENTS
    per_key: Counter[str] = Counter()
    for shard in range(shards):
        pages = dynamodb_client.get_paginator("query").paginate(
            TableName=store.table,
            KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
            ExpressionAttributeValues={":p": {"S": event_pk(HOT.uri, shard)}, ":e": {"S": "EVENT#"}},
            Select="COUNT",
        )
        per_key[event_pk(HOT.uri, shard)] = sum(page["Count"] for page in pages)
    assert sum(per_key.values()) == EVENTS
    assert len(per_key) == shards and min(per_key.values()) > 0
    # Unsharded, the asset's key would take more than a partition's 1,000 units a second at this rate; sharded,
    # each key takes its share (the model's bound assumes an even spread: the id hash keeps within 25 % of it)
    keys = load_model.BRANCH_SINGLE.keys
    summary_units = keys.meta_write / load_model.BRANCH.meta_batch
    assert RATE * (keys.asset_write - keys.meta_write + summary_units) > 1_000
    assert max(per_key.values()) <= 1.25 * EVENTS / shards, per_key

    # ...the listing merges the shards newest first, page by page, and the summary counts every event
    listed: list[str] = []
    token = None
    while True:
        page = store.list_events(HOT.uri, limit=64, token=token)
        listed += [e["id"] for e in page.items]
        token = page.next
        if not token:
            break
    assert listed == [e.id for e in reversed(events)]
    (summary,) = [a for a in store.list_assets().items if a["uri"] == HOT.uri]
    assert summary["event_count"] == EVENTS

    # ...the job's inlet_events read them oldest first across the shards
    reader = DynamoDbEventReader(store.table, client=dynamodb_client, page_size=50, shards={HOT.uri: shards})
    assert [e.id for e in LazyAssetEvents(HOT.uri, reader)] == [e.id for e in events]
    assert [event_partition(HOT.uri, n) for n in range(shards)] == [
        event_pk(HOT.uri, n) for n in range(shards)
    ]

    # ...and the evaluator makes one run per event of a batch=False pipeline, each event once
    launcher = Launcher()
    evaluator = Evaluator(
        catalog=Catalog.build([Pipeline("each_click", schedule=HOT, job=SparkJob("jobs/j.py"), batch=False)]),
        store=store,
        launcher=launcher,
        clock=lambda: T0 + timedelta(minutes=5),
    )
    for start in range(0, EVENTS, 100):
        evaluation = evaluator.handle_batch(events[start : start + 100])
        assert not evaluation.failed
    runs = [store.get_run(r["run_id"]) for r in store.list_runs("each_click", limit=1000).items]
    assert sorted(e.id for r in runs for e in r.triggering_events) == [e.id for e in events]
    assert len(launcher.submitted) == EVENTS
