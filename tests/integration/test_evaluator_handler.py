"""The evaluator Lambda handler on real DynamoDB stream records read from DynamoDB Local."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.core.events import AssetEvent, Run
from assetflow.functions import handle_asset_events

A, B = Asset("x-test://a"), Asset("x-test://b")
T0 = datetime(2026, 11, 21, 8, tzinfo=UTC)


@dataclass
class LambdaContext:
    function_name: str = "assetflow-evaluator"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-evaluator"
    aws_request_id: str = "req-1"


class Launcher:
    def __init__(self) -> None:
        self.runs: list[Run] = []

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        self.runs.append(run)
        return f"job-{run.run_id}"


def stream_event(streams: Any, stream_arn: str) -> dict[str, Any]:
    """Every record of the table's stream, shaped as Lambda delivers a DynamoDB stream batch."""
    records = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for _ in range(5):
            page = streams.get_records(ShardIterator=iterator)
            for record in page["Records"]:
                dynamodb = dict(record["dynamodb"])
                dynamodb["ApproximateCreationDateTime"] = int(
                    dynamodb["ApproximateCreationDateTime"].timestamp()
                )
                records.append({**record, "dynamodb": dynamodb, "eventSourceARN": stream_arn})
            iterator = page.get("NextShardIterator")
            if not iterator or not page["Records"]:
                break
    return {"Records": records}


@pytest.fixture
def deps(
    dynamodb_client: Any, dynamodb_local: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Dependencies:
    table = f"assetflow-{uuid.uuid4().hex[:10]}"
    DynamoDbStore(dynamodb_client, table).create_table()
    catalog = Catalog.build([Pipeline("both", schedule=A & B, job=SparkJob("spark_jobs/both.py"))])
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog.to_document()))
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
        monkeypatch.setenv(name, value)
    return Dependencies(
        Settings(table_name=table, catalog_path=str(path), region="us-east-1"), launcher=Launcher()
    )


def test_stream_batch_creates_the_run_and_a_redelivered_batch_changes_nothing(
    deps: Dependencies, dynamodb_streams_client: Any
) -> None:
    # Given two events written as ingest writes them
    for n, asset in enumerate([A, B]):
        deps.store.put_event(AssetEvent(asset.uri, f"e{n}", T0 + timedelta(seconds=n)), dedupe_key=f"m{n}")
    batch = stream_event(dynamodb_streams_client, deps.store.stream_arn())
    # (dedupe records stream too; the handler passes over everything but new events)
    event_records = [r for r in batch["Records"] if r["dynamodb"]["Keys"]["sk"]["S"].startswith("EVENT#")]
    assert [r["eventName"] for r in event_records] == ["INSERT", "INSERT"]

    # When the handler gets the stream batch, twice (a retried batch)
    first = handle_asset_events.lambda_handler(batch, LambdaContext(), deps=deps)
    second = handle_asset_events.lambda_handler(batch, LambdaContext(), deps=deps)

    # Then one run exists, submitted once, and no record failed
    assert first == second == {"batchItemFailures": []}
    (row,) = deps.store.list_runs("both").items
    assert row["job_run_id"] == f"job-{row['run_id']}"
    assert [r.run_id for r in deps.launcher.runs] == [row["run_id"]]
    assert [a["uri"] for a in deps.store.list_assets().items] == [A.uri, B.uri]


def test_a_record_that_fails_is_reported_alone(deps: Dependencies, dynamodb_streams_client: Any) -> None:
    deps.store.put_event(AssetEvent(A.uri, "e0", T0), dedupe_key="m0")
    batch = stream_event(dynamodb_streams_client, deps.store.stream_arn())
    (event_record,) = [r for r in batch["Records"] if r["dynamodb"]["Keys"]["sk"]["S"].startswith("EVENT#")]
    broken = json.loads(json.dumps(event_record))
    broken["dynamodb"]["NewImage"]["event"] = {"S": "{not json"}
    broken["dynamodb"]["SequenceNumber"] = "999"
    answer = handle_asset_events.lambda_handler(
        {"Records": [broken, *batch["Records"]]}, LambdaContext(), deps=deps
    )
    assert answer == {"batchItemFailures": [{"itemIdentifier": "999"}]}
