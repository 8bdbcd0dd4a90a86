"""Burst on the local runtime: 10,000 messages sent as fast as possible to one watched queue, until every event is
stored and every expected run exists (issue 6, item 2).

Two scenarios (``benchmarks/pipelines/burst``), on a fresh local runtime per round with the ``emr-api``
launcher (Spark per run would dominate), one after the other:

- **single**: one pipeline on the queue's asset with ``batch=False``, so exactly one run per event
  (DESIGN §3.5): N messages make N events and N runs.
- **and**: an ``a & b`` pipeline; the burst goes to a's queue. One message to b's queue goes first (its event
  waits in the queue), so the burst's first evaluated event makes run 1; the rest of the burst queues up on
  a. Once every event of the burst is evaluated, a second message to b makes run 2, which consumes all the
  rest (DESIGN §3.2, §3.4). Exactly two runs, whose events of a together are the whole burst, each once,
  whatever the interleaving.

Sender threads put the burst with SendMessageBatch (10 a call). Measured from the first send: the send itself,
every event stored (and the sustained events per second), every event evaluated, every expected run created,
every run succeeded. Asserted afterwards, on the store and the queues: each message one event (the right
payloads and message ids; no duplicate, none missing), no dedupe record (a standard queue's message is
keyed by itself: its event's item is its dedupe record), the exact runs, every event
consumed by exactly one run, nothing left queued, quarantined or in the SQS queues and their DLQs.

Every AWS request the runtime's functions, pollers and launcher make during the burst is counted with
``benchmarks/_counting.py`` (Lambda invocations: the pollers' handler calls, timed) and priced with
``benchmarks/cost.py``: dollars per million events.

Before the bursts (unless ``--no-probe``), the emulators' own limits: moto's SQS requests by queue depth, and
DynamoDB Local's write ceiling with the machine to itself (items a second through BatchWriteItem into
assetflow's table and into a bare one). With the items each scenario writes an event (counted), the ceiling
bounds the events a second a burst can store and evaluate on this machine, whatever the code around it does;
moto's SQS times, summed over the burst's sends, receives and deletes, bound the messages a second it passes.

Run: ``.venv/bin/python -m benchmarks.burst [--quick] [--messages N] [--threads N] [--scenarios single and]``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from assetflow.adapters.emr import RUN_MOVING_STATES
from assetflow.core.events import format_timestamp, parse_timestamp
from benchmarks._common import (
    ROOT,
    check,
    emulators,
    parser,
    print_table,
    process_cpu_seconds,
    require_root_cwd,
    runs_of,
    summarize,
    write_result,
)
from benchmarks._counting import RequestCounter
from benchmarks.cost import MEMORY_MB, cost_per_million
from benchmarks.latency import function_logs

NAME = "burst"
#: Messages per burst. The issue asks for 10,000: ``--messages 10000``. The local runtime evaluates about 4-5
#: events a second (one evaluator invocation at a time, ~25 DynamoDB Local requests per event), so 10,000 take
#: ~40 minutes for ``single``, and hours for ``and``, whose waiting queue is read whole for every event (see
#: ``benchmarks/queue_depth.py``): the default full run repeats 1,000.
MESSAGES = {"full": 1_000, "quick": 40}
#: Queue depths (messages already queued) at which the emulator's SQS requests are timed.
PROBE_DEPTHS = {"full": (0, 1_000, 2_000), "quick": (0, 100)}
#: Requests of each kind timed per depth: moto's CPU time is read in 10 ms clock ticks, which 50 requests of
#: about 5 ms each read to within 4 %; their messages stay queued until the receives, 500 at most above the depth.
PROBE_CALLS = 50
#: Items DynamoDB Local's write ceiling is timed with (after as many to warm it), and from how many threads.
DYNAMODB_PROBE_ITEMS = {"full": 6_000, "quick": 500}
DYNAMODB_PROBE_THREADS = 4
#: Items in one BatchWriteItem (DynamoDB's limit).
DYNAMODB_BATCH = 25
SENDER_THREADS = 8
SQS_BATCH = 10
#: The machine's cores (what every process of a burst shares).
CORES = os.cpu_count() or 1
#: How often progress is read (uncounted reads of the table).
PROGRESS_SECONDS = 1.0
#: Runs' keys are read again from this long before the newest one known, and all of them every so many reads.
RUN_KEYS_MARGIN_SECONDS = 5.0
RUN_KEYS_FULL_EVERY = 15
#: Progress samples kept in the JSON: one every this many seconds.
TIMELINE_SECONDS = 10.0
#: A burst may take this long plus this much per message before it counts as stuck.
TIMEOUT_BASE_SECONDS = 120.0
TIMEOUT_PER_MESSAGE_SECONDS = 1.0

PIPELINES = ROOT / "benchmarks" / "pipelines" / "burst"

SQS_FUNCTION = "assetflow.functions.handle_sqs_messages"
EVALUATOR_FUNCTION = "assetflow.functions.handle_asset_events"
RUN_STATE_FUNCTION = "assetflow.functions.handle_job_state"


@dataclass(frozen=True)
class Scenario:
    """A pipeline of ``benchmarks/pipelines/burst``, the watcher its burst goes to, and b's (``a & b`` only)."""

    name: str
    description: str
    pipeline: str
    watcher: str
    asset: str
    marker_watcher: str | None = None
    marker_asset: str | None = None

    @property
    def marker(self) -> bool:
        """Whether b's queue brackets the burst."""
        return self.marker_watcher is not None

    @property
    def watchers(self) -> tuple[str, ...]:
        """The watchers whose queues this scenario uses."""
        return (self.watcher,) + ((self.marker_watcher,) if self.marker_watcher else ())

    def expected_runs(self, messages: int) -> int:
        """Runs the semantics dictate: one per event with ``batch=False``; two for the bracketed ``a & b``."""
        return 2 if self.marker else messages

    def expected_events(self, messages: int) -> int:
        """Events stored: one per message (b's two included)."""
        return messages + (2 if self.marker else 0)


