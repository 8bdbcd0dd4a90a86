"""``assetflow replay-failures``: every give-up, back to the function that gave up on it, idempotently.

What it reads (locally and, with ``--env``, on AWS: the same APIs, the names from ``.assetflow/dev.json`` or
the stack's outputs):

- the **failures bucket**: a stream or Kafka batch that failed its retries, as Lambda's S3 on-failure
  destination wrote it (the invocation record, its ``payload`` the batch itself). The batch goes back to the
  function named in the record. A record without its payload (an SQS destination's) is read back from the
  table's stream by its sequence numbers while the stream still has them (24 hours).
- the **on-failure queues** of the asynchronously invoked functions (job state, ticks, the sweep): Lambda's
  invocation record (``requestPayload``), or what EventBridge and Scheduler could not deliver (the event, the
  tick's input).
- the watchers' **dead-letter queues**: each message goes back to its watcher's ingest function as an SQS
  record of the watched queue, with its own message id, so that a message stored before it was dead-lettered
  is recognised and not stored twice.

A failure is deleted only once its replay succeeded; one that fails again stays for the next attempt (and its
alarm stays on). Every function is idempotent on the identity of what it handles, so replaying twice, or
replaying what a retry already handled, changes nothing. The runbook is docs/runbook-failures.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

logger = logging.getLogger(__name__)

#: ``invoke(function_name, event)``: the function's response, or its error document when it failed.
Invoke = Callable[[str, dict[str, Any]], tuple[Any, dict[str, Any] | None]]

FAILURE_PREFIX = "aws/lambda/"
_RECEIVE_WAIT_SECONDS = 1
_VISIBILITY_SECONDS = 120


@dataclass(frozen=True)
class FailureSources:
    """Where an environment keeps its give-ups, and the names of the functions to hand them back to.

    ``functions`` maps the runtime's role names (``evaluator``, ``run-state``, ``schedule-tick``,
    ``reconcile``, ``ingest-<watcher>``) to the function names; ``failure_queues`` maps the asynchronously
    invoked roles to their on-failure queue URLs; ``dead_letter_queues`` maps a watcher to its dead-letter queue
    URL and its watched queue's ARN.
    """

    functions: Mapping[str, str]
    failures_bucket: str | None = None
    failure_queues: Mapping[str, str] = field(default_factory=dict)
    dead_letter_queues: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    stream_arn: str | None = None


@dataclass
class Replayed:
    """One failure: where it was, which function it went back to, and what came of it."""

    source: str
    item: str
    function: str | None
    outcome: str  # replayed | failed | skipped | found (dry run)
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The item as JSON."""
        return {
            "source": self.source,
            "item": self.item,
            "function": self.function,
            "outcome": self.outcome,
            "detail": self.detail,
        }


