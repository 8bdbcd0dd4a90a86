"""Latency on the local runtime: from a message sent to SQS or Kafka until its event is stored, its run is created
and its Spark job's first line of user code runs (issue 6, item 1).

Messages go one at a time (the next once the previous run has succeeded) to the watchers of
``benchmarks/pipelines/latency`` (a single-asset, ``batch=False`` pipeline per source), through the whole
local runtime: pollers, the real ingest and evaluator handlers, DynamoDB Local and its stream, moto, Tansu.

- **(a) event stored** and **(b) run created** run with the ``emr-api`` launcher (Spark would dominate the
  machine). Each is measured two ways from the wall clock taken just before the send call: the *stamp* (the
  event's ``timestamp`` / the run's ``created_at``, written by the handlers with the same machine's clock just
  before their write; an SQS message's event is timed by SQS, when it took the message in, so its stamp is
  when the ingest call that stored it returned) and *readable* (when this script's reads, every
  ``POLL_SECONDS``, first found the item).
  Readable comes after stamp by the write and up to one poll; the two must agree within that.
- **(c) first line** runs with the ``spark`` launcher, one job at a time and fewer messages: the job
  (``benchmarks/pipelines/jobs/first_line.py``) prints ``time.time()`` as its first line of user code, and the
  script reads it from the job's log. Measured with a spark-submit per job, and with the launcher's warm
  driver (``warm_workers``) when it has one.

Each figure is p50/p95/p99 over the messages of a run, then the median (min, max) over runs. The target on
this machine: run created p50 <= 300 ms and p99 <= 1 s after the send. Where the time goes: the pollers'
handlers are wrapped to note when each message's record reaches the ingest and the evaluator functions, which
splits the way into send -> ingest -> event stamp -> evaluator -> run stamp (-> first line). What-if variants
switch a setting the runtime does not expose (the stream poller's idle wait; the evaluator's listener events)
on for every other message, to measure what changing it would save.

Run: ``.venv/bin/python -m benchmarks.latency [--quick] [--messages N] [--spark-messages N] [--no-spark]
[--what-if-messages N]``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ROOT,
    check,
    parser,
    percentiles,
    print_table,
    require_root_cwd,
    runs_of,
    summarize,
    summarize_runs,
    write_result,
)

NAME = "latency"
PIPELINES = ROOT / "benchmarks" / "pipelines" / "latency"
SOURCES = ("sqs", "kafka")
WATCHER = {"sqs": "bench-latency-sqs", "kafka": "bench-latency-kafka"}
PIPELINE = {"sqs": "latency_sqs", "kafka": "latency_kafka"}
ASSET = {"sqs": "x-bench://latency/sqs", "kafka": "x-bench://latency/kafka"}
#: The job's marker line (benchmarks/pipelines/jobs/first_line.py prints it first).
FIRST_LINE = re.compile(r"assetflow-bench first-line-at (\d+\.\d+)")

#: The target on this machine, in seconds after the send: run created p50 and p99.
TARGET = {"p50": 0.300, "p99": 1.0}
#: How often the script reads the table while it waits for an item (the "readable" figures' resolution).
POLL_SECONDS = 0.01
#: Messages per run and source (at least 200 in a full run, as the issue asks); Spark jobs per source.
MESSAGES = {"full": 200, "quick": 20}
SPARK_MESSAGES = {"full": 20, "quick": 1}
#: Messages per source and arm of each what-if variant (none in quick mode): the variant is switched on for
#: every other message, so that both arms see the same load on a shared machine.
WHAT_IF_MESSAGES = {"full": 60, "quick": 0}
#: Messages sent first and left out of the figures: the Kafka consumer joins its group (about 3 s), the
#: handlers build their clients, the JVMs warm up.
WARMUP = 3
#: The Spark launcher's ways of running a job: a spark-submit per job, and a warm driver (when it has them);
#: quick mode runs one cold job, for SQS only (each Spark runtime and job costs tens of seconds).
SPARK_MODES = {"full": ("cold", "warm"), "quick": ("cold",)}
SPARK_SOURCES = {"full": SOURCES, "quick": ("sqs",)}
#: Spark jobs sent first and left out (the first spark-submit reads the jars from disk); none in quick mode.
SPARK_WARMUP = {"full": 1, "quick": 0}
#: A random pause of up to this long between messages, so that sends fall anywhere in the pollers' cycles.
JITTER_SECONDS = 0.1
#: Right after ready (issue 13, item 3): a record every ``PACED_SECONDS`` from the moment a fresh runtime is
#: ready, ``PACED_MESSAGES`` per source, none left out: a poller that is not consuming yet, or a fetch cadence,
#: shows in the first records and in the spread.
PACED_SECONDS = 0.25
PACED_MESSAGES = {"full": 40, "quick": 8}
#: How long one message may take to become a successful run: emr-api, then Spark (a whole spark-submit).
TIMEOUT = {"emr-api": 30.0, "spark": 300.0}

#: Stages as reported: (key, label).
STAGES: tuple[tuple[str, str], ...] = (
    ("event_stored", "(a) event stored (stamp)"),
    ("event_readable", "(a) event stored (readable)"),
    ("run_created", "(b) run created (stamp)"),
    ("run_readable", "(b) run created (readable)"),
    ("first_line", "(c) job's first line (spark-submit)"),
    ("first_line_warm", "(c) job's first line (warm driver)"),
)


@dataclass
class Sample:
    """One message's way through the runtime, as wall-clock times (seconds since the epoch)."""

    source: str
    seq: int
    sent: float
    event_stamp: float
    event_seen: float
    run_stamp: float
    run_seen: float
    run_id: str
    first_line: float | None = None
    #: When the pollers invoked the ingest and the evaluator functions with this message's record.
    ingest_invoked: float | None = None
    evaluator_invoked: float | None = None

    def seconds(self) -> dict[str, float]:
        """Each stage's latency after the send, in seconds."""
        found = {
            "event_stored": self.event_stamp - self.sent,
            "event_readable": self.event_seen - self.sent,
            "run_created": self.run_stamp - self.sent,
            "run_readable": self.run_seen - self.sent,
        }
        if self.first_line is not None:
            found["first_line"] = self.first_line - self.sent
        return found

    def segments(self) -> dict[str, float]:
        """Where the time goes, in seconds: each step from the send to the run (and the job's first line)."""
        found = {
            "send_to_event": self.event_stamp - self.sent,
            "event_to_run": self.run_stamp - self.event_stamp,
            "stamp_to_readable_run": self.run_seen - self.run_stamp,
        }
        if self.ingest_invoked is not None and self.evaluator_invoked is not None:
            found |= {
                "send_to_ingest": self.ingest_invoked - self.sent,
                "ingest_to_event_stamp": self.event_stamp - self.ingest_invoked,
                "event_stamp_to_evaluator": self.evaluator_invoked - self.event_stamp,
                "evaluator_to_run_stamp": self.run_stamp - self.evaluator_invoked,
            }
        if self.first_line is not None:
            found["run_to_first_line"] = self.first_line - self.run_stamp
        return found


