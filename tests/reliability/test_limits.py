"""Poison input at its limits, through the real handlers on DynamoDB Local and moto: refused, or stored and run.

The review's poison records are replayed here: a partition key of 255 emoji (1,020 bytes, refused with a 400),
a 1,104-byte URI (accepted, as Airflow does: it must then be listed and run, where it used to fail the
evaluator on the assets index's 1,024-byte sort key), keys with path separators and newlines. Then every
key the store builds from outside input is driven at its largest: a 1,500-character URI in the assets index
and in alias resolutions, a 200-character alias, a 64-character pipeline id, a 256-byte partition key as a
queue key, a 255-character Idempotency-Key from a long role-session ARN, a Kafka record from a cluster whose
broker list is longer than a partition key, an SQS message id of 3,000 characters, and an outlet extra of
600 KB (over DynamoDB's 400 KB item) and one over the extras store's ceiling. A hook on the DynamoDB client
checks every key of every request against DynamoDB's limits (DynamoDB Local refuses them too).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest

import assetflow_job
from assetflow import Asset, AssetAlias, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.dynamodb.keys import MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, utf8_size
from assetflow.adapters.emr import EmrServerlessLauncher
from assetflow.composition import Dependencies, Settings
from assetflow.core.catalog import Catalog
from assetflow.core.limits import MAX_EXTRA_BYTES_BY_REFERENCE
from assetflow.core.schedules import PartitionedAssetSchedule
from assetflow.core.uri import MAX_URI_LENGTH
from assetflow.functions import handle_api, handle_asset_events, handle_kafka_records, handle_sqs_messages
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_CLIENT_KWARGS, LOCAL_REGION, client
from assetflow_dev.cli import main as cli
from assetflow_job.contract import REF_KEY

pytestmark = pytest.mark.integration

#: The review's 1,104-byte URI, and the longest URI Airflow's rules allow.
URI_1104 = "s3://lake/" + "x" * (1104 - len("s3://lake/"))
URI_LONGEST = "x-long://" + "y" * (MAX_URI_LENGTH - len("x-long://"))
ALIAS_LONGEST = "a" * 200
PIPELINE_LONGEST = "p" * 64
#: 64 four-byte characters: the longest partition key (256 bytes).
KEY_LONGEST = "\U0001f600" * 64
LONG_SESSION = f"arn:aws:sts::{LOCAL_ACCOUNT_ID}:assumed-role/{'r' * 64}/{'s' * 64}"  # role and session names at their limits

RAW, LONGEST, BIG = Asset(URI_1104), Asset(URI_LONGEST), Asset("s3://lake/big")
ALIAS = AssetAlias(ALIAS_LONGEST)
PRODUCER = Pipeline(
    PIPELINE_LONGEST, schedule=[RAW], job=SparkJob("spark_jobs/producer.py"), outlets=[LONGEST, BIG, ALIAS]
)
BY_PARTITION = Pipeline(
    "by_partition", schedule=PartitionedAssetSchedule([RAW]), job=SparkJob("spark_jobs/partitioned.py")
)
ALIAS_CONSUMER = Pipeline("alias_consumer", schedule=[ALIAS], job=SparkJob("spark_jobs/consumer.py"))


@dataclass
class LambdaContext:
    function_name: str = "assetflow-limits"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:assetflow-limits"
    aws_request_id: str = "00000000-0000-4000-8000-000000000001"


@dataclass
class KeyGuard:
    """Checks every key of every DynamoDB request against DynamoDB's limits; keeps the largest seen."""

    largest: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def check(self, attribute: str, value: Any) -> None:
        if not isinstance(value, dict) or "S" not in value:
            return
        size = utf8_size(value["S"])
        kind = "pk" if attribute.endswith("pk") else "sk"
        self.largest[kind] = max(self.largest[kind], size)
        limit = MAX_PARTITION_KEY_BYTES if kind == "pk" else MAX_SORT_KEY_BYTES
        if size > limit:
            self.violations.append(f"{attribute} of {size} bytes: {value['S'][:60]}...")

    def keys(self, mapping: Any) -> None:
        if isinstance(mapping, dict):
            for name, value in mapping.items():
                if name in ("pk", "sk") or name.startswith("gsi"):
                    self.check(name, value)

    def __call__(self, params: dict[str, Any], **_: Any) -> None:
        self.keys(params.get("Item"))
        self.keys(params.get("Key"))
        for write in params.get("TransactItems") or []:
            for action in write.values():
                self.keys(action.get("Item"))
                self.keys(action.get("Key"))
        for request in (params.get("RequestItems") or {}).values():
            for key in request.get("Keys", []) if isinstance(request, dict) else []:
                self.keys(key)
        for value in (params.get("ExpressionAttributeValues") or {}).values():
            self.check("pk", value)  # query values name partitions (and sort key prefixes, smaller still)