SCENARIOS: Mapping[str, Scenario] = {
    "single": Scenario(
        "single",
        "one queue, a single-asset pipeline with batch=False: one run per event",
        pipeline="burst_single",
        watcher="bench-burst-single",
        asset="x-bench://burst/single",
    ),
    "and": Scenario(
        "and",
        "a & b: the burst to a's queue, one message to b's before and one after: exactly two runs",
        pipeline="burst_and",
        watcher="bench-burst-a",
        asset="x-bench://burst/a",
        marker_watcher="bench-burst-b",
        marker_asset="x-bench://burst/b",
    ),
}


# ---- a runtime whose requests are counted -------------------------------------------------------------------

#: Services whose requests are billed per request (DynamoDB Streams reads by Lambda are free: not counted).
COUNTED_SERVICES = frozenset({"sqs", "s3", "events", "emr-serverless", "dynamodb"})


def counted_runtime(options: Any, counter: RequestCounter) -> Any:
    """A ``LocalRuntime`` whose functions' and pollers' clients report to ``counter``.

    The functions' clients come from their ``Dependencies`` (one per function, per watcher for ingest), the
    pollers' and the launcher's from the runtime's ``client``; both are wrapped as they are made.
    """
    from assetflow_dev.runtime import LocalRuntime

    class CountedRuntime(LocalRuntime):
        """The local runtime with every client it builds for the workload attached to the counter."""

        def client(self, service: str) -> Any:
            made = super().client(service)
            return counter.attach(made) if service in COUNTED_SERVICES else made

        def _dependencies(self, **kwargs: Any) -> Any:
            deps = super()._dependencies(**kwargs)
            build = deps.client
            deps.client = lambda service: counter.attach(build(service))
            return deps

    return CountedRuntime(options)


def _matching_stream_records(event: Mapping[str, Any]) -> int:
    # The stack's mapping filters the stream (assetflow/cdk/evaluator.py): only INSERTs of asset events invoke the
    # evaluator on AWS. The local poller hands it every record; the others are not billed invocations.
    return sum(
        1
        for r in event.get("Records") or []
        if r.get("eventName") == "INSERT"
        and str(r.get("dynamodb", {}).get("Keys", {}).get("sk", {}).get("S", "")).startswith("EVENT#")
    )


def _moving_state(event: Mapping[str, Any]) -> int:
    """1 for a job state change the stack's rule sends to the run-state function, else 0."""
    return int((event.get("detail") or {}).get("state") in RUN_MOVING_STATES)


def record_invocations(started: Any, counter: RequestCounter) -> None:
    """Wrap the pollers' handlers and the launcher's state reporter: each call is a timed Lambda invocation.

    Invocations run as the runtime runs them: several at once where Lambda runs several execution environments
    (an SQS mapping's pollers, a stream's shards). The time counted is each invocation's wall time, which on
    two shared cores includes waiting for the CPU: an upper estimate of the billed duration.
    """
    from assetflow_dev.pollers import SqsPoller, StreamPoller

    def timed(
        handler: Callable[..., Any], function: str, records: Callable[[Mapping[str, Any]], int]
    ) -> Callable[..., Any]:
        def invoke(event: dict[str, Any], context: Any = None) -> Any:
            began = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                count = records(event)
                if count:
                    seconds = time.perf_counter() - began
                    memory = MEMORY_MB[function]
                    counter.record_invocation(function, memory_mb=memory, seconds=seconds, records=count)

        return invoke

    for poller in started.pollers:
        if isinstance(poller, StreamPoller):
            poller.handler = timed(poller.handler, EVALUATOR_FUNCTION, _matching_stream_records)
        elif isinstance(poller, SqsPoller):
            poller.handler = timed(poller.handler, SQS_FUNCTION, lambda e: len(e.get("Records") or []))
    # The launcher reports every state; the stack's rule invokes the run-state function for a run's end only
    # (the runtime's report drops the rest, as the rule does).
    started.launcher.report = timed(started.launcher.report, RUN_STATE_FUNCTION, _moving_state)


# ---- reading progress (uncounted) -----------------------------------------------------------------------------