@dataclass
class ReplayReport:
    """What a replay found and did."""

    dry_run: bool
    items: list[Replayed] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        """How many items had ``outcome``."""
        return sum(i.outcome == outcome for i in self.items)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON: counts, then every item."""
        return {
            "dry_run": self.dry_run,
            "found": len(self.items),
            "replayed": self.count("replayed"),
            "failed": self.count("failed"),
            "skipped": self.count("skipped"),
            "items": [i.to_json() for i in self.items],
        }


class FailureReplayer:
    """Reads an environment's failures and hands each one back to its function (see the module docstring)."""

    def __init__(
        self,
        *,
        sources: FailureSources,
        invoke: Invoke,
        s3: Any = None,
        sqs: Any = None,
        streams: Any = None,
        dry_run: bool = False,
    ) -> None:
        self.sources = sources
        self._invoke = invoke
        self._s3 = s3
        self._sqs = sqs
        self._streams = streams
        self.dry_run = dry_run
        self._names = {name: role for role, name in sources.functions.items()}

    def replay(self) -> ReplayReport:
        """Replay everything there is; returns what was found and done."""
        report = ReplayReport(dry_run=self.dry_run)
        if self.sources.failures_bucket and self._s3 is not None:
            for key in self._failure_objects():
                report.items.append(self._replay_object(key))
        if self._sqs is not None:
            for role, url in sorted(self.sources.failure_queues.items()):
                report.items += self._drain(url, f"queue:{role}", self._async_reader(role))
            for watcher, (url, source_arn) in sorted(self.sources.dead_letter_queues.items()):
                reader = self._dead_letter_reader(watcher, source_arn)
                report.items += self._drain(url, f"dead-letters:{watcher}", reader)
        return report

    # ---- the failures bucket ---------------------------------------------------------------------------

    def _failure_objects(self) -> Iterator[str]:
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.sources.failures_bucket, Prefix=FAILURE_PREFIX):
            for item in sorted(page.get("Contents", []), key=lambda o: o["Key"]):
                yield str(item["Key"])

    def _replay_object(self, key: str) -> Replayed:
        source = f"s3://{self.sources.failures_bucket}"
        try:
            body = self._s3.get_object(Bucket=self.sources.failures_bucket, Key=key)["Body"].read()
            record = json.loads(body)
        except (ValueError, KeyError) as exc:
            return Replayed(source, key, None, "skipped", f"not an on-failure record: {exc}")
        function = _function_of(record)
        if function is None:
            return Replayed(
                source, key, None, "skipped", "the record names no function (requestContext.functionArn)"
            )
        try:
            event = self._batch_of(record)
        except _GoneError as exc:
            return Replayed(source, key, function, "skipped", str(exc))
        if self.dry_run:
            return Replayed(source, key, function, "found", _describe_batch(event))
        response, error = self._invoke(function, event)
        problem = _problem(response, error)
        if problem:
            return Replayed(source, key, function, "failed", problem)
        self._s3.delete_object(Bucket=self.sources.failures_bucket, Key=key)
        return Replayed(source, key, function, "replayed", _describe_batch(event))

    def _batch_of(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The failed invocation's event: the record's payload, else read back from the stream."""
        payload = record.get("payload")
        if isinstance(payload, str) and payload:
            payload = json.loads(payload)
        if isinstance(payload, dict) and payload:
            return payload
        info = record.get("DDBStreamBatchInfo")
        if isinstance(info, Mapping):
            return {"Records": self._reread_stream(info)}
        raise _GoneError(
            "the record carries no payload (a queue destination's); its records cannot be read back here"
        )

    def _reread_stream(self, info: Mapping[str, Any]) -> list[dict[str, Any]]:
        if self._streams is None:
            raise _GoneError("no DynamoDB Streams client to read the batch back from the stream")
        stream_arn, shard = str(info.get("streamArn")), str(info.get("shardId"))
        start, end = str(info["startSequenceNumber"]), int(info["endSequenceNumber"])
        try:
            iterator = self._streams.get_shard_iterator(
                StreamArn=stream_arn,
                ShardId=shard,
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=start,
            )["ShardIterator"]
        except Exception as exc:  # TrimmedDataAccessException, ResourceNotFoundException
            raise _GoneError(
                f"the stream no longer has the batch (it keeps records 24 hours): {exc}"
            ) from exc
        records: list[dict[str, Any]] = []
        while iterator:
            page = self._streams.get_records(ShardIterator=iterator)
            for record in page.get("Records", []):
                sequence = int(record["dynamodb"]["SequenceNumber"])
                if sequence > end:
                    return records
                records.append(_lambda_stream_record(record, stream_arn))
            if not page.get("Records"):
                break
            iterator = page.get("NextShardIterator")
        return records

    # ---- queues ------------------------------------------------------------------------------------------

    def _drain(
        self,
        url: str,
        source: str,
        event_of: Callable[[Any, Mapping[str, Any]], tuple[str, dict[str, Any]] | str],
    ) -> list[Replayed]:
        """Replay every message of a queue once; delete those replayed, make the others visible again at the end.

        The ones kept stay hidden until the pass ends, so that each receive brings messages not tried yet.
        """
        done: list[Replayed] = []
        kept: list[Mapping[str, Any]] = []
        try:
            while True:
                messages = self._sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=_RECEIVE_WAIT_SECONDS,
                    VisibilityTimeout=_VISIBILITY_SECONDS,
                    MessageSystemAttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
                if not messages:
                    return done
                for message in messages:
                    replayed = self._replay_message(url, source, message, event_of)
                    done.append(replayed)
                    if replayed.outcome != "replayed":
                        kept.append(message)
        finally:
            for message in kept:
                self._sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )

    def _replay_message(
        self,
        url: str,
        source: str,
        message: Mapping[str, Any],
        event_of: Callable[[Any, Mapping[str, Any]], tuple[str, dict[str, Any]] | str],
    ) -> Replayed:
        item = str(message["MessageId"])
        try:
            body: Any = json.loads(message.get("Body") or "null")
        except ValueError:
            body = message.get("Body")
        found = event_of(body, message)
        if isinstance(found, str):
            return Replayed(source, item, None, "skipped", found)
        function, event = found
        if self.dry_run:
            return Replayed(source, item, function, "found")
        response, error = self._invoke(function, event)
        problem = _problem(response, error)
        if problem:
            return Replayed(source, item, function, "failed", problem)
        self._sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return Replayed(source, item, function, "replayed")

    def _async_reader(
        self, role: str
    ) -> Callable[[Any, Mapping[str, Any]], tuple[str, dict[str, Any]] | str]:
        return lambda body, _message: self._async_event(role, body)

    def _dead_letter_reader(
        self, watcher: str, source_arn: str
    ) -> Callable[[Any, Mapping[str, Any]], tuple[str, dict[str, Any]] | str]:
        return lambda _body, message: self._dead_letter(watcher, source_arn, message)

    def _async_event(self, role: str, body: Any) -> tuple[str, dict[str, Any]] | str:
        """The function and event of an asynchronous invocation's failure, whichever service kept it."""
        if isinstance(body, dict) and "requestPayload" in body:
            function = _function_of(body) or self.sources.functions.get(role)
            payload = body["requestPayload"]
            if function is None or not isinstance(payload, dict):
                return "an invocation record without its function or event"
            return function, payload
        function = self.sources.functions.get(role)
        if function is None:
            return f"no function for {role}"
        if isinstance(body, dict) and ("detail-type" in body or "pipeline" in body or body == {}):
            # What EventBridge (a rule's event) or Scheduler (the target's input) could not deliver at all.
            return function, body
        return "not an invocation record, an EventBridge event or a schedule's input"

    def _dead_letter(
        self, watcher: str, source_arn: str, message: Mapping[str, Any]
    ) -> tuple[str, dict[str, Any]] | str:
        function = self.sources.functions.get(f"ingest-{watcher}")
        if function is None:
            return f"no ingest function for watcher {watcher!r}"
        record = _sqs_record(message, queue_arn=source_arn)
        return function, {"Records": [record]}


class _GoneError(Exception):
    """The failed batch cannot be read back any more."""


def _function_of(record: Mapping[str, Any]) -> str | None:
    """The function named by an on-failure record (``requestContext.functionArn``, version dropped)."""
    context = record.get("requestContext")
    arn = context.get("functionArn") if isinstance(context, Mapping) else None
    if not isinstance(arn, str) or ":function:" not in arn:
        return None
    return arn.split(":function:", 1)[1].split(":", 1)[0]


def _problem(response: Any, error: Mapping[str, Any] | None) -> str:
    """Why an invocation did not succeed: an error, or records it reported as failed ('' when it succeeded)."""
    if error is not None:
        return f"{error.get('errorType', 'error')}: {str(error.get('errorMessage', ''))[:300]}"
    failures = response.get("batchItemFailures") if isinstance(response, Mapping) else None
    if failures:
        return f"{len(failures)} record(s) failed again (first: {failures[0].get('itemIdentifier')})"
    return ""


def _describe_batch(event: Mapping[str, Any]) -> str:
    if "Records" in event:
        return f"{len(event['Records'])} record(s)"
    if "records" in event:
        return f"{sum(len(r) for r in event['records'].values())} Kafka record(s)"
    return ""


def _lambda_stream_record(record: Mapping[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record read with GetRecords, shaped as Lambda delivers it (the creation time in epoch seconds)."""
    dynamodb = dict(record["dynamodb"])
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())
    return {**record, "dynamodb": dynamodb, "eventSourceARN": stream_arn}


def _sqs_record(message: Mapping[str, Any], *, queue_arn: str) -> dict[str, Any]:
    """A dead-lettered message as a record of the watched queue: its message id keeps its identity."""
    from assetflow_dev.pollers import sqs_record

    region = queue_arn.split(":")[3] if queue_arn.count(":") >= 5 else "us-east-1"
    record = sqs_record(message, queue_arn=queue_arn, region=region)
    # Received before it was dead-lettered, whatever its dead-letter queue counts: never a first delivery, so
    # ingest looks for the event it may have stored before (its item's key is the message's own).
    attributes = record["attributes"]
    received = attributes.get("ApproximateReceiveCount")
    attributes["ApproximateReceiveCount"] = str(max(int(received) if str(received).isdigit() else 0, 2))
    return record


def lambda_invoker(client: Any) -> Invoke:
    """Invoke functions through Lambda's API (``RequestResponse``), locally or on AWS."""

    def invoke(function: str, event: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        answer = client.invoke(
            FunctionName=function, InvocationType="RequestResponse", Payload=json.dumps(event).encode()
        )
        raw = answer["Payload"].read()
        document = json.loads(raw) if raw else None
        if answer.get("FunctionError"):
            return None, document if isinstance(document, dict) else {"errorMessage": str(document)}
        return document, None

    return invoke


__all__ = ["FailureReplayer", "FailureSources", "ReplayReport", "Replayed", "lambda_invoker"]
