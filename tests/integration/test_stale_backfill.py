"""`assetflow backfill PIPELINE --stale` on DynamoDB Local: a job's new code_version re-runs what the old one made."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from assetflow import Asset, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.usecases.requests import RequestError
from tests.integration.test_operate import T0, World

pytestmark = pytest.mark.integration

RAW = Asset("x-test://raw")
CLEAN = Asset("x-test://clean")


def etl(code_version: str | None) -> Pipeline:
    job = SparkJob("spark_jobs/etl.py", code_version=code_version)
    return Pipeline("etl", schedule=[RAW], job=job, outlets=[CLEAN], max_active_runs=4)


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDbStore:
    db = DynamoDbStore(dynamodb_client, f"assetflow-{uuid.uuid4().hex[:10]}")
    db.create_table()
    return db


def test_a_new_code_version_reruns_each_successful_output_once(store: DynamoDbStore) -> None:
    # Given three runs of code version 1: two succeeded, one failed (it made no output)
    v1 = World(store, etl("1"))
    made = []
    for n, ending in ((1, "SUCCESS"), (2, "FAILED"), (3, "SUCCESS")):
        v1.emit(RAW, n)
        (run,) = [r for r in v1.runs("etl") if r.run_id not in {m.run_id for m in made}]
        v1.end(run, ending)
        made.append(run)
    assert {r.code_version for r in v1.runs("etl")} == {"1"}
    ok1, _, ok3 = made

    # When the job's code_version becomes 2
    v2 = World(store, etl("2"), now=T0 + timedelta(hours=1))
    dry = v2.ops.backfill_stale("etl", dry_run=True)
    assert [(r["rerun_of"], r["stale_code_version"], r["state"]) for r in dry["runs"]] == [
        (ok1.run_id, "1", "planned"),
        (ok3.run_id, "1", "planned"),
    ]
    assert [r["triggering_asset_events"][RAW.uri][0]["id"] for r in dry["runs"]] == [
        "e00001",
        "e00003",
    ]
    assert len(v2.runs("etl")) == 3  # a dry run creates nothing

    result = v2.ops.backfill_stale("etl")

    # Then each successful output is made again with the same events, by a backfill run of version 2
    assert (result["created"], result["existing"]) == (2, 0)
    reruns = [r for r in v2.runs("etl") if r.rerun_of]
    assert sorted((r.rerun_of, r.triggered_by, r.code_version) for r in reruns) == sorted(
        [(ok1.run_id, "backfill", "2"), (ok3.run_id, "backfill", "2")]
    )
    assert sorted(e.id for r in reruns for e in r.triggering_events) == ["e00001", "e00003"]
    assert [r["run_id"] for r in result["runs"]] == [r["run_id"] for r in dry["runs"]]
    # ... and asking again (the re-runs queued or done) creates nothing
    assert v2.ops.backfill_stale("etl")["runs"] == []
    for rerun in reruns:
        v2.end(rerun, "SUCCESS")
    assert v2.ops.backfill_stale("etl")["runs"] == []

    # A third version re-runs each original output once more, not once per earlier re-run
    v3 = World(store, etl("3"), now=T0 + timedelta(hours=2))
    third = v3.ops.backfill_stale("etl")
    assert sorted(r["rerun_of"] for r in third["runs"]) == sorted([ok1.run_id, ok3.run_id])
    assert [r["stale_code_version"] for r in third["runs"]] == ["2", "2"]


def test_a_window_bounds_the_originals_and_a_job_without_a_version_is_refused(store: DynamoDbStore) -> None:
    v1 = World(store, etl("1"))
    v1.emit(RAW, 1)
    (first,) = v1.runs("etl")
    v1.end(first, "SUCCESS")
    v2 = World(store, etl("2"), now=T0 + timedelta(hours=1))
    after = first.created_at + timedelta(seconds=1)
    assert v2.ops.backfill_stale("etl", start=after, dry_run=True)["runs"] == []
    assert len(v2.ops.backfill_stale("etl", end=after, dry_run=True)["runs"]) == 1

    unversioned = World(store, etl(None), now=T0 + timedelta(hours=2))
    with pytest.raises(RequestError, match="declares no code_version"):
        unversioned.ops.backfill_stale("etl")