class Monitor:
    """Counts events and runs with its own (uncounted) clients, reading as little as it can each second."""

    def __init__(self, started: Any) -> None:
        from assetflow.adapters.dynamodb import DynamoDbStore
        from assetflow_dev import client

        self.table = started.resources.table
        self.ddb = client("dynamodb", started.endpoints()["dynamodb"])
        self.sqs = client("sqs", started.endpoints()["sqs"])
        #: A producer for b's second message, counted (it is part of the workload).
        self.sqs_producer = client("sqs", started.endpoints()["sqs"])
        self.store = DynamoDbStore(self.ddb, self.table)
        #: Runs (their keys) found in a final state, per (pipeline, state): not read again.
        self._in_state: dict[tuple[str, str], set[str]] = {}
        #: Each pipeline's runs' keys by their ``gsi1`` sort key (creation time, run id), and how often read.
        self._run_keys: dict[str, dict[str, dict[str, Any]]] = {}
        self._run_key_reads: dict[str, int] = {}

    def events(self, uri: str) -> int:
        """How many events the asset has: its summary's count, kept in the transactions that write them.

        One item read a second: counting the events themselves (a COUNT query reads every item) would take
        DynamoDB Local's time from the burst it measures. The check afterwards reads every event.
        """
        item = self.ddb.get_item(
            TableName=self.table,
            Key={"pk": {"S": f"ASSET#{uri}"}, "sk": {"S": "#META"}},
            ConsistentRead=True,
            ProjectionExpression="event_count",
        ).get("Item", {})
        return int(item.get("event_count", {}).get("N", "0"))

    def runs(self, pipeline: str, state: str | None = None) -> int:
        """How many runs the pipeline has (in ``state``, when given: the run items read by key, in batches).

        The runs' keys are read from the pipeline's ``gsi1`` partition, which sorts them by creation time, from
        ``RUN_KEYS_MARGIN_SECONDS`` before the newest one known (a run's transaction commits a moment after the
        time it was created with), and all of them every ``RUN_KEYS_FULL_EVERY`` reads: reading every key every
        second took DynamoDB Local about a quarter of its time in a 3,000-run burst, from the burst it measures.
        The index projects keys only (a run's state changes are not written to it), so a state is read from
        the items themselves; ``state`` is a final one (a run found in it stays there), so each run is read
        until it is found in it, not every second.
        """
        known = self._run_keys.setdefault(pipeline, {})
        reads = self._run_key_reads[pipeline] = self._run_key_reads.get(pipeline, 0) + 1
        condition, values = "gsi1pk = :p", {":p": {"S": f"RUNS#{pipeline}"}}
        if known and reads % RUN_KEYS_FULL_EVERY:
            newest = parse_timestamp(max(known).split("#", 1)[0])
            condition += " AND gsi1sk >= :since"
            values[":since"] = {"S": format_timestamp(newest - timedelta(seconds=RUN_KEYS_MARGIN_SECONDS))}
        start = None
        while True:
            page = self.ddb.query(
                TableName=self.table,
                IndexName="gsi1",
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            known.update((i["gsi1sk"]["S"], {"pk": i["pk"], "sk": i["sk"]}) for i in page["Items"])
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        if not state:
            return len(known)
        done = self._in_state.setdefault((pipeline, state), set())
        keys = [k for k in known.values() if k["pk"]["S"] not in done]
        for n in range(0, len(keys), 100):
            request: dict[str, Any] = {
                self.table: {
                    "Keys": keys[n : n + 100],
                    "ProjectionExpression": "pk, #s",
                    "ExpressionAttributeNames": {"#s": "state"},
                }
            }
            while request:
                answer = self.ddb.batch_get_item(RequestItems=request)
                done.update(
                    i["pk"]["S"] for i in answer["Responses"].get(self.table, []) if i["state"]["S"] == state
                )
                request = answer.get("UnprocessedKeys") or {}
        return len(done)

    def pending(self, pipeline: str) -> int:
        """Queued entries of the pipeline's (unpartitioned) queue, from its head item."""
        head = self.ddb.get_item(
            TableName=self.table,
            Key={"pk": {"S": f"PIPELINE#{pipeline}"}, "sk": {"S": "QUEUE#"}},
            ConsistentRead=True,
        ).get("Item", {})
        return int(head.get("pending", {}).get("N", "0"))

    def run_ids(self, pipeline: str) -> list[str]:
        """Every run id of the pipeline, oldest first."""
        found: list[str] = []
        token = None
        while True:
            page = self.store.list_runs(pipeline, limit=1000, token=token)
            found += [r["run_id"] for r in page.items]
            token = page.next
            if not token:
                return list(reversed(found))

    def asset_events(self, uri: str) -> list[dict[str, Any]]:
        """Every event of the asset, oldest first."""
        found: list[dict[str, Any]] = []
        token = None
        while True:
            page = self.store.list_events(uri, limit=1000, token=token, newest_first=False)
            found += page.items
            token = page.next
            if not token:
                return found

    def messages_left(self, url: str) -> int:
        """Messages still in a queue, visible or in flight."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())


@dataclass
class Clock:
    """Seconds since the burst's first send, and the progress timeline."""

    started: float
    timeline: list[dict[str, float]]
    _next_sample: float = 0.0

    def now(self) -> float:
        """Seconds since the first send."""
        return time.perf_counter() - self.started

    def note(self, **progress: float) -> None:
        """Keep one progress sample every ``TIMELINE_SECONDS`` (and print it)."""
        now = self.now()
        if now >= self._next_sample:
            self._next_sample = now + TIMELINE_SECONDS
            self.timeline.append({"seconds": round(now, 1), **progress})
            print(
                "    " + ", ".join(f"{k} {v:g}" for k, v in {"t": round(now), **progress}.items()), flush=True
            )


def wait_until(condition: Callable[[], bool], *, deadline: float, what: str) -> None:
    """Poll ``condition`` every ``PROGRESS_SECONDS`` until it holds.

    Raises:
        BenchmarkCheckError: the deadline (a ``time.perf_counter()`` value) passed first.
    """
    while not condition():
        check(time.perf_counter() < deadline, f"timed out waiting for {what}")
        time.sleep(PROGRESS_SECONDS)


# ---- sending -----------------------------------------------------------------------------------------------


def send_burst(
    endpoint: str, url: str, messages: int, *, threads: int, token: str, counter: RequestCounter
) -> dict[int, str]:
    """Send ``messages`` with SendMessageBatch from ``threads`` threads; return each message's id by sequence.

    Raises:
        BenchmarkCheckError: SQS kept refusing some entries.
    """
    from assetflow_dev import client

    chunks = [list(range(i, min(i + SQS_BATCH, messages))) for i in range(0, messages, SQS_BATCH)]
    ids: dict[int, str] = {}
    lock = threading.Lock()

    def work(share: Sequence[list[int]]) -> None:
        sqs = counter.attach(client("sqs", endpoint))
        for chunk in share:
            todo = {str(seq): json.dumps({"burst": token, "seq": seq}) for seq in chunk}
            for _attempt in range(5):
                answer = sqs.send_message_batch(
                    QueueUrl=url, Entries=[{"Id": k, "MessageBody": v} for k, v in todo.items()]
                )
                with lock:
                    for done in answer.get("Successful", []):
                        ids[int(done["Id"])] = done["MessageId"]
                        todo.pop(done["Id"])
                if not todo:
                    break
            check(not todo, f"SQS refused messages {sorted(todo)}")

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="burst-sender") as pool:
        for future in [pool.submit(work, chunks[t::threads]) for t in range(threads)]:
            future.result()
    return ids


def send_one(sqs: Any, url: str, body: Mapping[str, Any]) -> str:
    """Send one message; its id."""
    return str(sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))["MessageId"])


# ---- the emulator's own limit ----------------------------------------------------------------------------------


