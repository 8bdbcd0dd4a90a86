"""Every give-up path, on the whole local runtime: retries run out, the destination keeps it, the tools repair it.

One ``LocalRuntime`` (DynamoDB Local, moto, Tansu, the EMR-API launcher) runs the suite's definitions
(``giveup/pipelines.py``). Faults are AWS calls that always fail (a throttled or refused request, as the
emulators never answer) switched on around one step: the evaluator's writes, a job state's move, a tick's
transaction, a watcher's ingest, StartJobRun. Each scenario then checks that the give-up landed where the stack
sends it on AWS (the failures bucket, an on-failure queue, a dead-letter queue), that ``assetflow
replay-failures`` or ``assetflow reconcile-runs`` (the CLI, through the runtime's Lambda invoke endpoint)
restores it, that doing so twice changes nothing, and that no event was lost or doubled.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from assetflow.composition import Dependencies
from assetflow.core.events import format_timestamp
from assetflow_dev import LOCAL_CLIENT_CONFIG, LOCAL_CLIENT_KWARGS, client
from assetflow_dev.cli import main as cli
from assetflow_dev.failures import FAILURE_PREFIX
from assetflow_dev.runtime import LocalRuntime, RuntimeOptions

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PIPELINES = Path(__file__).parent / "giveup" / "pipelines.py"
ORDERS, READINGS, EMITTED = "s3://shop/orders", "x-test://readings", "x-test://emitted"
CLEAN = "s3://shop/clean-orders"

#: Figures of the whole module, printed at its end (faults injected, give-ups kept, repairs, events lost).
FIGURES: collections.Counter[str] = collections.Counter()


# ---- faults: AWS calls that fail while a rule is on ----------------------------------------------------------


@dataclass
class Faults:
    """Rules ``(role, service, operation) -> predicate(kwargs)``; a matching call fails with ``code``."""

    rules: dict[tuple[str, str, str], tuple[Callable[[Mapping[str, Any]], bool], str]] = field(
        default_factory=dict
    )
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(
        self,
        role: str,
        service: str,
        operation: str,
        code: str = "ThrottlingException",
        when: Callable[[Mapping[str, Any]], bool] = lambda _: True,
    ) -> None:
        with self.lock:
            self.rules[(role, service, operation)] = (when, code)

    def disarm(self) -> None:
        with self.lock:
            self.rules.clear()

    def code_for(self, role: str, service: str, operation: str, kwargs: Mapping[str, Any]) -> str | None:
        with self.lock:
            rule = self.rules.get((role, service, operation))
        if rule is None or not rule[0](kwargs):
            return None
        with self.lock:
            self.injected[f"{service}:{operation}:{rule[1]}"] += 1
        return rule[1]


class FaultyClient:
    """A boto3 client whose calls fail as ``faults`` say, for the role it was built for."""

    def __init__(self, real: Any, role: str, service: str, faults: Faults) -> None:
        self._real, self._role, self._service, self._faults = real, role, service, faults

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if (
            name.startswith("_")
            or not callable(attr)
            or name in ("get_waiter", "get_paginator", "can_paginate")
        ):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            code = self._faults.code_for(self._role, self._service, name, kwargs)
            if code is not None:
                error = {
                    "Error": {"Code": code, "Message": "injected"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                }
                raise ClientError(error, name)
            return attr(*args, **kwargs)

        return call


class FaultyDependencies(Dependencies):
    def __init__(self, *args: Any, role: str, faults: Faults, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._role, self._faults = role, faults

    def client(self, service: str) -> Any:
        return FaultyClient(super().client(service), self._role, service, self._faults)


class FaultyRuntime(LocalRuntime):
    """The local runtime with its functions' (role ``main`` or ``ingest-<watcher>``) and its own clients faulty."""

    def __init__(self, options: RuntimeOptions, faults: Faults) -> None:
        super().__init__(options)
        self.faults = faults

    def _dependencies(
        self, *, watcher: str | None = None, launcher: Any = None, wakeups: Any = None
    ) -> Dependencies:
        endpoints = {k: v for k, v in self.endpoints().items() if k not in ("kafka", "lambda")}
        return FaultyDependencies(
            self._settings(watcher),
            session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
            launcher=launcher,
            endpoints=endpoints,
            config=LOCAL_CLIENT_CONFIG,
            wakeups=wakeups,
            role=f"ingest-{watcher}" if watcher else "main",
            faults=self.faults,
        )

    def client(self, service: str) -> Any:
        return FaultyClient(super().client(service), "runtime", service, self.faults)


