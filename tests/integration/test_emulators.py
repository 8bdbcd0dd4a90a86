"""What the project relies on from DynamoDB Local, moto's server and Tansu, checked with real API calls."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

from assetflow_dev import (
    LOCAL_ACCOUNT_ID,
    LOCAL_KAFKA_CONSUMER_TIMEOUTS,
    DynamoDbLocal,
    EmulatorNotInstalledError,
    EmulatorStartError,
    MotoServer,
    TansuBroker,
    client,
    processes,
)
from assetflow_dev.emulators import SHARED_DATABASE_FILE, STREAM_INDEX_STATS

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _create_table(ddb: Any, *, stream: bool = False) -> str:
    name = _name("events")
    extra: dict[str, Any] = {}
    if stream:
        extra["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})
    return name


def _item(pk: str, sk: str, **attrs: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}} | {k: {"S": v} for k, v in attrs.items()}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): it has exited, its parent just has not reaped it yet.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


# -- DynamoDB Local ---------------------------------------------------------------------------------------


def test_conditional_put_fails_the_second_time(dynamodb_client: Any) -> None:
    table = _create_table(dynamodb_client)
    put = {
        "TableName": table,
        "Item": _item("ASSET#s3://b/k", "EVENT#1", event="{}"),
        "ConditionExpression": "attribute_not_exists(pk)",
    }

    dynamodb_client.put_item(**put)
    with pytest.raises(ClientError) as caught:
        dynamodb_client.put_item(**put)

    assert caught.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert isinstance(caught.value, dynamodb_client.exceptions.ConditionalCheckFailedException)


def test_transact_write_items_is_all_or_nothing(dynamodb_client: Any) -> None:
    table = _create_table(dynamodb_client)
    dynamodb_client.put_item(TableName=table, Item=_item("RUN#p", "LOCK", owner="first"))

    with pytest.raises(ClientError) as caught:
        dynamodb_client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": _item("QUEUE#p", "EVENT#1")}},
                {
                    "Put": {
                        "TableName": table,
                        "Item": _item("RUN#p", "LOCK", owner="second"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )

    error = caught.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    reasons = [reason["Code"] for reason in error["CancellationReasons"]]
    assert reasons == ["None", "ConditionalCheckFailed"]
    # Nothing of the transaction was written: not the first put, and the lock kept its owner.
    assert "Item" not in dynamodb_client.get_item(TableName=table, Key=_item("QUEUE#p", "EVENT#1"))
    lock = dynamodb_client.get_item(TableName=table, Key=_item("RUN#p", "LOCK"), ConsistentRead=True)
    assert lock["Item"]["owner"] == {"S": "first"}


def _read_stream(streams: Any, stream_arn: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=100)
            records.extend(page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


def test_stream_records_are_read_back_in_write_order(
    dynamodb_client: Any, dynamodb_streams_client: Any
) -> None:
    table = _create_table(dynamodb_client, stream=True)
    description = dynamodb_client.describe_table(TableName=table)["Table"]
    assert description["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}

    # Given three inserts, a refused conditional put, a cancelled transaction and one update
    for n in ("1", "2", "3"):
        dynamodb_client.put_item(TableName=table, Item=_item("ASSET#a", f"EVENT#{n}", n=n))
    with pytest.raises(ClientError):
        dynamodb_client.put_item(
            TableName=table,
            Item=_item("ASSET#a", "EVENT#1", n="dup"),
            ConditionExpression="attribute_not_exists(pk)",
        )
    with pytest.raises(ClientError):
        dynamodb_client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": _item("ASSET#a", "EVENT#4", n="4")}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": _item("ASSET#a", "EVENT#1"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    dynamodb_client.update_item(
        TableName=table,
        Key=_item("ASSET#a", "EVENT#2"),
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"S": "2b"}},
    )

    # When the stream is read from its start
    records = _read_stream(dynamodb_streams_client, description["LatestStreamArn"])

    # Then it holds exactly the four writes that happened, in order, with new images only
    seen = [
        (r["eventName"], r["dynamodb"]["Keys"]["sk"]["S"], r["dynamodb"]["NewImage"]["n"]["S"])
        for r in records
    ]
    assert seen == [
        ("INSERT", "EVENT#1", "1"),
        ("INSERT", "EVENT#2", "2"),
        ("INSERT", "EVENT#3", "3"),
        ("MODIFY", "EVENT#2", "2b"),
    ]
    sequence_numbers = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequence_numbers == sorted(sequence_numbers)
    assert len(set(sequence_numbers)) == len(sequence_numbers)
    assert all("OldImage" not in r["dynamodb"] for r in records)
    assert {r["dynamodb"]["StreamViewType"] for r in records} == {"NEW_IMAGE"}


def test_dynamodb_local_keeps_data_across_restart_with_data_dir(tmp_path: Path) -> None:
    with DynamoDbLocal(data_dir=tmp_path / "data", log_dir=tmp_path) as emulator:
        ddb = client("dynamodb", emulator.endpoint)
        table = _create_table(ddb)
        ddb.put_item(TableName=table, Item=_item("ASSET#a", "EVENT#1", n="1"))
        port, pid = emulator.port, emulator.pid

        emulator.restart()

        assert (emulator.port, emulator.running) == (port, True)
        assert emulator.pid != pid
        assert pid is not None
        assert _wait_gone(pid)
        item = ddb.get_item(TableName=table, Key=_item("ASSET#a", "EVENT#1"))["Item"]
        assert item["n"] == {"S": "1"}
    assert not emulator.running


def test_dynamodb_local_without_data_dir_keeps_a_private_database_until_it_stops(tmp_path: Path) -> None:
    emulator = DynamoDbLocal(log_dir=tmp_path)
    with emulator:
        ddb = client("dynamodb", emulator.endpoint)
        name = _create_table(ddb)
        folder = emulator.database_dir
        emulator.restart()  # a restart keeps the data, as with a data_dir
        assert ddb.list_tables()["TableNames"] == [name]
    assert not folder.exists()  # stopped: its private database is gone
    with emulator:
        assert client("dynamodb", emulator.endpoint).list_tables()["TableNames"] == []


def test_dynamodb_local_stream_records_are_indexed_with_planner_statistics(tmp_path: Path) -> None:
    import sqlite3

    def schema(database: Path) -> tuple[set[str], list[tuple[str, str]]]:
        with contextlib.closing(sqlite3.connect(database)) as connection:
            indexes = {
                row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
            }
            stats = connection.execute(
                "SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'us' ORDER BY idx"
            ).fetchall()
        return indexes, stats

    with DynamoDbLocal(log_dir=tmp_path) as emulator:
        database = emulator.database_dir / SHARED_DATABASE_FILE
        indexes, stats = schema(database)
        assert {"assetflow_us_stream", "assetflow_us_shard"} <= indexes
        assert stats == [
            ("assetflow_us_shard", STREAM_INDEX_STATS),
            ("assetflow_us_stream", STREAM_INDEX_STATS),
        ]
        emulator.restart()  # set up again on the same file: the same, once each
        assert schema(database) == (indexes, stats)


# -- moto -------------------------------------------------------------------------------------------------


def test_sqs_redrive_moves_a_message_to_the_dlq_after_max_receives(sqs_client: Any) -> None:
    dlq_url = sqs_client.create_queue(QueueName=_name("dlq"))["QueueUrl"]
    dlq_arn = sqs_client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs_client.create_queue(
        QueueName=_name("ingest"),
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"})},
    )["QueueUrl"]
    sqs_client.send_message(QueueUrl=queue_url, MessageBody='{"n": 1}')

    def receive(url: str) -> list[dict[str, Any]]:
        answer = sqs_client.receive_message(
            QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=0, AttributeNames=["ApproximateReceiveCount"]
        )
        return list(answer.get("Messages", []))

    # Received twice and never deleted (a handler that keeps failing)
    counts = [int(receive(queue_url)[0]["Attributes"]["ApproximateReceiveCount"]) for _ in range(2)]
    assert counts == [1, 2]

    # The next receive finds the main queue empty: the message went to the dead-letter queue
    assert receive(queue_url) == []
    moved = receive(dlq_url)
    assert [m["Body"] for m in moved] == ['{"n": 1}']


def test_s3_put_and_get(s3_client: Any) -> None:
    bucket = _name("runs")
    s3_client.create_bucket(Bucket=bucket)
    body = json.dumps({"format": "assetflow.run-context", "version": 1}).encode()

    s3_client.put_object(
        Bucket=bucket, Key="runs/p/r1/context.json", Body=body, ContentType="application/json"
    )
    got = s3_client.get_object(Bucket=bucket, Key="runs/p/r1/context.json")

    assert got["Body"].read() == body
    assert got["ContentType"] == "application/json"
    with pytest.raises(ClientError) as caught:
        s3_client.get_object(Bucket=bucket, Key="runs/p/r1/outlets.json")
    assert caught.value.response["Error"]["Code"] == "NoSuchKey"


def test_eventbridge_put_events_on_a_custom_bus_reaches_a_rule_target(
    events_client: Any, sqs_client: Any
) -> None:
    bus = _name("assetflow")
    events_client.create_event_bus(Name=bus)
    queue_url = sqs_client.create_queue(QueueName=_name("listener"))["QueueUrl"]
    queue_arn = sqs_client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events_client.put_rule(
        Name="asset-events", EventBusName=bus, EventPattern=json.dumps({"source": ["assetflow"]})
    )
    events_client.put_targets(Rule="asset-events", EventBusName=bus, Targets=[{"Id": "q", "Arn": queue_arn}])

    answer = events_client.put_events(
        Entries=[
            {
                "EventBusName": bus,
                "Source": "assetflow",
                "DetailType": "on_asset_event_emitted",
                "Detail": json.dumps({"asset": "s3://b/k"}),
            },
            {"EventBusName": bus, "Source": "other", "DetailType": "x", "Detail": "{}"},
        ]
    )

    assert answer["FailedEntryCount"] == 0
    messages = sqs_client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    delivered = [json.loads(m["Body"]) for m in messages.get("Messages", [])]
    assert [(e["source"], e["detail-type"], e["detail"]) for e in delivered] == [
        ("assetflow", "on_asset_event_emitted", {"asset": "s3://b/k"})
    ]


def test_emr_serverless_job_runs_succeed_at_once_and_moto_ignores_the_client_token(
    emr_serverless_client: Any,
) -> None:
    emr = emr_serverless_client
    application_id = emr.create_application(
        name=_name("assetflow"), releaseLabel="emr-7.9.0", type="SPARK", clientToken="app-token"
    )["applicationId"]
    run = {
        "applicationId": application_id,
        "clientToken": "run-0001",
        "executionRoleArn": f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/assetflow-job",
        "jobDriver": {
            "sparkSubmit": {
                "entryPoint": "s3://code/spark_jobs/x.py",
                "entryPointArguments": ["--assetflow-context", "s3://runs/p/r1/context.json"],
            }
        },
        "name": "p/r1",
    }

    first = emr.start_job_run(**run)["jobRunId"]
    second = emr.start_job_run(**run)["jobRunId"]

    assert emr.get_application(applicationId=application_id)["application"]["state"] == "STARTED"
    job_run = emr.get_job_run(applicationId=application_id, jobRunId=first)["jobRun"]
    assert job_run["state"] == "SUCCESS"  # no PENDING/RUNNING: the local runtime drives run states itself
    assert job_run["jobDriver"]["sparkSubmit"]["entryPointArguments"][1] == "s3://runs/p/r1/context.json"
    # AWS answers a repeated clientToken with the same job run; moto 5.2.5 starts a second one. Idempotency of
    # submissions must therefore be enforced (and tested) on our side, not left to the emulator.
    assert second != first
    listed = emr.list_job_runs(applicationId=application_id)["jobRuns"]
    assert sorted(r["id"] for r in listed) == sorted([first, second])


def test_local_clients_ignore_the_users_aws_profile_and_region(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")

    sqs = client("sqs", moto_server.endpoint)

    assert sqs.meta.region_name == "us-east-1"
    url = sqs.create_queue(QueueName=_name("profile"))["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ].startswith(f"arn:aws:sqs:us-east-1:{LOCAL_ACCOUNT_ID}:")


def test_moto_reset_forgets_resources_and_restart_keeps_the_port(tmp_path: Path) -> None:
    with MotoServer(log_dir=tmp_path) as moto:
        sqs = client("sqs", moto.endpoint)
        sqs.create_queue(QueueName="before-reset")
        assert len(sqs.list_queues().get("QueueUrls", [])) == 1

        moto.reset()
        assert sqs.list_queues().get("QueueUrls", []) == []

        port, pid = moto.port, moto.pid
        moto.restart()
        assert moto.port == port
        assert pid is not None
        assert _wait_gone(pid)
        assert sqs.list_queues().get("QueueUrls", []) == []
        pid = moto.pid
    assert pid is not None
    assert _wait_gone(pid)


# -- Tansu (Kafka) ----------------------------------------------------------------------------------------


def _poll(consumer: KafkaConsumer, wanted: int, timeout: float = 30.0) -> list[Any]:
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < wanted and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=250, max_records=wanted - len(records))
        for partition_records in batch.values():
            records.extend(partition_records)
    return records


def test_consumer_group_resumes_after_the_committed_offset(kafka_broker: TansuBroker) -> None:
    topic, group = _name("asset-events"), _name("assetflow-ingest")
    kafka_broker.create_topics([topic])
    partition = TopicPartition(topic, 0)

    producer = KafkaProducer(bootstrap_servers=kafka_broker.endpoint, acks="all")
    for n in range(6):
        producer.send(
            topic,
            key=f"k{n % 2}".encode(),
            value=json.dumps({"n": n}).encode(),
            headers=[("source", b"test"), ("n", str(n).encode())],
        )
    producer.flush(timeout=10)
    producer.close()

    settings = {
        "bootstrap_servers": kafka_broker.endpoint,
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        **LOCAL_KAFKA_CONSUMER_TIMEOUTS,
    }

    # Given a first consumer of the group that reads three records and commits after the third
    first = KafkaConsumer(topic, **settings)
    try:
        head = _poll(first, 3)
        assert [r.offset for r in head] == [0, 1, 2]
        assert [(r.key, json.loads(r.value)) for r in head] == [
            (b"k0", {"n": 0}),
            (b"k1", {"n": 1}),
            (b"k0", {"n": 2}),
        ]
        assert head[1].headers == [("source", b"test"), ("n", b"1")]
        first.commit({partition: OffsetAndMetadata(head[-1].offset + 1, "", -1)})
    finally:
        first.close()

    # When a second consumer joins the same group
    second = KafkaConsumer(topic, **settings)
    try:
        tail = _poll(second, 3)
        committed = second.committed(partition)
        extra = _poll(second, 1, timeout=1.0)
    finally:
        second.close()

    # Then it starts right after the committed offset and sees each remaining record once
    assert committed == 3
    assert [r.offset for r in tail] == [3, 4, 5]
    assert [(r.key, json.loads(r.value)) for r in tail] == [
        (b"k1", {"n": 3}),
        (b"k0", {"n": 4}),
        (b"k1", {"n": 5}),
    ]
    assert all(dict(r.headers)["n"] == str(json.loads(r.value)["n"]).encode() for r in tail)
    assert extra == []


def _read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        records = _poll(consumer, count, timeout=10.0)
        records += _poll(consumer, 1, timeout=1.0)  # anything beyond what was expected
        return [r.value for r in records]
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for value in values:
        producer.send(topic, value=value)
    producer.flush(timeout=10)
    producer.close()


def test_tansu_memory_storage_loses_topics_on_restart(tmp_path: Path) -> None:
    with TansuBroker(log_dir=tmp_path) as broker:
        broker.create_topics(["kept"])
        broker.restart()
        assert broker.list_topics() == []


def test_tansu_s3_storage_on_moto_keeps_topics_and_messages_across_restart(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    storage = f"s3://{_name('tansu')}/"
    with TansuBroker(log_dir=tmp_path, storage_url=storage, s3_endpoint=moto_server.endpoint) as broker:
        broker.create_topics(["kept"])
        _produce(broker.endpoint, "kept", [b"a", b"b"])

        broker.restart()

        assert broker.list_topics() == ["kept"]
        assert _read_all(broker.endpoint, "kept", 2) == [b"a", b"b"]


# -- process handling -------------------------------------------------------------------------------------


def test_start_failure_names_the_cause_from_the_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        # Bound without SO_REUSEADDR (and not listening, so readiness probes are refused at once).
        taken.bind(("127.0.0.1", 0))
        broker = TansuBroker(port=taken.getsockname()[1], log_dir=tmp_path)

        with pytest.raises(EmulatorStartError) as caught:
            broker.start()

    message = str(caught.value)
    assert "exited with status" in message
    assert "last lines of the log" in message
    assert "in use" in message.lower()  # the broker's own words, from its log
    assert not broker.running


def test_start_timeout_stops_the_emulator_and_reports_the_last_probe_error(tmp_path: Path) -> None:
    moto = MotoServer(log_dir=tmp_path, start_timeout=0.05)
    already_running = set(processes.live_processes())

    with pytest.raises(EmulatorStartError) as caught:
        moto.start()

    assert "not ready after" in str(caught.value)
    assert "last probe error" in str(caught.value)
    assert not moto.running
    assert set(processes.live_processes()) == already_running


def test_missing_tools_are_named_with_the_install_script(tmp_path: Path) -> None:
    with pytest.raises(EmulatorNotInstalledError, match=r"scripts/install-tools\.sh"):
        DynamoDbLocal(jar=tmp_path / "DynamoDBLocal.jar", log_dir=tmp_path).start()

    old_java = tmp_path / "java"
    old_java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    old_java.chmod(0o755)
    jar = tmp_path / "DynamoDBLocal.jar"
    jar.write_bytes(b"")
    with pytest.raises(EmulatorNotInstalledError, match="openjdk-17-jre-headless"):
        DynamoDbLocal(jar=jar, java=str(old_java), log_dir=tmp_path).start()


@pytest.mark.parametrize(
    ("ending", "die_with_parent"),
    [
        ("sys.exit(0)", False),  # the atexit safety net alone
        ("os.kill(os.getpid(), signal.SIGKILL)", True),  # no atexit: the kernel's parent-death signal
    ],
    ids=["exit-atexit", "sigkill-pdeathsig"],
)
def test_no_emulator_outlives_the_python_process(tmp_path: Path, ending: str, die_with_parent: bool) -> None:
    # Given a Python process that starts an emulator and never stops it
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from assetflow_dev import TansuBroker
        broker = TansuBroker(log_dir={str(tmp_path)!r}, die_with_parent={die_with_parent}).start()
        print(broker.pid, flush=True)
        {ending}
        """
    )

    # When that process ends
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False
    )
    assert done.stdout.strip(), done.stderr

    # Then the emulator is gone too
    pid = int(done.stdout.strip())
    if not _wait_gone(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"emulator pid {pid} survived its parent ({ending})")


def test_stop_sends_sigkill_to_a_process_group_that_ignores_sigterm(tmp_path: Path) -> None:
    # Given a process that ignores SIGTERM and has a child of its own that ignores it too
    ignore_term = "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    grandchild = ignore_term + "print('ready', flush=True); time.sleep(60)"
    leader = processes.spawn(
        [
            sys.executable,
            "-c",
            f"{ignore_term}subprocess.Popen([sys.executable, '-c', {grandchild!r}]); time.sleep(60)",
        ],
        log_path=tmp_path / "stubborn.log",
    )
    try:
        deadline = time.monotonic() + 10
        while "ready" not in (tmp_path / "stubborn.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchildren = [
            int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == leader.pid
        ]
        assert len(grandchildren) == 1

        # When it is terminated with a short grace period
        status = processes.terminate(leader, timeout=0.5)

        # Then SIGKILL ended the leader, the whole group went with it, and nothing is left registered
        assert status == -signal.SIGKILL
        assert _wait_gone(grandchildren[0], timeout=5)
        assert leader.pid not in processes.live_processes()
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()


def _ppid(proc_dir: Path) -> int | None:
    try:
        stat = (proc_dir / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