def probe_sqs(depths: Sequence[int]) -> dict[str, Any]:
    """Time SendMessageBatch, ReceiveMessage and DeleteMessageBatch (10 messages) on a fresh moto queue at each depth.

    moto (5.2.5) as shipped computes the queue's attributes, counting its messages, for every message it sends
    or receives, so each request costs time proportional to the backlog; the local runtime's moto server
    (``assetflow_dev.moto_server``) patches that out. This checks the emulator's share of a burst stays small,
    and projects what the issue's 10,000 take through it. Beside each request's round trip (the median), moto's
    own CPU time a request (the mean): its server answers through one interpreter, a request at a time.
    """
    import statistics

    from assetflow_dev import client

    found: dict[str, Any] = {}
    with emulators(dynamodb=False) as started:
        moto = started["moto"]
        sqs = client("sqs", moto.endpoint)
        dlq = sqs.create_queue(QueueName="probe-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        # As the runtime creates a watched queue: a visibility timeout and a redrive policy.
        url = sqs.create_queue(
            QueueName="probe",
            Attributes={
                "VisibilityTimeout": "30",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}),
            },
        )["QueueUrl"]
        entries = [{"Id": str(i), "MessageBody": json.dumps({"burst": "probe", "seq": i})} for i in range(10)]
        depth = 0
        for target in sorted(depths):
            while depth < target:
                sqs.send_message_batch(QueueUrl=url, Entries=entries)
                depth += SQS_BATCH
            timings: dict[str, list[float]] = {"send_batch_ms": [], "receive_ms": [], "delete_batch_ms": []}
            cpu, mine = process_cpu_seconds(moto.pid), time.process_time()
            for _ in range(PROBE_CALLS):
                began = time.perf_counter()
                sqs.send_message_batch(QueueUrl=url, Entries=entries)
                timings["send_batch_ms"].append((time.perf_counter() - began) * 1000)
            sent, sent_mine = process_cpu_seconds(moto.pid), time.process_time()
            sent_cpu, cpu = sent - cpu, sent
            sent_client_cpu, mine = sent_mine - mine, sent_mine
            for _ in range(PROBE_CALLS):
                began = time.perf_counter()
                received = sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=SQS_BATCH, MessageSystemAttributeNames=["All"]
                ).get("Messages", [])
                timings["receive_ms"].append((time.perf_counter() - began) * 1000)
                began = time.perf_counter()
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)
                    ],
                )
                timings["delete_batch_ms"].append((time.perf_counter() - began) * 1000)
            found[str(target)] = {name: statistics.median(values) for name, values in timings.items()}
            found[str(target)] |= {
                "send_batch_cpu_ms": sent_cpu * 1000 / PROBE_CALLS,
                # A receive and the delete of what it received.
                "drain_cpu_ms": (process_cpu_seconds(moto.pid) - cpu) * 1000 / PROBE_CALLS,
                # This process's CPU for the same requests: the SDK's side (botocore) of each.
                "send_batch_client_cpu_ms": sent_client_cpu * 1000 / PROBE_CALLS,
                "drain_client_cpu_ms": (time.process_time() - mine) * 1000 / PROBE_CALLS,
            }
    return found


def probe_dynamodb(items: int, *, threads: int = DYNAMODB_PROBE_THREADS) -> dict[str, dict[str, float]]:
    """DynamoDB Local's write ceiling here: items a second through BatchWriteItem (25 a request) from ``threads``.

    Two tables on one fresh DynamoDB Local: assetflow's (``table_definition()``: a stream and three key-only
    indexes) and a bare one (keys only). Each takes ``items`` event-sized items once to warm the JVM, then
    ``items`` more, timed, with DynamoDB Local's CPU per item. No other process shares the machine's cores
    meanwhile, so a burst, which also runs moto, the runtime and the sender, stores less than this.
    """
    from assetflow.adapters.dynamodb.table import table_definition
    from assetflow_dev import client

    found: dict[str, dict[str, float]] = {}
    with emulators(moto=False) as started:
        local = started["dynamodb"]
        ddb = client("dynamodb", local.endpoint)
        full = table_definition()
        # The same table without its indexes and stream: its keys only.
        keys = {k["AttributeName"] for k in full["KeySchema"]}
        bare = {
            "AttributeDefinitions": [a for a in full["AttributeDefinitions"] if a["AttributeName"] in keys],
            "KeySchema": full["KeySchema"],
            "BillingMode": full["BillingMode"],
        }
        payload = json.dumps({"burst": uuid.uuid4().hex, "seq": 0, "detail": "x" * 160})
        for name, definition in (("assetflow_table", full), ("bare_table", bare)):
            table = f"probe-{name}"
            ddb.create_table(TableName=table, **definition)

            def write(first: int, table: str = table) -> None:
                request = [
                    {
                        "PutRequest": {
                            "Item": {
                                "pk": {"S": "ASSET#x-bench://probe"},
                                "sk": {"S": f"EVENT#{n:012d}"},
                                "payload": {"S": payload},
                            }
                        }
                    }
                    for n in range(first, min(first + DYNAMODB_BATCH, items))
                ]
                pending = {table: request}
                while pending:
                    pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}

            for timed in (False, True):
                cpu, mine, began = process_cpu_seconds(local.pid), time.process_time(), time.perf_counter()
                with ThreadPoolExecutor(max_workers=threads) as pool:
                    list(pool.map(write, range(0, items, DYNAMODB_BATCH)))
                seconds = time.perf_counter() - began
                if timed:
                    found[name] = {
                        "items_per_second": items / seconds,
                        "cpu_ms_per_item": (process_cpu_seconds(local.pid) - cpu) * 1000 / items,
                        # This process's CPU an item: the SDK's side of the batch writes.
                        "client_cpu_ms_per_item": (time.process_time() - mine) * 1000 / items,
                    }
    return found


def project(probe: Mapping[str, Mapping[str, float]], messages: int) -> dict[str, float]:
    """Seconds to send ``messages`` in batches of 10 into one moto queue, then to receive and delete them all.

    A linear model of each request's time in the depth (fitted to the shallowest and deepest probes): the
    sends see the backlog grow from 0 to ``messages``, the receives see it shrink back.
    """
    depths = sorted(int(d) for d in probe)
    low, high = depths[0], depths[-1]
    batches = messages / SQS_BATCH

    def total(*names: str) -> float:
        at_low = sum(probe[str(low)][n] for n in names) / 1000
        at_high = sum(probe[str(high)][n] for n in names) / 1000
        slope = (at_high - at_low) / (high - low) if high > low else 0.0
        # Mean depth over the batches: half the burst.
        return max(0.0, batches * (at_low + slope * messages / 2))

    return {
        "send_seconds": total("send_batch_ms"),
        "drain_seconds": total("receive_ms", "delete_batch_ms"),
        # moto's own CPU time for all of it: its interpreter's time, which its requests take one at a time.
        "moto_cpu_seconds": total("send_batch_cpu_ms", "drain_cpu_ms"),
        # The SDK's CPU time for the same requests, on the sender's and the poller's side.
        "client_cpu_seconds": total("send_batch_client_cpu_ms", "drain_client_cpu_ms"),
    }