def _event_stamp(source: str, event: Mapping[str, Any], seen: float, ingest_returned: float | None) -> float:
    """When the event was stored: its timestamp, but an SQS message's event is timed by SQS (when it took the
    message in), so there the moment its ingest call returned (else when this script first read it)."""
    if source != "sqs":
        return _epoch(event["timestamp"])
    return ingest_returned if ingest_returned is not None else seen


def _epoch(timestamp: str) -> float:
    from assetflow.core.events import parse_timestamp

    return parse_timestamp(timestamp).timestamp()


# ---- sending ------------------------------------------------------------------------------------------------


class SqsSender:
    """SendMessage to the SQS watcher's queue, as a producer with boto3 would."""

    def __init__(self, runtime: Any) -> None:
        self.sqs = runtime.client("sqs")
        self.url = runtime.resources.queues[WATCHER["sqs"]].url

    def send(self, body: str) -> None:
        """Send one message (returns when SQS accepted it)."""
        self.sqs.send_message(QueueUrl=self.url, MessageBody=body)

    def close(self) -> None:
        """Nothing to release."""


class KafkaSender:
    """A kafka-python producer on the Kafka watcher's topic: acks=all, no linger, one record at a time."""

    def __init__(self, runtime: Any) -> None:
        from kafka import KafkaProducer  # optional: only the local runtime needs kafka-python

        self.topic = runtime.resources.topics[WATCHER["kafka"]].topic
        self.producer = KafkaProducer(bootstrap_servers=runtime.endpoints()["kafka"], acks="all", linger_ms=0)

    def send(self, body: str) -> None:
        """Send one record (returns when the broker acknowledged it)."""
        self.producer.send(self.topic, value=body.encode()).get(timeout=10)

    def close(self) -> None:
        """Flush and close the producer."""
        self.producer.close(timeout=5)


# ---- watching the store -------------------------------------------------------------------------------------


