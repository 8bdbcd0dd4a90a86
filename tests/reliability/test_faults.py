"""Faults injected at each step of the flow, on the emulators, with the real handlers; then recovery.

The flow: messages (SQS on moto, or Kafka on Tansu) → ingest handler → events in DynamoDB Local → the
table's stream → evaluator handler → runs submitted to EMR Serverless (moto) → job state events → run-state
handler → outlet events → the stream again. A small runtime loop (``Runtime``) plays the AWS parts that the
emulators lack, with their delivery rules: an SQS message comes back after its visibility timeout unless the
handler acknowledged it, a stream batch is retried from its first failed record, a state event whose handler
raised is delivered again, and a container that died is replaced by a fresh one (no memory of the old one).

After recovery, every test asserts: every message has exactly one event; every satisfied condition exactly one
run (``model.check_store``, and the reference model replaying the committed history); every succeeded run
its outlet events, once; and no run is left active or unsubmitted.
"""

from __future__ import annotations

import base64
import collections
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import BotoCoreError, ClientError

from assetflow import (
    Asset,
    AssetOrTimeSchedule,
    AssetWatcher,
    Catalog,
    KafkaTopic,
    Pipeline,
    SparkJob,
    SqsQueue,
)
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Settings
from assetflow.core.events import AssetEvent, RunState, parse_timestamp
from assetflow.core.scheduler import Transition
from assetflow.core.watchers import SelfManagedKafka
from assetflow.functions import (
    handle_asset_events,
    handle_job_state,
    handle_kafka_records,
    handle_schedule_tick,
    handle_sqs_messages,
)
from assetflow.ports import Written
from assetflow.usecases import views
from assetflow_dev import (
    LOCAL_ACCOUNT_ID,
    LOCAL_KAFKA_CONSUMER_TIMEOUTS,
    LOCAL_REGION,
    DynamoDbLocal,
    MotoServer,
    TansuBroker,
    client,
)
from tests.reliability.model import (
    STREAM_BATCH_SIZE,
    T0,
    Applied,
    Crash,
    FailingCalls,
    FaultPlan,
    IdempotentEmr,
    LambdaContext,
    LocalDependencies,
    SentEvent,
    StreamTail,
    check_store,
    chunks,
    leaves,
    replay,
    sequence_number,
)

pytestmark = pytest.mark.slow

ROLE = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/assetflow-job"
CUSTOMERS = Asset("s3://shop/customers")
NEVER = Asset("x-test://no-events")
CLEAN = Asset("s3://shop/clean-orders")
JOB = SparkJob("spark_jobs/job.py")
VISIBILITY_SECONDS = 1  # an unacknowledged SQS message comes back this soon
MESSAGES = 8
CUSTOMER_EVENTS = 3


def pipelines(orders: Asset) -> list[Any]:
    """``etl`` (all-of, outlets), ``each`` (one run per event), ``report`` (fed by etl's outlets), ``nightly``."""
    return [
        orders,
        Pipeline("etl", schedule=orders & CUSTOMERS, job=JOB, outlets=[CLEAN]),
        Pipeline("each", schedule=orders | CUSTOMERS, job=JOB, batch=False),
        Pipeline("report", schedule=CLEAN, job=JOB),
        # Runs only on its cron ticks (its asset gets no events): the tick is its only evaluation.
        Pipeline("nightly", schedule=AssetOrTimeSchedule("0 6 * * *", NEVER), job=JOB),
    ]


def sqs_lambda_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """A received message in the shape the SQS event source mapping gives Lambda."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message["Attributes"],
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": LOCAL_REGION,
    }


def job_state_event(application_id: str, job_run_id: str, state: str) -> dict[str, Any]:
    """An EventBridge "EMR Serverless Job Run State Change" event."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "EMR Serverless Job Run State Change",
        "source": "aws.emr-serverless",
        "account": LOCAL_ACCOUNT_ID,
        "time": "2026-11-21T08:05:00Z",
        "region": LOCAL_REGION,
        "resources": [],
        "detail": {"jobRunId": job_run_id, "applicationId": application_id, "state": state},
    }