def floor_cpu_ms(emulator: Mapping[str, Any], messages: int, item_writes_per_event: float) -> float:
    """The machine's CPU an event for a burst's unavoidable requests alone, from the probes: a floor.

    Each message sent, received and deleted through moto's SQS (10 a request) and the event's item writes
    through DynamoDB Local (25 a request), both sides of each request: the emulator's CPU and the SDK's. A
    burst also reads its stream, evaluates, commits and submits, so its CPU an event is above this, and
    ``CORES * 1000 / floor`` is more events a second than any burst of it can reach here.
    """
    sqs = emulator["projected_seconds"][str(messages)]
    writes = emulator["dynamodb_writes"]["assetflow_table"]
    per_message = (sqs["moto_cpu_seconds"] + sqs["client_cpu_seconds"]) * 1000 / messages
    per_item = writes["cpu_ms_per_item"] + writes["client_cpu_ms_per_item"]
    return per_message + item_writes_per_event * per_item


# ---- one burst ------------------------------------------------------------------------------------------------


def evaluated(scenario: Scenario, monitor: Monitor) -> tuple[int, int]:
    """How many events of the burst the evaluator has handled, and how many runs exist.

    With ``batch=False`` each evaluated event is a run. For the bracketed ``a & b`` an evaluated event of a is
    either queued or consumed by run 1 (b's first event is in the queue until run 1 takes it).
    """
    if not scenario.marker:
        runs = monitor.runs(scenario.pipeline)
        return runs, runs
    run_ids = monitor.run_ids(scenario.pipeline)
    queued = monitor.pending(scenario.pipeline)
    if not run_ids:
        return max(queued - 1, 0), 0
    consumed = sum_consumed(scenario, monitor, run_ids[:1])
    # After b's second message, run 2 consumed the queue: the burst is wholly evaluated by then.
    return (
        queued + consumed if len(run_ids) == 1 else consumed + sum_consumed(scenario, monitor, run_ids[1:])
    ), len(run_ids)


def sum_consumed(scenario: Scenario, monitor: Monitor, run_ids: Sequence[str]) -> int:
    """Events of the burst that these runs consumed."""
    return sum(
        len(monitor.store.get_run(run_id).to_json()["triggering_asset_events"].get(scenario.asset, []))
        for run_id in run_ids
    )


def follow(
    scenario: Scenario,
    monitor: Monitor,
    clock: Clock,
    times: dict[str, float],
    *,
    messages: int,
    deadline: float,
    until: str = "runs_succeeded",
) -> None:
    """Read progress every ``PROGRESS_SECONDS`` and note when each milestone is first reached.

    Milestones: ``events_stored``, ``half_evaluated``, ``events_evaluated``, ``runs_created`` and
    ``runs_succeeded``; returns once ``until`` is reached (for the bracketed ``a & b``, the caller sends b's
    second message once the burst is evaluated, then follows on until both runs succeeded).

    Raises:
        BenchmarkCheckError: more events or runs than there should be, or the deadline passed first.
    """
    expected_runs = scenario.expected_runs(messages)
    while True:
        progress: dict[str, float] = {}
        if "events_stored" not in times:
            progress["events"] = stored = monitor.events(scenario.asset)
            check(stored <= messages, f"{stored} events for {messages} messages: duplicates")
            if stored == messages:
                times["events_stored"] = clock.now()
        done, runs = evaluated(scenario, monitor)
        progress |= {"evaluated": done, "runs": runs}
        check(done <= messages, f"{done} events evaluated of {messages}")
        check(runs <= expected_runs, f"{runs} runs, expected {expected_runs}")
        if scenario.marker and "events_evaluated" not in times:
            check(runs <= 1, f"{runs} runs before b's second message")
        if done >= messages / 2:
            times.setdefault("half_evaluated", clock.now())
        if done == messages:
            times.setdefault("events_evaluated", clock.now())
        if runs == expected_runs:
            times.setdefault("runs_created", clock.now())
            progress["succeeded"] = succeeded = monitor.runs(scenario.pipeline, "success")
            if succeeded == expected_runs:
                times["runs_succeeded"] = clock.now()
        clock.note(**progress)
        if until in times:
            return
        check(time.perf_counter() < deadline, f"timed out: {progress} after {clock.now():.0f} s")
        time.sleep(PROGRESS_SECONDS)


def machine_processes(started: Any) -> dict[str, int]:
    """The processes a burst keeps busy: this one (the runtime, its functions and the sender), the emulators."""
    found = {"runtime": os.getpid()}
    for name, emulator in (
        ("dynamodb_local", started.dynamodb),
        ("moto", started.moto),
        ("kafka", started.kafka),
    ):
        if emulator is not None and emulator.pid is not None:
            found[name] = emulator.pid
    return found


@contextmanager
def only_pollers_of(started: Any, scenario: Scenario) -> Iterator[None]:
    """Stop the SQS pollers of the other scenarios' queues for the block, as if only this one were deployed."""
    from assetflow_dev.pollers import SqsPoller

    urls = {started.resources.queues[w].url for w in scenario.watchers}
    others = [p for p in started.pollers if isinstance(p, SqsPoller) and p.queue_url not in urls]
    for poller in others:
        poller.stop()
    try:
        yield
    finally:
        for poller in others:
            poller.start()


@dataclass
class Deployment:
    """A started runtime with every request counted, its functions' log, and the uncounted monitor."""

    started: Any
    counter: RequestCounter
    monitor: Monitor
    log_path: Path


@contextmanager
def deployment(work_dir: Path) -> Iterator[Deployment]:
    """A fresh local runtime (emr-api launcher) on ``benchmarks/pipelines/burst``, counted and instrumented."""
    require_root_cwd()
    from assetflow_dev.runtime import RuntimeOptions

    counter = RequestCounter()
    options = RuntimeOptions(pipelines=str(PIPELINES), work_dir=work_dir, launcher="emr-api", schedules=False)
    log_path = work_dir / "logs" / "functions.log"
    with function_logs(log_path), counted_runtime(options, counter) as started:
        record_invocations(started, counter)
        yield Deployment(started, counter, Monitor(started), log_path)