class Probe:
    """Reads the runtime's table as an operator would: an asset's newest event, a pipeline's newest run."""

    def __init__(self, runtime: Any) -> None:
        from assetflow.adapters.dynamodb import DynamoDbStore

        self.store = DynamoDbStore(runtime.client("dynamodb"), runtime.resources.table)

    def newest_event(self, uri: str) -> dict[str, Any] | None:
        """The asset's newest event, or None."""
        items = self.store.list_events(uri, limit=1).items
        return items[0] if items else None

    def newest_run(self, pipeline: str) -> dict[str, Any] | None:
        """The pipeline's newest run (without its events), or None."""
        items = self.store.list_runs(pipeline, limit=1).items
        return items[0] if items else None

    def run(self, run_id: str) -> dict[str, Any]:
        """A run with its triggering events."""
        return dict(self.store.get_run(run_id).to_json())


def _payload_key(payload: Any) -> str | None:
    if isinstance(payload, dict) and "bench" in payload:
        return json.dumps(payload, sort_keys=True)
    return None


def payload_keys(event: Mapping[str, Any]) -> list[str]:
    """The benchmark payloads an SQS, Kafka or DynamoDB stream event carries (as the handlers decode them)."""
    payloads: list[Any] = []
    for record in event.get("Records") or []:
        try:
            if record.get("eventSource") == "aws:sqs":
                payloads.append(json.loads(record["body"]))
            elif record.get("eventSource") == "aws:dynamodb":
                image = record.get("dynamodb", {}).get("NewImage", {})
                if "event" in image:
                    payloads.append(json.loads(image["event"]["S"]).get("extra", {}).get("payload"))
        except (KeyError, TypeError, ValueError):
            continue
    for records in (event.get("records") or {}).values():
        for record in records:
            try:
                payloads.append(json.loads(base64.b64decode(record["value"])))
            except (KeyError, TypeError, ValueError):
                continue
    return [key for key in map(_payload_key, payloads) if key is not None]


class Tracer:
    """When the pollers hand a benchmark message's record to the ingest and the evaluator functions.

    Each poller's handler is wrapped: the wrapper notes the wall-clock time and the payloads the event carries,
    then calls the handler (a few microseconds per invocation, the same for every message).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first: dict[tuple[str, str], float] = {}
        self._returned: dict[tuple[str, str], float] = {}

    def install(self, started: Any) -> None:
        """Wrap the handlers of the runtime's pollers (they read ``poller.handler`` on every invocation)."""
        from assetflow_dev.pollers import StreamPoller

        for poller in started.pollers:
            poller.handler = self._wrap(
                poller.handler, "evaluator" if isinstance(poller, StreamPoller) else "ingest"
            )

    def _wrap(self, handler: Callable[..., Any], function: str) -> Callable[..., Any]:
        def traced(event: dict[str, Any], context: Any) -> Any:
            now = time.time()
            keys = payload_keys(event)
            with self._lock:
                for key in keys:
                    self._first.setdefault((function, key), now)
            try:
                return handler(event, context)
            finally:
                done = time.time()
                with self._lock:
                    for key in keys:
                        self._returned.setdefault((function, key), done)

        return traced

    def invoked(self, function: str, payload: Mapping[str, Any]) -> float | None:
        """When ``function`` was first invoked with the record of ``payload`` (None: not seen)."""
        key = _payload_key(dict(payload))
        with self._lock:
            return self._first.get((function, key)) if key is not None else None

    def returned(self, function: str, payload: Mapping[str, Any]) -> float | None:
        """When the first call of ``function`` with the record of ``payload`` returned (None: not yet)."""
        key = _payload_key(dict(payload))
        with self._lock:
            return self._returned.get((function, key)) if key is not None else None


def measure(
    source: str,
    sender: Any,
    probe: Probe,
    *,
    token: str,
    seq: int,
    timeout: float,
    seen_runs: set[str],
    tracer: Tracer | None = None,
    first_line_of: Callable[[str], float | None] | None = None,
) -> Sample:
    """Send one message and follow it until its run has succeeded (and, with Spark, its job printed its start).

    Raises:
        BenchmarkCheckError: the event or the run did not appear in time, or the run is not the message's.
    """
    payload = {"bench": token, "seq": seq}
    uri, pipeline = ASSET[source], PIPELINE[source]
    sent = time.time()
    sender.send(json.dumps(payload))
    deadline = time.monotonic() + timeout
    event: dict[str, Any] | None = None
    run: dict[str, Any] | None = None
    event_seen = run_seen = 0.0
    while run is None:
        check(time.monotonic() < deadline, f"{source} message {seq}: no run within {timeout:g} s")
        if event is None:
            found = probe.newest_event(uri)
            if found is not None and found["extra"].get("payload") == payload:
                event, event_seen = found, time.time()
        if event is not None:
            newest = probe.newest_run(pipeline)
            if newest is not None and newest["run_id"] not in seen_runs:
                run, run_seen = newest, time.time()
                continue
        time.sleep(POLL_SECONDS)
    seen_runs.add(run["run_id"])
    # The run is this message's: its one triggering event is the message's event.
    full = probe.run(run["run_id"])
    check(
        [e["id"] for e in full["triggering_asset_events"].get(uri, [])] == [event["id"]],
        f"{source} message {seq}: run {run['run_id']} was triggered by {full['triggering_asset_events']}",
    )
    first_line = None
    while True:
        check(time.monotonic() < deadline, f"{source} run {run['run_id']}: not successful in {timeout:g} s")
        state = probe.run(run["run_id"])["state"]
        check(state not in ("failed", "cancelled"), f"{source} run {run['run_id']} {state}")
        if first_line_of is not None and first_line is None:
            first_line = first_line_of(run["run_id"])
        if state == "success" and (first_line_of is None or first_line is not None):
            break
        time.sleep(POLL_SECONDS * 2)
    return Sample(
        source=source,
        seq=seq,
        sent=sent,
        event_stamp=_event_stamp(
            source, event, event_seen, tracer.returned("ingest", payload) if tracer else None
        ),
        event_seen=event_seen,
        run_stamp=_epoch(full["created_at"]),
        run_seen=run_seen,
        run_id=run["run_id"],
        first_line=first_line,
        ingest_invoked=tracer.invoked("ingest", payload) if tracer else None,
        evaluator_invoked=tracer.invoked("evaluator", payload) if tracer else None,
    )


