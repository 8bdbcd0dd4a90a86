"""Latency of the S3, EventBridge and Kinesis sources on the local runtime: message sent -> event stored -> run.

One message at a time (the next once the previous run has succeeded) to each watcher of
``benchmarks/pipelines/latency_sources`` (a single-asset, ``batch=False`` pipeline per source), through the whole
local runtime with the ``emr-api`` launcher: an object put into moto's S3 (its EventBridge notification, the
watcher's rule, its queue, the SQS poller), an event put on moto's EventBridge (the rule, the queue, the
poller), a record put on moto's Kinesis (the Kinesis poller), and an SQS message as the baseline in the same
runtime. Stamps as in ``benchmarks/latency.py``: the event's ``timestamp`` and the run's ``created_at`` against
the wall clock taken just before the send call; p50/p95/p99 per run, then the median (min, max) over runs.

The local Kinesis poller reads an idle shard every second, as Lambda's Kinesis mappings do (it reads again at
once while records keep coming); SQS and EventBridge-fed queues are long-polled.

Run: ``.venv/bin/python -m benchmarks.latency_sources [--quick] [--runs N] [--messages N]``.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ROOT,
    check,
    parser,
    percentiles,
    print_table,
    progress,
    require_root_cwd,
    runs_of,
    summarize_runs,
    write_result,
)
from benchmarks.latency import JITTER_SECONDS, POLL_SECONDS, Probe, _epoch, function_logs

NAME = "latency_sources"
PIPELINES = ROOT / "benchmarks" / "pipelines" / "latency_sources"
SOURCES = ("sqs", "s3", "eventbridge", "kinesis")
ASSET = {kind: f"x-bench://latency-sources/{kind}" for kind in SOURCES}
PIPELINE = {kind: f"latency_src_{kind}" for kind in SOURCES}
WATCHER = {kind: f"bench-{kind}" for kind in SOURCES}
MESSAGES = {"full": 60, "quick": 5}
WARMUP = 2
TIMEOUT = 30.0


class Sender:
    """Sends one probe to a source as a producer would with boto3; ``matches`` finds its event's extra."""

    def __init__(self, started: Any, kind: str, token: str) -> None:
        self.kind = kind
        self.token = token
        self.client = started.client(
            {"s3": "s3", "eventbridge": "events", "kinesis": "kinesis"}.get(kind, "sqs")
        )
        source = started.catalog.watchers[WATCHER[kind]][0].source
        self.target = {
            "sqs": lambda: started.resources.queues[WATCHER["sqs"]].url,
            "s3": lambda: source.bucket,
            "eventbridge": lambda: "default",
            "kinesis": lambda: started.resources.streams[WATCHER["kinesis"]].stream,
        }[kind]()

    def send(self, seq: int) -> None:
        """Put one probe (returns when the service accepted it)."""
        payload = json.dumps({"bench": self.token, "seq": seq})
        if self.kind == "sqs":
            self.client.send_message(QueueUrl=self.target, MessageBody=payload)
        elif self.kind == "s3":
            self.client.put_object(Bucket=self.target, Key=self.key(seq), Body=payload.encode())
        elif self.kind == "eventbridge":
            entry = {"Source": "assetflow.bench", "DetailType": "Latency Probe", "Detail": payload}
            check(
                self.client.put_events(Entries=[entry])["FailedEntryCount"] == 0,
                "PutEvents refused the probe",
            )
        else:
            self.client.put_record(StreamName=self.target, Data=payload.encode(), PartitionKey=self.token)

    def key(self, seq: int) -> str:
        """The S3 probe's object key."""
        return f"bench/{self.token}/{seq}.csv"

    def matches(self, extra: dict[str, Any], seq: int) -> bool:
        """Whether an event's extra is this probe's."""
        if self.kind == "s3":
            return extra.get("key") == self.key(seq)
        found = extra.get("detail") if self.kind == "eventbridge" else extra.get("payload")
        return found == {"bench": self.token, "seq": seq}