def run_burst(scenario: Scenario, deployed: Deployment, messages: int, *, threads: int) -> dict[str, Any]:
    """One burst of ``scenario`` on a deployment: its times, checks, counts and price.

    Raises:
        BenchmarkCheckError: a check failed (lost, duplicated or misrouted events, wrong runs), or it stalled.
    """
    started, counter, monitor, log_path = (
        deployed.started,
        deployed.counter,
        deployed.monitor,
        deployed.log_path,
    )
    expected_runs = scenario.expected_runs(messages)
    token = uuid.uuid4().hex
    queues = started.resources.queues
    deadline = time.perf_counter() + TIMEOUT_BASE_SECONDS + TIMEOUT_PER_MESSAGE_SECONDS * messages
    with only_pollers_of(started, scenario):
        if scenario.marker_watcher:
            # b's first event, queued before the burst (set-up: not counted).
            send_one(monitor.sqs, queues[scenario.marker_watcher].url, {"marker": token, "seq": 0})
            wait_until(lambda: monitor.pending(scenario.pipeline) == 1, deadline=deadline, what="b queued")
        # What the runtime did before (starting, idling, other bursts) is not this burst's.
        counter.reset()
        processes = machine_processes(started)
        cpu_before = {name: process_cpu_seconds(pid) for name, pid in processes.items()}
        log_bytes = log_path.stat().st_size
        clock = Clock(started=time.perf_counter(), timeline=[])
        times: dict[str, float] = {}

        ids = send_burst(
            started.endpoints()["sqs"],
            queues[scenario.watcher].url,
            messages,
            threads=threads,
            token=token,
            counter=counter,
        )
        times["send"] = clock.now()
        check(sorted(ids) == list(range(messages)), "not every message was sent")
        if scenario.marker_watcher:
            follow(
                scenario,
                monitor,
                clock,
                times,
                messages=messages,
                deadline=deadline,
                until="events_evaluated",
            )
            producer = counter.attach(monitor.sqs_producer)
            send_one(producer, queues[scenario.marker_watcher].url, {"marker": token, "seq": 1})
        follow(scenario, monitor, clock, times, messages=messages, deadline=deadline)
        counter.record_log_bytes(log_path.stat().st_size - log_bytes)
        # The burst's requests end here: what follows (checks, idle polls, stopping) is not counted.
        snapshot = counter.snapshot()
        cpu = {name: process_cpu_seconds(pid) - cpu_before[name] for name, pid in processes.items()}
        wall = clock.now()
        checked = verify(scenario, monitor, started, messages=messages, token=token, ids=ids)

    events = scenario.expected_events(messages)
    priced = cost_per_million(snapshot["counts"], events)
    return {
        "messages": messages,
        "events": events,
        "runs": expected_runs,
        "seconds": times,
        "send_messages_per_second": messages / times["send"],
        "events_per_second": messages / times["events_stored"],
        # Evaluation of the burst's first half against its second (the and-queue grows meanwhile).
        "evaluated_per_second_first_half": (messages / 2) / times["half_evaluated"],
        "evaluated_per_second_second_half": (messages / 2)
        / max(times["events_evaluated"] - times["half_evaluated"], 1e-9),
        "runs_per_second": expected_runs / times["runs_created"],
        "checks": checked,
        "usd_per_million_events": priced["total_usd_per_million"],
        "cost_lines": {line["item"]: line["usd_per_million"] for line in priced["lines"]},
        "counts_per_event": {k: v / events for k, v in snapshot["counts"].items()},
        # The machine's CPU through the burst (from the first send until every run succeeded), by process.
        "cpu_ms_per_event": {name: seconds * 1000 / events for name, seconds in cpu.items()},
        "cpu_busy_percent": 100 * sum(cpu.values()) / (wall * CORES),
        # Items written (a batch's and a transaction's one by one): what DynamoDB Local's time goes by.
        "item_writes_per_event": sum(w["writes"] for w in snapshot["writes"].values()) / events,
        "operations": snapshot["operations"],
        "functions": snapshot["functions"],
        "timeline": clock.timeline,
    }


def verify(
    scenario: Scenario, monitor: Monitor, started: Any, *, messages: int, token: str, ids: Mapping[int, str]
) -> dict[str, int]:
    """Check what the burst left: the events, dedupe records, runs, queues and quarantine; return the counts.

    Raises:
        BenchmarkCheckError: anything is missing, duplicated, left over or misrouted.
    """
    events = monitor.asset_events(scenario.asset)
    payloads = [e["extra"]["payload"] for e in events]
    check(all(p.get("burst") == token for p in payloads), "an event of another burst")
    seqs = sorted(p["seq"] for p in payloads)
    check(seqs == list(range(messages)), f"{len(seqs)} events, {len(set(seqs))} distinct, for {messages}")
    by_message = {e["extra"]["message"]["message_id"]: e["id"] for e in events}
    check(set(by_message) == set(ids.values()), "the events' message ids are not the ones sent")
    event_ids = set(by_message.values())
    check(len(event_ids) == messages, "two messages made the same event")

    run_ids = monitor.run_ids(scenario.pipeline)
    expected_runs = scenario.expected_runs(messages)
    check(len(run_ids) == expected_runs, f"{len(run_ids)} runs, expected {expected_runs}")
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(pool.map(lambda r: monitor.store.get_run(r).to_json(), run_ids))
    check(all(r["state"] == "success" for r in runs), "a run did not succeed")
    consumed: list[str] = [
        e["id"] for r in runs for e in r["triggering_asset_events"].get(scenario.asset, [])
    ]
    check(len(consumed) == len(set(consumed)), "an event of the burst triggered two runs")
    check(
        set(consumed) == event_ids, f"{len(event_ids - set(consumed))} events of the burst triggered no run"
    )
    if scenario.marker:
        markers = [e["id"] for e in monitor.asset_events(scenario.marker_asset)]
        check(len(markers) == 2, f"{len(markers)} events of b, expected 2")
        triggered_b = [
            [e["id"] for e in r["triggering_asset_events"].get(scenario.marker_asset, [])] for r in runs
        ]
        check(triggered_b == [[m] for m in markers], f"b's events by run: {triggered_b}")
    else:
        check(
            all(len(r["triggering_asset_events"][scenario.asset]) == 1 for r in runs),
            "a run of several events",
        )
    check(monitor.pending(scenario.pipeline) == 0, "events left queued")

    # A dedupe record's key would be the message's identity, sqs:<queue arn>:<message id>
    # (docs/contracts.md); a standard queue's messages have none, their events' items are their own.
    prefixes = {
        f":q{i}": {"S": f"DEDUPE#sqs:{started.resources.queues[w].arn}:"}
        for i, w in enumerate(scenario.watchers)
    }
    dedupe = 0
    start = None
    while True:
        page = monitor.ddb.scan(
            TableName=monitor.table,
            Select="COUNT",
            FilterExpression=" OR ".join(f"begins_with(pk, {name})" for name in prefixes),
            ExpressionAttributeValues=prefixes,
            **({"ExclusiveStartKey": start} if start else {}),
        )
        dedupe += int(page["Count"])
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    check(dedupe == 0, f"{dedupe} dedupe records (a standard queue's events are their own)")
    check(not monitor.store.list_quarantine(limit=1).items, "messages were quarantined")
    for queue in started.resources.queues.values():
        check(monitor.messages_left(queue.url) == 0, f"messages left in {queue.url}")
        check(monitor.messages_left(queue.dlq_url) == 0, f"messages dead-lettered in {queue.dlq_url}")
    return {"events": len(events), "dedupe_records": dedupe, "runs": len(runs), "consumed": len(consumed)}