# ---- the runtime ----------------------------------------------------------------------------------------------


@contextmanager
def function_logs(path: Path) -> Iterator[None]:
    """Send the functions' Powertools logs to ``path`` for the block (as the runtime's ``function_log`` does).

    Done here rather than by the runtime: ``LocalRuntime.stop()`` closes its log file while the handlers'
    loggers still write to it, so a second runtime in the same process fails at start.
    """
    from assetflow.functions import _observe
    from assetflow_dev.runtime import FUNCTION_MODULES

    handlers = []
    for module in FUNCTION_MODULES.values():
        registered = getattr(getattr(module, "logger", None), "registered_handler", None)
        if isinstance(registered, logging.StreamHandler):
            handlers.append(registered)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as log:
        previous = [handler.setStream(log) for handler in handlers]
        metrics_before, _observe.stream = _observe.stream, log  # their metrics (EMF) too
        try:
            yield
        finally:
            _observe.stream = metrics_before
            for handler, stream in zip(handlers, previous, strict=True):
                handler.setStream(stream)


@contextmanager
def runtime(launcher: str, work_dir: Path, **options: Any) -> Iterator[Any]:
    """The local runtime on the latency pipelines, its functions' logs in a file, no schedules."""
    require_root_cwd()
    from assetflow_dev.runtime import LocalRuntime, RuntimeOptions

    settings = RuntimeOptions(
        pipelines=str(PIPELINES),
        work_dir=work_dir,
        launcher=launcher,  # type: ignore[arg-type]
        schedules=False,
        **options,
    )
    with function_logs(work_dir / "logs" / "functions.log"), LocalRuntime(settings) as started:
        yield started


def poller_settings(started: Any) -> dict[str, Any]:
    """The settings of the runtime's pollers and launcher that bound each step's latency."""
    from assetflow_dev import pollers

    found: dict[str, Any] = {"kafka_poll_timeout_ms": pollers.KAFKA_POLL_TIMEOUT_MS}
    for poller in started.pollers:
        if isinstance(poller, pollers.SqsPoller):
            found["sqs_wait_seconds"] = poller.wait_seconds
        elif isinstance(poller, pollers.StreamPoller):
            found["stream_poll_interval"] = poller.poll_interval
        elif isinstance(poller, pollers.KafkaPoller):
            found["kafka_batch_size"] = poller.batch_size
    launcher = started.launcher
    if hasattr(launcher, "poll_interval"):
        found["emr_api_poll_interval"] = launcher.poll_interval
    return found


def first_line_reader(started: Any) -> Callable[[str], float | None]:
    """Read a run's first-line time from its job's log (None until the job printed it)."""

    def read(run_id: str) -> float | None:
        try:
            path = started.launcher.log_path(run_id)
            text = path.read_text(encoding="utf-8", errors="replace")
        except (KeyError, OSError):
            return None
        found = FIRST_LINE.search(text)
        return float(found.group(1)) if found else None

    return read


def warm_spark_supported() -> bool:
    """Whether the runtime offers warm Spark drivers (``RuntimeOptions.warm_workers``)."""
    from assetflow_dev.runtime import RuntimeOptions

    return "warm_workers" in RuntimeOptions.__dataclass_fields__


def ran_warm(started: Any, run_id: str) -> bool:
    """Whether the run's job ran on a warm driver (the launcher says so at the top of the job's log)."""
    return "# warm Spark driver" in started.launcher.log_path(run_id).read_text(
        encoding="utf-8", errors="replace"
    )


