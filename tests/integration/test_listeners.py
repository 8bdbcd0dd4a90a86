"""Listener events with Airflow 3's timing and payloads, over DynamoDB Local (the bus records what it is given)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from assetflow import Asset, AssetAlias, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.core.events import AssetEvent, Run
from assetflow.core.pipeline import Pipeline as PipelineType
from assetflow.usecases.announce import announce_catalog, announce_once
from assetflow.usecases.evaluate import Evaluator

NOW = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
RAW = Asset("raw", "s3://lake/raw", group="landing", extra={"owner": "ops"})
CLEAN = Asset("clean", "s3://lake/clean")
EXPORTS = AssetAlias("exports", group="partners")
JOB = SparkJob("jobs/job.py")
CATALOG = Catalog.build(
    [
        Pipeline("etl", schedule=RAW, job=JOB, outlets=[CLEAN, EXPORTS]),
        Pipeline("audit", schedule=EXPORTS, job=JOB),
    ]
)


class Bus:
    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any]]] = []

    def wants(self, detail_type: str) -> bool:
        return True

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        self.published.append((detail_type, dict(detail)))

    def publish_many(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        for detail_type, detail in events:
            self.publish(detail_type, detail)


class Launcher:
    def submit(self, run: Run, pipeline: PipelineType) -> str:
        return f"job-{run.run_id}"


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDbStore:
    db = DynamoDbStore(dynamodb_client, f"assetflow-{uuid.uuid4().hex[:10]}")
    db.create_table()
    return db


def test_a_catalog_announces_its_assets_and_aliases_once_before_any_event(store: DynamoDbStore) -> None:
    bus = Bus()
    announce_catalog(store, bus, CATALOG, now=NOW)
    assert bus.published == [
        (
            "AssetCreated",
            {
                "kind": "asset_created",
                "asset": {"name": "clean", "uri": CLEAN.uri, "group": "asset", "extra": {}},
            },
        ),
        (
            "AssetCreated",
            {
                "kind": "asset_created",
                "asset": {"name": "raw", "uri": RAW.uri, "group": "landing", "extra": {"owner": "ops"}},
            },
        ),
        (
            "AssetAliasCreated",
            {"kind": "asset_alias_created", "asset_alias": {"name": "exports", "group": "partners"}},
        ),
    ]
    # Registered: listed with no events yet, as Airflow lists an asset its DAGs declare.
    rows = {r["uri"]: r for r in store.assets_after(None, limit=10)}
    assert rows[RAW.uri]["event_count"] == 0 and rows[RAW.uri]["name"] == "raw"
    again = Bus()
    announce_catalog(store, again, CATALOG, now=NOW)
    assert again.published == []  # a redeployment tells nothing twice
    assert announce_once(store, again, CATALOG, digest="d1", now=NOW) is not None
    assert announce_once(store, again, CATALOG, digest="d1", now=NOW) is None


def test_an_event_is_changed_then_emitted_with_airflows_payload(store: DynamoDbStore) -> None:
    announce_catalog(store, Bus(), CATALOG, now=NOW)
    bus = Bus()
    evaluator = Evaluator(catalog=CATALOG, store=store, launcher=Launcher(), clock=lambda: NOW, bus=bus)
    produced = AssetEvent(
        RAW.uri,
        "e1",
        NOW,
        extra={"rows": 3},
        source={"type": "run", "pipeline": "upstream", "run_id": "run-9", "aliases": ["exports"]},
        partition_key="2026-11-21",
    )
    store.put_event(produced)
    evaluator.handle_event(produced)
    raw = {"name": "raw", "uri": RAW.uri, "group": "landing", "extra": {"owner": "ops"}}
    assert [t for t, _ in bus.published] == [
        "AssetChanged",
        "AssetEventEmitted",
    ]  # created before, at announce
    assert bus.published[0][1] == {"kind": "asset_changed", "asset": raw}
    emitted = bus.published[1][1]
    assert {k: v for k, v in emitted.items() if k != "event"} == {
        "kind": "asset_event_emitted",
        "asset": raw,
        "extra": {"rows": 3},
        "source_dag_id": "upstream",
        "source_task_id": None,
        "source_run_id": "run-9",
        "source_map_index": -1,
        "source_aliases": [{"name": "exports", "group": "partners"}],
        "partition_key": "2026-11-21",
        "partition_date": None,
    }
    assert emitted["event"] == produced.to_json()

    # An asset no catalog declares is created at its first event, before it changes.
    undeclared = AssetEvent("x-adhoc://one", "e2", NOW, source={"type": "api", "principal": "me"})
    store.put_event(undeclared)
    bus.published.clear()
    evaluator.handle_event(undeclared)
    assert [t for t, _ in bus.published] == ["AssetCreated", "AssetChanged", "AssetEventEmitted"]
    assert bus.published[0][1]["asset"] == {
        "name": "x-adhoc://one",
        "uri": "x-adhoc://one",
        "group": "asset",
        "extra": {},
    }
    assert bus.published[2][1]["source_dag_id"] is None and bus.published[2][1]["source_aliases"] == []