class RecordingLauncher:
    """The launcher port, starting each run's job on moto's EMR Serverless (context in S3) and remembering it."""

    def __init__(self, emr: EmrServerlessLauncher) -> None:
        self.emr = emr
        self.jobs: dict[str, str] = {}

    def submit(self, run: Any, pipeline: Pipeline) -> str:
        job_run_id = self.emr.submit(run, pipeline)
        self.jobs[run.run_id] = job_run_id
        return job_run_id


@dataclass
class World:
    deps: Dependencies
    s3: Any
    emr: Any
    streams: Any
    bucket: str
    guard: KeyGuard
    launcher: RecordingLauncher
    seen: set[str] = field(default_factory=set)

    def api(self, body: dict[str, Any], *, key: str | None = None) -> tuple[int, dict[str, Any]]:
        headers = {"content-type": "application/json"} | ({"idempotency-key": key} if key else {})
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": "/assets/events",
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {
                "http": {
                    "method": "POST",
                    "path": "/assets/events",
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                },
                "requestId": f"req-{uuid.uuid4().hex}",
                "authorizer": {"iam": {"userArn": LONG_SESSION}},
                "routeKey": "$default",
                "stage": "$default",
            },
            "isBase64Encoded": False,
            "body": json.dumps(body),
        }
        response = handle_api.lambda_handler(event, LambdaContext(), deps=self.deps)  # type: ignore[arg-type]
        return int(response["statusCode"]), json.loads(response["body"])

    def evaluate_new_events(self) -> dict[str, Any]:
        """Hand the stream's new asset-event records to the evaluator handler, as one Lambda batch."""
        records = []
        stream_arn = self.deps.store.stream_arn()
        for shard in self.streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
            iterator = self.streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            while iterator:
                page = self.streams.get_records(ShardIterator=iterator)
                for record in page["Records"]:
                    sequence = record["dynamodb"]["SequenceNumber"]
                    if sequence in self.seen or not record["dynamodb"]["Keys"]["sk"]["S"].startswith(
                        "EVENT#"
                    ):
                        continue
                    self.seen.add(sequence)
                    dynamodb = dict(record["dynamodb"])
                    dynamodb["ApproximateCreationDateTime"] = int(
                        dynamodb["ApproximateCreationDateTime"].timestamp()
                    )
                    records.append({**record, "dynamodb": dynamodb, "eventSourceARN": stream_arn})
                iterator = page.get("NextShardIterator") if page["Records"] else None
        return handle_asset_events.lambda_handler({"Records": records}, LambdaContext(), deps=self.deps)

    def runs(self, pipeline: str) -> list[dict[str, Any]]:
        return self.deps.store.list_runs(pipeline).items