@contextmanager
def warm_driver_ready(started: Any) -> Iterator[None]:
    """Wait until the launcher has a ready warm driver (each driver runs one job; a new one takes seconds)."""
    check(started.launcher.pool.wait_ready(1, timeout=TIMEOUT["spark"]), "no warm Spark driver became ready")
    yield


def run_series(
    started: Any,
    source: str,
    count: int,
    *,
    timeout: float,
    seen_runs: set[str],
    warmup: int,
    tracer: Tracer | None = None,
    spark: bool = False,
    setting: Callable[[int], AbstractContextManager[Any]] | None = None,
) -> list[Sample]:
    """Send ``warmup`` then ``count`` messages one at a time; return the samples of the ``count``.

    ``setting(seq)``, when given, is entered around each message (the what-if variants switch per message).
    """
    sender = SqsSender(started) if source == "sqs" else KafkaSender(started)
    probe = Probe(started)
    token = uuid.uuid4().hex
    reader = first_line_reader(started) if spark else None
    samples: list[Sample] = []
    try:
        for seq in range(warmup + count):
            # The first message of a Kafka series waits for the consumer to join its group.
            limit = timeout * 4 if seq == 0 else timeout
            with setting(seq) if setting is not None else nullcontext():
                sample = measure(
                    source,
                    sender,
                    probe,
                    token=token,
                    seq=seq,
                    timeout=limit,
                    seen_runs=seen_runs,
                    tracer=tracer,
                    first_line_of=reader,
                )
            if seq >= warmup:
                samples.append(sample)
            time.sleep(random.uniform(0, JITTER_SECONDS))
    finally:
        sender.close()
    return samples


def paced_after_ready(started: Any, source: str, messages: int, *, token: str) -> dict[str, Any]:
    """From the moment ``started`` is ready, a record every ``PACED_SECONDS``; each one's run created after it.

    The sender keeps its pace whatever the runtime does (a thread); afterwards every run of the source's
    pipeline is read with its triggering event, whose payload says which record it was.

    Raises:
        BenchmarkCheckError: a record made no run, or more than one.
    """
    sender = KafkaSender(started) if source == "kafka" else SqsSender(started)
    sent: dict[int, float] = {}
    try:
        began = time.monotonic()
        for seq in range(messages):
            time.sleep(max(0.0, began + seq * PACED_SECONDS - time.monotonic()))
            sent[seq] = time.time()
            sender.send(json.dumps({"bench": token, "seq": seq}))
    finally:
        sender.close()
    probe = Probe(started)
    deadline = time.monotonic() + TIMEOUT["emr-api"]
    created: dict[int, float] = {}
    while len(created) < messages:
        check(time.monotonic() < deadline, f"{source}: {len(created)} of {messages} paced records made a run")
        time.sleep(0.2)
        for item in probe.store.list_runs(PIPELINE[source], limit=1000).items:
            run = probe.run(item["run_id"])
            for event in run["triggering_asset_events"].get(ASSET[source], []):
                payload = event.get("extra", {}).get("payload") or {}
                if payload.get("bench") == token:
                    check(
                        payload["seq"] not in created or created[payload["seq"]] == _epoch(run["created_at"]),
                        f"{source}: record {payload['seq']} made two runs",
                    )
                    created[payload["seq"]] = _epoch(run["created_at"])
    latencies = [created[seq] - sent[seq] for seq in range(messages)]
    found = percentiles([x * 1000 for x in latencies])
    head = latencies[: min(15, messages)]
    return {
        "run_created_ms": found,
        "first_15_max_ms": max(head) * 1000,
        "max_ms": max(latencies) * 1000,
        "latencies_ms": [round(x * 1000, 1) for x in latencies],
    }


# ---- figures -----------------------------------------------------------------------------------------------


def figures_of(samples: Sequence[Sample]) -> dict[str, dict[str, float]]:
    """p50/p95/p99 in milliseconds per stage (and per segment) over one run's samples."""
    stages: dict[str, list[float]] = {}
    for sample in samples:
        for key, seconds in {**sample.seconds(), **sample.segments()}.items():
            stages.setdefault(key, []).append(seconds * 1000)
    return {key: percentiles(values) for key, values in stages.items()}


def agreement(samples: Sequence[Sample]) -> dict[str, float]:
    """How far the readable figures trail the stamps (ms): they must not precede them."""
    event_gaps = [(s.event_seen - s.event_stamp) * 1000 for s in samples]
    run_gaps = [(s.run_seen - s.run_stamp) * 1000 for s in samples]
    return {
        "event_gap_ms_p50": percentiles(event_gaps)["p50"],
        "event_gap_ms_min": min(event_gaps),
        "run_gap_ms_p50": percentiles(run_gaps)["p50"],
        "run_gap_ms_min": min(run_gaps),
    }