# ---- the benchmark ---------------------------------------------------------------------------------------------

#: Per-burst figures summarised over repetitions (seconds are from the first send).
FIGURES = (
    ("send", "seconds", "send (all acknowledged)"),
    ("events_stored", "seconds", "every event stored"),
    ("half_evaluated", "seconds", "half the events evaluated"),
    ("events_evaluated", "seconds", "every event evaluated"),
    ("runs_created", "seconds", "every expected run created"),
    ("runs_succeeded", "seconds", "every run succeeded"),
)
RATES = (
    ("send_messages_per_second", "messages/s sent"),
    ("events_per_second", "events/s stored (sustained)"),
    ("evaluated_per_second_first_half", "events/s evaluated, first half"),
    ("evaluated_per_second_second_half", "events/s evaluated, second half"),
    ("runs_per_second", "runs/s created"),
    ("usd_per_million_events", "$ per million events"),
)


def summary(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median, min and max over repetitions of each time and rate; the last repetition's counts."""
    last = results[-1]
    found: dict[str, Any] = {
        "messages": last["messages"],
        "events": last["events"],
        "runs": last["runs"],
        "seconds": {key: summarize([r["seconds"][key] for r in results]) for key, _, _ in FIGURES},
    }
    for key, _ in RATES:
        found[key] = summarize([r[key] for r in results])
    found["cost_lines"] = {
        item: summarize([r["cost_lines"][item] for r in results]) for item in last["cost_lines"]
    }
    found["checks"] = last["checks"]
    found["counts_per_event"] = last["counts_per_event"]
    found["item_writes_per_event"] = last["item_writes_per_event"]
    found["cpu_ms_per_event"] = {
        name: summarize([r["cpu_ms_per_event"][name] for r in results]) for name in last["cpu_ms_per_event"]
    }
    found["cpu_busy_percent"] = summarize([r["cpu_busy_percent"] for r in results])
    # At most this many events a second if the machine's cores did nothing else than this CPU an event.
    found["cpu_bound_events_per_second"] = (
        CORES * 1000 / sum(figure["median"] for figure in found["cpu_ms_per_event"].values())
    )
    found["operations_per_event"] = {
        service: {op: round(t["calls"] / last["events"], 3) for op, t in ops.items()}
        for service, ops in last["operations"].items()
    }
    found["functions"] = last["functions"]
    found["timeline"] = last["timeline"]
    return found


def _cell(found: Mapping[str, float]) -> str:
    def number(value: float) -> str:
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"

    if found["runs"] == 1:
        return number(found["median"])
    return f"{number(found['median'])} [{number(found['min'])}-{number(found['max'])}]"


def _print(per_scenario: Mapping[str, Any], runs: int) -> None:
    names = list(per_scenario)
    rows: list[list[Any]] = [
        [
            "messages / events / runs",
            *(f"{s['messages']} / {s['events']} / {s['runs']}" for s in per_scenario.values()),
        ]
    ]
    rows += [
        [f"s to {label}", *(_cell(per_scenario[n]["seconds"][key]) for n in names)]
        for key, _, label in FIGURES
    ]
    rows += [[label, *(_cell(per_scenario[n][key]) for n in names)] for key, label in RATES]
    rows.append(["DynamoDB item writes an event", *(per_scenario[n]["item_writes_per_event"] for n in names)])
    processes = list(per_scenario[names[0]]["cpu_ms_per_event"])
    rows += [
        [f"CPU ms an event: {process}", *(_cell(per_scenario[n]["cpu_ms_per_event"][process]) for n in names)]
        for process in processes
    ]
    rows.append(["CPU busy, % of the machine", *(_cell(per_scenario[n]["cpu_busy_percent"]) for n in names)])
    for key, label in (
        ("cpu_bound_events_per_second", f"events/s {CORES} cores allow at that CPU"),
        ("dynamodb_local_bound_events_per_second", "events/s DynamoDB Local's writes allow"),
        ("moto_sqs_bound_events_per_second", "messages/s moto's SQS passes (in and out)"),
        ("floor_cpu_ms_per_event", "CPU ms an event for its SQS and writes alone"),
        ("floor_bound_events_per_second", f"events/s {CORES} cores allow at that floor"),
    ):
        if all(key in per_scenario[n] for n in names):
            rows.append([label, *(per_scenario[n][key] for n in names)])
    print_table(f"Burst (median [min-max] of {runs} run(s))", ["figure", *names], rows)
    first = names[0]
    lines = list(per_scenario[first]["cost_lines"])
    print_table(
        "$ per million events, us-east-1 (median)",
        ["item", *names],
        [[item, *(per_scenario[n]["cost_lines"][item]["median"] for n in names)] for item in lines],
    )


def _print_probe(emulator: Mapping[str, Any]) -> None:
    print_table(
        "DynamoDB Local alone: BatchWriteItem of 25 from 4 threads",
        ["table", "items/s", "CPU ms an item", "client CPU ms an item"],
        [
            [name, t["items_per_second"], t["cpu_ms_per_item"], t["client_cpu_ms_per_item"]]
            for name, t in emulator["dynamodb_writes"].items()
        ],
    )
    by_depth = emulator["ms_per_request_by_depth"]
    print_table(
        "moto SQS: ms per request (10 messages) by queue depth; moto's CPU ms",
        [
            "depth",
            "SendMessageBatch",
            "ReceiveMessage",
            "DeleteMessageBatch",
            "CPU send",
            "CPU receive+delete",
            "client CPU send",
            "client CPU receive+delete",
        ],
        [
            [
                int(d),
                t["send_batch_ms"],
                t["receive_ms"],
                t["delete_batch_ms"],
                t["send_batch_cpu_ms"],
                t["drain_cpu_ms"],
                t["send_batch_client_cpu_ms"],
                t["drain_client_cpu_ms"],
            ]
            for d, t in by_depth.items()
        ],
    )
    for n, found in emulator["projected_seconds"].items():
        print(
            f"projected for {int(n):,} messages through one moto queue: send {found['send_seconds']:,.1f} s, "
            f"receive and delete {found['drain_seconds']:,.1f} s (emulator time alone); "
            f"moto's CPU {found['moto_cpu_seconds']:,.1f} s"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bursts, print and write the results."""
    started_at = time.perf_counter()
    arguments = parser(__doc__.splitlines()[0], default_runs=3, quick_runs=1)
    arguments.add_argument(
        "--messages", type=int, default=None, help="messages per burst (1,000; 40 with --quick)"
    )
    arguments.add_argument("--threads", type=int, default=SENDER_THREADS, help="sender threads")
    arguments.add_argument(
        "--scenarios", nargs="+", choices=sorted(SCENARIOS), default=list(SCENARIOS), help="which scenarios"
    )
    arguments.add_argument(
        "--no-probe",
        action="store_true",
        help="skip timing the SQS emulator by queue depth and DynamoDB Local's write ceiling",
    )
    args = arguments.parse_args(argv)
    runs = runs_of(args)
    mode = "quick" if args.quick else "full"
    messages = args.messages or MESSAGES[mode]
    if messages < 1 or args.threads < 1:
        raise SystemExit("--messages and --threads must be positive")

    emulator: dict[str, Any] = {}
    if not args.no_probe:
        print(f"timing moto's SQS at queue depths {', '.join(map(str, PROBE_DEPTHS[mode]))}", flush=True)
        probe = probe_sqs(PROBE_DEPTHS[mode])
        emulator = {
            "ms_per_request_by_depth": probe,
            "projected_seconds": {str(n): project(probe, n) for n in sorted({messages, 10_000})},
        }
        print("timing DynamoDB Local's writes (BatchWriteItem) alone", flush=True)
        emulator["dynamodb_writes"] = probe_dynamodb(DYNAMODB_PROBE_ITEMS[mode])
        _print_probe(emulator)

    measured: dict[str, list[dict[str, Any]]] = {name: [] for name in args.scenarios}
    with tempfile.TemporaryDirectory(prefix="assetflow-burst-") as tmp:
        for run in range(runs):
            # A fresh runtime per round; the scenarios in turn, first one then the other.
            order = args.scenarios if run % 2 == 0 else list(reversed(args.scenarios))
            with deployment(Path(tmp) / f"round-{run}") as deployed:
                for name in order:
                    print(f"{name}: burst {run + 1}/{runs} of {messages} messages", flush=True)
                    result = run_burst(SCENARIOS[name], deployed, messages, threads=args.threads)
                    measured[name].append(result)
                    print(
                        f"  events stored in {result['seconds']['events_stored']:.1f} s "
                        f"({result['events_per_second']:.1f}/s), "
                        f"runs in {result['seconds']['runs_created']:.1f} s",
                        flush=True,
                    )

    per_scenario = {name: summary(results) for name, results in measured.items()}
    for name in per_scenario:
        per_scenario[name]["description"] = SCENARIOS[name].description
        if emulator:
            # At most this many events a second could be stored and evaluated if DynamoDB Local did nothing
            # but the burst's item writes at its ceiling, with the machine to itself.
            ceiling = emulator["dynamodb_writes"]["assetflow_table"]["items_per_second"]
            per_scenario[name]["dynamodb_local_bound_events_per_second"] = (
                ceiling / per_scenario[name]["item_writes_per_event"]
            )
            # And at most this many messages a second pass through moto's SQS, in and out, with a core to
            # itself: one server process, whose requests take its interpreter one at a time.
            moto_seconds = emulator["projected_seconds"][str(messages)]["moto_cpu_seconds"]
            if moto_seconds > 0:
                per_scenario[name]["moto_sqs_bound_events_per_second"] = messages / moto_seconds
            per_scenario[name]["floor_cpu_ms_per_event"] = floor_cpu_ms(
                emulator, messages, per_scenario[name]["item_writes_per_event"]
            )
            per_scenario[name]["floor_bound_events_per_second"] = (
                CORES * 1000 / per_scenario[name]["floor_cpu_ms_per_event"]
            )
    _print(per_scenario, runs)
    notes = [
        "One fresh local runtime (emr-api launcher) per round, both scenarios' pipelines deployed; during a "
        "burst only its scenario's SQS pollers run. DynamoDB Local, moto, in-process pollers.",
        f"{args.threads} sender threads, SendMessageBatch of {SQS_BATCH}; times from the first send.",
        "Counted: the functions' clients, the SQS pollers' receives and deletes, the launcher's S3 and EMR "
        "calls, the producers' sends; DynamoDB Streams reads (free on AWS) are not.",
        "Evaluator invocations: only those carrying new asset events are billed (the stack filters the "
        "stream; the local poller does not, and batches before filtering, so it invokes more often).",
        "The emr-api launcher reports SUBMITTED, RUNNING and SUCCESS (AWS sends five states per run); the "
        "run-state function is billed for the states the stack's rule forwards (a run's end).",
        "Not priced: EMR Serverless compute (no job runs here).",
    ]
    write_result(
        NAME,
        {"scenarios": per_scenario, "emulators": emulator},
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={"runs": runs, "messages": messages, "threads": args.threads, "scenarios": args.scenarios},
        notes=notes,
        started=started_at,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