@pytest.fixture
def world(
    dynamodb_local: Any, moto_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    table, bucket = f"limits-{uuid.uuid4().hex[:10]}", f"runs-{uuid.uuid4().hex[:10]}"
    dynamodb = client("dynamodb", dynamodb_local.endpoint)
    guard = KeyGuard()
    DynamoDbStore(dynamodb, table).create_table()
    s3 = client("s3", moto_server.endpoint)
    s3.create_bucket(Bucket=bucket)
    emr = client("emr-serverless", moto_server.endpoint)
    application = emr.create_application(name=table, releaseLabel="emr-7.9.0", type="SPARK")["applicationId"]
    catalog = Catalog.build([PRODUCER, BY_PARTITION, ALIAS_CONSUMER])
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog.to_document()))
    endpoints = {"dynamodb": dynamodb_local.endpoint, "s3": moto_server.endpoint}
    launcher = RecordingLauncher(
        EmrServerlessLauncher(
            emr_client=emr,
            s3_client=s3,
            application_id=application,
            execution_role_arn=f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/jobs",
            runs_bucket=bucket,
            events_table=table,
        )
    )
    deps = Dependencies(
        Settings(table_name=table, catalog_path=str(path), region=LOCAL_REGION, runs_bucket=bucket),
        session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
        endpoints=endpoints,
        launcher=launcher,
    )
    deps.store._db.meta.events.register("provide-client-params.dynamodb.*", guard)
    yield World(deps, s3, emr, client("dynamodbstreams", dynamodb_local.endpoint), bucket, guard, launcher)
    dynamodb.delete_table(TableName=table)


# ---- refused at the door ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("partition_key", "detail"),
    [
        ("\U0001f600" * 255, "1020 bytes long (UTF-8), over the limit of 256 bytes"),
        ("../../x", "must not contain '/'"),
        ("a\\b", "must not contain '\\\\'"),
        ("line\nforged", "must not contain control characters"),
        ("zero\u200bwidth", "must not contain control characters"),
        ("  ", "must be a non-empty string"),
    ],
)
def test_the_api_refuses_poison_partition_keys_with_a_400_and_writes_nothing(
    world: World, partition_key: str, detail: str
) -> None:
    status, answer = world.api({"uri": URI_1104, "partition_key": partition_key})

    assert (status, answer["error"]) == (400, "bad_request")
    assert detail in answer["detail"]
    assert world.deps.store.list_events(URI_1104).items == []