def _summaries(per_run: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, Any]:
    keys = list(dict.fromkeys(k for run in per_run for k in run))
    return {key: summarize_runs([run[key] for run in per_run if key in run]) for key in keys}


def verdict(figures: Mapping[str, Any]) -> dict[str, Any]:
    """Whether run created meets the target for each source, by stamp and by readable (medians over runs)."""
    found: dict[str, Any] = {}
    for source, stages in figures.items():
        for key in ("run_created", "run_readable"):
            measured = {q: stages[key][q]["median"] / 1000 for q in TARGET}
            found[f"{source}_{key}"] = {
                "seconds": measured,
                "limit_seconds": dict(TARGET),
                "met": all(measured[q] <= limit for q, limit in TARGET.items()),
            }
    return found


# ---- what-if: settings the runtime does not expose ------------------------------------------------------------

#: Each variant changes live objects of a started runtime for one series, to measure what a change would save
#: (the runtime has no option for either; the change each stands for is in the README).
WHAT_IF: Mapping[str, str] = {
    "stream_poll_10ms": "the stream poller waits 10 ms after an empty poll instead of 50 ms",
    "no_listener_events": "the evaluator's two listener PutEvents calls out of the way before the run is created",
    "both": "both of the above",
}


@contextmanager
def what_if(started: Any, variant: str) -> Iterator[None]:
    """Apply a ``WHAT_IF`` variant to the started runtime for the block, then put everything back."""
    from assetflow.ports import NullBus
    from assetflow_dev.pollers import StreamPoller

    if variant not in WHAT_IF:
        raise ValueError(f"unknown variant {variant!r}; known: {sorted(WHAT_IF)}")
    streams = [p for p in started.pollers if isinstance(p, StreamPoller)]
    evaluator = started.deps.evaluator
    saved_intervals = [(p.poll_interval, p._idle_wait) for p in streams]
    saved_bus = evaluator.bus
    if variant in ("stream_poll_10ms", "both"):
        for poller in streams:
            # The idle wait is the base class's; the runtime builds the poller with the default 0.05 s.
            poller.poll_interval = poller._idle_wait = 0.01
    if variant in ("no_listener_events", "both"):
        evaluator.bus = NullBus()
    try:
        yield
    finally:
        for poller, (interval, idle) in zip(streams, saved_intervals, strict=True):
            poller.poll_interval, poller._idle_wait = interval, idle
        evaluator.bus = saved_bus


# ---- printing ----------------------------------------------------------------------------------------------

SEGMENTS = (
    ("send_to_ingest", "send -> ingest invoked"),
    ("ingest_to_event_stamp", "ingest invoked -> event stamp"),
    ("event_stamp_to_evaluator", "event stamp -> evaluator invoked"),
    ("evaluator_to_run_stamp", "evaluator invoked -> run stamp"),
    ("stamp_to_readable_run", "run stamp -> run readable"),
    ("run_to_first_line", "run stamp -> first line (spark-submit)"),
    ("run_to_first_line_warm", "run stamp -> first line (warm driver)"),
)


def _print(figures: Mapping[str, Any], title: str, keys: Sequence[tuple[str, str]]) -> None:
    rows = []
    for source, stages in figures.items():
        for key, label in keys:
            if key in stages:
                q = stages[key]
                rows.append(
                    [
                        f"{source} {label}",
                        *(q[p]["median"] for p in ("p50", "p95", "p99")),
                        q["p50"]["min"],
                        q["p50"]["max"],
                    ]
                )
    print_table(title, ["stage (ms after send)", "p50", "p95", "p99", "p50 min", "p50 max"], rows)


def _print_what_if(variants: Mapping[str, Any]) -> None:
    rows = []
    for name, sources in variants.items():
        for source, arms in sources.items():
            base, tuned = arms["baseline"]["run_created"], arms["variant"]["run_created"]
            rows.append(
                [
                    f"{name} {source}",
                    base["p50"],
                    tuned["p50"],
                    tuned["p50"] - base["p50"],
                    base["p95"],
                    tuned["p95"],
                ]
            )
    print_table(
        "What-if, switched on for every other message: run created (stamp), ms after send",
        ["variant", "p50 off", "p50 on", "p50 change", "p95 off", "p95 on"],
        rows,
    )