def measure(sender: Sender, probe: Probe, seq: int, seen_runs: set[str]) -> dict[str, float]:
    """Send one probe and follow it to its run's success; its stages in seconds after the send.

    Raises:
        BenchmarkCheckError: the event or the run did not come in time, or the run is not the probe's.
    """
    kind = sender.kind
    sent = time.time()
    sender.send(seq)
    deadline = time.monotonic() + TIMEOUT
    event: dict[str, Any] | None = None
    run: dict[str, Any] | None = None
    event_seen = run_seen = 0.0
    while run is None:
        check(time.monotonic() < deadline, f"{kind} probe {seq}: no run within {TIMEOUT:g} s")
        if event is None:
            found = probe.newest_event(ASSET[kind])
            if found is not None and sender.matches(found.get("extra") or {}, seq):
                event, event_seen = found, time.time()
        if event is not None:
            newest = probe.newest_run(PIPELINE[kind])
            if newest is not None and newest["run_id"] not in seen_runs:
                run, run_seen = newest, time.time()
                continue
        time.sleep(POLL_SECONDS)
    seen_runs.add(run["run_id"])
    full = probe.run(run["run_id"])
    check(
        [e["id"] for e in full["triggering_asset_events"].get(ASSET[kind], [])] == [event["id"]],
        f"{kind} probe {seq}: run {run['run_id']} was triggered by {full['triggering_asset_events']}",
    )
    while probe.run(run["run_id"])["state"] != "success":
        check(time.monotonic() < deadline, f"{kind} run {run['run_id']}: not successful in {TIMEOUT:g} s")
        time.sleep(POLL_SECONDS * 2)
    return {
        "event_stored": _epoch(event["timestamp"]) - sent,
        "event_readable": event_seen - sent,
        "run_created": _epoch(full["created_at"]) - sent,
        "run_readable": run_seen - sent,
    }


@contextmanager
def runtime(work_dir: Path) -> Iterator[Any]:
    """The local runtime on this benchmark's pipelines (``emr-api`` launcher), its functions' logs in a file."""
    require_root_cwd()
    from assetflow_dev.runtime import LocalRuntime, RuntimeOptions

    settings = RuntimeOptions(
        pipelines=str(PIPELINES), work_dir=work_dir, launcher="emr-api", schedules=False
    )
    with function_logs(work_dir / "logs" / "functions.log"), LocalRuntime(settings) as started:
        yield started


def one_run(messages: int, work_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    """A fresh runtime; ``messages`` probes per source (after ``WARMUP``); p50/p95/p99 in ms per stage."""
    figures: dict[str, dict[str, dict[str, float]]] = {}
    with runtime(work_dir) as started:
        probe = Probe(started)
        seen: set[str] = set()
        for kind in SOURCES:
            sender = Sender(started, kind, uuid.uuid4().hex)
            samples = []
            for seq in range(WARMUP + messages):
                sample = measure(sender, probe, seq, seen)
                if seq >= WARMUP:
                    samples.append(sample)
                time.sleep(random.uniform(0, JITTER_SECONDS))
            figures[kind] = {stage: percentiles([s[stage] * 1000 for s in samples]) for stage in samples[0]}
            progress(f"{kind}: run created p50 {figures[kind]['run_created']['p50']:.0f} ms")
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the table, write the JSON."""
    began = time.perf_counter()
    arguments = parser(__doc__ or NAME, default_runs=3, quick_runs=1)
    arguments.add_argument("--messages", type=int, default=None, help="probes per source and run")
    args = arguments.parse_args(argv)
    runs = runs_of(args)
    messages = args.messages or MESSAGES["quick" if args.quick else "full"]
    per_run: list[dict[str, dict[str, dict[str, float]]]] = []
    for n in range(runs):
        progress(f"run {n + 1} of {runs}: {messages} probes per source")
        with tempfile.TemporaryDirectory(prefix="assetflow-latency-sources-") as work:
            per_run.append(one_run(messages, Path(work)))
    results: dict[str, Any] = {"sources": {}}
    rows: list[list[Any]] = []
    stage_of: Callable[[str, str], dict[str, dict[str, float]]] = lambda kind, stage: summarize_runs(  # noqa: E731
        [run[kind][stage] for run in per_run]
    )
    for kind in SOURCES:
        results["sources"][kind] = {stage: stage_of(kind, stage) for stage in per_run[0][kind]}
        figure = results["sources"][kind]
        rows.append(
            [
                kind,
                figure["event_stored"]["p50"]["median"],
                figure["run_created"]["p50"]["median"],
                figure["run_created"]["p95"]["median"],
                figure["run_created"]["p99"]["median"],
            ]
        )
    print_table(
        f"Message -> run on the local runtime (ms after the send; median of {runs} run(s), {messages} probes each)",
        ["source", "event stored p50", "run created p50", "p95", "p99"],
        rows,
    )
    write_result(
        NAME,
        results,
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={"runs": runs, "messages": messages, "warmup": WARMUP, "launcher": "emr-api"},
        notes=[
            "sqs is the baseline in the same runtime; s3 goes S3 -> EventBridge -> rule -> queue -> SQS poller, "
            "eventbridge goes PutEvents -> rule -> queue -> SQS poller, kinesis goes PutRecord -> Kinesis poller",
            "the Kinesis poller reads an idle shard every second, as Lambda's Kinesis mappings do",
        ],
        started=began,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