def test_the_cli_refuses_a_255_emoji_partition_key_with_a_message(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli(
        [
            "events",
            "emit",
            URI_1104,
            "--partition-key",
            "\U0001f600" * 255,
            "--table",
            world.deps.settings.table_name,
        ]
    )

    assert code == 1
    assert "over the limit of 256 bytes" in capsys.readouterr().err
    assert world.deps.store.list_events(URI_1104).items == []


def test_the_api_refuses_a_uri_over_1500_characters(world: World) -> None:
    status, answer = world.api({"uri": URI_LONGEST + "z"})

    assert status == 400 and "over the limit of 1500" in answer["detail"]


# ---- accepted at the limits, and then listed and run ---------------------------------------------------


def test_a_1104_byte_uri_is_listed_and_runs_where_it_used_to_fail_the_evaluator(world: World) -> None:
    status, event = world.api(
        {"uri": URI_1104, "extra": {"n": 1}, "partition_key": KEY_LONGEST}, key="k" * 255
    )
    again, replayed = world.api(
        {"uri": URI_1104, "extra": {"n": 1}, "partition_key": KEY_LONGEST}, key="k" * 255
    )

    assert (status, again) == (201, 201) and replayed == event
    assert world.evaluate_new_events() == {"batchItemFailures": []}
    # (listed with the catalog's declared assets, which the evaluator announced before its first batch: no
    # events of theirs)
    listed = world.deps.store.list_assets().items
    (asset,) = [a for a in listed if a["uri"] == URI_1104]
    assert asset["event_count"] == 1
    assert all(a["event_count"] == 0 for a in listed if a["uri"] != URI_1104)
    (producer_run,) = world.runs(PIPELINE_LONGEST)
    (partitioned_run,) = world.runs(BY_PARTITION.id)
    assert partitioned_run["partition_key"] == KEY_LONGEST
    assert producer_run["job_run_id"]
    assert world.guard.violations == []


def test_outlets_at_their_limits_are_emitted_and_a_600_kb_extra_goes_by_reference(world: World) -> None:
    # Given a run of the producer, whose job writes its outlet metadata as the job-side helper does
    world.api({"uri": URI_1104})
    world.evaluate_new_events()
    (run,) = world.runs(PIPELINE_LONGEST)
    job = world.emr.get_job_run(applicationId=world.launcher.emr.application_id, jobRunId=run["job_run_id"])
    big_extra = {"rows": [f"row-{i:09d}" for i in range(600 * 1024 // 16)]}
    over_ceiling = {"blob": "z" * (MAX_EXTRA_BYTES_BY_REFERENCE + 1)}
    with assetflow_job.run(
        job["jobRun"]["jobDriver"]["sparkSubmit"]["entryPointArguments"], s3_client=world.s3
    ) as ctx:
        ctx.outlet_events[LONGEST.uri].extra = big_extra
        ctx.outlet_events[BIG.uri].extra = over_ceiling
        ctx.outlet_events[assetflow_job.AliasRef(ALIAS_LONGEST)].add(URI_LONGEST, extra={"via": "alias"})

    # When the job's SUCCESS arrives (twice: EventBridge delivers at least once)
    name = {"job_run_name": run["run_id"]}  # EMR names the job in its state changes
    change = world.deps.run_states.handle_state_change(run["job_run_id"], "SUCCESS", "app", **name)
    again = world.deps.run_states.handle_state_change(run["job_run_id"], "SUCCESS", "app", **name)

    # Then the large extra is kept whole by reference, the one over the ceiling is refused with its reason,
    # and every outlet is emitted once
    emitted = {(e.asset, REF_KEY in e.extra) for e in change.emitted}
    assert emitted == {(URI_LONGEST, True), (BIG.uri, False), (URI_LONGEST, False)}
    assert again.emitted == []
    assert any(f"{MAX_EXTRA_BYTES_BY_REFERENCE}-byte ceiling" in reason for reason in change.refused)
    (by_reference,) = [e for e in change.emitted if REF_KEY in e.extra]
    resolved = assetflow_job.ExtraResolver(world.s3).event(
        assetflow_job.AssetEvent.from_dict(by_reference.to_json())
    )
    assert resolved.extra == big_extra
    (big,) = [e for e in change.emitted if e.asset == BIG.uri]
    assert big.extra == {}

    # And the outlets' events route on: the alias resolves to the longest URI, its consumer runs
    assert world.evaluate_new_events() == {"batchItemFailures": []}
    assert world.deps.store.alias_assets(ALIAS_LONGEST) == [URI_LONGEST]
    assert world.runs(ALIAS_CONSUMER.id)  # both events of the asset count for the alias
    listed = {a["uri"] for a in world.deps.store.list_assets().items}
    assert {URI_1104, URI_LONGEST, BIG.uri} <= listed
    # The largest keys written came close to DynamoDB's limits (the inputs were at theirs), never over.
    assert world.guard.violations == []
    assert world.guard.largest["pk"] > 1500 and world.guard.largest["sk"] > 1000


def test_identities_longer_than_a_key_are_quarantined_once_and_deduplicated(world: World) -> None:
    # A self-managed cluster's broker list (part of a record's identity) over 2,048 bytes, an unknown topic
    brokers = ",".join(f"broker-{i:03d}.kafka.internal.example.com:9096" for i in range(60))
    record = {
        "topic": "t" * 249,
        "partition": 0,
        "offset": 7,
        "timestamp": 1763719500000,
        "timestampType": "CREATE_TIME",
        "value": base64.b64encode(b'{"reading": 1}').decode(),
        "headers": [],
    }
    kafka_event = {
        "eventSource": "SelfManagedKafka",
        "bootstrapServers": brokers,
        "records": {"t-0": [record]},
    }
    sqs_event = {
        "Records": [
            {
                "messageId": "m" * 3000,
                "receiptHandle": "h",
                "body": "{}",
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "0",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:" + "q" * 80,
                "awsRegion": LOCAL_REGION,
            }
        ]
    }

    for _ in range(2):  # each delivered twice
        assert handle_kafka_records.lambda_handler(kafka_event, LambdaContext(), deps=world.deps) == {
            "batchItemFailures": []
        }
        assert handle_sqs_messages.lambda_handler(sqs_event, LambdaContext(), deps=world.deps) == {
            "batchItemFailures": []
        }

    kept = world.deps.store.list_quarantine().items
    assert len(kept) == 2
    identities = {q["identity"] for q in kept}
    assert any(brokers in i for i in identities) and any(("m" * 3000) in i for i in identities)
    assert max(utf8_size(i) for i in identities) > MAX_PARTITION_KEY_BYTES
    assert world.guard.violations == []