def what_if_series(
    started: Any, variant: str, messages: int, *, seen: set[str], tracer: Tracer
) -> dict[str, Any]:
    """Per source, ``2 * messages`` messages with ``variant`` on for every other one: both arms' figures."""
    found: dict[str, Any] = {}
    for source in SOURCES:
        samples = run_series(
            started,
            source,
            2 * messages,
            timeout=TIMEOUT["emr-api"],
            seen_runs=seen,
            warmup=1,
            tracer=tracer,
            setting=lambda seq: what_if(started, variant) if seq % 2 else nullcontext(),
        )
        found[source] = {
            "variant": figures_of([s for s in samples if s.seq % 2]),
            "baseline": figures_of([s for s in samples if not s.seq % 2]),
        }
        arms = found[source]
        print(
            f"  {variant} {source}: run p50 {arms['baseline']['run_created']['p50']:.0f} ms off, "
            f"{arms['variant']['run_created']['p50']:.0f} ms on"
        )
    return found


# ---- the benchmark ---------------------------------------------------------------------------------------------


def _series(started: Any, runs: int, messages: int, *, seen: set[str], tracer: Tracer, label: str) -> Any:
    """``runs`` series of ``messages`` per source on a started emr-api runtime: per source, per run figures."""
    per_run: dict[str, list[dict[str, dict[str, float]]]] = {s: [] for s in SOURCES}
    gaps: dict[str, list[dict[str, float]]] = {s: [] for s in SOURCES}
    for run in range(runs):
        # Alternate which source goes first, so that neither always follows the other's traffic.
        for source in SOURCES if run % 2 == 0 else tuple(reversed(SOURCES)):
            samples = run_series(
                started,
                source,
                messages,
                timeout=TIMEOUT["emr-api"],
                seen_runs=seen,
                warmup=WARMUP if not seen else 1,
                tracer=tracer,
            )
            per_run[source].append(figures_of(samples))
            gaps[source].append(agreement(samples))
            found = per_run[source][-1]
            print(
                f"  {label} {run + 1}/{runs} {source}: event p50 {found['event_stored']['p50']:.0f} ms, "
                f"run p50 {found['run_created']['p50']:.0f} ms, p99 {found['run_created']['p99']:.0f} ms"
            )
    figures: dict[str, Any] = {source: _summaries(per_run[source]) for source in SOURCES}
    for source in SOURCES:
        agreed = summarize_runs(gaps[source])
        # Readable after stamp, always: both read the same clock, and a read cannot find an unwritten item. (An
        # SQS event's stamp is its ingest call's return, which may come after the event is readable.)
        event_gap_ok = source == "sqs" or agreed["event_gap_ms_min"]["min"] >= 0
        check(
            event_gap_ok and agreed["run_gap_ms_min"]["min"] >= 0,
            f"{source}: an item was readable before its stamp: {agreed}",
        )
        figures[source]["method_gap"] = agreed
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print and write the latency figures; exit status 1 when run created misses the target."""
    started_at = time.perf_counter()
    arguments = parser(__doc__.splitlines()[0], default_runs=3, quick_runs=1)
    arguments.add_argument(
        "--messages", type=int, default=None, help="messages per run and source (200; 20 with --quick)"
    )
    arguments.add_argument(
        "--spark-messages",
        type=int,
        default=None,
        help="Spark jobs per source and mode for the first line, one series (20; 1, SQS only, with --quick)",
    )
    arguments.add_argument("--no-spark", action="store_true", help="skip (c), the Spark jobs' first line")
    arguments.add_argument(
        "--what-if-messages",
        type=int,
        default=None,
        help="messages per source and arm of each what-if variant (60; none with --quick)",
    )
    args = arguments.parse_args(argv)
    runs = runs_of(args)
    mode = "quick" if args.quick else "full"
    messages = args.messages or MESSAGES[mode]
    spark_messages = 0 if args.no_spark else (args.spark_messages or SPARK_MESSAGES[mode])
    what_if_messages = args.what_if_messages if args.what_if_messages is not None else WHAT_IF_MESSAGES[mode]
    if messages < 1 or spark_messages < 0 or what_if_messages < 0:
        raise SystemExit("--messages must be positive, --spark-messages and --what-if-messages not negative")
    load_before = os.getloadavg()[0]

    startup: list[float] = []
    variants: dict[str, Any] = {}
    spark_figures: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="assetflow-latency-") as tmp:
        print(f"emr-api launcher: {runs} run(s) of {messages} messages per source")
        with runtime("emr-api", Path(tmp) / "emr-api") as started:
            startup.append(started.startup_seconds)
            settings = poller_settings(started)
            tracer = Tracer()
            tracer.install(started)
            seen: set[str] = set()
            figures = _series(started, runs, messages, seen=seen, tracer=tracer, label="run")
            for variant in WHAT_IF if what_if_messages else ():
                variants[variant] = what_if_series(
                    started, variant, what_if_messages, seen=seen, tracer=tracer
                )
        paced: dict[str, Any] = {}
        for source in SOURCES:
            # A fresh runtime per source: the records start the moment it says it is ready.
            with runtime("emr-api", Path(tmp) / f"paced-{source}") as started:
                paced[source] = paced_after_ready(
                    started, source, PACED_MESSAGES[mode], token=f"paced-{uuid.uuid4().hex[:8]}"
                )
            found = paced[source]
            print(
                f"paced after ready, {source}: a record every {PACED_SECONDS * 1000:.0f} ms from ready: run created "
                f"p50 {found['run_created_ms']['p50']:.0f} ms, p99 {found['run_created_ms']['p99']:.0f} ms, "
                f"first 15 at most {found['first_15_max_ms']:.0f} ms"
            )
        for mode_name in SPARK_MODES[mode] if spark_messages else ():
            if mode_name == "warm" and not warm_spark_supported():
                continue
            print(f"spark launcher ({mode_name}): {spark_messages} job(s) per source")
            options = {"max_concurrent_runs": 1}
            if warm_spark_supported():
                options["warm_workers"] = 1 if mode_name == "warm" else 0
            with runtime("spark", Path(tmp) / f"spark-{mode_name}", **options) as started:
                startup.append(started.startup_seconds)
                seen = set()
                spark_figures[mode_name] = {}
                for source in SPARK_SOURCES[mode]:
                    samples = run_series(
                        started,
                        source,
                        spark_messages,
                        timeout=TIMEOUT["spark"],
                        seen_runs=seen,
                        warmup=SPARK_WARMUP[mode],
                        spark=True,
                        setting=(lambda seq: warm_driver_ready(started)) if mode_name == "warm" else None,
                    )
                    warm_jobs = sum(ran_warm(started, sample.run_id) for sample in samples)
                    check(
                        warm_jobs == (len(samples) if mode_name == "warm" else 0),
                        f"{mode_name}: {warm_jobs} of {len(samples)} jobs ran on a warm driver",
                    )
                    found = figures_of(samples)
                    spark_figures[mode_name][source] = found
                    print(f"  {source}: first line p50 {found['first_line']['p50']:.0f} ms")

    for mode_name, by_source in spark_figures.items():
        # One series of Spark jobs per mode: its percentiles, each as the median (and min and max) of one run.
        suffix = "" if mode_name == "cold" else f"_{mode_name}"
        for source, found in by_source.items():
            for key in ("first_line", "run_to_first_line", "run_created"):
                name = f"spark_{key}" if key == "run_created" else key
                figures[source][name + suffix] = {q: summarize([v]) for q, v in found[key].items()}
    targets = verdict(figures)
    _print(figures, f"Latency after the send (median of {runs} run(s); Spark: one series)", STAGES)
    _print(figures, "Where the time goes", SEGMENTS)
    if variants:
        _print_what_if(variants)
    print()
    for name, found in targets.items():
        print(
            f"target {name}: p50 {found['seconds']['p50'] * 1000:.0f} ms, "
            f"p99 {found['seconds']['p99'] * 1000:.0f} ms: {'met' if found['met'] else 'MISSED'}"
        )
    notes = [
        "(a) and (b) with the emr-api launcher; (c) with the spark launcher, one job at a time, one series.",
        "stamp: the item's own time (event timestamp, run created_at); readable: first found by reads every "
        f"{POLL_SECONDS * 1000:g} ms.",
        f"{WARMUP} warm-up messages per source before the first series (1 before later ones) left out.",
        "One message at a time: the next after the previous run succeeded, plus up to "
        f"{JITTER_SECONDS * 1000:g} ms of random spacing.",
        "Where the time goes: the pollers' handlers are wrapped to note when they receive each message's record.",
        "(c) warm: the launcher's pool of one warm driver, ready before each message; "
        + ("measured" if "warm" in spark_figures else "not measured: the launcher has no warm drivers"),
        f"load average (1 min) before: {load_before:.2f}; the machine is shared with other work.",
        f"paced after ready: a fresh runtime per source, a record every {PACED_SECONDS * 1000:g} ms from the moment "
        "it reported ready (as `dev up` writes dev.json), none left out.",
    ]
    write_result(
        NAME,
        {
            "sources": figures,
            "targets": targets,
            "what_if": {"variants": dict(WHAT_IF), "figures": variants},
            "settings": settings,
            "startup_seconds": startup,
            "paced_after_ready": paced,
        },
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={
            "runs": runs,
            "messages": messages,
            "spark_messages": spark_messages,
            "what_if_messages": what_if_messages,
            "warmup": WARMUP,
            "poll_seconds": POLL_SECONDS,
        },
        notes=notes,
        started=started_at,
    )
    return 0 if all(found["met"] for found in targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