# ---- the world -------------------------------------------------------------------------------------------------


@dataclass
class World:
    runtime: FaultyRuntime
    faults: Faults
    home: Path
    counter: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def dev(self) -> dict[str, Any]:
        return self.runtime.dev_config()

    def s3(self) -> Any:
        return client("s3", self.dev["endpoints"]["s3"])

    def sqs(self) -> Any:
        return client("sqs", self.dev["endpoints"]["sqs"])

    def events(self, uri: str) -> list[dict[str, Any]]:
        return self.runtime.deps.store.list_events(uri, limit=1000).items  # type: ignore[union-attr]

    def runs(self, pipeline: str) -> list[dict[str, Any]]:
        items = self.runtime.deps.store.list_runs(pipeline, limit=1000).items  # type: ignore[union-attr]
        return sorted(items, key=lambda r: r["created_at"])

    def failure_objects(self) -> list[str]:
        answer = self.s3().list_objects_v2(Bucket=self.dev["failures"]["bucket"], Prefix=FAILURE_PREFIX)
        return [o["Key"] for o in answer.get("Contents", [])]

    def queue_depth(self, url: str) -> int:
        attributes = self.sqs().get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
        capsys.readouterr()
        code = cli([*argv, "--json"])
        out = capsys.readouterr().out
        return code, json.loads(out) if out.strip() else {}

    def send_order(self, n: int) -> str:
        self.sqs().send_message(
            QueueUrl=self.dev["queues"]["orders"]["url"], MessageBody=json.dumps({"order": n})
        )
        self.counter["messages sent"] += 1
        return f"{n}"

    def emit(self, key: str) -> dict[str, Any]:
        code = cli(["events", "emit", EMITTED, "--idempotency-key", key, "--json"])
        assert code == 0
        self.counter["events emitted"] += 1
        return {}