@dataclass
class Runtime:
    """The flow on the emulators, driven step by step with AWS's delivery rules; faults are injected around it."""

    store: DynamoDbStore
    settings: Settings
    endpoints: dict[str, str]
    catalog: dict[str, Any]
    application_id: str
    queue_url: str | None = None
    queue_arn: str | None = None
    crash_after: Callable[[Transition], bool] | None = None
    wrap: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    job_states: Callable[[int], list[list[str]]] = lambda _: [["SUCCESS"]]
    crash_before_put: dict[str, Callable[[AssetEvent], bool]] = field(default_factory=dict)
    crash_after_put: dict[str, Callable[[AssetEvent, bool], bool]] = field(default_factory=dict)
    states_before_retry: bool = False
    conflicts: dict[str, Callable[[Any], bool]] = field(default_factory=dict)
    figures: collections.Counter[str] = field(default_factory=collections.Counter)
    applied: list[Applied] = field(default_factory=list)
    finished: set[str] = field(default_factory=set)
    tail: StreamTail | None = None
    racers: list[LocalDependencies] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.evaluator = self.container("evaluator")
        self.run_states = self.container("run_states")
        self.ingest = self.container("ingest")
        self.tail = StreamTail(client("dynamodbstreams", self.endpoints["dynamodb"]), self.store.stream_arn())

    def container(self, role: str) -> LocalDependencies:
        """A fresh Lambda container: new clients, a new launcher with no memory of earlier submissions.

        ``role`` (``ingest``, ``evaluator``, ``run_states``) picks the faults injected into it.
        """
        deps = LocalDependencies(
            self.settings,
            endpoints=self.endpoints,
            crash_after=None if role == "ingest" else self.crash_after,
            wrap=self.wrap,
            conflicts=self.conflicts.get(role),
        )
        before, after = self.crash_before_put.get(role), self.crash_after_put.get(role)
        if before or after:
            real_put = deps.store.put_event

            def put(event: AssetEvent, **kwargs: Any) -> tuple[AssetEvent, bool]:
                if before and before(event):
                    raise Crash(f"before writing event {event.id}")
                stored, created = real_put(event, **kwargs)
                if after and after(stored, created):
                    raise Crash(f"after writing event {event.id}, before the answer")
                return stored, created

            deps.store.put_event = put  # type: ignore[method-assign]
            real_puts = deps.store.put_events

            def puts(events: Sequence[tuple[AssetEvent, str | None]], **kwargs: Any) -> list[Any]:
                # Ingest writes a batch at once: it dies before the batch's first doomed event (what
                # precedes it written, as if the batch had been split there), or after the whole write.
                for n, (event, _) in enumerate(events):
                    if before and before(event):
                        if n:
                            real_puts(events[:n], **kwargs)
                        raise Crash(f"before writing event {event.id}")
                answers = real_puts(events, **kwargs)
                for answer in answers:
                    if after and isinstance(answer, Written) and after(answer.event, answer.created):
                        raise Crash(f"after writing event {answer.event.id}, before the answer")
                return answers

            deps.store.put_events = puts  # type: ignore[method-assign]
        return deps

    def replace(self, role: str) -> None:
        """The container died: keep what its store recorded, start a new one."""
        old: LocalDependencies = getattr(self, role)
        self.applied += old.store.drain()[0]
        setattr(self, role, self.container(role))
        self.figures[f"{role} containers replaced"] += 1

    def tick(self, scheduled_time: str) -> None:
        """EventBridge Scheduler's tick of the nightly pipeline, through the tick handler."""
        event = {"pipeline": "nightly", "scheduled_time": scheduled_time}
        handle_schedule_tick.lambda_handler(event, LambdaContext(), deps=self.run_states)

    def nudge(self, pipeline: str) -> None:
        """An event (through the API path) of an asset the pipeline's schedule names."""
        uri = sorted(leaves(self.catalog["pipelines"][pipeline]["schedule"]["condition"])[0])[0]
        self.figures["nudges"] += 1
        event = AssetEvent(uri, f"nudge-{pipeline}-{self.figures['nudges']}", T0, {}, {"type": "api"})
        self.store.put_event(event, dedupe_key=f"api:{event.id}")

    # ---- the event sources -----------------------------------------------------------------------------

    def ingest_sqs(self) -> int:
        """One poll of the SQS event source mapping: deliver, then delete what the handler did not fail."""
        sqs = client("sqs", self.endpoints["sqs"])
        messages = sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=VISIBILITY_SECONDS,
            AttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0
        event = {"Records": [sqs_lambda_record(m, str(self.queue_arn)) for m in messages]}
        try:
            answer = handle_sqs_messages.lambda_handler(event, LambdaContext(), deps=self.ingest)
        except Crash:
            self.figures["ingest crashes"] += 1
            self.replace("ingest")
            return len(messages)
        except BatchProcessingError:
            self.figures["ingest batches failed"] += 1
            return len(messages)
        failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
        self.figures["ingest messages failed"] += len(failed)
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(done)],
            )
        return len(messages)

    def sqs_pending(self) -> int:
        """Messages still in the queue, visible or in flight."""
        attributes = client("sqs", self.endpoints["sqs"]).get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def evaluate(self) -> int:
        """One poll of the stream event source mapping: batches of 25, each retried until it passes."""
        assert self.tail is not None
        records = self.tail.poll()
        for batch in chunks(records, STREAM_BATCH_SIZE):
            self._evaluate_batch(list(batch))
        return len(records)

    def _evaluate_batch(self, batch: list[dict[str, Any]]) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                answer = handle_asset_events.lambda_handler(
                    {"Records": batch}, LambdaContext(), deps=self.evaluator
                )
            except Crash:
                self.figures["evaluator crashes"] += 1
                self.replace("evaluator")
                if self.states_before_retry:
                    self.finish_jobs()  # EventBridge is quicker than the stream's retry
                continue
            except BatchProcessingError:
                self.figures["stream batches failed"] += 1
                time.sleep(0.2)
                continue
            failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
            if not failed:
                return
            self.figures["stream records failed"] += len(failed)
            first = next(n for n, r in enumerate(batch) if sequence_number(r) in failed)
            batch = batch[first:]  # Lambda retries from the first failed record, the later ones included
            time.sleep(0.05)
        raise AssertionError(f"a stream batch still failed after 90 s of retries: {self.figures}")

    def finish_jobs(self) -> int:
        """Deliver the state changes of the job runs not finished yet (EventBridge retries a failed target)."""
        emr = client("emr-serverless", self.endpoints["emr-serverless"])
        jobs, token = [], None
        while True:
            page = emr.list_job_runs(
                applicationId=self.application_id, **({"nextToken": token} if token else {})
            )
            jobs += [j["id"] for j in page["jobRuns"]]
            token = page.get("nextToken")
            if not token:
                break
        new = sorted(j for j in jobs if j not in self.finished)
        for job_run_id in new:
            ordinal = len(self.finished)
            self.finished.add(job_run_id)
            for deliveries in self.job_states(ordinal):
                self._deliver_states(job_run_id, deliveries)
        return len(new)

    def _deliver_states(self, job_run_id: str, states: list[str]) -> None:
        """Deliver states in order; a group of several is delivered at once, from separate containers."""
        errors: list[str] = []

        def deliver(state: str, deps: LocalDependencies) -> LocalDependencies:
            event = job_state_event(self.application_id, job_run_id, state)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    handle_job_state.lambda_handler(event, LambdaContext(), deps=deps)
                    return deps
                except Crash:
                    self.figures["run-state crashes"] += 1
                    self.applied += deps.store.drain()[0]
                    deps = self.container("run_states")
                except Exception:
                    self.figures["state events retried"] += 1
                    time.sleep(0.2)
            errors.append(f"the {state} event of {job_run_id} kept failing")
            return deps

        if len(states) == 1:
            self.run_states = deliver(states[0], self.run_states)
        else:
            while len(self.racers) < len(states):
                self.racers.append(self.container("run_states"))

            def race(n: int, state: str) -> None:
                self.racers[n] = deliver(state, self.racers[n])

            threads = [threading.Thread(target=race, args=(n, state)) for n, state in enumerate(states)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            self.applied += [a for d in self.racers for a in d.store.drain()[0]]
        assert not errors, errors

    def with_customers(self, step: Callable[[], int], count: int, *, start: int = 0) -> Callable[[], int]:
        """``step``, with one customer event emitted (through the API path) before each of its first polls."""
        emitted = {"n": start}

        def interleaved() -> int:
            if emitted["n"] < start + count:
                emit_customers(self, 1, start=emitted["n"])
                emitted["n"] += 1
            return step()

        return interleaved

    def settle(
        self,
        *,
        ingest: Callable[[], int] | None = None,
        done: Callable[[], bool] = lambda: True,
        timeout: float = 120.0,
    ) -> None:
        """Run every source until nothing is left to deliver: ``done``, the queue empty, two rounds idle."""
        ingest = ingest or (self.ingest_sqs if self.queue_url else (lambda: 0))
        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 2:
            assert time.monotonic() < deadline, f"the flow did not settle: {self.figures}"
            did = self.guarded(ingest) + self.guarded(self.evaluate) + self.guarded(self.finish_jobs)
            pending = self.guarded(self.sqs_pending) if self.queue_url else 0
            quiet = quiet + 1 if did == 0 and pending == 0 and done() else 0
            if did == 0:
                time.sleep(0.25)
        self.applied += [a for d in (self.evaluator, self.run_states) for a in d.store.drain()[0]]

    def guarded(self, step: Callable[[], int]) -> int:
        """Run a step of the event source mappings themselves; an emulator that is down makes them wait."""
        try:
            return step()
        except (BotoCoreError, ClientError) as exc:
            self.figures[f"poller errors {type(exc).__name__}"] += 1
            time.sleep(0.3)
            return 1


class CrashAfterStart:
    """An EMR Serverless client whose invocation dies right after ``StartJobRun`` while ``budget`` lasts."""

    def __init__(self, real: Any, budget: dict[str, int]) -> None:
        self._real = real
        self._budget = budget

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def start_job_run(self, **kwargs: Any) -> Any:
        """Start the job, then die before the caller records it."""
        answer = self._real.start_job_run(**kwargs)
        if self._budget["crashes"] > 0:
            self._budget["crashes"] -= 1
            raise Crash("after StartJobRun, before the run recorded its job run id")
        return answer


# ---- the checks ---------------------------------------------------------------------------------------------


def assert_recovered(
    runtime: Runtime,
    source: Asset,
    message_ids: set[str],
    *,
    failed_runs: int = 0,
    history_complete: bool = True,
) -> str:
    """The contract after recovery; returns the figures for the summary line.

    ``history_complete``: every committed transition was seen by a recording store. Not so when the store's
    server went away mid-request: a transaction can commit while its answer is lost, and the SDK's retry then
    fails on the changed version; ``check_store`` still checks the outcome, only the replay is skipped.
    """
    store = runtime.store
    sources = store.list_events(source.uri, limit=1000, newest_first=False).items
    per_message = collections.Counter(e["extra"]["payload"]["message"] for e in sources)
    assert set(per_message) == message_ids, "a message has no event, or an event no message"
    assert max(per_message.values()) == 1, f"messages with two events: {per_message.most_common(3)}"

    sent = [
        SentEvent(
            e["id"],
            uri,
            parse_timestamp(e["timestamp"]),
            e["partition_key"],
            e["source"].get("type") == "run",
        )
        for uri in (source.uri, CUSTOMERS.uri, CLEAN.uri)
        for e in store.list_events(uri, limit=1000, newest_first=False).items
    ]
    check = check_store(store, runtime.catalog, sent, {}, runs_end=True)
    assert check.violations == []
    if history_complete:
        assert replay(runtime.catalog, runtime.applied) == []

    catalog = Catalog.from_document(runtime.catalog)
    states = collections.Counter(r.state for r in check.runs)
    assert states[RunState.FAILED] == failed_runs
    assert states[RunState.SUCCESS] == len(check.runs) - failed_runs, f"runs not ended: {states}"
    for run in check.runs:
        shown = views.show_run(store, run.run_id, catalog)["produced_asset_events"]
        produced = sorted(uri for uri, events in shown.items() for _ in events)
        declared = [CLEAN.uri] if run.pipeline == "etl" and run.state is RunState.SUCCESS else []
        assert produced == declared, f"{run.pipeline} run {run.run_id} ({run.state}) produced {produced}"
        assert run.job_run_id, f"run {run.run_id} was never submitted"
    assert all(not store.unsubmitted_runs(p) for p in runtime.catalog["pipelines"])

    runs = {p: o.runs for p, o in check.pipelines.items()}
    faults = {k: v for k, v in runtime.figures.items() if v}
    return (
        f"messages={len(message_ids)} events={check.events} runs={check.total_runs} {runs} "
        f"failed_runs={failed_runs} outlet_events={sum(1 for e in sent if e.from_run)} faults/recoveries={faults} "
        f"stray_jobs={len(runtime.finished) - check.total_runs} lost=0 duplicated=0"
    )


# ---- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def quiet_handlers() -> Iterator[None]:
    """The handlers' per-message info lines would bury the summary lines (restored afterwards)."""
    loggers = [
        m.logger for m in (handle_asset_events, handle_job_state, handle_kafka_records, handle_sqs_messages)
    ]
    levels = [logger.log_level for logger in loggers]
    for logger in loggers:
        logger.setLevel("WARNING")
    yield
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


@dataclass
class Emulators:
    dynamodb: str
    moto: str


@pytest.fixture
def emulators(dynamodb_local: DynamoDbLocal, moto_server: MotoServer) -> Emulators:
    return Emulators(dynamodb_local.endpoint, moto_server.endpoint)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def build_runtime(
    emulators: Emulators, tmp_path: Path, orders: Asset, *, queue: str | None = None, **faults: Any
) -> Runtime:
    """A fresh table, bucket, EMR application (and SQS queue) and a runtime over them."""
    store = DynamoDbStore(client("dynamodb", emulators.dynamodb), _name("faults"))
    store.create_table()
    s3 = client("s3", emulators.moto)
    bucket = _name("runs")
    s3.create_bucket(Bucket=bucket)
    emr = client("emr-serverless", emulators.moto)
    application_id = emr.create_application(
        name=_name("assetflow"), releaseLabel="emr-7.9.0", type="SPARK", clientToken=_name("app")
    )["applicationId"]
    catalog = Catalog.build(pipelines(orders)).to_document()
    catalog_path = tmp_path / f"{store.table}.json"
    catalog_path.write_text(json.dumps(catalog))
    settings = Settings(
        table_name=store.table,
        catalog_path=str(catalog_path),
        runs_bucket=bucket,
        emr_application_id=application_id,
        emr_job_role_arn=ROLE,
        region=LOCAL_REGION,
    )
    endpoints = {
        "dynamodb": emulators.dynamodb,
        **dict.fromkeys(("s3", "emr-serverless", "sqs"), emulators.moto),
    }
    queue_url = queue_arn = None
    if queue:
        sqs = client("sqs", emulators.moto)
        queue_url = sqs.create_queue(QueueName=queue)["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
    return Runtime(
        store=store,
        settings=settings,
        endpoints=endpoints,
        catalog=catalog,
        application_id=application_id,
        queue_url=queue_url,
        queue_arn=queue_arn,
        **faults,
    )


def sqs_orders() -> tuple[Asset, str]:
    queue = _name("orders")
    return Asset("s3://shop/orders", watchers=[AssetWatcher("orders", SqsQueue(queue))]), queue


def send_orders(runtime: Runtime, count: int) -> set[str]:
    """Messages on the orders queue; returns their payload ids."""
    sqs = client("sqs", runtime.endpoints["sqs"])
    ids = [f"order-{n:03d}" for n in range(count)]
    for part in chunks(ids, 10):
        sqs.send_message_batch(
            QueueUrl=runtime.queue_url,
            Entries=[{"Id": str(n), "MessageBody": json.dumps({"message": i})} for n, i in enumerate(part)],
        )
    return set(ids)


def emit_customers(runtime: Runtime, count: int, start: int = 0) -> None:
    """Customer events through the API path (idempotency key = dedupe key)."""
    for n in range(start, start + count):
        event = AssetEvent(
            CUSTOMERS.uri,
            f"cust-{n:03d}",
            T0 + timedelta(seconds=n),
            {},
            {"type": "api", "principal": "test"},
        )
        runtime.store.put_event(event, dedupe_key=f"api:customers:{n}")


# ---- the tests ---------------------------------------------------------------------------------------------


def test_an_ingest_crash_after_the_event_write_before_the_ack_makes_no_second_event(
    emulators: Emulators, tmp_path: Path
) -> None:
    # Given an ingest container that dies right after storing every fifth message, the first time only
    orders, queue = sqs_orders()
    crashed: list[str] = []
    written = {"n": 0}

    def die_after_the_write(event: AssetEvent, created: bool) -> bool:
        if created:
            written["n"] += 1
            if written["n"] % 5 == 0:
                crashed.append(event.id)
                return True
        return False

    runtime = build_runtime(
        emulators, tmp_path, orders, queue=queue, crash_after_put={"ingest": die_after_the_write}
    )
    sent = send_orders(runtime, MESSAGES)

    # When the queue redelivers what was never acknowledged, and everything settles
    runtime.settle(ingest=runtime.with_customers(runtime.ingest_sqs, CUSTOMER_EVENTS))

    # Then each message made exactly one event, and the flow downstream is whole
    assert crashed and runtime.figures["ingest crashes"] == len(crashed)
    print(f"\nfault ingest-crash: {assert_recovered(runtime, orders, sent)}")


@pytest.mark.parametrize(
    ("where", "states_first"),
    [("after-transaction", False), ("after-start-job-run", False), ("after-start-job-run", True)],
    ids=["after-transaction", "after-start-job-run", "after-start-job-run-state-first"],
)
def test_an_evaluator_crash_between_the_transaction_and_the_submission_loses_no_run(
    emulators: Emulators, tmp_path: Path, where: str, states_first: bool
) -> None:
    # Given evaluator containers that die after committing the first three run-creating transitions
    # (before StartJobRun), or right after the first three StartJobRun calls (before the run records its job
    # run id; then the job's state change may even arrive before the stream retries the batch: state-first)
    orders, queue = sqs_orders()
    budget = {"crashes": 3}

    def crash_after_transaction(transition: Transition) -> bool:
        if transition.runs and budget["crashes"] > 0:
            budget["crashes"] -= 1
            return True
        return False

    faults: dict[str, Any] = (
        {"crash_after": crash_after_transaction}
        if where == "after-transaction"
        else {"wrap": {"emr-serverless": lambda real: CrashAfterStart(real, budget)}}
    )
    runtime = build_runtime(
        emulators, tmp_path, orders, queue=queue, states_before_retry=states_first, **faults
    )
    sent = send_orders(runtime, MESSAGES)

    # When the stream retries the dead invocations' batches in fresh containers
    runtime.settle(ingest=runtime.with_customers(runtime.ingest_sqs, CUSTOMER_EVENTS))

    # Then every run was submitted and ran once, whatever the crash left behind (on moto, which ignores
    # StartJobRun's clientToken, a resubmission from a fresh container starts a stray second job: its state
    # changes are ignored; EMR itself would answer with the first job)
    # (a batch's runs are submitted in parallel: one dying container may take several of the three
    # StartJobRun calls with it)
    crashes = runtime.figures["evaluator crashes"]
    assert budget["crashes"] == 0 and (crashes == 3 if where == "after-transaction" else 1 <= crashes <= 3)
    summary = assert_recovered(runtime, orders, sent)
    name = where + ("-state-first" if states_first else "")
    print(f"\nfault evaluator-crash-{name}: {summary}")


def test_a_throttled_then_refused_start_job_run_is_retried_until_every_run_is_submitted(
    emulators: Emulators, tmp_path: Path
) -> None:
    # Given StartJobRun refused once (a validation error), then throttled five times, then refused three times
    orders, queue = sqs_orders()
    plan = FaultPlan("ValidationException", *["ThrottlingException"] * 5, *["ValidationException"] * 3)
    runtime = build_runtime(
        emulators,
        tmp_path,
        orders,
        queue=queue,
        wrap={"emr-serverless": lambda real: FailingCalls(real, "start_job_run", plan)},
    )
    sent = send_orders(runtime, MESSAGES)

    # When a cron tick's run is refused, and a burst flows: throttling fails the stream record (retried), a
    # refusal keeps the run queued with its reason
    runtime.tick("2026-11-21T06:00:00Z")
    runtime.settle(ingest=runtime.with_customers(runtime.ingest_sqs, CUSTOMER_EVENTS))

    # ...then a refused run waits for its pipeline's next evaluation: nothing but a tick evaluates nightly
    (stranded,) = runtime.store.unsubmitted_runs("nightly")
    item = client("dynamodb", runtime.endpoints["dynamodb"]).get_item(
        TableName=runtime.store.table, Key={"pk": {"S": f"RUN#{stranded.run_id}"}, "sk": {"S": "#RUN"}}
    )["Item"]
    assert (
        "ValidationException" in item["submission_error"]["S"]
    )  # kept for operators, and shown in the views
    assert "ValidationException" in (
        runtime.store.get_run(stranded.run_id).to_json()["submission_error"] or ""
    )
    waiting = {p: len(runtime.store.unsubmitted_runs(p)) for p in runtime.catalog["pipelines"]}
    runtime.tick("2026-11-22T06:00:00Z")  # RunStates.handle_tick: the next tick's run, and the sweep
    for pipeline, count in waiting.items():
        if count and pipeline != "nightly":
            runtime.nudge(pipeline)  # an event of the pipeline (its next evaluation sweeps)
    runtime.settle()

    # Then every run was submitted in the end, once
    assert plan.injected == {"ThrottlingException": 5, "ValidationException": 4}
    runtime.figures.update(plan.injected)
    runtime.figures["runs left waiting for a next evaluation"] = sum(waiting.values())
    print(f"\nfault start-job-run: {assert_recovered(runtime, orders, sent)}")


def test_job_state_events_delivered_twice_late_or_at_once_change_each_run_once(
    emulators: Emulators, tmp_path: Path
) -> None:
    # Given EventBridge delivering each job's state changes with duplicates, late, out of order, or two at once
    plans = [
        [["RUNNING"], ["SUCCESS"], ["SUCCESS"]],  # a duplicate
        [["SUCCESS"], ["RUNNING"]],  # a late RUNNING
        [["RUNNING"], ["SUCCESS"], ["FAILED"]],  # a contradicting late final state
        [["SUCCESS", "SUCCESS"]],  # the same event to two containers at once
        [["FAILED"], ["SUCCESS"]],  # the first final state wins: no outlets
        [["SCHEDULED"], ["RUNNING"], ["PENDING"], ["SUCCESS", "SUCCESS"], ["RUNNING"]],
    ]
    # ...and a run-state container that dies before writing each succeeded run's first outlet event
    orders, queue = sqs_orders()
    crashed: set[str] = set()

    def die_before_the_outlet(event: AssetEvent) -> bool:
        run_id = str(event.source.get("run_id", ""))
        if run_id and run_id not in crashed:
            crashed.add(run_id)
            return True
        return False

    runtime = build_runtime(
        emulators,
        tmp_path,
        orders,
        queue=queue,
        job_states=lambda n: plans[n % len(plans)],
        crash_before_put={"run_states": die_before_the_outlet},
    )
    sent = send_orders(runtime, MESSAGES)

    # When everything settles
    runtime.settle(ingest=runtime.with_customers(runtime.ingest_sqs, CUSTOMER_EVENTS))

    # Then each run moved once, the failed ones emitted nothing, each succeeded one its outlets once
    failed = sum(1 for n in range(len(runtime.finished)) if plans[n % len(plans)][0] == ["FAILED"])
    runtime.figures["job state deliveries"] = sum(
        len(group) for n in range(len(runtime.finished)) for group in plans[n % len(plans)]
    )
    print(f"\nfault job-states: {assert_recovered(runtime, orders, sent, failed_runs=failed)}")


def test_dynamodb_local_restarted_in_the_middle_of_a_burst(moto_server: MotoServer, tmp_path: Path) -> None:
    # Given DynamoDB Local with its data on disk, and a burst of messages flowing through in the background
    with DynamoDbLocal(data_dir=tmp_path / "dynamodb", log_dir=tmp_path) as dynamodb:
        orders, queue = sqs_orders()
        mid_batch = threading.Event()

        def signal_mid_batch(transition: Transition) -> bool:
            if transition.runs:
                mid_batch.set()  # the evaluator just committed a run, in the middle of its batch
            return False

        runtime = build_runtime(
            Emulators(dynamodb.endpoint, moto_server.endpoint),
            tmp_path,
            orders,
            queue=queue,
            crash_after=signal_mid_batch,
        )
        sent = send_orders(runtime, MESSAGES + 4)
        ingest = runtime.ingest_sqs
        failures: list[BaseException] = []

        def burst() -> None:
            try:
                runtime.settle(ingest=runtime.with_customers(ingest, CUSTOMER_EVENTS), timeout=240)
            except BaseException as exc:
                failures.append(exc)

        flow = threading.Thread(target=burst)
        flow.start()

        # When DynamoDB Local restarts while the evaluator is in the middle of a batch (restarted from this
        # thread: an emulator dies with the thread that started it)
        assert mid_batch.wait(timeout=60)
        began = time.monotonic()
        dynamodb.restart()
        runtime.figures["dynamodb down seconds"] = round(time.monotonic() - began)
        flow.join(timeout=300)
        assert not flow.is_alive() and not failures, failures

        # Then the outage was felt, and nothing was lost or doubled
        felt = {k: v for k, v in runtime.figures.items() if "failed" in k or "errors" in k or "retried" in k}
        assert felt, runtime.figures
        summary = assert_recovered(runtime, orders, sent, history_complete=False)
        print(f"\nfault dynamodb-restart: {summary}")


def test_the_broker_restarted_in_the_middle_of_a_burst(emulators: Emulators, tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    storage = f"s3://{_name('tansu')}/"
    with TansuBroker(log_dir=tmp_path, storage_url=storage, s3_endpoint=emulators.moto) as broker:
        # Given a Kafka-watched asset, a topic with two partitions and the first half of a burst on it
        topic = _name("orders")
        broker.create_topics([topic], partitions=2)
        orders = Asset(
            "s3://shop/orders",
            watchers=[
                AssetWatcher("orders", KafkaTopic(topic, cluster=SelfManagedKafka((broker.endpoint,))))
            ],
        )
        written = {"n": 0}

        def die_after_the_sixth_write(event: AssetEvent, created: bool) -> bool:
            written["n"] += created
            return created and written["n"] == 6

        runtime = build_runtime(
            emulators, tmp_path, orders, crash_after_put={"ingest": die_after_the_sixth_write}
        )
        ids = [f"order-{n:03d}" for n in range(MESSAGES * 2)]

        def produce(part: list[str]) -> None:
            producer = KafkaProducer(bootstrap_servers=broker.endpoint, acks="all", retries=10)
            for i in part:
                producer.send(topic, key=i.encode(), value=json.dumps({"message": i}).encode())
            producer.flush(timeout=30)
            producer.close()

        produce(ids[:MESSAGES])
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=broker.endpoint,
            group_id=_name("assetflow"),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **LOCAL_KAFKA_CONSUMER_TIMEOUTS,
        )
        stored: set[str] = set()

        def ingest_kafka() -> int:
            """One poll of the Kafka event source mapping: commit after the handler succeeded, else rewind."""
            batch = consumer.poll(timeout_ms=300, max_records=5)
            records = [r for part in batch.values() for r in part]
            if not records:
                return 0
            event = {
                "eventSource": "SelfManagedKafka",
                "bootstrapServers": broker.endpoint,
                "records": {
                    f"{tp.topic}-{tp.partition}": [
                        {
                            "topic": r.topic,
                            "partition": r.partition,
                            "offset": r.offset,
                            "timestamp": r.timestamp,
                            "timestampType": "CREATE_TIME",
                            "key": base64.b64encode(r.key).decode() if r.key else None,
                            "value": base64.b64encode(r.value).decode(),
                            "headers": [],
                        }
                        for r in part
                    ]
                    for tp, part in batch.items()
                },
            }
            try:
                handle_kafka_records.lambda_handler(event, LambdaContext(), deps=runtime.ingest)
                consumer.commit()
                stored.update(json.loads(r.value)["message"] for r in records)
                return len(records)
            except Crash:
                runtime.figures["ingest crashes"] += 1
                runtime.replace("ingest")
            except Exception:
                runtime.figures["kafka batches failed"] += 1
            for tp, part in batch.items():  # the mapping starts again from the last committed offset
                consumer.seek(tp, min(r.offset for r in part))
            return len(records)

        first_half = runtime.with_customers(ingest_kafka, CUSTOMER_EVENTS // 2)
        second_half = runtime.with_customers(
            ingest_kafka, CUSTOMER_EVENTS - CUSTOMER_EVENTS // 2, start=CUSTOMER_EVENTS // 2
        )
        try:
            # When the ingest function dies after storing part of a batch (nothing committed), the broker restarts
            # right then, and the rest of the burst is produced after the restart
            deadline = time.monotonic() + 60
            while not runtime.figures["ingest crashes"]:
                assert time.monotonic() < deadline, "the first half was not consumed"
                first_half()
            broker.restart()
            runtime.figures["broker restarts"] += 1
            produce(ids[MESSAGES:])
            runtime.settle(ingest=second_half, done=lambda: len(stored) == len(ids), timeout=180)
            committed = sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in (0, 1))
        finally:
            consumer.close()

        # Then every record was stored once (offsets committed past all of them), and the flow is whole
        assert committed == len(ids)
        print(f"\nfault broker-restart: {assert_recovered(runtime, orders, set(ids))}")


def test_a_lost_race_while_recovering_a_job_run_id_does_not_lose_the_jobs_final_state(
    emulators: Emulators, tmp_path: Path
) -> None:
    # Given an evaluator that dies right after StartJobRun (its run has no job run id yet), EMR answering a repeated
    # clientToken with the first job (as AWS does; moto would start a second one), the job's state changes
    # arriving before the stream retries the batch, and the run-state function losing one race (TransactionConflict)
    # while it records the job run id it recovered from the job's tags
    orders, queue = sqs_orders()
    answers: dict[str, Any] = {}
    budget = {"crashes": 1, "conflicts": 1}

    def lose_the_race(request: Any) -> bool:
        # The write that records the recovered job run id on the run (a conditional update of the run item)
        if budget["conflicts"] > 0 and "SET job_run_id = :j" in json.dumps(request):
            budget["conflicts"] -= 1
            return True
        return False

    runtime = build_runtime(
        emulators,
        tmp_path,
        orders,
        queue=queue,
        wrap={"emr-serverless": lambda real: CrashAfterStart(IdempotentEmr(real, answers), budget)},
        states_before_retry=True,
        conflicts={"run_states": lose_the_race},
        job_states=lambda _: [["SUCCESS"]],  # the final state (an earlier RUNNING would absorb the lost race)
    )
    sent = send_orders(runtime, 3)

    # When everything settles
    runtime.settle(ingest=runtime.with_customers(runtime.ingest_sqs, 1))

    # Then the run whose job succeeded has succeeded too (today it stays queued: its SUCCESS was ignored)
    assert budget == {"crashes": 0, "conflicts": 0}
    job_run_id = next(iter(answers.values()))["jobRunId"]
    (run_id,) = [
        r["run_id"] for r in runtime.store.list_runs(limit=100).items if r["job_run_id"] == job_run_id
    ]
    run = runtime.store.get_run(run_id)
    assert run.state is RunState.SUCCESS, (
        f"run {run.run_id} is {run.state} though its job {job_run_id} succeeded"
    )
    print(f"\nfault lost-race-recovering-job-run-id: {assert_recovered(runtime, orders, sent)}")