def eventually(check: Callable[[], Any], *, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("giveup")
    # As `assetflow dev up` does: no metrics sink locally (their EMF lines would mix with the CLI's JSON here).
    __import__("os").environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    faults = Faults()
    options = RuntimeOptions(
        pipelines=str(PIPELINES),
        work_dir=home / ".assetflow",
        launcher="emr-api",
        schedules=True,
        sweep_seconds=0,  # the tests run the sweep themselves, through the CLI
        function_log=home / ".assetflow" / "logs" / "functions.log",
    )
    runtime = FaultyRuntime(options, faults)
    with runtime:
        yield World(runtime, faults, home)


@pytest.fixture(autouse=True)
def at_home(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(world.home)
    for variable in [v for v in list(__import__("os").environ) if v.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(variable)
    yield
    world.faults.disarm()


# ---- the scenarios ---------------------------------------------------------------------------------------------


def test_an_evaluation_that_fails_its_retries_is_kept_whole_and_replayed_once(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the evaluator's transactions failing (throttled, every time) when an order arrives
    world.faults.arm("main", "dynamodb", "transact_write_items")
    world.send_order(1)
    (event,) = eventually(lambda: world.events(ORDERS), what="the order's event (ingest is fine)")

    # When the stream mapping's retries run out
    (key,) = eventually(world.failure_objects, what="the failed batch in the failures bucket")
    record = json.loads(world.s3().get_object(Bucket=world.dev["failures"]["bucket"], Key=key)["Body"].read())
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert json.loads(record["payload"])["Records"][0]["dynamodb"]["NewImage"]["event_id"]["S"] == event["id"]
    assert world.runs("etl") == []
    FIGURES["stream batches given up"] += 1

    # Then the replay (after the fault cleared) makes the run, and a second replay (of a copy of the same
    # failure, as a redelivered destination write would be) makes nothing more
    world.faults.disarm()
    code, report = world.cli(capsys, "replay-failures")
    assert (code, report["replayed"], report["failed"]) == (0, 1, 0)
    assert world.failure_objects() == []
    (run,) = eventually(lambda: world.runs("etl"), what="the order's run")
    world.s3().put_object(Bucket=world.dev["failures"]["bucket"], Key=key, Body=json.dumps(record).encode())
    code, again = world.cli(capsys, "replay-failures")
    assert (code, again["replayed"]) == (0, 1)
    time.sleep(1)
    assert [r["run_id"] for r in world.runs("etl")] == [run["run_id"]]
    FIGURES["replayed"] += 2


def test_a_failure_record_without_its_records_is_read_back_from_the_stream(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a failed evaluation kept as an SQS destination keeps it: the batch's sequence numbers only
    before = len(world.runs("on_demand"))
    world.faults.arm("main", "dynamodb", "transact_write_items")
    world.emit("metadata-only-1")
    (key,) = eventually(world.failure_objects, what="the failed batch")
    bucket = world.dev["failures"]["bucket"]
    record = json.loads(world.s3().get_object(Bucket=bucket, Key=key)["Body"].read())
    del record["payload"]
    world.s3().put_object(Bucket=bucket, Key=key, Body=json.dumps(record).encode())
    world.faults.disarm()

    # When it is replayed (within the stream's 24 hours)
    code, report = world.cli(capsys, "replay-failures")

    # Then its records were read back from the stream by their sequence numbers, and evaluated
    assert (code, report["replayed"]) == (0, 1) and report["items"][0]["detail"] == "1 record(s)"
    eventually(lambda: len(world.runs("on_demand")) == before + 1, what="the run")
    FIGURES["replayed"] += 1


def test_a_job_state_change_that_fails_its_retries_is_kept_and_replayed_into_the_run(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = world.dev["failures"]["queues"]["run-state"]
    # Given the job's SUCCESS failing to move its run, every time (RUNNING went through)
    earlier = {r["run_id"] for r in world.runs("on_demand")}
    world.faults.arm("main", "dynamodb", "transact_write_items", when=_moves_a_run_to("success"))
    world.emit("job-state-1")

    def run() -> dict[str, Any] | None:
        return next((r for r in world.runs("on_demand") if r["run_id"] not in earlier), None)

    eventually(run, what="the run")

    # When the run-state function's retries run out: the event is in its on-failure queue, the run running
    eventually(lambda: world.queue_depth(queue) == 1, what="the kept job state event")
    assert run()["state"] == "running"  # type: ignore[index]
    FIGURES["async invocations given up"] += 1

    # Then the replay ends the run (and a replay with nothing left does nothing)
    world.faults.disarm()
    code, report = world.cli(capsys, "replay-failures")
    assert (code, report["replayed"]) == (0, 1)
    assert run()["state"] == "success"  # type: ignore[index]
    assert world.queue_depth(queue) == 0
    assert world.cli(capsys, "replay-failures")[1]["found"] == 0
    FIGURES["replayed"] += 1


def test_a_run_whose_state_change_was_lost_entirely_is_finished_by_the_sweep(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = world.dev["failures"]["queues"]["run-state"]
    # Given a SUCCESS that failed its retries and whose kept event was then lost too
    world.faults.arm("main", "dynamodb", "transact_write_items", when=_moves_a_run_to("success"))
    world.emit("lost-state-1")
    run = eventually(lambda: [r for r in world.runs("on_demand") if r["state"] != "success"], what="the run")[
        0
    ]
    eventually(lambda: world.queue_depth(queue) == 1, what="the kept job state event")
    world.faults.disarm()
    world.sqs().purge_queue(QueueUrl=queue)
    assert world.runs("on_demand")[-1]["state"] == "running"

    # A sweep within the grace after the job's end leaves it to the state change that may be on its way
    code, early = world.cli(capsys, "reconcile-runs")
    assert (code, early["finished"], early["in_flight"]) == (0, 0, 1)
    assert world.runs("on_demand")[-1]["state"] == "running"

    # When the sweep runs after the grace (shortened here; a dry run first)
    world.runtime.deps.reconciler.state_change_grace = timedelta(0)  # type: ignore[union-attr]
    code, dry = world.cli(capsys, "reconcile-runs", "--dry-run")
    assert code == 0 and dry["finished"] == 1 and world.runs("on_demand")[-1]["state"] == "running"
    code, report = world.cli(capsys, "reconcile-runs")

    # Then the run is finished from its job run's state
    assert (code, report["finished"], report["runs"]["finished"]) == (0, 1, [run["run_id"]])
    assert world.runs("on_demand")[-1]["state"] == "success"
    assert world.cli(capsys, "reconcile-runs")[1]["repaired"] == 0
    FIGURES["runs repaired by the sweep"] += 1


def test_a_tick_that_fails_its_retries_is_kept_and_replayed_into_its_run(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = world.dev["failures"]["queues"]["schedule-tick"]
    world.faults.arm("main", "dynamodb", "transact_write_items")
    tick = {"pipeline": "nightly", "scheduled_time": format_timestamp(_utc(2026, 11, 22, 6))}
    world.runtime.async_invocations["schedule-tick"](tick)
    assert world.queue_depth(queue) == 1 and world.runs("nightly") == []
    FIGURES["async invocations given up"] += 1

    world.faults.disarm()
    code, report = world.cli(capsys, "replay-failures")
    assert (code, report["replayed"]) == (0, 1)
    (run,) = world.runs("nightly")
    assert run["scheduled_time"] == tick["scheduled_time"]
    # The same tick again (a duplicate delivery) makes no second run
    world.runtime.async_invocations["schedule-tick"](tick)
    assert len(world.runs("nightly")) == 1
    FIGURES["replayed"] += 1


def test_a_message_dead_lettered_after_its_receives_is_replayed_as_the_same_message(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    dlq = world.dev["queues"]["orders"]["dlq_url"]
    before = len(world.events(ORDERS))
    # Given the orders watcher's writes failing until SQS dead-letters the message (3 receives)
    world.faults.arm("ingest-orders", "dynamodb", "transact_write_items")
    world.faults.arm("ingest-orders", "dynamodb", "batch_write_item")
    world.send_order(2)
    eventually(lambda: world.queue_depth(dlq) == 1, what="the dead-lettered message", timeout=90)
    assert len(world.events(ORDERS)) == before
    FIGURES["messages dead-lettered"] += 1

    world.faults.disarm()
    code, report = world.cli(capsys, "replay-failures")
    assert (code, report["replayed"]) == (0, 1)
    stored = world.events(ORDERS)
    assert len(stored) == before + 1 and stored[0]["extra"]["payload"] == {"order": 2}
    assert world.queue_depth(dlq) == 0
    FIGURES["replayed"] += 1


def test_a_kafka_record_that_fails_its_retries_is_never_committed_past_until_kept_then_replayed(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka import KafkaProducer

    world.faults.arm("ingest-readings", "dynamodb", "transact_write_items")
    producer = KafkaProducer(bootstrap_servers=world.dev["endpoints"]["kafka"])
    producer.send("giveup-readings", value=json.dumps({"reading": 7}).encode(), partition=0)
    producer.flush()
    producer.close()

    keys = eventually(
        lambda: [k for k in world.failure_objects() if "/ingest-readings/" in k], what="the kept Kafka batch"
    )
    record = json.loads(
        world.s3().get_object(Bucket=world.dev["failures"]["bucket"], Key=keys[0])["Body"].read()
    )
    assert record["KafkaBatchInfo"]["batchSize"] == 1 and json.loads(record["payload"])["records"]
    assert world.events(READINGS) == []
    FIGURES["kafka batches given up"] += 1

    world.faults.disarm()
    code, report = world.cli(capsys, "replay-failures")
    assert (code, report["replayed"]) == (0, 1)
    (event,) = world.events(READINGS)
    assert event["extra"]["payload"] == {"reading": 7}
    FIGURES["replayed"] += 1


def test_a_run_whose_submission_stays_refused_is_failed_by_the_sweep_with_its_reason(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given StartJobRun refused (a bad configuration) for every submission
    world.faults.arm("runtime", "emr-serverless", "start_job_run", "ValidationException")
    earlier = {r["run_id"] for r in world.runs("on_demand")}
    world.emit("refused-1")
    (refused,) = eventually(
        lambda: [r for r in world.runs("on_demand") if r["run_id"] not in earlier], what="the refused run"
    )
    assert refused["state"] == "queued" and refused["job_run_id"] is None

    # When the sweep runs after the grace (shortened here)
    world.runtime.deps.reconciler.submit_grace = timedelta(0)  # type: ignore[union-attr]
    code, report = world.cli(capsys, "reconcile-runs")

    # Then the run failed, with StartJobRun's reason, and the slot is free again
    world.faults.disarm()
    assert (code, report["failed_refused"]) == (0, 1)
    shown = next(r for r in world.runs("on_demand") if r["run_id"] == refused["run_id"])
    detail = world.runtime.deps.store.get_run(refused["run_id"]).to_json()  # type: ignore[union-attr]
    assert shown["state"] == "failed" and "ValidationException" in detail["submission_error"]
    assert world.runtime.deps.store.active_runs("on_demand") == 0  # type: ignore[union-attr]
    FIGURES["runs repaired by the sweep"] += 1


def test_replay_against_a_deployed_environment_reads_the_stacks_outputs(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an environment known only by its stack's outputs (CloudFormation, here moto's, describes a stack
    # whose outputs name this runtime's resources, as `cdk deploy` would name the deployed ones) and the
    # operator's credentials and endpoints
    dev = world.dev
    outputs = {
        "TableName": dev["table"],
        "FunctionNames": json.dumps(dev["functions"]),
        "FailuresBucket": dev["failures"]["bucket"],
        "FailureQueueUrls": json.dumps(dev["failures"]["queues"]),
        "DeadLetterQueueUrls": json.dumps({w: q["dlq_url"] for w, q in dev["queues"].items()}),
        "QueueUrls": json.dumps({w: q["url"] for w, q in dev["queues"].items()}),
    }
    template = {
        "Resources": {
            "Marker": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "giveup-env-marker"}}
        },
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    moto = dev["endpoints"]["s3"]
    client("cloudformation", moto).create_stack(
        StackName="assetflow-giveup", TemplateBody=json.dumps(template)
    )
    for service, variable in (
        ("cloudformation", "AWS_ENDPOINT_URL_CLOUDFORMATION"),
        ("s3", "AWS_ENDPOINT_URL_S3"),
        ("sqs", "AWS_ENDPOINT_URL_SQS"),
        ("dynamodb", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS"),
        ("lambda", "AWS_ENDPOINT_URL_LAMBDA"),
    ):
        monkeypatch.setenv(variable, dev["endpoints"].get(service, moto))
    # Lambda's endpoint here is the runtime's, which takes its token as the key id (any key does for moto)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", dev["api"]["token"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "operator")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # ...and an evaluation that failed its retries
    before = len(world.runs("on_demand"))
    world.faults.arm("main", "dynamodb", "transact_write_items")
    world.emit("deployed-1")
    eventually(world.failure_objects, what="the failed batch")
    world.faults.disarm()

    # When the operator replays with --env, from a folder without the local runtime's dev.json
    monkeypatch.chdir(world.home.parent)
    code, report = world.cli(capsys, "replay-failures", "--env", "giveup")

    # Then it was found through the outputs and replayed by the environment's evaluator
    assert (code, report["replayed"], report["failed"]) == (0, 1, 0)
    assert report["items"][0]["function"] == dev["functions"]["evaluator"]
    eventually(lambda: len(world.runs("on_demand")) == before + 1, what="the replayed event's run")
    FIGURES["replayed"] += 1


def test_no_event_was_lost_or_doubled(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    orders = world.events(ORDERS)
    assert sorted(e["extra"]["payload"]["order"] for e in orders) == [1, 2]
    assert len(world.events(READINGS)) == 1
    emitted = world.events(EMITTED)
    assert len(emitted) == world.counter["events emitted"] == len({e["id"] for e in emitted})
    sent = world.counter["messages sent"] + 1 + world.counter["events emitted"]
    stored = len(orders) + 1 + len(emitted)
    FIGURES["events sent"], FIGURES["events stored"], FIGURES["events lost"] = sent, stored, sent - stored
    assert sent == stored
    with capsys.disabled():
        figures = {**FIGURES, **{f"injected {k}": v for k, v in world.faults.injected.items()}}
        print("\ngive-up figures: " + ", ".join(f"{k}={v}" for k, v in sorted(figures.items())))


def _moves_a_run_to(state: str) -> Callable[[Mapping[str, Any]], bool]:
    def moves(kwargs: Mapping[str, Any]) -> bool:
        for item in kwargs.get("TransactItems", []):
            values = item.get("Update", {}).get("ExpressionAttributeValues", {})
            if values.get(":new") == {"S": state}:
                return True
        return False

    return moves


def _utc(*parts: int) -> Any:
    from datetime import UTC, datetime

    return datetime(*parts, tzinfo=UTC)
